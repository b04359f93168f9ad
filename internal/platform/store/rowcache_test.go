package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"gale/internal/platform/store"
	"gale/internal/platform/store/storetest"
)

// tenants inserts a partner with n organizations named "org 0", "org 1", ... and, on the
// first, a site and a device; it returns the partner, the organization IDs in name order and
// the device.
func tenants(t *testing.T, db *store.DB, n int) (partner string, orgs []string, device string) {
	t.Helper()
	now := store.Now()
	partner = store.NewID()
	storetest.Exec(t, db.SQL, `INSERT INTO partners (id, name, slug, created_at, updated_at) VALUES ($1, $2, $2, $3, $3)`,
		partner, "partner "+partner, now)
	for i := range n {
		id := store.NewID()
		storetest.Exec(t, db.SQL, `INSERT INTO organizations (id, partner_id, name, slug, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $5)`, id, partner, fmt.Sprintf("org %d", i), "org-"+id, now)
		orgs = append(orgs, id)
	}
	site, device := store.NewID(), store.NewID()
	storetest.Exec(t, db.SQL, `INSERT INTO sites (id, partner_id, org_id, name, created_at, updated_at)
		VALUES ($1, $2, $3, 'Main', $4, $4)`, site, partner, orgs[0], now)
	storetest.Exec(t, db.SQL, `INSERT INTO devices (id, partner_id, org_id, site_id, hostname, created_at, updated_at)
		VALUES ($1, $2, $3, $4, 'host', $5, $5)`, device, partner, orgs[0], site, now)
	return partner, orgs, device
}

func rowVersion(t *testing.T, db *store.DB, table, id string) int64 {
	t.Helper()
	var v int64
	if err := db.SQL.QueryRow(`SELECT row_version FROM `+table+` WHERE id = $1`, id).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The database raises a row's version on every change of the row, and a device's on every
// change of its tags, whatever statement makes it.
func TestEveryChangeRaisesTheRowVersion(t *testing.T) {
	db := storetest.Open(t)
	partner, orgs, device := tenants(t, db, 1)
	org := orgs[0]
	steps := []struct {
		name, table, id, stmt string
		args                  []any
	}{
		{"rename an organization", "organizations", org, `UPDATE organizations SET name = 'renamed' WHERE id = $1`, []any{org}},
		{"change an organization's settings", "organizations", org, `UPDATE organizations SET settings = '{"a":1}' WHERE id = $1`, []any{org}},
		{"heartbeat of a device", "devices", device, `UPDATE devices SET last_seen_at = $2, metrics = '{}' WHERE id = $1`, []any{device, store.Now()}},
		{"status of a device", "devices", device, `UPDATE devices SET status = 'offline' WHERE id = $1`, []any{device}},
		{"tag a device", "devices", device, `INSERT INTO device_tags (device_id, partner_id, tag) VALUES ($1, $2, 'web')`, []any{device, partner}},
		{"rename a tag", "devices", device, `UPDATE device_tags SET tag = 'www' WHERE device_id = $1`, []any{device}},
		{"untag a device", "devices", device, `DELETE FROM device_tags WHERE device_id = $1`, []any{device}},
	}
	for _, s := range steps {
		before := rowVersion(t, db, s.table, s.id)
		storetest.Exec(t, db.SQL, s.stmt, s.args...)
		if after := rowVersion(t, db, s.table, s.id); after <= before {
			t.Errorf("%s: row_version %d → %d, want it raised", s.name, before, after)
		}
	}
	// A change in a rolled-back transaction leaves the version as it was.
	before := rowVersion(t, db, "organizations", org)
	tx, err := db.SQL.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`UPDATE organizations SET name = 'rolled back' WHERE id = $1`, org); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback()
	if after := rowVersion(t, db, "organizations", org); after != before {
		t.Errorf("rolled-back change: row_version %d → %d", before, after)
	}
}

type orgRow struct{ ID, Name, Status string }

func scanOrgRow(s store.Scanner) (orgRow, error) {
	var o orgRow
	return o, s.Scan(&o.ID, &o.Name, &o.Status)
}

func orgKey(o orgRow) (string, string) { return o.Name, o.ID }

// listOrgs is a cached list of the partner's organizations by name, optionally only those of
// one status.
func listOrgs(t *testing.T, db *store.DB, cache *store.RowCache[orgRow], partner, status string, page store.Page) ([]orgRow, string) {
	t.Helper()
	rows, next, err := listOrgsErr(t.Context(), db, cache, partner, status, page)
	if err != nil {
		t.Fatal(err)
	}
	return rows, next
}

