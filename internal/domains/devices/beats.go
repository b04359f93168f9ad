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
// beginning and committing transactions, and the heartbeats would queue. Up to committers
// goroutines record groups while heartbeats wait (one on SQLite, whose file has one writer;
// more on PostgreSQL, where a group's statements each wait for a round trip), and end when
// none does.
type beats struct {
	mu         sync.Mutex
	queue      []*beat
	committers int
	running    int
	// recording are the devices (and roles) of the groups being recorded: their next
	// heartbeats wait for the next group, so that a device's updates keep their order.
	recording map[string]bool
}

// add queues b, starting commit when fewer goroutines than committers record the queue.
func (q *beats) add(b *beat, commit func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queue = append(q.queue, b)
	if q.running < max(1, q.committers) {
		q.running++
		go commit()
	}
}

func beatKey(b *beat) string { return b.agent.DeviceID + "/" + b.agent.Role }

// take returns the next group: up to maxBeatsPerCommit heartbeats in arrival order, one per
// device, and none of a device being recorded by another group. done must follow once the
// group is recorded. Nil when there is nothing to take; the caller then stops.
func (q *beats) take() []*beat {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.recording == nil {
		q.recording = map[string]bool{}
	}
	var group []*beat
	rest := q.queue[:0]
	for _, b := range q.queue {
		if key := beatKey(b); len(group) < maxBeatsPerCommit && !q.recording[key] {
			q.recording[key] = true
			group = append(group, b)
			continue
		}
		rest = append(rest, b)
	}
	clear(q.queue[len(rest):])
	q.queue = rest
	if len(group) == 0 {
		q.running--
	}
	return group
}

// done releases a recorded group's devices.
func (q *beats) done(group []*beat) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range group {
		delete(q.recording, beatKey(b))
	}
}
