package groups_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/groups"

	"gale/internal/platform/access"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

type world struct {
	e     *apptest.Env
	admin apptest.Caller
	a, b  apptest.Tenant // b is a foreign partner
}

func newWorld(t *testing.T) *world {
	w := &world{e: apptest.New(t)}
	w.admin = w.e.Admin()
	w.a = w.e.NewTenant(w.admin, "Alpha")
	w.b = w.e.NewTenant(w.admin, "Beta")
	return w
}

// device inserts a device of tenant a's organization straight into the database (no hooks run).
func (w *world) device(hostname string, tags ...string) string {
	return w.e.InsertDevice(apptest.DeviceRow{PartnerID: w.a.PartnerID, OrgID: w.a.OrgID, SiteID: w.a.SiteID, Hostname: hostname, Tags: tags})
}

// secondOrg adds an organization to partner a and returns it with its site.
func (w *world) secondOrg(name string) (orgID, siteID string) {
	w.e.T.Helper()
	orgID = w.e.CreateOrg(w.admin, w.a.PartnerID, name)
	var sites struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	w.e.Must(200, w.admin, "GET", api+"/orgs/sites?orgId="+orgID, nil).JSON(w.e.T, &sites)
	return orgID, sites.Data[0].ID
}

func (w *world) create(c apptest.Caller, body map[string]any) map[string]any {
	w.e.T.Helper()
	return w.e.Must(http.StatusCreated, c, "POST", api+"/groups", body).Map(w.e.T)
}

// dynamic creates a dynamic group of tenant a with one condition.
func (w *world) dynamic(name, field, op string, value any) string {
	w.e.T.Helper()
	cond := map[string]any{"field": field, "op": op}
	if value != nil {
		cond["value"] = value
	}
	g := w.create(w.a.Partner, map[string]any{"orgId": w.a.OrgID, "name": name, "type": "dynamic",
		"filter": map[string]any{"all": []any{cond}}})
	return g["id"].(string)
}

func (w *world) static(name string) string {
	w.e.T.Helper()
	return w.create(w.a.Partner, map[string]any{"orgId": w.a.OrgID, "name": name, "type": "static"})["id"].(string)
}

type member struct {
	DeviceID    string    `json:"deviceId"`
	Hostname    string    `json:"hostname"`
	DisplayName *string   `json:"displayName"`
	Status      string    `json:"status"`
	OSType      string    `json:"osType"`
	Source      string    `json:"source"`
	Pinned      bool      `json:"pinned"`
	AddedAt     time.Time `json:"addedAt"`
}

func (w *world) members(groupID string) []member {
	w.e.T.Helper()
	var l struct {
		Data []member `json:"data"`
	}
	w.e.Must(200, w.a.Partner, "GET", api+"/groups/"+groupID+"/devices", nil).JSON(w.e.T, &l)
	return l.Data
}

// hostnames lists the members' hostnames, in the list's order (by hostname).
func (w *world) hostnames(groupID string) string {
	w.e.T.Helper()
	var out []string
	for _, m := range w.members(groupID) {
		out = append(out, m.Hostname)
	}
	return strings.Join(out, ",")
}

type logEntry struct {
	ID       string `json:"id"`
	DeviceID string `json:"deviceId"`
	Hostname string `json:"hostname"`
	Action   string `json:"action"`
	Reason   string `json:"reason"`
	Actor    struct {
		Type string  `json:"type"`
		ID   *string `json:"id"`
	} `json:"actor"`
	OccurredAt time.Time `json:"occurredAt"`
}

func (w *world) log(groupID string) []logEntry {
	w.e.T.Helper()
	var l struct {
		Data []logEntry `json:"data"`
	}
	w.e.Must(200, w.a.Partner, "GET", api+"/groups/"+groupID+"/membership-log", nil).JSON(w.e.T, &l)
	return l.Data
}

// events renders log entries as "action hostname (reason) by actor-type", newest first.
func events(l []logEntry) string {
	var out []string
	for _, e := range l {
		out = append(out, fmt.Sprintf("%s %s (%s) by %s", e.Action, e.Hostname, e.Reason, e.Actor.Type))
	}
	return strings.Join(out, "; ")
}

func detailFields(t *testing.T, r *apptest.Response) string {
	t.Helper()
	var env struct {
		Error struct {
			Details []struct {
				Field string `json:"field"`
			} `json:"details"`
		} `json:"error"`
	}
	r.JSON(t, &env)
	var out []string
	for _, d := range env.Error.Details {
		out = append(out, d.Field)
	}
	return strings.Join(out, ",")
}

// Agents, through the real API.

func (w *world) newKey(orgID string) (string, string) {
	w.e.T.Helper()
	var k struct {
		Key    string `json:"key"`
		Secret string `json:"enrollmentSecret"`
	}
	w.e.Must(201, w.a.Partner, "POST", api+"/enrollment-keys", map[string]any{"orgId": orgID, "name": "test", "maxUsage": 100,
		"issueEnrollmentSecret": true}).JSON(w.e.T, &k)
	return k.Key, k.Secret
}

// enroll enrolls an agent that then starts: its first heartbeat brings the device online.
func (w *world) enroll(key, secret, hostname string) agentproto.EnrollResponse {
	w.e.T.Helper()
	var r agentproto.EnrollResponse
	w.e.Must(201, apptest.Anonymous, "POST", api+"/agents/enroll", agentproto.EnrollRequest{EnrollmentKey: key, EnrollmentSecret: secret,
		Hostname: hostname, OSType: "linux", OSVersion: "12", Architecture: "amd64", AgentVersion: "1.0.0"}).JSON(w.e.T, &r)
	w.e.Must(200, apptest.Bearer(r.AuthToken), "POST", api+"/agents/"+r.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "1.0.0"})
	return r
}

