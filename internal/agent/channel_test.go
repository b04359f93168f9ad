package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/coder/websocket"

	"gale/internal/wire/agentproto"
)

// Heartbeats say what the agent knows of its live channel: connecting while it opens it, down
// once the server refused it there, up when they travel on it. The server waits a moment for
// a channel that is connecting, not for one that is down.
func TestHeartbeatsSayWhatTheLiveChannelIs(t *testing.T) {
	beats := make(chan agentproto.Heartbeat, 100)
	// Each attempt at the live channel waits for the test to accept (true) or refuse it.
	dials := make(chan chan bool)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/agents/d1/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		var hb agentproto.Heartbeat
		if json.NewDecoder(r.Body).Decode(&hb) == nil {
			beats <- hb
		}
		_, _ = w.Write([]byte(`{"commands":[]}`))
	})
	mux.HandleFunc("GET /api/v1"+agentproto.PathWebSocket, func(w http.ResponseWriter, r *http.Request) {
		accept := make(chan bool)
		select {
		case dials <- accept:
		case <-r.Context().Done():
			return
		}
		var ok bool
		select {
		case ok = <-accept:
		case <-r.Context().Done():
			return
		}
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"UNAUTHORIZED","message":"unknown token"}}`))
			return
		}
		serveChannel(w, r, beats)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	path := filepath.Join(t.TempDir(), "agent.json")
	if err := SaveConfig(path, Config{Server: srv.URL, DeviceID: "d1", AuthToken: "gale_at_x",
		Settings: agentproto.Config{HeartbeatIntervalSeconds: 1}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() {
		_ = Run(ctx, RunOptions{ConfigPath: path, Version: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		close(ended)
	}()
	defer func() {
		cancel()
		<-ended
	}()

	first := <-dials
	if hb := <-beats; hb.LiveChannel != agentproto.LiveChannelConnecting {
		t.Fatalf("the first heartbeat, while the channel is being opened, says %q", hb.LiveChannel)
	}
	first <- false
	awaitBeat(t, beats, agentproto.LiveChannelDown)
	// The heartbeat the server took over HTTP has the agent try the channel again at once.
	<-dials <- true
	awaitBeat(t, beats, agentproto.LiveChannelUp)
}

// awaitBeat reads heartbeats until one says want, failing after a few that do not.
func awaitBeat(t *testing.T, beats <-chan agentproto.Heartbeat, want string) {
	t.Helper()
	var got []string
	for range 5 {
		hb := <-beats
		if hb.LiveChannel == want {
			return
		}
		got = append(got, hb.LiveChannel)
	}
	t.Fatalf("heartbeats said %q, never %q", got, want)
}

// serveChannel is the server's end of a live channel: it welcomes the agent and takes its
// heartbeats.
func serveChannel(w http.ResponseWriter, r *http.Request, beats chan<- agentproto.Heartbeat) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx := r.Context()
	send := func(typ, id string, payload any) error {
		raw, _ := json.Marshal(payload)
		msg, _ := json.Marshal(agentproto.Message{ID: id, Type: typ, Payload: raw})
		return ws.Write(ctx, websocket.MessageText, msg)
	}
	if send(agentproto.TypeWelcome, "", agentproto.Welcome{DeviceID: "d1", Config: agentproto.Config{HeartbeatIntervalSeconds: 1}}) != nil {
		return
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		var m agentproto.Message
		var hb agentproto.Heartbeat
		if json.Unmarshal(data, &m) != nil || m.Type != agentproto.TypeHeartbeat || json.Unmarshal(m.Payload, &hb) != nil {
			continue
		}
		beats <- hb
		if send(agentproto.TypeHeartbeatAck, m.ID, struct{}{}) != nil {
			return
		}
	}
}
