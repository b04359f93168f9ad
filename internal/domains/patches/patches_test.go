package patches_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/patches"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

type fixture struct {
	e   *apptest.Env
	a   apptest.Tenant
	b   apptest.Tenant
	s   *patches.Service
	dev *devices.Service
}

func newFixture(t *testing.T) fixture {
	e := apptest.New(t)
	admin := e.Admin()
	return fixture{e: e, a: e.NewTenant(admin, "Alpha"), b: e.NewTenant(admin, "Bravo"), s: app.Service[*patches.Service](e.App),
		dev: app.Service[*devices.Service](e.App)}
}

func (f fixture) device(ten apptest.Tenant, host, os string) string {
	return f.e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: host, OSType: os, OSName: os})
}

func agentOf(ten apptest.Tenant, deviceID string) devices.Agent {
	return devices.Agent{DeviceID: deviceID, PartnerID: ten.PartnerID, OrgID: ten.OrgID, Role: "agent"}
}

// scan starts a scan job of devices and returns it with the command of each device.
func (f fixture) scan(c apptest.Caller, ids ...string) (patches.PatchJobStart, map[string]string) {
	f.e.T.Helper()
	var js patches.PatchJobStart
	f.e.Must(202, c, "POST", api+"/patches/scan", map[string]any{"deviceIds": ids}).JSON(f.e.T, &js)
	return js, f.commands(c, js.ID)
}

func (f fixture) commands(c apptest.Caller, jobID string) map[string]string {
	f.e.T.Helper()
	var jd patches.PatchJobDetail
	f.e.Must(200, c, "GET", api+"/patches/jobs/"+jobID, nil).JSON(f.e.T, &jd)
	out := map[string]string{}
	for _, d := range jd.Devices {
		if d.CommandID != nil {
			out[d.DeviceID] = *d.CommandID
		}
	}
	return out
}

func (f fixture) job(c apptest.Caller, id string) patches.PatchJobDetail {
	f.e.T.Helper()
	var jd patches.PatchJobDetail
	f.e.Must(200, c, "GET", api+"/patches/jobs/"+id, nil).JSON(f.e.T, &jd)
	return jd
}

func (f fixture) result(ten apptest.Tenant, deviceID, commandID, status string, result any) {
	f.e.T.Helper()
	raw, _ := json.Marshal(result)
	if err := f.dev.RecordResult(context.Background(), agentOf(ten, deviceID), agentproto.CommandResult{CommandID: commandID, Status: status,
		Result: raw}); err != nil {
		f.e.T.Fatalf("record result: %v", err)
	}
}

func upd(name, installed, available string, security bool) agentproto.PackageUpdate {
	return agentproto.PackageUpdate{Name: name, Architecture: "amd64", InstalledVersion: installed, AvailableVersion: available, Security: security}
}

func scanResult(reboot bool, ups ...agentproto.PackageUpdate) agentproto.PatchScanResult {
	return agentproto.PatchScanResult{Manager: agentproto.ManagerApt, ScannedAt: time.Now(), Updates: ups, Installed: 400, RebootRequired: reboot}
}

func (f fixture) patchList(c apptest.Caller, query string) []patches.Patch {
	f.e.T.Helper()
	var list struct{ Data []patches.Patch }
	f.e.Must(200, c, "GET", api+"/patches"+query, nil).JSON(f.e.T, &list)
	return list.Data
}

func byPackage(list []patches.Patch) map[string]patches.Patch {
	out := map[string]patches.Patch{}
	for _, p := range list {
		out[p.PackageID+" "+p.Version] = p
	}
	return out
}

func (f fixture) patch(c apptest.Caller, id string) patches.Patch {
	f.e.T.Helper()
	var p patches.Patch
	f.e.Must(200, c, "GET", api+"/patches/"+id, nil).JSON(f.e.T, &p)
	return p
}

func (f fixture) compliance(c apptest.Caller, query string) patches.PatchCompliance {
	f.e.T.Helper()
	var out patches.PatchCompliance
	f.e.Must(200, c, "GET", api+"/patches/compliance"+query, nil).JSON(f.e.T, &out)
	return out
}

