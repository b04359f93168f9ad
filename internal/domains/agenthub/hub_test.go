package agenthub

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

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
	partner, org, device := seedDevice(t, db)
	cmd := store.NewID()
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

// seedDevice inserts a partner, an organization, a site and a device.
func seedDevice(t *testing.T, db *store.DB) (partner, org, device string) {
	now := store.Now()
	partner, org, site, device := store.NewID(), store.NewID(), store.NewID(), store.NewID()
	storetest.Exec(t, db.SQL, `INSERT INTO partners (id, name, slug, created_at, updated_at) VALUES ($1, 'P', 'p', $2, $2)`, partner, now)
	storetest.Exec(t, db.SQL, `INSERT INTO organizations (id, partner_id, name, slug, created_at, updated_at)
		VALUES ($1, $2, 'O', 'o', $3, $3)`, org, partner, now)
	storetest.Exec(t, db.SQL, `INSERT INTO sites (id, partner_id, org_id, name, created_at, updated_at)
		VALUES ($1, $2, $3, 'Main', $4, $4)`, site, partner, org, now)
	storetest.Exec(t, db.SQL, `INSERT INTO devices (id, partner_id, org_id, site_id, hostname, created_at, updated_at)
		VALUES ($1, $2, $3, $4, 'host', $5, $5)`, device, partner, org, site, now)
	return partner, org, device
}

// An agent's heartbeat is acknowledged while the messages it sent before (a burst of results,
// output) are still being handled: the fleet does not look silent behind its own reports.
func TestHeartbeatDoesNotWaitBehindTheAgentsOwnMessages(t *testing.T) {
	db := storetest.Open(t)
	_, _, device := seedDevice(t, db)
	logger := slog.New(slog.DiscardHandler)
	h := New(Deps{Devices: devices.New(devices.Deps{DB: db, Logger: logger}, devices.Options{}), Bus: bus.NewLocal(),
		Logger: logger}, Options{Workers: 1})
	t.Cleanup(h.Close)
	release, handled := make(chan struct{}), make(chan string, 2)
	h.OnMessage("slow_report", func(_ context.Context, _ devices.Agent, payload json.RawMessage) error {
		<-release
		handled <- string(payload)
		return nil
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
		c := &conn{hub: h, agent: devices.Agent{DeviceID: device, Role: agentproto.RoleAgent}, ws: ws, ctx: ctx, cancel: cancel,
			wakeup: make(chan struct{}, 1)}
		c.readLoop()
	}))
	defer srv.Close()
	ws, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	send := func(m agentproto.Message) {
		raw, _ := json.Marshal(m)
		if err := ws.Write(t.Context(), websocket.MessageText, raw); err != nil {
			t.Fatal(err)
		}
	}
	send(agentproto.Message{ID: "r1", Type: "slow_report", Payload: json.RawMessage(`1`)})
	send(agentproto.Message{ID: "r2", Type: "slow_report", Payload: json.RawMessage(`2`)})
	send(agentproto.Message{ID: "hb", Type: agentproto.TypeHeartbeat, Payload: json.RawMessage(`{"agentVersion":"1.0.0"}`)})
	// The reports' handler is blocked: an acknowledgement that waited behind them never comes.
	readCtx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, raw, err := ws.Read(readCtx)
	if err != nil {
		t.Fatalf("no acknowledgement of the heartbeat while the agent's earlier reports were being handled: %v", err)
	}
	var ack agentproto.Message
	if err := json.Unmarshal(raw, &ack); err != nil || ack.Type != agentproto.TypeHeartbeatAck || ack.ID != "hb" {
		t.Fatalf("first answer %s (%v); want the heartbeat's acknowledgement", raw, err)
	}
	select {
	case p := <-handled:
		t.Fatalf("report %s was handled before the heartbeat's acknowledgement was checked; the handler should still be blocked", p)
	default:
	}
	close(release)
	// The reports are handled after all, in the order they were sent.
	if first, second := <-handled, <-handled; first != "1" || second != "2" {
		t.Fatalf("reports handled in order %s, %s; want 1, 2", first, second)
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
