package alerts_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"gale/internal/app"
	"gale/internal/domains/alerts"
	"gale/internal/domains/maintenance"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

func TestThresholdOpensOneAlertAndResolvesItself(t *testing.T) {
	x := newEnv(t)
	ruleID := x.rule(x.ten.Partner, cpuRule("High CPU", 90, nil))
	x.beat(x.dev, 50, 10)
	if got := x.alerts(x.ten.Org, ""); len(got) != 0 {
		t.Fatalf("below the threshold: %+v", got)
	}
	x.beat(x.dev, 95, 10)
	got := x.alerts(x.ten.Org, "")
	if len(got) != 1 {
		t.Fatalf("after crossing the threshold: %d alerts", len(got))
	}
	a := got[0]
	if a.Status != "active" || a.Severity != "high" || a.RuleID == nil || *a.RuleID != ruleID || a.DeviceID == nil ||
		*a.DeviceID != x.dev.DeviceID || a.Title != "CPU 95% > 90% on web-01" || !strings.Contains(string(a.Context), `"value":95`) {
		t.Fatalf("alert = %+v context %s", a, a.Context)
	}
	if x.events("alert.triggered", a.ID) != 1 {
		t.Fatal("no alert.triggered event")
	}
	// More heartbeats above the threshold and 20 concurrent evaluations open nothing more.
	x.beat(x.dev, 97, 10)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- x.evaluate(x.dev.DeviceID)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent evaluation: %v", err)
		}
	}
	var n int
	if err := x.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM alerts WHERE rule_id = $1`, ruleID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("alerts of the rule = %d, %v", n, err)
	}
	// The partial unique index itself refuses a second open alert for the pair.
	if _, err := x.App.DB.SQL.Exec(`INSERT INTO alerts (id, partner_id, org_id, device_id, rule_id, severity, status, title, message,
		context, triggered_at, updated_at) VALUES ($1, $2, $3, $4, $5, 'high', 'acknowledged', 't', '', '{}', $6, $6)`,
		store.NewID(), x.ten.PartnerID, x.ten.OrgID, x.dev.DeviceID, ruleID, store.Now()); !store.IsUniqueViolation(err) {
		t.Fatalf("a second open alert for the pair: %v", err)
	}
	// Back below: resolved by the system.
	x.beat(x.dev, 20, 10)
	var after alertRow
	x.Must(200, x.ten.Org, "GET", api+"/alerts/"+a.ID, nil).JSON(t, &after)
	if after.Status != "resolved" || after.ResolvedBy != nil || after.ResolvedAt == nil {
		t.Fatalf("after falling back = %+v", after)
	}
	if x.events("alert.resolved", a.ID) != 1 {
		t.Fatal("no alert.resolved event")
	}
}

func TestThresholdAveragesOverTheWindow(t *testing.T) {
	x := newEnv(t)
	x.rule(x.ten.Partner, cpuRule("Sustained CPU", 80, map[string]any{"conditions": map[string]any{"type": "threshold",
		"metric": "cpuPercent", "operator": "gt", "value": 80, "durationMinutes": 10}}))
	now := store.Now()
	// Older than the window: ignored. In the window: 60 and 100, average 80, not above 80.
	for _, s := range []struct {
		ago time.Duration
		cpu float64
	}{{30 * time.Minute, 100}, {8 * time.Minute, 60}, {4 * time.Minute, 100}} {
		x.exec(`INSERT INTO device_metrics (device_id, recorded_at, cpu_percent, ram_percent, disk_percent, sample) VALUES ($1, $2, $3, 0, 0, '{}')`,
			x.dev.DeviceID, now.Add(-s.ago), s.cpu)
	}
	if err := x.evaluate(x.dev.DeviceID); err != nil {
		t.Fatal(err)
	}
	if got := x.alerts(x.ten.Org, ""); len(got) != 0 {
		t.Fatalf("average 80 is not above 80: %+v", got)
	}
	x.beat(x.dev, 100, 0) // (60+100+100)/3 > 80
	if got := x.alerts(x.ten.Org, ""); len(got) != 1 || !strings.Contains(string(got[0].Context), `"samples":3`) {
		t.Fatalf("after a third sample: %+v", got)
	}
}

func TestCooldownAndAutoResolveOff(t *testing.T) {
	x := newEnv(t)
	ruleID := x.rule(x.ten.Partner, cpuRule("High CPU", 90, map[string]any{"cooldownMinutes": 10}))
	x.beat(x.dev, 95, 0)
	first := x.alerts(x.ten.Org, "")
	if len(first) != 1 {
		t.Fatalf("alerts = %d", len(first))
	}
	x.Must(200, x.ten.Org, "POST", api+"/alerts/"+first[0].ID+"/resolve", map[string]any{"note": "killed the runaway job"})
	x.beat(x.dev, 96, 0)
	if got := x.alerts(x.ten.Org, "?status=active"); len(got) != 0 {
		t.Fatalf("a new alert during the cooldown: %+v", got)
	}
	// The cooldown ran out 11 minutes after the resolution.
	x.exec(`UPDATE alerts SET resolved_at = $1 WHERE id = $2`, store.Now().Add(-11*time.Minute), first[0].ID)
	x.beat(x.dev, 96, 0)
	if got := x.alerts(x.ten.Org, "?status=active"); len(got) != 1 || got[0].ID == first[0].ID {
		t.Fatalf("after the cooldown: %+v", got)
	}
	// Without autoResolve the alert stays when the condition clears.
	x.Must(200, x.ten.Partner, "PATCH", api+"/alerts/rules/"+ruleID, map[string]any{"autoResolve": false})
	x.beat(x.dev, 10, 0)
	if got := x.alerts(x.ten.Org, "?status=active"); len(got) != 1 {
		t.Fatalf("autoResolve off: %+v", got)
	}
}

func TestOfflineAndSilentThroughTheSweep(t *testing.T) {
	x := newEnv(t)
	x.rule(x.ten.Partner, map[string]any{"name": "Offline", "severity": "critical", "titleTemplate": "{{hostname}} offline {{value}} min",
		"conditions": map[string]any{"type": "offline", "durationMinutes": 15}})
	x.rule(x.ten.Partner, map[string]any{"name": "Silent", "severity": "medium",
		"conditions": map[string]any{"type": "agent_silent", "durationMinutes": 15}})
	recent := x.InsertDevice(apptest.DeviceRow{PartnerID: x.ten.PartnerID, OrgID: x.ten.OrgID, SiteID: x.ten.SiteID, Hostname: "db-01",
		Status: "offline", LastSeen: time.Now().Add(-5 * time.Minute)})
	long := x.InsertDevice(apptest.DeviceRow{PartnerID: x.ten.PartnerID, OrgID: x.ten.OrgID, SiteID: x.ten.SiteID, Hostname: "db-02",
		Status: "offline", LastSeen: time.Now().Add(-20 * time.Minute)})
	x.exec(`UPDATE devices SET main_agent_silent_since = $1 WHERE id = $2`, store.Now().Add(-30*time.Minute), recent)
	if err := app.Service[*alerts.Service](x.App).EvaluateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := x.alerts(x.ten.Org, "")
	byDevice := map[string][]alertRow{}
	for _, a := range got {
		byDevice[*a.DeviceID] = append(byDevice[*a.DeviceID], a)
	}
	if len(got) != 2 || len(byDevice[long]) != 1 || byDevice[long][0].Title != "db-02 offline 20 min" ||
		len(byDevice[recent]) != 1 || byDevice[recent][0].Severity != "medium" {
		t.Fatalf("after the sweep: %+v", got)
	}
	// The device comes back: the next sweep resolves its offline alert.
	x.exec(`UPDATE devices SET status = 'online', last_seen_at = $1 WHERE id = $2`, store.Now(), long)
	if err := app.Service[*alerts.Service](x.App).EvaluateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := x.alerts(x.ten.Org, "?deviceId="+long+"&status=resolved"); len(got) != 1 {
		t.Fatalf("offline alert after the device came back: %+v", got)
	}
}

func TestFailedCommandOpensAnAlert(t *testing.T) {
	x := newEnv(t)
	x.rule(x.ten.Partner, map[string]any{"name": "Reboot failed", "severity": "low",
		"conditions": map[string]any{"type": "command_failed", "commandTypes": []string{"reboot"}, "durationMinutes": 30}})
	send := func(typ string) string {
		var c struct {
			ID string `json:"id"`
		}
		x.Must(201, x.ten.Org, "POST", api+"/devices/"+x.dev.DeviceID+"/commands", map[string]any{"type": typ}).JSON(t, &c)
		x.beat(x.dev, 1, 1)
		return c.ID
	}
	result := func(id, status string) {
		x.Must(204, apptest.Caller{Token: x.dev.AuthToken}, "POST", api+"/agents/"+x.dev.DeviceID+"/commands/"+id+"/result",
			agentproto.CommandResult{Status: status, Error: "boom"})
	}
	result(send("refresh_inventory"), "failed")
	if got := x.alerts(x.ten.Org, ""); len(got) != 0 {
		t.Fatalf("a failed command of another type: %+v", got)
	}
	result(send("reboot"), "completed")
	if got := x.alerts(x.ten.Org, ""); len(got) != 0 {
		t.Fatalf("a completed reboot: %+v", got)
	}
	result(send("reboot"), "failed")
	got := x.alerts(x.ten.Org, "")
	if len(got) != 1 || got[0].Severity != "low" || got[0].Status != "active" {
		t.Fatalf("after a failed reboot: %+v", got)
	}
	// The window passes: the sweep resolves it.
	x.exec(`UPDATE device_commands SET completed_at = $1`, store.Now().Add(-time.Hour))
	if err := app.Service[*alerts.Service](x.App).EvaluateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := x.alerts(x.ten.Org, "?status=resolved"); len(got) != 1 {
		t.Fatalf("after the window: %+v", got)
	}
}

func TestRuleTestEvaluatesWithoutCreating(t *testing.T) {
	x := newEnv(t)
	other := x.enroll(x.ten, "web-02")
	ruleID := x.rule(x.ten.Partner, cpuRule("High CPU", 90, map[string]any{"enabled": false}))
	x.beat(x.dev, 95, 0)
	x.beat(other, 30, 0)
	var res struct {
		RuleID    string `json:"ruleId"`
		Devices   int    `json:"devices"`
		WouldFire int    `json:"wouldFire"`
		Results   []struct {
			DeviceID     string `json:"deviceId"`
			Hostname     string `json:"hostname"`
			WouldFire    bool   `json:"wouldFire"`
			Observations []struct {
				Value     *float64 `json:"value"`
				Threshold *float64 `json:"threshold"`
				Holds     bool     `json:"holds"`
			} `json:"observations"`
		} `json:"results"`
	}
	x.Must(200, x.ten.Org, "POST", api+"/alerts/rules/"+ruleID+"/test", nil).JSON(t, &res)
	if res.Devices != 2 || res.WouldFire != 1 || len(res.Results) != 2 {
		t.Fatalf("test = %+v", res)
	}
	for _, r := range res.Results {
		want := r.DeviceID == x.dev.DeviceID
		if r.WouldFire != want || len(r.Observations) != 1 || r.Observations[0].Value == nil || *r.Observations[0].Threshold != 90 {
			t.Fatalf("result %+v", r)
		}
	}
	if got := x.alerts(x.ten.Org, "?status=active,acknowledged,suppressed,resolved,dismissed"); len(got) != 0 {
		t.Fatalf("the test created alerts: %+v", got)
	}
	// Targets narrow the devices tested.
	x.Must(200, x.ten.Partner, "PATCH", api+"/alerts/rules/"+ruleID, map[string]any{"targets": map[string]any{"type": "device", "ids": []string{other.DeviceID}}})
	x.Must(200, x.ten.Org, "POST", api+"/alerts/rules/"+ruleID+"/test", nil).JSON(t, &res)
	if res.Devices != 1 || res.Results[0].DeviceID != other.DeviceID || res.WouldFire != 0 {
		t.Fatalf("device-targeted test = %+v", res)
	}
}

func TestTargetsAndOrgRules(t *testing.T) {
	x := newEnv(t)
	second := x.enroll(x.ten, "web-02")
	x.rule(x.ten.Partner, cpuRule("Only web-02", 90, map[string]any{"targets": map[string]any{"type": "device", "ids": []string{second.DeviceID}}}))
	x.rule(x.ten.Partner, cpuRule("Site", 90, map[string]any{"targets": map[string]any{"type": "site", "ids": []string{x.ten.SiteID}}}))
	x.beat(x.dev, 99, 0)
	x.beat(second, 99, 0)
	if got := x.alerts(x.ten.Org, "?deviceId="+x.dev.DeviceID); len(got) != 1 {
		t.Fatalf("web-01 alerts = %+v", got)
	}
	if got := x.alerts(x.ten.Org, "?deviceId="+second.DeviceID); len(got) != 2 {
		t.Fatalf("web-02 alerts = %+v", got)
	}
	// A group target watches the group's members only.
	var g struct {
		ID string `json:"id"`
	}
	x.Must(201, x.ten.Org, "POST", api+"/groups", map[string]any{"name": "Servers", "type": "static"}).JSON(t, &g)
	x.Must(200, x.ten.Org, "POST", api+"/groups/"+g.ID+"/devices", map[string]any{"deviceIds": []string{x.dev.DeviceID}})
	groupRule := x.rule(x.ten.Partner, cpuRule("Servers", 90, map[string]any{"targets": map[string]any{"type": "group", "ids": []string{g.ID}}}))
	x.beat(x.dev, 99, 0)
	x.beat(second, 99, 0)
	if got := x.alerts(x.ten.Org, "?ruleId="+groupRule); len(got) != 1 || *got[0].DeviceID != x.dev.DeviceID {
		t.Fatalf("group rule alerts = %+v", got)
	}
	// A rule of another organization of the partner does not watch this one's devices.
	org2 := x.CreateOrg(x.ten.Partner, "", "Second")
	x.rule(x.ten.Partner, cpuRule("Org 2 only", 1, map[string]any{"orgId": org2}))
	x.beat(x.dev, 99, 0)
	if got := x.alerts(x.ten.Org, "?deviceId="+x.dev.DeviceID); len(got) != 2 {
		t.Fatalf("web-01 alerts after another organization's rule = %+v", got)
	}
}

func TestSuppressionEndsAndDecommissionResolves(t *testing.T) {
	x := newEnv(t)
	id := x.insertAlert(x.ten, x.dev.DeviceID, "active", "high")
	keep := x.insertAlert(x.ten, x.dev.DeviceID, "active", "low")
	x.Must(200, x.ten.Org, "POST", api+"/alerts/"+id+"/suppress", map[string]any{"until": time.Now().Add(time.Minute)})
	x.Must(200, x.ten.Org, "POST", api+"/alerts/"+keep+"/suppress", nil)
	x.exec(`UPDATE alerts SET suppressed_until = $1 WHERE id = $2`, store.Now().Add(-time.Second), id)
	if err := app.Service[*alerts.Service](x.App).EvaluateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	var a alertRow
	x.Must(200, x.ten.Org, "GET", api+"/alerts/"+id, nil).JSON(t, &a)
	if a.Status != "active" {
		t.Fatalf("after the suppression ended: %s", a.Status)
	}
	x.Must(200, x.ten.Org, "GET", api+"/alerts/"+keep, nil).JSON(t, &a)
	if a.Status != "suppressed" {
		t.Fatalf("a suppression without end: %s", a.Status)
	}
	x.Must(204, x.ten.Org, "DELETE", api+"/devices/"+x.dev.DeviceID, nil)
	for _, aid := range []string{id, keep} {
		x.Must(200, x.ten.Org, "GET", api+"/alerts/"+aid, nil).JSON(t, &a)
		if a.Status != "resolved" || a.ResolvedBy != nil || a.ResolutionNote == nil || *a.ResolutionNote != "device decommissioned" {
			t.Fatalf("after decommissioning: %+v", a)
		}
		if x.events("alert.resolved", aid) != 1 {
			t.Fatal("no alert.resolved event")
		}
	}
}

func TestAFailingEvaluationDoesNotFailTheHeartbeat(t *testing.T) {
	// The evaluation fails reading (the open alerts) or writing (the audit entry of the alert it
	// opens): on PostgreSQL either aborts the transaction but for the savepoint.
	for _, table := range []string{"alerts", "audit_logs"} {
		t.Run(table, func(t *testing.T) {
			x := newEnv(t)
			x.rule(x.ten.Partner, cpuRule("High CPU", 90, nil))
			x.exec(`ALTER TABLE ` + table + ` RENAME TO away`)
			before := store.Now()
			x.beat(x.dev, 99, 0)
			x.exec(`ALTER TABLE away RENAME TO ` + table)
			var seen time.Time
			if err := x.App.DB.SQL.QueryRow(`SELECT last_seen_at FROM devices WHERE id = $1`, x.dev.DeviceID).Scan(&seen); err != nil || seen.Before(before) {
				t.Fatalf("last seen %v (before the heartbeat %v), %v", seen, before, err)
			}
			// Nothing of the failed evaluation remains; the sweep catches up.
			if got := x.alerts(x.ten.Org, ""); len(got) != 0 {
				t.Fatalf("after the failed evaluation: %+v", got)
			}
			if err := app.Service[*alerts.Service](x.App).EvaluateAll(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := x.alerts(x.ten.Org, ""); len(got) != 1 {
				t.Fatalf("after the sweep: %+v", got)
			}
		})
	}
}

func TestAnotherNodeSeesRuleChanges(t *testing.T) {
	x := newEnv(t)
	node2 := x.SecondNode()
	ruleID := x.rule(x.ten.Partner, cpuRule("High CPU", 90, map[string]any{"cooldownMinutes": 0}))
	beat2 := func(cpu float64) {
		node2.Must(200, apptest.Caller{Token: x.dev.AuthToken}, "POST", api+"/agents/"+x.dev.DeviceID+"/heartbeat",
			agentproto.Heartbeat{AgentVersion: "1.0.0", Metrics: &agentproto.Metrics{CPUPercent: cpu}})
	}
	beat2(95)
	open := x.alerts(x.ten.Org, "?status=active")
	if len(open) != 1 {
		t.Fatalf("through node 2: %+v", open)
	}
	// Node 1 raises the threshold; node 2's next evaluation uses it: the alert resolves and no
	// new one opens.
	x.Must(200, x.ten.Partner, "PATCH", api+"/alerts/rules/"+ruleID, map[string]any{"conditions": map[string]any{
		"type": "threshold", "metric": "cpuPercent", "operator": "gt", "value": 99}})
	beat2(95)
	beat2(95)
	if got := x.alerts(x.ten.Org, "?status=active"); len(got) != 0 {
		t.Fatalf("node 2 evaluated a stale rule: %+v", got)
	}
	// Deleting on node 1 stops node 2 too.
	x.Must(200, x.ten.Partner, "PATCH", api+"/alerts/rules/"+ruleID, map[string]any{"conditions": map[string]any{
		"type": "threshold", "metric": "cpuPercent", "operator": "gt", "value": 50}})
	beat2(95)
	x.Must(204, x.ten.Partner, "DELETE", api+"/alerts/rules/"+ruleID, nil)
	x.Must(200, x.ten.Org, "POST", api+"/alerts/"+x.alerts(x.ten.Org, "?status=active")[0].ID+"/resolve", nil)
	beat2(95)
	if got := x.alerts(x.ten.Org, "?status=active"); len(got) != 0 {
		t.Fatalf("node 2 evaluated a deleted rule: %+v", got)
	}
}

// statements records the statements sent through a PostgreSQL connection.
type statements struct {
	mu  sync.Mutex
	sql []string
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sql = append(s.sql, d.SQL)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statements) since(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sql[n:])
}

// In the steady state (no alert opens or resolves, the rules are unchanged) the heartbeat's
// evaluation costs the savepoint and one read.
func TestSteadyStateEvaluationRoundTrips(t *testing.T) {
	x := newEnv(t)
	if x.App.DB.Pool == nil {
		t.Skip("counts PostgreSQL round trips")
	}
	x.rule(x.ten.Partner, cpuRule("High CPU", 10, nil))
	x.rule(x.ten.Partner, cpuRule("Sustained CPU", 90, map[string]any{"conditions": map[string]any{"type": "threshold",
		"metric": "cpuPercent", "operator": "gt", "value": 90, "durationMinutes": 10}}))
	x.rule(x.ten.Partner, map[string]any{"name": "Reboot failed", "severity": "low",
		"conditions": map[string]any{"type": "command_failed", "commandTypes": []string{"reboot"}, "durationMinutes": 30}})
	x.beat(x.dev, 50, 10) // opens the first rule's alert
	x.beat(x.dev, 50, 10)
	if got := x.alerts(x.ten.Org, ""); len(got) != 1 {
		t.Fatalf("alerts = %+v", got)
	}
	trace := &statements{}
	cfg := x.App.DB.Pool.Config()
	cfg.ConnConfig.Tracer = trace
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer pool.Close()
	defer db.Close()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	n := len(trace.since(0))
	if err := app.Service[*alerts.Service](x.App).EvaluateIsolated(t.Context(), tx, x.dev.DeviceID); err != nil {
		t.Fatal(err)
	}
	got := trace.since(n)
	for _, q := range got {
		t.Logf("%.60s", strings.Join(strings.Fields(q), " "))
	}
	if len(got) != 2 || got[0] != "SAVEPOINT alerts_evaluation" {
		t.Fatalf("%d statements, want the savepoint and one read", len(got))
	}
}

// A sweep that finds nothing to open or resolve takes no write transaction: on SQLite it
// finishes while another connection holds the write lock; once an alert is due, it waits.
func TestSteadySweepTakesNoWriteLock(t *testing.T) {
	x := newEnv(t)
	if x.App.DB.Dialect != store.SQLite {
		t.Skip("the write lock is SQLite's")
	}
	x.rule(x.ten.Partner, cpuRule("High CPU", 90, nil))
	x.beat(x.dev, 10, 0)
	sweepWhileLocked := func(timeout time.Duration) error {
		conn, err := x.App.DB.SQL.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(t.Context(), `BEGIN IMMEDIATE`); err != nil {
			t.Fatal(err)
		}
		defer conn.ExecContext(t.Context(), `ROLLBACK`)
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		return app.Service[*alerts.Service](x.App).EvaluateAll(ctx)
	}
	if err := sweepWhileLocked(2 * time.Second); err != nil {
		t.Fatalf("steady sweep under another writer: %v", err)
	}
	// The latest sample now holds the rule (written without a heartbeat, which would evaluate):
	// the sweep has an alert to open, so it waits for the lock.
	x.exec(`UPDATE device_metrics SET cpu_percent = 99 WHERE device_id = $1`, x.dev.DeviceID)
	if err := sweepWhileLocked(300 * time.Millisecond); err == nil {
		t.Fatal("a sweep with an alert to open finished while another connection held the write lock")
	}
	if err := app.Service[*alerts.Service](x.App).EvaluateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := x.alerts(x.ten.Org, ""); len(got) != 1 {
		t.Fatalf("after the sweep: %+v", got)
	}
}

// A device a maintenance window holds opens no alert; once the window lets go, the next
// evaluation opens it.
func TestHeldDevicesOpenNoAlert(t *testing.T) {
	x := newEnv(t)
	x.rule(x.ten.Partner, cpuRule("High CPU", 90, nil))
	svc := app.Service[*alerts.Service](x.App)
	held := true
	svc.SetHold(func(_ context.Context, _ *sql.Tx, _ maintenance.Subject) (bool, error) { return held, nil })
	x.beat(x.dev, 95, 10)
	if got := x.alerts(x.ten.Org, ""); len(got) != 0 {
		t.Fatalf("a held device opened %+v", got)
	}
	held = false
	x.beat(x.dev, 96, 10)
	if got := x.alerts(x.ten.Org, ""); len(got) != 1 {
		t.Fatalf("after the window: %d alerts, want 1", len(got))
	}
}
