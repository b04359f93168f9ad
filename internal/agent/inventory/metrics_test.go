package inventory

import (
	"testing"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
)

func TestSampleReportsPlausibleValuesQuickly(t *testing.T) {
	start := time.Now()
	m := Sample(t.Context())
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("Sample took %v, want under 1 s", elapsed)
	}
	t.Logf("%+v", m)

	for name, percent := range map[string]float64{"CPU": m.CPUPercent, "RAM": m.RAMPercent, "disk": m.DiskPercent} {
		if percent < 0 || percent > 100 {
			t.Errorf("%s percent = %v, want 0..100", name, percent)
		}
	}
	if m.RAMTotalMB <= 0 || m.RAMUsedMB <= 0 || m.RAMUsedMB > m.RAMTotalMB {
		t.Errorf("RAM used/total = %d/%d MB", m.RAMUsedMB, m.RAMTotalMB)
	}
	if m.DiskTotalGB <= 0 || m.DiskUsedGB > m.DiskTotalGB {
		t.Errorf("disk used/total = %v/%v GB", m.DiskUsedGB, m.DiskTotalGB)
	}
	if m.ProcessCount <= 0 {
		t.Errorf("ProcessCount = %d", m.ProcessCount)
	}
	if m.Load1 < 0 {
		t.Errorf("Load1 = %v", m.Load1)
	}
}

func TestSampleMeasuresCPUOverAtLeastTheWindow(t *testing.T) {
	Sample(t.Context())
	start := time.Now()
	Sample(t.Context())
	// The second call comes right after the first, so it waits out most of the window.
	if elapsed := time.Since(start); elapsed < cpuWindow/2 || elapsed > cpuWindow+250*time.Millisecond {
		t.Errorf("back-to-back Sample took %v, want about %v", elapsed, cpuWindow)
	}
}

func TestBusyPercent(t *testing.T) {
	before := cpu.TimesStat{User: 100, System: 50, Idle: 800, Iowait: 50}
	tests := []struct {
		name  string
		after cpu.TimesStat
		want  float64
	}{
		{"quarter busy", cpu.TimesStat{User: 120, System: 55, Idle: 870, Iowait: 55}, 25},
		{"iowait counts as idle", cpu.TimesStat{User: 100, System: 50, Idle: 800, Iowait: 150}, 0},
		{"fully busy", cpu.TimesStat{User: 150, System: 100, Idle: 800, Iowait: 50}, 100},
		{"no time passed", before, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := busyPercent(before, tt.after); got != tt.want {
				t.Errorf("busyPercent = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestUptimeIsPositive(t *testing.T) {
	if up := Uptime(); up <= 0 {
		t.Errorf("Uptime() = %d", up)
	}
}
