// Package tickets issues and redeems single-use tickets: short-lived random secrets that let a
// browser open what it cannot send a bearer token to (a terminal WebSocket, a tunnel's first
// request). A ticket is bound to a kind, to the thing it opens and to the user it was issued
// to; only its hash is stored, and the database decides the one redemption that wins, so a
// ticket opens once however many nodes are asked at the same moment.
package authtickets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
)

// ErrInvalid is the code of a ticket that is unknown, expired, already used, or for
// something else.
const ErrInvalid = "INVALID_TICKET"

// Ticket is what a redeemed ticket was issued for.
type Ticket struct {
	Kind      string
	SubjectID string
	UserID    string
	ExpiresAt time.Time
}

// Service keeps tickets.
type Service struct {
	db    *store.DB
	clock clock.Clock
}

// Deps is what the ticket service is built from.
type Deps struct {
	DB    *store.DB
	Clock clock.Clock
}

// New returns a Service.
func New(d Deps) *Service { return &Service{db: d.DB, clock: clock.Or(d.Clock)} }

// Issue makes a ticket of kind for subjectID and userID, valid for ttl, and returns the raw
// ticket (shown once) and its expiry.
func (s *Service) Issue(ctx context.Context, kind, subjectID, userID string, ttl time.Duration) (string, time.Time, error) {
	raw := secrets.Token("tkt_", 32)
	now := s.clock.Now()
	expires := now.Add(ttl)
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO tickets (hash, kind, subject_id, user_id, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, secrets.Hash(raw), kind, subjectID, userID, now, expires)
		return err
	})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("issue a %s ticket: %w", kind, err)
	}
	return raw, expires, nil
}

// Redeem uses the ticket raw of kind for subjectID: it succeeds once, before the ticket
// expires. Any other outcome is one 401 INVALID_TICKET, which tells a guesser nothing.
func (s *Service) Redeem(ctx context.Context, kind, subjectID, raw string) (Ticket, error) {
	t := Ticket{Kind: kind, SubjectID: subjectID}
	now := s.clock.Now()
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `UPDATE tickets SET used_at = $1
			WHERE hash = $2 AND kind = $3 AND subject_id = $4 AND used_at IS NULL AND expires_at > $1
			RETURNING user_id, expires_at`, now, secrets.Hash(raw), kind, subjectID).Scan(&t.UserID, &t.ExpiresAt)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Ticket{}, &apperr.Error{Kind: apperr.KindUnauthenticated, Code: ErrInvalid,
			Message: "the ticket is unknown, expired or already used: ask for a new one"}
	}
	if err != nil {
		return Ticket{}, fmt.Errorf("redeem a %s ticket: %w", kind, err)
	}
	t.ExpiresAt = t.ExpiresAt.UTC()
	return t, nil
}

// purge deletes tickets that expired more than a day ago (kept that long so a late attempt
// still finds a used ticket in the table when someone looks into a refusal).
func (s *Service) purge(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM tickets WHERE expires_at < $1`, s.clock.Now().Add(-24*time.Hour))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purge expired tickets: %w", err)
	}
	return n, nil
}
