package software_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/rollouts"
	"gale/internal/domains/software"
	"gale/internal/platform/clock"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

type fixture struct {
	e   *apptest.Env
	a   apptest.Tenant
	b   apptest.Tenant
	dev *devices.Service
	sw  *software.Service
}

func newFixture(t *testing.T) fixture {
	e := apptest.New(t)
	admin := e.Admin()
	return fixture{e: e, a: e.NewTenant(admin, "Alpha"), b: e.NewTenant(admin, "Bravo"),
		dev: app.Service[*devices.Service](e.App), sw: app.Service[*software.Service](e.App)}
}

func (f fixture) device(ten apptest.Tenant, host, os string) string {
	return f.e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: host, OSType: os,
		OSName: os})
}

func (f fixture) item(c apptest.Caller, name string, extra map[string]any) software.SoftwareCatalogItem {
	f.e.T.Helper()
	body := map[string]any{"name": name, "packageName": strings.ToLower(name), "supportedOs": []string{"linux", "windows"}}
	for k, v := range extra {
		body[k] = v
	}
	var it software.SoftwareCatalogItem
	f.e.Must(201, c, "POST", api+"/software/catalog", body).JSON(f.e.T, &it)
	return it
}

var sum = strings.Repeat("ab", 32)

func (f fixture) version(c apptest.Caller, itemID, version, fileType string) software.SoftwareVersion {
	f.e.T.Helper()
	var v software.SoftwareVersion
	f.e.Must(201, c, "POST", api+"/software/catalog/"+itemID+"/versions", map[string]any{"version": version,
		"downloadUrl": "https://downloads.example.com/" + version + "." + fileType, "sha256": sum, "fileType": fileType,
		"releaseNotes": "line one\nline two"}).JSON(f.e.T, &v)
	return v
}

func (f fixture) deploy(c apptest.Caller, body map[string]any) software.SoftwareDeployment {
	f.e.T.Helper()
	var x software.SoftwareDeployment
	f.e.Must(201, c, "POST", api+"/software/deployments", body).JSON(f.e.T, &x)
	return x
}

func (f fixture) results(c apptest.Caller, id string) map[string]software.SoftwareDeploymentResult {
	f.e.T.Helper()
	var list struct {
		Data []software.SoftwareDeploymentResult
	}
	f.e.Must(200, c, "GET", api+"/software/deployments/"+id+"/results", nil).JSON(f.e.T, &list)
	out := map[string]software.SoftwareDeploymentResult{}
	for _, r := range list.Data {
		out[r.DeviceID] = r
	}
	return out
}

func (f fixture) deployment(c apptest.Caller, id string) software.SoftwareDeployment {
	f.e.T.Helper()
	var x software.SoftwareDeployment
	f.e.Must(200, c, "GET", api+"/software/deployments/"+id, nil).JSON(f.e.T, &x)
	return x
}

func agentOf(ten apptest.Tenant, deviceID string) devices.Agent {
	return devices.Agent{DeviceID: deviceID, PartnerID: ten.PartnerID, OrgID: ten.OrgID, Role: agentproto.RoleAgent}
}

// report posts the agent's result of a software_install, as the agent would.
func (f fixture) report(ten apptest.Tenant, deviceID, commandID string, ok bool, errText string) {
	f.e.T.Helper()
	r := agentproto.CommandResult{CommandID: commandID, Status: agentproto.ResultFailed, Error: errText}
	if ok {
		raw, _ := json.Marshal(agentproto.SoftwareInstallResult{Name: "tool", Version: "2.0", PreviousVersion: "1.0", SHA256: sum})
		r = agentproto.CommandResult{CommandID: commandID, Status: agentproto.ResultCompleted, Result: raw}
	}
	if err := f.dev.RecordResult(context.Background(), agentOf(ten, deviceID), r); err != nil {
		f.e.T.Fatal(err)
	}
}

