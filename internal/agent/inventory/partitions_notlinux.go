//go:build !linux

package inventory

import (
	"context"

	"github.com/shirou/gopsutil/v4/disk"
)

// physicalPartitions lists the volumes backed by storage devices.
func physicalPartitions(ctx context.Context) ([]disk.PartitionStat, error) {
	return disk.PartitionsWithContext(ctx, false)
}
