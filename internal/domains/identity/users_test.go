package identity_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"gale/internal/domains/identity"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/mail"
	"gale/internal/testkit/apptest"
)

func TestInviteWithoutSMTPAndAccept(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")

	var res inviteResult
	e.Must(http.StatusCreated, a.Partner, "POST", api+"/users/invite", map[string]any{
		"email": "New.Tech@Example.com", "name": "New Tech", "roleId": access.RoleOrgTechnician, "orgId": a.OrgID,
	}).JSON(t, &res)
	if res.EmailSent || res.InviteURL == "" {
		t.Fatalf("invite without SMTP = emailSent %v inviteUrl %q, want the link", res.EmailSent, res.InviteURL)
	}
	if !strings.HasPrefix(res.InviteURL, e.App.Config.PublicURL+"/accept-invite?token=") {
		t.Fatalf("inviteUrl = %q", res.InviteURL)
	}
	u := res.User
	if u.Status != identity.StatusInvited || u.Email != "new.tech@example.com" || u.Scope != "organization" ||
		u.OrgID == nil || *u.OrgID != a.OrgID || u.PartnerID == nil || *u.PartnerID != a.PartnerID {
		t.Fatalf("invited user = %+v", u)
	}
	if auditCount(t, e, "user.invite", u.ID) != 1 {
		t.Fatal("invite not audited")
	}
	// The user cannot sign in before accepting.
	wantStatus(t, e.Do(apptest.Anonymous, "POST", api+"/auth/login", map[string]string{"email": u.Email, "password": "Secret-Passw0rd"}),
		http.StatusUnauthorized, "")

	e.Must(http.StatusOK, apptest.Anonymous, "POST", api+"/auth/accept-invite",
		map[string]string{"token": tokenOf(t, res.InviteURL), "password": "Secret-Passw0rd"})
	// The link works once.
	wantStatus(t, e.Do(apptest.Anonymous, "POST", api+"/auth/accept-invite",
		map[string]string{"token": tokenOf(t, res.InviteURL), "password": "Secret-Passw0rd"}), http.StatusBadRequest, "INVALID_TOKEN")

	c := apptest.Bearer(e.Login("new.tech@example.com", "Secret-Passw0rd"))
	var m struct {
		user
		Permissions []string `json:"permissions"`
	}
	e.Must(http.StatusOK, c, "GET", api+"/users/me", nil).JSON(t, &m)
	if m.Status != identity.StatusActive || m.RoleID != access.RoleOrgTechnician {
		t.Fatalf("me = %+v", m.user)
	}
	// Wildcards are expanded; nothing beyond the role.
	if !contains(m.Permissions, "devices:execute") || contains(m.Permissions, "devices:*") || contains(m.Permissions, "users:write") {
		t.Fatalf("permissions = %v", m.Permissions)
	}
}

func TestInviteDuplicateEmail(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	body := map[string]any{"email": "dup@example.com", "name": "Dup", "roleId": access.RolePartnerViewer}
	e.Must(http.StatusCreated, a.Partner, "POST", api+"/users/invite", body)
	body["email"] = "DUP@example.com"
	wantStatus(t, e.Do(a.Partner, "POST", api+"/users/invite", body), http.StatusConflict, apperr.CodeConflict)
	// An existing active user's address too.
	body["email"] = "alpha-org@gale.test"
	wantStatus(t, e.Do(a.Partner, "POST", api+"/users/invite", body), http.StatusConflict, apperr.CodeConflict)
}

