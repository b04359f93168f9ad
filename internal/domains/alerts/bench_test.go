package alerts_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/alerts"

	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

// BenchmarkHeartbeatEvaluation measures what evaluating 200 rules adds to a heartbeat: the
// device's evaluation inside a write transaction, as the heartbeat hook runs it (in its
// savepoint), with a 60-sample metrics history and a mix of threshold (three metrics, five
// windows), offline, silence and failed-command rules, a tenth of which hold (their alerts
// are open, the steady state of a busy device).
func BenchmarkHeartbeatEvaluation(b *testing.B) {
	e := apptest.New(b)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Bench")
	dev := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "bench"})
	now := store.Now()
	for i := 0; i < 60; i++ {
		if _, err := e.App.DB.SQL.Exec(`INSERT INTO device_metrics (device_id, recorded_at, cpu_percent, ram_percent, disk_percent, sample)
			VALUES ($1, $2, $3, 50, 70, '{}')`, dev, now.Add(-time.Duration(i)*time.Minute), float64(40+i%20)); err != nil {
			b.Fatal(err)
		}
	}
	metrics := []string{"cpuPercent", "ramPercent", "diskPercent"}
	for i := 0; i < 200; i++ {
		var cond map[string]any
		switch i % 10 {
		case 0:
			cond = map[string]any{"type": "threshold", "metric": metrics[i%3], "operator": "gt", "value": 10} // holds
		case 7:
			cond = map[string]any{"type": "offline", "durationMinutes": 5}
		case 8:
			cond = map[string]any{"type": "agent_silent", "durationMinutes": 15}
		case 9:
			cond = map[string]any{"type": "command_failed", "durationMinutes": 60}
		default:
			cond = map[string]any{"logic": "and", "conditions": []any{
				map[string]any{"type": "threshold", "metric": metrics[i%3], "operator": "gt", "value": 95, "durationMinutes": []int{0, 5, 15, 30, 60}[i%5]},
				map[string]any{"type": "offline", "durationMinutes": 10}}}
		}
		e.Must(201, ten.Partner, "POST", api+"/alerts/rules", map[string]any{"name": fmt.Sprintf("rule %03d", i), "severity": "low", "conditions": cond})
	}
	ctx := context.Background()
	var calls []time.Duration // the evaluation call alone, inside its transaction
	eval := func() {
		if err := e.App.DB.Write(ctx, func(tx *sql.Tx) error {
			start := time.Now()
			err := app.Service[*alerts.Service](e.App).EvaluateIsolated(ctx, tx, dev)
			calls = append(calls, time.Since(start))
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	eval()
	var open int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM alerts WHERE device_id = $1`, dev).Scan(&open); err != nil || open != 20 {
		b.Fatalf("open alerts = %d, %v", open, err)
	}
	empty := func() {
		if err := e.App.DB.Write(ctx, func(tx *sql.Tx) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	var base, with []time.Duration
	calls = calls[:0]
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		empty()
		t1 := time.Now()
		eval()
		base, with = append(base, t1.Sub(t0)), append(with, time.Since(t1))
	}
	b.StopTimer()
	q := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[int(float64(len(d)-1)*p)].Microseconds()) / 1000
	}
	b.ReportMetric(q(with, 0.5)-q(base, 0.5), "added-p50-ms")
	b.ReportMetric(q(with, 0.99), "eval-tx-p99-ms")
	b.ReportMetric(q(base, 0.99), "empty-tx-p99-ms")
	b.ReportMetric(q(calls, 0.99), "eval-call-p99-ms")
}
