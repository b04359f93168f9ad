// Package app wires Gale together: configuration → database → services → HTTP server →
// background jobs, and shuts them down in reverse order.
package app

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"gale/internal/access"
	"gale/internal/agentdist"
	"gale/internal/agenthub"
	"gale/internal/alerts"
	"gale/internal/apikeys"
	"gale/internal/audit"
	"gale/internal/auth"
	"gale/internal/bus"
	"gale/internal/config"
	"gale/internal/customfields"
	"gale/internal/devices"
	"gale/internal/enrollment"
	"gale/internal/events"
	"gale/internal/groups"
	"gale/internal/httpapi"
	"gale/internal/identity"
	"gale/internal/jobs"
	"gale/internal/mail"
	"gale/internal/mobile"
	"gale/internal/notifications"
	"gale/internal/notify"
	"gale/internal/partnerapi"
	"gale/internal/ratelimit"
	"gale/internal/search"
	"gale/internal/secrets"
	"gale/internal/store"
	"gale/internal/tenancy"
	"gale/internal/webhooks"
)

// Version is the server version, set at build time with -ldflags "-X gale/internal/app.Version=...".
var Version = "dev"

// App is a wired server.
type App struct {
	Config  config.Config
	DB      *store.DB
	Logger  *slog.Logger
	HTTP    *httpapi.Server
	Auth    *auth.Service
	Tenancy *tenancy.Service
	APIKeys *apikeys.Service
	// Identity manages users, invitations, roles and access reviews.
	Identity *identity.Service
	Audit    *audit.Log
	Limiter  *ratelimit.Limiter
	// Enrollment manages enrollment keys; Devices holds enrolled endpoints; Agents is this
	// node's live channel to their agents.
	Enrollment *enrollment.Service
	Devices    *devices.Service
	Agents     *agenthub.Hub
	bus        bus.Bus
	jobs       *jobs.Runner
	// Events feeds domain events to their consumers (webhooks, notifications); stopEvents
	// ends its loop and waits for it.
	Events     *events.Dispatcher
	stopEvents func()
	// CustomFields manages custom field definitions and device values; Search answers /tags
	// and /search.
	CustomFields *customfields.Service
	Search       *search.Service
	// Groups manages device groups and keeps dynamic membership current through the device
	// and custom field hooks.
	Groups *groups.Service
	// AgentDist keeps the released gale-agent binaries and serves them to endpoints.
	AgentDist *agentdist.Service
	// PartnerAPI holds the service principals and serves /partner-api.
	PartnerAPI *partnerapi.Service
	// Webhooks holds outbound webhook subscriptions and sends their deliveries (workers
	// started by StartJobs).
	Webhooks *webhooks.Service
	// Alerts holds alert rules and alerts; rules are evaluated in the device heartbeat and
	// command-result transactions and by the alerts-evaluate job.
	Alerts *alerts.Service
	// Notify holds notification channels and alert policies and sends alert notifications
	// (workers started by StartJobs).
	Notify *notify.Service
	// Notifications holds users' in-app notifications and phone push tokens; its "inapp"
	// event consumer writes them and queues pushes, which its sender (started by StartJobs)
	// sends.
	Notifications *notifications.Service
}