func TestInvitePlacement(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Alpha")
	b := e.NewTenant(admin, "Beta")

	// An organization role needs an organization from partner callers.
	wantStatus(t, e.Do(a.Partner, "POST", api+"/users/invite", map[string]any{"email": "x@example.com", "name": "X",
		"roleId": access.RoleOrgViewer}), http.StatusBadRequest, apperr.CodeValidation)
	// Another partner's organization is not found.
	wantStatus(t, e.Do(a.Partner, "POST", api+"/users/invite", map[string]any{"email": "x@example.com", "name": "X",
		"roleId": access.RoleOrgViewer, "orgId": b.OrgID}), http.StatusNotFound, apperr.CodeNotFound)
	// An organization caller cannot see partner roles.
	wantStatus(t, e.Do(a.Org, "POST", api+"/users/invite", map[string]any{"email": "x@example.com", "name": "X",
		"roleId": access.RolePartnerViewer}), http.StatusNotFound, apperr.CodeNotFound)
	// An organization caller invites into its own organization.
	var res inviteResult
	e.Must(http.StatusCreated, a.Org, "POST", api+"/users/invite", map[string]any{"email": "x@example.com", "name": "X",
		"roleId": access.RoleOrgViewer}).JSON(t, &res)
	if res.User.OrgID == nil || *res.User.OrgID != a.OrgID {
		t.Fatalf("org invite placed at %+v", res.User)
	}
	// A system caller names the partner of a partner user.
	wantStatus(t, e.Do(admin, "POST", api+"/users/invite", map[string]any{"email": "y@example.com", "name": "Y",
		"roleId": access.RolePartnerViewer}), http.StatusBadRequest, apperr.CodeValidation)
	e.Must(http.StatusCreated, admin, "POST", api+"/users/invite", map[string]any{"email": "y@example.com", "name": "Y",
		"roleId": access.RolePartnerViewer, "partnerId": b.PartnerID}).JSON(t, &res)
	if res.User.Scope != "partner" || *res.User.PartnerID != b.PartnerID {
		t.Fatalf("system invite placed at %+v", res.User)
	}
	// Selected organization access of a partner user.
	e.Must(http.StatusCreated, a.Partner, "POST", api+"/users/invite", map[string]any{"email": "z@example.com", "name": "Z",
		"roleId": access.RolePartnerViewer, "orgAccess": "selected", "orgIds": []string{a.OrgID}}).JSON(t, &res)
	if res.User.OrgAccess != "selected" || len(res.User.OrgIDs) != 1 || res.User.OrgIDs[0] != a.OrgID {
		t.Fatalf("selected access = %+v", res.User)
	}
	wantStatus(t, e.Do(a.Partner, "POST", api+"/users/invite", map[string]any{"email": "w@example.com", "name": "W",
		"roleId": access.RolePartnerViewer, "orgAccess": "selected", "orgIds": []string{b.OrgID}}), http.StatusNotFound, apperr.CodeNotFound)
	// Bad input is a 400, never a 500.
	wantStatus(t, e.Do(a.Partner, "POST", api+"/users/invite", map[string]any{"email": "not-an-email", "name": "W",
		"roleId": access.RolePartnerViewer}), http.StatusBadRequest, apperr.CodeValidation)
	wantStatus(t, e.Do(a.Partner, "POST", api+"/users/invite", map[string]any{"email": "v@example.com", "name": "V",
		"roleId": "not-a-uuid"}), http.StatusBadRequest, apperr.CodeValidation)
}

func TestResendInviteRevokesOldToken(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	var first, second inviteResult
	e.Must(http.StatusCreated, a.Partner, "POST", api+"/users/invite", map[string]any{
		"email": "late@example.com", "name": "Late", "roleId": access.RolePartnerViewer}).JSON(t, &first)
	e.Must(http.StatusOK, a.Partner, "POST", api+"/users/resend-invite", map[string]any{"userId": first.User.ID}).JSON(t, &second)
	if second.InviteURL == "" || second.InviteURL == first.InviteURL {
		t.Fatalf("resend gave %q after %q", second.InviteURL, first.InviteURL)
	}
	wantStatus(t, e.Do(apptest.Anonymous, "POST", api+"/auth/accept-invite",
		map[string]string{"token": tokenOf(t, first.InviteURL), "password": "Secret-Passw0rd"}), http.StatusBadRequest, "INVALID_TOKEN")
	e.Must(http.StatusOK, apptest.Anonymous, "POST", api+"/auth/accept-invite",
		map[string]string{"token": tokenOf(t, second.InviteURL), "password": "Secret-Passw0rd"})
	// Only invited users can be invited again.
	wantStatus(t, e.Do(a.Partner, "POST", api+"/users/resend-invite", map[string]any{"userId": first.User.ID}),
		http.StatusConflict, apperr.CodeConflict)
	if auditCount(t, e, "user.invite_resent", first.User.ID) != 1 {
		t.Fatal("resend not audited")
	}
}

