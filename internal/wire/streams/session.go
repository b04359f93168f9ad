package streams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
)

// Defaults of the Options fields left zero.
const (
	DefaultMaxStreams   = 256
	DefaultWindow       = 256 << 10
	DefaultMaxFrameData = 32 << 10
)

// maxQueuedAnswers bounds the frames queued in answer to the peer (RESET for an unknown
// stream, a refused OPEN): a peer flooding a stalled connection must not grow the queue
// without end. Past it such answers are dropped; frames of this side's own streams never are.
const maxQueuedAnswers = 1024

var (
	// ErrSessionClosed is the error of streams and calls of a session closed with a nil error.
	ErrSessionClosed = errors.New("streams: session closed")
	// ErrTooManyStreams is returned by Open when MaxStreams streams are already open.
	ErrTooManyStreams = errors.New("streams: too many streams")
	// ErrMalformedFrame is wrapped by Receive's error for a frame it cannot parse.
	ErrMalformedFrame = errors.New("streams: malformed frame")

	errIDsExhausted = errors.New("streams: stream IDs exhausted")
)

// Options configure a Session. The zero value is a non-initiator that refuses every stream
// the peer opens, with the default limits.
type Options struct {
	// Initiator makes this side open odd stream IDs (the server); false opens even ones. The
	// two sides of a connection must differ.
	Initiator bool
	// MaxStreams caps the open streams of the session, both directions together: Open beyond
	// it returns ErrTooManyStreams without sending anything and an OPEN from the peer beyond
	// it is answered RESET too_many_streams. Zero means DefaultMaxStreams.
	MaxStreams int
	// Window is the receive window of each stream in bytes: what the peer may send before the
	// application reads it, so at most Window bytes are buffered per stream. Zero means
	// DefaultWindow; it is capped at math.MaxUint32.
	Window int
	// MaxFrameData is the largest DATA payload this side sends; the connection must carry
	// messages of MaxFrameData+5 bytes. Zero means DefaultMaxFrameData.
	MaxFrameData int
	// Accept decides on a stream the peer opens, from its kind and args: it returns the
	// Handler that serves the stream, or an error whose text is sent to the opener in RESET
	// refused. It runs on the stream's own goroutine, so it may take its time. Nil refuses
	// every stream.
	Accept func(kind string, args json.RawMessage) (Handler, error)
	// Logger receives protocol violations of the peer and dropped answers. Nil discards them.
	Logger *slog.Logger
}

// Handler serves a stream the peer opened. It runs on its own goroutine once ACCEPT was
// sent; ctx is the stream's context. When it returns the stream is closed (Stream.Close),
// so a handler that wants its output delivered in full ends with CloseWrite and reads the
// peer's EOF, or returns after the peer finished sending.
type Handler func(ctx context.Context, s *Stream)

// Stats is a snapshot of a session's resources.
type Stats struct {
	Streams  int   // open streams, both directions together, including those being opened
	Buffered int64 // bytes received and not yet read, across all streams
}

// Session multiplexes streams over one message-oriented connection. Its methods are safe for
// concurrent use. An idle session holds no goroutine: one runs per stream the peer opened
// (its Handler) and, while frames wait to be sent on behalf of Receive or Read, one sends
// them.
type Session struct {
	send     func(ctx context.Context, frame []byte) error
	opts     Options
	logger   *slog.Logger
	ctx      context.Context // given to send; cancelled with the close error by Close
	cancel   context.CancelCauseFunc
	sendSlot chan struct{} // holds a token while a goroutine is in send, which must not run concurrently
	buffered atomic.Int64  // Stats.Buffered

	mu         sync.Mutex
	streams    map[uint32]*Stream
	nextID     uint64   // next ID this side opens; 64 bits to notice the 32-bit space running out
	lastPeerID uint32   // highest ID the peer opened: the peer's IDs only increase
	queue      [][]byte // frames that Receive and Read asked for, waiting for the flusher
	flushing   bool     // a flush goroutine is running and will see anything queued
}

