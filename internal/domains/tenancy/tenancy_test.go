package tenancy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/config"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/jsonenc/jsonenctest"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

const (
	partners = "/api/v1/orgs/partners"
	orgs     = "/api/v1/orgs/organizations"
	sites    = "/api/v1/orgs/sites"
)

type list struct {
	Data []map[string]any `json:"data"`
	Page struct {
		HasMore bool   `json:"hasMore"`
		Cursor  string `json:"cursor"`
		Total   *int   `json:"total"`
	} `json:"pagination"`
}

func getList(e *apptest.Env, c apptest.Caller, path string) list {
	var l list
	e.Must(http.StatusOK, c, "GET", path, nil).JSON(e.T, &l)
	return l
}

func ids(l list) map[string]bool {
	out := map[string]bool{}
	for _, row := range l.Data {
		out[row["id"].(string)] = true
	}
	return out
}

func TestPartnersAreSystemManaged(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Alpha")
	if r := e.Do(a.Partner, "GET", partners, nil); r.Status != 403 {
		t.Errorf("partner listing partners = %d, want 403 (system only)", r.Status)
	}
	if r := e.Do(a.Partner, "POST", partners, map[string]any{"name": "Rogue"}); r.Status != 403 {
		t.Errorf("partner creating a partner = %d, want 403", r.Status)
	}
	me := e.Must(200, a.Partner, "GET", partners+"/me", nil).Map(t)
	if me["id"] != a.PartnerID {
		t.Fatalf("partners/me = %v", me)
	}
	upd := e.Must(200, a.Partner, "PATCH", partners+"/me", map[string]any{"billingEmail": "billing@alpha.test", "settings": map[string]any{"timezone": "Europe/Berlin"}}).Map(t)
	if upd["billingEmail"] != "billing@alpha.test" || upd["settings"].(map[string]any)["timezone"] != "Europe/Berlin" {
		t.Errorf("patched partner = %v", upd)
	}
	if r := e.Do(a.Partner, "PATCH", partners+"/me", map[string]any{"maxOrganizations": 1000}); r.Status != 403 {
		t.Errorf("partner raising its own maxOrganizations = %d, want 403", r.Status)
	}
	if r := e.Do(a.Org, "GET", partners+"/me", nil); r.Status != 403 {
		t.Errorf("organization user on partners/me = %d, want 403 (no partners:read)", r.Status)
	}
	// A partner with organizations cannot be deleted; an empty one can, and its users lose access.
	if r := e.Do(admin, "DELETE", partners+"/"+a.PartnerID, nil); r.Status != 409 {
		t.Errorf("delete partner with organizations = %d, want 409", r.Status)
	}
	e.Must(204, a.Partner, "DELETE", orgs+"/"+a.OrgID, nil)
	e.Must(204, admin, "DELETE", partners+"/"+a.PartnerID, nil)
	if r := e.Do(admin, "GET", partners+"/"+a.PartnerID, nil); r.Status != 404 {
		t.Errorf("deleted partner = %d, want 404", r.Status)
	}
	if r := e.Do(apptest.Anonymous, "POST", "/api/v1/auth/login", map[string]string{"email": "alpha-partner@gale.test", "password": apptest.UserPassword}); r.Status != 401 {
		t.Errorf("login of a deleted partner's user = %d, want 401", r.Status)
	}
}

func TestOrganizationSlugs(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	p := e.CreatePartner(admin, "Slug MSP")
	first := e.Must(201, admin, "POST", orgs, map[string]any{"partnerId": p, "name": "Ünïcode & Co."}).Map(t)
	second := e.Must(201, admin, "POST", orgs, map[string]any{"partnerId": p, "name": "Unicode & Co"}).Map(t)
	if first["slug"] != "unicode-co" || second["slug"] != "unicode-co-2" {
		t.Fatalf("derived slugs = %v, %v; want unicode-co, unicode-co-2", first["slug"], second["slug"])
	}
	r := e.Do(admin, "POST", orgs, map[string]any{"partnerId": p, "name": "Other", "slug": "unicode-co"})
	if r.Status != 409 || r.ErrorCode() != "SLUG_CONFLICT" {
		t.Fatalf("explicit duplicate slug = %d %s, want 409 SLUG_CONFLICT", r.Status, r.Body)
	}
	if r := e.Do(admin, "POST", orgs, map[string]any{"partnerId": p, "name": "Bad", "slug": "Not A Slug"}); r.Status != 400 {
		t.Fatalf("invalid slug = %d, want 400", r.Status)
	}
	// A deleted organization keeps its slug reserved: it can be restored.
	e.Must(204, admin, "DELETE", orgs+"/"+first["id"].(string), nil)
	third := e.Must(201, admin, "POST", orgs, map[string]any{"partnerId": p, "name": "Unicode Co"}).Map(t)
	if third["slug"] != "unicode-co-3" {
		t.Fatalf("slug after delete = %v, want unicode-co-3", third["slug"])
	}
}

