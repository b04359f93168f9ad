package packages

import (
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"gale/internal/agent/capability"
	"gale/internal/testkit/aptfixture"
	"gale/internal/wire/agentproto"
)

const testChangelog = `galetest-cl (1.2-1) galetest-security; urgency=high

  * Fix CVE-2026-1111 and CVE-2026-22222.

 -- Test <test@example.com>  Sun, 13 Sep 2026 01:01:01 +0000

galetest-cl (1.1-1) galetest; urgency=medium

  * Fix CVE-2026-1111 again, and CVE-2025-3333.

 -- Test <test@example.com>  Sun, 13 Aug 2026 01:01:01 +0000

galetest-cl (1.0-1) galetest; urgency=low

  * Initial release; not CVE-2024-0001 (too old).

 -- Test <test@example.com>  Sun, 13 Jul 2026 01:01:01 +0000
`

func TestCVEsBetween(t *testing.T) {
	cves, urgency, n := cvesBetween(testChangelog, "1.0-1", "1.2-1", "1.2-1")
	if want := []string{"CVE-2025-3333", "CVE-2026-1111", "CVE-2026-22222"}; !slices.Equal(cves, want) || urgency != "high" || n != 2 {
		t.Fatalf("cvesBetween(1.0-1, 1.2-1) = %v %q %d, want %v high 2", cves, urgency, n, want)
	}
	cves, urgency, n = cvesBetween(testChangelog, "1.1-1", "1.1-1", "1.1-1")
	if len(cves) != 0 || urgency != "" || n != 0 {
		t.Fatalf("cvesBetween(1.1-1, 1.1-1) = %v %q %d, want nothing", cves, urgency, n)
	}
	cves, _, n = cvesBetween(testChangelog, "", "1.1-1", "1.1-1")
	if want := []string{"CVE-2024-0001", "CVE-2025-3333", "CVE-2026-1111"}; !slices.Equal(cves, want) || n != 2 {
		t.Fatalf("cvesBetween(\"\", 1.1-1) = %v %d, want %v 2", cves, n, want)
	}
}

// buildDocDeb builds a package of source galetest-cl: with the changelog in its doc
// directory, or (link set) with its doc directory a link to link's.
func buildDocDeb(t *testing.T, dir, name, version, link string) string {
	t.Helper()
	src := filepath.Join(dir, "src", name+"_"+version)
	must(t, os.MkdirAll(filepath.Join(src, "DEBIAN"), 0o755))
	doc := filepath.Join(src, "usr/share/doc")
	must(t, os.MkdirAll(doc, 0o755))
	if link != "" {
		must(t, os.Symlink(link, filepath.Join(doc, name)))
	} else {
		must(t, os.MkdirAll(filepath.Join(doc, name), 0o755))
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write([]byte(testChangelog))
		must(t, zw.Close())
		must(t, os.WriteFile(filepath.Join(doc, name, "changelog.Debian.gz"), b.Bytes(), 0o644))
	}
	control := "Package: " + name + "\nSource: galetest-cl\nVersion: " + version +
		"\nArchitecture: all\nMaintainer: Test <test@example.com>\nDescription: test\n a test package\n"
	must(t, os.WriteFile(filepath.Join(src, "DEBIAN/control"), []byte(control), 0o644))
	deb := filepath.Join(dir, name+"_"+version+"_all.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", src, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build: %v\n%s", err, out)
	}
	return deb
}

// TestPackageChangelogInThrowawayRoot reads changelogs from a repository of a throwaway root:
// a package holding its changelog, a library whose doc directory links to it (followed),
// and a version the repository does not offer (an error for that package only).
func TestPackageChangelogInThrowawayRoot(t *testing.T) {
	aptfixture.NeedAptTools(t)
	aptfixture.HostUnchanged(t)
	dir := t.TempDir()
	debs := filepath.Join(dir, "debs")
	must(t, os.MkdirAll(debs, 0o755))
	cl := buildDocDeb(t, debs, "galetest-cl", "1.2-1", "")
	lib := buildDocDeb(t, debs, "libgaletest-cl1", "1.2-1", "galetest-cl")
	repo := filepath.Join(dir, "repo/security")
	aptfixture.WriteRepo(t, repo, "galetest-security", cl, lib)
	root := aptfixture.NewRoot(t, dir, repo)
	work := filepath.Join(dir, "work")
	must(t, os.MkdirAll(work, 0o755))
	reg := capability.New()
	New(Options{Root: root, WorkDir: work}).Register(reg)
	if res := run(t, reg, agentproto.CommandPatchScan, agentproto.PatchScan{Refresh: true}); res.Status != agentproto.ResultCompleted {
		t.Fatalf("refresh: %s %s", res.Status, res.Error)
	}
	res := run(t, reg, agentproto.CommandPackageChangelog, agentproto.PackageChangelog{Packages: []agentproto.ChangelogRequest{
		{Name: "libgaletest-cl1", Version: "1.2-1", SinceVersion: "1.1-1"},
		{Name: "galetest-cl", Version: "1.2-1", SinceVersion: "1.0-1"},
		{Name: "galetest-cl", Version: "9.9-1"},
		{Name: "-bad", Version: "1"},
	}})
	if res.Status != agentproto.ResultCompleted {
		t.Fatalf("package_changelog: %s %s\n%s", res.Status, res.Error, res.Stderr)
	}
	got := decodeResult[agentproto.PackageChangelogResult](t, res).Packages
	if len(got) != 4 {
		t.Fatalf("got %d entries, want 4", len(got))
	}
	if want := []string{"CVE-2026-1111", "CVE-2026-22222"}; !slices.Equal(got[0].CVEs, want) || got[0].Urgency != "high" || got[0].Error != "" {
		t.Errorf("libgaletest-cl1 = %+v, want %v urgency high", got[0], want)
	}
	if want := []string{"CVE-2025-3333", "CVE-2026-1111", "CVE-2026-22222"}; !slices.Equal(got[1].CVEs, want) || got[1].Error != "" {
		t.Errorf("galetest-cl = %+v, want %v", got[1], want)
	}
	if got[2].Error == "" || got[3].Error == "" {
		t.Errorf("an unknown version and a bad name should fail alone: %+v %+v", got[2], got[3])
	}
	if files, _ := filepath.Glob(filepath.Join(work, "*")); len(files) != 0 {
		t.Errorf("the work directory keeps %v", files)
	}
}
