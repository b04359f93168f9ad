// Package packaging builds the release artifacts with make dist and uses them as a release
// would be used: lints the packages, installs, upgrades and removes them in throwaway system
// roots, and installs the server from its package and an endpoint with the agent one-liner.
package packaging

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The two releases the tests build: v1, a pre-release, and v2 its release, so that an
// upgrade from v1 to v2 also checks that package versions sort a pre-release first.
const (
	v1 = "1.0.0-rc.1"
	v2 = "1.0.0"
)

// pkgVersion is a version as the packages carry it (see PKG_VERSION in the Makefile).
var pkgVersion = map[string]string{v1: "1.0.0~rc.1-1", v2: "1.0.0-1"}

// dist is what make dist built for a version, for this machine's architecture only.
type dist struct {
	dir, version string
	// elapsed is how long make dist took.
	elapsed time.Duration
}

func (d dist) path(rel string) string { return filepath.Join(d.dir, rel) }

// deb and rpm name the packages of pkg (gale or gale-agent).
func (d dist) deb(pkg string) string {
	return d.path(fmt.Sprintf("packages/%s_%s_%s.deb", pkg, pkgVersion[d.version], runtime.GOARCH))
}

func (d dist) rpm(pkg string) string {
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	return d.path(fmt.Sprintf("packages/%s-%s.%s.rpm", pkg, pkgVersion[d.version], arch))
}

var (
	distMu sync.Mutex
	dists  = map[string]*dist{}
	// workDir holds the builds; removed by TestMain.
	workDir string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gale-packaging-")
	if err != nil {
		panic(err)
	}
	workDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build runs make dist for version once per test process.
func build(t *testing.T, version string) dist {
	t.Helper()
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("packages are built for Linux on amd64 and arm64")
	}
	needTools(t, "make", "go")
	distMu.Lock()
	defer distMu.Unlock()
	if d, ok := dists[version]; ok {
		if d.dir == "" {
			t.Fatal("make dist failed earlier")
		}
		return *d
	}
	d := &dist{version: version}
	dists[version] = d
	dir := filepath.Join(workDir, version)
	start := time.Now()
	cmd := exec.Command("make", "--no-print-directory", "dist", "PLATFORMS=linux/"+runtime.GOARCH, "DIST="+dir, "VERSION="+version)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make dist VERSION=%s: %v\n%s", version, err, out)
	}
	d.dir, d.elapsed = dir, time.Since(start)
	t.Logf("make dist VERSION=%s PLATFORMS=linux/%s took %s", version, runtime.GOARCH, d.elapsed.Round(time.Second))
	return *d
}

// onSQLitePass skips a test that does not depend on the database in the PostgreSQL pass of
// make test: the SQLite pass ran it already.
func onSQLitePass(t *testing.T) {
	t.Helper()
	if os.Getenv("TEST_DATABASE_URL") != "" {
		t.Skip("does not depend on the database: the SQLite pass runs it")
	}
}

func TestDistBuildsStaticVersionedBinariesWithChecksums(t *testing.T) {
	onSQLitePass(t)
	d := build(t, v1)

	sums, err := os.ReadFile(d.path("SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	check := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	check.Dir = d.dir
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum --check: %v\n%s", err, out)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		if _, name, ok := strings.Cut(line, "  "); ok {
			listed[name] = true
		}
	}
	server, agent := "gale-linux-"+runtime.GOARCH, "agents/gale-agent-linux-"+runtime.GOARCH
	for _, name := range []string{server, agent, rel(t, d, d.deb("gale")), rel(t, d, d.deb("gale-agent")),
		rel(t, d, d.rpm("gale")), rel(t, d, d.rpm("gale-agent"))} {
		if !listed[name] {
			t.Errorf("SHA256SUMS does not list %s:\n%s", name, sums)
		}
	}

	for _, bin := range []struct{ path, want string }{{server, "gale " + v1}, {agent, v1}} {
		f, err := elf.Open(d.path(bin.path))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s is dynamically linked", bin.path)
			}
		}
		if f.Section(".symtab") != nil || f.Section(".debug_info") != nil {
			t.Errorf("%s is not stripped", bin.path)
		}
		f.Close()
		out, err := exec.Command(d.path(bin.path), "version").Output()
		if err != nil || strings.TrimSpace(string(out)) != bin.want {
			t.Errorf("%s version = %q, %v; want %q", bin.path, out, err, bin.want)
		}
		info, _ := os.Stat(d.path(bin.path))
		t.Logf("%s: %.1f MiB", bin.path, float64(info.Size())/(1<<20))
	}
	if out, err := exec.Command(d.path(server), "--version").Output(); err != nil || !strings.Contains(string(out), v1) {
		t.Errorf("gale --version = %q, %v", out, err)
	}
}

