package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"gale/internal/domains/webhooks"
	"gale/internal/platform/access"
	"gale/internal/testkit/apptest"
)

// hx are the headers htmx sends with a request of the page.
func hx(v *visitor) map[string]string {
	return map[string]string{"X-CSRF-Token": v.csrf, "HX-Request": "true"}
}

// userID finds a user's ID through the API.
func userID(t *testing.T, e *apptest.Env, admin apptest.Caller, email string) string {
	t.Helper()
	var out struct {
		Data []struct {
			ID    string `json:"id"`
			Email string `json:"email"`
		} `json:"data"`
	}
	e.Must(http.StatusOK, admin, "GET", "/api/v1/users?search="+url.QueryEscape(email), nil).JSON(t, &out)
	for _, u := range out.Data {
		if u.Email == email {
			return u.ID
		}
	}
	t.Fatalf("no user %s", email)
	return ""
}

type apiUser struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	RoleID string `json:"roleId"`
	OrgID  string `json:"orgId"`
}

// Every settings page renders for an administrator of each level, with the tab row, and the
// side bar calls them Settings.
func TestSettingsPagesRender(t *testing.T) {
	e := apptest.New(t)
	e.NewTenant(e.Admin(), "Acme")
	for _, who := range []struct{ email, password string }{{apptest.AdminEmail, apptest.AdminPassword},
		{"acme-partner@gale.test", apptest.UserPassword}, {"acme-org@gale.test", apptest.UserPassword}} {
		v := newVisitor(t, e)
		v.signIn(who.email, who.password)
		tabs := []string{`<nav class="tabs" aria-label="Settings">`, `href="/roles"`, `href="/settings/channels"`, `href="/settings/webhooks"`}
		must(t, v.get("/settings"), http.StatusOK, append(tabs, `>Settings</a>`, `href="/settings/api-keys/new"`)...)
		must(t, v.get("/roles"), http.StatusOK, append(tabs, "Organization Admin", `href="/roles/new"`)...)
		must(t, v.get("/roles/"+access.RoleOrgViewer), http.StatusOK, "Organization Viewer", "What it allows", "<td>devices</td>")
		must(t, v.get("/roles/new"), http.StatusOK, `name="permissions" value="devices:read"`)
		must(t, v.get("/settings/channels"), http.StatusOK, append(tabs, "No notification channel yet")...)
		for _, typ := range []string{"email", "slack", "teams", "webhook", "pagerduty", "sms"} {
			must(t, v.get("/settings/channels/new?type="+typ), http.StatusOK, `name="type" value="`+typ+`"`)
		}
		must(t, v.get("/settings/channels/new?type=fax"), http.StatusBadRequest)
		must(t, v.get("/settings/webhooks"), http.StatusOK, append(tabs, "No webhook yet")...)
		must(t, v.get("/settings/webhooks/new"), http.StatusOK, `name="events" value="alert.*" checked`)
		must(t, v.get("/settings/api-keys/new"), http.StatusOK, `name="preset" value="read" checked`)
		must(t, v.get("/users"), http.StatusOK, `href="/users/invite"`)
		must(t, v.get("/users/invite"), http.StatusOK, `name="roleId"`, "Organization Technician")
	}
}

