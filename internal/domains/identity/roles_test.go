package identity_test

import (
	"net/http"
	"slices"
	"testing"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/testkit/apptest"
)

func TestBuiltInRolesCannotChange(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Alpha")
	for _, c := range []apptest.Caller{a.Partner, admin} {
		for _, id := range []string{access.RolePartnerViewer, access.RoleOrgAdmin} {
			wantStatus(t, e.Do(c, "PATCH", api+"/roles/"+id, map[string]any{"name": "Mine"}), http.StatusForbidden, apperr.CodeForbidden)
			wantStatus(t, e.Do(c, "DELETE", api+"/roles/"+id, nil), http.StatusForbidden, apperr.CodeForbidden)
		}
	}
	var r role
	e.Must(http.StatusOK, a.Partner, "GET", api+"/roles/"+access.RolePartnerViewer, nil).JSON(t, &r)
	if r.Name != "Partner Viewer" || !r.BuiltIn {
		t.Fatalf("built-in role = %+v", r)
	}
	// Organization callers see organization roles only; partners see no system role.
	wantStatus(t, e.Do(a.Org, "GET", api+"/roles/"+access.RolePartnerViewer, nil), http.StatusNotFound, apperr.CodeNotFound)
	wantStatus(t, e.Do(a.Partner, "GET", api+"/roles/"+access.RoleSystemAdmin, nil), http.StatusNotFound, apperr.CodeNotFound)
}

func TestCreateRoleValidation(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	cases := []struct {
		name   string
		caller apptest.Caller
		body   map[string]any
		status int
	}{
		{"full admin", a.Partner, map[string]any{"name": "God", "scope": "partner", "permissions": []string{"*:*"}}, http.StatusBadRequest},
		{"unknown permission", a.Partner, map[string]any{"name": "X", "scope": "partner", "permissions": []string{"devices:fly"}}, http.StatusBadRequest},
		{"partner-only in organization role", a.Partner, map[string]any{"name": "X", "scope": "organization", "permissions": []string{"billing:manage"}}, http.StatusBadRequest},
		{"partner-only by wildcard", a.Partner, map[string]any{"name": "X", "scope": "organization", "permissions": []string{"*:read"}}, http.StatusBadRequest},
		{"organization makes partner role", a.Org, map[string]any{"name": "X", "scope": "partner", "permissions": []string{"devices:read"}}, http.StatusBadRequest},
		{"bad scope", a.Partner, map[string]any{"name": "X", "scope": "system", "permissions": []string{"devices:read"}}, http.StatusBadRequest},
		{"partner-only in partner role", a.Partner, map[string]any{"name": "Billing+", "scope": "partner", "permissions": []string{"billing:manage"}}, http.StatusCreated},
		{"organization role", a.Org, map[string]any{"name": "Helpdesk", "scope": "organization", "permissions": []string{"devices:read", "tickets:*"}}, http.StatusCreated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.Do(tc.caller, "POST", api+"/roles", tc.body)
			if r.Status != tc.status {
				t.Fatalf("create %v = %d %s, want %d", tc.body, r.Status, r.Body, tc.status)
			}
			if r.Status == http.StatusBadRequest && r.ErrorCode() != apperr.CodeValidation {
				t.Fatalf("code = %s", r.ErrorCode())
			}
		})
	}
	// A duplicate name in the same tenant is a conflict, whatever the case.
	wantStatus(t, e.Do(a.Partner, "POST", api+"/roles", map[string]any{"name": "billing+", "scope": "partner",
		"permissions": []string{"devices:read"}}), http.StatusConflict, apperr.CodeConflict)
	// The organization's role belongs to it.
	var l list[role]
	e.Must(http.StatusOK, a.Org, "GET", api+"/roles?search=helpdesk", nil).JSON(t, &l)
	if len(l.Data) != 1 || l.Data[0].OrgID == nil || *l.Data[0].OrgID != a.OrgID || l.Data[0].BuiltIn {
		t.Fatalf("org role = %+v", l.Data)
	}
	// A system caller names the partner.
	admin := e.Admin()
	wantStatus(t, e.Do(admin, "POST", api+"/roles", map[string]any{"name": "S", "scope": "partner", "permissions": []string{"devices:read"}}),
		http.StatusBadRequest, apperr.CodeValidation)
	r := createRole(e, admin, map[string]any{"name": "S", "scope": "partner", "permissions": []string{"devices:read"}, "partnerId": a.PartnerID})
	if r.PartnerID == nil || *r.PartnerID != a.PartnerID {
		t.Fatalf("system-made role = %+v", r)
	}
}