func TestScanFansOutAndIngestReplacesPendingAcrossScans(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	web, db, win := f.device(f.a, "web-01", "linux"), f.device(f.a, "db-01", "linux"), f.device(f.a, "win-01", "windows")
	foreign := f.device(f.b, "other-01", "linux")
	js, cmds := f.scan(c, web, db, win, foreign, web)
	if js.Kind != patches.JobScan || js.Status != patches.JobRunning || js.Totals.Queued != 2 || js.Totals.Skipped != 2 || len(js.Skipped) != 2 {
		t.Fatalf("scan job %+v", js)
	}
	for _, sk := range js.Skipped {
		if (sk.DeviceID == win && sk.Code != agentproto.ErrNotSupported) || (sk.DeviceID == foreign && sk.Code != "NOT_FOUND") || sk.Reason == "" {
			t.Fatalf("skipped %+v", sk)
		}
	}
	if len(cmds) != 2 || cmds[web] == "" || cmds[db] == "" {
		t.Fatalf("commands %v", cmds)
	}
	var dc devices.DeviceCommand
	f.e.Must(200, c, "GET", api+"/devices/"+web+"/commands/"+cmds[web], nil).JSON(t, &dc)
	if dc.Type != agentproto.CommandPatchScan {
		t.Fatalf("command %+v", dc)
	}

	f.result(f.a, web, cmds[web], agentproto.ResultCompleted, scanResult(true,
		upd("openssl", "3.0.1-1", "3.0.2-1", true), upd("curl", "7.1-1", "7.2-1", false), upd("vim", "9.0-1", "9.1-1", false)))
	list := f.patchList(c, "")
	if len(list) != 3 {
		t.Fatalf("patches %+v", list)
	}
	p := byPackage(list)
	ssl := p["openssl 3.0.2-1"]
	if ssl.Source != patches.SourceLinux || ssl.ExternalID != "apt:openssl:amd64:3.0.2-1" || ssl.Category != patches.CategorySecurity ||
		ssl.Severity != patches.SeverityImportant || ssl.Title != "openssl 3.0.2-1" || ssl.PatchApproval != patches.ApprovalPending {
		t.Fatalf("security patch %+v", ssl)
	}
	if cu := p["curl 7.2-1"]; cu.Category != patches.CategoryBugfix || cu.Severity != patches.SeverityUnknown {
		t.Fatalf("bugfix patch %+v", cu)
	}
	if got := f.compliance(c, ""); got != (patches.PatchCompliance{CompliancePercent: 0, Pending: 3, CriticalPending: 1, DevicesNeedingPatches: 1,
		DevicesScanned: 1, DevicesNeverScanned: 2, RebootRequired: 1}) {
		t.Fatalf("compliance after one scan: %+v", got)
	}
	// The second device fails its scan: the job ends, failed there.
	f.e.Must(200, c, "GET", api+"/patches/jobs/"+js.ID, nil)
	if err := f.dev.RecordResult(context.Background(), agentOf(f.a, db), agentproto.CommandResult{CommandID: cmds[db],
		Status: agentproto.ResultFailed, Error: "no package manager"}); err != nil {
		t.Fatal(err)
	}
	jd := f.job(c, js.ID)
	if jd.Status != patches.JobCompleted || jd.CompletedAt == nil || jd.Totals.Completed != 1 || jd.Totals.Failed != 1 {
		t.Fatalf("job after both results: %+v", jd.PatchJob)
	}
	for _, d := range jd.Devices {
		if d.DeviceID == db && (d.Status != patches.JobDeviceFailed || d.Error == nil || *d.Error != "no package manager") {
			t.Fatalf("failed device %+v", d)
		}
	}
	var events int
	if err := f.e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM events WHERE type = $1 AND resource_id = $2`, patches.EventJobCompleted, js.ID).Scan(&events); err != nil || events != 1 {
		t.Fatalf("job_completed events = %d (%v), want 1", events, err)
	}

	// A second scan: openssl still offered, curl moved on (installed), vim offered at a newer version.
	js2, cmds2 := f.scan(c, web)
	f.result(f.a, web, cmds2[web], agentproto.ResultCompleted, scanResult(false,
		upd("openssl", "3.0.1-1", "3.0.2-1", true), upd("vim", "9.0-1", "9.2-1", false)))
	if got := f.job(c, js2.ID); got.Status != patches.JobCompleted {
		t.Fatalf("second job %+v", got.PatchJob)
	}
	p = byPackage(f.patchList(c, "?deviceId="+web))
	if len(p) != 4 {
		t.Fatalf("patches of the device %v", p)
	}
	for name, want := range map[string]patches.PatchStateCounts{"openssl 3.0.2-1": {Pending: 1}, "curl 7.2-1": {Installed: 1},
		"vim 9.1-1": {Installed: 1}, "vim 9.2-1": {Pending: 1}} {
		if got := f.patch(c, p[name].ID).DeviceCounts; got == nil || *got != want {
			t.Errorf("%s: device counts %+v, want %+v", name, got, want)
		}
	}
	if got := f.compliance(c, ""); got.Pending != 2 || got.Installed != 2 || got.CompliancePercent != 50 || got.RebootRequired != 0 ||
		got.CriticalPending != 1 {
		t.Fatalf("compliance after the second scan: %+v", got)
	}
	if got := f.compliance(c, "?orgId="+f.a.OrgID+"&siteId="+f.a.SiteID); got.DevicesScanned != 1 || got.DevicesNeverScanned != 2 {
		t.Fatalf("compliance of the site: %+v", got)
	}
	if got := f.compliance(f.b.Partner, ""); got.DevicesScanned != 0 || got.Pending != 0 || got.CompliancePercent != 100 {
		t.Fatalf("the other partner's compliance: %+v", got)
	}
	var sources struct{ Data []patches.PatchSourceCount }
	f.e.Must(200, c, "GET", api+"/patches/sources", nil).JSON(t, &sources)
	if len(sources.Data) != 5 {
		t.Fatalf("sources %+v", sources.Data)
	}
	for _, sc := range sources.Data {
		if (sc.Source == patches.SourceLinux) != (sc.Count == 4) || (sc.Source != patches.SourceLinux && sc.Count != 0) {
			t.Fatalf("sources %+v", sources.Data)
		}
	}
	for q, want := range map[string]int{"?category=security": 1, "?severity=unknown": 3, "?search=VIM": 2, "?source=custom": 0,
		"?status=pending": 4, "?orgId=" + f.a.OrgID: 4} {
		if got := f.patchList(c, q); len(got) != want {
			t.Errorf("GET /patches%s = %d patches, want %d", q, len(got), want)
		}
	}
	var jobs struct{ Data []patches.PatchJob }
	f.e.Must(200, c, "GET", api+"/patches/jobs?kind=scan&status=completed", nil).JSON(t, &jobs)
	if len(jobs.Data) != 2 || jobs.Data[0].ID != js2.ID || jobs.Data[1].Totals.Failed != 1 || jobs.Data[1].Totals.Skipped != 2 {
		t.Fatalf("jobs %+v", jobs.Data)
	}
	// The organization's own caller sees its devices' patches and jobs too.
	if got := f.patchList(f.a.Org, ""); len(got) != 4 {
		t.Fatalf("organization caller sees %d patches", len(got))
	}
}

func TestScanValidation(t *testing.T) {
	f := newFixture(t)
	web := f.device(f.a, "web-01", "linux")
	many := make([]string, patches.MaxScanDevices+1)
	for i := range many {
		many[i] = web
	}
	for name, body := range map[string]map[string]any{
		"no devices":       {"deviceIds": []string{}},
		"too many devices": {"deviceIds": many},
		"unscannable":      {"deviceIds": []string{web}, "source": "os_vendor_a"},
		"unknown source":   {"deviceIds": []string{web}, "source": "beos"},
	} {
		if r := f.e.Do(f.a.Partner, "POST", api+"/patches/scan", body); r.Status != 400 {
			t.Errorf("%s: %d %s, want 400", name, r.Status, r.Body)
		}
	}
	if r := f.e.Do(f.a.Org, "POST", api+"/patches/rollback", nil); r.Status != 404 && r.Status != 405 {
		t.Errorf("unknown route %d", r.Status)
	}
}

// seedPatches records a scan of device (of ten) offering the given packages and returns the
// patches by package name.
func (f fixture) seedPatches(ten apptest.Tenant, deviceID string, ups ...agentproto.PackageUpdate) map[string]string {
	f.e.T.Helper()
	err := f.e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
		return f.s.IngestScan(context.Background(), tx, deviceID, tenancy.Owner{PartnerID: ten.PartnerID, OrgID: ten.OrgID}, scanResult(false, ups...))
	})
	if err != nil {
		f.e.T.Fatal(err)
	}
	rows, err := f.e.App.DB.SQL.Query(`SELECT p.id, p.package_id FROM patches p JOIN patch_devices pd ON pd.patch_id = p.id
		WHERE pd.device_id = $1 AND pd.status = 'pending'`, deviceID)
	if err != nil {
		f.e.T.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			f.e.T.Fatal(err)
		}
		out[name] = id
	}
	return out
}

func TestApprovalsDeferralsAndBulk(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	web := f.device(f.a, "web-01", "linux")
	ids := f.seedPatches(f.a, web, upd("a", "1", "2", false), upd("b", "1", "2", false), upd("c", "1", "2", false), upd("d", "1", "2", true))
	var ap patches.PatchApproval
	f.e.Must(200, c, "POST", api+"/patches/"+ids["a"]+"/approve", map[string]any{"note": "looks fine\nship it"}).JSON(t, &ap)
	if ap.Status != patches.ApprovalApproved || ap.OrgID != nil || ap.Note != "looks fine\nship it" || ap.DecidedBy == nil {
		t.Fatalf("approval %+v", ap)
	}
	f.e.Must(200, c, "POST", api+"/patches/"+ids["a"]+"/approve", nil) // the same decision again
	for action, body := range map[string]any{"decline": nil, "defer": map[string]any{"until": time.Now().Add(time.Hour)}} {
		r := f.e.Do(c, "POST", api+"/patches/"+ids["a"]+"/"+action, body)
		if r.Status != 409 || r.ErrorCode() != "APPROVAL_CONFLICT" {
			t.Fatalf("%s after approve = %d %s", action, r.Status, r.Body)
		}
	}
	if r := f.e.Do(c, "POST", api+"/patches/"+ids["b"]+"/defer", map[string]any{"until": time.Now().Add(-time.Hour)}); r.Status != 400 {
		t.Fatalf("defer into the past = %d %s", r.Status, r.Body)
	}
	if r := f.e.Do(c, "POST", api+"/patches/"+ids["b"]+"/defer", map[string]any{}); r.Status != 400 {
		t.Fatalf("defer without until = %d %s", r.Status, r.Body)
	}
	f.e.Must(200, c, "POST", api+"/patches/"+ids["b"]+"/defer", map[string]any{"until": time.Now().Add(24 * time.Hour)})
	// A deferred patch may still be decided; an organization's decision wins for it.
	f.e.Must(200, c, "POST", api+"/patches/"+ids["b"]+"/decline", nil)
	f.e.Must(200, c, "POST", api+"/patches/"+ids["c"]+"/approve", map[string]any{"orgId": f.a.OrgID})
	f.e.Must(200, f.a.Org, "POST", api+"/patches/"+ids["a"]+"/decline", nil) // the organization's own decision
	if p := byPackage(f.patchList(c, "?orgId="+f.a.OrgID)); p["a 2"].PatchApproval != patches.ApprovalDeclined || p["c 2"].PatchApproval != patches.ApprovalApproved {
		t.Fatalf("decisions for the organization: %+v", p)
	}
	if p := byPackage(f.patchList(c, "")); p["a 2"].PatchApproval != patches.ApprovalApproved || p["c 2"].PatchApproval != patches.ApprovalPending ||
		p["b 2"].PatchApproval != patches.ApprovalDeclined {
		t.Fatalf("partner-wide decisions: %+v", p)
	}
	if got := f.patchList(c, "?status=declined"); len(got) != 1 || got[0].PackageID != "b" {
		t.Fatalf("declined patches %+v", got)
	}
	var list struct{ Data []patches.PatchApproval }
	f.e.Must(200, c, "GET", api+"/patches/approvals?status=approved", nil).JSON(t, &list)
	if len(list.Data) != 2 {
		t.Fatalf("approved decisions %+v", list.Data)
	}
	f.e.Must(200, c, "GET", api+"/patches/approvals", nil).JSON(t, &list)
	if len(list.Data) != 4 {
		t.Fatalf("all decisions %+v", list.Data)
	}

	other := f.seedPatches(f.b, f.device(f.b, "x", "linux"), upd("z", "1", "2", false))
	var bulk struct {
		Data []patches.PatchBulkApprovalItem
	}
	f.e.Must(200, c, "POST", api+"/patches/bulk-approve", map[string]any{"patchIds": []string{ids["d"], ids["b"], other["z"],
		"0194b9f5-0000-7000-8000-000000000000"}}).JSON(t, &bulk)
	want := []string{"approved", "APPROVAL_CONFLICT", "NOT_FOUND", "NOT_FOUND"}
	if len(bulk.Data) != 4 {
		t.Fatalf("bulk %+v", bulk.Data)
	}
	for i, it := range bulk.Data {
		got := it.Status
		if it.Code != nil {
			got = *it.Code
		}
		if got != want[i] {
			t.Errorf("bulk item %d: %+v, want %s", i, it, want[i])
		}
	}
	for name, body := range map[string]map[string]any{"none": {"patchIds": []string{}}, "too many": {"patchIds": make([]string, 501)}} {
		if r := f.e.Do(c, "POST", api+"/patches/bulk-approve", body); r.Status != 400 {
			t.Errorf("bulk %s = %d", name, r.Status)
		}
	}
	if r := f.e.Do(c, "POST", api+"/patches/"+ids["d"]+"/approve", map[string]any{"orgId": f.b.OrgID}); r.Status != 400 {
		t.Errorf("approve for another partner's organization = %d %s", r.Status, r.Body)
	}
}

func TestApproveRacingDeclineHasOneWinner(t *testing.T) {
	f := newFixture(t)
	web := f.device(f.a, "web-01", "linux")
	var ups []agentproto.PackageUpdate
	for i := range 20 {
		ups = append(ups, upd(fmt.Sprintf("pkg%02d", i), "1", "2", false))
	}
	ids := f.seedPatches(f.a, web, ups...)
	for i := range 20 {
		id := ids[fmt.Sprintf("pkg%02d", i)]
		var wg sync.WaitGroup
		status := map[string]int{}
		var mu sync.Mutex
		for _, action := range []string{"approve", "decline"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := f.e.Do(f.a.Partner, "POST", api+"/patches/"+id+"/"+action, nil)
				mu.Lock()
				status[action] = r.Status
				if r.Status == 409 && r.ErrorCode() != "APPROVAL_CONFLICT" {
					t.Errorf("loser's code %s", r.ErrorCode())
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		winner := ""
		for action, st := range status {
			if st == 200 {
				winner = action
			}
		}
		if status["approve"]+status["decline"] != 200+409 || winner == "" {
			t.Fatalf("round %d: %v, want one 200 and one 409", i, status)
		}
		final := f.patch(f.a.Partner, id).PatchApproval
		if (winner == "approve") != (final == patches.ApprovalApproved) || final == patches.ApprovalPending {
			t.Fatalf("round %d: winner %s, final state %s", i, winner, final)
		}
	}
}

func partnerCtx(ten apptest.Tenant) context.Context {
	return access.WithPrincipal(context.Background(), &access.Principal{Kind: access.ActorSystem, ID: "test", Email: "policy@test",
		Scope: access.Scope{Level: access.LevelPartner, PartnerID: ten.PartnerID}})
}

func TestInstallRecordsOutcomesAndRollbackGoesBack(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	web, db := f.device(f.a, "web-01", "linux"), f.device(f.a, "db-01", "linux")
	ids := f.seedPatches(f.a, web, upd("openssl", "3.0.1-1", "3.0.2-1", true), upd("curl", "7.1-1", "7.2-1", false), upd("vim", "9.0", "9.1", false))
	f.seedPatches(f.a, db, upd("openssl", "3.0.1-1", "3.0.2-1", true))
	f.e.Must(200, c, "POST", api+"/patches/"+ids["openssl"]+"/approve", nil)
	f.e.Must(200, c, "POST", api+"/patches/"+ids["curl"]+"/approve", nil)

	// db is held: its work waits, with no command.
	var holdMu sync.Mutex
	held := map[string]bool{db: true}
	f.s.SetHold(func(ctx context.Context, tx *sql.Tx, ids []string) (map[string]bool, error) {
		holdMu.Lock()
		defer holdMu.Unlock()
		out := map[string]bool{}
		for _, id := range ids {
			out[id] = held[id]
		}
		return out, nil
	})
	ctx := partnerCtx(f.a)
	job, err := f.s.Install(ctx, []string{web, db, f.device(f.a, "idle", "linux")}, []string{ids["openssl"], ids["curl"], ids["vim"]},
		patches.InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Kind != patches.JobInstall || job.Totals.Queued != 1 || job.Totals.Waiting != 1 || job.Totals.Skipped != 1 || len(job.Commands) != 1 {
		t.Fatalf("install job %+v", job)
	}
	var payload agentproto.PatchInstall
	_ = json.Unmarshal(job.Commands[0].Payload, &payload)
	if len(payload.Packages) != 2 || payload.Rollback || payload.Packages[0] != (agentproto.PackageVersion{Name: "curl", Version: "7.2-1"}) {
		t.Fatalf("install payload %+v", payload)
	}
	// Still held: nothing moves; released: the command goes out.
	if err := f.s.ReleaseWaiting(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.job(c, job.ID); got.Totals.Waiting != 1 {
		t.Fatalf("held work moved: %+v", got.Totals)
	}
	holdMu.Lock()
	held[db] = false
	holdMu.Unlock()
	if err := f.s.ReleaseWaiting(context.Background()); err != nil {
		t.Fatal(err)
	}
	cmds := f.commands(c, job.ID)
	if got := f.job(c, job.ID); got.Totals.Queued != 2 || cmds[db] == "" {
		t.Fatalf("released work: %+v %v", got.Totals, cmds)
	}

	f.result(f.a, web, cmds[web], agentproto.ResultFailed, agentproto.PatchInstallResult{Manager: "apt", RebootRequired: true,
		Packages: []agentproto.PackageOutcome{{Name: "openssl", Version: "3.0.2-1", PreviousVersion: "3.0.1-1", Status: agentproto.PackageInstalled},
			{Name: "curl", Version: "7.2-1", Status: agentproto.PackageFailed, Error: "dpkg lock"}}})
	f.result(f.a, db, cmds[db], agentproto.ResultCompleted, agentproto.PatchInstallResult{Manager: "apt",
		Packages: []agentproto.PackageOutcome{{Name: "openssl", Version: "3.0.2-1", Status: agentproto.PackageInstalled}}})
	if got := f.patch(c, ids["openssl"]).DeviceCounts; *got != (patches.PatchStateCounts{Installed: 2}) {
		t.Fatalf("openssl counts %+v", got)
	}
	if got := f.patch(c, ids["curl"]).DeviceCounts; *got != (patches.PatchStateCounts{Failed: 1}) {
		t.Fatalf("curl counts %+v", got)
	}
	if got := f.job(c, job.ID); got.Status != patches.JobCompleted || got.Totals.Failed != 1 || got.Totals.Completed != 1 {
		t.Fatalf("install job at the end: %+v", got.PatchJob)
	}
	if got := f.compliance(c, ""); got.Installed != 2 || got.Pending != 1 || got.Failed != 1 || got.RebootRequired != 1 {
		t.Fatalf("compliance after the install: %+v", got)
	}

	// A later scan still offering curl keeps it failed; vim, no longer offered, moved on.
	f.seedPatches(f.a, web, upd("curl", "7.1-1", "7.2-1", false))
	if got := f.patch(c, ids["curl"]).DeviceCounts; *got != (patches.PatchStateCounts{Failed: 1}) {
		t.Fatalf("curl after a rescan %+v", got)
	}
	if got := f.patch(c, ids["vim"]).DeviceCounts; *got != (patches.PatchStateCounts{Installed: 1}) {
		t.Fatalf("vim after a rescan %+v", got)
	}
	if got := f.patch(c, ids["openssl"]).DeviceCounts; *got != (patches.PatchStateCounts{Installed: 2}) {
		t.Fatalf("an installed patch no longer offered stays installed: %+v", got)
	}

	// Rollback: web recorded its previous version, db did not; an unknown device is skipped too.
	var rb patches.PatchJobStart
	f.e.Must(202, c, "POST", api+"/patches/"+ids["openssl"]+"/rollback", map[string]any{"deviceIds": []string{web, db,
		f.device(f.a, "new", "linux")}}).JSON(t, &rb)
	if rb.Kind != patches.JobRollback || rb.PatchID == nil || *rb.PatchID != ids["openssl"] || rb.Totals.Queued != 1 || len(rb.Skipped) != 2 {
		t.Fatalf("rollback job %+v", rb)
	}
	codes := map[string]string{}
	for _, sk := range rb.Skipped {
		codes[sk.DeviceID] = sk.Code
	}
	if codes[db] != "NO_PREVIOUS_VERSION" {
		t.Fatalf("skipped %+v", rb.Skipped)
	}
	rcmds := f.commands(c, rb.ID)
	var dc devices.DeviceCommand
	f.e.Must(200, c, "GET", api+"/devices/"+web+"/commands/"+rcmds[web], nil).JSON(t, &dc)
	_ = json.Unmarshal(dc.Payload, &payload)
	if !payload.Rollback || len(payload.Packages) != 1 || payload.Packages[0] != (agentproto.PackageVersion{Name: "openssl", Version: "3.0.1-1"}) {
		t.Fatalf("rollback payload %+v", payload)
	}
	f.result(f.a, web, rcmds[web], agentproto.ResultCompleted, agentproto.PatchInstallResult{Manager: "apt",
		Packages: []agentproto.PackageOutcome{{Name: "openssl", Version: "3.0.1-1", PreviousVersion: "3.0.2-1", Status: agentproto.PackageInstalled}}})
	if got := f.patch(c, ids["openssl"]).DeviceCounts; *got != (patches.PatchStateCounts{Installed: 1, Pending: 1}) {
		t.Fatalf("after the rollback: %+v", got)
	}
	if r := f.e.Do(c, "POST", api+"/patches/"+ids["openssl"]+"/rollback", map[string]any{"deviceIds": []string{}}); r.Status != 400 {
		t.Fatalf("rollback of no device = %d", r.Status)
	}
	if _, err := f.s.Install(ctx, nil, []string{ids["curl"]}, patches.InstallOptions{}); err == nil {
		t.Fatal("an install of no device was accepted")
	}
}

func TestCommandsEndingWithoutResultFinishTheirJob(t *testing.T) {
	f := newFixture(t)
	web := f.device(f.a, "web-01", "linux")
	js, cmds := f.scan(f.a.Partner, web)
	if _, err := f.e.App.DB.SQL.Exec(`UPDATE device_commands SET status = 'timed_out' WHERE id = $1`, cmds[web]); err != nil {
		t.Fatal(err)
	}
	if err := f.s.SweepJobs(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.job(f.a.Partner, js.ID); got.Status != patches.JobFailed || got.Totals.Failed != 1 || got.Devices[0].Error == nil {
		t.Fatalf("job after its command timed out: %+v", got)
	}
}

func TestComplianceReportLifecycle(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	web := f.device(f.a, "web-(01)", "linux")
	f.device(f.a, "never-scanned", "linux")
	f.seedPatches(f.a, web, upd("a", "1", "2", true), upd("b", "1", "2", false))
	ctx := context.Background()
	for _, format := range []string{"csv", "pdf"} {
		var r patches.PatchReport
		f.e.Must(202, c, "POST", api+"/patches/compliance/report", map[string]any{"format": format}).JSON(t, &r)
		if r.Status != patches.ReportQueued || r.Format != format {
			t.Fatalf("queued report %+v", r)
		}
		if resp := f.e.Do(c, "GET", api+"/patches/compliance/report/"+r.ID+"/download", nil); resp.Status != 409 || resp.ErrorCode() != "REPORT_NOT_READY" {
			t.Fatalf("download before ready = %d %s", resp.Status, resp.Body)
		}
		built, err := f.s.BuildNextReport(ctx)
		if err != nil || !built {
			t.Fatalf("build: %v %v", built, err)
		}
		f.e.Must(200, c, "GET", api+"/patches/compliance/report/"+r.ID, nil).JSON(t, &r)
		if r.Status != patches.ReportCompleted || r.Progress != 2 || r.SizeBytes == nil || r.CompletedAt == nil {
			t.Fatalf("built report %+v", r)
		}
		resp := f.e.Must(200, c, "GET", api+"/patches/compliance/report/"+r.ID+"/download", nil)
		body := string(resp.Body)
		if !strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") {
			t.Fatalf("headers %v", resp.Header)
		}
		switch format {
		case "csv":
			if resp.Header.Get("Content-Type") != "text/csv; charset=utf-8" || !strings.HasPrefix(body, "organization,site,hostname") ||
				!strings.Contains(body, "Alpha Customer,") || !strings.Contains(body, "web-(01),2,1,0,0,0.00,") ||
				!strings.Contains(body, "never-scanned,0,0,0,0,,never") {
				t.Fatalf("csv %s %q", resp.Header.Get("Content-Type"), body)
			}
		case "pdf":
			if resp.Header.Get("Content-Type") != "application/pdf" || !strings.HasPrefix(body, "%PDF-") || !strings.Contains(body, "\nxref\n") ||
				!strings.Contains(body, "trailer") || !strings.HasSuffix(body, "%%EOF\n") || !strings.Contains(body, `web-\(01\)`) {
				t.Fatalf("pdf %q", body)
			}
		}
	}
	var list struct{ Data []patches.PatchReport }
	f.e.Must(200, c, "GET", api+"/patches/compliance/report", nil).JSON(t, &list)
	if len(list.Data) != 2 || list.Data[0].Format != "pdf" {
		t.Fatalf("reports %+v", list.Data)
	}
	if built, err := f.s.BuildNextReport(ctx); built || err != nil {
		t.Fatalf("nothing left to build: %v %v", built, err)
	}
	for name, body := range map[string]map[string]any{"format": {"format": "xlsx"}, "org": {"format": "csv", "orgId": f.b.OrgID}} {
		if r := f.e.Do(c, "POST", api+"/patches/compliance/report", body); r.Status != 400 {
			t.Errorf("report %s = %d %s", name, r.Status, r.Body)
		}
	}
}

func TestPDFHasPagesXrefAndTrailer(t *testing.T) {
	f := newFixture(t)
	for i := range 130 {
		f.device(f.a, fmt.Sprintf("host-%03d", i), "linux")
	}
	f.e.Must(202, f.a.Partner, "POST", api+"/patches/compliance/report", map[string]any{"format": "pdf", "orgId": f.a.OrgID})
	if _, err := f.s.BuildNextReport(context.Background()); err != nil {
		t.Fatal(err)
	}
	var list struct{ Data []patches.PatchReport }
	f.e.Must(200, f.a.Org, "GET", api+"/patches/compliance/report", nil).JSON(t, &list)
	body := string(f.e.Must(200, f.a.Org, "GET", api+"/patches/compliance/report/"+list.Data[0].ID+"/download", nil).Body)
	if !strings.Contains(body, "/Count 3 ") || !strings.Contains(body, "(Alpha Customer") || !strings.Contains(body, "host-129") {
		t.Fatalf("three pages of text expected: %s", body[:min(len(body), 2000)])
	}
	// Every offset in the cross-reference table points at its object.
	xref := body[strings.Index(body, "\nxref\n")+6:]
	lines := strings.Split(xref, "\n")
	for i, l := range lines[2:] {
		if strings.HasPrefix(l, "trailer") {
			break
		}
		var off int
		fmt.Sscanf(l, "%d", &off)
		if !strings.HasPrefix(body[off:], fmt.Sprintf("%d 0 obj", i+1)) {
			t.Fatalf("xref entry %d points at %q", i+1, body[off:off+10])
		}
	}
}

func TestAnotherTenantGetsNotFoundEverywhere(t *testing.T) {
	f := newFixture(t)
	web := f.device(f.a, "web-01", "linux")
	ids := f.seedPatches(f.a, web, upd("openssl", "1", "2", true))
	f.e.Must(200, f.a.Partner, "POST", api+"/patches/"+ids["openssl"]+"/approve", nil)
	js, _ := f.scan(f.a.Partner, web)
	var r patches.PatchReport
	f.e.Must(202, f.a.Partner, "POST", api+"/patches/compliance/report", map[string]any{"format": "csv"}).JSON(t, &r)
	if _, err := f.s.BuildNextReport(context.Background()); err != nil {
		t.Fatal(err)
	}
	pid := ids["openssl"]
	for _, c := range []apptest.Caller{f.b.Partner, f.b.Org} {
		for _, rt := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/patches/" + pid, nil}, {"POST", "/patches/" + pid + "/approve", nil}, {"POST", "/patches/" + pid + "/decline", nil},
			{"POST", "/patches/" + pid + "/defer", map[string]any{"until": time.Now().Add(time.Hour)}},
			{"POST", "/patches/" + pid + "/rollback", map[string]any{"deviceIds": []string{web}}},
			{"GET", "/patches/jobs/" + js.ID, nil}, {"GET", "/patches/compliance/report/" + r.ID, nil},
			{"GET", "/patches/compliance/report/" + r.ID + "/download", nil},
		} {
			if resp := f.e.Do(c, rt.method, api+rt.path, rt.body); resp.Status != 404 {
				t.Errorf("%s %s as the other tenant = %d %s", rt.method, rt.path, resp.Status, resp.Body)
			}
		}
		for _, path := range []string{"/patches", "/patches/approvals", "/patches/jobs", "/patches/compliance/report"} {
			var list struct{ Data []json.RawMessage }
			f.e.Must(200, c, "GET", api+path, nil).JSON(t, &list)
			if len(list.Data) != 0 {
				t.Errorf("GET %s as the other tenant lists %d rows", path, len(list.Data))
			}
		}
		var bulk struct {
			Data []patches.PatchBulkApprovalItem
		}
		f.e.Must(200, c, "POST", api+"/patches/bulk-approve", map[string]any{"patchIds": []string{pid}}).JSON(t, &bulk)
		if bulk.Data[0].Code == nil || *bulk.Data[0].Code != "NOT_FOUND" {
			t.Errorf("bulk approve of another tenant's patch: %+v", bulk.Data)
		}
	}
	if got := f.patch(f.a.Partner, pid).PatchApproval; got != patches.ApprovalApproved {
		t.Fatalf("the other tenant changed the decision: %s", got)
	}
}

func TestOneNodeBuildsAReport(t *testing.T) {
	f := newFixture(t)
	f.device(f.a, "web-01", "linux")
	second := app.Service[*patches.Service](f.e.SecondNode().App)
	var r patches.PatchReport
	f.e.Must(202, f.a.Partner, "POST", api+"/patches/compliance/report", map[string]any{"format": "csv"}).JSON(t, &r)
	var wg sync.WaitGroup
	built := make([]bool, 2)
	for i, s := range []*patches.Service{f.s, second} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.BuildNextReport(context.Background())
			if err != nil {
				t.Error(err)
			}
			built[i] = ok
		}()
	}
	wg.Wait()
	if built[0] == built[1] {
		t.Fatalf("built by %v, want exactly one node", built)
	}
	f.e.Must(200, f.a.Partner, "GET", api+"/patches/compliance/report/"+r.ID, nil).JSON(t, &r)
	if r.Status != patches.ReportCompleted || r.Progress != 1 {
		t.Fatalf("report %+v", r)
	}
}

// A job's totals and devices tell the work its agents hold (running) from the work still
// waiting for its agent to take it (queued), in the job, in the list of jobs and per device.
func TestJobShowsTheDevicesWhoseAgentsAreRunningIt(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	web := f.device(f.a, "web-01", "linux")
	js, cmds := f.scan(c, web, f.device(f.a, "db-01", "linux"), f.device(f.a, "mail-01", "linux"))
	if js.Totals != (patches.PatchJobTotals{Devices: 3, Queued: 3}) {
		t.Fatalf("totals of a new job = %+v", js.Totals)
	}
	if taken, err := f.dev.TakeQueued(context.Background(), web); err != nil || len(taken) != 1 || taken[0].ID != cmds[web] {
		t.Fatalf("the agent took %+v (%v)", taken, err)
	}
	jd := f.job(c, js.ID)
	if jd.Totals != (patches.PatchJobTotals{Devices: 3, Queued: 2, Running: 1}) {
		t.Fatalf("totals once an agent took its work = %+v", jd.Totals)
	}
	for _, d := range jd.Devices {
		if want := map[bool]string{true: patches.JobDeviceRunning, false: patches.JobDeviceQueued}[d.DeviceID == web]; d.Status != want {
			t.Fatalf("device %s is %s, want %s", d.DeviceID, d.Status, want)
		}
	}
	var jobs struct{ Data []patches.PatchJob }
	f.e.Must(200, c, "GET", api+"/patches/jobs", nil).JSON(t, &jobs)
	if len(jobs.Data) != 1 || jobs.Data[0].Totals != jd.Totals {
		t.Fatalf("listed jobs = %+v", jobs.Data)
	}
	f.result(f.a, web, cmds[web], agentproto.ResultCompleted, scanResult(false))
	if got := f.job(c, js.ID); got.Totals != (patches.PatchJobTotals{Devices: 3, Queued: 2, Completed: 1}) || got.Status != patches.JobRunning {
		t.Fatalf("job after the first result = %s %+v", got.Status, got.Totals)
	}
}
