package audit_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/testkit/apptest"
)

type listResponse struct {
	Data       []audit.LogEntry `json:"data"`
	Pagination struct {
		HasMore bool   `json:"hasMore"`
		Cursor  string `json:"cursor"`
		Page    int    `json:"page"`
		Limit   int    `json:"limit"`
		Total   *int   `json:"total"`
	} `json:"pagination"`
}

// fixture is a server with two tenants and some history written through the API.
type fixture struct {
	e        *apptest.Env
	admin    apptest.Caller
	a, b     apptest.Tenant
	aPartner string // ID of the partner user acting for A
	aCaller  apptest.Caller
	org2     string // a second organization of A
	orgReqID string // X-Request-Id of the request that created org2
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	e := apptest.New(t)
	f := &fixture{e: e, admin: e.Admin()}
	f.a = e.NewTenant(f.admin, "Alpha")
	f.b = e.NewTenant(f.admin, "Bravo")
	f.aPartner, f.aCaller = e.CreateUser("alpha-ops@gale.test", access.LevelPartner, f.a.PartnerID, "", "")
	r := e.Must(http.StatusCreated, f.aCaller, "POST", "/api/v1/orgs/organizations", map[string]any{"name": "Alpha Second"})
	f.org2 = r.Map(t)["id"].(string)
	f.orgReqID = r.Header.Get("X-Request-Id")
	e.Must(http.StatusOK, f.aCaller, "PATCH", "/api/v1/orgs/partners/me", map[string]any{"name": "Alpha MSP Renamed"})
	e.Must(http.StatusCreated, f.aCaller, "POST", "/api/v1/orgs/sites", map[string]any{"orgId": f.org2, "name": "Branch Office"})
	e.Must(http.StatusCreated, f.b.Partner, "POST", "/api/v1/orgs/sites", map[string]any{"orgId": f.b.OrgID, "name": "Bravo Branch"})
	// Failed sign-ins: a known account of A, and an unknown address (a system-level event).
	e.Must(http.StatusUnauthorized, apptest.Anonymous, "POST", "/api/v1/auth/login",
		map[string]string{"email": "alpha-ops@gale.test", "password": "Wrong-Passw0rd"})
	e.Must(http.StatusUnauthorized, apptest.Anonymous, "POST", "/api/v1/auth/login",
		map[string]string{"email": "nobody@gale.test", "password": "Wrong-Passw0rd"})
	return f
}

// all reads every entry c may see through cursor paging of the given size.
func all(t *testing.T, e *apptest.Env, c apptest.Caller, path string, query url.Values, limit int) []audit.LogEntry {
	t.Helper()
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Set("limit", itoa(limit))
	var out []audit.LogEntry
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatal("paging does not end")
		}
		var page listResponse
		e.Must(http.StatusOK, c, "GET", path+"?"+q.Encode(), nil).JSON(t, &page)
		if len(page.Data) > limit {
			t.Fatalf("page of %d rows, limit %d", len(page.Data), limit)
		}
		out = append(out, page.Data...)
		if !page.Pagination.HasMore {
			if page.Pagination.Cursor != "" {
				t.Fatalf("last page carries cursor %q", page.Pagination.Cursor)
			}
			return out
		}
		q.Set("cursor", page.Pagination.Cursor)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func ids(rows []audit.LogEntry) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func where(rows []audit.LogEntry, keep func(audit.LogEntry) bool) []string {
	var out []string
	for _, r := range rows {
		if keep(r) {
			out = append(out, r.ID)
		}
	}
	return out
}

func val(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func sameIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: got %d rows %v, want %d rows %v", what, len(got), got, len(want), want)
	}
}

