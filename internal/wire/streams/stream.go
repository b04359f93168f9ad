package streams

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"time"
)

// errWriteClosed is Write's error after CloseWrite; it is a net.ErrClosed.
var errWriteClosed = fmt.Errorf("streams: write after CloseWrite: %w", net.ErrClosed)

// Stream is one ordered, flow-controlled, bidirectional byte stream of a Session. It is a
// net.Conn, so that http.Transport can use it as a connection; its methods are safe for
// concurrent use.
//
// Read returns io.EOF once the peer called CloseWrite (or Close, after finishing) and the
// data before it was read; a *ResetError if the stream was reset; the session's close error
// if the session closed; net.ErrClosed after Close.
type Stream struct {
	sess   *Session
	id     uint32
	kind   string
	args   json.RawMessage
	local  bool // opened by this side, so ACCEPT is expected
	ctx    context.Context
	cancel context.CancelCauseFunc

	writeMu sync.Mutex // one Write at a time, so that concurrent writes do not interleave

	readDeadline, writeDeadline deadline

	mu          sync.Mutex
	accepted    bool  // ACCEPT sent or received: DATA, WINDOW and FIN may flow
	finSent     bool  // FIN sent or queued: Write fails
	finReceived bool  // the peer sent FIN: Read returns io.EOF once the buffer is empty
	closed      bool  // Close was called: Read and Write return net.ErrClosed
	ended       bool  // the session forgot the stream and its context is cancelled
	err         error // why the stream ended early (reset, session closed); nil otherwise
	chunks      [][]byte
	buffered    int   // bytes in chunks: received, not yet read
	recvCredit  int   // bytes the peer may still send: granted and not used yet
	consumed    int   // bytes read and not yet granted back with WINDOW
	sendCredit  int64 // bytes this side may still send
	// readReady and writeReady are closed to have a blocked Read, or a blocked Write or
	// Open, look at the state again; nil while nobody waits.
	readReady, writeReady chan struct{}
}

var _ net.Conn = (*Stream)(nil)

func newStream(s *Session, id uint32, kind string, args json.RawMessage, local bool) *Stream {
	ctx, cancel := context.WithCancelCause(s.ctx)
	return &Stream{sess: s, id: id, kind: kind, args: args, local: local, ctx: ctx, cancel: cancel, recvCredit: s.opts.Window}
}

// ID returns the stream's ID, unique within its session and the same on both sides.
func (st *Stream) ID() uint32 { return st.id }

// Kind returns the kind the stream was opened with.
func (st *Stream) Kind() string { return st.kind }

// Args returns the JSON args the stream was opened with; nil when there were none.
func (st *Stream) Args() json.RawMessage { return st.args }

// Context returns a context cancelled when the stream ends: both directions finished, reset,
// closed, or its session closed. Its cause is the stream's error, if any.
func (st *Stream) Context() context.Context { return st.ctx }

// LocalAddr returns the stream's Addr; both ends share it.
func (st *Stream) LocalAddr() net.Addr { return Addr{ID: st.id, Kind: st.kind} }

// RemoteAddr returns the stream's Addr; both ends share it.
func (st *Stream) RemoteAddr() net.Addr { return Addr{ID: st.id, Kind: st.kind} }

// Read reads received data. Reading is what gives the peer credit to send more: a stream
// nobody reads stops its writer once a window of data is buffered.
func (st *Stream) Read(p []byte) (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for {
		switch {
		case st.closed:
			return 0, net.ErrClosed
		case st.err != nil:
			return 0, st.err
		}
		expired := st.readDeadline.channel()
		switch {
		case isClosed(expired):
			return 0, os.ErrDeadlineExceeded
		case st.buffered > 0:
			return st.readLocked(p), nil
		case st.finReceived:
			return 0, io.EOF
		case len(p) == 0:
			return 0, nil
		}
		ready := wakeChan(&st.readReady)
		st.mu.Unlock()
		select {
		case <-ready:
		case <-expired:
		}
		st.mu.Lock()
	}
}

func (st *Stream) readLocked(p []byte) int {
	n := 0
	for n < len(p) && len(st.chunks) > 0 {
		c := copy(p[n:], st.chunks[0])
		n += c
		if c < len(st.chunks[0]) {
			st.chunks[0] = st.chunks[0][c:]
		} else {
			st.chunks[0] = nil
			st.chunks = st.chunks[1:]
		}
	}
	st.buffered -= n
	st.sess.buffered.Add(-int64(n))
	st.consumed += n
	// Credit goes back by half windows: a WINDOW per Read would double the frames of a stream
	// read in small pieces. After FIN the peer sends nothing more, so it needs none.
	if !st.finReceived && st.consumed >= max(st.sess.opts.Window/2, 1) {
		st.sess.enqueue(newWindowFrame(st.id, uint32(st.consumed)))
		st.recvCredit += st.consumed
		st.consumed = 0
	}
	st.finishIfDoneLocked()
	return n
}

