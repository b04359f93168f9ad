package inventory

import (
	"context"

	"github.com/shirou/gopsutil/v4/host"
	"golang.org/x/sys/unix"

	"gale/internal/wire/agentproto"
)

// osRelease reports the macOS version (sw_vers) and its build ("23C71").
func osRelease(ctx context.Context) (release, error) {
	_, _, version, err := host.PlatformInformationWithContext(ctx)
	build, _ := unix.Sysctl("kern.osversion")
	return release{name: "macOS", version: version, build: build}, err
}

// platformHardware reports the model identifier ("MacBookPro18,3"); the serial number and
// firmware version need IOKit and are not collected.
func platformHardware(context.Context) (agentproto.Hardware, error) {
	model, err := unix.Sysctl("hw.model")
	return agentproto.Hardware{Manufacturer: "Apple", Model: model}, err
}

// installedSoftware lists applications through system_profiler, which can take several
// seconds on a machine with many applications.
func installedSoftware(ctx context.Context, _ string) ([]agentproto.Software, error) {
	out, err := runCommand(ctx, "system_profiler", "-json", "SPApplicationsDataType")
	if err != nil {
		return nil, err
	}
	return parseSystemProfilerApps(out)
}
