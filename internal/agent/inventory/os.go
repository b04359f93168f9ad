package inventory

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/shirou/gopsutil/v4/host"

	"gale/internal/wire/agentproto"
)

// osType maps runtime.GOOS to the OS type the server knows.
func osType() string {
	switch runtime.GOOS {
	case "windows":
		return agentproto.OSWindows
	case "darwin":
		return agentproto.OSMacOS
	default:
		return agentproto.OSLinux
	}
}

func collectOS(ctx context.Context, inv *agentproto.Inventory) error {
	info := agentproto.OSInfo{
		Type:         osType(),
		Architecture: runtime.GOARCH,
		Timezone:     timezone(),
	}
	var errs []error
	release, err := osRelease(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	info.Name, info.Version, info.Build = release.name, release.version, release.build
	info.PrettyName, info.Codename, info.PointRelease = release.prettyName, release.codename, release.pointRelease
	if info.DNSServers, err = dnsServers(); err != nil {
		errs = append(errs, err)
	}

	if info.KernelVersion, err = host.KernelVersionWithContext(ctx); err != nil {
		errs = append(errs, err)
	}
	if boot, err := host.BootTimeWithContext(ctx); err != nil {
		errs = append(errs, err)
	} else {
		info.BootTime = time.Unix(int64(boot), 0).UTC()
	}
	if up, err := host.UptimeWithContext(ctx); err != nil {
		errs = append(errs, err)
	} else {
		info.UptimeSeconds = int64(up)
	}
	inv.OS = info
	return errors.Join(errs...)
}

// release names the installed operating system.
type release struct {
	name, version, build string
	// prettyName, codename and pointRelease are known on Linux only.
	prettyName, codename, pointRelease string
}