// NewSession returns a session that writes frames with send and reads those passed to
// Receive. send writes one binary message to the connection; it is never called concurrently,
// must not keep frame after it returns, and should give up when ctx is cancelled (the session
// closed). An error from send closes the session, since a lost frame would corrupt its stream.
func NewSession(send func(ctx context.Context, frame []byte) error, o Options) *Session {
	if o.MaxStreams <= 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	o.Window = min(o.Window, math.MaxUint32)
	if o.MaxFrameData <= 0 {
		o.MaxFrameData = DefaultMaxFrameData
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &Session{send: send, opts: o, logger: logger, ctx: ctx, cancel: cancel, sendSlot: make(chan struct{}, 1), nextID: 2}
	if o.Initiator {
		s.nextID = 1
	}
	return s
}

// Open opens a stream of the given kind on the peer, with args marshalled to JSON (nil sends
// none), and waits for the peer to accept it. A refusal is a *ResetError (code refused or
// too_many_streams). If ctx ends first, Open returns ctx.Err() and, if OPEN was sent, resets
// the stream with code cancelled so the peer's handler stops.
func (s *Session) Open(ctx context.Context, kind string, args any) (*Stream, error) {
	var rawArgs json.RawMessage
	if args != nil {
		var err error
		if rawArgs, err = json.Marshal(args); err != nil {
			return nil, fmt.Errorf("streams: marshal args: %w", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	payload, err := json.Marshal(openPayload{Kind: kind, Args: rawArgs, Window: uint32(s.opts.Window)})
	if err != nil {
		return nil, err
	}
	// The ID is taken while holding the right to send, so OPENs leave in ID order, as the
	// peer requires.
	if err := s.acquireSend(ctx.Done(), ctx.Err); err != nil {
		return nil, err
	}
	st, err := s.newLocalStream(kind, rawArgs)
	if err == nil {
		err = s.sendFrame(newFrame(frameOpen, st.id, payload))
	}
	s.releaseSend()
	if err != nil {
		return nil, err
	}

	st.mu.Lock()
	defer st.mu.Unlock()
	for !st.accepted && !st.ended {
		ready := wakeChan(&st.writeReady)
		st.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
		}
		st.mu.Lock()
		if err := ctx.Err(); err != nil {
			st.resetLocked(CodeCancelled, "open cancelled")
			return nil, err
		}
	}
	if st.ended {
		return nil, st.err
	}
	return st, nil
}

func (s *Session) newLocalStream(kind string, args json.RawMessage) (*Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return nil, context.Cause(s.ctx)
	}
	if len(s.streams) >= s.opts.MaxStreams {
		return nil, ErrTooManyStreams
	}
	if s.nextID > math.MaxUint32 {
		return nil, errIDsExhausted
	}
	st := newStream(s, uint32(s.nextID), kind, args, true)
	s.nextID += 2
	s.addLocked(st)
	return st, nil
}

func (s *Session) addLocked(st *Stream) {
	if s.streams == nil {
		s.streams = make(map[uint32]*Stream)
	}
	s.streams[st.id] = st
}

// forget removes an ended stream, so that it no longer counts against MaxStreams and its
// late frames are ignored.
func (s *Session) forget(st *Stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[st.id] == st {
		delete(s.streams, st.id)
	}
}

// Receive handles one frame read from the connection. Frames must be passed in the order
// they arrived, one call at a time. Receive does not keep frame and never waits for the
// application or for send: it buffers data, signals waiting calls and queues any answer.
// It returns an error only for a frame it cannot parse (shorter than the header, or of an
// unknown type); the session stays usable, and the caller may drop the connection. A
// violation on one stream resets that stream only. Frames arriving after Close are ignored.
func (s *Session) Receive(frame []byte) error {
	typ, id, payload, err := parseHeader(frame)
	if err != nil {
		return err
	}
	if typ == frameOpen {
		s.receiveOpen(id, payload)
		return nil
	}
	s.mu.Lock()
	st := s.streams[id]
	if st == nil {
		if typ != frameReset && !s.closedLocked() && !s.openedLocked(id) {
			s.answerLocked(id, CodeProtocolError, frameName(typ)+" for a stream that was never opened")
		}
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	st.receive(typ, payload)
	return nil
}

// openedLocked reports whether id was opened by either side earlier in the session: late
// frames for such a stream, ended since, are ignored rather than answered.
func (s *Session) openedLocked(id uint32) bool {
	if id == 0 {
		return false
	}
	if s.ownsID(id) {
		return uint64(id) < s.nextID
	}
	return id <= s.lastPeerID
}

// ownsID reports whether id is of the parity this side opens.
func (s *Session) ownsID(id uint32) bool {
	return (id%2 == 1) == s.opts.Initiator
}

func (s *Session) receiveOpen(id uint32, payload []byte) {
	var open openPayload
	jsonErr := json.Unmarshal(payload, &open)

	s.mu.Lock()
	if s.closedLocked() {
		s.mu.Unlock()
		return
	}
	if id == 0 || s.ownsID(id) || id <= s.lastPeerID {
		duplicate := s.streams[id]
		s.answerLocked(id, CodeProtocolError, "OPEN with a stream ID the peer may not use")
		s.mu.Unlock()
		if duplicate != nil {
			// The answer above already resets it on the peer; end it here without a second RESET.
			duplicate.mu.Lock()
			duplicate.endLocked(&ResetError{Code: CodeProtocolError, Message: "OPEN for an open stream"})
			duplicate.mu.Unlock()
		}
		return
	}
	defer s.mu.Unlock()
	s.lastPeerID = id
	switch {
	case jsonErr != nil:
		s.answerLocked(id, CodeProtocolError, "malformed OPEN: "+jsonErr.Error())
	case s.opts.Accept == nil:
		s.answerLocked(id, CodeRefused, "this side accepts no streams")
	case len(s.streams) >= s.opts.MaxStreams:
		s.answerLocked(id, CodeTooManyStreams, fmt.Sprintf("at most %d streams", s.opts.MaxStreams))
	default:
		st := newStream(s, id, open.Kind, open.Args, false)
		st.sendCredit = int64(open.Window)
		s.addLocked(st)
		go s.serve(st)
	}
}

// serve asks Accept about a stream the peer opened, answers, and runs the handler.
func (s *Session) serve(st *Stream) {
	handler, err := s.opts.Accept(st.kind, st.args)
	if handler == nil || err != nil {
		message := "refused"
		if err != nil {
			message = err.Error()
		}
		s.logger.Debug("stream refused", "stream", st.id, "kind", st.kind, "reason", message)
		st.mu.Lock()
		st.resetLocked(CodeRefused, message)
		st.mu.Unlock()
		return
	}
	if err := s.acquireSend(st.ctx.Done(), st.ctx.Err); err != nil {
		return // the opener gave up or the session closed
	}
	st.mu.Lock()
	st.accepted = !st.ended
	accepted := st.accepted
	st.mu.Unlock()
	if accepted {
		err = s.sendFrame(newJSONFrame(frameAccept, st.id, acceptPayload{Window: uint32(s.opts.Window)}))
	}
	s.releaseSend()
	if !accepted || err != nil {
		return
	}
	defer st.Close()
	handler(st.ctx, st)
}

// answerLocked queues a RESET answering a frame of the peer. Answers are dropped past
// maxQueuedAnswers, see there.
func (s *Session) answerLocked(id uint32, code, message string) {
	level := slog.LevelDebug
	if code == CodeProtocolError {
		level = slog.LevelWarn
	}
	s.logger.Log(context.Background(), level, "stream reset", "stream", id, "code", code, "message", message)
	if len(s.queue) >= maxQueuedAnswers {
		s.logger.Warn("answer dropped: too many frames waiting to be sent", "stream", id)
		return
	}
	s.enqueueLocked(newResetFrame(id, code, message))
}

// enqueue has frame sent soon without waiting for it, for callers that must not block on
// the connection (Receive, Read, Close). Frames of one stream keep their order, and any DATA
// that Write sent before a frame was queued goes before it.
func (s *Session) enqueue(frame []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.enqueueLocked(frame)
}

func (s *Session) enqueueLocked(frame []byte) {
	if s.closedLocked() {
		return
	}
	s.queue = append(s.queue, frame)
	if !s.flushing {
		s.flushing = true
		go s.flush()
	}
}

// flush sends the queued frames, and exits once the queue is empty so that an idle session
// keeps no goroutine.
func (s *Session) flush() {
	for {
		if s.acquireSend(nil, nil) != nil {
			return // closed: the queue is dropped
		}
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		if len(batch) == 0 {
			s.flushing = false
		}
		s.mu.Unlock()
		var err error
		for _, frame := range batch {
			if err = s.sendFrame(frame); err != nil {
				break
			}
		}
		s.releaseSend()
		if len(batch) == 0 || err != nil {
			return
		}
	}
}

// acquireSend waits for the right to call send, which one goroutine holds at a time. It gives
// up with stopErr() when stop is closed, or with the close error when the session closes.
func (s *Session) acquireSend(stop <-chan struct{}, stopErr func() error) error {
	select {
	case s.sendSlot <- struct{}{}:
	case <-stop:
		return stopErr()
	case <-s.ctx.Done():
		return context.Cause(s.ctx)
	}
	// select picks at random among ready cases: do not go on past a stop that already fired.
	select {
	case <-stop:
		s.releaseSend()
		return stopErr()
	default:
		return nil
	}
}

func (s *Session) releaseSend() { <-s.sendSlot }

// sendFrame calls send; the caller holds the right to. A failed send closes the session.
func (s *Session) sendFrame(frame []byte) error {
	if s.ctx.Err() != nil {
		return context.Cause(s.ctx)
	}
	if err := s.send(s.ctx, frame); err != nil {
		if s.ctx.Err() == nil {
			s.logger.Debug("send failed, closing the session", "error", err)
			s.Close(fmt.Errorf("streams: send: %w", err))
		}
		return context.Cause(s.ctx)
	}
	return nil
}

// Close ends the session, typically because its connection is gone: it sends nothing. Every
// stream fails with err (ErrSessionClosed if nil), blocked calls return it, handlers'
// contexts are cancelled and buffers are released. Later calls do nothing.
func (s *Session) Close(err error) {
	if err == nil {
		err = ErrSessionClosed
	}
	s.mu.Lock()
	if s.closedLocked() {
		s.mu.Unlock()
		return
	}
	s.cancel(err)
	streams := s.streams
	s.streams, s.queue = nil, nil
	s.mu.Unlock()
	for _, st := range streams {
		st.mu.Lock()
		st.endLocked(err)
		st.mu.Unlock()
	}
}

func (s *Session) closedLocked() bool { return s.ctx.Err() != nil }

// Stats reports the session's open streams and buffered bytes.
func (s *Session) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Streams: len(s.streams), Buffered: s.buffered.Load()}
}
