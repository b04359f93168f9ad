// Package store opens Gale's database (embedded SQLite or PostgreSQL), runs its migrations,
// and holds the few helpers every domain's SQL shares: transactions, IDs, time, cursors.
// The same SQL text, with $n placeholders, runs on both backends; where the dialects really
// differ, a method of DB says how (dialect.go), so code outside the store does not branch
// on DB.Dialect.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Dialect names a database backend.
type Dialect string

// The two supported backends.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// DB is an open database. SQL holds the pool every domain queries through.
type DB struct {
	SQL     *sql.DB
	Dialect Dialect
	// Pool is the pgx pool of the job queue and the agent bus on PostgreSQL (nil on SQLite).
	Pool *pgxpool.Pool
	// Path is the database file on SQLite (empty on PostgreSQL).
	Path string
	// Conns is how many connections SQL keeps for requests. Work that waits for one is best
	// queued in arrival order before it reaches SQL, whose pool hands a freed connection to a
	// random waiter: under load an unlucky caller waits many turns.
	Conns int
	// AgentConns is how many connections the agents' lane keeps (see AgentWork).
	AgentConns int
	// stmts caches prepared statements on SQLite; nil on PostgreSQL.
	stmts *stmtCache
	// writer is held by each write; see writeGate.
	writer *writeGate
	// agents is the agents' lane: its own pool, statements and, on PostgreSQL, write turns.
	agents lane
	// unlock drops this process's shared lock on the SQLite file (see LockSQLite); nil on
	// PostgreSQL.
	unlock func()
}

// Open connects to the database named by url: "sqlite:PATH" or "postgres://...".
func Open(ctx context.Context, url string) (*DB, error) {
	if path, ok := SQLitePath(url); ok {
		return openSQLite(path)
	}
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		return openPostgres(ctx, url)
	}
	return nil, fmt.Errorf("unsupported database URL %q: use sqlite:PATH or postgres://", url)
}

// SQLitePath returns the file a "sqlite:PATH" database URL names; false for any other URL.
func SQLitePath(url string) (string, bool) {
	return strings.CutPrefix(url, "sqlite:")
}

// SQLiteDSN is the connection string that holds up under concurrent use: WAL, a busy
// timeout, foreign keys, IMMEDIATE transactions (a read-then-write transaction would
// otherwise fail with "database is locked") and times stored in SQLite's own format so its
// date functions and comparisons work.
func SQLiteDSN(path string) string {
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(NORMAL)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	q.Set("_time_format", "sqlite")
	return "file:" + path + "?" + q.Encode()
}

// How many connections a node keeps to its SQLite file: for requests, and for agents' lane.
const (
	sqliteConns      = 8
	sqliteAgentConns = 4
)

func openSQLite(path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("sqlite: empty path")
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create database directory: %w", err)
		}
	}
	unlock, err := lockFile(sqliteLockPath(path), false)
	if errors.Is(err, ErrInUse) {
		return nil, fmt.Errorf("the database %s is being restored (gale restore): start again once the restore is done", path)
	}
	if err != nil {
		return nil, err
	}
	db, err := openSQLitePool(path, sqliteConns)
	if err != nil {
		unlock()
		return nil, err
	}
	agents, err := openSQLitePool(path, sqliteAgentConns)
	if err != nil {
		db.Close()
		unlock()
		return nil, err
	}
	// SQLite has one writer for the file: both lanes take turns at the same gate, where
	// heartbeats go first.
	writer := newWriteGate(1)
	return &DB{SQL: db, Dialect: SQLite, Path: path, Conns: sqliteConns, AgentConns: sqliteAgentConns, stmts: newStmtCache(),
		writer: writer, agents: lane{sql: agents, stmts: newStmtCache(), writer: writer}, unlock: unlock}, nil
}

func openSQLitePool(path string, conns int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", SQLiteDSN(path))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return db, nil
}

// Connections on PostgreSQL: requests go through database/sql, which keeps its connections
// open between queries (pool_max_conns in DATABASE_URL sets how many); the job queue and the
// agent bus have their own small pgx pool, so that neither can wait on the other's.
const (
	defaultRequestConns = 8
	backgroundConns     = 6
	agentConns          = 4
)

