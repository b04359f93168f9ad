package devices

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"gale/internal/platform/store"
	"gale/internal/platform/store/storetest"
	"gale/internal/wire/agentproto"
)

// A group takes heartbeats in arrival order, at most maxBeatsPerCommit, and one per device and
// role: a device's next heartbeat waits until its group is recorded, so that its updates keep
// their order whatever the number of groups recorded at once.
func TestBeatsGroupOnePerDevice(t *testing.T) {
	var q beats
	b := func(device, role string) *beat { return &beat{agent: Agent{DeviceID: device, Role: role}} }
	first, watchdog, second, other := b("d1", agentproto.RoleAgent), b("d1", agentproto.RoleWatchdog), b("d1", agentproto.RoleAgent), b("d2", agentproto.RoleAgent)
	q.queue = []*beat{first, watchdog, second, other}
	q.running = 2
	g := q.take()
	if len(g) != 3 || g[0] != first || g[1] != watchdog || g[2] != other {
		t.Fatalf("first group %v; want d1's first beat, its watchdog's and d2's", g)
	}
	if g := q.take(); g != nil || q.running != 1 {
		t.Fatalf("while d1's first beat is recorded, another group took %v (running %d)", g, q.running)
	}
	q.done(g)
	if g := q.take(); len(g) != 1 || g[0] != second {
		t.Fatalf("second group %v; want d1's second beat", g)
	}
	for i := range maxBeatsPerCommit + 1 {
		q.queue = append(q.queue, b(fmt.Sprint(i), agentproto.RoleAgent))
	}
	if g := q.take(); len(g) != maxBeatsPerCommit || len(q.queue) != 1 {
		t.Fatalf("group of %d, %d left; want %d and 1", len(g), len(q.queue), maxBeatsPerCommit)
	}
}

// Heartbeats recorded together each get their own outcome: a heartbeat the database refuses
// (its device was deleted meanwhile, so its metrics have no device) fails alone, and the others
// of its group are recorded.
func TestHeartbeatsOfAGroupFailAlone(t *testing.T) {
	db := storetest.Open(t)
	s := New(Deps{DB: db, Logger: slog.New(slog.DiscardHandler)}, Options{})
	now := store.Now()
	partner, org, site := store.NewID(), store.NewID(), store.NewID()
	storetest.Exec(t, db.SQL, `INSERT INTO partners (id, name, slug, created_at, updated_at) VALUES ($1, 'P', 'p', $2, $2)`, partner, now)
	storetest.Exec(t, db.SQL, `INSERT INTO organizations (id, partner_id, name, slug, created_at, updated_at)
		VALUES ($1, $2, 'O', 'o', $3, $3)`, org, partner, now)
	storetest.Exec(t, db.SQL, `INSERT INTO sites (id, partner_id, org_id, name, created_at, updated_at)
		VALUES ($1, $2, $3, 'Main', $4, $4)`, site, partner, org, now)
	var group []*beat
	for i := range 4 {
		id := store.NewID()
		if i != 2 {
			storetest.Exec(t, db.SQL, `INSERT INTO devices (id, partner_id, org_id, site_id, hostname, status, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, 'offline', $6, $6)`, id, partner, org, site, fmt.Sprint("host-", i), now)
		}
		group = append(group, &beat{agent: Agent{DeviceID: id, Role: agentproto.RoleAgent}, done: make(chan struct{}),
			hb: agentproto.Heartbeat{AgentVersion: "2.0.0", Metrics: &agentproto.Metrics{CPUPercent: float64(i)}}})
	}
	s.beats.queue, s.beats.running = slices.Clone(group), 1
	s.commitBeats()
	for i, b := range group {
		<-b.done
		if i == 2 {
			if b.err == nil {
				t.Fatal("the heartbeat of a device that does not exist was recorded")
			}
			continue
		}
		if b.err != nil {
			t.Fatalf("heartbeat %d failed with its group: %v", i, b.err)
		}
		var status, version string
		var samples int
		if err := db.QueryRowContext(t.Context(), `SELECT status, agent_version, (SELECT COUNT(*) FROM device_metrics m WHERE m.device_id = d.id)
			FROM devices d WHERE id = $1`, b.agent.DeviceID).Scan(&status, &version, &samples); err != nil {
			t.Fatal(err)
		}
		if status != StatusOnline || version != "2.0.0" || samples != 1 {
			t.Fatalf("device %d: %s, version %s, %d samples; want online, 2.0.0, 1", i, status, version, samples)
		}
	}
}
