package console

import (
	"net/http"
	"slices"
	"strings"

	"gale/internal/domains/identity"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
)

// rolesPage lists the roles the user may see: built-in ones of the user's level and below,
// and the custom roles of the user's tenant, each with how many users in scope hold it.
type rolesPage struct {
	settingsTab
	Roles     []identity.Role
	Next      string
	CanCreate bool
}

func (c *Console) roleList(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "list-roles"); err != nil {
		return err
	}
	list, next, _, err := c.Identity.ListRoles(ctx, identity.RoleListFilter{}, store.Page{Limit: settingsListSize,
		Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		return err
	}
	pg := rolesPage{settingsTab: "roles", Roles: list, Next: nextPage(r, next), CanCreate: c.HTTP.Permits(ctx, "create-role")}
	return c.render(w, r, http.StatusOK, "roles", "", view{Title: "Roles", Section: "settings", Data: pg})
}

// rolePage is one role: what it amounts to, grouped by resource, and who holds it.
type rolePage struct {
	settingsTab
	Role identity.Role
	// Groups are the catalog permissions the role amounts to, by resource.
	Groups              []permGroup
	PermissionCount     int
	Users               []identity.User
	CanEdit, CanDelete  bool
	CanUsers, MoreUsers bool
}

// roleUsersShown is how many holders a role's page lists.
const roleUsersShown = 50

func (c *Console) roleDetail(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "get-role"); err != nil {
		return err
	}
	role, err := c.Identity.GetRole(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := rolePage{settingsTab: "roles", Role: role}
	if c.HTTP.Permits(ctx, "get-role-effective-permissions") {
		_, perms, err := c.Identity.EffectivePermissions(ctx, role.ID)
		if err != nil {
			return err
		}
		pg.PermissionCount = len(perms)
		pg.Groups = permGroups(perms, func(p access.Permission) bool { return slices.Contains(perms, p.Name) })
	}
	if !role.BuiltIn {
		pg.CanEdit = c.mayChangeRole(r, role) && c.HTTP.Permits(ctx, "update-role")
		pg.CanDelete = c.mayChangeRole(r, role) && c.HTTP.Permits(ctx, "delete-role")
	}
	if c.HTTP.Permits(ctx, "list-role-users") && access.PrincipalFrom(ctx).Can(access.UsersRead) {
		pg.CanUsers = true
		var next string
		if pg.Users, next, _, err = c.Identity.RoleUsers(ctx, role.ID, store.Page{Limit: roleUsersShown}); err != nil {
			return err
		}
		pg.MoreUsers = next != ""
	}
	return c.render(w, r, http.StatusOK, "role", "", view{Title: role.Name, Section: "settings", Data: pg})
}

// mayChangeRole tells whether the role is the user's tenant's own, as the service requires
// of a change: an organization user cannot change its partner's roles.
func (c *Console) mayChangeRole(r *http.Request, role identity.Role) bool {
	scope := access.ScopeFrom(r.Context())
	return scope.Level != access.LevelOrganization || (role.OrgID != nil && *role.OrgID == scope.OrgID)
}

// roleForm is the editor of a custom role.
type roleForm struct {
	settingsTab
	Role identity.Role
	New  bool
	// Scopes are the levels a new role may be of for this user.
	Scopes   []access.Level
	Partners []tenancy.Partner
	Groups   []permGroup
	// Others are the role's grants beyond single catalog permissions (wildcards), kept
	// unless unticked.
	Others []string
	Error  *apperr.Error
}

func (c *Console) roleNew(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-role"); err != nil {
		return err
	}
	return c.roleEditor(w, r, http.StatusOK, roleForm{New: true, Role: identity.Role{Scope: access.LevelOrganization}})
}

