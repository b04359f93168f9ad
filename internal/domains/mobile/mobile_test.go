package mobile_test

import (
	"sync"
	"testing"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

const api = "/api/v1"

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

func (x *env) exec(q string, args ...any) {
	x.T.Helper()
	if _, err := x.App.DB.SQL.Exec(q, args...); err != nil {
		x.T.Fatalf("%s: %v", q, err)
	}
}

// user creates and signs in a user, resetting the sign-in rate limit first.
func (x *env) user(email string, level access.Level, partnerID, orgID, roleID string) (string, apptest.Caller) {
	x.T.Helper()
	x.exec(`DELETE FROM rate_limits`)
	return x.CreateUser(email, level, partnerID, orgID, roleID)
}

func (x *env) device(ten apptest.Tenant, hostname, status string) string {
	return x.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: hostname, Status: status})
}

func (x *env) alert(ten apptest.Tenant, deviceID, status, severity string) string {
	x.T.Helper()
	id, now := store.NewID(), store.Now()
	var resolved any
	if status == "resolved" {
		resolved = now
	}
	x.exec(`INSERT INTO alerts (id, partner_id, org_id, device_id, severity, status, title, message, context, triggered_at, resolved_at,
		updated_at) VALUES ($1, $2, $3, $4, $5, $6, 'test', '', '{}', $7, $8, $7)`, id, ten.PartnerID, ten.OrgID, deviceID, severity,
		status, now, resolved)
	return id
}

type mobileDevice struct {
	ID             string  `json:"id"`
	Hostname       string  `json:"hostname"`
	Status         string  `json:"status"`
	OSType         string  `json:"osType"`
	LastSeen       *string `json:"lastSeen"`
	OrgName        string  `json:"orgName"`
	OpenAlertCount int     `json:"openAlertCount"`
}

type deviceList struct {
	Data       []mobileDevice `json:"data"`
	Pagination struct {
		HasMore bool   `json:"hasMore"`
		Cursor  string `json:"cursor"`
	} `json:"pagination"`
}

