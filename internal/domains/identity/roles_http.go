package identity

import (
	"context"
	"net/http"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type roleOutput struct{ Body Role }

type listRolesInput struct {
	httpapi.PageQuery
	Scope  string `query:"scope" enum:"system,partner,organization"`
	Search string `query:"search" maxLength:"200" doc:"Matches the name."`
}

type createRoleInput struct{ Body NewRole }

type updateRoleInput struct {
	ID   string `path:"id" format:"uuid"`
	Body RoleInput
}

type cloneRoleInput struct {
	ID   string      `path:"id" format:"uuid"`
	Body *CloneInput `required:"false"`
}

type listRoleUsersInput struct {
	ID string `path:"id" format:"uuid"`
	httpapi.PageQuery
}

type effectivePermissionsOutput struct {
	Body struct {
		RoleID      string   `json:"roleId" format:"uuid"`
		Permissions []string `json:"permissions" doc:"Every catalog permission the role's grants amount to, wildcards expanded."`
	}
}

type availablePermissionsOutput struct {
	Body struct {
		Data []access.Permission `json:"data"`
	}
}

func (s *Service) registerRoles(api *httpapi.Server) {
	const tag = "Roles"

	httpapi.Register(api, httpapi.Route{ID: "list-roles", Method: http.MethodGet, Path: "/roles", Tag: tag,
		Permission: access.RolesRead, Summary: "List roles",
		Description: "Built-in roles of the caller's level and below, and the custom roles of the caller's tenant, by name, each with userCount (users in the caller's scope holding it)."},
		func(ctx context.Context, in *listRolesInput) (*httpapi.ListBody[Role], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListRoles(ctx, RoleListFilter{Scope: in.Scope, Search: in.Search}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "list-available-permissions", Method: http.MethodGet, Path: "/roles/permissions/available", Tag: tag,
		Permission: access.RolesRead, Summary: "The permission catalog",
		Description: "Every permission a role can grant. partnerOnly permissions cannot be part of an organization role."},
		func(ctx context.Context, _ *struct{}) (*availablePermissionsOutput, error) {
			out := &availablePermissionsOutput{}
			out.Body.Data = access.Catalog()
			return out, nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-role", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: "/roles", Tag: tag,
		Permission: access.RolesWrite, Status: http.StatusCreated, Summary: "Create a custom role",
		Description: "The role belongs to the caller's tenant: a partner's roles (scope partner or organization) serve its organizations too; an organization's roles are organization-scope. System callers name partnerId. " +
			"Every grant must be in the catalog; *:* is refused; organization roles cannot hold partnerOnly permissions; the caller must hold every permission it grants (403 otherwise). A taken name is 409."},
		func(ctx context.Context, in *createRoleInput) (*roleOutput, error) {
			r, err := s.CreateRole(ctx, in.Body)
			return &roleOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-role", Method: http.MethodGet, Path: "/roles/{id}", Tag: tag,
		Permission: access.RolesRead, Summary: "Get a role"},
		func(ctx context.Context, in *idPath) (*roleOutput, error) {
			r, err := s.GetRole(ctx, in.ID)
			return &roleOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-role", MFA: true, ChangesAccess: true, Method: http.MethodPatch, Path: "/roles/{id}", Tag: tag,
		Permission: access.RolesWrite, Summary: "Change a custom role",
		Description: "Built-in roles are refused (403). New permissions pass the same checks as on create; holders get them at their next request."},
		func(ctx context.Context, in *updateRoleInput) (*roleOutput, error) {
			r, err := s.UpdateRole(ctx, in.ID, in.Body)
			return &roleOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-role", MFA: true, ChangesAccess: true, Method: http.MethodDelete, Path: "/roles/{id}", Tag: tag,
		Permission: access.RolesDelete, Status: http.StatusNoContent, Summary: "Delete a custom role",
		Description: "Built-in roles are refused (403); a role users still hold is 409."},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.DeleteRole(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "clone-role", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: "/roles/{id}/clone", Tag: tag,
		Permission: access.RolesWrite, Status: http.StatusCreated, Summary: "Copy a role",
		Description: "Makes a custom copy of a visible role in the caller's tenant (system callers name partnerId). A *:* grant is copied as the catalog permissions it amounts to."},
		func(ctx context.Context, in *cloneRoleInput) (*roleOutput, error) {
			var body CloneInput
			if in.Body != nil {
				body = *in.Body
			}
			r, err := s.CloneRole(ctx, in.ID, body)
			return &roleOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-role-users", Method: http.MethodGet, Path: "/roles/{id}/users", Tag: tag,
		Permission: access.RolesRead, Summary: "Users holding a role", Description: "Users in the caller's scope, by email. Also requires users:read."},
		func(ctx context.Context, in *listRoleUsersInput) (*httpapi.ListBody[User], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.RoleUsers(ctx, in.ID, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "get-role-effective-permissions", Method: http.MethodGet, Path: "/roles/{id}/effective-permissions", Tag: tag,
		Permission: access.RolesRead, Summary: "What a role amounts to"},
		func(ctx context.Context, in *idPath) (*effectivePermissionsOutput, error) {
			r, perms, err := s.EffectivePermissions(ctx, in.ID)
			out := &effectivePermissionsOutput{}
			out.Body.RoleID, out.Body.Permissions = r.ID, perms
			return out, err
		})
}
