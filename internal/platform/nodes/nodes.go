// Package nodes knows the nodes of one installation: the `gale serve` processes sharing a
// database. Each node registers the address the others reach it at, keeps its row fresh while
// it runs and removes it at shutdown; it records which agents' WebSockets it holds, so that
// another node can find the holder of an agent; and it signs and checks the requests nodes
// make to each other, with a key every node shares.
//
// The bus (NOTIFY) only signals; bytes that must go from one node to another, such as a
// stream to an agent held elsewhere, go over a direct connection to the holder's address.
package nodes

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"gale/internal/platform/store"
)

// Timing of the registry: a node refreshes its row every HeartbeatEvery, and a row not
// refreshed for StaleAfter is taken for a node that died without removing it.
const (
	HeartbeatEvery = 10 * time.Second
	StaleAfter     = 3 * HeartbeatEvery
)

// ErrNoHolder is returned by Holder when no live node holds the agent's connection.
var ErrNoHolder = errors.New("no node holds the agent's connection")

// Node is one node of the installation.
type Node struct {
	ID string
	// Address is the base URL other nodes reach it at, like http://10.0.0.5:8080.
	Address string
}

// Options configure a Registry.
type Options struct {
	// Address is where the other nodes reach this one (NODE_ADDRESS).
	Address string
	// Key authenticates requests between nodes; every node must have the same (see Key).
	Key    []byte
	Logger *slog.Logger
}

// Registry is this node's entry in the nodes table and its view of the others. Its methods
// are safe for concurrent use.
type Registry struct {
	db     *store.DB
	self   Node
	key    []byte
	logger *slog.Logger

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{} // closed when the heartbeats end; nil until Start
}

// New returns the registry of a node starting now, with a new node ID. It writes nothing
// until Start.
func New(db *store.DB, o Options) *Registry {
	return &Registry{db: db, self: Node{ID: store.NewID(), Address: o.Address}, key: o.Key, logger: o.Logger,
		stop: make(chan struct{})}
}

// Self is this node.
func (r *Registry) Self() Node { return r.self }

// DefaultAddress is the node address used when NODE_ADDRESS is unset: the listen address,
// on the loopback interface when it names no host. That suits one node, or several on one
// host; nodes on separate hosts must each be given their address.
func DefaultAddress(listenAddr string) string {
	host, port, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return "http://" + listenAddr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// Start registers the node and keeps its row fresh until Stop. It also removes the rows of
// nodes gone stale, and with them the agents they held.
func (r *Registry) Start(ctx context.Context) error {
	if err := r.upsert(ctx); err != nil {
		return fmt.Errorf("register node %s: %w", r.self.ID, err)
	}
	r.logger.Debug("node registered", "nodeId", r.self.ID, "address", r.self.Address)
	r.done = make(chan struct{})
	go r.heartbeats()
	return nil
}

func (r *Registry) upsert(ctx context.Context) error {
	now := store.Now()
	_, err := r.db.ExecContext(ctx, `INSERT INTO nodes (id, address, started_at, seen_at) VALUES ($1, $2, $3, $3)
		ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at`, r.self.ID, r.self.Address, now)
	return err
}

func (r *Registry) heartbeats() {
	defer close(r.done)
	t := time.NewTicker(HeartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), HeartbeatEvery)
		// Upserted, not updated: a node whose row was taken for stale (a long pause) comes back.
		err := r.upsert(ctx)
		if err == nil {
			_, err = r.db.ExecContext(ctx, `DELETE FROM nodes WHERE seen_at < $1`, store.Now().Add(-StaleAfter))
		}
		cancel()
		if err != nil {
			r.logger.Warn("node heartbeat failed; other nodes may stop relaying to this one", "error", err)
		}
	}
}

// Stop ends the heartbeats and removes the node, and with it the agents it held. It does
// nothing when Start was not called.
func (r *Registry) Stop() {
	if r.done == nil {
		return
	}
	r.stopOnce.Do(func() {
		close(r.stop)
		<-r.done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := r.db.ExecContext(ctx, `DELETE FROM nodes WHERE id = $1`, r.self.ID); err != nil {
			r.logger.Warn("node not removed; its row goes stale", "error", err)
		}
	})
}

// Held records that this node holds the device's agent connection connID. On SQLite, which
// serves one node, there is no other node to tell: Held and Released record nothing, sparing
// the one database writer a write per connection and per disconnection.
func (r *Registry) Held(ctx context.Context, deviceID, connID string) error {
	if r.db.SingleNode() {
		return nil
	}
	_, err := r.db.ExecContext(ctx, `INSERT INTO agent_connections (device_id, node_id, connection_id, connected_at)
		VALUES ($1, $2, $3, $4) ON CONFLICT (device_id) DO UPDATE SET node_id = excluded.node_id,
		connection_id = excluded.connection_id, connected_at = excluded.connected_at`, deviceID, r.self.ID, connID, store.Now())
	if err != nil {
		return fmt.Errorf("record connection of %s: %w", deviceID, err)
	}
	return nil
}

// Released forgets the device's connection connID; a newer connection (here or on another
// node) is left alone.
func (r *Registry) Released(ctx context.Context, deviceID, connID string) error {
	if r.db.SingleNode() {
		return nil
	}
	_, err := r.db.ExecContext(ctx, `DELETE FROM agent_connections WHERE device_id = $1 AND connection_id = $2`, deviceID, connID)
	if err != nil {
		return fmt.Errorf("forget connection of %s: %w", deviceID, err)
	}
	return nil
}

// Holder returns the live node that holds the device's agent connection, or ErrNoHolder.
func (r *Registry) Holder(ctx context.Context, deviceID string) (Node, error) {
	var n Node
	err := r.db.QueryRowContext(ctx, `SELECT n.id, n.address FROM agent_connections a JOIN nodes n ON n.id = a.node_id
		WHERE a.device_id = $1 AND n.seen_at > $2`, deviceID, store.Now().Add(-StaleAfter)).Scan(&n.ID, &n.Address)
	if errors.Is(err, sql.ErrNoRows) {
		return n, ErrNoHolder
	}
	if err != nil {
		return n, fmt.Errorf("find the node holding %s: %w", deviceID, err)
	}
	return n, nil
}

// live reports whether a node of that ID is registered and fresh.
func (r *Registry) live(ctx context.Context, id string) (bool, error) {
	var n int
	err := r.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM nodes WHERE id = $1 AND seen_at > $2`, id, store.Now().Add(-StaleAfter)).Scan(&n)
	return n > 0, err
}
