package inventory

import (
	"context"
	"os"
	"strings"

	"github.com/shirou/gopsutil/v4/host"
	"golang.org/x/sys/windows/registry"

	"gale/internal/wire/agentproto"
)

// osRelease reports the edition ("Microsoft Windows 11 Pro"), the feature update ("23H2")
// and the build with its revision ("22631.3007").
func osRelease(ctx context.Context) (release, error) {
	name, _, version, err := host.PlatformInformationWithContext(ctx)
	if err != nil {
		return release{name: "Windows"}, err
	}
	// The kernel version reads "10.0.22631.3007 Build 22631.3007".
	kernel, _ := host.KernelVersionWithContext(ctx)
	_, build, _ := strings.Cut(kernel, "Build ")
	return release{name: name, version: version, build: build}, nil
}

// platformHardware reads the SMBIOS strings Windows copies into the registry at boot. The
// serial number is only exposed through WMI and is not collected.
func platformHardware(context.Context) (agentproto.Hardware, error) {
	key, err := registry.OpenKey(registry.LOCAL_MACHINE, `HARDWARE\DESCRIPTION\System\BIOS`, registry.QUERY_VALUE)
	if err != nil {
		return agentproto.Hardware{}, err
	}
	defer key.Close()
	value := func(name string) string {
		s, _, _ := key.GetStringValue(name)
		return strings.TrimSpace(s)
	}
	return agentproto.Hardware{
		Manufacturer: value("SystemManufacturer"),
		Model:        value("SystemProductName"),
		BIOSVersion:  value("BIOSVersion"),
	}, nil
}

// timezone names the Windows time zone ("W. Europe Standard Time").
func timezone() string {
	key, err := registry.OpenKey(registry.LOCAL_MACHINE,
		`SYSTEM\CurrentControlSet\Control\TimeZoneInformation`, registry.QUERY_VALUE)
	if err != nil {
		return zoneAbbreviation()
	}
	defer key.Close()
	name, _, err := key.GetStringValue("TimeZoneKeyName")
	if err != nil || name == "" {
		return zoneAbbreviation()
	}
	return name
}

// rootPath is the system drive, which Sample reports disk use of.
func rootPath() string {
	if drive := os.Getenv("SystemDrive"); drive != "" {
		return drive + `\`
	}
	return `C:\`
}

// load1 is zero: Windows has no load average.
func load1(context.Context) float64 {
	return 0
}
