package backup_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/platform/backup"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
	"gale/internal/platform/store/storetest"
)

// openSQLite opens a fresh migrated SQLite database (whatever the test backend: backups are
// SQLite's) with a table of test rows, filled with rows rows of 1 KiB.
func openSQLite(t *testing.T, rows int) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), storetest.SQLiteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	storetest.Exec(t, db.SQL, `CREATE TABLE backup_probe (n INTEGER PRIMARY KEY, pad BLOB NOT NULL)`)
	storetest.Exec(t, db.SQL, `WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < $1)
		INSERT INTO backup_probe SELECT -n, randomblob(1024) FROM s`, rows)
	return db
}

// probeRows returns the numbers of the probe rows written after the fill (those above 0).
func probeRows(t *testing.T, path string) map[int]bool {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ns, err := store.QueryAll(context.Background(), db, `SELECT n FROM backup_probe WHERE n > 0`, nil, func(s store.Scanner) (int, error) {
		var n int
		return n, s.Scan(&n)
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]bool{}
	for _, n := range ns {
		out[n] = true
	}
	return out
}

func integrityOK(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := store.QueryStrings(context.Background(), db, `PRAGMA integrity_check`)
	if err != nil || len(got) != 1 || got[0] != "ok" {
		t.Fatalf("integrity_check of %s = %v, %v", path, got, err)
	}
}

// A backup reads one snapshot while writers go on: writes keep being acknowledged during the
// copy, every row written before it began is in it, and none written after its first step.
func TestBackupIsASnapshotWhileWritesGoOn(t *testing.T) {
	ctx := context.Background()
	db := openSQLite(t, 1000) // several steps of the copy
	var mu sync.Mutex
	var acked []int
	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		for n := 1; ; n++ {
			select {
			case <-stop:
				writerDone <- nil
				return
			default:
			}
			err := db.Write(ctx, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO backup_probe VALUES ($1, randomblob(1024))`, n)
				return err
			})
			if err != nil {
				writerDone <- err
				return
			}
			mu.Lock()
			acked = append(acked, n)
			mu.Unlock()
		}
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	for count() < 20 {
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	before := append([]int(nil), acked...)
	mu.Unlock()

	dest := filepath.Join(t.TempDir(), "gale-backup.db")
	steps, afterFirstStep := 0, 0
	res, err := backup.Backup(ctx, db, dest, func(copied, total int64) {
		steps++
		if steps > 1 {
			return
		}
		// The copy holds its snapshot now: writers must still get through.
		from := count()
		deadline := time.Now().Add(10 * time.Second)
		for count() < from+20 {
			if time.Now().After(deadline) {
				t.Errorf("no write was acknowledged for 10 s while the backup ran")
				return
			}
			time.Sleep(time.Millisecond)
		}
		afterFirstStep = count()
		if copied <= 0 || copied >= total {
			t.Errorf("first step copied %d of %d bytes", copied, total)
		}
	})
	close(stop)
	if err := <-writerDone; err != nil {
		t.Fatalf("writer: %v", err)
	}
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if steps < 2 {
		t.Fatalf("the backup took %d steps; the test needs several", steps)
	}
	info, _ := os.Stat(dest)
	latest, _ := store.LatestVersion(store.SQLite)
	if res.Path != dest || info == nil || res.Bytes != info.Size() || res.SchemaVersion != latest {
		t.Fatalf("result %+v, file %v, want version %d", res, info, latest)
	}

	got := probeRows(t, dest)
	for _, n := range before {
		if !got[n] {
			t.Errorf("row %d, acknowledged before the backup began, is missing from it", n)
		}
	}
	mu.Lock()
	for _, n := range acked[afterFirstStep-20:] {
		if got[n] {
			t.Errorf("row %d, written after the backup's first step, is in it: the copy is not one snapshot", n)
		}
	}
	mu.Unlock()
	integrityOK(t, dest)
	for _, side := range []string{"-wal", "-shm", "-journal"} {
		if _, err := os.Stat(dest + side); err == nil {
			t.Errorf("the backup left %s beside it", dest+side)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dest), ".*partial*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestBackupRefusesAnExistingFile(t *testing.T) {
	db := openSQLite(t, 10)
	dest := filepath.Join(t.TempDir(), "taken.db")
	if err := os.WriteFile(dest, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := backup.Backup(context.Background(), db, dest, nil)
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("backup over an existing file: %v", err)
	}
	if b, _ := os.ReadFile(dest); string(b) != "keep me" {
		t.Fatalf("the existing file now holds %q", b)
	}
}

// takeBackup writes a backup of a fresh database holding probe rows 1..n and returns its path.
func takeBackup(t *testing.T, n int) string {
	t.Helper()
	db := openSQLite(t, 0)
	for i := 1; i <= n; i++ {
		storetest.Exec(t, db.SQL, `INSERT INTO backup_probe VALUES ($1, x'00')`, i)
	}
	dest := filepath.Join(t.TempDir(), "backup.db")
	if _, err := backup.Backup(context.Background(), db, dest, nil); err != nil {
		t.Fatal(err)
	}
	return dest
}

var at = time.Date(2026, 11, 28, 9, 30, 0, 0, time.UTC)

// A restore into a new place puts the file there; over a database it keeps the replaced one
// aside, with what its WAL held, and the restored database opens migrated.
func TestRestoreReplacesAndKeepsTheOldDatabaseAside(t *testing.T) {
	ctx := context.Background()
	src := takeBackup(t, 3)
	path := filepath.Join(t.TempDir(), "data", "gale.db")
	res, err := backup.Restore(ctx, src, path, clock.NewFake(at))
	if err != nil {
		t.Fatalf("restore into a new place: %v", err)
	}
	latest, _ := store.LatestVersion(store.SQLite)
	if res.Aside != "" || res.Path != path || res.SchemaVersion != latest || res.LatestVersion != latest {
		t.Fatalf("result %+v", res)
	}
	if got := probeRows(t, path); len(got) != 3 {
		t.Fatalf("restored rows %v", got)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*restore*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	// A server wrote rows 4 and 5 since, and stopped without folding its WAL into the file
	// (a crash): the copy below is what it left.
	raw, err := sql.Open("sqlite", store.SQLiteDSN(path))
	if err != nil {
		t.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	storetest.Exec(t, raw, `PRAGMA wal_autocheckpoint = 0`)
	storetest.Exec(t, raw, `INSERT INTO backup_probe VALUES (4, x'00'), (5, x'00')`)
	crashed := filepath.Join(t.TempDir(), "gale.db")
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(crashed+suffix, b, 0o600)
	}
	raw.Close()

	res, err = backup.Restore(ctx, src, crashed, clock.NewFake(at))
	if err != nil {
		t.Fatalf("restore over a database: %v", err)
	}
	wantAside := crashed + ".before-restore-20261128T093000Z"
	if res.Aside != wantAside {
		t.Fatalf("aside = %q, want %q", res.Aside, wantAside)
	}
	if _, err := os.Stat(wantAside + "-wal"); err == nil {
		t.Error("the database kept aside still has a WAL; want it folded in")
	}
	if got := probeRows(t, wantAside); len(got) != 5 {
		t.Fatalf("the database kept aside holds rows %v, want 1-5", got)
	}
	integrityOK(t, wantAside)
	if got := probeRows(t, crashed); len(got) != 3 {
		t.Fatalf("restored rows %v, want 1-3", got)
	}
	db, err := store.Open(ctx, "sqlite:"+crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("migrate the restored database: %v", err)
	}

	// Whatever SQLite cannot open at the database's place moves aside as it is, and the files
	// beside it named after it with it: a WAL left beside the restored file would be read
	// into it.
	broken := filepath.Join(t.TempDir(), "gale.db")
	os.Mkdir(broken, 0o700)
	os.WriteFile(broken+"-wal", []byte("a WAL"), 0o600)
	res, err = backup.Restore(ctx, src, broken, clock.NewFake(at))
	if err != nil {
		t.Fatalf("restore over a broken database: %v", err)
	}
	if b, _ := os.ReadFile(res.Aside + "-wal"); string(b) != "a WAL" {
		t.Fatalf("the broken database's WAL kept aside holds %q", b)
	}
	if _, err := os.Stat(broken + "-wal"); err == nil {
		t.Fatal("the broken database's WAL is still beside the restored database")
	}
	if got := probeRows(t, broken); len(got) != 3 {
		t.Fatalf("restored rows %v, want 1-3", got)
	}
}

// The restore refuses, and leaves the database as it was, while a process has it open, and
// for a file that is not a sound Gale database this gale can run.
func TestRestoreRefusals(t *testing.T) {
	ctx := context.Background()
	src := takeBackup(t, 2)
	dir := t.TempDir()
	path := filepath.Join(dir, "gale.db")
	if _, err := backup.Restore(ctx, takeBackup(t, 7), path, clock.NewFake(at)); err != nil {
		t.Fatal(err)
	}
	unchanged := func(t *testing.T) {
		t.Helper()
		if got := probeRows(t, path); len(got) != 7 {
			t.Fatalf("the database now holds rows %v; want it untouched", got)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if name := e.Name(); strings.Contains(name, "restore") {
				t.Errorf("left behind: %s", name)
			}
		}
	}
	refused := func(t *testing.T, src, want string) {
		t.Helper()
		_, err := backup.Restore(ctx, src, path, clock.NewFake(at))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("restore = %v, want an error saying %q", err, want)
		}
		t.Log(err)
		unchanged(t)
	}

	t.Run("a gale process has it open", func(t *testing.T) {
		db, err := store.Open(ctx, "sqlite:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		// Its pool closed its idle connections: only the lock file says it is there.
		db.SQL.SetMaxIdleConns(0)
		refused(t, src, "a gale process (gale serve or another gale command) has")
		// Nor does a gale process open it while a restore holds it.
		release, err := store.LockSQLite(filepath.Join(dir, "other.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if _, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "other.db")); err == nil ||
			!strings.Contains(err.Error(), "being restored") {
			t.Fatalf("open during a restore: %v", err)
		}
		release()
		os.Remove(filepath.Join(dir, "other.db.lock"))
	})
	t.Run("another program has it open", func(t *testing.T) {
		raw, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		if err := raw.Ping(); err != nil {
			t.Fatal(err)
		}
		refused(t, src, "another process has")
	})
	t.Run("not a SQLite database", func(t *testing.T) {
		junk := filepath.Join(t.TempDir(), "junk.db")
		os.WriteFile(junk, []byte(strings.Repeat("not a database ", 500)), 0o600)
		refused(t, junk, "is not a SQLite database")
	})
	t.Run("not a Gale database", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "other.db")
		raw, _ := sql.Open("sqlite", "file:"+other)
		storetest.Exec(t, raw, `CREATE TABLE notes (body TEXT)`)
		raw.Close()
		refused(t, other, "is not a Gale database")
	})
	t.Run("damaged", func(t *testing.T) {
		damaged := filepath.Join(t.TempDir(), "damaged.db")
		b, _ := os.ReadFile(src)
		// Page 3 onwards are tables and indexes: wreck one in the middle of the file.
		page := 4096 * (len(b) / 4096 / 2)
		copy(b[page:page+4096], []byte(strings.Repeat("\xff", 4096)))
		os.WriteFile(damaged, b, 0o600)
		refused(t, damaged, "damaged.db")
	})
	t.Run("newer schema", func(t *testing.T) {
		newer := filepath.Join(t.TempDir(), "newer.db")
		b, _ := os.ReadFile(src)
		os.WriteFile(newer, b, 0o600)
		raw, _ := sql.Open("sqlite", "file:"+newer)
		storetest.Exec(t, raw, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, 1)`)
		raw.Close()
		refused(t, newer, "schema version 99999, newer than this gale's")
	})
	t.Run("missing", func(t *testing.T) {
		_, err := backup.Restore(ctx, filepath.Join(dir, "nowhere.db"), path, clock.NewFake(at))
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("restore of a missing file: %v", err)
		}
		unchanged(t)
	})
}