// New opens and migrates the database, seeds what every database needs, and builds the
// services and routes. It does not listen or start jobs: Run does.
func New(ctx context.Context, cfg config.Config, logger *slog.Logger) (*App, error) {
	db, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	a, err := build(ctx, cfg, logger, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	return a, nil
}

func build(ctx context.Context, cfg config.Config, logger *slog.Logger, db *store.DB) (*App, error) {
	if err := db.Migrate(ctx, logger); err != nil {
		return nil, err
	}
	if err := identity.EnsureBuiltInRoles(ctx, db); err != nil {
		return nil, fmt.Errorf("seed built-in roles: %w", err)
	}
	box, err := secrets.NewBox(cfg.EncryptionKey)
	if err != nil {
		return nil, err
	}
	mailer, err := mail.NewSMTP(cfg.SMTPURL, cfg.SMTPFrom)
	if err != nil {
		return nil, err
	}
	var sender mail.Sender
	if mailer != nil {
		sender = mailer
	}
	argon := auth.Argon2Params{MemoryKiB: cfg.Argon2MemoryKiB, Iterations: cfg.Argon2Iterations, Parallelism: cfg.Argon2Parallelism}
	a := &App{Config: cfg, DB: db, Logger: logger, Audit: audit.New(db, logger), Limiter: ratelimit.New(db),
		Events: events.NewDispatcher(db, logger)}
	built := false
	defer func() {
		// The bus holds a database connection; New can only close the database after it has
		// let go.
		if !built {
			a.stopAgents()
		}
	}()
	a.bus = bus.New(ctx, db, logger, append(slices.Clone(agenthub.Channels), chanWrote)...)
	a.Auth = auth.New(db, auth.Options{JWTSecret: cfg.JWTSecret, AccessTTL: cfg.AccessTokenTTL, RefreshTTL: cfg.RefreshTokenTTL,
		RefreshFamilyTTL: cfg.RefreshFamilyTTL, ResetTTL: cfg.PasswordResetTTL, Argon2: argon,
		LoginFloor: cfg.LoginResponseFloor, PublicURL: cfg.PublicURL, PrincipalTTL: cfg.AuthCacheTTL}, box, a.Limiter, a.Audit,
		sender, logger)
	a.Tenancy = tenancy.New(db, logger, cfg.ListCacheRows, cfg.ListPageCacheTTL)
	a.bus.Subscribe(chanWrote, func(string) { a.forgetCaches() })
	a.APIKeys = apikeys.New(db, logger)
	a.Auth.SetAPIKeys(a.APIKeys)
	a.Identity = identity.New(db, logger, sender, identity.Options{PublicURL: cfg.PublicURL, InviteTTL: cfg.InviteTTL})
	a.Auth.SetUsers(a.Identity)

	a.HTTP = httpapi.New(logger, a.Auth, a.Audit, httpapi.Options{MaxBodyBytes: cfg.MaxBodyBytes,
		Enable2FA: cfg.Enable2FA, TrustedProxies: cfg.TrustedProxies, Version: Version, AfterWrite: a.Wrote})
	a.HTTP.Handle("GET /health", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": Version})
	}))
	a.HTTP.Handle("GET /ready", http.HandlerFunc(a.ready))
	a.Auth.Register(a.HTTP)
	a.Tenancy.Register(a.HTTP)
	a.APIKeys.Register(a.HTTP)
	a.Audit.Register(a.HTTP)
	a.Identity.Register(a.HTTP)
	a.AgentDist = agentdist.New(db, logger, agentdist.Options{PublicURL: cfg.PublicURL})
	a.AgentDist.RegisterRoutes(a.HTTP)

	a.buildDevices(ctx)
	a.CustomFields = customfields.New(db, logger)
	a.CustomFields.Register(a.HTTP)
	a.Groups = groups.New(db, logger)
	a.Groups.Register(a.HTTP)
	a.Alerts = alerts.New(db, logger, alerts.Options{MetricsRetention: cfg.DeviceMetricsRetention, Wake: a.Events.Wake})
	a.Alerts.Register(a.HTTP)
	a.Alerts.RegisterTemplates(a.HTTP)
	a.Devices.SetHooks(devices.Hooks{Changed: a.Groups.DeviceChanged,
		LeftOrg: func(ctx context.Context, tx *sql.Tx, deviceID, reason string) error {
			if err := a.Groups.DeviceLeftOrg(ctx, tx, deviceID, reason); err != nil {
				return err
			}
			return a.Alerts.DeviceLeftOrg(ctx, tx, deviceID, reason)
		},
		Heartbeat: a.Alerts.EvaluateIsolated, CommandFinished: a.Alerts.EvaluateIsolated})
	a.CustomFields.SetHook(a.Groups.DeviceChanged)
	a.Search = search.New(db, logger)
	a.Search.Register(a.HTTP)
	a.PartnerAPI = partnerapi.New(db, logger, partnerapi.Deps{Audit: a.Audit, Box: box, Limiter: a.Limiter, Orgs: a.Tenancy,
		Keys: a.Enrollment, Devices: a.Devices, CustomFields: a.CustomFields},
		partnerapi.Options{KeyDefaultTTL: cfg.PartnerAPIEnrollmentKeyDefaultTTL, KeyMaxTTL: cfg.PartnerAPIEnrollmentKeyMaxTTL,
			CursorSecret: cfg.JWTSecret})
	a.PartnerAPI.Register(a.HTTP)
	a.Webhooks = webhooks.New(db, logger, box, webhooks.Options{AllowPrivateTargets: cfg.WebhookAllowPrivateTargets,
		Workers: cfg.WebhookSenders})
	a.Webhooks.Register(a.HTTP)
	a.Events.Register(a.Webhooks.Consumer())
	a.Notify = notify.New(db, logger, box, sender, notify.Options{AllowPrivateTargets: cfg.WebhookAllowPrivateTargets,
		PublicURL: cfg.PublicURL})
	a.Notify.Register(a.HTTP)
	a.Events.Register(a.Notify.Consumer())
	push, err := pushers(cfg, logger)
	if err != nil {
		return nil, err
	}
	a.Notifications = notifications.New(db, logger, push)
	a.Notifications.Register(a.HTTP)
	a.Events.Register(a.Notifications.Consumer())
	mobile.New(db, logger, a.Devices, a.Alerts, a.Notifications).Register(a.HTTP)

	if err := a.bootstrapAdmin(ctx, argon); err != nil {
		return nil, err
	}
	built = true
	return a, nil
}

