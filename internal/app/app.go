// Package app wires Gale together: configuration → database → modules (the domains, in
// order) → HTTP server → background jobs, and shuts them down in reverse order. It names no
// domain beyond the module list.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"gale/internal/console"
	"gale/internal/domains/agentdist"
	"gale/internal/domains/agenthub"
	"gale/internal/domains/alertchannels"
	"gale/internal/domains/alerts"
	"gale/internal/domains/apikeys"
	"gale/internal/domains/audit"
	"gale/internal/domains/auth"
	"gale/internal/domains/authtickets"
	"gale/internal/domains/automations"
	"gale/internal/domains/configpolicies"
	"gale/internal/domains/customfields"
	"gale/internal/domains/devices"
	"gale/internal/domains/discovery"
	"gale/internal/domains/enrollment"
	"gale/internal/domains/groups"
	"gale/internal/domains/identity"
	"gale/internal/domains/incidents"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/mobile"
	"gale/internal/domains/monitors"
	"gale/internal/domains/notifications"
	"gale/internal/domains/pam"
	"gale/internal/domains/partnerapi"
	"gale/internal/domains/patches"
	"gale/internal/domains/remote"
	"gale/internal/domains/rollouts"
	"gale/internal/domains/scripts"
	"gale/internal/domains/search"
	"gale/internal/domains/security"
	"gale/internal/domains/snmp"
	"gale/internal/domains/software"
	"gale/internal/domains/systemtools"
	"gale/internal/domains/tenancy"
	"gale/internal/domains/thirdparty"
	"gale/internal/domains/tunnels"
	"gale/internal/domains/vulnerabilities"
	"gale/internal/domains/webhooks"
	"gale/internal/platform/blob"
	"gale/internal/platform/bus"
	"gale/internal/platform/clock"
	"gale/internal/platform/config"
	"gale/internal/platform/events"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/jobs"
	"gale/internal/platform/mail"
	"gale/internal/platform/module"
	"gale/internal/platform/ratelimit"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
)

// Modules are the server's domains, in build order: a module comes after every domain it
// imports (test/archtest checks it), so what a module needs is always built before it.
var Modules = []module.Module{
	audit.Module,
	tenancy.Module,
	identity.Module,
	auth.Module,
	apikeys.Module,
	authtickets.Module,
	agentdist.Module,
	enrollment.Module,
	devices.Module,
	agenthub.Module,
	systemtools.Module,
	customfields.Module,
	groups.Module,
	maintenance.Module,
	scripts.Module,
	alerts.Module,
	search.Module,
	partnerapi.Module,
	webhooks.Module,
	alertchannels.Module,
	notifications.Module,
	mobile.Module,
	tunnels.Module,
	remote.Module,
	automations.Module,
	rollouts.Module,
	thirdparty.Module,
	patches.Module,
	software.Module,
	configpolicies.Module,
	monitors.Module,
	snmp.Module,
	discovery.Module,
	security.Module,
	vulnerabilities.Module,
	incidents.Module,
	pam.Module,
	console.Module,
}

// Version is the server version; the gale command sets it from its own, stamped at build time
// with -ldflags "-X main.version=...".
var Version = "dev"

// App is a wired server.
type App struct {
	Config config.Config
	DB     *store.DB
	Logger *slog.Logger
	HTTP   *httpapi.Server
	// Events feeds domain events to the modules' consumers.
	Events *events.Dispatcher
	kernel *module.Kernel
	// instance tells this process's own notices on the bus from other nodes'.
	instance string
	jobs     *jobs.Runner
	// stopWork ends the event loop and the modules' workers, and waits for them.
	stopWork func()
}

// Service returns the service of type T that a module provided (tests and commands reach a
// domain through it). It panics when there is none, as that is a wiring mistake.
func Service[T any](a *App) T { return module.Get[T](a.kernel) }

