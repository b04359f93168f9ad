package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// Restored describes a restore.
type Restored struct {
	Result
	// LatestVersion is the schema version of this binary: the server migrates a restored
	// database of an older version when it starts.
	LatestVersion int64
	// Aside is where the database that was replaced now is; empty when there was none.
	Aside string
}

// Restore puts a copy of the SQLite database file src in place of the database at path. No
// other process may have path open: gale processes hold its lock file (see store.LockSQLite),
// others (the sqlite3 shell) its SQLite lock. src must be a Gale database that passes
// PRAGMA integrity_check, with a schema no newer than this binary's. The database it
// replaces, with its WAL folded in, is kept beside it as PATH.before-restore-TIME.
func Restore(ctx context.Context, src, path string, clk clock.Clock) (Restored, error) {
	latest, err := store.LatestVersion(store.SQLite)
	if err != nil {
		return Restored{}, err
	}
	if info, err := os.Stat(src); err != nil {
		return Restored{}, fmt.Errorf("read the backup: %w", err)
	} else if !info.Mode().IsRegular() {
		return Restored{}, fmt.Errorf("%s is not a file", src)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return Restored{}, fmt.Errorf("create database directory: %w", err)
	}
	release, err := store.LockSQLite(path)
	if errors.Is(err, store.ErrInUse) {
		return Restored{}, fmt.Errorf("a gale process (gale serve or another gale command) has %s open: stop it, then restore again", path)
	}
	if err != nil {
		return Restored{}, err
	}
	defer release()

	// The checks run on a copy beside the database, which then takes its place by a rename:
	// src is only read, and a refused or interrupted restore leaves the database as it was.
	tmp, err := copyBeside(src, path)
	if err != nil {
		return Restored{}, err
	}
	done := false
	defer func() {
		if !done {
			removeDatabase(tmp)
		}
	}()
	version, err := check(ctx, tmp, src, latest)
	if err != nil {
		return Restored{}, err
	}
	aside, err := setAside(ctx, path, clk)
	if err != nil {
		return Restored{}, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return Restored{}, fmt.Errorf("put the backup in place (the previous database is %s): %w", aside, err)
	}
	done = true
	info, err := os.Stat(path)
	if err != nil {
		return Restored{}, err
	}
	return Restored{Result: Result{Path: path, Bytes: info.Size(), SchemaVersion: version}, LatestVersion: latest, Aside: aside}, nil
}

// copyBeside copies src to a new file in path's directory and returns its name.
func copyBeside(src, path string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("read the backup: %w", err)
	}
	defer in.Close()
	out, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".restore-*")
	if err != nil {
		return "", fmt.Errorf("copy the backup: %w", err)
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out.Name())
		return "", fmt.Errorf("copy the backup: %w", err)
	}
	return out.Name(), nil
}

// check makes sure the file at path (a copy of src) is a sound Gale database that this binary
// can run, and returns its schema version.
func check(ctx context.Context, path, src string, latest int64) (int64, error) {
	db, err := openFile(path)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if err := integrity(ctx, db); err != nil {
		if sqliteCode(err) == sqlite3.SQLITE_NOTADB {
			return 0, fmt.Errorf("%s is not a SQLite database", src)
		}
		return 0, fmt.Errorf("%s: %w", src, err)
	}
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('goose_db_version', 'organizations')`).
		Scan(&tables); err != nil {
		return 0, err
	}
	if tables != 2 {
		return 0, fmt.Errorf("%s is not a Gale database", src)
	}
	version, err := store.AppliedVersion(ctx, db)
	if err != nil {
		return 0, err
	}
	if version > latest {
		return 0, fmt.Errorf("%s has schema version %d, newer than this gale's (%d): restore it with the gale that made it, or a newer one",
			src, version, latest)
	}
	return version, nil
}

// setAside moves the database at path, if any, to a new name, and returns it. It folds the
// WAL into the file first, which needs the file to itself: a process still holding it (the
// sqlite3 shell, a gale too old to hold the lock file) is refused. A file SQLite cannot open
// (the damaged database a restore often replaces) moves with its sidecars as it is.
func setAside(ctx context.Context, path string, clk clock.Clock) (string, error) {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err := foldWAL(ctx, path); sqliteCode(err) == sqlite3.SQLITE_BUSY {
		return "", fmt.Errorf("another process has %s open: stop it, then restore again", path)
	}
	aside := path + ".before-restore-" + clk.Now().Format("20060102T150405Z")
	if err := os.Rename(path, aside); err != nil {
		return "", fmt.Errorf("keep the current database aside: %w", err)
	}
	// SQLite finds a WAL by its database's name: they move together.
	for i, p := range sidecarPaths(path) {
		if err := os.Rename(p, aside+sidecars[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("keep the current database aside: %w", err)
		}
	}
	return aside, nil
}

// sqliteCode is the primary result code of a SQLite error, 0 for any other error.
func sqliteCode(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	return 0
}

// foldWAL checkpoints the database's WAL into it and turns WAL mode off, which SQLite does only
// for a connection that has the file alone.
func foldWAL(ctx context.Context, path string) error {
	db, err := openFile(path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, `PRAGMA journal_mode = DELETE`)
	return err
}
