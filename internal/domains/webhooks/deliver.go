package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/events"
	"gale/internal/platform/senders"
	"gale/internal/platform/store"
)

// ConsumerName is the events consumer that turns events into deliveries.
const ConsumerName = "webhooks"

// Consumer is the events consumer: in the event's consumption transaction it writes one
// pending delivery per enabled subscription that matches the event's type and reaches its
// tenancy (partner-wide subscriptions: every organization of the partner; organization
// subscriptions: their organization only). Events without a partner go nowhere.
func (s *Service) Consumer() events.Consumer {
	return events.Consumer{Name: ConsumerName, Handle: s.handle}
}

func (s *Service) handle(ctx context.Context, tx *sql.Tx, e events.Event) error {
	if e.PartnerID == "" {
		return nil
	}
	var a store.Args
	cond := "w.org_id IS NULL"
	if e.OrgID != "" {
		cond = "(w.org_id IS NULL OR w.org_id = " + a.Add(e.OrgID) + ")"
	}
	type subscription struct{ id, events string }
	subs, err := store.QueryAll(ctx, tx, `SELECT w.id, w.events FROM webhooks w WHERE w.enabled AND w.partner_id = `+
		a.Add(e.PartnerID)+` AND `+cond, a.Values(), func(sc store.Scanner) (w subscription, err error) {
		err = sc.Scan(&w.id, &w.events)
		return w, err
	})
	if err != nil {
		return fmt.Errorf("find subscriptions: %w", err)
	}
	var targets []string
	for _, w := range subs {
		patterns, _ := store.DecodeStrings(w.events)
		if Matches(patterns, e.Type) {
			targets = append(targets, w.id)
		}
	}
	if len(targets) == 0 {
		return nil
	}
	payload, err := envelope(e)
	if err != nil {
		return fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	now := s.clock.Now()
	for _, id := range targets {
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, event_id, event_type, payload, status,
			max_attempts, next_attempt_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $8)
			ON CONFLICT DO NOTHING`, store.NewID(), id, e.ID, e.Type, payload, StatusPending, MaxAttempts, now); err != nil {
			return fmt.Errorf("queue delivery: %w", err)
		}
	}
	s.Wake()
	return nil
}

func envelope(e events.Event) (string, error) {
	var org *string
	if e.OrgID != "" {
		org = &e.OrgID
	}
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	b, err := json.Marshal(Envelope{ID: e.ID, Type: e.Type, Timestamp: e.OccurredAt.UTC(), OrgID: org, Data: data})
	return string(b), err
}

// Wake makes the senders look for due deliveries now.
func (s *Service) Wake() { s.senders.Wake() }

// Start runs this node's senders until Stop.
func (s *Service) Start(ctx context.Context) { s.senders.Start(ctx) }

// Stop ends the senders and waits for them (an attempt in flight is cut short and retried).
func (s *Service) Stop() { s.senders.Stop() }

// RunDue sends deliveries that are due until none is left, and returns how many it sent.
func (s *Service) RunDue(ctx context.Context) (int, error) {
	return senders.Drain(ctx, func(ctx context.Context) (bool, error) {
		c := claimed{token: store.NewID()}
		ok, err := senders.Claim(ctx, s.db, s.clock, "webhook_deliveries", claimFor, c.token,
			"id, webhook_id, event_id, event_type, payload, attempts, max_attempts", func(row store.Scanner) error {
				return row.Scan(&c.id, &c.webhookID, &c.eventID, &c.eventType, &c.payload, &c.attempts, &c.maxAttempts)
			})
		if err != nil || !ok {
			return false, err
		}
		return true, s.send(ctx, c)
	})
}

// claimed is a delivery this node holds.
type claimed struct {
	id, webhookID, eventID, eventType, payload, token string
	attempts, maxAttempts                             int
}

// claimFor is how long a claim lasts: the request's budget plus a margin. A node that dies
// mid-attempt leaves the delivery claimable again after it.
const claimFor = RequestTimeout + 30*time.Second

// outcome is the result of one attempt.
type outcome struct {
	status   *int
	body     *string
	duration time.Duration
	err      string
}

// send makes one attempt of a claimed delivery and records it.
func (s *Service) send(ctx context.Context, c claimed) error {
	var url, sealedSecret, sealedHeaders string
	var enabled bool
	err := s.db.QueryRowContext(ctx, `SELECT url, secret, headers, enabled FROM webhooks WHERE id = $1`, c.webhookID).
		Scan(&url, &sealedSecret, &sealedHeaders, &enabled)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // deleted meanwhile, with its deliveries
	}
	if err != nil {
		return fmt.Errorf("load webhook %s: %w", c.webhookID, err)
	}
	started := s.clock.Now()
	var out outcome
	switch {
	case !enabled && c.eventType != TestEventType:
		out.err = "the subscription is disabled"
	default:
		secret, err1 := s.box.Open(sealedSecret)
		headers, err2 := s.openHeaders(sealedHeaders)
		if err := errors.Join(err1, err2); err != nil {
			out.err = "the subscription's secrets do not open with this server's APP_ENCRYPTION_KEY"
			break
		}
		out = s.post(ctx, url, secret, headers, c)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return s.record(ctx, c, started, out, !enabled && c.eventType != TestEventType)
}

// Sign is the X-Gale-Signature value of a body sent at timestamp (Unix milliseconds):
// sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>.
func Sign(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (s *Service) post(ctx context.Context, url, secret string, headers map[string]string, c claimed) outcome {
	body := []byte(c.payload)
	ts := strconv.FormatInt(s.clock.Now().UnixMilli(), 10)
	// The duration is the request's own, measured on the monotonic clock.
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return outcome{err: "build request: " + err.Error()}
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Gale-Webhooks/1")
	req.Header.Set("X-Gale-Delivery", c.id)
	req.Header.Set("X-Gale-Event", c.eventID)
	req.Header.Set("X-Gale-Event-Type", c.eventType)
	req.Header.Set("X-Gale-Timestamp", ts)
	req.Header.Set("X-Gale-Signature", Sign(secret, ts, body))
	res, err := s.client.Do(req)
	if err != nil {
		return outcome{duration: time.Since(start), err: err.Error()}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 4*BodyLogChars))
	// Read a little further so the connection can be reused; a long answer is cut off.
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	status, text := res.StatusCode, truncateBody(raw)
	out := outcome{status: &status, body: &text, duration: time.Since(start)}
	switch {
	case success(status):
	case status >= 300 && status < 400:
		out.err = fmt.Sprintf("the receiver answered %d (redirect to %q); redirects are not followed", status, res.Header.Get("Location"))
	default:
		out.err = fmt.Sprintf("the receiver answered %d", status)
	}
	return out
}

// record stores an attempt and moves the delivery on: succeeded, retrying with backoff, or
// dead once its attempts are used up (at once when final is set). Only the claim's holder
// may record it.
func (s *Service) record(ctx context.Context, c claimed, started time.Time, out outcome, final bool) error {
	attempt := c.attempts + 1
	now := s.clock.Now()
	ms := out.duration.Milliseconds()
	status, next := StatusSucceeded, any(nil)
	var delivered any
	switch {
	case out.err == "":
		delivered = now
	case final || attempt >= c.maxAttempts:
		status = StatusDead
	default:
		status, next = StatusRetrying, now.Add(Backoff(attempt))
	}
	var errText *string
	if out.err != "" {
		errText = &out.err
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = $1, attempts = $2, next_attempt_at = $3,
			response_status = $4, response_body = $5, duration_ms = $6, error = $7, delivered_at = $8, claim_token = NULL,
			claimed_until = NULL, updated_at = $9 WHERE id = $10 AND status = $11 AND claim_token = $12`,
			status, attempt, next, out.status, out.body, ms, errText, delivered, now, c.id, StatusSending, c.token)
		if err != nil {
			return fmt.Errorf("record the attempt of delivery %s: %w", c.id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // the claim ran out and another node took over
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_delivery_attempts (id, delivery_id, attempt, started_at, response_status,
			response_body, duration_ms, error) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, store.NewID(), c.id, attempt, started,
			out.status, out.body, ms, errText); err != nil {
			return fmt.Errorf("log the attempt of delivery %s: %w", c.id, err)
		}
		return nil
	})
}

