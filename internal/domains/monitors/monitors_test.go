package monitors_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/alerts"
	"gale/internal/domains/monitors"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/config"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

var start = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

type fixture struct {
	e   *apptest.Env
	clk *clock.Fake
	a   apptest.Tenant
	b   apptest.Tenant
}

func newFixture(t *testing.T) fixture {
	clk := clock.NewFake(start)
	e := apptest.New(t, apptest.WithClock(clk))
	admin := e.Admin()
	return fixture{e: e, clk: clk, a: e.NewTenant(admin, "Alpha"), b: e.NewTenant(admin, "Bravo")}
}

func (f fixture) service() *monitors.Service { return app.Service[*monitors.Service](f.e.App) }

func (f fixture) create(c apptest.Caller, body map[string]any) monitors.Monitor {
	f.e.T.Helper()
	var m monitors.Monitor
	f.e.Must(http.StatusCreated, c, "POST", api+"/monitors", body).JSON(f.e.T, &m)
	return m
}

func (f fixture) get(c apptest.Caller, id string) monitors.Monitor {
	f.e.T.Helper()
	var m monitors.Monitor
	f.e.Must(http.StatusOK, c, "GET", api+"/monitors/"+id, nil).JSON(f.e.T, &m)
	return m
}

func (f fixture) list(c apptest.Caller, query string) []monitors.Monitor {
	f.e.T.Helper()
	var out struct{ Data []monitors.Monitor }
	f.e.Must(http.StatusOK, c, "GET", api+"/monitors?"+query, nil).JSON(f.e.T, &out)
	return out.Data
}

func (f fixture) alerts(c apptest.Caller, query string) []alerts.Alert {
	f.e.T.Helper()
	var out struct{ Data []alerts.Alert }
	f.e.Must(http.StatusOK, c, "GET", api+"/monitors/alerts?"+query, nil).JSON(f.e.T, &out)
	return out.Data
}

func (f fixture) results(c apptest.Caller, id, query string) []monitors.MonitorResult {
	f.e.T.Helper()
	var out struct{ Data []monitors.MonitorResult }
	f.e.Must(http.StatusOK, c, "GET", api+"/monitors/"+id+"/results?"+query, nil).JSON(f.e.T, &out)
	return out.Data
}

func (f fixture) dispatch() {
	f.e.T.Helper()
	if err := f.service().Dispatch(context.Background()); err != nil {
		f.e.T.Fatal(err)
	}
}

func (f fixture) count(query string, args ...any) int {
	f.e.T.Helper()
	var n int
	if err := f.e.App.DB.SQL.QueryRow(query, args...).Scan(&n); err != nil {
		f.e.T.Fatal(err)
	}
	return n
}

// pending returns the monitor_checks commands waiting for a device, with their checks.
func (f fixture) pending(deviceID string) map[string][]agentproto.MonitorCheck {
	f.e.T.Helper()
	rows, err := f.e.App.DB.SQL.Query(`SELECT id, payload FROM device_commands WHERE device_id = $1 AND type = $2 AND status IN ('queued', 'sent')`,
		deviceID, agentproto.CommandMonitorChecks)
	if err != nil {
		f.e.T.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]agentproto.MonitorCheck{}
	for rows.Next() {
		var id, payload string
		var p agentproto.MonitorChecks
		if err := rows.Scan(&id, &payload); err != nil || json.Unmarshal([]byte(payload), &p) != nil {
			f.e.T.Fatalf("read command: %v %s", err, payload)
		}
		out[id] = p.Checks
	}
	return out
}

// report posts the agent's results of a command.
func (f fixture) report(dev agentproto.EnrollResponse, commandID string, results ...agentproto.MonitorCheckResult) {
	f.e.T.Helper()
	b, _ := json.Marshal(agentproto.MonitorChecksResult{Results: results})
	f.e.Must(http.StatusNoContent, apptest.Bearer(dev.AuthToken), "POST", api+"/agents/"+dev.DeviceID+"/commands/"+commandID+"/result",
		agentproto.CommandResult{CommandID: commandID, Status: agentproto.ResultCompleted, Result: b})
}

// round dispatches the due monitors and has the agent answer each check with status (and a
// response time for answers), returning how many checks it got.
func (f fixture) round(dev agentproto.EnrollResponse, status string, ms float64) int {
	f.e.T.Helper()
	f.dispatch()
	n := 0
	for id, checks := range f.pending(dev.DeviceID) {
		var rs []agentproto.MonitorCheckResult
		for _, c := range checks {
			r := agentproto.MonitorCheckResult{MonitorID: c.MonitorID, Status: status, CheckedAt: time.Now()}
			if status != agentproto.MonitorOffline {
				r.ResponseMs = &ms
			} else {
				r.Error = "connection refused"
			}
			rs = append(rs, r)
		}
		n += len(checks)
		f.report(dev, id, rs...)
	}
	return n
}

// near reports whether a time the server stamped (on the fake clock, which runs on) is at
// most a few seconds after want.
func near(got, want time.Time) bool { return !got.Before(want) && got.Sub(want) < 5*time.Second }

func ping(name string) map[string]any {
	return map[string]any{"name": name, "type": "icmp_ping", "target": "127.0.0.1"}
}