type fakeMailer struct{ sent []mail.Message }

func (f *fakeMailer) Send(_ context.Context, m mail.Message) error {
	f.sent = append(f.sent, m)
	return nil
}

func TestInviteWithMailerSendsLinkOnly(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	fm := &fakeMailer{}
	svc := identity.New(identity.Deps{DB: e.App.DB, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Mail: fm},
		identity.Options{PublicURL: "https://gale.example.com", InviteTTL: time.Hour})
	ctx := access.WithPrincipal(context.Background(), &access.Principal{Kind: access.ActorUser, ID: "x", Name: "Pat",
		Scope: access.Scope{Level: access.LevelPartner, PartnerID: a.PartnerID}, Permissions: access.Permissions{access.FullAdmin}})
	res, err := svc.InviteUser(ctx, identity.InviteInput{Email: "mailed@example.com", Name: "Mailed", RoleID: access.RolePartnerViewer})
	if err != nil {
		t.Fatal(err)
	}
	if !res.EmailSent || res.InviteURL != "" {
		t.Fatalf("with a mailer: emailSent %v inviteUrl %q, want the link mailed only", res.EmailSent, res.InviteURL)
	}
	if len(fm.sent) != 1 || fm.sent[0].To[0] != "mailed@example.com" {
		t.Fatalf("sent = %+v", fm.sent)
	}
	i := strings.Index(fm.sent[0].Body, "https://gale.example.com/accept-invite?token=")
	if i < 0 {
		t.Fatalf("mail body has no link: %s", fm.sent[0].Body)
	}
	link := strings.Fields(fm.sent[0].Body[i:])[0]
	e.Must(http.StatusOK, apptest.Anonymous, "POST", api+"/auth/accept-invite",
		map[string]string{"token": tokenOf(t, link), "password": "Secret-Passw0rd"})
}

