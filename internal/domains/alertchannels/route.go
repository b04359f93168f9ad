package alertchannels

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
	"gale/internal/domains/groups"
	"gale/internal/platform/apperr"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
)

// ConsumerName is the events consumer that routes alert events to channels.
const ConsumerName = "notify"

// Escalation step statuses.
const (
	escPending   = "pending"
	escFired     = "fired"
	escCancelled = "cancelled"
)

// Consumer is the events consumer: alert.triggered is routed and queued; acknowledged,
// resolved and dismissed cancel pending escalation steps; resolved is announced to the
// channels that were notified.
func (s *Service) Consumer() events.Consumer {
	return events.Consumer{Name: ConsumerName, Handle: s.handle,
		Types: []string{"alert.triggered", "alert.acknowledged", "alert.resolved", "alert.dismissed"}}
}

func (s *Service) handle(ctx context.Context, tx *sql.Tx, e events.Event) error {
	var a AlertView
	if err := json.Unmarshal(e.Data, &a); err != nil || a.ID == "" || a.PartnerID == "" {
		return nil
	}
	n := Notification{EventID: e.ID, EventType: e.Type, Timestamp: e.OccurredAt, Link: s.link(a.ID), Alert: e.Data}
	if a.DeviceID != nil {
		if host, err := devices.Hostname(ctx, tx, *a.DeviceID); err == nil {
			n.Hostname = host
		}
	}
	switch e.Type {
	case "alert.triggered":
		n.Action = ActionTrigger
		return s.routeTrigger(ctx, tx, a, n)
	case "alert.resolved":
		if err := s.cancelEscalations(ctx, tx, a.ID); err != nil {
			return err
		}
		n.Action, n.Step = ActionResolve, -1
		return s.announceResolved(ctx, tx, a, n)
	default:
		return s.cancelEscalations(ctx, tx, a.ID)
	}
}

// target is a channel a notification goes to.
type target struct {
	id       string
	throttle *ChannelThrottle
}

// allChannels selects every enabled channel of the alert's tenant.
var allChannels = []string{"*"}

// usable returns the enabled channels among ids (allChannels: all enabled channels of the
// tenant) that may serve an alert of the organization: partner-wide ones and the
// organization's own.
func usable(ctx context.Context, tx *sql.Tx, a AlertView, ids []string) ([]target, error) {
	var args store.Args
	q := `SELECT id, throttle FROM notification_channels WHERE enabled AND partner_id = ` + args.Add(a.PartnerID) +
		` AND (org_id IS NULL OR org_id = ` + args.Add(a.OrgID) + `)`
	if len(ids) == 0 {
		return nil, nil
	}
	if !slices.Equal(ids, allChannels) {
		q += ` AND id IN ` + args.In(ids)
	}
	out, err := store.QueryAll(ctx, tx, q+` ORDER BY id`, args.Values(), func(sc store.Scanner) (target, error) {
		var t target
		var th sql.NullString
		if err := sc.Scan(&t.id, &th); err != nil {
			return t, err
		}
		if th.Valid && th.String != "" {
			t.throttle = &ChannelThrottle{}
			_ = json.Unmarshal([]byte(th.String), t.throttle)
		}
		return t, nil
	})
	if err != nil {
		return nil, fmt.Errorf("load the channels of alert %s: %w", a.ID, err)
	}
	return out, nil
}

// routeTrigger picks the channels of a new alert: the rule's channels, else the first
// matching policy by priority (step 0 now, the later steps scheduled), else every enabled
// channel of the tenant.
func (s *Service) routeTrigger(ctx context.Context, tx *sql.Tx, a AlertView, n Notification) error {
	if a.RuleID != nil {
		ids, err := alerts.RuleChannels(ctx, tx, *a.RuleID)
		if err != nil {
			return err
		}
		if len(ids) > 0 {
			return s.queueAll(ctx, tx, a, n, ids)
		}
	}
	p, ok, err := s.matchPolicy(ctx, tx, a)
	if err != nil {
		return err
	}
	if !ok {
		return s.queueAll(ctx, tx, a, n, allChannels)
	}
	now := s.now()
	for i, st := range p.Steps {
		if st.DelayMinutes == 0 {
			n.Step = i
			if err := s.queueAll(ctx, tx, a, n, st.ChannelIDs); err != nil {
				return err
			}
			continue
		}
		due := a.TriggeredAt.Add(time.Duration(st.DelayMinutes) * time.Minute)
		if _, err := tx.ExecContext(ctx, `INSERT INTO alert_escalations (id, alert_id, policy_id, step, channel_ids, due_at, status,
			created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) ON CONFLICT DO NOTHING`, store.NewID(), a.ID, p.ID, i,
			store.EncodeStrings(st.ChannelIDs), due, escPending, now); err != nil {
			return fmt.Errorf("schedule escalation: %w", err)
		}
	}
	return nil
}

func (s *Service) queueAll(ctx context.Context, tx *sql.Tx, a AlertView, n Notification, ids []string) error {
	targets, err := usable(ctx, tx, a, ids)
	if err != nil {
		return err
	}
	for _, t := range targets {
		if err := s.queue(ctx, tx, t.id, t.throttle, a.ID, n); err != nil {
			return err
		}
	}
	if len(targets) > 0 {
		s.Wake()
	}
	return nil
}

