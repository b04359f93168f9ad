// Package senders runs a node's senders of queued outbound work (webhook deliveries, alert
// notifications, phone pushes): a few goroutines that send whatever is due, then wait for a
// wake-up or the next poll. The work itself lives in the database, claimed row by row, so any
// number of nodes may run senders over the same queue.
package senders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// wakeDelay is how long a woken sender waits before looking: wake-ups come from inside the
// transaction that queued the work, which needs a moment to commit (the next poll catches a
// slower one).
const wakeDelay = 50 * time.Millisecond

// Pool is one kind of sender on this node.
type Pool struct {
	name    string
	logger  *slog.Logger
	workers int
	poll    time.Duration
	// sendDue sends what is due until nothing is left and says how much it sent.
	sendDue func(ctx context.Context) (int, error)
	wake    chan struct{}

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a pool of workers goroutines running sendDue every poll and on Wake; name
// appears in its log lines.
func New(name string, logger *slog.Logger, workers int, poll time.Duration, sendDue func(ctx context.Context) (int, error)) *Pool {
	return &Pool{name: name, logger: logger, workers: max(workers, 1), poll: poll, sendDue: sendDue, wake: make(chan struct{}, 1)}
}

// Wake makes a sender look for due work now.
func (p *Pool) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Start runs the senders until Stop; starting a started pool does nothing.
func (p *Pool) Start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	p.cancel, p.done = cancel, done
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for range p.workers {
			wg.Go(func() { p.work(ctx) })
		}
		wg.Wait()
	}()
}

// Stop ends the senders and waits for them (work in flight is cut short and retried later).
func (p *Pool) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
	p.cancel = nil
}

func (p *Pool) work(ctx context.Context) {
	t := time.NewTicker(p.poll)
	defer t.Stop()
	for {
		if _, err := p.sendDue(ctx); err != nil && ctx.Err() == nil {
			p.logger.WarnContext(ctx, p.name+" failed; retrying", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.wake:
			select {
			case <-ctx.Done():
				return
			case <-time.After(wakeDelay):
			}
		}
	}
}

// The states of a queued delivery that Claim moves between; tables it works on have the
// columns status, next_attempt_at, claim_token, claimed_until and updated_at.
const (
	Pending  = "pending"
	Sending  = "sending"
	Retrying = "retrying"
)

// dueCondition selects rows ready for an attempt: pending or retrying and due, or sending
// with a claim that ran out (its node died). $1 pending, $2 retrying, $3 now, $4 sending.
const dueCondition = `((status IN ($1, $2) AND next_attempt_at <= $3) OR (status = $4 AND claimed_until < $3))`

// Claim takes one due row of table for claimFor with a conditional update, so exactly one
// node wins it, due and claims measured on clk (the one the rows were queued on); token marks the claim, and the columns named by returning are read back into
// scan. An idle node only reads; the claim itself runs in a write transaction that on
// PostgreSQL skips rows other nodes are claiming (FOR UPDATE SKIP LOCKED), so senders do not
// queue up behind each other. false means nothing is due.
func Claim(ctx context.Context, db *store.DB, clk clock.Clock, table string, claimFor time.Duration, token, returning string,
	scan func(store.Scanner) error) (bool, error) {
	lock := db.ForUpdateSkipLocked()
	for range 20 {
		now := clk.Now()
		var one int
		err := db.QueryRowContext(ctx, `SELECT 1 FROM `+table+` WHERE `+dueCondition+` LIMIT 1`,
			Pending, Retrying, now, Sending).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("find due %s: %w", table, err)
		}
		won := false
		err = db.Write(ctx, func(tx *sql.Tx) error {
			var id string
			err := tx.QueryRowContext(ctx, `SELECT id FROM `+table+` WHERE `+dueCondition+` ORDER BY next_attempt_at LIMIT 1`+lock,
				Pending, Retrying, now, Sending).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			err = scan(tx.QueryRowContext(ctx, `UPDATE `+table+` SET status = $4, claim_token = $5, claimed_until = $6, updated_at = $3
				WHERE id = $7 AND `+dueCondition+` RETURNING `+returning, Pending, Retrying, now, Sending, token, now.Add(claimFor), id))
			if errors.Is(err, sql.ErrNoRows) {
				return nil // another node won it
			}
			won = err == nil
			return err
		})
		if err != nil {
			return false, fmt.Errorf("claim %s: %w", table, err)
		}
		if won {
			return true, nil
		}
	}
	return false, nil
}

// Drain runs sendNext until it reports that nothing was due, and returns how many it sent.
func Drain(ctx context.Context, sendNext func(ctx context.Context) (bool, error)) (int, error) {
	n := 0
	for ctx.Err() == nil {
		sent, err := sendNext(ctx)
		if err != nil || !sent {
			return n, err
		}
		n++
	}
	return n, ctx.Err()
}