func TestWritesAreRecorded(t *testing.T) {
	f := newFixture(t)
	var page listResponse
	f.e.Must(http.StatusOK, f.admin, "GET", "/api/v1/audit/logs?action=organization.create&resourceId="+f.org2, nil).JSON(t, &page)
	if len(page.Data) != 1 {
		t.Fatalf("organization.create entries for %s = %d, want 1", f.org2, len(page.Data))
	}
	got := page.Data[0]
	if got.ActorType != "user" || val(got.ActorID) != f.aPartner || val(got.ActorEmail) != "alpha-ops@gale.test" {
		t.Errorf("actor = %s %s %s, want user %s alpha-ops@gale.test", got.ActorType, val(got.ActorID), val(got.ActorEmail), f.aPartner)
	}
	if got.ResourceType != "organization" || val(got.ResourceName) != "Alpha Second" {
		t.Errorf("resource = %s %q", got.ResourceType, val(got.ResourceName))
	}
	if f.orgReqID == "" || val(got.RequestID) != f.orgReqID {
		t.Errorf("requestId = %q, want the X-Request-Id %q", val(got.RequestID), f.orgReqID)
	}
	if val(got.IP) == "" || val(got.UserAgent) == "" {
		t.Errorf("ip = %q, userAgent = %q; want both", val(got.IP), val(got.UserAgent))
	}
	if val(got.PartnerID) != f.a.PartnerID || val(got.OrgID) != f.org2 || got.Category != "change" || got.Result != "success" {
		t.Errorf("placement = %s/%s %s %s", val(got.PartnerID), val(got.OrgID), got.Category, got.Result)
	}
	if time.Since(got.OccurredAt) > time.Minute || got.Details == nil {
		t.Errorf("occurredAt = %s, details = %v", got.OccurredAt, got.Details)
	}

	var one audit.LogEntry
	f.e.Must(http.StatusOK, f.admin, "GET", "/api/v1/audit/logs/"+got.ID, nil).JSON(t, &one)
	if one.ID != got.ID || one.Action != "organization.create" {
		t.Errorf("get = %+v", one)
	}
	if r := f.e.Do(f.admin, "GET", "/api/v1/audit/logs/"+"01890000-0000-7000-8000-000000000000", nil); r.Status != http.StatusNotFound || r.ErrorCode() != "NOT_FOUND" {
		t.Errorf("get missing = %d %s", r.Status, r.Body)
	}
}

func TestOrderingAndPaging(t *testing.T) {
	f := newFixture(t)
	everything := all(t, f.e, f.admin, "/api/v1/audit/logs", nil, 500)
	if len(everything) < 15 {
		t.Fatalf("only %d entries", len(everything))
	}
	for i := 1; i < len(everything); i++ {
		if everything[i-1].ID <= everything[i].ID || everything[i-1].OccurredAt.Before(everything[i].OccurredAt) {
			t.Fatalf("not newest first at %d: %s %s after %s %s", i, everything[i].ID, everything[i].OccurredAt,
				everything[i-1].ID, everything[i-1].OccurredAt)
		}
	}
	for _, size := range []int{1, 3, 7} {
		paged := all(t, f.e, f.admin, "/api/v1/audit", nil, size)
		sameIDs(t, "cursor paging by "+itoa(size), ids(paged), ids(everything))
	}

	var legacy listResponse
	f.e.Must(http.StatusOK, f.admin, "GET", "/api/v1/audit/logs?page=2&limit=4", nil).JSON(t, &legacy)
	if legacy.Pagination.Total == nil || *legacy.Pagination.Total != len(everything) || legacy.Pagination.Page != 2 {
		t.Errorf("legacy pagination = %+v, want total %d", legacy.Pagination, len(everything))
	}
	sameIDs(t, "legacy page 2", ids(legacy.Data), ids(everything[4:8]))

	var big listResponse
	f.e.Must(http.StatusOK, f.admin, "GET", "/api/v1/audit/logs?limit=10000", nil).JSON(t, &big)
	if len(big.Data) != len(everything) {
		t.Errorf("limit above 500 = %d rows", len(big.Data))
	}
	for _, bad := range []string{"cursor=%21%21", "cursor=WyJ4Il0", "page=1&cursor=abc", "limit=0"} {
		if r := f.e.Do(f.admin, "GET", "/api/v1/audit/logs?"+bad, nil); r.Status != http.StatusBadRequest || r.ErrorCode() != "VALIDATION_ERROR" {
			t.Errorf("%s = %d %s, want 400 VALIDATION_ERROR", bad, r.Status, r.Body)
		}
	}
}

