package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/security"
	"gale/internal/domains/vulnerabilities"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// queuedAgent answers a device's commands as its agent would.
type queuedAgent struct {
	t   *testing.T
	e   *apptest.Env
	dev *devices.Service
	ag  devices.Agent
}

func agentFor(t *testing.T, e *apptest.Env, ten apptest.Tenant, deviceID string) queuedAgent {
	return queuedAgent{t: t, e: e, dev: app.Service[*devices.Service](e.App),
		ag: devices.Agent{DeviceID: deviceID, PartnerID: ten.PartnerID, OrgID: ten.OrgID, Role: "agent"}}
}

// answer completes the device's queued commands of a kind with result; it reports how many.
func (a queuedAgent) answer(kind string, result any) int {
	a.t.Helper()
	cmds, _, _, err := a.dev.ListCommands(system(), a.ag.DeviceID, devices.CommandQueued, store.Page{Limit: 100})
	if err != nil {
		a.t.Fatal(err)
	}
	raw, _ := json.Marshal(result)
	n := 0
	for _, c := range cmds {
		if c.Type != kind {
			continue
		}
		if err := a.dev.RecordResult(context.Background(), a.ag, agentproto.CommandResult{CommandID: c.ID, Status: agentproto.ResultCompleted,
			Result: raw}); err != nil {
			a.t.Fatalf("record the result of %s: %v", kind, err)
		}
		n++
	}
	return n
}

// reported is a status that meets the built-in policy.
func reported() agentproto.SecurityStatus {
	sig := time.Now().UTC()
	return agentproto.SecurityStatus{CollectedAt: time.Now().UTC(),
		Firewall:         agentproto.FirewallState{Backend: agentproto.FirewallNftables, Enabled: true, Rules: 12, InputPolicy: "drop"},
		Encryption:       agentproto.EncryptionState{Status: agentproto.EncryptionFull, Volumes: []agentproto.EncryptedVolume{{Device: "root", Mountpoint: "/", Encrypted: true}}},
		PasswordPolicy:   agentproto.PasswordPolicy{MaxDays: 90, MinLength: 12, MinClasses: 3, Summary: "passwords expire after 90 days"},
		Administrators:   []agentproto.AdminAccount{{Name: "root", UID: 0, Via: "uid0", Shell: "/bin/bash"}},
		ListeningPorts:   []agentproto.ListeningPort{{Protocol: "tcp", Address: "0.0.0.0", Port: 22, Exposed: true}},
		Antivirus:        agentproto.AntivirusState{Provider: "clamav", Installed: true, DaemonRunning: true, RealTimeProtection: true, SignaturesUpdatedAt: &sig},
		AutomaticUpdates: agentproto.AutomaticUpdates{Enabled: true, Mechanism: "unattended-upgrades"}}
}

// eicar is what a scan finds.
var eicar = agentproto.SecurityScanResult{Engine: "builtin", FilesScanned: 3, Threats: []agentproto.FoundThreat{{Name: "EICAR-Test-File",
	Category: "test", Severity: "low", FilePath: "/tmp/eicar.com", SHA256: "275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f", Size: 68}}}

// threatsOf reads a device's threats through the API.
func threatsOf(t *testing.T, e *apptest.Env, c apptest.Caller, deviceID string) []security.SecurityThreat {
	t.Helper()
	var out struct{ Data []security.SecurityThreat }
	e.Must(http.StatusOK, c, "GET", "/api/v1/security/threats/"+deviceID, nil).JSON(t, &out)
	return out.Data
}

