package patches_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/patches"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// BenchmarkIngestScan measures the ingest of a scan offering 5,000 updates on one device, in
// the transaction a result is recorded in: the first scan inserts every patch, the ones after
// it offer the same updates but a tenth at newer versions (new patches, older ones installed).
func BenchmarkIngestScan(b *testing.B) {
	e := apptest.New(b)
	ten := e.NewTenant(e.Admin(), "Bench")
	dev := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "big"})
	owner := tenancy.Owner{PartnerID: ten.PartnerID, OrgID: ten.OrgID}
	s := app.Service[*patches.Service](e.App)
	ingest := func(round int) {
		ups := make([]agentproto.PackageUpdate, 5000)
		for i := range ups {
			v := 1
			if i%10 == 0 {
				v = 1 + round
			}
			ups[i] = upd(fmt.Sprintf("package-%04d", i), "1.0-1", fmt.Sprintf("1.%d-1", v), i%7 == 0)
		}
		err := e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
			return s.IngestScan(context.Background(), tx, dev, owner, scanResult(false, ups...))
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	ingest(0)
	b.ResetTimer()
	var worst time.Duration
	for i := range b.N {
		start := time.Now()
		ingest(i + 1)
		worst = max(worst, time.Since(start))
	}
	b.ReportMetric(float64(worst.Milliseconds()), "worst-ms")
}

