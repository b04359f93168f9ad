package console

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"gale/internal/domains/identity"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
)

// usersPageSize is the users page's size.
const usersPageSize = 100

// usersPage lists the users in scope with their role, whether they use two-step
// verification, and when they last signed in, and the invitations not accepted yet.
type usersPage struct {
	Users        []identity.User
	Invited      []identity.User
	Search, Next string
	CanInvite    bool
}

func (c *Console) users(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "list-users"); err != nil {
		return err
	}
	in := r.URL.Query()
	pg := usersPage{Search: strings.TrimSpace(in.Get("q")), CanInvite: c.HTTP.Permits(ctx, "invite-user")}
	if utf8.RuneCountInString(pg.Search) > 200 {
		return apperr.Invalid("q", "search for at most 200 characters")
	}
	list, next, _, err := c.Identity.ListUsers(ctx, identity.UserListFilter{Search: pg.Search, OrgID: c.currentOrg(r)},
		store.Page{Limit: usersPageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	pg.Users = list
	pg.Next = nextPage(r, next)
	if pg.Search == "" && in.Get("cursor") == "" {
		if pg.Invited, _, _, err = c.Identity.ListUsers(ctx, identity.UserListFilter{Status: identity.StatusInvited, OrgID: c.currentOrg(r)},
			store.Page{Limit: usersPageSize}); err != nil {
			return err
		}
	}
	return c.render(w, r, http.StatusOK, "users", "", view{Title: "Users", Section: "users", Data: pg})
}

// userPage is one user: who they are, and what the signed-in user may change of them.
type userPage struct {
	User identity.User
	// Roles are those the signed-in user may give this user (of the user's level).
	Roles []identity.Role
	Self  bool
	// CanRole, CanStatus, CanDelete and CanResend offer the actions the API would allow.
	CanRole, CanStatus, CanDelete, CanResend bool
	Done                                     string
}

func (c *Console) userDetail(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "get-user"); err != nil {
		return err
	}
	u, err := c.Identity.GetUser(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	self := access.PrincipalFrom(ctx).UserID == u.ID
	pg := userPage{User: u, Self: self, CanRole: c.HTTP.Permits(ctx, "assign-user-role"),
		CanStatus: !self && u.Status != identity.StatusInvited && c.HTTP.Permits(ctx, "update-user"),
		CanDelete: !self && c.HTTP.Permits(ctx, "delete-user"),
		CanResend: u.Status == identity.StatusInvited && c.HTTP.Permits(ctx, "resend-invite"),
		Done:      r.URL.Query().Get("done")}
	if pg.CanRole && c.HTTP.Permits(ctx, "list-assignable-roles") {
		roles, err := c.Identity.AssignableRoles(ctx)
		if err != nil {
			return err
		}
		// Offered: the roles of the user's level that may be held where the user is (a
		// custom role belongs to one partner, or to one organization).
		for _, role := range roles {
			if role.Scope != u.Scope || (role.PartnerID != nil && *role.PartnerID != store.Deref(u.PartnerID)) ||
				(role.OrgID != nil && *role.OrgID != store.Deref(u.OrgID)) {
				continue
			}
			pg.Roles = append(pg.Roles, role)
		}
	}
	return c.render(w, r, http.StatusOK, "user", "", view{Title: u.Email, Section: "users", Data: pg})
}

// assignRole gives a user another role, as POST /users/{id}/role does.
func (c *Console) assignRole(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "assign-user-role"); err != nil {
		return err
	}
	roleID := r.PostFormValue("roleId")
	if !store.ValidID(roleID) {
		return apperr.Invalid("roleId", "choose a role")
	}
	u, err := c.Identity.AssignRole(ctx, r.PathValue("id"), roleID)
	if err != nil {
		return err
	}
	c.HTTP.Succeeded(ctx, "assign-user-role")
	http.Redirect(w, r, "/users/"+u.ID+"?done=role", http.StatusSeeOther)
	return nil
}

// setUserStatus disables or enables a user, as PATCH /users/{id} with status does; the
// service refuses to disable the signed-in user's own account.
func (c *Console) setUserStatus(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "update-user"); err != nil {
		return err
	}
	status := r.PostFormValue("status")
	if status != identity.StatusActive && status != identity.StatusDisabled {
		return apperr.Invalid("status", "active or disabled")
	}
	u, err := c.Identity.UpdateUser(ctx, r.PathValue("id"), identity.UserUpdate{Status: &status})
	if err != nil {
		return err
	}
	c.HTTP.Succeeded(ctx, "update-user")
	afterChange(w, r, "/users/"+u.ID+"?done="+status)
	return nil
}

