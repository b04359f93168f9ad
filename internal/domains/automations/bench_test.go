package automations_test

import (
	"fmt"
	"testing"
	"time"

	"gale/internal/domains/automations"
	"gale/internal/domains/scripts"
	"gale/internal/testkit/apptest"
)

// BenchmarkRunDispatch measures a run of a run_script automation over an organization of
// 10,000 devices, from POST /automations/{id}/run to its answer: by then every device has its
// script execution and command (handed to the scripts service 500 at a time) and the run its
// 10,000 steps. Reported as devices/s.
func BenchmarkRunDispatch(b *testing.B) {
	const fleet = 10_000
	e := apptest.New(b)
	ten := e.NewTenant(e.Admin(), "Bench")
	for i := range fleet {
		e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: fmt.Sprintf("srv-%05d", i)})
	}
	var sc scripts.Script
	e.Must(201, ten.Org, "POST", api+"/scripts", map[string]any{"name": "Bench", "osTypes": []string{"linux"}, "language": "sh",
		"content": "uptime"}).JSON(b, &sc)
	var x automations.Automation
	e.Must(201, ten.Org, "POST", api+"/automations", manual("Fleet", map[string]any{"type": "organization"},
		map[string]any{"type": "run_script", "scriptId": sc.ID})).JSON(b, &x)
	b.ResetTimer()
	var took time.Duration
	for range b.N {
		start := time.Now()
		var r automations.AutomationRun
		e.Must(202, ten.Org, "POST", api+"/automations/"+x.ID+"/run", nil).JSON(b, &r)
		took += time.Since(start)
		if r.DeviceCount != fleet || len(r.Steps) != fleet {
			b.Fatalf("run of %d devices with %d steps", r.DeviceCount, len(r.Steps))
		}
	}
	b.ReportMetric(float64(fleet*b.N)/took.Seconds(), "devices/s")
}
