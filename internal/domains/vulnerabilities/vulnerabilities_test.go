package vulnerabilities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/patches"
	"gale/internal/domains/vulnerabilities"
	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

type fixture struct {
	t     *testing.T
	e     *apptest.Env
	clk   *clock.Fake
	admin apptest.Caller
	a, b  apptest.Tenant
	s     *vulnerabilities.Service
	dev   *devices.Service
	pat   *patches.Service
}

func newFixture(t *testing.T) *fixture {
	clk := clock.NewFake(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	e := apptest.New(t, apptest.WithClock(clk))
	admin := e.Admin()
	return &fixture{t: t, e: e, clk: clk, admin: admin, a: e.NewTenant(admin, "Alpha"), b: e.NewTenant(admin, "Bravo"),
		s: app.Service[*vulnerabilities.Service](e.App), dev: app.Service[*devices.Service](e.App), pat: app.Service[*patches.Service](e.App)}
}

// device enrolls an agent in ten and stores its inventory of dpkg packages (name → version).
func (f *fixture) device(ten apptest.Tenant, host string, pkgs map[string]string) devices.Agent {
	f.t.Helper()
	r := f.e.EnrollAgent(ten, host)
	ag := devices.Agent{DeviceID: r.DeviceID, PartnerID: ten.PartnerID, OrgID: ten.OrgID, Role: "agent"}
	f.inventory(ag, pkgs)
	return ag
}

func (f *fixture) inventory(ag devices.Agent, pkgs map[string]string) {
	f.t.Helper()
	inv := agentproto.Inventory{Hostname: "h-" + ag.DeviceID[:8], OS: agentproto.OSInfo{Type: agentproto.OSLinux, Name: "Debian GNU/Linux", Version: "12"}}
	for n, v := range pkgs {
		inv.Software = append(inv.Software, agentproto.Software{Name: n, Version: v, Source: "dpkg", Architecture: "amd64"})
	}
	f.clk.Advance(time.Second) // a new inventory time
	if err := f.dev.StoreInventory(context.Background(), ag, inv); err != nil {
		f.t.Fatalf("store inventory: %v", err)
	}
}

// pending records a scan of ag offering the updates (name → [installed, available]).
func (f *fixture) pending(ag devices.Agent, ups map[string][2]string) {
	f.t.Helper()
	res := agentproto.PatchScanResult{Manager: agentproto.ManagerApt, ScannedAt: time.Now()}
	for n, v := range ups {
		res.Updates = append(res.Updates, agentproto.PackageUpdate{Name: n, Architecture: "amd64", InstalledVersion: v[0], AvailableVersion: v[1],
			Security: true, Origin: "bookworm-security"})
	}
	raw, _ := json.Marshal(res)
	var js patches.PatchJobStart
	f.e.Must(202, f.admin, "POST", api+"/patches/scan", map[string]any{"deviceIds": []string{ag.DeviceID}}).JSON(f.t, &js)
	var jd patches.PatchJobDetail
	f.e.Must(200, f.admin, "GET", api+"/patches/jobs/"+js.ID, nil).JSON(f.t, &jd)
	if err := f.dev.RecordResult(context.Background(), ag, agentproto.CommandResult{CommandID: *jd.Devices[0].CommandID,
		Status: agentproto.ResultCompleted, Result: raw}); err != nil {
		f.t.Fatalf("record scan: %v", err)
	}
}

func (f *fixture) importOSV(docs ...map[string]any) vulnerabilities.VulnImportResult {
	f.t.Helper()
	var r vulnerabilities.VulnImportResult
	f.e.Must(200, f.admin, "POST", api+"/vulnerabilities/advisories/import", map[string]any{"document": docs}).JSON(f.t, &r)
	return r
}

func osv(cve, pkg, fixed string, cvss string, exploited bool) map[string]any {
	return map[string]any{"id": cve, "summary": "test " + cve, "severity": []map[string]string{{"type": "CVSS_V3", "score": cvss}},
		"affected": []map[string]any{{"package": map[string]string{"ecosystem": "Debian:12", "name": pkg},
			"ranges": []map[string]any{{"type": "ECOSYSTEM", "events": []map[string]string{{"introduced": "0"}, {"fixed": fixed}}}}}},
		"database_specific": map[string]any{"known_exploited": exploited}}
}

const critical = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H" // 9.8
const medium = "CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:L/I:L/A:L"   // 5.3

type list[T any] struct {
	Data       []T `json:"data"`
	Pagination struct {
		HasMore bool   `json:"hasMore"`
		Cursor  string `json:"cursor"`
	} `json:"pagination"`
}

func get[T any](f *fixture, c apptest.Caller, path string) T {
	f.t.Helper()
	var v T
	f.e.Must(200, c, "GET", api+path, nil).JSON(f.t, &v)
	return v
}

func findings(f *fixture, c apptest.Caller, cve string) []vulnerabilities.VulnFinding {
	f.t.Helper()
	return get[list[vulnerabilities.VulnFinding]](f, c, "/vulnerabilities/"+cve+"/devices").Data
}

// TestFixtureAdvisoriesRaiseFindingsGroupedByPackage imports OSV advisories and checks the
// correlation by Debian ordering, the by-CVE and by-software views, stats, tenancy, a device's
// inventory change (patched, reopened) and remediation through the patching domain.
func TestFixtureAdvisoriesRaiseFindingsGroupedByPackage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	web := f.device(f.a, "web", map[string]string{"openssl": "3.0.11-1~deb12u1", "jq": "1.6-2.1+deb12u1", "bash": "5.2.15-2+b2"})
	db := f.device(f.a, "db", map[string]string{"openssl": "3.0.15-1~deb12u1", "jq": "1.6-2.1+deb12u3"})
	other := f.device(f.b, "other", map[string]string{"openssl": "3.0.11-1~deb12u1"})
	f.pending(web, map[string][2]string{"openssl": {"3.0.11-1~deb12u1", "3.0.15-1~deb12u1"}})

	r := f.importOSV(osv("CVE-2026-0001", "openssl", "3.0.13-1~deb12u1", critical, true), osv("CVE-2026-0002", "openssl", "3.0.16-1~deb12u1", medium, false),
		osv("CVE-2026-0003", "jq", "1.6-2.1+deb12u3", medium, false), map[string]any{"id": "GHSA-xxxx", "affected": []any{}})
	if r.Format != "osv" || r.Advisories != 3 || r.CVEs != 3 || r.Packages != 2 || r.Devices != 3 {
		t.Fatalf("import = %+v", r)
	}
	// Alpha: web has 0001, 0002 (openssl 3.0.11) and 0003 (jq deb12u1 < deb12u3); db only 0002.
	cves := get[list[vulnerabilities.VulnCVE]](f, f.a.Partner, "/vulnerabilities")
	if len(cves.Data) != 3 || cves.Data[0].CVEID != "CVE-2026-0001" || cves.Data[0].Severity != "critical" || !cves.Data[0].KnownExploited ||
		cves.Data[0].CVSSScore == nil || *cves.Data[0].CVSSScore != 9.8 || cves.Data[0].AffectedDevices != 1 || cves.Data[0].PatchReady != 1 {
		t.Fatalf("by CVE = %+v", cves.Data)
	}
	if c := cves.Data[1]; c.CVEID != "CVE-2026-0002" || c.AffectedDevices != 2 || c.PatchReady != 0 || c.Packages[0] != "openssl" {
		t.Fatalf("second CVE = %+v (the pending 3.0.15 does not reach 3.0.16)", c)
	}
	groups := get[list[vulnerabilities.VulnSoftwareGroup]](f, f.a.Partner, "/vulnerabilities/software")
	if len(groups.Data) != 2 || groups.Data[0].GroupKey != "pkg:openssl" || groups.Data[0].Devices != 2 || groups.Data[0].Findings != 3 ||
		groups.Data[0].Critical != 1 || groups.Data[0].KnownExploited != 1 || groups.Data[0].PatchReady != 1 ||
		groups.Data[0].FixedVersion != "3.0.16-1~deb12u1" || groups.Data[1].GroupKey != "pkg:jq" || groups.Data[1].Findings != 1 {
		t.Fatalf("by software = %+v", groups.Data)
	}
	// Paging by cursor.
	p1 := get[list[vulnerabilities.VulnSoftwareGroup]](f, f.a.Partner, "/vulnerabilities/software?limit=1")
	p2 := get[list[vulnerabilities.VulnSoftwareGroup]](f, f.a.Partner, "/vulnerabilities/software?limit=1&cursor="+p1.Pagination.Cursor)
	if len(p1.Data) != 1 || !p1.Pagination.HasMore || len(p2.Data) != 1 || p2.Data[0].GroupKey != "pkg:jq" || p2.Pagination.HasMore {
		t.Fatalf("pages %+v %+v", p1, p2)
	}
	detail := get[vulnerabilities.VulnSoftwareDetail](f, f.a.Partner, "/vulnerabilities/software/pkg:openssl")
	if len(detail.Devices) != 2 || detail.Group.Findings != 3 {
		t.Fatalf("group detail %+v", detail)
	}
	st := get[vulnerabilities.VulnStats](f, f.a.Partner, "/vulnerabilities/stats")
	if st.CriticalOpen != 1 || st.KnownExploitedExposure != 1 || st.KnownExploitedDevices != 1 || st.PatchReady != 1 || st.Open != 4 || st.AffectedDevices != 2 {
		t.Fatalf("stats %+v", st)
	}
	// Tenancy: Bravo sees its own device only, and 404 for Alpha's resources.
	if got := get[list[vulnerabilities.VulnCVE]](f, f.b.Partner, "/vulnerabilities"); len(got.Data) != 2 {
		t.Fatalf("Bravo by CVE = %+v", got.Data)
	}
	if got := findings(f, f.b.Org, "CVE-2026-0001"); len(got) != 1 || got[0].DeviceID != other.DeviceID {
		t.Fatalf("Bravo's CVE devices %+v", got)
	}
	f.e.Must(404, f.b.Partner, "GET", api+"/vulnerabilities/CVE-2026-0003/devices", nil)
	f.e.Must(404, f.b.Partner, "GET", api+"/vulnerabilities/software/pkg:jq", nil)
	webF := findings(f, f.a.Org, "CVE-2026-0003")
	if len(webF) != 1 || webF[0].DeviceID != web.DeviceID || webF[0].InstalledVersion != "1.6-2.1+deb12u1" || webF[0].Status != "open" {
		t.Fatalf("jq findings %+v", webF)
	}
	id := webF[0].ID
	for _, path := range []string{"/accept-risk", "/mitigate", "/reopen"} {
		f.e.Must(404, f.b.Partner, "POST", api+"/vulnerabilities/"+id+path, map[string]any{})
	}
	var bulk vulnerabilities.VulnBulkResult
	f.e.Must(200, f.b.Partner, "POST", api+"/vulnerabilities/bulk/mitigate", map[string]any{"ids": []string{id}}).JSON(t, &bulk)
	if len(bulk.Succeeded) != 0 || len(bulk.Skipped) != 1 || bulk.Skipped[0].Reason != "NOT_FOUND" {
		t.Fatalf("foreign bulk %+v", bulk)
	}
	if r := f.e.Do(f.b.Partner, "POST", api+"/vulnerabilities/remediate", map[string]any{"findingIds": []string{id}}); r.Status != 404 {
		t.Fatalf("foreign remediate = %d %s", r.Status, r.Body)
	}
	if r := f.e.Do(f.b.Partner, "POST", api+"/vulnerabilities/tickets", map[string]any{"findingIds": []string{id}}); r.Status != 404 {
		t.Fatalf("foreign tickets = %d %s", r.Status, r.Body)
	}
	// Import is for platform administrators.
	f.e.Must(403, f.a.Partner, "POST", api+"/vulnerabilities/advisories/import", map[string]any{"document": []any{}})

	// Tickets: validated, then 501 TICKETS_UNAVAILABLE.
	f.e.Must(400, f.a.Partner, "POST", api+"/vulnerabilities/tickets", map[string]any{"findingIds": []string{}})
	if r := f.e.Do(f.a.Partner, "POST", api+"/vulnerabilities/tickets", map[string]any{"findingIds": []string{id}}); r.Status != 501 ||
		r.ErrorCode() != vulnerabilities.CodeTicketsUnavailable {
		t.Fatalf("tickets = %d %s", r.Status, r.Body)
	}

	// The by-software counts follow the findings' states; a severity filter counts the findings.
	if got := get[list[vulnerabilities.VulnSoftwareGroup]](f, f.a.Partner, "/vulnerabilities/software?severity=critical").Data; len(got) != 1 ||
		got[0].GroupKey != "pkg:openssl" || got[0].Findings != 1 {
		t.Fatalf("critical groups %+v", got)
	}
	f.e.Must(200, f.a.Org, "POST", api+"/vulnerabilities/"+id+"/accept-risk", map[string]any{"note": "later"})
	if got := get[list[vulnerabilities.VulnSoftwareGroup]](f, f.a.Partner, "/vulnerabilities/software").Data; len(got) != 1 {
		t.Fatalf("open groups after accepting jq's finding %+v", got)
	}
	if got := get[list[vulnerabilities.VulnSoftwareGroup]](f, f.a.Partner, "/vulnerabilities/software?status=accepted").Data; len(got) != 1 ||
		got[0].GroupKey != "pkg:jq" || got[0].FixedVersion != "1.6-2.1+deb12u3" {
		t.Fatalf("accepted groups %+v", got)
	}
	f.e.Must(200, f.a.Org, "POST", api+"/vulnerabilities/"+id+"/reopen", nil)

	// Remediate: jq has no pending patch → 409; openssl's pending patch fixes 0001 (not 0002).
	if r := f.e.Do(f.a.Partner, "POST", api+"/vulnerabilities/remediate", map[string]any{"groupKeys": []string{"pkg:jq"}}); r.Status != 409 ||
		r.ErrorCode() != vulnerabilities.CodeNoPatch {
		t.Fatalf("remediate jq = %d %s", r.Status, r.Body)
	}
	f.e.Must(400, f.a.Partner, "POST", api+"/vulnerabilities/remediate", map[string]any{})
	var rem vulnerabilities.VulnRemediation
	f.e.Must(200, f.a.Partner, "POST", api+"/vulnerabilities/remediate", map[string]any{"cveIds": []string{"CVE-2026-0001"}, "approve": true}).JSON(t, &rem)
	if rem.Job.Kind != patches.JobInstall || rem.Job.Totals.Queued != 1 || len(rem.PatchIDs) != 1 {
		t.Fatalf("remediation %+v", rem)
	}
	jd := get[patches.PatchJobDetail](f, f.a.Partner, "/patches/jobs/"+rem.Job.ID)
	if len(jd.Devices) != 1 || jd.Devices[0].DeviceID != web.DeviceID || jd.Devices[0].Packages[0].Version != "3.0.15-1~deb12u1" {
		t.Fatalf("job %+v", jd)
	}

	// The device's inventory moves openssl to 3.0.15: 0001 becomes patched, 0002 stays open.
	f.inventory(web, map[string]string{"openssl": "3.0.15-1~deb12u1", "jq": "1.6-2.1+deb12u1"})
	got := findings(f, f.a.Org, "CVE-2026-0001")
	if len(got) != 0 {
		t.Fatalf("CVE-2026-0001 after the upgrade: %+v", got)
	}
	patched := get[list[vulnerabilities.VulnFinding]](f, f.a.Org, "/vulnerabilities/CVE-2026-0001/devices?status=patched").Data
	if len(patched) != 1 || patched[0].PatchedAt == nil {
		t.Fatalf("patched finding %+v", patched)
	}
	// Back to the old version: the finding is open again.
	f.inventory(web, map[string]string{"openssl": "3.0.11-1~deb12u1", "jq": "1.6-2.1+deb12u1"})
	if got := findings(f, f.a.Org, "CVE-2026-0001"); len(got) != 1 || got[0].Status != "open" || got[0].ID != patched[0].ID {
		t.Fatalf("reopened finding %+v", got)
	}
	// A full correlation changes nothing more.
	if n, err := f.s.CorrelateAll(context.Background()); err != nil || n != 0 {
		t.Fatalf("CorrelateAll = %d %v, want 0 changes", n, err)
	}
	_ = db
}

