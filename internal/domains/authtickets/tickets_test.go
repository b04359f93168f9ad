package authtickets

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store/storetest"
)

func TestTicketOpensOnceForItsKindAndSubject(t *testing.T) {
	ctx := context.Background()
	s := New(Deps{DB: storetest.Open(t)})
	raw, expires, err := s.Issue(ctx, "terminal", "session-1", "user-1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if time.Until(expires) <= 0 || time.Until(expires) > time.Minute {
		t.Fatalf("expiry %v is not a minute ahead", expires)
	}
	for _, wrong := range []struct{ kind, subject string }{{"tunnel", "session-1"}, {"terminal", "session-2"}} {
		if _, err := s.Redeem(ctx, wrong.kind, wrong.subject, raw); !apperr.IsCode(err, ErrInvalid) {
			t.Fatalf("redeeming for %v: %v, want %s", wrong, err, ErrInvalid)
		}
	}
	got, err := s.Redeem(ctx, "terminal", "session-1", raw)
	if err != nil || got.UserID != "user-1" {
		t.Fatalf("first redemption: %+v, %v", got, err)
	}
	if _, err := s.Redeem(ctx, "terminal", "session-1", raw); !apperr.IsCode(err, ErrInvalid) {
		t.Fatalf("second redemption: %v, want %s", err, ErrInvalid)
	}
	if _, err := s.Redeem(ctx, "terminal", "session-1", "tkt_made-up"); !apperr.IsCode(err, ErrInvalid) {
		t.Fatalf("unknown ticket: %v, want %s", err, ErrInvalid)
	}
}

func TestExpiredTicketIsRefusedAndPurgedADayLater(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Now())
	s := New(Deps{DB: storetest.Open(t), Clock: clk})
	raw, _, err := s.Issue(ctx, "tunnel", "t1", "u1", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(5*time.Minute + time.Second)
	if _, err := s.Redeem(ctx, "tunnel", "t1", raw); !apperr.IsCode(err, ErrInvalid) {
		t.Fatalf("expired ticket: %v, want %s", err, ErrInvalid)
	}
	if n, err := s.purge(ctx); err != nil || n != 0 {
		t.Fatalf("purge right after expiry removed %d (%v), want 0", n, err)
	}
	clk.Advance(25 * time.Hour)
	if n, err := s.purge(ctx); err != nil || n != 1 {
		t.Fatalf("purge a day later removed %d (%v), want 1", n, err)
	}
}

func TestConcurrentRedemptionsHaveOneWinner(t *testing.T) {
	ctx := context.Background()
	s := New(Deps{DB: storetest.Open(t)})
	raw, _, err := s.Issue(ctx, "terminal", "s", "u", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var wins, refusals atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, err := s.Redeem(ctx, "terminal", "s", raw)
			switch {
			case err == nil:
				wins.Add(1)
			case apperr.IsCode(err, ErrInvalid):
				refusals.Add(1)
			default:
				t.Errorf("redeem: %v", err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 || refusals.Load() != 19 {
		t.Fatalf("%d wins and %d refusals, want 1 and 19", wins.Load(), refusals.Load())
	}
}
