package store

import (
	"errors"
	"fmt"
	"os"
)

// ErrInUse is LockSQLite's answer while another process holds the database file.
var ErrInUse = errors.New("the database is in use by another process")

// Every process that opens a SQLite file through Open holds a shared lock on a file beside it
// (PATH.lock) for as long as the database is open; LockSQLite takes that lock exclusively.
// So gale restore never replaces a file that a server or another gale command has open, and
// nothing opens the file while a restore replaces it. The lock file itself stays: only the
// lock, which the system drops when its holder exits, means anything.
func sqliteLockPath(path string) string { return path + ".lock" }

// LockSQLite takes the SQLite file at path for this process alone (no gale process may have it
// open), and returns what releases it. It answers ErrInUse at once, without waiting, when
// another process holds it.
func LockSQLite(path string) (release func(), err error) {
	return lockFile(sqliteLockPath(path), true)
}

// lockFile opens (creating it if needed) and locks the file at path, shared or exclusive,
// without waiting.
func lockFile(path string, exclusive bool) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	ok, err := tryLock(f, exclusive)
	if err != nil || !ok {
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		return nil, ErrInUse
	}
	// Closing the file drops the lock.
	return func() { f.Close() }, nil
}
