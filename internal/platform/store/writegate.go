package store

import (
	"context"
	"slices"
	"sync"
)

// writeGate lets this process's writes run at most slots at a time (SQLite: its one writer;
// PostgreSQL: fewer than the request connections, so reads always find one), in arrival
// order, except that urgent writes (agents' heartbeats) go before every ordinary one waiting.
// A burst of thousands of command results then delays a heartbeat by the writes under way,
// not by the whole queue, and agents are not taken for silent.
type writeGate struct {
	mu             sync.Mutex
	slots, inUse   int
	urgent, normal []chan struct{}
}

func newWriteGate(slots int) *writeGate { return &writeGate{slots: max(1, slots)} }

// lock waits for the writer; false with ctx's error when ctx ends first.
func (g *writeGate) lock(ctx context.Context, urgent bool) error {
	g.mu.Lock()
	if g.inUse < g.slots {
		g.inUse++
		g.mu.Unlock()
		return nil
	}
	turn := make(chan struct{})
	if urgent {
		g.urgent = append(g.urgent, turn)
	} else {
		g.normal = append(g.normal, turn)
	}
	g.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		queued := g.drop(turn)
		g.mu.Unlock()
		if !queued {
			// The turn came as ctx ended: pass it on.
			g.unlock()
		}
		return ctx.Err()
	}
}

// drop takes a waiter's turn out of the queues, reporting whether it was still there.
func (g *writeGate) drop(turn chan struct{}) bool {
	for _, q := range []*[]chan struct{}{&g.urgent, &g.normal} {
		if i := slices.Index(*q, turn); i >= 0 {
			*q = slices.Delete(*q, i, i+1)
			return true
		}
	}
	return false
}

// unlock hands the slot to the next urgent waiter, else the next ordinary one.
func (g *writeGate) unlock() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, q := range []*[]chan struct{}{&g.urgent, &g.normal} {
		if len(*q) > 0 {
			next := (*q)[0]
			*q = (*q)[1:]
			close(next)
			return
		}
	}
	g.inUse--
}