// TestTransitions walks every transition of a finding, the 400 of a past acceptedUntil, the
// expiry of an acceptance, bulk answers, and the races.
func TestTransitions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pkgs := map[string]string{}
	var docs []map[string]any
	for i := range 30 {
		name := fmt.Sprintf("pkg%02d", i)
		pkgs[name] = "1.0-1"
		docs = append(docs, osv(fmt.Sprintf("CVE-2026-1%03d", i), name, "1.1-1", medium, false))
	}
	f.device(f.a, "host", pkgs)
	f.importOSV(docs...)
	all := map[string]string{}
	for i := range 30 {
		fs := findings(f, f.a.Partner, fmt.Sprintf("CVE-2026-1%03d", i))
		if len(fs) != 1 {
			t.Fatalf("findings of %d: %+v", i, fs)
		}
		all[fmt.Sprintf("%02d", i)] = fs[0].ID
	}
	c := f.a.Partner
	post := func(want int, id, action string, body any) vulnerabilities.VulnFinding {
		t.Helper()
		var out vulnerabilities.VulnFinding
		f.e.Must(want, c, "POST", api+"/vulnerabilities/"+id+action, body).JSON(t, &out)
		return out
	}
	// open → accepted (with a past acceptedUntil: 400) → open → mitigated → open.
	id := all["00"]
	past := f.clk.Now().Add(-time.Hour)
	if r := f.e.Do(c, "POST", api+"/vulnerabilities/"+id+"/accept-risk", map[string]any{"acceptedUntil": past}); r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" {
		t.Fatalf("past acceptedUntil = %d %s", r.Status, r.Body)
	}
	until := f.clk.Now().Add(48 * time.Hour)
	if got := post(200, id, "/accept-risk", map[string]any{"acceptedUntil": until, "note": "vendor says unreachable"}); got.Status != "accepted" ||
		got.AcceptedUntil == nil || got.Note != "vendor says unreachable" || got.DecidedBy == nil {
		t.Fatalf("accepted %+v", got)
	}
	if r := f.e.Do(c, "POST", api+"/vulnerabilities/"+id+"/mitigate", nil); r.Status != 409 || r.ErrorCode() != vulnerabilities.CodeStatusConflict {
		t.Fatalf("mitigate an accepted finding = %d %s", r.Status, r.Body)
	}
	f.e.Must(409, c, "POST", api+"/vulnerabilities/"+id+"/accept-risk", nil)
	if got := post(200, id, "/reopen", nil); got.Status != "open" || got.AcceptedUntil != nil {
		t.Fatalf("reopened %+v", got)
	}
	f.e.Must(409, c, "POST", api+"/vulnerabilities/"+id+"/reopen", nil)
	if got := post(200, id, "/mitigate", map[string]any{"note": "firewalled"}); got.Status != "mitigated" {
		t.Fatalf("mitigated %+v", got)
	}
	if got := post(200, id, "/reopen", nil); got.Status != "open" {
		t.Fatalf("reopened %+v", got)
	}
	f.e.Must(404, c, "POST", api+"/vulnerabilities/00000000-0000-0000-0000-000000000000/reopen", nil)
	f.e.Must(400, c, "POST", api+"/vulnerabilities/not-a-uuid/mitigate", nil)

	// Permissions: a role with vulnerabilities read and write only may reopen, not accept the
	// risk (vulnerabilities:accept_risk), mitigate (devices:write) or remediate (devices:execute).
	var role struct {
		ID string `json:"id"`
	}
	f.e.Must(201, f.a.Partner, "POST", api+"/roles", map[string]any{"name": "vuln analyst", "scope": "organization", "orgId": f.a.OrgID,
		"permissions": []string{"vulnerabilities:read", "vulnerabilities:write"}}).JSON(t, &role)
	_, analyst := f.e.CreateUser("analyst@gale.test", access.LevelOrganization, f.a.PartnerID, f.a.OrgID, role.ID)
	for _, action := range []string{"/accept-risk", "/mitigate"} {
		f.e.Must(403, analyst, "POST", api+"/vulnerabilities/"+all["29"]+action, nil)
	}
	f.e.Must(403, analyst, "POST", api+"/vulnerabilities/bulk/accept-risk", map[string]any{"ids": []string{all["29"]}})
	f.e.Must(403, analyst, "POST", api+"/vulnerabilities/bulk/mitigate", map[string]any{"ids": []string{all["29"]}})
	f.e.Must(403, analyst, "POST", api+"/vulnerabilities/remediate", map[string]any{"findingIds": []string{all["29"]}})
	f.e.Must(200, analyst, "GET", api+"/vulnerabilities/stats", nil)
	f.e.Must(409, analyst, "POST", api+"/vulnerabilities/"+all["29"]+"/reopen", nil)

	// The acceptance expires by itself.
	id = all["01"]
	post(200, id, "/accept-risk", map[string]any{"acceptedUntil": f.clk.Now().Add(24 * time.Hour)})
	if st := get[vulnerabilities.VulnStats](f, c, "/vulnerabilities/stats"); st.AcceptedExpiringSoon != 1 || st.Accepted != 1 {
		t.Fatalf("stats %+v", st)
	}
	f.clk.Advance(25 * time.Hour)
	if err := f.s.ReopenExpired(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := findings(f, c, "CVE-2026-1001"); got[0].Status != "open" || got[0].AcceptedUntil != nil {
		t.Fatalf("after expiry %+v", got[0])
	}

	// Bulk: 1 to 200 IDs; each open one moves, the others are skipped with their reason.
	f.e.Must(400, c, "POST", api+"/vulnerabilities/bulk/accept-risk", map[string]any{"ids": []string{}})
	many := make([]string, 201)
	for i := range many {
		many[i] = all["02"]
	}
	f.e.Must(400, c, "POST", api+"/vulnerabilities/bulk/mitigate", map[string]any{"ids": many})
	f.e.Must(400, c, "POST", api+"/vulnerabilities/bulk/accept-risk", map[string]any{"ids": []string{all["02"]}, "acceptedUntil": past})
	post(200, all["03"], "/mitigate", nil)
	var br vulnerabilities.VulnBulkResult
	f.e.Must(200, c, "POST", api+"/vulnerabilities/bulk/accept-risk", map[string]any{"ids": []string{all["02"], all["03"],
		"00000000-0000-0000-0000-000000000000"}, "note": "bulk"}).JSON(t, &br)
	if len(br.Succeeded) != 1 || br.Succeeded[0] != all["02"] || len(br.Skipped) != 2 || br.Skipped[0].Reason != vulnerabilities.CodeStatusConflict ||
		br.Skipped[1].Reason != "NOT_FOUND" {
		t.Fatalf("bulk accept %+v", br)
	}
	f.e.Must(200, c, "POST", api+"/vulnerabilities/bulk/mitigate", map[string]any{"ids": []string{all["04"], all["05"]}}).JSON(t, &br)
	if len(br.Succeeded) != 2 || len(br.Skipped) != 0 {
		t.Fatalf("bulk mitigate %+v", br)
	}

	// Race: accept-risk against mitigate → one 200, one 409.
	for _, k := range []string{"10", "11", "12", "13", "14"} {
		statuses := race(f, c, []string{all[k] + "/accept-risk", all[k] + "/mitigate"})
		if statuses[200] != 1 || statuses[409] != 1 {
			t.Fatalf("accept-risk vs mitigate on %s: %v", k, statuses)
		}
	}
	// Race: 20 concurrent reopens → one 200.
	post(200, all["20"], "/mitigate", nil)
	paths := make([]string, 20)
	for i := range paths {
		paths[i] = all["20"] + "/reopen"
	}
	if statuses := race(f, c, paths); statuses[200] != 1 || statuses[409] != 19 {
		t.Fatalf("20 reopens: %v", statuses)
	}
}

