package netcheck

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gale/internal/agent/netcheck/netchecktest"
	"gale/internal/wire/agentproto"
)

func check(typ, target string, cfg agentproto.MonitorConfig) agentproto.MonitorCheck {
	return agentproto.MonitorCheck{MonitorID: "m1", Type: typ, Target: target, Config: cfg, TimeoutSeconds: 3}
}

func want(t *testing.T, r agentproto.MonitorCheckResult, status string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %s (%s), want %s; details %v", r.Status, r.Error, status, r.Details)
	}
	if r.MonitorID != "m1" || r.CheckedAt.IsZero() {
		t.Fatalf("result lacks its monitor or time: %+v", r)
	}
}

func TestPingCheck(t *testing.T) {
	r := Run(context.Background(), check(agentproto.MonitorICMPPing, "127.0.0.1", agentproto.MonitorConfig{Count: 2}))
	want(t, r, agentproto.MonitorOnline)
	if r.ResponseMs == nil || r.Details["sent"] != 2 || r.Details["received"] != 2 {
		t.Fatalf("ping details: %+v", r)
	}
	r = Run(context.Background(), check(agentproto.MonitorICMPPing, "127.0.0.1", agentproto.MonitorConfig{Count: 1, DegradedResponseMs: 1}))
	if r.Status != agentproto.MonitorOnline && r.Status != agentproto.MonitorDegraded {
		t.Fatalf("status %s", r.Status)
	}
}

func TestTCPCheck(t *testing.T) {
	ln := netchecktest.BannerServer(t, "127.0.0.1:0", "SSH-2.0-Test\r\n")
	port := ln.Addr().(*net.TCPAddr).Port
	want(t, Run(context.Background(), check(agentproto.MonitorTCPPort, "127.0.0.1", agentproto.MonitorConfig{Port: port, ExpectedBanner: "SSH-2.0"})), agentproto.MonitorOnline)
	r := Run(context.Background(), check(agentproto.MonitorTCPPort, "127.0.0.1", agentproto.MonitorConfig{Port: port, ExpectedBanner: "SMTP"}))
	want(t, r, agentproto.MonitorOffline)
	if r.Details["banner"] != "SSH-2.0-Test\r\n" {
		t.Fatalf("banner %v", r.Details["banner"])
	}
	_ = ln.Close()
	want(t, Run(context.Background(), check(agentproto.MonitorTCPPort, "127.0.0.1", agentproto.MonitorConfig{Port: port})), agentproto.MonitorOffline)
}

