package streams

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hold returns a handler that hands its stream to the test and keeps it until the test ends,
// so that the test can use it even once it was reset.
func hold(t *testing.T, streams chan<- *Stream) Handler {
	return func(ctx context.Context, s *Stream) {
		if streams != nil {
			streams <- s
		}
		<-t.Context().Done()
	}
}

func receive(tb testing.TB, s *Session, frame []byte) {
	tb.Helper()
	if err := s.Receive(frame); err != nil {
		tb.Fatalf("Receive(%s): %v", frameName(frame[0]), err)
	}
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed)}).Read(b)
	return b
}

// randomSize returns a size from 1 to 128 KiB, spread over the orders of magnitude.
func randomSize(rng *rand.Rand) int { return 1 + rng.IntN(1<<rng.IntN(18)) }

// exchange writes data in pieces of random sizes then half-closes, while it reads the peer's
// data in pieces of random sizes until EOF; it returns the SHA-256 of what it read.
func exchange(s *Stream, data []byte, seed uint64) ([32]byte, error) {
	writeErr := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(seed, 1))
		for rest := data; len(rest) > 0; {
			n := min(len(rest), randomSize(rng))
			if _, err := s.Write(rest[:n]); err != nil {
				writeErr <- err
				return
			}
			rest = rest[n:]
		}
		writeErr <- s.CloseWrite()
	}()
	rng := rand.New(rand.NewPCG(seed, 2))
	h := sha256.New()
	buf := make([]byte, 1<<17)
	for {
		n, err := s.Read(buf[:randomSize(rng)])
		h.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return [32]byte{}, fmt.Errorf("read: %w", err)
		}
	}
	if err := <-writeErr; err != nil {
		return [32]byte{}, fmt.Errorf("write: %w", err)
	}
	return [32]byte(h.Sum(nil)), nil
}

// roundTrip sends data through an echo stream and checks it comes back, then closes s.
func roundTrip(s *Stream, data []byte) error {
	defer s.Close()
	writeErr := make(chan error, 1)
	go func() {
		_, err := s.Write(data)
		if err == nil {
			err = s.CloseWrite()
		}
		writeErr <- err
	}()
	got, err := io.ReadAll(s)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if err := <-writeErr; err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("echoed %d bytes differ from the %d sent", len(got), len(data))
	}
	return nil
}

func echoRoundTrip(tb testing.TB, sess *Session, size int, seed uint64) {
	tb.Helper()
	s, err := sess.Open(context.Background(), "echo", nil)
	if err != nil {
		tb.Fatalf("open echo: %v", err)
	}
	if err := roundTrip(s, randomBytes(size, seed)); err != nil {
		tb.Fatal(err)
	}
}

// Rule 1: bytes arrive in order and intact, both ways at once, whatever the write and read
// sizes.
func TestTransferBothWays(t *testing.T) {
	const size = 10 << 20
	agentData, serverData := randomBytes(size, 1), randomBytes(size, 2)
	type outcome struct {
		sum [32]byte
		err error
	}
	agentGot := make(chan outcome, 1)
	p := newPair(t, Options{}, Options{Accept: acceptKinds(map[string]Handler{
		"swap": func(_ context.Context, s *Stream) {
			sum, err := exchange(s, agentData, 3)
			agentGot <- outcome{sum, err}
		},
	})})

	s, err := p.server.Open(context.Background(), "swap", nil)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := exchange(s, serverData, 4)
	if err != nil {
		t.Fatalf("server side: %v", err)
	}
	if sum != sha256.Sum256(agentData) {
		t.Error("the server did not receive the agent's data intact")
	}
	got := within(t, agentGot, "agent handler")
	if got.err != nil {
		t.Fatalf("agent side: %v", got.err)
	}
	if got.sum != sha256.Sum256(serverData) {
		t.Error("the agent did not receive the server's data intact")
	}
	// Both directions finished: the stream is forgotten on both sides without Close.
	p.waitIdle(t)
	s.Close()
}

