package apikeys

import (
	"gale/internal/platform/access"

	"context"
	"net/http"
	"time"

	"gale/internal/platform/httpapi"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type listInput struct {
	httpapi.PageQuery
	Status string `query:"status" enum:"active,revoked,expired" doc:"Only keys of this status."`
}

type keyOutput struct{ Body APIKey }

type createdOutput struct{ Body Created }

type createBody struct {
	Name        string     `json:"name" minLength:"1" maxLength:"200"`
	Permissions []string   `json:"permissions" minItems:"1" maxItems:"200" doc:"Grants such as devices:read, devices:* or *:read; each must be held by the caller."`
	ExpiresAt   *time.Time `json:"expiresAt,omitempty" doc:"When the key stops working; must be in the future. Absent means it does not expire."`
}

type createInput struct{ Body createBody }

// updateInput names the path parameter itself: huma does not read parameters from an
// embedded unexported struct.
type updateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body Input
}

// Register adds the /api-keys routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "API keys"

	httpapi.Register(api, httpapi.Route{ID: "list-api-keys", Method: http.MethodGet, Path: "/api-keys", Tag: tag,
		Permission: access.APIKeysRead, Summary: "List API keys",
		Description: "Keys in the caller's scope, newest first; cursor paging, or legacy page and limit. The raw key is never listed."},
		func(ctx context.Context, in *listInput) (*httpapi.ListBody[APIKey], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.List(ctx, ListFilter{Status: in.Status}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-api-key", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: "/api-keys", Tag: tag,
		Permission: access.APIKeysWrite, Status: http.StatusCreated, Summary: "Create an API key",
		Description: "Signed-in users only (not API keys). The key acts as its creator, limited to its permissions, " +
			"which the creator must hold. The raw key is in the answer and shown only this once."},
		func(ctx context.Context, in *createInput) (*createdOutput, error) {
			name := in.Body.Name
			c, err := s.Create(ctx, Input{Name: &name, Permissions: in.Body.Permissions, ExpiresAt: in.Body.ExpiresAt})
			return &createdOutput{c}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-api-key", Method: http.MethodGet, Path: "/api-keys/{id}", Tag: tag,
		Permission: access.APIKeysRead, Summary: "Get an API key"},
		func(ctx context.Context, in *idPath) (*keyOutput, error) {
			k, err := s.Get(ctx, in.ID)
			return &keyOutput{k}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-api-key", MFA: true, ChangesAccess: true, Method: http.MethodPatch, Path: "/api-keys/{id}", Tag: tag,
		Permission: access.APIKeysWrite, Summary: "Change an API key",
		Description: "New permissions must be held by the caller. A revoked key cannot be changed (409)."},
		func(ctx context.Context, in *updateInput) (*keyOutput, error) {
			k, err := s.Update(ctx, in.ID, in.Body)
			return &keyOutput{k}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "revoke-api-key", MFA: true, ChangesAccess: true, Method: http.MethodDelete, Path: "/api-keys/{id}", Tag: tag,
		Permission: access.APIKeysDelete, Status: http.StatusNoContent, Summary: "Revoke an API key",
		Description: "The key stops working at once. Revoking a revoked key is 409."},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.Revoke(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "rotate-api-key", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: "/api-keys/{id}/rotate", Tag: tag,
		Permission: access.APIKeysWrite, Summary: "Rotate an API key",
		Description: "Issues a new raw key (shown only this once); the old one stops working at once. " +
			"The caller must reach the key's tenancy and hold its permissions. A revoked key is 409."},
		func(ctx context.Context, in *idPath) (*createdOutput, error) {
			c, err := s.Rotate(ctx, in.ID)
			return &createdOutput{c}, err
		})
}