// seedFleet inserts devices devices of the tenant (ids from base), with perDevice pending
// patches each and their summaries, in bulk statements.
func seedFleet(b *testing.B, e *apptest.Env, ten apptest.Tenant, base, devices, perDevice int) {
	b.Helper()
	db := e.App.DB
	now := store.Now()
	id := "'00000000-0000-7000-8' || substr('000' || ((n / 1000000000000) % 1000), -3) || '-' || substr('000000000000' || (n % 1000000000000), -12)"
	series := "WITH RECURSIVE s(n) AS (SELECT $1 UNION ALL SELECT n + 1 FROM s WHERE n < $2) "
	if db.Dialect == store.Postgres {
		id = "CAST('00000000-0000-7000-8' || lpad(((n / 1000000000000) % 1000)::text, 3, '0') || '-' || lpad((n % 1000000000000)::text, 12, '0') AS UUID)"
		series = "WITH s(n) AS (SELECT generate_series(CAST($1 AS BIGINT), CAST($2 AS BIGINT))) "
	}
	patchIDs := make([]string, perDevice)
	err := db.Write(context.Background(), func(tx *sql.Tx) error {
		for i := range patchIDs {
			patchIDs[i] = store.NewID()
			if _, err := tx.Exec(`INSERT INTO patches (id, partner_id, source, external_id, package_id, title, version, severity, category,
				requires_reboot, created_at, updated_at) VALUES ($1, $2, 'linux', $3, $4, $4, '2', 'unknown', 'bugfix', FALSE, $5, $5)`,
				patchIDs[i], ten.PartnerID, fmt.Sprintf("apt:seed-%d-%d:amd64:2", base, i), fmt.Sprintf("seed-%d-%d", base, i), now); err != nil {
				return err
			}
		}
		lo, hi := base, base+devices-1
		if _, err := tx.Exec(series+`INSERT INTO devices (id, partner_id, org_id, site_id, hostname, status, os_type, os_name,
			created_at, updated_at, enrolled_at, last_seen_at) SELECT `+id+`, $3, $4, $5, 'host-' || n, 'online', 'linux', 'Debian', $6, $6, $6, $6 FROM s`,
			lo, hi, ten.PartnerID, ten.OrgID, ten.SiteID, now); err != nil {
			return fmt.Errorf("seed devices: %w", err)
		}
		for _, p := range patchIDs {
			if _, err := tx.Exec(series+`INSERT INTO patch_devices (device_id, patch_id, partner_id, org_id, source, status, installed_version,
				available_version, offered_at, updated_at) SELECT `+id+`, $3, $4, $5, 'linux', CASE WHEN n % 3 = 0 THEN 'installed' ELSE 'pending' END,
				'1', '2', $6, $6 FROM s`, lo, hi, p, ten.PartnerID, ten.OrgID, now); err != nil {
				return fmt.Errorf("seed device patches: %w", err)
			}
		}
		_, err := tx.Exec(series+`INSERT INTO patch_device_summaries (device_id, partner_id, org_id, pending, critical_pending, installed,
			failed, reboot_required, last_scan_at, updated_at) SELECT `+id+`, $3, $4, CASE WHEN n % 3 = 0 THEN 0 ELSE $5 END, 0,
			CASE WHEN n % 3 = 0 THEN $5 ELSE 0 END, 0, n % 11 = 0, $6, $6 FROM s`, lo, hi, ten.PartnerID, ten.OrgID, perDevice, now)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	if db.Dialect == store.Postgres {
		if _, err := db.SQL.Exec(`ANALYZE`); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompliance measures GET /patches/compliance over 100,000 devices with 2,000,000
// device patches, as a partner's caller; reported with its p99.
func BenchmarkCompliance(b *testing.B) {
	e := apptest.New(b)
	ten := e.NewTenant(e.Admin(), "Bench")
	seedFleet(b, e, ten, 1, 100_000, 20)
	var c patches.PatchCompliance
	e.Must(200, ten.Partner, "GET", api+"/patches/compliance", nil).JSON(b, &c)
	if c.DevicesScanned != 100_000 || c.Pending+c.Installed != 2_000_000 {
		b.Fatalf("compliance %+v", c)
	}
	b.ResetTimer()
	took := make([]time.Duration, 0, b.N)
	for range b.N {
		start := time.Now()
		e.Must(200, ten.Partner, "GET", api+"/patches/compliance", nil)
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkCSVReport measures building a CSV compliance report of 100,000 devices.
func BenchmarkCSVReport(b *testing.B) {
	e := apptest.New(b)
	ten := e.NewTenant(e.Admin(), "Bench")
	seedFleet(b, e, ten, 1, 100_000, 1)
	s := app.Service[*patches.Service](e.App)
	b.ResetTimer()
	for range b.N {
		var r patches.PatchReport
		e.Must(202, ten.Partner, "POST", api+"/patches/compliance/report", map[string]any{"format": "csv"}).JSON(b, &r)
		if built, err := s.BuildNextReport(context.Background()); err != nil || !built {
			b.Fatalf("build: %v %v", built, err)
		}
		e.Must(200, ten.Partner, "GET", api+"/patches/compliance/report/"+r.ID, nil).JSON(b, &r)
		if r.Status != patches.ReportCompleted || r.Progress != 100_000 {
			b.Fatalf("report %+v", r)
		}
	}
}

// BenchmarkScanFanOut measures POST /patches/scan of 10,000 Linux devices: the job, its device
// rows and 10,000 patch_scan commands in one transaction.
func BenchmarkScanFanOut(b *testing.B) {
	const fleet = 10_000
	e := apptest.New(b)
	ten := e.NewTenant(e.Admin(), "Bench")
	seedFleet(b, e, ten, 1, fleet, 0)
	ids := make([]string, fleet)
	rows, err := e.App.DB.SQL.Query(`SELECT id FROM devices WHERE partner_id = $1`, ten.PartnerID)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; rows.Next(); i++ {
		if err := rows.Scan(&ids[i]); err != nil {
			b.Fatal(err)
		}
	}
	rows.Close()
	b.ResetTimer()
	var worst time.Duration
	for range b.N {
		start := time.Now()
		var js patches.PatchJobStart
		e.Must(202, ten.Partner, "POST", api+"/patches/scan", map[string]any{"deviceIds": ids}).JSON(b, &js)
		worst = max(worst, time.Since(start))
		if js.Totals.Queued != fleet {
			b.Fatalf("scan job %+v", js.PatchJob)
		}
	}
	b.ReportMetric(worst.Seconds(), "worst-s")
}

// BenchmarkScanResults measures the ingest of the results of a scan of 10,000 devices arriving
// at once: 16 writers record them (each with three updates, as the load tool's simulated
// agents answer), as the agent connections of a fleet would.
func BenchmarkScanResults(b *testing.B) {
	const fleet, writers = 10_000, 16
	e := apptest.New(b)
	ten := e.NewTenant(e.Admin(), "Bench")
	seedFleet(b, e, ten, 1, fleet, 0)
	dev := app.Service[*devices.Service](e.App)
	ids := make([]string, 0, fleet)
	rows, err := e.App.DB.SQL.Query(`SELECT id FROM devices WHERE partner_id = $1`, ten.PartnerID)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	result, _ := json.Marshal(scanResult(false, upd("openssl", "3.0.1-1", "3.0.2-1", true), upd("curl", "7.88-1", "7.88-2", false),
		upd("tzdata", "2024a-1", "2025b-1", false)))
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		var js patches.PatchJobStart
		e.Must(202, ten.Partner, "POST", api+"/patches/scan", map[string]any{"deviceIds": ids}).JSON(b, &js)
		type work struct{ device, command string }
		var todo []work
		rows, err := e.App.DB.SQL.Query(`SELECT device_id, command_id FROM patch_job_devices WHERE job_id = $1`, js.ID)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			var w work
			if err := rows.Scan(&w.device, &w.command); err != nil {
				b.Fatal(err)
			}
			todo = append(todo, w)
		}
		rows.Close()
		b.StartTimer()
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(len(todo)); i = next.Add(1) - 1 {
					w := todo[i]
					err := dev.RecordResult(context.Background(), agentOf(ten, w.device), agentproto.CommandResult{CommandID: w.command,
						Status: agentproto.ResultCompleted, Result: result})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		var j patches.PatchJobDetail
		e.Must(200, ten.Partner, "GET", api+"/patches/jobs/"+js.ID, nil).JSON(b, &j)
		if j.Status != patches.JobCompleted || j.Totals.Completed != fleet {
			b.Fatalf("job after the results: %s %+v", j.Status, j.Totals)
		}
		b.ReportMetric(elapsed.Seconds(), "all-results-s")
	}
}
