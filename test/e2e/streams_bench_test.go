package e2e

import (
	"bytes"
	"io"
	"testing"

	"gale/internal/testkit/apptest"
)

// BenchmarkEchoStreamThroughput moves 1 MiB per operation through a real agent's echo stream
// and back (MB/s counts one direction), on one node and relayed across two.
func BenchmarkEchoStreamThroughput(b *testing.B) {
	forBenchLayouts(b, func(b *testing.B, opener, holder *apptest.Env) {
		agent := startStreamAgent(b, holder)
		st, err := hubOf(opener).OpenStream(b.Context(), agent.deviceID, "echo", nil)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		chunk := bytes.Repeat([]byte("gale"), 1<<18)
		back := make([]byte, len(chunk))
		b.SetBytes(int64(len(chunk)))
		b.ResetTimer()
		for range b.N {
			errc := make(chan error, 1)
			go func() {
				_, err := st.Write(chunk)
				errc <- err
			}()
			if _, err := io.ReadFull(st, back); err != nil {
				b.Fatal(err)
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEchoStreamRoundTrip sends 64 bytes through a real agent's echo stream and waits
// for them back: ns/op is the round trip, on one node and relayed across two.
func BenchmarkEchoStreamRoundTrip(b *testing.B) {
	forBenchLayouts(b, func(b *testing.B, opener, holder *apptest.Env) {
		agent := startStreamAgent(b, holder)
		st, err := hubOf(opener).OpenStream(b.Context(), agent.deviceID, "echo", nil)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		msg, back := bytes.Repeat([]byte{'x'}, 64), make([]byte, 64)
		b.ResetTimer()
		for range b.N {
			if _, err := st.Write(msg); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(st, back); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func forBenchLayouts(b *testing.B, bench func(b *testing.B, opener, holder *apptest.Env)) {
	for _, layout := range []struct {
		name   string
		across bool
	}{{"one node", false}, {"across nodes", true}} {
		b.Run(layout.name, func(b *testing.B) {
			opener, holder := streamNodes(b, layout.across)
			bench(b, opener, holder)
		})
	}
}