// New opens and migrates the database, builds every module and their routes. It does not
// listen or start jobs: Run does.
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
		return nil, fmt.Errorf("migrate the database: %w", err)
	}
	if err := db.Optimize(ctx); err != nil {
		return nil, err
	}
	box, err := secrets.NewBox(cfg.EncryptionKey)
	if err != nil {
		return nil, fmt.Errorf("secrets at rest: %w", err)
	}
	mailer, err := mail.NewSMTP(cfg.SMTPURL, cfg.SMTPFrom)
	if err != nil {
		return nil, fmt.Errorf("mail: %w", err)
	}
	var sender mail.Sender
	if mailer != nil {
		sender = mailer
	}
	clk := clock.Or(cfg.Clock)
	blobs, err := blob.Open(ctx, db, blob.Config{Backend: cfg.BlobStore, MaxSize: cfg.BlobMaxBytes, Clock: clk, S3: blob.S3Config{
		Endpoint: cfg.S3Endpoint, Region: cfg.S3Region, Bucket: cfg.S3Bucket, Prefix: cfg.S3Prefix,
		AccessKeyID: cfg.S3AccessKeyID, SecretAccessKey: cfg.S3SecretAccessKey, PathStyle: cfg.S3PathStyle}})
	if err != nil {
		return nil, fmt.Errorf("blob store: %w", err)
	}
	a := &App{Config: cfg, DB: db, Logger: logger, instance: store.NewID()}
	k := &module.Kernel{Config: cfg, DB: db, Logger: logger, Bus: bus.New(db, logger), Events: events.NewDispatcher(db, logger),
		Clock: clk, Limiter: ratelimit.New(db, clk), Box: box, Mail: sender, Blobs: blobs, Version: Version, AccessChanged: a.Wrote}
	a.kernel, a.Events = k, k.Events
	a.HTTP = httpapi.New(logger, nil, nil, httpapi.Options{MaxBodyBytes: cfg.MaxBodyBytes,
		Enable2FA: cfg.Enable2FA, TrustedProxies: cfg.TrustedProxies, Version: Version, AfterWrite: a.Wrote,
		HSTSMaxAge: cfg.HSTSMaxAge, Admission: httpapi.Admission{InFlight: cfg.APIMaxInFlight, Queue: cfg.APIQueueLength, Wait: cfg.APIQueueWait}})
	k.HTTP = a.HTTP
	a.HTTP.Handle("GET /health", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": Version})
	}))
	a.HTTP.Handle("GET /ready", http.HandlerFunc(a.ready))
	k.Bus.Subscribe(chanWrote, func(from string) {
		// This node forgot its caches when it published; forgetting again when its own notice
		// comes back would drop pages cached since.
		if from != a.instance {
			k.ForgetCaches()
		}
	})
	built := false
	defer func() {
		// The modules and the bus hold connections; New can only close the database after
		// they let go.
		if !built {
			k.Close()
			k.Bus.Close()
		}
	}()
	if err := k.Build(Modules); err != nil {
		return nil, err
	}
	k.Bus.Start(ctx)
	if err := k.Ready(ctx); err != nil {
		return nil, fmt.Errorf("start the modules: %w", err)
	}
	built = true
	return a, nil
}

// chanWrote is the bus channel on which a node tells the others that a write that changes
// who may do what, or an organization, committed.
const chanWrote = "gale_api_write"

// Wrote is called after every operation marked ChangesAccess succeeded (and by the gale
// command after its changes): this node forgets the principals and organization pages it
// cached, at once, and the other nodes as soon as the bus carries the news (told even when
// this node caches nothing, as they may).
func (a *App) Wrote(ctx context.Context) {
	a.kernel.ForgetCaches()
	a.kernel.Bus.Publish(context.WithoutCancel(ctx), chanWrote, a.instance)
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

// Handler is the HTTP handler of the whole API.
func (a *App) Handler() http.Handler { return a.HTTP.Handler() }

// StartJobs starts the background job queue with the modules' periodic jobs, the event loop
// and the modules' workers.
func (a *App) StartJobs(ctx context.Context, opts jobs.Options) error {
	k := a.kernel
	opts.Periodic = append(opts.Periodic, jobs.Periodic{Name: "cleanup", Every: 10 * time.Minute, Run: a.Cleanup})
	opts.Periodic = append(opts.Periodic, k.Periodic()...)
	r, err := jobs.Start(ctx, a.DB, a.Logger, opts)
	if err != nil {
		return fmt.Errorf("start the jobs: %w", err)
	}
	a.jobs = r
	eventsCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.Events.Run(eventsCtx)
	}()
	for _, w := range k.Workers() {
		w.Start(ctx)
	}
	a.stopWork = func() {
		cancel()
		<-done
		for _, w := range k.Workers() {
			w.Stop()
		}
	}
	return nil
}

// Cleanup runs every module's purge and deletes expired rate-limit windows, logging how many
// rows each deleted, then refreshes the database's planner statistics.
func (a *App) Cleanup(ctx context.Context) error {
	windows, err := a.kernel.Limiter.Purge(ctx)
	if err != nil {
		return fmt.Errorf("purge rate-limit windows: %w", err)
	}
	events, err := a.kernel.Events.Purge(ctx)
	if err != nil {
		return fmt.Errorf("purge events: %w", err)
	}
	attrs := []any{"rateLimitWindows", windows, "events", events}
	for _, p := range a.kernel.Purges() {
		n, err := p.Run(ctx)
		if err != nil {
			return fmt.Errorf("purge %s: %w", p.Name, err)
		}
		attrs = append(attrs, p.Name, n)
	}
	a.Logger.InfoContext(ctx, "cleanup done", slog.Group("purged", attrs...))
	return a.DB.Optimize(ctx)
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

// Close stops the workers and jobs (if started), closes the modules (agent connections) and
// the bus, then the database.
func (a *App) Close() {
	if a.stopWork != nil {
		a.stopWork()
		a.stopWork = nil
	}
	if a.jobs != nil {
		_ = a.jobs.Stop(context.Background())
		a.jobs = nil
	}
	a.kernel.Close()
	a.kernel.Bus.Close()
	a.DB.Close()
}