// Rule 2, receiving side: credit goes back only as the application reads, batched by half
// windows, and a peer exceeding its credit gets the stream reset.
func TestWindowGrantedAsDataIsRead(t *testing.T) {
	rec := newRecorder()
	streams := make(chan *Stream, 1)
	sess := NewSession(rec.send, Options{Window: 1024, Accept: acceptKinds(map[string]Handler{"hold": hold(t, streams)})})
	t.Cleanup(func() { sess.Close(nil) })

	receive(t, sess, openFrame(1, "hold", 0))
	var accept acceptPayload
	if err := json.Unmarshal(rec.expect(t, frameAccept, 1), &accept); err != nil || accept.Window != 1024 {
		t.Fatalf("ACCEPT window %d (%v), want 1024", accept.Window, err)
	}
	s := within(t, streams, "handler")

	receive(t, sess, dataFrame(1, 600))
	buf := make([]byte, 300)
	for range 2 { // less than half a window, then more
		if _, err := io.ReadFull(s, buf); err != nil {
			t.Fatal(err)
		}
	}
	// The first frame after ACCEPT: no WINDOW went out after the first 300 bytes.
	if got := windowOf(t, rec.expect(t, frameWindow, 1)); got != 600 {
		t.Fatalf("WINDOW %d, want 600", got)
	}

	// The credit is a full window again: exactly that much is accepted and buffered...
	receive(t, sess, dataFrame(1, 1000))
	receive(t, sess, dataFrame(1, 24))
	if got := sess.Stats(); got.Buffered != 1024 {
		t.Fatalf("Buffered %d, want 1024", got.Buffered)
	}
	// ...and one byte more is a protocol error.
	receive(t, sess, dataFrame(1, 1))
	rec.expectReset(t, 1, CodeProtocolError)
	if _, err := s.Read(buf); resetCode(err) != CodeProtocolError {
		t.Fatalf("Read after the violation: %v, want a protocol_error reset", err)
	}
	if got := sess.Stats(); got != (Stats{}) {
		t.Fatalf("Stats %+v after the reset, want zero", got)
	}
}

// Rule 2, sending side: a writer sends no more than its credit, waits without it, and goes on
// as credit comes; large writes are cut into MaxFrameData frames.
func TestWriteWaitsForCredit(t *testing.T) {
	const maxFrame = 64
	rec := newRecorder()
	written := make(chan result, 1)
	sess := NewSession(rec.send, Options{MaxFrameData: maxFrame, Accept: acceptKinds(map[string]Handler{
		"write": func(ctx context.Context, s *Stream) {
			n, err := s.Write(bytes.Repeat([]byte{'y'}, 1000))
			written <- result{n, err}
			<-ctx.Done()
		},
	})})
	t.Cleanup(func() { sess.Close(nil) })

	expectData := func(want int) {
		t.Helper()
		for got := 0; got < want; {
			payload := rec.expect(t, frameData, 1)
			if len(payload) > maxFrame {
				t.Fatalf("DATA of %d bytes, more than MaxFrameData", len(payload))
			}
			if got += len(payload); got > want {
				t.Fatalf("sent %d bytes of DATA with %d bytes of credit", got, want)
			}
		}
	}
	receive(t, sess, openFrame(1, "write", 100))
	rec.expect(t, frameAccept, 1)
	expectData(100)
	notWithin(t, written, 200*time.Millisecond, "Write without credit")
	receive(t, sess, newWindowFrame(1, 50))
	expectData(50)
	receive(t, sess, newWindowFrame(1, 10000))
	expectData(850)
	if r := within(t, written, "Write"); r.n != 1000 || r.err != nil {
		t.Fatalf("Write = %d, %v; want 1000, nil", r.n, r.err)
	}
	if n := len(rec.frames); n != 0 {
		t.Fatalf("%d more frames sent", n)
	}
}

