// Package bus carries short notifications between the nodes of one installation: a device
// has work, a device must stop, an agent answered a call, a write through the API committed.
// On SQLite (one node) it stays in the process; on PostgreSQL it is LISTEN/NOTIFY, so every
// node hears what another published. A notification can be lost (a listener reconnecting):
// what rides on it must also hold without it, later (agents pull their work on every
// heartbeat, cached principals and pages expire).
package bus

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"gale/internal/platform/store"
)

// Bus publishes and delivers notifications on named channels.
type Bus interface {
	Publish(ctx context.Context, channel, payload string)
	// Subscribe delivers every payload published on channel to fn until the bus closes. Every
	// subscription is made before Start.
	Subscribe(channel string, fn func(payload string))
	// Start begins delivering: on PostgreSQL it LISTENs on every subscribed channel.
	Start(ctx context.Context)
	Close()
}

// New returns the bus for db's backend.
func New(db *store.DB, logger *slog.Logger) Bus {
	if db.Dialect == store.Postgres {
		return &pgBus{db: db, logger: logger}
	}
	return NewLocal()
}

type subscribers struct {
	mu   sync.RWMutex
	subs map[string][]func(string)
}

func (s *subscribers) add(channel string, fn func(string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs == nil {
		s.subs = map[string][]func(string){}
	}
	s.subs[channel] = append(s.subs[channel], fn)
}

func (s *subscribers) deliver(channel, payload string) {
	s.mu.RLock()
	fns := s.subs[channel]
	s.mu.RUnlock()
	for _, fn := range fns {
		fn(payload)
	}
}

type localBus struct{ subscribers }

// NewLocal returns a bus that stays in the process, as New does on SQLite.
func NewLocal() Bus { return &localBus{} }

func (b *localBus) Publish(_ context.Context, channel, payload string) { b.deliver(channel, payload) }
func (b *localBus) Subscribe(channel string, fn func(string))          { b.add(channel, fn) }
func (b *localBus) Start(context.Context)                              {}
func (b *localBus) Close()                                             {}

// pgBus listens on one dedicated connection and notifies through the pool.
type pgBus struct {
	subscribers
	db       *store.DB
	logger   *slog.Logger
	channels []string
	cancel   context.CancelFunc
	done     chan struct{}
}

// Start LISTENs on the subscribed channels, waiting (up to 5 seconds) until the listener is
// ready, so that nothing published after Start returns is missed.
func (b *pgBus) Start(ctx context.Context) {
	if b.cancel != nil {
		return
	}
	ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	b.done = make(chan struct{})
	b.mu.RLock()
	for ch := range b.subs {
		b.channels = append(b.channels, ch)
	}
	b.mu.RUnlock()
	ready := make(chan struct{})
	go b.listen(ctx, ready)
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		b.logger.Warn("bus: LISTEN not ready after 5s; agents get their work on their next heartbeat, cached principals and pages expire")
	}
}

func (b *pgBus) Publish(ctx context.Context, channel, payload string) {
	if _, err := b.db.SQL.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		b.logger.WarnContext(ctx, "bus: notify failed", "channel", channel, "error", err)
	}
}

func (b *pgBus) Subscribe(channel string, fn func(string)) { b.add(channel, fn) }

func (b *pgBus) Close() {
	if b.cancel == nil {
		return
	}
	b.cancel()
	<-b.done
}

// listen holds a connection with LISTEN on every channel, reconnecting after failures.
func (b *pgBus) listen(ctx context.Context, ready chan struct{}) {
	defer close(b.done)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := b.listenOnce(ctx, ready)
		if ctx.Err() != nil {
			return
		}
		b.logger.Warn("bus: listener lost its connection; reconnecting", "error", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (b *pgBus) listenOnce(ctx context.Context, ready chan struct{}) error {
	conn, err := b.db.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	for _, ch := range b.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			return err
		}
	}
	select {
	case <-ready:
	default:
		close(ready)
	}
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			// The connection's state is unknown after an interrupted wait: drop it.
			_ = conn.Conn().Close(context.Background())
			return err
		}
		b.deliver(n.Channel, n.Payload)
	}
}