func (w *world) tag(deviceID string, tags ...string) {
	w.e.T.Helper()
	if tags == nil {
		tags = []string{}
	}
	w.e.Must(200, w.a.Partner, "PATCH", api+"/devices/"+deviceID, map[string]any{"tags": tags})
}

func TestCreateValidateAndChangeGroups(t *testing.T) {
	w := newWorld(t)
	org2, site2 := w.secondOrg("Alpha Two")
	bad := []struct {
		body    map[string]any
		details string
	}{
		{map[string]any{"name": "G", "type": "static"}, "orgId"},
		{map[string]any{"orgId": w.b.OrgID, "name": "G", "type": "static"}, "orgId"},
		{map[string]any{"orgId": w.a.OrgID, "name": "  ", "type": "static"}, "name"},
		{map[string]any{"orgId": w.a.OrgID, "name": strings.Repeat("n", 201), "type": "static"}, "name"},
		{map[string]any{"orgId": w.a.OrgID, "name": "G", "type": "smart"}, "type"},
		{map[string]any{"orgId": w.a.OrgID, "name": "G", "type": "static", "color": "red"}, "color"},
		{map[string]any{"orgId": w.a.OrgID, "name": "G", "type": "static", "filter": map[string]any{"all": []any{}}}, "filter"},
		{map[string]any{"orgId": w.a.OrgID, "name": "G", "type": "dynamic"}, "filter"},
		{map[string]any{"orgId": w.a.OrgID, "name": "G", "type": "dynamic", "filter": map[string]any{"all": []any{
			map[string]any{"field": "hostname", "op": "glob", "value": "web-["},
			map[string]any{"field": "tag", "op": "eq", "value": "x", "extra": true},
			map[string]any{"field": "lastSeen", "op": "eq", "value": 5},
		}}}, "filter.all[0].value,filter.all[1].extra,filter.all[2].op"},
		// A site of another organization and a custom field that does not exist could never match.
		{map[string]any{"orgId": w.a.OrgID, "name": "G", "type": "dynamic", "filter": map[string]any{"any": []any{
			map[string]any{"field": "siteId", "op": "eq", "value": site2},
			map[string]any{"field": "customField.tier", "op": "eq", "value": "gold"},
		}}}, "filter.any[0].value,filter.any[1].field"},
	}
	for _, c := range bad {
		r := w.e.Do(w.a.Partner, "POST", api+"/groups", c.body)
		if r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" {
			t.Errorf("create %v = %d %s, want 400 VALIDATION_ERROR", c.body, r.Status, r.Body)
		} else if d := detailFields(t, r); d != c.details {
			t.Errorf("create %v: details %s, want %s", c.body, d, c.details)
		}
	}

	g := w.create(w.a.Partner, map[string]any{"orgId": w.a.OrgID, "name": " Servers ", "description": "all servers", "type": "static"})
	if g["name"] != "Servers" || g["type"] != "static" || g["filter"] != nil || g["deviceCount"] != 0.0 || g["orgId"] != w.a.OrgID ||
		g["partnerId"] != w.a.PartnerID || g["createdBy"] == nil {
		t.Errorf("created = %v", g)
	}
	id := g["id"].(string)
	// Names are unique per organization, ignoring case; another organization may reuse them.
	for _, c := range []apptest.Caller{w.a.Partner, w.a.Org} {
		r := w.e.Do(c, "POST", api+"/groups", map[string]any{"orgId": w.a.OrgID, "name": "SERVERS", "type": "dynamic",
			"filter": map[string]any{"all": []any{map[string]any{"field": "tag", "op": "exists"}}}})
		if r.Status != 409 || r.ErrorCode() != "CONFLICT" {
			t.Errorf("duplicate name = %d %s, want 409 CONFLICT", r.Status, r.Body)
		}
	}
	w.create(w.a.Partner, map[string]any{"orgId": org2, "name": "Servers", "type": "static"})
	// An organization caller's groups default to its organization; it cannot name a sibling.
	mine := w.create(w.a.Org, map[string]any{"name": "Mine", "type": "dynamic",
		"filter": map[string]any{"all": []any{map[string]any{"field": "siteId", "op": "eq", "value": w.a.SiteID}}}})
	if mine["orgId"] != w.a.OrgID || !strings.Contains(string(mustJSON(mine["filter"])), w.a.SiteID) {
		t.Errorf("organization caller's group = %v", mine)
	}
	if r := w.e.Do(w.a.Org, "POST", api+"/groups", map[string]any{"orgId": org2, "name": "X", "type": "static"}); r.Status != 400 {
		t.Errorf("organization caller creating in a sibling org = %d, want 400", r.Status)
	}

	path := api + "/groups/" + id
	got := w.e.Must(200, w.a.Org, "PATCH", path, map[string]any{"name": "Web servers", "description": "", "type": "static"}).Map(t)
	if got["name"] != "Web servers" || got["description"] != "" {
		t.Errorf("patched = %v", got)
	}
	for body, want := range map[string]int{
		`{"type":"dynamic"}`: 400, `{"filter":{"all":[{"field":"tag","op":"exists"}]}}`: 400, `{"name":""}`: 400,
		`{"name":"mine"}`: 409, `{"orgId":"` + org2 + `"}`: 400,
	} {
		if r := w.e.Do(w.a.Partner, "PATCH", path, body); r.Status != want {
			t.Errorf("PATCH %s = %d %s, want %d", body, r.Status, r.Body, want)
		}
	}
	dyn := api + "/groups/" + mine["id"].(string)
	for body, details := range map[string]string{
		`{"type":"static"}`: "type", `{"filter":null}`: "filter", `{"filter":{"all":[{"field":"status","op":"eq","value":"asleep"}]}}`: "filter.all[0].value",
	} {
		if r := w.e.Do(w.a.Partner, "PATCH", dyn, body); r.Status != 400 || detailFields(t, r) != details {
			t.Errorf("PATCH dynamic %s = %d %s, want 400 on %s", body, r.Status, r.Body, details)
		}
	}

	// List: by name, with filters; GET; DELETE.
	names := func(c apptest.Caller, q string) string {
		var l struct {
			Data []map[string]any `json:"data"`
		}
		w.e.Must(200, c, "GET", api+"/groups"+q, nil).JSON(t, &l)
		var out []string
		for _, g := range l.Data {
			out = append(out, g["name"].(string))
		}
		return strings.Join(out, ",")
	}
	if n := names(w.a.Partner, ""); n != "Mine,Servers,Web servers" {
		t.Errorf("list = %s", n)
	}
	if n := names(w.a.Org, ""); n != "Mine,Web servers" {
		t.Errorf("organization caller's list = %s", n)
	}
	if n := names(w.a.Partner, "?orgId="+org2); n != "Servers" {
		t.Errorf("list by org = %s", n)
	}
	if n := names(w.a.Partner, "?type=dynamic"); n != "Mine" {
		t.Errorf("list by type = %s", n)
	}
	if n := names(w.a.Partner, "?search=WEB"); n != "Web servers" {
		t.Errorf("list by search = %s", n)
	}
	if n := names(w.b.Partner, ""); n != "" {
		t.Errorf("the other partner lists %s", n)
	}
	w.e.Must(200, w.a.Org, "GET", path, nil)
	w.e.Must(204, w.a.Org, "DELETE", path, nil)
	if r := w.e.Do(w.a.Org, "GET", path, nil); r.Status != 404 {
		t.Errorf("deleted group = %d, want 404", r.Status)
	}

	// Every write is audited.
	var logs struct {
		Data []struct {
			Action string `json:"action"`
		} `json:"data"`
	}
	w.e.Must(200, w.a.Partner, "GET", api+"/audit/logs?resourceType=device_group&limit=100", nil).JSON(t, &logs)
	counts := map[string]int{}
	for _, l := range logs.Data {
		counts[l.Action]++
	}
	if counts["device_group.create"] != 3 || counts["device_group.update"] != 1 || counts["device_group.delete"] != 1 {
		t.Errorf("audit actions = %v", counts)
	}

	// A viewer reads but does not write.
	_, viewer := w.e.CreateUser("viewer@alpha.test", access.LevelOrganization, w.a.PartnerID, w.a.OrgID, access.RoleOrgViewer)
	w.e.Must(200, viewer, "GET", api+"/groups", nil)
	w.e.Must(200, viewer, "POST", dyn+"/preview", nil)
	if r := w.e.Do(viewer, "POST", api+"/groups", map[string]any{"name": "V", "type": "static"}); r.Status != 403 {
		t.Errorf("viewer create = %d, want 403", r.Status)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestStaticGroupAddAndRemoveReportPerDevice(t *testing.T) {
	w := newWorld(t)
	org2, site2 := w.secondOrg("Alpha Two")
	d1, d2 := w.device("web-01"), w.device("web-02")
	sibling := w.e.InsertDevice(apptest.DeviceRow{PartnerID: w.a.PartnerID, OrgID: org2, SiteID: site2, Hostname: "two-01"})
	foreign := w.e.InsertDevice(apptest.DeviceRow{PartnerID: w.b.PartnerID, OrgID: w.b.OrgID, SiteID: w.b.SiteID, Hostname: "beta-01"})
	gone := w.device("gone-01")
	w.e.Must(204, w.a.Partner, "DELETE", api+"/devices/"+gone, nil)
	g := w.static("Servers")
	path := api + "/groups/" + g + "/devices"

	var res struct {
		Added []struct {
			DeviceID string `json:"deviceId"`
			Hostname string `json:"hostname"`
		} `json:"added"`
		Skipped []struct{ DeviceID, Code, Reason string } `json:"skipped"`
		Failed  []struct{ DeviceID, Code, Reason string } `json:"failed"`
	}
	w.e.Must(200, w.a.Org, "POST", path, map[string]any{"deviceIds": []string{d1, sibling, foreign, d1, gone, "not-an-id", d2}}).JSON(t, &res)
	if len(res.Added) != 2 || res.Added[0].DeviceID != d1 || res.Added[0].Hostname != "web-01" || res.Added[1].DeviceID != d2 || len(res.Skipped) != 0 {
		t.Fatalf("added = %+v skipped = %+v", res.Added, res.Skipped)
	}
	var failed []string
	for _, f := range res.Failed {
		failed = append(failed, f.DeviceID+" "+f.Code)
		if f.Reason == "" {
			t.Errorf("failure without a reason: %+v", f)
		}
	}
	// The organization caller does not even see the sibling organization's device.
	want := []string{sibling + " NOT_FOUND", foreign + " NOT_FOUND", gone + " NOT_FOUND", "not-an-id VALIDATION_ERROR"}
	if !slices.Equal(failed, want) {
		t.Errorf("failed = %v, want %v", failed, want)
	}
	// The partner sees it, and is told why it cannot join.
	w.e.Must(200, w.a.Partner, "POST", path, map[string]any{"deviceIds": []string{d2, sibling}}).JSON(t, &res)
	if len(res.Added) != 0 || len(res.Skipped) != 1 || res.Skipped[0].DeviceID != d2 || res.Skipped[0].Code != "CONFLICT" ||
		len(res.Failed) != 1 || res.Failed[0].Reason != "the device belongs to another organization than the group" {
		t.Errorf("second add = %+v", res)
	}
	ms := w.members(g)
	if len(ms) != 2 || ms[0].Hostname != "web-01" || ms[0].Source != "static" || ms[0].Pinned || ms[0].Status != "online" ||
		ms[0].OSType != "linux" || ms[0].AddedAt.IsZero() {
		t.Errorf("members = %+v", ms)
	}
	if c := w.e.Must(200, w.a.Partner, "GET", api+"/groups/"+g, nil).Map(t)["deviceCount"]; c != 2.0 {
		t.Errorf("deviceCount = %v, want 2", c)
	}
	var devs struct {
		Devices []struct {
			ID string `json:"id"`
		} `json:"devices"`
	}
	w.e.Must(200, w.a.Partner, "GET", api+"/devices?groupIds="+g, nil).JSON(t, &devs)
	if len(devs.Devices) != 2 || devs.Devices[0].ID != d1 || devs.Devices[1].ID != d2 {
		t.Errorf("GET /devices?groupIds = %+v, want the two members", devs.Devices)
	}

	w.e.Must(204, w.a.Org, "DELETE", path+"/"+d1, nil)
	if r := w.e.Do(w.a.Org, "DELETE", path+"/"+d1, nil); r.Status != 404 {
		t.Errorf("removing a non-member = %d, want 404", r.Status)
	}
	if h := w.hostnames(g); h != "web-02" {
		t.Errorf("after remove = %s", h)
	}
	l := w.log(g)
	if e := events(l); e != "left web-01 (removed by user) by user; joined web-02 (added by user) by user; joined web-01 (added by user) by user" {
		t.Errorf("log = %s", e)
	}
	if l[0].Actor.ID == nil || l[0].DeviceID != d1 {
		t.Errorf("log entry = %+v", l[0])
	}

	ids := make([]string, 501)
	for i := range ids {
		ids[i] = d1
	}
	for _, body := range []any{map[string]any{"deviceIds": ids}, map[string]any{"deviceIds": []string{}}} {
		if r := w.e.Do(w.a.Partner, "POST", path, body); r.Status != 400 {
			t.Errorf("add %d IDs = %d, want 400", len(body.(map[string]any)["deviceIds"].([]string)), r.Status)
		}
	}
	// A dynamic group takes no devices by hand: pinning is the way.
	dyn := w.dynamic("Tagged", "tag", "eq", "prod")
	r := w.e.Do(w.a.Partner, "POST", api+"/groups/"+dyn+"/devices", map[string]any{"deviceIds": []string{d1}})
	if r.Status != 400 || !strings.Contains(string(r.Body), "/pin") {
		t.Errorf("adding to a dynamic group = %d %s, want 400 pointing to pin", r.Status, r.Body)
	}
	if r := w.e.Do(w.a.Partner, "DELETE", api+"/groups/"+dyn+"/devices/"+d1, nil); r.Status != 400 {
		t.Errorf("removing from a dynamic group = %d, want 400", r.Status)
	}
}

func TestDynamicGroupFollowsTagsAndCustomFields(t *testing.T) {
	w := newWorld(t)
	prod := w.dynamic("Production", "tag", "eq", "prod")
	key, secret := w.newKey(w.a.OrgID)
	dev := w.enroll(key, secret, "web-01").DeviceID
	if h := w.hostnames(prod); h != "" {
		t.Fatalf("an untagged device joined: %s", h)
	}
	w.tag(dev, "prod", "web")
	if ms := w.members(prod); len(ms) != 1 || ms[0].DeviceID != dev || ms[0].Source != "dynamic" || ms[0].Pinned {
		t.Fatalf("after tagging = %+v", ms)
	}
	w.tag(dev, "web")
	if h := w.hostnames(prod); h != "" {
		t.Fatalf("after untagging = %s", h)
	}
	// A device provisioned with the tag joins at once, and stays when its agent enrolls.
	var p struct {
		Device struct {
			ID string `json:"id"`
		} `json:"device"`
		EnrollmentKey    string `json:"enrollmentKey"`
		EnrollmentSecret string `json:"enrollmentSecret"`
	}
	w.e.Must(201, w.a.Partner, "POST", api+"/devices/provision", map[string]any{"orgId": w.a.OrgID, "hostname": "planned",
		"tags": []string{"prod"}}).JSON(t, &p)
	w.enroll(p.EnrollmentKey, p.EnrollmentSecret, "db-01")
	if h := w.hostnames(prod); h != "db-01" {
		t.Fatalf("after provisioning and enrolling = %s", h)
	}
	if e := events(w.log(prod)); e != "joined planned (matches filter) by system; left web-01 (no longer matches filter) by system; joined web-01 (matches filter) by system" {
		t.Errorf("log = %s", e)
	}

	// Custom fields: through PATCH /devices/{id}/custom-fields, defaults included.
	w.e.Must(201, w.a.Partner, "POST", api+"/custom-fields", map[string]any{"key": "tier", "name": "Tier", "type": "select",
		"options": []string{"gold", "silver"}})
	gold := w.dynamic("Gold", "customField.tier", "eq", "gold")
	values := api + "/devices/" + dev + "/custom-fields"
	w.e.Must(200, w.a.Org, "PATCH", values, map[string]any{"values": map[string]any{"tier": "gold"}})
	if h := w.hostnames(gold); h != "web-01" {
		t.Fatalf("after setting the custom field = %q", h)
	}
	w.e.Must(200, w.a.Org, "PATCH", values, map[string]any{"values": map[string]any{"tier": "silver"}})
	if h := w.hostnames(gold); h != "" {
		t.Fatalf("after changing the custom field = %q", h)
	}
	if e := events(w.log(gold)); e != "left web-01 (no longer matches filter) by system; joined web-01 (matches filter) by system" {
		t.Errorf("custom field log = %s", e)
	}
	// A filter change recomputes at once, logged as such with the user as actor.
	w.e.Must(200, w.a.Partner, "PATCH", api+"/groups/"+gold, map[string]any{"filter": map[string]any{"any": []any{
		map[string]any{"field": "customField.tier", "op": "in", "value": []string{"gold", "silver"}}}}})
	if h := w.hostnames(gold); h != "web-01" {
		t.Fatalf("after widening the filter = %q", h)
	}
	if l := w.log(gold); l[0].Reason != "group filter changed" || l[0].Action != "joined" || l[0].Actor.Type != "user" {
		t.Errorf("filter change logged as %+v", l[0])
	}
	if g := w.e.Must(200, w.a.Partner, "GET", api+"/groups/"+gold, nil).Map(t); string(mustJSON(g["filter"])) !=
		`{"any":[{"field":"customField.tier","op":"in","value":["gold","silver"]}]}` || g["deviceCount"] != 1.0 {
		t.Errorf("group after the filter change = %v", g)
	}
}

func TestHostnameGlobAndInventoryRename(t *testing.T) {
	w := newWorld(t)
	w.device("web-01")
	w.device("WEB-02")
	w.device("db-01")
	web := w.dynamic("Web", "hostname", "glob", "web-*")
	if h := w.hostnames(web); h != "WEB-02,web-01" {
		t.Fatalf("created over existing devices = %s", h)
	}
	if l := w.log(web); len(l) != 2 || l[0].Reason != "matches filter" || l[0].Actor.Type != "user" {
		t.Errorf("log of the create = %s", events(l))
	}
	key, secret := w.newKey(w.a.OrgID)
	agent := w.enroll(key, secret, "web-03")
	if h := w.hostnames(web); h != "WEB-02,web-01,web-03" {
		t.Fatalf("after enrolling web-03 = %s", h)
	}
	// The agent reports another hostname in its inventory.
	w.e.Must(204, apptest.Caller{Token: agent.AuthToken}, "POST", api+"/agents/"+agent.DeviceID+"/inventory", agentproto.Inventory{
		Hostname: "db-03", OS: agentproto.OSInfo{Type: "linux", Name: "Debian GNU/Linux", Version: "12"}})
	if h := w.hostnames(web); h != "WEB-02,web-01" {
		t.Fatalf("after the inventory rename = %s", h)
	}
	if l := w.log(web); l[0].Action != "left" || l[0].Hostname != "db-03" || l[0].Reason != "no longer matches filter" {
		t.Errorf("rename logged as %+v", l[0])
	}
}

func TestStatusFollowsHeartbeatAndSweep(t *testing.T) {
	w := newWorld(t)
	online := w.dynamic("Online", "status", "eq", "online")
	offline := w.dynamic("Offline", "status", "eq", "offline")
	key, secret := w.newKey(w.a.OrgID)
	agent := w.enroll(key, secret, "web-01")
	if w.hostnames(online) != "web-01" || w.hostnames(offline) != "" {
		t.Fatalf("after enrolling: online %q offline %q", w.hostnames(online), w.hostnames(offline))
	}
	if _, err := w.e.App.DB.SQL.Exec(`UPDATE devices SET last_seen_at = $1 WHERE id = $2`, time.Now().UTC().Add(-20*time.Minute), agent.DeviceID); err != nil {
		t.Fatal(err)
	}
	if err := app.Service[*devices.Service](w.e.App).Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w.hostnames(online) != "" || w.hostnames(offline) != "web-01" {
		t.Fatalf("after the sweep: online %q offline %q", w.hostnames(online), w.hostnames(offline))
	}
	w.e.Must(200, apptest.Caller{Token: agent.AuthToken}, "POST", api+"/agents/"+agent.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "1.0.0"})
	if w.hostnames(online) != "web-01" || w.hostnames(offline) != "" {
		t.Fatalf("after a heartbeat: online %q offline %q", w.hostnames(online), w.hostnames(offline))
	}
	if e := events(w.log(offline)); e != "left web-01 (no longer matches filter) by system; joined web-01 (matches filter) by system" {
		t.Errorf("offline group log = %s", e)
	}
}