func TestMonitorCreateReadChangeDelete(t *testing.T) {
	f := newFixture(t)
	dev := f.e.InsertDevice(apptest.DeviceRow{PartnerID: f.a.PartnerID, OrgID: f.a.OrgID, SiteID: f.a.SiteID, Hostname: "web-01"})
	m := f.create(f.a.Org, ping(" Gateway "))
	if m.OrgID != f.a.OrgID || m.PartnerID != f.a.PartnerID || m.Name != "Gateway" || m.IntervalSeconds != 60 || m.TimeoutSeconds != 5 ||
		!m.Enabled || m.Status != "unknown" || m.Config.Count != 3 || m.Config.Size != 56 || m.NextCheckAt == nil || m.CreatedBy == nil ||
		len(m.AlertRules) != 0 || m.SiteID != nil {
		t.Fatalf("created %+v", m)
	}
	web := f.create(f.a.Partner, map[string]any{"orgId": f.a.OrgID, "siteId": f.a.SiteID, "name": "Web", "type": "http_check",
		"target": "https://web.example.test/health", "intervalSeconds": 30, "timeoutSeconds": 10, "config": map[string]any{"port": 99,
			"expectedStatus": []int{200}, "headers": map[string]string{"X-Probe": "1"}},
		"alertRules": []map[string]any{{"condition": "offline", "severity": "critical"}, {"condition": "response_time_gt", "threshold": 500, "severity": "low", "cooldownMinutes": 0}}})
	if web.Config.Port != 0 || web.Config.Method != "GET" || *web.Config.VerifyTLS != true || *web.Config.CertExpiryWarningDays != 14 ||
		len(web.AlertRules) != 2 || web.AlertRules[0].ID == "" || *web.AlertRules[0].CooldownMinutes != 15 || *web.AlertRules[1].CooldownMinutes != 0 ||
		web.SiteID == nil || *web.SiteID != f.a.SiteID {
		t.Fatalf("created %+v", web)
	}
	svc := f.create(f.a.Org, map[string]any{"name": "nginx", "type": "service_check", "target": "nginx.service", "config": map[string]any{"deviceId": dev}})
	if svc.Config.ServiceKind != "systemd" || svc.Config.DeviceID != dev {
		t.Fatalf("service check %+v", svc.Config)
	}
	f.create(f.a.Org, map[string]any{"name": "dns", "type": "dns_check", "target": "example.test", "enabled": false,
		"config": map[string]any{"recordType": "mx", "nameserver": "127.0.0.1:5353"}})
	f.create(f.a.Org, map[string]any{"name": "ssh", "type": "tcp_port", "target": "db.internal", "config": map[string]any{"port": 22, "expectedBanner": "SSH-"}})

	if got := f.get(f.a.Partner, web.ID); got.ID != web.ID || got.Config.Headers["X-Probe"] != "1" {
		t.Fatalf("get %+v", got)
	}
	for q, want := range map[string]int{"": 5, "type=http_check": 1, "enabled=false": 1, "enabled=true": 4, "search=GATE": 1, "search=example.test": 2,
		"siteId=" + f.a.SiteID: 1, "status=unknown": 5, "status=online": 0, "orgId=" + f.a.OrgID: 5, "limit=2": 2} {
		if got := f.list(f.a.Partner, q); len(got) != want {
			t.Fatalf("list %q: %d monitors, want %d", q, len(got), want)
		}
	}
	if got := f.list(f.a.Org, ""); got[0].Name != "ssh" || got[4].Name != "Gateway" {
		t.Fatalf("list order: %s ... %s", got[0].Name, got[4].Name)
	}

	var changed monitors.Monitor
	f.e.Must(200, f.a.Org, "PATCH", api+"/monitors/"+web.ID, map[string]any{"name": "Web front", "enabled": false,
		"alertRules": []map[string]any{{"id": web.AlertRules[1].ID, "condition": "response_time_gt", "threshold": 800, "severity": "high"}}}).JSON(t, &changed)
	if changed.Name != "Web front" || changed.Enabled || changed.NextCheckAt != nil || len(changed.AlertRules) != 1 ||
		changed.AlertRules[0].ID != web.AlertRules[1].ID || *changed.AlertRules[0].Threshold != 800 || changed.Target != web.Target {
		t.Fatalf("changed %+v", changed)
	}
	if r := f.e.Do(f.a.Org, "PATCH", api+"/monitors/"+web.ID, map[string]any{"alertRules": []map[string]any{{"id": web.AlertRules[0].ID,
		"condition": "offline", "severity": "high"}}}); r.Status != 400 || !strings.Contains(string(r.Body), "alertRules[0].id") {
		t.Fatalf("a rule with an unknown id = %d %s", r.Status, r.Body)
	}
	f.e.Must(204, f.a.Org, "DELETE", api+"/monitors/"+web.ID, nil)
	f.e.Must(404, f.a.Org, "GET", api+"/monitors/"+web.ID, nil)
	f.e.Must(404, f.a.Org, "DELETE", api+"/monitors/"+web.ID, nil)
	if n := f.count(`SELECT COUNT(*) FROM audit_logs WHERE resource_type = 'monitor'`); n < 7 {
		t.Fatalf("%d audit entries", n)
	}
}

