package ratelimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gale/internal/apperr"
	"gale/internal/ratelimit"
	"gale/internal/store/storetest"
)

func TestConcurrentHitsAllowExactlyTheLimit(t *testing.T) {
	l := ratelimit.New(storetest.Open(t))
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
	l := ratelimit.New(storetest.Open(t))
	rule := ratelimit.Rule{Limit: 1, Window: 50 * time.Millisecond}
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
	time.Sleep(60 * time.Millisecond)
	if _, err := l.Hit(ctx, "a", rule); err != nil {
		t.Fatalf("hit after the window: %v", err)
	}
	time.Sleep(60 * time.Millisecond)
	n, err := l.Purge(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Purge = %d, %v; want 2 expired windows removed", n, err)
	}
}
