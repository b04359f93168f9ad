package packages

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gale/internal/agent/capability"
	"gale/internal/testkit/rpmfixture"
	"gale/internal/wire/agentproto"
)

// dnf and rpm against a throwaway RPM root: scan, install, rollback, an installer with its
// checksum (as software and as a third-party patch), and uninstall with its refusals.
func TestDnfInThrowawayRoot(t *testing.T) {
	rpmfixture.NeedDnfTools(t)
	rpmfixture.HostUnchanged(t)
	dir := t.TempDir()
	rpms := filepath.Join(dir, "rpms")
	must(t, os.MkdirAll(rpms, 0o755))
	build := func(name, version string, requires ...string) string {
		return rpmfixture.Build(t, rpms, rpmfixture.RPM{Name: name, Version: version, Release: "1", Requires: requires})
	}
	hello10, hello11 := build("galetest-hello", "1.0"), build("galetest-hello", "1.1")
	lib, app := build("galetest-lib", "1.0"), build("galetest-app", "1.0", "galetest-lib")
	tool := build("galetest-tool", "2.0")
	repo := filepath.Join(dir, "repo")
	rpmfixture.WriteRepo(t, repo, hello10, hello11, lib, app)
	root := rpmfixture.NewRoot(t, dir, []string{repo}, hello10, lib, app)

	work := filepath.Join(dir, "work")
	must(t, os.MkdirAll(work, 0o755))
	reg := capability.New()
	New(Options{Root: root, WorkDir: work}).Register(reg)

	res := run(t, reg, agentproto.CommandPatchScan, agentproto.PatchScan{Refresh: true})
	if res.Status != agentproto.ResultCompleted {
		t.Fatalf("scan: %s: %s\n%s", res.Status, res.Error, res.Stderr)
	}
	scan := decodeResult[agentproto.PatchScanResult](t, res)
	if scan.Manager != agentproto.ManagerDnf || len(scan.Updates) != 1 || scan.Updates[0].Name != "galetest-hello" ||
		scan.Updates[0].Architecture != "noarch" || scan.Updates[0].InstalledVersion != "1.0-1" || scan.Updates[0].AvailableVersion != "1.1-1" ||
		scan.Installed != 3 {
		t.Fatalf("scan = %+v", scan)
	}

	patch := func(rollback bool, pvs ...agentproto.PackageVersion) (agentproto.CommandResult, agentproto.PatchInstallResult) {
		t.Helper()
		res := run(t, reg, agentproto.CommandPatchInstall, agentproto.PatchInstall{Packages: pvs, Rollback: rollback})
		return res, decodeResult[agentproto.PatchInstallResult](t, res)
	}
	hello := agentproto.PackageVersion{Name: "galetest-hello", Version: "1.1-1"}
	res, pi := patch(false, hello)
	if res.Status != agentproto.ResultCompleted || pi.Packages[0] != (agentproto.PackageOutcome{Name: "galetest-hello", Version: "1.1-1",
		PreviousVersion: "1.0-1", Status: agentproto.PackageInstalled}) {
		t.Fatalf("install 1.1-1: %s %q %+v\n%s", res.Status, res.Error, pi.Packages, res.Stderr)
	}
	if v := rpmfixture.RootVersion(t, root, "galetest-hello"); v != "1.1-1" {
		t.Fatalf("root has %q after installing 1.1-1", v)
	}
	if _, err := os.Stat(filepath.Join(root, "var/log/dnf.rpm.log")); err != nil {
		t.Errorf("dnf did not log inside the root: %v", err)
	}
	res, pi = patch(true, agentproto.PackageVersion{Name: "galetest-hello", Version: "1.0-1"})
	if res.Status != agentproto.ResultCompleted || pi.Packages[0].Status != agentproto.PackageInstalled || pi.Packages[0].PreviousVersion != "1.1-1" {
		t.Fatalf("rollback: %s %q %+v\n%s", res.Status, res.Error, pi.Packages, res.Stderr)
	}
	if v := rpmfixture.RootVersion(t, root, "galetest-hello"); v != "1.0-1" {
		t.Fatalf("root has %q after the rollback", v)
	}

	// An installer: a wrong checksum installs nothing; the right one installs the file, as
	// software and as a third-party patch.
	file, err := os.ReadFile(tool)
	must(t, err)
	sum := sha256.Sum256(file)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(file) }))
	defer srv.Close()
	installer := func(sha string) agentproto.SoftwareInstall {
		return agentproto.SoftwareInstall{URL: srv.URL + "/tool.rpm", SHA256: sha, FileType: agentproto.FileRPM, Name: "galetest-tool", Version: "2.0-1"}
	}
	if res := run(t, reg, agentproto.CommandPatchInstall, agentproto.PatchInstall{}); res.Status != agentproto.ResultFailed ||
		!strings.Contains(res.Error, "takes 1 to 500 packages") {
		t.Errorf("an empty install: %s %q", res.Status, res.Error)
	}
	res = run(t, reg, agentproto.CommandPatchInstall, agentproto.PatchInstall{Installers: []agentproto.SoftwareInstall{installer(strings.Repeat("ab", 32))}})
	pi = decodeResult[agentproto.PatchInstallResult](t, res)
	if res.Status != agentproto.ResultFailed || len(pi.Packages) != 1 || !strings.Contains(pi.Packages[0].Error, "checksum mismatch") ||
		rpmfixture.RootVersion(t, root, "galetest-tool") != "" {
		t.Fatalf("installer with a wrong checksum: %s %+v", res.Status, pi.Packages)
	}
	res = run(t, reg, agentproto.CommandPatchInstall, agentproto.PatchInstall{Installers: []agentproto.SoftwareInstall{installer(hex.EncodeToString(sum[:]))}})
	pi = decodeResult[agentproto.PatchInstallResult](t, res)
	if res.Status != agentproto.ResultCompleted || pi.Packages[0] != (agentproto.PackageOutcome{Name: "galetest-tool", Version: "2.0-1",
		Status: agentproto.PackageInstalled}) || rpmfixture.RootVersion(t, root, "galetest-tool") != "2.0-1" {
		t.Fatalf("installer: %s %q %+v\n%s", res.Status, res.Error, pi.Packages, res.Stderr)
	}
	res = run(t, reg, agentproto.CommandSoftwareInstall, installer(hex.EncodeToString(sum[:])))
	if res.Status != agentproto.ResultCompleted {
		t.Fatalf("software install of the installed version: %s %q", res.Status, res.Error)
	}

	uninstall := func(name string) agentproto.CommandResult {
		return run(t, reg, agentproto.CommandSoftwareUninstall, agentproto.SoftwareUninstall{Name: name})
	}
	if res := uninstall("galetest-lib"); res.Status != agentproto.ResultFailed || !strings.Contains(res.Error, "other packages need galetest-lib") {
		t.Errorf("uninstall of a required library: %s %q", res.Status, res.Error)
	}
	if rpmfixture.RootVersion(t, root, "galetest-lib") == "" {
		t.Fatal("a refused uninstall removed galetest-lib")
	}
	if res := uninstall("galetest-tool"); res.Status != agentproto.ResultCompleted {
		t.Fatalf("uninstall: %s %q\n%s", res.Status, res.Error, res.Stderr)
	}
	if v := rpmfixture.RootVersion(t, root, "galetest-tool"); v != "" {
		t.Fatalf("root still has galetest-tool %s", v)
	}
	if left, _ := os.ReadDir(work); len(left) != 0 {
		t.Errorf("the work directory keeps %d entries", len(left))
	}
}
