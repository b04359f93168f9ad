package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/patches"
	"gale/internal/domains/rollouts"
	"gale/internal/domains/software"
	"gale/internal/testkit/apptest"
	"gale/internal/testkit/aptfixture"
)

// patchLab is a real agent managing a throwaway Debian root: galetest-hello 1.0-1 installed,
// a repository offering 1.0-1 and, in a -security suite, 1.1-1.
type patchLab struct {
	t      *testing.T
	node   *apptest.Env
	admin  apptest.Caller
	agent  *streamAgent
	root   string
	debs   string
	orgID  string
	device string
}

func newPatchLab(t *testing.T) *patchLab {
	aptfixture.NeedAptTools(t)
	aptfixture.HostUnchanged(t)
	dir := t.TempDir()
	debs := filepath.Join(dir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		t.Fatal(err)
	}
	hello10 := aptfixture.BuildDeb(t, debs, aptfixture.Deb{Name: "galetest-hello", Version: "1.0-1"})
	hello11 := aptfixture.BuildDeb(t, debs, aptfixture.Deb{Name: "galetest-hello", Version: "1.1-1"})
	mainRepo, secRepo := filepath.Join(dir, "repo/main"), filepath.Join(dir, "repo/security")
	aptfixture.WriteRepo(t, mainRepo, "galetest", hello10)
	aptfixture.WriteRepo(t, secRepo, "galetest-security", hello11)
	root := aptfixture.NewRoot(t, dir, mainRepo, secRepo)
	if out, err := exec.Command("dpkg", "--root="+root, "--log="+filepath.Join(root, "var/log/dpkg.log"), "-i", hello10).CombinedOutput(); err != nil {
		t.Fatalf("install the base package into the root: %v\n%s", err, out)
	}
	node := apptest.New(t)
	l := &patchLab{t: t, node: node, admin: node.Admin(), root: root, debs: debs,
		agent: startAgentWith(t, node, map[string]any{"packageRoot": root})}
	l.device = l.agent.deviceID
	var dev struct {
		OrgID string `json:"orgId"`
	}
	node.Must(200, l.admin, "GET", "/api/v1/devices/"+l.device, nil).JSON(t, &dev)
	l.orgID = dev.OrgID
	return l
}

func (l *patchLab) version(name string) string { return aptfixture.RootVersion(l.t, l.root, name) }

// job waits for a patch job's device to end and returns the job.
func (l *patchLab) job(id string) patches.PatchJobDetail {
	l.t.Helper()
	var j patches.PatchJobDetail
	waitFor(l.t, 90*time.Second, "patch job "+id+" to end", func() bool {
		l.node.Must(200, l.admin, "GET", "/api/v1/patches/jobs/"+id, nil).JSON(l.t, &j)
		return len(j.Devices) == 1 && (j.Devices[0].Status == "completed" || j.Devices[0].Status == "failed")
	})
	return j
}

