package webhooks

import (
	"gale/internal/platform/access"

	"context"
	"net/http"

	"gale/internal/platform/httpapi"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type webhookOutput struct{ Body Webhook }

type deliveryOutput struct{ Body Delivery }

type createInput struct{ Body NewWebhook }

type updateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body WebhookUpdate
}

type listInput struct {
	httpapi.PageQuery
	OrgID string `query:"orgId" format:"uuid" doc:"Only the subscriptions of this organization."`
}

type deliveriesInput struct {
	httpapi.PageQuery
	ID     string `path:"id" format:"uuid"`
	Status string `query:"status" enum:"pending,sending,retrying,succeeded,dead"`
}

type retryInput struct {
	ID         string `path:"id" format:"uuid"`
	DeliveryID string `path:"deliveryId" format:"uuid"`
}

// Register adds the /webhooks routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Webhooks"
	httpapi.Register(api, httpapi.Route{ID: "list-webhooks", Method: http.MethodGet, Path: "/webhooks", Tag: tag,
		Permission: access.WebhooksRead, Summary: "List webhook subscriptions",
		Description: "Subscriptions in scope, newest first. Partner-wide subscriptions are listed only to callers reaching the whole partner."},
		func(ctx context.Context, in *listInput) (*httpapi.ListBody[Webhook], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.List(ctx, in.OrgID, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-webhook", Method: http.MethodPost, Path: "/webhooks", Tag: tag,
		Permission: access.WebhooksWrite, Status: http.StatusCreated, Summary: "Create a webhook subscription",
		Description: "Returns the signing secret (whsec_...) this once. Without orgId the subscription is partner-wide: it receives " +
			"every organization's events. Private, loopback and link-local targets are refused (400) unless WEBHOOK_ALLOW_PRIVATE_TARGETS is set."},
		func(ctx context.Context, in *createInput) (*webhookOutput, error) {
			w, err := s.Create(ctx, in.Body)
			return &webhookOutput{w}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-webhook", Method: http.MethodGet, Path: "/webhooks/{id}", Tag: tag,
		Permission: access.WebhooksRead, Summary: "Get a webhook subscription", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *idPath) (*webhookOutput, error) {
			w, err := s.Get(ctx, in.ID)
			return &webhookOutput{w}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-webhook", Method: http.MethodPatch, Path: "/webhooks/{id}", Tag: tag,
		Permission: access.WebhooksWrite, Summary: "Change a webhook subscription", Errors: []int{http.StatusNotFound},
		Description: "Absent fields stay; headers, when given, replace all extra headers."},
		func(ctx context.Context, in *updateInput) (*webhookOutput, error) {
			w, err := s.Update(ctx, in.ID, in.Body)
			return &webhookOutput{w}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-webhook", Method: http.MethodDelete, Path: "/webhooks/{id}", Tag: tag,
		Permission: access.WebhooksWrite, Status: http.StatusNoContent, Summary: "Delete a webhook subscription",
		Description: "Removes its delivery log too.", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.Delete(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "rotate-webhook-secret", Method: http.MethodPost, Path: "/webhooks/{id}/rotate-secret", Tag: tag,
		Permission: access.WebhooksWrite, Summary: "Replace a webhook's signing secret",
		Description: "Returns the new secret this once; every delivery from now on is signed with it.", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *idPath) (*webhookOutput, error) {
			w, err := s.RotateSecret(ctx, in.ID)
			return &webhookOutput{w}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-webhook-deliveries", Method: http.MethodGet, Path: "/webhooks/{id}/deliveries", Tag: tag,
		Permission: access.WebhooksRead, Summary: "A webhook's delivery log",
		Description: "Deliveries newest first, each with its attempts (status code, first 1000 characters of the answer, duration, error).",
		Errors:      []int{http.StatusNotFound}},
		func(ctx context.Context, in *deliveriesInput) (*httpapi.ListBody[Delivery], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.Deliveries(ctx, in.ID, in.Status, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "test-webhook", Method: http.MethodPost, Path: "/webhooks/{id}/test", Tag: tag,
		Permission: access.WebhooksWrite, Summary: "Send a test event",
		Description: "Sends a webhook.test event now (also to a disabled subscription) and returns the delivery after its one attempt.",
		Errors:      []int{http.StatusNotFound}},
		func(ctx context.Context, in *idPath) (*deliveryOutput, error) {
			d, err := s.Test(ctx, in.ID)
			return &deliveryOutput{d}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "retry-webhook-delivery", Method: http.MethodPost, Path: "/webhooks/{id}/retry/{deliveryId}",
		Tag: tag, Permission: access.WebhooksWrite, Summary: "Retry a delivery",
		Description: "Re-queues a dead or retrying delivery for an attempt now, with 5 more attempts. Any other status: 409.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *retryInput) (*deliveryOutput, error) {
			d, err := s.Retry(ctx, in.ID, in.DeliveryID)
			return &deliveryOutput{d}, err
		})
}
