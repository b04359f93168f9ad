package packages

import (
	"bytes"
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
	"gale/internal/agentproto"
	"gale/internal/pkgversion"
)

// needAptTools skips a test that needs the Debian tools, and root for dpkg.
func needAptTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"dpkg", "dpkg-deb", "dpkg-query", "apt-get", "apt-cache"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the apt tests need the Debian package tools", tool)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("dpkg installs into a throwaway root only as root (uid 0)")
	}
}

// hostUnchanged fails the test when the host's package state changed during it.
func hostUnchanged(t *testing.T) {
	t.Helper()
	sum := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			return "missing"
		}
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	paths := []string{"/var/lib/dpkg/status", "/var/log/dpkg.log", "/var/log/apt/history.log", "/var/log/apt/term.log", "/var/log/apt/eipp.log.xz",
		"/var/lib/apt/extended_states", "/var/cache/debconf/config.dat", "/var/cache/debconf/templates.dat"}
	before := map[string]string{}
	for _, p := range paths {
		before[p] = sum(p)
	}
	t.Cleanup(func() {
		for _, p := range paths {
			if got := sum(p); got != before[p] {
				t.Errorf("the host's %s changed during the test", p)
			}
		}
	})
}

type debSpec struct {
	name, version string
	extra         string // more control fields, each ending in a newline
}

// buildDeb builds a small package with dpkg-deb and returns its path.
func buildDeb(t *testing.T, dir string, d debSpec) string {
	t.Helper()
	src := filepath.Join(dir, "src", d.name+"_"+d.version)
	must(t, os.MkdirAll(filepath.Join(src, "DEBIAN"), 0o755))
	must(t, os.MkdirAll(filepath.Join(src, "usr/share", d.name), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "usr/share", d.name, "version"), []byte(d.version+"\n"), 0o644))
	control := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: Test <test@example.com>\n%sDescription: %s test package\n a package for tests\n",
		d.name, d.version, d.extra, d.name)
	must(t, os.WriteFile(filepath.Join(src, "DEBIAN/control"), []byte(control), 0o644))
	deb := filepath.Join(dir, d.name+"_"+d.version+"_all.deb")
	out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", src, deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb --build: %v\n%s", err, out)
	}
	return deb
}

