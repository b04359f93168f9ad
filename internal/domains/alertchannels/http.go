package alertchannels

import (
	"gale/internal/platform/access"

	"context"
	"net/http"

	"gale/internal/platform/httpapi"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type channelOutput struct{ Body NotificationChannel }

type policyOutput struct{ Body AlertPolicy }

type deliveryOutput struct{ Body NotificationDelivery }

type createChannelInput struct{ Body NewChannel }

type updateChannelInput struct {
	ID   string `path:"id" format:"uuid"`
	Body ChannelUpdate
}

type createPolicyInput struct{ Body NewAlertPolicy }

type updatePolicyInput struct {
	ID   string `path:"id" format:"uuid"`
	Body AlertPolicyUpdate
}

type listChannelsInput struct {
	httpapi.PageQuery
	OrgID string `query:"orgId" format:"uuid"`
	Type  string `query:"type" enum:"email,slack,teams,webhook,pagerduty,sms"`
}

type listPoliciesInput struct {
	httpapi.PageQuery
}

type deliveriesInput struct {
	httpapi.PageQuery
	ID     string `path:"id" format:"uuid"`
	Status string `query:"status" enum:"pending,sending,retrying,succeeded,dead,throttled"`
}

// Register adds the /alerts/channels and /alerts/policies routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Alert notifications"
	httpapi.Register(api, httpapi.Route{ID: "list-alert-channels", Method: http.MethodGet, Path: "/alerts/channels", Tag: tag,
		Permission: access.AlertsRead, Summary: "List notification channels", Description: "Channels in scope, newest first; secrets masked."},
		func(ctx context.Context, in *listChannelsInput) (*httpapi.ListBody[NotificationChannel], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListChannels(ctx, in.OrgID, in.Type, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-alert-channel", Method: http.MethodPost, Path: "/alerts/channels", Tag: tag,
		Permission: access.AlertsWrite, Status: http.StatusCreated, Summary: "Create a notification channel",
		Description: "Without orgId the channel is partner-wide. Secrets are stored encrypted and answered masked. URLs reaching " +
			"private, loopback or link-local addresses are refused unless WEBHOOK_ALLOW_PRIVATE_TARGETS is set."},
		func(ctx context.Context, in *createChannelInput) (*channelOutput, error) {
			c, err := s.CreateChannel(ctx, in.Body)
			return &channelOutput{c}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-alert-channel", Method: http.MethodGet, Path: "/alerts/channels/{id}", Tag: tag,
		Permission: access.AlertsRead, Summary: "Get a notification channel", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *idPath) (*channelOutput, error) {
			c, err := s.GetChannel(ctx, in.ID)
			return &channelOutput{c}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-alert-channel", Method: http.MethodPatch, Path: "/alerts/channels/{id}", Tag: tag,
		Permission: access.AlertsWrite, Summary: "Change a notification channel", Errors: []int{http.StatusNotFound},
		Description: "config replaces the configuration; secrets left out or sent back masked keep their stored value. The type cannot change."},
		func(ctx context.Context, in *updateChannelInput) (*channelOutput, error) {
			c, err := s.UpdateChannel(ctx, in.ID, in.Body)
			return &channelOutput{c}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-alert-channel", Method: http.MethodDelete, Path: "/alerts/channels/{id}", Tag: tag,
		Permission: access.AlertsWrite, Status: http.StatusNoContent, Summary: "Delete a notification channel", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.DeleteChannel(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "test-alert-channel", Method: http.MethodPost, Path: "/alerts/channels/{id}/test", Tag: tag,
		Permission: access.AlertsWrite, Summary: "Send a test notification", Errors: []int{http.StatusNotFound},
		Description: "Sends a test notification now (also through a disabled channel) and returns the delivery after its one attempt."},
		func(ctx context.Context, in *idPath) (*deliveryOutput, error) {
			d, err := s.Test(ctx, in.ID)
			return &deliveryOutput{d}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-alert-channel-deliveries", Method: http.MethodGet, Path: "/alerts/channels/{id}/deliveries",
		Tag: tag, Permission: access.AlertsRead, Summary: "A channel's delivery log", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *deliveriesInput) (*httpapi.ListBody[NotificationDelivery], error) {
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
	httpapi.Register(api, httpapi.Route{ID: "list-alert-policies", Method: http.MethodGet, Path: "/alerts/policies", Tag: tag,
		Permission: access.AlertsRead, Summary: "List alert routing and escalation policies"},
		func(ctx context.Context, in *listPoliciesInput) (*httpapi.ListBody[AlertPolicy], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListPolicies(ctx, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-alert-policy", Method: http.MethodPost, Path: "/alerts/policies", Tag: tag,
		Permission: access.AlertsWrite, Status: http.StatusCreated, Summary: "Create an alert policy",
		Description: "An alert whose rule names no channels goes to the first enabled matching policy by priority (lower first): " +
			"step 0 at once, later steps after delayMinutes while the alert is still active."},
		func(ctx context.Context, in *createPolicyInput) (*policyOutput, error) {
			p, err := s.CreatePolicy(ctx, in.Body)
			return &policyOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-alert-policy", Method: http.MethodGet, Path: "/alerts/policies/{id}", Tag: tag,
		Permission: access.AlertsRead, Summary: "Get an alert policy", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *idPath) (*policyOutput, error) {
			p, err := s.GetPolicy(ctx, in.ID)
			return &policyOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-alert-policy", Method: http.MethodPatch, Path: "/alerts/policies/{id}", Tag: tag,
		Permission: access.AlertsWrite, Summary: "Change an alert policy", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *updatePolicyInput) (*policyOutput, error) {
			p, err := s.UpdatePolicy(ctx, in.ID, in.Body)
			return &policyOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-alert-policy", Method: http.MethodDelete, Path: "/alerts/policies/{id}", Tag: tag,
		Permission: access.AlertsWrite, Status: http.StatusNoContent, Summary: "Delete an alert policy",
		Description: "Pending escalation steps of the policy are cancelled.", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.DeletePolicy(ctx, in.ID)
		})
}
