package ratelimit_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/ratelimit"
	"gale/internal/platform/store/storetest"
)

func TestConcurrentHitsAllowExactlyTheLimit(t *testing.T) {
	l := ratelimit.New(storetest.Open(t), nil)
	rule := ratelimit.Rule{Limit: 10, Window: time.Minute}
	var allowed, refused atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 25; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Hit(context.Background(), "k", rule)
			switch {
			case err == nil:
				allowed.Add(1)
			case apperr.IsCode(err, apperr.CodeRateLimited):
				e, _ := apperr.As(err)
				if e.RetryAfter <= 0 || e.RetryAfter > time.Minute {
					t.Errorf("RetryAfter = %s", e.RetryAfter)
				}
				refused.Add(1)
			default:
				t.Errorf("hit: %v", err)
			}
		}()
	}
	wg.Wait()
	if allowed.Load() != 10 || refused.Load() != 15 {
		t.Fatalf("allowed %d, refused %d; want 10 and 15", allowed.Load(), refused.Load())
	}
}

func TestWindowResetsAndKeysAreSeparate(t *testing.T) {
	// Windows of an hour, ended by moving the clock: a slow database cannot end one early.
	clk := clock.NewFake(time.Now())
	l := ratelimit.New(storetest.Open(t), clk)
	rule := ratelimit.Rule{Limit: 1, Window: time.Hour}
	ctx := context.Background()
	if _, err := l.Hit(ctx, "a", rule); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Hit(ctx, "a", rule); err == nil {
		t.Fatal("second hit in the window allowed")
	}
	if _, err := l.Hit(ctx, "b", rule); err != nil {
		t.Fatalf("another key refused: %v", err)
	}
	if wait, err := l.Blocked(ctx, "a", rule); err != nil || wait <= 0 {
		t.Fatalf("Blocked = %s, %v; want a wait", wait, err)
	}
	clk.Advance(61 * time.Minute)
	if _, err := l.Hit(ctx, "a", rule); err != nil {
		t.Fatalf("hit after the window: %v", err)
	}
	clk.Advance(61 * time.Minute)
	n, err := l.Purge(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Purge = %d, %v; want 2 expired windows removed", n, err)
	}
}

// A hit inside a transaction that rolls back is not counted; Peek reads without counting.
func TestHitInRollsBackWithItsTransaction(t *testing.T) {
	db := storetest.Open(t)
	l := ratelimit.New(db, nil)
	rule := ratelimit.Rule{Limit: 2, Window: time.Hour}
	ctx := context.Background()
	failed := errors.New("the work failed")
	err := db.Write(ctx, func(tx *sql.Tx) error {
		if _, err := l.HitIn(ctx, tx, "k", rule); err != nil {
			return err
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatal(err)
	}
	if res, err := l.Peek(ctx, "k", rule); err != nil || res.Count != 0 || res.Remaining != 2 {
		t.Fatalf("after a rolled-back hit: Peek = %+v, %v; want nothing counted", res, err)
	}
	for i := range 2 {
		if err := db.Write(ctx, func(tx *sql.Tx) error { _, err := l.HitIn(ctx, tx, "k", rule); return err }); err != nil {
			t.Fatalf("hit %d: %v", i, err)
		}
	}
	if res, err := l.Peek(ctx, "k", rule); err != nil || res.Count != 2 || res.Remaining != 0 {
		t.Fatalf("Peek = %+v, %v; want 2 counted, none left", res, err)
	}
	if res, err := l.Peek(ctx, "k", rule); err != nil || res.Count != 2 {
		t.Fatalf("Peek counted: %+v, %v", res, err)
	}
	if _, err := l.Hit(ctx, "k", rule); !apperr.IsCode(err, apperr.CodeRateLimited) {
		t.Fatalf("third hit = %v, want 429", err)
	}
}

// A limiter ends windows by its clock.
func TestWindowsFollowTheClock(t *testing.T) {
	clk := clock.NewFake(time.Now())
	l := ratelimit.New(storetest.Open(t), clk)
	rule := ratelimit.Rule{Limit: 1, Window: time.Hour}
	ctx := context.Background()
	if _, err := l.Hit(ctx, "k", rule); err != nil {
		t.Fatal(err)
	}
	_, err := l.Hit(ctx, "k", rule)
	if e, ok := apperr.As(err); !ok || e.RetryAfter < 59*time.Minute || e.RetryAfter > time.Hour {
		t.Fatalf("second hit = %v, want 429 with about an hour to wait", err)
	}
	clk.Advance(time.Hour + time.Second)
	if _, err := l.Hit(ctx, "k", rule); err != nil {
		t.Fatalf("hit an hour later: %v", err)
	}
}
