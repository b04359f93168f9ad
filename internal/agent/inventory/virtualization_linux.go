package inventory

import (
	"os"
	"path/filepath"
	"strings"
)

// Kinds of virtualization, as Hardware.VirtualizationType reports them.
const (
	virtVM        = "vm"
	virtContainer = "container"
	virtNone      = "none"
)

// dmiHypervisors maps the start of a DMI string to the hypervisor that writes it, with
// systemd-detect-virt's table and names.
var dmiHypervisors = []struct{ prefix, technology string }{
	{"KVM", "kvm"},
	{"OpenStack", "kvm"},
	{"KubeVirt", "kvm"},
	{"Amazon EC2", "amazon"},
	{"QEMU", "qemu"},
	{"VMware", "vmware"},
	{"VMW", "vmware"},
	{"innotek GmbH", "oracle"},
	{"VirtualBox", "oracle"},
	{"Oracle Corporation", "oracle"},
	{"Xen", "xen"},
	{"Bochs", "bochs"},
	{"Parallels", "parallels"},
	{"BHYVE", "bhyve"},
	{"Hyper-V", "microsoft"},
	{"Apple Virtualization", "apple"},
	{"Google Compute Engine", "google"},
}

// cpuidHypervisors maps hypervisors' CPUID vendor signatures to systemd-detect-virt's names.
var cpuidHypervisors = map[string]string{
	"KVMKVMKVM":    "kvm",
	"Linux KVM Hv": "kvm",
	"TCGTCGTCGTCG": "qemu",
	"XenVMMXenVMM": "xen",
	"VMwareVMware": "vmware",
	"Microsoft Hv": "microsoft",
	"bhyve bhyve ": "bhyve",
	"QNXQVMBSQG":   "qnx",
	"ACRNACRNACRN": "acrn",
	"SRESRESRESRE": "sre",
	"Apple VZ":     "apple",
}

// dmiVirtFiles are the DMI strings searched for a hypervisor, in systemd-detect-virt's order.
var dmiVirtFiles = []string{"product_name", "sys_vendor", "board_vendor", "bios_vendor", "product_version"}

// containerManagers are the values of the container= variable systemd-detect-virt knows; any
// other value still means a container, of a kind it calls "container-other".
var containerManagers = map[string]bool{
	"docker": true, "podman": true, "lxc": true, "lxc-libvirt": true, "systemd-nspawn": true,
	"rkt": true, "wsl": true, "proot": true, "pouch": true, "openvz": true,
}

// detectVirtualization tells whether the system under root runs in a container, in a virtual
// machine or on bare metal, following systemd-detect-virt: a container's own markers first,
// then the hypervisor's traces in the firmware and CPU. /.dockerenv comes last because it
// lingers in images and file systems copied out of containers: a VM verdict outranks it.
func detectVirtualization(root string) (kind, technology string) {
	if tech := detectContainer(root); tech != "" {
		return virtContainer, tech
	}
	if tech := detectVM(root); tech != "" {
		return virtVM, tech
	}
	if exists(filepath.Join(root, ".dockerenv")) {
		return virtContainer, "docker"
	}
	return virtNone, ""
}

// detectContainer reads the markers a container manager leaves. /proc/1/environ is readable
// by root only; without it the other markers still decide.
func detectContainer(root string) string {
	if environ, err := os.ReadFile(filepath.Join(root, "proc/1/environ")); err == nil {
		for _, v := range strings.Split(string(environ), "\x00") {
			if manager, ok := strings.CutPrefix(v, "container="); ok && manager != "" {
				return containerManager(manager)
			}
		}
	}
	if manager := readTrimmed(root, "run/systemd/container"); manager != "" {
		return containerManager(manager)
	}
	if exists(filepath.Join(root, "run/.containerenv")) {
		return "podman"
	}
	// /proc/vz exists in OpenVZ containers and on their host, /proc/bc on the host only.
	if exists(filepath.Join(root, "proc/vz")) && !exists(filepath.Join(root, "proc/bc")) {
		return "openvz"
	}
	if release := readTrimmed(root, "proc/sys/kernel/osrelease"); strings.Contains(release, "Microsoft") ||
		strings.Contains(release, "WSL") {
		return "wsl"
	}
	return cgroupContainer(readTrimmed(root, "proc/1/cgroup"))
}

