package monitors_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/monitors"
	"gale/internal/platform/config"
	"gale/internal/platform/store"
	"gale/internal/testkit/agentsim"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// insertMonitors adds n enabled ping monitors at 60 s of the organization (spread over sites
// when given), the i-th due at now + i*spread, each with an offline and a response-time rule,
// and returns their IDs.
func insertMonitors(b *testing.B, e *apptest.Env, ten apptest.Tenant, sites []string, n int, spread time.Duration) []string {
	b.Helper()
	ids := make([]string, n)
	now := store.Now()
	rules := `[{"id":"` + store.NewID() + `","condition":"offline","severity":"high","cooldownMinutes":0},` +
		`{"id":"` + store.NewID() + `","condition":"response_time_gt","threshold":100,"severity":"low","cooldownMinutes":0}]`
	err := e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
		for i := range ids {
			ids[i] = store.NewID()
			var site any
			if len(sites) > 0 {
				site = sites[i%len(sites)]
			}
			if _, err := tx.Exec(`INSERT INTO monitors (id, partner_id, org_id, site_id, name, type, target, config, alert_rules,
				interval_seconds, timeout_seconds, enabled, status, next_check_at, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, 'icmp_ping', '10.0.0.1', '{"count":3,"size":56}', $6, 60, 5, TRUE, 'unknown', $7, $7, $7)`,
				ids[i], ten.PartnerID, ten.OrgID, site, fmt.Sprint("m", i), rules, now.Add(time.Duration(i)*spread)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return ids
}

func p99(ds []time.Duration) float64 {
	slices.Sort(ds)
	return float64(ds[len(ds)*99/100]) / float64(time.Millisecond)
}

// BenchmarkMonitorIngest measures the transaction that stores an agent's results: a batch of
// 100 (one agent's share of a round) and a single result, each steady (online every time)
// and flapping (online and offline in turn: each result changes its monitor's status and
// raises or resolves an alert).
func BenchmarkMonitorIngest(b *testing.B) {
	for _, c := range []struct {
		size int
		flap bool
	}{{100, false}, {100, true}, {1, false}, {1, true}} {
		size := c.size
		b.Run(fmt.Sprintf("batch%d/flapping=%v", size, c.flap), func(b *testing.B) {
			e := apptest.New(b)
			ten := e.NewTenant(e.Admin(), "Bench")
			dev := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "probe"})
			ids := insertMonitors(b, e, ten, nil, size, 0)
			svc := app.Service[*monitors.Service](e.App)
			ms := 12.5
			var took []time.Duration
			i := 0
			for b.Loop() {
				rs := make([]agentproto.MonitorCheckResult, size)
				for j, id := range ids {
					rs[j] = agentproto.MonitorCheckResult{MonitorID: id, Status: agentproto.MonitorOnline, ResponseMs: &ms}
					if c.flap && i%2 == 1 {
						rs[j] = agentproto.MonitorCheckResult{MonitorID: id, Status: agentproto.MonitorOffline, Error: "timed out"}
					}
				}
				t0 := time.Now()
				if err := e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
					return svc.IngestBatch(context.Background(), tx, dev, rs)
				}); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
				i++
			}
			b.ReportMetric(p99(took), "p99-ms/batch")
		})
	}
}