// writeRepo writes a flat apt repository of debs with a Release file naming suite.
func writeRepo(t *testing.T, dir, suite string, debs ...string) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	var pkgs bytes.Buffer
	for _, deb := range debs {
		control, err := exec.Command("dpkg-deb", "-f", deb).Output()
		must(t, err)
		data, err := os.ReadFile(deb)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, filepath.Base(deb)), data, 0o644))
		sum := sha256.Sum256(data)
		fmt.Fprintf(&pkgs, "%sFilename: ./%s\nSize: %d\nSHA256: %x\n\n", control, filepath.Base(deb), len(data), sum)
	}
	must(t, os.WriteFile(filepath.Join(dir, "Packages"), pkgs.Bytes(), 0o644))
	sum := sha256.Sum256(pkgs.Bytes())
	release := fmt.Sprintf("Origin: Galetest\nLabel: Galetest\nSuite: %s\nCodename: %s\nDate: %s\nSHA256:\n %x %d Packages\n",
		suite, suite, time.Now().UTC().Format(time.RFC1123Z), sum, pkgs.Len())
	must(t, os.WriteFile(filepath.Join(dir, "Release"), []byte(release), 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// newRoot creates an empty Debian system root with its apt sources.
func newRoot(t *testing.T, dir string, sources ...string) string {
	t.Helper()
	root := filepath.Join(dir, "root")
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/apt/lists/partial",
		"var/cache/apt/archives/partial", "var/log/apt", "var/run", "etc/apt/apt.conf.d", "etc/apt/sources.list.d", "etc/apt/preferences.d"} {
		must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644))
	// The root's own apt configuration applies: this one renames apt's history log.
	must(t, os.WriteFile(filepath.Join(root, "etc/apt/apt.conf.d/50galetest"), []byte("Dir::Log::History \"galetest-history.log\";\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "var/lib/dpkg/available"), nil, 0o644))
	setSources(t, root, sources...)
	return root
}

func setSources(t *testing.T, root string, repos ...string) {
	var b strings.Builder
	for _, r := range repos {
		fmt.Fprintf(&b, "deb [trusted=yes] file:%s ./\n", r)
	}
	must(t, os.WriteFile(filepath.Join(root, "etc/apt/sources.list"), []byte(b.String()), 0o644))
}

// rootVersion reads a package's version from the root's dpkg database ("" when not installed).
func rootVersion(t *testing.T, root, name string) string {
	t.Helper()
	out, _ := exec.Command("dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "-W", "-f", "${db:Status-Abbrev}${Version}", name).Output()
	s := string(out)
	if !strings.HasPrefix(s, "ii ") {
		return ""
	}
	return strings.TrimPrefix(s, "ii ")
}

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
	needAptTools(t)
	hostUnchanged(t)
	dir := t.TempDir()
	debs := filepath.Join(dir, "debs")
	must(t, os.MkdirAll(debs, 0o755))
	hello10 := buildDeb(t, debs, debSpec{name: "galetest-hello", version: "1.0-1"})
	hello11 := buildDeb(t, debs, debSpec{name: "galetest-hello", version: "1.1-1"})
	hello12 := buildDeb(t, debs, debSpec{name: "galetest-hello", version: "1.2-1"})
	lib := buildDeb(t, debs, debSpec{name: "galetest-lib", version: "1.0-1"})
	// Packages whose removal must be refused: one the agent protects, one essential, each
	// depending on a library that is removable by itself.
	agent := buildDeb(t, debs, debSpec{name: "gale-agent", version: "1.0-1", extra: "Depends: galetest-lib\n"})
	libcore := buildDeb(t, debs, debSpec{name: "galetest-libcore", version: "1.0-1"})
	core := buildDeb(t, debs, debSpec{name: "galetest-core", version: "1.0-1", extra: "Essential: yes\nDepends: galetest-libcore\n"})

	mainRepo, secRepo := filepath.Join(dir, "repo/main"), filepath.Join(dir, "repo/security")
	writeRepo(t, mainRepo, "galetest", hello10, hello11, lib, agent, libcore, core)
	writeRepo(t, secRepo, "galetest-security", hello12)
	root := newRoot(t, dir, mainRepo)
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
	setSources(t, root, mainRepo, secRepo)
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
		if v := rootVersion(t, root, "galetest-hello"); v != "1.0-1" {
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
		if v := rootVersion(t, root, "galetest-hello"); v != "1.1-1" {
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
		if v := rootVersion(t, root, "galetest-hello"); v != "1.1-1" {
			t.Fatalf("root has %q after refused installs", v)
		}

		res, pi = patch(true, hello("1.0-1"))
		if res.Status != agentproto.ResultCompleted || pi.Packages[0].Status != agentproto.PackageInstalled || pi.Packages[0].PreviousVersion != "1.1-1" {
			t.Fatalf("rollback: %s %q %+v", res.Status, res.Error, pi.Packages)
		}
		if v := rootVersion(t, root, "galetest-hello"); v != "1.0-1" {
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
		if v := rootVersion(t, root, "galetest-hello"); v != "1.1-1" {
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
		if v := rootVersion(t, root, "galetest-hello"); v != "1.1-1" {
			t.Fatalf("root has %q after refused installs", v)
		}

		res, si := install("galetest-hello", strings.ToUpper(hex.EncodeToString(sum[:])), agentproto.FileDeb)
		if res.Status != agentproto.ResultCompleted || si != (agentproto.SoftwareInstallResult{Name: "galetest-hello", Version: "1.2-1",
			PreviousVersion: "1.1-1", SHA256: hex.EncodeToString(sum[:])}) {
			t.Fatalf("install: %s %q %+v\n%s", res.Status, res.Error, si, res.Stderr)
		}
		if v := rootVersion(t, root, "galetest-hello"); v != "1.2-1" {
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
			if rootVersion(t, root, p) == "" {
				t.Errorf("%s was removed by a refused uninstall", p)
			}
		}
		res, u := uninstall("galetest-hello", "1.2-1")
		if res.Status != agentproto.ResultCompleted || u != (agentproto.SoftwareUninstallResult{Name: "galetest-hello", Version: "1.2-1", Status: agentproto.PackageRemoved}) {
			t.Fatalf("uninstall: %s %q %+v", res.Status, res.Error, u)
		}
		if v := rootVersion(t, root, "galetest-hello"); v != "" {
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
	needAptTools(t)
	if _, err := os.Stat("/var/lib/dpkg/status"); err != nil {
		t.Skip("this machine has no dpkg database")
	}
	hostUnchanged(t)
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
