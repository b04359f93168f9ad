package alertchannels

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// Announce queues a message that is not about an alert (an automation's notify action) on
// channels in the caller's scope, rendered as an informational alert titled subject. A
// channel out of scope is not found; disabled channels are passed over. It returns how many
// deliveries were queued.
func (s *Service) Announce(ctx context.Context, channelIDs []string, subject, message string) (int, error) {
	queued := 0
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		now := s.now()
		for _, id := range channelIDs {
			ch, err := s.getChannel(ctx, tx, access.ScopeFrom(ctx), id)
			if err != nil {
				return err
			}
			if !ch.Enabled {
				continue
			}
			view, err := json.Marshal(AlertView{ID: store.NewID(), PartnerID: ch.PartnerID, OrgID: store.Deref(ch.OrgID), Severity: "info",
				Status: "active", Title: subject, Message: message, TriggeredAt: now})
			if err != nil {
				return err
			}
			n := Notification{Action: ActionTrigger, EventID: store.NewID(), EventType: "automation.notify", Timestamp: now,
				Hostname: "gale", Link: s.link(""), Alert: view}
			if err := s.queue(ctx, tx, ch.ID, ch.Throttle, "", n); err != nil {
				return err
			}
			queued++
		}
		return nil
	})
	if err == nil && queued > 0 {
		s.Wake()
	}
	if err != nil {
		return queued, fmt.Errorf("announce to notification channels: %w", err)
	}
	return queued, nil
}