func TestMeRefusesAPIKeys(t *testing.T) {
	e := apptest.New(t)
	svc := identity.New(identity.Deps{DB: e.App.DB, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, identity.Options{})
	ctx := access.WithPrincipal(context.Background(), &access.Principal{Kind: access.ActorAPIKey, ID: "k", UserID: "u",
		Scope: access.SystemScope(), Permissions: access.Permissions{access.FullAdmin}})
	if _, err := svc.GetMe(ctx); !apperr.IsCode(err, apperr.CodeForbidden) {
		t.Fatalf("GetMe as API key = %v, want FORBIDDEN", err)
	}
	name := "x"
	if _, err := svc.UpdateMe(ctx, &name); !apperr.IsCode(err, apperr.CodeForbidden) {
		t.Fatalf("UpdateMe as API key = %v, want FORBIDDEN", err)
	}
}

func TestUpdateMe(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	var u user
	e.Must(http.StatusOK, a.Org, "PATCH", api+"/users/me", map[string]any{"name": "Renamed"}).JSON(t, &u)
	if u.Name != "Renamed" {
		t.Fatalf("name = %q", u.Name)
	}
	// Only the name: other fields are refused by the strict body.
	wantStatus(t, e.Do(a.Org, "PATCH", api+"/users/me", map[string]any{"status": "disabled"}), http.StatusBadRequest, apperr.CodeValidation)
}

func TestDisableEndsSessions(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	id, tech := e.CreateUser("tech@example.com", access.LevelOrganization, a.PartnerID, a.OrgID, access.RoleOrgTechnician)
	me(e, tech)

	var u user
	e.Must(http.StatusOK, a.Partner, "PATCH", api+"/users/"+id, map[string]any{"status": "disabled"}).JSON(t, &u)
	if u.Status != identity.StatusDisabled {
		t.Fatalf("status = %s", u.Status)
	}
	wantStatus(t, e.Do(tech, "GET", api+"/users/me", nil), http.StatusUnauthorized, apperr.CodeUnauthorized)
	wantStatus(t, e.Do(apptest.Anonymous, "POST", api+"/auth/login", map[string]string{"email": "tech@example.com",
		"password": apptest.UserPassword}), http.StatusUnauthorized, "")
	if auditCount(t, e, "user.disable", id) != 1 {
		t.Fatal("disable not audited")
	}

	// Enabled again, the user signs in anew; the old token stays dead.
	e.Must(http.StatusOK, a.Partner, "PATCH", api+"/users/"+id, map[string]any{"status": "active"})
	wantStatus(t, e.Do(tech, "GET", api+"/users/me", nil), http.StatusUnauthorized, apperr.CodeUnauthorized)
	me(e, apptest.Bearer(e.Login("tech@example.com", apptest.UserPassword)))

	// Nobody disables itself.
	self := me(e, a.Partner)
	wantStatus(t, e.Do(a.Partner, "PATCH", api+"/users/"+self.ID, map[string]any{"status": "disabled"}), http.StatusForbidden, apperr.CodeForbidden)
	wantStatus(t, e.Do(a.Partner, "PATCH", api+"/users/"+id, map[string]any{"status": "bogus"}), http.StatusBadRequest, apperr.CodeValidation)
}

func TestManagingStrongerUserRefused(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	// A custom "user manager" role holds users:* but not *:*: it cannot manage a Partner Admin.
	mgr := createRole(e, a.Partner, map[string]any{"name": "User manager", "scope": "partner",
		"permissions": []string{"users:*", "roles:read"}})
	_, m := e.CreateUser("mgr@example.com", access.LevelPartner, a.PartnerID, "", mgr.ID)
	admin := me(e, a.Partner)
	wantStatus(t, e.Do(m, "PATCH", api+"/users/"+admin.ID, map[string]any{"status": "disabled"}), http.StatusForbidden, apperr.CodeForbidden)
	wantStatus(t, e.Do(m, "DELETE", api+"/users/"+admin.ID, nil), http.StatusForbidden, apperr.CodeForbidden)
	// A user within its permissions is fine.
	weak := createRole(e, a.Partner, map[string]any{"name": "Weak", "scope": "organization", "permissions": []string{"users:read"}})
	weakID, _ := e.CreateUser("weak@example.com", access.LevelOrganization, a.PartnerID, a.OrgID, weak.ID)
	e.Must(http.StatusOK, m, "PATCH", api+"/users/"+weakID, map[string]any{"name": "W"})
	viewerID, _ := e.CreateUser("viewer@example.com", access.LevelOrganization, a.PartnerID, a.OrgID, access.RoleOrgViewer)
	wantStatus(t, e.Do(m, "PATCH", api+"/users/"+viewerID, map[string]any{"name": "V"}), http.StatusForbidden, apperr.CodeForbidden)
}

func TestDeleteUser(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	id, _ := e.CreateUser("gone@example.com", access.LevelOrganization, a.PartnerID, a.OrgID, access.RoleOrgTechnician)
	keyID := "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	now := time.Now().UTC()
	if _, err := e.App.DB.SQL.Exec(`INSERT INTO api_keys (id, partner_id, org_id, scope, created_by, name, key_prefix, key_hash,
		permissions, created_at, updated_at) VALUES ($1, $2, $3, 'organization', $4, 'k', 'gk_', 'hash', '[]', $5, $5)`,
		keyID, a.PartnerID, a.OrgID, id, now); err != nil {
		t.Fatal(err)
	}
	self := me(e, a.Partner)
	wantStatus(t, e.Do(a.Partner, "DELETE", api+"/users/"+self.ID, nil), http.StatusForbidden, apperr.CodeForbidden)

	e.Must(http.StatusNoContent, a.Partner, "DELETE", api+"/users/"+id, nil)
	wantStatus(t, e.Do(a.Partner, "GET", api+"/users/"+id, nil), http.StatusNotFound, apperr.CodeNotFound)
	var revoked bool
	if err := e.App.DB.SQL.QueryRow(`SELECT revoked_at IS NOT NULL FROM api_keys WHERE id = $1`, keyID).Scan(&revoked); err != nil || !revoked {
		t.Fatalf("API key of the deleted user revoked = %v (%v)", revoked, err)
	}
	if auditCount(t, e, "user.delete", id) != 1 {
		t.Fatal("delete not audited")
	}
}

func TestAssignRole(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	id, _ := e.CreateUser("tech@example.com", access.LevelOrganization, a.PartnerID, a.OrgID, access.RoleOrgTechnician)
	var u user
	e.Must(http.StatusOK, a.Partner, "POST", api+"/users/"+id+"/role", map[string]any{"roleId": access.RoleOrgViewer}).JSON(t, &u)
	if u.RoleID != access.RoleOrgViewer || u.RoleName != "Organization Viewer" {
		t.Fatalf("after assign: %+v", u)
	}
	// The role's scope must be the user's level.
	wantStatus(t, e.Do(a.Partner, "POST", api+"/users/"+id+"/role", map[string]any{"roleId": access.RolePartnerViewer}),
		http.StatusBadRequest, apperr.CodeValidation)
	if auditCount(t, e, "user.role_change", id) != 1 {
		t.Fatal("role change not audited")
	}
}

func TestListUsersScopeFiltersAndPaging(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Alpha")
	b := e.NewTenant(admin, "Beta")
	a2 := e.CreateOrg(a.Partner, "", "Alpha Second")
	e.CreateUser("u1@alpha.test", access.LevelOrganization, a.PartnerID, a.OrgID, access.RoleOrgViewer)
	e.CreateUser("u2@alpha.test", access.LevelOrganization, a.PartnerID, a2, access.RoleOrgViewer)
	e.CreateUser("u3@alpha.test", access.LevelPartner, a.PartnerID, "", access.RolePartnerViewer)

	got := emails(listUsers(e, a.Partner, "").Data)
	want := []string{"alpha-org@gale.test", "alpha-partner@gale.test", "u1@alpha.test", "u2@alpha.test", "u3@alpha.test"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("partner list = %v, want %v", got, want)
	}
	got = emails(listUsers(e, a.Org, "").Data)
	if strings.Join(got, ",") != "alpha-org@gale.test,u1@alpha.test" {
		t.Fatalf("org list = %v", got)
	}
	if l := listUsers(e, b.Partner, "").Data; len(l) != 2 {
		t.Fatalf("beta sees %v", emails(l))
	}
	if l := listUsers(e, admin, "").Data; len(l) != 8 {
		t.Fatalf("system sees %d users", len(l))
	}

	// A partner user limited to selected organizations sees the others' users no more.
	limited := createRole(e, a.Partner, map[string]any{"name": "Reader", "scope": "partner", "permissions": []string{"users:read"}})
	lid, _ := e.CreateUser("limited@alpha.test", access.LevelPartner, a.PartnerID, "", limited.ID)
	e.Must(http.StatusOK, a.Partner, "PATCH", api+"/users/"+lid, map[string]any{"orgAccess": "selected", "orgIds": []string{a2}})
	lc := apptest.Bearer(e.Login("limited@alpha.test", apptest.UserPassword))
	got = emails(listUsers(e, lc, "").Data)
	if contains(got, "u1@alpha.test") || !contains(got, "u2@alpha.test") || !contains(got, "u3@alpha.test") {
		t.Fatalf("limited partner user sees %v", got)
	}

	// Filters.
	if got := emails(listUsers(e, a.Partner, "?search=U2@").Data); strings.Join(got, ",") != "u2@alpha.test" {
		t.Fatalf("search = %v", got)
	}
	if got := emails(listUsers(e, a.Partner, "?orgId="+a2).Data); strings.Join(got, ",") != "u2@alpha.test" {
		t.Fatalf("orgId filter = %v", got)
	}
	if got := listUsers(e, a.Partner, "?roleId="+access.RoleOrgViewer).Data; len(got) != 2 {
		t.Fatalf("roleId filter = %v", emails(got))
	}
	e.Must(http.StatusCreated, a.Partner, "POST", api+"/users/invite", map[string]any{"email": "inv@alpha.test", "name": "I",
		"roleId": access.RolePartnerViewer})
	if got := emails(listUsers(e, a.Partner, "?status=invited").Data); strings.Join(got, ",") != "inv@alpha.test" {
		t.Fatalf("status filter = %v", got)
	}

	// Cursor paging walks every user once, in order.
	var walked []string
	q := "?limit=2"
	for i := 0; i < 10; i++ {
		l := listUsers(e, a.Partner, q)
		walked = append(walked, emails(l.Data)...)
		if !l.Pagination.HasMore {
			break
		}
		q = "?limit=2&cursor=" + l.Pagination.Cursor
	}
	all := emails(listUsers(e, a.Partner, "").Data)
	if strings.Join(walked, ",") != strings.Join(all, ",") {
		t.Fatalf("cursor walk = %v, want %v", walked, all)
	}
	// Legacy page mode carries the total.
	l := listUsers(e, a.Partner, "?page=2&limit=2")
	if l.Pagination.Total == nil || *l.Pagination.Total != len(all) || l.Pagination.Page != 2 || len(l.Data) != 2 ||
		l.Data[0].Email != all[2] || !l.Pagination.HasMore {
		t.Fatalf("page 2 = %+v %v", l.Pagination, emails(l.Data))
	}
	wantStatus(t, e.Do(a.Partner, "GET", api+"/users?cursor=garbage", nil), http.StatusBadRequest, apperr.CodeValidation)
	wantStatus(t, e.Do(a.Partner, "GET", api+"/users?status=bogus", nil), http.StatusBadRequest, apperr.CodeValidation)
}

func TestUsersTenancyIsolation(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Alpha")
	b := e.NewTenant(admin, "Beta")
	bUser, _ := e.CreateUser("victim@beta.test", access.LevelOrganization, b.PartnerID, b.OrgID, access.RoleOrgViewer)
	bPartner := me(e, b.Partner)
	aPartner := me(e, a.Partner)

	for _, id := range []string{bUser, bPartner.ID} {
		wantStatus(t, e.Do(a.Partner, "GET", api+"/users/"+id, nil), http.StatusNotFound, apperr.CodeNotFound)
		wantStatus(t, e.Do(a.Partner, "PATCH", api+"/users/"+id, map[string]any{"status": "disabled"}), http.StatusNotFound, apperr.CodeNotFound)
		wantStatus(t, e.Do(a.Partner, "POST", api+"/users/"+id+"/role", map[string]any{"roleId": access.RoleOrgViewer}), http.StatusNotFound, apperr.CodeNotFound)
		wantStatus(t, e.Do(a.Partner, "DELETE", api+"/users/"+id, nil), http.StatusNotFound, apperr.CodeNotFound)
		wantStatus(t, e.Do(a.Partner, "POST", api+"/users/resend-invite", map[string]any{"userId": id}), http.StatusNotFound, apperr.CodeNotFound)
	}
	// An organization user cannot reach its partner's users.
	wantStatus(t, e.Do(a.Org, "GET", api+"/users/"+aPartner.ID, nil), http.StatusNotFound, apperr.CodeNotFound)
	// Nothing changed.
	if u := me(e, b.Partner); u.Status != identity.StatusActive {
		t.Fatalf("beta partner admin = %+v", u)
	}
	if got := emails(listUsers(e, a.Partner, "?search=beta").Data); len(got) != 0 {
		t.Fatalf("alpha sees %v", got)
	}
}

func TestUsersOfADeletedOrganizationAreHidden(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Gone")
	var orgUser string
	if err := e.App.DB.SQL.QueryRow(`SELECT id FROM users WHERE email = 'gone-org@gale.test'`).Scan(&orgUser); err != nil {
		t.Fatal(err)
	}
	e.Must(http.StatusOK, a.Partner, "GET", "/api/v1/users/"+orgUser, nil)
	e.Must(http.StatusNoContent, a.Partner, "DELETE", "/api/v1/orgs/organizations/"+a.OrgID, nil)
	for _, c := range []apptest.Caller{a.Partner, admin} {
		if r := e.Do(c, "GET", "/api/v1/users/"+orgUser, nil); r.Status != http.StatusNotFound {
			t.Fatalf("user of a deleted organization = %d, want 404", r.Status)
		}
		if strings.Contains(string(e.Must(http.StatusOK, c, "GET", "/api/v1/users", nil).Body), orgUser) {
			t.Fatal("user of a deleted organization is listed")
		}
	}
	e.Must(http.StatusOK, a.Partner, "POST", "/api/v1/orgs/organizations/"+a.OrgID+"/restore", nil)
	e.Must(http.StatusOK, a.Partner, "GET", "/api/v1/users/"+orgUser, nil)
}