func TestHTTPCheck(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/", http.StatusFound)
		case "/missing":
			http.NotFound(w, r)
		default:
			if r.Header.Get("X-Probe") != "yes" {
				w.WriteHeader(http.StatusBadRequest)
			}
			_, _ = w.Write([]byte("all systems go"))
		}
	}))
	defer srv.Close()
	no, never := false, 0
	hdr := map[string]string{"X-Probe": "yes"}
	cases := []struct {
		name, path string
		cfg        agentproto.MonitorConfig
		status     string
	}{
		{"unverified", "/", agentproto.MonitorConfig{VerifyTLS: &no, Headers: hdr, ExpectedBody: "systems go"}, agentproto.MonitorOnline},
		{"verified self-signed", "/", agentproto.MonitorConfig{Headers: hdr}, agentproto.MonitorOffline},
		{"body missing", "/", agentproto.MonitorConfig{VerifyTLS: &no, Headers: hdr, ExpectedBody: "down"}, agentproto.MonitorOffline},
		{"no header", "/", agentproto.MonitorConfig{VerifyTLS: &no}, agentproto.MonitorOffline},
		{"expected 404", "/missing", agentproto.MonitorConfig{VerifyTLS: &no, ExpectedStatus: []int{404}}, agentproto.MonitorOnline},
		{"redirect followed", "/moved", agentproto.MonitorConfig{VerifyTLS: &no, Headers: hdr}, agentproto.MonitorOnline},
		{"redirect kept", "/moved", agentproto.MonitorConfig{VerifyTLS: &no, FollowRedirects: &no, ExpectedStatus: []int{302}}, agentproto.MonitorOnline},
		{"cert warning", "/", agentproto.MonitorConfig{VerifyTLS: &no, Headers: hdr, CertExpiryWarningDays: ptr(365 * 100)}, agentproto.MonitorDegraded},
		{"no cert warning", "/", agentproto.MonitorConfig{VerifyTLS: &no, Headers: hdr, CertExpiryWarningDays: &never}, agentproto.MonitorOnline},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Run(context.Background(), check(agentproto.MonitorHTTPCheck, srv.URL+c.path, c.cfg))
			want(t, r, c.status)
			if c.status != agentproto.MonitorOffline || c.name == "body missing" {
				if _, ok := r.Details["certDaysLeft"]; !ok {
					t.Fatalf("no certificate days: %v", r.Details)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestDNSCheck(t *testing.T) {
	ns := netchecktest.DNS(t, []netchecktest.Record{
		{Name: "www.example.test", Type: "A", Value: "192.0.2.10"},
		{Name: "www.example.test", Type: "AAAA", Value: "2001:db8::10"},
		{Name: "example.test", Type: "MX", Value: "10 mail.example.test"},
		{Name: "example.test", Type: "TXT", Value: "v=spf1 -all"},
		{Name: "example.test", Type: "NS", Value: "ns1.example.test"},
		{Name: "alias.example.test", Type: "CNAME", Value: "www.example.test"},
	})
	cases := []struct {
		name, target string
		cfg          agentproto.MonitorConfig
		status       string
	}{
		{"A", "www.example.test", agentproto.MonitorConfig{ExpectedValue: "192.0.2.10"}, agentproto.MonitorOnline},
		{"A wrong", "www.example.test", agentproto.MonitorConfig{ExpectedValue: "192.0.2.11"}, agentproto.MonitorOffline},
		{"AAAA", "www.example.test", agentproto.MonitorConfig{RecordType: "AAAA", ExpectedValue: "2001:db8::10"}, agentproto.MonitorOnline},
		{"MX", "example.test", agentproto.MonitorConfig{RecordType: "MX", ExpectedValue: "mail.example.test"}, agentproto.MonitorOnline},
		{"TXT", "example.test", agentproto.MonitorConfig{RecordType: "TXT", ExpectedValue: "spf1"}, agentproto.MonitorOnline},
		{"NS", "example.test", agentproto.MonitorConfig{RecordType: "NS", ExpectedValue: "NS1.example.test."}, agentproto.MonitorOnline},
		{"CNAME", "alias.example.test", agentproto.MonitorConfig{RecordType: "CNAME", ExpectedValue: "www.example.test"}, agentproto.MonitorOnline},
		{"unknown name", "nothing.example.test", agentproto.MonitorConfig{}, agentproto.MonitorOffline},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Nameserver = ns
			want(t, Run(context.Background(), check(agentproto.MonitorDNSCheck, c.target, c.cfg)), c.status)
		})
	}
}

func TestServiceCheckByProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	self := filepath.Base(os.Args[0])
	r := Run(context.Background(), check(agentproto.MonitorServiceCheck, self, agentproto.MonitorConfig{ServiceKind: agentproto.ServiceByProcess}))
	want(t, r, agentproto.MonitorOnline)
	r = Run(context.Background(), check(agentproto.MonitorServiceCheck, "no-such-process-here", agentproto.MonitorConfig{ServiceKind: agentproto.ServiceByProcess}))
	want(t, r, agentproto.MonitorOffline)
	r = Run(context.Background(), check(agentproto.MonitorServiceCheck, "--bad unit", agentproto.MonitorConfig{}))
	want(t, r, agentproto.MonitorOffline)
}

func TestBatchCommand(t *testing.T) {
	ln := netchecktest.BannerServer(t, "127.0.0.1:0", "hello")
	port := ln.Addr().(*net.TCPAddr).Port
	var checks []agentproto.MonitorCheck
	for range 40 {
		checks = append(checks, check(agentproto.MonitorTCPPort, "127.0.0.1", agentproto.MonitorConfig{Port: port}))
	}
	checks = append(checks, check("carrier_pigeon", "x", agentproto.MonitorConfig{}))
	payload, _ := json.Marshal(agentproto.MonitorChecks{Checks: checks})
	res := runBatch(context.Background(), agentproto.Command{Type: agentproto.CommandMonitorChecks, Payload: payload})
	if res.Status != agentproto.ResultCompleted {
		t.Fatalf("batch: %+v", res)
	}
	var out agentproto.MonitorChecksResult
	if err := json.Unmarshal(res.Result, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 41 || out.Results[0].Status != agentproto.MonitorOnline || out.Results[40].Status != agentproto.MonitorOffline {
		t.Fatalf("batch results: %d, first %+v, last %+v", len(out.Results), out.Results[0], out.Results[40])
	}
}

// A unit check asks systemd: the journal is active on any machine booted with systemd, a
// unit that does not exist is not, and a name that is not a unit's is refused unasked.
func TestServiceCheckBySystemdUnit(t *testing.T) {
	if r := Run(context.Background(), check(agentproto.MonitorServiceCheck, "--version", agentproto.MonitorConfig{})); !strings.Contains(r.Error,
		"not a systemd unit name") {
		t.Errorf("an option as a unit: %+v", r)
	}
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		t.Skip("this machine was not booted with systemd: there is no unit to ask about")
	}
	want(t, Run(context.Background(), check(agentproto.MonitorServiceCheck, "systemd-journald.service", agentproto.MonitorConfig{})),
		agentproto.MonitorOnline)
	r := Run(context.Background(), check(agentproto.MonitorServiceCheck, "galetest-none.service", agentproto.MonitorConfig{}))
	want(t, r, agentproto.MonitorOffline)
	if !strings.Contains(r.Error, "galetest-none.service is inactive") {
		t.Errorf("missing unit: %q", r.Error)
	}
}
