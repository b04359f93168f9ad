package identity

import (
	"gale/internal/platform/access"

	"context"
	"net/http"

	"gale/internal/platform/httpapi"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type meOutput struct{ Body Me }

type updateMeInput struct {
	Body struct {
		Name *string `json:"name,omitempty" minLength:"1" maxLength:"200"`
	}
}

type userOutput struct{ Body User }

type listUsersInput struct {
	httpapi.PageQuery
	Search string `query:"search" maxLength:"200" doc:"Matches email or name."`
	Status string `query:"status" enum:"invited,active,disabled"`
	RoleID string `query:"roleId" format:"uuid"`
	OrgID  string `query:"orgId" format:"uuid"`
}

type rolesOutput struct {
	Body struct {
		Data []Role `json:"data"`
	}
}

type inviteInput struct{ Body InviteInput }

type inviteOutput struct{ Body InviteResult }

type resendInput struct {
	Body struct {
		UserID string `json:"userId" format:"uuid"`
	}
}

type updateUserInput struct {
	ID   string `path:"id" format:"uuid"`
	Body UserUpdate
}

type assignRoleInput struct {
	ID   string `path:"id" format:"uuid"`
	Body struct {
		RoleID string `json:"roleId" format:"uuid"`
	}
}

// Register adds the /users, /roles and /access-reviews routes.
func (s *Service) Register(api *httpapi.Server) {
	s.registerUsers(api)
	s.registerRoles(api)
	s.registerReviews(api)
}

func (s *Service) registerUsers(api *httpapi.Server) {
	const tag = "Users"

	httpapi.Register(api, httpapi.Route{ID: "get-me", Method: http.MethodGet, Path: "/users/me", Tag: tag,
		Summary: "The caller's profile", Description: "The signed-in user with every permission its role amounts to. API keys get 403."},
		func(ctx context.Context, _ *struct{}) (*meOutput, error) {
			me, err := s.GetMe(ctx)
			return &meOutput{me}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-me", ChangesAccess: true, Method: http.MethodPatch, Path: "/users/me", Tag: tag,
		Summary: "Change the caller's profile", Description: "Only the name can change here. API keys get 403."},
		func(ctx context.Context, in *updateMeInput) (*meOutput, error) {
			me, err := s.UpdateMe(ctx, in.Body.Name)
			return &meOutput{me}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-users", Method: http.MethodGet, Path: "/users", Tag: tag,
		Permission: access.UsersRead, Summary: "List users",
		Description: "Users in the caller's scope, by email: system sees all; a partner its partner users and the users of the organizations it reaches; an organization its own. Cursor paging, or legacy page and limit (with total)."},
		func(ctx context.Context, in *listUsersInput) (*httpapi.ListBody[User], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListUsers(ctx, UserListFilter{Search: in.Search, Status: in.Status, RoleID: in.RoleID, OrgID: in.OrgID}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "list-assignable-roles", Method: http.MethodGet, Path: "/users/roles", Tag: tag,
		Permission: access.UsersRead, Summary: "Roles the caller may assign",
		Description: "Roles visible to the caller whose permissions the caller holds itself; a role's scope is the level of the users who can hold it."},
		func(ctx context.Context, _ *struct{}) (*rolesOutput, error) {
			roles, err := s.AssignableRoles(ctx)
			out := &rolesOutput{}
			out.Body.Data = roles
			return out, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-user", Method: http.MethodGet, Path: "/users/{id}", Tag: tag,
		Permission: access.UsersRead, Summary: "Get a user", Description: "A user outside the caller's scope is 404, like a missing one."},
		func(ctx context.Context, in *idPath) (*userOutput, error) {
			u, err := s.GetUser(ctx, in.ID)
			return &userOutput{u}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "invite-user", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: "/users/invite", Tag: tag,
		Permission: access.UsersInvite, Status: http.StatusCreated, Summary: "Invite a user",
		Description: "Creates a user in status invited. The role's scope decides the user's level: partner roles make partner users (system callers name partnerId), organization roles make users of orgId (organization callers: their own). " +
			"The role must be one the caller may assign. With SMTP configured the link is mailed (emailSent true); otherwise the answer carries inviteUrl for the operator to pass on. The link works once, until INVITE_TTL_HOURS pass, with POST /auth/accept-invite. A taken email is 409."},
		func(ctx context.Context, in *inviteInput) (*inviteOutput, error) {
			res, err := s.InviteUser(ctx, in.Body)
			return &inviteOutput{res}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "resend-invite", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: "/users/resend-invite", Tag: tag,
		Permission: access.UsersInvite, Summary: "Invite a user again",
		Description: "Only for users still invited (409 otherwise): earlier links stop working and a new one is issued, delivered as on invite."},
		func(ctx context.Context, in *resendInput) (*inviteOutput, error) {
			res, err := s.ResendInvite(ctx, in.Body.UserID)
			return &inviteOutput{res}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-user", MFA: true, ChangesAccess: true, Method: http.MethodPatch, Path: "/users/{id}", Tag: tag,
		Permission: access.UsersWrite, Summary: "Change a user",
		Description: "status disabled ends every session of the user at once; a caller cannot disable itself (403 FORBIDDEN). " +
			"orgAccess and orgIds apply to partner users. The caller must hold every permission of the user's role (403 otherwise)."},
		func(ctx context.Context, in *updateUserInput) (*userOutput, error) {
			u, err := s.UpdateUser(ctx, in.ID, in.Body)
			return &userOutput{u}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-user", MFA: true, ChangesAccess: true, Method: http.MethodDelete, Path: "/users/{id}", Tag: tag,
		Permission: access.UsersDelete, Status: http.StatusNoContent, Summary: "Delete a user",
		Description: "Deletes the user and revokes the API keys it created. A caller cannot delete itself (403 FORBIDDEN)."},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.DeleteUser(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "assign-user-role", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: "/users/{id}/role", Tag: tag,
		Permission: access.UsersWrite, Summary: "Give a user another role",
		Description: "The role's scope must be the user's level, and the caller must hold every permission of both the old and the new role."},
		func(ctx context.Context, in *assignRoleInput) (*userOutput, error) {
			u, err := s.AssignRole(ctx, in.ID, in.Body.RoleID)
			return &userOutput{u}, err
		})
}
