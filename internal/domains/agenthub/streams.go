package agenthub

import (
	"context"
	"errors"
	"fmt"

	"gale/internal/platform/apperr"
	"gale/internal/wire/streams"
)

// Why OpenStream fails. They are *apperr.Error values, so the HTTP edge answers them as they
// are; OpenStream wraps them with the device and kind, and errors.Is finds them.
var (
	ErrNotConnected = &apperr.Error{Kind: apperr.KindUnavailable, Code: "DEVICE_NOT_CONNECTED",
		Message: "the device's agent is not connected; try again once the device is online"}
	ErrStreamsUnsupported = &apperr.Error{Kind: apperr.KindConflict, Code: "AGENT_STREAMS_UNSUPPORTED",
		Message: "the device's agent is too old to open streams; update the agent"}
	ErrStreamRefused = &apperr.Error{Kind: apperr.KindUnprocessable, Code: "STREAM_REFUSED",
		Message: "the device's agent refused the stream"}
	ErrTooManyStreams = &apperr.Error{Kind: apperr.KindUnavailable, Code: "TOO_MANY_STREAMS",
		Message: "the device's agent has too many open streams; close one and try again"}
)

// refusedError is ErrStreamRefused with the agent's reason.
type refusedError struct{ reason string }

func (e *refusedError) Error() string { return ErrStreamRefused.Message + ": " + e.reason }
func (e *refusedError) Unwrap() error { return ErrStreamRefused }

// errAgentDisconnected ends the streams of an agent whose connection closed.
var errAgentDisconnected = fmt.Errorf("%w: its connection closed", ErrNotConnected)

// OpenStream opens a stream of the given kind, with args (marshalled to JSON; nil for none),
// to the device's agent, on whichever node holds its connection, and returns it once the
// agent accepted it. The stream is a net.Conn whose CloseWrite half-closes it; it fails when
// the agent's connection closes. The device must already be known to be in the caller's
// scope. Errors wrap ErrNotConnected, ErrStreamsUnsupported, ErrStreamRefused (saying the
// agent's reason) or ErrTooManyStreams, or ctx's error.
func (h *Hub) OpenStream(ctx context.Context, deviceID, kind string, args any) (*streams.Stream, error) {
	var st *streams.Stream
	var err error
	if c := h.conn(deviceID); c != nil {
		st, err = c.openStream(ctx, kind, args)
	} else {
		st, err = h.openRelayed(ctx, deviceID, kind, args)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s stream to device %s: %w", kind, deviceID, err)
	}
	return st, nil
}

func (c *conn) openStream(ctx context.Context, kind string, args any) (*streams.Stream, error) {
	if c.streams == nil {
		return nil, ErrStreamsUnsupported
	}
	st, err := c.streams.Open(ctx, kind, args)
	if err != nil {
		return nil, streamError(err)
	}
	return st, nil
}

// streamError names a failure of streams.Session.Open with the hub's errors.
func streamError(err error) error {
	var reset *streams.ResetError
	switch {
	case errors.Is(err, streams.ErrTooManyStreams):
		return ErrTooManyStreams
	case errors.As(err, &reset) && reset.Code == streams.CodeTooManyStreams:
		return ErrTooManyStreams
	case errors.As(err, &reset) && reset.Code == streams.CodeRefused:
		return &refusedError{reason: reset.Message}
	case errors.Is(err, streams.ErrSessionClosed):
		return ErrNotConnected
	}
	return err
}

// Stats is a snapshot of the hub's streams.
type Stats struct {
	Agents  int   // agent connections held by this node
	Streams int   // streams open to those agents
	Relays  int   // node-to-node connections carrying a stream, opened by or to this node
	Buffer  int64 // bytes received on those streams and not yet read
}

// Stats reports the hub's connections and streams.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	conns := make([]*conn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	s := Stats{Agents: len(conns), Relays: int(h.relays.Load())}
	for _, c := range conns {
		if c.streams != nil {
			cs := c.streams.Stats()
			s.Streams += cs.Streams
			s.Buffer += cs.Buffered
		}
	}
	return s
}
