package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gale/internal/domains/webhooks"
	"gale/internal/platform/mail/mailtest"
	"gale/internal/testkit/proctest"
)

// hookRequest is one request the local receiver got.
type hookRequest struct {
	path   string
	header http.Header
	body   []byte
}

type hookReceiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []hookRequest
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, hookRequest{path: req.URL.Path, header: req.Header.Clone(), body: b})
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *hookReceiver) at(path string) []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []hookRequest
	for _, g := range r.got {
		if g.path == path {
			out = append(out, g)
		}
	}
	return out
}

// TestAlertingEndToEnd is issue #5's "done when": a real agent heartbeats into a real server;
// a rule the machine always crosses fires; the alert arrives by mail (SMTP), as a signed
// outbound webhook and as a Slack message; then the rule is changed so the condition clears
// and the alert resolves itself on the next heartbeat, which Slack hears of too.
func TestAlertingEndToEnd(t *testing.T) {
	t.Parallel()
	smtp := mailtest.Start(t)
	rcv := newHookReceiver(t)
	s := startServer(t, "AGENT_HEARTBEAT_INTERVAL_SECONDS=5", "SMTP_URL="+smtp.URL(), "SMTP_FROM=gale@example.com",
		"WEBHOOK_ALLOW_PRIVATE_TARGETS=true")
	ten := s.newTenant("Alerting", 1)

	// Where the alert goes: an email channel, a Slack channel and an outbound webhook.
	s.must(201, "POST", "/alerts/channels", map[string]any{"partnerId": ten.PartnerID, "name": "ops mail", "type": "email",
		"config": map[string]any{"recipients": []string{"ops@example.com"}}}, nil)
	s.must(201, "POST", "/alerts/channels", map[string]any{"partnerId": ten.PartnerID, "name": "ops slack", "type": "slack",
		"config": map[string]any{"webhookUrl": rcv.URL + "/slack"}}, nil)
	var hook struct {
		Secret string `json:"secret"`
	}
	s.must(201, "POST", "/webhooks", map[string]any{"partnerId": ten.PartnerID, "name": "alerts", "url": rcv.URL + "/hook",
		"events": []string{"alert.*"}}, &hook)

	cfgPath := filepath.Join(t.TempDir(), "agent", "agent.json")
	enroll := exec.Command(agentBinary(t), "enroll", ten.Key, "--server", s.base, "--enrollment-secret", ten.EnrollmentSecret,
		"--quiet", "--config", cfgPath)
	if out, err := enroll.CombinedOutput(); err != nil {
		t.Fatalf("enroll: %v: %q", err, out)
	}
	run := exec.Command(agentBinary(t), "run", "--config", cfgPath)
	run.Env = os.Environ()
	agentLogs := &proctest.Output{}
	run.Stdout, run.Stderr = agentLogs, agentLogs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = run.Process.Signal(syscall.SIGTERM)
		_, _ = run.Process.Wait()
		if t.Failed() {
			t.Logf("agent log:\n%s", agentLogs.String())
		}
	})

	// Any running machine uses more than 1% of its memory.
	var rule struct {
		ID string `json:"id"`
	}
	s.must(201, "POST", "/alerts/rules", map[string]any{"partnerId": ten.PartnerID, "name": "memory in use", "severity": "high",
		"titleTemplate": "Memory {{value}}% on {{hostname}}", "cooldownMinutes": 0,
		"conditions": map[string]any{"type": "threshold", "metric": "ramPercent", "operator": "gt", "value": 1, "durationMinutes": 0}}, &rule)

	hostname, _ := os.Hostname()
	waitFor(t, 60*time.Second, "the alert mail", func() bool { return len(smtp.Messages()) > 0 })
	m := smtp.Messages()[0]
	if len(m.To) != 1 || m.To[0] != "ops@example.com" || !strings.Contains(m.Data, "Subject: [HIGH] Memory") ||
		!strings.Contains(m.Data, hostname) {
		t.Fatalf("mail = %+v", m)
	}
	waitFor(t, 30*time.Second, "the signed webhook", func() bool { return len(rcv.at("/hook")) > 0 })
	h := rcv.at("/hook")[0]
	if want := webhooks.Sign(hook.Secret, h.header.Get("X-Gale-Timestamp"), h.body); h.header.Get("X-Gale-Signature") != want {
		t.Fatalf("webhook signature %q, want %q", h.header.Get("X-Gale-Signature"), want)
	}
	var env struct {
		Type string `json:"type"`
		Data struct {
			ID     string `json:"id"`
			RuleID string `json:"ruleId"`
			Status string `json:"status"`
		} `json:"data"`
	}
	if err := json.Unmarshal(h.body, &env); err != nil || env.Type != "alert.triggered" || env.Data.RuleID != rule.ID ||
		env.Data.Status != "active" {
		t.Fatalf("webhook body %s", h.body)
	}
	waitFor(t, 30*time.Second, "the Slack message", func() bool { return len(rcv.at("/slack")) > 0 })
	var slack struct {
		Text   string           `json:"text"`
		Blocks []map[string]any `json:"blocks"`
	}
	if err := json.Unmarshal(rcv.at("/slack")[0].body, &slack); err != nil || !strings.HasPrefix(slack.Text, "[HIGH] Memory") ||
		len(slack.Blocks) < 3 || slack.Blocks[0]["type"] != "header" {
		t.Fatalf("slack body %s", rcv.at("/slack")[0].body)
	}

	// The condition can no longer hold: the next heartbeat resolves the alert.
	s.must(200, "PATCH", "/alerts/rules/"+rule.ID, map[string]any{"conditions": map[string]any{"type": "threshold",
		"metric": "ramPercent", "operator": "gt", "value": 100, "durationMinutes": 0}}, nil)
	var alert struct {
		Status     string  `json:"status"`
		ResolvedAt *string `json:"resolvedAt"`
		ResolvedBy *string `json:"resolvedBy"`
	}
	waitFor(t, 30*time.Second, "the alert to resolve itself", func() bool {
		s.must(200, "GET", "/alerts/"+env.Data.ID, nil, &alert)
		return alert.Status == "resolved"
	})
	if alert.ResolvedAt == nil || alert.ResolvedBy != nil {
		t.Fatalf("resolved alert %+v; want resolved automatically", alert)
	}
	waitFor(t, 30*time.Second, "the Slack resolution", func() bool {
		for _, r := range rcv.at("/slack") {
			if strings.Contains(string(r.body), "[RESOLVED] Memory") {
				return true
			}
		}
		return false
	})
}