func listOrgsErr(ctx context.Context, db *store.DB, cache *store.RowCache[orgRow], partner, status string, page store.Page) ([]orgRow, string, error) {
	var a store.Args
	conds := []string{"o.partner_id = " + a.Add(partner)}
	if status != "" {
		conds = append(conds, "o.status = "+a.Add(status))
	}
	rows, next, _, err := store.CachedList(ctx, db, store.ListQuery{Columns: "o.id, o.name, o.status", From: " FROM organizations o",
		Conds: conds, Args: &a, SortKey: "o.name", SortID: "o.id", Version: "o.row_version"}, page, cache, scanOrgRow, orgKey)
	return rows, next, err
}

// changeUnversioned changes an organization's name without raising its version, as no
// statement of the server can: only to tell a row served from the cache from one read anew.
func changeUnversioned(t *testing.T, db *store.DB, id, name string) {
	t.Helper()
	if db.Dialect == store.Postgres {
		storetest.Exec(t, db.SQL, `ALTER TABLE organizations DISABLE TRIGGER organizations_row_version`)
		storetest.Exec(t, db.SQL, `UPDATE organizations SET name = $2 WHERE id = $1`, id, name)
		storetest.Exec(t, db.SQL, `ALTER TABLE organizations ENABLE TRIGGER organizations_row_version`)
		return
	}
	// SQLite's trigger stands aside for a statement that sets the version itself.
	storetest.Exec(t, db.SQL, `UPDATE organizations SET name = $2, row_version = row_version + 1 WHERE id = $1`, id, name)
	storetest.Exec(t, db.SQL, `UPDATE organizations SET row_version = row_version - 1 WHERE id = $1`, id)
}

// A cached list serves a row from the cache while its version is unchanged, and reads it anew
// once the database has raised the version.
func TestCachedListServesUnchangedRowsAndRereadsChangedOnes(t *testing.T) {
	db := storetest.Open(t)
	partner, orgs, _ := tenants(t, db, 3)
	cache := store.NewRowCache[orgRow](100, nil)
	page := store.Page{Limit: 10}
	if rows, _ := listOrgs(t, db, cache, partner, "", page); len(rows) != 3 || rows[0].Name != "org 0" {
		t.Fatalf("first list = %+v", rows)
	}
	if cache.Len() != 3 {
		t.Fatalf("cache holds %d rows after the first list, want 3", cache.Len())
	}
	changeUnversioned(t, db, orgs[0], "org 0 unversioned")
	if rows, _ := listOrgs(t, db, cache, partner, "", page); rows[0].Name != "org 0" {
		t.Fatalf("second list = %+v; want the row of the same version from the cache", rows)
	}
	storetest.Exec(t, db.SQL, `UPDATE organizations SET name = 'org 0 renamed' WHERE id = $1`, orgs[0])
	rows, _ := listOrgs(t, db, cache, partner, "", page)
	if len(rows) != 3 || rows[0].Name != "org 0 renamed" || rows[1].Name != "org 1" {
		t.Fatalf("list after a change = %+v; want the changed row read anew", rows)
	}
	// Without a cache every page is read in full.
	changeUnversioned(t, db, orgs[1], "org 1 unversioned")
	if rows, _ := listOrgs(t, db, nil, partner, "", page); rows[1].Name != "org 1 unversioned" {
		t.Fatalf("uncached list = %+v", rows)
	}
}

// Cursor pages through the cache are the same pages as without it, next cursor included.
func TestCachedListPagesLikeList(t *testing.T) {
	db := storetest.Open(t)
	partner, _, _ := tenants(t, db, 7)
	cache := store.NewRowCache[orgRow](100, nil)
	walk := func(c *store.RowCache[orgRow]) []string {
		var names []string
		page := store.Page{Limit: 3}
		for {
			rows, next := listOrgs(t, db, c, partner, "", page)
			for _, r := range rows {
				names = append(names, r.Name)
			}
			if next == "" {
				return names
			}
			page.Cursor = next
		}
	}
	want := fmt.Sprint(walk(nil))
	for round := range 2 { // cold cache, then warm
		if got := fmt.Sprint(walk(cache)); got != want {
			t.Fatalf("round %d: cached pages %s, want %s", round, got, want)
		}
	}
	// Legacy page mode.
	rows, _ := listOrgs(t, db, cache, partner, "", store.Page{Limit: 3, Number: 3})
	if len(rows) != 1 || rows[0].Name != "org 6" {
		t.Fatalf("page 3 = %+v", rows)
	}
}