// Inviting a user, the pending invitation, a new link, a role change, disabling, enabling and
// deleting: each changes what the API shows; the signed-in user's own account cannot be
// disabled or deleted, and another organization's user is not found.
func TestUserManagement(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	acme := e.NewTenant(admin, "Acme")
	other := e.NewTenant(admin, "Other")
	v := newVisitor(t, e)
	v.signIn("acme-partner@gale.test", apptest.UserPassword)

	invite := url.Values{"csrf": {v.csrf}, "email": {"new.tech@acme.test"}, "name": {"New Tech"}, "roleId": {access.RoleOrgTechnician},
		"orgId": {acme.OrgID}, "orgAccess": {"all"}}
	p := v.post("/users/invite", invite)
	must(t, p, http.StatusCreated, "new.tech@acme.test is invited", `id="invite-link"`, "/accept-invite?token=")
	var u apiUser
	id := userID(t, e, admin, "new.tech@acme.test")
	e.Must(http.StatusOK, acme.Partner, "GET", "/api/v1/users/"+id, nil).JSON(t, &u)
	if u.Status != "invited" || u.RoleID != access.RoleOrgTechnician || u.OrgID != acme.OrgID {
		t.Fatalf("the invited user: %+v", u)
	}
	must(t, v.get("/users"), http.StatusOK, "Pending invitations", `href="/users/`+id+`"`)
	must(t, v.post("/users/invite", invite), http.StatusConflict, "already exists")
	bad := url.Values{"csrf": {v.csrf}, "email": {"not-an-address"}, "name": {"X"}, "roleId": {access.RoleOrgTechnician}, "orgId": {acme.OrgID}}
	must(t, v.post("/users/invite", bad), http.StatusBadRequest, "not an email address", `value="not-an-address"`)
	bad.Set("email", "x@acme.test")
	bad.Set("name", " ")
	must(t, v.post("/users/invite", bad), http.StatusBadRequest, "name is required")
	bad.Set("name", "X")
	bad.Set("orgId", other.OrgID)
	if p := v.post("/users/invite", bad); p.status != http.StatusNotFound && p.status != http.StatusBadRequest {
		t.Fatalf("an invitation into another partner's organization: %d", p.status)
	}
	must(t, v.get("/users/"+id), http.StatusOK, "Send the invitation again")
	must(t, v.post("/users/"+id+"/resend-invite", url.Values{"csrf": {v.csrf}}), http.StatusOK, `id="invite-link"`)

	// The organization's administrator becomes a viewer, is disabled, then enabled again.
	orgAdmin := userID(t, e, admin, "acme-org@gale.test")
	must(t, v.get("/users/"+orgAdmin), http.StatusOK, `action="/users/`+orgAdmin+`/role"`, "Disable", "Delete")
	must(t, v.post("/users/"+orgAdmin+"/role", url.Values{"csrf": {v.csrf}, "roleId": {access.RoleOrgViewer}}), http.StatusSeeOther)
	e.Must(http.StatusOK, acme.Partner, "GET", "/api/v1/users/"+orgAdmin, nil).JSON(t, &u)
	if u.RoleID != access.RoleOrgViewer {
		t.Fatalf("the role is %s after the change", u.RoleID)
	}
	must(t, v.post("/users/"+orgAdmin+"/role", url.Values{"csrf": {v.csrf}, "roleId": {access.RolePartnerAdmin}}), http.StatusBadRequest)
	must(t, v.post("/users/"+orgAdmin+"/role", url.Values{"csrf": {v.csrf}, "roleId": {"nope"}}), http.StatusBadRequest)
	disabled := v.do(http.MethodPost, "/users/"+orgAdmin+"/status", url.Values{"status": {"disabled"}}, hx(v))
	if disabled.status != http.StatusNoContent || disabled.header.Get("HX-Redirect") != "/users/"+orgAdmin+"?done=disabled" {
		t.Fatalf("disable through htmx: %d %v", disabled.status, disabled.header)
	}
	e.Must(http.StatusOK, acme.Partner, "GET", "/api/v1/users/"+orgAdmin, nil).JSON(t, &u)
	if u.Status != "disabled" {
		t.Fatalf("the user is %s after disabling", u.Status)
	}
	must(t, v.get("/users/"+orgAdmin+"?done=disabled"), http.StatusOK, "every session of theirs has ended", "Enable")
	must(t, v.post("/users/"+orgAdmin+"/status", url.Values{"csrf": {v.csrf}, "status": {"active"}}), http.StatusSeeOther)
	e.Must(http.StatusOK, acme.Partner, "GET", "/api/v1/users/"+orgAdmin, nil).JSON(t, &u)
	if u.Status != "active" {
		t.Fatalf("the user is %s after enabling", u.Status)
	}
	must(t, v.post("/users/"+orgAdmin+"/status", url.Values{"csrf": {v.csrf}, "status": {"gone"}}), http.StatusBadRequest)

	// One's own account.
	self := userID(t, e, admin, "acme-partner@gale.test")
	mine := v.get("/users/" + self)
	must(t, mine, http.StatusOK, "This is you")
	if strings.Contains(mine.body, `/status"`) || strings.Contains(mine.body, `/delete"`) {
		t.Fatal("the user's own page offers to disable or delete it")
	}
	must(t, v.post("/users/"+self+"/status", url.Values{"csrf": {v.csrf}, "status": {"disabled"}}), http.StatusForbidden,
		"you cannot disable your own account")
	must(t, v.post("/users/"+self+"/delete", url.Values{"csrf": {v.csrf}}), http.StatusForbidden)

	// Deleting the invited user.
	must(t, v.post("/users/"+id+"/delete", url.Values{"csrf": {v.csrf}}), http.StatusSeeOther)
	e.Must(http.StatusNotFound, acme.Partner, "GET", "/api/v1/users/"+id, nil)

	// Another partner's user.
	theirs := userID(t, e, admin, "other-org@gale.test")
	sameAsMissing(t, "a user's page", v.get("/users/"+theirs), v.get("/users/"+missingID))
	for _, action := range []struct {
		path string
		form url.Values
	}{{"/role", url.Values{"roleId": {access.RoleOrgViewer}}}, {"/status", url.Values{"status": {"disabled"}}},
		{"/resend-invite", url.Values{}}, {"/delete", url.Values{}}} {
		action.form.Set("csrf", v.csrf)
		sameAsMissing(t, "a user's "+action.path, v.post("/users/"+theirs+action.path, action.form),
			v.post("/users/"+missingID+action.path, action.form))
	}
	e.Must(http.StatusOK, admin, "GET", "/api/v1/users/"+theirs, nil).JSON(t, &u)
	if u.Status != "active" {
		t.Fatalf("another partner's user is %s", u.Status)
	}

	// A technician reads users but does not invite or change them.
	e.CreateUser("acme-tech@gale.test", access.LevelOrganization, acme.PartnerID, acme.OrgID, access.RoleOrgTechnician)
	tech := newVisitor(t, e)
	tech.signIn("acme-tech@gale.test", apptest.UserPassword)
	if p := tech.get("/users"); p.status != http.StatusOK || strings.Contains(p.body, `href="/users/invite"`) {
		t.Fatalf("a technician's users page: %d", p.status)
	}
	must(t, tech.get("/users/invite"), http.StatusForbidden)
	invite.Set("csrf", tech.csrf)
	invite.Set("email", "sneaky@acme.test")
	must(t, tech.post("/users/invite", invite), http.StatusForbidden)
	must(t, tech.post("/users/"+orgAdmin+"/status", url.Values{"csrf": {tech.csrf}, "status": {"disabled"}}), http.StatusForbidden)
}

