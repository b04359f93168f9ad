package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gale/internal/testkit/proctest"
)

// stoppableServer is a gale process that the test stops and starts again on the same
// database, data directory and address, as an operator's restart (or a crash) would.
type stoppableServer struct {
	*server
	cmd *exec.Cmd
}

func startStoppableServer(t *testing.T, extraEnv ...string) *stoppableServer {
	t.Helper()
	addr := proctest.FreeAddr(t)
	env := galeEnv(t, append([]string{"LISTEN_ADDR=" + addr, "PUBLIC_URL=http://" + addr, "AGENT_HEARTBEAT_INTERVAL_SECONDS=5",
		"BOOTSTRAP_ADMIN_EMAIL=admin@example.com", "BOOTSTRAP_ADMIN_PASSWORD=Change-Me-123"}, extraEnv...)...)
	s := &stoppableServer{server: &server{t: t, base: "http://" + addr, logs: &proctest.Output{}, env: env}}
	s.start()
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("server log:\n%s", s.logs.String())
		}
	})
	return s
}

func (s *stoppableServer) start() {
	s.t.Helper()
	s.cmd = exec.Command(galeBinary(s.t), "serve")
	s.cmd.Env = s.env
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	waitFor(s.t, 60*time.Second, "server ready", func() bool {
		res, err := http.Get(s.base + "/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	var session struct {
		AccessToken string `json:"accessToken"`
	}
	s.token = ""
	s.must(200, "POST", "/auth/login", map[string]string{"email": "admin@example.com", "password": "Change-Me-123"}, &session)
	s.token = session.AccessToken
}

// kill ends the server abruptly, as a crash does: its agents learn it from their sockets.
func (s *stoppableServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_, _ = s.cmd.Process.Wait()
	s.cmd = nil
}

// refusingProxy stands between the agent and the server, and answers 401 itself while
// refusing is set, as a misconfigured proxy or a captive portal would.
func refusingProxy(t *testing.T, target string) (*httptest.Server, *atomic.Bool) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var refusing atomic.Bool
	rp := httputil.NewSingleHostReverseProxy(u)
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refusing.Load() {
			http.Error(w, "401 Unauthorized", http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p, &refusing
}

// TestAgentOutlivesServerOutages runs a real agent against a real server that goes away: a
// script runs on through the outage and its result arrives afterwards, the heartbeat samples
// of the outage fill the metrics history, the agent is back within 10 s of a restart, a
// refusing proxy does not retire it, a damaged configuration is repaired by enrolling, and a
// real decommissioning ends it with its documented exit status.
func TestAgentOutlivesServerOutages(t *testing.T) {
	t.Parallel()
	s := startStoppableServer(t)
	proxy, refusing := refusingProxy(t, s.base)
	ten := s.newTenant("Outage", 5)

	cfgPath := filepath.Join(t.TempDir(), "agent.json")
	enroll := func() string {
		out, err := exec.Command(agentBinary(t), "enroll", ten.Key, "--server", proxy.URL, "--enrollment-secret",
			ten.EnrollmentSecret, "--config", cfgPath).CombinedOutput()
		if err != nil {
			t.Fatalf("enroll: %v: %s", err, out)
		}
		return string(out)
	}
	enroll()
	// A damaged configuration is replaced by enrolling again, not answered "already enrolled".
	if err := os.WriteFile(cfgPath, []byte(`{"server": "http://`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := enroll(); !strings.Contains(out, "enrolling anew") || strings.Contains(out, "already enrolled") {
		t.Fatalf("enroll over a damaged configuration: %s", out)
	}
	var cfg struct {
		DeviceID string `json:"deviceId"`
	}
	b, _ := os.ReadFile(cfgPath)
	if err := json.Unmarshal(b, &cfg); err != nil || cfg.DeviceID == "" {
		t.Fatalf("repaired configuration: %v: %s", err, b)
	}

	logs := &proctest.Output{}
	agent := exec.Command(agentBinary(t), "run", "--no-watchdog", "--config", cfgPath)
	agent.Stdout, agent.Stderr = logs, logs
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- agent.Wait() }()
	t.Cleanup(func() {
		_ = agent.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	connections := func() int { return strings.Count(logs.String(), "connected to the server") }
	waitFor(t, 30*time.Second, "the agent online", func() bool {
		var dev e2eDevice
		s.must(200, "GET", "/devices/"+cfg.DeviceID, nil, &dev)
		return dev.Status == "online" && connections() == 1
	})

	// GALE_E2E_LONG=1 runs the outages at full length: a 20 s script, the server down for a
	// minute, a minute of refusals. The suite's default keeps them short.
	scriptSeconds, outage, refusal := 5, 12*time.Second, 5*time.Second
	if os.Getenv("GALE_E2E_LONG") != "" {
		scriptSeconds, outage, refusal = 20, time.Minute, time.Minute
	}

	// A script of several seconds; the server crashes while it runs and is down for longer.
	var cmd e2eCommand
	s.must(201, "POST", "/devices/"+cfg.DeviceID+"/commands", map[string]any{"type": "run_script", "timeoutSeconds": 600,
		"payload": map[string]any{"language": "sh", "script": fmt.Sprintf("sleep %d; echo survived; exit 7", scriptSeconds)}}, &cmd)
	waitFor(t, 10*time.Second, "the script to start", func() bool {
		var c e2eCommand
		s.must(200, "GET", "/devices/"+cfg.DeviceID+"/commands/"+cmd.ID, nil, &c)
		return c.Status == "sent"
	})
	time.Sleep(time.Second)
	down := time.Now()
	s.kill()
	time.Sleep(outage)
	up := time.Now()
	s.start()
	// After a long outage the reconnection backoff may have grown to its 30 s cap.
	waitFor(t, 35*time.Second, "the agent back after the outage", func() bool { return connections() >= 2 })
	cmd = s.waitCommand(cfg.DeviceID, cmd.ID)
	if cmd.ExitCode == nil || *cmd.ExitCode != 7 || cmd.Stdout == nil || strings.TrimSpace(*cmd.Stdout) != "survived" {
		t.Fatalf("the result of the script the outage interrupted = %+v", cmd)
	}
	// The samples taken while the server was down arrive, filed at their own time.
	waitFor(t, 40*time.Second, "the samples of the outage", func() bool {
		var m struct {
			Data []struct {
				RecordedAt time.Time `json:"recordedAt"`
			} `json:"data"`
		}
		s.must(200, "GET", "/devices/"+cfg.DeviceID+"/metrics", nil, &m)
		during := 0
		for _, p := range m.Data {
			if p.RecordedAt.After(down) && p.RecordedAt.Before(up) {
				during++
			}
		}
		return during >= 2
	})

	// A plain restart is absorbed within seconds.
	before := connections()
	s.kill()
	s.start()
	waitFor(t, 10*time.Second, "the agent back within 10 s of a restart", func() bool { return connections() > before })

	// A proxy answering 401 for a while does not retire the agent.
	refusing.Store(true)
	s.kill()
	s.start()
	waitFor(t, 30*time.Second, "the agent to meet the refusal", func() bool {
		return strings.Contains(logs.String(), "the server refuses this agent's token")
	})
	time.Sleep(refusal)
	refusing.Store(false)
	if b, _ := os.ReadFile(cfgPath); strings.Contains(string(b), "decommissioned") {
		t.Fatal("a 401 retired the agent")
	}
	before = connections()
	waitFor(t, 30*time.Second, "the agent back after the refusals", func() bool { return connections() > before })
	s.must(201, "POST", "/devices/"+cfg.DeviceID+"/commands", map[string]any{"type": "run_script",
		"payload": map[string]any{"language": "sh", "script": "echo still-here"}}, &cmd)
	if cmd = s.waitCommand(cfg.DeviceID, cmd.ID); cmd.Status != "completed" || strings.TrimSpace(*cmd.Stdout) != "still-here" {
		t.Fatalf("a command after the refusals = %+v", cmd)
	}

	// A real decommissioning ends the agent, with its exit status, and is recorded.
	s.must(204, "DELETE", "/devices/"+cfg.DeviceID, nil, nil)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("the decommissioned agent exited with %v; want status 3", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the decommissioned agent did not exit")
	}
	if b, _ := os.ReadFile(cfgPath); !strings.Contains(string(b), `"decommissioned": true`) {
		t.Fatalf("the decommissioning was not recorded: %s", b)
	}
	// Its token now earns the authenticated answer that names the device.
	req, _ := http.NewRequest("POST", s.base+"/api/v1/agents/"+cfg.DeviceID+"/heartbeat", strings.NewReader(`{"agentVersion":"x","uptimeSeconds":1,"pendingReboot":false}`))
	var full struct {
		AuthToken string `json:"authToken"`
	}
	_ = json.Unmarshal(b, &full)
	req.Header.Set("Authorization", "Bearer "+full.AuthToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Details []struct{ Field, Message string }
		} `json:"error"`
	}
	_ = json.NewDecoder(res.Body).Decode(&env)
	if res.StatusCode != 403 || env.Error.Code != "DEVICE_DECOMMISSIONED" || len(env.Error.Details) != 1 ||
		env.Error.Details[0].Message != cfg.DeviceID {
		t.Fatalf("heartbeat of a decommissioned device = %d %+v", res.StatusCode, env)
	}
}
