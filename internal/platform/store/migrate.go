package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"

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

// MigrationFiles returns the embedded migration files of both dialects.
func MigrationFiles() fs.FS { return migrations }
