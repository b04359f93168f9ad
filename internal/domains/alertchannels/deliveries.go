package alertchannels

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"gale/internal/domains/webhooks"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/senders"
	"gale/internal/platform/store"
)

// Delivery is one notification sent (or to be sent) through one channel.
type NotificationDelivery struct {
	ID             string          `json:"id" format:"uuid"`
	ChannelID      string          `json:"channelId" format:"uuid"`
	AlertID        *string         `json:"alertId"`
	EventID        string          `json:"eventId"`
	EventType      string          `json:"eventType"`
	Action         string          `json:"action" enum:"trigger,resolve,test"`
	Step           int             `json:"step" doc:"The escalation step (0 at trigger); -1 for resolutions and tests."`
	Status         string          `json:"status" enum:"pending,sending,retrying,succeeded,dead,throttled"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"maxAttempts"`
	NextAttemptAt  *time.Time      `json:"nextAttemptAt"`
	ResponseStatus *int            `json:"responseStatus" doc:"HTTP status of the last attempt (HTTP channels)."`
	Error          *string         `json:"error"`
	CreatedAt      time.Time       `json:"createdAt"`
	UpdatedAt      time.Time       `json:"updatedAt"`
	DeliveredAt    *time.Time      `json:"deliveredAt"`
	payload        json.RawMessage `json:"-"`
}

const deliveryColumns = `d.id, d.channel_id, d.alert_id, d.event_id, d.event_type, d.step, d.payload, d.status, d.attempts,
	d.max_attempts, d.next_attempt_at, d.response_status, d.error, d.created_at, d.updated_at, d.delivered_at`

func scanDelivery(sc store.Scanner) (NotificationDelivery, error) {
	var d NotificationDelivery
	var alert, errText sql.NullString
	var next, delivered sql.NullTime
	var status sql.NullInt64
	var payload string
	err := sc.Scan(&d.ID, &d.ChannelID, &alert, &d.EventID, &d.EventType, &d.Step, &payload, &d.Status, &d.Attempts, &d.MaxAttempts,
		&next, &status, &errText, &d.CreatedAt, &d.UpdatedAt, &delivered)
	if err != nil {
		return d, err
	}
	var n Notification
	_ = json.Unmarshal([]byte(payload), &n)
	d.Action, d.payload = n.Action, json.RawMessage(payload)
	d.AlertID, d.Error = store.StringPtr(alert), store.StringPtr(errText)
	d.NextAttemptAt, d.DeliveredAt = store.TimePtr(next), store.TimePtr(delivered)
	if d.Status != StatusPending && d.Status != StatusRetrying {
		d.NextAttemptAt = nil
	}
	if status.Valid {
		v := int(status.Int64)
		d.ResponseStatus = &v
	}
	d.CreatedAt, d.UpdatedAt = d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	return d, nil
}

// Deliveries lists a channel's deliveries, newest first.
func (s *Service) Deliveries(ctx context.Context, channelID, status string, page store.Page) ([]NotificationDelivery, string, *int, error) {
	if _, err := s.getChannel(ctx, s.db, access.ScopeFrom(ctx), channelID); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"d.channel_id = " + a.Add(channelID)}
	if status != "" {
		conds = append(conds, "d.status = "+a.Add(status))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: deliveryColumns, From: " FROM notification_deliveries d", Conds: conds,
		Args: &a, SortKey: "d.id", SortID: "d.id", Desc: true}, page, scanDelivery, func(d NotificationDelivery) (string, string) { return d.ID, d.ID })
}

// queue writes a pending delivery of n through a channel in tx; a channel whose throttle is
// reached for the last hour gets a throttled row instead. A second delivery of the same
// event and step to the channel is ignored.
func (s *Service) queue(ctx context.Context, tx *sql.Tx, channelID string, throttle *ChannelThrottle, alertID string, n Notification) error {
	payload, err := json.Marshal(n)
	if err != nil {
		return err
	}
	now := s.now()
	status := StatusPending
	if throttle != nil {
		var sent int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM notification_deliveries WHERE channel_id = $1 AND created_at > $2
			AND status <> $3`, channelID, now.Add(-time.Hour), StatusThrottled).Scan(&sent); err != nil {
			return fmt.Errorf("count the last hour's deliveries of channel %s: %w", channelID, err)
		}
		if sent >= throttle.MaxPerHour {
			status = StatusThrottled
		}
	}
	var next any = now
	if status == StatusThrottled {
		next = nil
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO notification_deliveries (id, channel_id, alert_id, event_id, event_type, step, payload,
		status, max_attempts, next_attempt_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
		ON CONFLICT DO NOTHING`, store.NewID(), channelID, store.NullIfEmpty(alertID), n.EventID, n.EventType, n.Step, string(payload),
		status, MaxAttempts, next, now)
	if err != nil {
		return fmt.Errorf("queue notification: %w", err)
	}
	return nil
}

// Wake makes the senders look for due deliveries now.
func (s *Service) Wake() { s.senders.Wake() }

// Start runs this node's senders until Stop.
func (s *Service) Start(ctx context.Context) { s.senders.Start(ctx) }

// Stop ends the senders and waits for them.
func (s *Service) Stop() { s.senders.Stop() }

// RunDue sends deliveries that are due until none is left, and returns how many it sent.
func (s *Service) RunDue(ctx context.Context) (int, error) {
	return senders.Drain(ctx, func(ctx context.Context) (bool, error) {
		c := claimed{token: store.NewID()}
		ok, err := senders.Claim(ctx, s.db, s.clock, "notification_deliveries", claimFor, c.token,
			"id, channel_id, payload, attempts, max_attempts", func(row store.Scanner) error {
				return row.Scan(&c.id, &c.channelID, &c.payload, &c.attempts, &c.maxAttempts)
			})
		if err != nil || !ok {
			return false, err
		}
		return true, s.send(ctx, c)
	})
}