// chanWrote is the bus channel on which a node tells the others that a write through the API
// committed.
const chanWrote = "gale_api_write"

// Wrote is called after every write through the API has committed (and by the gale command
// after its changes): it may have changed who may do what, or an organization. This node
// forgets the principals and organization pages it cached, at once, and the other nodes as
// soon as the bus carries the news (told even when this node caches nothing, as they may).
func (a *App) Wrote(ctx context.Context) {
	a.forgetCaches()
	a.bus.Publish(context.WithoutCancel(ctx), chanWrote, "")
}

func (a *App) forgetCaches() {
	a.Auth.ForgetPrincipals()
	a.Tenancy.ForgetPages()
}

func (a *App) ready(w http.ResponseWriter, r *http.Request) {
	if err := a.DB.Ping(r.Context()); err != nil {
		a.Logger.WarnContext(r.Context(), "readiness check failed", "error", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]string{
			"code": "NOT_READY", "message": "database unreachable"}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "database": string(a.DB.Dialect)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// bootstrapAdmin creates the first system administrator on an empty database when
// BOOTSTRAP_ADMIN_EMAIL and BOOTSTRAP_ADMIN_PASSWORD are set, and otherwise says how to.
func (a *App) bootstrapAdmin(ctx context.Context, argon auth.Argon2Params) error {
	has, err := identity.HasUsers(ctx, a.DB)
	if err != nil || has {
		return err
	}
	if a.Config.BootstrapAdminEmail == "" {
		a.Logger.Warn("the database has no users, so nobody can sign in; restart with BOOTSTRAP_ADMIN_EMAIL and " +
			"BOOTSTRAP_ADMIN_PASSWORD set, or run: gale user create --email you@example.com --system")
		return nil
	}
	if err := auth.CheckPasswordPolicy("BOOTSTRAP_ADMIN_PASSWORD", a.Config.BootstrapAdminPassword); err != nil {
		return fmt.Errorf("BOOTSTRAP_ADMIN_PASSWORD: needs 8 to 128 characters with a lower-case letter, an upper-case letter and a digit")
	}
	_, err = identity.CreateUser(ctx, a.DB, identity.NewUser{Email: a.Config.BootstrapAdminEmail, Name: a.Config.BootstrapAdminName,
		PasswordHash: auth.HashPassword(a.Config.BootstrapAdminPassword, argon), Level: access.LevelSystem})
	if err != nil {
		return fmt.Errorf("create bootstrap administrator: %w", err)
	}
	a.Logger.Info("created the first system administrator", "email", a.Config.BootstrapAdminEmail)
	return nil
}

// Handler is the HTTP handler of the whole API.
func (a *App) Handler() http.Handler { return a.HTTP.Handler() }

// StartJobs starts the background job queue.
func (a *App) StartJobs(ctx context.Context, opts jobs.Options) error {
	opts.Periodic = append(opts.Periodic, jobs.Periodic{Name: "cleanup", Every: 10 * time.Minute, Run: a.Cleanup},
		jobs.Periodic{Name: "device-sweep", Every: 30 * time.Second, Run: a.Devices.Sweep},
		jobs.Periodic{Name: "groups-recompute", Every: 5 * time.Minute, Run: a.Groups.RecomputeAll},
		jobs.Periodic{Name: "events-purge", Every: time.Hour, Run: a.Events.Purge},
		jobs.Periodic{Name: "webhook-deliveries-purge", Every: time.Hour, Run: a.Webhooks.Purge},
		jobs.Periodic{Name: "alerts-evaluate", Every: time.Minute, Run: a.Alerts.EvaluateAll},
		jobs.Periodic{Name: "alerts-escalate", Every: time.Minute, Run: a.Notify.Escalate},
		jobs.Periodic{Name: "notification-deliveries-purge", Every: time.Hour, Run: a.Notify.Purge},
		jobs.Periodic{Name: "notifications-purge", Every: time.Hour, Run: a.Notifications.Purge})
	r, err := jobs.Start(ctx, a.DB, a.Logger, opts)
	if err != nil {
		return err
	}
	a.jobs = r
	eventsCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Events.Run(eventsCtx)
	}()
	a.Webhooks.Start(ctx)
	a.Notify.Start(ctx)
	a.Notifications.Start(ctx)
	a.stopEvents = func() {
		cancel()
		<-done
		a.Webhooks.Stop()
		a.Notify.Stop()
		a.Notifications.Stop()
	}
	return nil
}

// Cleanup purges expired refresh tokens, invitations, reset tokens, rate-limit windows and
// partner-API idempotency records.
func (a *App) Cleanup(ctx context.Context) error {
	tokens, err := auth.PurgeExpired(ctx, a.DB)
	if err != nil {
		return err
	}
	windows, err := a.Limiter.Purge(ctx)
	if err != nil {
		return err
	}
	idempotency, err := a.PartnerAPI.Purge(ctx)
	if err != nil {
		return err
	}
	a.Logger.InfoContext(ctx, "cleanup done", "tokensPurged", tokens, "rateLimitWindowsPurged", windows,
		"idempotencyRecordsPurged", idempotency)
	return nil
}

// Run listens on the configured address until ctx ends, then shuts down gracefully:
// in-flight requests finish (up to the shutdown timeout), then jobs stop, then the database
// closes.
func (a *App) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.Config.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (set LISTEN_ADDR to another address)", a.Config.ListenAddr, err)
	}
	return a.Serve(ctx, ln)
}