func (c *Console) deleteUser(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "delete-user"); err != nil {
		return err
	}
	if err := c.Identity.DeleteUser(ctx, r.PathValue("id")); err != nil {
		return err
	}
	c.HTTP.Succeeded(ctx, "delete-user")
	afterChange(w, r, "/users")
	return nil
}

// inviteForm is the invitation form: the roles the signed-in user may give, and where the
// new user may belong; after the invitation, how its link travels.
type inviteForm struct {
	In       identity.InviteInput
	Roles    []identity.Role
	Partners []tenancy.Partner
	// PartnerLevel offers the organization access of partner users.
	PartnerLevel bool
	Error        *apperr.Error
	Result       *identity.InviteResult
}

// HasOrg tells whether the form ticked an organization of a partner user's access.
func (f inviteForm) HasOrg(id string) bool {
	for _, o := range f.In.OrgIDs {
		if o == id {
			return true
		}
	}
	return false
}

func (c *Console) inviteForm(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "invite-user"); err != nil {
		return err
	}
	return c.inviteEditor(w, r, http.StatusOK, inviteForm{In: identity.InviteInput{OrgID: c.currentOrg(r), OrgAccess: identity.OrgAccessAll}})
}

func (c *Console) inviteEditor(w http.ResponseWriter, r *http.Request, status int, f inviteForm) error {
	ctx := r.Context()
	var err error
	if c.HTTP.Permits(ctx, "list-assignable-roles") {
		if f.Roles, err = c.Identity.AssignableRoles(ctx); err != nil {
			return err
		}
	}
	if f.Partners, err = c.partnerChoices(ctx); err != nil {
		return err
	}
	f.PartnerLevel = access.ScopeFrom(ctx).Level != access.LevelOrganization
	return c.render(w, r, status, "user-invite", "", view{Title: "Invite a user", Section: "users", Data: f})
}

// inviteUser invites a user as POST /users/invite does; without mail configured the page
// shows the link to pass on.
func (c *Console) inviteUser(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "invite-user"); err != nil {
		return err
	}
	form := r.PostForm
	in := identity.InviteInput{Email: strings.TrimSpace(form.Get("email")), Name: strings.TrimSpace(form.Get("name")),
		RoleID: form.Get("roleId"), PartnerID: form.Get("partnerId"), OrgID: form.Get("orgId"), OrgAccess: form.Get("orgAccess")}
	if in.OrgAccess == identity.OrgAccessSelected {
		in.OrgIDs = form["orgIds"]
	}
	res, err := func() (identity.InviteResult, error) {
		if !store.ValidID(in.RoleID) {
			return identity.InviteResult{}, apperr.Invalid("roleId", "choose the role of the new user")
		}
		// The form sends every field; the role's level decides which apply, as the API
		// documents: an organization for organization roles, a partner and organization
		// access for partner roles. A role not offered goes to the service as it is.
		roles, err := c.Identity.AssignableRoles(ctx)
		if err != nil {
			return identity.InviteResult{}, err
		}
		for _, role := range roles {
			if role.ID != in.RoleID {
				continue
			}
			switch role.Scope {
			case access.LevelPartner:
				in.OrgID = ""
			case access.LevelOrganization:
				in.PartnerID, in.OrgAccess, in.OrgIDs = "", "", nil
			default:
				in.PartnerID, in.OrgID, in.OrgAccess, in.OrgIDs = "", "", "", nil
			}
		}
		return c.Identity.InviteUser(ctx, in)
	}()
	if err != nil {
		ae := formRefusal(err)
		if ae == nil {
			return err
		}
		return c.inviteEditor(w, r, httpapi.StatusOf(ae), inviteForm{In: in, Error: ae})
	}
	c.HTTP.Succeeded(ctx, "invite-user")
	return c.render(w, r, http.StatusCreated, "user-invite", "", view{Title: "Invitation created", Section: "users",
		Data: inviteForm{Result: &res}})
}

// resendInvite issues a new invitation link to a user who has not accepted yet.
func (c *Console) resendInvite(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "resend-invite"); err != nil {
		return err
	}
	res, err := c.Identity.ResendInvite(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	c.HTTP.Succeeded(ctx, "resend-invite")
	return c.render(w, r, http.StatusOK, "user-invite", "", view{Title: "Invitation created", Section: "users",
		Data: inviteForm{Result: &res}})
}
