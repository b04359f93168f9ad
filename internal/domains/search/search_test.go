package search_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gale/internal/platform/access"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

type world struct {
	e     *apptest.Env
	admin apptest.Caller
	a, b  apptest.Tenant // b is a foreign partner with look-alike data
}

func newWorld(t *testing.T) *world {
	w := &world{e: apptest.New(t)}
	w.admin = w.e.Admin()
	w.a = w.e.NewTenant(w.admin, "Alpha")
	w.b = w.e.NewTenant(w.admin, "Beta")
	return w
}

func (w *world) exec(q string, args ...any) {
	w.e.T.Helper()
	if _, err := w.e.App.DB.SQL.Exec(q, args...); err != nil {
		w.e.T.Fatal(err)
	}
}

// device inserts a device of tenant t and sets the attributes search looks at.
func (w *world) device(t apptest.Tenant, host, display, serial, ip string, tags ...string) string {
	id := w.e.InsertDevice(apptest.DeviceRow{PartnerID: t.PartnerID, OrgID: t.OrgID, SiteID: t.SiteID, Hostname: host, Tags: tags})
	w.exec(`UPDATE devices SET display_name = $1, serial_number = $2, ip_address = $3 WHERE id = $4`,
		store.NullIfEmpty(display), serial, ip, id)
	return id
}

func (w *world) decommission(id string) {
	w.exec(`UPDATE devices SET decommissioned_at = $1 WHERE id = $2`, store.Now(), id)
}

// secondOrg adds an organization to partner a and returns it with its site.
func (w *world) secondOrg(name string) apptest.Tenant {
	w.e.T.Helper()
	t := w.a
	t.OrgID = w.e.CreateOrg(w.a.Partner, "", name)
	var sites struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	w.e.Must(200, w.admin, "GET", "/api/v1/orgs/sites?orgId="+t.OrgID, nil).JSON(w.e.T, &sites)
	t.SiteID = sites.Data[0].ID
	return t
}

type tagList struct {
	Data []struct {
		Tag         string `json:"tag"`
		DeviceCount int    `json:"deviceCount"`
	} `json:"data"`
	HasMore bool `json:"hasMore"`
}

func tags(w *world, c apptest.Caller, q string) string {
	w.e.T.Helper()
	var l tagList
	w.e.Must(200, c, "GET", "/api/v1/tags"+q, nil).JSON(w.e.T, &l)
	var out []string
	for _, t := range l.Data {
		out = append(out, fmt.Sprintf("%s=%d", t.Tag, t.DeviceCount))
	}
	return strings.Join(out, ",")
}

func TestTagsCountDevicesInScope(t *testing.T) {
	w := newWorld(t)
	w.device(w.a, "a1", "", "", "", "prod", "linux")
	w.device(w.a, "a2", "", "", "", "prod", "Web")
	w.decommission(w.device(w.a, "a3", "", "", "", "prod", "retired"))
	two := w.secondOrg("Alpha Two")
	w.device(two, "t1", "", "", "", "prod", "branch")
	w.device(w.b, "b1", "", "", "", "prod", "linux", "beta-only")

	if got := tags(w, w.a.Partner, ""); got != "Web=1,branch=1,linux=1,prod=3" {
		t.Errorf("partner tags = %s", got)
	}
	if got := tags(w, w.a.Org, ""); got != "Web=1,linux=1,prod=2" {
		t.Errorf("organization tags = %s", got)
	}
	if got := tags(w, w.b.Partner, ""); got != "beta-only=1,linux=1,prod=1" {
		t.Errorf("foreign partner tags = %s", got)
	}
	if got := tags(w, w.a.Partner, "?search=WE"); got != "Web=1" {
		t.Errorf("search WE = %s", got)
	}
	if got := tags(w, w.a.Partner, "?search=in"); got != "linux=1" {
		t.Errorf("search in = %s (contains, case-insensitive)", got)
	}
	var l tagList
	w.e.Must(200, w.a.Partner, "GET", "/api/v1/tags?limit=2", nil).JSON(t, &l)
	if len(l.Data) != 2 || !l.HasMore {
		t.Errorf("limit 2 = %+v", l)
	}
	w.e.Must(200, w.a.Partner, "GET", "/api/v1/tags?limit=4", nil).JSON(t, &l)
	if len(l.Data) != 4 || l.HasMore {
		t.Errorf("limit 4 = %+v", l)
	}
	if r := w.e.Do(w.a.Partner, "GET", "/api/v1/tags?limit=1001", nil); r.Status != 400 {
		t.Errorf("limit 1001 = %d, want 400", r.Status)
	}
	_, billing := w.e.CreateUser("billing@alpha.test", access.LevelPartner, w.a.PartnerID, "", access.RolePartnerBilling)
	w.e.Must(200, billing, "GET", "/api/v1/tags", nil)
}