// Serve is Run on an existing listener.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	if err := a.StartJobs(ctx, jobs.Options{}); err != nil {
		return err
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	a.Logger.Info("gale is listening", "addr", ln.Addr().String(), "database", string(a.DB.Dialect), "version", Version)
	select {
	case err := <-errc:
		a.Close()
		return err
	case <-ctx.Done():
	}
	a.Logger.Info("shutting down: finishing in-flight requests")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), a.Config.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		a.Logger.Error("server stopped with error", "error", err)
	}
	if a.jobs != nil {
		if jerr := a.jobs.Stop(shutdownCtx); jerr != nil {
			a.Logger.Warn("job queue stop", "error", jerr)
		}
		a.jobs = nil
	}
	a.Close()
	a.Logger.Info("stopped")
	return err
}

// Close stops jobs (if started), drops agent connections and closes the database.
func (a *App) Close() {
	if a.stopEvents != nil {
		a.stopEvents()
	}
	if a.jobs != nil {
		_ = a.jobs.Stop(context.Background())
		a.jobs = nil
	}
	a.stopAgents()
	a.DB.Close()
}

// stopAgents closes the agents' connections and the bus between nodes.
func (a *App) stopAgents() {
	if a.Agents != nil {
		a.Agents.Close()
	}
	if a.bus != nil {
		a.bus.Close()
	}
}
