package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"gale/internal/platform/backup"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

func backupCmd() *cobra.Command {
	var dbURL string
	cmd := &cobra.Command{
		Use:   "backup FILE",
		Short: "Copy the SQLite database to a new file while the server runs",
		Long: "Copy the SQLite database, as it is at one moment, to FILE (which must not exist) while the server keeps " +
			"running and writing. The copy is checked and stands alone; keep the secrets (JWT_SECRET, APP_ENCRYPTION_KEY " +
			"or DATA_DIR/secrets.json) with it. On PostgreSQL use pg_dump.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := sqliteDatabase(dbURL, "back it up with pg_dump -Fc (see docs/operations.md, Backup and restore)")
			if err != nil {
				return err
			}
			// Opening a missing file would make an empty database.
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("no database to back up: %w", err)
			}
			db, err := store.Open(cmd.Context(), "sqlite:"+path)
			if err != nil {
				return err
			}
			defer db.Close()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "backing up %s to %s\n", path, args[0])
			res, err := backup.Backup(cmd.Context(), db, args[0], progressPrinter(out))
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "backup written: %s, %s, schema version %d, integrity check ok\n", res.Path, mib(res.Bytes), res.SchemaVersion)
			return nil
		},
	}
	cmd.Flags().StringVar(&dbURL, "database-url", "", "sqlite:PATH (DATABASE_URL, default sqlite:data/gale.db)")
	return cmd
}

func restoreCmd() *cobra.Command {
	var dbURL string
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Put a backup in place of the SQLite database (the server stopped)",
		Long: "Put a copy of FILE, made by gale backup, in place of the SQLite database. Every gale process using the " +
			"database must be stopped. FILE must pass SQLite's integrity check and have a schema no newer than this " +
			"gale's; an older one is migrated when the server next starts. The database it replaces is kept beside it " +
			"as PATH.before-restore-TIME. On PostgreSQL use pg_restore.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := sqliteDatabase(dbURL, "restore a pg_dump archive with pg_restore (see docs/operations.md, Backup and restore)")
			if err != nil {
				return err
			}
			res, err := backup.Restore(cmd.Context(), args[0], path, clock.System{})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "restored %s to %s: %s, schema version %d\n", args[0], res.Path, mib(res.Bytes), res.SchemaVersion)
			if res.SchemaVersion < res.LatestVersion {
				fmt.Fprintf(out, "this gale migrates it to schema version %d when it starts\n", res.LatestVersion)
			}
			if res.Aside != "" {
				fmt.Fprintf(out, "the database it replaced is kept as %s\n", res.Aside)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dbURL, "database-url", "", "sqlite:PATH (DATABASE_URL, default sqlite:data/gale.db)")
	return cmd
}

// sqliteDatabase returns the SQLite file the configuration names, or an error that says what
// to do instead on PostgreSQL.
func sqliteDatabase(dbURL, onPostgres string) (string, error) {
	cfg, _, err := load(map[string]*string{"DATABASE_URL": &dbURL})
	if err != nil {
		return "", err
	}
	path, ok := store.SQLitePath(cfg.DatabaseURL)
	if !ok {
		return "", errors.New("DATABASE_URL names a PostgreSQL database: " + onPostgres)
	}
	return path, nil
}

// progressPrinter prints a backup's progress at each tenth of the way.
func progressPrinter(out io.Writer) func(copied, total int64) {
	shown := int64(0)
	return func(copied, total int64) {
		if total == 0 || copied == total {
			return
		}
		if tenth := copied * 10 / total; tenth > shown {
			shown = tenth
			fmt.Fprintf(out, "  %d%% (%s of %s)\n", tenth*10, mib(copied), mib(total))
		}
	}
}

// mib formats a number of bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