func TestFilters(t *testing.T) {
	f := newFixture(t)
	everything := all(t, f.e, f.admin, "/api/v1/audit/logs", nil, 500)
	mid := everything[len(everything)/2].OccurredAt
	late := everything[len(everything)/4].OccurredAt
	cases := []struct {
		name  string
		query url.Values
		keep  func(audit.LogEntry) bool
		least int
	}{
		{"action", url.Values{"action": {"organization.create"}},
			func(r audit.LogEntry) bool { return r.Action == "organization.create" }, 3},
		{"actionPrefix", url.Values{"actionPrefix": {"organization."}},
			func(r audit.LogEntry) bool { return strings.HasPrefix(r.Action, "organization.") }, 3},
		{"resourceType", url.Values{"resourceType": {"site"}},
			func(r audit.LogEntry) bool { return r.ResourceType == "site" }, 5},
		{"resourceId", url.Values{"resourceId": {f.org2}},
			func(r audit.LogEntry) bool { return val(r.ResourceID) == f.org2 }, 1},
		{"actorId", url.Values{"actorId": {f.aPartner}},
			func(r audit.LogEntry) bool { return val(r.ActorID) == f.aPartner }, 4},
		{"actorType", url.Values{"actorType": {"anonymous"}},
			func(r audit.LogEntry) bool { return r.ActorType == "anonymous" }, 2},
		{"category and result", url.Values{"category": {"security"}, "result": {"failure"}},
			func(r audit.LogEntry) bool { return r.Category == "security" && r.Result == "failure" }, 2},
		{"orgId", url.Values{"orgId": {f.org2}},
			func(r audit.LogEntry) bool { return val(r.OrgID) == f.org2 }, 3},
		{"from", url.Values{"from": {mid.Format(time.RFC3339Nano)}},
			func(r audit.LogEntry) bool { return !r.OccurredAt.Before(mid) }, 2},
		{"to", url.Values{"to": {mid.Format(time.RFC3339Nano)}},
			func(r audit.LogEntry) bool { return r.OccurredAt.Before(mid) }, 2},
		{"from and to", url.Values{"from": {mid.Format(time.RFC3339Nano)}, "to": {late.Format(time.RFC3339Nano)}},
			func(r audit.LogEntry) bool { return !r.OccurredAt.Before(mid) && r.OccurredAt.Before(late) }, 1},
		{"filters combine", url.Values{"actionPrefix": {"site."}, "actorId": {f.aPartner}},
			func(r audit.LogEntry) bool {
				return strings.HasPrefix(r.Action, "site.") && val(r.ActorID) == f.aPartner
			}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := all(t, f.e, f.admin, "/api/v1/audit/logs", tc.query, 500)
			want := where(everything, tc.keep)
			if len(want) < tc.least {
				t.Fatalf("fixture has %d matching rows, want at least %d", len(want), tc.least)
			}
			sameIDs(t, tc.query.Encode(), ids(got), want)
		})
	}

	for _, bad := range []string{"from=yesterday", "to=2026-01-01", "from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z",
		"category=other", "result=maybe", "actorType=robot", "orgId=not-a-uuid"} {
		if r := f.e.Do(f.admin, "GET", "/api/v1/audit/logs?"+bad, nil); r.Status != http.StatusBadRequest || r.ErrorCode() != "VALIDATION_ERROR" {
			t.Errorf("%s = %d %s, want 400 VALIDATION_ERROR", bad, r.Status, r.Body)
		}
	}
}

func TestSearch(t *testing.T) {
	f := newFixture(t)
	everything := all(t, f.e, f.admin, "/api/v1/audit/logs", nil, 500)
	matches := func(q string) func(audit.LogEntry) bool {
		q = strings.ToLower(q)
		return func(r audit.LogEntry) bool {
			for _, v := range []string{r.Action, val(r.ResourceName), r.ResourceType, val(r.ResourceID), val(r.ActorEmail), val(r.RequestID)} {
				if strings.Contains(strings.ToLower(v), q) {
					return true
				}
			}
			return false
		}
	}
	for _, q := range []string{"ALPHA second", "nobody@", "site.create", f.orgReqID, "bravo"} {
		got := all(t, f.e, f.admin, "/api/v1/audit/search", url.Values{"q": {q}}, 2)
		want := where(everything, matches(q))
		if len(want) == 0 {
			t.Fatalf("fixture has nothing matching %q", q)
		}
		sameIDs(t, "search "+q, ids(got), want)
	}
	got := all(t, f.e, f.admin, "/api/v1/audit/search", url.Values{"q": {"alpha"}, "resourceType": {"site"}}, 100)
	sameIDs(t, "search with filter", ids(got), where(everything, func(r audit.LogEntry) bool {
		return r.ResourceType == "site" && matches("alpha")(r)
	}))
	if got := all(t, f.e, f.admin, "/api/v1/audit/search", url.Values{"q": {"100%_"}}, 100); len(got) != 0 {
		t.Errorf("wildcards are literal: %d rows", len(got))
	}
	for _, bad := range []string{"", "q=a", "q=" + strings.Repeat("x", 201)} {
		if r := f.e.Do(f.admin, "GET", "/api/v1/audit/search?"+bad, nil); r.Status != http.StatusBadRequest {
			t.Errorf("search %q = %d %s, want 400", bad, r.Status, r.Body)
		}
	}
}

func readCSV(t *testing.T, body []byte) [][]string {
	t.Helper()
	recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatalf("parse CSV: %v\n%s", err, body)
	}
	return recs
}

