package maintenance_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/maintenance"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

// BenchmarkTopUp measures the job's expansion of 1,000 windows of mixed recurrences (daily,
// weekly, monthly, every other Saturday, once) 90 days ahead, none of them written yet: the
// occurrences of all of them (about 27,000) in batches of 200 windows per transaction.
func BenchmarkTopUp(b *testing.B) {
	const windows = 1000
	clk := clock.NewFake(start)
	e := apptest.New(b, apptest.WithClock(clk))
	ten := e.NewTenant(e.Admin(), "Bench")
	svc := app.Service[*maintenance.Service](e.App)
	kinds := []struct{ recurrence, rule string }{{"daily", ""}, {"weekly", ""}, {"monthly", ""},
		{"custom", "FREQ=WEEKLY;BYDAY=SA;INTERVAL=2"}, {"once", ""}}
	err := e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
		for i := range windows {
			k := kinds[i%len(kinds)]
			local := start.Add(time.Duration(i) * time.Minute)
			if _, err := tx.Exec(`INSERT INTO maintenance_windows (id, partner_id, org_id, name, timezone, start_local, end_local,
				recurrence, rrule, target_type, target_ids, suppress_alerts, suppress_patches, suppress_automations, suppress_scripts,
				status, expanded_until, created_at, updated_at) VALUES ($1, $2, $3, $4, 'Europe/Berlin', $5, $6, $7, $8, 'all', '[]',
				TRUE, FALSE, FALSE, FALSE, 'active', $9, $9, $9)`, store.NewID(), ten.PartnerID, ten.OrgID, fmt.Sprintf("w%04d", i),
				local.Format("2006-01-02T15:04:05"), local.Add(time.Hour).Format("2006-01-02T15:04:05"), k.recurrence,
				store.NullIfEmpty(k.rule), start); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var written int
	var took time.Duration
	for b.Loop() {
		b.StopTimer()
		if _, err := e.App.DB.SQL.Exec(`DELETE FROM maintenance_occurrences`); err != nil {
			b.Fatal(err)
		}
		if _, err := e.App.DB.SQL.Exec(`UPDATE maintenance_windows SET expanded_until = $1`, start); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if err := svc.Tick(ctx); err != nil {
			b.Fatal(err)
		}
		took += time.Since(t0)
		b.StopTimer()
		if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM maintenance_occurrences`).Scan(&written); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(written), "occurrences")
	b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "ms/expansion")
}
