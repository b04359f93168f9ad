package script

import (
	"context"
	"testing"
	"time"
)

// At most max scripts hold a turn; the others get theirs in arrival order, and one whose
// context ends while waiting leaves the queue without taking a turn from the others.
func TestQueueLimitsAndKeepsOrder(t *testing.T) {
	q := newQueue(2)
	ctx := context.Background()
	for range 2 {
		if err := q.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan int, 3)
	gone, cancel := context.WithCancel(ctx)
	wait := func(i int, ctx context.Context) {
		if q.acquire(ctx) == nil {
			got <- i
		}
	}
	queued := func(n int) {
		for {
			q.mu.Lock()
			l := len(q.waiting)
			q.mu.Unlock()
			if l == n {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	// 1, then the one that gives up, then 3, in this order.
	go wait(1, ctx)
	queued(1)
	go wait(2, gone)
	queued(2)
	go wait(3, ctx)
	queued(3)
	select {
	case i := <-got:
		t.Fatalf("script %d ran while two held every turn", i)
	default:
	}
	cancel()
	queued(2)
	q.release()
	if i := <-got; i != 1 {
		t.Fatalf("first turn went to %d, want 1", i)
	}
	q.release()
	if i := <-got; i != 3 {
		t.Fatalf("second turn went to %d, want 3 (2 gave up)", i)
	}
	q.release()
	q.release()
	if q.running != 0 || len(q.waiting) != 0 {
		t.Fatalf("after every release: %d running, %d waiting", q.running, len(q.waiting))
	}
}
