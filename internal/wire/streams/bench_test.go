package streams

import (
	"context"
	"io"
	"testing"
)

// BenchmarkStreamThroughput measures one stream carrying data one way between two sessions
// connected by in-memory message queues.
func BenchmarkStreamThroughput(b *testing.B) {
	const chunk = 64 << 10
	read := make(chan int64, 1)
	p := newPair(b, Options{}, Options{Accept: acceptKinds(map[string]Handler{
		"sink": func(_ context.Context, s *Stream) {
			n, _ := io.Copy(io.Discard, s)
			read <- n
		},
	})})
	s, err := p.server.Open(context.Background(), "sink", nil)
	if err != nil {
		b.Fatal(err)
	}
	data := randomBytes(chunk, 1)
	b.SetBytes(chunk)
	for b.Loop() {
		if _, err := s.Write(data); err != nil {
			b.Fatal(err)
		}
	}
	s.CloseWrite()
	if n := <-read; n != int64(b.N)*chunk {
		b.Fatalf("read %d bytes, want %d", n, int64(b.N)*chunk)
	}
	s.Close()
}

// BenchmarkOpenClose measures a stream's whole life: OPEN, ACCEPT, both FINs.
func BenchmarkOpenClose(b *testing.B) {
	p := newPair(b, Options{}, Options{Accept: acceptEcho})
	ctx := context.Background()
	buf := make([]byte, 1)
	for b.Loop() {
		s, err := p.server.Open(ctx, "echo", nil)
		if err != nil {
			b.Fatal(err)
		}
		s.CloseWrite()
		if _, err := s.Read(buf); err != io.EOF {
			b.Fatalf("Read: %v, want EOF", err)
		}
		s.Close()
	}
}
