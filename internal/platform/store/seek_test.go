package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"gale/internal/platform/store"
	"gale/internal/platform/store/storetest"
)

// IDFloor is at or below every ID minted at that time or later, and above IDs of an earlier
// millisecond.
func TestIDFloor(t *testing.T) {
	before := store.NewID()
	time.Sleep(2 * time.Millisecond)
	at := time.Now()
	floor := store.IDFloor(at)
	after := store.NewID()
	if !(before < floor && floor <= after) || !store.ValidID(floor) {
		t.Fatalf("IDFloor = %s; want between %s and %s, and a valid ID", floor, before, after)
	}
}

// Paging by (change time, ID) visits every row once, ties on the change time included, and
// Since keeps the rows changed at or after it.
func TestSeekPages(t *testing.T) {
	db := storetest.Open(t)
	base := store.Now().Add(-time.Hour)
	var want []string
	for i := range 7 {
		id := store.NewID()
		// Three rows share each change time, so pages split ties.
		storetest.Exec(t, db.SQL, `INSERT INTO partners (id, name, slug, created_at, updated_at) VALUES ($1, $2, $2, $3, $3)`,
			id, "p"+id, base.Add(time.Duration(i/3)*time.Minute))
		want = append(want, id)
	}
	read := func(since time.Time) []string {
		var got []string
		sk := store.Seek{Since: since, Limit: 2}
		for {
			var a store.Args
			conds := []string{"TRUE"}
			keys := sk.Keys(&a, &conds, "updated_at", "id")
			type row struct {
				id      string
				updated time.Time
			}
			rows, more, err := store.SeekPage(context.Background(), db, store.SeekQuery{Columns: "id, updated_at", From: " FROM partners",
				Conds: conds, Args: &a, Keys: keys}, sk, func(sc store.Scanner) (row, error) {
				var r row
				err := sc.Scan(&r.id, &r.updated)
				return r, err
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) > 2 {
				t.Fatalf("page of %d rows, want at most 2", len(rows))
			}
			for _, r := range rows {
				got = append(got, r.id)
			}
			if !more {
				return got
			}
			last := rows[len(rows)-1]
			if since.IsZero() {
				sk.After = []any{last.id}
			} else {
				sk.After = []any{last.updated.UTC(), last.id}
			}
		}
	}
	if got := read(time.Time{}); !slices.Equal(got, want) {
		t.Errorf("by ID = %v, want %v", got, want)
	}
	if got := read(base.Add(-time.Second)); !slices.Equal(got, want) {
		t.Errorf("by change time = %v, want %v", got, want)
	}
	if got := read(base.Add(time.Minute)); !slices.Equal(got, want[3:]) {
		t.Errorf("since the second minute = %v, want %v", got, want[3:])
	}
}
