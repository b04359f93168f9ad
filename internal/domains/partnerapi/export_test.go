package partnerapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"gale/internal/app"

	"gale/internal/domains/devices"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// seedDevices inserts n devices into the tenant's organization and returns their IDs.
func (e *env) seedDevices(ten apptest.Tenant, n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID,
			Hostname: fmt.Sprintf("%s-%03d", prefix, i)})
	}
	return out
}

// report stores an inventory for a device as its agent would.
func (e *env) report(ten apptest.Tenant, deviceID string, software ...string) {
	e.t.Helper()
	inv := agentproto.Inventory{Hostname: "reported", OS: agentproto.OSInfo{Type: "linux", Name: "Debian GNU/Linux", Version: "12"},
		Hardware: agentproto.Hardware{Manufacturer: "Acme", CPUCores: 8}}
	for _, name := range software {
		inv.Software = append(inv.Software, agentproto.Software{Name: name, Version: "1.0", Source: "dpkg"})
	}
	err := app.Service[*devices.Service](e.App).StoreInventory(e.t.Context(), devices.Agent{DeviceID: deviceID, PartnerID: ten.PartnerID, OrgID: ten.OrgID}, inv)
	if err != nil {
		e.t.Fatal(err)
	}
}

// Rule 7: following the cursor while hasMore visits every row exactly once, in a stable order,
// even while rows are being added.
func TestExportVisitsEveryRowOnceWhileRowsAreAdded(t *testing.T) {
	e := newEnv(t)
	p := e.full("Warehouse")
	seeded := e.seedDevices(e.ten, 250, "host")
	for _, mode := range []string{"", "&updatedSince=" + url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))} {
		t.Run("updatedSince="+mode, func(t *testing.T) {
			var added []string
			rows := e.traverse(p.Caller, papi+"/devices?limit=100"+mode, func() {
				added = append(added, e.seedDevices(e.ten, 5, "late-"+fmt.Sprint(len(added)))...)
			})
			got := ids(rows, "id")
			seen := map[string]int{}
			for _, id := range got {
				seen[id]++
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("device %s visited %d times", id, n)
				}
			}
			for _, id := range seeded {
				if seen[id] != 1 {
					t.Fatalf("seeded device %s visited %d times", id, seen[id])
				}
			}
			// Rows added while paging land after the cursor (IDs and change times grow), so
			// this traversal reads them too.
			for _, id := range added {
				if seen[id] != 1 {
					t.Errorf("device %s added during the traversal visited %d times", id, seen[id])
				}
			}
			if mode == "" && !slices.IsSorted(got) {
				t.Error("devices are not in ID order")
			}
			seeded = append(seeded, added...)
		})
	}
}

func TestExportLimit(t *testing.T) {
	e := newEnv(t)
	p := e.full("Warehouse")
	e.seedDevices(e.ten, 620, "host")
	if got := len(e.page(p.Caller, papi+"/devices").Data); got != 100 {
		t.Errorf("default page = %d rows, want 100", got)
	}
	first := e.page(p.Caller, papi+"/devices?limit=1000")
	if len(first.Data) != 500 || !first.Pagination.HasMore || first.Pagination.Cursor == "" {
		t.Errorf("limit=1000 gave %d rows (hasMore %v), want 500 and more", len(first.Data), first.Pagination.HasMore)
	}
	rest := e.page(p.Caller, papi+"/devices?limit=500&cursor="+first.Pagination.Cursor)
	if len(rest.Data) != 120 || rest.Pagination.HasMore {
		t.Errorf("second page = %d rows (hasMore %v), want the last 120", len(rest.Data), rest.Pagination.HasMore)
	}
	for _, bad := range []string{"0", "-1", "many"} {
		wantError(t, e.Do(p.Caller, "GET", papi+"/devices?limit="+bad, nil), http.StatusBadRequest, "VALIDATION_ERROR")
	}
}

