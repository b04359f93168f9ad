package patches_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"gale/internal/domains/patches"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const helloSHA = "1111111111111111111111111111111111111111111111111111111111111111"

// catalogHello adds a catalog entry for galetest-hello with versions 1.1-1 (fixing a CVE) and
// 1.0-1 as Debian packages, and returns its ID.
func (f fixture) catalogHello() string {
	f.e.T.Helper()
	var e struct {
		ID string `json:"id"`
	}
	version := func(v string, cves ...string) map[string]any {
		return map[string]any{"version": v, "downloadUrl": "https://downloads.example.com/hello_" + v + ".deb", "sha256": helloSHA,
			"fileType": "deb", "osType": "linux", "cveIds": cves}
	}
	f.e.Must(201, f.e.Admin(), "POST", "/api/v1/third-party-catalog", map[string]any{"vendor": "Gale Test", "name": "Hello",
		"osTypes": []string{"linux"}, "packageNames": []string{"GaleTest-Hello"}, "defaultSeverity": "important",
		"versions": []any{version("1.1-1", "CVE-2026-1234"), version("1.0-1")}}).JSON(f.e.T, &e)
	return e.ID
}

// software reports a device's installed software as its agent would.
func (f fixture) software(ten apptest.Tenant, deviceID string, sw ...agentproto.Software) {
	f.e.T.Helper()
	if err := f.dev.StoreInventory(context.Background(), agentOf(ten, deviceID), agentproto.Inventory{Software: sw}); err != nil {
		f.e.T.Fatalf("store inventory: %v", err)
	}
}

func (f fixture) thirdPartyScan(c apptest.Caller, ids ...string) patches.PatchJobStart {
	f.e.T.Helper()
	var out patches.PatchJobStart
	f.e.Must(202, c, "POST", api+"/patches/scan", map[string]any{"deviceIds": ids, "source": "third_party"}).JSON(f.e.T, &out)
	return out
}

func (f fixture) thirdPartyPatches(c apptest.Caller) []patches.Patch {
	f.e.T.Helper()
	var l struct{ Data []patches.Patch }
	f.e.Must(200, c, "GET", api+"/patches?source=third_party", nil).JSON(f.e.T, &l)
	return l.Data
}

func (f fixture) stateOn(deviceID, patchID string) string {
	f.e.T.Helper()
	var st string
	err := f.e.App.DB.SQL.QueryRow(`SELECT status FROM patch_devices WHERE device_id = $1 AND patch_id = $2`, deviceID, patchID).Scan(&st)
	if err != nil {
		return "none"
	}
	return st
}