// techLead is a partner role that may manage roles and users but holds only technician
// powers otherwise.
func techLead(t *testing.T, e *apptest.Env, a apptest.Tenant) apptest.Caller {
	t.Helper()
	r := createRole(e, a.Partner, map[string]any{"name": "Tech lead", "scope": "partner",
		"permissions": []string{"devices:*", "roles:read", "roles:write", "users:read", "users:write", "users:invite"}})
	_, c := e.CreateUser("lead@alpha.test", access.LevelPartner, a.PartnerID, "", r.ID)
	return c
}

func TestRoleEscalationRefused(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	lead := techLead(t, e, a)

	// A role with a permission the caller lacks.
	wantStatus(t, e.Do(lead, "POST", api+"/roles", map[string]any{"name": "Deleter", "scope": "partner",
		"permissions": []string{"devices:read", "users:delete"}}), http.StatusForbidden, apperr.CodeForbidden)
	wantStatus(t, e.Do(lead, "POST", api+"/roles", map[string]any{"name": "All users", "scope": "partner",
		"permissions": []string{"users:*"}}), http.StatusForbidden, apperr.CodeForbidden)
	// Within its own permissions it may.
	mine := createRole(e, lead, map[string]any{"name": "Device reader", "scope": "organization", "permissions": []string{"devices:read"}})
	wantStatus(t, e.Do(lead, "PATCH", api+"/roles/"+mine.ID, map[string]any{"permissions": []string{"devices:read", "scripts:execute"}}),
		http.StatusForbidden, apperr.CodeForbidden)

	// Assigning or inviting with Partner Admin.
	techID, _ := e.CreateUser("tech@alpha.test", access.LevelPartner, a.PartnerID, "", access.RolePartnerViewer)
	wantStatus(t, e.Do(lead, "POST", api+"/users/invite", map[string]any{"email": "boss@alpha.test", "name": "Boss",
		"roleId": access.RolePartnerAdmin}), http.StatusForbidden, apperr.CodeForbidden)
	// (Partner Viewer holds *:read, more than the lead, so the lead cannot manage that user at all.)
	wantStatus(t, e.Do(lead, "POST", api+"/users/"+techID+"/role", map[string]any{"roleId": access.RolePartnerAdmin}),
		http.StatusForbidden, apperr.CodeForbidden)
	weakID, _ := e.CreateUser("weak@alpha.test", access.LevelOrganization, a.PartnerID, a.OrgID, mine.ID)
	wantStatus(t, e.Do(lead, "POST", api+"/users/"+weakID+"/role", map[string]any{"roleId": access.RoleOrgAdmin}),
		http.StatusForbidden, apperr.CodeForbidden)

	// What the lead may assign leaves out what it could not.
	var assignable struct{ Data []role }
	e.Must(http.StatusOK, lead, "GET", api+"/users/roles", nil).JSON(t, &assignable)
	ids := roleIDs(assignable.Data)
	if contains(ids, access.RolePartnerAdmin) || contains(ids, access.RoleOrgAdmin) || !contains(ids, mine.ID) {
		t.Fatalf("assignable = %v", ids)
	}
	// An organization admin may assign organization roles only, including the viewer.
	e.Must(http.StatusOK, a.Org, "GET", api+"/users/roles", nil).JSON(t, &assignable)
	for _, r := range assignable.Data {
		if r.Scope != "organization" {
			t.Fatalf("org admin offered %+v", r)
		}
	}
	if !contains(roleIDs(assignable.Data), access.RoleOrgViewer) {
		t.Fatalf("org admin cannot assign the viewer: %v", roleIDs(assignable.Data))
	}
}

func TestDeleteRoleInUse(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	r := createRole(e, a.Partner, map[string]any{"name": "Used", "scope": "organization", "permissions": []string{"devices:read"}})
	id, _ := e.CreateUser("holder@alpha.test", access.LevelOrganization, a.PartnerID, a.OrgID, r.ID)

	var l list[role]
	e.Must(http.StatusOK, a.Partner, "GET", api+"/roles?search=used", nil).JSON(t, &l)
	if len(l.Data) != 1 || l.Data[0].UserCount == nil || *l.Data[0].UserCount != 1 {
		t.Fatalf("list = %+v", l.Data)
	}
	var users list[user]
	e.Must(http.StatusOK, a.Partner, "GET", api+"/roles/"+r.ID+"/users", nil).JSON(t, &users)
	if len(users.Data) != 1 || users.Data[0].ID != id {
		t.Fatalf("role users = %v", emails(users.Data))
	}

	wantStatus(t, e.Do(a.Partner, "DELETE", api+"/roles/"+r.ID, nil), http.StatusConflict, apperr.CodeConflict)
	e.Must(http.StatusOK, a.Partner, "POST", api+"/users/"+id+"/role", map[string]any{"roleId": access.RoleOrgViewer})
	e.Must(http.StatusNoContent, a.Partner, "DELETE", api+"/roles/"+r.ID, nil)
	wantStatus(t, e.Do(a.Partner, "GET", api+"/roles/"+r.ID, nil), http.StatusNotFound, apperr.CodeNotFound)
	if auditCount(t, e, "role.delete", r.ID) != 1 || auditCount(t, e, "role.create", r.ID) != 1 {
		t.Fatal("role create/delete not audited")
	}
}