func TestPinKeepsANonMatchingDeviceAndUnpinLetsItGo(t *testing.T) {
	w := newWorld(t)
	tagged, plain := w.device("tagged", "prod"), w.device("plain")
	g := w.dynamic("Production", "tag", "eq", "prod")
	pin := func(dev string) member {
		var m member
		w.e.Must(200, w.a.Org, "POST", api+"/groups/"+g+"/devices/"+dev+"/pin", nil).JSON(t, &m)
		return m
	}
	if m := pin(plain); !m.Pinned || m.Source != "static" || m.Hostname != "plain" {
		t.Errorf("pinned non-matching device = %+v", m)
	}
	if m := pin(plain); !m.Pinned {
		t.Errorf("pinning twice = %+v", m)
	}
	if m := pin(tagged); !m.Pinned || m.Source != "dynamic" {
		t.Errorf("pinned matching device = %+v", m)
	}
	w.tag(tagged)
	if err := app.Service[*groups.Service](w.e.App).RecomputeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	ms := w.members(g)
	if len(ms) != 2 || ms[0].Hostname != "plain" || ms[1].Hostname != "tagged" || ms[1].Source != "static" || !ms[1].Pinned {
		t.Fatalf("a pinned device that stops matching stays: %+v", ms)
	}
	w.e.Must(204, w.a.Org, "DELETE", api+"/groups/"+g+"/devices/"+tagged+"/pin", nil)
	if h := w.hostnames(g); h != "plain" {
		t.Fatalf("after unpinning a non-matching device = %s", h)
	}
	// A pinned device that comes to match stays after unpinning, now by the filter.
	w.tag(plain, "prod")
	w.e.Must(204, w.a.Org, "DELETE", api+"/groups/"+g+"/devices/"+plain+"/pin", nil)
	if ms := w.members(g); len(ms) != 1 || ms[0].Hostname != "plain" || ms[0].Pinned || ms[0].Source != "dynamic" {
		t.Fatalf("after unpinning a matching device = %+v", ms)
	}
	w.e.Must(204, w.a.Org, "DELETE", api+"/groups/"+g+"/devices/"+plain+"/pin", nil) // not pinned: nothing to do
	want := "unpinned plain (unpinned by user) by user; " +
		"left tagged (no longer matches filter) by user; unpinned tagged (unpinned by user) by user; " +
		"pinned tagged (pinned by user) by user; pinned plain (pinned by user) by user; joined plain (pinned by user) by user; " +
		"joined tagged (matches filter) by user"
	if e := events(w.log(g)); e != want {
		t.Errorf("log =\n%s\nwant\n%s", e, want)
	}

	// Pinning is for dynamic groups, and for devices of the group's organization.
	st := w.static("Static")
	if r := w.e.Do(w.a.Org, "POST", api+"/groups/"+st+"/devices/"+plain+"/pin", nil); r.Status != 400 {
		t.Errorf("pin on a static group = %d, want 400", r.Status)
	}
	if r := w.e.Do(w.a.Org, "DELETE", api+"/groups/"+st+"/devices/"+plain+"/pin", nil); r.Status != 400 {
		t.Errorf("unpin on a static group = %d, want 400", r.Status)
	}
	org2, site2 := w.secondOrg("Alpha Two")
	sibling := w.e.InsertDevice(apptest.DeviceRow{PartnerID: w.a.PartnerID, OrgID: org2, SiteID: site2, Hostname: "two"})
	if r := w.e.Do(w.a.Partner, "POST", api+"/groups/"+g+"/devices/"+sibling+"/pin", nil); r.Status != 400 {
		t.Errorf("pinning another organization's device = %d, want 400", r.Status)
	}
	foreign := w.e.InsertDevice(apptest.DeviceRow{PartnerID: w.b.PartnerID, OrgID: w.b.OrgID, SiteID: w.b.SiteID, Hostname: "beta"})
	if r := w.e.Do(w.a.Partner, "POST", api+"/groups/"+g+"/devices/"+foreign+"/pin", nil); r.Status != 404 {
		t.Errorf("pinning a foreign device = %d, want 404", r.Status)
	}
	if r := w.e.Do(w.a.Partner, "DELETE", api+"/groups/"+g+"/devices/"+foreign+"/pin", nil); r.Status != 404 {
		t.Errorf("unpinning a non-member = %d, want 404", r.Status)
	}
}