type claimed struct {
	id, channelID, payload, token string
	attempts, maxAttempts         int
}

const claimFor = webhooks.RequestTimeout + 30*time.Second

// send makes one attempt of a claimed delivery and records it.
func (s *Service) send(ctx context.Context, c claimed) error {
	ch, err := s.getChannel(ctx, s.db, access.SystemScope(), c.channelID)
	if apperr.IsCode(err, apperr.CodeNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var n Notification
	out := outcome{}
	final := false
	switch {
	case json.Unmarshal([]byte(c.payload), &n) != nil:
		out.err, final = "the stored notification does not decode", true
	case !ch.Enabled && n.Action != ActionTest:
		out.err, final = "the channel is disabled", true
	default:
		out = s.deliver(ctx, ch.Type, ch.full, n)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return s.record(ctx, c, out, final)
}

// record stores an attempt: succeeded, retrying with webhooks.Backoff, or dead once the
// attempts are used up. Only the claim's holder may record it.
func (s *Service) record(ctx context.Context, c claimed, out outcome, final bool) error {
	attempt := c.attempts + 1
	now := s.now()
	status, next := StatusSucceeded, any(nil)
	var delivered any
	switch {
	case out.err == "":
		delivered = now
	case final || attempt >= c.maxAttempts:
		status = StatusDead
	default:
		status, next = StatusRetrying, now.Add(webhooks.Backoff(attempt))
	}
	var errText any
	if out.err != "" {
		errText = truncate(out.err, 1000)
	}
	var code any
	if out.status != nil {
		code = *out.status
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE notification_deliveries SET status = $1, attempts = $2, next_attempt_at = $3,
			response_status = $4, error = $5, delivered_at = $6, claim_token = NULL, claimed_until = NULL, updated_at = $7
			WHERE id = $8 AND status = $9 AND claim_token = $10`, status, attempt, next, code, errText, delivered, now, c.id,
			StatusSending, c.token)
		if err != nil {
			return fmt.Errorf("record the attempt of delivery %s: %w", c.id, err)
		}
		return nil
	})
}

func (s *Service) delivery(ctx context.Context, id string) (NotificationDelivery, error) {
	d, err := scanDelivery(s.db.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM notification_deliveries d WHERE d.id = $1`, id))
	if err != nil {
		return d, fmt.Errorf("load delivery %s: %w", id, err)
	}
	return d, nil
}

// Test sends a test notification through the channel now (also when disabled) and returns
// the delivery after its one attempt.
func (s *Service) Test(ctx context.Context, channelID string) (NotificationDelivery, error) {
	ch, err := s.getChannel(ctx, s.db, access.ScopeFrom(ctx), channelID)
	if err != nil {
		return NotificationDelivery{}, err
	}
	now := s.now()
	org := store.Deref(ch.OrgID)
	alert, _ := json.Marshal(AlertView{ID: store.NewID(), PartnerID: ch.PartnerID, OrgID: org, Severity: "info", Status: "active",
		Title: "Test notification", Message: "This is a test notification from Gale for the channel " + ch.Name + ".", TriggeredAt: now})
	n := Notification{Action: ActionTest, EventID: store.NewID(), EventType: "alert.test", Timestamp: now, Step: -1,
		Hostname: "gale", Link: s.link(""), Alert: alert}
	payload, _ := json.Marshal(n)
	c := claimed{id: store.NewID(), channelID: ch.ID, payload: string(payload), maxAttempts: 1, token: store.NewID()}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO notification_deliveries (id, channel_id, event_id, event_type, step, payload,
		status, max_attempts, next_attempt_at, claim_token, claimed_until, created_at, updated_at)
		VALUES ($1, $2, $3, $4, -1, $5, $6, 1, $7, $8, $9, $7, $7)`, c.id, ch.ID, n.EventID, n.EventType, c.payload, StatusSending,
		now, c.token, now.Add(claimFor)); err != nil {
		return NotificationDelivery{}, fmt.Errorf("insert the test delivery of channel %s: %w", ch.ID, err)
	}
	if err := s.send(ctx, c); err != nil {
		return NotificationDelivery{}, err
	}
	return s.delivery(ctx, c.id)
}

// link is the address of an alert in the web app.
func (s *Service) link(alertID string) string {
	base := s.opts.PublicURL
	if alertID == "" {
		return base + "/alerts"
	}
	return base + "/alerts/" + alertID
}

// Retention is how long finished deliveries (succeeded, dead, throttled) are kept in the log.
const Retention = 30 * 24 * time.Hour

// Purge deletes finished deliveries older than Retention and escalation steps of alerts that
// ended that long ago; the periodic cleanup calls it.
func (s *Service) Purge(ctx context.Context) (int64, error) {
	cutoff := s.now().Add(-Retention)
	return s.db.Purge(ctx, "notification deliveries",
		store.Deletion{SQL: `DELETE FROM notification_deliveries WHERE status IN ($1, $2, $3) AND updated_at < $4`,
			Args: []any{StatusSucceeded, StatusDead, StatusThrottled, cutoff}},
		store.Deletion{SQL: `DELETE FROM alert_escalations WHERE status <> $1 AND updated_at < $2`, Args: []any{escPending, cutoff}})
}