func TestOrganizationCreateFieldsAndDefaultSite(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	p := e.CreatePartner(admin, "Fields MSP")
	o := e.Must(201, admin, "POST", orgs, map[string]any{"partnerId": p, "name": "Contoso", "status": "trial",
		"contractStart": "2026-01-01", "billingContact": map[string]any{"name": "Ann", "email": "ann@contoso.test"},
		"defaultSiteName": "HQ", "timezone": "America/New_York"}).Map(t)
	if o["contractStart"] != "2026-01-01" || o["status"] != "trial" || o["billingContact"].(map[string]any)["email"] != "ann@contoso.test" {
		t.Fatalf("created organization = %v", o)
	}
	l := getList(e, admin, sites+"?orgId="+o["id"].(string))
	if len(l.Data) != 1 || l.Data[0]["name"] != "HQ" || l.Data[0]["timezone"] != "America/New_York" {
		t.Fatalf("default site = %v", l.Data)
	}
	bare := e.Must(201, admin, "POST", orgs, map[string]any{"partnerId": p, "name": "Bare", "createDefaultSite": false}).Map(t)
	if l := getList(e, admin, sites+"?orgId="+bare["id"].(string)); len(l.Data) != 0 {
		t.Fatalf("createDefaultSite false still made sites: %v", l.Data)
	}
	for name, body := range map[string]map[string]any{
		"bad date":       {"partnerId": p, "name": "X", "contractStart": "01/02/2026"},
		"bad status":     {"partnerId": p, "name": "X", "status": "deleted"},
		"bad timezone":   {"partnerId": p, "name": "X", "timezone": "Mars/Olympus"},
		"no name":        {"partnerId": p},
		"no partner":     {"name": "X"},
		"unknown field":  {"partnerId": p, "name": "X", "color": "red"},
		"name too long":  {"partnerId": p, "name": string(make([]byte, 300))},
		"partnerId type": {"partnerId": 5, "name": "X"},
	} {
		if r := e.Do(admin, "POST", orgs, body); r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" {
			t.Errorf("%s: %d %s, want 400 VALIDATION_ERROR", name, r.Status, r.Body)
		}
	}
	var n int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM organizations WHERE partner_id = $1`, p).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d organizations after refused creates, want 2 (no partial writes)", n)
	}
}

func TestMaxOrganizationsHoldsUnderConcurrentCreates(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	p := e.Must(201, admin, "POST", partners, map[string]any{"name": "Capped", "maxOrganizations": 3}).Map(t)["id"].(string)
	_, partnerAdmin := e.CreateUser("capped@gale.test", access.LevelPartner, p, "", "")
	other := e.SecondNode()
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			node := e
			if i%2 == 1 {
				node = other
			}
			r := node.Do(partnerAdmin, "POST", orgs, map[string]any{"name": fmt.Sprintf("Org %d", i)})
			mu.Lock()
			codes[r.Status]++
			mu.Unlock()
			if r.Status == 409 && r.ErrorCode() != "ORG_LIMIT_REACHED" {
				t.Errorf("limit refusal code = %s", r.ErrorCode())
			}
		}(i)
	}
	wg.Wait()
	if codes[201] != 3 || codes[409] != 9 {
		t.Fatalf("statuses = %v, want exactly 3 created and 9 refused", codes)
	}
	var n int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM organizations WHERE partner_id = $1`, p).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d organizations stored, want 3", n)
	}
	// Deleting frees a slot; restoring takes one again and is refused when none is free.
	l := getList(e, partnerAdmin, orgs)
	victim := l.Data[0]["id"].(string)
	e.Must(204, partnerAdmin, "DELETE", orgs+"/"+victim, nil)
	e.Must(201, partnerAdmin, "POST", orgs, map[string]any{"name": "Replacement"})
	if r := e.Do(partnerAdmin, "POST", orgs+"/"+victim+"/restore", nil); r.Status != 409 || r.ErrorCode() != "ORG_LIMIT_REACHED" {
		t.Fatalf("restore beyond the cap = %d %s, want 409 ORG_LIMIT_REACHED", r.Status, r.Body)
	}
}

