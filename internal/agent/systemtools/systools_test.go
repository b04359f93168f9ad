package systemtools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
)

// call runs one method through the capability registry, marshaling args unless they are
// already raw JSON.
func call(t *testing.T, tools *Tools, method string, args any) agentproto.CallResult {
	t.Helper()
	var raw json.RawMessage
	switch a := args.(type) {
	case nil:
	case json.RawMessage:
		raw = a
	default:
		var err error
		if raw, err = json.Marshal(a); err != nil {
			t.Fatal(err)
		}
	}
	reg := capability.New()
	tools.Register(reg)
	res := reg.Answer(context.Background(), agentproto.Call{ID: "c1", Method: method, Args: raw})
	if res.CallID != "c1" {
		t.Fatalf("callId = %q", res.CallID)
	}
	return res
}

// result decodes a successful call's result.
func result[T any](t *testing.T, res agentproto.CallResult) T {
	t.Helper()
	var v T
	if res.Error != nil {
		t.Fatalf("call failed: %s: %s", res.Error.Code, res.Error.Message)
	}
	if err := json.Unmarshal(res.Result, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// wantCode checks that a call failed with code.
func wantCode(t *testing.T, res agentproto.CallResult, code string) *agentproto.CallError {
	t.Helper()
	if res.Error == nil {
		t.Fatalf("want %s, got result %s", code, res.Result)
	}
	if res.Error.Code != code {
		t.Fatalf("want %s, got %s: %s", code, res.Error.Code, res.Error.Message)
	}
	if res.Result != nil {
		t.Fatalf("error with a result: %s", res.Result)
	}
	return res.Error
}

func TestUnknownMethod(t *testing.T) {
	wantCode(t, call(t, New(Options{}), "processes.explode", nil), agentproto.ErrUnknownMethod)
}

func TestMalformedArgs(t *testing.T) {
	tools := New(Options{})
	wantCode(t, call(t, tools, agentproto.MethodProcessGet, json.RawMessage(`{"pid":`)), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodProcessGet, json.RawMessage(`{"pid":"one"}`)), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodFileRead, nil), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodProcessGet, json.RawMessage(`{}`)), agentproto.ErrInvalid)
}

func TestRegistryNotSupported(t *testing.T) {
	tools := New(Options{})
	for _, m := range []string{
		agentproto.MethodRegistryKeys, agentproto.MethodRegistryValues, agentproto.MethodRegistryValueGet,
		agentproto.MethodRegistryValueSet, agentproto.MethodRegistryValueDelete,
		agentproto.MethodRegistryKeyCreate, agentproto.MethodRegistryKeyDelete,
	} {
		e := wantCode(t, call(t, tools, m, agentproto.RegistryArgs{Hive: "HKLM", Path: `SOFTWARE\Gale`}), agentproto.ErrNotSupported)
		if runtime.GOOS != "windows" && e.Message != "the registry exists only on Windows" {
			t.Errorf("%s: message %q", m, e.Message)
		}
	}
}

func TestHandleRecoversPanic(t *testing.T) {
	tools := &Tools{} // no system: a services call dereferences nil
	res := call(t, tools, agentproto.MethodServiceList, nil)
	if e := wantCode(t, res, agentproto.ErrFailed); !strings.Contains(e.Message, "internal error") {
		t.Errorf("message %q", e.Message)
	}
}

func TestProcessListHasSelf(t *testing.T) {
	procs := result[[]agentproto.Process](t, call(t, New(Options{}), agentproto.MethodProcessList, nil))
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSuffix(filepath.Base(exe), ".exe")
	for _, p := range procs {
		if p.PID != int32(os.Getpid()) {
			continue
		}
		// Linux keeps only the first 15 bytes of a process name.
		if p.Name == "" || !strings.HasPrefix(base, strings.TrimSuffix(p.Name, ".exe")) {
			t.Errorf("name %q, want a prefix of %q", p.Name, base)
		}
		if p.PPID != int32(os.Getppid()) {
			t.Errorf("ppid %d, want %d", p.PPID, os.Getppid())
		}
		if p.MemoryBytes == 0 || p.StartedAt.IsZero() || p.Threads == 0 {
			t.Errorf("incomplete: %+v", p)
		}
		return
	}
	t.Fatalf("own pid %d not among %d processes", os.Getpid(), len(procs))
}

