//go:build linux || darwin

package inventory

import (
	"context"
	"os"
	"strings"

	"github.com/shirou/gopsutil/v4/load"
)

// timezone names the system time zone ("Europe/Paris") after the zoneinfo file /etc/localtime
// links to.
func timezone() string {
	target, err := os.Readlink("/etc/localtime")
	if err != nil {
		return zoneAbbreviation()
	}
	if _, name, ok := strings.Cut(target, "zoneinfo/"); ok && name != "" {
		return name
	}
	return zoneAbbreviation()
}

// rootPath is the file system Sample reports disk use of.
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