// The list's conditions decide which rows it shows, never the cache: a row that stops
// matching between the read of the page's versions and the read of its rows is not shown.
func TestCachedListNeverShowsARowThatNoLongerMatches(t *testing.T) {
	db := storetest.Open(t)
	partner, orgs, _ := tenants(t, db, 3)
	cache := store.NewRowCache[orgRow](100, nil)
	// Suspend the second organization just before the second statement of the list, the read
	// of the rows the cache does not hold.
	q := &beforeStatement{Querier: db, n: 2, run: func() {
		storetest.Exec(t, db.SQL, `UPDATE organizations SET status = 'suspended' WHERE id = $1`, orgs[1])
	}}
	var a store.Args
	rows, _, _, err := store.CachedList(t.Context(), q, store.ListQuery{Columns: "o.id, o.name, o.status",
		From: " FROM organizations o", Conds: []string{"o.partner_id = " + a.Add(partner), "o.status = 'active'"}, Args: &a,
		SortKey: "o.name", SortID: "o.id", Version: "o.row_version"}, store.Page{Limit: 10}, cache, scanOrgRow, orgKey)
	if err != nil {
		t.Fatal(err)
	}
	if q.calls < 2 {
		t.Fatalf("the list made %d statements; the test needs the second", q.calls)
	}
	if len(rows) != 2 || rows[0].ID != orgs[0] || rows[1].ID != orgs[2] {
		t.Fatalf("active organizations = %+v; want the first and the third", rows)
	}
}

// beforeStatement runs run just before the nth query made through it.
type beforeStatement struct {
	store.Querier
	n, calls int
	run      func()
}

func (b *beforeStatement) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if b.calls++; b.calls == b.n {
		b.run()
	}
	return b.Querier.QueryContext(ctx, query, args...)
}

// A row whose view lapses with time (validUntil) is read anew once that time has passed,
// although its version is unchanged.
func TestCachedRowLapses(t *testing.T) {
	db := storetest.Open(t)
	partner, orgs, _ := tenants(t, db, 2)
	cache := store.NewRowCache(100, func(o orgRow) (orgRow, time.Time) {
		if o.Name == "org 0" {
			return o, time.Now().Add(50 * time.Millisecond)
		}
		return o, time.Time{}
	})
	page := store.Page{Limit: 10}
	listOrgs(t, db, cache, partner, "", page)
	changeUnversioned(t, db, orgs[0], "org 0 lapsed")
	changeUnversioned(t, db, orgs[1], "org 1 unversioned")
	if rows, _ := listOrgs(t, db, cache, partner, "", page); rows[0].Name != "org 0" {
		t.Fatalf("list before the lapse = %+v; want the cached row", rows)
	}
	time.Sleep(60 * time.Millisecond)
	rows, _ := listOrgs(t, db, cache, partner, "", page)
	if rows[0].Name != "org 0 lapsed" || rows[1].Name != "org 1" {
		t.Fatalf("list after the lapse = %+v; want the lapsed row read anew, the other from the cache", rows)
	}
}

// A list returns rows as the cache keeps them, whether it read them anew or found them.
func TestCachedListReturnsKeptRows(t *testing.T) {
	db := storetest.Open(t)
	partner, _, _ := tenants(t, db, 2)
	cache := store.NewRowCache(100, func(o orgRow) (orgRow, time.Time) {
		o.Name += " (kept)"
		return o, time.Time{}
	})
	for _, round := range []string{"read anew", "from the cache"} {
		rows, _ := listOrgs(t, db, cache, partner, "", store.Page{Limit: 10})
		if len(rows) != 2 || rows[0].Name != "org 0 (kept)" || rows[1].Name != "org 1 (kept)" {
			t.Fatalf("%s: rows = %+v", round, rows)
		}
	}
}

// The cache keeps at most its size.
func TestRowCacheIsBounded(t *testing.T) {
	db := storetest.Open(t)
	partner, _, _ := tenants(t, db, 20)
	cache := store.NewRowCache[orgRow](8, nil)
	page := store.Page{Limit: 5}
	for {
		_, next := listOrgs(t, db, cache, partner, "", page)
		if n := cache.Len(); n > 8 {
			t.Fatalf("cache holds %d rows, more than its 8", n)
		}
		if next == "" {
			break
		}
		page.Cursor = next
	}
	if store.NewRowCache[orgRow](0, nil) != nil {
		t.Error("a cache of size 0 should be no cache")
	}
}