func TestMonitorValidation(t *testing.T) {
	f := newFixture(t)
	other := f.e.InsertDevice(apptest.DeviceRow{PartnerID: f.b.PartnerID, OrgID: f.b.OrgID, SiteID: f.b.SiteID, Hostname: "theirs"})
	cases := []struct {
		field string
		body  map[string]any
	}{
		{"name", map[string]any{"name": " ", "type": "icmp_ping", "target": "h"}},
		{"type", map[string]any{"name": "x", "type": "smoke_signal", "target": "h"}},
		{"target", map[string]any{"name": "x", "type": "icmp_ping", "target": "not a host"}},
		{"target", map[string]any{"name": "x", "type": "http_check", "target": "ftp://example.test"}},
		{"target", map[string]any{"name": "x", "type": "dns_check", "target": "10.0.0.1"}},
		{"target", map[string]any{"name": "x", "type": "service_check", "target": "--now", "config": map[string]any{"deviceId": other}}},
		{"intervalSeconds", map[string]any{"name": "x", "type": "icmp_ping", "target": "h", "intervalSeconds": 9}},
		{"intervalSeconds", map[string]any{"name": "x", "type": "icmp_ping", "target": "h", "intervalSeconds": 86401}},
		{"timeoutSeconds", map[string]any{"name": "x", "type": "icmp_ping", "target": "h", "timeoutSeconds": 0}},
		{"timeoutSeconds", map[string]any{"name": "x", "type": "icmp_ping", "target": "h", "timeoutSeconds": 301}},
		{"config.count", map[string]any{"name": "x", "type": "icmp_ping", "target": "h", "config": map[string]any{"count": 11}}},
		{"config.size", map[string]any{"name": "x", "type": "icmp_ping", "target": "h", "config": map[string]any{"size": 1473}}},
		{"config.port", map[string]any{"name": "x", "type": "tcp_port", "target": "h"}},
		{"config.method", map[string]any{"name": "x", "type": "http_check", "target": "http://h", "config": map[string]any{"method": "BREW"}}},
		{"config.expectedStatus[0]", map[string]any{"name": "x", "type": "http_check", "target": "http://h", "config": map[string]any{"expectedStatus": []int{99}}}},
		{"config.headers", map[string]any{"name": "x", "type": "http_check", "target": "http://h", "config": map[string]any{"headers": map[string]string{"Bad Header": "b"}}}},
		{"config.certExpiryWarningDays", map[string]any{"name": "x", "type": "http_check", "target": "http://h", "config": map[string]any{"certExpiryWarningDays": 366}}},
		{"config.recordType", map[string]any{"name": "x", "type": "dns_check", "target": "h.test", "config": map[string]any{"recordType": "SOA"}}},
		{"config.nameserver", map[string]any{"name": "x", "type": "dns_check", "target": "h.test", "config": map[string]any{"nameserver": "ns:99999"}}},
		{"config.deviceId", map[string]any{"name": "x", "type": "service_check", "target": "sshd"}},
		{"config.deviceId", map[string]any{"name": "x", "type": "service_check", "target": "sshd", "config": map[string]any{"deviceId": other}}},
		{"config.serviceKind", map[string]any{"name": "x", "type": "service_check", "target": "sshd", "config": map[string]any{"serviceKind": "init", "deviceId": other}}},
		{"config.degradedResponseMs", map[string]any{"name": "x", "type": "icmp_ping", "target": "h", "config": map[string]any{"degradedResponseMs": -1}}},
		{"siteId", map[string]any{"name": "x", "type": "icmp_ping", "target": "h", "siteId": f.b.SiteID}},
		{"alertRules[0].condition", map[string]any{"name": "x", "type": "icmp_ping", "target": "h", "alertRules": []map[string]any{{"condition": "sad", "severity": "low"}}}},
		{"alertRules[0].severity", map[string]any{"name": "x", "type": "icmp_ping", "target": "h", "alertRules": []map[string]any{{"condition": "offline", "severity": "dire"}}}},
		{"alertRules[0].threshold", map[string]any{"name": "x", "type": "icmp_ping", "target": "h", "alertRules": []map[string]any{{"condition": "response_time_gt", "severity": "low"}}}},
		{"alertRules[0].threshold", map[string]any{"name": "x", "type": "icmp_ping", "target": "h", "alertRules": []map[string]any{{"condition": "consecutive_failures_gt", "threshold": 1.5, "severity": "low"}}}},
		{"alertRules[0].cooldownMinutes", map[string]any{"name": "x", "type": "icmp_ping", "target": "h", "alertRules": []map[string]any{{"condition": "offline", "severity": "low", "cooldownMinutes": 1441}}}},
		{"alertRules[0].id", map[string]any{"name": "x", "type": "icmp_ping", "target": "h", "alertRules": []map[string]any{{"id": "0190a0b0-0000-7000-8000-000000000000", "condition": "offline", "severity": "low"}}}},
		{"orgId", map[string]any{"orgId": f.b.OrgID, "name": "x", "type": "icmp_ping", "target": "h"}},
	}
	for _, c := range cases {
		r := f.e.Do(f.a.Partner, "POST", api+"/monitors", withOrg(c.body, f.a.OrgID))
		if r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" || !strings.Contains(string(r.Body), `"`+c.field+`"`) {
			t.Errorf("%s: %v = %d %s", c.field, c.body, r.Status, r.Body)
		}
	}
	rules := make([]map[string]any, 11)
	for i := range rules {
		rules[i] = map[string]any{"condition": "offline", "severity": "low"}
	}
	if r := f.e.Do(f.a.Org, "POST", api+"/monitors", map[string]any{"name": "x", "type": "icmp_ping", "target": "h", "alertRules": rules}); r.Status != 400 {
		t.Fatalf("11 rules = %d %s", r.Status, r.Body)
	}
	if n := f.count(`SELECT COUNT(*) FROM monitors`); n != 0 {
		t.Fatalf("%d monitors stored by refused requests", n)
	}
}

func withOrg(body map[string]any, orgID string) map[string]any {
	if _, ok := body["orgId"]; ok {
		return body
	}
	out := map[string]any{"orgId": orgID}
	for k, v := range body {
		out[k] = v
	}
	return out
}

// An alert of a monitor of tenant A, for the tenancy checks.
func (f fixture) openAlert(dev agentproto.EnrollResponse) (monitors.Monitor, alerts.Alert) {
	f.e.T.Helper()
	m := f.create(f.a.Org, map[string]any{"name": "down", "type": "tcp_port", "target": "10.0.0.9", "config": map[string]any{"port": 80},
		"alertRules": []map[string]any{{"condition": "offline", "severity": "high", "cooldownMinutes": 0}}})
	f.round(dev, agentproto.MonitorOffline, 0)
	list := f.alerts(f.a.Org, "monitorId="+m.ID)
	if len(list) != 1 {
		f.e.T.Fatalf("%d alerts of an offline monitor", len(list))
	}
	return m, list[0]
}

