package jobs

import (
	"context"
	"log/slog"
	"time"
)

// Loop runs work on one goroutine of this node every interval, and at once when woken, until
// stopped: a worker that every node runs for work it claims row by row (conditional
// updates), so nodes never repeat one another's.
type Loop struct {
	what   string
	every  time.Duration
	run    func(context.Context) error
	logger *slog.Logger
	wake   chan struct{}
	stop   context.CancelFunc
	done   chan struct{}
}

// NewLoop returns a stopped Loop running run; what names the work in the log.
func NewLoop(what string, every time.Duration, logger *slog.Logger, run func(context.Context) error) *Loop {
	return &Loop{what: what, every: every, run: run, logger: logger, wake: make(chan struct{}, 1)}
}

// Wake makes the loop run now (or right after the round under way).
func (l *Loop) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Start starts the loop until Stop or the end of ctx.
func (l *Loop) Start(ctx context.Context) {
	ctx, l.stop = context.WithCancel(ctx)
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		t := time.NewTicker(l.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-l.wake:
			}
			if err := l.run(ctx); err != nil && ctx.Err() == nil {
				l.logger.WarnContext(ctx, l.what, "error", err)
			}
		}
	}()
}

// Stop stops the loop and waits for its round under way.
func (l *Loop) Stop() {
	if l.stop != nil {
		l.stop()
		<-l.done
	}
}