func TestProcessGet(t *testing.T) {
	tools := New(Options{})
	p := result[agentproto.Process](t, call(t, tools, agentproto.MethodProcessGet, agentproto.PIDArgs{PID: int32(os.Getpid())}))
	if p.PID != int32(os.Getpid()) || p.Name == "" {
		t.Errorf("got %+v", p)
	}
	// Above the largest pid Linux allows (2^22).
	wantCode(t, call(t, tools, agentproto.MethodProcessGet, agentproto.PIDArgs{PID: 1 << 30}), agentproto.ErrNotFound)
}

func TestKillRefusals(t *testing.T) {
	tools := New(Options{})
	wantCode(t, call(t, tools, agentproto.MethodProcessKill, agentproto.KillArgs{PID: 1}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodProcessKill, agentproto.KillArgs{PID: 0}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodProcessKill, agentproto.KillArgs{PID: int32(os.Getpid())}), agentproto.ErrInvalid)
	wantCode(t, call(t, tools, agentproto.MethodProcessKill, agentproto.KillArgs{PID: 1 << 30}), agentproto.ErrNotFound)
	wantCode(t, call(t, tools, agentproto.MethodProcessKill, agentproto.KillArgs{PID: 1 << 30, Signal: "HUP"}), agentproto.ErrInvalid)
}

func TestKillChild(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs sleep(1)")
	}
	for _, tc := range []struct {
		signal string
		want   syscall.Signal
	}{{"", syscall.SIGTERM}, {"KILL", syscall.SIGKILL}} {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()

		res := call(t, New(Options{}), agentproto.MethodProcessKill, agentproto.KillArgs{PID: int32(cmd.Process.Pid), Signal: tc.signal})
		if d := result[agentproto.Done](t, res); !d.OK {
			t.Fatalf("done = %+v", d)
		}
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("wait: %v", err)
			}
			if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != tc.want {
				t.Errorf("signal %q: child ended with %v, want %v", tc.signal, ws, tc.want)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("signal %q: child still running", tc.signal)
		}
	}
}

// TestHelperSleeper is not a test: run with GALE_SYSTOOLS_SLEEPER=1 it is a process of the
// test's own executable that waits to be killed, as the agent's watchdog would.
func TestHelperSleeper(t *testing.T) {
	if os.Getenv("GALE_SYSTOOLS_SLEEPER") != "1" {
		t.Skip("a helper process")
	}
	time.Sleep(time.Minute)
}

func TestKillRefusesAWatchdogTheAgentStarted(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestHelperSleeper$")
	cmd.Env = append(os.Environ(), "GALE_SYSTOOLS_SLEEPER=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	res := call(t, New(Options{}), agentproto.MethodProcessKill, agentproto.KillArgs{PID: int32(cmd.Process.Pid), Signal: "KILL"})
	if e := wantCode(t, res, agentproto.ErrInvalid); !strings.Contains(e.Message, "watchdog") {
		t.Fatalf("refusal = %s", e.Message)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the watchdog was signalled: %v", err)
	}
}

func TestKillRefusesTheWatchdogThatStartedTheAgent(t *testing.T) {
	const watchdog, stranger = 1<<30 - 1, 1<<30 - 2
	tools := New(Options{})
	tools.selfExe = "/opt/gale/gale-agent"
	tools.parentPID = func() int32 { return watchdog }
	tools.procInfo = func(_ context.Context, pid int32) (int32, string, error) {
		switch pid {
		case watchdog:
			// Upgraded on disk since it started.
			return 1, "/opt/gale/gale-agent (deleted)", nil
		case stranger:
			// Another copy of the agent's executable that is neither parent nor child.
			return 1, "/opt/gale/gale-agent", nil
		}
		return 0, "", os.ErrNotExist
	}
	if e := wantCode(t, call(t, tools, agentproto.MethodProcessKill, agentproto.KillArgs{PID: watchdog}), agentproto.ErrInvalid); !strings.Contains(e.Message, "watchdog") {
		t.Fatalf("refusal = %s", e.Message)
	}
	// Not refused: the kill goes ahead and finds no such process.
	wantCode(t, call(t, tools, agentproto.MethodProcessKill, agentproto.KillArgs{PID: stranger}), agentproto.ErrNotFound)
	tools.parentPID = func() int32 { return 1 } // the watchdog died; its PID may be anyone's now
	wantCode(t, call(t, tools, agentproto.MethodProcessKill, agentproto.KillArgs{PID: watchdog}), agentproto.ErrNotFound)
}
