//go:build !linux && !windows && !darwin

package inventory

import (
	"context"
	"errors"

	"github.com/shirou/gopsutil/v4/host"
	"github.com/shirou/gopsutil/v4/load"

	"gale/internal/wire/agentproto"
)

// osRelease reports what gopsutil knows of this platform ("freebsd", "14.1-RELEASE").
func osRelease(ctx context.Context) (release, error) {
	platform, _, version, err := host.PlatformInformationWithContext(ctx)
	return release{name: platform, version: version}, err
}

func platformHardware(context.Context) (agentproto.Hardware, error) {
	return agentproto.Hardware{}, nil
}

func installedSoftware(context.Context, string) ([]agentproto.Software, error) {
	return nil, errors.New("not collected on this OS yet")
}

func timezone() string {
	return zoneAbbreviation()
}

func rootPath() string {
	return "/"
}

func load1(ctx context.Context) float64 {
	avg, err := load.AvgWithContext(ctx)
	if err != nil {
		return 0
	}
	return avg.Load1
}