func TestUpdateRole(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	r := createRole(e, a.Partner, map[string]any{"name": "Ops", "scope": "organization", "permissions": []string{"devices:read"}})
	var got role
	e.Must(http.StatusOK, a.Partner, "PATCH", api+"/roles/"+r.ID, map[string]any{"name": "Operations",
		"permissions": []string{"devices:*", "alerts:read"}}).JSON(t, &got)
	if got.Name != "Operations" || !slices.Equal(got.Permissions, []string{"devices:*", "alerts:read"}) {
		t.Fatalf("updated = %+v", got)
	}
	wantStatus(t, e.Do(a.Partner, "PATCH", api+"/roles/"+r.ID, map[string]any{"permissions": []string{"psa:read"}}),
		http.StatusBadRequest, apperr.CodeValidation)
	// The partner's organization roles serve the organization, but the organization cannot change them.
	wantStatus(t, e.Do(a.Org, "PATCH", api+"/roles/"+r.ID, map[string]any{"name": "Mine"}), http.StatusForbidden, apperr.CodeForbidden)
	if auditCount(t, e, "role.update", r.ID) != 1 {
		t.Fatal("update not audited")
	}
}

func TestCloneRole(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	var c role
	e.Must(http.StatusCreated, a.Partner, "POST", api+"/roles/"+access.RolePartnerTechnician+"/clone", map[string]any{}).JSON(t, &c)
	src, _ := access.BuiltInRoleByID(access.RolePartnerTechnician)
	if c.BuiltIn || c.Name != "Copy of Partner Technician" || c.Scope != "partner" || c.PartnerID == nil || *c.PartnerID != a.PartnerID ||
		!slices.Equal(c.Permissions, []string(src.Permissions)) {
		t.Fatalf("clone = %+v", c)
	}
	// The same default name again is taken.
	wantStatus(t, e.Do(a.Partner, "POST", api+"/roles/"+access.RolePartnerTechnician+"/clone", nil), http.StatusConflict, apperr.CodeConflict)
	// A copy is editable.
	e.Must(http.StatusOK, a.Partner, "PATCH", api+"/roles/"+c.ID, map[string]any{"permissions": []string{"devices:read"}})

	// Partner Admin's *:* becomes the catalog it amounts to.
	e.Must(http.StatusCreated, a.Partner, "POST", api+"/roles/"+access.RolePartnerAdmin+"/clone", map[string]any{"name": "Almost admin"}).JSON(t, &c)
	if contains(c.Permissions, "*:*") || len(c.Permissions) != len(access.Catalog()) {
		t.Fatalf("admin clone has %d permissions", len(c.Permissions))
	}
	// An organization clones the viewer: partner-only reads drop out.
	e.Must(http.StatusCreated, a.Org, "POST", api+"/roles/"+access.RoleOrgViewer+"/clone", map[string]any{"name": "Viewer+"}).JSON(t, &c)
	if c.OrgID == nil || *c.OrgID != a.OrgID || contains(c.Permissions, "partners:read") || !contains(c.Permissions, "devices:read") {
		t.Fatalf("org clone = %+v", c)
	}
	if auditCount(t, e, "role.clone", c.ID) != 1 {
		t.Fatal("clone not audited")
	}
}

