package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// connectionLog is an agent's log that notes when the agent connected to the server.
type connectionLog struct {
	mu      sync.Mutex
	partial []byte
	log     bytes.Buffer
	at      []time.Time
}

func (l *connectionLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.log.Write(p)
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		if bytes.Contains(l.partial[:i], []byte("connected to the server")) {
			l.at = append(l.at, time.Now())
		}
		l.partial = l.partial[i+1:]
	}
}

func (l *connectionLog) connections() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.at)
}

// TestAFleetIsBackWithinTenSecondsOfAServerRestart runs a fleet of real agents (20; 100 with
// GALE_E2E_LONG=1), restarts the server, and checks that every agent is connected again within
// 10 s of the server being back, and that the fleet does not come back at a single instant.
func TestAFleetIsBackWithinTenSecondsOfAServerRestart(t *testing.T) {
	t.Parallel()
	fleet := 20
	if os.Getenv("GALE_E2E_LONG") != "" {
		fleet = 100
	}
	s := startStoppableServer(t, "AGENT_ENROLL_RATE_PER_MINUTE=0")
	ten := s.newTenant("Fleet", fleet)
	dir := t.TempDir()
	logs := make([]*connectionLog, fleet)
	var wg sync.WaitGroup
	for i := range fleet {
		cfgPath := filepath.Join(dir, "agent-"+strconv.Itoa(i), "agent.json")
		if out, err := exec.Command(agentBinary(t), "enroll", ten.Key, "--server", s.base, "--enrollment-secret",
			ten.EnrollmentSecret, "--config", cfgPath, "--quiet").CombinedOutput(); err != nil {
			t.Fatalf("enroll agent %d: %v: %s", i, err, out)
		}
		logs[i] = &connectionLog{}
		agent := exec.Command(agentBinary(t), "run", "--no-watchdog", "--config", cfgPath)
		agent.Stdout, agent.Stderr = logs[i], logs[i]
		if err := agent.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = agent.Wait()
		}()
		t.Cleanup(func() { _ = agent.Process.Signal(syscall.SIGTERM) })
	}
	t.Cleanup(func() {
		stopped := make(chan struct{})
		go func() { wg.Wait(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(20 * time.Second):
		}
		if t.Failed() {
			for i, l := range logs {
				l.mu.Lock()
				t.Logf("agent %d log:\n%s", i, l.log.String())
				l.mu.Unlock()
			}
		}
	})
	connected := func(n int) int {
		count := 0
		for _, l := range logs {
			if len(l.connections()) >= n {
				count++
			}
		}
		return count
	}
	waitFor(t, 60*time.Second, "the fleet connected", func() bool { return connected(1) == fleet })
	restarted := time.Now()
	s.kill()
	s.start()
	ready := time.Now()
	waitFor(t, 10*time.Second, fmt.Sprintf("all %d agents back within 10 s of the restart", fleet), func() bool {
		return connected(2) == fleet
	})
	var first, last time.Time
	for _, l := range logs {
		at := l.connections()[1]
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	t.Logf("%d agents back between %s and %s after the restart began (the server was ready and logged in to after %s)", fleet,
		first.Sub(restarted).Round(time.Millisecond), last.Sub(restarted).Round(time.Millisecond), ready.Sub(restarted).Round(time.Millisecond))
	if !last.After(first) {
		t.Fatalf("the whole fleet reconnected at one instant (%s): no jitter", first)
	}
}

// TestCancellingARunningScriptStopsItOnTheRealAgent cancels a script while a real agent runs
// it: the command is cancelled at once, the agent confirms, and the script's children are gone.
func TestCancellingARunningScriptStopsItOnTheRealAgent(t *testing.T) {
	s := startStoppableServer(t)
	ten := s.newTenant("Cancel", 1)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "agent.json")
	if out, err := exec.Command(agentBinary(t), "enroll", ten.Key, "--server", s.base, "--enrollment-secret",
		ten.EnrollmentSecret, "--config", cfgPath, "--quiet").CombinedOutput(); err != nil {
		t.Fatalf("enroll: %v: %s", err, out)
	}
	log := &connectionLog{}
	agent := exec.Command(agentBinary(t), "run", "--no-watchdog", "--config", cfgPath)
	agent.Stdout, agent.Stderr = log, log
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = agent.Process.Signal(syscall.SIGTERM)
		_, _ = agent.Process.Wait()
		if t.Failed() {
			log.mu.Lock()
			t.Logf("agent log:\n%s", log.log.String())
			log.mu.Unlock()
		}
	})
	waitFor(t, 30*time.Second, "the agent connected", func() bool { return len(log.connections()) > 0 })
	var cfg struct {
		DeviceID string `json:"deviceId"`
	}
	b, _ := os.ReadFile(cfgPath)
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "child.pid")
	var cmd e2eCommand
	s.must(201, "POST", "/devices/"+cfg.DeviceID+"/commands", map[string]any{"type": "run_script",
		"payload": map[string]any{"language": "sh", "script": "sleep 300 & echo $! > " + pidFile + "; wait"}}, &cmd)
	var child int
	waitFor(t, 20*time.Second, "the script's child", func() bool {
		b, _ := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(string(bytes.TrimSpace(b)))
		return child > 0
	})
	var cancelled e2eCommand
	s.must(200, "POST", "/devices/"+cfg.DeviceID+"/commands/"+cmd.ID+"/cancel", nil, &cancelled)
	if cancelled.Status != "cancelled" {
		t.Fatalf("cancelled script = %+v", cancelled)
	}
	waitFor(t, 20*time.Second, "the script's children killed", func() bool { return syscall.Kill(child, 0) != nil })
	type listed struct{ Type, Status string }
	waitFor(t, 20*time.Second, "the cancel_command completed", func() bool {
		var list struct{ Data []listed }
		s.must(200, "GET", "/devices/"+cfg.DeviceID+"/commands", nil, &list)
		return slices.Contains(list.Data, listed{Type: "cancel_command", Status: "completed"})
	})
	if c := s.waitCommand(cfg.DeviceID, cmd.ID); c.Status != "cancelled" {
		t.Fatalf("the script after the agent's report = %+v", c)
	}
}
