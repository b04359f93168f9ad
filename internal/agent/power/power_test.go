package power

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
)

// fakeSystem stands in for the machine: it records the orders and warnings instead of
// rebooting, and tells the boot time the test sets.
type fakeSystem struct {
	mu       sync.Mutex
	orders   []bool // true: reboot
	refuse   error
	warnings []string
	boot     time.Time
}

func (f *fakeSystem) run(reboot bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.orders = append(f.orders, reboot)
	return f.refuse
}

func (f *fakeSystem) warn(m string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.warnings = append(f.warnings, m)
}

func (f *fakeSystem) bootTime() (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.boot, nil
}

func (f *fakeSystem) setBoot(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.boot = t
}

func (f *fakeSystem) ordersGiven() []bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.orders)
}

func (f *fakeSystem) warned() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.warnings)
}

// agentRun is one run of the agent's power capability: stop ends it like an agent exit.
type agentRun struct {
	p       *Power
	reg     *capability.Registry
	reports chan agentproto.CommandResult
	stop    context.CancelFunc
}

func start(t *testing.T, path string, sys *fakeSystem, warnBefore time.Duration) *agentRun {
	t.Helper()
	p := New(Options{StatePath: path, Run: sys.run, Warn: sys.warn, BootTime: sys.bootTime, WarnBefore: warnBefore})
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	reg := capability.New()
	a := &agentRun{p: p, reg: reg, reports: make(chan agentproto.CommandResult, 10), stop: stop}
	p.Register(reg)
	reg.Start(ctx, capability.Host{Report: func(r agentproto.CommandResult) { a.reports <- r }})
	return a
}

func (a *agentRun) send(t *testing.T, kind, id string, payload any) agentproto.CommandResult {
	t.Helper()
	raw, _ := json.Marshal(payload)
	return a.p.schedule(context.Background(), agentproto.Command{ID: id, Type: kind, Payload: raw})
}

func (a *agentRun) report(t *testing.T) agentproto.CommandResult {
	t.Helper()
	select {
	case r := <-a.reports:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no result reported")
		return agentproto.CommandResult{}
	}
}