func TestCursorsAreSigned(t *testing.T) {
	e := newEnv(t)
	p := e.full("Warehouse")
	e.seedDevices(e.ten, 5, "host")
	cur := e.page(p.Caller, papi+"/devices?limit=2").Pagination.Cursor
	payload, mac, _ := strings.Cut(cur, ".")
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	beta := e.NewTenant(e.admin, "Beta")
	betaP := e.newPrincipal(beta.Partner, restricted("Beta warehouse"))
	since := e.page(p.Caller, papi+"/devices?limit=2&updatedSince=2020-01-01T00:00:00Z").Pagination.Cursor
	for name, c := range map[string]struct {
		caller apptest.Caller
		path   string
	}{
		"payload altered":     {p.Caller, "/devices?cursor=" + flip(payload, 3) + "." + mac},
		"signature altered":   {p.Caller, "/devices?cursor=" + payload + "." + flip(mac, 2)},
		"unsigned":            {p.Caller, "/devices?cursor=" + payload},
		"garbage":             {p.Caller, "/devices?cursor=not-a-cursor"},
		"another export":      {p.Caller, "/sites?cursor=" + cur},
		"another partner":     {betaP.Caller, "/devices?cursor=" + cur},
		"updatedSince change": {p.Caller, "/devices?updatedSince=2021-01-01T00:00:00Z&cursor=" + since},
		"updatedSince added":  {p.Caller, "/devices?updatedSince=2021-01-01T00:00:00Z&cursor=" + cur},
		"bad updatedSince":    {p.Caller, "/devices?updatedSince=yesterday"},
		"empty export":        {p.Caller, "/scripts?cursor=" + cur},
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, e.Do(c.caller, "GET", papi+c.path, nil), http.StatusBadRequest, "VALIDATION_ERROR")
		})
	}
	e.Must(http.StatusOK, p.Caller, "GET", papi+"/devices?cursor="+cur, nil)
	// The cursor carries updatedSince, so later pages may repeat it or leave it out.
	e.Must(http.StatusOK, p.Caller, "GET", papi+"/devices?cursor="+since, nil)
	e.Must(http.StatusOK, p.Caller, "GET", papi+"/devices?updatedSince=2020-01-01T00:00:00Z&cursor="+since, nil)
}

