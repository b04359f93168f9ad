// Package senders runs a node's senders of queued outbound work (webhook deliveries, alert
// notifications, phone pushes): a few goroutines that send whatever is due, then wait for a
// wake-up or the next poll. The work itself lives in the database, claimed row by row, so any
// number of nodes may run senders over the same queue.
package senders

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// wakeDelay is how long a woken sender waits before looking: wake-ups come from inside the
// transaction that queued the work, which needs a moment to commit (the next poll catches a
// slower one).
const wakeDelay = 50 * time.Millisecond

// Pool is one kind of sender on this node.
type Pool struct {
	name    string
	logger  *slog.Logger
	workers int
	poll    time.Duration
	// sendDue sends what is due until nothing is left and says how much it sent.
	sendDue func(ctx context.Context) (int, error)
	wake    chan struct{}

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a pool of workers goroutines running sendDue every poll and on Wake; name
// appears in its log lines.
func New(name string, logger *slog.Logger, workers int, poll time.Duration, sendDue func(ctx context.Context) (int, error)) *Pool {
	return &Pool{name: name, logger: logger, workers: max(workers, 1), poll: poll, sendDue: sendDue, wake: make(chan struct{}, 1)}
}

// Wake makes a sender look for due work now.
func (p *Pool) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Start runs the senders until Stop; starting a started pool does nothing.
func (p *Pool) Start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	p.cancel, p.done = cancel, done
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for range p.workers {
			wg.Go(func() { p.work(ctx) })
		}
		wg.Wait()
	}()
}

// Stop ends the senders and waits for them (work in flight is cut short and retried later).
func (p *Pool) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
	p.cancel = nil
}

func (p *Pool) work(ctx context.Context) {
	t := time.NewTicker(p.poll)
	defer t.Stop()
	for {
		if _, err := p.sendDue(ctx); err != nil && ctx.Err() == nil {
			p.logger.WarnContext(ctx, p.name+" failed; retrying", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.wake:
			select {
			case <-ctx.Done():
				return
			case <-time.After(wakeDelay):
			}
		}
	}
}