func TestOrganizationSoftDeleteAndRestore(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Soft")
	e.Must(204, a.Partner, "DELETE", orgs+"/"+a.OrgID, nil)
	if r := e.Do(a.Partner, "GET", orgs+"/"+a.OrgID, nil); r.Status != 404 {
		t.Fatalf("deleted organization = %d, want 404", r.Status)
	}
	if ids(getList(e, a.Partner, orgs))[a.OrgID] {
		t.Fatal("deleted organization still listed")
	}
	if !ids(getList(e, a.Partner, orgs+"?includeDeleted=true"))[a.OrgID] {
		t.Fatal("includeDeleted does not list the deleted organization")
	}
	if r := e.Do(a.Partner, "DELETE", orgs+"/"+a.OrgID, nil); r.Status != 404 {
		t.Fatalf("second delete = %d, want 404", r.Status)
	}
	restored := e.Must(200, a.Partner, "POST", orgs+"/"+a.OrgID+"/restore", nil).Map(t)
	if restored["id"] != a.OrgID || restored["deletedAt"] != nil {
		t.Fatalf("restored = %v", restored)
	}
	e.Must(200, a.Org, "GET", orgs+"/"+a.OrgID, nil)
	if r := e.Do(a.Org, "DELETE", orgs+"/"+a.OrgID, nil); r.Status != 403 {
		t.Fatalf("organization user deleting its organization = %d, want 403", r.Status)
	}
}

func TestListPagingAndFilters(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	p := e.CreatePartner(admin, "Paging MSP")
	for i := 0; i < 7; i++ {
		e.CreateOrg(admin, p, fmt.Sprintf("Customer %02d", i))
	}
	seen := map[string]bool{}
	var names []string
	cursor := ""
	for pages := 0; ; pages++ {
		path := orgs + "?limit=3&partnerId=" + p
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		l := getList(e, admin, path)
		for _, row := range l.Data {
			if seen[row["id"].(string)] {
				t.Fatalf("row %v seen twice", row["id"])
			}
			seen[row["id"].(string)] = true
			names = append(names, row["name"].(string))
		}
		if !l.Page.HasMore {
			break
		}
		cursor = l.Page.Cursor
		if pages > 5 {
			t.Fatal("paging does not end")
		}
	}
	if len(seen) != 7 {
		t.Fatalf("visited %d organizations, want 7", len(seen))
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] > names[i] {
			t.Fatalf("not ordered by name: %v", names)
		}
	}
	legacy := getList(e, admin, orgs+"?page=3&limit=3&partnerId="+p)
	if len(legacy.Data) != 1 || legacy.Page.Total == nil || *legacy.Page.Total != 7 || legacy.Page.HasMore {
		t.Fatalf("legacy page 3 = %d rows, total %v, hasMore %v", len(legacy.Data), legacy.Page.Total, legacy.Page.HasMore)
	}
	if l := getList(e, admin, orgs+"?search=customer+03"); len(l.Data) != 1 {
		t.Fatalf("search = %d rows, want 1", len(l.Data))
	}
	if r := e.Do(admin, "GET", orgs+"?cursor=!!garbage!!", nil); r.Status != 400 {
		t.Fatalf("malformed cursor = %d, want 400", r.Status)
	}
}