// Custom roles are made, changed and deleted from the console; built-in ones are read-only,
// and another organization's role is not found.
func TestRoles(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	acme := e.NewTenant(admin, "Acme")
	other := e.NewTenant(admin, "Other")
	var theirs struct {
		ID string `json:"id"`
	}
	e.Must(http.StatusCreated, other.Org, "POST", "/api/v1/roles", map[string]any{"name": "Theirs", "scope": "organization",
		"permissions": []string{"devices:read"}}).JSON(t, &theirs)

	v := newVisitor(t, e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)
	if p := v.get("/roles"); strings.Contains(p.body, "Theirs") {
		t.Fatal("the roles page lists another organization's role")
	}
	builtin := v.get("/roles/" + access.RoleOrgAdmin)
	must(t, builtin, http.StatusOK, "Built-in: it cannot be changed")
	if strings.Contains(builtin.body, "/edit") || strings.Contains(builtin.body, "/delete") {
		t.Fatal("a built-in role offers to be changed")
	}
	must(t, v.get("/roles/"+access.RoleOrgAdmin+"/edit"), http.StatusForbidden)
	must(t, v.post("/roles/"+access.RoleOrgAdmin+"/delete", url.Values{"csrf": {v.csrf}}), http.StatusForbidden)

	form := url.Values{"csrf": {v.csrf}, "name": {"Helpdesk"}, "description": {"Looks and acknowledges"}, "scope": {"organization"},
		"permissions": {"devices:read", "alerts:read", "alerts:acknowledge"}}
	p := v.post("/roles", form)
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/roles/") {
		t.Fatalf("create a role: %d to %q\n%s", p.status, p.location, p.body)
	}
	id := strings.TrimPrefix(p.location, "/roles/")
	var role struct {
		Name        string   `json:"name"`
		Permissions []string `json:"permissions"`
		OrgID       string   `json:"orgId"`
	}
	e.Must(http.StatusOK, acme.Org, "GET", "/api/v1/roles/"+id, nil).JSON(t, &role)
	if role.Name != "Helpdesk" || len(role.Permissions) != 3 || role.OrgID != acme.OrgID {
		t.Fatalf("the role: %+v", role)
	}
	must(t, v.get("/roles/"+id), http.StatusOK, "Helpdesk", "What it allows (3 permissions)", "<td>alerts</td>", `href="/roles/`+id+`/edit"`)
	must(t, v.get("/roles"), http.StatusOK, `href="/roles/`+id+`"`)
	must(t, v.get("/roles/"+id+"/edit"), http.StatusOK, `name="permissions" value="alerts:acknowledge" checked`)
	must(t, v.post("/roles", form), http.StatusConflict, "already exists")
	empty := url.Values{"csrf": {v.csrf}, "name": {"  "}, "scope": {"organization"}, "permissions": {"devices:read"}}
	must(t, v.post("/roles", empty), http.StatusBadRequest, "name is required")
	long := url.Values{"csrf": {v.csrf}, "name": {strings.Repeat("r", 101)}, "scope": {"organization"}}
	must(t, v.post("/roles", long), http.StatusBadRequest, "at most 100 characters")
	partnerOnly := url.Values{"csrf": {v.csrf}, "name": {"Billing"}, "scope": {"organization"}, "permissions": {"billing:read"}}
	must(t, v.post("/roles", partnerOnly), http.StatusBadRequest, "cannot be part of an organization role")

	edit := url.Values{"csrf": {v.csrf}, "name": {"Helpdesk desk"}, "description": {""}, "permissions": {"devices:read"}}
	must(t, v.post("/roles/"+id, edit), http.StatusSeeOther)
	e.Must(http.StatusOK, acme.Org, "GET", "/api/v1/roles/"+id, nil).JSON(t, &role)
	if role.Name != "Helpdesk desk" || len(role.Permissions) != 1 || role.Permissions[0] != "devices:read" {
		t.Fatalf("the changed role: %+v", role)
	}
	edit.Set("name", "")
	must(t, v.post("/roles/"+id, edit), http.StatusBadRequest, "name cannot be empty")

	// A role users hold is not deleted; one nobody holds is.
	techID, _ := e.CreateUser("helpdesk@gale.test", access.LevelOrganization, acme.PartnerID, acme.OrgID, id)
	must(t, v.post("/roles/"+id+"/delete", url.Values{"csrf": {v.csrf}}), http.StatusConflict, "held by 1 user")
	must(t, v.get("/roles/"+id), http.StatusOK, `href="/users/`+techID+`"`)
	must(t, v.post("/users/"+techID+"/role", url.Values{"csrf": {v.csrf}, "roleId": {access.RoleOrgTechnician}}), http.StatusSeeOther)
	deleted := v.do(http.MethodPost, "/roles/"+id+"/delete", url.Values{}, hx(v))
	if deleted.status != http.StatusNoContent || deleted.header.Get("HX-Redirect") != "/roles" {
		t.Fatalf("delete through htmx: %d %v", deleted.status, deleted.header)
	}
	e.Must(http.StatusNotFound, acme.Org, "GET", "/api/v1/roles/"+id, nil)

	// Another organization's role.
	sameAsMissing(t, "a role's page", v.get("/roles/"+theirs.ID), v.get("/roles/"+missingID))
	sameAsMissing(t, "a role's editor", v.get("/roles/"+theirs.ID+"/edit"), v.get("/roles/"+missingID+"/edit"))
	sameAsMissing(t, "a role's change", v.post("/roles/"+theirs.ID, edit), v.post("/roles/"+missingID, edit))
	sameAsMissing(t, "a role's deletion", v.post("/roles/"+theirs.ID+"/delete", url.Values{"csrf": {v.csrf}}),
		v.post("/roles/"+missingID+"/delete", url.Values{"csrf": {v.csrf}}))
	e.Must(http.StatusOK, other.Org, "GET", "/api/v1/roles/"+theirs.ID, nil)

	// A technician reads roles but does not make them.
	tech := newVisitor(t, e)
	tech.signIn("helpdesk@gale.test", apptest.UserPassword)
	if p := tech.get("/roles"); p.status != http.StatusOK || strings.Contains(p.body, `href="/roles/new"`) {
		t.Fatalf("a technician's roles page: %d", p.status)
	}
	must(t, tech.get("/roles/new"), http.StatusForbidden)
	form.Set("csrf", tech.csrf)
	form.Set("name", "Mine")
	must(t, tech.post("/roles", form), http.StatusForbidden)

	// A form without the session's token changes nothing.
	must(t, v.post("/roles", url.Values{"name": {"No token"}, "scope": {"organization"}, "permissions": {"devices:read"}}),
		http.StatusForbidden, "security token")
	if p := v.get("/roles"); strings.Contains(p.body, "No token") {
		t.Fatal("a form without its CSRF token made a role")
	}
}

