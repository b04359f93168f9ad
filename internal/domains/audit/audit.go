// Package audit is Gale's append-only audit log. Every successful write records an entry in
// the same transaction as the change (Record); refusals and failed sign-ins are recorded as
// security events in their own transaction (Security). Rows are never changed or deleted:
// the database refuses it with a trigger, and no route offers it.
package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
)

// Categories of entries.
const (
	CategoryChange   = "change"
	CategorySecurity = "security"
)

// Results of the recorded action.
const (
	ResultSuccess = "success"
	ResultFailure = "failure"
	ResultDenied  = "denied"
)

// Entry is one thing that happened. The actor and request come from the context.
type Entry struct {
	Action       string // dotted verb, e.g. "organization.create"
	ResourceType string
	ResourceID   string
	ResourceName string
	// PartnerID and OrgID place the entry in the tenancy tree; they decide who may read it.
	PartnerID string
	OrgID     string
	// Details summarizes the change (fields set, before and after); never secrets.
	Details map[string]any
	// Category and Result default to change and success.
	Category string
	Result   string
	// Actor overrides the context's principal (failed sign-ins name the account tried).
	Actor *Actor
}

// Actor names who acted.
type Actor struct {
	Type  access.ActorKind
	ID    string
	Email string
}

// Log writes audit entries.
type Log struct {
	db     *store.DB
	logger *slog.Logger
	clock  clock.Clock
}

// Deps is what the audit log is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	Clock  clock.Clock
}

// New returns the audit log.
func New(d Deps) *Log { return &Log{db: d.DB, logger: d.Logger, clock: clock.Or(d.Clock)} }

// Record writes e inside tx, so the entry commits or rolls back with the change it describes.
// Every domain calls it inside its own transaction, where no clock is at hand: the entry
// takes the system's time.
func Record(ctx context.Context, tx *sql.Tx, e Entry) error {
	return insert(ctx, tx, e, store.Now())
}

// Security records a security event (a refusal, a failed sign-in) in its own transaction:
// the request it describes fails, and the event must survive that.
func (l *Log) Security(ctx context.Context, e Entry) {
	if e.Category == "" {
		e.Category = CategorySecurity
	}
	if e.Result == "" {
		e.Result = ResultDenied
	}
	if err := l.db.Write(ctx, func(tx *sql.Tx) error { return insert(ctx, tx, e, l.clock.Now()) }); err != nil {
		l.logger.ErrorContext(ctx, "record security event", "action", e.Action, "error", err)
	}
}

// RecordAction records a change made outside the database (on a device, by its agent) once
// it has happened, in a transaction of its own.
func (l *Log) RecordAction(ctx context.Context, e Entry) error {
	return l.db.Write(ctx, func(tx *sql.Tx) error { return insert(ctx, tx, e, l.clock.Now()) })
}

// RecordDenied records a refused operation; it implements httpapi.SecurityRecorder.
func (l *Log) RecordDenied(ctx context.Context, operation, reason string) {
	p := access.PrincipalFrom(ctx)
	e := Entry{Action: "access.denied", ResourceType: "operation", ResourceID: operation,
		Details: map[string]any{"reason": reason}}
	if p != nil {
		e.PartnerID, e.OrgID = p.Scope.PartnerID, p.Scope.OrgID
	}
	l.Security(ctx, e)
}

func actorFrom(ctx context.Context, override *Actor) Actor {
	if override != nil {
		return *override
	}
	p := access.PrincipalFrom(ctx)
	if p == nil {
		return Actor{Type: access.ActorAnonymous}
	}
	return Actor{Type: p.Kind, ID: p.ID, Email: p.Email}
}

// EventPrefix starts the type of the domain event every entry records: audit.<action>.
const EventPrefix = "audit."

// insert writes the entry and, in the same transaction, its domain event (audit.<action>,
// data: the entry as the API shows it).
func insert(ctx context.Context, tx *sql.Tx, e Entry, now time.Time) error {
	if e.Category == "" {
		e.Category = CategoryChange
	}
	if e.Result == "" {
		e.Result = ResultSuccess
	}
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	b, err := json.Marshal(details)
	if err != nil {
		return fmt.Errorf("encode audit details: %w", err)
	}
	actor := actorFrom(ctx, e.Actor)
	req := access.RequestFrom(ctx)
	id := store.NewID()
	_, err = tx.ExecContext(ctx, `INSERT INTO audit_logs (id, occurred_at, partner_id, org_id, category, result,
		actor_type, actor_id, actor_email, action, resource_type, resource_id, resource_name, ip, user_agent,
		request_id, details) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
		id, now, store.NullIfEmpty(e.PartnerID), store.NullIfEmpty(e.OrgID), e.Category, e.Result,
		string(actor.Type), store.NullIfEmpty(actor.ID), store.NullIfEmpty(actor.Email), e.Action, e.ResourceType,
		store.NullIfEmpty(e.ResourceID), store.NullIfEmpty(e.ResourceName), store.NullIfEmpty(req.IP), store.NullIfEmpty(req.UserAgent),
		store.NullIfEmpty(req.ID), string(b))
	if err != nil {
		return fmt.Errorf("record audit entry %s: %w", e.Action, err)
	}
	view := LogEntry{ID: id, OccurredAt: now, PartnerID: ptr(e.PartnerID), OrgID: ptr(e.OrgID), Category: e.Category,
		Result: e.Result, ActorType: string(actor.Type), ActorID: ptr(actor.ID), ActorEmail: ptr(actor.Email), Action: e.Action,
		ResourceType: e.ResourceType, ResourceID: ptr(e.ResourceID), ResourceName: ptr(e.ResourceName), IP: ptr(req.IP),
		UserAgent: ptr(req.UserAgent), RequestID: ptr(req.ID)}
	// Details go through JSON as the API reads them back.
	view.Details = map[string]any{}
	_ = json.Unmarshal(b, &view.Details)
	if _, err = events.Record(ctx, tx, events.Event{Type: EventPrefix + e.Action, PartnerID: e.PartnerID, OrgID: e.OrgID,
		ResourceType: "audit_entry", ResourceID: id}, view); err != nil {
		return fmt.Errorf("record the event of audit entry %s: %w", e.Action, err)
	}
	return nil
}

func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