func (c *Console) roleEdit(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "update-role"); err != nil {
		return err
	}
	role, err := c.Identity.GetRole(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	if role.BuiltIn {
		return apperr.Forbidden("built-in roles cannot be changed or deleted; clone the role and change the copy")
	}
	if !c.mayChangeRole(r, role) {
		return apperr.Forbidden("this role belongs to the partner; only the partner can change it")
	}
	return c.roleEditor(w, r, http.StatusOK, roleForm{Role: role})
}

func (c *Console) roleEditor(w http.ResponseWriter, r *http.Request, status int, f roleForm) error {
	ctx := r.Context()
	f.settingsTab = "roles"
	scope := access.ScopeFrom(ctx)
	if f.New {
		f.Scopes = []access.Level{access.LevelOrganization}
		if scope.Level != access.LevelOrganization {
			f.Scopes = append(f.Scopes, access.LevelPartner)
		}
		var err error
		if f.Partners, err = c.partnerChoices(ctx); err != nil {
			return err
		}
	}
	// An organization role cannot hold partner-only permissions; an organization user only
	// makes organization roles.
	orgOnly := scope.Level == access.LevelOrganization || (!f.New && f.Role.Scope == access.LevelOrganization)
	f.Groups = permGroups(f.Role.Permissions, func(p access.Permission) bool { return !orgOnly || !p.PartnerOnly })
	f.Others = nil
	for _, g := range f.Role.Permissions {
		if _, ok := access.LookupPermission(g); !ok {
			f.Others = append(f.Others, g)
		}
	}
	title := "New role"
	if !f.New {
		title = "Edit " + f.Role.Name
	}
	return c.render(w, r, status, "role-edit", "", view{Title: title, Section: "settings", Data: f})
}

func (c *Console) roleCreate(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "create-role"); err != nil {
		return err
	}
	form := r.PostForm
	in := identity.NewRole{Name: strings.TrimSpace(form.Get("name")), Description: strings.TrimSpace(form.Get("description")),
		Scope: access.Level(form.Get("scope")), Permissions: form["permissions"], PartnerID: form.Get("partnerId")}
	if in.Permissions == nil {
		in.Permissions = []string{}
	}
	role, err := c.Identity.CreateRole(ctx, in)
	if err != nil {
		ae := formRefusal(err)
		if ae == nil {
			return err
		}
		return c.roleEditor(w, r, httpapi.StatusOf(ae), roleForm{New: true, Error: ae, Role: identity.Role{Name: in.Name,
			Description: in.Description, Scope: in.Scope, Permissions: in.Permissions, PartnerID: &in.PartnerID}})
	}
	c.HTTP.Succeeded(ctx, "create-role")
	http.Redirect(w, r, "/roles/"+role.ID, http.StatusSeeOther)
	return nil
}

func (c *Console) roleUpdate(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "update-role"); err != nil {
		return err
	}
	before, err := c.Identity.GetRole(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	form := r.PostForm
	name, desc := strings.TrimSpace(form.Get("name")), strings.TrimSpace(form.Get("description"))
	perms := form["permissions"]
	if perms == nil {
		perms = []string{}
	}
	role, err := c.Identity.UpdateRole(ctx, before.ID, identity.RoleInput{Name: &name, Description: &desc, Permissions: perms})
	if err != nil {
		ae := formRefusal(err)
		if ae == nil {
			return err
		}
		before.Name, before.Description, before.Permissions = name, desc, perms
		return c.roleEditor(w, r, httpapi.StatusOf(ae), roleForm{Role: before, Error: ae})
	}
	c.HTTP.Succeeded(ctx, "update-role")
	http.Redirect(w, r, "/roles/"+role.ID, http.StatusSeeOther)
	return nil
}

func (c *Console) roleDelete(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "delete-role"); err != nil {
		return err
	}
	if err := c.Identity.DeleteRole(ctx, r.PathValue("id")); err != nil {
		return err
	}
	c.HTTP.Succeeded(ctx, "delete-role")
	afterChange(w, r, "/roles")
	return nil
}
