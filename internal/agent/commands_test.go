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
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gale/internal/agent/capability"
	"gale/internal/agent/script"
	"gale/internal/wire/agentproto"
)

// testAgent is a runner whose results go to a fake server, run without its connection loops.
type testAgent struct {
	r       *runner
	mu      sync.Mutex
	results map[string]agentproto.CommandResult
}

func newTestAgent(t *testing.T, configPath string, register func(*capability.Registry)) *testAgent {
	t.Helper()
	a := &testAgent{results: map[string]agentproto.CommandResult{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var res agentproto.CommandResult
		if json.NewDecoder(req.Body).Decode(&res) == nil && res.CommandID != "" {
			a.mu.Lock()
			a.results[res.CommandID] = res
			a.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	cmds, err := openCommands(CommandsPath(configPath))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancelCause(context.Background())
	t.Cleanup(func() { stop(nil) })
	caps := capability.New()
	if register != nil {
		register(caps)
	}
	a.r = &runner{opts: RunOptions{ConfigPath: configPath}, cfg: Config{Server: srv.URL, DeviceID: "d1", AuthToken: "gale_at_x"},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), http: newClient(srv.URL, "gale_at_x"), caps: caps, cmds: cmds,
		ctx: ctx, stop: stop}
	caps.Command(agentproto.CommandCancel, a.r.cancelCommand)
	return a
}

func (a *testAgent) result(id string) (agentproto.CommandResult, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	res, ok := a.results[id]
	return res, ok
}

// cancel runs a cancel_command for id and returns its outcome.
func (a *testAgent) cancel(id string) agentproto.CommandResult {
	raw, _ := json.Marshal(agentproto.CancelCommand{CommandID: id})
	return a.r.runCommand(a.r.ctx, agentproto.Command{ID: "cancel-" + id, Type: agentproto.CommandCancel, Payload: raw, TimeoutSeconds: 60})
}

func (a *testAgent) wait(t *testing.T, id string) agentproto.CommandResult {
	t.Helper()
	waitFor(t, 10*time.Second, func() bool { _, ok := a.result(id); return ok })
	res, _ := a.result(id)
	return res
}

// A running script is stopped by a cancellation: the whole process tree dies and the command
// reports cancelled.
func TestACancelledScriptStopsWithItsChildrenAndReportsCancelled(t *testing.T) {
	dir := t.TempDir()
	a := newTestAgent(t, filepath.Join(dir, "agent.json"), script.Register)
	pidFile := filepath.Join(dir, "child.pid")
	payload, _ := json.Marshal(agentproto.RunScript{Language: agentproto.LanguageSh, MaxOutputBytes: 1024,
		Script: "sleep 60 & echo $! > " + pidFile + "; wait"})
	go a.r.execute(agentproto.Command{ID: "s1", Type: agentproto.CommandRunScript, Payload: payload, TimeoutSeconds: 120})
	var child int
	waitFor(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return child > 0
	})
	if res := a.cancel("s1"); res.Status != agentproto.ResultCompleted || !strings.Contains(string(res.Result), "while running") {
		t.Fatalf("cancel of a running script = %+v", res)
	}
	if res := a.wait(t, "s1"); res.Status != agentproto.ResultCancelled {
		t.Fatalf("cancelled script reported %+v, want status cancelled", res)
	}
	waitFor(t, 10*time.Second, func() bool { return syscall.Kill(child, 0) != nil })
	if res := a.cancel("s1"); res.Status != agentproto.ResultFailed || !strings.Contains(res.Error, "too late") {
		t.Fatalf("cancel of an ended command = %+v, want failed too late", res)
	}
}

// A cancellation that overtakes its command is kept on disk: the command is refused when it
// arrives, even after an agent restart; an ended command stays too late to cancel after one.
func TestACancellationBeforeItsCommandOutlivesARestart(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.json")
	ran := make(chan string, 4)
	register := func(reg *capability.Registry) {
		reg.Command("work", func(_ context.Context, c agentproto.Command) agentproto.CommandResult {
			ran <- c.ID
			return agentproto.CommandResult{Status: agentproto.ResultCompleted}
		})
	}
	first := newTestAgent(t, cfg, register)
	if res := first.cancel("early"); res.Status != agentproto.ResultCompleted || !strings.Contains(string(res.Result), "before it arrived") {
		t.Fatalf("cancel before arrival = %+v", res)
	}
	first.r.execute(agentproto.Command{ID: "done", Type: "work", TimeoutSeconds: 10})
	if id := <-ran; id != "done" {
		t.Fatalf("ran %s", id)
	}

	second := newTestAgent(t, cfg, register) // the agent restarted
	second.r.execute(agentproto.Command{ID: "early", Type: "work", TimeoutSeconds: 10})
	if res := second.wait(t, "early"); res.Status != agentproto.ResultCancelled {
		t.Fatalf("a command cancelled before it arrived reported %+v, want cancelled", res)
	}
	select {
	case id := <-ran:
		t.Fatalf("the cancelled command %s ran", id)
	default:
	}
	if res := second.cancel("done"); res.Status != agentproto.ResultFailed || !strings.Contains(res.Error, "too late") {
		t.Fatalf("cancel of a command ended before the restart = %+v", res)
	}
	// Refused, the command has ended: cancelling it again is too late.
	if res := second.cancel("early"); res.Status != agentproto.ResultFailed || !strings.Contains(res.Error, "too late") {
		t.Fatalf("cancel of a refused command = %+v", res)
	}
}

// A command a capability holds pending (a scheduled reboot) is withdrawn by that capability.
func TestACancelOfAPendingCommandAsksItsCapability(t *testing.T) {
	var withdrawn []string
	a := newTestAgent(t, filepath.Join(t.TempDir(), "agent.json"), func(reg *capability.Registry) {
		reg.Command("later", func(context.Context, agentproto.Command) agentproto.CommandResult {
			return agentproto.CommandResult{Status: capability.ResultPending}
		})
		reg.OnCancel(func(id string) (agentproto.CommandResult, bool) {
			withdrawn = append(withdrawn, id)
			return capability.Cancelled(id, "while scheduled"), id == "p1"
		})
	})
	a.r.execute(agentproto.Command{ID: "p1", Type: "later", TimeoutSeconds: 10})
	if _, ok := a.result("p1"); ok {
		t.Fatal("a pending command was reported")
	}
	if res := a.cancel("p1"); res.Status != agentproto.ResultCompleted || !strings.Contains(string(res.Result), "while scheduled") {
		t.Fatalf("cancel of a pending command = %+v", res)
	}
	if len(withdrawn) != 1 || withdrawn[0] != "p1" {
		t.Fatalf("withdrawn %v", withdrawn)
	}
}

func TestTheCommandsFileIsBounded(t *testing.T) {
	path := CommandsPath(filepath.Join(t.TempDir(), "agent.json"))
	c, err := openCommands(path)
	if err != nil {
		t.Fatal(err)
	}
	c.file.Ended = append(c.file.Ended, remembered{CommandID: "old", At: time.Now().Add(-2 * commandMemory)})
	for i := range maxRemembered + 10 {
		if err := c.ended("c" + strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	c, err = openCommands(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.file.Ended) != maxRemembered || find(c.file.Ended, "old") >= 0 || find(c.file.Ended, "c9") >= 0 ||
		find(c.file.Ended, "c"+strconv.Itoa(maxRemembered+9)) < 0 {
		t.Fatalf("kept %d entries (old kept: %v)", len(c.file.Ended), find(c.file.Ended, "old") >= 0)
	}
}
