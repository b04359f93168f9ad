// Package packaging builds the release artifacts with make dist and uses them as a release
// would be used: lints the packages, installs, upgrades and removes them in throwaway system
// roots, and installs the server from its package and an endpoint with the agent one-liner.
// The tests share two builds, of two versions, made once per test process.
package packaging

import (
	"bufio"
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