func TestMonitorsOfAnotherTenantAreNotFound(t *testing.T) {
	f := newFixture(t)
	dev := f.e.EnrollAgent(f.a, "probe-a")
	m, al := f.openAlert(dev)
	for _, c := range []apptest.Caller{f.b.Org, f.b.Partner} {
		for _, r := range []struct{ method, path string }{{"GET", "/monitors/" + m.ID}, {"PATCH", "/monitors/" + m.ID}, {"DELETE", "/monitors/" + m.ID},
			{"POST", "/monitors/" + m.ID + "/check"}, {"POST", "/monitors/" + m.ID + "/test"}, {"GET", "/monitors/" + m.ID + "/results"},
			{"GET", "/monitors/" + m.ID + "/alerts"}, {"PATCH", "/monitors/alerts/" + al.ID}, {"DELETE", "/monitors/alerts/" + al.ID}} {
			var body any
			if r.method == "PATCH" {
				body = map[string]any{"name": "mine"}
				if strings.Contains(r.path, "/monitors/alerts/") {
					body = map[string]any{"status": "acknowledged"}
				}
			}
			if res := f.e.Do(c, r.method, api+r.path, body); res.Status != 404 || res.ErrorCode() != "NOT_FOUND" {
				t.Errorf("%s %s by another tenant = %d %s", r.method, r.path, res.Status, res.Body)
			}
		}
		if got := f.list(c, ""); len(got) != 0 {
			t.Fatalf("another tenant lists %d monitors", len(got))
		}
		if got := f.alerts(c, ""); len(got) != 0 {
			t.Fatalf("another tenant lists %d monitor alerts", len(got))
		}
		var d monitors.MonitorDashboard
		f.e.Must(200, c, "GET", api+"/monitors/dashboard", nil).JSON(t, &d)
		if d.Total != 0 || d.OpenAlerts != 0 {
			t.Fatalf("another tenant's dashboard %+v", d)
		}
	}
	if got := f.get(f.a.Org, m.ID); got.Status != "offline" {
		t.Fatalf("the monitor changed: %+v", got)
	}
	// A device's alert is not a monitor alert.
	var devAlertID string
	err := f.e.App.DB.SQL.QueryRow(`SELECT id FROM alerts WHERE source_type = 'monitor'`).Scan(&devAlertID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.e.App.DB.SQL.Exec(`UPDATE alerts SET source_type = 'device', source_id = $1, device_id = $1 WHERE id = $2`, dev.DeviceID, devAlertID); err != nil {
		t.Fatal(err)
	}
	f.e.Must(404, f.a.Org, "PATCH", api+"/monitors/alerts/"+devAlertID, map[string]any{"status": "acknowledged"})
	f.e.Must(404, f.a.Org, "DELETE", api+"/monitors/alerts/"+devAlertID, nil)
	f.e.Must(404, f.a.Org, "PATCH", api+"/monitors/alerts/0190a0b0-0000-7000-8000-000000000000", map[string]any{"status": "acknowledged"})
}

func TestScheduledChecksMoveStatusAndAlerts(t *testing.T) {
	f := newFixture(t)
	dev := f.e.EnrollAgent(f.a, "probe-a")
	m := f.create(f.a.Org, map[string]any{"name": "web", "type": "tcp_port", "target": "10.0.0.9", "config": map[string]any{"port": 80}, "intervalSeconds": 30,
		"alertRules": []map[string]any{{"condition": "offline", "severity": "critical", "cooldownMinutes": 0},
			{"condition": "consecutive_failures_gt", "threshold": 1, "severity": "high", "cooldownMinutes": 0},
			{"condition": "response_time_gt", "threshold": 100, "severity": "low", "cooldownMinutes": 0}}})

	if n := f.round(dev, agentproto.MonitorOnline, 20); n != 1 {
		t.Fatalf("first round sent %d checks", n)
	}
	got := f.get(f.a.Org, m.ID)
	if got.Status != "online" || got.LastResponseMs == nil || *got.LastResponseMs != 20 || got.LastCheckAt == nil || got.ConsecutiveFailures != 0 ||
		!near(*got.NextCheckAt, start.Add(30*time.Second)) {
		t.Fatalf("after an online check %+v", got)
	}
	// Not due again within the interval.
	if n := f.round(dev, agentproto.MonitorOnline, 20); n != 0 {
		t.Fatalf("a round within the interval sent %d checks", n)
	}
	f.clk.Advance(30 * time.Second)
	f.round(dev, agentproto.MonitorOffline, 0)
	got = f.get(f.a.Org, m.ID)
	if got.Status != "offline" || got.ConsecutiveFailures != 1 || got.LastError == nil || *got.LastError != "connection refused" {
		t.Fatalf("after an offline check %+v", got)
	}
	if list := f.alerts(f.a.Org, "monitorId="+m.ID); len(list) != 1 || list[0].Severity != "critical" || list[0].SourceType != "monitor" ||
		list[0].SourceID == nil || *list[0].SourceID != m.ID || list[0].Status != "active" {
		t.Fatalf("alerts after one failure: %+v", list)
	}
	f.clk.Advance(30 * time.Second)
	f.round(dev, agentproto.MonitorOffline, 0)
	f.clk.Advance(30 * time.Second)
	f.round(dev, agentproto.MonitorOffline, 0)
	if list := f.alerts(f.a.Org, "monitorId="+m.ID+"&status=active"); len(list) != 2 {
		t.Fatalf("%d open alerts after three failures, want offline and consecutive failures", len(list))
	}
	if got = f.get(f.a.Org, m.ID); got.ConsecutiveFailures != 3 {
		t.Fatalf("consecutive failures %d", got.ConsecutiveFailures)
	}
	f.clk.Advance(30 * time.Second)
	f.round(dev, agentproto.MonitorOnline, 250)
	var open []alerts.Alert
	f.e.Must(200, f.a.Org, "GET", api+"/monitors/"+m.ID+"/alerts?status=active", nil).JSON(t, &struct{ Data *[]alerts.Alert }{&open})
	if len(open) != 1 || open[0].Severity != "low" {
		t.Fatalf("open alerts after a slow recovery: %+v", open)
	}
	if resolved := f.alerts(f.a.Org, "monitorId="+m.ID+"&status=resolved"); len(resolved) != 2 || resolved[0].ResolvedAt == nil {
		t.Fatalf("resolved alerts: %+v", resolved)
	}
	if n := f.count(`SELECT COUNT(*) FROM events WHERE type = $1 AND resource_id = $2`, monitors.EventStatusChanged, m.ID); n != 3 {
		t.Fatalf("%d status changes recorded, want unknown→online→offline→online", n)
	}
	rs := f.results(f.a.Org, m.ID, "")
	if len(rs) != 5 || rs[0].Status != "online" || rs[1].Status != "offline" || rs[4].Status != "online" || rs[1].Error != "connection refused" {
		t.Fatalf("results %+v", rs)
	}
	from := start.Add(30 * time.Second).Format(time.RFC3339)
	to := start.Add(90 * time.Second).Format(time.RFC3339)
	if got := f.results(f.a.Org, m.ID, "from="+from+"&to="+to); len(got) != 2 || !near(got[0].CheckedAt, start.Add(60*time.Second)) {
		t.Fatalf("range query: %+v", got)
	}
	if got := f.results(f.a.Org, m.ID, "limit=2"); len(got) != 2 {
		t.Fatalf("limit: %d", len(got))
	}
	var page struct {
		Data       []monitors.MonitorResult
		Pagination struct{ Cursor string }
	}
	f.e.Must(200, f.a.Org, "GET", api+"/monitors/"+m.ID+"/results?limit=3", nil).JSON(t, &page)
	f.e.Must(200, f.a.Org, "GET", api+"/monitors/"+m.ID+"/results?limit=3&cursor="+page.Pagination.Cursor, nil).JSON(t, &page)
	if len(page.Data) != 2 || !near(page.Data[1].CheckedAt, start) {
		t.Fatalf("second page %+v", page.Data)
	}
	f.e.Must(400, f.a.Org, "GET", api+"/monitors/"+m.ID+"/results?from="+to+"&to="+from, nil)

	// Deleting the monitor resolves its open alert.
	f.e.Must(204, f.a.Org, "DELETE", api+"/monitors/"+m.ID, nil)
	if n := f.count(`SELECT COUNT(*) FROM alerts WHERE source_id = $1 AND status = 'active'`, m.ID); n != 0 {
		t.Fatalf("%d alerts still open after delete", n)
	}
	if n := f.count(`SELECT COUNT(*) FROM monitor_results WHERE monitor_id = $1`, m.ID); n != 0 {
		t.Fatalf("%d results kept after delete", n)
	}
}

func TestAlertCooldownAndDisable(t *testing.T) {
	f := newFixture(t)
	dev := f.e.EnrollAgent(f.a, "probe-a")
	m := f.create(f.a.Org, map[string]any{"name": "web", "type": "icmp_ping", "target": "10.0.0.9", "intervalSeconds": 60,
		"alertRules": []map[string]any{{"condition": "offline", "severity": "high", "cooldownMinutes": 15}}})
	f.round(dev, agentproto.MonitorOffline, 0)
	f.clk.Advance(time.Minute)
	f.round(dev, agentproto.MonitorOnline, 5)
	f.clk.Advance(time.Minute)
	f.round(dev, agentproto.MonitorOffline, 0)
	if n := f.count(`SELECT COUNT(*) FROM alerts WHERE source_id = $1`, m.ID); n != 1 {
		t.Fatalf("%d alerts within the cooldown", n)
	}
	// The cooldown counts from the resolution, on the server's clock.
	if _, err := f.e.App.DB.SQL.Exec(`UPDATE alerts SET resolved_at = $1 WHERE source_id = $2`, f.clk.Now().Add(-16*time.Minute), m.ID); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(time.Minute)
	f.round(dev, agentproto.MonitorOffline, 0)
	if n := f.count(`SELECT COUNT(*) FROM alerts WHERE source_id = $1 AND status = 'active'`, m.ID); n != 1 {
		t.Fatalf("%d open alerts after the cooldown", n)
	}
	var off monitors.Monitor
	f.e.Must(200, f.a.Org, "PATCH", api+"/monitors/"+m.ID, map[string]any{"enabled": false}).JSON(t, &off)
	if off.Status != "unknown" || off.Enabled {
		t.Fatalf("disabled %+v", off)
	}
	if n := f.count(`SELECT COUNT(*) FROM alerts WHERE source_id = $1 AND status = 'active'`, m.ID); n != 0 {
		t.Fatalf("%d alerts open after disabling", n)
	}
	f.clk.Advance(time.Hour)
	if n := f.round(dev, agentproto.MonitorOffline, 0); n != 0 {
		t.Fatalf("a disabled monitor was checked %d times", n)
	}
	f.e.Must(200, f.a.Org, "PATCH", api+"/monitors/"+m.ID, map[string]any{"enabled": true})
	if n := f.round(dev, agentproto.MonitorOnline, 5); n != 1 {
		t.Fatalf("an enabled monitor was checked %d times", n)
	}
}

func TestNoOnlineAgentIsUnknownWithoutAlert(t *testing.T) {
	f := newFixture(t)
	m := f.create(f.a.Org, map[string]any{"name": "web", "type": "icmp_ping", "target": "10.0.0.9",
		"alertRules": []map[string]any{{"condition": "offline", "severity": "high"}, {"condition": "consecutive_failures_gt", "threshold": 0, "severity": "high"}}})
	f.e.InsertDevice(apptest.DeviceRow{PartnerID: f.a.PartnerID, OrgID: f.a.OrgID, SiteID: f.a.SiteID, Hostname: "sleeping", Status: "offline"})
	f.dispatch()
	got := f.get(f.a.Org, m.ID)
	if got.Status != "unknown" || got.LastError == nil || !strings.Contains(*got.LastError, "no agent of the organization is online") {
		t.Fatalf("without an agent %+v", got)
	}
	if n := f.count(`SELECT COUNT(*) FROM alerts`); n != 0 {
		t.Fatalf("%d alerts for an unknown monitor", n)
	}
	if got.ConsecutiveFailures != 0 || len(f.results(f.a.Org, m.ID, "")) != 0 {
		t.Fatalf("unknown counted as a result: %+v", got)
	}
	if r := f.e.Do(f.a.Org, "POST", api+"/monitors/"+m.ID+"/check", nil); r.Status != 409 || r.ErrorCode() != "NO_ONLINE_AGENT" {
		t.Fatalf("check without an agent = %d %s", r.Status, r.Body)
	}
}

func TestTwoNodesDispatchEachDueMonitorOnce(t *testing.T) {
	f := newFixture(t)
	dev := f.e.EnrollAgent(f.a, "probe-a")
	const n = 60
	for i := range n {
		f.create(f.a.Org, map[string]any{"name": fmt.Sprint("m", i), "type": "icmp_ping", "target": "10.0.0.9", "intervalSeconds": 10 + i%3*10})
	}
	second := app.Service[*monitors.Service](f.e.SecondNode(apptest.WithClock(f.clk)).App)
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i, s := range []*monitors.Service{f.service(), second, f.service(), second} {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = s.Dispatch(context.Background()) }()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		seen := map[string]int{}
		for id, checks := range f.pending(dev.DeviceID) {
			for _, c := range checks {
				seen[c.MonitorID]++
			}
			if _, err := f.e.App.DB.SQL.Exec(`UPDATE device_commands SET status = 'completed' WHERE id = $1`, id); err != nil {
				t.Fatal(err)
			}
		}
		want := n
		if round == 1 {
			want = n / 3 // 10 s later only the 10 s monitors are due again
		}
		if len(seen) != want {
			t.Fatalf("round %d: %d monitors dispatched, want %d", round, len(seen), want)
		}
		for id, k := range seen {
			if k != 1 {
				t.Fatalf("round %d: monitor %s dispatched %d times", round, id, k)
			}
		}
		if round == 0 {
			f.clk.Advance(10 * time.Second)
		} else {
			f.clk.Advance(30 * time.Second)
		}
	}
}

