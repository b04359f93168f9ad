package notifications

import (
	"context"
	"time"
)

// Timing of the push sender.
const (
	// pushPollEvery is how often an idle node looks for due pushes.
	pushPollEvery = 2 * time.Second
	// pushWakeDelay is how long a woken sender waits for the waking transaction (the inapp
	// consumer's) to commit; the next poll catches a slower one.
	pushWakeDelay = 50 * time.Millisecond
)

// wakePush makes the sender look for due pushes now.
func (s *Service) wakePush() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start runs this node's push sender until Stop; it does nothing when push is off.
func (s *Service) Start(ctx context.Context) {
	s.stop.Lock()
	defer s.stop.Unlock()
	if s.stop.cancel != nil || !s.PushEnabled() {
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	s.stop.cancel, s.stop.done = cancel, done
	go func() {
		defer close(done)
		s.work(ctx)
	}()
}

// Stop ends the sender and waits for it (a push in flight is cut short and retried).
func (s *Service) Stop() {
	s.stop.Lock()
	defer s.stop.Unlock()
	if s.stop.cancel == nil {
		return
	}
	s.stop.cancel()
	<-s.stop.done
	s.stop.cancel = nil
}

func (s *Service) work(ctx context.Context) {
	t := time.NewTicker(pushPollEvery)
	defer t.Stop()
	for {
		if _, err := s.SendDue(ctx); err != nil && ctx.Err() == nil {
			s.logger.WarnContext(ctx, "push sending failed; retrying", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
			select {
			case <-ctx.Done():
				return
			case <-time.After(pushWakeDelay):
			}
		}
	}
}
