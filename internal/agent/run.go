package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"gale/internal/agent/capability"
	"gale/internal/agent/inventory"
	"gale/internal/agentproto"
	"gale/internal/streams"
)

// RunOptions configure the main agent.
type RunOptions struct {
	ConfigPath string
	Version    string
	Logger     *slog.Logger
	// Capabilities serve the commands, calls and streams the server sends; Run adds the
	// agent's own refresh_inventory command to them. Nil serves that command only.
	Capabilities *capability.Registry
	// InventoryEvery is the period of full inventories (default 24 h).
	InventoryEvery time.Duration
}

// LivenessFDEnv names the environment variable through which the watchdog passes the
// descriptor the main agent writes its liveness beats to.
const LivenessFDEnv = "GALE_AGENT_LIVENESS_FD"

const (
	livenessEvery = 2 * time.Second
	maxBackoff    = 60 * time.Second
)

var errDecommissioned = errors.New("the server decommissioned this device")

// runner is the main agent.
type runner struct {
	opts     RunOptions
	cfg      Config
	log      *slog.Logger
	http     *client
	caps     *capability.Registry
	mu       sync.Mutex
	interval time.Duration
}

// Run runs the main agent until ctx ends: it keeps a live channel to the server (falling back
// to HTTP heartbeats while the channel cannot be opened), reports inventory, and serves the
// commands, calls and streams of its capabilities.
func Run(ctx context.Context, o RunOptions) error {
	cfg, err := LoadConfig(o.ConfigPath)
	if err != nil {
		return err
	}
	if o.InventoryEvery <= 0 {
		o.InventoryEvery = 24 * time.Hour
	}
	r := &runner{opts: o, cfg: cfg, log: o.Logger.With("deviceId", cfg.DeviceID), http: newClient(cfg.Server, cfg.AuthToken)}
	r.interval = time.Duration(max(cfg.Settings.HeartbeatIntervalSeconds, 1)) * time.Second
	if o.Capabilities == nil {
		o.Capabilities = capability.New()
	}
	r.caps = o.Capabilities
	r.caps.Command(agentproto.CommandRefreshInventory, r.refreshInventory)
	go r.liveness(ctx)
	if cfg.Decommissioned {
		r.idle(ctx)
		return nil
	}
	go r.inventoryLoop(ctx)

	backoff := time.Second
	for ctx.Err() == nil {
		started := time.Now()
		err := r.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errDecommissioned) || isUnauthorized(err) {
			r.log.Warn("the server no longer accepts this agent; staying idle (enroll again to manage this machine)", "reason", err)
			r.cfg.Decommissioned = true
			if err := SaveConfig(o.ConfigPath, r.cfg); err != nil {
				r.log.Error("could not record the decommissioning", "error", err)
			}
			r.idle(ctx)
			return nil
		}
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		r.log.Warn("live channel down; reconnecting", "error", err, "in", backoff)
		if err := r.httpHeartbeat(ctx); isUnauthorized(err) {
			continue
		}
		// Full jitter spreads the reconnects of a fleet after a server restart.
		wait := time.Duration(rand.Int64N(int64(backoff))) + backoff/2
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		backoff = min(backoff*2, maxBackoff)
	}
	return nil
}

func isUnauthorized(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusUnauthorized
}

func (r *runner) idle(ctx context.Context) { <-ctx.Done() }

// liveness beats to the watchdog, when there is one, so it can tell a hung agent.
func (r *runner) liveness(ctx context.Context) {
	fd, err := strconv.Atoi(os.Getenv(LivenessFDEnv))
	if err != nil || fd < 3 {
		return
	}
	f := os.NewFile(uintptr(fd), "liveness")
	defer f.Close()
	t := time.NewTicker(livenessEvery)
	defer t.Stop()
	for {
		if _, err := f.Write([]byte{'.'}); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *runner) heartbeat(ctx context.Context) agentproto.Heartbeat {
	m := inventory.Sample(ctx)
	return agentproto.Heartbeat{AgentVersion: r.opts.Version, Metrics: &m, UptimeSeconds: inventory.Uptime(),
		LastUser: inventory.LastUser(ctx), PendingReboot: pendingReboot()}
}

// pendingReboot reports the Debian/Ubuntu flag file that package upgrades leave behind.
func pendingReboot() bool {
	_, err := os.Stat("/var/run/reboot-required")
	return err == nil
}

func wsURL(server string) string {
	u := strings.TrimRight(server, "/") + "/api/v1" + agentproto.PathWebSocket
	if rest, ok := strings.CutPrefix(u, "https://"); ok {
		return "wss://" + rest
	}
	return "ws://" + strings.TrimPrefix(u, "http://")
}

// session holds one live channel until it fails. Text messages carry the JSON protocol,
// binary messages the frames of the streams the server opens.
func (r *runner) session(ctx context.Context) error {
	dialCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	ws, resp, err := websocket.Dial(dialCtx, wsURL(r.cfg.Server), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + r.cfg.AuthToken}, agentproto.HeaderStreams: {agentproto.StreamsVersion}}})
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return &apiError{Status: resp.StatusCode, Message: "agent token refused"}
		}
		return err
	}
	ws.SetReadLimit(64 << 20)
	defer ws.CloseNow()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	s := &session{r: r, ws: ws, ctx: sctx}
	s.streams = streams.NewSession(func(ctx context.Context, frame []byte) error {
		return ws.Write(ctx, websocket.MessageBinary, frame)
	}, streams.Options{Accept: r.caps.AcceptStream, Logger: r.log})
	go s.heartbeats()
	r.log.Info("connected to the server", "server", r.cfg.Server)
	err = s.read()
	s.streams.Close(fmt.Errorf("connection to the server lost: %w", err))
	return err
}

