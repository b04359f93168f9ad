package inventory

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gale/internal/wire/agentproto"
)

// dmiDir exposes the firmware's SMBIOS tables; absent on most ARM boards and in microVMs.
const dmiDir = "sys/class/dmi/id"

// platformHardware reads what Linux tells of the machine under hostRoot: SMBIOS identity, CPU
// topology, swap, virtualization and the storage devices.
func platformHardware(ctx context.Context) (agentproto.Hardware, error) {
	hw, err := linuxHardware(hostRoot)
	if disksMissDetails(hw.PhysicalDisks) {
		hw.PhysicalDisks = withLsblkDetails(ctx, hw.PhysicalDisks)
	}
	return hw, err
}

// linuxHardware reads the hardware facts of the system under root from files only.
func linuxHardware(root string) (agentproto.Hardware, error) {
	hw := dmiIdentity(root)
	var errs []error
	if cpuinfo, err := os.ReadFile(filepath.Join(root, "proc/cpuinfo")); err != nil {
		errs = append(errs, err)
	} else {
		cpu := parseCPUInfo(string(cpuinfo))
		hw.CPUVendor, hw.CPUModel, hw.CPUSockets, hw.CPUCores, hw.CPUThreads =
			cpu.vendor, cpu.model, cpu.sockets, cpu.cores, cpu.threads
	}
	if meminfo, err := os.ReadFile(filepath.Join(root, "proc/meminfo")); err != nil {
		errs = append(errs, err)
	} else {
		hw.SwapBytes = meminfoBytes(string(meminfo), "SwapTotal")
	}
	hw.VirtualizationType, hw.Virtualization = detectVirtualization(root)
	disks, err := physicalDisks(root)
	hw.PhysicalDisks = disks
	return hw, errors.Join(append(errs, err)...)
}

// dmiIdentity reads the maker, model, board, chassis and serial numbers from SMBIOS. Serial
// numbers and the UUID are readable by root only, so they stay empty for an unprivileged agent.
func dmiIdentity(root string) agentproto.Hardware {
	dmi := func(name string) string { return readTrimmed(root, dmiDir, name) }
	return agentproto.Hardware{
		Manufacturer: dmi("sys_vendor"),
		Model:        dmi("product_name"),
		SerialNumber: dmi("product_serial"),
		BIOSVersion:  dmi("bios_version"),
		BoardVendor:  dmi("board_vendor"),
		BoardName:    dmi("board_name"),
		BoardSerial:  dmi("board_serial"),
		ChassisType:  chassisTypeName(dmi("chassis_type")),
		SystemUUID:   dmi("product_uuid"),
	}
}

// chassisTypes are the SMBIOS 3.x chassis types (DSP0134, 7.4.1), from type 1.
var chassisTypes = []string{
	"Other", "Unknown", "Desktop", "Low Profile Desktop", "Pizza Box", "Mini Tower", "Tower",
	"Portable", "Laptop", "Notebook", "Hand Held", "Docking Station", "All in One", "Sub Notebook",
	"Space-saving", "Lunch Box", "Main Server Chassis", "Expansion Chassis", "SubChassis",
	"Bus Expansion Chassis", "Peripheral Chassis", "RAID Chassis", "Rack Mount Chassis",
	"Sealed-case PC", "Multi-system chassis", "Compact PCI", "Advanced TCA", "Blade",
	"Blade Enclosure", "Tablet", "Convertible", "Detachable", "IoT Gateway", "Embedded PC",
	"Mini PC", "Stick PC",
}

// chassisTypeName names an SMBIOS chassis type number; a number newer than this table is
// reported as it is rather than lost.
func chassisTypeName(number string) string {
	n, err := strconv.Atoi(number)
	if err != nil {
		return ""
	}
	if n >= 1 && n <= len(chassisTypes) {
		return chassisTypes[n-1]
	}
	return number
}

// cpuInfo is what /proc/cpuinfo says of the processors.
type cpuInfo struct {
	vendor, model           string
	sockets, cores, threads int
	// hypervisor is the CPUID flag a hypervisor sets for its guests.
	hypervisor bool
}

// parseCPUInfo reads /proc/cpuinfo, which has one block per logical CPU. Sockets are the
// distinct "physical id"s and cores the sum of each socket's "cpu cores". ARM kernels give
// neither a vendor, a model name nor the topology, so those stay empty there.
func parseCPUInfo(content string) cpuInfo {
	var info cpuInfo
	coresPerSocket := map[string]int{}
	socket := ""
	scanner := bufio.NewScanner(strings.NewReader(content))
	scanner.Buffer(nil, 1<<20) // the flags line of a recent x86 CPU runs past 1 KiB
	for scanner.Scan() {
		key, value, ok := strings.Cut(scanner.Text(), ":")
		if !ok {
			continue
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch key {
		case "processor":
			info.threads++
			socket = ""
		case "vendor_id":
			info.vendor = value
		case "model name":
			info.model = value
		case "physical id":
			socket = value
			if _, seen := coresPerSocket[socket]; !seen {
				coresPerSocket[socket] = 0
			}
		case "cpu cores":
			if n, err := strconv.Atoi(value); err == nil {
				coresPerSocket[socket] = n
			}
		case "flags":
			info.hypervisor = info.hypervisor || hasFlag(value, "hypervisor")
		}
	}
	for id, cores := range coresPerSocket {
		if id != "" {
			info.sockets++
		}
		info.cores += cores
	}
	return info
}

func hasFlag(flags, flag string) bool {
	for f := range strings.FieldsSeq(flags) {
		if f == flag {
			return true
		}
	}
	return false
}

// meminfoBytes reads one "Name:  1234 kB" line of /proc/meminfo, in bytes.
func meminfoBytes(content, name string) uint64 {
	for line := range strings.Lines(content) {
		key, value, ok := strings.Cut(line, ":")
		if !ok || key != name {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) == 0 {
			return 0
		}
		n, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return 0
		}
		if len(fields) > 1 && fields[1] == "kB" {
			n *= 1024
		}
		return n
	}
	return 0
}

// physicalDisks lists the block devices backed by hardware (or a hypervisor's virtual
// hardware): those with a device link in sysfs. Loop, RAM, zram, device-mapper and md devices
// have none and are left out, as are empty drives (a card reader without a card).
func physicalDisks(root string) ([]agentproto.PhysicalDisk, error) {
	blockDir := filepath.Join(root, "sys/block")
	entries, err := os.ReadDir(blockDir)
	if err != nil {
		return nil, err
	}
	var disks []agentproto.PhysicalDisk
	for _, e := range entries {
		dir := filepath.Join(blockDir, e.Name())
		if !exists(filepath.Join(dir, "device")) {
			continue
		}
		sectors, err := strconv.ParseUint(readTrimmed(dir, "size"), 10, 64)
		if err != nil || sectors == 0 {
			continue
		}
		disks = append(disks, agentproto.PhysicalDisk{
			Name:  e.Name(),
			Model: readTrimmed(dir, "device/model"),
			// virtio disks keep their serial beside the device, NVMe and SCSI under it; the WWID
			// identifies a disk that shows no serial here (SATA's is in the udev database).
			Serial: firstNonEmpty(readTrimmed(dir, "serial"), readTrimmed(dir, "device/serial"),
				readTrimmed(dir, "wwid"), readTrimmed(dir, "device/wwid")),
			// The size file counts 512-byte sectors whatever the device's own sector size.
			SizeBytes:  sectors * 512,
			Rotational: readTrimmed(dir, "queue/rotational") == "1",
			Removable:  readTrimmed(dir, "removable") == "1",
		})
	}
	return disks, nil
}
