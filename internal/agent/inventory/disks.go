package inventory

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/shirou/gopsutil/v4/disk"

	"gale/internal/wire/agentproto"
)

// skippedFSTypes are file systems disk.Partitions(false) still reports that hold no user data:
// read-only snap and live images, and the macOS device and automount pseudo file systems.
var skippedFSTypes = map[string]bool{
	"squashfs": true,
	"devfs":    true,
	"autofs":   true,
	"nullfs":   true,
}

func collectDisks(ctx context.Context, inv *agentproto.Inventory) error {
	partitions, err := physicalPartitions(ctx)
	if err != nil {
		return err
	}
	var errs []error

	seen := map[string]bool{}
	for _, p := range partitions {
		if seen[p.Mountpoint] || !keepPartition(p) {
			continue
		}
		seen[p.Mountpoint] = true
		usage, err := disk.UsageWithContext(ctx, p.Mountpoint)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if usage.Total == 0 {
			continue
		}
		inv.Disks = append(inv.Disks, agentproto.Disk{
			Device:      p.Device,
			Mountpoint:  p.Mountpoint,
			FSType:      p.Fstype,
			TotalBytes:  usage.Total,
			UsedBytes:   usage.Used,
			FreeBytes:   usage.Free,
			UsedPercent: usage.UsedPercent,
		})
	}
	return errors.Join(errs...)
}

// keepPartition drops pseudo file systems, macOS system volumes (they share the root volume's
// space) and files bind-mounted over the tree, such as a container's /etc/hosts.
func keepPartition(p disk.PartitionStat) bool {
	if skippedFSTypes[p.Fstype] || strings.HasPrefix(p.Mountpoint, "/System/Volumes/") {
		return false
	}
	info, err := os.Stat(p.Mountpoint)
	return err == nil && info.IsDir()
}
