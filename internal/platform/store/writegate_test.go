package store

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Waiting urgent writes take the slot before ordinary ones that came earlier; ordinary ones
// keep their arrival order; a waiter whose context ends leaves the queue, and the writer still
// passes on.
func TestWriteGateLetsUrgentWritesFirst(t *testing.T) {
	g := newWriteGate(1)
	ctx := context.Background()
	if err := g.lock(ctx, false); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	wait := func(name string, urgent bool) {
		wg.Go(func() {
			if err := g.lock(ctx, urgent); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			g.unlock()
		})
	}
	queued := func(n int) {
		for {
			g.mu.Lock()
			got := len(g.urgent) + len(g.normal)
			g.mu.Unlock()
			if got == n {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	wait("normal-1", false)
	queued(1)
	wait("normal-2", false)
	queued(2)
	gone, cancel := context.WithCancel(ctx)
	cancelled := make(chan error, 1)
	go func() { cancelled <- g.lock(gone, false) }()
	queued(3)
	cancel()
	if err := <-cancelled; err == nil {
		t.Fatal("a cancelled waiter got the writer")
	}
	queued(2)
	wait("urgent", true)
	queued(3)
	g.unlock()
	wg.Wait()
	if len(order) != 3 || order[0] != "urgent" || order[1] != "normal-1" || order[2] != "normal-2" {
		t.Fatalf("order %v", order)
	}
	if err := g.lock(ctx, false); err != nil || g.inUse != 1 {
		t.Fatalf("the writer was not free at the end: %v", err)
	}
}

// With several slots, that many writers run at once; the next one waits for a slot.
func TestWriteGateHasItsSlots(t *testing.T) {
	g := newWriteGate(2)
	ctx := context.Background()
	for range 2 {
		if err := g.lock(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := g.lock(short, true); err == nil {
		t.Fatal("a third writer got in")
	}
	g.unlock()
	if err := g.lock(ctx, true); err != nil {
		t.Fatal(err)
	}
	if g.inUse != 2 {
		t.Fatalf("in use %d", g.inUse)
	}
}
