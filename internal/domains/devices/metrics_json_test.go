package devices

import (
	"encoding/json"
	"testing"

	"gale/internal/wire/agentproto"
)

var metricSamples = []string{
	`{"cpuPercent":12.5,"ramPercent":43.2,"ramUsedMb":3500,"ramTotalMb":8000,"diskPercent":71.3,"diskUsedGb":120.5,"diskTotalGb":250,"processCount":213,"load1":0.42}`,
	`{"load1": 0.42, "ramUsedMb": 3500, "cpuPercent": 12.5, "ramPercent": 43.2, "ramTotalMb": 8000, "diskUsedGb": 120.5, "diskPercent": 71.3, "diskTotalGb": 250, "processCount": 213}`,
	`{}`, ` { } `, `{"cpuPercent":1e-7,"diskTotalGb":-0}`, `{"cpuPercent":1,"cpuPercent":2}`,
	`{"ramUsedMb":1.5}`, `{"ramUsedMb":1e3}`, `{"processCount":99999999999999999999}`, `{"cpuPercent":1e400}`,
	`{"CPUPERCENT":5}`, `{"other":1}`, `{"cpuPercent":"5"}`, `{"cpuPercent":null}`, `{"cpuPercent":5`, `{"cpuPercent":5,}`,
	`{"cpuPercent":5} x`, `[1]`, ``, `{"cpu\"Percent":5}`, `{"cpuPercent":+5}`, `{"cpuPercent":.5}`,
}

// TestParseMetricsAgreesWithEncodingJSON: whatever the fast path accepts, encoding/json reads
// the same way; what it declines goes to encoding/json.
func TestParseMetricsAgreesWithEncodingJSON(t *testing.T) {
	accepted := 0
	for _, s := range metricSamples {
		got, ok := parseMetrics(s)
		var want agentproto.Metrics
		err := json.Unmarshal([]byte(s), &want)
		if ok && (err != nil || got != want) {
			t.Errorf("parseMetrics(%s) = %+v; encoding/json: %+v, %v", s, got, want, err)
		}
		if ok {
			accepted++
		}
	}
	if accepted < 6 {
		t.Errorf("the fast path accepted %d samples; the stored forms must not fall back", accepted)
	}
	for _, stored := range metricSamples[:2] {
		if _, ok := parseMetrics(stored); !ok {
			t.Errorf("parseMetrics declined the stored form %s", stored)
		}
	}
}

func FuzzParseMetrics(f *testing.F) {
	for _, s := range metricSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseMetrics(s)
		if !ok {
			return
		}
		var want agentproto.Metrics
		if err := json.Unmarshal([]byte(s), &want); err != nil || got != want {
			t.Fatalf("parseMetrics(%q) = %+v; encoding/json: %+v, %v", s, got, want, err)
		}
	})
}