func TestSites(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Sites")
	st := e.Must(201, a.Org, "POST", sites, map[string]any{"name": "Branch", "timezone": "Europe/Paris",
		"address": map[string]any{"city": "Paris", "country": "FR"}, "contact": map[string]any{"name": "Luc"}}).Map(t)
	if st["orgId"] != a.OrgID || st["siteId"] != st["id"] || st["address"].(map[string]any)["city"] != "Paris" {
		t.Fatalf("site created by org user = %v", st)
	}
	if r := e.Do(a.Partner, "POST", sites, map[string]any{"name": "Branch", "orgId": a.OrgID}); r.Status != 409 {
		t.Fatalf("duplicate site name = %d, want 409", r.Status)
	}
	if r := e.Do(a.Partner, "POST", sites, map[string]any{"name": "No org"}); r.Status != 400 {
		t.Fatalf("partner creating a site without orgId = %d, want 400", r.Status)
	}
	id := st["id"].(string)
	upd := e.Must(200, a.Partner, "PATCH", sites+"/"+id, map[string]any{"name": "Paris Office"}).Map(t)
	if upd["name"] != "Paris Office" || upd["timezone"] != "Europe/Paris" {
		t.Fatalf("patched site = %v", upd)
	}
	if r := e.Do(a.Partner, "PATCH", sites+"/"+id, map[string]any{"timezone": "Nowhere/Land"}); r.Status != 400 {
		t.Fatalf("bad timezone = %d, want 400", r.Status)
	}
	e.Must(204, a.Partner, "DELETE", sites+"/"+id, nil)
	if r := e.Do(a.Partner, "GET", sites+"/"+id, nil); r.Status != 404 {
		t.Fatalf("deleted site = %d, want 404", r.Status)
	}
	var n int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE resource_id = $1 AND action IN ('site.create', 'site.update', 'site.delete')`, id).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d audit entries for the site, want 3", n)
	}
}

// Every read and write of another tenant's partner, organizations and sites looks exactly
// like a missing resource.
func TestTenancyIsolation(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Alpha")
	b := e.NewTenant(admin, "Beta")
	missing := "01900000-0000-7000-8000-000000000000"
	for _, who := range []struct {
		name   string
		caller apptest.Caller
	}{{"partner", a.Partner}, {"org", a.Org}} {
		for _, c := range []struct{ method, path string }{
			{"GET", partners + "/" + b.PartnerID}, {"PATCH", partners + "/" + b.PartnerID},
			{"GET", orgs + "/" + b.OrgID}, {"PATCH", orgs + "/" + b.OrgID}, {"DELETE", orgs + "/" + b.OrgID},
			{"POST", orgs + "/" + b.OrgID + "/restore"},
			{"GET", sites + "/" + b.SiteID}, {"PATCH", sites + "/" + b.SiteID}, {"DELETE", sites + "/" + b.SiteID},
		} {
			body := map[string]any{}
			if c.method == "GET" || c.method == "DELETE" {
				body = nil
			}
			foreign := e.Do(who.caller, c.method, c.path, body)
			// Organization users may not touch partners or delete/restore organizations at all,
			// their own included: the refusal does not depend on the resource.
			if who.name == "org" && (strings.HasPrefix(c.path, partners) || c.method == "DELETE" && strings.HasPrefix(c.path, orgs) || strings.HasSuffix(c.path, "/restore")) {
				own := e.Do(who.caller, c.method, strings.NewReplacer(b.PartnerID, a.PartnerID, b.OrgID, a.OrgID).Replace(c.path), body)
				if foreign.Status != 403 || own.Status != 403 {
					t.Errorf("%s %s %s = %d (own: %d), want 403 for both", who.name, c.method, c.path, foreign.Status, own.Status)
				}
				continue
			}
			if foreign.Status != 404 {
				t.Errorf("%s %s %s = %d %s, want 404", who.name, c.method, c.path, foreign.Status, foreign.Body)
			}
		}
		l := getList(e, who.caller, orgs)
		if ids(l)[b.OrgID] || !ids(l)[a.OrgID] {
			t.Errorf("%s sees %v", who.name, ids(l))
		}
		if ids(getList(e, who.caller, sites))[b.SiteID] {
			t.Errorf("%s lists the other tenant's site", who.name)
		}
		if r := e.Do(who.caller, "POST", sites, map[string]any{"name": "Intrusion", "orgId": b.OrgID}); r.Status != 400 {
			t.Errorf("%s creating a site in a foreign organization = %d, want 400 (no such organization)", who.name, r.Status)
		}
	}
	// A missing ID answers exactly like a foreign one.
	foreign := e.Do(a.Partner, "GET", orgs+"/"+b.OrgID, nil)
	absent := e.Do(a.Partner, "GET", orgs+"/"+missing, nil)
	if string(foreign.Body) != string(absent.Body) {
		t.Errorf("foreign %s vs missing %s", foreign.Body, absent.Body)
	}
	if r := e.Do(a.Partner, "POST", orgs, map[string]any{"name": "Sneaky", "partnerId": b.PartnerID}); r.Status != 404 {
		t.Errorf("creating under another partner = %d, want 404", r.Status)
	}
	if r := e.Do(a.Org, "POST", orgs, map[string]any{"name": "Sibling"}); r.Status != 403 {
		t.Errorf("organization user creating an organization = %d, want 403", r.Status)
	}
}

func TestPartnerUserLimitedToSelectedOrganizations(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Limit")
	hidden := e.CreateOrg(a.Partner, "", "Hidden Customer")
	uid, _ := e.CreateUser("limited@gale.test", access.LevelPartner, a.PartnerID, "", "")
	if _, err := e.App.DB.SQL.Exec(`UPDATE users SET org_access = 'selected' WHERE id = $1`, uid); err != nil {
		t.Fatal(err)
	}
	if _, err := e.App.DB.SQL.Exec(`INSERT INTO user_org_access (user_id, org_id) VALUES ($1, $2)`, uid, a.OrgID); err != nil {
		t.Fatal(err)
	}
	limited := apptest.Bearer(e.Login("limited@gale.test", apptest.UserPassword))
	if got := ids(getList(e, limited, orgs)); len(got) != 1 || !got[a.OrgID] {
		t.Fatalf("limited user sees %v, want only %s", got, a.OrgID)
	}
	if r := e.Do(limited, "GET", orgs+"/"+hidden, nil); r.Status != 404 {
		t.Fatalf("organization outside the selection = %d, want 404", r.Status)
	}
	created := e.Must(201, limited, "POST", orgs, map[string]any{"name": "Mine"}).Map(t)["id"].(string)
	e.Must(200, limited, "GET", orgs+"/"+created, nil)
}

func TestReadOnlyRoleCannotWrite(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Viewer")
	_, viewer := e.CreateUser("viewer@gale.test", access.LevelPartner, a.PartnerID, "", access.RolePartnerViewer)
	e.Must(200, viewer, "GET", orgs, nil)
	for _, c := range []struct{ method, path string }{
		{"POST", orgs}, {"PATCH", orgs + "/" + a.OrgID}, {"DELETE", orgs + "/" + a.OrgID}, {"POST", sites}, {"DELETE", sites + "/" + a.SiteID},
	} {
		if r := e.Do(viewer, c.method, c.path, map[string]any{"name": "x", "orgId": a.OrgID}); r.Status != 403 || r.ErrorCode() != "FORBIDDEN" {
			t.Errorf("viewer %s %s = %d %s, want 403", c.method, c.path, r.Status, r.Body)
		}
	}
	var denied int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE action = 'access.denied' AND actor_email = 'viewer@gale.test'`).Scan(&denied); err != nil || denied != 5 {
		t.Fatalf("%d permission refusals recorded, want 5", denied)
	}
}