// The device's security page: pending until the agent reports, then its status and score;
// a scan from the page is the API's scan and the page follows it; the threat it finds is
// quarantined from the page, and the actions offered follow the threat's status.
func TestSecurityPages(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	other := e.NewTenant(admin, "Other")
	dev := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "ws-sec", OSVersion: "12"})

	v := newVisitor(t, e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)
	must(t, v.get("/"), http.StatusOK, `href="/security"`, `href="/vulnerabilities"`)
	must(t, v.get("/devices/"+dev), http.StatusOK, `href="/devices/`+dev+`/security"`)
	must(t, v.get("/devices/"+dev+"/security"), http.StatusOK, "<h1>Security</h1>", "Status pending", "this one by <time", "Scan now",
		"No scan yet")
	must(t, v.get("/security"), http.StatusOK, "No security report yet", "Security score")

	// Scan now: the API's scan, shown queued, the page asking again until the agent answers.
	hx := map[string]string{"X-CSRF-Token": v.csrf, "HX-Request": "true"}
	scan := v.do(http.MethodPost, "/devices/"+dev+"/security/scan", url.Values{"scanType": {"quick"}}, hx)
	must(t, scan, http.StatusOK, `id="device-security"`, `hx-trigger="every 5s,`, "queued", "Waiting for the agent")
	var scans struct{ Data []security.SecurityScanRun }
	e.Must(http.StatusOK, ten.Org, "GET", "/api/v1/security/scans/"+dev, nil).JSON(t, &scans)
	if len(scans.Data) != 1 || scans.Data[0].ScanType != "quick" || scans.Data[0].Status != security.ScanQueued {
		t.Fatalf("scans after the page's scan = %+v", scans.Data)
	}
	must(t, v.do(http.MethodPost, "/devices/"+dev+"/security/scan", url.Values{"scanType": {"deep"}}, hx), http.StatusBadRequest)
	must(t, v.do(http.MethodPost, "/devices/"+dev+"/security/scan", url.Values{"scanType": {"custom"}, "paths": {"relative/path"}}, hx),
		http.StatusBadRequest, "not an absolute path")
	plain := v.post("/devices/"+dev+"/security/scan", url.Values{"csrf": {v.csrf}, "scanType": {"custom"}, "paths": {"/srv\n/home/alice\n"}})
	if plain.status != http.StatusSeeOther || plain.location != "/devices/"+dev+"/security" {
		t.Fatalf("a scan from the plain form: %d to %q\n%s", plain.status, plain.location, plain.body)
	}

	ag := agentFor(t, e, ten, dev)
	if n := ag.answer(agentproto.CommandSecurityStatus, reported()); n == 0 {
		t.Fatal("no status command was queued by the scan")
	}
	if n := ag.answer(agentproto.CommandSecurityScan, eicar); n != 2 {
		t.Fatalf("answered %d scans, want 2", n)
	}
	pg := v.get("/devices/" + dev + "/security")
	must(t, pg, http.StatusOK, `<span class="badge status-unprotected">unprotected</span>`, "clamav", "nftables", "tcp 22", "unattended-upgrades",
		"Security patches", "EICAR-Test-File", "/tmp/eicar.com", "completed")
	th := threatsOf(t, e, ten.Org, dev)
	if len(th) != 1 {
		t.Fatalf("threats = %+v", th)
	}
	id := th[0].ID
	if !strings.Contains(pg.body, `hx-post="/security/threats/`+id+`/quarantine"`) || !strings.Contains(pg.body, `hx-post="/security/threats/`+id+`/remove"`) ||
		strings.Contains(pg.body, `/security/threats/`+id+`/restore`) {
		t.Fatalf("an active threat's actions:\n%s", pg.body)
	}
	if strings.Contains(pg.body, `hx-trigger="every 5s`) {
		t.Fatal("the page keeps asking though nothing awaits the agent")
	}
	fleet := v.get("/security")
	must(t, fleet, http.StatusOK, "EICAR-Test-File", `href="/devices/`+dev+`/security"`, "ws-sec", "Needs attention")

	// A refused request changes nothing.
	must(t, v.post("/security/threats/"+id+"/quarantine", url.Values{}), http.StatusForbidden, "security token")
	must(t, v.do(http.MethodPost, "/security/threats/"+id+"/delete", url.Values{}, hx), http.StatusBadRequest)
	if got := threatsOf(t, e, ten.Org, dev)[0]; got.PendingAction != nil {
		t.Fatalf("a refused request started %s", *got.PendingAction)
	}

	// Quarantine from the fleet's list: the row comes back with the action pending.
	row := v.do(http.MethodPost, "/security/threats/"+id+"/quarantine", url.Values{"list": {"fleet"}}, hx)
	must(t, row, http.StatusOK, `<tr id="threat-`+id+`">`, "quarantine pending", "ws-sec")
	if strings.Contains(row.body, "hx-post") || row.header.Get("HX-Trigger") != "security-changed" {
		t.Fatalf("the pending row offers actions or does not tell the page: %v\n%s", row.header, row.body)
	}
	if got := threatsOf(t, e, ten.Org, dev)[0]; got.PendingAction == nil || *got.PendingAction != agentproto.ThreatQuarantine {
		t.Fatalf("threat after the quarantine = %+v", got)
	}
	must(t, v.get("/devices/"+dev+"/security"), http.StatusOK, `hx-trigger="every 5s,`, "quarantine pending")
	again := v.do(http.MethodPost, "/security/threats/"+id+"/remove", url.Values{}, hx)
	must(t, again, http.StatusConflict, "under way")
	if ag.answer(agentproto.CommandThreatAction, agentproto.ThreatActionResult{Action: "quarantine", FilePath: "/tmp/eicar.com",
		Location: "/var/lib/gale-agent/quarantine/x"}) != 1 {
		t.Fatal("no threat action was queued")
	}
	if got := threatsOf(t, e, ten.Org, dev)[0]; got.Status != security.ThreatQuarantined {
		t.Fatalf("threat after the agent's answer = %+v", got)
	}
	pg = v.get("/devices/" + dev + "/security")
	must(t, pg, http.StatusOK, `<span class="badge status-quarantined">quarantined</span>`, `/security/threats/`+id+`/restore"`,
		"/var/lib/gale-agent/quarantine/x")
	if strings.Contains(pg.body, `/security/threats/`+id+`/quarantine"`) {
		t.Fatal("a quarantined threat offers quarantine")
	}
	must(t, v.get("/security"), http.StatusOK, "No active threat")
	must(t, v.get("/security?status=quarantined"), http.StatusOK, "EICAR-Test-File")
	must(t, v.get("/security?status=everything"), http.StatusBadRequest)
	must(t, v.do(http.MethodPost, "/security/threats/"+id+"/quarantine", url.Values{}, hx), http.StatusConflict, "cannot be quarantined")
	// The plain form goes back to the device's page.
	p := v.post("/security/threats/"+id+"/restore", url.Values{"csrf": {v.csrf}})
	if p.status != http.StatusSeeOther || p.location != "/devices/"+dev+"/security" {
		t.Fatalf("restore from a plain form: %d to %q", p.status, p.location)
	}
	if got := threatsOf(t, e, ten.Org, dev)[0]; got.PendingAction == nil || *got.PendingAction != agentproto.ThreatRestore {
		t.Fatalf("threat after the restore = %+v", got)
	}

	// A scan the agent holds shows how many files it has looked at so far.
	var x security.SecurityScanRun
	e.Must(http.StatusAccepted, ten.Org, "POST", "/api/v1/security/scan/"+dev, map[string]any{"scanType": "full"}).JSON(t, &x)
	if _, err := e.App.DB.SQL.Exec(`UPDATE device_commands SET status = 'sent' WHERE id = $1`, x.CommandID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.App.DB.SQL.Exec(`UPDATE security_scans SET files_scanned = 1234 WHERE id = $1`, x.ID); err != nil {
		t.Fatal(err)
	}
	must(t, v.get("/devices/"+dev+"/security"), http.StatusOK, `1234 <span class="muted small">so far</span>`)

	// Another organization's device and threat answer as missing ones, on every route.
	foreign := e.InsertDevice(apptest.DeviceRow{PartnerID: other.PartnerID, OrgID: other.OrgID, SiteID: other.SiteID, Hostname: "theirs-sec", OSVersion: "12"})
	e.Must(http.StatusAccepted, other.Org, "POST", "/api/v1/security/scan/"+foreign, map[string]any{"scanType": "quick"})
	theirs := agentFor(t, e, other, foreign)
	theirs.answer(agentproto.CommandSecurityStatus, reported())
	theirs.answer(agentproto.CommandSecurityScan, eicar)
	foreignThreat := threatsOf(t, e, other.Org, foreign)[0].ID
	same := func(what string, foreignPage, missingPage page) {
		t.Helper()
		if foreignPage.status != http.StatusNotFound || foreignPage.status != missingPage.status || strip(foreignPage.body) != strip(missingPage.body) {
			t.Fatalf("%s: another organization's answers %d, a missing one %d", what, foreignPage.status, missingPage.status)
		}
	}
	same("device security page", v.get("/devices/"+foreign+"/security"), v.get("/devices/"+missingID+"/security"))
	same("device vulnerabilities page", v.get("/devices/"+foreign+"/vulnerabilities"), v.get("/devices/"+missingID+"/vulnerabilities"))
	same("scan", v.post("/devices/"+foreign+"/security/scan", url.Values{"csrf": {v.csrf}, "scanType": {"quick"}}),
		v.post("/devices/"+missingID+"/security/scan", url.Values{"csrf": {v.csrf}, "scanType": {"quick"}}))
	for _, action := range []string{"quarantine", "remove", "restore"} {
		same(action, v.post("/security/threats/"+foreignThreat+"/"+action, url.Values{"csrf": {v.csrf}}),
			v.post("/security/threats/"+missingID+"/"+action, url.Values{"csrf": {v.csrf}}))
	}
	if got := threatsOf(t, e, other.Org, foreign)[0]; got.PendingAction != nil || got.Status != security.ThreatActive {
		t.Fatalf("another organization's user acted on the threat: %+v", got)
	}
	if f := v.get("/security?status=active"); strings.Contains(f.body, "theirs-sec") || strings.Contains(f.body, foreignThreat) {
		t.Fatal("the fleet page shows another organization's threat")
	}
}