func TestCatalogItemsAndVersions(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	it := f.item(c, "Tool", map[string]any{"vendor": "Acme", "category": "utilities", "description": "a tool\nwith lines"})
	if it.OrgID != nil || it.LatestVersion != nil || len(it.SupportedOS) != 2 {
		t.Fatalf("created %+v", it)
	}
	if r := f.e.Do(c, "POST", api+"/software/catalog", map[string]any{"name": "tool", "packageName": "x", "supportedOs": []string{"linux"}}); r.Status != 409 ||
		r.ErrorCode() != "SOFTWARE_NAME_TAKEN" {
		t.Fatalf("same name = %d %s", r.Status, r.Body)
	}
	f.item(c, "Tool", map[string]any{"orgId": f.a.OrgID}) // another scope
	for name, body := range map[string]map[string]any{
		"no os":       {"name": "x", "packageName": "x", "supportedOs": []string{}},
		"unknown os":  {"name": "x", "packageName": "x", "supportedOs": []string{"beos"}},
		"no package":  {"name": "x", "supportedOs": []string{"linux"}},
		"line breaks": {"name": "a\nb", "packageName": "x", "supportedOs": []string{"linux"}},
	} {
		if r := f.e.Do(c, "POST", api+"/software/catalog", body); r.Status != 400 {
			t.Errorf("%s = %d %s, want 400", name, r.Status, r.Body)
		}
	}
	v1 := f.version(c, it.ID, "1.0", "deb")
	if v1.Uploaded || v1.DownloadURL == nil || v1.SHA256 != sum || v1.SupportedOS[0] != "linux" || v1.ReleaseNotes != "line one\nline two" {
		t.Fatalf("version %+v", v1)
	}
	v2 := f.version(c, it.ID, "2.0", "msi")
	path := api + "/software/catalog/" + it.ID + "/versions"
	for name, body := range map[string]map[string]any{
		"http":          {"version": "3", "downloadUrl": "http://x.example.com/a.deb", "sha256": sum, "fileType": "deb"},
		"no sha":        {"version": "3", "downloadUrl": "https://x.example.com/a.deb", "fileType": "deb"},
		"deb on win":    {"version": "3", "downloadUrl": "https://x.example.com/a.deb", "sha256": sum, "fileType": "deb", "supportedOs": []string{"windows"}},
		"item lacks os": {"version": "3", "downloadUrl": "https://x.example.com/a.pkg", "sha256": sum, "fileType": "pkg"},
	} {
		if r := f.e.Do(c, "POST", path, body); r.Status != 400 {
			t.Errorf("%s = %d %s, want 400", name, r.Status, r.Body)
		}
	}
	if r := f.e.Do(c, "POST", path, map[string]any{"version": "1.0", "downloadUrl": "https://x.example.com/a.deb", "sha256": sum,
		"fileType": "deb"}); r.Status != 409 || r.ErrorCode() != "SOFTWARE_VERSION_EXISTS" {
		t.Fatalf("same version = %d %s", r.Status, r.Body)
	}
	var versions struct{ Data []software.SoftwareVersion }
	f.e.Must(200, f.a.Org, "GET", path, nil).JSON(t, &versions)
	if len(versions.Data) != 2 || versions.Data[0].ID != v2.ID {
		t.Fatalf("versions %+v", versions.Data)
	}
	var got software.SoftwareCatalogItem
	f.e.Must(200, f.a.Org, "GET", api+"/software/catalog/"+it.ID, nil).JSON(t, &got)
	if got.LatestVersion == nil || got.LatestVersion.ID != v2.ID || got.Vendor != "Acme" {
		t.Fatalf("got %+v", got)
	}
	name := "Tool Pro"
	f.e.Must(200, c, "PATCH", api+"/software/catalog/"+it.ID, map[string]any{"name": name, "supportedOs": []string{"linux", "windows", "macos"}}).JSON(t, &got)
	if got.Name != name || len(got.SupportedOS) != 3 || got.Category != "utilities" {
		t.Fatalf("patched %+v", got)
	}
	if r := f.e.Do(f.a.Org, "PATCH", api+"/software/catalog/"+it.ID, map[string]any{"vendor": "x"}); r.Status != 403 {
		t.Fatalf("an organization caller changing a partner-wide item = %d", r.Status)
	}
	var list struct {
		Data []software.SoftwareCatalogItem
	}
	f.e.Must(200, c, "GET", api+"/software/catalog/search?q=pro", nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != it.ID {
		t.Fatalf("search %+v", list.Data)
	}
	f.e.Must(200, c, "GET", api+"/software/catalog?os=macos", nil).JSON(t, &list)
	if len(list.Data) != 1 {
		t.Fatalf("os filter %+v", list.Data)
	}
	f.e.Must(200, f.b.Partner, "GET", api+"/software/catalog", nil).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("another tenant lists %+v", list.Data)
	}
	f.e.Must(204, c, "DELETE", api+"/software/catalog/"+it.ID, nil)
	f.e.Must(404, c, "GET", api+"/software/catalog/"+it.ID, nil)
	f.item(c, name, nil) // the name is free again
}

