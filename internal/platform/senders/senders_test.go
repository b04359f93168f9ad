package senders

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

func TestWakeRunsTheSendersAtOnceAndStopWaitsForThem(t *testing.T) {
	var runs, running atomic.Int32
	p := New("test", slog.New(slog.DiscardHandler), 3, time.Hour, func(ctx context.Context) (int, error) {
		running.Add(1)
		defer running.Add(-1)
		runs.Add(1)
		return 0, nil
	})
	p.Start(t.Context())
	p.Start(t.Context()) // a second start changes nothing
	deadline := time.Now().Add(5 * time.Second)
	for runs.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := runs.Load(); got != 3 {
		t.Fatalf("%d first rounds, want one per worker (3)", got)
	}
	// The poll is an hour away: only a wake-up can make a sender look again.
	p.Wake()
	for runs.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := runs.Load(); got != 4 {
		t.Fatalf("%d rounds after one wake-up, want 4", got)
	}
	p.Stop()
	if running.Load() != 0 {
		t.Fatal("Stop returned while a sender was still running")
	}
	p.Stop() // stopping a stopped pool changes nothing
}