// Rule 3: a reader that stops reading pauses the writer with at most a window buffered.
func TestUnreadStreamBoundsMemory(t *testing.T) {
	const total = 64 << 20
	streams := make(chan *Stream, 1)
	p := newPair(t, Options{}, Options{Accept: acceptKinds(map[string]Handler{"hold": hold(t, streams)})})
	s, err := p.server.Open(context.Background(), "hold", nil)
	if err != nil {
		t.Fatal(err)
	}
	agentSide := within(t, streams, "handler")

	var written atomic.Int64
	writerDone := make(chan error, 1)
	var writerSum [32]byte
	go func() {
		h := sha256.New()
		rng := rand.NewChaCha8([32]byte{7})
		buf := make([]byte, 16<<10)
		for written.Load() < total {
			rng.Read(buf)
			h.Write(buf)
			n, err := s.Write(buf)
			written.Add(int64(n))
			if err != nil {
				writerDone <- err
				return
			}
		}
		writerSum = [32]byte(h.Sum(nil))
		writerDone <- s.CloseWrite()
	}()

	waitFor(t, "a full window buffered", func() bool { return p.agent.Stats().Buffered == DefaultWindow })
	before := written.Load()
	notWithin(t, writerDone, 200*time.Millisecond, "the writer")
	if after := written.Load(); after != before {
		t.Fatalf("the writer went on from %d to %d bytes with nobody reading", before, after)
	}
	if before > DefaultWindow+DefaultMaxFrameData {
		t.Fatalf("the writer wrote %d bytes, more than a window", before)
	}
	if got := p.agent.Stats(); got.Buffered > DefaultWindow {
		t.Fatalf("Buffered %d, more than a window", got.Buffered)
	}

	h := sha256.New()
	n, err := io.Copy(h, agentSide)
	if err != nil || n != total {
		t.Fatalf("read %d bytes (%v), want %d", n, err, total)
	}
	if err := within(t, writerDone, "the writer"); err != nil {
		t.Fatal(err)
	}
	if [32]byte(h.Sum(nil)) != writerSum {
		t.Fatal("the data read differs from the data written")
	}
}

// Rule 4: Receive never waits for send, even for the frames it must answer.
func TestReceiveDoesNotWaitForSend(t *testing.T) {
	release := make(chan struct{})
	blockedSend := func(context.Context, []byte) error { <-release; return nil } // ignores ctx, too
	sess := NewSession(blockedSend, Options{MaxStreams: 2, Accept: acceptKinds(map[string]Handler{"hold": hold(t, nil)})})
	t.Cleanup(func() { sess.Close(nil); close(release) })

	done := make(chan struct{})
	go func() {
		defer close(done)
		frames := [][]byte{
			dataFrame(99, 1),          // a stream never opened: answered RESET
			openFrame(1, "nope", 100), // refused
		}
		for id := uint32(3); id < 6000; id += 2 { // two accepted, the others too many
			frames = append(frames, openFrame(id, "hold", 100))
		}
		for _, frame := range frames {
			if err := sess.Receive(frame); err != nil {
				t.Error(err)
			}
		}
	}()
	within(t, done, "Receive")
	waitFor(t, "two streams open", func() bool { return sess.Stats().Streams == 2 })
}

// Rule 5: a writer waiting for credit does not hold the connection: other streams' DATA and
// WINDOW frames still go out.
func TestBlockedWriterDoesNotHoldConnection(t *testing.T) {
	streams := make(chan *Stream, 1)
	p := newPair(t, Options{}, Options{Accept: acceptKinds(map[string]Handler{"hold": hold(t, streams), "echo": echo})})
	stuck, err := p.server.Open(context.Background(), "hold", nil)
	if err != nil {
		t.Fatal(err)
	}
	agentSide := within(t, streams, "handler")
	written := make(chan result, 1)
	go func() {
		n, err := stuck.Write(make([]byte, 2*DefaultWindow))
		written <- result{n, err}
	}()
	waitFor(t, "the held stream's window full", func() bool { return p.agent.Stats().Buffered == DefaultWindow })

	// An echo round trip needs DATA and WINDOW frames both ways.
	echoRoundTrip(t, p.server, 4*DefaultWindow, 1)
	select {
	case r := <-written:
		t.Fatalf("the Write without credit returned %v", r)
	default:
	}

	if _, err := io.ReadFull(agentSide, make([]byte, 2*DefaultWindow)); err != nil {
		t.Fatal(err)
	}
	if r := within(t, written, "Write"); r.n != 2*DefaultWindow || r.err != nil {
		t.Fatalf("Write = %d, %v", r.n, r.err)
	}
}

// Rule 6: CloseWrite half-closes: the peer reads EOF after the data and can still answer; the
// stream is forgotten once both directions are done.
func TestCloseWrite(t *testing.T) {
	p := newPair(t, Options{}, Options{Accept: acceptKinds(map[string]Handler{
		"count": func(_ context.Context, s *Stream) {
			n, err := io.Copy(io.Discard, s)
			if err == nil {
				fmt.Fprintf(s, "read %d bytes", n)
			}
			// Returning closes the stream: the opener finished, so that sends FIN.
		},
	})})
	s, err := p.server.Open(context.Background(), "count", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(make([]byte, 5000)); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after CloseWrite: %v, want net.ErrClosed", err)
	}
	reply, err := io.ReadAll(s)
	if err != nil || string(reply) != "read 5000 bytes" {
		t.Fatalf("reply %q (%v)", reply, err)
	}
	p.waitIdle(t)

	s.Close()
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Close: %v, want net.ErrClosed", err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v, want net.ErrClosed", err)
	}
}

