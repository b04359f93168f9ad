package jobs

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// A loop runs at its interval and at once when woken; a failing round does not stop it; Stop
// waits for the round under way and ends it.
func TestLoopRunsOnTimeAndWhenWoken(t *testing.T) {
	var rounds atomic.Int64
	ran := make(chan struct{}, 16)
	l := NewLoop("test work", time.Hour, slog.New(slog.DiscardHandler), func(context.Context) error {
		rounds.Add(1)
		ran <- struct{}{}
		return errors.New("this round failed")
	})
	l.Start(context.Background())
	for range 2 {
		l.Wake()
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("a woken loop did not run")
		}
	}
	l.Stop()
	n := rounds.Load()
	l.Wake()
	time.Sleep(50 * time.Millisecond)
	if rounds.Load() != n || n != 2 {
		t.Fatalf("rounds %d then %d, want 2 and none after Stop", n, rounds.Load())
	}

	fast := NewLoop("test work", 10*time.Millisecond, slog.New(slog.DiscardHandler), func(context.Context) error {
		select {
		case ran <- struct{}{}:
		default:
		}
		return nil
	})
	fast.Start(context.Background())
	defer fast.Stop()
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not run at its interval")
	}
}
