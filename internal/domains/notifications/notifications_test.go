package notifications_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/notifications"

	"gale/internal/platform/access"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

type notification struct {
	ID           string  `json:"id"`
	UserID       string  `json:"userId"`
	Type         string  `json:"type"`
	Title        string  `json:"title"`
	Body         string  `json:"body"`
	Severity     *string `json:"severity"`
	ResourceType string  `json:"resourceType"`
	ResourceID   string  `json:"resourceId"`
	Link         string  `json:"link"`
	ReadAt       *string `json:"readAt"`
}

type list struct {
	Data       []notification `json:"data"`
	Pagination struct {
		HasMore bool   `json:"hasMore"`
		Cursor  string `json:"cursor"`
	} `json:"pagination"`
}

type env struct {
	*apptest.Env
	admin apptest.Caller
	ten   apptest.Tenant
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := apptest.New(t)
	admin := e.Admin()
	return &env{Env: e, admin: admin, ten: e.NewTenant(admin, "Alpha")}
}

// user creates and signs in a user; the sign-in rate limit of the test client's address is
// reset first, as tests sign in many users.
func (x *env) user(email string, level access.Level, partnerID, orgID, roleID string) (string, apptest.Caller) {
	x.T.Helper()
	x.exec(`DELETE FROM rate_limits`)
	return x.CreateUser(email, level, partnerID, orgID, roleID)
}

// exec changes the database beside the API, then tells the node, as the gale command does,
// so that principals it cached do not outlive the change.
func (x *env) exec(q string, args ...any) {
	x.T.Helper()
	if _, err := x.App.DB.SQL.Exec(q, args...); err != nil {
		x.T.Fatalf("%s: %v", q, err)
	}
	x.App.Wrote(context.Background())
}

// insertAlert adds an active alert of the organization straight into the database.
func (x *env) insertAlert(partnerID, orgID, title string) string {
	x.T.Helper()
	id, now := store.NewID(), store.Now()
	x.exec(`INSERT INTO alerts (id, partner_id, org_id, severity, status, title, message, context, triggered_at, updated_at)
		VALUES ($1, $2, $3, 'high', 'active', $4, 'disk almost full', '{}', $5, $5)`, id, partnerID, orgID, title, now)
	return id
}

// dispatch runs the event consumers once.
func (x *env) dispatch() {
	x.T.Helper()
	if err := x.App.Events.RunOnce(context.Background()); err != nil {
		x.T.Fatalf("dispatch: %v", err)
	}
}

func (x *env) list(c apptest.Caller, query string) list {
	x.T.Helper()
	var l list
	x.Must(200, c, "GET", api+"/notifications"+query, nil).JSON(x.T, &l)
	return l
}

func (x *env) unread(c apptest.Caller) int {
	x.T.Helper()
	var out struct {
		Count int `json:"count"`
	}
	x.Must(200, c, "GET", api+"/notifications/unread-count", nil).JSON(x.T, &out)
	return out.Count
}

