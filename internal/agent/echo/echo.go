// Package echo is the agent's "echo" stream: it sends back every byte it receives until the
// peer's FIN, then closes its own direction. It changes nothing on the machine, so every agent
// carries it; the server uses it to test its channel to an agent and to measure the latency
// and throughput that streams add.
package echo

import (
	"context"
	"io"

	"gale/internal/agent/capability"
	"gale/internal/wire/streams"
)

// Kind is the stream kind.
const Kind = "echo"

// Register registers the echo stream with reg.
func Register(reg *capability.Registry) { reg.Stream(Kind, Serve) }

// Serve copies s back to itself, then half-closes it so the peer reads EOF after the last
// byte.
func Serve(_ context.Context, s *streams.Stream) {
	if _, err := io.Copy(s, s); err != nil {
		return // reset or session closed: Close (by the session, on return) ends it
	}
	_ = s.CloseWrite()
}
