//go:build unix

package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gale/internal/wire/agentproto"
)

// A main agent that fails at start every time is given up on after a few tries, the watchdog
// says why on its heartbeat, and a repaired configuration brings it back.
func TestWatchdogGivesUpOnAnAgentThatFailsAtStartAndSaysWhy(t *testing.T) {
	var mu sync.Mutex
	var beats []agentproto.Heartbeat
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var hb agentproto.Heartbeat
		if json.NewDecoder(r.Body).Decode(&hb) == nil {
			mu.Lock()
			beats = append(beats, hb)
			mu.Unlock()
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "agent.json")
	cfg := Config{Server: srv.URL, DeviceID: "d1", AuthToken: "gale_at_x", WatchdogToken: "gale_wt_y",
		Settings: agentproto.Config{HeartbeatIntervalSeconds: 1}}
	if err := SaveConfig(cfgPath, cfg); err != nil {
		t.Fatal(err)
	}
	starts := filepath.Join(dir, "starts")
	count := func() int {
		b, _ := os.ReadFile(starts)
		return len(b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = Watchdog(ctx, WatchdogOptions{ConfigPath: cfgPath, Executable: "/bin/sh", restartDelay: 10 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Args:   []string{"-c", "printf x >> " + starts + "; echo 'starting' >&2; echo 'reading the configuration: unexpected end of JSON input' >&2; exit 1"}})
	}()
	defer func() { cancel(); <-done }()

	gaveUp := func() *agentproto.Heartbeat {
		mu.Lock()
		defer mu.Unlock()
		for i := len(beats) - 1; i >= 0; i-- {
			if beats[i].WatchdogState == watchdogGaveUp {
				return &beats[i]
			}
		}
		return nil
	}
	waitFor(t, 10*time.Second, func() bool { return gaveUp() != nil })
	hb := gaveUp()
	if !strings.Contains(hb.WatchdogReason, "5 times in a row") || !strings.Contains(hb.WatchdogReason, "unexpected end of JSON input") ||
		!strings.Contains(hb.WatchdogReason, "exit status 1") || *hb.MainAgentAlive {
		t.Fatalf("gave-up heartbeat = %+v", hb)
	}
	if n := count(); n != maxStartupFailures {
		t.Fatalf("started %d times, want %d", n, maxStartupFailures)
	}
	time.Sleep(500 * time.Millisecond)
	if n := count(); n != maxStartupFailures {
		t.Fatalf("restarted after giving up: %d starts", n)
	}
	cfg.Settings.HeartbeatIntervalSeconds = 2
	if err := SaveConfig(cfgPath, cfg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return count() > maxStartupFailures })
}

func TestASecondWatchdogStandsByWhileTheFirstHoldsTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), WatchdogLockFile)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	unlock, err := lockWatchdog(context.Background(), path, log)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file = %q, want this PID", b)
	}
	// flock locks belong to the open file, so a second open in this process contends as a
	// second watchdog would.
	got := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		second, err := lockWatchdog(ctx, path, log)
		if err == nil {
			defer second()
		}
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("the second watchdog took a held lock")
	case <-time.After(1500 * time.Millisecond):
	}
	unlock()
	waitFor(t, 5*time.Second, func() bool {
		select {
		case <-got:
			return true
		default:
			return false
		}
	})
}

// A main agent whose watchdog died (its liveness pipe broke) starts a new watchdog and stops.
func TestAMainAgentReplacesItsDeadWatchdog(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "watchdog-started")
	defer func(orig func(string, string) *exec.Cmd) { watchdogCommand = orig }(watchdogCommand)
	watchdogCommand = func(_, configPath string) *exec.Cmd {
		return exec.Command("/bin/sh", "-c", "echo \"$1\" > "+started, "sh", configPath)
	}
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	rd.Close() // the watchdog died
	// liveness takes the descriptor over and closes it.
	fd, err := syscall.Dup(int(wr.Fd()))
	wr.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(LivenessFDEnv, strconv.Itoa(fd))
	r := &runner{opts: RunOptions{ConfigPath: filepath.Join(dir, "agent.json")}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	r.liveness(ctx, stop)
	if ctx.Err() == nil {
		t.Fatal("the main agent did not stop")
	}
	waitFor(t, 5*time.Second, func() bool {
		b, _ := os.ReadFile(started)
		return strings.TrimSpace(string(b)) == filepath.Join(dir, "agent.json")
	})
}

func waitFor(t *testing.T, within time.Duration, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Without a liveness pipe (Windows) the main agent waits on its watchdog's process, and
// replaces the watchdog when it ends.
func TestAMainAgentWithoutAPipeReplacesItsDeadWatchdog(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "watchdog-started")
	defer func(orig func(string, string) *exec.Cmd) { watchdogCommand = orig }(watchdogCommand)
	watchdogCommand = func(_, configPath string) *exec.Cmd {
		return exec.Command("/bin/sh", "-c", "echo \"$1\" > "+started, "sh", configPath)
	}
	watchdog := exec.Command("/bin/sh", "-c", "sleep 0.3")
	if err := watchdog.Start(); err != nil {
		t.Fatal(err)
	}
	t.Setenv(WatchdogPIDEnv, strconv.Itoa(watchdog.Process.Pid))
	r := &runner{opts: RunOptions{ConfigPath: filepath.Join(dir, "agent.json")}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	r.liveness(ctx, stop)
	if ctx.Err() == nil {
		t.Fatal("the main agent did not stop when its watchdog ended")
	}
	waitFor(t, 5*time.Second, func() bool {
		b, _ := os.ReadFile(started)
		return strings.TrimSpace(string(b)) == filepath.Join(dir, "agent.json")
	})
}
