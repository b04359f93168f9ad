// Package module is the contract between the server and its domains. Each domain package
// exports one Module; app keeps the list and builds them in order on a Kernel, which carries
// what every domain may use (configuration, storage, the HTTP server, the bus, events) and
// collects what each one contributes: services for later modules, declarations for earlier
// ones, periodic jobs, purges, background workers, caches to forget, and work to do once all
// are built or at shutdown. Adding a domain is one package and one entry in app's list.
//
// Modules depend on each other in one direction, the order of the list. A module takes what
// it needs from earlier modules with Get, by their service's concrete type, and passes it to
// its own constructor. What it gives an earlier module (a command kind to devices, a deployer
// to rollouts, an export to the partner API) it declares with Declare, as a value of a type
// the earlier module defines; that module reads every such declaration with Declared once all
// modules are built. Nothing is set on another module's service after it was constructed.
package module

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"gale/internal/platform/blob"
	"gale/internal/platform/bus"
	"gale/internal/platform/clock"
	"gale/internal/platform/config"
	"gale/internal/platform/events"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/jobs"
	"gale/internal/platform/mail"
	"gale/internal/platform/ratelimit"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
)

// Module is one domain's part of the server.
type Module struct {
	// Name identifies the module in errors and logs.
	Name string
	// Build constructs the domain's services on k, registers its routes on k.HTTP and declares
	// what it contributes with k's methods. Modules build in list order: a module finds the
	// services of earlier ones with Get.
	Build func(k *Kernel) error
}

// Kernel is what a module builds with. Its exported fields are shared by every module; its
// methods collect each module's contributions, which app then runs.
type Kernel struct {
	Config  config.Config
	DB      *store.DB
	Logger  *slog.Logger
	HTTP    *httpapi.Server
	Bus     bus.Bus
	Events  *events.Dispatcher
	Limiter *ratelimit.Limiter
	Box     *secrets.Box
	// Mail sends e-mail; nil when SMTP is not configured.
	Mail  mail.Sender
	Blobs blob.Store
	// Clock is the time everything scheduled or expiring runs on.
	Clock   clock.Clock
	Version string
	// AccessChanged tells every node that who may do what changed, as the success of an
	// operation marked ChangesAccess does: for a change a service commits on a path that
	// answers with an error (a reused refresh token ends its session and answers 401).
	AccessChanged func(ctx context.Context)

	services     []any
	declarations []any
	built        bool
	periodic     []jobs.Periodic
	purges       []Purge
	workers      []Worker
	forget       []func()
	ready        []func(ctx context.Context) error
	closers      []func()
}

// Purge deletes what has outlived its use (expired tokens, old records) and says how much it
// deleted; the periodic cleanup job runs every purge and logs the counts.
type Purge struct {
	Name string
	Run  func(ctx context.Context) (int64, error)
}

// Worker is background work that runs while the server serves: Start begins it, Stop ends
// it and waits.
type Worker struct {
	Name  string
	Start func(ctx context.Context)
	Stop  func()
}

// Build builds mods in order on k. An error names the module it came from.
func (k *Kernel) Build(mods []Module) (err error) {
	for _, m := range mods {
		if err := k.buildOne(m); err != nil {
			return fmt.Errorf("module %s: %w", m.Name, err)
		}
	}
	k.built = true
	return nil
}

// buildOne turns a panic of Get or Declared (a module listed before what it needs, or
// reading declarations before every module made them) into an error.
func (k *Kernel) buildOne(m Module) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if e, ok := v.(missingService); ok {
				err = e
				return
			}
			panic(v)
		}
	}()
	return m.Build(k)
}

// Provide makes v, a domain's service, available to the modules built after this one.
func (k *Kernel) Provide(v any) { k.services = append(k.services, v) }

type missingService struct{ error }