func TestWritesAreAuditedWithRequestID(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	p := e.CreatePartner(admin, "Audit MSP")
	r := e.Must(201, admin, "POST", orgs, map[string]any{"partnerId": p, "name": "Audited"})
	id := r.Map(t)["id"].(string)
	e.Must(200, admin, "PATCH", orgs+"/"+id, map[string]any{"status": "suspended"})
	var action, actorType, reqID, details string
	var partnerID, orgID string
	err := e.App.DB.SQL.QueryRow(`SELECT action, actor_type, request_id, partner_id, org_id, details FROM audit_logs
		WHERE resource_id = $1 AND action = 'organization.create'`, id).Scan(&action, &actorType, &reqID, &partnerID, &orgID, &details)
	if err != nil {
		t.Fatal(err)
	}
	if actorType != "user" || reqID != r.Header.Get("X-Request-Id") || partnerID != p || orgID != id {
		t.Errorf("audit entry: actor %s request %s (header %s) partner %s org %s", actorType, reqID, r.Header.Get("X-Request-Id"), partnerID, orgID)
	}
	if err := e.App.DB.SQL.QueryRow(`SELECT details FROM audit_logs WHERE resource_id = $1 AND action = 'organization.update'`, id).Scan(&details); err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]map[string]any
	if err := jsonUnmarshal(details, &m); err != nil || m["changes"]["status"]["from"] != "active" || m["changes"]["status"]["to"] != "suspended" {
		t.Errorf("update details = %s", details)
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// TestOrganizationListJSONMatchesEncodingJSON holds the organization list's own encoder to
// encoding/json byte for byte.
func TestOrganizationListJSONMatchesEncodingJSON(t *testing.T) {
	var full tenancy.Organization
	jsonenctest.Fill(t, &full, 3)
	bare := tenancy.Organization{ID: "o2", Settings: json.RawMessage(`{}`), BillingContact: &tenancy.Contact{Email: "a@b.c"}}
	total := 2
	jsonenctest.Match(t, "cursor", httpapi.List[tenancy.Organization]{Data: []tenancy.Organization{full, bare},
		Pagination: httpapi.Pagination{HasMore: true, Cursor: "next<&>"}})
	jsonenctest.Match(t, "page", httpapi.List[tenancy.Organization]{Data: []tenancy.Organization{bare},
		Pagination: httpapi.Pagination{Page: 1, Limit: 100, Total: &total}})
	jsonenctest.Match(t, "empty", httpapi.List[tenancy.Organization]{Data: []tenancy.Organization{}})
	jsonenctest.Match(t, "nil", httpapi.List[tenancy.Organization]{})
	// Lists hand out the rows they cache as pointers.
	jsonenctest.Match(t, "pointers", httpapi.List[*tenancy.Organization]{Data: []*tenancy.Organization{&full, &bare},
		Pagination: httpapi.Pagination{HasMore: true, Cursor: "next"}})
}

// Organization lists keep rows cached on each node; what a caller sees still follows its
// scope and every change, wherever it was made.
func TestOrganizationListCache(t *testing.T) {
	e := apptest.New(t, pageCache(time.Hour))
	admin := e.Admin()
	a := e.NewTenant(admin, "Alpha")
	b := e.NewTenant(admin, "Beta")
	// The system administrator's list caches every organization's row and its page on this
	// node; every other caller still sees only its own scope.
	if got := ids(getList(e, admin, orgs)); !got[a.OrgID] || !got[b.OrgID] {
		t.Fatalf("admin sees %v", got)
	}
	for range 2 {
		for _, who := range []struct {
			caller apptest.Caller
			own    string
		}{{a.Partner, a.OrgID}, {a.Org, a.OrgID}, {b.Partner, b.OrgID}} {
			if got := ids(getList(e, who.caller, orgs)); len(got) != 1 || !got[who.own] {
				t.Errorf("list with a warm cache = %v, want only %s", got, who.own)
			}
		}
	}
	// A write through the API shows on the node's next list, however long pages are kept.
	e.Must(200, a.Partner, "PATCH", orgs+"/"+a.OrgID, map[string]any{"name": "Alpha Renamed"})
	if l := getList(e, a.Partner, orgs); len(l.Data) != 1 || l.Data[0]["name"] != "Alpha Renamed" {
		t.Fatalf("list after a rename = %v", l.Data)
	}
	// A change beside the API shows once the node is told (the gale command tells it), or
	// once the page's time is over.
	rename := func(name string) {
		if _, err := e.App.DB.SQL.Exec(`UPDATE organizations SET name = $1 WHERE id = $2`, name, a.OrgID); err != nil {
			t.Fatal(err)
		}
	}
	rename("Alpha Quiet")
	if l := getList(e, a.Partner, orgs); l.Data[0]["name"] != "Alpha Renamed" {
		t.Fatalf("within the page's time the node answers the page it kept: %v", l.Data)
	}
	e.App.Wrote(context.Background())
	if l := getList(e, a.Partner, orgs); l.Data[0]["name"] != "Alpha Quiet" {
		t.Fatalf("after the node was told: %v", l.Data)
	}
	short := e.SecondNode(pageCache(300 * time.Millisecond))
	getList(short, a.Partner, orgs)
	rename("Alpha Later")
	time.Sleep(350 * time.Millisecond)
	if l := getList(short, a.Partner, orgs); l.Data[0]["name"] != "Alpha Later" {
		t.Fatalf("after the page's time: %v", l.Data)
	}

	// On PostgreSQL a write on another node reaches this one through the bus.
	if e.App.DB.Dialect == store.Postgres {
		getList(e, admin, orgs)
		e.SecondNode().Must(204, admin, "DELETE", orgs+"/"+b.OrgID, nil)
		apptest.Eventually(t, 10*time.Second, func() bool { return !ids(getList(e, admin, orgs))[b.OrgID] })
	} else {
		e.Must(204, admin, "DELETE", orgs+"/"+b.OrgID, nil)
	}
	if got := ids(getList(e, admin, orgs)); got[b.OrgID] || !got[a.OrgID] {
		t.Fatalf("admin list after a deletion = %v", got)
	}
	if got := ids(getList(e, admin, orgs+"?includeDeleted=true")); !got[b.OrgID] {
		t.Fatalf("list with includeDeleted = %v", got)
	}
}

func pageCache(d time.Duration) apptest.Option {
	return func(c *config.Config) { c.ListPageCacheTTL = d }
}
