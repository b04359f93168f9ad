package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"gale/internal/platform/apperr"
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

// KeysetList and RankedList page a list through its cursors and by page number with the
// total, each row once and in order; a cursor that is not theirs is a 400.
func TestKeysetAndRankedLists(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	base := store.Now().Add(-time.Hour)
	var want []string // by updated_at, then id
	for i := range 5 {
		id := store.NewID()
		storetest.Exec(t, db.SQL, `INSERT INTO partners (id, name, slug, created_at, updated_at) VALUES ($1, $2, $2, $3, $3)`,
			id, "p"+id, base.Add(time.Duration(i/2)*time.Minute))
		want = append(want, id)
	}
	scan := func(sc store.Scanner) (string, error) {
		var id string
		var at time.Time
		return id, sc.Scan(&id, &at)
	}
	keyset := func(page store.Page) ([]string, string, *int, error) {
		var a store.Args
		var at time.Time
		var id string
		return store.KeysetList(ctx, db, store.SeekQuery{Columns: "id, updated_at", From: " FROM partners", Args: &a,
			Keys: []string{"updated_at", "id"}}, page, scan, func(id string) []any {
			var at time.Time
			if err := db.SQL.QueryRow(`SELECT updated_at FROM partners WHERE id = $1`, id).Scan(&at); err != nil {
				t.Fatal(err)
			}
			return []any{at, id}
		}, &at, &id)
	}
	ranked := func(page store.Page) ([]string, string, *int, error) {
		var a store.Args
		return store.RankedList(ctx, db, store.RankedQuery{Args: &a, Count: `SELECT COUNT(*) FROM partners`,
			Select: `SELECT id, updated_at FROM partners ORDER BY updated_at, id`}, page, scan)
	}
	for name, list := range map[string]func(store.Page) ([]string, string, *int, error){"keyset": keyset, "ranked": ranked} {
		var got []string
		page := store.Page{Limit: 2}
		for range 5 {
			rows, next, total, err := list(page)
			if err != nil || total != nil || len(rows) > 2 {
				t.Fatalf("%s: page of %d rows, total %v, error %v", name, len(rows), total, err)
			}
			got = append(got, rows...)
			if page.Cursor = next; next == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: paged by cursor %v, want %v", name, got, want)
		}
		rows, next, total, err := list(store.Page{Limit: 2, Number: 2})
		if err != nil || next != "" || total == nil || *total != 5 || !slices.Equal(rows, want[2:4]) {
			t.Errorf("%s: page 2 = %v, next %q, total %v, error %v; want %v of 5", name, rows, next, total, err, want[2:4])
		}
		if _, _, _, err := list(store.Page{Limit: 2, Cursor: "nonsense"}); !apperr.IsCode(err, apperr.CodeValidation) {
			t.Errorf("%s: a foreign cursor gives %v, want a validation error", name, err)
		}
	}
}
