// Package ratelimit counts requests in fixed windows whose counters live in the database, so
// a limit holds across every server node and survives restarts.
package ratelimit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// Limiter counts hits per key.
type Limiter struct {
	db *store.DB
	// clock is what windows start and end by.
	clock clock.Clock
}

// New returns a limiter over db whose windows follow clk (nil: the system clock).
func New(db *store.DB, clk clock.Clock) *Limiter { return &Limiter{db: db, clock: clock.Or(clk)} }

// Rule is a budget: at most Limit hits per Window.
type Rule struct {
	Limit  int
	Window time.Duration
}

// Result is the state of a key after a hit.
type Result struct {
	Count     int
	Remaining int
	Reset     time.Time
}

// Hit counts one hit on key and returns 429 RATE_LIMITED (with Retry-After) when the
// window's budget is spent. The count and the window are one atomic upsert.
func (l *Limiter) Hit(ctx context.Context, key string, r Rule) (Result, error) {
	return l.HitIn(ctx, l.db, key, r)
}

// HitIn is Hit inside the caller's transaction: the hit commits or rolls back with the work
// it pays for, so a refused or failed request spends nothing.
func (l *Limiter) HitIn(ctx context.Context, q store.Querier, key string, r Rule) (Result, error) {
	res, err := l.add(ctx, q, key, r)
	if err != nil {
		return res, err
	}
	if res.Count > r.Limit {
		return res, apperr.RateLimited(res.Reset.Sub(l.clock.Now()))
	}
	return res, nil
}

// Peek returns the state of key's window without counting a hit: an unused or ended window
// has the whole budget, resetting a Window from now.
func (l *Limiter) Peek(ctx context.Context, key string, r Rule) (Result, error) {
	now := l.clock.Now()
	res := Result{Remaining: r.Limit, Reset: now.Add(r.Window)}
	err := l.db.QueryRowContext(ctx, `SELECT count, expires_at FROM rate_limits WHERE key = $1 AND expires_at > $2`,
		key, now).Scan(&res.Count, &res.Reset)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return res, fmt.Errorf("rate limit %s: %w", key, err)
	}
	res.Remaining = max(r.Limit-res.Count, 0)
	return res, nil
}

// Count counts one hit without refusing; callers compare the count themselves (lockouts).
func (l *Limiter) Count(ctx context.Context, q store.Querier, key string, r Rule) (Result, error) {
	return l.add(ctx, q, key, r)
}

// Blocked reports how long key stays at or over the rule's budget, without counting a hit;
// zero when it is under budget.
func (l *Limiter) Blocked(ctx context.Context, key string, r Rule) (time.Duration, error) {
	var count int
	var until time.Time
	now := l.clock.Now()
	err := l.db.QueryRowContext(ctx, `SELECT count, expires_at FROM rate_limits WHERE key = $1 AND expires_at > $2`,
		key, now).Scan(&count, &until)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && count < r.Limit) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return max(until.Sub(now), time.Second), nil
}

// Clear forgets key (a successful sign-in clears its failure count).
func (l *Limiter) Clear(ctx context.Context, q store.Querier, key string) error {
	_, err := q.ExecContext(ctx, `DELETE FROM rate_limits WHERE key = $1`, key)
	return err
}

// Purge deletes expired windows; the periodic cleanup job calls it.
func (l *Limiter) Purge(ctx context.Context) (int64, error) {
	res, err := l.db.ExecContext(ctx, `DELETE FROM rate_limits WHERE expires_at < $1`, l.clock.Now())
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (l *Limiter) add(ctx context.Context, q store.Querier, key string, r Rule) (Result, error) {
	now := l.clock.Now()
	var res Result
	err := q.QueryRowContext(ctx, `INSERT INTO rate_limits (key, window_start, count, expires_at) VALUES ($1, $2, 1, $3)
		ON CONFLICT (key) DO UPDATE SET
			count = CASE WHEN rate_limits.expires_at <= $2 THEN 1 ELSE rate_limits.count + 1 END,
			window_start = CASE WHEN rate_limits.expires_at <= $2 THEN $2 ELSE rate_limits.window_start END,
			expires_at = CASE WHEN rate_limits.expires_at <= $2 THEN $3 ELSE rate_limits.expires_at END
		RETURNING count, expires_at`, key, now, now.Add(r.Window)).Scan(&res.Count, &res.Reset)
	if err != nil {
		return res, fmt.Errorf("rate limit %s: %w", key, err)
	}
	res.Remaining = max(r.Limit-res.Count, 0)
	return res, nil
}
