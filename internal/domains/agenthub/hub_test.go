package agenthub

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/platform/bus"
	"gale/internal/platform/store"
	"gale/internal/platform/store/storetest"
	"gale/internal/wire/agentproto"
)

// A command handed to a connection that closes before writing it goes back to the device's
// queue, and a closed connection takes no more commands.
func TestCommandsAConnectionDidNotSendAreQueuedAgain(t *testing.T) {
	db := storetest.Open(t)
	now := store.Now()
	partner, org, site, device, cmd := store.NewID(), store.NewID(), store.NewID(), store.NewID(), store.NewID()
	storetest.Exec(t, db.SQL, `INSERT INTO partners (id, name, slug, created_at, updated_at) VALUES ($1, 'P', 'p', $2, $2)`, partner, now)
	storetest.Exec(t, db.SQL, `INSERT INTO organizations (id, partner_id, name, slug, created_at, updated_at)
		VALUES ($1, $2, 'O', 'o', $3, $3)`, org, partner, now)
	storetest.Exec(t, db.SQL, `INSERT INTO sites (id, partner_id, org_id, name, created_at, updated_at)
		VALUES ($1, $2, $3, 'Main', $4, $4)`, site, partner, org, now)
	storetest.Exec(t, db.SQL, `INSERT INTO devices (id, partner_id, org_id, site_id, hostname, created_at, updated_at)
		VALUES ($1, $2, $3, $4, 'host', $5, $5)`, device, partner, org, site, now)
	storetest.Exec(t, db.SQL, `INSERT INTO device_commands (id, partner_id, org_id, device_id, type, payload, status,
		timeout_seconds, created_at, sent_at, expires_at) VALUES ($1, $2, $3, $4, 'reboot', '{}', 'sent', 120, $5, $5, $6)`,
		cmd, partner, org, device, now, now.Add(150*time.Second))

	logger := slog.New(slog.DiscardHandler)
	svc := devices.New(devices.Deps{DB: db, Logger: logger}, devices.Options{})
	h := New(Deps{Devices: svc, Bus: bus.NewLocal(), Logger: logger}, Options{Workers: 1})
	t.Cleanup(h.Close)
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{hub: h, agent: devices.Agent{DeviceID: device}, ctx: ctx, cancel: cancel, wakeup: make(chan struct{}, 1)}
	h.register(c)
	if !h.Deliver(device, agentproto.Command{ID: cmd, Type: "reboot", TimeoutSeconds: 120}) {
		t.Fatal("a registered connection refused a command")
	}
	cancel()
	h.unregister(c)

	if h.Deliver(device, agentproto.Command{ID: store.NewID()}) || c.push(agentproto.Command{ID: store.NewID()}) {
		t.Fatal("a closed connection took a command")
	}
	var status string
	var sentAt store.NullTime
	if err := db.QueryRowContext(t.Context(), `SELECT status, COALESCE(sent_at, NULL) FROM device_commands WHERE id = $1`, cmd).
		Scan(&status, &sentAt); err != nil {
		t.Fatal(err)
	}
	if status != devices.CommandQueued || sentAt.Valid {
		t.Fatalf("command left in a closed connection: status %s, sent %v; want queued again", status, sentAt.Ptr())
	}
	taken, err := svc.TakeQueued(t.Context(), device)
	if err != nil || len(taken) != 1 || taken[0].ID != cmd {
		t.Fatalf("took %+v, %v; want the command queued again", taken, err)
	}
}

// A domain's message type reaches its handler with the sending agent; unknown types are
// errors, and the hub's own types cannot be taken over.
func TestOnMessage(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	h := New(Deps{Devices: devices.New(devices.Deps{DB: storetest.Open(t), Logger: logger}, devices.Options{}), Bus: bus.NewLocal(),
		Logger: logger}, Options{Workers: 1})
	t.Cleanup(h.Close)
	var got []string
	h.OnMessage("check_result", func(_ context.Context, a devices.Agent, payload json.RawMessage) error {
		got = append(got, a.DeviceID+" "+string(payload))
		return nil
	})
	c := &conn{hub: h, agent: devices.Agent{DeviceID: "d1"}, ctx: t.Context(), wakeup: make(chan struct{}, 1)}
	if err := c.handle(agentproto.Message{Type: "check_result", Payload: json.RawMessage(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != `d1 {"ok":true}` {
		t.Fatalf("handler saw %v", got)
	}
	if err := c.handle(agentproto.Message{Type: "nonsense"}); err == nil {
		t.Fatal("an unknown message type was accepted")
	}
	for _, typ := range []string{"check_result", agentproto.TypeHeartbeat} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("OnMessage(%s) a second time did not panic", typ)
				}
			}()
			h.OnMessage(typ, nil)
		}()
	}
}
