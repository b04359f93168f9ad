package devices_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"

	"github.com/coder/websocket"

	"gale/internal/domains/devices"
	"gale/internal/platform/access"
	"gale/internal/platform/config"
	"gale/internal/platform/secrets"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

// newKey mints an enrollment key with its own secret for an organization.
func newKey(e *apptest.Env, c apptest.Caller, orgID string, maxUsage int) (string, string) {
	e.T.Helper()
	var k struct {
		Key    string `json:"key"`
		Secret string `json:"enrollmentSecret"`
	}
	e.Must(201, c, "POST", api+"/enrollment-keys", map[string]any{"orgId": orgID, "name": "test", "maxUsage": maxUsage,
		"issueEnrollmentSecret": true}).JSON(e.T, &k)
	return k.Key, k.Secret
}

func enrollBody(key, secret, hostname string) agentproto.EnrollRequest {
	return agentproto.EnrollRequest{EnrollmentKey: key, EnrollmentSecret: secret, Hostname: hostname, OSType: "linux",
		OSVersion: "12", Architecture: "amd64", AgentVersion: "1.0.0"}
}

// enrollOnly enrolls a simulated agent, as an installer does, and returns its credentials.
func enrollOnly(e *apptest.Env, key, secret, hostname string) agentproto.EnrollResponse {
	e.T.Helper()
	var r agentproto.EnrollResponse
	e.Must(201, apptest.Anonymous, "POST", api+"/agents/enroll", enrollBody(key, secret, hostname)).JSON(e.T, &r)
	return r
}

// enroll enrolls a simulated agent that then starts: it reports once over HTTP, which brings
// its device online.
func enroll(e *apptest.Env, key, secret, hostname string) agentproto.EnrollResponse {
	e.T.Helper()
	r := enrollOnly(e, key, secret, hostname)
	e.Must(200, apptest.Bearer(r.AuthToken), "POST", api+"/agents/"+r.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "1.0.0"})
	return r
}

type deviceRow struct {
	ID                   string          `json:"id"`
	OrgID                string          `json:"orgId"`
	SiteID               string          `json:"siteId"`
	Hostname             string          `json:"hostname"`
	Status               string          `json:"status"`
	Tags                 []string        `json:"tags"`
	WatchdogStatus       *string         `json:"watchdogStatus"`
	MainAgentSilentSince *time.Time      `json:"mainAgentSilentSince"`
	LastSeen             *time.Time      `json:"lastSeen"`
	Enrolled             *time.Time      `json:"enrolled"`
	Metrics              json.RawMessage `json:"metrics"`
}

type cursorList struct {
	Devices    []deviceRow `json:"devices"`
	NextCursor string      `json:"nextCursor"`
	Limit      int         `json:"limit"`
	Total      *int        `json:"total"`
}

func listDevices(e *apptest.Env, c apptest.Caller, query string) cursorList {
	e.T.Helper()
	var l cursorList
	e.Must(200, c, "GET", api+"/devices?"+query, nil).JSON(e.T, &l)
	return l
}

// agentConn is a simulated agent on the live channel.
type agentConn struct {
	t   *testing.T
	ws  *websocket.Conn
	ctx context.Context
}

func connect(t *testing.T, e *apptest.Env, token string) *agentConn {
	t.Helper()
	ws, ctx := e.DialAgent(token)
	return &agentConn{t: t, ws: ws, ctx: ctx}
}

func (a *agentConn) read() agentproto.Message {
	a.t.Helper()
	_, data, err := a.ws.Read(a.ctx)
	if err != nil {
		a.t.Fatalf("read: %v", err)
	}
	var m agentproto.Message
	if err := json.Unmarshal(data, &m); err != nil {
		a.t.Fatal(err)
	}
	return m
}

// next skips heartbeat acknowledgements and returns the next message of type typ.
func (a *agentConn) next(typ string) agentproto.Message {
	a.t.Helper()
	for {
		if m := a.read(); m.Type == typ {
			return m
		}
	}
}

func (a *agentConn) send(typ, id string, payload any) {
	a.t.Helper()
	raw, _ := json.Marshal(payload)
	b, _ := json.Marshal(agentproto.Message{ID: id, Type: typ, Payload: raw})
	if err := a.ws.Write(a.ctx, websocket.MessageText, b); err != nil {
		a.t.Fatal(err)
	}
}

// A device is online once its agent reports, not when the installer enrolls it: until the
// first heartbeat it is pending, never seen, and that heartbeat brings it online (with the
// device.online event).
func TestEnrollCreatesAPendingDeviceUntilItsAgentReportsAndStoresOnlyTokenHashes(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 2)
	r := enrollOnly(e, key, secret, "web-01")
	if r.DeviceID == "" || r.AgentID != r.DeviceID || r.OrgID != ten.OrgID || r.SiteID != ten.SiteID ||
		!strings.HasPrefix(r.AuthToken, "gale_at_") || !strings.HasPrefix(r.WatchdogAuthToken, "gale_wt_") ||
		r.Config.HeartbeatIntervalSeconds != 60 {
		t.Fatalf("enroll answer = %+v", r)
	}
	var stored string
	if err := e.App.DB.SQL.QueryRow(`SELECT agent_token_hash FROM devices WHERE id = $1`, r.DeviceID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != secrets.Hash(r.AuthToken) || strings.Contains(stored, r.AuthToken) {
		t.Fatalf("stored token %q is not the hash of the token", stored)
	}
	l := listDevices(e, ten.Org, "")
	if len(l.Devices) != 1 || l.Devices[0].Hostname != "web-01" || l.Devices[0].Status != devices.StatusPending ||
		l.Devices[0].Enrolled == nil || l.Devices[0].LastSeen != nil {
		t.Fatalf("devices right after enrollment = %+v, want pending and never seen", l.Devices)
	}
	e.Must(200, apptest.Bearer(r.AuthToken), "POST", api+"/agents/"+r.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "1.0.0"})
	if l = listDevices(e, ten.Org, ""); l.Devices[0].Status != devices.StatusOnline || l.Devices[0].LastSeen == nil {
		t.Fatalf("devices after the first heartbeat = %+v, want online", l.Devices)
	}
	var onlineEvents int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM events WHERE type = $1 AND resource_id = $2`, devices.EventOnline,
		r.DeviceID).Scan(&onlineEvents); err != nil {
		t.Fatal(err)
	}
	if onlineEvents != 1 {
		t.Fatalf("device.online events = %d, want 1", onlineEvents)
	}
	var raw struct {
		Devices []map[string]any `json:"devices"`
	}
	e.Must(200, ten.Org, "GET", api+"/devices", nil).JSON(t, &raw)
	for _, f := range []string{"hostname", "lastSeen", "enrolled", "mainAgentSilentSince", "watchdogStatus"} {
		if _, ok := raw.Devices[0][f]; !ok {
			t.Errorf("device rows lack %s", f)
		}
	}
}

func TestEnrollRefusals(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	cases := []struct {
		name   string
		body   agentproto.EnrollRequest
		status int
	}{
		{"unknown key", enrollBody("nope", secret, "a"), 401},
		{"wrong secret", enrollBody(key, "wrong", "a"), 403},
		{"bad os", func() agentproto.EnrollRequest { b := enrollBody(key, secret, "a"); b.OSType = "beos"; return b }(), 400},
		{"no hostname", enrollBody(key, secret, " "), 400},
		{"site of another org", func() agentproto.EnrollRequest {
			b := enrollBody(key, secret, "a")
			b.SiteID = "0190a0a0-0000-7000-8000-000000000000"
			return b
		}(), 400},
	}
	for _, c := range cases {
		if r := e.Do(apptest.Anonymous, "POST", api+"/agents/enroll", c.body); r.Status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.Status, r.Body, c.status)
		}
	}
	enroll(e, key, secret, "first")
	if r := e.Do(apptest.Anonymous, "POST", api+"/agents/enroll", enrollBody(key, secret, "second")); r.Status != 401 {
		t.Errorf("enrolling past maxUsage = %d %s, want 401", r.Status, r.Body)
	}
	if n := len(listDevices(e, ten.Org, "").Devices); n != 1 {
		t.Errorf("%d devices after refusals, want 1", n)
	}
}

func TestProvisionedDeviceIsClaimedByItsKey(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	var p struct {
		Device struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"device"`
		EnrollmentKey    string `json:"enrollmentKey"`
		EnrollmentSecret string `json:"enrollmentSecret"`
		ServerURL        string `json:"serverUrl"`
		DeviceCommand    string `json:"command"`
	}
	e.Must(201, ten.Partner, "POST", api+"/devices/provision", map[string]any{"orgId": ten.OrgID, "hostname": "planned-01",
		"tags": []string{"new"}}).JSON(t, &p)
	if p.Device.Status != "pending" || p.EnrollmentKey == "" || p.EnrollmentSecret == "" ||
		!strings.Contains(p.DeviceCommand, "gale-agent enroll "+p.EnrollmentKey+" --server ") || !strings.Contains(p.DeviceCommand, "--enrollment-secret "+p.EnrollmentSecret) {
		t.Fatalf("provision = %+v", p)
	}
	r := enrollOnly(e, p.EnrollmentKey, p.EnrollmentSecret, "real-hostname")
	if r.DeviceID != p.Device.ID {
		t.Fatalf("enrollment created device %s instead of claiming %s", r.DeviceID, p.Device.ID)
	}
	l := listDevices(e, ten.Org, "")
	if len(l.Devices) != 1 || l.Devices[0].Hostname != "real-hostname" || l.Devices[0].Status != devices.StatusPending ||
		l.Devices[0].LastSeen != nil || l.Devices[0].Enrolled == nil || len(l.Devices[0].Tags) != 1 {
		t.Fatalf("devices after claim = %+v, want pending until the agent reports", l.Devices)
	}
	e.Must(200, apptest.Bearer(r.AuthToken), "POST", api+"/agents/"+r.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "1.0.0"})
	if l = listDevices(e, ten.Org, ""); l.Devices[0].Status != devices.StatusOnline {
		t.Fatalf("devices after the claimed device's first heartbeat = %+v", l.Devices)
	}
	if r := e.Do(apptest.Anonymous, "POST", api+"/agents/enroll", enrollBody(p.EnrollmentKey, p.EnrollmentSecret, "again")); r.Status != 401 {
		t.Fatalf("second use of a provisioning key = %d, want 401", r.Status)
	}
	other := e.NewTenant(e.Admin(), "Beta")
	if r := e.Do(ten.Partner, "POST", api+"/devices/provision", map[string]any{"orgId": other.OrgID, "hostname": "x"}); r.Status != 400 {
		t.Fatalf("provisioning into another partner's organization = %d, want 400", r.Status)
	}
}