// Get returns the service of concrete type T (a pointer to a domain's service) that an earlier
// module provided. None, or more than one, is a wiring mistake: Build fails naming the module.
// T may not be an interface: a reader of the module sees which module it depends on.
func Get[T any](k *Kernel) T {
	typ := reflect.TypeFor[T]()
	if typ.Kind() == reflect.Interface {
		panic(missingService{fmt.Errorf("Get[%s]: ask for the providing service's concrete type, not an interface", typ)})
	}
	var found []T
	for _, v := range k.services {
		if t, ok := v.(T); ok {
			found = append(found, t)
		}
	}
	if len(found) != 1 {
		panic(missingService{fmt.Errorf("needs one %s from an earlier module, found %d: check the order of the module list", typ, len(found))})
	}
	return found[0]
}

// Declare gives each value to the module that reads declarations of its type with Declared,
// whether that module is built before or after this one: a command kind or a result handler
// for devices, hooks for devices or custom fields, a deployer for rollouts, an export for the
// partner API. The type of a value (defined by the receiving package) names its receiver.
func (k *Kernel) Declare(vs ...any) { k.declarations = append(k.declarations, vs...) }

// Declared returns every declared value of type T (or, for an interface T, every one that
// implements it), in module order. Only the receiving module calls it, from OnReady or later:
// before every module is built the list would miss those still to come, so Declared then
// fails the build.
func Declared[T any](k *Kernel) []T {
	if !k.built {
		panic(missingService{fmt.Errorf("Declared[%s] read before every module was built: read declarations in OnReady", reflect.TypeFor[T]())})
	}
	var out []T
	for _, v := range k.declarations {
		if t, ok := v.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// Every runs fn every interval on one node of the installation (a periodic job of the queue).
func (k *Kernel) Every(name string, every time.Duration, fn func(ctx context.Context) error) {
	k.periodic = append(k.periodic, jobs.Periodic{Name: name, Every: every, Run: fn})
}

// Periodic are the jobs declared with Every.
func (k *Kernel) Periodic() []jobs.Periodic { return k.periodic }

// Purge adds a purge to the periodic cleanup.
func (k *Kernel) Purge(name string, fn func(ctx context.Context) (int64, error)) {
	k.purges = append(k.purges, Purge{Name: name, Run: fn})
}

// Purges are the purges declared with Purge.
func (k *Kernel) Purges() []Purge { return k.purges }

// Worker adds background work started with the jobs and stopped before the database closes.
func (k *Kernel) Worker(name string, start func(ctx context.Context), stop func()) {
	k.workers = append(k.workers, Worker{Name: name, Start: start, Stop: stop})
}

// Workers are the workers declared with Worker.
func (k *Kernel) Workers() []Worker { return k.workers }

// Consume registers a consumer of domain events.
func (k *Kernel) Consume(c events.Consumer) { k.Events.Register(c) }

// Cache registers forget, which drops a cache that depends on who may do what or on the
// organizations: run on every node after an operation marked ChangesAccess succeeds.
func (k *Kernel) Cache(forget func()) { k.forget = append(k.forget, forget) }

// ForgetCaches runs every forget registered with Cache.
func (k *Kernel) ForgetCaches() {
	for _, f := range k.forget {
		f()
	}
}

// OnReady runs fn once every module is built, in module order: for work that needs the
// whole server (seeding, routes built from other modules' declarations).
func (k *Kernel) OnReady(fn func(ctx context.Context) error) { k.ready = append(k.ready, fn) }

// Ready runs the OnReady functions.
func (k *Kernel) Ready(ctx context.Context) error {
	for _, fn := range k.ready {
		if err := fn(ctx); err != nil {
			return err
		}
	}
	return nil
}

// OnClose runs fn at shutdown, after the workers stopped and before the database closes; in
// reverse module order, so a module closes before those it uses.
func (k *Kernel) OnClose(fn func()) { k.closers = append(k.closers, fn) }

// Close runs the OnClose functions.
func (k *Kernel) Close() {
	for i := len(k.closers) - 1; i >= 0; i-- {
		k.closers[i]()
	}
	k.closers = nil
}
