// Package proctest holds what tests that start real processes (the server, agents, package
// tools) share: a buffer their output can be written to from several goroutines, and a free
// loopback address for a server to listen on.
package proctest

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// Output collects a child process's output; safe to read while the process writes.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Output) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Output) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// FreeAddr returns a loopback address with a port free at the time of the call.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
