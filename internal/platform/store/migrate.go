package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed migrations
var migrations embed.FS

// Migrate brings the schema (Gale's tables, then the job queue's) up to date. On PostgreSQL a
// session advisory lock keeps two nodes starting together from migrating at once.
func (db *DB) Migrate(ctx context.Context, logger *slog.Logger) error {
	sub, err := fs.Sub(migrations, "migrations/"+string(db.Dialect))
	if err != nil {
		return err
	}
	gooseDialect := goose.DialectSQLite3
	var opts []goose.ProviderOption
	if db.Dialect == Postgres {
		gooseDialect = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	provider, err := goose.NewProvider(gooseDialect, db.SQL, sub, opts...)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, r := range results {
		logger.Info("applied migration", "version", r.Source.Version, "file", r.Source.Path)
	}
	return db.migrateJobs(ctx)
}

func (db *DB) migrateJobs(ctx context.Context) error {
	var err error
	switch db.Dialect {
	case Postgres:
		m, e := rivermigrate.New(riverpgxv5.New(db.Pool), nil)
		if e != nil {
			return e
		}
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	case SQLite:
		m, e := rivermigrate.New(riversqlite.New(db.SQL), nil)
		if e != nil {
			return e
		}
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		return fmt.Errorf("migrate job queue: %w", err)
	}
	return nil
}

// LatestVersion is the schema version this binary migrates a database of dialect d to: the
// version of its newest migration.
func LatestVersion(d Dialect) (int64, error) {
	entries, err := fs.ReadDir(migrations, "migrations/"+string(d))
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, e := range entries {
		prefix, _, _ := strings.Cut(e.Name(), "_")
		v, err := strconv.ParseInt(prefix, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("migration %s: no version", e.Name())
		}
		latest = max(latest, v)
	}
	return latest, nil
}

// AppliedVersion is the schema version of the database q reaches: the newest migration
// applied to it, 0 when none was.
func AppliedVersion(ctx context.Context, q Querier) (int64, error) {
	var v int64
	err := q.QueryRowContext(ctx, `SELECT COALESCE(MAX(version_id), 0) FROM goose_db_version WHERE is_applied`).Scan(&v)
	return v, err
}

// MigrationFiles returns the embedded migration files of both dialects.
func MigrationFiles() fs.FS { return migrations }