// Write sends p, cut into frames of at most MaxFrameData bytes, waiting for credit from the
// peer as needed. It returns once every frame was handed to send.
func (st *Stream) Write(p []byte) (int, error) {
	st.writeMu.Lock()
	defer st.writeMu.Unlock()
	written := 0
	for {
		n, err := st.takeCredit(len(p) - written)
		if err != nil {
			return written, err
		}
		if n > 0 {
			if err := st.sendData(p[written : written+n]); err != nil {
				return written, err
			}
			written += n
		}
		if written == len(p) {
			return written, nil
		}
	}
}

// takeCredit waits until the stream may send, then takes credit for up to want bytes (and one
// frame). With want zero it only reports whether writing is possible.
func (st *Stream) takeCredit(want int) (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for {
		if err := st.writeErrLocked(); err != nil {
			return 0, err
		}
		expired := st.writeDeadline.channel()
		switch {
		case isClosed(expired):
			return 0, os.ErrDeadlineExceeded
		case want == 0:
			return 0, nil
		case st.sendCredit > 0:
			n := int(min(int64(want), st.sendCredit, int64(st.sess.opts.MaxFrameData)))
			st.sendCredit -= int64(n)
			return n, nil
		}
		ready := wakeChan(&st.writeReady)
		st.mu.Unlock()
		select {
		case <-ready:
		case <-expired:
		}
		st.mu.Lock()
	}
}

// sendData sends one DATA frame, for which credit was taken. The right to send is taken per
// frame, so that other streams' frames go out between the frames of a large Write.
func (st *Stream) sendData(data []byte) error {
	s := st.sess
	err := s.acquireSend(st.writeDeadline.channel(), deadlineExceeded)
	if err == nil {
		// Checked while holding the right to send: a FIN or RESET that Close or CloseWrite
		// queued meanwhile must not be overtaken by this data.
		st.mu.Lock()
		err = st.writeErrLocked()
		st.mu.Unlock()
		if err == nil {
			err = s.sendFrame(newFrame(frameData, st.id, data))
		}
		s.releaseSend()
		if err == nil {
			return nil
		}
	}
	st.mu.Lock()
	st.sendCredit += int64(len(data)) // not sent: a later Write may use it
	st.mu.Unlock()
	return err
}

func deadlineExceeded() error { return os.ErrDeadlineExceeded }

func (st *Stream) writeErrLocked() error {
	switch {
	case st.closed:
		return net.ErrClosed
	case st.err != nil:
		return st.err
	case st.finSent:
		return errWriteClosed
	}
	return nil
}

// CloseWrite half-closes the stream: it sends FIN after the data already written, so the
// peer reads io.EOF after it, and can still write back. Later Writes fail.
func (st *Stream) CloseWrite() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.closed:
		return net.ErrClosed
	case st.err != nil:
		return st.err
	case st.finSent:
		return nil
	}
	st.finSent = true
	st.sess.enqueue(newFrame(frameFin, st.id, nil))
	wake(&st.writeReady) // a Write waiting for credit fails now
	st.finishIfDoneLocked()
	return nil
}

// Close ends the stream and releases its buffers at once; Read and Write return net.ErrClosed
// afterwards, and so do blocked calls. If the peer finished sending, Close sends FIN (unless
// CloseWrite did) and the peer reads everything written before it. Otherwise it sends RESET
// cancelled instead, so that the peer's writes fail rather than wait for ever; the peer's
// unread data is then discarded, so a writer that needs its data delivered calls CloseWrite
// and waits for the peer's EOF before Close. Close always returns nil.
func (st *Stream) Close() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil
	}
	st.closed = true
	if st.ended {
		return nil
	}
	switch {
	case !st.finReceived:
		// No FIN first: the peer reading EOF would take a cut-off stream for a complete one.
		st.sess.enqueue(newResetFrame(st.id, CodeCancelled, "closed by the application"))
	case !st.finSent:
		st.finSent = true
		st.sess.enqueue(newFrame(frameFin, st.id, nil))
	}
	st.endLocked(nil)
	return nil
}

// SetDeadline sets both the read and the write deadline.
func (st *Stream) SetDeadline(t time.Time) error {
	st.SetReadDeadline(t)
	return st.SetWriteDeadline(t)
}

// SetReadDeadline makes Read, blocked or later, fail with os.ErrDeadlineExceeded once t has
// passed, until the deadline is moved. The zero time means no deadline.
func (st *Stream) SetReadDeadline(t time.Time) error {
	st.readDeadline.set(t)
	st.mu.Lock()
	wake(&st.readReady) // a blocked Read picks up the new deadline
	st.mu.Unlock()
	return nil
}

// SetWriteDeadline makes Write, blocked or later, fail with os.ErrDeadlineExceeded once t has
// passed, until the deadline is moved. The zero time means no deadline. A frame already
// handed to send is not interrupted: it may be half written, which would break the connection.
func (st *Stream) SetWriteDeadline(t time.Time) error {
	st.writeDeadline.set(t)
	st.mu.Lock()
	wake(&st.writeReady)
	st.mu.Unlock()
	return nil
}