// BenchmarkMonitorDispatch measures one scheduler round over 5,000 due monitors at 60 s spread
// over 100 sites with one online agent each: the claim, the choice of 100 agents and one
// monitor_checks command per agent, in one transaction.
func BenchmarkMonitorDispatch(b *testing.B) {
	const n, agents = 5000, 100
	e := apptest.New(b)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Bench")
	sites := makeSites(b, e, admin, ten, agents)
	for i, site := range sites {
		e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: site, Hostname: fmt.Sprint("probe-", i)})
	}
	insertMonitors(b, e, ten, sites, n, 0)
	svc := app.Service[*monitors.Service](e.App)
	var took []time.Duration
	for b.Loop() {
		b.StopTimer()
		if _, err := e.App.DB.SQL.Exec(`UPDATE monitors SET next_check_at = $1`, store.Now().Add(-time.Second)); err != nil {
			b.Fatal(err)
		}
		if _, err := e.App.DB.SQL.Exec(`DELETE FROM device_commands`); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if err := svc.Dispatch(context.Background()); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
	}
	var cmds int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM device_commands WHERE type = 'monitor_checks'`).Scan(&cmds); err != nil {
		b.Fatal(err)
	}
	if cmds != agents {
		b.Fatalf("%d commands for %d agents", cmds, agents)
	}
	b.ReportMetric(p99(took), "p99-ms/round")
}

// makeSites returns n sites of the tenant's organization: its default one and n-1 new ones.
func makeSites(b *testing.B, e *apptest.Env, admin apptest.Caller, ten apptest.Tenant, n int) []string {
	b.Helper()
	sites := []string{ten.SiteID}
	for i := 1; i < n; i++ {
		var s struct {
			ID string `json:"id"`
		}
		e.Must(http.StatusCreated, admin, "POST", "/api/v1/orgs/sites", map[string]any{"orgId": ten.OrgID, "name": fmt.Sprint("site ", i)}).JSON(b, &s)
		sites = append(sites, s.ID)
	}
	return sites
}

// BenchmarkMonitorLoad runs 5,000 monitors at 60 s over 100 simulated agents (one per site,
// over their live channels, answering every check) for MONITOR_LOAD_SECONDS (default 90),
// with the scheduler's round every 2 seconds as the periodic job runs it. It reports the
// dispatch lag (from a monitor's due time to the end of the round that sent it: p99 and max)
// and the time from a command's creation to its result stored (p99), and checks that every
// due monitor was checked once per interval.
func BenchmarkMonitorLoad(b *testing.B) {
	const n, agents = 5000, 100
	seconds := 90
	if v := os.Getenv("MONITOR_LOAD_SECONDS"); v != "" {
		_, _ = fmt.Sscan(v, &seconds)
	}
	e := apptest.New(b, func(c *config.Config) { c.AgentEnrollPerMinute = 0 })
	admin := e.Admin()
	ten := e.NewTenant(admin, "Load")
	sites := makeSites(b, e, admin, ten, agents)
	var creds []agentsim.Creds
	for i, site := range sites {
		var k struct {
			Key    string `json:"key"`
			Secret string `json:"enrollmentSecret"`
		}
		e.Must(http.StatusCreated, admin, "POST", "/api/v1/enrollment-keys", map[string]any{"orgId": ten.OrgID, "siteId": site,
			"name": fmt.Sprint("sim ", i), "maxUsage": 1, "issueEnrollmentSecret": true}).JSON(b, &k)
		var r agentproto.EnrollResponse
		e.Must(http.StatusCreated, apptest.Anonymous, "POST", "/api/v1"+agentproto.PathEnroll, agentproto.EnrollRequest{EnrollmentKey: k.Key,
			EnrollmentSecret: k.Secret, Hostname: fmt.Sprintf("sim-%03d", i), OSType: agentproto.OSLinux, OSVersion: "12",
			Architecture: "amd64", AgentVersion: "sim"}).JSON(b, &r)
		creds = append(creds, agentsim.Creds{DeviceID: r.DeviceID, Token: r.AuthToken})
	}
	state := filepath.Join(b.TempDir(), "state.json")
	raw, _ := json.Marshal(creds)
	if err := os.WriteFile(state, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	svc := app.Service[*monitors.Service](e.App)
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var rep agentsim.Report
		var simErr error
		wg.Go(func() {
			rep, simErr = agentsim.Run(ctx, agentsim.Options{Server: e.Server.URL, Agents: agents, StateFile: state,
				Heartbeat: 30 * time.Second, Duration: time.Duration(seconds+10) * time.Second})
		})
		apptest.Eventually(b, 60*time.Second, func() bool {
			var online int
			_ = e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM devices WHERE status = 'online'`).Scan(&online)
			return online == agents
		})
		// Spread the first round over the interval, as monitors created over time are.
		ids := insertMonitors(b, e, ten, sites, n, 60*time.Second/n)
		var lags []time.Duration
		end := time.Now().Add(time.Duration(seconds) * time.Second)
		for time.Now().Before(end) {
			rows, err := e.App.DB.SQL.Query(`SELECT next_check_at FROM monitors WHERE enabled AND next_check_at <= $1`, store.Now())
			if err != nil {
				b.Fatal(err)
			}
			var due []time.Time
			for rows.Next() {
				var t time.Time
				_ = rows.Scan(&t)
				due = append(due, t)
			}
			rows.Close()
			if err := svc.Dispatch(ctx); err != nil {
				b.Fatal(err)
			}
			done := time.Now()
			for _, t := range due {
				lags = append(lags, done.Sub(t))
			}
			time.Sleep(monitors.DispatchEvery)
		}
		time.Sleep(5 * time.Second)
		cancel()
		wg.Wait()
		if simErr != nil {
			b.Fatal(simErr)
		}
		var stored, pending int
		if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM monitor_results`).Scan(&stored); err != nil {
			b.Fatal(err)
		}
		_ = e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM device_commands WHERE type = 'monitor_checks' AND completed_at IS NULL`).Scan(&pending)
		var rtt []time.Duration
		rows, err := e.App.DB.SQL.Query(`SELECT created_at, completed_at FROM device_commands WHERE type = 'monitor_checks' AND completed_at IS NOT NULL`)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			var c, d time.Time
			_ = rows.Scan(&c, &d)
			rtt = append(rtt, d.Sub(c))
		}
		rows.Close()
		if len(lags) < n || stored < n || len(rtt) == 0 {
			b.Fatalf("%d checks dispatched, %d results stored, %d batches answered, %d pending; agents %+v", len(lags), stored, len(rtt), pending, rep)
		}
		var online int
		_ = e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM monitors WHERE status = 'online'`).Scan(&online)
		b.ReportMetric(float64(len(ids)), "monitors")
		b.ReportMetric(float64(online), "online")
		b.ReportMetric(float64(stored), "results")
		b.ReportMetric(p99(lags), "lag-p99-ms")
		b.ReportMetric(float64(slices.Max(lags))/float64(time.Millisecond), "lag-max-ms")
		b.ReportMetric(p99(rtt), "batch-p99-ms")
	}
}