// updatedSince reads only what changed, in order of change; a row that changes again while
// a traversal runs comes again with its new state, so nothing is missed.
func TestUpdatedSince(t *testing.T) {
	e := newEnv(t)
	p := e.full("Warehouse")
	pa := e.ten.Partner
	var orgs []string
	for i := range 3 {
		orgs = append(orgs, e.CreateOrg(pa, "", fmt.Sprintf("Customer %d", i)))
	}
	devs := e.seedDevices(e.ten, 3, "host")
	e.report(e.ten, devs[0], "curl", "git")
	field := e.Must(http.StatusCreated, pa, "POST", "/api/v1/custom-fields", map[string]any{"key": "asset_tag", "name": "Asset tag",
		"type": "text"}).Map(t)["id"].(string)
	e.Must(http.StatusOK, pa, "PATCH", "/api/v1/devices/"+devs[0]+"/custom-fields", map[string]any{"values": map[string]any{"asset_tag": "A-1"}})

	time.Sleep(5 * time.Millisecond)
	mark := time.Now().UTC()
	time.Sleep(5 * time.Millisecond)
	since := "?updatedSince=" + url.QueryEscape(mark.Format(time.RFC3339Nano))
	for _, export := range []string{"organizations", "sites", "devices", "device-inventory", "device-software", "custom-fields", "custom-field-values"} {
		if rows := e.traverse(p.Caller, papi+"/"+export+since, nil); len(rows) != 0 {
			t.Errorf("%s changed since the mark: %v, want none", export, rows)
		}
	}

	e.Must(http.StatusOK, pa, "PATCH", "/api/v1/orgs/organizations/"+orgs[1], map[string]any{"name": "Renamed"})
	newOrg := e.CreateOrg(pa, "", "Customer new")
	e.Must(http.StatusOK, pa, "PATCH", "/api/v1/orgs/organizations/"+orgs[0], map[string]any{"status": "suspended"})
	e.report(e.ten, devs[1], "vim", "nano", "htop", "jq", "tmux")
	e.Must(http.StatusOK, pa, "PATCH", "/api/v1/devices/"+devs[2]+"/custom-fields", map[string]any{"values": map[string]any{"asset_tag": "A-3"}})
	e.Must(http.StatusOK, pa, "PATCH", "/api/v1/custom-fields/"+field, map[string]any{"name": "Asset number"})

	if got := ids(e.traverse(p.Caller, papi+"/organizations"+since+"&limit=1", nil), "id"); !slices.Equal(got, []string{orgs[1], newOrg, orgs[0]}) {
		t.Errorf("organizations since the mark = %v, want %v (in order of change)", got, []string{orgs[1], newOrg, orgs[0]})
	}
	if got := ids(e.traverse(p.Caller, papi+"/sites"+since, nil), "orgId"); !slices.Equal(got, []string{newOrg}) {
		t.Errorf("sites since the mark belong to %v, want the new organization's default site", got)
	}
	// A reported inventory changes the device (its summary fields); a custom value does not.
	if got := ids(e.traverse(p.Caller, papi+"/devices"+since, nil), "id"); !slices.Equal(got, []string{devs[1]}) {
		t.Errorf("devices since the mark = %v, want %s", got, devs[1])
	}
	if got := ids(e.traverse(p.Caller, papi+"/device-inventory"+since, nil), "deviceId"); !slices.Equal(got, []string{devs[1]}) {
		t.Errorf("inventories since the mark = %v, want %s's", got, devs[1])
	}
	sw := e.traverse(p.Caller, papi+"/device-software"+since+"&limit=2", nil)
	names := []string{}
	for _, r := range sw {
		if r["deviceId"] != devs[1] {
			t.Errorf("software since the mark of another device: %v", r)
		}
		names = append(names, r["name"].(string))
	}
	if slices.Sort(names); !slices.Equal(names, []string{"htop", "jq", "nano", "tmux", "vim"}) {
		t.Errorf("software since the mark = %v, want %s's new list", names, devs[1])
	}
	if got := e.traverse(p.Caller, papi+"/device-software?limit=3", nil); len(got) != 7 || !slices.IsSorted(ids(got, "id")) {
		t.Errorf("the full software export = %d rows, want 7 in ID order", len(got))
	}
	vals := e.traverse(p.Caller, papi+"/custom-field-values"+since, nil)
	if len(vals) != 1 || vals[0]["deviceId"] != devs[2] || vals[0]["value"] != "A-3" || vals[0]["fieldKey"] != "asset_tag" {
		t.Errorf("values since the mark = %v", vals)
	}
	if got := ids(e.traverse(p.Caller, papi+"/custom-fields"+since, nil), "id"); !slices.Equal(got, []string{field}) {
		t.Errorf("fields since the mark = %v, want %s", got, field)
	}

	// A row that changes during a traversal comes again at the end, with its new state.
	changed := false
	rows := e.traverse(p.Caller, papi+"/organizations"+since+"&limit=1", func() {
		if !changed {
			e.Must(http.StatusOK, pa, "PATCH", "/api/v1/orgs/organizations/"+orgs[1], map[string]any{"name": "Renamed again"})
			changed = true
		}
	})
	got := ids(rows, "id")
	if !slices.Equal(got, []string{orgs[1], newOrg, orgs[0], orgs[1]}) || rows[3]["name"] != "Renamed again" {
		t.Errorf("traversal with a change in between = %v, want %s again at the end with its new name", got, orgs[1])
	}
}

// scriptAndAutomation creates a script and an automation as the tenant's partner caller: of
// the organization orgID, or partner-wide when orgID is empty.
func (e *env) scriptAndAutomation(ten apptest.Tenant, orgID, name string) {
	e.t.Helper()
	script := map[string]any{"name": name, "osTypes": []string{"linux"}, "language": "sh", "content": "true"}
	automation := map[string]any{"name": name, "trigger": map[string]any{"type": "manual"}, "targets": map[string]any{"type": "organization"},
		"actions": []map[string]any{{"type": "create_alert", "severity": "low", "title": name, "message": "m"}}}
	if orgID != "" {
		script["orgId"], automation["orgId"] = orgID, orgID
	}
	e.Must(http.StatusCreated, ten.Partner, "POST", "/api/v1/scripts", script)
	e.Must(http.StatusCreated, ten.Partner, "POST", "/api/v1/automations", automation)
}