// receive handles a frame of the peer for this stream.
func (st *Stream) receive(typ byte, payload []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ended {
		return // a late frame of a stream that ended meanwhile
	}
	if violation := st.applyLocked(typ, payload); violation != "" {
		st.sess.logger.Warn("stream protocol violation by the peer", "stream", st.id, "kind", st.kind, "violation", violation)
		st.resetLocked(CodeProtocolError, violation)
	}
}

// applyLocked applies a frame to the stream's state, or describes how it breaks the protocol.
func (st *Stream) applyLocked(typ byte, payload []byte) (violation string) {
	switch {
	case typ == frameReset:
		var r resetPayload
		if err := json.Unmarshal(payload, &r); err != nil || r.Code == "" {
			r = resetPayload{Code: CodeProtocolError, Message: "malformed RESET"}
		}
		st.endLocked(&ResetError{Code: r.Code, Message: r.Message})
		return ""
	case typ == frameAccept:
		var a acceptPayload
		switch {
		case !st.local || st.accepted:
			return "unexpected ACCEPT"
		case json.Unmarshal(payload, &a) != nil:
			return "malformed ACCEPT"
		}
		st.accepted = true
		st.sendCredit = int64(a.Window)
		wake(&st.writeReady)
		return ""
	case !st.accepted:
		return frameName(typ) + " before ACCEPT"
	}

	switch typ {
	case frameData:
		switch {
		case st.finReceived:
			return "DATA after FIN"
		case len(payload) == 0:
			return "empty DATA"
		case len(payload) > st.recvCredit:
			return fmt.Sprintf("DATA of %d bytes with %d bytes of credit", len(payload), st.recvCredit)
		}
		st.chunks = append(st.chunks, bytes.Clone(payload))
		st.recvCredit -= len(payload)
		st.buffered += len(payload)
		st.sess.buffered.Add(int64(len(payload)))
		wake(&st.readReady)
	case frameWindow:
		increment, ok := windowIncrement(payload)
		switch {
		case !ok:
			return "malformed WINDOW"
		case st.sendCredit+int64(increment) > math.MaxUint32:
			return "WINDOW beyond 2^32-1 bytes of credit"
		}
		st.sendCredit += int64(increment)
		wake(&st.writeReady)
	case frameFin:
		switch {
		case st.finReceived:
			return "second FIN"
		case len(payload) != 0:
			return "FIN with a payload"
		}
		st.finReceived = true
		wake(&st.readReady)
		st.finishIfDoneLocked()
	}
	return ""
}

// resetLocked ends the stream with a ResetError and sends RESET to the peer.
func (st *Stream) resetLocked(code, message string) {
	if st.ended {
		return
	}
	st.endLocked(&ResetError{Code: code, Message: message})
	st.sess.enqueue(newResetFrame(st.id, code, message))
}

// finishIfDoneLocked ends the stream once both directions are over and everything was read.
func (st *Stream) finishIfDoneLocked() {
	if st.finSent && st.finReceived && st.buffered == 0 {
		st.endLocked(nil)
	}
}

// endLocked ends the stream with err (nil for a normal end or Close): it releases the buffer,
// wakes blocked calls, has the session forget the stream and cancels its context.
func (st *Stream) endLocked(err error) {
	if st.ended {
		return
	}
	st.ended = true
	st.err = err
	st.sess.buffered.Add(-int64(st.buffered))
	st.chunks, st.buffered = nil, 0
	wake(&st.readReady)
	wake(&st.writeReady)
	st.sess.forget(st)
	st.cancel(err)
}

// wakeChan returns the channel that wake will close, creating it; the caller holds the lock
// guarding *c.
func wakeChan(c *chan struct{}) <-chan struct{} {
	if *c == nil {
		*c = make(chan struct{})
	}
	return *c
}

// wake releases whoever waits on the channel wakeChan returned.
func wake(c *chan struct{}) {
	if *c != nil {
		close(*c)
		*c = nil
	}
}

// Addr is the net.Addr of a Stream.
type Addr struct {
	ID   uint32
	Kind string
}

// Network returns "streams".
func (a Addr) Network() string { return "streams" }

func (a Addr) String() string { return fmt.Sprintf("%s/%d", a.Kind, a.ID) }

// deadline is a point in time that closes a channel when it passes, so that blocked calls can
// select on it.
type deadline struct {
	mu      sync.Mutex
	timer   *time.Timer
	expired chan struct{} // closed once the deadline passed; nil while there is none
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		// If it already fired it closed its own channel, no longer d.expired: harmless, as
		// waiters look at the state again when woken.
		d.timer.Stop()
		d.timer = nil
	}
	switch {
	case t.IsZero():
		d.expired = nil
	case !t.After(time.Now()):
		d.expired = closedChan
	default:
		expired := make(chan struct{})
		d.expired = expired
		d.timer = time.AfterFunc(time.Until(t), func() { close(expired) })
	}
}

// channel returns a channel closed once the deadline passes; nil (never ready) without one.
func (d *deadline) channel() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.expired
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
