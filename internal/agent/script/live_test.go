package script

import (
	"context"
	"sync"
	"testing"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
)

// A running script's output is sent in pieces while it runs: first a piece saying it started,
// then its new text, each piece at the offset the last one reached; a stream that is not text
// stops being sent, and a character cut at the end of a piece waits for its rest.
func TestRunningScriptSendsItsOutputInOrderedPieces(t *testing.T) {
	var mu sync.Mutex
	var pieces []agentproto.CommandOutput
	ctx := capability.WithOutput(context.Background(), func(o agentproto.CommandOutput) {
		mu.Lock()
		pieces = append(pieces, o)
		mu.Unlock()
	})
	res := run(ctx, "cmd-1", agentproto.RunScript{Language: "sh", MaxOutputBytes: 1 << 20,
		Script: `echo a; printf 'x\000y' >&2; sleep 1.2; printf 'b\303'; sleep 0.8; printf '\251\n'; sleep 0.8`})
	if res.Status != agentproto.ResultCompleted || res.Stdout != "a\nbé\n" {
		t.Fatalf("result %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pieces) < 3 || pieces[0].CommandID != "cmd-1" || len(pieces[0].Stdout)+len(pieces[0].Stderr) != 0 {
		t.Fatalf("pieces %+v: want a start piece then output", pieces)
	}
	var stdout []byte
	for _, p := range pieces[1:] {
		if p.StdoutOffset != int64(len(stdout)) {
			t.Fatalf("piece at offset %d after %d bytes", p.StdoutOffset, len(stdout))
		}
		if len(p.Stderr) > 0 {
			t.Fatalf("stderr with a NUL was sent live: %q", p.Stderr)
		}
		stdout = append(stdout, p.Stdout...)
	}
	if string(stdout) != "a\nbé\n" {
		t.Fatalf("live stdout %q", stdout)
	}
	for _, p := range pieces {
		if string(p.Stdout) == "b\303" {
			t.Fatal("a cut character was sent")
		}
	}
}