// A scan through the real agent lists the newer version, a -security one; approved, a rollout
// that respects maintenance windows waits while a window suppressing patches is active and
// installs it once the window ends; a rollback restores the older version.
func TestPatchesOnARealAgent(t *testing.T) {
	l := newPatchLab(t)
	api := "/api/v1"
	var scan patches.PatchJobStart
	l.node.Must(202, l.admin, "POST", api+"/patches/scan", map[string]any{"deviceIds": []string{l.device}, "refresh": true}).JSON(t, &scan)
	if j := l.job(scan.ID); j.Devices[0].Status != "completed" {
		t.Fatalf("scan job %+v", j)
	}
	var list struct{ Data []patches.Patch }
	l.node.Must(200, l.admin, "GET", api+"/patches?deviceId="+l.device, nil).JSON(t, &list)
	if len(list.Data) != 1 {
		t.Fatalf("patches of the device %+v", list.Data)
	}
	p := list.Data[0]
	if p.Source != "linux" || p.PackageID != "galetest-hello" || p.Version != "1.1-1" || p.Category != "security" {
		t.Fatalf("patch %+v", p)
	}
	l.node.Must(200, l.admin, "POST", api+"/patches/"+p.ID+"/approve", map[string]any{})

	// A window suppressing patches is active: the rollout's device waits.
	var w maintenance.MaintenanceWindow
	start := time.Now().Add(24 * time.Hour).UTC()
	l.node.Must(201, l.admin, "POST", api+"/maintenance/windows", map[string]any{"name": "Freeze", "orgId": l.orgID,
		"startTime": start.Format("2006-01-02T15:04:05"), "endTime": start.Add(2 * time.Hour).Format("2006-01-02T15:04:05"),
		"timezone": "UTC", "recurrence": "once", "targets": map[string]any{"type": "devices", "ids": []string{l.device}},
		"suppressPatches": true}).JSON(t, &w)
	var occ struct {
		Data []maintenance.MaintenanceOccurrence
	}
	l.node.Must(200, l.admin, "GET", api+"/maintenance/windows/"+w.ID+"/occurrences", nil).JSON(t, &occ)
	l.node.Must(200, l.admin, "POST", api+"/maintenance/occurrences/"+occ.Data[0].ID+"/start", nil)
	var roll rollouts.Deployment
	l.node.Must(201, l.admin, "POST", api+"/deployments", map[string]any{"name": "Hello", "orgId": l.orgID,
		"payload": map[string]any{"type": "patch", "patchIds": []string{p.ID}}, "targets": map[string]any{"type": "devices", "ids": []string{l.device}},
		"respectMaintenanceWindows": true}).JSON(t, &roll)
	l.node.Must(200, l.admin, "POST", api+"/deployments/"+roll.ID+"/initialize", nil)
	l.node.Must(200, l.admin, "POST", api+"/deployments/"+roll.ID+"/start", nil)
	devs := func() []rollouts.DeploymentDevice {
		var d struct{ Data []rollouts.DeploymentDevice }
		l.node.Must(200, l.admin, "GET", api+"/deployments/"+roll.ID+"/devices", nil).JSON(t, &d)
		return d.Data
	}
	if d := devs(); len(d) != 1 || d[0].Status != "waiting" {
		t.Fatalf("the rollout's device during the window %+v", d)
	}
	runner := app.Service[*rollouts.Service](l.node.App)
	if err := runner.AdvanceAll(context.Background()); err != nil || devs()[0].Status != "waiting" {
		t.Fatalf("the runner sent a held device: %v %+v", err, devs())
	}
	if v := l.version("galetest-hello"); v != "1.0-1" {
		t.Fatalf("installed during the window: %s", v)
	}
	l.node.Must(200, l.admin, "POST", api+"/maintenance/occurrences/"+occ.Data[0].ID+"/end", nil)
	waitFor(t, 90*time.Second, "the rollout to complete", func() bool {
		if err := runner.AdvanceAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		l.node.Must(200, l.admin, "GET", api+"/deployments/"+roll.ID, nil).JSON(t, &roll)
		return roll.Status == "completed" || roll.Status == "failed"
	})
	if roll.Status != "completed" || l.version("galetest-hello") != "1.1-1" {
		t.Fatalf("rollout %s, installed %s (devices %+v)", roll.Status, l.version("galetest-hello"), devs())
	}
	var got patches.Patch
	l.node.Must(200, l.admin, "GET", api+"/patches/"+p.ID, nil).JSON(t, &got)
	if got.DeviceCounts == nil || got.DeviceCounts.Installed != 1 || got.DeviceCounts.Pending != 0 {
		t.Fatalf("patch after the install %+v", got.DeviceCounts)
	}

	// The rollback goes back to the version recorded before the install.
	var back patches.PatchJobStart
	l.node.Must(202, l.admin, "POST", api+"/patches/"+p.ID+"/rollback", map[string]any{"deviceIds": []string{l.device}}).JSON(t, &back)
	if j := l.job(back.ID); j.Devices[0].Status != "completed" {
		t.Fatalf("rollback job %+v", j)
	}
	if v := l.version("galetest-hello"); v != "1.0-1" {
		t.Fatalf("after the rollback: %s", v)
	}

	// A patch policy bound to a maintenance window installs the approved patch when an
	// occurrence of the window starts.
	var w2 maintenance.MaintenanceWindow
	l.node.Must(201, l.admin, "POST", api+"/maintenance/windows", map[string]any{"name": "Patch night", "orgId": l.orgID,
		"startTime": start.Format("2006-01-02T15:04:05"), "endTime": start.Add(2 * time.Hour).Format("2006-01-02T15:04:05"),
		"timezone": "UTC", "recurrence": "weekly", "targets": map[string]any{"type": "devices", "ids": []string{l.device}},
		"suppressAlerts": false}).JSON(t, &w2)
	l.node.Must(201, l.admin, "POST", api+"/patch-policies", map[string]any{"name": "Nightly", "orgId": l.orgID,
		"maintenanceWindowId": w2.ID, "targets": map[string]any{"type": "devices", "ids": []string{l.device}}})
	policies := app.Service[*patches.Policies](l.node.App)
	if err := policies.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := l.version("galetest-hello"); v != "1.0-1" {
		t.Fatalf("the policy installed outside its window: %s", v)
	}
	l.node.Must(200, l.admin, "GET", api+"/maintenance/windows/"+w2.ID+"/occurrences", nil).JSON(t, &occ)
	l.node.Must(200, l.admin, "POST", api+"/maintenance/occurrences/"+occ.Data[0].ID+"/start", nil)
	if err := policies.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "the policy's install", func() bool { return l.version("galetest-hello") == "1.1-1" })
}