// Rule 6: Close before the peer finished resets the stream, so the peer's blocked Write fails
// instead of waiting for ever.
func TestCloseResetsUnfinishedPeer(t *testing.T) {
	writeErr := make(chan error, 1)
	p := newPair(t, Options{}, Options{Accept: acceptKinds(map[string]Handler{
		"flood": func(_ context.Context, s *Stream) {
			buf := make([]byte, 4096)
			for {
				if _, err := s.Write(buf); err != nil {
					writeErr <- err
					return
				}
			}
		},
	})})
	s, err := p.server.Open(context.Background(), "flood", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s, make([]byte, 10000)); err != nil {
		t.Fatal(err)
	}
	// Let the flood block on credit, with data buffered that Close must release.
	waitFor(t, "the window full", func() bool { return p.server.Stats().Buffered == DefaultWindow-10000 })
	s.Close()
	if got := p.server.Stats(); got != (Stats{}) {
		t.Fatalf("Stats %+v right after Close, want zero", got)
	}
	if err := within(t, writeErr, "the flooding Write"); resetCode(err) != CodeCancelled {
		t.Fatalf("the peer's Write failed with %v, want a cancelled reset", err)
	}
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Close: %v, want net.ErrClosed", err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v, want net.ErrClosed", err)
	}
	p.waitIdle(t)
}

