// Package capability is the agent's registry of what it can do: each capability package
// (scripts, power, system tools, echo, ...) registers the command kinds, call methods and
// stream kinds it serves, and the agent's channel dispatches by name through it. Which
// capabilities an agent binary carries is decided by cmd/gale-agent, one line each.
package capability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"gale/internal/wire/agentproto"
	"gale/internal/wire/streams"
)

// CommandHandler carries out a command within ctx (the command's timeout) and reports its
// outcome; the agent fills in the command ID and duration.
type CommandHandler func(ctx context.Context, c agentproto.Command) agentproto.CommandResult

// ResultPending is what a command handler answers for a command whose outcome comes later (a
// reboot is known to have succeeded only once the machine is back): the agent reports nothing
// then, and the capability reports the outcome itself, through the Reporter it was started
// with. It never goes on the wire.
const ResultPending = "pending"

// Reporter delivers the result of a command answered ResultPending like the agent's own
// results: over HTTP, kept on disk while the server is unreachable. It returns once the
// result is delivered or kept.
type Reporter func(agentproto.CommandResult)

// Messenger sends a report to the server over the live channel, best effort: without a live
// channel it is dropped. Reports that must arrive are command results, not messages.
type Messenger func(msgType string, payload any)

// Fetcher downloads a file: a path on the server (starting /api/v1/) with the agent's
// credentials, or an http(s) address without them. The caller closes the body.
type Fetcher func(ctx context.Context, url string) (io.ReadCloser, error)

// Host is what the running agent lends its capabilities once it starts.
type Host struct {
	// Report delivers the late results of commands answered ResultPending.
	Report Reporter
	Send   Messenger
	Fetch  Fetcher
}

// Starter runs once when the agent starts, before it takes commands, with the agent's
// lifetime and its Reporter: a capability picks up there what an earlier run left unfinished.
// It must not block; what takes time runs in its own goroutine.
type Starter func(ctx context.Context, report Reporter)

// CallHandler answers a call: a result marshalled to JSON, or an error, which becomes the
// CallResult's error (an *agentproto.CallError keeps its code; others are OPERATION_FAILED).
type CallHandler func(ctx context.Context, args json.RawMessage) (any, error)

// Registry maps names to handlers. Registration happens before the agent runs; lookups are
// then safe from any goroutine.
type Registry struct {
	commands map[string]CommandHandler
	calls    map[string]CallHandler
	streams  map[string]streams.Handler
	starters []Starter
	cancels  []Withdrawer
	host     atomic.Pointer[Host]
}

// Withdrawer takes back a command its capability holds pending after answering ResultPending
// (a scheduled reboot). held is false when the capability holds no such command; otherwise
// res is the cancellation's outcome: completed (see Cancelled), or failed when it is too late.
type Withdrawer func(commandID string) (res agentproto.CommandResult, held bool)

// OnCancel registers a Withdrawer, asked when the server cancels a command no handler is
// running any more.
func (r *Registry) OnCancel(w Withdrawer) { r.cancels = append(r.cancels, w) }

// Withdraw asks the Withdrawers, in registration order, for the first that holds the command.
func (r *Registry) Withdraw(commandID string) (agentproto.CommandResult, bool) {
	for _, w := range r.cancels {
		if res, held := w(commandID); held {
			return res, true
		}
	}
	return agentproto.CommandResult{}, false
}

// Cancelled is the completed outcome of a cancel_command: which command, and in what state
// it was cancelled ("while running", "while scheduled", "before it arrived").
func Cancelled(commandID, when string) agentproto.CommandResult {
	b, _ := json.Marshal(map[string]string{"cancelled": commandID, "when": when})
	return agentproto.CommandResult{Status: agentproto.ResultCompleted, Result: b}
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{commands: map[string]CommandHandler{}, calls: map[string]CallHandler{}, streams: map[string]streams.Handler{}}
}

// Command registers the handler of a command kind. Registering a kind twice panics: two
// packages claiming one name is a mistake of the binary's composition.
func (r *Registry) Command(kind string, h CommandHandler) { add(r.commands, "command", kind, h) }

// Call registers the handler of a call method; twice panics.
func (r *Registry) Call(method string, h CallHandler) { add(r.calls, "call method", method, h) }

// Stream registers the handler of a stream kind; twice panics. The handler owns the stream
// until it returns, and then the stream is closed.
func (r *Registry) Stream(kind string, h streams.Handler) { add(r.streams, "stream kind", kind, h) }