// liveAgent opens the agent's live channel and answers each monitor_check call: offline when
// the target contains "down", online in 12.5 ms otherwise.
func liveAgent(t *testing.T, e *apptest.Env, token string) {
	t.Helper()
	e.AnswerCalls(token, func(call agentproto.Call) (json.RawMessage, *agentproto.CallError) {
		var c agentproto.MonitorCheck
		_ = json.Unmarshal(call.Args, &c)
		ms := 12.5
		r := agentproto.MonitorCheckResult{MonitorID: c.MonitorID, Status: "online", ResponseMs: &ms, Details: map[string]any{"target": c.Target}}
		if strings.Contains(c.Target, "down") {
			r = agentproto.MonitorCheckResult{MonitorID: c.MonitorID, Status: "offline", Error: "no answer"}
		}
		result, _ := json.Marshal(r)
		return result, nil
	})
}

func TestCheckStoresAndTestDoesNot(t *testing.T) {
	f := newFixture(t)
	dev := f.e.EnrollAgent(f.a, "probe-a")
	liveAgent(t, f.e, dev.AuthToken)
	m := f.create(f.a.Org, map[string]any{"name": "web", "type": "http_check", "target": "https://up.example.test/",
		"alertRules": []map[string]any{{"condition": "offline", "severity": "high"}}})
	var res monitors.MonitorResult
	f.e.Must(200, f.a.Org, "POST", api+"/monitors/"+m.ID+"/check", nil).JSON(t, &res)
	if res.ID == "" || res.Status != "online" || res.ResponseMs == nil || *res.ResponseMs != 12.5 || res.MonitorID != m.ID {
		t.Fatalf("check %+v", res)
	}
	if got := f.get(f.a.Org, m.ID); got.Status != "online" || len(f.results(f.a.Org, m.ID, "")) != 1 {
		t.Fatalf("after check %+v", got)
	}
	res = monitors.MonitorResult{}
	f.e.Must(200, f.a.Org, "POST", api+"/monitors/"+m.ID+"/test", map[string]any{"target": "https://down.example.test/"}).JSON(t, &res)
	if res.ID != "" || res.Status != "offline" || res.Error != "no answer" {
		t.Fatalf("test %+v", res)
	}
	f.e.Must(200, f.a.Org, "POST", api+"/monitors/"+m.ID+"/test", nil).JSON(t, &res)
	if res.Status != "online" || res.Details["target"] != "https://up.example.test/" {
		t.Fatalf("test without body %+v", res)
	}
	if r := f.e.Do(f.a.Org, "POST", api+"/monitors/"+m.ID+"/test", map[string]any{"target": "gopher://x"}); r.Status != 400 {
		t.Fatalf("test with a bad target = %d %s", r.Status, r.Body)
	}
	got := f.get(f.a.Org, m.ID)
	if got.Status != "online" || got.Target != "https://up.example.test/" || len(f.results(f.a.Org, m.ID, "")) != 1 || len(f.alerts(f.a.Org, "")) != 0 {
		t.Fatalf("a test changed the monitor: %+v", got)
	}
	f.e.Must(200, f.a.Org, "PATCH", api+"/monitors/"+m.ID, map[string]any{"target": "https://down.example.test/"})
	f.e.Must(200, f.a.Org, "POST", api+"/monitors/"+m.ID+"/check", nil).JSON(t, &res)
	if res.Status != "offline" || len(f.alerts(f.a.Org, "status=active")) != 1 {
		t.Fatalf("check of a down target: %+v", res)
	}
}

