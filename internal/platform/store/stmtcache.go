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
	// preparing holds the texts being prepared in the background for transactions.
	preparing map[string]bool
}

// lookup returns the prepared statement of query without waiting: a text not prepared yet
// is prepared in the background, for the transactions that come after. A transaction must
// not wait for a preparation: that needs a connection of the pool, and every one may be held
// by transactions waiting their turn behind this one.
func (c *stmtCache) lookup(db *sql.DB, query string) *sql.Stmt {
	c.mu.RLock()
	st, ok := c.stmts[query]
	c.mu.RUnlock()
	if ok {
		return st
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.preparing[query] || len(c.stmts)+len(c.preparing) >= maxCachedStatements {
		return nil
	}
	if c.preparing == nil {
		c.preparing = map[string]bool{}
	}
	c.preparing[query] = true
	go func() {
		st, err := db.Prepare(query)
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.preparing, query)
		if err == nil {
			c.stmts[query] = st
		}
	}()
	return nil
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

func newStmtCache() *stmtCache { return &stmtCache{stmts: map[string]*sql.Stmt{}} }

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
	l := db.route(ctx)
	if st := l.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return l.sql.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a single-row query outside a transaction.
func (db *DB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	l := db.route(ctx)
	if st := l.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return l.sql.QueryRowContext(ctx, query, args...)
}

// ExecContext runs a statement outside a transaction, in its turn as a write.
func (db *DB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	l := db.route(ctx)
	if err := l.lock(ctx, false); err != nil {
		return nil, err
	}
	defer l.unlock()
	if st := l.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return l.sql.ExecContext(ctx, query, args...)
}

// WriteRows runs one statement that writes and returns rows (UPDATE ... RETURNING) outside a
// transaction, in its turn as a write, and hands every row to fn.
func (db *DB) WriteRows(ctx context.Context, query string, args []any, fn func(Scanner) error) error {
	l := db.route(ctx)
	if err := l.lock(ctx, false); err != nil {
		return err
	}
	defer l.unlock()
	return eachRow(ctx, db, query, args, fn)
}

func (l lane) stmt(ctx context.Context, query string) *sql.Stmt {
	if l.stmts == nil {
		return nil
	}
	return l.stmts.get(ctx, l.sql, query)
}

// TxExecContext runs a statement in tx, through the statement cache on SQLite: a write path
// that runs the same statements in every transaction (a result's ingest) parses them once
// per connection instead of at every run.
func (db *DB) TxExecContext(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if st := db.txStmt(ctx, tx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// TxQueryContext runs a query in tx, through the statement cache on SQLite.
func (db *DB) TxQueryContext(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	if st := db.txStmt(ctx, tx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, query, args...)
}

// TxQueryRowContext runs a single-row query in tx, through the statement cache on SQLite.
func (db *DB) TxQueryRowContext(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	if st := db.txStmt(ctx, tx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, query, args...)
}

// txStmt is the cached statement of query bound to tx, or nil (PostgreSQL, or not prepared
// yet). database/sql keeps the statement's preparation on the transaction's connection for
// later transactions on it.
func (db *DB) txStmt(ctx context.Context, tx *sql.Tx, query string) *sql.Stmt {
	l := db.txLane(tx)
	if l.stmts == nil {
		return nil
	}
	st := l.stmts.lookup(l.sql, query)
	if st == nil {
		return nil
	}
	return tx.StmtContext(ctx, st)
}