var apiKeySecret = regexp.MustCompile(`id="api-key-secret">(gk_[^<]+)</pre>`)

// An API key made in the console works for the API with what it was given, and its secret is
// shown only in the answer that made it.
func TestAPIKeyCreate(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	acme := e.NewTenant(admin, "Acme")
	other := e.NewTenant(admin, "Other")
	e.InsertDevice(apptest.DeviceRow{PartnerID: acme.PartnerID, OrgID: acme.OrgID, SiteID: acme.SiteID, Hostname: "ws-acme"})
	e.InsertDevice(apptest.DeviceRow{PartnerID: other.PartnerID, OrgID: other.OrgID, SiteID: other.SiteID, Hostname: "ws-other"})

	v := newVisitor(t, e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)
	created := v.post("/settings/api-keys", url.Values{"csrf": {v.csrf}, "name": {"Inventory sync"}, "preset": {""},
		"permissions": {"devices:read"}, "expiresAt": {"2999-12-31"}})
	must(t, created, http.StatusCreated, "shown only this once", "<code>devices:read</code>", "3000-01-01 00:00 UTC")
	m := apiKeySecret.FindStringSubmatch(created.body)
	if m == nil {
		t.Fatalf("no secret on the page:\n%s", created.body)
	}
	key := apptest.Key(m[1])
	res := e.Must(http.StatusOK, key, "GET", "/api/v1/devices", nil)
	if !strings.Contains(string(res.Body), "ws-acme") || strings.Contains(string(res.Body), "ws-other") {
		t.Fatalf("the key's device list: %s", res.Body)
	}
	e.Must(http.StatusForbidden, key, "GET", "/api/v1/scripts", nil)
	list := v.get("/settings")
	must(t, list, http.StatusOK, "Inventory sync")
	if strings.Contains(list.body, m[1]) {
		t.Fatal("the keys page shows a key's secret again")
	}

	// The read-only preset grants what the user can view, nothing more.
	ro := v.post("/settings/api-keys", url.Values{"csrf": {v.csrf}, "name": {"Reader"}, "preset": {"read"}})
	must(t, ro, http.StatusCreated, "<code>scripts:read</code>")
	if strings.Contains(ro.body, "devices:write") {
		t.Fatal("the read-only preset grants a write permission")
	}
	reader := apptest.Key(apiKeySecret.FindStringSubmatch(ro.body)[1])
	e.Must(http.StatusOK, reader, "GET", "/api/v1/scripts", nil)
	e.Must(http.StatusForbidden, reader, "POST", "/api/v1/scripts", map[string]any{"name": "x", "osTypes": []string{"linux"},
		"language": "sh", "content": "true"})

	must(t, v.post("/settings/api-keys", url.Values{"csrf": {v.csrf}, "name": {""}, "permissions": {"devices:read"}}),
		http.StatusBadRequest, "1 to 200 characters")
	must(t, v.post("/settings/api-keys", url.Values{"csrf": {v.csrf}, "name": {"None"}}), http.StatusBadRequest,
		"name at least one permission")
	must(t, v.post("/settings/api-keys", url.Values{"csrf": {v.csrf}, "name": {"Old"}, "permissions": {"devices:read"},
		"expiresAt": {"2001-01-01"}}), http.StatusBadRequest, "must be in the future")
	must(t, v.post("/settings/api-keys", url.Values{"csrf": {v.csrf}, "name": {"Bad"}, "permissions": {"devices:read"},
		"expiresAt": {"tomorrow"}}), http.StatusBadRequest)
	must(t, v.post("/settings/api-keys", url.Values{"csrf": {v.csrf}, "name": {"Bad"}, "permissions": {"billing:manage"}}),
		http.StatusForbidden)
	must(t, v.post("/settings/api-keys", url.Values{"name": {"No token"}, "permissions": {"devices:read"}}), http.StatusForbidden)

	// A technician may not make keys.
	e.CreateUser("acme-tech@gale.test", access.LevelOrganization, acme.PartnerID, acme.OrgID, access.RoleOrgTechnician)
	tech := newVisitor(t, e)
	tech.signIn("acme-tech@gale.test", apptest.UserPassword)
	must(t, tech.get("/settings/api-keys/new"), http.StatusForbidden)
	must(t, tech.post("/settings/api-keys", url.Values{"csrf": {tech.csrf}, "name": {"T"}, "permissions": {"devices:read"}}),
		http.StatusForbidden)
}

