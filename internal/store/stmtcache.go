package store

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStatements bounds the cache: queries built with a varying number of placeholders
// (IN lists) produce many texts, and those past the bound simply run unprepared.
const maxCachedStatements = 512

// stmtCache keeps prepared statements by SQL text. SQLite parses and plans a statement on
// every unprepared query, which costs more than running a small one; database/sql prepares a
// cached *sql.Stmt once per pooled connection and reuses it. PostgreSQL needs no cache here:
// pgx caches statements per connection itself.
type stmtCache struct {
	mu    sync.RWMutex
	stmts map[string]*sql.Stmt
}

func (c *stmtCache) get(ctx context.Context, db *sql.DB, query string) *sql.Stmt {
	c.mu.RLock()
	st, ok := c.stmts[query]
	c.mu.RUnlock()
	if ok {
		return st
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.stmts[query]; ok {
		return st
	}
	if len(c.stmts) >= maxCachedStatements {
		return nil
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil // the caller runs the query unprepared and reports its error
	}
	c.stmts[query] = st
	return st
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		st.Close()
	}
	c.stmts = map[string]*sql.Stmt{}
}

// QueryContext runs a query outside a transaction, through the statement cache on SQLite.
func (db *DB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := db.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return db.SQL.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a single-row query outside a transaction.
func (db *DB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := db.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return db.SQL.QueryRowContext(ctx, query, args...)
}

// ExecContext runs a statement outside a transaction, in its turn as a write (lockWriter).
func (db *DB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := db.lockWriter(ctx, false); err != nil {
		return nil, err
	}
	defer db.unlockWriter()
	if st := db.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return db.SQL.ExecContext(ctx, query, args...)
}

// WriteRows runs one statement that writes and returns rows (UPDATE ... RETURNING) outside a
// transaction, in its turn as a write, and hands every row to fn.
func (db *DB) WriteRows(ctx context.Context, query string, args []any, fn func(Scanner) error) error {
	if err := db.lockWriter(ctx, false); err != nil {
		return err
	}
	defer db.unlockWriter()
	return eachRow(ctx, db, query, args, fn)
}

func (db *DB) stmt(ctx context.Context, query string) *sql.Stmt {
	if db.stmts == nil {
		return nil
	}
	return db.stmts.get(ctx, db.SQL, query)
}