func (a *agentRun) noReport(t *testing.T) {
	t.Helper()
	select {
	case r := <-a.reports:
		t.Fatalf("unexpected result %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
}

func readState(t *testing.T, path string) state {
	t.Helper()
	var st state
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func statePath(t *testing.T) string { return StatePath(filepath.Join(t.TempDir(), "agent.json")) }

func TestARebootIsRecordedBeforeTheAnswerSurvivesARestartAndIsCompletedAfterTheBoot(t *testing.T) {
	path := statePath(t)
	sys := &fakeSystem{boot: time.Now().Add(-time.Hour)}
	first := start(t, path, sys, time.Minute)
	if res := first.send(t, agentproto.CommandReboot, "c1", agentproto.PowerDelay{DelaySeconds: 1}); res.Status != capability.ResultPending {
		t.Fatalf("answer = %+v, want pending", res)
	}
	st := readState(t, path)
	if len(st.Scheduled) != 1 || st.Scheduled[0].CommandID != "c1" || st.Scheduled[0].Kind != agentproto.CommandReboot ||
		st.Scheduled[0].DueAt.Sub(st.Scheduled[0].ReceivedAt) != time.Second {
		t.Fatalf("state when answered = %+v", st)
	}
	first.stop() // the agent restarts before the reboot is due

	second := start(t, path, sys, time.Minute)
	waitFor(t, "the re-armed reboot", func() bool { return len(sys.ordersGiven()) == 1 })
	time.Sleep(200 * time.Millisecond)
	if got := sys.ordersGiven(); !slices.Equal(got, []bool{true}) {
		t.Fatalf("orders = %v, want one reboot (the stopped run must not give it too)", got)
	}
	second.noReport(t) // a reboot is not done until the machine is back
	if st := readState(t, path); len(st.Scheduled) != 1 || st.Scheduled[0].IssuedAt == nil {
		t.Fatalf("state after the order = %+v", st)
	}
	second.stop()

	sys.setBoot(time.Now())
	back := start(t, path, sys, time.Minute)
	res := back.report(t)
	if res.CommandID != "c1" || res.Status != agentproto.ResultCompleted || !strings.Contains(string(res.Result), "bootedAt") {
		t.Fatalf("result after the boot = %+v", res)
	}
	waitFor(t, "the state file to go", func() bool { _, err := os.Stat(path); return errors.Is(err, os.ErrNotExist) })
}

func TestACommandDueWhileTheAgentWasDownRunsAtStart(t *testing.T) {
	path := statePath(t)
	sys := &fakeSystem{boot: time.Now().Add(-time.Hour)}
	first := start(t, path, sys, time.Minute)
	first.send(t, agentproto.CommandShutdown, "c2", agentproto.PowerDelay{DelaySeconds: 3600})
	first.stop()
	st := readState(t, path)
	st.Scheduled[0].DueAt = time.Now().Add(-time.Minute)
	first.p.mu.Lock()
	if err := first.p.save(st); err != nil {
		t.Fatal(err)
	}
	first.p.mu.Unlock()

	again := start(t, path, sys, time.Minute)
	res := again.report(t)
	if res.CommandID != "c2" || res.Status != agentproto.ResultCompleted || !slices.Equal(sys.ordersGiven(), []bool{false}) {
		t.Fatalf("result %+v, orders %v; want the shutdown given at once and completed", res, sys.ordersGiven())
	}
	waitFor(t, "the state file to go", func() bool { return len(readState(t, path).Scheduled) == 0 })
}

func TestARefusedOrderIsReportedFailed(t *testing.T) {
	path := statePath(t)
	sys := &fakeSystem{refuse: errors.New(`exec: "shutdown": executable file not found in $PATH`)}
	a := start(t, path, sys, time.Minute)
	a.send(t, agentproto.CommandReboot, "c3", nil)
	res := a.report(t)
	if res.CommandID != "c3" || res.Status != agentproto.ResultFailed || !strings.Contains(res.Error, "executable file not found") {
		t.Fatalf("result = %+v", res)
	}
	waitFor(t, "the state file to go", func() bool { return len(readState(t, path).Scheduled) == 0 })
}

func TestAnOrderTakenWithoutARebootIsReportedFailedAtTheNextStart(t *testing.T) {
	path := statePath(t)
	boot := time.Now().Add(-time.Hour)
	sys := &fakeSystem{boot: boot}
	a := start(t, path, sys, time.Minute)
	a.send(t, agentproto.CommandReboot, "c4", nil)
	waitFor(t, "the order", func() bool { return len(sys.ordersGiven()) == 1 })
	a.stop()
	again := start(t, path, sys, time.Minute)
	if res := again.report(t); res.Status != agentproto.ResultFailed || !strings.Contains(res.Error, "did not go down") {
		t.Fatalf("result = %+v", res)
	}
	if len(sys.ordersGiven()) != 1 {
		t.Fatalf("the order was given again: %v", sys.ordersGiven())
	}
}

func TestCancelWithdrawsAScheduledCommandAndTellsTheUsers(t *testing.T) {
	path := statePath(t)
	sys := &fakeSystem{}
	a := start(t, path, sys, 500*time.Millisecond)
	a.send(t, agentproto.CommandReboot, "c5", agentproto.PowerDelay{DelaySeconds: 1})
	res, held := a.reg.Withdraw("c5")
	if !held || res.Status != agentproto.ResultCompleted || !strings.Contains(string(res.Result), "while scheduled") {
		t.Fatalf("cancel = %+v, %v", res, held)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("state file after the cancel: %v", err)
	}
	time.Sleep(1500 * time.Millisecond)
	if len(sys.ordersGiven()) != 0 {
		t.Fatalf("a cancelled reboot was ordered: %v", sys.ordersGiven())
	}
	a.noReport(t)
	want := []string{"Gale: this machine will reboot in 1 second", "Gale: the scheduled reboot of this machine is cancelled."}
	got := sys.warned()
	if len(got) != 2 || !slices.ContainsFunc(got, func(m string) bool { return strings.HasPrefix(m, want[0]) }) || !slices.Contains(got, want[1]) {
		t.Fatalf("warnings = %q, want %q", got, want)
	}
	// Withdrawn, it is no longer held here: the agent decides what a second cancel means.
	if res, held := a.reg.Withdraw("c5"); held {
		t.Fatalf("second cancel = %+v, want not held", res)
	}
}

func TestACancelAfterTheOrderIsTooLate(t *testing.T) {
	path := statePath(t)
	sys := &fakeSystem{boot: time.Now().Add(-time.Hour)}
	a := start(t, path, sys, time.Minute)
	a.send(t, agentproto.CommandReboot, "c7", nil)
	waitFor(t, "the order", func() bool { return len(sys.ordersGiven()) == 1 })
	if res, held := a.reg.Withdraw("c7"); !held || res.Status != agentproto.ResultFailed || !strings.Contains(res.Error, "too late") {
		t.Fatalf("cancel after the order = %+v, %v", res, held)
	}
}

func TestUsersAreWarnedWhenScheduledAndShortlyBefore(t *testing.T) {
	path := statePath(t)
	sys := &fakeSystem{}
	a := start(t, path, sys, time.Second)
	a.send(t, agentproto.CommandShutdown, "c8", agentproto.PowerDelay{DelaySeconds: 2})
	res := a.report(t)
	if res.Status != agentproto.ResultCompleted {
		t.Fatalf("result = %+v", res)
	}
	got := sys.warned()
	if len(got) != 2 || !strings.HasPrefix(got[0], "Gale: this machine will shut down in 2 seconds, at ") ||
		!strings.HasPrefix(got[1], "Gale: this machine will shut down in 1 second, at ") {
		t.Fatalf("warnings = %q", got)
	}
}

func TestSpan(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Second: "1 second", 90 * time.Second: "1 minute 30 seconds",
		time.Hour: "60 minutes", 2 * time.Minute: "2 minutes"} {
		if got := span(d); got != want {
			t.Errorf("span(%v) = %q, want %q", d, got, want)
		}
	}
}