// receiver records what an outbound HTTP target gets, answering with status.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []*http.Request
	bodies [][]byte
	status int
}

func newReceiver(t *testing.T, status int) *receiver {
	rc := &receiver{status: status}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got, rc.bodies = append(rc.got, r), append(rc.bodies, b)
		rc.mu.Unlock()
		w.WriteHeader(rc.status)
		io.WriteString(w, "thanks")
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) last() (*http.Request, []byte, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.got) == 0 {
		return nil, nil, 0
	}
	return rc.got[len(rc.got)-1], rc.bodies[len(rc.bodies)-1], len(rc.got)
}

// Notification channels are made, changed, tested and deleted from the console; secrets
// left empty in the editor are kept; another organization's channel is not found.
func TestNotificationChannels(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	acme := e.NewTenant(admin, "Acme")
	other := e.NewTenant(admin, "Other")
	rc := newReceiver(t, http.StatusOK)
	var theirs struct {
		ID string `json:"id"`
	}
	e.Must(http.StatusCreated, other.Org, "POST", "/api/v1/alerts/channels", map[string]any{"name": "Their mail", "type": "email",
		"config": map[string]any{"recipients": []string{"ops@other.test"}}}).JSON(t, &theirs)

	v := newVisitor(t, e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)
	form := url.Values{"csrf": {v.csrf}, "type": {"webhook"}, "name": {"Ops hook"}, "orgId": {acme.OrgID}, "url": {rc.URL + "/hook"},
		"method": {"POST"}, "authType": {"bearer"}, "token": {"s3cret-token-value"}, "headers": {"X-Team: ops"}, "enabled": {"true"},
		"maxPerHour": {"30"}}
	p := v.post("/settings/channels", form)
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/settings/channels/") {
		t.Fatalf("create a channel: %d to %q\n%s", p.status, p.location, p.body)
	}
	id := strings.TrimPrefix(p.location, "/settings/channels/")
	var ch struct {
		Name     string `json:"name"`
		Enabled  bool   `json:"enabled"`
		OrgID    string `json:"orgId"`
		Throttle *struct {
			MaxPerHour int `json:"maxPerHour"`
		} `json:"throttle"`
		Config struct {
			URL       string   `json:"url"`
			Token     string   `json:"token"`
			Recipient []string `json:"recipients"`
		} `json:"config"`
	}
	e.Must(http.StatusOK, acme.Org, "GET", "/api/v1/alerts/channels/"+id, nil).JSON(t, &ch)
	if ch.Name != "Ops hook" || !ch.Enabled || ch.OrgID != acme.OrgID || ch.Throttle == nil || ch.Throttle.MaxPerHour != 30 ||
		ch.Config.URL != rc.URL+"/hook" {
		t.Fatalf("the channel: %+v", ch)
	}
	page := v.get("/settings/channels/" + id)
	must(t, page, http.StatusOK, "Ops hook", "<code>X-Team</code>", "Send test", "Nothing sent through this channel yet")
	if strings.Contains(page.body, "s3cret-token-value") {
		t.Fatal("the channel's page shows its token")
	}
	must(t, v.get("/settings/channels"), http.StatusOK, `href="/settings/channels/`+id+`"`, "Webhook")

	// A test from the page: through htmx, the outcome alone; the receiver got it with the token.
	tested := v.do(http.MethodPost, "/settings/channels/"+id+"/test", url.Values{}, hx(v))
	must(t, tested, http.StatusOK, "Test delivered", "succeeded", "HTTP 200")
	req, _, n := rc.last()
	if n != 1 || req.Header.Get("Authorization") != "Bearer s3cret-token-value" || req.Header.Get("X-Team") != "ops" {
		t.Fatalf("the receiver got %d requests, the last with %v", n, req.Header)
	}

	// The editor: a new name, disabled, no cap; the token left empty is kept.
	must(t, v.get("/settings/channels/"+id+"/edit"), http.StatusOK, `value="Ops hook"`, "X-Team: ****")
	edit := url.Values{"csrf": {v.csrf}, "name": {"Ops hook 2"}, "url": {rc.URL + "/hook2"}, "method": {"PUT"}, "authType": {"bearer"},
		"headers": {"X-Team: ****"}, "maxPerHour": {""}}
	must(t, v.post("/settings/channels/"+id, edit), http.StatusSeeOther)
	e.Must(http.StatusOK, acme.Org, "GET", "/api/v1/alerts/channels/"+id, nil).JSON(t, &ch)
	if ch.Name != "Ops hook 2" || ch.Enabled || ch.Throttle != nil || ch.Config.URL != rc.URL+"/hook2" {
		t.Fatalf("the changed channel: %+v", ch)
	}
	full := v.post("/settings/channels/"+id+"/test", url.Values{"csrf": {v.csrf}})
	must(t, full, http.StatusOK, "<h1>Ops hook 2</h1>", "Test delivered", `<span class="badge delivery-succeeded">succeeded</span>`)
	req, _, _ = rc.last()
	if req.Method != http.MethodPut || req.Header.Get("Authorization") != "Bearer s3cret-token-value" || req.Header.Get("X-Team") != "ops" {
		t.Fatalf("after the change the receiver got %s with %v", req.Method, req.Header)
	}

	// Bad input is refused with the form kept.
	bad := url.Values{"csrf": {v.csrf}, "type": {"webhook"}, "name": {"Bad"}, "url": {"ftp://example.com/x"}}
	must(t, v.post("/settings/channels", bad), http.StatusBadRequest, "https://", `value="Bad"`)
	bad = url.Values{"csrf": {v.csrf}, "type": {"email"}, "name": {""}, "recipients": {"ops@acme.test"}}
	must(t, v.post("/settings/channels", bad), http.StatusBadRequest, "1 to 200 characters")
	bad = url.Values{"csrf": {v.csrf}, "type": {"email"}, "name": {"Mail"}, "recipients": {"not an address"}}
	must(t, v.post("/settings/channels", bad), http.StatusBadRequest, "is not an email address")
	must(t, v.post("/settings/channels", url.Values{"csrf": {v.csrf}, "type": {"fax"}, "name": {"Fax"}}), http.StatusBadRequest)
	must(t, v.post("/settings/channels/"+id, url.Values{"csrf": {v.csrf}, "name": {"X"}, "url": {"not a url"}}), http.StatusBadRequest)
	must(t, v.post("/settings/channels/"+id, url.Values{"csrf": {v.csrf}, "name": {"X"}, "url": {rc.URL}, "maxPerHour": {"many"}}),
		http.StatusBadRequest)

	// Email, Slack: the other forms.
	mail := url.Values{"csrf": {v.csrf}, "type": {"email"}, "name": {"Mail"}, "recipients": {"ops@acme.test\nlead@acme.test"}, "enabled": {"true"}}
	p = v.post("/settings/channels", mail)
	must(t, p, http.StatusSeeOther)
	must(t, v.get(p.location), http.StatusOK, "ops@acme.test, lead@acme.test")
	slack := url.Values{"csrf": {v.csrf}, "type": {"slack"}, "name": {"Chat"}, "webhookUrl": {rc.URL + "/slack"}, "enabled": {"true"}}
	must(t, v.post("/settings/channels", slack), http.StatusSeeOther)

	// Another organization's channel.
	const missing = missingID
	sameAsMissing(t, "a channel's page", v.get("/settings/channels/"+theirs.ID), v.get("/settings/channels/"+missing))
	sameAsMissing(t, "a channel's editor", v.get("/settings/channels/"+theirs.ID+"/edit"), v.get("/settings/channels/"+missing+"/edit"))
	sameAsMissing(t, "a channel's change", v.post("/settings/channels/"+theirs.ID, edit), v.post("/settings/channels/"+missing, edit))
	for _, action := range []string{"/test", "/delete"} {
		sameAsMissing(t, "a channel's "+action, v.post("/settings/channels/"+theirs.ID+action, url.Values{"csrf": {v.csrf}}),
			v.post("/settings/channels/"+missing+action, url.Values{"csrf": {v.csrf}}))
	}
	if p := v.get("/settings/channels"); strings.Contains(p.body, "Their mail") {
		t.Fatal("the channels page lists another organization's channel")
	}
	e.Must(http.StatusOK, other.Org, "GET", "/api/v1/alerts/channels/"+theirs.ID, nil)

	// Deleting.
	must(t, v.post("/settings/channels/"+id+"/delete", url.Values{"csrf": {v.csrf}}), http.StatusSeeOther)
	e.Must(http.StatusNotFound, acme.Org, "GET", "/api/v1/alerts/channels/"+id, nil)

	// A viewer sees the channels but does not change them.
	e.CreateUser("acme-viewer@gale.test", access.LevelOrganization, acme.PartnerID, acme.OrgID, access.RoleOrgViewer)
	viewer := newVisitor(t, e)
	viewer.signIn("acme-viewer@gale.test", apptest.UserPassword)
	if p := viewer.get("/settings/channels"); p.status != http.StatusOK || strings.Contains(p.body, `href="/settings/channels/new"`) {
		t.Fatalf("a viewer's channels page: %d", p.status)
	}
	must(t, viewer.get("/settings/channels/new"), http.StatusForbidden)
	mail.Set("csrf", viewer.csrf)
	must(t, viewer.post("/settings/channels", mail), http.StatusForbidden)
}

