// Package terminal is the agent's "terminal" stream: a pseudo-terminal running the login
// shell of the agent's user, with TERM=xterm-256color. Keystrokes and resizes come in as
// agentproto TermFrames and the terminal's output goes back as TermData frames; keystrokes are
// rate limited, and the shell's process group is killed when the stream ends.
package terminal

import (
	"context"
	"encoding/json"
	"io"

	"golang.org/x/time/rate"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/streams"
)

// Input is limited to inputRate bytes a second with bursts of inputBurst: a paste arrives at
// once, a runaway sender is slowed down rather than flooding the shell.
const (
	inputRate  = 64 << 10
	inputBurst = 64 << 10
)

// Register registers the terminal stream with reg.
func Register(reg *capability.Registry) { reg.Stream(agentproto.StreamTerminal, serve) }

// shellTerm is a running shell on a pseudo-terminal.
type shellTerm interface {
	io.ReadWriter
	Resize(cols, rows uint16) error
	// Close kills the shell's process group and releases the terminal.
	Close() error
}

func serve(ctx context.Context, s *streams.Stream) {
	var a agentproto.TerminalArgs
	if err := json.Unmarshal(s.Args(), &a); err != nil {
		refuse(s, &agentproto.CallError{Code: agentproto.ErrInvalid, Message: "malformed arguments: " + err.Error()})
		return
	}
	if a.Cols == 0 || a.Rows == 0 {
		a.Cols, a.Rows = 80, 24
	}
	term, shell, err := start(a.Cols, a.Rows)
	if err != nil {
		refuse(s, err)
		return
	}
	defer term.Close()
	if err := agentproto.WriteTermFrame(s, agentproto.TermStarted, []byte(shell)); err != nil {
		return
	}
	// The output runs until the shell exits (the terminal reads EOF or EIO) or the stream
	// breaks; the input until the server closes its side.
	output := make(chan struct{})
	go func() {
		defer close(output)
		buf := make([]byte, agentproto.MaxTermPayload)
		for {
			n, err := term.Read(buf)
			if n > 0 && agentproto.WriteTermData(s, buf[:n]) != nil {
				return
			}
			if err != nil {
				return
			}
		}
	}()
	input := make(chan struct{})
	go func() {
		defer close(input)
		readInput(ctx, s, term)
	}()
	select {
	case <-output:
		// The shell exited: say so with FIN, and wait for the server to close its side, as
		// closing the stream now would reset it before the server read the last output.
		_ = s.CloseWrite()
		<-input
	case <-input:
	}
}

// readInput passes the server's frames to the terminal until the stream ends.
func readInput(ctx context.Context, s *streams.Stream, term shellTerm) {
	limit := rate.NewLimiter(inputRate, inputBurst)
	buf := make([]byte, agentproto.MaxTermPayload)
	for {
		typ, p, err := agentproto.ReadTermFrame(s, buf)
		if err != nil {
			return
		}
		switch typ {
		case agentproto.TermData:
			if limit.WaitN(ctx, len(p)) != nil {
				return
			}
			if _, err := term.Write(p); err != nil {
				return
			}
		case agentproto.TermResize:
			cols, rows, err := agentproto.ParseResize(p)
			if err != nil || cols == 0 || rows == 0 {
				return
			}
			if err := term.Resize(cols, rows); err != nil {
				return
			}
		default:
			return
		}
	}
}

// refuse sends the reason there is no shell as a TermError frame.
func refuse(s *streams.Stream, err error) {
	ce, ok := err.(*agentproto.CallError)
	if !ok {
		ce = &agentproto.CallError{Code: agentproto.ErrFailed, Message: err.Error()}
	}
	b, _ := json.Marshal(ce)
	if agentproto.WriteTermFrame(s, agentproto.TermError, b) == nil {
		_ = s.CloseWrite()
	}
}
