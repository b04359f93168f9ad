package enrollment

import (
	"gale/internal/platform/access"

	"context"
	"net/http"

	"gale/internal/platform/httpapi"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type listInput struct {
	httpapi.PageQuery
	OrgID  string `query:"orgId" format:"uuid"`
	SiteID string `query:"siteId" format:"uuid"`
	Status string `query:"status" enum:"active,expired,revoked,used_up"`
}

type keyOutput struct{ Body EnrollmentKey }

type createdOutput struct{ Body IssuedKey }

type createInput struct{ Body NewEnrollmentKey }

// Register adds the /enrollment-keys routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Enrollment keys and agents"

	httpapi.Register(api, httpapi.Route{ID: "list-enrollment-keys", Method: http.MethodGet, Path: "/enrollment-keys", Tag: tag,
		Permission: access.EnrollmentKeysRead, Summary: "List enrollment keys",
		Description: "Keys of organizations in scope, newest first; cursor paging, or legacy page and limit. Raw keys and secrets are never listed."},
		func(ctx context.Context, in *listInput) (*httpapi.ListBody[EnrollmentKey], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.List(ctx, ListFilter{OrgID: in.OrgID, SiteID: in.SiteID, Status: in.Status}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-enrollment-key", Method: http.MethodPost, Path: "/enrollment-keys", Tag: tag,
		Permission: access.EnrollmentKeysWrite, Status: http.StatusCreated, Summary: "Create an enrollment key",
		Description: "The raw key (and enrollmentSecret, when issued) is in the answer and shown only this once. " +
			"Without ttlMinutes or expiresAt the key lives ENROLLMENT_KEY_DEFAULT_TTL_MINUTES (default 60), shortened to the " +
			"organization's maxEnrollmentKeyTtlMinutes; an explicit lifetime above that cap is 400."},
		func(ctx context.Context, in *createInput) (*createdOutput, error) {
			c, err := s.Create(ctx, in.Body, Policy{Source: SourceAPI, DefaultTTL: s.defaultTTL})
			return &createdOutput{c}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-enrollment-key", Method: http.MethodGet, Path: "/enrollment-keys/{id}", Tag: tag,
		Permission: access.EnrollmentKeysRead, Summary: "Get an enrollment key"},
		func(ctx context.Context, in *idPath) (*keyOutput, error) {
			k, err := s.Get(ctx, in.ID)
			return &keyOutput{k}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "revoke-enrollment-key", Method: http.MethodDelete, Path: "/enrollment-keys/{id}", Tag: tag,
		Permission: access.EnrollmentKeysDelete, Status: http.StatusNoContent, Summary: "Revoke an enrollment key",
		Description: "The key stops working at once. Revoking a revoked key is a no-op (204)."},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.Revoke(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "rotate-enrollment-key", Method: http.MethodPost, Path: "/enrollment-keys/{id}/rotate", Tag: tag,
		Permission: access.EnrollmentKeysWrite, Summary: "Rotate an enrollment key",
		Description: "Issues a new raw key (and a new enrollmentSecret if the key has one), shown only this once, and resets " +
			"usageCount to 0; the old key stops working at once. The expiry is unchanged. A revoked or expired key is 409."},
		func(ctx context.Context, in *idPath) (*createdOutput, error) {
			c, err := s.rotate(ctx, in.ID)
			return &createdOutput{c}, err
		})
}