var webhookSecret = regexp.MustCompile(`id="webhook-secret">(whsec_[^<]+)</pre>`)

// Webhooks are made, changed, tested, retried and deleted from the console; the signing
// secret is shown once and signs the deliveries; another organization's webhook is not
// found.
func TestWebhooks(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	acme := e.NewTenant(admin, "Acme")
	other := e.NewTenant(admin, "Other")
	rc := newReceiver(t, http.StatusOK)
	failing := newReceiver(t, http.StatusInternalServerError)
	var theirs struct {
		ID string `json:"id"`
	}
	e.Must(http.StatusCreated, other.Org, "POST", "/api/v1/webhooks", map[string]any{"name": "Their hook", "url": rc.URL,
		"events": []string{"alert.*"}}).JSON(t, &theirs)

	v := newVisitor(t, e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)
	form := url.Values{"csrf": {v.csrf}, "name": {"SIEM"}, "url": {rc.URL + "/in"}, "orgId": {acme.OrgID},
		"events": {"alert.*", "device.offline"}, "moreEvents": {"audit.user.invite"}, "headers": {"Authorization: Bearer abc"},
		"enabled": {"true"}}
	created := v.post("/settings/webhooks", form)
	must(t, created, http.StatusCreated, "Webhook created", "shown only this once", "<code>audit.user.invite</code>")
	m := webhookSecret.FindStringSubmatch(created.body)
	if m == nil {
		t.Fatalf("no secret on the page:\n%s", created.body)
	}
	secret := m[1]
	id := regexp.MustCompile(`action="/settings/webhooks/([0-9a-f-]+)/test"`).FindStringSubmatch(created.body)[1]
	var wh struct {
		Name    string            `json:"name"`
		URL     string            `json:"url"`
		Events  []string          `json:"events"`
		Enabled bool              `json:"enabled"`
		Headers map[string]string `json:"headers"`
	}
	e.Must(http.StatusOK, acme.Org, "GET", "/api/v1/webhooks/"+id, nil).JSON(t, &wh)
	if wh.Name != "SIEM" || wh.URL != rc.URL+"/in" || len(wh.Events) != 3 || !wh.Enabled || wh.Headers["Authorization"] != "****" {
		t.Fatalf("the webhook: %+v", wh)
	}
	page := v.get("/settings/webhooks/" + id)
	must(t, page, http.StatusOK, "<h1>SIEM</h1>", "whsec_****")
	if strings.Contains(page.body, secret) {
		t.Fatal("the webhook's page shows its secret again")
	}
	must(t, v.get("/settings/webhooks"), http.StatusOK, `href="/settings/webhooks/`+id+`"`)

	// A test is signed with the secret shown at creation.
	tested := v.do(http.MethodPost, "/settings/webhooks/"+id+"/test", url.Values{}, hx(v))
	must(t, tested, http.StatusOK, "Test delivered", "HTTP 200", "thanks")
	req, body, _ := rc.last()
	if req.Header.Get("X-Gale-Signature") != webhooks.Sign(secret, req.Header.Get("X-Gale-Timestamp"), body) ||
		req.Header.Get("Authorization") != "Bearer abc" || req.Header.Get("X-Gale-Event-Type") != "webhook.test" {
		t.Fatalf("the test delivery's headers: %v", req.Header)
	}
	must(t, v.get("/settings/webhooks/"+id), http.StatusOK, "<code>webhook.test</code>", `delivery-succeeded`)

	// The editor: another address that fails, every event, disabled; the header stays.
	must(t, v.get("/settings/webhooks/"+id+"/edit"), http.StatusOK, `value="alert.*" checked`, `value="audit.user.invite"`)
	edit := url.Values{"csrf": {v.csrf}, "name": {"SIEM 2"}, "url": {failing.URL}, "events": {"*"}}
	must(t, v.post("/settings/webhooks/"+id, edit), http.StatusSeeOther)
	e.Must(http.StatusOK, acme.Org, "GET", "/api/v1/webhooks/"+id, nil).JSON(t, &wh)
	if wh.Name != "SIEM 2" || wh.URL != failing.URL || len(wh.Events) != 1 || wh.Events[0] != "*" || wh.Enabled ||
		wh.Headers["Authorization"] != "****" {
		t.Fatalf("the changed webhook: %+v", wh)
	}
	failed := v.post("/settings/webhooks/"+id+"/test", url.Values{"csrf": {v.csrf}})
	must(t, failed, http.StatusOK, "Test failed", "HTTP 500", "Send again")
	var deliveries struct {
		Data []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"data"`
	}
	e.Must(http.StatusOK, acme.Org, "GET", "/api/v1/webhooks/"+id+"/deliveries", nil).JSON(t, &deliveries)
	if len(deliveries.Data) != 2 || deliveries.Data[0].Status != "dead" || deliveries.Data[1].Status != "succeeded" {
		t.Fatalf("the deliveries: %+v", deliveries.Data)
	}
	dead, ok := deliveries.Data[0].ID, deliveries.Data[1].ID
	must(t, v.post("/settings/webhooks/"+id+"/retry/"+ok, url.Values{"csrf": {v.csrf}}), http.StatusConflict)
	must(t, v.post("/settings/webhooks/"+id+"/retry/"+dead, url.Values{"csrf": {v.csrf}}), http.StatusSeeOther)
	e.Must(http.StatusOK, acme.Org, "GET", "/api/v1/webhooks/"+id+"/deliveries", nil).JSON(t, &deliveries)
	if deliveries.Data[0].Status == "dead" {
		t.Fatal("the retried delivery is still dead")
	}
	must(t, v.post("/settings/webhooks/"+id, url.Values{"csrf": {v.csrf}, "name": {"SIEM 2"}, "url": {failing.URL},
		"events": {"*"}, "clearHeaders": {"true"}}), http.StatusSeeOther)
	wh.Headers = nil
	e.Must(http.StatusOK, acme.Org, "GET", "/api/v1/webhooks/"+id, nil).JSON(t, &wh)
	if len(wh.Headers) != 0 {
		t.Fatalf("the headers after removing them: %v", wh.Headers)
	}

	// A new secret, shown once.
	rotated := v.post("/settings/webhooks/"+id+"/rotate-secret", url.Values{"csrf": {v.csrf}})
	m = webhookSecret.FindStringSubmatch(rotated.body)
	if rotated.status != http.StatusOK || m == nil || m[1] == secret {
		t.Fatalf("rotate: %d\n%s", rotated.status, rotated.body)
	}

	// Bad input is refused with the form kept.
	bad := url.Values{"csrf": {v.csrf}, "name": {"Bad"}, "url": {"ftp://example.com/in"}, "events": {"alert.*"}}
	must(t, v.post("/settings/webhooks", bad), http.StatusBadRequest, "https://", `value="Bad"`)
	bad = url.Values{"csrf": {v.csrf}, "name": {""}, "url": {rc.URL}, "events": {"alert.*"}}
	must(t, v.post("/settings/webhooks", bad), http.StatusBadRequest, "1 to 200 characters")
	bad = url.Values{"csrf": {v.csrf}, "name": {"No events"}, "url": {rc.URL}}
	must(t, v.post("/settings/webhooks", bad), http.StatusBadRequest, "at least one event")
	bad = url.Values{"csrf": {v.csrf}, "name": {"Odd"}, "url": {rc.URL}, "moreEvents": {"Not An Event"}}
	must(t, v.post("/settings/webhooks", bad), http.StatusBadRequest, "is not an event type")
	bad = url.Values{"csrf": {v.csrf}, "name": {"Hdr"}, "url": {rc.URL}, "events": {"alert.*"}, "headers": {"no colon here"}}
	must(t, v.post("/settings/webhooks", bad), http.StatusBadRequest, "Name: value")
	must(t, v.post("/settings/webhooks/"+id, url.Values{"csrf": {v.csrf}, "name": {"X"}, "url": {rc.URL}}), http.StatusBadRequest,
		"at least one event")
	must(t, v.post("/settings/webhooks/"+id, url.Values{"csrf": {v.csrf}, "name": {"X"}, "url": {"mailto:x@y"}, "events": {"*"}}),
		http.StatusBadRequest)

	// Another organization's webhook.
	const missing = missingID
	sameAsMissing(t, "a webhook's page", v.get("/settings/webhooks/"+theirs.ID), v.get("/settings/webhooks/"+missing))
	sameAsMissing(t, "a webhook's editor", v.get("/settings/webhooks/"+theirs.ID+"/edit"), v.get("/settings/webhooks/"+missing+"/edit"))
	sameAsMissing(t, "a webhook's change", v.post("/settings/webhooks/"+theirs.ID, edit), v.post("/settings/webhooks/"+missing, edit))
	for _, action := range []string{"/test", "/rotate-secret", "/delete", "/retry/" + dead} {
		sameAsMissing(t, "a webhook's "+action, v.post("/settings/webhooks/"+theirs.ID+action, url.Values{"csrf": {v.csrf}}),
			v.post("/settings/webhooks/"+missing+action, url.Values{"csrf": {v.csrf}}))
	}
	if p := v.get("/settings/webhooks"); strings.Contains(p.body, "Their hook") {
		t.Fatal("the webhooks page lists another organization's webhook")
	}
	e.Must(http.StatusOK, other.Org, "GET", "/api/v1/webhooks/"+theirs.ID, nil)

	// Deleting, through htmx after the confirmation.
	deleted := v.do(http.MethodPost, "/settings/webhooks/"+id+"/delete", url.Values{}, hx(v))
	if deleted.status != http.StatusNoContent || deleted.header.Get("HX-Redirect") != "/settings/webhooks" {
		t.Fatalf("delete through htmx: %d %v", deleted.status, deleted.header)
	}
	e.Must(http.StatusNotFound, acme.Org, "GET", "/api/v1/webhooks/"+id, nil)

	// A technician has no access to webhooks.
	e.CreateUser("acme-tech@gale.test", access.LevelOrganization, acme.PartnerID, acme.OrgID, access.RoleOrgTechnician)
	tech := newVisitor(t, e)
	tech.signIn("acme-tech@gale.test", apptest.UserPassword)
	if p := tech.get("/settings"); strings.Contains(p.body, `href="/settings/webhooks"`) {
		t.Fatal("a technician's settings offer the webhooks tab")
	}
	must(t, tech.get("/settings/webhooks"), http.StatusForbidden)
	form.Set("csrf", tech.csrf)
	must(t, tech.post("/settings/webhooks", form), http.StatusForbidden)
}
