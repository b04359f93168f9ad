package notifications

import (
	"context"
	"time"
)

// pushPollEvery is how often an idle node looks for due pushes.
const pushPollEvery = 2 * time.Second

// Start runs this node's push sender until Stop; it does nothing when push is off.
func (s *Service) Start(ctx context.Context) {
	if s.PushEnabled() {
		s.senders.Start(ctx)
	}
}

// Stop ends the sender and waits for it (a push in flight is cut short and retried).
func (s *Service) Stop() { s.senders.Stop() }