const deliveryColumns = `d.id, d.webhook_id, d.event_id, d.event_type, d.status, d.attempts, d.max_attempts, d.next_attempt_at,
	d.response_status, d.response_body, d.duration_ms, d.error, d.created_at, d.updated_at, d.delivered_at`

func scanDelivery(sc store.Scanner) (Delivery, error) {
	var d Delivery
	var next, delivered sql.NullTime
	var status, ms sql.NullInt64
	var body, errText sql.NullString
	err := sc.Scan(&d.ID, &d.WebhookID, &d.EventID, &d.EventType, &d.Status, &d.Attempts, &d.MaxAttempts, &next, &status, &body,
		&ms, &errText, &d.CreatedAt, &d.UpdatedAt, &delivered)
	if err != nil {
		return d, err
	}
	d.NextAttemptAt, d.DeliveredAt = store.TimePtr(next), store.TimePtr(delivered)
	if d.Status == StatusSucceeded || d.Status == StatusDead {
		d.NextAttemptAt = nil
	}
	if status.Valid {
		v := int(status.Int64)
		d.ResponseStatus = &v
	}
	if ms.Valid {
		d.DurationMs = &ms.Int64
	}
	d.ResponseBody, d.Error = store.StringPtr(body), store.StringPtr(errText)
	d.CreatedAt, d.UpdatedAt = d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	d.Log = []Attempt{}
	return d, nil
}

