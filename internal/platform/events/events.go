// Package events is Gale's outbox of domain events. A domain records an event in the
// transaction of the change it describes (an alert opened, a device went offline), so an event
// exists exactly when its change was committed. Consumers (outbound webhooks, notification
// channels, in-app notifications) each handle every event once, in order of occurrence: the
// dispatcher records the consumption in the same transaction as the consumer's own work, and a
// lease in the database lets one node at a time run each consumer.
package events

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"gale/internal/platform/store"
)

// Event is one domain event.
type Event struct {
	ID   string `json:"id"`
	Type string `json:"type" doc:"Dotted name: alert.opened, alert.resolved, device.offline, ..."`
	// PartnerID and OrgID place the event in the tenancy tree: consumers deliver it only to
	// subscribers that reach it. Empty for events of the whole installation.
	PartnerID    string          `json:"partnerId,omitempty"`
	OrgID        string          `json:"orgId,omitempty"`
	ResourceType string          `json:"resourceType,omitempty"`
	ResourceID   string          `json:"resourceId,omitempty"`
	Data         json.RawMessage `json:"data"`
	OccurredAt   time.Time       `json:"occurredAt"`
}

// Record writes an event in tx; data is encoded as JSON. It returns the event as stored.
func Record(ctx context.Context, tx *sql.Tx, e Event, data any) (Event, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return e, fmt.Errorf("encode %s event: %w", e.Type, err)
	}
	e.ID, e.Data, e.OccurredAt = store.NewID(), raw, store.Now()
	_, err = tx.ExecContext(ctx, `INSERT INTO events (id, type, partner_id, org_id, resource_type, resource_id, data, occurred_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, e.ID, e.Type, nullable(e.PartnerID), nullable(e.OrgID), e.ResourceType,
		e.ResourceID, string(raw), e.OccurredAt)
	if err != nil {
		return e, fmt.Errorf("record %s event: %w", e.Type, err)
	}
	return e, nil
}

// FirstData returns the data of the earliest event of type typ about resourceID, for a
// consumer that repeats what the event said (sql.ErrNoRows when there is none).
func FirstData(ctx context.Context, q store.Querier, typ, resourceID string) (string, error) {
	var data string
	err := q.QueryRowContext(ctx, `SELECT data FROM events WHERE resource_id = $1 AND type = $2 ORDER BY occurred_at LIMIT 1`,
		resourceID, typ).Scan(&data)
	return data, err
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Consumer handles events. Handle runs in the transaction that marks the event consumed, so
// what it writes there happens exactly once; an error rolls both back and the event is
// offered again on the next round. Slow or failure-prone work (sending over the network)
// belongs in rows the consumer writes here and processes on its own, with its own retries.
type Consumer struct {
	Name string
	// Types are the event types it wants; none means every type.
	Types  []string
	Handle func(ctx context.Context, tx *sql.Tx, e Event) error
}

func (c Consumer) wants(typ string) bool {
	if len(c.Types) == 0 {
		return true
	}
	for _, t := range c.Types {
		if t == typ {
			return true
		}
	}
	return false
}

// Dispatcher feeds recorded events to the registered consumers.
type Dispatcher struct {
	db        *store.DB
	logger    *slog.Logger
	node      string
	mu        sync.Mutex
	consumers []Consumer
	wake      chan struct{}
}

// Timing of the dispatcher.
const (
	// pollEvery is how often a node looks for new events when nobody woke it.
	pollEvery = time.Second
	// leaseFor is how long a node keeps a consumer after its last round.
	leaseFor = 30 * time.Second
	// window bounds how far back consumers look: an event that could not be handled within
	// an hour (a consumer failing on it every round) is given up, so it cannot block the
	// rest for ever.
	window    = time.Hour
	batchSize = 100
	// Retention is how long events are kept (Purge).
	Retention = 7 * 24 * time.Hour
)

// NewDispatcher returns a dispatcher; register consumers, then Run it.
func NewDispatcher(db *store.DB, logger *slog.Logger) *Dispatcher {
	return &Dispatcher{db: db, logger: logger, node: store.NewID(), wake: make(chan struct{}, 1)}
}

// Register adds a consumer. Call it while wiring, before Run.
func (d *Dispatcher) Register(c Consumer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.consumers = append(d.consumers, c)
}

// Wake makes Run look for events now instead of at its next poll (call it after committing
// a transaction that recorded events).
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run dispatches until ctx ends.
func (d *Dispatcher) Run(ctx context.Context) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		if err := d.RunOnce(ctx); err != nil && ctx.Err() == nil {
			d.logger.WarnContext(ctx, "event dispatch failed; retrying", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.wake:
		}
	}
}

// RunOnce gives every consumer whose lease this node holds or can take all pending events.
func (d *Dispatcher) RunOnce(ctx context.Context) error {
	d.mu.Lock()
	consumers := append([]Consumer(nil), d.consumers...)
	d.mu.Unlock()
	var errs []error
	for _, c := range consumers {
		ok, err := d.lease(ctx, c.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			if err := d.drain(ctx, c); err != nil {
				errs = append(errs, fmt.Errorf("consumer %s: %w", c.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// lease takes or renews the consumer's lease for this node; false when another node holds it.
func (d *Dispatcher) lease(ctx context.Context, consumer string) (bool, error) {
	now := store.Now()
	res, err := d.db.ExecContext(ctx, `INSERT INTO event_consumer_leases (consumer, holder, leased_until) VALUES ($1, $2, $3)
		ON CONFLICT (consumer) DO UPDATE SET holder = excluded.holder, leased_until = excluded.leased_until
		WHERE event_consumer_leases.holder = excluded.holder OR event_consumer_leases.leased_until < $4`,
		consumer, d.node, now.Add(leaseFor), now)
	if err != nil {
		return false, fmt.Errorf("lease consumer %s: %w", consumer, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// drain hands the consumer its pending events, oldest first, one transaction each.
func (d *Dispatcher) drain(ctx context.Context, c Consumer) error {
	for ctx.Err() == nil {
		pending, err := d.pending(ctx, c.Name)
		if err != nil || len(pending) == 0 {
			return err
		}
		for _, e := range pending {
			if err := d.consume(ctx, c, e); err != nil {
				return fmt.Errorf("event %s (%s): %w", e.ID, e.Type, err)
			}
		}
		if len(pending) < batchSize {
			return nil
		}
	}
	return ctx.Err()
}

func (d *Dispatcher) pending(ctx context.Context, consumer string) ([]Event, error) {
	out, err := store.QueryAll(ctx, d.db, `SELECT e.id, e.type, e.partner_id, e.org_id, e.resource_type, e.resource_id, e.data,
		e.occurred_at FROM events e WHERE e.occurred_at > $1
		AND NOT EXISTS (SELECT 1 FROM event_consumptions c WHERE c.consumer = $2 AND c.event_id = e.id)
		ORDER BY e.occurred_at, e.id LIMIT $3`, []any{store.Now().Add(-window), consumer, batchSize}, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("read the events pending for %s: %w", consumer, err)
	}
	return out, nil
}

func scanEvent(row store.Scanner) (Event, error) {
	var e Event
	var partner, org sql.NullString
	var data string
	err := row.Scan(&e.ID, &e.Type, &partner, &org, &e.ResourceType, &e.ResourceID, &data, &e.OccurredAt)
	e.PartnerID, e.OrgID, e.Data, e.OccurredAt = partner.String, org.String, json.RawMessage(data), e.OccurredAt.UTC()
	return e, err
}

// consume marks the event consumed and runs the handler in one transaction. The mark comes
// first: if another node consumed the event meanwhile (its lease ran out mid-round), the
// insert finds the row and nothing is done twice.
func (d *Dispatcher) consume(ctx context.Context, c Consumer, e Event) error {
	return d.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO event_consumptions (consumer, event_id, consumed_at) VALUES ($1, $2, $3)
			ON CONFLICT DO NOTHING`, c.Name, e.ID, store.Now())
		if err != nil {
			return fmt.Errorf("mark consumed by %s: %w", c.Name, err)
		}
		if n, _ := res.RowsAffected(); n == 0 || !c.wants(e.Type) {
			return nil
		}
		return c.Handle(ctx, tx, e)
	})
}

// Purge deletes events older than Retention, with their consumption records.
func (d *Dispatcher) Purge(ctx context.Context) (int64, error) {
	return d.db.Purge(ctx, "events", store.Deletion{SQL: `DELETE FROM events WHERE occurred_at < $1`, Args: []any{store.Now().Add(-Retention)}})
}