func rel(t *testing.T, d dist, path string) string {
	r, err := filepath.Rel(d.dir, path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The Debian packages pass lintian, and the RPM packages rpmlint, without errors; the
// overrides and filters the packages ship say why for each one they silence.
func TestPackagesPassLintianAndRpmlint(t *testing.T) {
	onSQLitePass(t)
	needTools(t, "lintian", "rpmlint", "rpm")
	needRoots(t)
	d := build(t, v1)
	t.Run("lintian", func(t *testing.T) {
		t.Parallel()
		out, err := exec.Command("lintian", "--tag-display-limit", "0", d.deb("gale"), d.deb("gale-agent")).CombinedOutput()
		t.Logf("lintian:\n%s", out)
		if err != nil || hasLine(string(out), "E: ") {
			t.Fatalf("lintian found errors (%v)", err)
		}
	})
	t.Run("rpmlint", func(t *testing.T) {
		t.Parallel()
		// rpmlint checks the installed packages: it cannot unpack these RPMs safely, as
		// nfpm names the files of their payload with absolute paths, which cpio would write
		// to the machine's own /. Installed, their files are where rpmlint looks.
		r := newRoot(t, d.dir, packagingDir(t))
		r.run("rpm --install --nodeps " + d.rpm("gale") + " " + d.rpm("gale-agent"))
		out, err := r.try("rpmlint --rpmlintrc " + filepath.Join(packagingDir(t), "rpmlintrc") + " --installed gale gale-agent")
		t.Logf("rpmlint:\n%s", out)
		if err != nil || !strings.Contains(out, " 0 errors") {
			t.Fatalf("rpmlint found errors (%v)", err)
		}
	})
}

func packagingDir(t *testing.T) string {
	dir, err := filepath.Abs("../../packaging")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func hasLine(out, prefix string) bool {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			return true
		}
	}
	return false
}

// installed checks what the two packages of version installed; unitDir is where this
// package format puts systemd units.
func installed(t *testing.T, r *sysroot, version, unitDir string) {
	t.Helper()
	if out := strings.TrimSpace(r.run("gale version; gale-agent version")); out != "gale "+version+"\n"+version {
		t.Fatalf("installed versions: %q", out)
	}
	for script, want := range map[string]string{
		"getent passwd gale | cut -d: -f6":                               "/var/lib/gale",
		"stat -c '%U:%G %a' /var/lib/gale":                               "gale:gale 750",
		"stat -c '%U:%G %a' /etc/gale/gale.env":                          "root:gale 640",
		"stat -c '%U:%G %a' /etc/gale/secrets.env":                       "root:gale 640",
		"grep -c '^JWT_SECRET=.\\{64\\}$' /etc/gale/secrets.env":         "1",
		"grep -c '^APP_ENCRYPTION_KEY=.\\{44\\}$' /etc/gale/secrets.env": "1",
		"ls /usr/lib/gale/agents":                                        version,
		"ls /usr/lib/gale/agents/" + version:                             "gale-agent-linux-" + runtime.GOARCH,
		"grep -h '^ExecStart=' " + unitDir + "/gale.service " + unitDir + "/gale-agent.service": "ExecStart=/usr/bin/gale serve\n" +
			"ExecStart=/usr/bin/gale-agent run --config /etc/gale-agent/agent.json",
	} {
		if got := strings.TrimSpace(r.run(script)); got != want {
			t.Errorf("%s = %q, want %q", script, got, want)
		}
	}
}

func TestDebInstallUpgradeRemovePurge(t *testing.T) {
	onSQLitePass(t)
	needTools(t, "dpkg")
	needRoots(t)
	d1, d2 := build(t, v1), build(t, v2)
	r := newRoot(t, d1.dir, d2.dir)

	out := r.run("dpkg --install " + d1.deb("gale") + " " + d1.deb("gale-agent"))
	if !strings.Contains(out, "set PUBLIC_URL in /etc/gale/gale.env") || !strings.Contains(out, "gale-agent enroll") {
		t.Errorf("the installation tells nothing of what to do next:\n%s", out)
	}
	installed(t, r, v1, "/lib/systemd/system")
	for _, unit := range []string{"gale.service", "gale-agent.service"} {
		if !r.exists("/etc/systemd/system/multi-user.target.wants/" + unit) {
			t.Errorf("%s is not enabled", unit)
		}
	}
	secrets := r.run("cat /etc/gale/secrets.env")
	r.run("echo PUBLIC_URL=https://gale.example.com >>/etc/gale/gale.env")

	r.run("dpkg --compare-versions " + pkgVersion[v2] + " gt " + pkgVersion[v1])
	r.run("dpkg --install " + d2.deb("gale") + " " + d2.deb("gale-agent"))
	installed(t, r, v2, "/lib/systemd/system")
	if got := r.run("cat /etc/gale/secrets.env"); got != secrets {
		t.Error("the upgrade generated new secrets")
	}
	if got := r.run("tail -n 1 /etc/gale/gale.env"); got != "PUBLIC_URL=https://gale.example.com\n" {
		t.Errorf("the upgrade lost the operator's setting: %q", got)
	}

	r.run("dpkg --remove gale gale-agent")
	for _, path := range []string{"/usr/bin/gale", "/usr/bin/gale-agent", "/usr/lib/gale", "/lib/systemd/system/gale.service"} {
		if r.exists(path) {
			t.Errorf("%s is left after removal", path)
		}
	}
	for _, path := range []string{"/etc/gale/gale.env", "/etc/gale/secrets.env", "/var/lib/gale"} {
		if !r.exists(path) {
			t.Errorf("removal (without purge) took %s", path)
		}
	}
	r.run("dpkg --purge gale gale-agent")
	for _, path := range []string{"/etc/gale", "/var/lib/gale", "/etc/gale-agent", "/usr/share/doc/gale",
		"/etc/systemd/system/multi-user.target.wants/gale.service", "/etc/systemd/system/gale.service"} {
		if r.exists(path) {
			t.Errorf("%s is left after purge", path)
		}
	}
	if out := r.run("dpkg-query --show --showformat '${db:Status-Status}\\n' gale gale-agent 2>&1 || true"); strings.Contains(out, "installed") {
		t.Errorf("dpkg still knows the packages: %s", out)
	}
}

func TestRPMInstallUpgradeErase(t *testing.T) {
	onSQLitePass(t)
	needTools(t, "rpm")
	needRoots(t)
	d1, d2 := build(t, v1), build(t, v2)
	r := newRoot(t, d1.dir, d2.dir)
	// This machine's RPM database lists none of the packages RPM systems have (shadow-utils,
	// systemd): --nodeps; the scripts find the commands on the machine.
	r.run("rpm --install --nodeps " + d1.rpm("gale") + " " + d1.rpm("gale-agent"))
	installed(t, r, v1, "/usr/lib/systemd/system")
	secrets := r.run("cat /etc/gale/secrets.env")
	r.run("echo PUBLIC_URL=https://gale.example.com >>/etc/gale/gale.env")

	// rpm --upgrade refuses a package that is not newer.
	r.run("rpm --upgrade --nodeps " + d2.rpm("gale") + " " + d2.rpm("gale-agent"))
	installed(t, r, v2, "/usr/lib/systemd/system")
	if got := r.run("cat /etc/gale/secrets.env"); got != secrets {
		t.Error("the upgrade generated new secrets")
	}
	if got := r.run("tail -n 1 /etc/gale/gale.env"); got != "PUBLIC_URL=https://gale.example.com\n" {
		t.Errorf("the upgrade lost the operator's setting: %q", got)
	}

	r.run("rpm --erase gale gale-agent")
	for _, path := range []string{"/usr/bin/gale", "/usr/bin/gale-agent", "/usr/lib/gale", "/usr/share/doc/gale",
		"/usr/lib/systemd/system/gale.service", "/etc/gale/gale.env"} {
		if r.exists(path) {
			t.Errorf("%s is left after erase", path)
		}
	}
	// RPM keeps a changed configuration file aside, and what the package did not install:
	// the secrets and the server's state.
	for _, path := range []string{"/etc/gale/gale.env.rpmsave", "/etc/gale/secrets.env", "/var/lib/gale"} {
		if !r.exists(path) {
			t.Errorf("erase took %s", path)
		}
	}
	if out, err := r.try("rpm --query gale gale-agent"); err == nil {
		t.Errorf("rpm still knows the packages: %s", out)
	}
}

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