// attachLog fills in the attempts of each delivery.
func (s *Service) attachLog(ctx context.Context, q store.Querier, ds []Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	ids := make([]string, len(ds))
	idx := map[string]int{}
	for i, d := range ds {
		ids[i], idx[d.ID] = d.ID, i
	}
	type logged struct {
		deliveryID string
		Attempt
	}
	var a store.Args
	log, err := store.QueryAll(ctx, q, `SELECT delivery_id, attempt, started_at, response_status, response_body, duration_ms, error
		FROM webhook_delivery_attempts WHERE delivery_id IN `+a.In(ids)+` ORDER BY delivery_id, attempt`, a.Values(),
		func(sc store.Scanner) (l logged, err error) {
			var status sql.NullInt64
			var body, errText sql.NullString
			if err := sc.Scan(&l.deliveryID, &l.Attempt.Attempt, &l.StartedAt, &status, &body, &l.DurationMs, &errText); err != nil {
				return l, err
			}
			if status.Valid {
				v := int(status.Int64)
				l.ResponseStatus = &v
			}
			l.StartedAt = l.StartedAt.UTC()
			l.ResponseBody, l.Error = store.StringPtr(body), store.StringPtr(errText)
			return l, nil
		})
	if err != nil {
		return fmt.Errorf("load the delivery log: %w", err)
	}
	for _, l := range log {
		ds[idx[l.deliveryID]].Log = append(ds[idx[l.deliveryID]].Log, l.Attempt)
	}
	return nil
}

// Deliveries lists a subscription's deliveries, newest first, optionally of one status.
func (s *Service) Deliveries(ctx context.Context, webhookID, status string, page store.Page) ([]Delivery, string, *int, error) {
	if _, err := s.get(ctx, s.db, access.ScopeFrom(ctx), webhookID); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"d.webhook_id = " + a.Add(webhookID)}
	if status != "" {
		conds = append(conds, "d.status = "+a.Add(status))
	}
	rows, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: deliveryColumns, From: " FROM webhook_deliveries d",
		Conds: conds, Args: &a, SortKey: "d.id", SortID: "d.id", Desc: true}, page, scanDelivery,
		func(d Delivery) (string, string) { return d.ID, d.ID })
	if err != nil {
		return nil, "", nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	return rows, next, total, s.attachLog(ctx, s.db, rows)
}

func (s *Service) delivery(ctx context.Context, q store.Querier, webhookID, id string) (Delivery, error) {
	var a store.Args
	d, err := store.ByID(ctx, q, "delivery", `SELECT `+deliveryColumns+` FROM webhook_deliveries d`, "d.id", id, &a,
		[]string{"d.webhook_id = " + a.Add(webhookID)}, scanDelivery)
	if err != nil {
		return d, err
	}
	ds := []Delivery{d}
	err = s.attachLog(ctx, q, ds)
	return ds[0], err
}