// matchPolicy returns the first enabled policy of the alert's tenant, by priority, whose
// match and time window select the alert now.
func (s *Service) matchPolicy(ctx context.Context, tx *sql.Tx, a AlertView) (AlertPolicy, bool, error) {
	ps, err := store.QueryAll(ctx, tx, `SELECT `+policyColumns+` FROM alert_policies p WHERE p.enabled AND p.partner_id = $1
		AND (p.org_id IS NULL OR p.org_id = $2) ORDER BY p.priority, p.created_at, p.id`, []any{a.PartnerID, a.OrgID}, scanPolicy)
	if err != nil {
		return AlertPolicy{}, false, fmt.Errorf("load the alert policies for alert %s: %w", a.ID, err)
	}
	now := s.now()
	for _, p := range ps {
		m := p.Match
		switch {
		case len(m.Severities) > 0 && !slices.Contains(m.Severities, a.Severity),
			len(m.OrgIDs) > 0 && !slices.Contains(m.OrgIDs, a.OrgID),
			len(m.SiteIDs) > 0 && (a.SiteID == nil || !slices.Contains(m.SiteIDs, *a.SiteID)),
			!inWindow(p.TimeWindow, now):
			continue
		}
		if len(m.GroupIDs) > 0 {
			if a.DeviceID == nil {
				continue
			}
			member, err := groups.InAny(ctx, tx, *a.DeviceID, m.GroupIDs)
			if err != nil {
				return AlertPolicy{}, false, err
			}
			if !member {
				continue
			}
		}
		return p, true, nil
	}
	return AlertPolicy{}, false, nil
}

func (s *Service) cancelEscalations(ctx context.Context, tx *sql.Tx, alertID string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE alert_escalations SET status = $1, updated_at = $2 WHERE alert_id = $3 AND status = $4`,
		escCancelled, s.now(), alertID, escPending); err != nil {
		return fmt.Errorf("cancel the escalations of alert %s: %w", alertID, err)
	}
	return nil
}

// announceResolved queues a resolution to every channel a trigger of the alert was queued
// for (not throttled ones).
func (s *Service) announceResolved(ctx context.Context, tx *sql.Tx, a AlertView, n Notification) error {
	ids, err := store.QueryStrings(ctx, tx, `SELECT DISTINCT channel_id FROM notification_deliveries WHERE alert_id = $1 AND step >= 0
		AND status <> $2`, a.ID, StatusThrottled)
	if err != nil {
		return fmt.Errorf("find the channels notified of alert %s: %w", a.ID, err)
	}
	if len(ids) == 0 {
		return nil
	}
	// Resolutions are not throttled: the receiver must hear that the alert is over.
	targets, err := usable(ctx, tx, a, ids)
	if err != nil {
		return err
	}
	for _, t := range targets {
		if err := s.queue(ctx, tx, t.id, nil, a.ID, n); err != nil {
			return err
		}
	}
	s.Wake()
	return nil
}

// Escalate fires the escalation steps that are due: each is claimed with a conditional
// update (one node wins), and its channels are notified if the alert is still active;
// otherwise the step is cancelled. It is the alerts-escalate job.
func (s *Service) Escalate(ctx context.Context) error {
	now := s.now()
	ids, err := store.QueryStrings(ctx, s.db, `SELECT id FROM alert_escalations WHERE status = $1 AND due_at <= $2 ORDER BY due_at LIMIT 500`,
		escPending, now)
	if err != nil {
		return fmt.Errorf("find due escalations: %w", err)
	}
	for _, id := range ids {
		if err := s.db.Write(ctx, func(tx *sql.Tx) error { return s.fire(ctx, tx, id, now) }); err != nil {
			return fmt.Errorf("fire escalation %s: %w", id, err)
		}
	}
	return nil
}

func (s *Service) fire(ctx context.Context, tx *sql.Tx, id string, now time.Time) error {
	var alertID, channels string
	var step int
	err := tx.QueryRowContext(ctx, `UPDATE alert_escalations SET status = $1, updated_at = $2 WHERE id = $3 AND status = $4
		RETURNING alert_id, step, channel_ids`, escFired, now, id, escPending).Scan(&alertID, &step, &channels)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // another node fired it, or it was cancelled
	}
	if err != nil {
		return fmt.Errorf("claim escalation %s: %w", id, err)
	}
	x, err := alerts.Lookup(ctx, tx, alertID)
	if apperr.IsCode(err, apperr.CodeNotFound) || (err == nil && x.Status != alerts.StatusActive) {
		if _, err := tx.ExecContext(ctx, `UPDATE alert_escalations SET status = $1 WHERE id = $2`, escCancelled, id); err != nil {
			return fmt.Errorf("cancel escalation %s: %w", id, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	a := AlertView{ID: x.ID, PartnerID: x.PartnerID, OrgID: x.OrgID, SiteID: x.SiteID, DeviceID: x.DeviceID, RuleID: x.RuleID,
		Severity: x.Severity, Status: x.Status, Title: x.Title, Message: x.Message, TriggeredAt: x.TriggeredAt}
	// The alert as recorded in its trigger event, so every step says the same thing.
	data, err := events.FirstData(ctx, tx, "alert.triggered", alertID)
	if err != nil {
		raw, _ := json.Marshal(a)
		data = string(raw)
	}
	n := Notification{Action: ActionTrigger, EventID: "escalation:" + id, EventType: "alert.escalated", Timestamp: now, Step: step,
		Link: s.link(a.ID), Alert: json.RawMessage(data)}
	if a.DeviceID != nil {
		if host, err := devices.Hostname(ctx, tx, *a.DeviceID); err == nil {
			n.Hostname = host
		}
	}
	ids, _ := store.DecodeStrings(channels)
	return s.queueAll(ctx, tx, a, n, ids)
}