func TestDeploymentLifecycle(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.a.Partner
	l1, l2, l3, win := f.device(f.a, "web-01", "linux"), f.device(f.a, "web-02", "linux"), f.device(f.a, "web-03", "linux"),
		f.device(f.a, "win-01", "windows")
	it := f.item(c, "Tool", nil)
	v := f.version(c, it.ID, "2.0", "deb")
	x := f.deploy(c, map[string]any{"versionId": v.ID, "orgId": f.a.OrgID, "targets": map[string]any{"type": "organization"}})
	if x.Status != software.DeploymentRunning || x.Name != "Tool 2.0" || x.Counts["queued"] != 3 || x.Counts["skipped"] != 1 {
		t.Fatalf("deployment %+v", x)
	}
	res := f.results(c, x.ID)
	if res[win].Status != software.DeviceSkipped || res[win].Reason == nil || !strings.Contains(*res[win].Reason, "not on windows") {
		t.Fatalf("windows device %+v", res[win])
	}
	cmds, err := f.dev.TakeQueued(ctx, l1)
	if err != nil || len(cmds) != 1 || cmds[0].Type != agentproto.CommandSoftwareInstall {
		t.Fatalf("queued %+v %v", cmds, err)
	}
	var p agentproto.SoftwareInstall
	_ = json.Unmarshal(cmds[0].Payload, &p)
	if p.URL != *v.DownloadURL || p.SHA256 != sum || p.FileType != "deb" || p.Name != "tool" || p.Version != "2.0" {
		t.Fatalf("payload %+v", p)
	}
	if got := f.results(c, x.ID)[l1]; got.Status != software.DeviceRunning {
		t.Fatalf("sent: %s", got.Status)
	}
	f.report(f.a, l1, *res[l1].CommandID, true, "")
	f.report(f.a, l2, *res[l2].CommandID, false, "checksum mismatch: the file's SHA-256 is 00ff")
	if got := f.deployment(c, x.ID); got.Status != software.DeploymentRunning {
		t.Fatalf("one device left: %+v", got)
	}
	f.report(f.a, l3, *res[l3].CommandID, true, "")
	res = f.results(c, x.ID)
	if r := res[l1]; r.Status != software.DeviceInstalled || *r.InstalledVersion != "2.0" || *r.PreviousVersion != "1.0" {
		t.Fatalf("installed %+v", r)
	}
	if r := res[l2]; r.Status != software.DeviceFailed || !strings.Contains(*r.Reason, "checksum mismatch") {
		t.Fatalf("failed %+v", r)
	}
	got := f.deployment(c, x.ID)
	if got.Status != software.DeploymentPartial || got.CompletedAt == nil || got.Counts["installed"] != 2 || got.Counts["failed"] != 1 {
		t.Fatalf("ended %+v", got)
	}
	var list struct {
		Data []software.SoftwareDeploymentResult
	}
	f.e.Must(200, c, "GET", api+"/software/deployments/"+x.ID+"/results?status=failed", nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].DeviceID != l2 {
		t.Fatalf("failed filter %+v", list.Data)
	}
	if r := f.e.Do(c, "POST", api+"/software/deployments/"+x.ID+"/cancel", nil); r.Status != 409 || r.ErrorCode() != "DEPLOYMENT_ENDED" {
		t.Fatalf("cancel after the end = %d %s", r.Status, r.Body)
	}
	// One final event, once.
	var n int
	var data string
	if err := f.e.App.DB.SQL.QueryRow(`SELECT COUNT(*), MAX(data) FROM events WHERE type = $1 AND resource_id = $2`,
		software.EventDeploymentCompleted, x.ID).Scan(&n, &data); err != nil || n != 1 || !strings.Contains(data, `"partial"`) {
		t.Fatalf("events %d %s %v", n, data, err)
	}

	// A deployment whose only device fails is failed.
	y := f.deploy(c, map[string]any{"versionId": v.ID, "orgId": f.a.OrgID, "targets": map[string]any{"type": "devices", "ids": []string{l1, win}}})
	f.report(f.a, l1, *f.results(c, y.ID)[l1].CommandID, false, "checksum mismatch")
	if got := f.deployment(c, y.ID); got.Status != software.DeploymentFailed {
		t.Fatalf("all failed: %+v", got)
	}
	// The list, newest first.
	var deps struct{ Data []software.SoftwareDeployment }
	f.e.Must(200, f.a.Org, "GET", api+"/software/deployments", nil).JSON(t, &deps)
	if len(deps.Data) != 2 || deps.Data[0].ID != y.ID || deps.Data[0].Counts["failed"] != 1 {
		t.Fatalf("list %+v", deps.Data)
	}
	f.e.Must(200, c, "GET", api+"/software/deployments?status=partial", nil).JSON(t, &deps)
	if len(deps.Data) != 1 || deps.Data[0].ID != x.ID {
		t.Fatalf("status filter %+v", deps.Data)
	}
	// Refusals.
	for name, body := range map[string]map[string]any{
		"foreign device": {"versionId": v.ID, "orgId": f.a.OrgID, "targets": map[string]any{"type": "devices", "ids": []string{f.device(f.b, "b-1", "linux")}}},
		"no devices":     {"versionId": v.ID, "orgId": f.a.OrgID, "targets": map[string]any{"type": "devices"}},
		"foreign org":    {"versionId": v.ID, "orgId": f.b.OrgID, "targets": map[string]any{"type": "organization"}},
		"bad window":     {"versionId": v.ID, "orgId": f.a.OrgID, "targets": map[string]any{"type": "organization"}, "schedule": map[string]any{"mode": "maintenance_window"}},
	} {
		if r := f.e.Do(c, "POST", api+"/software/deployments", body); r.Status != 400 {
			t.Errorf("%s = %d %s, want 400", name, r.Status, r.Body)
		}
	}
	// A catalog item with a deployment under way cannot go.
	z := f.deploy(c, map[string]any{"versionId": v.ID, "orgId": f.a.OrgID, "targets": map[string]any{"type": "devices", "ids": []string{l3}}})
	if r := f.e.Do(c, "DELETE", api+"/software/catalog/"+it.ID, nil); r.Status != 409 || r.ErrorCode() != "SOFTWARE_DEPLOYING" {
		t.Fatalf("delete while deploying = %d %s", r.Status, r.Body)
	}
	// Cancelling it cancels the queued command through the devices domain.
	var cancelled software.SoftwareDeployment
	f.e.Must(200, c, "POST", api+"/software/deployments/"+z.ID+"/cancel", nil).JSON(t, &cancelled)
	zr := f.results(c, z.ID)[l3]
	if cancelled.Status != software.DeploymentCancelled || zr.Status != software.DeviceCancelled {
		t.Fatalf("cancelled %+v %+v", cancelled, zr)
	}
	var status string
	if err := f.e.App.DB.SQL.QueryRow(`SELECT status FROM device_commands WHERE id = $1`, *zr.CommandID).Scan(&status); err != nil ||
		status != devices.CommandCancelled {
		t.Fatalf("command %s %v", status, err)
	}
	f.e.Must(204, c, "DELETE", api+"/software/catalog/"+it.ID, nil)
	// Deployments of a deleted item stay readable.
	f.deployment(c, x.ID)
}

