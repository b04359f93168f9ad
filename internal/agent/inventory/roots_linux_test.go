package inventory

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"gale/internal/wire/agentproto"
)

// The fixture trees under testdata/roots are the files the Linux collectors read, as three
// machines have them: a KVM guest with a /.dockerenv left over from its image, a Docker
// container on a VM, and a bare-metal server.
const (
	kvmRoot    = "testdata/roots/kvm-guest"
	dockerRoot = "testdata/roots/docker"
	metalRoot  = "testdata/roots/bare-metal"
)

func TestDetectVirtualization(t *testing.T) {
	tests := []struct{ root, kind, technology string }{
		{kvmRoot, virtVM, "kvm"},
		{dockerRoot, virtContainer, "docker"},
		{metalRoot, virtNone, ""},
	}
	for _, tt := range tests {
		if kind, tech := detectVirtualization(tt.root); kind != tt.kind || tech != tt.technology {
			t.Errorf("%s: %s/%s, want %s/%s", tt.root, kind, tech, tt.kind, tt.technology)
		}
	}
}

func TestDetectVirtualizationRules(t *testing.T) {
	tests := []struct {
		name             string
		files            map[string]string
		kind, technology string
	}{
		{"a stale /.dockerenv alone", map[string]string{".dockerenv": ""}, virtContainer, "docker"},
		{"container variable of init", map[string]string{"proc/1/environ": "PATH=/bin\x00container=podman\x00"}, virtContainer, "podman"},
		{"unknown container manager", map[string]string{"run/systemd/container": "oci\n"}, virtContainer, "container-other"},
		{"podman marker", map[string]string{"run/.containerenv": "", "sys/class/dmi/id/sys_vendor": "QEMU"}, virtContainer, "podman"},
		{"lxc cgroup", map[string]string{"proc/1/cgroup": "0::/lxc.payload.web/init.scope\n"}, virtContainer, "lxc"},
		{"WSL kernel", map[string]string{"proc/sys/kernel/osrelease": "5.15.153.1-microsoft-standard-WSL2\n"}, virtContainer, "wsl"},
		{"VMware", map[string]string{"sys/class/dmi/id/sys_vendor": "VMware, Inc.\n"}, virtVM, "vmware"},
		{"VirtualBox", map[string]string{"sys/class/dmi/id/product_name": "VirtualBox\n"}, virtVM, "oracle"},
		{"QEMU without KVM", map[string]string{"sys/class/dmi/id/sys_vendor": "QEMU\n"}, virtVM, "qemu"},
		{"Hyper-V", map[string]string{"sys/class/dmi/id/sys_vendor": "Microsoft Corporation\n",
			"sys/class/dmi/id/product_name": "Virtual Machine\n"}, virtVM, "microsoft"},
		{"Surface laptop", map[string]string{"sys/class/dmi/id/sys_vendor": "Microsoft Corporation\n",
			"sys/class/dmi/id/product_name": "Surface Laptop 5\n"}, virtNone, ""},
		{"EC2 Nitro", map[string]string{"sys/class/dmi/id/sys_vendor": "Amazon EC2\n",
			"sys/class/dmi/id/product_name": "m5.large\n"}, virtVM, "amazon"},
		{"EC2 bare metal", map[string]string{"sys/class/dmi/id/sys_vendor": "Amazon EC2\n",
			"sys/class/dmi/id/product_name": "m5.metal\n"}, virtNone, ""},
		{"Google", map[string]string{"sys/class/dmi/id/product_name": "Google Compute Engine\n"}, virtVM, "google"},
		{"Xen guest", map[string]string{"sys/hypervisor/type": "xen\n"}, virtVM, "xen"},
		{"Xen dom0", map[string]string{"sys/hypervisor/type": "xen\n", "proc/xen/capabilities": "control_d\n"}, virtNone, ""},
		{"unnamed hypervisor", map[string]string{"proc/cpuinfo": "processor : 0\nflags : fpu hypervisor\n"}, virtVM, "vm-other"},
		{"microVM without DMI", map[string]string{".dockerenv": "", "proc/cpuinfo": "processor : 0\nflags : fpu hypervisor\n",
			"sys/devices/system/clocksource/clocksource0/available_clocksource": "kvm-clock tsc\n"}, virtVM, "kvm"},
		{"nothing", map[string]string{}, virtNone, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeTree(t, tt.files)
			if kind, tech := detectVirtualization(root); kind != tt.kind || tech != tt.technology {
				t.Errorf("%s/%s, want %s/%s", kind, tech, tt.kind, tt.technology)
			}
		})
	}
}

