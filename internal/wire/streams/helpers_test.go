package streams

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var errLinkDown = errors.New("link down")

// link carries frames one way between two sessions, like one direction of a WebSocket: send
// queues a copy and a pump goroutine feeds it to the receiving session. It fails the test if
// send is called concurrently or a DATA frame is larger than maxData.
type link struct {
	tb      testing.TB
	frames  chan []byte
	down    chan struct{}
	maxData int
	inSend  atomic.Int32
	sent    atomic.Int64 // frames sent

	mu   sync.Mutex
	gate chan struct{} // the pump delivers once it is closed; see pause
}

func newLink(tb testing.TB, maxData int) *link {
	return &link{tb: tb, frames: make(chan []byte, 64), down: make(chan struct{}), maxData: maxData, gate: closedChan}
}

func (l *link) send(ctx context.Context, frame []byte) error {
	if l.inSend.Add(1) != 1 {
		l.tb.Error("send called concurrently")
	}
	defer l.inSend.Add(-1)
	if frame[0] == frameData && len(frame)-headerLen > l.maxData {
		l.tb.Errorf("DATA frame of %d bytes, more than MaxFrameData %d", len(frame)-headerLen, l.maxData)
	}
	select {
	case l.frames <- bytes.Clone(frame):
		l.sent.Add(1)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-l.down:
		return errLinkDown
	}
}

// pause holds frames in the link until resume.
func (l *link) pause() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gate = make(chan struct{})
}

func (l *link) resume() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.gate)
}

func (l *link) pump(to *Session) {
	for {
		select {
		case frame := <-l.frames:
			l.mu.Lock()
			gate := l.gate
			l.mu.Unlock()
			select {
			case <-gate:
			case <-l.down:
				return
			}
			if err := to.Receive(frame); err != nil {
				l.tb.Errorf("Receive: %v", err)
			}
		case <-l.down:
			return
		}
	}
}

// pair is two sessions connected by links: server is the initiator, agent the other side.
type pair struct {
	server, agent     *Session
	toAgent, toServer *link
	pumps             sync.WaitGroup
	closeOnce         sync.Once
}

func newPair(tb testing.TB, server, agent Options) *pair {
	server.Initiator, agent.Initiator = true, false
	p := &pair{
		toAgent:  newLink(tb, cmpOr(server.MaxFrameData, DefaultMaxFrameData)),
		toServer: newLink(tb, cmpOr(agent.MaxFrameData, DefaultMaxFrameData)),
	}
	p.server = NewSession(p.toAgent.send, server)
	p.agent = NewSession(p.toServer.send, agent)
	p.pumps.Go(func() { p.toAgent.pump(p.agent) })
	p.pumps.Go(func() { p.toServer.pump(p.server) })
	tb.Cleanup(func() { p.drop(nil) })
	return p
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// drop takes the connection down: both sessions close with err and the pumps stop.
func (p *pair) drop(err error) {
	p.closeOnce.Do(func() {
		p.server.Close(err)
		p.agent.Close(err)
		close(p.toAgent.down)
		close(p.toServer.down)
		p.pumps.Wait()
	})
}

// waitIdle waits until neither session has a stream left.
func (p *pair) waitIdle(tb testing.TB) {
	tb.Helper()
	waitFor(tb, "both sessions idle", func() bool {
		return p.server.Stats() == Stats{} && p.agent.Stats() == Stats{}
	})
}

// waitFor polls cond for up to 10 seconds.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
	}
}

// echo is an example handler: it writes back what it reads, and half-closes at EOF.
func echo(_ context.Context, s *Stream) {
	if _, err := io.Copy(s, s); err == nil {
		s.CloseWrite()
	}
}

// acceptKinds accepts the kinds in handlers and refuses the others.
func acceptKinds(handlers map[string]Handler) func(string, json.RawMessage) (Handler, error) {
	return func(kind string, _ json.RawMessage) (Handler, error) {
		if h := handlers[kind]; h != nil {
			return h, nil
		}
		return nil, fmt.Errorf("unknown kind %q", kind)
	}
}

var acceptEcho = acceptKinds(map[string]Handler{"echo": echo})

// recorder is the send function of a session tested with hand-made frames: it keeps what the
// session sends.
type recorder struct {
	frames chan []byte
}

func newRecorder() *recorder { return &recorder{frames: make(chan []byte, 4096)} }

func (r *recorder) send(_ context.Context, frame []byte) error {
	r.frames <- bytes.Clone(frame)
	return nil
}

// next returns the next frame sent, failing the test after 10 seconds.
func (r *recorder) next(tb testing.TB) (typ byte, id uint32, payload []byte) {
	tb.Helper()
	select {
	case f := <-r.frames:
		typ, id, payload, err := parseHeader(f)
		if err != nil {
			tb.Fatalf("session sent a malformed frame: %v", err)
		}
		return typ, id, payload
	case <-time.After(10 * time.Second):
		tb.Fatal("no frame sent")
		return 0, 0, nil
	}
}

// expect returns the payload of the next frame, failing the test unless it has type typ and
// stream ID id.
func (r *recorder) expect(tb testing.TB, typ byte, id uint32) []byte {
	tb.Helper()
	gotTyp, gotID, payload := r.next(tb)
	if gotTyp != typ || gotID != id {
		tb.Fatalf("sent %s on stream %d (%q), want %s on stream %d", frameName(gotTyp), gotID, payload, frameName(typ), id)
	}
	return payload
}

// expectReset reads the next frame and checks it is a RESET of stream id with code.
func (r *recorder) expectReset(tb testing.TB, id uint32, code string) resetPayload {
	tb.Helper()
	var reset resetPayload
	if err := json.Unmarshal(r.expect(tb, frameReset, id), &reset); err != nil {
		tb.Fatal(err)
	}
	if reset.Code != code {
		tb.Fatalf("RESET code %q (%q), want %q", reset.Code, reset.Message, code)
	}
	return reset
}

func openFrame(id uint32, kind string, window uint32) []byte {
	return newJSONFrame(frameOpen, id, openPayload{Kind: kind, Window: window})
}

func dataFrame(id uint32, n int) []byte { return newFrame(frameData, id, bytes.Repeat([]byte{'x'}, n)) }

func windowOf(tb testing.TB, payload []byte) uint32 {
	tb.Helper()
	if len(payload) != 4 {
		tb.Fatalf("WINDOW payload of %d bytes", len(payload))
	}
	return binary.BigEndian.Uint32(payload)
}

// resetCode returns the code of a *ResetError, or "" for another error.
func resetCode(err error) string {
	if re, ok := errors.AsType[*ResetError](err); ok {
		return re.Code
	}
	return ""
}

// result carries what a goroutine's call returned.
type result struct {
	n   int
	err error
}

// notWithin fails the test if c delivers within d: a bounded check that a call is blocked.
func notWithin[T any](tb testing.TB, c <-chan T, d time.Duration, what string) {
	tb.Helper()
	select {
	case v := <-c:
		tb.Fatalf("%s returned (%v), want it blocked", what, v)
	case <-time.After(d):
	}
}

// within returns what c delivers, failing the test if it takes more than 10 seconds.
func within[T any](tb testing.TB, c <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		tb.Fatalf("%s still blocked", what)
		var zero T
		return zero
	}
}