// A principal sees only its partner's rows, in every export (partner-wide scripts and
// automations too), and no rows of deleted organizations. The exports Gale has no data for
// answer empty pages.
func TestExportsStayWithinThePartner(t *testing.T) {
	e := newEnv(t)
	beta := e.NewTenant(e.admin, "Beta")
	seed := func(ten apptest.Tenant, prefix string) string {
		dev := e.seedDevices(ten, 2, prefix)
		e.report(ten, dev[0], prefix+"-tool")
		e.Must(http.StatusCreated, ten.Partner, "POST", "/api/v1/custom-fields", map[string]any{"key": "tier", "name": "Tier", "type": "text"})
		e.Must(http.StatusOK, ten.Partner, "PATCH", "/api/v1/devices/"+dev[0]+"/custom-fields", map[string]any{"values": map[string]any{"tier": prefix}})
		e.scriptAndAutomation(ten, ten.OrgID, prefix+" check")
		e.scriptAndAutomation(ten, "", prefix+" everywhere")
		return dev[0]
	}
	alphaDev := seed(e.ten, "alpha")
	seed(beta, "beta")
	gone := e.CreateOrg(e.ten.Partner, "", "Gone")
	e.InsertDevice(apptest.DeviceRow{PartnerID: e.ten.PartnerID, OrgID: gone, SiteID: e.page(e.ten.Partner, "/api/v1/orgs/sites?orgId="+gone).Data[0]["id"].(string),
		Hostname: "gone-host"})
	e.scriptAndAutomation(e.ten, gone, "gone check")
	e.Must(http.StatusNoContent, e.ten.Partner, "DELETE", "/api/v1/orgs/organizations/"+gone, nil)

	p := e.full("Alpha warehouse")
	exports := map[string]struct {
		field string
		want  string
		n     int
	}{
		"organizations":       {"partnerId", e.ten.PartnerID, 1},
		"sites":               {"partnerId", e.ten.PartnerID, 1},
		"devices":             {"partnerId", e.ten.PartnerID, 2},
		"device-inventory":    {"orgId", e.ten.OrgID, 1},
		"device-software":     {"orgId", e.ten.OrgID, 1},
		"custom-fields":       {"partnerId", e.ten.PartnerID, 1},
		"custom-field-values": {"orgId", e.ten.OrgID, 1},
		"scripts":             {"partnerId", e.ten.PartnerID, 2},
		"automations":         {"partnerId", e.ten.PartnerID, 2},
	}
	for export, w := range exports {
		rows := e.traverse(p.Caller, papi+"/"+export, nil)
		if len(rows) != w.n {
			t.Errorf("%s: %d rows, want %d: %v", export, len(rows), w.n, rows)
		}
		for _, r := range rows {
			if r[w.field] != w.want {
				t.Errorf("%s row of another tenant or a deleted organization: %v", export, r)
			}
		}
	}
	st := e.page(p.Caller, papi+"/sites").Data[0]
	if st["orgId"] != e.ten.OrgID || st["siteId"] != e.ten.SiteID || st["name"] != "Main Site" {
		t.Errorf("site row = %v, want orgId, siteId and name", st)
	}
	inv := e.page(p.Caller, papi+"/device-inventory").Data[0]
	if inv["deviceId"] != alphaDev || inv["siteId"] != e.ten.SiteID || inv["softwareCount"] != float64(1) ||
		inv["hardware"].(map[string]any)["manufacturer"] != "Acme" || inv["receivedAt"] == nil {
		t.Errorf("inventory row = %v", inv)
	}
	sw := e.page(p.Caller, papi+"/device-software").Data[0]
	if sw["deviceId"] != alphaDev || sw["name"] != "alpha-tool" || sw["version"] != "1.0" || sw["id"] == nil {
		t.Errorf("software row = %v", sw)
	}
	val := e.page(p.Caller, papi+"/custom-field-values").Data[0]
	if val["deviceId"] != alphaDev || val["fieldKey"] != "tier" || val["value"] != "alpha" {
		t.Errorf("value row = %v", val)
	}
	for _, export := range []string{"scripts", "automations"} {
		var names []string
		for _, r := range e.traverse(p.Caller, papi+"/"+export, nil) {
			names = append(names, r["name"].(string))
		}
		if slices.Sort(names); !slices.Equal(names, []string{"alpha check", "alpha everywhere"}) {
			t.Errorf("%s exports %v, want alpha's two", export, names)
		}
	}
	for _, export := range []string{"device-relationships", "backup-configurations"} {
		body := strings.TrimSpace(string(e.Must(http.StatusOK, p.Caller, "GET", papi+"/"+export, nil).Body))
		if body != `{"data":[],"pagination":{"hasMore":false}}` {
			t.Errorf("%s = %s, want an empty page", export, body)
		}
	}
}