func TestMonitorAlertActions(t *testing.T) {
	f := newFixture(t)
	dev := f.e.EnrollAgent(f.a, "probe-a")
	_, al := f.openAlert(dev)
	var x alerts.Alert
	f.e.Must(200, f.a.Org, "PATCH", api+"/monitors/alerts/"+al.ID, map[string]any{"status": "acknowledged"}).JSON(t, &x)
	if x.Status != "acknowledged" || x.AcknowledgedAt == nil {
		t.Fatalf("acknowledged %+v", x)
	}
	if r := f.e.Do(f.a.Org, "PATCH", api+"/monitors/alerts/"+al.ID, map[string]any{"status": "acknowledged"}); r.Status != 409 {
		t.Fatalf("second acknowledge = %d %s", r.Status, r.Body)
	}
	if r := f.e.Do(f.a.Org, "PATCH", api+"/monitors/alerts/"+al.ID, map[string]any{"status": "active"}); r.Status != 400 {
		t.Fatalf("status active = %d %s", r.Status, r.Body)
	}
	f.e.Must(200, f.a.Org, "PATCH", api+"/monitors/alerts/"+al.ID, map[string]any{"status": "resolved", "note": "fixed the cable"}).JSON(t, &x)
	if x.Status != "resolved" || x.ResolutionNote == nil || *x.ResolutionNote != "fixed the cable" {
		t.Fatalf("resolved %+v", x)
	}
	if r := f.e.Do(f.a.Org, "PATCH", api+"/monitors/alerts/"+al.ID, map[string]any{"status": "suppressed"}); r.Status != 409 {
		t.Fatalf("suppress a resolved alert = %d %s", r.Status, r.Body)
	}
	f.e.Must(204, f.a.Org, "DELETE", api+"/monitors/alerts/"+al.ID, nil)
	if r := f.e.Do(f.a.Org, "DELETE", api+"/monitors/alerts/"+al.ID, nil); r.Status != 409 {
		t.Fatalf("second dismiss = %d %s", r.Status, r.Body)
	}
	if got := f.alerts(f.a.Org, ""); len(got) != 0 {
		t.Fatalf("a dismissed alert is listed: %+v", got)
	}
	if got := f.alerts(f.a.Org, "status=dismissed"); len(got) != 1 {
		t.Fatalf("dismissed alerts: %d", len(got))
	}
}

