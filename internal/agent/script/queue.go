package script

import (
	"context"
	"slices"
	"sync"
)

// MaxConcurrent is how many scripts the agent runs at once. Others wait their turn in
// arrival order; the command's timeout counts from when the agent received it, waiting
// included, as the API documents it ("how long the agent may take once it has the command").
const MaxConcurrent = 4

// turns is the queue of scripts waiting to run.
var turns = newQueue(MaxConcurrent)

// queue hands out at most max turns at a time, first come first served.
type queue struct {
	mu      sync.Mutex
	max     int
	running int
	waiting []chan struct{}
}

func newQueue(max int) *queue { return &queue{max: max} }

// acquire waits for a turn; it fails only when ctx ends first.
func (q *queue) acquire(ctx context.Context) error {
	q.mu.Lock()
	if q.running < q.max {
		q.running++
		q.mu.Unlock()
		return nil
	}
	turn := make(chan struct{})
	q.waiting = append(q.waiting, turn)
	q.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
		q.mu.Lock()
		defer q.mu.Unlock()
		if i := slices.Index(q.waiting, turn); i >= 0 {
			q.waiting = slices.Delete(q.waiting, i, i+1)
			return ctx.Err()
		}
		// The turn was handed over as ctx ended: pass it on.
		q.releaseLocked()
		return ctx.Err()
	}
}

// release ends a turn, handing it to the first waiting script.
func (q *queue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.releaseLocked()
}

func (q *queue) releaseLocked() {
	if len(q.waiting) > 0 {
		close(q.waiting[0])
		q.waiting = q.waiting[1:]
		return
	}
	q.running--
}
