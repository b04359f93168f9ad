package store_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"gale/internal/platform/store"
	"gale/internal/platform/store/storetest"
)

// addPartner inserts a partner row to lock and returns its ID.
func addPartner(t *testing.T, db *store.DB) string {
	t.Helper()
	id := store.NewID()
	storetest.Exec(t, db.SQL, `INSERT INTO partners (id, name, slug, created_at, updated_at) VALUES ($1, 'p', $2, $3, $3)`,
		id, id, store.Now())
	return id
}

// begin opens a transaction beside db.Write's turns, to hold a lock while another one tries.
func begin(t *testing.T, db *store.DB) *sql.Tx {
	t.Helper()
	tx, err := db.SQL.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	return tx
}

// refused reports whether query fails at once in a transaction of its own, rolled back
// after, as it does on PostgreSQL when it needs a lock another one holds (lock_timeout is
// short).
func refused(t *testing.T, db *store.DB, query string, args ...any) bool {
	t.Helper()
	tx := begin(t, db)
	defer tx.Rollback()
	if _, err := tx.Exec(`SET LOCAL lock_timeout = '100ms'`); err != nil {
		t.Fatal(err)
	}
	_, err := tx.Exec(query, args...)
	return err != nil
}

func TestRowLockSuffixes(t *testing.T) {
	db := storetest.Open(t)
	id := addPartner(t, db)
	for name, suffix := range map[string]string{
		"ForUpdate":           db.ForUpdate(),
		"ForShare":            db.ForShare(),
		"ForUpdateSkipLocked": db.ForUpdateSkipLocked(),
	} {
		t.Run(name, func(t *testing.T) {
			if db.Dialect == store.SQLite && suffix != "" {
				t.Fatalf("%s = %q on SQLite, want none", name, suffix)
			}
			var got string
			err := db.Write(context.Background(), func(tx *sql.Tx) error {
				return tx.QueryRow(`SELECT id FROM partners WHERE id = $1`+suffix, id).Scan(&got)
			})
			if err != nil || got != id {
				t.Fatalf("SELECT ...%s = %q, %v; want the row", suffix, got, err)
			}
		})
	}
	if db.Dialect != store.Postgres {
		return
	}
	holder := begin(t, db)
	if _, err := holder.Exec(`SELECT id FROM partners WHERE id = $1`+db.ForShare(), id); err != nil {
		t.Fatal(err)
	}
	if refused(t, db, `SELECT id FROM partners WHERE id = $1`+db.ForShare(), id) {
		t.Error("a second FOR SHARE waited for the first")
	}
	if !refused(t, db, `UPDATE partners SET name = 'q' WHERE id = $1`, id) {
		t.Error("an update went through a row held FOR SHARE")
	}
	holder.Rollback()

	holder = begin(t, db)
	if _, err := holder.Exec(`SELECT id FROM partners WHERE id = $1`+db.ForUpdate(), id); err != nil {
		t.Fatal(err)
	}
	if !refused(t, db, `SELECT id FROM partners WHERE id = $1`+db.ForShare(), id) {
		t.Error("FOR SHARE went through a row held FOR UPDATE")
	}
	var skipped int
	if err := begin(t, db).QueryRow(`SELECT COUNT(*) FROM (SELECT id FROM partners WHERE id = $1`+db.ForUpdateSkipLocked()+`) x`,
		id).Scan(&skipped); err != nil || skipped != 0 {
		t.Errorf("FOR UPDATE SKIP LOCKED read %d rows (%v); want the locked row passed over", skipped, err)
	}
}