// Retry re-queues a dead or retrying delivery for an attempt now, with MaxAttempts more
// attempts; any other status is a conflict (409).
func (s *Service) Retry(ctx context.Context, webhookID, deliveryID string) (Delivery, error) {
	scope := access.ScopeFrom(ctx)
	var out Delivery
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		w, err := s.get(ctx, tx, scope, webhookID)
		if err != nil {
			return err
		}
		d, err := s.delivery(ctx, tx, webhookID, deliveryID)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = $1, next_attempt_at = $2, max_attempts = attempts + $3,
			updated_at = $2 WHERE id = $4 AND status IN ($5, $6)`, StatusPending, s.clock.Now(), MaxAttempts, deliveryID, StatusDead,
			StatusRetrying)
		if err != nil {
			return fmt.Errorf("requeue delivery %s: %w", deliveryID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return apperr.Conflict("only a dead or retrying delivery can be retried; this one is " + d.Status)
		}
		if out, err = s.delivery(ctx, tx, webhookID, deliveryID); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "webhook.delivery_retry", ResourceType: "webhook", ResourceID: w.ID,
			ResourceName: w.Name, PartnerID: w.PartnerID, OrgID: store.Deref(w.OrgID),
			Details: map[string]any{"deliveryId": deliveryID, "eventType": d.EventType, "previousStatus": d.Status}})
	})
	if err != nil {
		return out, fmt.Errorf("retry webhook delivery: %w", err)
	}
	s.Wake()
	return out, nil
}

// Test sends a webhook.test event to the subscription now, whether or not it is enabled,
// and returns the delivery after its one attempt (a failed test is dead at once; retry it
// by hand).
func (s *Service) Test(ctx context.Context, webhookID string) (Delivery, error) {
	w, err := s.get(ctx, s.db, access.ScopeFrom(ctx), webhookID)
	if err != nil {
		return Delivery{}, err
	}
	p := access.PrincipalFrom(ctx)
	by := map[string]any{}
	if p != nil {
		by = map[string]any{"type": p.Kind, "id": p.ID, "email": p.Email}
	}
	e := events.Event{ID: store.NewID(), Type: TestEventType, PartnerID: w.PartnerID, OrgID: store.Deref(w.OrgID),
		OccurredAt: s.clock.Now()}
	e.Data, _ = json.Marshal(map[string]any{"webhookId": w.ID, "name": w.Name,
		"message": "This is a test delivery from Gale. Verify the X-Gale-Signature header with your signing secret.", "requestedBy": by})
	payload, err := envelope(e)
	if err != nil {
		return Delivery{}, err
	}
	// The row is written already claimed by this request, so no worker sends it too.
	c := claimed{id: store.NewID(), webhookID: w.ID, eventID: e.ID, eventType: e.Type, payload: payload, maxAttempts: 1,
		token: store.NewID()}
	now := s.clock.Now()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, event_id, event_type, payload, status,
		max_attempts, next_attempt_at, claim_token, claimed_until, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8, $9, $7, $7)`,
		c.id, w.ID, e.ID, e.Type, payload, StatusSending, now, c.token, now.Add(claimFor)); err != nil {
		return Delivery{}, fmt.Errorf("insert the test delivery of webhook %s: %w", w.ID, err)
	}
	if err := s.send(ctx, c); err != nil {
		return Delivery{}, err
	}
	id := c.id
	return s.delivery(ctx, s.db, w.ID, id)
}

// Retention is how long finished deliveries (succeeded or dead) are kept in the log.
const Retention = 30 * 24 * time.Hour

// Purge deletes finished deliveries older than Retention, with their attempts.
func (s *Service) Purge(ctx context.Context) (int64, error) {
	args := []any{StatusSucceeded, StatusDead, s.clock.Now().Add(-Retention)}
	return s.db.Purge(ctx, "webhook deliveries",
		store.Deletion{SQL: `DELETE FROM webhook_delivery_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries
			WHERE status IN ($1, $2) AND updated_at < $3)`, Args: args},
		store.Deletion{SQL: `DELETE FROM webhook_deliveries WHERE status IN ($1, $2) AND updated_at < $3`, Args: args})
}