func TestEffectivePermissionsAndCatalog(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	r := createRole(e, a.Partner, map[string]any{"name": "Devices", "scope": "partner", "permissions": []string{"devices:*", "alerts:read"}})
	var eff struct {
		RoleID      string   `json:"roleId"`
		Permissions []string `json:"permissions"`
	}
	e.Must(http.StatusOK, a.Partner, "GET", api+"/roles/"+r.ID+"/effective-permissions", nil).JSON(t, &eff)
	want := []string{"alerts:read", "devices:delete", "devices:execute", "devices:read", "devices:write"}
	if eff.RoleID != r.ID || !slices.Equal(eff.Permissions, want) {
		t.Fatalf("effective = %+v, want %v", eff, want)
	}
	e.Must(http.StatusOK, a.Partner, "GET", api+"/roles/"+access.RolePartnerAdmin+"/effective-permissions", nil).JSON(t, &eff)
	if len(eff.Permissions) != len(access.Catalog()) {
		t.Fatalf("partner admin amounts to %d of %d", len(eff.Permissions), len(access.Catalog()))
	}

	var cat struct {
		Data []access.Permission `json:"data"`
	}
	e.Must(http.StatusOK, a.Org, "GET", api+"/roles/permissions/available", nil).JSON(t, &cat)
	if len(cat.Data) != len(access.Catalog()) {
		t.Fatalf("catalog has %d entries", len(cat.Data))
	}
}

func TestRolesTenancyIsolation(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Alpha")
	b := e.NewTenant(admin, "Beta")
	br := createRole(e, b.Partner, map[string]any{"name": "Beta secret", "scope": "organization", "permissions": []string{"devices:read"}})
	bo := createRole(e, b.Org, map[string]any{"name": "Beta org secret", "scope": "organization", "permissions": []string{"devices:read"}})
	ar := createRole(e, a.Partner, map[string]any{"name": "Alpha role", "scope": "organization", "permissions": []string{"devices:read"}})

	for _, id := range []string{br.ID, bo.ID} {
		wantStatus(t, e.Do(a.Partner, "GET", api+"/roles/"+id, nil), http.StatusNotFound, apperr.CodeNotFound)
		wantStatus(t, e.Do(a.Partner, "PATCH", api+"/roles/"+id, map[string]any{"name": "Pwned"}), http.StatusNotFound, apperr.CodeNotFound)
		wantStatus(t, e.Do(a.Partner, "DELETE", api+"/roles/"+id, nil), http.StatusNotFound, apperr.CodeNotFound)
		wantStatus(t, e.Do(a.Partner, "POST", api+"/roles/"+id+"/clone", nil), http.StatusNotFound, apperr.CodeNotFound)
		wantStatus(t, e.Do(a.Partner, "GET", api+"/roles/"+id+"/users", nil), http.StatusNotFound, apperr.CodeNotFound)
		wantStatus(t, e.Do(a.Partner, "GET", api+"/roles/"+id+"/effective-permissions", nil), http.StatusNotFound, apperr.CodeNotFound)
		wantStatus(t, e.Do(a.Org, "GET", api+"/roles/"+id, nil), http.StatusNotFound, apperr.CodeNotFound)
	}
	// A foreign role cannot be given to one's own user.
	id, _ := e.CreateUser("u@alpha.test", access.LevelOrganization, a.PartnerID, a.OrgID, access.RoleOrgViewer)
	wantStatus(t, e.Do(a.Partner, "POST", api+"/users/"+id+"/role", map[string]any{"roleId": br.ID}), http.StatusNotFound, apperr.CodeNotFound)
	wantStatus(t, e.Do(a.Partner, "POST", api+"/users/invite", map[string]any{"email": "x@alpha.test", "name": "X", "roleId": br.ID,
		"orgId": a.OrgID}), http.StatusNotFound, apperr.CodeNotFound)
	// Nor an own role to another partner's user, even by a system administrator placing it there.
	wantStatus(t, e.Do(admin, "POST", api+"/users/invite", map[string]any{"email": "y@beta.test", "name": "Y", "roleId": ar.ID,
		"orgId": b.OrgID}), http.StatusBadRequest, apperr.CodeValidation)

	for _, c := range []apptest.Caller{a.Partner, a.Org} {
		var l list[role]
		e.Must(http.StatusOK, c, "GET", api+"/roles?limit=500", nil).JSON(t, &l)
		ids := roleIDs(l.Data)
		if contains(ids, br.ID) || contains(ids, bo.ID) || !contains(ids, ar.ID) || !contains(ids, access.RoleOrgViewer) {
			t.Fatalf("alpha list = %v", ids)
		}
		e.Must(http.StatusOK, c, "GET", api+"/users/roles", nil).JSON(t, &l)
		if ids := roleIDs(l.Data); contains(ids, br.ID) || contains(ids, bo.ID) {
			t.Fatalf("alpha assignable = %v", ids)
		}
	}
	// Nothing changed.
	var got role
	e.Must(http.StatusOK, b.Partner, "GET", api+"/roles/"+br.ID, nil).JSON(t, &got)
	if got.Name != "Beta secret" {
		t.Fatalf("beta role = %+v", got)
	}
}