func TestLocksInATransaction(t *testing.T) {
	db := storetest.Open(t)
	id := addPartner(t, db)
	ctx := context.Background()
	other := store.NewID()
	for _, c := range []struct {
		name    string
		lock    func(tx *sql.Tx) error
		blocked string // a statement the lock holds off, of $1 = id and $2 = other
	}{
		{"LockRow", func(tx *sql.Tx) error { return db.LockRow(ctx, tx, "partners", id) },
			`UPDATE partners SET name = 'q' WHERE id = $1 OR id = $2`},
		{"LockTableWrites", func(tx *sql.Tx) error { return db.LockTableWrites(ctx, tx, "partners") },
			`INSERT INTO partners (id, name, slug, created_at, updated_at) VALUES ($2, 'n', 'slug-' || $1, now(), now())`},
		{"AdvisoryLock", func(tx *sql.Tx) error { return db.AdvisoryLock(ctx, tx, "key:"+id) },
			`SELECT pg_advisory_xact_lock(hashtextextended('key:' || $1 || left($2, 0), 0))`},
	} {
		t.Run(c.name, func(t *testing.T) {
			// On both databases the lock runs in a write transaction; on SQLite it is nothing.
			if err := db.Write(ctx, c.lock); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if db.Dialect != store.Postgres {
				return
			}
			holder := begin(t, db)
			if err := c.lock(holder); err != nil {
				t.Fatal(err)
			}
			if !refused(t, db, c.blocked, id, other) {
				t.Errorf("%s did not hold off %s", c.name, c.blocked)
			}
			var n int
			if err := begin(t, db).QueryRow(`SELECT COUNT(*) FROM partners WHERE id = $1`, id).Scan(&n); err != nil || n != 1 {
				t.Errorf("a reader beside %s: %d, %v", c.name, n, err)
			}
			holder.Rollback()
			if refused(t, db, c.blocked, id, other) {
				t.Errorf("%s held on after its transaction ended", c.name)
			}
		})
	}
}

func TestSingleNodeRowsPerInsertAndCachesStatements(t *testing.T) {
	db := storetest.Open(t)
	sqlite := db.Dialect == store.SQLite
	if db.SingleNode() != sqlite {
		t.Errorf("SingleNode() = %v on %s", db.SingleNode(), db.Dialect)
	}
	if db.CachesStatements() == sqlite {
		t.Errorf("CachesStatements() = %v on %s", db.CachesStatements(), db.Dialect)
	}
	want := 500
	if sqlite {
		want = 1
	}
	if got := db.RowsPerInsert(500); got != want {
		t.Errorf("RowsPerInsert(500) = %d on %s, want %d", got, db.Dialect, want)
	}
}

func TestTypedParamAndJSONRows(t *testing.T) {
	db := storetest.Open(t)
	id, at := store.NewID(), store.Now()
	from, col := db.JSONRows("$1", "j", "name text, n integer")
	rows, err := db.SQL.Query(`SELECT `+col("name")+`, `+col("n")+`, `+db.TypedParam(2, "UUID")+`, `+db.TypedParam(3, "TIMESTAMPTZ")+
		` FROM `+from, `[{"name":"a","n":1},{"name":"b","n":2}]`, id, at)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var name, gotID string
		var n int
		var gotAt store.NullTime
		if err := rows.Scan(&name, &n, &gotID, &gotAt); err != nil {
			t.Fatal(err)
		}
		if gotID != id || !gotAt.Time.Equal(at) {
			t.Errorf("typed parameters read back as %s %v, want %s %v", gotID, gotAt.Time, id, at)
		}
		got = append(got, name+string(rune('0'+n)))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "a1" || got[1] != "b2" {
		t.Errorf("rows of the JSON array = %v, want [a1 b2]", got)
	}
}

func TestUTCDate(t *testing.T) {
	db := storetest.Open(t)
	at := time.Date(2026, 11, 22, 23, 59, 59, 999000000, time.UTC)
	var day string
	if err := db.SQL.QueryRow(`SELECT `+db.UTCDate("t")+` FROM (SELECT `+db.TypedParam(1, "TIMESTAMPTZ")+` AS t) x`, at).Scan(&day); err != nil {
		t.Fatal(err)
	}
	if day != "2026-11-22" {
		t.Errorf("UTC date of %v = %q, want 2026-11-22", at, day)
	}
}
