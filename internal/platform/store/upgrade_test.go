package store_test

import (
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"gale/internal/platform/store"
	"gale/internal/platform/store/storetest"
)

// The fixtures in testdata/upgrade are databases made by an earlier Gale (commit 036ee91,
// schema version 37) with a little of everything in them; testdata/upgrade/README.md says how.
const (
	fixtureCommit  = "036ee91"
	fixtureVersion = 37
)

// gunzip returns the content of a gzip file of testdata/upgrade.
func gunzip(t *testing.T, name string) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "upgrade", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openFixture returns a database of the test backend holding the fixture, not migrated.
func openFixture(t *testing.T) *store.DB {
	t.Helper()
	ctx := context.Background()
	url := storetest.EmptyURL(t)
	if path, ok := store.SQLitePath(url); ok {
		if err := os.WriteFile(path, gunzip(t, "sqlite-"+fixtureCommit+".db.gz"), 0o600); err != nil {
			t.Fatal(err)
		}
	} else {
		// A plain-SQL dump, run as one simple-protocol batch on a connection of its own (the
		// dump empties its search_path).
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, string(gunzip(t, "postgres-"+fixtureCommit+".sql.gz")))
		conn.Close(ctx)
		if err != nil {
			t.Fatalf("load the dump: %v", err)
		}
	}
	db, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// tableRows is what a table holds: the IDs of its rows when it has an id column, else how many.
type tableRows struct {
	ids   []string
	count int
}

// contents returns what every table of the database holds.
func contents(t *testing.T, db *store.DB) map[string]tableRows {
	t.Helper()
	ctx := context.Background()
	tables := `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%' AND sql NOT LIKE 'CREATE VIRTUAL%'`
	withID := `SELECT m.name FROM sqlite_schema m, pragma_table_info(m.name) c WHERE m.type = 'table' AND c.name = 'id'`
	if db.Dialect == store.Postgres {
		tables = `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`
		withID = `SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' AND column_name = 'id'`
	}
	names, err := store.QueryStrings(ctx, db.SQL, tables)
	if err != nil {
		t.Fatal(err)
	}
	hasID, err := store.QueryStrings(ctx, db.SQL, withID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]tableRows{}
	for _, name := range names {
		var rows tableRows
		if slices.Contains(hasID, name) {
			rows.ids, err = store.QueryStrings(ctx, db.SQL, `SELECT CAST(id AS TEXT) FROM `+name)
			rows.count = len(rows.ids)
		} else {
			err = db.SQL.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+name).Scan(&rows.count)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = rows
	}
	return out
}

// checkIntegrity fails t unless the database is sound: SQLite's integrity and foreign key
// checks; on PostgreSQL every constraint validated and no foreign key pointing nowhere.
func checkIntegrity(t *testing.T, db *store.DB) {
	t.Helper()
	ctx := context.Background()
	if db.Dialect == store.SQLite {
		if got, err := store.QueryStrings(ctx, db.SQL, `PRAGMA integrity_check`); err != nil || len(got) != 1 || got[0] != "ok" {
			t.Errorf("integrity_check: %v %v", got, err)
		}
		orphans, err := store.QueryStrings(ctx, db.SQL,
			`SELECT "table" || ' row ' || COALESCE(CAST(rowid AS TEXT), '?') || ' -> ' || parent FROM pragma_foreign_key_check`)
		if err != nil || len(orphans) > 0 {
			t.Errorf("foreign_key_check: %v %v", orphans, err)
		}
		return
	}
	invalid, err := store.QueryStrings(ctx, db.SQL,
		`SELECT conrelid::regclass || '.' || conname FROM pg_constraint WHERE connamespace = 'public'::regnamespace AND NOT convalidated`)
	if err != nil || len(invalid) > 0 {
		t.Errorf("constraints not validated: %v %v", invalid, err)
	}
	// One query per foreign key: the child rows whose key (all of it set) has no parent row.
	checks, err := store.QueryStrings(ctx, db.SQL, `
		SELECT format('SELECT %L || COUNT(*) FROM %s c WHERE %s AND NOT EXISTS (SELECT 1 FROM %s p WHERE %s)',
			c.conrelid::regclass || '.' || c.conname || ': ', c.conrelid::regclass,
			string_agg(format('c.%I IS NOT NULL', ca.attname), ' AND '), c.confrelid::regclass,
			string_agg(format('p.%I = c.%I', pa.attname, ca.attname), ' AND '))
		FROM pg_constraint c
		CROSS JOIN LATERAL unnest(c.conkey, c.confkey) AS k(child, parent)
		JOIN pg_attribute ca ON ca.attrelid = c.conrelid AND ca.attnum = k.child
		JOIN pg_attribute pa ON pa.attrelid = c.confrelid AND pa.attnum = k.parent
		WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
		GROUP BY c.oid, c.conrelid, c.conname, c.confrelid`)
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) == 0 {
		t.Fatal("no foreign keys found")
	}
	for _, q := range checks {
		var res string
		if err := db.SQL.QueryRowContext(ctx, q).Scan(&res); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if !strings.HasSuffix(res, ": 0") {
			t.Errorf("rows without their parent: %s", res)
		}
	}
}

