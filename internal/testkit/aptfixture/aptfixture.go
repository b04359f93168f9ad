// Package aptfixture builds throwaway Debian system roots for tests: small packages built
// with dpkg-deb, flat file repositories, and a root whose dpkg database and apt sources are
// its own, so that tests install and remove packages without touching the host's.
package aptfixture

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// NeedAptTools skips a test that needs the Debian tools, and root for dpkg.
func NeedAptTools(t testing.TB) {
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

// HostUnchanged fails the test when the host's package state changed during it.
func HostUnchanged(t testing.TB) {
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

// Deb describes a small package to build.
type Deb struct {
	Name, Version string
	Extra         string // more control fields, each ending in a newline
}

// BuildDeb builds a small package with dpkg-deb and returns its path.
func BuildDeb(t testing.TB, dir string, d Deb) string {
	t.Helper()
	src := filepath.Join(dir, "src", d.Name+"_"+d.Version)
	must(t, os.MkdirAll(filepath.Join(src, "DEBIAN"), 0o755))
	must(t, os.MkdirAll(filepath.Join(src, "usr/share", d.Name), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "usr/share", d.Name, "version"), []byte(d.Version+"\n"), 0o644))
	control := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: Test <test@example.com>\n%sDescription: %s test package\n a package for tests\n",
		d.Name, d.Version, d.Extra, d.Name)
	must(t, os.WriteFile(filepath.Join(src, "DEBIAN/control"), []byte(control), 0o644))
	deb := filepath.Join(dir, d.Name+"_"+d.Version+"_all.deb")
	out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", src, deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb --build: %v\n%s", err, out)
	}
	return deb
}

// WriteRepo writes a flat apt repository of debs with a Release file naming suite.
func WriteRepo(t testing.TB, dir, suite string, debs ...string) {
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

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// NewRoot creates an empty Debian system root with its apt sources.
func NewRoot(t testing.TB, dir string, sources ...string) string {
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
	SetSources(t, root, sources...)
	return root
}

// SetSources points the root's apt at flat file repositories.
func SetSources(t testing.TB, root string, repos ...string) {
	var b strings.Builder
	for _, r := range repos {
		fmt.Fprintf(&b, "deb [trusted=yes] file:%s ./\n", r)
	}
	must(t, os.WriteFile(filepath.Join(root, "etc/apt/sources.list"), []byte(b.String()), 0o644))
}

// RootVersion reads a package's version from the root's dpkg database ("" when not installed).
func RootVersion(t testing.TB, root, name string) string {
	t.Helper()
	out, _ := exec.Command("dpkg-query", "--admindir="+filepath.Join(root, "var/lib/dpkg"), "-W", "-f", "${db:Status-Abbrev}${Version}", name).Output()
	s := string(out)
	if !strings.HasPrefix(s, "ii ") {
		return ""
	}
	return strings.TrimPrefix(s, "ii ")
}