func TestTimedOutCommandsEndTheirDevices(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	l1 := f.device(f.a, "web-01", "linux")
	v := f.version(c, f.item(c, "Tool", nil).ID, "2.0", "deb")
	x := f.deploy(c, map[string]any{"versionId": v.ID, "orgId": f.a.OrgID, "targets": map[string]any{"type": "devices", "ids": []string{l1}}})
	cmdID := *f.results(c, x.ID)[l1].CommandID
	if _, err := f.e.App.DB.SQL.Exec(`UPDATE device_commands SET status = 'timed_out', error = 'the device did not connect in time' WHERE id = $1`, cmdID); err != nil {
		t.Fatal(err)
	}
	if r := f.results(c, x.ID)[l1]; r.Status != software.DeviceFailed || !strings.Contains(*r.Reason, "did not connect") {
		t.Fatalf("before reconciliation %+v", r)
	}
	if err := f.sw.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.deployment(c, x.ID); got.Status != software.DeploymentFailed {
		t.Fatalf("after reconciliation %+v", got)
	}
}

// Two cancels of one deployment: one wins (200), the other is 409, on either database.
func TestConcurrentCancelHasOneWinner(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	ids := []string{f.device(f.a, "web-01", "linux"), f.device(f.a, "web-02", "linux")}
	v := f.version(c, f.item(c, "Tool", nil).ID, "2.0", "deb")
	for range 5 {
		x := f.deploy(c, map[string]any{"versionId": v.ID, "orgId": f.a.OrgID, "targets": map[string]any{"type": "devices", "ids": ids}})
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for i := range statuses {
			wg.Go(func() { statuses[i] = f.e.Do(c, "POST", api+"/software/deployments/"+x.ID+"/cancel", nil).Status })
		}
		wg.Wait()
		if !(statuses[0] == 200 && statuses[1] == 409) && !(statuses[0] == 409 && statuses[1] == 200) {
			t.Fatalf("two cancels answered %v", statuses)
		}
		var n int
		if err := f.e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM events WHERE type = $1 AND resource_id = $2`,
			software.EventDeploymentCompleted, x.ID).Scan(&n); err != nil || n != 1 {
			t.Fatalf("events %d %v", n, err)
		}
	}
}

func TestHeldDevicesWaitUntilReleased(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.a.Partner
	l1, l2 := f.device(f.a, "web-01", "linux"), f.device(f.a, "web-02", "linux")
	v := f.version(c, f.item(c, "Tool", nil).ID, "2.0", "deb")
	held := map[string]bool{l2: true}
	var mu sync.Mutex
	f.sw.SetHold(func(_ context.Context, _ *sql.Tx, ids []string) (map[string]bool, error) {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]bool{}
		for _, id := range ids {
			out[id] = held[id]
		}
		return out, nil
	})
	x := f.deploy(c, map[string]any{"versionId": v.ID, "orgId": f.a.OrgID, "targets": map[string]any{"type": "devices", "ids": []string{l1, l2}}})
	res := f.results(c, x.ID)
	if res[l1].Status != software.DeviceQueued || res[l2].Status != software.DeviceWaiting || res[l2].CommandID != nil {
		t.Fatalf("held %+v", res)
	}
	if err := f.sw.ReleaseWaiting(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.results(c, x.ID)[l2]; got.Status != software.DeviceWaiting {
		t.Fatalf("still held: %+v", got)
	}
	mu.Lock()
	held = map[string]bool{}
	mu.Unlock()
	if err := f.sw.ReleaseWaiting(ctx); err != nil {
		t.Fatal(err)
	}
	got := f.results(c, x.ID)[l2]
	if got.Status != software.DeviceQueued || got.CommandID == nil {
		t.Fatalf("released: %+v", got)
	}
	cmds, err := f.dev.TakeQueued(ctx, l2)
	if err != nil || len(cmds) != 1 || cmds[0].ID != *got.CommandID {
		t.Fatalf("the released device's command %+v %v", cmds, err)
	}

	// A maintenance_window deployment waits for its window, then goes.
	f.sw.SetHold(nil)
	window := "0194b9f5-0000-7000-8000-000000000001"
	active := false
	f.sw.SetWindowActive(func(_ context.Context, id string) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return active && id == window, nil
	})
	y := f.deploy(c, map[string]any{"versionId": v.ID, "orgId": f.a.OrgID, "targets": map[string]any{"type": "devices", "ids": []string{l1}},
		"schedule": map[string]any{"mode": "maintenance_window", "windowId": window}})
	if y.Status != software.DeploymentPending || y.Counts["waiting"] != 1 {
		t.Fatalf("before the window %+v", y)
	}
	// Cancelling a pending deployment cancels its waiting devices.
	w := f.deploy(c, map[string]any{"versionId": v.ID, "orgId": f.a.OrgID, "targets": map[string]any{"type": "devices", "ids": []string{l2}},
		"schedule": map[string]any{"mode": "maintenance_window", "windowId": window}})
	f.e.Must(200, c, "POST", api+"/software/deployments/"+w.ID+"/cancel", nil)
	mu.Lock()
	active = true
	mu.Unlock()
	if err := f.sw.ReleaseWaiting(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.deployment(c, y.ID); got.Status != software.DeploymentRunning || got.Counts["queued"] != 1 {
		t.Fatalf("in the window %+v", got)
	}
	if got := f.results(c, w.ID)[l2]; got.Status != software.DeviceCancelled {
		t.Fatalf("cancelled waiting device %+v", got)
	}
}

func TestUploadAndAgentDownload(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	it := f.item(c, "Tool", nil)
	file := []byte(strings.Repeat("package bytes\x00\x01\x02", 100000))
	want := sha256.Sum256(file)
	raw := apptest.Caller{Token: c.Token, Header: http.Header{"Content-Type": {"application/octet-stream"}}}
	path := api + "/software/catalog/" + it.ID + "/versions"
	var v software.SoftwareVersion
	f.e.Must(201, raw, "POST", path+"?version=2.0&fileType=deb", file).JSON(t, &v)
	if !v.Uploaded || v.DownloadURL != nil || v.SHA256 != hex.EncodeToString(want[:]) || *v.SizeBytes != int64(len(file)) {
		t.Fatalf("uploaded %+v", v)
	}
	if r := f.e.Do(raw, "POST", path+"?version=2.0&fileType=deb", file); r.Status != 409 {
		t.Fatalf("same version = %d", r.Status)
	}
	if r := f.e.Do(raw, "POST", path, file); r.Status != 400 {
		t.Fatalf("a raw upload without its version = %d", r.Status)
	}
	if r := f.e.Do(raw, "POST", path+"?version=3.0&fileType=pkg", file); r.Status != 400 {
		t.Fatalf("a file type the item lacks = %d", r.Status)
	}
	if r := f.e.Do(apptest.Caller{Token: f.b.Partner.Token, Header: raw.Header}, "POST", path+"?version=3.0&fileType=deb", file); r.Status != 404 {
		t.Fatalf("upload to another tenant's item = %d", r.Status)
	}
	// A declared size over the cap is refused before the body is read.
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequest("POST", f.e.Server.URL+path+"?version=4.0&fileType=deb", pr)
	req.ContentLength = software.MaxUploadBytes + 1
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if res, err := f.e.Server.Client().Do(req); err != nil || res.StatusCode != 413 {
		t.Fatalf("over the cap: %v %v", res, err)
	} else {
		res.Body.Close()
	}

	// The agent with an install of the version downloads the exact bytes; others get 404.
	enrolled := f.e.EnrollAgent(f.a, "agent-a")
	other := f.e.EnrollAgent(f.a, "agent-a2")
	foreign := f.e.EnrollAgent(f.b, "agent-b")
	fileOf := func(token, deviceID string) (int, []byte) {
		req, _ := http.NewRequest("GET", f.e.Server.URL+api+"/agents/"+deviceID+"/software/"+v.ID+"/file", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := f.e.Server.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	if st, _ := fileOf(enrolled.AuthToken, enrolled.DeviceID); st != 404 {
		t.Fatalf("without a command = %d", st)
	}
	x := f.deploy(c, map[string]any{"versionId": v.ID, "orgId": f.a.OrgID, "targets": map[string]any{"type": "devices",
		"ids": []string{enrolled.DeviceID}}})
	cmds, err := f.dev.TakeQueued(context.Background(), enrolled.DeviceID)
	if err != nil || len(cmds) != 1 {
		t.Fatalf("queued %v %v", cmds, err)
	}
	var p agentproto.SoftwareInstall
	_ = json.Unmarshal(cmds[0].Payload, &p)
	if p.URL != api+"/agents/"+enrolled.DeviceID+"/software/"+v.ID+"/file" || p.SHA256 != v.SHA256 || p.SizeBytes != int64(len(file)) {
		t.Fatalf("payload %+v", p)
	}
	st, body := fileOf(enrolled.AuthToken, enrolled.DeviceID)
	if got := sha256.Sum256(body); st != 200 || got != want {
		t.Fatalf("download = %d, %d bytes", st, len(body))
	}
	if st, _ := fileOf(other.AuthToken, other.DeviceID); st != 404 {
		t.Fatalf("an agent of the same tenant without the command = %d", st)
	}
	if st, _ := fileOf(foreign.AuthToken, foreign.DeviceID); st != 404 {
		t.Fatalf("another tenant's agent = %d", st)
	}
	if st, _ := fileOf(foreign.AuthToken, enrolled.DeviceID); st != 403 {
		t.Fatalf("another agent's path = %d", st)
	}
	if st, _ := fileOf("gale_at_nope", enrolled.DeviceID); st != 401 {
		t.Fatalf("a bad token = %d", st)
	}
	// Once the install ended, the file is no longer served.
	f.report(f.a, enrolled.DeviceID, cmds[0].ID, true, "")
	if st, _ := fileOf(enrolled.AuthToken, enrolled.DeviceID); st != 404 {
		t.Fatalf("after the install = %d", st)
	}
	if got := f.deployment(c, x.ID); got.Status != software.DeploymentCompleted {
		t.Fatalf("deployment %+v", got)
	}
	// Deleting the item removes its uploaded file.
	countFiles := func() int {
		var n int
		if err := f.e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM blobs WHERE key LIKE 'software/%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := countFiles(); n != 1 {
		t.Fatalf("%d stored files, want 1", n)
	}
	f.e.Must(204, c, "DELETE", api+"/software/catalog/"+it.ID, nil)
	if n := countFiles(); n != 0 {
		t.Fatalf("%d files left after the delete", n)
	}
}

func inventory(pkgs ...agentproto.Software) agentproto.Inventory {
	return agentproto.Inventory{Hostname: "web-01", OS: agentproto.OSInfo{Type: "linux"}, Software: pkgs}
}

func TestInventoryAndUninstall(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.a.Partner
	l1, l2 := f.device(f.a, "web-01", "linux"), f.device(f.a, "web-02", "linux")
	foreign := f.device(f.b, "b-01", "linux")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	curl := agentproto.Software{Name: "curl", Version: "7.88", Architecture: "amd64", Source: "dpkg"}
	must(f.dev.StoreInventory(ctx, agentOf(f.a, l1), inventory(curl, agentproto.Software{Name: "bash", Version: "5.2", Architecture: "amd64", Source: "dpkg"})))
	must(f.dev.StoreInventory(ctx, agentOf(f.a, l2), inventory(curl)))
	must(f.dev.StoreInventory(ctx, agentOf(f.b, foreign), inventory(curl)))
	var list struct {
		Data []software.SoftwareInstalledPackage
	}
	f.e.Must(200, f.a.Org, "GET", api+"/software/inventory/"+l1, nil).JSON(t, &list)
	if len(list.Data) != 2 || list.Data[0].Name != "bash" || !list.Data[0].Protected || list.Data[1].Protected {
		t.Fatalf("inventory %+v", list.Data)
	}
	id, bashID := list.Data[1].SoftwareID, list.Data[0].SoftwareID
	// A new inventory with a new version keeps the ID.
	curl.Version = "8.0"
	must(f.dev.StoreInventory(ctx, agentOf(f.a, l1), inventory(curl, agentproto.Software{Name: "bash", Version: "5.2", Architecture: "amd64", Source: "dpkg"})))
	f.e.Must(200, c, "GET", api+"/software/inventory/"+l1, nil).JSON(t, &list)
	if list.Data[1].SoftwareID != id || list.Data[1].Version != "8.0" {
		t.Fatalf("after a new inventory %+v, want ID %s", list.Data, id)
	}
	if r := f.e.Do(c, "POST", api+"/software/inventory/"+l1+"/"+bashID+"/uninstall", nil); r.Status != 409 || r.ErrorCode() != "PROTECTED_SOFTWARE" {
		t.Fatalf("protected = %d %s", r.Status, r.Body)
	}
	if cmds, _ := f.dev.TakeQueued(ctx, l1); len(cmds) != 0 {
		t.Fatalf("a refused uninstall sent %+v", cmds)
	}
	// The command kinds refuse the same through the devices' own command route.
	if r := f.e.Do(c, "POST", api+"/devices/"+l1+"/commands", map[string]any{"type": "software_uninstall",
		"payload": map[string]any{"name": "bash"}}); r.Status != 409 || r.ErrorCode() != "PROTECTED_SOFTWARE" {
		t.Fatalf("a protected uninstall sent directly = %d %s", r.Status, r.Body)
	}
	if r := f.e.Do(c, "POST", api+"/devices/"+l1+"/commands", map[string]any{"type": "software_install",
		"payload": map[string]any{"url": "https://x.example.com/a.msi", "sha256": sum, "fileType": "msi", "name": "a", "version": "1"}}); r.Status != 400 {
		t.Fatalf("an msi for a linux device sent directly = %d %s", r.Status, r.Body)
	}
	f.e.Must(404, c, "POST", api+"/software/inventory/"+l1+"/sw_00000000000000000000/uninstall", nil)
	var cmd devices.DeviceCommand
	f.e.Must(202, c, "POST", api+"/software/inventory/"+l1+"/"+id+"/uninstall", nil).JSON(t, &cmd)
	var p agentproto.SoftwareUninstall
	_ = json.Unmarshal(cmd.Payload, &p)
	if cmd.Type != agentproto.CommandSoftwareUninstall || cmd.DeviceID != l1 || p.Name != "curl" || p.Version != "8.0" {
		t.Fatalf("uninstall command %+v payload %+v", cmd, p)
	}
	var audits int
	if err := f.e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE action = 'software.uninstall' AND resource_id = $1`, l1).Scan(&audits); err != nil || audits != 1 {
		t.Fatalf("audit entries %d %v", audits, err)
	}
	// The fleet view counts devices per name and version, in scope.
	var fleet struct{ Data []devices.SoftwareCount }
	f.e.Must(200, c, "GET", api+"/software/inventory?q=cur", nil).JSON(t, &fleet)
	if len(fleet.Data) != 2 || fleet.Data[0].Version != "7.88" || fleet.Data[0].DeviceCount != 1 || fleet.Data[1].DeviceCount != 1 {
		t.Fatalf("fleet %+v", fleet.Data)
	}
	f.e.Must(200, c, "GET", api+"/software/inventory?name=bash&orgId="+f.a.OrgID, nil).JSON(t, &fleet)
	if len(fleet.Data) != 1 || fleet.Data[0].DeviceCount != 1 {
		t.Fatalf("fleet by name %+v", fleet.Data)
	}
	var page struct {
		Data       []devices.SoftwareCount
		Pagination struct{ Cursor string }
	}
	f.e.Must(200, c, "GET", api+"/software/inventory?limit=1", nil).JSON(t, &page)
	if len(page.Data) != 1 || page.Data[0].Name != "bash" || page.Pagination.Cursor == "" {
		t.Fatalf("first page %+v", page)
	}
	f.e.Must(200, c, "GET", api+"/software/inventory?limit=5&cursor="+page.Pagination.Cursor, nil).JSON(t, &page)
	if len(page.Data) != 2 || page.Data[0].Name != "curl" {
		t.Fatalf("second page %+v", page)
	}
	// A decommissioned device no longer counts.
	f.e.Must(204, c, "DELETE", api+"/devices/"+l2, nil)
	f.e.Must(200, c, "GET", api+"/software/inventory?name=curl", nil).JSON(t, &fleet)
	if len(fleet.Data) != 1 || fleet.Data[0].Version != "8.0" {
		t.Fatalf("fleet without the decommissioned device %+v", fleet.Data)
	}
	f.e.Must(200, f.b.Partner, "GET", api+"/software/inventory", nil).JSON(t, &fleet)
	if len(fleet.Data) != 1 || fleet.Data[0].DeviceCount != 1 {
		t.Fatalf("the other tenant's fleet %+v", fleet.Data)
	}
	f.e.Must(200, c, "GET", api+"/software/inventory?orgId="+f.b.OrgID, nil).JSON(t, &fleet)
	if len(fleet.Data) != 0 {
		t.Fatalf("another tenant's organization %+v", fleet.Data)
	}
}