// A database of an earlier schema migrates to today's, keeps every row, stays sound, and ends
// with the schema a fresh database has.
func TestEarlierSchemaUpgrades(t *testing.T) {
	ctx := context.Background()
	db := openFixture(t)
	if v, err := store.AppliedVersion(ctx, db.SQL); err != nil || v != fixtureVersion {
		t.Fatalf("fixture schema version = %d, %v; want %d", v, err, fixtureVersion)
	}
	before := contents(t, db)
	for table, want := range map[string]int{"organizations": 2, "devices": 4, "alerts": 4, "scripts": 1, "automation_runs": 1} {
		if got := before[table].count; got != want {
			t.Fatalf("the fixture holds %d rows in %s, want %d", got, table, want)
		}
	}
	if err := db.Migrate(ctx, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	latest, _ := store.LatestVersion(db.Dialect)
	if v, err := store.AppliedVersion(ctx, db.SQL); err != nil || v != latest {
		t.Fatalf("schema version after migrating = %d, %v; want %d", v, err, latest)
	}

	t.Run("integrity", func(t *testing.T) { checkIntegrity(t, db) })

	t.Run("rows kept", func(t *testing.T) {
		after := contents(t, db)
		for table, rows := range before {
			got, ok := after[table]
			if !ok {
				t.Errorf("table %s is gone", table)
				continue
			}
			// Migrations may add rows (built-in records), never lose any.
			if got.count < rows.count {
				t.Errorf("%s: %d rows, had %d", table, got.count, rows.count)
			}
			for _, id := range rows.ids {
				if !slices.Contains(got.ids, id) {
					t.Errorf("%s: row %s is gone", table, id)
				}
			}
		}
	})

	t.Run("data migrated", func(t *testing.T) {
		// 00038 names each alert's source: the device of those raised on one.
		var unnamed int
		if err := db.SQL.QueryRowContext(ctx, `SELECT COUNT(*) FROM alerts
			WHERE device_id IS NOT NULL AND (source_type <> 'device' OR source_id IS NULL OR source_id <> device_id)`).Scan(&unnamed); err != nil {
			t.Fatal(err)
		}
		if unnamed > 0 {
			t.Errorf("%d alerts raised on a device do not name it as their source", unnamed)
		}
		// 00050 indexes the names of the devices already there.
		a := &store.Args{}
		cond := db.ContainsIndexed(a, "eb-0", "devices_name_search", "d.rowid", "d.hostname", "d.display_name")
		found, err := store.QueryStrings(ctx, db.SQL, `SELECT d.hostname FROM devices d WHERE `+cond, a.Values()...)
		if err != nil || len(found) != 1 || found[0] != "web-01" {
			t.Errorf("name search for eb-0 = %v, %v; want web-01", found, err)
		}
	})

	t.Run("same schema as a fresh database", func(t *testing.T) {
		fresh := storetest.Open(t)
		want, got := schema(t, fresh), schema(t, db)
		for _, line := range want {
			if !slices.Contains(got, line) {
				t.Errorf("only in a fresh database: %s", line)
			}
		}
		for _, line := range got {
			if !slices.Contains(want, line) {
				t.Errorf("only in the upgraded database: %s", line)
			}
		}
	})
}

var spaces = regexp.MustCompile(`\s+`)

// schema describes every object of the database's schema, one sorted line each, with
// whitespace normalised: on SQLite, sqlite_schema (less its page numbers); on PostgreSQL,
// the columns (in order, with type, default, nullability), constraints, indexes, triggers,
// functions, enum types, sequences, views and extensions of the public schema.
func schema(t *testing.T, db *store.DB) []string {
	t.Helper()
	queries := []string{`SELECT type || ' ' || name || ' on ' || tbl_name || ': ' || COALESCE(sql, '') FROM sqlite_schema`}
	if db.Dialect == store.Postgres {
		queries = []string{
			`SELECT format('column %s #%s %s: %s %s default %s %s %s', table_name,
				row_number() OVER (PARTITION BY table_name ORDER BY ordinal_position), column_name,
				data_type, COALESCE(udt_name, ''), COALESCE(column_default, 'none'),
				CASE is_nullable WHEN 'YES' THEN 'null' ELSE 'not null' END, COALESCE(is_identity, ''))
			FROM information_schema.columns WHERE table_schema = 'public'`,
			`SELECT format('constraint %s %s: %s', conrelid::regclass, conname, pg_get_constraintdef(oid))
			FROM pg_constraint WHERE connamespace = 'public'::regnamespace`,
			`SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'public'`,
			`SELECT 'trigger ' || pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal`,
			`SELECT format('function %s: %s', p.oid::regprocedure, pg_get_functiondef(p.oid)) FROM pg_proc p
			WHERE p.pronamespace = 'public'::regnamespace
				AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')`,
			`SELECT format('type %s: %s', t.typname, string_agg(e.enumlabel, ', ' ORDER BY e.enumsortorder))
			FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid GROUP BY t.typname`,
			`SELECT format('sequence %s %s %s %s', sequence_name, data_type, increment, cycle_option)
			FROM information_schema.sequences WHERE sequence_schema = 'public'`,
			`SELECT format('view %s: %s', viewname, definition) FROM pg_views WHERE schemaname = 'public'`,
			`SELECT 'extension ' || extname FROM pg_extension`,
		}
	}
	var out []string
	for _, q := range queries {
		lines, err := store.QueryStrings(context.Background(), db.SQL, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for _, l := range lines {
			out = append(out, strings.TrimSpace(spaces.ReplaceAllString(l, " ")))
		}
	}
	slices.Sort(out)
	if len(out) < 100 {
		t.Fatalf("schema of %d lines: %v", len(out), out)
	}
	return out
}
