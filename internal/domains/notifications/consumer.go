package notifications

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"gale/internal/domains/identity"
	"gale/internal/platform/access"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
)

// AlertEvents are the event types that make in-app notifications.
var AlertEvents = []string{"alert.triggered", "alert.acknowledged", "alert.resolved", "alert.suppressed", "alert.dismissed"}

// PushEvents are the event types that also go to phones: only a new alert makes a phone ring.
var PushEvents = []string{"alert.triggered"}

var titlePrefix = map[string]string{
	"alert.triggered":    "Alert",
	"alert.acknowledged": "Acknowledged",
	"alert.resolved":     "Resolved",
	"alert.suppressed":   "Suppressed",
	"alert.dismissed":    "Dismissed",
}

// Consumer is the "inapp" event consumer: it writes the notifications of an alert event, and
// the push messages of its recipients' phones, in the dispatcher's transaction.
func (s *Service) Consumer() events.Consumer {
	return events.Consumer{Name: "inapp", Types: AlertEvents, Handle: s.handle}
}

// alertData is the part of the alert (the event data) a notification needs.
type alertData struct {
	ID       string `json:"id"`
	OrgID    string `json:"orgId"`
	Severity string `json:"severity"`
	Title    string `json:"title"`
	Message  string `json:"message"`
}

func (s *Service) handle(ctx context.Context, tx *sql.Tx, e events.Event) error {
	var x alertData
	if err := json.Unmarshal(e.Data, &x); err != nil {
		return fmt.Errorf("decode alert of event %s: %w", e.ID, err)
	}
	if e.PartnerID == "" || e.OrgID == "" {
		return nil
	}
	users, err := identity.UsersSeeingOrg(ctx, tx, e.PartnerID, e.OrgID, access.AlertsRead)
	if err != nil {
		return fmt.Errorf("find the users seeing organization %s: %w", e.OrgID, err)
	}
	if len(users) == 0 {
		return nil
	}
	title := titlePrefix[e.Type] + ": " + x.Title
	body := x.Message
	if body == "" {
		body = x.Title
	}
	var sev any
	if x.Severity != "" {
		sev = x.Severity
	}
	now := s.clock.Now()
	const batch = 200
	for start := 0; start < len(users); start += batch {
		var a store.Args
		var rows []string
		for _, uid := range users[start:min(start+batch, len(users))] {
			rows = append(rows, "("+strings.Join([]string{a.Add(store.NewID()), a.Add(uid), a.Add(e.PartnerID), a.Add(e.OrgID), a.Add(e.ID), a.Add(e.Type), a.Add(title),
				a.Add(body), a.Add(sev), a.Add("alert"), a.Add(x.ID), a.Add("/alerts/" + x.ID), a.Add(now)}, ", ")+")")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO notifications (id, user_id, partner_id, org_id, event_id, type, title, body, severity, resource_type,
			resource_id, link, created_at) VALUES `+strings.Join(rows, ", ")+` ON CONFLICT (user_id, event_id) DO NOTHING`, a.Values()...); err != nil {
			return fmt.Errorf("insert notifications: %w", err)
		}
	}
	return s.queuePush(ctx, tx, e)
}

// queuePush queues one push message per registered token of the event's recipients, for the
// platforms that have a sender.
func (s *Service) queuePush(ctx context.Context, tx *sql.Tx, e events.Event) error {
	if !wantsPush(e.Type) {
		return nil
	}
	var platforms []string
	for p := range s.pushers {
		platforms = append(platforms, p)
	}
	if len(platforms) == 0 {
		return nil
	}
	var a store.Args
	now := a.Add(s.clock.Now())
	q := `INSERT INTO push_messages (notification_id, token, platform, status, attempts, next_attempt_at, created_at)
		SELECT n.id, t.token, t.platform, 'pending', 0, ` + now + `, ` + now + ` FROM notifications n JOIN push_tokens t ON t.user_id = n.user_id
		WHERE n.event_id = ` + a.Add(e.ID) + ` AND t.platform IN ` + a.In(platforms) + ` ON CONFLICT DO NOTHING`
	res, err := tx.ExecContext(ctx, q, a.Values()...)
	if err != nil {
		return fmt.Errorf("queue push messages: %w", err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		s.senders.Wake()
	}
	return nil
}

func wantsPush(typ string) bool {
	for _, t := range PushEvents {
		if t == typ {
			return true
		}
	}
	return false
}