func TestDevicesSummaryAndTenancy(t *testing.T) {
	x := newEnv(t)
	x.exec(`DELETE FROM rate_limits`)
	other := x.NewTenant(x.admin, "Beta")
	d1 := x.device(x.ten, "alpha-db", "online")
	d2 := x.device(x.ten, "alpha-web", "online")
	x.device(x.ten, "beta-files", "offline")
	foreign := x.device(other, "zeta-01", "online")
	x.alert(x.ten, d1, "active", "high")
	x.alert(x.ten, d1, "acknowledged", "critical")
	x.alert(x.ten, d1, "resolved", "high")
	x.alert(x.ten, d2, "suppressed", "low")
	x.alert(other, foreign, "active", "critical")

	var l deviceList
	x.Must(200, x.ten.Partner, "GET", api+"/mobile/devices?limit=2", nil).JSON(t, &l)
	if len(l.Data) != 2 || !l.Pagination.HasMore || l.Data[0].Hostname != "alpha-db" || l.Data[1].Hostname != "alpha-web" {
		t.Fatalf("first page: %+v", l)
	}
	if l.Data[0].OpenAlertCount != 2 || l.Data[1].OpenAlertCount != 1 || l.Data[0].OrgName != "Alpha Customer" ||
		l.Data[0].OSType != "linux" || l.Data[0].LastSeen == nil || l.Data[0].Status != "online" {
		t.Fatalf("rows: %+v", l.Data)
	}
	var rest deviceList
	x.Must(200, x.ten.Partner, "GET", api+"/mobile/devices?limit=2&cursor="+l.Pagination.Cursor, nil).JSON(t, &rest)
	if len(rest.Data) != 1 || rest.Data[0].Hostname != "beta-files" || rest.Pagination.HasMore {
		t.Fatalf("second page: %+v", rest)
	}
	x.Must(200, x.ten.Partner, "GET", api+"/mobile/devices?search=WEB", nil).JSON(t, &l)
	if len(l.Data) != 1 || l.Data[0].ID != d2 {
		t.Fatalf("search: %+v", l.Data)
	}
	x.Must(200, other.Partner, "GET", api+"/mobile/devices", nil).JSON(t, &l)
	if len(l.Data) != 1 || l.Data[0].ID != foreign {
		t.Fatalf("other tenant: %+v", l.Data)
	}

	// Another tenant's device is 404 on every device route.
	for _, r := range []struct{ method, path string }{{"GET", "/mobile/devices/" + foreign}, {"GET", "/mobile/devices/" + foreign + "/settings"},
		{"POST", "/mobile/devices/" + foreign + "/actions"}} {
		var body any
		if r.method == "POST" {
			body = map[string]any{"action": "refresh_inventory"}
		}
		if resp := x.Do(x.ten.Partner, r.method, api+r.path, body); resp.Status != 404 {
			t.Fatalf("%s %s of another tenant: %d", r.method, r.path, resp.Status)
		}
	}

	// An organization user does not reach a device of another organization of its partner.
	org2 := x.CreateOrg(x.admin, x.ten.PartnerID, "Alpha Second")
	var site2 string
	if err := x.App.DB.SQL.QueryRow(`SELECT id FROM sites WHERE org_id = $1`, org2).Scan(&site2); err != nil {
		t.Fatal(err)
	}
	sibling := x.InsertDevice(apptest.DeviceRow{PartnerID: x.ten.PartnerID, OrgID: org2, SiteID: site2, Hostname: "sibling"})
	if r := x.Do(x.ten.Org, "GET", api+"/mobile/devices/"+sibling, nil); r.Status != 404 {
		t.Fatalf("org user, sibling organization's device: %d", r.Status)
	}
	x.Must(200, x.ten.Org, "GET", api+"/mobile/devices", nil).JSON(t, &l)
	if len(l.Data) != 3 {
		t.Fatalf("org user's devices: %d, want 3", len(l.Data))
	}

	var detail struct {
		Device struct {
			ID       string `json:"id"`
			Hostname string `json:"hostname"`
		} `json:"device"`
		OrgName       string           `json:"orgName"`
		SiteName      string           `json:"siteName"`
		RecentMetrics []map[string]any `json:"recentMetrics"`
		OpenAlerts    []struct {
			Status string `json:"status"`
		} `json:"openAlerts"`
	}
	x.Must(200, x.ten.Org, "GET", api+"/mobile/devices/"+d1, nil).JSON(t, &detail)
	if detail.Device.ID != d1 || detail.OrgName != "Alpha Customer" || detail.SiteName == "" || len(detail.OpenAlerts) != 2 ||
		detail.RecentMetrics == nil {
		t.Fatalf("detail: %+v", detail)
	}

	type settings struct {
		OrgName      string   `json:"orgName"`
		SiteName     string   `json:"siteName"`
		AgentVersion string   `json:"agentVersion"`
		Actions      []string `json:"actions"`
		Permissions  struct {
			Execute bool `json:"execute"`
		} `json:"permissions"`
	}
	var st settings
	x.Must(200, x.ten.Partner, "GET", api+"/mobile/devices/"+d1+"/settings", nil).JSON(t, &st)
	if len(st.Actions) != 4 || !st.Permissions.Execute || st.OrgName != "Alpha Customer" || st.SiteName == "" {
		t.Fatalf("admin settings: %+v", st)
	}
	_, viewer := x.user("viewer@gale.test", access.LevelPartner, x.ten.PartnerID, "", access.RolePartnerViewer)
	x.Must(200, viewer, "GET", api+"/mobile/devices/"+d1+"/settings", nil).JSON(t, &st)
	if len(st.Actions) != 0 || st.Permissions.Execute {
		t.Fatalf("viewer settings: %+v", st)
	}

	type summary struct {
		Devices struct {
			Total, Online, Offline int
		} `json:"devices"`
		Alerts struct {
			Total      int            `json:"total"`
			BySeverity map[string]int `json:"bySeverity"`
		} `json:"alerts"`
		UnreadNotifications int `json:"unreadNotifications"`
	}
	var sum summary
	x.Must(200, x.ten.Partner, "GET", api+"/mobile/summary", nil).JSON(t, &sum)
	if sum.Devices.Total != 4 || sum.Devices.Online != 3 || sum.Devices.Offline != 1 || sum.Alerts.Total != 3 ||
		sum.Alerts.BySeverity["critical"] != 1 || sum.Alerts.BySeverity["high"] != 1 || sum.Alerts.BySeverity["low"] != 1 {
		t.Fatalf("summary: %+v", sum)
	}
	x.Must(200, x.ten.Org, "GET", api+"/mobile/summary", nil).JSON(t, &sum)
	if sum.Devices.Total != 3 || sum.Devices.Online != 2 {
		t.Fatalf("org user's summary: %+v", sum)
	}
	// Unread notifications: the acknowledge below makes one for the partner admin.
	open := x.alert(x.ten, d2, "active", "medium")
	x.Must(200, x.admin, "POST", api+"/mobile/alerts/"+open+"/acknowledge", nil)
	if err := x.App.Events.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	x.Must(200, x.ten.Partner, "GET", api+"/mobile/summary", nil).JSON(t, &sum)
	if sum.UnreadNotifications != 1 || sum.Alerts.Total != 4 {
		t.Fatalf("summary after acknowledge: %+v", sum)
	}

	// API keys cannot use the mobile API.
	var key struct {
		Key string `json:"key"`
	}
	x.Must(201, x.ten.Partner, "POST", api+"/api-keys", map[string]any{"name": "k", "permissions": []string{"devices:read"}}).JSON(t, &key)
	for _, r := range []struct {
		method, path string
		body         any
	}{{"GET", "/mobile/devices", nil}, {"GET", "/mobile/summary", nil},
		{"POST", "/mobile/notifications/register", map[string]any{"token": "k", "platform": "ios"}}} {
		if resp := x.Do(apptest.Key(key.Key), r.method, api+r.path, r.body); resp.Status != 403 {
			t.Fatalf("API key %s %s: %d", r.method, r.path, resp.Status)
		}
	}
}

