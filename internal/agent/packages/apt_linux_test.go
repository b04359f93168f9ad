package packages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gale/internal/agent/capability"
	"gale/internal/testkit/aptfixture"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/pkgversion"
)

// snapshot lists every file of a tree with its size and modification time.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	must(t, filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		files[path] = fmt.Sprint(info.Size(), info.ModTime().UnixNano())
		return nil
	}))
	return files
}

// run runs one command through the registry, as the agent does.
func run(t *testing.T, reg *capability.Registry, kind string, payload any) agentproto.CommandResult {
	t.Helper()
	b, err := json.Marshal(payload)
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return reg.RunCommand(ctx, agentproto.Command{ID: "c1", Type: kind, Payload: b, TimeoutSeconds: 60})
}

func decodeResult[T any](t *testing.T, res agentproto.CommandResult) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(res.Result, &v); err != nil {
		t.Fatalf("result %q: %v (command %s: %s)", res.Result, err, res.Status, res.Error)
	}
	return v
}

func TestAptInThrowawayRoot(t *testing.T) {
	aptfixture.NeedAptTools(t)
	aptfixture.HostUnchanged(t)
	dir := t.TempDir()
	debs := filepath.Join(dir, "debs")
	must(t, os.MkdirAll(debs, 0o755))
	hello10 := aptfixture.BuildDeb(t, debs, aptfixture.Deb{Name: "galetest-hello", Version: "1.0-1"})
	hello11 := aptfixture.BuildDeb(t, debs, aptfixture.Deb{Name: "galetest-hello", Version: "1.1-1"})
	hello12 := aptfixture.BuildDeb(t, debs, aptfixture.Deb{Name: "galetest-hello", Version: "1.2-1"})
	lib := aptfixture.BuildDeb(t, debs, aptfixture.Deb{Name: "galetest-lib", Version: "1.0-1"})
	// Packages whose removal must be refused: one the agent protects, one essential, each
	// depending on a library that is removable by itself.
	agent := aptfixture.BuildDeb(t, debs, aptfixture.Deb{Name: "gale-agent", Version: "1.0-1", Extra: "Depends: galetest-lib\n"})
	libcore := aptfixture.BuildDeb(t, debs, aptfixture.Deb{Name: "galetest-libcore", Version: "1.0-1"})
	core := aptfixture.BuildDeb(t, debs, aptfixture.Deb{Name: "galetest-core", Version: "1.0-1", Extra: "Essential: yes\nDepends: galetest-libcore\n"})

	mainRepo, secRepo := filepath.Join(dir, "repo/main"), filepath.Join(dir, "repo/security")
	aptfixture.WriteRepo(t, mainRepo, "galetest", hello10, hello11, lib, agent, libcore, core)
	aptfixture.WriteRepo(t, secRepo, "galetest-security", hello12)
	root := aptfixture.NewRoot(t, dir, mainRepo)
	out, err := exec.Command("dpkg", "--root="+root, "--log="+filepath.Join(root, "var/log/dpkg.log"), "-i", hello10, lib, agent, libcore, core).CombinedOutput()
	if err != nil {
		t.Fatalf("installing the base packages into the root: %v\n%s", err, out)
	}

	work := filepath.Join(dir, "work")
	must(t, os.MkdirAll(work, 0o755))
	reg := capability.New()
	New(Options{Root: root, WorkDir: work}).Register(reg)

	// The scan reads the repository through apt: the suite is the origin.
	res := run(t, reg, agentproto.CommandPatchScan, agentproto.PatchScan{Refresh: true})
	if res.Status != agentproto.ResultCompleted {
		t.Fatalf("scan: %s: %s\n%s\n%s", res.Status, res.Error, res.Stdout, res.Stderr)
	}
	scan := decodeResult[agentproto.PatchScanResult](t, res)
	want := agentproto.PackageUpdate{Name: "galetest-hello", Architecture: "all", InstalledVersion: "1.0-1", AvailableVersion: "1.1-1",
		Origin: "galetest", Summary: "galetest-hello test package"}
	if scan.Manager != agentproto.ManagerApt || len(scan.Updates) != 1 || scan.Updates[0] != want || scan.Installed != 5 || scan.RebootRequired {
		t.Fatalf("scan = %+v, want only %+v of 5 installed", scan, want)
	}

	// A security suite offering a newer version makes the update a security one.
	aptfixture.SetSources(t, root, mainRepo, secRepo)
	must(t, os.WriteFile(filepath.Join(root, "var/run/reboot-required"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(root, "var/run/reboot-required.pkgs"), []byte("linux-image-6.1\nlinux-image-6.1\n"), 0o644))
	scan = decodeResult[agentproto.PatchScanResult](t, run(t, reg, agentproto.CommandPatchScan, agentproto.PatchScan{Refresh: true}))
	if len(scan.Updates) != 1 || scan.Updates[0].AvailableVersion != "1.2-1" || scan.Updates[0].Origin != "galetest-security" || !scan.Updates[0].Security {
		t.Fatalf("scan with the security suite = %+v", scan.Updates)
	}
	if !scan.RebootRequired || len(scan.RebootPackages) != 1 || scan.RebootPackages[0] != "linux-image-6.1" {
		t.Errorf("reboot = %v %v, want true [linux-image-6.1]", scan.RebootRequired, scan.RebootPackages)
	}
	must(t, os.Remove(filepath.Join(root, "var/run/reboot-required")))

	// Without a refresh a scan writes nothing, not even apt's binary cache or a lock file.
	for _, cache := range []string{"pkgcache.bin", "srcpkgcache.bin"} {
		os.Remove(filepath.Join(root, "var/cache/apt", cache))
	}
	before := snapshot(t, root)
	if res := run(t, reg, agentproto.CommandPatchScan, agentproto.PatchScan{}); res.Status != agentproto.ResultCompleted {
		t.Fatalf("scan without refresh: %s %q", res.Status, res.Error)
	}
	if after := snapshot(t, root); !maps.Equal(before, after) {
		t.Errorf("a scan without refresh changed the root:\nbefore %v\nafter  %v", before, after)
	}

	t.Run("bad names are refused before anything runs", func(t *testing.T) {
		for _, pv := range []agentproto.PackageVersion{{Name: "foo;rm", Version: "1.0"}, {Name: "-o", Version: "1.0"}, {Name: "galetest-hello", Version: "-o"}} {
			res := run(t, reg, agentproto.CommandPatchInstall, agentproto.PatchInstall{
				Packages: []agentproto.PackageVersion{{Name: "galetest-hello", Version: "1.1-1"}, pv}})
			pi := decodeResult[agentproto.PatchInstallResult](t, res)
			if res.Status != agentproto.ResultFailed || res.Stdout != "" || pi.Packages[1].Status != agentproto.PackageFailed ||
				!strings.Contains(pi.Packages[1].Error, "not a valid") || pi.Packages[0].Status != agentproto.PackageFailed {
				t.Errorf("%+v: %s %q stdout %q, %+v", pv, res.Status, res.Error, res.Stdout, pi.Packages)
			}
		}
		if v := aptfixture.RootVersion(t, root, "galetest-hello"); v != "1.0-1" {
			t.Errorf("installed %q after refused requests", v)
		}
	})

	patch := func(rollback bool, pvs ...agentproto.PackageVersion) (agentproto.CommandResult, agentproto.PatchInstallResult) {
		t.Helper()
		res := run(t, reg, agentproto.CommandPatchInstall, agentproto.PatchInstall{Packages: pvs, Rollback: rollback})
		return res, decodeResult[agentproto.PatchInstallResult](t, res)
	}
	hello := func(v string) agentproto.PackageVersion {
		return agentproto.PackageVersion{Name: "galetest-hello", Version: v}
	}

	t.Run("install, refuse, roll back", func(t *testing.T) {
		res, pi := patch(false, hello("1.1-1"))
		if res.Status != agentproto.ResultCompleted || pi.Packages[0] != (agentproto.PackageOutcome{Name: "galetest-hello", Version: "1.1-1",
			PreviousVersion: "1.0-1", Status: agentproto.PackageInstalled}) || !strings.Contains(res.Stdout, "apt-get") {
			t.Fatalf("install 1.1-1: %s %q %+v\n%s", res.Status, res.Error, pi.Packages, res.Stderr)
		}
		if v := aptfixture.RootVersion(t, root, "galetest-hello"); v != "1.1-1" {
			t.Fatalf("root has %q after installing 1.1-1", v)
		}
		if _, err := os.Stat(filepath.Join(root, "var/log/apt/galetest-history.log")); err != nil {
			t.Errorf("apt did not follow the root's configuration: %v", err)
		}

		res, pi = patch(false, hello("1.0-1"))
		if res.Status != agentproto.ResultFailed || pi.Packages[0].Status != agentproto.PackageFailed || !strings.Contains(pi.Packages[0].Error, "older") {
			t.Errorf("older version without rollback: %s %+v", res.Status, pi.Packages)
		}
		res, pi = patch(true, hello("1.2-1"))
		if res.Status != agentproto.ResultFailed || !strings.Contains(pi.Packages[0].Error, "not older") {
			t.Errorf("newer version with rollback: %s %+v", res.Status, pi.Packages)
		}
		if v := aptfixture.RootVersion(t, root, "galetest-hello"); v != "1.1-1" {
			t.Fatalf("root has %q after refused installs", v)
		}

		res, pi = patch(true, hello("1.0-1"))
		if res.Status != agentproto.ResultCompleted || pi.Packages[0].Status != agentproto.PackageInstalled || pi.Packages[0].PreviousVersion != "1.1-1" {
			t.Fatalf("rollback: %s %q %+v", res.Status, res.Error, pi.Packages)
		}
		if v := aptfixture.RootVersion(t, root, "galetest-hello"); v != "1.0-1" {
			t.Fatalf("root has %q after the rollback", v)
		}

		res, pi = patch(false, hello("1.0-1"))
		if res.Status != agentproto.ResultCompleted || pi.Packages[0].Status != agentproto.PackageSkipped {
			t.Errorf("installed version again: %s %+v", res.Status, pi.Packages)
		}
	})

	t.Run("one bad package does not fail the others", func(t *testing.T) {
		res, pi := patch(false, hello("1.1-1"), agentproto.PackageVersion{Name: "galetest-lib", Version: "9.9-1"},
			agentproto.PackageVersion{Name: "galetest-absent", Version: "1.0"})
		if res.Status != agentproto.ResultFailed || pi.Packages[0].Status != agentproto.PackageInstalled ||
			pi.Packages[1].Status != agentproto.PackageFailed || !strings.Contains(pi.Packages[1].Error, "9.9-1") ||
			pi.Packages[2].Error != "the package is not installed" {
			t.Fatalf("%s %q %+v", res.Status, res.Error, pi.Packages)
		}
		if v := aptfixture.RootVersion(t, root, "galetest-hello"); v != "1.1-1" {
			t.Fatalf("root has %q", v)
		}
	})

	t.Run("software install checks the checksum", func(t *testing.T) {
		file, err := os.ReadFile(hello12)
		must(t, err)
		sum := sha256.Sum256(file)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(file) }))
		defer srv.Close()
		install := func(name, sha, typ string) (agentproto.CommandResult, agentproto.SoftwareInstallResult) {
			res := run(t, reg, agentproto.CommandSoftwareInstall, agentproto.SoftwareInstall{URL: srv.URL + "/hello.deb", SHA256: sha,
				SizeBytes: int64(len(file)), FileType: typ, Name: name, Version: "1.2-1"})
			var out agentproto.SoftwareInstallResult
			if res.Result != nil {
				out = decodeResult[agentproto.SoftwareInstallResult](t, res)
			}
			return res, out
		}
		wrong := strings.Repeat("ab", 32)
		res, _ := install("galetest-hello", wrong, agentproto.FileDeb)
		if res.Status != agentproto.ResultFailed || res.Error != fmt.Sprintf("checksum mismatch: expected %s, got %x", wrong, sum) {
			t.Errorf("wrong checksum: %s %q", res.Status, res.Error)
		}
		res, _ = install("galetest-lib", hex.EncodeToString(sum[:]), agentproto.FileDeb)
		if res.Status != agentproto.ResultFailed || !strings.Contains(res.Error, `holds the package "galetest-hello"`) {
			t.Errorf("wrong name: %s %q", res.Status, res.Error)
		}
		res, _ = install("galetest-hello", hex.EncodeToString(sum[:]), agentproto.FileMSI)
		if res.Status != agentproto.ResultFailed || res.Error != "file type msi cannot be installed on linux" {
			t.Errorf("msi: %s %q", res.Status, res.Error)
		}
		if v := aptfixture.RootVersion(t, root, "galetest-hello"); v != "1.1-1" {
			t.Fatalf("root has %q after refused installs", v)
		}

		res, si := install("galetest-hello", strings.ToUpper(hex.EncodeToString(sum[:])), agentproto.FileDeb)
		if res.Status != agentproto.ResultCompleted || si != (agentproto.SoftwareInstallResult{Name: "galetest-hello", Version: "1.2-1",
			PreviousVersion: "1.1-1", SHA256: hex.EncodeToString(sum[:])}) {
			t.Fatalf("install: %s %q %+v\n%s", res.Status, res.Error, si, res.Stderr)
		}
		if v := aptfixture.RootVersion(t, root, "galetest-hello"); v != "1.2-1" {
			t.Fatalf("root has %q after the install", v)
		}
		if left, _ := os.ReadDir(work); len(left) != 0 {
			t.Errorf("the work directory keeps %d entries", len(left))
		}
	})

	t.Run("uninstall", func(t *testing.T) {
		uninstall := func(name, version string) (agentproto.CommandResult, agentproto.SoftwareUninstallResult) {
			res := run(t, reg, agentproto.CommandSoftwareUninstall, agentproto.SoftwareUninstall{Name: name, Version: version})
			return res, decodeResult[agentproto.SoftwareUninstallResult](t, res)
		}
		for _, c := range []struct{ name, version, reason string }{
			{"bash", "", "protected"},
			{"gale-agent", "", "protected"},
			{"galetest-core", "", "essential"},
			{"galetest-libcore", "", "apt refuses to remove galetest-libcore"},
			{"galetest-lib", "", "would also remove gale-agent, which is protected"},
			{"galetest-hello", "1.1-1", "installed version is 1.2-1"},
		} {
			res, _ := uninstall(c.name, c.version)
			if res.Status != agentproto.ResultFailed || !strings.Contains(res.Error, c.reason) {
				t.Errorf("uninstall %s: %s %q, want failed %q", c.name, res.Status, res.Error, c.reason)
			}
		}
		for _, p := range []string{"gale-agent", "galetest-lib", "galetest-core", "galetest-libcore", "galetest-hello"} {
			if aptfixture.RootVersion(t, root, p) == "" {
				t.Errorf("%s was removed by a refused uninstall", p)
			}
		}
		res, u := uninstall("galetest-hello", "1.2-1")
		if res.Status != agentproto.ResultCompleted || u != (agentproto.SoftwareUninstallResult{Name: "galetest-hello", Version: "1.2-1", Status: agentproto.PackageRemoved}) {
			t.Fatalf("uninstall: %s %q %+v", res.Status, res.Error, u)
		}
		if v := aptfixture.RootVersion(t, root, "galetest-hello"); v != "" {
			t.Fatalf("root still has galetest-hello %s", v)
		}
		res, u = uninstall("galetest-hello", "")
		if res.Status != agentproto.ResultCompleted || u.Status != agentproto.PackageSkipped {
			t.Errorf("uninstall of a package not installed: %s %q %+v", res.Status, res.Error, u)
		}
	})
}

