package discovery

import (
	"fmt"
	"testing"
	"time"
)

func TestInferType(t *testing.T) {
	cases := []struct {
		name     string
		ports    []int
		descr    string
		host     string
		gateway  bool
		wantType string
	}{
		{"printer by port", []int{80, 9100}, "", "", false, TypePrinter},
		{"ipp", []int{631}, "", "", false, TypePrinter},
		{"camera", []int{80, 554}, "", "", false, TypeCamera},
		{"phone", []int{5060}, "", "", false, TypePhone},
		{"nas", []int{139, 445, 5000}, "", "", false, TypeNAS},
		{"windows desktop", []int{135, 445, 3389}, "", "", false, TypeWorkstation},
		{"windows server by service", []int{53, 88, 389, 445}, "", "", false, TypeServer},
		{"windows server by name", []int{3389}, "", "fs-srv01", false, TypeServer},
		{"gateway", []int{53}, "", "", true, TypeRouter},
		{"iot web", []int{22, 80}, "", "", false, TypeIoT},
		{"mqtt", []int{1883}, "", "", false, TypeIoT},
		{"linux server", []int{22, 5432}, "", "", false, TypeServer},
		{"snmp switch", nil, "Cisco IOS Software, C2960 Software, Catalyst switch", "", false, TypeSwitch},
		{"snmp firewall beats ports", []int{22, 443}, "FortiGate-60E v6.4", "", false, TypeFirewall},
		{"snmp router", nil, "RouterOS CCR1009", "", false, TypeRouter},
		{"nothing", nil, "", "", false, TypeUnknown},
	}
	for _, c := range cases {
		if got := inferType(c.ports, c.descr, "", c.host, c.gateway); got != c.wantType {
			t.Errorf("%s: inferType(%v, %q, %q, %v) = %s, want %s", c.name, c.ports, c.descr, c.host, c.gateway, got, c.wantType)
		}
	}
}

// A cron schedule reads in the site's time zone.
func TestNextRunInSiteZone(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	next, err := DiscoverySchedule{Type: ScheduleCron, Cron: "30 2 * * *"}.nextRun(now, "Europe/Berlin")
	if err != nil || !next.Equal(time.Date(2026, 3, 11, 1, 30, 0, 0, time.UTC)) {
		t.Errorf("next = %v, %v; want 01:30 UTC (02:30 in Berlin)", next, err)
	}
	next, err = DiscoverySchedule{Type: ScheduleInterval, IntervalMinutes: 20}.nextRun(now, "UTC")
	if err != nil || !next.Equal(now.Add(20*time.Minute)) {
		t.Errorf("interval next = %v, %v", next, err)
	}
	if next, err := (DiscoverySchedule{Type: ScheduleManual}).nextRun(now, "UTC"); next != nil || err != nil {
		t.Errorf("manual next = %v, %v", next, err)
	}
}

func TestParsePorts(t *testing.T) {
	for raw, want := range map[string]string{"[]": "[]", "[22,80]": "[22 80]", "[22, 80, 443]": "[22 80 443]", " [ 7 ] ": "[7]"} {
		got, err := parsePorts(raw)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("parsePorts(%q) = %v, %v; want %s", raw, got, err, want)
		}
	}
	for _, raw := range []string{"", "22", "[x]", "[1,]"} {
		if _, err := parsePorts(raw); err == nil {
			t.Errorf("parsePorts(%q) passed", raw)
		}
	}
}
