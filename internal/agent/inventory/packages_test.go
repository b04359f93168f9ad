package inventory

import (
	"os"
	"testing"

	"gale/internal/wire/agentproto"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	content, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return content
}

func TestParseDpkgKeepsInstalledPackages(t *testing.T) {
	got := parseDpkg(string(readFixture(t, "dpkg-query.txt")))
	want := []agentproto.Software{
		{Name: "adduser", Version: "3.134", Architecture: "all",
			Publisher: "Debian Adduser Developers", SizeBytes: 849 * 1024, Source: "dpkg"},
		{Name: "libc6", Version: "2.36-9+deb12u4", Architecture: "amd64",
			Publisher: "GNU Libc Maintainers", SizeBytes: 12922 * 1024, Source: "dpkg"},
		{Name: "libc6", Version: "2.36-9+deb12u4", Architecture: "i386",
			Publisher: "GNU Libc Maintainers", SizeBytes: 12000 * 1024, Source: "dpkg"},
		{Name: "no-size", Version: "1:0.5~rc1", Architecture: "all", Source: "dpkg"},
		{Name: "weird-size", Version: "1.0", Architecture: "all", Publisher: "M", Source: "dpkg"},
		{Name: "bare-maintainer", Version: "2", Architecture: "amd64", Publisher: "just-a-name", SizeBytes: 1024, Source: "dpkg"},
	}
	assertSoftware(t, got, want)
}

func TestParseDpkgEmptyOutputIsEmptyList(t *testing.T) {
	if got := parseDpkg(""); got == nil || len(got) != 0 {
		t.Fatalf("parseDpkg(\"\") = %#v, want empty non-nil", got)
	}
}

func TestParseRPM(t *testing.T) {
	got := parseRPM(string(readFixture(t, "rpm-qa.txt")))
	want := []agentproto.Software{
		{Name: "bash", Version: "5.1.8-9.el9", Architecture: "x86_64", Publisher: "Red Hat, Inc.",
			SizeBytes: 7738634, InstallDate: "2023-11-14", Source: "rpm"},
		{Name: "perl-Errno", Version: "1.30-504.el9", Architecture: "x86_64", Publisher: "Red Hat, Inc.",
			SizeBytes: 8479, InstallDate: "2023-11-15", Source: "rpm"},
		{Name: "kernel-core", Version: "5.14.0-362.8.1.el9_3", Architecture: "x86_64", Publisher: "Red Hat, Inc.",
			SizeBytes: 67215232, InstallDate: "2023-11-16", Source: "rpm"},
		{Name: "filesystem", Version: "3.16-2.el9", Architecture: "x86_64", Source: "rpm"},
		{Name: "dhcp-client", Version: "12:4.4.2-19.b1.el9", Architecture: "x86_64", Publisher: "Red Hat, Inc.",
			SizeBytes: 3920218, InstallDate: "2023-11-14", Source: "rpm"},
	}
	assertSoftware(t, got, want)
}

func TestCapSoftware(t *testing.T) {
	many := make([]agentproto.Software, maxSoftware+5)
	got, err := capSoftware(many)
	if len(got) != maxSoftware || err == nil || err.Error() != "list cut at 10000 of 10005 packages" {
		t.Errorf("capSoftware(%d entries) = %d entries, %v", len(many), len(got), err)
	}
	got, err = capSoftware(many[:3])
	if len(got) != 3 || err != nil {
		t.Errorf("capSoftware(3 entries) = %d entries, %v", len(got), err)
	}
}

func assertSoftware(t *testing.T, got, want []agentproto.Software) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}