func TestMoveOrgAndDecommissionLeaveEveryGroup(t *testing.T) {
	w := newWorld(t)
	org2, _ := w.secondOrg("Alpha Two")
	mover, retired, other := w.device("mover", "prod"), w.device("retired", "prod"), w.device("other")
	st := w.static("Static")
	w.e.Must(200, w.a.Partner, "POST", api+"/groups/"+st+"/devices", map[string]any{"deviceIds": []string{mover, retired}})
	dyn := w.dynamic("Production", "tag", "eq", "prod")
	pinned := w.dynamic("Pinned", "tag", "eq", "never")
	for _, d := range []string{mover, retired, other} {
		w.e.Must(200, w.a.Partner, "POST", api+"/groups/"+pinned+"/devices/"+d+"/pin", nil)
	}
	there := w.create(w.a.Partner, map[string]any{"orgId": org2, "name": "Production", "type": "dynamic",
		"filter": map[string]any{"all": []any{map[string]any{"field": "tag", "op": "eq", "value": "prod"}}}})["id"].(string)

	w.e.Must(200, w.a.Partner, "POST", api+"/devices/"+mover+"/move-org", map[string]any{"orgId": org2})
	w.e.Must(204, w.a.Partner, "DELETE", api+"/devices/"+retired, nil)
	if h := w.hostnames(st); h != "" {
		t.Errorf("static group after move and decommission = %s", h)
	}
	if h := w.hostnames(dyn); h != "" {
		t.Errorf("dynamic group after move and decommission = %s", h)
	}
	if h := w.hostnames(pinned); h != "other" {
		t.Errorf("pinned memberships after move and decommission = %s", h)
	}
	if h := w.hostnames(there); h != "mover" {
		t.Errorf("the new organization's group = %q, want the moved device", h)
	}
	for _, g := range []string{st, dyn, pinned} {
		l := w.log(g)
		if l[0].Hostname != "retired" || l[0].Action != "left" || l[0].Reason != "device decommissioned" || l[0].Actor.Type != "user" ||
			l[1].Hostname != "mover" || l[1].Action != "left" || l[1].Reason != "device moved" {
			t.Errorf("log of %s = %s", g, events(l))
		}
	}
	// Recomputation never brings them back.
	if err := app.Service[*groups.Service](w.e.App).RecomputeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h := w.hostnames(dyn); h != "" {
		t.Errorf("after RecomputeAll = %s", h)
	}
	var n int
	if err := w.e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM device_group_members WHERE device_id = $1`, retired).Scan(&n); err != nil || n != 0 {
		t.Errorf("a decommissioned device keeps %d memberships (%v)", n, err)
	}
}

func TestPreviewChangesNothing(t *testing.T) {
	w := newWorld(t)
	w.device("web-01", "prod")
	w.device("web-02")
	w.device("db-01", "prod")
	org2, site2 := w.secondOrg("Alpha Two")
	w.e.InsertDevice(apptest.DeviceRow{PartnerID: w.a.PartnerID, OrgID: org2, SiteID: site2, Hostname: "web-sibling", Tags: []string{"prod"}})
	w.e.InsertDevice(apptest.DeviceRow{PartnerID: w.b.PartnerID, OrgID: w.b.OrgID, SiteID: w.b.SiteID, Hostname: "web-foreign", Tags: []string{"prod"}})
	g := w.dynamic("Production", "tag", "eq", "prod")
	before := events(w.log(g))

	type preview struct {
		Filter json.RawMessage `json:"filter"`
		Count  int             `json:"count"`
		Data   []struct {
			Hostname string `json:"hostname"`
			Member   bool   `json:"member"`
		} `json:"data"`
		HasMore bool `json:"hasMore"`
	}
	var p preview
	w.e.Must(200, w.a.Org, "POST", api+"/groups/"+g+"/preview", nil).JSON(t, &p)
	if p.Count != 2 || len(p.Data) != 2 || p.Data[0].Hostname != "db-01" || !p.Data[0].Member || p.HasMore ||
		string(p.Filter) != `{"all":[{"field":"tag","op":"eq","value":"prod"}]}` {
		t.Errorf("preview of the stored filter = %+v", p)
	}
	w.e.Must(200, w.a.Org, "POST", api+"/groups/"+g+"/preview?limit=1", map[string]any{"filter": map[string]any{"all": []any{
		map[string]any{"field": "hostname", "op": "glob", "value": "web-*"}}}}).JSON(t, &p)
	if p.Count != 2 || len(p.Data) != 1 || p.Data[0].Hostname != "web-01" || !p.Data[0].Member || !p.HasMore {
		t.Errorf("preview of another filter = %+v (never another organization's devices)", p)
	}
	if h := w.hostnames(g); h != "db-01,web-01" {
		t.Errorf("membership after previews = %s", h)
	}
	if after := events(w.log(g)); after != before {
		t.Errorf("log after previews = %s, was %s", after, before)
	}
	if g := w.e.Must(200, w.a.Org, "GET", api+"/groups/"+g, nil).Map(t); !strings.Contains(string(mustJSON(g["filter"])), "prod") {
		t.Errorf("the preview's filter was saved: %v", g["filter"])
	}
	r := w.e.Do(w.a.Org, "POST", api+"/groups/"+g+"/preview", map[string]any{"filter": map[string]any{"all": []any{
		map[string]any{"field": "hostname", "op": "matches", "value": "(web"}}}})
	if r.Status != 400 || detailFields(t, r) != "filter.all[0].value" {
		t.Errorf("preview of a bad filter = %d %s", r.Status, r.Body)
	}
	if r := w.e.Do(w.a.Org, "POST", api+"/groups/"+w.static("Static")+"/preview", nil); r.Status != 400 {
		t.Errorf("preview of a static group = %d, want 400", r.Status)
	}
}

func TestRecomputeAllPicksUpLastSeen(t *testing.T) {
	w := newWorld(t)
	fresh, stale := w.device("fresh"), w.device("stale")
	g := w.dynamic("Quiet", "lastSeen", "olderThanMinutes", 10)
	seen := w.dynamic("Seen", "lastSeen", "withinMinutes", 10)
	if w.hostnames(g) != "" || w.hostnames(seen) != "fresh,stale" {
		t.Fatalf("at create: quiet %q seen %q", w.hostnames(g), w.hostnames(seen))
	}
	// Time passes for one device: no device change announces it.
	if _, err := w.e.App.DB.SQL.Exec(`UPDATE devices SET last_seen_at = $1 WHERE id = $2`, time.Now().UTC().Add(-15*time.Minute), stale); err != nil {
		t.Fatal(err)
	}
	if err := app.Service[*groups.Service](w.e.App).RecomputeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w.hostnames(g) != "stale" || w.hostnames(seen) != "fresh" {
		t.Fatalf("after RecomputeAll: quiet %q seen %q", w.hostnames(g), w.hostnames(seen))
	}
	if l := w.log(g); len(l) != 1 || l[0].Action != "joined" || l[0].Reason != "matches filter" || l[0].Actor.Type != "system" || l[0].Actor.ID != nil {
		t.Errorf("log = %s", events(l))
	}
	// Custom field defaults change without a device change: the sweep picks that up too.
	f := w.e.Must(201, w.a.Partner, "POST", api+"/custom-fields", map[string]any{"key": "tier", "name": "Tier", "type": "text"}).Map(t)
	gold := w.dynamic("Gold", "customField.tier", "eq", "gold")
	w.e.Must(200, w.a.Partner, "PATCH", api+"/custom-fields/"+f["id"].(string), map[string]any{"defaultValue": "gold"})
	if err := app.Service[*groups.Service](w.e.App).RecomputeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h := w.hostnames(gold); h != "fresh,stale" {
		t.Errorf("after a default changed = %q", h)
	}
	if err := app.Service[*groups.Service](w.e.App).RecomputeGroup(context.Background(), fresh); err == nil {
		t.Error("RecomputeGroup of a device ID succeeded")
	}
	if err := app.Service[*groups.Service](w.e.App).RecomputeGroup(context.Background(), g); err != nil {
		t.Error(err)
	}
}

func TestMembershipLogNewestFirstAndPaged(t *testing.T) {
	w := newWorld(t)
	g := w.static("Static")
	var ids []string
	for i := range 5 {
		ids = append(ids, w.device(fmt.Sprintf("dev-%d", i)))
	}
	for _, id := range ids {
		w.e.Must(200, w.a.Partner, "POST", api+"/groups/"+g+"/devices", map[string]any{"deviceIds": []string{id}})
	}
	w.e.Must(204, w.a.Partner, "DELETE", api+"/groups/"+g+"/devices/"+ids[0], nil)
	var got []string
	cursor := ""
	for {
		var l struct {
			Data       []logEntry `json:"data"`
			Pagination struct {
				HasMore bool   `json:"hasMore"`
				Cursor  string `json:"cursor"`
			} `json:"pagination"`
		}
		w.e.Must(200, w.a.Partner, "GET", api+"/groups/"+g+"/membership-log?limit=2&cursor="+cursor, nil).JSON(t, &l)
		for _, e := range l.Data {
			got = append(got, e.Action+" "+e.Hostname)
		}
		if !l.Pagination.HasMore {
			break
		}
		cursor = l.Pagination.Cursor
	}
	want := "left dev-0,joined dev-4,joined dev-3,joined dev-2,joined dev-1,joined dev-0"
	if strings.Join(got, ",") != want {
		t.Errorf("log pages = %v, want %s", got, want)
	}
	var one struct {
		Data []logEntry `json:"data"`
	}
	w.e.Must(200, w.a.Partner, "GET", api+"/groups/"+g+"/membership-log?deviceId="+ids[0], nil).JSON(t, &one)
	if len(one.Data) != 2 || one.Data[0].Action != "left" || one.Data[1].Action != "joined" {
		t.Errorf("one device's log = %+v", one.Data)
	}
}

func TestForeignGroupsAreNotFoundOnEveryRoute(t *testing.T) {
	w := newWorld(t)
	foreignDev := w.e.InsertDevice(apptest.DeviceRow{PartnerID: w.b.PartnerID, OrgID: w.b.OrgID, SiteID: w.b.SiteID, Hostname: "beta", Tags: []string{"x"}})
	foreignStatic := w.create(w.b.Partner, map[string]any{"orgId": w.b.OrgID, "name": "Theirs", "type": "static"})["id"].(string)
	w.e.Must(200, w.b.Partner, "POST", api+"/groups/"+foreignStatic+"/devices", map[string]any{"deviceIds": []string{foreignDev}})
	foreignDyn := w.create(w.b.Partner, map[string]any{"orgId": w.b.OrgID, "name": "Tagged", "type": "dynamic",
		"filter": map[string]any{"all": []any{map[string]any{"field": "tag", "op": "exists"}}}})["id"].(string)
	org2, _ := w.secondOrg("Alpha Two")
	sibling := w.create(w.a.Partner, map[string]any{"orgId": org2, "name": "Sibling", "type": "dynamic",
		"filter": map[string]any{"all": []any{map[string]any{"field": "tag", "op": "exists"}}}})["id"].(string)
	mine := w.device("mine")

	routes := func(g string) [][3]any {
		return [][3]any{
			{"GET", "/groups/" + g, nil},
			{"PATCH", "/groups/" + g, map[string]any{"name": "Hijack"}},
			{"GET", "/groups/" + g + "/devices", nil},
			{"POST", "/groups/" + g + "/devices", map[string]any{"deviceIds": []string{mine}}},
			{"DELETE", "/groups/" + g + "/devices/" + foreignDev, nil},
			{"POST", "/groups/" + g + "/preview", nil},
			{"POST", "/groups/" + g + "/devices/" + mine + "/pin", nil},
			{"DELETE", "/groups/" + g + "/devices/" + foreignDev + "/pin", nil},
			{"GET", "/groups/" + g + "/membership-log", nil},
			{"DELETE", "/groups/" + g, nil},
		}
	}
	check := func(who string, c apptest.Caller, groups ...string) {
		for _, g := range groups {
			for _, r := range routes(g) {
				if res := w.e.Do(c, r[0].(string), api+r[1].(string), r[2]); res.Status != 404 {
					t.Errorf("%s: %s %s = %d %s, want 404", who, r[0], r[1], res.Status, res.Body)
				}
			}
		}
	}
	check("other partner", w.a.Partner, foreignStatic, foreignDyn)
	check("organization caller", w.a.Org, foreignStatic, foreignDyn, sibling)
	// Nothing changed for the owner.
	var l struct {
		Data []map[string]any `json:"data"`
	}
	w.e.Must(200, w.b.Partner, "GET", api+"/groups", nil).JSON(t, &l)
	if len(l.Data) != 2 || l.Data[0]["name"] != "Tagged" || l.Data[1]["deviceCount"] != 1.0 {
		t.Errorf("owner's groups = %v", l.Data)
	}
	// The partner reaches its other organization's group.
	w.e.Must(200, w.a.Partner, "GET", api+"/groups/"+sibling, nil)
	// A device of another tenant never joins a dynamic group, even when it matches.
	if err := app.Service[*groups.Service](w.e.App).RecomputeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h := w.hostnames(sibling); h != "" {
		t.Errorf("sibling org's group holds %s", h)
	}
	var ms struct {
		Data []member `json:"data"`
	}
	w.e.Must(200, w.b.Partner, "GET", api+"/groups/"+foreignDyn+"/devices", nil).JSON(t, &ms)
	if len(ms.Data) != 1 || ms.Data[0].Hostname != "beta" {
		t.Errorf("foreign dynamic group = %+v", ms.Data)
	}
}