func TestRecipients(t *testing.T) {
	x := newEnv(t)
	x.exec(`DELETE FROM rate_limits`)
	other := x.NewTenant(x.admin, "Beta")
	org2 := x.CreateOrg(x.admin, x.ten.PartnerID, "Alpha Second")
	_, billing := x.user("billing@gale.test", access.LevelPartner, x.ten.PartnerID, "", access.RolePartnerBillingViewer)
	_, viewer := x.user("viewer@gale.test", access.LevelPartner, x.ten.PartnerID, "", access.RolePartnerViewer)
	selID, selected := x.user("selected@gale.test", access.LevelPartner, x.ten.PartnerID, "", access.RolePartnerTechnician)
	x.exec(`UPDATE users SET org_access = 'selected' WHERE id = $1`, selID)
	x.exec(`INSERT INTO user_org_access (user_id, org_id) VALUES ($1, $2)`, selID, org2)
	noneID, none := x.user("none@gale.test", access.LevelPartner, x.ten.PartnerID, "", access.RolePartnerTechnician)
	x.exec(`UPDATE users SET org_access = 'none' WHERE id = $1`, noneID)
	_, orgViewer2 := x.user("org2@gale.test", access.LevelOrganization, x.ten.PartnerID, org2, access.RoleOrgViewer)
	disabledID, disabled := x.user("disabled@gale.test", access.LevelPartner, x.ten.PartnerID, "", "")

	// An alert of the tenant's first organization, acknowledged by the system administrator.
	alertID := x.insertAlert(x.ten.PartnerID, x.ten.OrgID, "Disk C: 95%")
	x.Must(200, x.admin, "POST", api+"/alerts/"+alertID+"/acknowledge", nil)
	// The disabled user's session still works until it is disabled; check it sees nothing after.
	x.exec(`UPDATE users SET status = 'disabled' WHERE id = $1`, disabledID)
	x.dispatch()

	for name, c := range map[string]apptest.Caller{"system admin": x.admin, "partner admin": x.ten.Partner, "org admin": x.ten.Org,
		"partner viewer": viewer} {
		l := x.list(c, "")
		if len(l.Data) != 1 {
			t.Fatalf("%s: %d notifications, want 1", name, len(l.Data))
		}
		n := l.Data[0]
		if n.Type != "alert.acknowledged" || n.ResourceType != "alert" || n.ResourceID != alertID || n.Link != "/alerts/"+alertID ||
			n.Title != "Acknowledged: Disk C: 95%" || n.Body != "disk almost full" || n.Severity == nil || *n.Severity != "high" || n.ReadAt != nil {
			t.Fatalf("%s: notification %+v", name, n)
		}
	}
	for name, c := range map[string]apptest.Caller{"no alerts:read": billing, "other organization selected": selected,
		"organization access none": none, "other organization's user": orgViewer2, "other partner": other.Partner,
		"other partner's org": other.Org} {
		if l := x.list(c, ""); len(l.Data) != 0 {
			t.Fatalf("%s: got %d notifications, want none", name, len(l.Data))
		}
	}
	// The rows themselves, not only what the API shows: no notification was written for them.
	for _, email := range []string{"billing@gale.test", "selected@gale.test", "none@gale.test", "org2@gale.test",
		"beta-partner@gale.test", "beta-org@gale.test", "disabled@gale.test"} {
		var n int
		if err := x.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM notifications n JOIN users u ON u.id = n.user_id WHERE u.email = $1`,
			email).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s got %d notifications (%v)", email, n, err)
		}
	}
	_ = disabled

	// The selected-organizations user does get alerts of its organization.
	alert2 := x.insertAlert(x.ten.PartnerID, org2, "CPU 99%")
	x.Must(200, x.admin, "POST", api+"/alerts/"+alert2+"/resolve", nil)
	x.dispatch()
	if l := x.list(selected, ""); len(l.Data) != 1 || l.Data[0].ResourceID != alert2 || l.Data[0].Type != "alert.resolved" {
		t.Fatalf("selected user: %+v", l.Data)
	}
	if l := x.list(orgViewer2, ""); len(l.Data) != 1 {
		t.Fatalf("org2 viewer: %+v", l.Data)
	}
	if l := x.list(x.ten.Org, ""); len(l.Data) != 1 {
		t.Fatalf("first organization's admin sees the second organization's alert: %+v", l.Data)
	}
	// Access narrowed later: the notification is hidden (404) while the organization is out
	// of scope, and so are alert notifications of a role that lost alerts:read.
	selNote := x.list(selected, "").Data[0].ID
	x.exec(`DELETE FROM user_org_access WHERE user_id = $1`, selID)
	if l := x.list(selected, ""); len(l.Data) != 0 {
		t.Fatalf("selected user after losing the organization: %+v", l.Data)
	}
	if r := x.Do(selected, "PATCH", api+"/notifications/"+selNote, map[string]any{"read": true}); r.Status != 404 {
		t.Fatalf("mark after losing the organization: %d", r.Status)
	}
	if n := x.unread(selected); n != 0 {
		t.Fatalf("unread after losing the organization: %d", n)
	}
	if l := x.list(viewer, ""); len(l.Data) != 2 {
		t.Fatalf("viewer: %d notifications, want 2", len(l.Data))
	}
	x.exec(`UPDATE users SET role_id = $1 WHERE email = 'viewer@gale.test'`, access.RolePartnerBillingViewer)
	if l := x.list(viewer, ""); len(l.Data) != 0 || x.unread(viewer) != 0 {
		t.Fatalf("viewer without alerts:read still sees %d notifications", len(l.Data))
	}
	// Dispatching again writes nothing twice.
	x.dispatch()
	if l := x.list(x.ten.Partner, ""); len(l.Data) != 2 || l.Data[0].ResourceID != alert2 {
		t.Fatalf("partner admin, newest first: %+v", l.Data)
	}
}

func TestReadDeleteClear(t *testing.T) {
	x := newEnv(t)
	var ids []string
	for i := 0; i < 3; i++ {
		id := x.insertAlert(x.ten.PartnerID, x.ten.OrgID, "alert")
		x.Must(200, x.admin, "POST", api+"/alerts/"+id+"/acknowledge", nil)
		ids = append(ids, id)
	}
	x.dispatch()
	me := x.ten.Partner
	if n := x.unread(me); n != 3 {
		t.Fatalf("unread = %d, want 3", n)
	}
	l := x.list(me, "?limit=2")
	if len(l.Data) != 2 || !l.Pagination.HasMore || l.Data[0].ResourceID != ids[2] {
		t.Fatalf("first page: %+v", l)
	}
	rest := x.list(me, "?limit=2&cursor="+l.Pagination.Cursor)
	if len(rest.Data) != 1 || rest.Pagination.HasMore || rest.Data[0].ResourceID != ids[0] {
		t.Fatalf("second page: %+v", rest)
	}
	first := l.Data[0].ID
	var got notification
	x.Must(200, me, "PATCH", api+"/notifications/"+first, map[string]any{"read": true}).JSON(t, &got)
	if got.ReadAt == nil {
		t.Fatal("readAt not set")
	}
	if n := x.unread(me); n != 2 {
		t.Fatalf("unread after read = %d", n)
	}
	if u := x.list(me, "?unread=true"); len(u.Data) != 2 {
		t.Fatalf("unread filter: %d", len(u.Data))
	}
	x.Must(200, me, "PATCH", api+"/notifications/"+first, map[string]any{"read": false}).JSON(t, &got)
	if got.ReadAt != nil || x.unread(me) != 3 {
		t.Fatal("mark unread did not clear readAt")
	}

	// Another user's notification is 404 on every route, and untouched.
	other := x.ten.Org
	if r := x.Do(other, "PATCH", api+"/notifications/"+first, map[string]any{"read": true}); r.Status != 404 {
		t.Fatalf("other user's mark: %d", r.Status)
	}
	if r := x.Do(other, "DELETE", api+"/notifications/"+first, nil); r.Status != 404 {
		t.Fatalf("other user's delete: %d", r.Status)
	}
	var cleared struct {
		Deleted int `json:"deleted"`
	}
	x.Must(200, other, "DELETE", api+"/notifications", nil).JSON(t, &cleared)
	if cleared.Deleted != 3 || x.unread(me) != 3 {
		t.Fatalf("other's clear deleted %d; mine unread %d", cleared.Deleted, x.unread(me))
	}

	x.Must(204, me, "DELETE", api+"/notifications/"+first, nil)
	if r := x.Do(me, "DELETE", api+"/notifications/"+first, nil); r.Status != 404 {
		t.Fatalf("second delete: %d", r.Status)
	}
	x.Must(200, me, "DELETE", api+"/notifications", nil).JSON(t, &cleared)
	if cleared.Deleted != 2 || x.unread(me) != 0 || len(x.list(me, "").Data) != 0 {
		t.Fatalf("clear: deleted %d", cleared.Deleted)
	}
}

func TestAPIKeyForbidden(t *testing.T) {
	x := newEnv(t)
	var out struct {
		Key string `json:"key"`
	}
	x.Must(201, x.ten.Partner, "POST", api+"/api-keys", map[string]any{"name": "k", "permissions": []string{"alerts:read"}}).JSON(t, &out)
	key := apptest.Key(out.Key)
	for _, r := range []struct{ method, path string }{{"GET", "/notifications"}, {"GET", "/notifications/unread-count"},
		{"DELETE", "/notifications"}} {
		resp := x.Do(key, r.method, api+r.path, nil)
		if resp.Status != 403 {
			t.Fatalf("%s %s with an API key: %d", r.method, r.path, resp.Status)
		}
	}
}

// TestRuleTriggeredAlertNotifies: a heartbeat crossing a rule's threshold opens an alert
// whose alert.triggered event becomes a notification.
func TestRuleTriggeredAlertNotifies(t *testing.T) {
	x := newEnv(t)
	var k struct {
		Key    string `json:"key"`
		Secret string `json:"enrollmentSecret"`
	}
	x.Must(201, x.ten.Partner, "POST", api+"/enrollment-keys", map[string]any{"orgId": x.ten.OrgID, "name": "test", "maxUsage": 1,
		"issueEnrollmentSecret": true}).JSON(t, &k)
	var dev agentproto.EnrollResponse
	x.Must(201, apptest.Anonymous, "POST", api+"/agents/enroll", agentproto.EnrollRequest{EnrollmentKey: k.Key,
		EnrollmentSecret: k.Secret, Hostname: "web-01", OSType: "linux", OSVersion: "12", Architecture: "amd64",
		AgentVersion: "1.0.0"}).JSON(t, &dev)
	x.Must(201, x.ten.Partner, "POST", api+"/alerts/rules", map[string]any{"name": "cpu", "severity": "critical",
		"titleTemplate": "CPU {{value}}% on {{hostname}}",
		"conditions":    map[string]any{"type": "threshold", "metric": "cpuPercent", "operator": "gt", "value": 90}})
	x.Must(200, apptest.Caller{Token: dev.AuthToken}, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat",
		agentproto.Heartbeat{AgentVersion: "1.0.0", Metrics: &agentproto.Metrics{CPUPercent: 97, RAMPercent: 40, DiskPercent: 50}})
	x.dispatch()
	l := x.list(x.ten.Org, "")
	if len(l.Data) != 1 || l.Data[0].Type != "alert.triggered" || l.Data[0].Severity == nil || *l.Data[0].Severity != "critical" ||
		!strings.HasPrefix(l.Data[0].Title, "Alert: CPU 97") {
		t.Fatalf("notifications: %+v", l.Data)
	}
	var alert struct {
		DeviceID string `json:"deviceId"`
	}
	x.Must(200, x.ten.Org, "GET", api+l.Data[0].Link, nil).JSON(t, &alert)
	if alert.DeviceID != dev.DeviceID {
		t.Fatalf("link leads to %+v", alert)
	}
}

func TestPurge(t *testing.T) {
	x := newEnv(t)
	id := x.insertAlert(x.ten.PartnerID, x.ten.OrgID, "old")
	x.Must(200, x.admin, "POST", api+"/alerts/"+id+"/acknowledge", nil)
	id2 := x.insertAlert(x.ten.PartnerID, x.ten.OrgID, "new")
	x.Must(200, x.admin, "POST", api+"/alerts/"+id2+"/acknowledge", nil)
	x.dispatch()
	x.exec(`UPDATE notifications SET created_at = $1 WHERE resource_id = $2`, store.Now().Add(-91*24*time.Hour), id)
	if _, err := app.Service[*notifications.Service](x.App).Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l := x.list(x.ten.Partner, ""); len(l.Data) != 1 || l.Data[0].ResourceID != id2 {
		t.Fatalf("after purge: %+v", l.Data)
	}
}
