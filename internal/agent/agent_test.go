package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gale/internal/wire/agentproto"
)

func TestSaveConfigIsPrivateAndLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nested", "agent.json")
	want := Config{Server: "https://rmm.example", DeviceID: "d1", AuthToken: "gale_at_x", WatchdogToken: "gale_wt_y"}
	if err := SaveConfig(path, want); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config mode = %v (%v), want 0600", st.Mode().Perm(), err)
	}
	got, err := LoadConfig(path)
	if err != nil || got.DeviceID != "d1" || got.AuthToken != "gale_at_x" {
		t.Fatalf("loaded %+v, %v", got, err)
	}
	if err := os.WriteFile(path, []byte(`{"server":""}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), "enroll again") {
		t.Fatalf("an incomplete config loaded: %v", err)
	}
}

func TestEnrollDoesNothingWhenAlreadyEnrolled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.json")
	valid := Config{Server: "http://127.0.0.1:1", DeviceID: "d1", AuthToken: "gale_at_x"}
	if err := SaveConfig(path, valid); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	// The server address is unreachable: enroll must not even try it.
	_, err := Enroll(context.Background(), EnrollOptions{Key: "k", Server: "http://127.0.0.1:1", ConfigPath: path})
	if !errors.Is(err, ErrAlreadyEnrolled) {
		t.Fatalf("enroll over an existing config = %v, want ErrAlreadyEnrolled", err)
	}
	if b, _ := os.ReadFile(path); string(b) != string(before) {
		t.Fatalf("the config was rewritten: %s", b)
	}
	// A damaged configuration and a decommissioned device's are enrolled anew (here the
	// unreachable server answers the attempt).
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	var reason string
	_, err = Enroll(context.Background(), EnrollOptions{Key: "k", Server: "http://127.0.0.1:1", ConfigPath: path,
		Replaced: func(r string) { reason = r }})
	if err == nil || errors.Is(err, ErrAlreadyEnrolled) || !strings.Contains(reason, "cannot be used") {
		t.Fatalf("enroll over a damaged config = %v (%q); want an attempt to enroll", err, reason)
	}
	valid.Decommissioned = true
	if err := SaveConfig(path, valid); err != nil {
		t.Fatal(err)
	}
	if _, err = Enroll(context.Background(), EnrollOptions{Key: "k", Server: "http://127.0.0.1:1", ConfigPath: path}); errors.Is(err, ErrAlreadyEnrolled) {
		t.Fatal("enroll over a decommissioned device's config did nothing")
	}
	_, err = Enroll(context.Background(), EnrollOptions{Key: "k", Server: "rmm.example", ConfigPath: filepath.Join(t.TempDir(), "a.json")})
	if err == nil || !strings.Contains(err.Error(), "--server") {
		t.Fatalf("a server address without scheme = %v", err)
	}
}

func TestWatchdogRestartsAnAgentThatExitsOrHangs(t *testing.T) {
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	cfg := filepath.Join(dir, "agent.json")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	count := func() int {
		b, _ := os.ReadFile(starts)
		return strings.Count(string(b), "x")
	}
	run := func(script string, unresponsive time.Duration, want int) {
		t.Helper()
		_ = os.Remove(starts)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = Watchdog(ctx, WatchdogOptions{ConfigPath: cfg, Executable: "/bin/sh", Args: []string{"-c", script},
				Logger: logger, Unresponsive: unresponsive})
		}()
		deadline := time.Now().Add(20 * time.Second)
		for count() < want && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
		<-done
		if got := count(); got < want {
			t.Fatalf("%q started %d times, want at least %d", script, got, want)
		}
	}
	// Exits at once: restarted.
	run("printf x >> "+starts+"; exit 1", time.Minute, 3)
	// Never beats (hangs): killed after 1 s and restarted.
	run("printf x >> "+starts+"; sleep 60", time.Second, 2)
	// Beats through the liveness descriptor: never restarted.
	_ = os.Remove(starts)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = Watchdog(ctx, WatchdogOptions{ConfigPath: cfg, Executable: "/bin/sh", Logger: logger, Unresponsive: time.Second,
		Args: []string{"-c", "printf x >> " + starts + "; while true; do printf . >&3; sleep 0.2; done"}})
	if got := count(); got != 1 {
		t.Fatalf("a healthy agent was started %d times, want 1", got)
	}
}

// The server's intervals are kept in the configuration, for the next start and the watchdog.
func TestServerSettingsAreSavedInTheConfiguration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.json")
	cfg := Config{Server: "http://127.0.0.1:1", DeviceID: "d1", AuthToken: "gale_at_x", Settings: agentproto.Config{HeartbeatIntervalSeconds: 60}}
	if err := SaveConfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	r := &runner{opts: RunOptions{ConfigPath: path}, cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	want := agentproto.Config{HeartbeatIntervalSeconds: 15, MetricsCollectionIntervalSeconds: 30, InventoryIntervalMinutes: 120}
	r.applyConfig(want)
	got, err := LoadConfig(path)
	if err != nil || got.Settings != want || got.AuthToken != "gale_at_x" {
		t.Fatalf("saved settings = %+v (%v), want %+v", got.Settings, err, want)
	}
	if hb, m, inv := r.intervals(); hb != 15*time.Second || m != 30*time.Second || inv != 2*time.Hour {
		t.Fatalf("intervals = %s %s %s", hb, m, inv)
	}
	if every := heartbeatEvery(got); every != 15*time.Second {
		t.Fatalf("the watchdog beats every %s, want the server's 15s", every)
	}
}