func TestExport(t *testing.T) {
	f := newFixture(t)
	// A name a spreadsheet would run as a formula, with a comma and a quote for the quoting.
	f.e.Must(http.StatusCreated, f.aCaller, "POST", "/api/v1/orgs/sites", map[string]any{"orgId": f.org2, "name": `=1+2, "quoted"`})
	everything := all(t, f.e, f.admin, "/api/v1/audit/logs", nil, 500)

	r := f.e.Must(http.StatusOK, f.admin, "GET", "/api/v1/audit/export", nil)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv") {
		t.Errorf("Content-Type = %q", ct)
	}
	if cd := r.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") || !strings.Contains(cd, `filename="audit-log-`) || !strings.HasSuffix(cd, `.csv"`) {
		t.Errorf("Content-Disposition = %q", cd)
	}
	recs := readCSV(t, r.Body)
	if len(recs) != len(everything)+1 {
		t.Fatalf("CSV rows = %d, want header + %d", len(recs), len(everything))
	}
	header := recs[0]
	if header[0] != "id" || header[len(header)-1] != "details" || !slices.Contains(header, "requestId") {
		t.Errorf("header = %v", header)
	}
	col := func(name string) int { return slices.Index(header, name) }
	var gotIDs []string
	for i, rec := range recs[1:] {
		gotIDs = append(gotIDs, rec[col("id")])
		var details map[string]any
		if err := json.Unmarshal([]byte(rec[col("details")]), &details); err != nil {
			t.Errorf("row %d details %q: %v", i, rec[col("details")], err)
		}
		if want := everything[i]; rec[col("action")] != want.Action || rec[col("requestId")] != val(want.RequestID) {
			t.Errorf("row %d = %v, want %+v", i, rec, want)
		}
	}
	sameIDs(t, "CSV export", gotIDs, ids(everything))
	if recs[1][col("resourceName")] != `'=1+2, "quoted"` {
		t.Errorf("formula cell = %q, want it defused", recs[1][col("resourceName")])
	}

	r = f.e.Must(http.StatusOK, f.admin, "GET", "/api/v1/audit/export?format=csv&action=organization.create", nil)
	recs = readCSV(t, r.Body)
	want := where(everything, func(e audit.LogEntry) bool { return e.Action == "organization.create" })
	if len(recs) != len(want)+1 {
		t.Errorf("filtered CSV rows = %d, want %d", len(recs)-1, len(want))
	}

	r = f.e.Must(http.StatusOK, f.admin, "GET", "/api/v1/audit/export?format=json&actorId="+f.aPartner, nil)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("JSON Content-Type = %q", ct)
	}
	var rows []audit.LogEntry
	r.JSON(t, &rows)
	sameIDs(t, "JSON export", ids(rows), where(everything, func(e audit.LogEntry) bool { return val(e.ActorID) == f.aPartner }))

	r = f.e.Must(http.StatusOK, f.admin, "POST", "/api/v1/audit/export",
		map[string]any{"format": "json", "filters": map[string]any{"actionPrefix": "organization.", "orgId": f.org2}})
	rows = nil
	r.JSON(t, &rows)
	sameIDs(t, "POST JSON export", ids(rows), where(everything, func(e audit.LogEntry) bool {
		return strings.HasPrefix(e.Action, "organization.") && val(e.OrgID) == f.org2
	}))
	if !strings.HasSuffix(r.Header.Get("Content-Disposition"), `.json"`) {
		t.Errorf("JSON Content-Disposition = %q", r.Header.Get("Content-Disposition"))
	}

	r = f.e.Must(http.StatusOK, f.admin, "POST", "/api/v1/audit/export", map[string]any{"filters": map[string]any{"resourceType": "site"}})
	recs = readCSV(t, r.Body)
	if len(recs)-1 != len(where(everything, func(e audit.LogEntry) bool { return e.ResourceType == "site" })) {
		t.Errorf("POST CSV export rows = %d", len(recs)-1)
	}

	r = f.e.Must(http.StatusOK, f.admin, "GET", "/api/v1/audit/export?format=json&action=no.such.action", nil)
	if strings.TrimSpace(string(r.Body)) != "[\n]" && strings.TrimSpace(string(r.Body)) != "[]" {
		rows = nil
		r.JSON(t, &rows)
		if len(rows) != 0 {
			t.Errorf("empty export = %s", r.Body)
		}
	}

	for _, bad := range []struct{ method, path string }{
		{"GET", "/api/v1/audit/export?format=xml"},
		{"GET", "/api/v1/audit/export?from=now"},
	} {
		if r := f.e.Do(f.admin, bad.method, bad.path, nil); r.Status != http.StatusBadRequest || r.ErrorCode() != "VALIDATION_ERROR" {
			t.Errorf("%s = %d %s", bad.path, r.Status, r.Body)
		}
	}
	for _, body := range []any{map[string]any{"format": "pdf"}, map[string]any{"filters": map[string]any{"to": "soon"}},
		map[string]any{"filters": map[string]any{"unknown": "x"}}} {
		if r := f.e.Do(f.admin, "POST", "/api/v1/audit/export", body); r.Status != http.StatusBadRequest || r.ErrorCode() != "VALIDATION_ERROR" {
			t.Errorf("POST %v = %d %s", body, r.Status, r.Body)
		}
	}
}

