package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The methods below are where SQLite and PostgreSQL differ beyond what one portable
// statement covers, so that code outside the store never branches on the dialect. Most of
// them follow from one fact: SQLite runs one write transaction at a time, in the one server
// process that opened the file, so what PostgreSQL needs locks for cannot happen there.

// SingleNode reports whether one node serves the database: SQLite, whose file one server
// process opens. Work that keeps nodes informed of each other has nobody to inform there.
func (db *DB) SingleNode() bool { return db.Dialect == SQLite }

// ForUpdate is the suffix of a SELECT that locks the rows it reads until the transaction
// ends: " FOR UPDATE" on PostgreSQL. On SQLite, which has no such clause, the rows a write
// transaction reads cannot change under it, as no other write runs meanwhile: "".
func (db *DB) ForUpdate() string { return db.pgOnly(" FOR UPDATE") }

// ForShare is the suffix of a SELECT that keeps the rows it reads from changing until the
// transaction ends, while other readers that share may read them too: " FOR SHARE" on
// PostgreSQL, "" on SQLite (see ForUpdate).
func (db *DB) ForShare() string { return db.pgOnly(" FOR SHARE") }

// ForUpdateSkipLocked is the suffix of a SELECT that claims rows: it locks those it reads
// and passes over rows another transaction holds, so that concurrent claimers take different
// rows instead of waiting for each other: " FOR UPDATE SKIP LOCKED" on PostgreSQL, "" on
// SQLite, where no other claimer runs at the same time.
func (db *DB) ForUpdateSkipLocked() string { return db.pgOnly(" FOR UPDATE SKIP LOCKED") }

func (db *DB) pgOnly(suffix string) string {
	if db.Dialect == Postgres {
		return suffix
	}
	return ""
}

// LockRow locks the row of table whose id column is id until tx ends, so that transactions
// changing it take turns. On SQLite, whose write transactions take turns anyway, it does
// nothing.
func (db *DB) LockRow(ctx context.Context, tx *sql.Tx, table, id string) error {
	if db.Dialect != Postgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT id FROM `+table+` WHERE id = $1 FOR UPDATE`, id)
	return err
}

// LockTableWrites keeps every other writer out of table until tx ends; readers still pass
// (PostgreSQL's EXCLUSIVE mode). On SQLite, where no other write runs meanwhile, it does
// nothing.
func (db *DB) LockTableWrites(ctx context.Context, tx *sql.Tx, table string) error {
	if db.Dialect != Postgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, `LOCK TABLE `+table+` IN EXCLUSIVE MODE`)
	return err
}

// AdvisoryLock takes a lock on key, any string, until tx ends: transactions that lock the
// same key run one after another, whatever rows they touch. On SQLite, whose write
// transactions run one after another anyway, it does nothing.
func (db *DB) AdvisoryLock(ctx context.Context, tx *sql.Tx, key string) error {
	if db.Dialect != Postgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, key)
	return err
}

// RowsPerInsert is how many rows one INSERT ... VALUES should write, given at most max: max
// on PostgreSQL; 1 on SQLite, where a statement writing several rows keeps a statement
// journal in a temporary file and looks each $n up in a list of them all, so that a one-row
// statement, prepared once and run per row, is faster.
func (db *DB) RowsPerInsert(max int) int {
	if db.Dialect == SQLite {
		return 1
	}
	return max
}

// CachesStatements reports whether the driver keeps the statements it has compiled, per
// connection, so that preparing a statement gains nothing: pgx does on PostgreSQL. SQLite's
// driver compiles every statement anew unless it is prepared (DB's own methods go through
// the store's statement cache).
func (db *DB) CachesStatements() bool { return db.Dialect == Postgres }

// TypedParam is placeholder n cast to pgType on PostgreSQL, which cannot always tell the
// type of a parameter from the statement (one in a SELECT list, or compared with a value
// that is itself untyped). SQLite takes values as they come: there it is plain $n.
func (db *DB) TypedParam(n int, pgType string) string {
	p := "$" + strconv.Itoa(n)
	if db.Dialect == Postgres {
		return "CAST(" + p + " AS " + pgType + ")"
	}
	return p
}

// JSONRows is a FROM source of the rows of a JSON array of objects, bound to placeholder
// param, under alias, and col the expression of one member of such a row. columns declares
// the members with their PostgreSQL types ("id uuid, name text"): PostgreSQL makes typed
// rows of the array (jsonb_to_recordset); SQLite, which has no such function, walks the
// array's elements (jsonb_each) and extracts a member where it is used (json_extract). The
// rows go to the database as one parameter, so that thousands of them are one statement.
func (db *DB) JSONRows(param, alias, columns string) (from string, col func(name string) string) {
	if db.Dialect == Postgres {
		return `jsonb_to_recordset(CAST(` + param + ` AS JSONB)) AS ` + alias + `(` + columns + `)`,
			func(name string) string { return alias + "." + name }
	}
	return "jsonb_each(" + param + ") " + alias,
		func(name string) string { return "json_extract(" + alias + ".value, '$." + name + "')" }
}

// UTCDate is the UTC date (YYYY-MM-DD) of the time column col, as text: SQLite stores times
// as text in UTC ("2026-11-22 04:40:45.123+00:00"), PostgreSQL as timestamptz.
func (db *DB) UTCDate(col string) string {
	if db.Dialect == Postgres {
		return "to_char(" + col + " AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
	}
	return "substr(" + col + ", 1, 10)"
}

// Optimize keeps the query planner's statistics current. SQLite gathers none by itself:
// without them it takes any equality on an indexed column for selective, and reads, say, a
// partner's every device in name order rather than the few a name search finds. PRAGMA
// optimize analyzes the tables whose size changed much since they were last analyzed, each
// within analysis_limit rows so that it stays quick on a large file. PostgreSQL's autovacuum
// keeps its statistics itself.
func (db *DB) Optimize(ctx context.Context) error {
	if db.Dialect != SQLite {
		return nil
	}
	err := db.Write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `PRAGMA analysis_limit = 1000`); err != nil {
			return err
		}
		// 0x10002: analyze every table that needs it, not only those this connection used.
		_, err := tx.ExecContext(ctx, `PRAGMA optimize = 0x10002`)
		return err
	})
	if err != nil {
		return fmt.Errorf("optimize the database: %w", err)
	}
	return nil
}

// ContainsIndexed is Contains served by a trigram index where one is kept: on PostgreSQL,
// pg_trgm indexes on LOWER(col) serve Contains itself; on SQLite, an FTS5 trigram table
// named fts, over the columns and sharing the rowids of the table whose rowid column is
// rowid, finds the candidates (for a needle of three characters or more, the shortest a
// trigram matches). Contains stays in the condition there too, so a row is never matched
// by an index entry alone.
func (db *DB) ContainsIndexed(a *Args, needle, fts, rowid string, cols ...string) string {
	cond := Contains(a, needle, cols...)
	if db.Dialect != SQLite || utf8.RuneCountInString(needle) < 3 {
		return cond
	}
	phrase := `"` + strings.ReplaceAll(needle, `"`, `""`) + `"`
	return "(" + rowid + " IN (SELECT rowid FROM " + fts + " WHERE " + fts + " MATCH " + a.Add(phrase) + ") AND " + cond + ")"
}
