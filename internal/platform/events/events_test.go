package events_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"gale/internal/platform/events"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

// quietDB is a server's database without the events its start recorded (the first
// administrator's audit entry), so tests see only their own.
func quietDB(t *testing.T) *store.DB {
	t.Helper()
	db := apptest.New(t).App.DB
	if _, err := db.ExecContext(t.Context(), `DELETE FROM events`); err != nil {
		t.Fatal(err)
	}
	return db
}

func record(t *testing.T, db *store.DB, typ string, n int) {
	t.Helper()
	err := db.Write(t.Context(), func(tx *sql.Tx) error {
		for i := range n {
			if _, err := events.Record(t.Context(), tx, events.Event{Type: typ, ResourceType: "thing", ResourceID: fmt.Sprint(i)},
				map[string]int{"n": i}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// collector is a consumer that remembers what it handled.
type collector struct {
	mu   sync.Mutex
	seen []string
}

func (c *collector) consumer(name string, types ...string) events.Consumer {
	return events.Consumer{Name: name, Types: types, Handle: func(_ context.Context, _ *sql.Tx, e events.Event) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.seen = append(c.seen, e.Type+"/"+e.ResourceID)
		return nil
	}}
}

func (c *collector) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

func TestEachConsumerGetsEveryCommittedEventOnceInOrder(t *testing.T) {
	db := quietDB(t)
	d := events.NewDispatcher(db, slog.New(slog.DiscardHandler))
	var all, alerts collector
	d.Register(all.consumer("all"))
	d.Register(alerts.consumer("alerts", "alert.opened"))

	record(t, db, "alert.opened", 3)
	_ = db.Write(t.Context(), func(tx *sql.Tx) error {
		if _, err := events.Record(t.Context(), tx, events.Event{Type: "alert.opened", ResourceID: "rolled-back"}, nil); err != nil {
			return err
		}
		return errors.New("the change failed")
	})
	record(t, db, "device.offline", 1)
	for range 2 {
		if err := d.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"alert.opened/0", "alert.opened/1", "alert.opened/2", "device.offline/0"}
	if got := all.got(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("consumer of every type got %v, want %v", got, want)
	}
	if got := alerts.got(); fmt.Sprint(got) != fmt.Sprint(want[:3]) {
		t.Fatalf("consumer of alert.opened got %v, want %v", got, want[:3])
	}
}

func TestAFailingHandlerIsRetriedAndItsWritesRolledBack(t *testing.T) {
	db := quietDB(t)
	d := events.NewDispatcher(db, slog.New(slog.DiscardHandler))
	fail := true
	var handled []string
	d.Register(events.Consumer{Name: "flaky", Handle: func(ctx context.Context, tx *sql.Tx, e events.Event) error {
		// A write of the handler, which must not survive a failure.
		if _, err := events.Record(ctx, tx, events.Event{Type: "derived"}, nil); err != nil {
			return err
		}
		if fail {
			return errors.New("downstream broken")
		}
		handled = append(handled, e.Type)
		return nil
	}})
	record(t, db, "alert.opened", 1)
	if err := d.RunOnce(t.Context()); err == nil {
		t.Fatal("a failing handler reported no error")
	}
	var derived int
	if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM events WHERE type = 'derived'`).Scan(&derived); err != nil || derived != 0 {
		t.Fatalf("writes of a failed handler: %d (%v), want 0", derived, err)
	}
	fail = false
	for range 2 {
		if err := d.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// The retried event, then (next round) the event its successful handling recorded.
	if fmt.Sprint(handled) != "[alert.opened derived]" {
		t.Fatalf("handled %v, want the event once and then the derived one", handled)
	}
}

func TestTwoNodesHandleEachEventOnce(t *testing.T) {
	db := quietDB(t)
	var c collector
	nodes := []*events.Dispatcher{events.NewDispatcher(db, slog.New(slog.DiscardHandler)),
		events.NewDispatcher(db, slog.New(slog.DiscardHandler))}
	for _, d := range nodes {
		d.Register(c.consumer("shared"))
	}
	record(t, db, "device.offline", 150)
	var wg sync.WaitGroup
	for _, d := range nodes {
		wg.Go(func() {
			if err := d.RunOnce(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, d := range nodes {
		if err := d.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	got := c.got()
	seen := map[string]int{}
	for _, s := range got {
		seen[s]++
	}
	if len(got) != 150 || len(seen) != 150 {
		t.Fatalf("150 events handled %d times (%d distinct), want each exactly once", len(got), len(seen))
	}
	var holders int
	if err := db.QueryRowContext(t.Context(), `SELECT COUNT(DISTINCT holder) FROM event_consumer_leases`).Scan(&holders); err != nil || holders != 1 {
		t.Fatalf("lease holders = %d (%v), want one node", holders, err)
	}
}

func TestPurgeDropsOldEvents(t *testing.T) {
	db := quietDB(t)
	record(t, db, "old", 2)
	record(t, db, "new", 1)
	if _, err := db.ExecContext(t.Context(), `UPDATE events SET occurred_at = $1 WHERE type = 'old'`,
		store.Now().Add(-events.Retention-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := events.NewDispatcher(db, slog.New(slog.DiscardHandler)).Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	var left []string
	rows, err := db.QueryContext(t.Context(), `SELECT type FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var typ string
		_ = rows.Scan(&typ)
		left = append(left, typ)
	}
	if fmt.Sprint(left) != "[new]" {
		t.Fatalf("after purge: %v, want only the recent event", left)
	}
}