// TestScanHost scans the machine the test runs on, read-only.
func TestScanHost(t *testing.T) {
	aptfixture.NeedAptTools(t)
	if _, err := os.Stat("/var/lib/dpkg/status"); err != nil {
		t.Skip("this machine has no dpkg database")
	}
	aptfixture.HostUnchanged(t)
	reg := capability.New()
	New(Options{Root: "/", WorkDir: t.TempDir()}).Register(reg)
	res := run(t, reg, agentproto.CommandPatchScan, agentproto.PatchScan{})
	if res.Status != agentproto.ResultCompleted {
		t.Fatalf("scan: %s %q\n%s", res.Status, res.Error, res.Stderr)
	}
	scan := decodeResult[agentproto.PatchScanResult](t, res)
	if scan.Manager != agentproto.ManagerApt || scan.Installed == 0 || scan.Updates == nil {
		t.Fatalf("scan = %+v", scan)
	}
	for _, u := range scan.Updates {
		c, err := pkgversion.Compare(agentproto.ManagerApt, u.InstalledVersion, u.AvailableVersion)
		if u.Name == "" || err != nil || c >= 0 {
			t.Errorf("update %+v: compare %d %v", u, c, err)
		}
	}
	t.Logf("%d packages installed, %d updates", scan.Installed, len(scan.Updates))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