// A catalog .deb uploaded to the server deploys through the real agent, which fetches it with
// its own credentials; a file whose checksum does not match fails with nothing installed;
// an uninstall by softwareId removes the package, and the IDs of the others survive new
// inventories.
func TestSoftwareOnARealAgent(t *testing.T) {
	l := newPatchLab(t)
	api := "/api/v1"
	deb := aptfixture.BuildDeb(t, l.debs, aptfixture.Deb{Name: "galetest-tool", Version: "2.0-1"})
	body, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	var item software.SoftwareCatalogItem
	l.node.Must(201, l.admin, "POST", api+"/software/catalog", map[string]any{"name": "Tool", "packageName": "galetest-tool",
		"orgId": l.orgID, "supportedOs": []string{"linux"}}).JSON(t, &item)
	raw := apptest.Caller{Token: l.admin.Token, Header: http.Header{"Content-Type": {"application/octet-stream"}}}
	upload := func(version string) software.SoftwareVersion {
		var v software.SoftwareVersion
		l.node.Must(201, raw, "POST", api+"/software/catalog/"+item.ID+"/versions?version="+version+"&fileType=deb", body).JSON(t, &v)
		return v
	}
	good := upload("2.0-1")
	sum := sha256.Sum256(body)
	if good.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("uploaded version %+v", good)
	}
	deploy := func(versionID string) software.SoftwareDeploymentResult {
		var x software.SoftwareDeployment
		l.node.Must(201, l.admin, "POST", api+"/software/deployments", map[string]any{"versionId": versionID, "orgId": l.orgID,
			"targets": map[string]any{"type": "devices", "ids": []string{l.device}}}).JSON(t, &x)
		var res struct {
			Data []software.SoftwareDeploymentResult
		}
		waitFor(t, 90*time.Second, "the deployment's device to end", func() bool {
			l.node.Must(200, l.admin, "GET", api+"/software/deployments/"+x.ID+"/results", nil).JSON(t, &res)
			return len(res.Data) == 1 && (res.Data[0].Status == "installed" || res.Data[0].Status == "failed")
		})
		return res.Data[0]
	}

	// A tampered file: the catalog's checksum is not the file's.
	bad := upload("2.0-1tampered")
	if _, err := l.node.App.DB.SQL.Exec(`UPDATE software_versions SET sha256 = $1 WHERE id = $2`, strings.Repeat("0", 64), bad.ID); err != nil {
		t.Fatal(err)
	}
	if r := deploy(bad.ID); r.Status != "failed" || r.Reason == nil || !strings.Contains(*r.Reason, "checksum mismatch") {
		t.Fatalf("tampered deployment %+v", r)
	}
	if v := l.version("galetest-tool"); v != "" {
		t.Fatalf("a tampered file was installed: %s", v)
	}
	if r := deploy(good.ID); r.Status != "installed" {
		t.Fatalf("deployment %+v", r)
	}
	if v := l.version("galetest-tool"); v != "2.0-1" {
		t.Fatalf("installed tool: %q", v)
	}

	// The next inventory lists it; an uninstall by its softwareId removes it.
	installed := func() map[string]software.SoftwareInstalledPackage {
		l.node.Must(201, l.admin, "POST", api+"/devices/"+l.device+"/commands", map[string]any{"type": "refresh_inventory"})
		out := map[string]software.SoftwareInstalledPackage{}
		waitFor(t, 60*time.Second, "a new inventory", func() bool {
			var list struct {
				Data []software.SoftwareInstalledPackage
			}
			l.node.Must(200, l.admin, "GET", api+"/software/inventory/"+l.device, nil).JSON(t, &list)
			clear(out)
			for _, p := range list.Data {
				out[p.Name] = p
			}
			_, hasTool := out["galetest-tool"]
			return hasTool == (l.version("galetest-tool") != "")
		})
		return out
	}
	before := installed()
	if len(before) != 2 || before["galetest-tool"].Version != "2.0-1" {
		t.Fatalf("inventory of the root %+v", before)
	}
	l.node.Must(202, l.admin, "POST", api+"/software/inventory/"+l.device+"/"+before["galetest-tool"].SoftwareID+"/uninstall", nil)
	waitFor(t, 60*time.Second, "the uninstall", func() bool { return l.version("galetest-tool") == "" })
	after := installed()
	if len(after) != 1 || after["galetest-hello"].SoftwareID != before["galetest-hello"].SoftwareID {
		t.Fatalf("inventory after the uninstall %+v (before %+v)", after, before)
	}
}