// OnStart registers a Starter.
func (r *Registry) OnStart(s Starter) { r.starters = append(r.starters, s) }

// Start takes the agent's Host, then runs the Starters in registration order.
func (r *Registry) Start(ctx context.Context, h Host) {
	r.host.Store(&h)
	for _, s := range r.starters {
		s(ctx, h.Report)
	}
}

// Send sends a report over the agent's live channel (see Messenger); before the agent started
// it is dropped.
func (r *Registry) Send(msgType string, payload any) {
	if h := r.host.Load(); h != nil && h.Send != nil {
		h.Send(msgType, payload)
	}
}

// Fetch downloads a file through the agent (see Fetcher); before the agent started it fails.
func (r *Registry) Fetch(ctx context.Context, url string) (io.ReadCloser, error) {
	if h := r.host.Load(); h != nil && h.Fetch != nil {
		return h.Fetch(ctx, url)
	}
	return nil, errors.New("the agent has not started: nothing can be downloaded yet")
}

func add[H any](m map[string]H, what, name string, h H) {
	if _, dup := m[name]; dup {
		panic(fmt.Sprintf("capability: %s %q registered twice", what, name))
	}
	m[name] = h
}

// RunCommand carries out c with the handler of its kind, or fails it when there is none.
func (r *Registry) RunCommand(ctx context.Context, c agentproto.Command) agentproto.CommandResult {
	h, ok := r.commands[c.Type]
	if !ok {
		return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: "this agent does not know the command " + c.Type}
	}
	return h(ctx, c)
}

// Answer answers a call with the handler of its method; UNKNOWN_METHOD when there is none.
// A panicking handler becomes OPERATION_FAILED, so one bad call cannot end the agent.
func (r *Registry) Answer(ctx context.Context, c agentproto.Call) (res agentproto.CallResult) {
	res.CallID = c.ID
	h, ok := r.calls[c.Method]
	if !ok {
		res.Error = &agentproto.CallError{Code: agentproto.ErrUnknownMethod, Message: fmt.Sprintf("unknown method %q", c.Method)}
		return res
	}
	defer func() {
		if v := recover(); v != nil {
			res.Result = nil
			res.Error = &agentproto.CallError{Code: agentproto.ErrFailed, Message: fmt.Sprintf("internal error: %v", v)}
		}
	}()
	out, err := h(ctx, c.Args)
	if err == nil {
		res.Result, err = json.Marshal(out)
	}
	if err != nil {
		res.Result = nil
		res.Error = callError(err)
	}
	return res
}

func callError(err error) *agentproto.CallError {
	var ce *agentproto.CallError
	if errors.As(err, &ce) {
		return ce
	}
	return &agentproto.CallError{Code: agentproto.ErrFailed, Message: err.Error()}
}

// AcceptStream is streams.Options.Accept: it serves the stream kinds registered and refuses
// the others, naming the kind.
func (r *Registry) AcceptStream(kind string, _ json.RawMessage) (streams.Handler, error) {
	if h, ok := r.streams[kind]; ok {
		return h, nil
	}
	return nil, fmt.Errorf("this agent has no stream kind %q", kind)
}

type outputKey struct{}

// OutputSink receives what a running command printed so far (see agentproto.CommandOutput).
type OutputSink func(agentproto.CommandOutput)

// WithOutput returns ctx carrying the sink a command handler sends its output pieces to.
func WithOutput(ctx context.Context, sink OutputSink) context.Context {
	return context.WithValue(ctx, outputKey{}, sink)
}

// OutputFrom returns the sink of ctx; without one, pieces are dropped.
func OutputFrom(ctx context.Context) OutputSink {
	if sink, ok := ctx.Value(outputKey{}).(OutputSink); ok {
		return sink
	}
	return func(agentproto.CommandOutput) {}
}

// Outcome is the result of a command whose handler produced result (marshalled to JSON when
// not nil) and err: completed without an error, failed with it (the result still carried).
func Outcome(result any, err error) agentproto.CommandResult {
	res := agentproto.CommandResult{Status: agentproto.ResultCompleted}
	if result != nil {
		raw, merr := json.Marshal(result)
		if merr != nil {
			return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: merr.Error()}
		}
		res.Result = raw
	}
	if err != nil {
		res.Status, res.Error = agentproto.ResultFailed, err.Error()
	}
	return res
}
