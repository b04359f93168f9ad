// Package storetest gives each test a fresh, migrated database: SQLite by default, and
// PostgreSQL when TEST_DATABASE_URL is set. The schema is migrated once per test process into
// a template that each test clones, so a fresh database costs a file copy or a
// CREATE DATABASE ... TEMPLATE rather than a full migration.
package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"gale/internal/platform/store"
)

// URL returns the database URL of a fresh migrated database for t, dropped when t ends.
func URL(t testing.TB) string {
	t.Helper()
	if pg := os.Getenv("TEST_DATABASE_URL"); pg != "" {
		return postgresURL(t, pg)
	}
	return "sqlite:" + sqlitePath(t)
}

// SQLiteURL returns the URL of a fresh migrated SQLite database for t whatever the backend,
// for what only SQLite has (its file's backup and restore).
func SQLiteURL(t testing.TB) string {
	t.Helper()
	return "sqlite:" + sqlitePath(t)
}

// EmptyURL returns the URL of a fresh database for t with no schema at all (not migrated),
// dropped when t ends: SQLite by default, PostgreSQL when TEST_DATABASE_URL is set.
func EmptyURL(t testing.TB) string {
	t.Helper()
	if pg := os.Getenv("TEST_DATABASE_URL"); pg != "" {
		return withDatabase(pg, createDatabase(t, pg, ""))
	}
	return "sqlite:" + filepath.Join(t.TempDir(), "gale.db")
}

// Open returns a fresh migrated database for t, closed and dropped when t ends.
func Open(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), URL(t))
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Backend names the backend tests run on: "sqlite" or "postgres".
func Backend() string {
	if os.Getenv("TEST_DATABASE_URL") != "" {
		return "postgres"
	}
	return "sqlite"
}

var (
	sqliteOnce     sync.Once
	sqliteTemplate string
	sqliteErr      error
)

func sqlitePath(t testing.TB) string {
	sqliteOnce.Do(func() { sqliteTemplate, sqliteErr = prepareSQLiteTemplate() })
	if sqliteErr != nil {
		t.Fatalf("prepare sqlite template: %v", sqliteErr)
	}
	path := filepath.Join(t.TempDir(), "gale.db")
	if err := copyFile(sqliteTemplate, path); err != nil {
		t.Fatalf("copy sqlite template: %v", err)
	}
	return path
}

// prepareSQLiteTemplate migrates a database named after the schema, shared by every test
// process: the first to need it builds it under a private name and renames it into place
// (atomic), so concurrent processes never see a half-built template.
func prepareSQLiteTemplate() (string, error) {
	final := filepath.Join(os.TempDir(), "gale-template-"+schemaHash()+".db")
	if _, err := os.Stat(final); err == nil {
		return final, nil
	}
	dir, err := os.MkdirTemp("", "gale-template-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	build := filepath.Join(dir, "template.db")
	db, err := store.Open(context.Background(), "sqlite:"+build)
	if err != nil {
		return "", err
	}
	err = db.Migrate(context.Background(), slog.New(slog.DiscardHandler))
	if err == nil {
		// Fold the WAL into the main file so a plain copy is a complete database.
		_, err = db.SQL.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	}
	db.Close()
	if err != nil {
		return "", err
	}
	return final, os.Rename(build, final)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

var (
	pgOnce     sync.Once
	pgTemplate string
	pgErr      error
)

// schemaHash names the template after the migrations, so a changed schema gets a new template
// and an unchanged one is reused across test processes.
func schemaHash() string {
	h := sha256.New()
	_ = fs.WalkDir(store.MigrationFiles(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(store.MigrationFiles(), path)
		h.Write([]byte(path))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func withDatabase(base, name string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	u.Path = "/" + name
	return u.String()
}

func postgresURL(t testing.TB, base string) string {
	pgOnce.Do(func() { pgTemplate, pgErr = preparePostgresTemplate(context.Background(), base) })
	if pgErr != nil {
		t.Fatalf("prepare postgres template: %v", pgErr)
	}
	return withDatabase(base, createDatabase(t, base, pgTemplate))
}

// createDatabase creates a database for t, a copy of template (an empty one when template is
// ""), dropped when t ends, and returns its name.
func createDatabase(t testing.TB, base, template string) string {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect TEST_DATABASE_URL: %v", err)
	}
	defer admin.Close(ctx)
	name := "gale_test_" + randomHex(8)
	create := "CREATE DATABASE " + name
	if template != "" {
		create += fmt.Sprintf(" TEMPLATE %s STRATEGY FILE_COPY", template)
	}
	for attempt := 0; ; attempt++ {
		_, err = admin.Exec(ctx, create)
		if err == nil || attempt == 50 || !strings.Contains(err.Error(), "being accessed by other users") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return name
}

func preparePostgresTemplate(ctx context.Context, base string) (string, error) {
	name := "gale_template_" + schemaHash()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", err
	}
	defer admin.Close(ctx)
	// One process at a time builds the template; the others wait and then find it ready.
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(727001)"); err != nil {
		return "", err
	}
	defer admin.Exec(ctx, "SELECT pg_advisory_unlock(727001)")
	var ready bool
	err = admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)", name).Scan(&ready)
	if err != nil || ready {
		return name, err
	}
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	db, err := store.Open(ctx, withDatabase(base, name))
	if err != nil {
		return "", err
	}
	err = db.Migrate(ctx, slog.New(slog.DiscardHandler))
	db.Close()
	if err != nil {
		return "", err
	}
	_, err = admin.Exec(ctx, "ALTER DATABASE "+name+" WITH IS_TEMPLATE true")
	return name, err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Exec runs a statement for test setup and fails the test on error.
func Exec(t testing.TB, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("exec %q: %v", query, err)
	}
}
