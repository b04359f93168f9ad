package inventory

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/disk"
	"github.com/shirou/gopsutil/v4/host"
	"github.com/shirou/gopsutil/v4/mem"
	"github.com/shirou/gopsutil/v4/process"

	"gale/internal/wire/agentproto"
)

// Sample takes one health sample. Parts the platform cannot measure stay zero.
//
// CPU use is averaged since the previous Sample, so a heartbeat reports its whole interval
// without blocking; when there is no previous sample or it is under cpuWindow old, Sample
// waits out the rest of cpuWindow (at most 200 ms).
func Sample(ctx context.Context) agentproto.Metrics {
	var m agentproto.Metrics
	if percent, err := cpuUse.percent(ctx); err == nil {
		m.CPUPercent = round1(percent)
	}
	if vm, err := mem.VirtualMemoryWithContext(ctx); err == nil {
		m.RAMPercent = round1(vm.UsedPercent)
		m.RAMUsedMB = int64(vm.Used / (1 << 20))
		m.RAMTotalMB = int64(vm.Total / (1 << 20))
	}
	if usage, err := disk.UsageWithContext(ctx, rootPath()); err == nil {
		m.DiskPercent = round1(usage.UsedPercent)
		m.DiskUsedGB = round1(float64(usage.Used) / (1 << 30))
		m.DiskTotalGB = round1(float64(usage.Total) / (1 << 30))
	}
	if pids, err := process.PidsWithContext(ctx); err == nil {
		m.ProcessCount = len(pids)
	}
	m.Load1 = round1(load1(ctx))
	return m
}

// Uptime returns the seconds since the machine booted, or 0 when the platform will not say.
func Uptime() int64 {
	up, err := host.Uptime()
	if err != nil {
		return 0
	}
	return int64(up)
}

func round1(v float64) float64 {
	return math.Round(v*10) / 10
}

// cpuWindow is the shortest span CPU use is measured over; shorter spans are mostly noise.
const cpuWindow = 200 * time.Millisecond

var cpuUse cpuSampler

// cpuSampler remembers the CPU times of the previous measurement.
type cpuSampler struct {
	mu   sync.Mutex
	last cpu.TimesStat
	at   time.Time
}

func (s *cpuSampler) percent(ctx context.Context) (float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.IsZero() {
		first, err := cpuTimes(ctx)
		if err != nil {
			return 0, err
		}
		s.last, s.at = first, time.Now()
	}
	if wait := cpuWindow - time.Since(s.at); wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-timer.C:
		}
	}
	now, err := cpuTimes(ctx)
	if err != nil {
		return 0, err
	}
	percent := busyPercent(s.last, now)
	s.last, s.at = now, time.Now()
	return percent, nil
}

// cpuTimes returns the CPU times summed over all CPUs.
func cpuTimes(ctx context.Context) (cpu.TimesStat, error) {
	times, err := cpu.TimesWithContext(ctx, false)
	if err != nil {
		return cpu.TimesStat{}, err
	}
	if len(times) == 0 {
		return cpu.TimesStat{}, errors.New("no CPU times reported")
	}
	return times[0], nil
}

// busyPercent is the share of time between two readings the CPUs spent not idle. Guest time
// is left out of the total because Linux already counts it in user time.
func busyPercent(before, after cpu.TimesStat) float64 {
	busy := func(t cpu.TimesStat) float64 { return t.User + t.System + t.Nice + t.Irq + t.Softirq + t.Steal }
	idle := func(t cpu.TimesStat) float64 { return t.Idle + t.Iowait }
	busyDelta := busy(after) - busy(before)
	total := busyDelta + idle(after) - idle(before)
	if total <= 0 || busyDelta <= 0 {
		return 0
	}
	return math.Min(100, busyDelta/total*100)
}