func TestLinuxHardwareFromFixtures(t *testing.T) {
	tests := []struct {
		root string
		want agentproto.Hardware
	}{
		{kvmRoot, agentproto.Hardware{
			Manufacturer: "QEMU", Model: "Standard PC (Q35 + ICH9, 2009)", BIOSVersion: "1.16.2-debian-1.16.2-1",
			ChassisType: "Other", CPUVendor: "GenuineIntel", CPUModel: "Intel Xeon Processor (Icelake)",
			CPUSockets: 1, CPUCores: 2, CPUThreads: 2, SwapBytes: 2097148 * 1024,
			VirtualizationType: virtVM, Virtualization: "kvm",
			PhysicalDisks: []agentproto.PhysicalDisk{{Name: "vda", Serial: "disk-0001", SizeBytes: 83886080 * 512, Rotational: true}},
		}},
		{dockerRoot, agentproto.Hardware{
			CPUVendor: "AuthenticAMD", CPUModel: "AMD EPYC 7B13", CPUSockets: 1, CPUCores: 4, CPUThreads: 4,
			VirtualizationType: virtContainer, Virtualization: "docker",
		}},
		{metalRoot, agentproto.Hardware{
			Manufacturer: "Dell Inc.", Model: "PowerEdge R740", SerialNumber: "7XK2P53", BIOSVersion: "2.19.1",
			BoardVendor: "Dell Inc.", BoardName: "0WRPXK", BoardSerial: ".7XK2P53.CNFCP0098A00QR.",
			ChassisType: "Rack Mount Chassis", SystemUUID: "4c4c4544-0058-4b10-8032-b7c04f503533",
			CPUVendor: "GenuineIntel", CPUModel: "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz",
			CPUSockets: 2, CPUCores: 8, CPUThreads: 16, SwapBytes: 8388604 * 1024, VirtualizationType: virtNone,
			PhysicalDisks: []agentproto.PhysicalDisk{
				{Name: "nvme0n1", Model: "Samsung SSD 980 PRO 1TB", Serial: "S5GXNF0R123456", SizeBytes: 1953525168 * 512},
				{Name: "sda", Model: "ST4000NM0035-1V4", SizeBytes: 7814037168 * 512, Rotational: true},
			},
		}},
	}
	for _, tt := range tests {
		got, err := linuxHardware(tt.root)
		if err != nil {
			t.Errorf("%s: %v", tt.root, err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.root, got, tt.want)
		}
	}
}

func TestLinuxHardwareKeepsGoingWithoutProc(t *testing.T) {
	root := writeTree(t, map[string]string{"sys/class/dmi/id/sys_vendor": "LENOVO\n", "sys/block/README": ""})
	hw, err := linuxHardware(root)
	if err == nil || hw.Manufacturer != "LENOVO" || hw.VirtualizationType != virtNone {
		t.Errorf("got %+v, %v; want the DMI and virtualization facts with an error for /proc", hw, err)
	}
}

func TestChassisTypeName(t *testing.T) {
	for number, want := range map[string]string{"3": "Desktop", "10": "Notebook", "36": "Stick PC", "99": "99", "": "", "x": ""} {
		if got := chassisTypeName(number); got != want {
			t.Errorf("chassisTypeName(%q) = %q, want %q", number, got, want)
		}
	}
}