type session struct {
	r       *runner
	ws      *websocket.Conn
	ctx     context.Context
	streams *streams.Session
}

// read handles what the server sends until the socket fails or the server stops the agent.
func (s *session) read() error {
	for {
		typ, data, err := s.ws.Read(s.ctx)
		if err != nil {
			return err
		}
		if typ == websocket.MessageBinary {
			if err := s.streams.Receive(data); err != nil {
				s.r.log.Warn("unreadable stream frame from the server", "error", err)
			}
			continue
		}
		var msg agentproto.Message
		if err := json.Unmarshal(data, &msg); err != nil {
			s.r.log.Warn("unreadable message from the server", "error", err)
			continue
		}
		if err := s.handle(msg); err != nil {
			s.ws.Close(websocket.StatusNormalClosure, "")
			return err
		}
	}
}

func (s *session) send(typ, id string, payload any) error {
	raw, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	b, err := json.Marshal(agentproto.Message{ID: id, Type: typ, Payload: raw})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	return s.ws.Write(ctx, websocket.MessageText, b)
}

func (s *session) heartbeats() {
	for {
		if err := s.send(agentproto.TypeHeartbeat, "", s.r.heartbeat(s.ctx)); err != nil {
			return
		}
		s.r.mu.Lock()
		every := s.r.interval
		s.r.mu.Unlock()
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

func (s *session) handle(msg agentproto.Message) error {
	switch msg.Type {
	case agentproto.TypeWelcome:
		var w agentproto.Welcome
		if err := json.Unmarshal(msg.Payload, &w); err == nil {
			s.r.applyConfig(w.Config)
		}
	case agentproto.TypeConfig:
		var c agentproto.Config
		if err := json.Unmarshal(msg.Payload, &c); err == nil {
			s.r.applyConfig(c)
		}
	case agentproto.TypeCommand:
		var c agentproto.Command
		if err := json.Unmarshal(msg.Payload, &c); err != nil {
			return nil
		}
		go func() {
			res := s.r.runCommand(s.ctx, c)
			if err := s.send(agentproto.TypeCommandResult, c.ID, res); err != nil {
				s.r.postResult(context.WithoutCancel(s.ctx), res)
			}
		}()
	case agentproto.TypeCall:
		var c agentproto.Call
		if err := json.Unmarshal(msg.Payload, &c); err != nil {
			return nil
		}
		go func() { _ = s.send(agentproto.TypeCallResult, c.ID, s.r.caps.Answer(s.ctx, c)) }()
	case agentproto.TypeStop:
		return errDecommissioned
	}
	return nil
}

func (r *runner) applyConfig(c agentproto.Config) {
	if c.HeartbeatIntervalSeconds <= 0 {
		return
	}
	r.mu.Lock()
	r.interval = time.Duration(c.HeartbeatIntervalSeconds) * time.Second
	r.cfg.Settings = c
	r.mu.Unlock()
}

// httpHeartbeat reports over HTTP while the live channel is down and runs what comes back.
func (r *runner) httpHeartbeat(ctx context.Context) error {
	var resp agentproto.HeartbeatResponse
	err := r.http.do(ctx, http.MethodPost, apiPath(agentproto.PathHeartbeat, r.cfg.DeviceID), r.heartbeat(ctx), &resp, nil)
	if err != nil {
		return err
	}
	for _, c := range resp.Commands {
		go r.postResult(ctx, r.runCommand(ctx, c))
	}
	return nil
}

// runCommand carries out a command with its capability, within the command's timeout.
func (r *runner) runCommand(ctx context.Context, c agentproto.Command) agentproto.CommandResult {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(max(c.TimeoutSeconds, 1))*time.Second)
	defer cancel()
	res := r.caps.RunCommand(ctx, c)
	res.CommandID = c.ID
	res.DurationMs = time.Since(start).Milliseconds()
	return res
}

func (r *runner) refreshInventory(ctx context.Context, _ agentproto.Command) agentproto.CommandResult {
	if err := r.sendInventory(ctx); err != nil {
		return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: err.Error()}
	}
	return agentproto.CommandResult{Status: agentproto.ResultCompleted}
}

func (r *runner) postResult(ctx context.Context, res agentproto.CommandResult) {
	err := r.http.do(ctx, http.MethodPost, apiPath(agentproto.PathCommandResult, r.cfg.DeviceID, res.CommandID), res, nil, nil)
	if err != nil {
		r.log.Warn("could not report a command result", "commandId", res.CommandID, "error", err)
	}
}

// inventoryLoop reports the full inventory at start and every InventoryEvery.
func (r *runner) inventoryLoop(ctx context.Context) {
	t := time.NewTicker(r.opts.InventoryEvery)
	defer t.Stop()
	for {
		if err := r.sendInventory(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("inventory report failed; retrying at the next period", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *runner) sendInventory(ctx context.Context) error {
	inv := inventory.Collect(ctx)
	if err := r.http.do(ctx, http.MethodPost, apiPath(agentproto.PathInventory, r.cfg.DeviceID), inv, nil, nil); err != nil {
		return fmt.Errorf("send inventory: %w", err)
	}
	return nil
}