// vulnFixture is a device of each tenant with packages an imported advisory names.
type vulnFixture struct {
	e           *apptest.Env
	ten, other  apptest.Tenant
	web, theirs string
}

func newVulnFixture(t *testing.T) vulnFixture {
	e := apptest.New(t)
	admin := e.Admin()
	f := vulnFixture{e: e, ten: e.NewTenant(admin, "Acme"), other: e.NewTenant(admin, "Other")}
	inventory := func(ten apptest.Tenant, host string, pkgs map[string]string) string {
		r := e.EnrollAgent(ten, host)
		inv := agentproto.Inventory{Hostname: host, OS: agentproto.OSInfo{Type: agentproto.OSLinux, Name: "Debian GNU/Linux", Version: "12"}}
		for n, ver := range pkgs {
			inv.Software = append(inv.Software, agentproto.Software{Name: n, Version: ver, Source: "dpkg", Architecture: "amd64"})
		}
		ag := devices.Agent{DeviceID: r.DeviceID, PartnerID: ten.PartnerID, OrgID: ten.OrgID, Role: "agent"}
		if err := app.Service[*devices.Service](e.App).StoreInventory(context.Background(), ag, inv); err != nil {
			t.Fatal(err)
		}
		return r.DeviceID
	}
	f.web = inventory(f.ten, "web-vuln", map[string]string{"openssl": "3.0.11-1~deb12u1"})
	f.theirs = inventory(f.other, "theirs-vuln", map[string]string{"openssl": "3.0.11-1~deb12u1", "jq": "1.6-2.1+deb12u1"})
	advisory := func(cve, pkg, fixed, cvss string) map[string]any {
		return map[string]any{"id": cve, "summary": "test advisory " + cve, "severity": []map[string]string{{"type": "CVSS_V3", "score": cvss}},
			"affected": []map[string]any{{"package": map[string]string{"ecosystem": "Debian:12", "name": pkg},
				"ranges": []map[string]any{{"type": "ECOSYSTEM", "events": []map[string]string{{"introduced": "0"}, {"fixed": fixed}}}}}}}
	}
	const critical, medium = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", "CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:L/I:L/A:L"
	e.Must(http.StatusOK, admin, "POST", "/api/v1/vulnerabilities/advisories/import", map[string]any{"document": []any{
		advisory("CVE-2026-0001", "openssl", "3.0.13-1~deb12u1", critical), advisory("CVE-2026-0002", "openssl", "3.0.16-1~deb12u1", medium),
		advisory("CVE-2026-0003", "jq", "1.6-2.1+deb12u3", medium)}})
	return f
}