// Another tenant's caller gets 404 on every route of every resource, as for a missing one.
func TestOtherTenantsGetNotFound(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.a.Partner
	l1 := f.device(f.a, "web-01", "linux")
	if err := f.dev.StoreInventory(ctx, agentOf(f.a, l1), inventory(agentproto.Software{Name: "curl", Version: "1", Source: "dpkg"})); err != nil {
		t.Fatal(err)
	}
	it := f.item(c, "Tool", map[string]any{"orgId": f.a.OrgID})
	v := f.version(c, it.ID, "2.0", "deb")
	x := f.deploy(c, map[string]any{"versionId": v.ID, "targets": map[string]any{"type": "devices", "ids": []string{l1}}, "orgId": f.a.OrgID})
	var installed struct {
		Data []software.SoftwareInstalledPackage
	}
	f.e.Must(200, c, "GET", api+"/software/inventory/"+l1, nil).JSON(t, &installed)
	swID := installed.Data[0].SoftwareID
	raw := apptest.Caller{Token: f.b.Partner.Token, Header: http.Header{"Content-Type": {"application/octet-stream"}}}
	for _, caller := range []apptest.Caller{f.b.Partner, f.b.Org} {
		for _, r := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/software/catalog/" + it.ID, nil},
			{"PATCH", "/software/catalog/" + it.ID, map[string]any{"vendor": "x"}},
			{"DELETE", "/software/catalog/" + it.ID, nil},
			{"GET", "/software/catalog/" + it.ID + "/versions", nil},
			{"POST", "/software/catalog/" + it.ID + "/versions", map[string]any{"version": "3", "downloadUrl": "https://x.example.com/a.deb",
				"sha256": sum, "fileType": "deb"}},
			{"GET", "/software/deployments/" + x.ID, nil},
			{"POST", "/software/deployments/" + x.ID + "/cancel", nil},
			{"GET", "/software/deployments/" + x.ID + "/results", nil},
			{"GET", "/software/inventory/" + l1, nil},
			{"POST", "/software/inventory/" + l1 + "/" + swID + "/uninstall", nil},
		} {
			if got := f.e.Do(caller, r.method, api+r.path, r.body); got.Status != 404 {
				t.Errorf("%s %s = %d %s, want 404", r.method, r.path, got.Status, got.Body)
			}
		}
	}
	if got := f.e.Do(raw, "POST", api+"/software/catalog/"+it.ID+"/versions?version=3&fileType=deb", []byte("x")); got.Status != 404 {
		t.Errorf("upload = %d", got.Status)
	}
	// Deploying another tenant's version is refused like a missing one.
	b1 := f.device(f.b, "b-01", "linux")
	if got := f.e.Do(f.b.Partner, "POST", api+"/software/deployments", map[string]any{"versionId": v.ID, "orgId": f.b.OrgID,
		"targets": map[string]any{"type": "devices", "ids": []string{b1}}}); got.Status != 400 || !strings.Contains(string(got.Body), "versionId") {
		t.Errorf("deploy a foreign version = %d %s", got.Status, got.Body)
	}
	var list struct{ Data []software.SoftwareDeployment }
	f.e.Must(200, f.b.Partner, "GET", api+"/software/deployments", nil).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("another tenant lists %+v", list.Data)
	}
	// The owner still reaches everything.
	f.e.Must(200, c, "GET", api+"/software/deployments/"+x.ID, nil)
}