func TestDecommissioningRevokesTheProvisioningKey(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	var p struct {
		Device struct {
			ID string `json:"id"`
		} `json:"device"`
		EnrollmentKey    string `json:"enrollmentKey"`
		EnrollmentSecret string `json:"enrollmentSecret"`
	}
	e.Must(201, ten.Partner, "POST", api+"/devices/provision", map[string]any{"orgId": ten.OrgID, "hostname": "planned-01"}).JSON(t, &p)
	e.Must(204, ten.Partner, "DELETE", api+"/devices/"+p.Device.ID, nil)
	var revoked int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM enrollment_keys WHERE device_id = $1 AND revoked_at IS NOT NULL`,
		p.Device.ID).Scan(&revoked); err != nil || revoked != 1 {
		t.Errorf("revoked keys of the decommissioned device = %d (%v), want 1", revoked, err)
	}
	if r := e.Do(apptest.Anonymous, "POST", api+"/agents/enroll", enrollBody(p.EnrollmentKey, p.EnrollmentSecret, "late")); r.Status != 401 {
		t.Errorf("enrollment with the key of a decommissioned device = %d, want 401", r.Status)
	}
}

// Cursor pages over a key many devices share (hostnames repeat) visit every device once, in
// (key, ID) order, both ways.
func TestDeviceCursorPagesThroughTies(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Ties")
	seen := time.Now().UTC().Truncate(time.Second)
	var want []string
	for i := 0; i < 7; i++ {
		h := []string{"dup", "dup", "solo", "dup", "a-first", "dup", "zz-last"}[i]
		want = append(want, e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID,
			Hostname: h, LastSeen: seen.Add(-time.Duration(i%2) * time.Minute)}))
	}
	for _, sort := range []string{"sort=hostname", "sort=hostname&sortDir=desc", "sort=lastSeen", "sort=lastSeen&sortDir=desc"} {
		var all, paged []string
		for _, d := range listDevices(e, ten.Partner, sort).Devices {
			all = append(all, d.ID)
		}
		cursor := ""
		for range 10 {
			l := listDevices(e, ten.Partner, sort+"&limit=2&cursor="+cursor)
			for _, d := range l.Devices {
				paged = append(paged, d.ID)
			}
			if cursor = l.NextCursor; cursor == "" {
				break
			}
		}
		if len(all) != len(want) || strings.Join(paged, ",") != strings.Join(all, ",") {
			t.Errorf("%s: pages of 2 gave %v, one page %v", sort, paged, all)
		}
	}
}

func TestDeviceListModesSortsAndFilters(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Alpha")
	org2 := e.CreateOrg(admin, ten.PartnerID, "Alpha Second")
	var site2 string
	var sites struct {
		Data []struct{ ID string } `json:"data"`
	}
	e.Must(200, admin, "GET", api+"/orgs/sites?orgId="+org2, nil).JSON(t, &sites)
	site2 = sites.Data[0].ID
	now := time.Now().UTC()
	ids := map[string]string{}
	for i, h := range []string{"delta", "alpha", "charlie", "bravo"} {
		ids[h] = e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: h,
			LastSeen: now.Add(-time.Duration(i) * time.Minute)})
	}
	ids["echo"] = e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: org2, SiteID: site2, Hostname: "echo"})
	gone := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "zulu"})
	e.Must(204, ten.Partner, "DELETE", api+"/devices/"+gone, nil)
	foreign := e.NewTenant(admin, "Beta")
	e.InsertDevice(apptest.DeviceRow{PartnerID: foreign.PartnerID, OrgID: foreign.OrgID, SiteID: foreign.SiteID, Hostname: "aaa-foreign"})

	names := func(l cursorList) string {
		var out []string
		for _, d := range l.Devices {
			out = append(out, d.Hostname)
		}
		return strings.Join(out, ",")
	}
	if got := names(listDevices(e, ten.Partner, "")); got != "alpha,bravo,charlie,delta,echo" {
		t.Errorf("default order = %s", got)
	}
	if got := names(listDevices(e, ten.Partner, "sort=hostname&sortDir=desc")); got != "echo,delta,charlie,bravo,alpha" {
		t.Errorf("hostname desc = %s", got)
	}
	if got := names(listDevices(e, ten.Partner, "sort=lastSeen&sortDir=desc&orgId="+ten.OrgID)); got != "delta,alpha,charlie,bravo" {
		t.Errorf("lastSeen desc = %s", got)
	}
	// Walk sort=lastSeen two at a time: every row once, in order.
	var walked []string
	cursor := ""
	for {
		l := listDevices(e, ten.Partner, "sort=lastSeen&limit=2&orgId="+ten.OrgID+"&cursor="+cursor)
		walked = append(walked, names(l))
		if l.NextCursor == "" {
			break
		}
		cursor = l.NextCursor
	}
	if got := strings.Join(walked, "|"); got != "bravo,charlie|alpha,delta" {
		t.Errorf("lastSeen pages = %s", got)
	}
	if got := names(listDevices(e, ten.Partner, "siteIds="+site2)); got != "echo" {
		t.Errorf("siteIds filter = %s", got)
	}
	if got := names(listDevices(e, ten.Partner, "orgIds="+ten.OrgID+","+org2+"&search=ALP")); got != "alpha" {
		t.Errorf("orgIds+search = %s", got)
	}
	if l := listDevices(e, ten.Partner, "includeDecommissioned=true"); len(l.Devices) != 6 {
		t.Errorf("includeDecommissioned = %s", names(l))
	}
	l := listDevices(e, ten.Partner, "limit=2&includeTotal=true")
	if l.Limit != 2 || l.Total == nil || *l.Total != 5 || l.NextCursor == "" {
		t.Errorf("includeTotal page = limit %d total %v next %q", l.Limit, l.Total, l.NextCursor)
	}
	if l := listDevices(e, ten.Partner, "limit=100000"); l.Limit != 500 || l.Total != nil {
		t.Errorf("cursor limit 100000 → %d (total %v); want clamped to 500 without total", l.Limit, l.Total)
	}
	var legacy struct {
		Data       []deviceRow `json:"data"`
		Pagination struct {
			Page, Limit int
			Total       int
			HasMore     bool
		} `json:"pagination"`
	}
	e.Must(200, ten.Partner, "GET", api+"/devices?page=2&limit=2", nil).JSON(t, &legacy)
	if len(legacy.Data) != 2 || legacy.Data[0].Hostname != "charlie" || legacy.Pagination.Total != 5 || !legacy.Pagination.HasMore {
		t.Errorf("legacy page 2 = %+v", legacy)
	}
	e.Must(200, ten.Partner, "GET", api+"/devices?page=1&limit=1000", nil).JSON(t, &legacy)
	if legacy.Pagination.Limit != 100 {
		t.Errorf("legacy limit 1000 → %d, want clamped to 100", legacy.Pagination.Limit)
	}
	for _, q := range []string{"sort=name", "orgIds=not-a-uuid", "cursor=not~a~cursor", "page=1&cursor=abc"} {
		if r := e.Do(ten.Partner, "GET", api+"/devices?"+q, nil); r.Status != 400 {
			t.Errorf("GET /devices?%s = %d, want 400", q, r.Status)
		}
	}
	if got := names(listDevices(e, ten.Org, "")); got != "alpha,bravo,charlie,delta" {
		t.Errorf("organization caller sees %s", got)
	}
	if got := names(listDevices(e, foreign.Partner, "")); got != "aaa-foreign" {
		t.Errorf("other partner sees %s", got)
	}
}

func TestDevicesOfOtherTenantsAreNotFound(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Alpha")
	b := e.NewTenant(admin, "Beta")
	id := e.InsertDevice(apptest.DeviceRow{PartnerID: b.PartnerID, OrgID: b.OrgID, SiteID: b.SiteID, Hostname: "theirs"})
	// A second organization of partner B: B's organization caller must not reach it either.
	otherOrg := e.CreateOrg(admin, b.PartnerID, "Beta Two")
	var sites struct {
		Data []struct{ ID string } `json:"data"`
	}
	e.Must(200, admin, "GET", api+"/orgs/sites?orgId="+otherOrg, nil).JSON(t, &sites)
	sibling := e.InsertDevice(apptest.DeviceRow{PartnerID: b.PartnerID, OrgID: otherOrg, SiteID: sites.Data[0].ID, Hostname: "sibling"})
	routes := []struct{ method, path string }{
		{"GET", "/devices/%s"}, {"PATCH", "/devices/%s"}, {"DELETE", "/devices/%s"}, {"POST", "/devices/%s/move-org"},
		{"POST", "/devices/%s/commands"}, {"GET", "/devices/%s/commands"}, {"GET", "/devices/%s/software"},
		{"GET", "/devices/%s/metrics"}, {"GET", "/system-tools/devices/%s/processes"}, {"GET", "/system-tools/devices/%s/services"},
		{"POST", "/system-tools/devices/%s/processes/42/kill"}, {"GET", "/system-tools/devices/%s/files?path=/etc"},
		{"GET", "/system-tools/devices/%s/registry/keys?hive=HKLM"},
	}
	bodies := map[string]any{"PATCH": map[string]any{"displayName": "x"}, "POST": map[string]any{"type": "reboot"}}
	for _, c := range []struct {
		name   string
		caller apptest.Caller
		device string
	}{{"other partner", a.Partner, id}, {"other partner's org admin", a.Org, id}, {"sibling organization", b.Org, sibling}} {
		for _, r := range routes {
			body := bodies[r.method]
			if strings.HasSuffix(r.path, "move-org") {
				body = map[string]any{"orgId": a.OrgID}
			} else if strings.HasSuffix(r.path, "kill") {
				body = nil
			}
			res := e.Do(c.caller, r.method, api+fmt.Sprintf(r.path, c.device), body)
			if res.Status != 404 || res.ErrorCode() != "NOT_FOUND" {
				t.Errorf("%s: %s %s = %d %s, want 404", c.name, r.method, r.path, res.Status, res.Body)
			}
		}
	}
	r := e.Do(a.Partner, "POST", api+"/devices/bulk/commands", map[string]any{"deviceIds": []string{id}, "type": "reboot"})
	var bulk struct {
		Commands []any `json:"commands"`
		Failed   []struct {
			DeviceID string `json:"deviceId"`
		} `json:"failed"`
	}
	r.JSON(t, &bulk)
	if r.Status != 200 || len(bulk.Commands) != 0 || len(bulk.Failed) != 1 || bulk.Failed[0].DeviceID != id {
		t.Errorf("bulk command to a foreign device = %d %s", r.Status, r.Body)
	}
}

func TestCommandsQueueOnceAndRefuseASecondPendingInventory(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 2)
	dev := enroll(e, key, secret, "web-01")
	path := api + "/devices/" + dev.DeviceID + "/commands"
	var first struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	e.Must(201, ten.Org, "POST", path, map[string]any{"type": "refresh_inventory"}).JSON(t, &first)
	if first.Status != "queued" {
		t.Fatalf("new command status = %s", first.Status)
	}
	r := e.Do(ten.Org, "POST", path, map[string]any{"type": "refresh_inventory"})
	if r.Status != 409 || r.ErrorCode() != "ALREADY_PENDING" {
		t.Fatalf("second refresh_inventory = %d %s", r.Status, r.Body)
	}
	// Concurrent requests: the database lets exactly one more through once the first is done.
	hb := func() agentproto.HeartbeatResponse {
		var out agentproto.HeartbeatResponse
		e.Must(200, apptest.Caller{Token: dev.AuthToken}, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat",
			agentproto.Heartbeat{AgentVersion: "1.0.0"}).JSON(t, &out)
		return out
	}
	got := hb()
	if len(got.Commands) != 1 || got.Commands[0].ID != first.ID || got.Commands[0].Type != "refresh_inventory" {
		t.Fatalf("heartbeat delivered %+v", got.Commands)
	}
	if again := hb(); len(again.Commands) != 0 {
		t.Fatalf("a sent command was delivered twice: %+v", again.Commands)
	}
	if r := e.Do(ten.Org, "POST", path, map[string]any{"type": "refresh_inventory"}); r.Status != 409 {
		t.Fatalf("refresh while the first is sent = %d, want 409", r.Status)
	}
	e.Must(204, apptest.Caller{Token: dev.AuthToken}, "POST", api+"/agents/"+dev.DeviceID+"/commands/"+first.ID+"/result",
		agentproto.CommandResult{Status: "completed", DurationMs: 12})
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			r := e.Do(ten.Org, "POST", path, map[string]any{"type": "refresh_inventory"})
			mu.Lock()
			statuses[r.Status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if statuses[201] != 1 || statuses[409] != 7 || len(statuses) != 2 {
		t.Fatalf("8 concurrent refreshes: statuses %v; want one 201 and seven 409", statuses)
	}
	var c struct {
		Status     string `json:"status"`
		DurationMs *int64 `json:"durationMs"`
	}
	e.Must(200, ten.Org, "GET", path+"/"+first.ID, nil).JSON(t, &c)
	if c.Status != "completed" || c.DurationMs == nil || *c.DurationMs != 12 {
		t.Fatalf("first command = %+v", c)
	}

	bad := []map[string]any{
		{"type": "run_script", "payload": map[string]any{"language": "cmd", "script": "dir"}},
		{"type": "run_script", "payload": map[string]any{"language": "bash", "script": "  "}},
		{"type": "run_script", "payload": map[string]any{"language": "bash", "script": "ls", "bogus": 1}},
		{"type": "run_script"},
		{"type": "reboot", "payload": map[string]any{"delaySeconds": 99999}},
		{"type": "refresh_inventory", "payload": map[string]any{"x": 1}},
		{"type": "format_disk"},
		{"type": "reboot", "timeoutSeconds": 0, "payload": map[string]any{}, "extra": true},
	}
	for _, b := range bad {
		if r := e.Do(ten.Org, "POST", path, b); r.Status != 400 {
			t.Errorf("command %v = %d %s, want 400", b, r.Status, r.Body)
		}
	}
	_, viewer := e.CreateUser("viewer@alpha.test", access.LevelOrganization, ten.PartnerID, ten.OrgID, access.RoleOrgViewer)
	if r := e.Do(viewer, "POST", path, map[string]any{"type": "reboot"}); r.Status != 403 {
		t.Errorf("a viewer sending a command = %d, want 403", r.Status)
	}
	e.Must(200, viewer, "GET", path, nil)
}

func TestBulkCommandsReportPerDevice(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	a := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "a"})
	b := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "b"})
	e.Must(201, ten.Org, "POST", api+"/devices/"+b+"/commands", map[string]any{"type": "refresh_inventory"})
	missing := "0190a0a0-0000-7000-8000-000000000001"
	var out struct {
		Commands []struct {
			DeviceID string `json:"deviceId"`
		} `json:"commands"`
		Skipped []struct {
			DeviceID, Code string
		} `json:"skipped"`
		Failed []struct {
			DeviceID, Code string
		} `json:"failed"`
	}
	e.Must(200, ten.Org, "POST", api+"/devices/bulk/commands", map[string]any{"deviceIds": []string{a, b, missing, a},
		"type": "refresh_inventory"}).JSON(t, &out)
	if len(out.Commands) != 1 || out.Commands[0].DeviceID != a || len(out.Skipped) != 1 || out.Skipped[0].DeviceID != b ||
		out.Skipped[0].Code != "ALREADY_PENDING" || len(out.Failed) != 1 || out.Failed[0].DeviceID != missing {
		t.Fatalf("bulk = %+v", out)
	}
	ids := make([]string, 501)
	for i := range ids {
		ids[i] = a
	}
	if r := e.Do(ten.Org, "POST", api+"/devices/bulk/commands", map[string]any{"deviceIds": ids, "type": "reboot"}); r.Status != 400 {
		t.Fatalf("501 devices = %d, want 400", r.Status)
	}
}

func TestLiveChannelPushesCommandsAndRecordsHeartbeats(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	dev := enroll(e, key, secret, "web-01")
	if r := e.Do(apptest.Caller{Token: dev.WatchdogAuthToken}, "GET", api+agentproto.PathWebSocket, nil); r.Status != 403 {
		t.Fatalf("watchdog token on the live channel = %d, want 403", r.Status)
	}
	if r := e.Do(apptest.Caller{Token: "gale_at_nope"}, "GET", api+agentproto.PathWebSocket, nil); r.Status != 401 {
		t.Fatalf("unknown token on the live channel = %d, want 401", r.Status)
	}
	a := connect(t, e, dev.AuthToken)
	a.send(agentproto.TypeHeartbeat, "hb-1", agentproto.Heartbeat{AgentVersion: "1.2.3", UptimeSeconds: 99, LastUser: "alice",
		Metrics: &agentproto.Metrics{CPUPercent: 12.5, RAMPercent: 40, DiskPercent: 70}})
	if ack := a.next(agentproto.TypeHeartbeatAck); ack.ID != "hb-1" {
		t.Fatalf("ack = %+v", ack)
	}
	var d struct {
		AgentVersion  string `json:"agentVersion"`
		LastUser      string `json:"lastUser"`
		UptimeSeconds int64  `json:"uptimeSeconds"`
		Metrics       struct {
			CPUPercent float64 `json:"cpuPercent"`
		} `json:"metrics"`
		RecentMetrics []struct {
			DiskPercent float64 `json:"diskPercent"`
		} `json:"recentMetrics"`
	}
	e.Must(200, ten.Org, "GET", api+"/devices/"+dev.DeviceID, nil).JSON(t, &d)
	if d.AgentVersion != "1.2.3" || d.LastUser != "alice" || d.UptimeSeconds != 99 || d.Metrics.CPUPercent != 12.5 ||
		len(d.RecentMetrics) != 1 || d.RecentMetrics[0].DiskPercent != 70 {
		t.Fatalf("device after heartbeat = %+v", d)
	}

	var cmd struct {
		ID, Status string
		SentAt     *time.Time
	}
	e.Must(201, ten.Org, "POST", api+"/devices/"+dev.DeviceID+"/commands", map[string]any{"type": "run_script",
		"payload": map[string]any{"language": "bash", "script": "echo hi"}}).JSON(t, &cmd)
	if cmd.Status != "sent" || cmd.SentAt == nil {
		t.Fatalf("a command for an agent connected to this node = %+v, want it sent on the connection", cmd)
	}
	m := a.next(agentproto.TypeCommand)
	var got agentproto.Command
	_ = json.Unmarshal(m.Payload, &got)
	var rs agentproto.RunScript
	_ = json.Unmarshal(got.Payload, &rs)
	if got.ID != cmd.ID || got.Type != "run_script" || rs.Script != "echo hi" || rs.MaxOutputBytes != 1<<20 || got.TimeoutSeconds != 300 {
		t.Fatalf("pushed command = %+v %+v", got, rs)
	}
	exit := 0
	agent, resultPath := apptest.Caller{Token: dev.AuthToken}, api+"/agents/"+dev.DeviceID+"/commands/"+cmd.ID+"/result"
	e.Must(204, agent, "POST", resultPath, agentproto.CommandResult{CommandID: cmd.ID, Status: "completed", ExitCode: &exit, Stdout: "hi\n"})
	apptest.Eventually(t, 5*time.Second, func() bool {
		var c struct {
			Status string  `json:"status"`
			Stdout *string `json:"stdout"`
		}
		e.Must(200, ten.Org, "GET", api+"/devices/"+dev.DeviceID+"/commands/"+cmd.ID, nil).JSON(t, &c)
		return c.Status == "completed" && c.Stdout != nil && *c.Stdout == "hi\n"
	})
	// A late result of a command that already finished changes nothing.
	e.Must(204, agent, "POST", resultPath, agentproto.CommandResult{CommandID: cmd.ID, Status: "failed", Error: "late"})

	// Decommissioning stops the agent and its token.
	e.Must(204, ten.Org, "DELETE", api+"/devices/"+dev.DeviceID, nil)
	if m := a.next(agentproto.TypeStop); m.Type != agentproto.TypeStop {
		t.Fatalf("got %+v, want stop", m)
	}
	if r := e.Do(apptest.Caller{Token: dev.AuthToken}, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat", agentproto.Heartbeat{}); r.Status != 403 ||
		!strings.Contains(string(r.Body), agentproto.ErrDeviceDecommissioned) || !strings.Contains(string(r.Body), dev.DeviceID) {
		t.Fatalf("heartbeat after decommissioning = %d %s, want 403 DEVICE_DECOMMISSIONED naming the device", r.Status, r.Body)
	}
	if r := e.Do(ten.Org, "DELETE", api+"/devices/"+dev.DeviceID, nil); r.Status != 404 {
		t.Fatalf("decommissioning twice = %d, want 404", r.Status)
	}
	var c struct{ Status string }
	e.Must(200, ten.Org, "GET", api+"/devices/"+dev.DeviceID+"/commands/"+cmd.ID, nil).JSON(t, &c)
	if c.Status != "completed" {
		t.Fatalf("the late result changed a finished command to %s", c.Status)
	}
}

// Results travel one way, over HTTP: a command_result on the live channel is refused like any
// message type the hub does not take, and the socket stays open.
func TestLiveChannelDoesNotRecordCommandResults(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	dev := enroll(e, key, secret, "web-01")
	a := connect(t, e, dev.AuthToken)
	var cmd struct{ ID, Status string }
	e.Must(201, ten.Org, "POST", api+"/devices/"+dev.DeviceID+"/commands", map[string]any{"type": "run_script",
		"payload": map[string]any{"language": "bash", "script": "echo hi"}}).JSON(t, &cmd)
	a.next(agentproto.TypeCommand)

	exit := 0
	result := agentproto.CommandResult{CommandID: cmd.ID, Status: "completed", ExitCode: &exit, Stdout: "hi\n"}
	a.send("command_result", cmd.ID, result)
	// The hub handles one connection's messages in order: once the heartbeat is acknowledged,
	// the result before it was handled.
	a.send(agentproto.TypeHeartbeat, "hb-1", agentproto.Heartbeat{AgentVersion: "1.2.3"})
	if ack := a.next(agentproto.TypeHeartbeatAck); ack.ID != "hb-1" {
		t.Fatalf("ack = %+v", ack)
	}
	path := api + "/devices/" + dev.DeviceID + "/commands/" + cmd.ID
	var c struct{ Status string }
	e.Must(200, ten.Org, "GET", path, nil).JSON(t, &c)
	if c.Status != "sent" {
		t.Fatalf("a result sent over the live channel left the command %s, want sent", c.Status)
	}

	e.Must(204, apptest.Caller{Token: dev.AuthToken}, "POST", api+"/agents/"+dev.DeviceID+"/commands/"+cmd.ID+"/result", result)
	e.Must(200, ten.Org, "GET", path, nil).JSON(t, &c)
	if c.Status != "completed" {
		t.Fatalf("the same result over HTTP left the command %s, want completed", c.Status)
	}
}

// channelStandIn stands in for the agent channel: it says every device is connected to this
// node, takes or refuses the commands handed to it, and records what it was told.
type channelStandIn struct {
	mu        sync.Mutex
	connected bool
	accept    bool
	delivered []agentproto.Command
	woken     int
}

func (c *channelStandIn) Work(context.Context, string) { c.mu.Lock(); c.woken++; c.mu.Unlock() }
func (c *channelStandIn) Stop(context.Context, string) {}
func (c *channelStandIn) Connected(string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected
}
func (c *channelStandIn) Deliver(_ string, cmd agentproto.Command) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.accept {
		c.delivered = append(c.delivered, cmd)
	}
	return c.accept
}

// set says whether devices are connected and whether their connections take commands.
func (c *channelStandIn) set(connected, accept bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.connected, c.accept = connected, accept
}

// seen is what the stand-in was handed and how often it was told of queued work.
func (c *channelStandIn) seen() ([]agentproto.Command, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.delivered), c.woken
}

// A command for an agent connected to the node that takes it is recorded as sent and handed to
// the connection, unless commands queued before it wait (the queue keeps its order); one whose
// connection closed in between goes back to the queue.
func TestCommandsGoStraightToAConnectedAgentAfterThoseQueued(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	dev := enroll(e, key, secret, "web-01")
	ch := &channelStandIn{connected: true, accept: true}
	app.Service[*devices.Service](e.App).SetNotifier(ch)
	ctx := context.Background()
	path := api + "/devices/" + dev.DeviceID + "/commands"
	type command struct {
		ID, Status     string
		SentAt         *time.Time
		TimeoutSeconds int
	}
	send := func() command {
		t.Helper()
		var c command
		e.Must(201, ten.Org, "POST", path, map[string]any{"type": "run_script", "timeoutSeconds": 60,
			"payload": map[string]any{"language": "sh", "script": "true"}}).JSON(t, &c)
		var stored command
		e.Must(200, ten.Org, "GET", path+"/"+c.ID, nil).JSON(t, &stored)
		if stored.Status != c.Status || (stored.SentAt == nil) != (c.SentAt == nil) ||
			(c.SentAt != nil && !stored.SentAt.Equal(*c.SentAt)) {
			t.Fatalf("the answer %+v differs from the stored command %+v", c, stored)
		}
		return c
	}

	direct := send()
	delivered, woken := ch.seen()
	if direct.Status != "sent" || direct.SentAt == nil || len(delivered) != 1 || delivered[0].ID != direct.ID ||
		delivered[0].TimeoutSeconds != 60 || woken != 0 {
		t.Fatalf("command for a connected agent = %+v; handed over %+v, woken %d", direct, delivered, woken)
	}

	ch.set(false, true)
	first := send()
	ch.set(true, true)
	second := send()
	delivered, woken = ch.seen()
	if first.Status != "queued" || second.Status != "queued" || second.SentAt != nil || len(delivered) != 1 || woken != 2 {
		t.Fatalf("with a command queued before it, a command = %+v; handed over %d, woken %d", second, len(delivered), woken)
	}
	taken, err := app.Service[*devices.Service](e.App).TakeQueued(ctx, dev.DeviceID)
	if err != nil || len(taken) != 2 || taken[0].ID != first.ID || taken[1].ID != second.ID {
		t.Fatalf("took %+v, %v; want the two queued commands in order", taken, err)
	}

	ch.set(true, false)
	missed := send()
	if _, woken = ch.seen(); missed.Status != "queued" || missed.SentAt != nil || woken != 3 {
		t.Fatalf("command whose connection closed = %+v, woken %d; want it queued again", missed, woken)
	}
	if taken, err := app.Service[*devices.Service](e.App).TakeQueued(ctx, dev.DeviceID); err != nil || len(taken) != 1 || taken[0].ID != missed.ID {
		t.Fatalf("took %+v, %v; want the command queued again", taken, err)
	}

	ch.set(true, true)
	var bulk struct{ Commands []command }
	e.Must(200, ten.Org, "POST", api+"/devices/bulk/commands", map[string]any{"deviceIds": []string{dev.DeviceID},
		"type": "reboot"}).JSON(t, &bulk)
	delivered, _ = ch.seen()
	if len(bulk.Commands) != 1 || bulk.Commands[0].Status != "sent" || len(delivered) != 2 || delivered[1].ID != bulk.Commands[0].ID {
		t.Fatalf("bulk command for a connected agent = %+v; handed over %+v", bulk.Commands, delivered)
	}
}

// A heartbeat tells whether its device has work waiting, and the live channel delivers work it
// was not told about at the agent's next heartbeat: here a command queued through a second
// node, whose word (on SQLite, which has no bus between nodes) never reaches the first.
func TestHeartbeatDeliversWorkTheChannelMissed(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	dev := enroll(e, key, secret, "web-01")
	ctx := context.Background()
	svc := app.Service[*devices.Service](e.App)
	agent := devices.Agent{DeviceID: dev.DeviceID, PartnerID: ten.PartnerID, OrgID: ten.OrgID, Role: agentproto.RoleAgent}
	beat := func(a devices.Agent) bool {
		t.Helper()
		waiting, err := svc.Heartbeat(ctx, a, agentproto.Heartbeat{AgentVersion: "1.0.0"})
		if err != nil {
			t.Fatal(err)
		}
		return waiting
	}
	if beat(agent) {
		t.Fatal("a heartbeat with nothing queued reported work waiting")
	}
	var cmd struct{ ID string }
	e.Must(201, ten.Org, "POST", api+"/devices/"+dev.DeviceID+"/commands", map[string]any{"type": "reboot"}).JSON(t, &cmd)
	watchdog := agent
	watchdog.Role = agentproto.RoleWatchdog
	if beat(watchdog) {
		t.Error("a watchdog heartbeat reported work waiting: the watchdog takes no commands")
	}
	if !beat(agent) {
		t.Fatal("a heartbeat with a command queued reported nothing waiting")
	}
	taken, err := svc.TakeQueued(ctx, dev.DeviceID)
	if err != nil || len(taken) != 1 || taken[0].ID != cmd.ID {
		t.Fatalf("took %+v, %v; want the queued command", taken, err)
	}
	if again, err := svc.TakeQueued(ctx, dev.DeviceID); err != nil || len(again) != 0 {
		t.Fatalf("took the sent command again: %+v, %v", again, err)
	}
	if beat(agent) {
		t.Fatal("a heartbeat reported a command that was already sent")
	}
	if _, err := svc.QueueCall(ctx, dev.DeviceID, "processes", nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if !beat(agent) {
		t.Fatal("a heartbeat with a call queued reported nothing waiting")
	}
	if _, err := e.App.DB.ExecContext(ctx, `UPDATE agent_calls SET expires_at = $1`, time.Now().Add(-time.Second).UTC()); err != nil {
		t.Fatal(err)
	}
	if beat(agent) {
		t.Fatal("a heartbeat reported an expired call")
	}

	a := connect(t, e, dev.AuthToken)
	other := e.SecondNode()
	var late struct{ ID string }
	other.Must(201, ten.Org, "POST", api+"/devices/"+dev.DeviceID+"/commands", map[string]any{"type": "run_script",
		"payload": map[string]any{"language": "sh", "script": "true"}}).JSON(t, &late)
	a.send(agentproto.TypeHeartbeat, "hb-1", agentproto.Heartbeat{AgentVersion: "1.0.0"})
	var got agentproto.Command
	_ = json.Unmarshal(a.next(agentproto.TypeCommand).Payload, &got)
	if got.ID != late.ID {
		t.Fatalf("delivered %+v, want the command queued on the other node", got)
	}
}

func TestOfflineSweepWatchdogAndSilence(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	dev := enroll(e, key, secret, "web-01")
	ctx := context.Background()
	old := time.Now().UTC().Add(-20 * time.Minute)
	if _, err := e.App.DB.SQL.Exec(`UPDATE devices SET last_seen_at = $1 WHERE id = $2`, old, dev.DeviceID); err != nil {
		t.Fatal(err)
	}
	if err := app.Service[*devices.Service](e.App).Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	get := func() deviceRow {
		var d deviceRow
		e.Must(200, ten.Org, "GET", api+"/devices/"+dev.DeviceID, nil).JSON(t, &d)
		return d
	}
	if d := get(); d.Status != "offline" || d.WatchdogStatus != nil || d.MainAgentSilentSince != nil {
		t.Fatalf("after the sweep = %+v", d)
	}
	wd := apptest.Caller{Token: dev.WatchdogAuthToken}
	alive := false
	e.Must(200, wd, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat", agentproto.Heartbeat{WatchdogState: "failover", MainAgentAlive: &alive})
	d := get()
	if d.Status != "offline" || d.WatchdogStatus == nil || *d.WatchdogStatus != "failover" || d.MainAgentSilentSince == nil ||
		d.MainAgentSilentSince.Sub(old).Abs() > time.Second {
		t.Fatalf("after a watchdog heartbeat = %+v (silent since should be %s)", d, old)
	}
	e.Must(200, apptest.Caller{Token: dev.AuthToken}, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "1"})
	if d := get(); d.Status != "online" || d.MainAgentSilentSince != nil {
		t.Fatalf("after the main agent's heartbeat = %+v", d)
	}
	if r := e.Do(wd, "POST", api+"/agents/"+dev.DeviceID+"/inventory", agentproto.Inventory{}); r.Status != 403 {
		t.Fatalf("watchdog reporting inventory = %d, want 403", r.Status)
	}
	other := "0190a0a0-0000-7000-8000-000000000002"
	if r := e.Do(apptest.Caller{Token: dev.AuthToken}, "POST", api+"/agents/"+other+"/heartbeat", agentproto.Heartbeat{}); r.Status != 403 {
		t.Fatalf("heartbeat for another device = %d, want 403", r.Status)
	}
}

func TestInventoryReplacesTheWholeDocument(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	dev := enroll(e, key, secret, "web-01")
	agent := apptest.Caller{Token: dev.AuthToken}
	inv := agentproto.Inventory{CollectedAt: time.Now().UTC(), Hostname: "web-01.example",
		OS:       agentproto.OSInfo{Type: "linux", Name: "Debian GNU/Linux", Version: "12", Architecture: "amd64"},
		Hardware: agentproto.Hardware{Manufacturer: "Dell", Model: "R640", SerialNumber: "SN1", CPUModel: "Xeon", CPUCores: 8, MemoryBytes: 16 << 30},
		Disks:    []agentproto.Disk{{Device: "/dev/sda1", Mountpoint: "/", FSType: "ext4", TotalBytes: 100}},
		Network: []agentproto.NetworkInterface{{Name: "lo", Addresses: []string{"127.0.0.1/8"}, Up: true, Loopback: true},
			{Name: "eth0", MACAddress: "aa:bb", Addresses: []string{"fe80::1/64", "10.0.0.5/24"}, Up: true}},
		Software: []agentproto.Software{{Name: "curl", Version: "7", Source: "dpkg"}, {Name: "bash", Version: "5", Source: "dpkg"}, {Name: "zsh", Version: "5", Source: "dpkg"}},
		Users:    []agentproto.LoggedInUser{}}
	e.Must(204, agent, "POST", api+"/agents/"+dev.DeviceID+"/inventory", inv)
	inv.Software = inv.Software[:1]
	e.Must(204, agent, "POST", api+"/agents/"+dev.DeviceID+"/inventory", inv)
	var d struct {
		Hostname     string `json:"hostname"`
		OSName       string `json:"osName"`
		SerialNumber string `json:"serialNumber"`
		IPAddress    string `json:"ipAddress"`
		MACAddress   string `json:"macAddress"`
		CPUCores     int    `json:"cpuCores"`
		Inventory    struct {
			SoftwareCount int               `json:"softwareCount"`
			Disks         []agentproto.Disk `json:"disks"`
			Users         []any             `json:"users"`
		} `json:"inventory"`
	}
	e.Must(200, ten.Org, "GET", api+"/devices/"+dev.DeviceID, nil).JSON(t, &d)
	if d.Hostname != "web-01.example" || d.OSName != "Debian GNU/Linux" || d.SerialNumber != "SN1" || d.IPAddress != "10.0.0.5" ||
		d.MACAddress != "aa:bb" || d.CPUCores != 8 || d.Inventory.SoftwareCount != 1 || len(d.Inventory.Disks) != 1 || d.Inventory.Users == nil {
		t.Fatalf("device after inventory = %+v", d)
	}
	var sw struct {
		Data []agentproto.Software `json:"data"`
	}
	e.Must(200, ten.Org, "GET", api+"/devices/"+dev.DeviceID+"/software", nil).JSON(t, &sw)
	if len(sw.Data) != 1 || sw.Data[0].Name != "curl" {
		t.Fatalf("software after the second inventory = %+v", sw.Data)
	}
}

func TestMoveOrgStaysWithinThePartner(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Alpha")
	org2 := e.CreateOrg(admin, ten.PartnerID, "Alpha Two")
	other := e.NewTenant(admin, "Beta")
	id := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "mover", Tags: []string{"x"}})
	if r := e.Do(ten.Partner, "POST", api+"/devices/"+id+"/move-org", map[string]any{"orgId": other.OrgID}); r.Status != 400 {
		t.Fatalf("move to another partner's organization = %d %s, want 400", r.Status, r.Body)
	}
	if r := e.Do(ten.Partner, "POST", api+"/devices/"+id+"/move-org", map[string]any{"orgId": ten.OrgID}); r.Status != 400 {
		t.Fatalf("move to its own organization = %d, want 400", r.Status)
	}
	var d deviceRow
	e.Must(200, ten.Partner, "POST", api+"/devices/"+id+"/move-org", map[string]any{"orgId": org2}).JSON(t, &d)
	if d.OrgID != org2 || d.SiteID == ten.SiteID || d.SiteID == "" {
		t.Fatalf("moved device = %+v", d)
	}
	if r := e.Do(ten.Org, "GET", api+"/devices/"+id, nil); r.Status != 404 {
		t.Fatalf("the old organization still sees the device: %d", r.Status)
	}
}

func TestUpdateDeviceTagsAndName(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	id := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "web"})
	var d struct {
		DisplayName *string  `json:"displayName"`
		Tags        []string `json:"tags"`
	}
	e.Must(200, ten.Org, "PATCH", api+"/devices/"+id, map[string]any{"displayName": "Front web", "tags": []string{"web", "prod", "web", "east 2: rack/1", "Zed"}}).JSON(t, &d)
	if d.DisplayName == nil || *d.DisplayName != "Front web" || strings.Join(d.Tags, ",") != "Zed,east 2: rack/1,prod,web" {
		t.Fatalf("updated = %+v", d)
	}
	for _, body := range []map[string]any{{"tags": []string{"-bad"}}, {"tags": []string{strings.Repeat("a", 65)}}, {"siteId": "0190a0a0-0000-7000-8000-000000000003"}} {
		if r := e.Do(ten.Org, "PATCH", api+"/devices/"+id, body); r.Status != 400 {
			t.Errorf("PATCH %v = %d, want 400", body, r.Status)
		}
	}
	if l := listDevices(e, ten.Org, ""); len(l.Devices) != 1 || strings.Join(l.Devices[0].Tags, ",") != "Zed,east 2: rack/1,prod,web" {
		t.Fatalf("list tags = %+v", l.Devices)
	}
}

func TestSystemToolsGoThroughTheAgent(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	dev := enroll(e, key, secret, "web-01")
	a := connect(t, e, dev.AuthToken)
	base := api + "/system-tools/devices/" + dev.DeviceID
	answer := func(want string, res agentproto.CallResult) agentproto.Call {
		m := a.next(agentproto.TypeCall)
		var c agentproto.Call
		_ = json.Unmarshal(m.Payload, &c)
		if c.Method != want {
			t.Errorf("call method = %s, want %s", c.Method, want)
		}
		res.CallID = c.ID
		a.send(agentproto.TypeCallResult, c.ID, res)
		return c
	}
	type result struct{ r *apptest.Response }
	do := func(method, path string, body any) chan result {
		ch := make(chan result, 1)
		go func() { ch <- result{e.Do(ten.Org, method, base+path, body)} }()
		return ch
	}
	pending := do("GET", "/processes", nil)
	answer(agentproto.MethodProcessList, agentproto.CallResult{Result: json.RawMessage(`[{"pid":1,"ppid":0,"name":"init"},{"pid":42,"ppid":1,"name":"sshd"}]`)})
	r := (<-pending).r
	var procs struct {
		Data []agentproto.Process `json:"data"`
	}
	r.JSON(t, &procs)
	if r.Status != 200 || len(procs.Data) != 2 || procs.Data[1].Name != "sshd" {
		t.Fatalf("processes = %d %s", r.Status, r.Body)
	}
	pending = do("POST", "/processes/42/kill", map[string]any{"signal": "KILL"})
	call := answer(agentproto.MethodProcessKill, agentproto.CallResult{Result: json.RawMessage(`{"ok":true}`)})
	if string(call.Args) != `{"pid":42,"signal":"KILL"}` {
		t.Errorf("kill args = %s", call.Args)
	}
	if r := (<-pending).r; r.Status != 200 {
		t.Fatalf("kill = %d %s", r.Status, r.Body)
	}
	pending = do("GET", "/services/nope.service", nil)
	answer(agentproto.MethodServiceGet, agentproto.CallResult{Error: &agentproto.CallError{Code: agentproto.ErrNotFound, Message: "no such unit"}})
	if r := (<-pending).r; r.Status != 404 {
		t.Fatalf("missing service = %d %s", r.Status, r.Body)
	}
	pending = do("GET", "/services", nil)
	answer(agentproto.MethodServiceList, agentproto.CallResult{Error: &agentproto.CallError{Code: agentproto.ErrNotSupported, Message: "systemd is not running"}})
	if r := (<-pending).r; r.Status != 400 || r.ErrorCode() != agentproto.ErrNotSupported {
		t.Fatalf("services without systemd = %d %s", r.Status, r.Body)
	}
	if r := e.Do(ten.Org, "GET", base+"/registry/keys?hive=HKLM&path=SOFTWARE", nil); r.Status != 400 || r.ErrorCode() != agentproto.ErrNotSupported {
		t.Fatalf("registry on Linux = %d %s", r.Status, r.Body)
	}
	var audits struct {
		Data []struct {
			Action string `json:"action"`
			Result string `json:"result"`
		} `json:"data"`
	}
	e.Must(200, ten.Partner, "GET", api+"/audit/logs?action=device.system_tool", nil).JSON(t, &audits)
	if len(audits.Data) != 1 || audits.Data[0].Result != "success" {
		t.Errorf("audit of system-tool actions = %+v", audits.Data)
	}

	offline := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "down", Status: "offline"})
	if r := e.Do(ten.Org, "GET", api+"/system-tools/devices/"+offline+"/processes", nil); r.Status != 503 || r.ErrorCode() != "AGENT_OFFLINE" {
		t.Fatalf("offline device = %d %s", r.Status, r.Body)
	}
}

func TestWorkQueuedOnOneNodeReachesAnAgentOnAnother(t *testing.T) {
	e := apptest.New(t)
	if e.App.DB.Dialect != "postgres" {
		t.Skip("several nodes share a PostgreSQL database; SQLite runs one node")
	}
	other := e.SecondNode()
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	dev := enroll(e, key, secret, "web-01")
	a := connect(t, e, dev.AuthToken)
	var cmd struct{ ID string }
	other.Must(201, ten.Org, "POST", api+"/devices/"+dev.DeviceID+"/commands", map[string]any{"type": "reboot"}).JSON(t, &cmd)
	if m := a.next(agentproto.TypeCommand); m.ID != cmd.ID {
		t.Fatalf("got command %s, want %s", m.ID, cmd.ID)
	}
	done := make(chan *apptest.Response, 1)
	go func() { done <- other.Do(ten.Org, "GET", api+"/system-tools/devices/"+dev.DeviceID+"/processes", nil) }()
	m := a.next(agentproto.TypeCall)
	a.send(agentproto.TypeCallResult, m.ID, agentproto.CallResult{CallID: m.ID, Result: json.RawMessage(`[{"pid":7,"name":"x"}]`)})
	select {
	case r := <-done:
		if r.Status != 200 || !strings.Contains(string(r.Body), `"pid":7`) {
			t.Fatalf("call through another node = %d %s", r.Status, r.Body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call through another node did not come back")
	}
}

// Device lists keep rows cached on each node; every change shows in the next list, wherever
// it was made, and a watchdog that stops reporting shows offline once its time has passed,
// with no change of the row at all.
func TestDeviceListCacheFollowsEveryChange(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.DeviceOfflineAfter = time.Second })
	admin := e.Admin()
	ten := e.NewTenant(admin, "Alpha")
	org2 := e.CreateOrg(admin, ten.PartnerID, "Alpha Two")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	dev := enroll(e, key, secret, "web-01")
	row := func(c apptest.Caller, query string) *deviceRow {
		t.Helper()
		for _, d := range listDevices(e, c, query).Devices {
			if d.ID == dev.DeviceID {
				return &d
			}
		}
		return nil
	}
	first := row(ten.Partner, "")
	if first == nil || first.Metrics != nil && string(first.Metrics) != "null" {
		t.Fatalf("first list = %+v", first)
	}
	second := e.SecondNode()
	second.Must(200, ten.Org, "PATCH", api+"/devices/"+dev.DeviceID, map[string]any{"tags": []string{"db", "prod"}})
	if d := row(ten.Partner, ""); d == nil || strings.Join(d.Tags, ",") != "db,prod" {
		t.Fatalf("after tagging on another node = %+v", d)
	}
	second.Must(200, apptest.Caller{Token: dev.AuthToken}, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat",
		agentproto.Heartbeat{AgentVersion: "2", Metrics: &agentproto.Metrics{CPUPercent: 42}})
	if d := row(ten.Partner, ""); d == nil || !strings.Contains(string(d.Metrics), `"cpuPercent":42`) || !d.LastSeen.After(*first.LastSeen) {
		t.Fatalf("after a heartbeat on another node = %+v", d)
	}
	e.Must(200, apptest.Caller{Token: dev.WatchdogAuthToken}, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat",
		agentproto.Heartbeat{WatchdogState: "connected"})
	if d := row(ten.Partner, ""); d == nil || d.WatchdogStatus == nil || *d.WatchdogStatus != "connected" {
		t.Fatalf("after the watchdog's report = %+v", d)
	}
	time.Sleep(1100 * time.Millisecond)
	if d := row(ten.Partner, ""); d == nil || d.WatchdogStatus == nil || *d.WatchdogStatus != "offline" {
		t.Fatalf("after the watchdog went quiet = %+v", d)
	}
	row(ten.Org, "")
	second.Must(200, ten.Partner, "POST", api+"/devices/"+dev.DeviceID+"/move-org", map[string]any{"orgId": org2})
	if d := row(ten.Org, ""); d != nil {
		t.Fatalf("the old organization still lists the moved device: %+v", d)
	}
	if d := row(ten.Partner, ""); d == nil || d.OrgID != org2 {
		t.Fatalf("after the move = %+v", d)
	}
	second.Must(204, ten.Partner, "DELETE", api+"/devices/"+dev.DeviceID, nil)
	if d := row(ten.Partner, ""); d != nil {
		t.Fatalf("a decommissioned device is listed: %+v", d)
	}
	if d := row(ten.Partner, "includeDecommissioned=true"); d == nil || d.Status != "decommissioned" {
		t.Fatalf("with includeDecommissioned = %+v", d)
	}
	// A device of another tenant never comes out of the cache warmed by the system
	// administrator's list.
	other := e.NewTenant(admin, "Beta")
	foreign := e.InsertDevice(apptest.DeviceRow{PartnerID: other.PartnerID, OrgID: other.OrgID, SiteID: other.SiteID, Hostname: "beta-01"})
	listDevices(e, admin, "includeDecommissioned=true")
	for _, d := range listDevices(e, ten.Partner, "includeDecommissioned=true").Devices {
		if d.ID == foreign {
			t.Fatal("a partner lists another partner's device")
		}
	}
}

// TestInventoryShowsTheLinuxDetails: the detail fields agents report (physical disks, link
// state, gateways, resolver, logon history) come back as they were sent.
func TestInventoryShowsTheLinuxDetails(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	dev := enroll(e, key, secret, "web-01")
	logon := agentproto.LoggedInUser{Username: "alice", Terminal: "pts/0", Host: "192.0.2.10", StartedAt: time.Unix(1_700_000_000, 0).UTC()}
	sent := agentproto.Inventory{CollectedAt: time.Now().UTC(), Hostname: "web-01",
		OS: agentproto.OSInfo{Type: "linux", Name: "Debian GNU/Linux", Version: "12", PointRelease: "12.5", Codename: "bookworm",
			PrettyName: "Debian GNU/Linux 12 (bookworm)", DNSServers: []string{"192.0.2.53"}},
		Hardware: agentproto.Hardware{VirtualizationType: "vm", Virtualization: "kvm", CPUVendor: "GenuineIntel", CPUSockets: 2,
			SwapBytes: 1 << 30, ChassisType: "Other", SystemUUID: "u-1",
			PhysicalDisks: []agentproto.PhysicalDisk{{Name: "vda", Serial: "d\x00-1", SizeBytes: 1 << 30, Rotational: true}}},
		Network:    []agentproto.NetworkInterface{{Name: "eth0", Addresses: []string{}, Up: true, OperState: "up", SpeedMbps: 1000, Gateways: []string{"192.0.2.1"}}},
		LastLogons: []agentproto.LoggedInUser{logon}}
	e.Must(204, apptest.Caller{Token: dev.AuthToken}, "POST", api+"/agents/"+dev.DeviceID+"/inventory", sent)

	var d struct {
		Inventory struct {
			OS         agentproto.OSInfo             `json:"os"`
			Hardware   agentproto.Hardware           `json:"hardware"`
			Network    []agentproto.NetworkInterface `json:"network"`
			LastLogons []agentproto.LoggedInUser     `json:"lastLogons"`
		} `json:"inventory"`
	}
	e.Must(200, ten.Org, "GET", api+"/devices/"+dev.DeviceID, nil).JSON(t, &d)
	inv := d.Inventory
	sent.Hardware.PhysicalDisks[0].Serial = "d-1" // cleaned
	if inv.OS.PointRelease != "12.5" || inv.OS.Codename != "bookworm" || len(inv.OS.DNSServers) != 1 ||
		!reflect.DeepEqual(inv.Hardware, sent.Hardware) || !reflect.DeepEqual(inv.Network, sent.Network) ||
		len(inv.LastLogons) != 1 || inv.LastLogons[0] != logon {
		t.Fatalf("inventory shown = %+v", inv)
	}
}

// A search finds devices by any part of their hostname or display name, ignoring case, with
// wildcards taken literally; the name index follows renames.
func TestSearchByPartOfTheName(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	row := func(host string) string {
		return e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: host})
	}
	row("web-01")
	odd := row("WEB_100%")
	db := row("db-01")
	other := e.NewTenant(admin, "Other")
	e.InsertDevice(apptest.DeviceRow{PartnerID: other.PartnerID, OrgID: other.OrgID, SiteID: other.SiteID, Hostname: "web-02"})
	e.Must(200, ten.Org, "PATCH", api+"/devices/"+db, map[string]any{"displayName": "Front Desk"})

	search := func(q string) string {
		t.Helper()
		var out []string
		for _, d := range listDevices(e, ten.Org, "search="+url.QueryEscape(q)).Devices {
			out = append(out, d.Hostname)
		}
		return strings.Join(out, ",")
	}
	for q, want := range map[string]string{"EB-0": "web-01", "we": "WEB_100%,web-01", "_": "WEB_100%", "0%": "WEB_100%",
		"t des": "db-01", "web-02": "", "%": "WEB_100%"} {
		if got := search(q); got != want {
			t.Errorf("search %q = %q, want %q", q, got, want)
		}
	}
	e.Must(200, ten.Org, "PATCH", api+"/devices/"+db, map[string]any{"displayName": "Accounting"})
	if got := search("desk"); got != "" {
		t.Errorf("the old display name still matches: %q", got)
	}
	if got := search("counting"); got != "db-01" {
		t.Errorf("the new display name does not match: %q", got)
	}
	e.Must(204, ten.Partner, "DELETE", api+"/devices/"+odd, nil)
	if got := search("100"); got != "" {
		t.Errorf("a decommissioned device still matches: %q", got)
	}
}

// The list's osType and tag filters, and their refusals.
func TestListByOSAndTag(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Acme")
	linux := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "lin"})
	e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "win", OSType: "windows"})
	e.Must(200, ten.Org, "PATCH", api+"/devices/"+linux, map[string]any{"tags": []string{"east 2"}})
	names := func(query string) string {
		var out []string
		for _, d := range listDevices(e, ten.Org, query).Devices {
			out = append(out, d.Hostname)
		}
		return strings.Join(out, ",")
	}
	for query, want := range map[string]string{"osType=windows": "win", "osType=linux": "lin", "tag=east%202": "lin", "tag=east": "",
		"osType=windows&tag=east%202": ""} {
		if got := names(query); got != want {
			t.Errorf("devices?%s = %q, want %q", query, got, want)
		}
	}
	for _, query := range []string{"osType=beos", "tag=%25"} {
		if r := e.Do(ten.Org, "GET", api+"/devices?"+query, nil); r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" {
			t.Errorf("devices?%s = %d %s", query, r.Status, r.Body)
		}
	}
}