func TestThirdPartyPatchesFromTheCatalog(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	entry := f.catalogHello()
	old := f.device(f.a, "old", "linux")
	current := f.device(f.a, "current", "linux")
	snap := f.device(f.a, "snap", "linux")
	win := f.device(f.a, "win", "windows")
	foreign := f.device(f.b, "foreign", "linux")
	f.software(f.a, old, agentproto.Software{Name: "galetest-hello", Version: "1.0-1", Source: "dpkg"},
		agentproto.Software{Name: "bash", Version: "5.2", Source: "dpkg"})
	f.software(f.a, current, agentproto.Software{Name: "galetest-hello", Version: "1.1-1", Source: "dpkg"})
	f.software(f.a, snap, agentproto.Software{Name: "galetest-hello", Version: "0.9", Source: "snap"})
	f.software(f.a, win, agentproto.Software{Name: "galetest-hello", Version: "0.9", Source: "registry"})
	f.software(f.b, foreign, agentproto.Software{Name: "galetest-hello", Version: "1.0-1", Source: "dpkg"})

	job := f.thirdPartyScan(c, old, current, snap, win, foreign)
	if job.Status != patches.JobCompleted || len(job.Skipped) != 1 || job.Skipped[0].DeviceID != foreign {
		t.Fatalf("scan job %+v", job)
	}
	list := f.thirdPartyPatches(c)
	if len(list) != 1 {
		t.Fatalf("third-party patches %+v", list)
	}
	p := list[0]
	if p.Source != "third_party" || p.Version != "1.1-1" || p.ExternalID != entry+":1.1-1" || p.PackageID != entry ||
		p.Vendor == nil || *p.Vendor != "Gale Test" || !slices.Equal(p.CVEIDs, []string{"CVE-2026-1234"}) ||
		p.Severity != "important" || p.Category != "security" {
		t.Fatalf("patch %+v", p)
	}
	for dev, want := range map[string]string{old: "pending", current: "none", snap: "none", win: "none"} {
		if got := f.stateOn(dev, p.ID); got != want {
			t.Errorf("device %s: %s, want %s", dev, got, want)
		}
	}
	if got := f.thirdPartyPatches(f.b.Partner); len(got) != 0 {
		t.Fatalf("another partner sees %+v", got)
	}
	f.e.Must(404, f.b.Partner, "GET", api+"/patches/"+p.ID, nil)

	// Approved, it installs from the catalog's installer under the name the device lists.
	f.e.Must(200, c, "POST", api+"/patches/"+p.ID+"/approve", nil)
	inst, err := f.s.Install(partnerCtx(f.a), []string{old}, []string{p.ID}, patches.InstallOptions{})
	if err != nil || len(inst.Commands) != 1 {
		t.Fatalf("install %+v %v", inst, err)
	}
	var payload agentproto.PatchInstall
	if err := json.Unmarshal(inst.Commands[0].Payload, &payload); err != nil {
		t.Fatal(err)
	}
	if len(payload.Packages) != 0 || len(payload.Installers) != 1 || payload.Installers[0] != (agentproto.SoftwareInstall{
		URL: "https://downloads.example.com/hello_1.1-1.deb", SHA256: helloSHA, FileType: "deb", Name: "galetest-hello", Version: "1.1-1"}) {
		t.Fatalf("install payload %+v", payload)
	}
	f.result(f.a, old, inst.Commands[0].ID, agentproto.ResultCompleted, agentproto.PatchInstallResult{Manager: "apt",
		Packages: []agentproto.PackageOutcome{{Name: "galetest-hello", Version: "1.1-1", PreviousVersion: "1.0-1", Status: agentproto.PackageInstalled}}})
	if got := f.stateOn(old, p.ID); got != "installed" {
		t.Fatalf("after the install: %s", got)
	}
	if r := f.e.Do(c, "POST", api+"/patches/"+p.ID+"/rollback", map[string]any{"deviceIds": []string{old}}); r.Status != 409 ||
		!strings.Contains(string(r.Body), "ROLLBACK_UNSUPPORTED") {
		t.Fatalf("rollback of a third-party patch = %d %s", r.Status, r.Body)
	}

	// A device whose application reached the version has it installed; one that dropped the
	// application loses the pending row.
	again := f.device(f.a, "again", "linux")
	gone := f.device(f.a, "gone", "linux")
	f.software(f.a, again, agentproto.Software{Name: "galetest-hello", Version: "1.0-1", Source: "dpkg"})
	f.software(f.a, gone, agentproto.Software{Name: "galetest-hello", Version: "1.0-1", Source: "dpkg"})
	f.thirdPartyScan(c, again, gone)
	if f.stateOn(again, p.ID) != "pending" || f.stateOn(gone, p.ID) != "pending" {
		t.Fatal("not pending after the first scan")
	}
	f.software(f.a, again, agentproto.Software{Name: "galetest-hello", Version: "1.1-1", Source: "dpkg"})
	f.software(f.a, gone, agentproto.Software{Name: "bash", Version: "5.2", Source: "dpkg"})
	f.thirdPartyScan(c, again, gone)
	if got := f.stateOn(again, p.ID); got != "installed" {
		t.Errorf("updated outside Gale: %s, want installed", got)
	}
	if got := f.stateOn(gone, p.ID); got != "none" {
		t.Errorf("application removed: %s, want no row", got)
	}

	// An install whose catalog version is gone skips the device with the reason.
	f.software(f.a, again, agentproto.Software{Name: "galetest-hello", Version: "1.0-1", Source: "dpkg"})
	f.thirdPartyScan(c, again)
	f.e.Must(200, f.e.Admin(), "PATCH", "/api/v1/third-party-catalog/"+entry, map[string]any{"versions": []any{map[string]any{
		"version": "1.2-1", "downloadUrl": "https://downloads.example.com/hello_1.2-1.deb", "sha256": helloSHA, "fileType": "deb",
		"osType": "linux"}}})
	if j, err := f.s.Install(partnerCtx(f.a), []string{again}, []string{p.ID}, patches.InstallOptions{}); err != nil ||
		len(j.Commands) != 0 || j.Totals.Skipped != 1 {
		t.Fatalf("install of a version gone from the catalog: %+v %v", j, err)
	}
	if r := f.e.Do(c, "POST", api+"/patches/scan", map[string]any{"deviceIds": []string{old}, "source": "custom"}); r.Status != 400 {
		t.Fatalf("scan of the custom source = %d", r.Status)
	}
}
