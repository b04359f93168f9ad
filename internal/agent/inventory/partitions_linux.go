package inventory

import (
	"context"
	"slices"

	"github.com/shirou/gopsutil/v4/disk"
)

// physicalPartitions lists block-device file systems (the kernel marks proc, sysfs, tmpfs,
// cgroup and the like "nodev") plus the root file system when it is not one, as in a
// container whose root is an overlay.
func physicalPartitions(ctx context.Context) ([]disk.PartitionStat, error) {
	partitions, err := disk.PartitionsWithContext(ctx, false)
	if err != nil {
		return nil, err
	}
	isRoot := func(p disk.PartitionStat) bool { return p.Mountpoint == "/" }
	if slices.ContainsFunc(partitions, isRoot) {
		return partitions, nil
	}
	all, err := disk.PartitionsWithContext(ctx, true)
	if err != nil {
		return nil, err
	}
	if i := slices.IndexFunc(all, isRoot); i >= 0 {
		partitions = append(partitions, all[i])
	}
	return partitions, nil
}
