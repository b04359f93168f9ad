package streams

import (
	"context"
	"testing"
	"time"
)

// frameSequence encodes frames as FuzzReceive's input: each frame preceded by its length, one
// byte.
func frameSequence(frames ...[]byte) []byte {
	var input []byte
	for _, f := range frames {
		input = append(input, byte(len(f)))
		input = append(input, f...)
	}
	return input
}

// FuzzReceive feeds arbitrary frames to a session accepting echo streams: it must not panic,
// block, or break its memory bound, and Close must leave nothing behind.
func FuzzReceive(f *testing.F) {
	f.Add(frameSequence(openFrame(1, "echo", 64), dataFrame(1, 10), newWindowFrame(1, 5), newFrame(frameFin, 1, nil)))
	f.Add(frameSequence(openFrame(1, "echo", 0), dataFrame(1, 64), dataFrame(1, 1), newResetFrame(1, "cancelled", "")))
	f.Add(frameSequence(openFrame(3, "nope", 1), openFrame(1, "echo", 1), openFrame(5, "echo", 1), openFrame(7, "echo", 1), openFrame(9, "echo", 1), openFrame(11, "echo", 1)))
	f.Add(frameSequence(openFrame(2, "echo", 1), dataFrame(4, 1), newJSONFrame(frameAccept, 1, acceptPayload{Window: 1}), []byte{frameWindow, 0, 0, 0, 1, 0}))
	f.Add(frameSequence([]byte{frameOpen, 0, 0, 0, 1, '{'}, []byte{9, 0, 0, 0, 1}, []byte{frameData}))

	const window = 64
	f.Fuzz(func(t *testing.T, input []byte) {
		discard := func(context.Context, []byte) error { return nil }
		sess := NewSession(discard, Options{MaxStreams: 4, Window: window, MaxFrameData: 16, Accept: acceptEcho})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for len(input) > 0 {
				n := min(int(input[0]), len(input)-1)
				sess.Receive(input[1 : 1+n])
				input = input[1+n:]
				if st := sess.Stats(); st.Buffered > int64(st.Streams*window) {
					t.Errorf("Stats %+v: more buffered than the streams' windows", st)
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Receive blocked")
		}
		sess.Close(nil)
		if st := sess.Stats(); st != (Stats{}) {
			t.Fatalf("Stats %+v after Close", st)
		}
	})
}