func race(f *fixture, c apptest.Caller, paths []string) map[int]int {
	var mu sync.Mutex
	out := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, p := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := f.e.Do(c, "POST", api+"/vulnerabilities/"+p, map[string]any{})
			mu.Lock()
			out[r.Status]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// TestChangelogsOfSecurityUpgrades follows a patch scan's security upgrade: the server asks
// the scanning device for the changelog once for the fleet, the result's CVEs become
// advisories fixed in the candidate version, and every device below it gets findings.
func TestChangelogsOfSecurityUpgrades(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	one := f.device(f.a, "one", map[string]string{"jq": "1.6-2.1+deb12u1"})
	two := f.device(f.b, "two", map[string]string{"jq": "1.6-2.1+deb12u1"})
	f.pending(one, map[string][2]string{"jq": {"1.6-2.1+deb12u1", "1.6-2.1+deb12u3"}})
	f.pending(two, map[string][2]string{"jq": {"1.6-2.1+deb12u1", "1.6-2.1+deb12u3"}})
	changelogCommands := func(ag devices.Agent, c apptest.Caller) []devices.DeviceCommand {
		var out []devices.DeviceCommand
		for _, cmd := range get[list[devices.DeviceCommand]](f, c, "/devices/"+ag.DeviceID+"/commands").Data {
			if cmd.Type == agentproto.CommandPackageChangelog {
				out = append(out, cmd)
			}
		}
		return out
	}
	cmds := changelogCommands(one, f.a.Partner)
	if len(cmds) != 1 || len(changelogCommands(two, f.b.Partner)) != 0 {
		t.Fatalf("changelog commands: one %d, two %d; want one for the fleet", len(cmds), len(changelogCommands(two, f.b.Partner)))
	}
	var p agentproto.PackageChangelog
	if err := json.Unmarshal(cmds[0].Payload, &p); err != nil || len(p.Packages) != 1 || p.Packages[0].Name != "jq" ||
		p.Packages[0].Version != "1.6-2.1+deb12u3" || p.Packages[0].SinceVersion != "1.6-2.1+deb12u1" {
		t.Fatalf("payload %s", cmds[0].Payload)
	}
	// Nothing left for the periodic fetch.
	if n, err := f.s.FetchChangelogs(context.Background()); err != nil || n != 0 {
		t.Fatalf("FetchChangelogs = %d %v", n, err)
	}
	raw, _ := json.Marshal(agentproto.PackageChangelogResult{Packages: []agentproto.ChangelogEntry{{Name: "jq", Version: "1.6-2.1+deb12u3",
		CVEs: []string{"CVE-2026-32316", "CVE-2025-48060", "not-a-cve"}, Urgency: "high", Entries: 2}}})
	if err := f.dev.RecordResult(context.Background(), one, agentproto.CommandResult{CommandID: cmds[0].ID, Status: agentproto.ResultCompleted,
		Result: raw}); err != nil {
		t.Fatal(err)
	}
	for _, ten := range []apptest.Tenant{f.a, f.b} {
		got := findings(f, ten.Org, "CVE-2026-32316")
		if len(got) != 1 || got[0].Severity != "high" || got[0].FixedVersion != "1.6-2.1+deb12u3" || !got[0].PatchReady || got[0].GroupKey != "pkg:jq" {
			t.Fatalf("findings %+v", got)
		}
	}
	// An import with a CVSS score overrides the urgency.
	f.importOSV(osv("CVE-2026-32316", "jq", "1.6-2.1+deb12u3", critical, true))
	if got := findings(f, f.a.Org, "CVE-2026-32316"); got[0].Severity != "critical" || !got[0].KnownExploited {
		t.Fatalf("after import %+v", got[0])
	}
	// A failed fetch is asked again of another device with the pair pending.
	f.pending(one, map[string][2]string{"jq": {"1.6-2.1+deb12u1", "1.6-2.1+deb12u3"}, "curl": {"7.88.1-10", "7.88.1-10+deb12u5"}})
	cmds = changelogCommands(one, f.a.Partner)
	if len(cmds) != 2 {
		t.Fatalf("changelog commands after a second scan: %d", len(cmds))
	}
	if err := f.dev.RecordResult(context.Background(), one, agentproto.CommandResult{CommandID: cmds[0].ID, Status: agentproto.ResultFailed,
		Error: "mirror unreachable"}); err != nil {
		t.Fatal(err)
	}
	if n, err := f.s.FetchChangelogs(context.Background()); err != nil || n != 1 {
		t.Fatalf("FetchChangelogs after a failure = %d %v, want curl asked again", n, err)
	}
	if got := changelogCommands(one, f.a.Partner); len(got) != 3 || !strings.Contains(string(got[0].Payload), `"curl"`) {
		t.Fatalf("changelog commands after the retry: %d", len(got))
	}
}

// TestTrackerImport reads a Debian Security Tracker JSON for one release.
func TestTrackerImport(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.device(f.a, "host", map[string]string{"curl": "7.88.1-10+deb12u4", "zlib1g": "1:1.2.13.dfsg-1"})
	doc := map[string]any{
		"curl": map[string]any{
			"CVE-2026-5001": map[string]any{"description": "curl bug", "releases": map[string]any{
				"bookworm": map[string]any{"status": "resolved", "fixed_version": "7.88.1-10+deb12u5", "urgency": "medium"},
				"trixie":   map[string]any{"status": "resolved", "fixed_version": "8.0-1", "urgency": "medium"}}},
			"CVE-2026-5002": map[string]any{"releases": map[string]any{
				"bookworm": map[string]any{"status": "resolved", "fixed_version": "7.88.1-10+deb12u1", "urgency": "high"}}},
			"CVE-2026-5003": map[string]any{"releases": map[string]any{
				"bookworm": map[string]any{"status": "open", "urgency": "low"}}},
			"TEMP-0000-1": map[string]any{"releases": map[string]any{}},
		},
	}
	f.e.Must(400, f.admin, "POST", api+"/vulnerabilities/advisories/import", map[string]any{"document": doc})
	var r vulnerabilities.VulnImportResult
	f.e.Must(200, f.admin, "POST", api+"/vulnerabilities/advisories/import", map[string]any{"document": doc, "release": "bookworm"}).JSON(t, &r)
	if r.Format != "debian_tracker" || r.Advisories != 3 {
		t.Fatalf("import %+v", r)
	}
	cves := get[list[vulnerabilities.VulnCVE]](f, f.a.Partner, "/vulnerabilities").Data
	if len(cves) != 2 || cves[0].CVEID != "CVE-2026-5001" || cves[0].Severity != "medium" || cves[1].CVEID != "CVE-2026-5003" {
		t.Fatalf("CVEs %+v (5002 is fixed in the installed version; 5003 has no fix)", cves)
	}
	f.e.Must(400, f.admin, "POST", api+"/vulnerabilities/advisories/import", map[string]any{"document": "nonsense"})
}