func containerManager(name string) string {
	if containerManagers[name] {
		return name
	}
	return "container-other"
}

// cgroupContainer recognizes the cgroup paths container engines put init in. With cgroup
// namespaces (the default under cgroup v2) init sees "/" and this finds nothing.
func cgroupContainer(cgroups string) string {
	for line := range strings.Lines(cgroups) {
		// Each line reads hierarchy-ID:controllers:path.
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		path := parts[2]
		switch {
		case strings.Contains(path, "/docker/") || strings.Contains(path, "/docker-"):
			return "docker"
		case strings.Contains(path, "/libpod-") || strings.Contains(path, "/libpod_parent/"):
			return "podman"
		case strings.Contains(path, "/lxc/") || strings.Contains(path, "/lxc.payload"):
			return "lxc"
		case strings.Contains(path, "/kubepods"):
			return "container-other"
		}
	}
	return ""
}

// detectVM looks for a hypervisor in DMI, then Xen's own interface, then the CPU's hypervisor
// flag, which says that there is a hypervisor but not which one.
func detectVM(root string) string {
	product := readTrimmed(root, dmiDir, "product_name")
	if readTrimmed(root, dmiDir, "sys_vendor") == "Microsoft Corporation" && product == "Virtual Machine" {
		return "microsoft"
	}
	clocks := readTrimmed(root, "sys/devices/system/clocksource/clocksource0/available_clocksource")
	switch tech := dmiHypervisor(root); {
	// EC2 bare-metal instances carry Amazon's DMI strings with no hypervisor underneath.
	case tech == "amazon" && strings.HasSuffix(product, ".metal"):
		return ""
	// QEMU's firmware is the same with and without KVM; KVM's clock tells them apart, as
	// systemd-detect-virt tells them apart by CPUID.
	case tech == "qemu" && clocksourceHypervisor(clocks) == "kvm":
		return "kvm"
	case tech != "":
		return tech
	}
	// The hypervisor's CPUID signature names it where the firmware does not (this machine's
	// own CPU only: a root given for a test or a chroot has no CPU of its own).
	if root == "/" {
		if tech := cpuidHypervisors[strings.TrimRight(cpuidHypervisor(), "\x00")]; tech != "" {
			return tech
		}
	}
	// Xen's dom0 is the host that runs the guests, not a guest itself.
	if readTrimmed(root, "sys/hypervisor/type") == "xen" &&
		!strings.Contains(readTrimmed(root, "proc/xen/capabilities"), "control_d") {
		return "xen"
	}
	if cpuinfo, err := os.ReadFile(filepath.Join(root, "proc/cpuinfo")); err == nil && parseCPUInfo(string(cpuinfo)).hypervisor {
		return clocksourceHypervisor(clocks)
	}
	return ""
}

// dmiHypervisor returns the hypervisor the first DMI string that names one names.
func dmiHypervisor(root string) string {
	for _, name := range dmiVirtFiles {
		value := readTrimmed(root, dmiDir, name)
		for _, h := range dmiHypervisors {
			if value != "" && strings.HasPrefix(value, h.prefix) {
				return h.technology
			}
		}
	}
	return ""
}

// clocksourceHypervisor names the hypervisor whose paravirtual clock the kernel found, for a
// guest whose firmware does not say (as in microVMs without DMI).
func clocksourceHypervisor(available string) string {
	for _, clock := range strings.Fields(available) {
		switch {
		case clock == "kvm-clock":
			return "kvm"
		case clock == "xen":
			return "xen"
		case strings.HasPrefix(clock, "hyperv_clocksource"):
			return "microsoft"
		}
	}
	return "vm-other"
}

// readTrimmed returns the content of a file under root without surrounding white space, or ""
// when it cannot be read: most of these files are optional, or readable by root only.
func readTrimmed(root string, path ...string) string {
	content, err := os.ReadFile(filepath.Join(append([]string{root}, path...)...))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(content))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