func openPostgres(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	requestConns := defaultRequestConns
	if strings.Contains(url, "pool_max_conns=") {
		requestConns = int(cfg.MaxConns)
	}
	cfg.MaxConns = backgroundConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect postgres: %w", err)
	}
	// Every connection stays open for reuse: a pool that closes connections after each query
	// (as one over a pgx pool must, to leave connections to the pool's other users) costs a
	// connection's acquisition and reset on every statement.
	db, err := openPostgresPool(ctx, cfg.ConnConfig, requestConns)
	if err != nil {
		pool.Close()
		return nil, err
	}
	agents, err := openPostgresPool(ctx, cfg.ConnConfig, agentConns)
	if err != nil {
		db.Close()
		pool.Close()
		return nil, err
	}
	return &DB{SQL: db, Dialect: Postgres, Pool: pool, Conns: requestConns, AgentConns: agentConns, writer: newWriteGate(requestConns - 2),
		agents: lane{sql: agents, writer: newWriteGate(agentConns - 1)}}, nil
}

func openPostgresPool(ctx context.Context, cfg *pgx.ConnConfig, conns int) (*sql.DB, error) {
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect postgres: %w", err)
	}
	return db, nil
}

// Close releases the pools.
func (db *DB) Close() error {
	if db.stmts != nil {
		db.stmts.close()
	}
	if db.agents.stmts != nil {
		db.agents.stmts.close()
	}
	if db.agents.sql != nil {
		db.agents.sql.Close()
	}
	err := db.SQL.Close()
	if db.Pool != nil {
		db.Pool.Close()
	}
	if db.unlock != nil {
		db.unlock()
	}
	return err
}

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var one int
	return db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// Querier is what both *sql.DB and *sql.Tx offer; read helpers take it so they work inside
// or outside a transaction.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Write runs fn in one transaction and commits only when fn returns nil. fn must not write
// through db itself (on SQLite that waits for its own turn): everything goes through tx.
func (db *DB) Write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return db.write(ctx, false, fn)
}

// WriteUrgent is Write for work that must not wait behind a burst of ordinary writes (an
// agent's heartbeat): it takes the next turn to write before every ordinary write waiting.
func (db *DB) WriteUrgent(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return db.write(ctx, true, fn)
}

func (db *DB) write(ctx context.Context, urgent bool, fn func(tx *sql.Tx) error) error {
	l := db.route(ctx)
	if err := l.lock(ctx, urgent); err != nil {
		return err
	}
	defer l.unlock()
	tx, err := l.sql.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if l.sql != db.SQL {
		agentTxs.Store(tx, struct{}{})
		defer agentTxs.Delete(tx)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Each write waits for this process's turn to write (writeGate). SQLite takes one writer at a
// time anyway; a writer that finds it taken sleeps in SQLite's busy handler, in steps growing
// to 100 ms and in no order, so that under a steady stream of heartbeats an unlucky write
// waited hundreds of milliseconds. Taking turns here first leaves the busy handler to writers
// of other processes (the job queue's own connection, the gale command). On PostgreSQL the
// turns keep a burst of writes from taking every connection of a lane, and put heartbeats
// first.

// NewID returns a new time-ordered UUIDv7 string.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// ValidID reports whether s is a UUID in canonical form.
func ValidID(s string) bool {
	u, err := uuid.Parse(s)
	return err == nil && u.String() == strings.ToLower(s) && len(s) == 36
}

// Now is the current time as stored: UTC, truncated to microseconds (PostgreSQL's precision),
// so that a value read back equals the value written on both backends.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// IsUniqueViolation reports whether err is a unique-constraint violation on either backend.
func IsUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "SQLSTATE 23505") || strings.Contains(msg, "UNIQUE constraint failed")
}

// Placeholders returns "$start, $start+1, ..." for n values.
func Placeholders(start, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d", start+i)
	}
	return b.String()
}