type deviceList struct {
	Data []struct {
		ID       string   `json:"id"`
		Hostname string   `json:"hostname"`
		OrgID    string   `json:"orgId"`
		SiteID   string   `json:"siteId"`
		Status   string   `json:"status"`
		OSType   string   `json:"osType"`
		LastSeen *string  `json:"lastSeen"`
		Tags     []string `json:"tags"`
	} `json:"data"`
	Page struct {
		HasMore bool   `json:"hasMore"`
		Cursor  string `json:"cursor"`
	} `json:"pagination"`
}

func TestTaggedDevicesPaging(t *testing.T) {
	w := newWorld(t)
	for _, h := range []string{"web-05", "web-01", "db-02", "web-03", "db-01", "web-04", "web-02"} {
		extra := "web"
		if strings.HasPrefix(h, "db") {
			extra = "db"
		}
		w.device(w.a, h, "", "", "", "prod", extra)
	}
	w.device(w.a, "web-00", "", "", "", "staging", "web")
	w.decommission(w.device(w.a, "web-99", "", "", "", "prod", "web"))
	w.device(w.b, "web-01", "", "", "", "prod", "web")

	walk := func(c apptest.Caller, q string) []string {
		var hosts []string
		cursor := ""
		for i := 0; i < 10; i++ {
			var l deviceList
			w.e.Must(200, c, "GET", "/api/v1/tags/devices?limit=2&"+q+"&cursor="+cursor, nil).JSON(t, &l)
			for _, d := range l.Data {
				hosts = append(hosts, d.Hostname)
				if d.OrgID != w.a.OrgID || d.SiteID != w.a.SiteID || d.Status != "online" || d.OSType != "linux" || d.LastSeen == nil {
					t.Errorf("row %+v", d)
				}
			}
			if !l.Page.HasMore {
				return hosts
			}
			cursor = url.QueryEscape(l.Page.Cursor)
		}
		t.Fatal("paging did not end")
		return nil
	}
	if got := strings.Join(walk(w.a.Partner, "tag=prod"), ","); got != "db-01,db-02,web-01,web-02,web-03,web-04,web-05" {
		t.Errorf("prod devices = %s", got)
	}
	if got := strings.Join(walk(w.a.Org, "tags=prod,web"), ","); got != "web-01,web-02,web-03,web-04,web-05" {
		t.Errorf("prod and web = %s", got)
	}
	if got := strings.Join(walk(w.a.Partner, "tag=web&tags=staging"), ","); got != "web-00" {
		t.Errorf("web and staging = %s", got)
	}
	var l deviceList
	w.e.Must(200, w.a.Partner, "GET", "/api/v1/tags/devices?tag=db&limit=1", nil).JSON(t, &l)
	if len(l.Data) != 1 || strings.Join(l.Data[0].Tags, ",") != "db,prod" {
		t.Errorf("row tags = %+v", l.Data)
	}
	for _, q := range []string{"", "?tag=", "?tags=,,"} {
		if r := w.e.Do(w.a.Partner, "GET", "/api/v1/tags/devices"+q, nil); r.Status != 400 {
			t.Errorf("tags/devices%s = %d, want 400", q, r.Status)
		}
	}
	w.e.Must(200, w.b.Partner, "GET", "/api/v1/tags/devices?tag=staging", nil).JSON(t, &l)
	if len(l.Data) != 0 {
		t.Errorf("foreign partner sees %+v", l.Data)
	}
}

type answer struct {
	Query   string                         `json:"query"`
	Results map[string][]map[string]string `json:"results"`
}

func search(w *world, c apptest.Caller, q string) answer {
	w.e.T.Helper()
	var a answer
	w.e.Must(200, c, "GET", "/api/v1/search?"+q, nil).JSON(w.e.T, &a)
	return a
}

func ids(rows []map[string]string) string {
	var out []string
	for _, r := range rows {
		out = append(out, r["id"])
	}
	return strings.Join(out, ",")
}

