package devices

import (
	"sync"

	"gale/internal/wire/agentproto"
)

// beat is one heartbeat waiting to be recorded.
type beat struct {
	agent Agent
	hb    agentproto.Heartbeat
	// waiting and err are the outcome, set before done is closed.
	waiting bool
	err     error
	done    chan struct{}
}

// maxBeatsPerCommit bounds a group: its transaction holds the writer, which other writes
// wait for.
const maxBeatsPerCommit = 256

// beats gathers the heartbeats that arrive while others are being recorded, to record them
// together: one transaction, one turn at the writer and one commit for the group instead of
// one each. A node taking thousands of heartbeats a second would otherwise spend its writer on
// beginning and committing transactions, and the heartbeats would queue. A goroutine records
// groups while heartbeats wait, and ends when none does.
type beats struct {
	mu      sync.Mutex
	queue   []*beat
	running bool
}

// add queues b, starting commit when no goroutine records the queue.
func (q *beats) add(b *beat, commit func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queue = append(q.queue, b)
	if !q.running {
		q.running = true
		go commit()
	}
}

// take returns the next group: up to maxBeatsPerCommit heartbeats in arrival order, one per
// device (a device's second heartbeat waits for the next group, so that each of its updates
// is its own). Nil when the queue is empty; the caller then stops.
func (q *beats) take() []*beat {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == 0 {
		q.running = false
		return nil
	}
	seen := make(map[string]bool, min(len(q.queue), maxBeatsPerCommit))
	var group []*beat
	rest := q.queue[:0]
	for _, b := range q.queue {
		key := b.agent.DeviceID + "/" + b.agent.Role
		if len(group) < maxBeatsPerCommit && !seen[key] {
			seen[key] = true
			group = append(group, b)
			continue
		}
		rest = append(rest, b)
	}
	clear(q.queue[len(rest):])
	q.queue = rest
	return group
}