// Rule 7: MaxStreams streams work at once, and the peer's next OPEN is refused while they go on.
func TestMaxStreams(t *testing.T) {
	const n = 100
	p := newPair(t, Options{MaxStreams: 2 * n}, Options{MaxStreams: n, Accept: acceptEcho})
	ctx := context.Background()
	streams := make([]*Stream, n)
	for i := range streams {
		var err error
		if streams[i], err = p.server.Open(ctx, "echo", nil); err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	if _, err := p.server.Open(ctx, "echo", nil); resetCode(err) != CodeTooManyStreams {
		t.Fatalf("open %d: %v, want a too_many_streams reset", n+1, err)
	}

	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Go(func() { errs <- roundTrip(s, randomBytes(64<<10, uint64(i))) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	p.waitIdle(t)
	echoRoundTrip(t, p.server, 1000, 0) // ended streams no longer count
}

// Rule 7: Open beyond the local cap fails at once, without sending anything.
func TestOpenBeyondLocalCap(t *testing.T) {
	p := newPair(t, Options{MaxStreams: 2}, Options{Accept: acceptEcho})
	ctx := context.Background()
	for range 2 {
		if _, err := p.server.Open(ctx, "echo", nil); err != nil {
			t.Fatal(err)
		}
	}
	sent := p.toAgent.sent.Load()
	if _, err := p.server.Open(ctx, "echo", nil); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("third Open: %v, want ErrTooManyStreams", err)
	}
	if got := p.toAgent.sent.Load(); got != sent {
		t.Fatalf("%d frames sent by the refused Open", got-sent)
	}
}

// Rule 8: when the connection drops, Close makes every blocked call return with its error,
// cancels handlers, releases everything and leaves no goroutine behind.
func TestDropUnblocksEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	errDropped := errors.New("connection dropped")
	agentCalls := make(chan error, 4)
	releaseAccept := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-releaseAccept:
		default:
			close(releaseAccept)
		}
	})
	p := newPair(t, Options{}, Options{Accept: func(kind string, _ json.RawMessage) (Handler, error) {
		if kind == "slow" {
			<-releaseAccept
		}
		return func(ctx context.Context, s *Stream) {
			if kind == "read" {
				_, err := s.Read(make([]byte, 1))
				agentCalls <- err
			}
			<-ctx.Done()
			agentCalls <- context.Cause(ctx)
		}, nil
	}})
	ctx := context.Background()
	reader, err := p.server.Open(ctx, "read", nil)
	if err != nil {
		t.Fatal(err)
	}
	writer, err := p.server.Open(ctx, "sink", nil)
	if err != nil {
		t.Fatal(err)
	}
	serverCalls := make(chan error, 3)
	go func() {
		_, err := reader.Read(make([]byte, 1))
		serverCalls <- err
	}()
	go func() {
		_, err := writer.Write(make([]byte, 2*DefaultWindow))
		serverCalls <- err
	}()
	go func() {
		_, err := p.server.Open(ctx, "slow", nil)
		serverCalls <- err
	}()
	waitFor(t, "blocked Write and Open", func() bool {
		return p.agent.Stats() == Stats{Streams: 3, Buffered: DefaultWindow}
	})
	notWithin(t, serverCalls, 100*time.Millisecond, "a blocked call")

	p.drop(errDropped)
	for range 3 {
		if err := within(t, serverCalls, "a blocked call"); !errors.Is(err, errDropped) {
			t.Fatalf("blocked call returned %v, want the drop's error", err)
		}
	}
	for range 3 { // the agent's blocked Read, and both handlers' contexts
		if err := within(t, agentCalls, "an agent handler"); !errors.Is(err, errDropped) {
			t.Fatalf("agent side: %v, want the drop's error", err)
		}
	}
	if s, a := p.server.Stats(), p.agent.Stats(); s != (Stats{}) || a != (Stats{}) {
		t.Fatalf("Stats after the drop: server %+v, agent %+v", s, a)
	}
	if _, err := p.server.Open(ctx, "echo", nil); !errors.Is(err, errDropped) {
		t.Fatalf("Open after the drop: %v", err)
	}
	close(releaseAccept)
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// Rule 9: an Open given up before ACCEPT returns ctx.Err() and resets the stream, which
// cancels the handler on the other side.
func TestOpenCancelled(t *testing.T) {
	t.Run("before OPEN", func(t *testing.T) {
		p := newPair(t, Options{}, Options{Accept: acceptEcho})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := p.server.Open(ctx, "echo", nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("Open: %v, want context.Canceled", err)
		}
		if n := p.toAgent.sent.Load(); n != 0 {
			t.Fatalf("%d frames sent", n)
		}
		if got := p.server.Stats(); got != (Stats{}) {
			t.Fatalf("Stats %+v", got)
		}
	})
	t.Run("after OPEN", func(t *testing.T) {
		started := make(chan struct{})
		handlerCause := make(chan error, 1)
		p := newPair(t, Options{}, Options{Accept: acceptKinds(map[string]Handler{
			"wait": func(ctx context.Context, _ *Stream) {
				close(started)
				<-ctx.Done()
				handlerCause <- context.Cause(ctx)
			},
		})})
		p.toServer.pause() // the ACCEPT does not reach the opener
		ctx, cancel := context.WithCancel(context.Background())
		opened := make(chan error, 1)
		go func() {
			_, err := p.server.Open(ctx, "wait", nil)
			opened <- err
		}()
		within(t, started, "the handler")
		cancel()
		if err := within(t, opened, "Open"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Open: %v, want context.Canceled", err)
		}
		if cause := within(t, handlerCause, "the handler's context"); resetCode(cause) != CodeCancelled {
			t.Fatalf("handler context cause %v, want a cancelled reset", cause)
		}
		p.toServer.resume() // the late ACCEPT is ignored
		p.waitIdle(t)
	})
}

// Rule 10: a refused kind fails Open with the refusal's code and message.
func TestRefused(t *testing.T) {
	p := newPair(t, Options{}, Options{Accept: acceptEcho})
	ctx := context.Background()
	_, err := p.server.Open(ctx, "nope", nil)
	re, ok := errors.AsType[*ResetError](err)
	if !ok || re.Code != CodeRefused || re.Message != `unknown kind "nope"` {
		t.Fatalf("Open of an unknown kind: %v, want a refused reset with Accept's message", err)
	}
	// Without Accept, a session refuses everything.
	if _, err := p.agent.Open(ctx, "echo", nil); resetCode(err) != CodeRefused {
		t.Fatalf("Open towards a session without Accept: %v", err)
	}
	p.waitIdle(t)
}

