package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"gale/internal/agent/netcheck/netchecktest"
	"gale/internal/app"
	"gale/internal/domains/alerts"
	"gale/internal/domains/monitors"
	"gale/internal/testkit/apptest"
)

// TestMonitorsOnARealAgent checks local targets through a real agent: a TCP listener with a
// banner, an HTTPS test server, an in-process DNS server, the loopback for ping and the
// agent's own process. Every monitor goes online from the scheduler's round; the TCP target
// stopped goes offline with exactly one alert, resolved when it returns; a test returns a
// live result and stores nothing.
func TestMonitorsOnARealAgent(t *testing.T) {
	node := apptest.New(t)
	agent := startAgentWith(t, node, nil)
	admin := node.Admin()
	var probe struct {
		OrgID string `json:"orgId"`
	}
	node.Must(http.StatusOK, admin, "GET", "/api/v1/devices/"+agent.deviceID, nil).JSON(t, &probe)

	banner := netchecktest.BannerServer(t, "127.0.0.1:0", "SSH-2.0-gale-e2e\r\n")
	port := banner.Addr().(*net.TCPAddr).Port
	web := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("status: green")) }))
	defer web.Close()
	dns := netchecktest.DNS(t, []netchecktest.Record{{Name: "app.gale.test", Type: "A", Value: "192.0.2.44"}})

	create := func(body map[string]any) monitors.Monitor {
		t.Helper()
		body["orgId"] = probe.OrgID
		var m monitors.Monitor
		node.Must(http.StatusCreated, admin, "POST", "/api/v1/monitors", body).JSON(t, &m)
		return m
	}
	tcp := create(map[string]any{"name": "ssh", "type": "tcp_port", "target": "127.0.0.1", "timeoutSeconds": 3,
		"config":     map[string]any{"port": port, "expectedBanner": "SSH-2.0"},
		"alertRules": []map[string]any{{"condition": "offline", "severity": "critical", "cooldownMinutes": 0}}})
	all := []monitors.Monitor{tcp,
		create(map[string]any{"name": "web", "type": "http_check", "target": web.URL + "/health",
			"config": map[string]any{"verifyTls": false, "expectedBody": "green", "expectedStatus": []int{200}}}),
		create(map[string]any{"name": "dns", "type": "dns_check", "target": "app.gale.test",
			"config": map[string]any{"recordType": "A", "expectedValue": "192.0.2.44", "nameserver": dns}}),
		create(map[string]any{"name": "loopback", "type": "icmp_ping", "target": "127.0.0.1", "config": map[string]any{"count": 2}}),
		create(map[string]any{"name": "agent", "type": "service_check", "target": "gale-agent",
			"config": map[string]any{"serviceKind": "process", "deviceId": agent.deviceID}}),
	}
	get := func(id string) monitors.Monitor {
		var m monitors.Monitor
		node.Must(http.StatusOK, admin, "GET", "/api/v1/monitors/"+id, nil).JSON(t, &m)
		return m
	}
	results := func(id string) int {
		var out struct{ Data []monitors.MonitorResult }
		node.Must(http.StatusOK, admin, "GET", "/api/v1/monitors/"+id+"/results", nil).JSON(t, &out)
		return len(out.Data)
	}
	openAlerts := func(id string) []alerts.Alert {
		var out struct{ Data []alerts.Alert }
		node.Must(http.StatusOK, admin, "GET", "/api/v1/monitors/"+id+"/alerts?status=active", nil).JSON(t, &out)
		return out.Data
	}

	// One scheduler round sends every check to the agent in one command.
	if err := app.Service[*monitors.Service](node.App).Dispatch(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		waitFor(t, 30*time.Second, m.Name+" online", func() bool { return get(m.ID).Status == "online" })
		if got := get(m.ID); got.LastResponseMs == nil || results(m.ID) != 1 {
			t.Fatalf("%s after the round: %+v", m.Name, got)
		}
	}

	// A test runs through the agent and stores nothing.
	var tested monitors.MonitorResult
	node.Must(http.StatusOK, admin, "POST", "/api/v1/monitors/"+tcp.ID+"/test", map[string]any{"config": map[string]any{"port": port,
		"expectedBanner": "SMTP"}}).JSON(t, &tested)
	if tested.Status != "offline" || tested.ID != "" || tested.Details["banner"] != "SSH-2.0-gale-e2e\r\n" {
		t.Fatalf("test with another banner: %+v", tested)
	}
	if results(tcp.ID) != 1 || get(tcp.ID).Status != "online" {
		t.Fatal("a test stored its result")
	}

	// The target stops: offline, exactly one alert however often it is checked.
	_ = banner.Close()
	for i := range 2 {
		var r monitors.MonitorResult
		node.Must(http.StatusOK, admin, "POST", "/api/v1/monitors/"+tcp.ID+"/check", nil).JSON(t, &r)
		if r.Status != "offline" || r.ID == "" {
			t.Fatalf("check %d of a stopped target: %+v", i, r)
		}
	}
	if got := get(tcp.ID); got.Status != "offline" || got.ConsecutiveFailures != 2 {
		t.Fatalf("stopped target: %+v", got)
	}
	if open := openAlerts(tcp.ID); len(open) != 1 || open[0].Severity != "critical" {
		t.Fatalf("open alerts of the stopped target: %+v", open)
	}

	// The target returns: online, the alert resolved.
	netchecktest.BannerServer(t, fmt.Sprintf("127.0.0.1:%d", port), "SSH-2.0-gale-e2e\r\n")
	var back monitors.MonitorResult
	node.Must(http.StatusOK, admin, "POST", "/api/v1/monitors/"+tcp.ID+"/check", nil).JSON(t, &back)
	if back.Status != "online" || len(openAlerts(tcp.ID)) != 0 {
		t.Fatalf("target back: %+v, open alerts %d", back, len(openAlerts(tcp.ID)))
	}
	var resolved struct{ Data []alerts.Alert }
	node.Must(http.StatusOK, admin, "GET", "/api/v1/monitors/alerts?status=resolved&monitorId="+tcp.ID, nil).JSON(t, &resolved)
	if len(resolved.Data) != 1 || resolved.Data[0].ResolvedAt == nil {
		t.Fatalf("resolved alerts: %+v", resolved.Data)
	}
}