// race sends the same request from n callers at once and returns the statuses.
func (x *env) race(n int, c apptest.Caller, path string) map[int]int {
	var mu sync.Mutex
	out := map[int]int{}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := x.Do(c, "POST", path, nil)
			mu.Lock()
			out[r.Status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func TestAlertRaces(t *testing.T) {
	x := newEnv(t)
	x.exec(`DELETE FROM rate_limits`)
	other := x.NewTenant(x.admin, "Beta")
	dev := x.device(x.ten, "web-01", "online")
	a1 := x.alert(x.ten, dev, "active", "high")
	a2 := x.alert(x.ten, dev, "acknowledged", "high")
	done := x.alert(x.ten, dev, "resolved", "high")

	var inbox struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	x.Must(200, x.ten.Partner, "GET", api+"/mobile/alerts/inbox", nil).JSON(t, &inbox)
	if len(inbox.Data) != 2 || inbox.Data[0].ID != a2 || inbox.Data[1].ID != a1 {
		t.Fatalf("inbox: %+v", inbox.Data)
	}
	x.Must(200, other.Partner, "GET", api+"/mobile/alerts/inbox", nil).JSON(t, &inbox)
	if len(inbox.Data) != 0 {
		t.Fatalf("other tenant's inbox: %+v", inbox.Data)
	}
	for _, p := range []string{"/mobile/alerts/" + a1 + "/acknowledge", "/mobile/alerts/" + a1 + "/resolve"} {
		if r := x.Do(other.Partner, "POST", api+p, nil); r.Status != 404 {
			t.Fatalf("%s by another tenant: %d", p, r.Status)
		}
	}

	if got := x.race(10, x.ten.Partner, api+"/mobile/alerts/"+a1+"/acknowledge"); got[200] != 1 || got[409] != 9 {
		t.Fatalf("acknowledge race: %v", got)
	}
	if got := x.race(10, x.ten.Partner, api+"/mobile/alerts/"+a2+"/resolve"); got[200] != 1 || got[409] != 9 {
		t.Fatalf("resolve race: %v", got)
	}
	if r := x.Do(x.ten.Partner, "POST", api+"/mobile/alerts/"+done+"/resolve", map[string]any{"note": "again"}); r.Status != 409 {
		t.Fatalf("resolve of a resolved alert: %d", r.Status)
	}
	if r := x.Do(x.ten.Partner, "POST", api+"/mobile/alerts/"+a2+"/acknowledge", nil); r.Status != 409 {
		t.Fatalf("acknowledge of a resolved alert: %d", r.Status)
	}
	var status string
	if err := x.App.DB.SQL.QueryRow(`SELECT status FROM alerts WHERE id = $1`, a1).Scan(&status); err != nil || status != "acknowledged" {
		t.Fatalf("a1 status %q (%v)", status, err)
	}
}

func TestDeviceActions(t *testing.T) {
	x := newEnv(t)
	dev := x.device(x.ten, "web-01", "online")
	var cmd struct {
		ID       string `json:"id"`
		DeviceID string `json:"deviceId"`
		Type     string `json:"type"`
		Status   string `json:"status"`
	}
	x.Must(201, x.ten.Org, "POST", api+"/mobile/devices/"+dev+"/actions", map[string]any{"action": "refresh_inventory"}).JSON(t, &cmd)
	if cmd.Type != "refresh_inventory" || cmd.DeviceID != dev || cmd.Status != "queued" {
		t.Fatalf("command: %+v", cmd)
	}
	r := x.Do(x.ten.Org, "POST", api+"/mobile/devices/"+dev+"/actions", map[string]any{"action": "refresh_inventory"})
	if r.Status != 409 || r.ErrorCode() != "ALREADY_PENDING" {
		t.Fatalf("second refresh_inventory: %d %s", r.Status, r.Body)
	}
	x.Must(201, x.ten.Org, "POST", api+"/mobile/devices/"+dev+"/actions", map[string]any{"action": "reboot",
		"payload": map[string]any{"delaySeconds": 30}})
	x.Must(201, x.ten.Org, "POST", api+"/mobile/devices/"+dev+"/actions", map[string]any{"action": "run_script",
		"payload": map[string]any{"language": "bash", "script": "uptime"}})
	if r := x.Do(x.ten.Org, "POST", api+"/mobile/devices/"+dev+"/actions", map[string]any{"action": "format_disk"}); r.Status != 422 && r.Status != 400 {
		t.Fatalf("unknown action: %d", r.Status)
	}
	var n int
	if err := x.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM device_commands WHERE device_id = $1`, dev).Scan(&n); err != nil || n != 3 {
		t.Fatalf("commands: %d (%v)", n, err)
	}
	_, viewer := x.user("viewer@gale.test", access.LevelOrganization, x.ten.PartnerID, x.ten.OrgID, access.RoleOrgViewer)
	if r := x.Do(viewer, "POST", api+"/mobile/devices/"+dev+"/actions", map[string]any{"action": "reboot"}); r.Status != 403 {
		t.Fatalf("viewer action: %d", r.Status)
	}
}

func TestPushTokens(t *testing.T) {
	x := newEnv(t)
	count := func(q string, args ...any) int {
		var n int
		if err := x.App.DB.SQL.QueryRow(q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	body := map[string]any{"token": "tok-1", "platform": "ios", "deviceName": "iPhone"}
	var tok struct {
		Platform   string    `json:"platform"`
		DeviceName string    `json:"deviceName"`
		CreatedAt  time.Time `json:"createdAt"`
	}
	x.Must(200, x.ten.Partner, "POST", api+"/mobile/notifications/register", body).JSON(t, &tok)
	x.Must(200, x.ten.Partner, "POST", api+"/mobile/notifications/register", body).JSON(t, &tok)
	if tok.Platform != "ios" || tok.DeviceName != "iPhone" || count(`SELECT COUNT(*) FROM push_tokens`) != 1 {
		t.Fatalf("register twice: %+v, %d rows", tok, count(`SELECT COUNT(*) FROM push_tokens`))
	}
	// The token moves to the latest user.
	x.Must(200, x.ten.Org, "POST", api+"/mobile/notifications/register", map[string]any{"token": "tok-1", "platform": "android"})
	if count(`SELECT COUNT(*) FROM push_tokens p JOIN users u ON u.id = p.user_id WHERE u.email = 'alpha-org@gale.test' AND p.platform = 'android'`) != 1 {
		t.Fatal("token did not move to the latest user")
	}
	var out struct {
		Removed bool `json:"removed"`
	}
	x.Must(200, x.ten.Partner, "POST", api+"/mobile/notifications/unregister", map[string]any{"token": "tok-1"}).JSON(t, &out)
	if out.Removed || count(`SELECT COUNT(*) FROM push_tokens`) != 1 {
		t.Fatal("a user removed another user's token")
	}
	x.Must(200, x.ten.Org, "POST", api+"/mobile/notifications/unregister", map[string]any{"token": "tok-1"}).JSON(t, &out)
	if !out.Removed || count(`SELECT COUNT(*) FROM push_tokens`) != 0 {
		t.Fatal("unregister did not remove the token")
	}
	if r := x.Do(x.ten.Partner, "POST", api+"/mobile/notifications/register", map[string]any{"token": "t", "platform": "windows"}); r.Status != 422 && r.Status != 400 {
		t.Fatalf("bad platform: %d", r.Status)
	}
}