func TestDashboardCounts(t *testing.T) {
	f := newFixture(t)
	dev := f.e.EnrollAgent(f.a, "probe-a")
	f.openAlert(dev)
	f.create(f.a.Org, ping("one"))
	f.create(f.a.Org, ping("two"))
	f.create(f.a.Org, map[string]any{"name": "off", "type": "icmp_ping", "target": "h", "enabled": false})
	f.clk.Advance(time.Minute)
	f.round(dev, agentproto.MonitorOnline, 10)
	f.e.Must(200, f.a.Org, "PATCH", api+"/monitors/"+f.list(f.a.Org, "search=two")[0].ID, map[string]any{"config": map[string]any{"count": 5}})
	var d monitors.MonitorDashboard
	f.e.Must(200, f.a.Partner, "GET", api+"/monitors/dashboard?orgId="+f.a.OrgID, nil).JSON(t, &d)
	if d.Total != 4 || d.Enabled != 3 || d.ByStatus["online"] != 2 || d.ByStatus["unknown"] != 2 || d.ByStatus["offline"] != 0 ||
		d.ByType["icmp_ping"] != 3 || d.ByType["tcp_port"] != 1 || d.OpenAlerts != 0 || d.AvgResponseMs == nil || *d.AvgResponseMs != 10 {
		t.Fatalf("dashboard %+v", d)
	}
}

func TestResultsPurgedAfterRetention(t *testing.T) {
	f := newFixture(t)
	dev := f.e.EnrollAgent(f.a, "probe-a")
	m := f.create(f.a.Org, ping("p"))
	f.round(dev, agentproto.MonitorOnline, 1)
	f.clk.Advance(20 * 24 * time.Hour)
	f.round(dev, agentproto.MonitorOnline, 1)
	f.clk.Advance(11 * 24 * time.Hour)
	n, err := f.service().Purge(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("purged %d, %v", n, err)
	}
	if rs := f.results(f.a.Org, m.ID, ""); len(rs) != 1 || !near(rs[0].CheckedAt, start.Add(20*24*time.Hour)) {
		t.Fatalf("results kept %+v", rs)
	}
}

func TestDegradedRuleAndStatus(t *testing.T) {
	f := newFixture(t)
	dev := f.e.EnrollAgent(f.a, "probe-a")
	m := f.create(f.a.Org, map[string]any{"name": "web", "type": "icmp_ping", "target": "10.0.0.9",
		"alertRules": []map[string]any{{"condition": "degraded", "severity": "medium", "cooldownMinutes": 0}, {"condition": "offline", "severity": "high"}}})
	f.round(dev, agentproto.MonitorDegraded, 80)
	if got := f.get(f.a.Org, m.ID); got.Status != "degraded" || got.ConsecutiveFailures != 0 {
		t.Fatalf("degraded %+v", got)
	}
	if open := f.alerts(f.a.Org, "status=active"); len(open) != 1 || open[0].Severity != "medium" {
		t.Fatalf("alerts of a degraded monitor: %+v", open)
	}
	f.clk.Advance(time.Minute)
	f.round(dev, agentproto.MonitorOnline, 8)
	if open := f.alerts(f.a.Org, "status=active"); len(open) != 0 {
		t.Fatalf("alerts after recovery: %+v", open)
	}
}

