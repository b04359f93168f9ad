package nodes_test

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"gale/internal/platform/nodes"
	"gale/internal/platform/store"
	"gale/internal/platform/store/storetest"
)

func TestVerifyAcceptsOnlyFreshRequestsSignedByALiveNode(t *testing.T) {
	db := storetest.Open(t)
	logger := slog.New(slog.DiscardHandler)
	key := nodes.Key("", []byte("jwt-secret-jwt-secret-jwt-secret-0123"))
	holder := nodes.New(db, nodes.Options{Address: "http://127.0.0.1:1", Key: key, Logger: logger})
	asker := nodes.New(db, nodes.Options{Address: "http://127.0.0.1:2", Key: key, Logger: logger})
	for _, r := range []*nodes.Registry{holder, asker} {
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Stop)
	}
	fields := []string{"/internal/v1/streams", "device-1", "echo", ""}
	signed := func(r *nodes.Registry) http.Header {
		h := http.Header{}
		r.Sign(h, fields...)
		return h
	}
	if node, err := holder.Verify(t.Context(), signed(asker), fields...); err != nil || node != asker.Self().ID {
		t.Fatalf("a request signed by a live node: %q, %v", node, err)
	}

	stale := signed(asker)
	stale.Set(nodes.HeaderTime, strconv.FormatInt(time.Now().Add(-2*nodes.MaxClockSkew).Unix(), 10))
	stranger := nodes.New(db, nodes.Options{Address: "http://127.0.0.1:3", Key: key, Logger: logger}) // never started
	otherKey := nodes.New(db, nodes.Options{Key: nodes.Key("another-secret-another-secret-0123", nil), Logger: logger})
	for name, h := range map[string]http.Header{
		"no headers":      {},
		"stale timestamp": stale,
		"bad signature":   signed(otherKey),
		"unknown node":    signed(stranger),
	} {
		if _, err := holder.Verify(t.Context(), h, fields...); !errors.Is(err, nodes.ErrUnauthenticated) {
			t.Errorf("%s: Verify = %v, want ErrUnauthenticated", name, err)
		}
	}
	if _, err := holder.Verify(t.Context(), signed(asker), "/internal/v1/streams", "device-2", "echo", ""); !errors.Is(err, nodes.ErrUnauthenticated) {
		t.Errorf("a signature for another device was accepted: %v", err)
	}
}

func TestHolderFindsTheLiveNodeOfTheNewestConnection(t *testing.T) {
	if storetest.Backend() != "postgres" {
		t.Skip("agent connections are recorded on PostgreSQL only: SQLite serves one node")
	}
	db := storetest.Open(t)
	logger := slog.New(slog.DiscardHandler)
	a := nodes.New(db, nodes.Options{Address: "http://a", Logger: logger})
	b := nodes.New(db, nodes.Options{Address: "http://b", Logger: logger})
	for _, r := range []*nodes.Registry{a, b} {
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(a.Stop)
	device := insertDevice(t, db)
	if _, err := a.Holder(t.Context(), device); !errors.Is(err, nodes.ErrNoHolder) {
		t.Fatalf("holder of an unconnected device: %v", err)
	}
	connA, connB := store.NewID(), store.NewID()
	if err := a.Held(t.Context(), device, connA); err != nil {
		t.Fatal(err)
	}
	// The agent reconnects to b before a notices that its old connection closed.
	if err := b.Held(t.Context(), device, connB); err != nil {
		t.Fatal(err)
	}
	if err := a.Released(t.Context(), device, connA); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Holder(t.Context(), device); err != nil || n != b.Self() {
		t.Fatalf("holder = %+v, %v; want node b", n, err)
	}
	b.Stop() // a node that stops takes its agents with it
	if _, err := a.Holder(t.Context(), device); !errors.Is(err, nodes.ErrNoHolder) {
		t.Fatalf("holder after b stopped: %v", err)
	}
}

// insertDevice adds a device, with the partner, organization and site it needs.
func insertDevice(t *testing.T, db *store.DB) string {
	now := store.Now()
	partner, org, site, device := store.NewID(), store.NewID(), store.NewID(), store.NewID()
	storetest.Exec(t, db.SQL, `INSERT INTO partners (id, name, slug, created_at, updated_at) VALUES ($1, 'P', 'p', $2, $2)`, partner, now)
	storetest.Exec(t, db.SQL, `INSERT INTO organizations (id, partner_id, name, slug, created_at, updated_at)
		VALUES ($1, $2, 'O', 'o', $3, $3)`, org, partner, now)
	storetest.Exec(t, db.SQL, `INSERT INTO sites (id, partner_id, org_id, name, created_at, updated_at)
		VALUES ($1, $2, $3, 'Main', $4, $4)`, site, partner, org, now)
	storetest.Exec(t, db.SQL, `INSERT INTO devices (id, partner_id, org_id, site_id, hostname, created_at, updated_at)
		VALUES ($1, $2, $3, $4, 'host', $5, $5)`, device, partner, org, site, now)
	return device
}
