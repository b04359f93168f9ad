// Package rpmfixture builds throwaway RPM system roots for tests: small packages built with
// rpmbuild, repositories made by createrepo_c, and a root with its own RPM database and dnf
// repositories, so that tests install and remove packages with dnf without touching the
// host's.
package rpmfixture

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// NeedDnfTools skips a test that needs dnf, rpm, rpmbuild and createrepo_c, and root.
func NeedDnfTools(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"dnf", "rpm", "rpmbuild", "createrepo_c"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the dnf tests need the packages dnf, rpm and createrepo-c", tool)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("dnf installs into a throwaway root only as root (uid 0)")
	}
}

// HostUnchanged fails the test when the host's RPM database, dnf state or logs changed.
func HostUnchanged(t testing.TB) {
	t.Helper()
	home, _ := os.UserHomeDir()
	var paths []string
	for _, dir := range []string{"/var/lib/rpm", "/var/lib/dnf", "/var/cache/dnf", filepath.Join(home, ".rpmdb")} {
		entries, _ := os.ReadDir(dir)
		paths = append(paths, dir)
		for _, e := range entries {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	paths = append(paths, "/var/log/dnf.log", "/var/log/dnf.rpm.log")
	sum := func(path string) string {
		info, err := os.Stat(path)
		if err != nil {
			return "missing"
		}
		if info.IsDir() {
			entries, _ := os.ReadDir(path)
			return fmt.Sprint("dir ", len(entries))
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "unreadable"
		}
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
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

// RPM describes a small noarch package to build.
type RPM struct {
	Name, Version, Release string
	// Requires lists packages it depends on.
	Requires []string
}

// Build builds a small package with rpmbuild into dir and returns its path.
func Build(t testing.TB, dir string, p RPM) string {
	t.Helper()
	top := filepath.Join(dir, "rpmbuild")
	var requires strings.Builder
	for _, r := range p.Requires {
		fmt.Fprintf(&requires, "Requires: %s\n", r)
	}
	spec := fmt.Sprintf(`Name: %[1]s
Version: %[2]s
Release: %[3]s
Summary: %[1]s test package
License: MIT
BuildArch: noarch
%[4]s
%%description
A package for tests.
%%install
mkdir -p %%{buildroot}/usr/share/%[1]s
echo %[2]s-%[3]s > %%{buildroot}/usr/share/%[1]s/version
%%files
/usr/share/%[1]s/version
`, p.Name, p.Version, p.Release, requires.String())
	specPath := filepath.Join(dir, p.Name+"-"+p.Version+"-"+p.Release+".spec")
	must(t, os.WriteFile(specPath, []byte(spec), 0o644))
	out, err := exec.Command("rpmbuild", "--define", "_topdir "+top, "--define", "_dbpath "+filepath.Join(dir, "builddb"),
		"--quiet", "-bb", specPath).CombinedOutput()
	if err != nil {
		t.Fatalf("rpmbuild: %v\n%s", err, out)
	}
	built := filepath.Join(top, "RPMS/noarch", fmt.Sprintf("%s-%s-%s.noarch.rpm", p.Name, p.Version, p.Release))
	dst := filepath.Join(dir, filepath.Base(built))
	must(t, os.Rename(built, dst))
	return dst
}

// WriteRepo writes a repository of rpms with createrepo_c.
func WriteRepo(t testing.TB, dir string, rpms ...string) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	for _, r := range rpms {
		data, err := os.ReadFile(r)
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, filepath.Base(r)), data, 0o644))
	}
	if out, err := exec.Command("createrepo_c", "-q", "--update", dir).CombinedOutput(); err != nil {
		t.Fatalf("createrepo_c: %v\n%s", err, out)
	}
}

// NewRoot creates a system root with an empty RPM database, dnf repositories pointing at
// repos (unsigned, as test repositories are), and packages installed from files.
func NewRoot(t testing.TB, dir string, repos []string, installed ...string) string {
	t.Helper()
	root := filepath.Join(dir, "root")
	must(t, os.MkdirAll(filepath.Join(root, "etc/yum.repos.d"), 0o755))
	if out, err := exec.Command("rpm", "--root", root, "--initdb").CombinedOutput(); err != nil {
		t.Fatalf("rpm --initdb: %v\n%s", err, out)
	}
	SetRepos(t, root, repos...)
	if len(installed) > 0 {
		args := append([]string{"--root", root, "-i", "--nodeps"}, installed...)
		if out, err := exec.Command("rpm", args...).CombinedOutput(); err != nil {
			t.Fatalf("install the base packages into the root: %v\n%s", err, out)
		}
	}
	return root
}

// SetRepos replaces the root's dnf repositories.
func SetRepos(t testing.TB, root string, repos ...string) {
	t.Helper()
	var b strings.Builder
	for i, r := range repos {
		fmt.Fprintf(&b, "[galetest%d]\nname=galetest %d\nbaseurl=file://%s\ngpgcheck=0\nenabled=1\nmetadata_expire=0\n\n", i, i, r)
	}
	must(t, os.WriteFile(filepath.Join(root, "etc/yum.repos.d/galetest.repo"), []byte(b.String()), 0o644))
}

// RootVersion reads a package's version-release from the root's RPM database ("" when not
// installed).
func RootVersion(t testing.TB, root, name string) string {
	t.Helper()
	out, err := exec.Command("rpm", "--root", root, "-q", "--qf", "%{VERSION}-%{RELEASE}", name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