func TestCreateInAndSetEnabledInJoinTheCallersTransaction(t *testing.T) {
	f := newFixture(t)
	s := f.service()
	ctx := access.WithPrincipal(context.Background(), &access.Principal{Kind: access.ActorSystem, ID: "test", Name: "test",
		Scope: access.Scope{Level: access.LevelOrganization, PartnerID: f.a.PartnerID, OrgID: f.a.OrgID}})
	var m monitors.Monitor
	err := f.e.App.DB.Write(ctx, func(tx *sql.Tx) (err error) {
		if m, err = s.CreateIn(ctx, tx, monitors.MonitorInput{Name: "asset", Type: "icmp_ping", Target: "192.0.2.7"}); err != nil {
			return err
		}
		return s.SetEnabledIn(ctx, tx, m.ID, false)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.get(f.a.Org, m.ID); got.OrgID != f.a.OrgID || got.Enabled || got.NextCheckAt != nil {
		t.Fatalf("created and disabled %+v", got)
	}
	err = f.e.App.DB.Write(ctx, func(tx *sql.Tx) error {
		_, err := s.CreateIn(ctx, tx, monitors.MonitorInput{Name: "bad", Type: "icmp_ping", Target: "a b"})
		return err
	})
	if ae, ok := apperr.As(err); !ok || ae.Code != "VALIDATION_ERROR" {
		t.Fatalf("CreateIn with a bad target: %v", err)
	}
	other := access.WithPrincipal(context.Background(), &access.Principal{Kind: access.ActorSystem, ID: "test", Name: "test",
		Scope: access.Scope{Level: access.LevelOrganization, PartnerID: f.b.PartnerID, OrgID: f.b.OrgID}})
	err = f.e.App.DB.Write(other, func(tx *sql.Tx) error { return s.SetEnabledIn(other, tx, m.ID, true) })
	if ae, ok := apperr.As(err); !ok || ae.Code != "NOT_FOUND" {
		t.Fatalf("SetEnabledIn of another tenant's monitor: %v", err)
	}
	if err := f.e.App.DB.Write(ctx, func(tx *sql.Tx) error { return s.SetEnabledIn(ctx, tx, m.ID, true) }); err != nil {
		t.Fatal(err)
	}
	if got := f.get(f.a.Org, m.ID); !got.Enabled || got.NextCheckAt == nil {
		t.Fatalf("enabled again %+v", got)
	}
}

// A maintenance window that suppresses alerts over the device whose agent checks a monitor
// holds the monitor's alerts back: the check is stored and the status moves, but no alert
// opens and nobody is told. The first check after the window that still fails opens the
// alert. The same monitor of a tenant without a window alerts at once.
func TestMaintenanceWindowsHoldMonitorAlertsBack(t *testing.T) {
	f := newFixture(t)
	dev, free := f.e.EnrollAgent(f.a, "probe-a"), f.e.EnrollAgent(f.b, "probe-b")
	rules := []map[string]any{{"condition": "offline", "severity": "critical", "cooldownMinutes": 0}}
	m := f.create(f.a.Org, map[string]any{"name": "web", "type": "icmp_ping", "target": "10.0.0.9", "alertRules": rules})
	other := f.create(f.b.Org, map[string]any{"name": "web", "type": "icmp_ping", "target": "10.0.0.9", "alertRules": rules})
	triggered := func(ten apptest.Tenant) (events, notifications int) {
		t.Helper()
		if err := f.e.App.Events.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		return f.count(`SELECT COUNT(*) FROM events WHERE type = 'alert.triggered' AND org_id = $1`, ten.OrgID),
			f.count(`SELECT COUNT(*) FROM notifications WHERE type = 'alert.triggered' AND org_id = $1`, ten.OrgID)
	}

	occ := f.e.StartMaintenance(f.a.Org, f.a.OrgID, map[string]any{"type": "devices", "ids": []string{dev.DeviceID}})
	for range 2 {
		f.round(dev, agentproto.MonitorOffline, 0)
		f.round(free, agentproto.MonitorOffline, 0)
		f.clk.Advance(time.Minute)
	}
	if got := f.get(f.a.Org, m.ID); got.Status != "offline" || got.ConsecutiveFailures != 2 {
		t.Fatalf("held monitor %+v", got)
	}
	if list := f.alerts(f.a.Org, "monitorId="+m.ID); len(list) != 0 {
		t.Fatalf("a window over the probing device let %d alerts open", len(list))
	}
	if ev, n := triggered(f.a); ev != 0 || n != 0 {
		t.Fatalf("held: %d alert.triggered events, %d notifications", ev, n)
	}
	if list := f.alerts(f.b.Org, "monitorId="+other.ID); len(list) != 1 {
		t.Fatalf("without a window: %d alerts, want 1", len(list))
	}
	if ev, n := triggered(f.b); ev != 1 || n == 0 {
		t.Fatalf("without a window: %d alert.triggered events, %d notifications", ev, n)
	}

	// The window ends; the next check that still fails opens the alert.
	f.e.EndMaintenance(f.a.Org, occ)
	f.round(dev, agentproto.MonitorOffline, 0)
	if list := f.alerts(f.a.Org, "monitorId="+m.ID+"&status=active"); len(list) != 1 || list[0].Severity != "critical" || list[0].DeviceID != nil {
		t.Fatalf("after the window: %+v", list)
	}
	if ev, n := triggered(f.a); ev != 1 || n == 0 {
		t.Fatalf("after the window: %d alert.triggered events, %d notifications", ev, n)
	}

	// A check run now is held back by a window over the agent that runs it, too.
	c := f.e.NewTenant(f.e.Admin(), "Charlie")
	live := f.e.EnrollAgent(c, "probe-c")
	liveAgent(t, f.e, live.AuthToken)
	down := f.create(c.Org, map[string]any{"name": "site", "type": "http_check", "target": "https://down.example.test/", "alertRules": rules})
	occ = f.e.StartMaintenance(c.Org, c.OrgID, map[string]any{"type": "devices", "ids": []string{live.DeviceID}})
	var res monitors.MonitorResult
	f.e.Must(200, c.Org, "POST", api+"/monitors/"+down.ID+"/check", nil).JSON(t, &res)
	if res.Status != "offline" || len(f.alerts(c.Org, "monitorId="+down.ID)) != 0 {
		t.Fatalf("a check run now under a window: %+v, alerts %+v", res, f.alerts(c.Org, ""))
	}
	f.e.EndMaintenance(c.Org, occ)
	f.e.Must(200, c.Org, "POST", api+"/monitors/"+down.ID+"/check", nil)
	if list := f.alerts(c.Org, "monitorId="+down.ID+"&status=active"); len(list) != 1 {
		t.Fatalf("a check run now after the window: %+v", list)
	}
}

// A check run now on an agent that is opening its live channel waits for the channel and runs
// once it is up.
func TestCheckNowWaitsForAnAgentOpeningItsLiveChannel(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.AgentChannelWait = 30 * time.Second })
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := e.EnrollAgent(ten, "probe-a")
	e.ReportOpeningChannel(dev)
	var m monitors.Monitor
	e.Must(http.StatusCreated, ten.Org, "POST", api+"/monitors", map[string]any{"name": "web", "type": "http_check",
		"target": "https://up.example.test/"}).JSON(t, &m)
	done := make(chan *apptest.Response, 1)
	go func() { done <- e.Do(ten.Org, "POST", api+"/monitors/"+m.ID+"/check", nil) }()
	e.WaitChannelWaits(1)
	liveAgent(t, e, dev.AuthToken)
	if r := <-done; r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"status":"online"`) {
		t.Fatalf("check asked while the agent's channel was connecting = %d %s", r.Status, r.Body)
	}
}

// An agent that said it is opening its channel, which does not come up within the wait, is
// 503 AGENT_OFFLINE saying it is connecting.
func TestCheckNowOnAnAgentWhoseChannelDoesNotComeUpSaysConnecting(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.AgentChannelWait = 200 * time.Millisecond })
	ten := e.NewTenant(e.Admin(), "Alpha")
	e.ReportOpeningChannel(e.EnrollAgent(ten, "probe-a"))
	var m monitors.Monitor
	e.Must(http.StatusCreated, ten.Org, "POST", api+"/monitors", map[string]any{"name": "web", "type": "icmp_ping",
		"target": "10.0.0.9"}).JSON(t, &m)
	r := e.Do(ten.Org, "POST", api+"/monitors/"+m.ID+"/check", nil)
	if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != "AGENT_OFFLINE" || !strings.Contains(string(r.Body), "connecting its live channel") {
		t.Fatalf("check on an agent whose channel never comes up = %d %s", r.Status, r.Body)
	}
}