func TestParseLsblk(t *testing.T) {
	got, err := parseLsblk(readFixture(t, "lsblk.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []agentproto.PhysicalDisk{
		{Name: "sda", Model: "ST4000NM0035-1V4", Serial: "ZC1A2B3C", SizeBytes: 4000787030016, Rotational: true},
		{Name: "nvme0n1", Model: "Samsung SSD 980 PRO 1TB", Serial: "S5GXNF0R123456", SizeBytes: 1000204886016},
		{Name: "zram0"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	// util-linux before 2.33 printed numbers and flags as strings.
	old, err := parseLsblk([]byte(`{"blockdevices":[{"name":"sda","model":"X","size":"512","rota":"1","serial":null,"type":"disk"}]}`))
	if err != nil || len(old) != 1 || old[0].SizeBytes != 512 || !old[0].Rotational {
		t.Errorf("old-style output = %+v, %v", old, err)
	}
}

func TestMergeLsblkFillsOnlyMissingDetails(t *testing.T) {
	listed, err := parseLsblk(readFixture(t, "lsblk.json"))
	if err != nil {
		t.Fatal(err)
	}
	disks, err := physicalDisks(metalRoot)
	if err != nil {
		t.Fatal(err)
	}
	merged := mergeLsblk(disks, listed)
	if sda := merged[slices.IndexFunc(merged, func(d agentproto.PhysicalDisk) bool { return d.Name == "sda" })]; sda.Serial != "ZC1A2B3C" {
		t.Errorf("sda serial = %q, want lsblk's", sda.Serial)
	}
	if nvme := merged[0]; nvme.Model != "Samsung SSD 980 PRO 1TB" || nvme.SizeBytes != 1953525168*512 {
		t.Errorf("nvme0n1 = %+v, want sysfs's model and size kept", nvme)
	}
}

func TestLinuxReleaseFromFixtures(t *testing.T) {
	tests := []struct {
		root string
		want release
	}{
		{kvmRoot, release{name: "Debian GNU/Linux", version: "12", prettyName: "Debian GNU/Linux 12 (bookworm)",
			codename: "bookworm", pointRelease: "12.5"}},
		// Ubuntu's debian_version names the Debian it is built on, not an Ubuntu point release.
		{metalRoot, release{name: "Ubuntu", version: "24.04", prettyName: "Ubuntu 24.04.1 LTS", codename: "noble"}},
		{dockerRoot, release{name: "Alpine Linux", version: "3.19.1", prettyName: "Alpine Linux v3.19"}},
	}
	for _, tt := range tests {
		got, err := linuxRelease(tt.root)
		if err != nil || got != tt.want {
			t.Errorf("%s: %+v, %v; want %+v", tt.root, got, err, tt.want)
		}
	}
}

func TestResolverServers(t *testing.T) {
	tests := []struct {
		root string
		want []string
	}{
		{kvmRoot, []string{"192.0.2.53", "2001:db8::53"}},
		// Behind systemd-resolved's stub, the servers it forwards to.
		{metalRoot, []string{"192.0.2.53", "192.0.2.54"}},
		{dockerRoot, nil},
	}
	for _, tt := range tests {
		got, err := resolverServers(tt.root)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, %v; want %q", tt.root, got, err, tt.want)
		}
	}
}

func TestDefaultGateways(t *testing.T) {
	got, err := defaultGateways(kvmRoot)
	if err != nil {
		t.Fatal(err)
	}
	// eth1's default route is down (no gateway flag) and lo's are unreachable routes.
	want := map[string][]string{"eth0": {"192.0.2.1", "fe80::1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := defaultGateways(dockerRoot); err == nil {
		t.Error("want an error for a root without /proc/net/route")
	}
}

func TestLinkDetails(t *testing.T) {
	got := linkDetails(kvmRoot)
	want := map[string]link{"eth0": {operState: "up"}, "eth1": {operState: "down"}, "lo": {operState: "unknown"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	root := writeTree(t, map[string]string{"sys/class/net/enp3s0/operstate": "up\n", "sys/class/net/enp3s0/speed": "1000\n"})
	if got := linkDetails(root)["enp3s0"]; got != (link{operState: "up", speedMbps: 1000}) {
		t.Errorf("enp3s0 = %+v, want up at 1000 Mb/s", got)
	}
}

func TestWtmpLogons(t *testing.T) {
	at := func(sec int) time.Time { return time.Unix(int64(sec), 0).UTC() }
	var wtmp bytes.Buffer
	wtmp.Write(utmpRecord(2, "reboot", "~", "6.1.0-18-amd64", 1_700_000_000)) // boot record
	wtmp.Write(utmpRecord(utmpUserProcess, "alice", "pts/0", "192.0.2.10", 1_700_000_100))
	wtmp.Write(utmpRecord(8, "", "pts/0", "", 1_700_000_200)) // logout
	wtmp.Write(utmpRecord(utmpUserProcess, "bob", "tty1", "", 1_700_000_300))
	for i := range wtmpChunk + 5 { // more logons than one chunk holds
		wtmp.Write(utmpRecord(utmpUserProcess, "carol", "pts/1", "ws.example", 1_700_001_000+i))
	}
	wtmp.Write(utmpRecord(utmpUserProcess, "dave", "pts/2", "", 1_800_000_000)[:100]) // being written
	root := writeTree(t, map[string]string{"var/log/wtmp": wtmp.String()})

	got, err := wtmpLogons(root, 3)
	if err != nil {
		t.Fatal(err)
	}
	carol := func(i int) agentproto.LoggedInUser {
		return agentproto.LoggedInUser{Username: "carol", Terminal: "pts/1", Host: "ws.example", StartedAt: at(1_700_001_000 + i)}
	}
	if want := []agentproto.LoggedInUser{carol(wtmpChunk + 4), carol(wtmpChunk + 3), carol(wtmpChunk + 2)}; !slices.Equal(got, want) {
		t.Errorf("last 3 = %+v, want %+v", got, want)
	}
	all, err := wtmpLogons(root, 1000)
	if err != nil || len(all) != wtmpChunk+7 {
		t.Fatalf("all logons: %d, %v; want %d", len(all), err, wtmpChunk+7)
	}
	want := []agentproto.LoggedInUser{
		{Username: "bob", Terminal: "tty1", StartedAt: at(1_700_000_300)},
		{Username: "alice", Terminal: "pts/0", Host: "192.0.2.10", StartedAt: at(1_700_000_100)},
	}
	if tail := all[len(all)-2:]; !slices.Equal(tail, want) {
		t.Errorf("oldest = %+v, want %+v", tail, want)
	}
	if none, err := wtmpLogons(t.TempDir(), 10); err != nil || none == nil || len(none) != 0 {
		t.Errorf("without wtmp: %+v, %v; want an empty list", none, err)
	}
}

// utmpRecord lays out one glibc utmp record in the machine's byte order.
func utmpRecord(kind int16, user, line, host string, sec int) []byte {
	r := make([]byte, utmpSize)
	binary.NativeEndian.PutUint16(r[utmpTypeOffset:], uint16(kind))
	copy(r[utmpLineOffset:utmpLineOffset+utmpLineLen], line)
	copy(r[utmpUserOffset:utmpUserOffset+utmpUserLen], user)
	copy(r[utmpHostOffset:utmpHostOffset+utmpHostLen], host)
	binary.NativeEndian.PutUint32(r[utmpTimeOffset:], uint32(sec))
	return r
}

func TestDpkgInstallDates(t *testing.T) {
	root := writeTree(t, map[string]string{
		"var/lib/dpkg/info/adduser.list":     "/usr/sbin/adduser\n",
		"var/lib/dpkg/info/libc6:i386.list":  "/lib/i386-linux-gnu\n",
		"var/lib/dpkg/info/libc6:amd64.list": "/lib/x86_64-linux-gnu\n",
	})
	info := filepath.Join(root, "var/lib/dpkg/info")
	for name, date := range map[string]string{"adduser.list": "2024-01-15", "libc6:i386.list": "2024-02-01", "libc6:amd64.list": "2024-03-10"} {
		day, _ := time.Parse(time.DateOnly, date)
		if err := os.Chtimes(filepath.Join(info, name), day.Add(12*time.Hour), day.Add(12*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	software := []agentproto.Software{
		{Name: "adduser", Architecture: "all"}, {Name: "libc6", Architecture: "amd64"},
		{Name: "libc6", Architecture: "i386"}, {Name: "gone", Architecture: "all"},
	}
	addDpkgInstallDates(root, software)
	var dates []string
	for _, sw := range software {
		dates = append(dates, sw.InstallDate)
	}
	if want := []string{"2024-01-15", "2024-03-10", "2024-02-01", ""}; !slices.Equal(dates, want) {
		t.Errorf("install dates %q, want %q", dates, want)
	}
}

func TestSnapAndFlatpakFromFixture(t *testing.T) {
	snaps, err := snapPackages(metalRoot)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range snaps {
		got = append(got, s.Name+" "+s.Version+" "+s.Source)
	}
	// core22 is at the revision current/ links to; hello-world is not mounted, so its
	// version is unknown.
	if want := []string{"core22 20240408 snap", "hello-world  snap"}; !slices.Equal(got, want) {
		t.Errorf("snaps %q, want %q", got, want)
	}
	if core := snaps[0]; core.SizeBytes != int64(len("current revision")) || core.InstallDate == "" {
		t.Errorf("core22 = %+v, want the current revision's size and date", core)
	}

	flatpaks, err := flatpakApps(metalRoot)
	if err != nil {
		t.Fatal(err)
	}
	if len(flatpaks) != 1 || flatpaks[0].Name != "org.mozilla.firefox" || flatpaks[0].Version != "125.0.2" ||
		flatpaks[0].Architecture != "x86_64" || flatpaks[0].Source != "flatpak" || flatpaks[0].InstallDate == "" {
		t.Errorf("flatpaks = %+v, want firefox 125.0.2 for x86_64", flatpaks)
	}
	if none, err := flatpakApps(kvmRoot); err != nil || len(none) != 0 {
		t.Errorf("without flatpak: %+v, %v", none, err)
	}
}

// writeTree makes a root directory holding the given files.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
