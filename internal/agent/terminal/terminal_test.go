//go:build !windows

package terminal

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/streams"
)

// openTerminal serves the terminal stream on one end of an in-memory connection and opens
// it from the other.
func openTerminal(t *testing.T, args agentproto.TerminalArgs) *streams.Stream {
	t.Helper()
	reg := capability.New()
	Register(reg)
	var server, agent *streams.Session
	server = streams.NewSession(func(_ context.Context, f []byte) error { return agent.Receive(bytes.Clone(f)) }, streams.Options{Initiator: true})
	agent = streams.NewSession(func(_ context.Context, f []byte) error { return server.Receive(bytes.Clone(f)) }, streams.Options{Accept: reg.AcceptStream})
	t.Cleanup(func() { server.Close(nil); agent.Close(nil) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	st, err := server.Open(ctx, agentproto.StreamTerminal, args)
	if err != nil {
		t.Fatal(err)
	}
	_ = st.SetDeadline(time.Now().Add(10 * time.Second))
	return st
}

// readUntil reads data frames until the output holds want.
func readUntil(t *testing.T, st *streams.Stream, want string) string {
	t.Helper()
	var out strings.Builder
	for !strings.Contains(out.String(), want) {
		typ, p, err := agentproto.ReadTermFrame(st, nil)
		if err != nil {
			t.Fatalf("waiting for %q: %v; got %q", want, err, out.String())
		}
		if typ == agentproto.TermData {
			out.Write(p)
		}
	}
	return out.String()
}

func TestTerminalRunsAShellAndKillsItsGroupAtTheEnd(t *testing.T) {
	st := openTerminal(t, agentproto.TerminalArgs{Cols: 100, Rows: 30})
	typ, shell, err := agentproto.ReadTermFrame(st, nil)
	if err != nil || typ != agentproto.TermStarted || len(shell) == 0 {
		t.Fatalf("first frame = %d %q %v, want the shell started", typ, shell, err)
	}
	// A background child in the shell's group reports its PID; it must not outlive the stream.
	if err := agentproto.WriteTermData(st, []byte("sleep 300 & echo PID=$!; stty size; echo T=$TERM\n")); err != nil {
		t.Fatal(err)
	}
	out := readUntil(t, st, "T=xterm-256color")
	if !strings.Contains(out, "30 100") {
		t.Fatalf("stty size before a resize: %q", out)
	}
	i := strings.LastIndex(out, "PID=")
	pid, err := strconv.Atoi(strings.TrimSpace(strings.Fields(out[i+4:])[0]))
	if err != nil {
		t.Fatalf("no PID in %q", out)
	}
	if err := agentproto.WriteTermFrame(st, agentproto.TermResize, agentproto.ResizePayload(120, 40)); err != nil {
		t.Fatal(err)
	}
	if err := agentproto.WriteTermData(st, []byte("stty size\n")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, st, "40 120")

	st.Close()
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the shell's child %d outlived the terminal", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestShellExitEndsTheStream(t *testing.T) {
	st := openTerminal(t, agentproto.TerminalArgs{})
	if typ, _, err := agentproto.ReadTermFrame(st, nil); err != nil || typ != agentproto.TermStarted {
		t.Fatalf("first frame = %d %v", typ, err)
	}
	if err := agentproto.WriteTermData(st, []byte("exit\n")); err != nil {
		t.Fatal(err)
	}
	for {
		_, _, err := agentproto.ReadTermFrame(st, nil)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("after exit: %v, want io.EOF", err)
		}
	}
}

func TestLoginShellIsExecutable(t *testing.T) {
	if info, err := os.Stat(loginShell()); err != nil || info.Mode()&0o111 == 0 {
		t.Fatalf("login shell %s: %v", loginShell(), err)
	}
}
