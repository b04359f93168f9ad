package inventory

import (
	"testing"

	"gale/internal/wire/agentproto"
)

func TestParseSystemProfilerApps(t *testing.T) {
	got, err := parseSystemProfilerApps(readFixture(t, "system_profiler_apps.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []agentproto.Software{
		{Name: "Safari", Version: "17.2.1", Publisher: "Apple", Architecture: "universal", Source: "app"},
		{Name: "Google Chrome", Version: "120.0.6099.216", Publisher: "Google LLC", Architecture: "universal", Source: "app"},
		{Name: "Terminal", Version: "2.14", Publisher: "Apple", Architecture: "arm64", Source: "app"},
		{Name: "OldTool", Architecture: "x86_64", Source: "app"},
	}
	assertSoftware(t, got, want)
}

func TestParseSystemProfilerAppsRejectsBadJSON(t *testing.T) {
	if _, err := parseSystemProfilerApps([]byte("Error: not json")); err == nil {
		t.Fatal("want an error for output that is not JSON")
	}
}