// A rollout of a software version delivers each batch as a software deployment of its
// devices: the install's result ends the rollout's device and the deployment's row alike.
func TestRolloutOfASoftwareVersion(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	linux, win := f.device(f.a, "web-01", "linux"), f.device(f.a, "win-01", "windows")
	it := f.item(c, "Tool", map[string]any{"orgId": f.a.OrgID, "supportedOs": []string{"linux"}})
	v := f.version(c, it.ID, "2.0", "deb")
	var x rollouts.Deployment
	f.e.Must(201, c, "POST", api+"/deployments", map[string]any{"name": "Tool everywhere", "orgId": f.a.OrgID,
		"payload": map[string]any{"type": "software", "versionId": v.ID}, "targets": map[string]any{"type": "devices", "ids": []string{linux, win}}}).JSON(t, &x)
	if r := f.e.Do(f.b.Partner, "POST", api+"/deployments", map[string]any{"name": "Theirs", "orgId": f.b.OrgID,
		"payload": map[string]any{"type": "software", "versionId": v.ID}, "targets": map[string]any{"type": "organization"}}); r.Status != 400 {
		t.Fatalf("a rollout of another tenant's version = %d %s", r.Status, r.Body)
	}
	f.e.Must(200, c, "POST", api+"/deployments/"+x.ID+"/initialize", nil)
	f.e.Must(200, c, "POST", api+"/deployments/"+x.ID+"/start", nil)
	var devs struct{ Data []rollouts.DeploymentDevice }
	f.e.Must(200, c, "GET", api+"/deployments/"+x.ID+"/devices", nil).JSON(t, &devs)
	byID := map[string]rollouts.DeploymentDevice{}
	for _, d := range devs.Data {
		byID[d.DeviceID] = d
	}
	if byID[win].Status != "skipped" || byID[linux].Status != "queued" || byID[linux].CommandID == nil {
		t.Fatalf("rollout devices %+v", devs.Data)
	}
	var list struct{ Data []software.SoftwareDeployment }
	f.e.Must(200, c, "GET", api+"/software/deployments", nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].VersionID != v.ID {
		t.Fatalf("software deployments %+v", list.Data)
	}
	f.report(f.a, linux, *byID[linux].CommandID, true, "")
	if got := f.results(c, list.Data[0].ID)[linux]; got.Status != "installed" {
		t.Fatalf("the software deployment's row %+v", got)
	}
	if err := app.Service[*rollouts.Service](f.e.App).AdvanceAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.e.Must(200, c, "GET", api+"/deployments/"+x.ID, nil).JSON(t, &x)
	if x.Status != "completed" {
		t.Fatalf("rollout after the install %+v", x)
	}
}