func TestKindArgsAndIDs(t *testing.T) {
	type args struct {
		Cols int `json:"cols"`
	}
	seen := make(chan *Stream, 2)
	accept := func(kind string, raw json.RawMessage) (Handler, error) {
		return func(ctx context.Context, s *Stream) { seen <- s; <-ctx.Done() }, nil
	}
	p := newPair(t, Options{Accept: accept}, Options{Accept: accept})
	ctx := context.Background()
	s, err := p.server.Open(ctx, "pty", args{Cols: 80})
	if err != nil {
		t.Fatal(err)
	}
	peer := within(t, seen, "handler")
	var got args
	if err := json.Unmarshal(peer.Args(), &got); err != nil || got.Cols != 80 || peer.Kind() != "pty" {
		t.Fatalf("the handler saw kind %q args %s", peer.Kind(), peer.Args())
	}
	if s.ID() != peer.ID() || s.ID()%2 != 1 {
		t.Fatalf("IDs %d and %d, want the same odd ID", s.ID(), peer.ID())
	}
	if s.RemoteAddr().String() != fmt.Sprintf("pty/%d", s.ID()) {
		t.Fatalf("RemoteAddr %s", s.RemoteAddr())
	}
	back, err := p.agent.Open(ctx, "back", nil)
	if err != nil {
		t.Fatal(err)
	}
	if peer := within(t, seen, "handler"); back.ID()%2 != 0 || peer.Args() != nil {
		t.Fatalf("agent-opened stream %d with args %s, want an even ID and no args", back.ID(), peer.Args())
	}
}

func TestDeadlines(t *testing.T) {
	streams := make(chan *Stream, 1)
	p := newPair(t, Options{}, Options{Accept: acceptKinds(map[string]Handler{"hold": hold(t, streams)})})
	s, err := p.server.Open(context.Background(), "hold", nil)
	if err != nil {
		t.Fatal(err)
	}
	peer := within(t, streams, "handler")
	buf := make([]byte, 10)

	s.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	for range 2 { // the blocked Read, then a later one
		_, err := s.Read(buf)
		if ne, ok := errors.AsType[net.Error](err); !errors.Is(err, os.ErrDeadlineExceeded) || !ok || !ne.Timeout() {
			t.Fatalf("Read past the deadline: %v", err)
		}
	}
	s.SetReadDeadline(time.Time{})
	peer.Write([]byte("hi"))
	if n, err := s.Read(buf); err != nil || string(buf[:n]) != "hi" {
		t.Fatalf("Read after clearing the deadline: %q, %v", buf[:n], err)
	}

	// Moving the deadline wakes a blocked Read.
	read := make(chan error, 1)
	go func() {
		_, err := s.Read(buf)
		read <- err
	}()
	notWithin(t, read, 50*time.Millisecond, "Read")
	s.SetReadDeadline(time.Now().Add(-time.Second))
	if err := within(t, read, "Read"); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read: %v", err)
	}

	// A Write waiting for credit gives up at the deadline, having sent what the credit allowed.
	s.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := s.Write(make([]byte, 2*DefaultWindow))
	if n != DefaultWindow || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write = %d, %v; want a window, then the deadline", n, err)
	}
	if _, err := s.Write(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("later Write: %v", err)
	}
	s.SetWriteDeadline(time.Time{})
	if _, err := io.ReadFull(peer, make([]byte, DefaultWindow)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(buf); err != nil {
		t.Fatalf("Write after clearing the deadline: %v", err)
	}
}

// Frames for streams that never existed are answered; late frames of ended streams and RESETs
// are not; unparsable frames are Receive's error.
func TestUnknownAndLateFrames(t *testing.T) {
	rec := newRecorder()
	sess := NewSession(rec.send, Options{Accept: acceptEcho})
	t.Cleanup(func() { sess.Close(nil) })

	receive(t, sess, dataFrame(5, 1))
	rec.expectReset(t, 5, CodeProtocolError)

	receive(t, sess, openFrame(7, "echo", 1000))
	rec.expect(t, frameAccept, 7)
	receive(t, sess, newFrame(frameFin, 7, nil))
	rec.expect(t, frameFin, 7) // echo half-closes at EOF, and the stream is over
	waitFor(t, "the stream forgotten", func() bool { return sess.Stats().Streams == 0 })

	receive(t, sess, dataFrame(7, 1))                    // late: ignored
	receive(t, sess, newResetFrame(11, "cancelled", "")) // RESET is never answered
	receive(t, sess, dataFrame(9, 1))
	rec.expectReset(t, 9, CodeProtocolError) // the next frame: the two above had no answer
	receive(t, sess, openFrame(2, "echo", 1000))
	rec.expectReset(t, 2, CodeProtocolError) // this side's parity
	receive(t, sess, openFrame(7, "echo", 1000))
	rec.expectReset(t, 7, CodeProtocolError) // a used ID

	for _, frame := range [][]byte{{frameData, 0, 0}, {0, 0, 0, 0, 1}, {7, 0, 0, 0, 1}} {
		if err := sess.Receive(frame); !errors.Is(err, ErrMalformedFrame) {
			t.Errorf("Receive(%v): %v, want ErrMalformedFrame", frame, err)
		}
	}
}

