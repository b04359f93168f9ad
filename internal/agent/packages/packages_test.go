package packages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
)

func TestParseAptSimulation(t *testing.T) {
	out := `Reading package lists...
Inst base-files [12.4+deb12u11] (12.4+deb12u15 Debian:12.15/oldstable [amd64])
Conf base-files (12.4+deb12u15 Debian:12.15/oldstable [amd64])
Inst libgcrypt20 [1.10.1-3] (1.10.1-3+deb12u1 Debian:12.15/oldstable, Debian-Security:12/oldstable-security [amd64]) []
Inst linux-image-amd64 [6.1.76-1] (6.1.90-1 Debian-Security:12/oldstable-security [amd64])
Inst linux-image-6.1.0-21-amd64 (6.1.90-1 Debian-Security:12/oldstable-security [amd64])
Inst libc6:i386 [2.36-9+deb12u3] (2.36-9+deb12u4 Debian:12.5/stable [i386])
Remv old-thing [1.0]
`
	got := parseAptSimulation([]byte(out))
	want := []agentproto.PackageUpdate{
		{Name: "base-files", Architecture: "amd64", InstalledVersion: "12.4+deb12u11", AvailableVersion: "12.4+deb12u15", Origin: "oldstable"},
		{Name: "libgcrypt20", Architecture: "amd64", InstalledVersion: "1.10.1-3", AvailableVersion: "1.10.1-3+deb12u1", Origin: "oldstable-security", Security: true},
		{Name: "linux-image-amd64", Architecture: "amd64", InstalledVersion: "6.1.76-1", AvailableVersion: "6.1.90-1", Origin: "oldstable-security", Security: true, RequiresReboot: true},
		{Name: "libc6:i386", Architecture: "i386", InstalledVersion: "2.36-9+deb12u3", AvailableVersion: "2.36-9+deb12u4", Origin: "stable", RequiresReboot: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestParseAptSummaries(t *testing.T) {
	out := "Package: curl\nVersion: 7.88.1-10+deb12u14\nArchitecture: amd64\nDescription: command line tool for transferring data with URL syntax\n long text\n\n" +
		"Package: libc6\nVersion: 2.36-9+deb12u4\nArchitecture: i386\nDescription-en: GNU C Library: Shared libraries\n"
	got := parseAptSummaries([]byte(out))
	if got["curl=7.88.1-10+deb12u14"] != "command line tool for transferring data with URL syntax" || got["libc6:i386=2.36-9+deb12u4"] != "GNU C Library: Shared libraries" {
		t.Errorf("summaries = %v", got)
	}
}

func TestRebootPackage(t *testing.T) {
	for name, want := range map[string]bool{"linux-image-6.1.0-21-amd64": true, "linux-headers-6.1.0-21-amd64": false, "libc6": true,
		"libc6:i386": true, "systemd": true, "dbus": true, "kernel-core": true, "glibc": true, "curl": false, "libc6-dev": false} {
		if rebootPackage(name) != want {
			t.Errorf("rebootPackage(%q) = %v", name, !want)
		}
	}
}

func TestParseDnfCheckUpdate(t *testing.T) {
	out := `
kernel.x86_64                          5.14.0-362.13.1.el9_3           baseos
openssl-libs.x86_64                    1:3.0.7-25.el9_3                baseos
a-package-with-a-very-long-name-that-wraps.noarch
                                       1.2-3.el9                       appstream
Obsoleting Packages
grub2-tools.x86_64                     1:2.06-70.el9_3.1               baseos
    grub2-tools.x86_64                 1:2.06-61.el9                   @anaconda
`
	got := parseDnfCheckUpdate([]byte(out))
	want := []agentproto.PackageUpdate{
		{Name: "kernel", Architecture: "x86_64", AvailableVersion: "5.14.0-362.13.1.el9_3", Origin: "baseos", RequiresReboot: true},
		{Name: "openssl-libs", Architecture: "x86_64", AvailableVersion: "1:3.0.7-25.el9_3", Origin: "baseos"},
		{Name: "a-package-with-a-very-long-name-that-wraps", Architecture: "noarch", AvailableVersion: "1.2-3.el9", Origin: "appstream"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestParseDnfSecurity(t *testing.T) {
	out := "RHSA-2023:7877 Important/Sec.  openssl-libs-1:3.0.7-25.el9_3.x86_64\nFEDORA-2023-1a2b3c Moderate/Sec. curl-minimal-8.0.1-5.fc39.x86_64\nbroken\n"
	got := parseDnfSecurity([]byte(out))
	if !reflect.DeepEqual(got, map[string]bool{"openssl-libs.x86_64": true, "curl-minimal.x86_64": true}) {
		t.Errorf("security = %v", got)
	}
}

func TestParseRPMInstalled(t *testing.T) {
	out := "kernel\tx86_64\t5.14.0-284.11.1.el9_2\nkernel\tx86_64\t5.14.0-362.8.1.el9_3\nopenssl-libs\tx86_64\t1:3.0.7-24.el9\npackage nano is not installed\n"
	got := parseRPMInstalled([]byte(out), []string{"kernel.x86_64", "openssl-libs", "nano"})
	want := map[string]installedPkg{"kernel.x86_64": {version: "5.14.0-362.8.1.el9_3"}, "openssl-libs": {version: "1:3.0.7-24.el9"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("installed = %v", got)
	}
}

func TestNames(t *testing.T) {
	a, d := &apt{}, &dnf{}
	for name, want := range map[string]bool{"libc6": true, "g++": true, "libc6:i386": true, "linux-image-6.1.0-21-amd64": true,
		"foo;rm": false, "-o": false, "a": false, "Foo": false, "foo bar": false, "foo:": false, "foo=1.0": false} {
		if a.validName(name) != want {
			t.Errorf("apt validName(%q) = %v", name, !want)
		}
	}
	for name, want := range map[string]bool{"openssl-libs": true, "NetworkManager": true, "kernel.x86_64": true, "-y": false, "foo;rm": false, "foo bar": false} {
		if d.validName(name) != want {
			t.Errorf("dnf validName(%q) = %v", name, !want)
		}
	}
}

func TestTail(t *testing.T) {
	tl := &tail{max: 8}
	tl.Write([]byte("0123"))
	tl.Write([]byte("456789ab"))
	if tl.String() != "456789ab" || !tl.truncated {
		t.Errorf("tail = %q truncated %v", tl.String(), tl.truncated)
	}
	tl = &tail{max: 4}
	tl.Write([]byte("aé€b"))
	if got := tl.String(); got != "€b" {
		t.Errorf("tail cut inside a character = %q", got)
	}
}

func TestRunnerKillsOnCancel(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil || runtime.GOOS == "windows" {
		t.Skip("needs a Unix shell")
	}
	r := newRunner(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	// The grandchild holds the output open: only killing the process group ends it.
	_, _, err := r.run(ctx, "sh", "-c", "sleep 30 & sleep 30")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Errorf("run = %v after %v", err, time.Since(start))
	}
	out, code, err := r.run(context.Background(), "sh", "-c", "echo out; echo 'E: broken' >&2; echo last >&2; exit 3")
	if err != nil || code != 3 || string(out) != "out\n" {
		t.Fatalf("run = %q %d %v", out, code, err)
	}
	if err := exitError("sh", code, r.lastStderr); err.Error() != "sh exited with code 3: E: broken" {
		t.Errorf("exitError = %v", err)
	}
	if !strings.Contains(r.stdout.String(), "+ sh -c echo out") || !strings.Contains(r.stderr.String(), "last") {
		t.Errorf("transcript = %q / %q", r.stdout.String(), r.stderr.String())
	}
}

func TestDownload(t *testing.T) {
	content := []byte("package bytes")
	sum := sha256.Sum256(content)
	good := hex.EncodeToString(sum[:])
	work := t.TempDir()
	m := New(Options{WorkDir: work, Fetch: func(context.Context, string) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(string(content))), nil
	}})
	for _, c := range []struct {
		name string
		p    agentproto.SoftwareInstall
		err  string
	}{
		{"good", agentproto.SoftwareInstall{SHA256: good, FileType: "deb"}, ""},
		{"upper case", agentproto.SoftwareInstall{SHA256: strings.ToUpper(good), FileType: "deb", SizeBytes: int64(len(content))}, ""},
		{"mismatch", agentproto.SoftwareInstall{SHA256: strings.Repeat("0", 64), FileType: "deb"}, "checksum mismatch: expected " + strings.Repeat("0", 64) + ", got " + good},
		{"too big", agentproto.SoftwareInstall{SHA256: good, FileType: "deb", SizeBytes: 4}, "the download is larger than 4 bytes"},
		{"too small", agentproto.SoftwareInstall{SHA256: good, FileType: "deb", SizeBytes: 100}, "the download is 13 bytes, expected 100"},
		{"not a checksum", agentproto.SoftwareInstall{SHA256: "abc", FileType: "deb"}, `"abc" is not a SHA-256 checksum`},
	} {
		path, got, err := m.download(context.Background(), c.p)
		if path != "" {
			if filepath.Dir(path) != work {
				t.Errorf("%s: downloaded to %s", c.name, path)
			}
			os.Remove(path)
		}
		switch {
		case c.err == "" && (err != nil || got != good):
			t.Errorf("%s: %q %v", c.name, got, err)
		case c.err != "" && (err == nil || err.Error() != c.err):
			t.Errorf("%s: error %v, want %q", c.name, err, c.err)
		}
	}
	if _, err := httpFetch(context.Background(), "/api/v1/agents/files/1"); err == nil || !strings.Contains(err.Error(), "only http and https") {
		t.Errorf("a relative address without the agent's client: %v", err)
	}
	if _, err := httpFetch(context.Background(), "file:///etc/passwd"); err == nil {
		t.Error("a file address was fetched")
	}
}

func TestNoPackageManager(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("package management runs on Linux")
	}
	t.Setenv("PATH", t.TempDir())
	reg := capability.New()
	New(Options{Root: t.TempDir()}).Register(reg)
	for _, kind := range []string{agentproto.CommandPatchScan, agentproto.CommandPatchInstall, agentproto.CommandSoftwareInstall, agentproto.CommandSoftwareUninstall} {
		res := reg.RunCommand(context.Background(), agentproto.Command{Type: kind, Payload: []byte(`{}`)})
		if res.Status != agentproto.ResultFailed || res.Error != "no supported package manager: apt or dnf" {
			t.Errorf("%s: %s %q", kind, res.Status, res.Error)
		}
	}
}

func TestCommandTimesOut(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("package management runs on Linux")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("needs a shell")
	}
	// A stand-in apt-get that hangs, with a child of its own.
	bin := t.TempDir()
	for _, name := range []string{"apt-get", "dpkg"} {
		script := "#!" + sh + "\nsleep 30 & sleep 30\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "var/lib/dpkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	reg := capability.New()
	New(Options{Root: root, WorkDir: t.TempDir()}).Register(reg)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	res := reg.RunCommand(ctx, agentproto.Command{Type: agentproto.CommandPatchScan, Payload: []byte(`{"refresh":true}`)})
	if res.Status != agentproto.ResultTimedOut || time.Since(start) > 3*time.Second || !strings.Contains(res.Stdout, "apt-get") {
		t.Errorf("%s %q after %v, stdout %q", res.Status, res.Error, time.Since(start), res.Stdout)
	}
}

func TestOneCommandAtATime(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("package management runs on Linux")
	}
	m := New(Options{Root: t.TempDir()})
	reg := capability.New()
	m.Register(reg)
	m.turn <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res := reg.RunCommand(ctx, agentproto.Command{Type: agentproto.CommandPatchScan})
	if res.Status != agentproto.ResultTimedOut || !strings.Contains(res.Error, "another package command") {
		t.Errorf("%s %q", res.Status, res.Error)
	}
}