func TestCatalogTimesComeFromTheServersClock(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	e := apptest.New(t, apptest.WithClock(clock.NewFake(at)))
	f := fixture{e: e, a: e.NewTenant(e.Admin(), "Alpha")}
	it := f.item(f.a.Partner, "Editor", nil)
	v := f.version(f.a.Partner, it.ID, "1.0", "deb")
	for what, got := range map[string]time.Time{"item": it.CreatedAt, "version": v.CreatedAt} {
		if d := got.Sub(at); d < 0 || d > time.Minute {
			t.Fatalf("%s created at %v on a server whose clock tells %v", what, got, at)
		}
	}
}

// A catalog item's versions are paged like every list, newest first: limit is honoured, the
// cursor walks every version once (versions added in the same instant too), and a cursor that
// is not one is 400.
func TestVersionsArePaged(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	it := f.item(c, "Editor", nil)
	var want []string
	for _, v := range []string{"1.0", "1.1", "1.2", "2.0", "2.1"} {
		want = append([]string{f.version(c, it.ID, v, "deb").ID}, want...)
	}
	// 1.1 and 1.2 share their instant: the later ID comes first.
	if _, err := f.e.App.DB.SQL.Exec(`UPDATE software_versions SET created_at = (SELECT created_at FROM software_versions WHERE id = $1)
		WHERE id = $2`, want[3], want[2]); err != nil {
		t.Fatal(err)
	}
	path := api + "/software/catalog/" + it.ID + "/versions"
	for _, limit := range []int{1, 2, 3, 5} {
		var got []string
		cursor := ""
		for pages := 1; ; pages++ {
			url := fmt.Sprintf("%s?limit=%d", path, limit)
			if cursor != "" {
				url += "&cursor=" + cursor
			}
			var page struct {
				Data       []software.SoftwareVersion
				Pagination *struct {
					HasMore bool
					Cursor  string
				}
			}
			f.e.Must(200, c, "GET", url, nil).JSON(t, &page)
			if page.Pagination == nil || len(page.Data) > limit || pages > 10 {
				t.Fatalf("%s: %+v, want at most %d versions and a pagination", url, page, limit)
			}
			for _, v := range page.Data {
				got = append(got, v.ID)
			}
			if !page.Pagination.HasMore {
				break
			}
			cursor = page.Pagination.Cursor
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("limit %d walks %v, want %v (newest first)", limit, got, want)
		}
	}
	for _, bad := range []string{"garbage", "eyJrIjoxfQ"} {
		if r := f.e.Do(c, "GET", path+"?cursor="+bad, nil); r.Status != 400 {
			t.Errorf("cursor %s = %d %s, want 400", bad, r.Status, r.Body)
		}
	}
}
