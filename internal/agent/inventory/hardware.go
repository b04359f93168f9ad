package inventory

import (
	"context"
	"errors"
	"math"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/host"
	"github.com/shirou/gopsutil/v4/mem"

	"gale/internal/wire/agentproto"
)

// collectHardware takes what the platform's own sources tell (platformHardware) and fills
// what they leave out through gopsutil.
func collectHardware(ctx context.Context, inv *agentproto.Inventory) error {
	hw, err := platformHardware(ctx)
	errs := []error{err}

	// cpu.Info lists every logical CPU on Linux; the first one names the model for all.
	if infos, err := cpu.InfoWithContext(ctx); err != nil {
		errs = append(errs, err)
	} else if len(infos) > 0 {
		hw.CPUModel = firstNonEmpty(hw.CPUModel, infos[0].ModelName)
		hw.CPUVendor = firstNonEmpty(hw.CPUVendor, infos[0].VendorID)
		hw.CPUMhz = int(math.Round(infos[0].Mhz))
	}
	if hw.CPUThreads == 0 {
		if threads, err := cpu.CountsWithContext(ctx, true); err != nil {
			errs = append(errs, err)
		} else {
			hw.CPUThreads = threads
		}
	}
	if hw.CPUCores == 0 {
		// Some hypervisors hide the core topology; each thread then counts as a core.
		if cores, err := cpu.CountsWithContext(ctx, false); err == nil && cores > 0 {
			hw.CPUCores = cores
		} else {
			hw.CPUCores = hw.CPUThreads
		}
	}
	if vm, err := mem.VirtualMemoryWithContext(ctx); err != nil {
		errs = append(errs, err)
	} else {
		hw.MemoryBytes = vm.Total
	}
	// Only a guest is virtual; "host" means this machine runs virtual machines itself.
	if hw.VirtualizationType == "" {
		if system, role, err := host.VirtualizationWithContext(ctx); err == nil && role == "guest" {
			hw.Virtualization = system
		}
	}
	inv.Hardware = hw
	return errors.Join(errs...)
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