// Violations on an open stream reset that stream only.
func TestProtocolViolations(t *testing.T) {
	tests := map[string][][]byte{
		"empty DATA":         {newFrame(frameData, 1, nil)},
		"DATA after FIN":     {newFrame(frameFin, 1, nil), dataFrame(1, 1)},
		"second FIN":         {newFrame(frameFin, 1, nil), newFrame(frameFin, 1, nil)},
		"FIN with payload":   {newFrame(frameFin, 1, []byte{0})},
		"short WINDOW":       {newFrame(frameWindow, 1, []byte{0, 1})},
		"zero WINDOW":        {newWindowFrame(1, 0)},
		"WINDOW overflow":    {newWindowFrame(1, math.MaxUint32)},
		"ACCEPT from opener": {newJSONFrame(frameAccept, 1, acceptPayload{Window: 1})},
		"OPEN again":         {openFrame(1, "hold", 10)},
	}
	for name, frames := range tests {
		t.Run(name, func(t *testing.T) {
			rec := newRecorder()
			streams := make(chan *Stream, 2)
			sess := NewSession(rec.send, Options{Accept: acceptKinds(map[string]Handler{"hold": hold(t, streams)})})
			t.Cleanup(func() { sess.Close(nil) })
			receive(t, sess, openFrame(1, "hold", 10))
			receive(t, sess, openFrame(3, "hold", 10))
			for range 2 {
				if typ, _, _ := rec.next(t); typ != frameAccept {
					t.Fatalf("sent %s, want ACCEPT", frameName(typ))
				}
			}
			s := within(t, streams, "handler")
			if other := within(t, streams, "handler"); other.ID() == 1 {
				s = other
			}
			for _, frame := range frames {
				receive(t, sess, frame)
			}
			rec.expectReset(t, 1, CodeProtocolError)
			if _, err := s.Read(make([]byte, 1)); resetCode(err) != CodeProtocolError {
				t.Fatalf("Read: %v, want a protocol_error reset", err)
			}
			if got := sess.Stats().Streams; got != 1 {
				t.Fatalf("%d streams open, want the other one", got)
			}
		})
	}
}

// streamListener is a net.Listener of the streams a handler accepts, to serve HTTP on them.
type streamListener struct {
	conns     chan net.Conn
	accepted  atomic.Int32
	done      chan struct{}
	closeOnce sync.Once
}

func (l *streamListener) handler(ctx context.Context, s *Stream) {
	select {
	case l.conns <- s:
		l.accepted.Add(1)
		<-ctx.Done() // the HTTP server owns the stream until it closes it
	case <-l.done:
	}
}

func (l *streamListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *streamListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *streamListener) Addr() net.Addr { return Addr{Kind: "http"} }

// A Stream serves as the connection of an HTTP client and server, keep-alive included.
func TestHTTPOverStreams(t *testing.T) {
	l := &streamListener{conns: make(chan net.Conn), done: make(chan struct{})}
	p := newPair(t, Options{}, Options{Accept: acceptKinds(map[string]Handler{"http": l.handler})})
	srv := &http.Server{
		ReadHeaderTimeout: 5 * time.Second, // exercises the deadlines
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Write(body)
		}),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	transport := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return p.server.Open(ctx, "http", nil)
	}}
	client := &http.Client{Transport: transport}
	for i := range 3 {
		body := randomBytes(1<<20, uint64(i))
		resp, err := client.Post("http://device/echo", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
			t.Fatalf("request %d: status %d, %d bytes back (%v)", i, resp.StatusCode, len(got), err)
		}
	}
	if n := l.accepted.Load(); n != 1 {
		t.Errorf("%d streams for three requests, want one kept alive", n)
	}
	transport.CloseIdleConnections()
	srv.Close()
	if err := within(t, served, "Serve"); !errors.Is(err, http.ErrServerClosed) {
		t.Fatal(err)
	}
	p.waitIdle(t)
}
