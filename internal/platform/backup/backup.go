// Package backup copies the embedded SQLite database while a server writes to it, and puts
// such a copy back in place of the database while no server runs. PostgreSQL has its own
// tools for both (pg_dump, pg_restore).
package backup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"modernc.org/sqlite"

	"gale/internal/platform/store"
)

// stepPages is how many pages each step of a backup copies (1 MiB of 4 KiB pages): the
// steps only pace the progress reports, as the whole copy reads one snapshot.
const stepPages = 256

// Result describes a database file that a backup wrote or a restore put in place.
type Result struct {
	// Path is the file written.
	Path string
	// Bytes is its size.
	Bytes int64
	// SchemaVersion is the newest migration applied to it.
	SchemaVersion int64
}

// Backup copies the SQLite database db into a new file at dest, as it was at one moment,
// while db's other users go on reading and writing. progress, when not nil, is told after
// each step how many bytes of how many were copied.
//
// The copy reads one snapshot of the database: it holds a read transaction from before its
// first page to after its last, which in WAL mode never blocks a writer (writers append to
// the WAL; checkpoints stop short of pages the snapshot still reads until it ends). SQLite's
// online backup copies the pages as they are, so the copy keeps every row ID (the device
// name index refers to the devices' row IDs), and it is checked with PRAGMA integrity_check
// and left in rollback-journal mode: one self-contained file.
func Backup(ctx context.Context, db *store.DB, dest string, progress func(copied, total int64)) (Result, error) {
	if db.Dialect != store.SQLite {
		return Result{}, errors.New("backup copies SQLite databases only: back PostgreSQL up with pg_dump")
	}
	if _, err := os.Lstat(dest); err == nil {
		return Result{}, fmt.Errorf("%s already exists: name a new file, or move that one away first", dest)
	}
	// The copy is written under a temporary name beside dest and renamed once complete and
	// checked, so an interrupted backup never leaves a file that looks like one.
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".partial-*")
	if err != nil {
		return Result{}, fmt.Errorf("create the backup file: %w", err)
	}
	tmp.Close()
	done := false
	defer func() {
		if !done {
			removeDatabase(tmp.Name())
		}
	}()
	if err := copySnapshot(ctx, db, tmp.Name(), progress); err != nil {
		return Result{}, err
	}
	version, err := finish(ctx, tmp.Name())
	if err != nil {
		return Result{}, fmt.Errorf("check the backup: %w", err)
	}
	if _, err := os.Lstat(dest); err == nil {
		return Result{}, fmt.Errorf("%s appeared during the backup: name a new file", dest)
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		return Result{}, err
	}
	done = true
	info, err := os.Stat(dest)
	if err != nil {
		return Result{}, err
	}
	return Result{Path: dest, Bytes: info.Size(), SchemaVersion: version}, nil
}

// backuper is what modernc.org/sqlite's connection offers for an online backup.
type backuper interface {
	NewBackup(dest string) (*sqlite.Backup, error)
}

// copySnapshot copies db page by page into the file at dest, all within one read
// transaction of one connection, so that every step reads the same snapshot (a backup step
// outside a transaction would start over after each write of another connection, and under
// steady writes never end).
func copySnapshot(ctx context.Context, db *store.DB, dest string, progress func(copied, total int64)) (err error) {
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var pageSize int64
	if err := conn.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		return err
	}
	// A deferred BEGIN takes no lock; the first read fixes the snapshot. (The driver's BeginTx
	// would say BEGIN IMMEDIATE, which takes the write lock for the whole copy.)
	if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
		return err
	}
	defer func() {
		if _, cerr := conn.ExecContext(context.WithoutCancel(ctx), `COMMIT`); err == nil {
			err = cerr
		}
	}()
	var tables int
	if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_schema`).Scan(&tables); err != nil {
		return err
	}
	return conn.Raw(func(driverConn any) error {
		b, ok := driverConn.(backuper)
		if !ok {
			return errors.New("the SQLite driver offers no online backup")
		}
		bk, err := b.NewBackup(dest)
		if err != nil {
			return fmt.Errorf("start the backup: %w", err)
		}
		for more := true; more; {
			if err := ctx.Err(); err != nil {
				bk.Finish()
				return err
			}
			if more, err = bk.Step(stepPages); err != nil {
				bk.Finish()
				return fmt.Errorf("copy: %w", err)
			}
			if progress != nil {
				total := int64(bk.PageCount())
				progress((total-int64(bk.Remaining()))*pageSize, total*pageSize)
			}
		}
		return bk.Finish()
	})
}

// finish checks the copied file and turns it into one self-contained file (rollback journal
// rather than WAL: the server turns WAL back on when it opens it), and returns its schema
// version.
func finish(ctx context.Context, path string) (int64, error) {
	db, err := openFile(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `PRAGMA journal_mode = DELETE`); err != nil {
		return 0, err
	}
	if err := integrity(ctx, db); err != nil {
		return 0, err
	}
	return store.AppliedVersion(ctx, db)
}

// openFile opens a SQLite file as it is, with one connection and without the server's
// settings (no WAL switch, no lock file).
func openFile(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// integrity runs PRAGMA integrity_check, which reads every page and index of the file.
func integrity(ctx context.Context, db *sql.DB) error {
	problems, err := store.QueryStrings(ctx, db, `PRAGMA integrity_check`)
	if err != nil {
		return err
	}
	if len(problems) != 1 || problems[0] != "ok" {
		if len(problems) > 5 {
			problems = append(problems[:5], "...")
		}
		return fmt.Errorf("integrity check failed: %s", strings.ReplaceAll(strings.Join(problems, "; "), "\n", " "))
	}
	return nil
}

// sidecars are the files SQLite keeps beside a database, named after it.
var sidecars = []string{"-wal", "-shm", "-journal"}

// removeDatabase removes a database file and its sidecars.
func removeDatabase(path string) {
	for _, p := range append([]string{path}, sidecarPaths(path)...) {
		_ = os.Remove(p)
	}
}

func sidecarPaths(path string) []string {
	out := make([]string, len(sidecars))
	for i, s := range sidecars {
		out[i] = path + s
	}
	return out
}