func TestSearchFindsEachAttributeInScopeOnly(t *testing.T) {
	w := newWorld(t)
	web := w.device(w.a, "web-01", "Front Door", "SN-4711", "10.1.2.3")
	w.device(w.b, "web-01", "Front Door", "SN-4711", "10.1.2.3")
	w.decommission(w.device(w.a, "front-old", "", "SN-4711-OLD", "10.1.2.4"))
	userA, _ := w.e.CreateUser("pat.jones@alpha.test", access.LevelOrganization, w.a.PartnerID, w.a.OrgID, "")
	userB, _ := w.e.CreateUser("pat.jones@beta.test", access.LevelOrganization, w.b.PartnerID, w.b.OrgID, "")
	w.exec(`UPDATE users SET name = 'Pat Jones' WHERE id IN ($1, $2)`, userA, userB)
	w.e.CreateOrg(w.b.Partner, "", "Alpha Customer") // a foreign look-alike of a's organization

	for q, want := range map[string]string{"web-0": web, "FRONT door": web, "sn-47": web, "10.1.2": web} {
		a := search(w, w.a.Partner, "types=devices&q="+url.QueryEscape(q))
		if got := ids(a.Results["devices"]); got != want {
			t.Errorf("devices %q = %s, want %s", q, got, want)
		}
		if q == "FRONT door" && (a.Results["devices"][0]["title"] != "Front Door" || a.Results["devices"][0]["subtitle"] != "web-01 · 10.1.2.3 · SN-4711" ||
			a.Results["devices"][0]["type"] != "device" || a.Results["devices"][0]["orgId"] != w.a.OrgID) {
			t.Errorf("device row = %v", a.Results["devices"][0])
		}
	}
	for _, q := range []string{"pat jones", "JONES@ALPHA"} {
		a := search(w, w.a.Partner, "types=users&q="+url.QueryEscape(q))
		if got := ids(a.Results["users"]); got != userA {
			t.Errorf("users %q = %s, want %s", q, got, userA)
		}
	}
	if u := search(w, w.a.Partner, "types=users&q=jones").Results["users"][0]; u["title"] != "Pat Jones" || u["subtitle"] != "pat.jones@alpha.test" || u["orgId"] != w.a.OrgID {
		t.Errorf("user row = %v", u)
	}
	for _, q := range []string{"alpha cust", "ALPHA-CUSTOMER"} {
		a := search(w, w.a.Partner, "types=organizations&q="+url.QueryEscape(q))
		if got := ids(a.Results["organizations"]); got != w.a.OrgID {
			t.Errorf("organizations %q = %s, want %s", q, got, w.a.OrgID)
		}
	}
	// All types at once; absent types default to all.
	all := search(w, w.a.Partner, "q=alpha")
	if len(all.Results["organizations"]) != 1 || len(all.Results["users"]) != 3 || all.Results["devices"] == nil || all.Query != "alpha" {
		t.Errorf("q=alpha = %+v", all)
	}
	// An organization caller sees its organization's users, not the partner's.
	if got := search(w, w.a.Org, "types=users&q=alpha").Results["users"]; len(got) != 2 {
		t.Errorf("organization caller's users = %v, want itself and Pat", got)
	}
	// A deleted organization is not found.
	w.e.Must(204, w.b.Partner, "DELETE", "/api/v1/orgs/organizations/"+w.b.OrgID, nil)
	if got := search(w, w.b.Partner, "q=beta").Results["organizations"]; len(got) != 0 {
		t.Errorf("deleted organization found: %v", got)
	}
	if got := search(w, w.b.Partner, "q=web-01").Results["devices"]; len(got) != 0 {
		t.Errorf("device of a deleted organization found: %v", got)
	}
}

func TestSearchRulesAndPermissions(t *testing.T) {
	w := newWorld(t)
	for i := 0; i < 12; i++ {
		w.device(w.a, fmt.Sprintf("node-%02d", i), "", "", "")
	}
	w.device(w.a, "xnode", "", "", "")
	if got := search(w, w.a.Partner, "types=devices&q=node").Results["devices"]; len(got) != 10 || got[0]["title"] != "node-00" {
		t.Errorf("default limit = %d rows, first %v", len(got), got[0])
	}
	if got := search(w, w.a.Partner, "types=devices&q=node&limit=50").Results["devices"]; len(got) != 13 || got[12]["title"] != "xnode" {
		t.Errorf("limit 50 = %d rows; prefix matches first, then the rest", len(got))
	}
	if got := search(w, w.a.Partner, "types=devices&q=node&limit=1").Results["devices"]; len(got) != 1 {
		t.Errorf("limit 1 = %d rows", len(got))
	}
	search(w, w.a.Partner, "q=no")
	search(w, w.a.Partner, "q="+strings.Repeat("é", 100))
	for _, q := range []string{"q=n", "q=%20n%20", "", "q=" + strings.Repeat("a", 101), "q=node&types=devices,widgets",
		"q=node&types=scripts", "q=node&types=alerts", "q=node&limit=0", "q=node&limit=51"} {
		if r := w.e.Do(w.a.Partner, "GET", "/api/v1/search?"+q, nil); r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" {
			t.Errorf("search?%s = %d, want 400", q, r.Status)
		}
	}
	// Types follow the caller's permissions: billing holds devices and organizations, not users.
	_, billing := w.e.CreateUser("billing@alpha.test", access.LevelPartner, w.a.PartnerID, "", access.RolePartnerBilling)
	res := search(w, billing, "q=alpha").Results
	if _, ok := res["users"]; ok {
		t.Errorf("users searched without users:read: %v", res)
	}
	if _, ok := res["organizations"]; !ok {
		t.Errorf("organizations missing for a caller with organizations:read: %v", res)
	}
	if got := search(w, w.a.Partner, "q=zzzz").Results; got["devices"] == nil || len(got["devices"]) != 0 {
		t.Errorf("a searched type with no hits must be an empty list: %v", got)
	}
	if r := w.e.Do(apptest.Anonymous, "GET", "/api/v1/search?q=node", nil); r.Status != http.StatusUnauthorized {
		t.Errorf("anonymous search = %d, want 401", r.Status)
	}
}
