package inventory

import (
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"gale/internal/wire/agentproto"
)

// TestCollectOnThisMachine checks the inventory against what the machine itself says.
func TestCollectOnThisMachine(t *testing.T) {
	start := time.Now()
	inv := Collect(t.Context(), Options{})
	t.Logf("collected in %v; errors: %q", time.Since(start), inv.Errors)

	for _, e := range inv.Errors {
		t.Errorf("collector failed: %s", e)
	}
	hostname, _ := os.Hostname()
	if inv.Hostname != hostname {
		t.Errorf("Hostname = %q, want %q", inv.Hostname, hostname)
	}
	if inv.CollectedAt.Location() != time.UTC || time.Since(inv.CollectedAt) > time.Minute {
		t.Errorf("CollectedAt = %v, want a recent UTC time", inv.CollectedAt)
	}

	osInfo := inv.OS
	if osInfo.Type != agentproto.OSLinux || osInfo.Name == "" || osInfo.KernelVersion == "" || osInfo.Timezone == "" {
		t.Errorf("OS = %+v, want type linux with name, kernel and time zone", osInfo)
	}
	if osInfo.Architecture != "amd64" && osInfo.Architecture != "arm64" {
		t.Errorf("Architecture = %q", osInfo.Architecture)
	}
	if osInfo.UptimeSeconds <= 0 || osInfo.BootTime.After(time.Now()) || osInfo.BootTime.IsZero() {
		t.Errorf("uptime %d s, boot %v: want a boot in the past", osInfo.UptimeSeconds, osInfo.BootTime)
	}
	if release, err := osRelease(t.Context()); err == nil && (osInfo.Name != release.name || osInfo.Version != release.version) {
		t.Errorf("OS %q %q, want os-release's %q %q", osInfo.Name, osInfo.Version, release.name, release.version)
	}

	hw := inv.Hardware
	if hw.CPUCores <= 0 || hw.CPUThreads < hw.CPUCores || hw.MemoryBytes == 0 || hw.CPUModel == "" {
		t.Errorf("Hardware = %+v, want CPU model, cores, threads and memory", hw)
	}

	rootIdx := slices.IndexFunc(inv.Disks, func(d agentproto.Disk) bool { return d.Mountpoint == "/" })
	if rootIdx < 0 {
		t.Fatalf("no disk mounted on /: %+v", inv.Disks)
	}
	if root := inv.Disks[rootIdx]; root.TotalBytes == 0 || root.UsedPercent < 0 || root.UsedPercent > 100 {
		t.Errorf("root disk = %+v", root)
	}
	mountpoints := map[string]bool{}
	for _, d := range inv.Disks {
		if mountpoints[d.Mountpoint] {
			t.Errorf("mountpoint %s listed twice", d.Mountpoint)
		}
		mountpoints[d.Mountpoint] = true
		if slices.Contains([]string{"proc", "sysfs", "tmpfs", "devtmpfs", "cgroup", "cgroup2", "devpts"}, d.FSType) {
			t.Errorf("pseudo file system listed: %+v", d)
		}
	}

	assertNetworkMatchesStdlib(t, inv.Network)

	if _, err := exec.LookPath("dpkg-query"); err == nil {
		assertDpkgSoftware(t, inv.Software)
	}
	if inv.Users == nil {
		t.Error("Users is nil, want an empty list at least")
	}
}

func assertNetworkMatchesStdlib(t *testing.T, nics []agentproto.NetworkInterface) {
	t.Helper()
	loopback := slices.IndexFunc(nics, func(n agentproto.NetworkInterface) bool { return n.Loopback })
	if loopback < 0 {
		t.Fatalf("no loopback interface in %+v", nics)
	}
	if lo := nics[loopback]; !lo.Up || !slices.Contains(lo.Addresses, "127.0.0.1/8") {
		t.Errorf("loopback = %+v, want up with 127.0.0.1/8", lo)
	}
	ifaces, _ := net.Interfaces()
	if len(nics) != len(ifaces) {
		t.Errorf("%d interfaces, the system has %d", len(nics), len(ifaces))
	}
	for _, nic := range nics {
		for _, addr := range nic.Addresses {
			if _, _, err := net.ParseCIDR(addr); err != nil {
				t.Errorf("%s address %q is not CIDR", nic.Name, addr)
			}
		}
	}
}

func assertDpkgSoftware(t *testing.T, software []agentproto.Software) {
	t.Helper()
	if len(software) == 0 {
		t.Fatal("dpkg-query is on PATH but no software was collected")
	}
	// dpkg itself is installed wherever dpkg-query runs.
	i := slices.IndexFunc(software, func(s agentproto.Software) bool { return s.Name == "dpkg" })
	if i < 0 {
		t.Fatal("package dpkg missing from the software list")
	}
	want, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "dpkg").Output()
	if err != nil {
		t.Fatal(err)
	}
	if dpkg := software[i]; dpkg.Version != string(want) || dpkg.Source != "dpkg" || dpkg.SizeBytes <= 0 {
		t.Errorf("dpkg entry = %+v, want version %s from dpkg with a size", dpkg, want)
	}
	if len(software) > maxSoftware {
		t.Errorf("%d entries, want at most %d", len(software), maxSoftware)
	}
	for _, s := range software {
		if s.Name == "" || s.Version == "" || strings.ContainsAny(s.Name, "\t\n") {
			t.Errorf("malformed entry %+v", s)
		}
	}
}
