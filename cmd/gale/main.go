// Command gale is the Gale server: the REST API, the agent hub and the background jobs in one
// process. With no configuration it keeps everything in an embedded SQLite file under ./data.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	_ "time/tzdata" // site time zones validate on machines without a zoneinfo database

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"gale/internal/app"
	"gale/internal/domains/auth"
	"gale/internal/domains/identity"
	"gale/internal/platform/access"
	"gale/internal/platform/config"
	"gale/internal/platform/store"
)

// version is set at build time (make dist: -ldflags "-X main.version=1.2.3"); the server
// reports it on /health, in its log and to agents.
var version = "dev"

func main() {
	app.Version = version
	if err := root().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func root() *cobra.Command {
	cmd := &cobra.Command{
		Use:           "gale",
		Short:         "Gale remote monitoring and management server",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       app.Version,
	}
	cmd.AddCommand(serveCmd(), migrateCmd(), backupCmd(), restoreCmd(), userCmd(), agentReleaseCmd(), openapiCmd(), versionCmd())
	return cmd
}

func newLogger(format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "text" || (format == "" && isatty.IsTerminal(os.Stderr.Fd())) {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}

// load reads the configuration; flags given on the command line win over the environment.
func load(flags map[string]*string) (config.Config, *slog.Logger, error) {
	getenv := func(name string) string {
		if v, ok := flags[name]; ok && v != nil && *v != "" {
			return *v
		}
		return os.Getenv(name)
	}
	boot := newLogger(os.Getenv("LOG_FORMAT"), slog.LevelInfo)
	cfg, err := config.Load(getenv, boot)
	if err != nil {
		return cfg, boot, err
	}
	return cfg, newLogger(cfg.LogFormat, cfg.LogLevel), nil
}

func serveCmd() *cobra.Command {
	var listen, dbURL string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the server (migrates the database first)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, logger, err := load(map[string]*string{"LISTEN_ADDR": &listen, "DATABASE_URL": &dbURL})
			if err != nil {
				return err
			}
			app.TuneRuntime()
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			a, err := app.New(ctx, cfg, logger)
			if err != nil {
				return err
			}
			registerAgentBuilds(ctx, a, os.Getenv("PUBLIC_URL") != "")
			return a.Run(ctx)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on (LISTEN_ADDR, default :8080)")
	cmd.Flags().StringVar(&dbURL, "database-url", "", "sqlite:PATH or postgres://... (DATABASE_URL, default sqlite:data/gale.db)")
	return cmd
}

func migrateCmd() *cobra.Command {
	var dbURL string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Bring the database schema up to date and exit",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, logger, err := load(map[string]*string{"DATABASE_URL": &dbURL})
			if err != nil {
				return err
			}
			db, err := store.Open(cmd.Context(), cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := db.Migrate(cmd.Context(), logger); err != nil {
				return err
			}
			logger.Info("database is up to date", "database", string(db.Dialect))
			return nil
		},
	}
	cmd.Flags().StringVar(&dbURL, "database-url", "", "sqlite:PATH or postgres://... (DATABASE_URL)")
	return cmd
}

func userCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "Manage users directly in the database (operators)"}
	var email, name, password, level, partnerID, orgID, roleID string
	var system bool
	create := &cobra.Command{
		Use:   "create",
		Short: "Create an active user with a password",
		Long: "Create an active user. The password is read from --password, else from GALE_USER_PASSWORD, " +
			"else from standard input (one line).",
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openApp(cmd.Context())
			if err != nil {
				return err
			}
			defer a.Close()
			pw, err := readPassword(password)
			if err != nil {
				return err
			}
			if err := auth.CheckPasswordPolicy("password", pw); err != nil {
				return fmt.Errorf("password needs 8 to 128 characters with a lower-case letter, an upper-case letter and a digit")
			}
			lvl := access.Level(level)
			if system {
				lvl = access.LevelSystem
			}
			if !lvl.Valid() {
				return fmt.Errorf("--level must be system, partner or organization")
			}
			cfg := a.Config
			id, err := identity.CreateUser(cmd.Context(), a.DB, identity.NewUser{Email: email, Name: orDefault(name, email),
				PasswordHash: auth.HashPassword(pw, auth.Argon2Params{MemoryKiB: cfg.Argon2MemoryKiB,
					Iterations: cfg.Argon2Iterations, Parallelism: cfg.Argon2Parallelism}),
				Level: lvl, PartnerID: partnerID, OrgID: orgID, RoleID: roleID})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created user %s (%s)\n", email, id)
			return nil
		},
	}
	create.Flags().StringVar(&email, "email", "", "email address (required)")
	create.Flags().StringVar(&name, "name", "", "display name (default: the email)")
	create.Flags().StringVar(&password, "password", "", "password (prefer GALE_USER_PASSWORD or standard input)")
	create.Flags().BoolVar(&system, "system", false, "create a system administrator")
	create.Flags().StringVar(&level, "level", "system", "system, partner or organization")
	create.Flags().StringVar(&partnerID, "partner-id", "", "partner of a partner or organization user")
	create.Flags().StringVar(&orgID, "org-id", "", "organization of an organization user")
	create.Flags().StringVar(&roleID, "role-id", "", "role (default: the level's administrator role)")
	_ = create.MarkFlagRequired("email")

	var resetEmail, resetPassword string
	reset := &cobra.Command{
		Use:   "reset-password",
		Short: "Set a user's password (every session of the user ends)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openApp(cmd.Context())
			if err != nil {
				return err
			}
			defer a.Close()
			pw, err := readPassword(resetPassword)
			if err != nil {
				return err
			}
			cfg := a.Config
			if err := auth.SetPassword(cmd.Context(), a.DB, resetEmail, pw, auth.Argon2Params{MemoryKiB: cfg.Argon2MemoryKiB,
				Iterations: cfg.Argon2Iterations, Parallelism: cfg.Argon2Parallelism}); err != nil {
				return err
			}
			// Running nodes on the same PostgreSQL forget the user's sessions now, not within
			// AUTH_CACHE_MS.
			a.Wrote(cmd.Context())
			fmt.Fprintf(cmd.OutOrStdout(), "password of %s changed\n", resetEmail)
			return nil
		},
	}
	reset.Flags().StringVar(&resetEmail, "email", "", "email address (required)")
	reset.Flags().StringVar(&resetPassword, "password", "", "new password (prefer GALE_USER_PASSWORD or standard input)")
	_ = reset.MarkFlagRequired("email")
	cmd.AddCommand(create, reset)
	return cmd
}

// openApp opens and migrates the configured database for an operator command.
func openApp(ctx context.Context) (*app.App, error) {
	cfg, logger, err := load(nil)
	if err != nil {
		return nil, err
	}
	return app.New(ctx, cfg, logger)
}

func readPassword(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if v := os.Getenv("GALE_USER_PASSWORD"); v != "" {
		return v, nil
	}
	fmt.Fprint(os.Stderr, "password: ")
	var line string
	if _, err := fmt.Fscanln(os.Stdin, &line); err != nil {
		return "", fmt.Errorf("read password from standard input: %w", err)
	}
	return strings.TrimSpace(line), nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "gale", app.Version)
		},
	}
}