// finding reads the finding of a CVE on a device through the API.
func (f vulnFixture) finding(t *testing.T, c apptest.Caller, cve, deviceID string) vulnerabilities.VulnFinding {
	t.Helper()
	var out struct{ Data []vulnerabilities.VulnFinding }
	f.e.Must(http.StatusOK, c, "GET", "/api/v1/vulnerabilities/"+cve+"/devices", nil).JSON(t, &out)
	for _, x := range out.Data {
		if x.DeviceID == deviceID {
			return x
		}
	}
	t.Fatalf("no finding of %s on %s in %+v", cve, deviceID, out.Data)
	return vulnerabilities.VulnFinding{}
}

// The fleet's vulnerabilities, filtered and searched; a CVE's page with its devices; a
// device's findings; and the actions on a finding, whose outcome the API shows.
func TestVulnerabilityPages(t *testing.T) {
	f := newVulnFixture(t)
	e, ten := f.e, f.ten
	v := newVisitor(t, e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)

	list := v.get("/vulnerabilities")
	must(t, list, http.StatusOK, "<h1>Vulnerabilities</h1>", `href="/vulnerabilities/CVE-2026-0001"`, "CVE-2026-0002", "Critical open",
		"test advisory CVE-2026-0001", "9.8")
	if strings.Contains(list.body, "CVE-2026-0003") {
		t.Fatal("the list shows a CVE found only in another organization")
	}
	if p := v.get("/vulnerabilities?severity=critical"); !strings.Contains(p.body, "CVE-2026-0001") || strings.Contains(p.body, `href="/vulnerabilities/CVE-2026-0002"`) {
		t.Fatalf("severity filter:\n%s", p.body)
	}
	if p := v.get("/vulnerabilities?q=0002"); strings.Contains(p.body, `href="/vulnerabilities/CVE-2026-0001"`) || !strings.Contains(p.body, "CVE-2026-0002") {
		t.Fatalf("search by CVE:\n%s", p.body)
	}
	must(t, v.get("/vulnerabilities?q=OpenSSL"), http.StatusOK, "CVE-2026-0001", "CVE-2026-0002")
	must(t, v.get("/vulnerabilities?q=nothing-of-the-kind"), http.StatusOK, "No CVE matches this filter")
	must(t, v.get("/vulnerabilities?severity=dire"), http.StatusBadRequest)
	must(t, v.get("/vulnerabilities?status=ignored"), http.StatusBadRequest)
	must(t, v.get("/vulnerabilities?q="+strings.Repeat("x", 201)), http.StatusBadRequest)
	must(t, v.get("/vulnerabilities?cursor=garbage"), http.StatusBadRequest)
	must(t, v.get("/vulnerabilities?status=accepted"), http.StatusOK, "No accepted finding")

	cve := v.get("/vulnerabilities/CVE-2026-0001")
	must(t, cve, http.StatusOK, "<h1>CVE-2026-0001</h1>", "web-vuln", "3.0.11-1~deb12u1", "3.0.13-1~deb12u1", "Accept risk", "Mitigate",
		`href="https://nvd.nist.gov/vuln/detail/CVE-2026-0001"`)
	if strings.Contains(cve.body, "theirs-vuln") {
		t.Fatal("the CVE's page shows another organization's device")
	}
	must(t, v.get("/vulnerabilities/cve-2026-0001"), http.StatusOK, "<h1>CVE-2026-0001</h1>")
	must(t, v.get("/vulnerabilities/CVE-2026-0001?status=bogus"), http.StatusBadRequest)
	must(t, v.get("/devices/"+f.web+"/vulnerabilities"), http.StatusOK, `href="/vulnerabilities/CVE-2026-0001"`, "CVE-2026-0002", "critical")
	must(t, v.get("/devices/"+f.web+"/vulnerabilities?status=wrong"), http.StatusBadRequest)

	// Accept the risk until a day: the finding is accepted, through that day.
	mine := f.finding(t, ten.Org, "CVE-2026-0001", f.web)
	day := time.Now().UTC().AddDate(0, 0, 30).Format(time.DateOnly)
	back := "/vulnerabilities/CVE-2026-0001"
	p := v.post("/vulnerabilities/"+mine.ID+"/accept-risk", url.Values{"csrf": {v.csrf}, "acceptedUntil": {day}, "note": {"isolated host"}, "next": {back}})
	if p.status != http.StatusSeeOther || p.location != back {
		t.Fatalf("accept risk: %d to %q\n%s", p.status, p.location, p.body)
	}
	got := f.finding(t, ten.Org, "CVE-2026-0001", f.web)
	if got.Status != vulnerabilities.StatusAccepted || got.Note != "isolated host" || got.AcceptedUntil == nil ||
		got.AcceptedUntil.Format(time.DateOnly) != time.Now().UTC().AddDate(0, 0, 31).Format(time.DateOnly) {
		t.Fatalf("finding after accept risk = %+v", got)
	}
	must(t, v.get("/vulnerabilities/CVE-2026-0001"), http.StatusOK, "accepted", "isolated host", `action="/vulnerabilities/`+mine.ID+`/reopen"`)
	must(t, v.get("/vulnerabilities?status=accepted"), http.StatusOK, "CVE-2026-0001")
	must(t, v.post("/vulnerabilities/"+mine.ID+"/mitigate", url.Values{"csrf": {v.csrf}}), http.StatusConflict, "not open")
	if p := v.post("/vulnerabilities/"+mine.ID+"/reopen", url.Values{"csrf": {v.csrf}}); p.status != http.StatusSeeOther || p.location != back {
		t.Fatalf("reopen: %d to %q", p.status, p.location)
	}
	if got := f.finding(t, ten.Org, "CVE-2026-0001", f.web); got.Status != vulnerabilities.StatusOpen {
		t.Fatalf("finding after reopen = %+v", got)
	}
	deviceBack := "/devices/" + f.web + "/vulnerabilities"
	p = v.post("/vulnerabilities/"+mine.ID+"/mitigate", url.Values{"csrf": {v.csrf}, "note": {"port closed"}, "next": {deviceBack}})
	if p.status != http.StatusSeeOther || p.location != deviceBack {
		t.Fatalf("mitigate: %d to %q", p.status, p.location)
	}
	if got := f.finding(t, ten.Org, "CVE-2026-0001", f.web); got.Status != vulnerabilities.StatusMitigated || got.Note != "port closed" {
		t.Fatalf("finding after mitigate = %+v", got)
	}
	if p := v.get(deviceBack + "?status=mitigated"); !strings.Contains(p.body, "CVE-2026-0001") || strings.Contains(p.body, `href="/vulnerabilities/CVE-2026-0002"`) {
		t.Fatalf("the device's mitigated findings:\n%s", p.body)
	}
	// Bad input is a 400; a request without the token changes nothing.
	open := f.finding(t, ten.Org, "CVE-2026-0002", f.web)
	must(t, v.post("/vulnerabilities/"+open.ID+"/ignore", url.Values{"csrf": {v.csrf}}), http.StatusBadRequest)
	must(t, v.post("/vulnerabilities/"+open.ID+"/accept-risk", url.Values{"csrf": {v.csrf}, "acceptedUntil": {"next week"}}), http.StatusBadRequest,
		"YYYY-MM-DD")
	must(t, v.post("/vulnerabilities/"+open.ID+"/accept-risk", url.Values{"csrf": {v.csrf}, "acceptedUntil": {"2020-01-01"}}), http.StatusBadRequest,
		"in the future")
	must(t, v.post("/vulnerabilities/"+open.ID+"/accept-risk", url.Values{}), http.StatusForbidden, "security token")
	if got := f.finding(t, ten.Org, "CVE-2026-0002", f.web); got.Status != vulnerabilities.StatusOpen {
		t.Fatalf("a refused request moved the finding to %s", got.Status)
	}
	// No pending patch fixes the CVE: the API's 409, said on the page.
	must(t, v.post("/vulnerabilities/remediate", url.Values{"csrf": {v.csrf}, "cveId": {"CVE-2026-0002"}}), http.StatusConflict, "no pending patch")

	// Another organization's CVE, finding and device answer as missing ones.
	theirs := f.finding(t, f.other.Org, "CVE-2026-0003", f.theirs)
	same := func(what string, foreignPage, missingPage page) {
		t.Helper()
		if foreignPage.status != http.StatusNotFound || foreignPage.status != missingPage.status || strip(foreignPage.body) != strip(missingPage.body) {
			t.Fatalf("%s: another organization's answers %d, a missing one %d", what, foreignPage.status, missingPage.status)
		}
	}
	same("CVE page", v.get("/vulnerabilities/CVE-2026-0003"), v.get("/vulnerabilities/CVE-2099-0001"))
	same("device findings", v.get("/devices/"+f.theirs+"/vulnerabilities"), v.get("/devices/"+missingID+"/vulnerabilities"))
	for _, action := range []string{"accept-risk", "mitigate", "reopen"} {
		same(action, v.post("/vulnerabilities/"+theirs.ID+"/"+action, url.Values{"csrf": {v.csrf}}),
			v.post("/vulnerabilities/"+missingID+"/"+action, url.Values{"csrf": {v.csrf}}))
	}
	same("remediate", v.post("/vulnerabilities/remediate", url.Values{"csrf": {v.csrf}, "cveId": {"CVE-2026-0003"}}),
		v.post("/vulnerabilities/remediate", url.Values{"csrf": {v.csrf}, "cveId": {"CVE-2099-0001"}}))
	if got := f.finding(t, f.other.Org, "CVE-2026-0003", f.theirs); got.Status != vulnerabilities.StatusOpen {
		t.Fatalf("another organization's user moved the finding to %s", got.Status)
	}
}