// The device's reported software shows an application of the third-party catalog at an older
// version: a scan of the third_party source lists the catalog's version as a patch, and once
// approved a rollout installs it through the real agent from the catalog's installer (a
// package the root's repositories do not have).
func TestThirdPartyPatchOnARealAgent(t *testing.T) {
	l := newPatchLab(t)
	api := "/api/v1"
	dir := t.TempDir()
	deb := aptfixture.BuildDeb(t, dir, aptfixture.Deb{Name: "galetest-hello", Version: "1.2-1"})
	body, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	files := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(files.Close)
	l.node.Must(201, l.node.Admin(), "POST", api+"/third-party-catalog", map[string]any{"vendor": "Gale Test", "name": "Hello",
		"osTypes": []string{"linux"}, "packageNames": []string{"galetest-hello"}, "defaultSeverity": "moderate",
		"versions": []any{map[string]any{"version": "1.2-1", "downloadUrl": files.URL + "/" + filepath.Base(deb),
			"sha256": hex.EncodeToString(sum[:]), "fileType": "deb", "osType": "linux"}}})
	l.node.Must(201, l.admin, "POST", api+"/devices/"+l.device+"/commands", map[string]any{"type": "refresh_inventory"})
	waitFor(t, 60*time.Second, "an inventory listing galetest-hello", func() bool {
		var list struct {
			Data []software.SoftwareInstalledPackage
		}
		l.node.Must(200, l.admin, "GET", api+"/software/inventory/"+l.device, nil).JSON(t, &list)
		return slices.ContainsFunc(list.Data, func(p software.SoftwareInstalledPackage) bool { return p.Name == "galetest-hello" })
	})
	var scan patches.PatchJobStart
	l.node.Must(202, l.admin, "POST", api+"/patches/scan", map[string]any{"deviceIds": []string{l.device}, "source": "third_party"}).JSON(t, &scan)
	var list struct{ Data []patches.Patch }
	l.node.Must(200, l.admin, "GET", api+"/patches?source=third_party&deviceId="+l.device, nil).JSON(t, &list)
	if scan.Status != "completed" || len(list.Data) != 1 || list.Data[0].Version != "1.2-1" || list.Data[0].Vendor == nil {
		t.Fatalf("third-party scan %+v, patches %+v", scan, list.Data)
	}
	p := list.Data[0]
	l.node.Must(200, l.admin, "POST", api+"/patches/"+p.ID+"/approve", map[string]any{})
	var roll rollouts.Deployment
	l.node.Must(201, l.admin, "POST", api+"/deployments", map[string]any{"name": "Hello 1.2", "orgId": l.orgID,
		"payload": map[string]any{"type": "patch", "patchIds": []string{p.ID}}, "targets": map[string]any{"type": "devices", "ids": []string{l.device}}}).JSON(t, &roll)
	l.node.Must(200, l.admin, "POST", api+"/deployments/"+roll.ID+"/initialize", nil)
	l.node.Must(200, l.admin, "POST", api+"/deployments/"+roll.ID+"/start", nil)
	runner := app.Service[*rollouts.Service](l.node.App)
	waitFor(t, 90*time.Second, "the rollout to end", func() bool {
		if err := runner.AdvanceAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		l.node.Must(200, l.admin, "GET", api+"/deployments/"+roll.ID, nil).JSON(t, &roll)
		return roll.Status == "completed" || roll.Status == "failed"
	})
	if v := l.version("galetest-hello"); roll.Status != "completed" || v != "1.2-1" {
		t.Fatalf("rollout %s, installed %s", roll.Status, v)
	}
	var got patches.Patch
	l.node.Must(200, l.admin, "GET", api+"/patches/"+p.ID, nil).JSON(t, &got)
	if got.DeviceCounts == nil || got.DeviceCounts.Installed != 1 {
		t.Fatalf("patch after the install %+v", got.DeviceCounts)
	}
}