func TestExportReadsInBatches(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	for i := 0; i < 3; i++ {
		e.CreatePartner(admin, "Partner "+itoa(i))
	}
	// Enough rows for several export batches, written straight to the log.
	ctx := context.Background()
	err := e.App.DB.Write(ctx, func(tx *sql.Tx) error {
		for i := 0; i < 1200; i++ {
			if err := audit.Record(ctx, tx, audit.Entry{Action: "test.bulk", ResourceType: "test", ResourceID: itoa(i)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	everything := all(t, e, admin, "/api/v1/audit/logs", nil, 500)
	r := e.Must(http.StatusOK, admin, "GET", "/api/v1/audit/export", nil)
	recs := readCSV(t, r.Body)
	got := make([]string, 0, len(recs)-1)
	for _, rec := range recs[1:] {
		got = append(got, rec[0])
	}
	sameIDs(t, "export across batches", got, ids(everything))
}

func TestSecurityEventsAndCompliance(t *testing.T) {
	f := newFixture(t)
	// A refused request is a denied security event.
	_, tech := f.e.CreateUser("alpha-tech@gale.test", access.LevelPartner, f.a.PartnerID, "", access.RolePartnerTechnician)
	f.e.Must(http.StatusForbidden, tech, "GET", "/api/v1/audit/export", nil)
	everything := all(t, f.e, f.admin, "/api/v1/audit/logs", nil, 500)

	events := all(t, f.e, f.admin, "/api/v1/audit/reports/security-events", nil, 5)
	sameIDs(t, "security events", ids(events), where(everything, func(e audit.LogEntry) bool { return e.Category == "security" }))
	failed := all(t, f.e, f.admin, "/api/v1/audit/reports/security-events", url.Values{"result": {"failure"}}, 100)
	found := false
	for _, e := range failed {
		if e.Category != "security" || e.Result != "failure" {
			t.Errorf("security-events?result=failure returned %+v", e)
		}
		if e.Action == "auth.login" && val(e.ResourceName) == "alpha-ops@gale.test" && val(e.PartnerID) == f.a.PartnerID {
			found = true
		}
	}
	if !found {
		t.Errorf("the failed sign-in of alpha-ops is not among %d failures", len(failed))
	}
	// Partner A sees its own user's failed sign-in but not the unknown address's.
	aFailed := all(t, f.e, f.a.Partner, "/api/v1/audit/reports/security-events", url.Values{"result": {"failure"}}, 100)
	if len(aFailed) != 1 || val(aFailed[0].ResourceName) != "alpha-ops@gale.test" {
		t.Errorf("partner A failures = %+v", aFailed)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if got := all(t, f.e, f.admin, "/api/v1/audit/reports/security-events", url.Values{"from": {future}}, 100); len(got) != 0 {
		t.Errorf("security events from the future = %d", len(got))
	}

	count := func(keep func(audit.LogEntry) bool) int { return len(where(everything, keep)) }
	var c audit.Compliance
	f.e.Must(http.StatusOK, f.admin, "GET", "/api/v1/audit/reports/compliance", nil).JSON(t, &c)
	want := audit.Compliance{
		TotalEvents:    len(everything),
		Changes:        count(func(e audit.LogEntry) bool { return e.Category == "change" }),
		SecurityEvents: count(func(e audit.LogEntry) bool { return e.Category == "security" }),
		FailedSignIns:  2,
		DeniedRequests: 1,
		// admin; per tenant a partner and an org user; alpha-ops; alpha-tech.
		MFAAdoption: audit.MFAAdoption{Users: 7},
	}
	if c.TotalEvents != want.TotalEvents || c.Changes != want.Changes || c.SecurityEvents != want.SecurityEvents ||
		c.FailedSignIns != want.FailedSignIns || c.DeniedRequests != want.DeniedRequests || c.MFAAdoption != want.MFAAdoption {
		t.Errorf("compliance = %+v, want %+v", c, want)
	}
	if d := c.To.Sub(c.From); d != audit.DefaultReportPeriod {
		t.Errorf("default period = %s", d)
	}

	// Partner A: its users (partner admin, org admin, alpha-ops, alpha-tech); one of them with MFA.
	if _, err := f.e.App.DB.SQL.Exec(`UPDATE users SET mfa_enabled = TRUE WHERE email = 'alpha-ops@gale.test'`); err != nil {
		t.Fatal(err)
	}
	f.e.Must(http.StatusOK, f.a.Partner, "GET", "/api/v1/audit/reports/compliance", nil).JSON(t, &c)
	if c.MFAAdoption != (audit.MFAAdoption{Users: 4, WithMFA: 1, Percent: 25}) || c.FailedSignIns != 1 || c.DeniedRequests != 1 {
		t.Errorf("partner A compliance = %+v", c)
	}
	f.e.Must(http.StatusOK, f.a.Org, "GET", "/api/v1/audit/reports/compliance", nil).JSON(t, &c)
	if c.MFAAdoption != (audit.MFAAdoption{Users: 1}) || c.FailedSignIns != 0 {
		t.Errorf("org A compliance = %+v", c)
	}

	old := "from=2020-01-01T00:00:00Z&to=2020-02-01T00:00:00Z"
	f.e.Must(http.StatusOK, f.admin, "GET", "/api/v1/audit/reports/compliance?"+old, nil).JSON(t, &c)
	if c.TotalEvents != 0 || !c.From.Equal(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("compliance of 2020 = %+v", c)
	}
	if r := f.e.Do(f.admin, "GET", "/api/v1/audit/reports/compliance?from=2021-01-01T00:00:00Z&to=2020-01-01T00:00:00Z", nil); r.Status != http.StatusBadRequest {
		t.Errorf("from after to = %d", r.Status)
	}
}

func TestUserActivity(t *testing.T) {
	f := newFixture(t)
	everything := all(t, f.e, f.admin, "/api/v1/audit/logs", nil, 500)
	var rep struct {
		From time.Time             `json:"from"`
		To   time.Time             `json:"to"`
		Data []audit.ActorActivity `json:"data"`
	}
	f.e.Must(http.StatusOK, f.admin, "GET", "/api/v1/audit/reports/user-activity", nil).JSON(t, &rep)
	var ops *audit.ActorActivity
	total := 0
	for i := range rep.Data {
		total += rep.Data[i].Actions
		if i > 0 && rep.Data[i].Actions > rep.Data[i-1].Actions {
			t.Errorf("not sorted by actions: %+v", rep.Data)
		}
		if val(rep.Data[i].ActorID) == f.aPartner {
			ops = &rep.Data[i]
		}
	}
	if total != len(everything) {
		t.Errorf("actions add up to %d, want %d", total, len(everything))
	}
	mine := where(everything, func(e audit.LogEntry) bool { return val(e.ActorID) == f.aPartner })
	if ops == nil || ops.Actions != len(mine) || ops.ActorType != "user" || val(ops.ActorEmail) != "alpha-ops@gale.test" ||
		ops.Changes != 4 || ops.SecurityEvents != 1 || ops.Failures != 0 || time.Since(ops.LastActivityAt) > time.Minute {
		t.Errorf("alpha-ops activity = %+v (entries %d)", ops, len(mine))
	}
	f.e.Must(http.StatusOK, f.admin, "GET", "/api/v1/audit/reports/user-activity?to=2020-01-01T00:00:00Z", nil).JSON(t, &rep)
	if len(rep.Data) != 0 || rep.To.Sub(rep.From) != audit.DefaultReportPeriod {
		t.Errorf("activity before 2020 = %+v", rep)
	}
	if r := f.e.Do(f.admin, "GET", "/api/v1/audit/reports/user-activity?from=last-week", nil); r.Status != http.StatusBadRequest {
		t.Errorf("bad from = %d", r.Status)
	}
}

func TestStats(t *testing.T) {
	f := newFixture(t)
	everything := all(t, f.e, f.admin, "/api/v1/audit/logs", nil, 500)
	var st audit.Stats
	f.e.Must(http.StatusOK, f.admin, "GET", "/api/v1/audit/stats", nil).JSON(t, &st)
	if st.Total != len(everything) || st.ByCategory["change"]+st.ByCategory["security"] != st.Total {
		t.Errorf("stats = %+v, want total %d", st, len(everything))
	}
	if st.ByResult["failure"] != 2 || st.ByResult["success"] != st.Total-2 {
		t.Errorf("byResult = %v", st.ByResult)
	}
	if len(st.TopActions) == 0 || len(st.TopActions) > 10 {
		t.Fatalf("topActions = %v", st.TopActions)
	}
	counts := map[string]int{}
	for _, e := range everything {
		counts[e.Action]++
	}
	for i, a := range st.TopActions {
		if counts[a.Action] != a.Count || (i > 0 && a.Count > st.TopActions[i-1].Count) {
			t.Errorf("topActions = %v, counts %v", st.TopActions, counts)
		}
	}
	if len(st.PerDay) != 14 || st.PerDay[13].Date != time.Now().UTC().Format(time.DateOnly) {
		t.Fatalf("perDay = %v", st.PerDay)
	}
	perDay := 0
	for _, d := range st.PerDay {
		perDay += d.Count
	}
	if perDay != st.Total {
		t.Errorf("perDay adds up to %d, want %d (all written today)", perDay, st.Total)
	}
	for q, n := range map[string]int{"days=3": 3, "days=90": 90, "days=365": 90} {
		f.e.Must(http.StatusOK, f.admin, "GET", "/api/v1/audit/stats?"+q, nil).JSON(t, &st)
		if len(st.PerDay) != n {
			t.Errorf("%s: perDay has %d days, want %d", q, len(st.PerDay), n)
		}
	}
	if r := f.e.Do(f.admin, "GET", "/api/v1/audit/stats?days=0", nil); r.Status != http.StatusBadRequest {
		t.Errorf("days=0 = %d", r.Status)
	}
}

func TestPermissions(t *testing.T) {
	f := newFixture(t)
	_, viewer := f.e.CreateUser("alpha-viewer@gale.test", access.LevelOrganization, f.a.PartnerID, f.a.OrgID, access.RoleOrgViewer)
	_, tech := f.e.CreateUser("alpha-tech@gale.test", access.LevelPartner, f.a.PartnerID, "", access.RolePartnerTechnician)
	for _, path := range []string{"/api/v1/audit", "/api/v1/audit/logs", "/api/v1/audit/search?q=site", "/api/v1/audit/stats",
		"/api/v1/audit/reports/user-activity", "/api/v1/audit/reports/security-events", "/api/v1/audit/reports/compliance"} {
		f.e.Must(http.StatusOK, viewer, "GET", path, nil)
		f.e.Must(http.StatusForbidden, tech, "GET", path, nil)
		f.e.Must(http.StatusUnauthorized, apptest.Anonymous, "GET", path, nil)
	}
	for _, c := range []apptest.Caller{viewer, tech} {
		if r := f.e.Do(c, "GET", "/api/v1/audit/export", nil); r.Status != http.StatusForbidden || r.ErrorCode() != "FORBIDDEN" {
			t.Errorf("GET export = %d %s, want 403", r.Status, r.Body)
		}
		if r := f.e.Do(c, "POST", "/api/v1/audit/export", map[string]any{"format": "json"}); r.Status != http.StatusForbidden {
			t.Errorf("POST export = %d %s, want 403", r.Status, r.Body)
		}
	}
	// Admins of every level hold audit:export.
	for _, c := range []apptest.Caller{f.admin, f.a.Partner, f.a.Org} {
		f.e.Must(http.StatusOK, c, "GET", "/api/v1/audit/export", nil)
	}
}

func TestTenancy(t *testing.T) {
	f := newFixture(t)
	everything := all(t, f.e, f.admin, "/api/v1/audit/logs", nil, 500)
	var bEntry, aPartnerEntry string
	for _, e := range everything {
		if e.Action == "organization.create" && val(e.OrgID) == f.b.OrgID {
			bEntry = e.ID
		}
		if e.Action == "partner.create" && val(e.PartnerID) == f.a.PartnerID {
			aPartnerEntry = e.ID
		}
	}
	if bEntry == "" || aPartnerEntry == "" {
		t.Fatal("fixture lacks the entries this test reads")
	}

	t.Run("partner", func(t *testing.T) {
		got := all(t, f.e, f.a.Partner, "/api/v1/audit/logs", nil, 7)
		sameIDs(t, "partner A list", ids(got), where(everything, func(e audit.LogEntry) bool { return val(e.PartnerID) == f.a.PartnerID }))
		if s := all(t, f.e, f.a.Partner, "/api/v1/audit/search", url.Values{"q": {"bravo"}}, 100); len(s) != 0 {
			t.Errorf("partner A finds %d bravo entries", len(s))
		}
		if s := all(t, f.e, f.a.Partner, "/api/v1/audit/logs", url.Values{"orgId": {f.b.OrgID}}, 100); len(s) != 0 {
			t.Errorf("partner A reads %d entries of B's organization", len(s))
		}
		recs := readCSV(t, f.e.Must(http.StatusOK, f.a.Partner, "GET", "/api/v1/audit/export", nil).Body)
		if len(recs)-1 != len(got) {
			t.Errorf("partner A export has %d rows, list %d", len(recs)-1, len(got))
		}
		for _, rec := range recs[1:] {
			if rec[2] != f.a.PartnerID {
				t.Errorf("partner A export row of partner %q", rec[2])
			}
		}
		var st audit.Stats
		f.e.Must(http.StatusOK, f.a.Partner, "GET", "/api/v1/audit/stats", nil).JSON(t, &st)
		// The export just above is itself recorded under partner A.
		if st.Total != len(got)+1 {
			t.Errorf("partner A stats total = %d, want %d", st.Total, len(got)+1)
		}
		if r := f.e.Do(f.a.Partner, "GET", "/api/v1/audit/logs/"+bEntry, nil); r.Status != http.StatusNotFound || r.ErrorCode() != "NOT_FOUND" {
			t.Errorf("partner A reads B's entry: %d %s", r.Status, r.Body)
		}
		f.e.Must(http.StatusOK, f.a.Partner, "GET", "/api/v1/audit/logs/"+aPartnerEntry, nil)
	})

	t.Run("organization", func(t *testing.T) {
		got := all(t, f.e, f.a.Org, "/api/v1/audit/logs", nil, 100)
		want := where(everything, func(e audit.LogEntry) bool { return val(e.OrgID) == f.a.OrgID })
		if len(want) == 0 {
			t.Fatal("no entries of A's organization")
		}
		sameIDs(t, "org A list", ids(got), want)
		for _, id := range []string{aPartnerEntry, bEntry} {
			if r := f.e.Do(f.a.Org, "GET", "/api/v1/audit/logs/"+id, nil); r.Status != http.StatusNotFound {
				t.Errorf("org A reads %s: %d", id, r.Status)
			}
		}
		var st audit.Stats
		f.e.Must(http.StatusOK, f.a.Org, "GET", "/api/v1/audit/stats", nil).JSON(t, &st)
		if st.Total != len(want) {
			t.Errorf("org A stats total = %d, want %d", st.Total, len(want))
		}
	})

	t.Run("partner limited to selected organizations", func(t *testing.T) {
		id, limited := f.e.CreateUser("alpha-limited@gale.test", access.LevelPartner, f.a.PartnerID, "", access.RolePartnerViewer)
		db := f.e.App.DB.SQL
		if _, err := db.Exec(`UPDATE users SET org_access = 'selected' WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO user_org_access (user_id, org_id) VALUES ($1, $2)`, id, f.org2); err != nil {
			t.Fatal(err)
		}
		everything := all(t, f.e, f.admin, "/api/v1/audit/logs", nil, 500)
		got := all(t, f.e, limited, "/api/v1/audit/logs", nil, 100)
		sameIDs(t, "limited partner list", ids(got), where(everything, func(e audit.LogEntry) bool {
			return val(e.PartnerID) == f.a.PartnerID && (e.OrgID == nil || *e.OrgID == f.org2)
		}))
		if s := all(t, f.e, limited, "/api/v1/audit/logs", url.Values{"orgId": {f.a.OrgID}}, 100); len(s) != 0 {
			t.Errorf("limited partner reads %d entries of an organization outside its selection", len(s))
		}
	})

	t.Run("system-level events are system-only", func(t *testing.T) {
		for _, c := range []apptest.Caller{f.a.Partner, f.a.Org, f.b.Partner} {
			if s := all(t, f.e, c, "/api/v1/audit/search", url.Values{"q": {"nobody@gale.test"}}, 100); len(s) != 0 {
				t.Errorf("a tenant reads the unknown address's failed sign-in")
			}
		}
		if s := all(t, f.e, f.admin, "/api/v1/audit/search", url.Values{"q": {"nobody@gale.test"}}, 100); len(s) != 1 {
			t.Errorf("system reads %d entries of the unknown address", len(s))
		}
	})
}

// TestNoRouteChangesTheLog walks the OpenAPI document: the audit surface only reads, and
// its one POST is the filtered export.
func TestNoRouteChangesTheLog(t *testing.T) {
	e := apptest.New(t)
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	e.Must(http.StatusOK, apptest.Anonymous, "GET", "/api/v1/openapi.json", nil).JSON(t, &doc)
	seen := map[string]bool{}
	for path, item := range doc.Paths {
		p := strings.TrimPrefix(path, "/api/v1")
		if p != "/audit" && !strings.HasPrefix(p, "/audit/") {
			continue
		}
		for method, op := range item {
			seen[op.OperationID] = true
			switch strings.ToUpper(method) {
			case "PUT", "PATCH", "DELETE":
				t.Errorf("%s %s (%s) would change the audit log", method, path, op.OperationID)
			case "POST":
				if p != "/audit/export" {
					t.Errorf("POST %s (%s): the only POST under /audit is the export", path, op.OperationID)
				}
			}
		}
	}
	for _, id := range []string{"list-audit", "list-audit-logs", "get-audit-log", "search-audit", "export-audit",
		"export-audit-filtered", "audit-user-activity", "audit-security-events", "audit-compliance", "audit-stats"} {
		if !seen[id] {
			t.Errorf("operation %s is not in the OpenAPI document", id)
		}
	}
}

func TestExportIsRecorded(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	e.CreatePartner(admin, "Exported")
	e.Must(http.StatusOK, admin, "GET", "/api/v1/audit/export?format=json", nil)
	var rows int
	var details string
	err := e.App.DB.SQL.QueryRow(`SELECT details FROM audit_logs WHERE action = 'audit.export' AND result = 'success'
		AND category = 'security' AND actor_email = $1`, apptest.AdminEmail).Scan(&details)
	if err != nil {
		t.Fatalf("no audit.export entry: %v", err)
	}
	var d map[string]any
	if err := json.Unmarshal([]byte(details), &d); err != nil || d["format"] != "json" {
		t.Fatalf("export details = %s", details)
	}
	rows = int(d["rows"].(float64))
	if rows < 2 {
		t.Fatalf("export recorded %d rows, want the partner creation and the sign-in at least", rows)
	}
}
