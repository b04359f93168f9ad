package incidents_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"gale/internal/domains/incidents"
	"gale/internal/platform/apperr"
)

func TestFeed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.a
	// Seven rows of Alpha: order is severity first, then newest detection first.
	ids := f.insert(t,
		row{tenant: a, severity: 2, detected: start.Add(-1 * time.Hour)},                                                // 0
		row{tenant: a, severity: 1, detected: start.Add(-5 * time.Hour)},                                                // 1
		row{tenant: a, kind: incidents.KindFinding, severity: 1, detected: start.Add(-2 * time.Hour), edrStatus: "new"}, // 2
		row{tenant: a, kind: incidents.KindFinding, source: incidents.ProviderB, severity: 3, detected: start},          // 3
		row{tenant: a, severity: 4, detected: start.Add(time.Minute)},                                                   // 4
		row{tenant: a, kind: incidents.KindFinding, source: incidents.ProviderB, severity: 2, detected: start},          // 5
		row{tenant: a, severity: 1, detected: start.Add(-1 * time.Minute)},                                              // 6
	)
	f.insert(t, row{tenant: f.b, severity: 1, detected: start}, row{tenant: f.b, kind: incidents.KindFinding, severity: 1, detected: start})
	order := func(rows []incidents.IncidentFeedRow) []string {
		out := make([]string, len(rows))
		for i, r := range rows {
			out[i] = r.ID
		}
		return out
	}
	want := []string{ids[6], ids[2], ids[1], ids[5], ids[0], ids[3], ids[4]}

	t.Run("order p1 first then newest", func(t *testing.T) {
		got := f.feed(t, a.Partner, "")
		if !slices.Equal(order(got.Data), want) {
			t.Fatalf("order = %v, want %v", order(got.Data), want)
		}
		if got.Pagination != (incidents.IncidentFeedPagination{Page: 1, Limit: 25, Total: 7}) {
			t.Fatalf("pagination = %+v", got.Pagination)
		}
		r := got.Data[1]
		if r.Kind != "finding" || r.Source != "edr_a" || r.Severity != "p1" || r.EDRStatus == nil || *r.EDRStatus != "new" ||
			r.Status != "new" || r.TrackedIncidentID != nil || r.SourceID != "src-"+ids[2] || !r.DetectedAt.Equal(start.Add(-2*time.Hour)) {
			t.Fatalf("finding row = %+v", r)
		}
		if got.Data[0].Kind != "tracked" || got.Data[0].Source != "native" || got.Data[0].Status != "open" || got.Data[0].EDRStatus != nil {
			t.Fatalf("tracked row = %+v", got.Data[0])
		}
	})
	t.Run("paging", func(t *testing.T) {
		p1 := f.feed(t, a.Partner, "limit=3")
		p2 := f.feed(t, a.Partner, "limit=3&page=2")
		p3 := f.feed(t, a.Partner, "limit=3&page=3")
		p4 := f.feed(t, a.Partner, "limit=3&page=4")
		all := append(append(order(p1.Data), order(p2.Data)...), order(p3.Data)...)
		if !slices.Equal(all, want) || len(p4.Data) != 0 || p4.Pagination.Total != 7 || p2.Pagination.Page != 2 || p2.Pagination.Limit != 3 {
			t.Fatalf("pages = %v / %+v, want %v", all, p4, want)
		}
		for _, q := range []string{"limit=0", "limit=101", "limit=-1", "page=0", "page=-2", "limit=abc", "kind=other", "source=edr_c", "orgId=nope"} {
			f.mustCode(t, http.StatusBadRequest, apperr.CodeValidation, a.Partner, "GET", api+"/incidents/feed?"+q, nil)
		}
		if got := f.feed(t, a.Partner, "limit=100"); got.Pagination.Limit != 100 || len(got.Data) != 7 {
			t.Fatalf("limit=100: %+v", got.Pagination)
		}
		if got := f.feed(t, a.Partner, "limit=1"); len(got.Data) != 1 || got.Pagination.Limit != 1 {
			t.Fatalf("limit=1: %+v", got)
		}
	})
	t.Run("default limit 25", func(t *testing.T) {
		g := f.e.NewTenant(f.admin, "Golf")
		rows := make([]row, 30)
		for i := range rows {
			rows[i] = row{tenant: g, severity: 1 + i%4, detected: start.Add(time.Duration(i) * time.Minute)}
		}
		f.insert(t, rows...)
		got := f.feed(t, g.Partner, "")
		if len(got.Data) != 25 || got.Pagination.Limit != 25 || got.Pagination.Total != 30 {
			t.Fatalf("default page: %d rows, %+v", len(got.Data), got.Pagination)
		}
		if rest := f.feed(t, g.Partner, "page=2"); len(rest.Data) != 5 {
			t.Fatalf("page 2: %d rows", len(rest.Data))
		}
	})
	t.Run("filters", func(t *testing.T) {
		tracked := f.feed(t, a.Partner, "kind=tracked")
		if !slices.Equal(order(tracked.Data), []string{ids[6], ids[1], ids[0], ids[4]}) || tracked.Pagination.Total != 4 {
			t.Fatalf("kind=tracked: %v", order(tracked.Data))
		}
		findings := f.feed(t, a.Partner, "kind=finding")
		if !slices.Equal(order(findings.Data), []string{ids[2], ids[5], ids[3]}) {
			t.Fatalf("kind=finding: %v", order(findings.Data))
		}
		if got := f.feed(t, a.Partner, "source=edr_b"); !slices.Equal(order(got.Data), []string{ids[5], ids[3]}) {
			t.Fatalf("source=edr_b: %v", order(got.Data))
		}
		if got := f.feed(t, a.Partner, "source=edr_a"); !slices.Equal(order(got.Data), []string{ids[2]}) {
			t.Fatalf("source=edr_a: %v", order(got.Data))
		}
		if got := f.feed(t, a.Partner, "source=native"); got.Pagination.Total != 4 {
			t.Fatalf("source=native: %v", order(got.Data))
		}
		if got := f.feed(t, a.Partner, "source=native&kind=finding"); len(got.Data) != 0 || got.Pagination.Total != 0 {
			t.Fatalf("source=native&kind=finding: %v", order(got.Data))
		}
		if got := f.feed(t, a.Partner, "source=edr_a&kind=tracked"); len(got.Data) != 0 {
			t.Fatalf("source=edr_a&kind=tracked: %v", order(got.Data))
		}
		if got := f.feed(t, a.Partner, "orgId="+a.OrgID); got.Pagination.Total != 7 {
			t.Fatalf("orgId: %+v", got.Pagination)
		}
		if got := f.feed(t, a.Partner, "orgId="+f.b.OrgID); got.Pagination.Total != 0 {
			t.Fatalf("orgId of another tenant: %+v", got.Pagination)
		}
		if got := f.feed(t, f.admin, "orgId="+f.b.OrgID); got.Pagination.Total != 2 {
			t.Fatalf("system, orgId of Bravo: %+v", got.Pagination)
		}
	})
	t.Run("alerts:read only sees tracked", func(t *testing.T) {
		c := f.roleUser(t, a, "AlertsOnly", "alerts:read")
		got := f.feed(t, c, "")
		if !slices.Equal(order(got.Data), []string{ids[6], ids[1], ids[0], ids[4]}) || got.Pagination.Total != 4 {
			t.Fatalf("alerts:read only: %v %+v", order(got.Data), got.Pagination)
		}
		if got := f.feed(t, c, "kind=finding"); len(got.Data) != 0 || got.Pagination.Total != 0 {
			t.Fatalf("alerts:read only, kind=finding: %v", order(got.Data))
		}
		both := f.roleUser(t, a, "AlertsDevices", "alerts:read", "devices:read")
		if got := f.feed(t, both, ""); got.Pagination.Total != 7 {
			t.Fatalf("alerts:read + devices:read: %+v", got.Pagination)
		}
		devicesOnly := f.roleUser(t, a, "DevicesOnly", "devices:read")
		f.mustCode(t, http.StatusForbidden, apperr.CodeForbidden, devicesOnly, "GET", api+"/incidents/feed", nil)
	})
	t.Run("tenancy", func(t *testing.T) {
		got := f.feed(t, f.b.Partner, "")
		if got.Pagination.Total != 2 {
			t.Fatalf("Bravo sees %d rows", got.Pagination.Total)
		}
		for _, r := range got.Data {
			if slices.Contains(ids, r.ID) {
				t.Fatalf("Bravo sees Alpha's row %s", r.ID)
			}
		}
		if got := f.feed(t, a.Org, ""); got.Pagination.Total != 7 {
			t.Fatalf("Alpha's org admin: %+v", got.Pagination)
		}
		if got := f.feed(t, f.admin, ""); got.Pagination.Total < 9 {
			t.Fatalf("system admin: %+v", got.Pagination)
		}
	})
}
