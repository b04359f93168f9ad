package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"gale/internal/agent/capability"
	"gale/internal/agent/inventory"
	"gale/internal/agent/outbox"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/streams"
)

// RunOptions configure the main agent.
type RunOptions struct {
	ConfigPath string
	Version    string
	Logger     *slog.Logger
	// Capabilities serve the commands, calls and streams the server sends; Run adds the
	// agent's own refresh_inventory command to them. Nil serves that command only.
	Capabilities *capability.Registry
}

// LivenessFDEnv names the environment variable through which the watchdog passes the
// descriptor the main agent writes its liveness beats to.
const LivenessFDEnv = "GALE_AGENT_LIVENESS_FD"

// WatchdogPIDEnv names the environment variable through which a watchdog without a liveness
// pipe (Windows) passes its process ID, so the main agent can tell when it died.
const WatchdogPIDEnv = "GALE_AGENT_WATCHDOG_PID"

const (
	livenessEvery = 2 * time.Second
	// Reconnecting starts within a second, so a server restart costs seconds, and backs off
	// to 30 s; a handshake that succeeds starts over.
	reconnectMin = 500 * time.Millisecond
	reconnectMax = 30 * time.Second
	// A refused token (rotated, a proxy in the way) is retried more slowly, up to 5 minutes.
	refusedMin = 5 * time.Second
	refusedMax = 5 * time.Minute
	// A failed inventory is tried again within minutes, not at the next period.
	inventoryRetryMin = 30 * time.Second
	inventoryRetryMax = 5 * time.Minute
	// flushEvery is how often kept messages are offered to the server besides at each connection.
	flushEvery = 30 * time.Second
	// ackTimeout is how long a heartbeat on the socket waits for the server's acknowledgement
	// before the socket is taken for dead and the heartbeat kept for later.
	ackTimeout = 15 * time.Second
	// requestTimeout bounds the agent's small HTTP requests, so an unreachable server does not
	// hold a heartbeat for the client's whole timeout.
	requestTimeout = 20 * time.Second
	// connectingWithin is how soon the next attempt at the live channel must be for the
	// heartbeats to say the agent is connecting it (a server waits that long for it); a later
	// one, or a refused token, says it is down.
	connectingWithin = 5 * time.Second
)

// Kinds of kept messages in the outbox.
const (
	keptResult    = "command_result"
	keptHeartbeat = "heartbeat"
)

// errStopped is the server's stop message on the live channel.
var errStopped = errors.New("the server sent stop: the device was decommissioned")

// runner is the main agent.
type runner struct {
	opts RunOptions
	cfg  Config
	log  *slog.Logger
	http *client
	caps *capability.Registry
	box  *outbox.Outbox
	cmds *commands
	// ctx lives as long as the agent, not a connection: commands run under it.
	ctx  context.Context
	stop context.CancelCauseFunc

	mu   sync.Mutex // guards cfg once running, live and channel
	live *session   // the connected session, once the server welcomed it
	// channel is what heartbeats sent over HTTP say of the live channel: connecting or down.
	channel string

	beatNow  chan struct{}
	flushNow chan struct{}
	// dialNow cuts the wait before the next attempt at the live channel short: an HTTP
	// heartbeat the server took shows it is back and takes the agent's token again.
	dialNow chan struct{}
	retired sync.Once
}

// Run runs the main agent until ctx ends or the server decommissions the device (then it
// returns ErrDecommissioned). It keeps a live channel to the server (falling back to HTTP
// heartbeats while the channel cannot be opened), reports health and inventory at the
// server's intervals, and serves the commands, calls and streams of its capabilities.
// Commands run on whether or not the channel holds; what cannot be delivered is kept in the
// outbox on disk and delivered when the server is back.
func Run(ctx context.Context, o RunOptions) error {
	cfg, err := LoadConfig(o.ConfigPath)
	if err != nil {
		return err
	}
	if cfg.Decommissioned {
		return ErrDecommissioned
	}
	box, err := outbox.Open(OutboxDir(o.ConfigPath), outbox.Limits{})
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	r := &runner{opts: o, cfg: cfg, log: o.Logger.With("deviceId", cfg.DeviceID), http: newClient(cfg.Server, cfg.AuthToken),
		box: box, ctx: ctx, stop: stop, beatNow: make(chan struct{}, 1), flushNow: make(chan struct{}, 1),
		dialNow: make(chan struct{}, 1), channel: agentproto.LiveChannelConnecting}
	cmds, err := openCommands(CommandsPath(o.ConfigPath))
	if err != nil {
		r.log.Error("could not read the commands cancelled or ended before; starting without them", "error", err)
	}
	r.cmds = cmds
	if o.Capabilities == nil {
		o.Capabilities = capability.New()
	}
	r.caps = o.Capabilities
	r.caps.Command(agentproto.CommandRefreshInventory, r.refreshInventory)
	r.caps.Command(agentproto.CommandCancel, r.cancelCommand)
	r.caps.Start(ctx, capability.Host{Report: r.reportPending, Send: r.sendLive, Fetch: r.fetch})
	if n := box.Len(); n > 0 {
		r.log.Info("messages kept from an earlier run wait for the server", "count", n)
	}
	// The baseline of CPU use: the first sample reported measures the machine over a whole
	// interval, not the agent's own start.
	inventory.Sample(ctx)
	go r.liveness(ctx, func() { stop(nil) })
	go r.inventoryLoop(ctx)
	go r.reportLoop(ctx)
	go r.flushLoop(ctx)
	r.connectLoop(ctx)
	if errors.Is(context.Cause(ctx), ErrDecommissioned) {
		return ErrDecommissioned
	}
	return nil
}

// connectLoop keeps the live channel open until the agent ends.
func (r *runner) connectLoop(ctx context.Context) {
	wait := newBackoff(reconnectMin, reconnectMax)
	refusedWait := newBackoff(refusedMin, refusedMax)
	for ctx.Err() == nil {
		welcomed, err := r.session(ctx)
		if ctx.Err() != nil || r.retiredBy(err) {
			return
		}
		if welcomed {
			wait.reset()
			refusedWait.reset()
		}
		var d time.Duration
		state := agentproto.LiveChannelConnecting
		if refused(err) {
			d, state = refusedWait.next(), agentproto.LiveChannelDown
			r.log.Error("the server refuses this agent's token; still retrying (only the server's decommissioning stops the agent)",
				"error", err, "in", d.Round(time.Millisecond))
		} else {
			d = wait.next()
			r.log.Warn("live channel down; reconnecting", "error", err, "in", d.Round(time.Millisecond))
		}
		if d > connectingWithin {
			state = agentproto.LiveChannelDown
		}
		r.setChannel(state)
		select {
		case <-r.dialNow:
			r.log.Info("the server took a heartbeat over HTTP; reconnecting now")
		case <-time.After(d):
		case <-ctx.Done():
			return
		}
	}
}

// retiredBy stops the agent when err is the server's word that the device was decommissioned.
func (r *runner) retiredBy(err error) bool {
	if !errors.Is(err, errStopped) && !decommissions(err, r.cfg.DeviceID) {
		return false
	}
	r.retired.Do(func() {
		r.log.Error("the server decommissioned this device; the agent stops (enroll again to manage this machine)", "reason", err)
		r.mu.Lock()
		r.cfg.Decommissioned = true
		err := SaveConfig(r.opts.ConfigPath, r.cfg)
		r.mu.Unlock()
		if err != nil {
			r.log.Error("could not record the decommissioning", "error", err)
		}
		r.stop(ErrDecommissioned)
	})
	return true
}

// sleep waits d, or less when ctx ends first; false when it did.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func nudge(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// liveness beats to the watchdog, when there is one, so it can tell a hung agent. When the
// pipe breaks the watchdog died: the agent replaces it and stops (stop). Without a pipe it
// waits for the watchdog's process to end instead.
func (r *runner) liveness(ctx context.Context, stop context.CancelFunc) {
	if pid, err := strconv.Atoi(os.Getenv(WatchdogPIDEnv)); err == nil && pid > 0 {
		r.watchWatchdog(ctx, pid, stop)
		return
	}
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
			if ctx.Err() == nil {
				r.replaceWatchdog(stop)
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watchWatchdog waits for the watchdog's process to end, then replaces it and stops (stop).
// The handle is taken at once, so a PID reused later cannot be mistaken for the watchdog.
func (r *runner) watchWatchdog(ctx context.Context, pid int, stop context.CancelFunc) {
	p, err := os.FindProcess(pid)
	if err == nil {
		_, err = p.Wait()
	}
	if err != nil {
		r.log.Warn("cannot watch the watchdog; a watchdog that dies is not replaced", "pid", pid, "error", err)
		return
	}
	if ctx.Err() == nil {
		r.replaceWatchdog(stop)
	}
}

// intervals are the server's heartbeat, metrics and inventory periods, with defaults for what
// it did not say.
func (r *runner) intervals() (heartbeat, metrics, inv time.Duration) {
	r.mu.Lock()
	s := r.cfg.Settings
	r.mu.Unlock()
	heartbeat = time.Duration(max(s.HeartbeatIntervalSeconds, 1)) * time.Second
	metrics = heartbeat
	if s.MetricsCollectionIntervalSeconds > 0 {
		metrics = time.Duration(s.MetricsCollectionIntervalSeconds) * time.Second
	}
	inv = 24 * time.Hour
	if s.InventoryIntervalMinutes > 0 {
		inv = time.Duration(s.InventoryIntervalMinutes) * time.Minute
	}
	return heartbeat, metrics, inv
}

// reportLoop sends a heartbeat every heartbeat interval, whatever the state of the live
// channel; one carries a health sample once per metrics interval. The first carries none: the
// first sample covers a whole interval after the baseline Run took.
func (r *runner) reportLoop(ctx context.Context) {
	lastSample := time.Now()
	for ctx.Err() == nil {
		every, metricsEvery, _ := r.intervals()
		hb := agentproto.Heartbeat{AgentVersion: r.opts.Version, UptimeSeconds: inventory.Uptime(),
			LastUser: inventory.LastUser(ctx), PendingReboot: pendingReboot()}
		// A little slack keeps a sample per interval although ticks drift by milliseconds.
		if time.Since(lastSample) >= metricsEvery-metricsEvery/10 {
			m := inventory.Sample(ctx)
			lastSample = time.Now()
			hb.Metrics = &m
		}
		r.deliverHeartbeat(ctx, hb, lastSample)
		select {
		case <-ctx.Done():
		case <-time.After(every):
		case <-r.beatNow:
		}
	}
}

// deliverHeartbeat sends hb on the live channel, else over HTTP; a sample neither takes is
// kept, with its time, so the metrics history has no gap. Each says what it knows of the live
// channel, so that the server waits a moment for a channel that is coming.
func (r *runner) deliverHeartbeat(ctx context.Context, hb agentproto.Heartbeat, sampledAt time.Time) {
	if s := r.liveSession(); s != nil {
		hb.LiveChannel = agentproto.LiveChannelUp
		if err := s.heartbeat(hb); err == nil {
			return
		}
	}
	hb.LiveChannel = r.channelState()
	err := r.httpHeartbeat(ctx, hb)
	if err == nil || r.retiredBy(err) || ctx.Err() != nil || hb.Metrics == nil || permanent(err) {
		return
	}
	at := sampledAt.UTC()
	hb.SampledAt = &at
	r.keep(keptHeartbeat, hb)
}

// keep puts a message in the outbox, for the next delivery.
func (r *runner) keep(kind string, payload any) {
	dropped, err := r.box.Put(kind, payload)
	if err != nil {
		r.log.Error("could not keep a message for later; it is lost", "kind", kind, "error", err)
		return
	}
	if dropped > 0 {
		r.log.Warn("the outbox is full; dropped its oldest messages", "dropped", dropped)
	}
}

// flushLoop offers the kept messages to the server at each connection and every flushEvery.
func (r *runner) flushLoop(ctx context.Context) {
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.flushNow:
		}
		r.flush(ctx)
	}
}

// flush delivers the kept messages, oldest first, over HTTP (whose answer confirms each), and
// stops at the first the server cannot take now. One the server rejects for what it is is
// dropped: sending it again cannot help.
func (r *runner) flush(ctx context.Context) {
	if r.box.Len() == 0 {
		return
	}
	entries, err := r.box.Entries()
	if err != nil {
		r.log.Error("could not read the outbox", "error", err)
	}
	delivered := 0
	for _, e := range entries {
		err := r.deliverKept(ctx, e)
		if err != nil && !permanent(err) {
			r.retiredBy(err)
			break
		}
		if err != nil {
			r.log.Warn("the server rejected a kept message; dropped", "kind", e.Kind, "error", err)
		}
		if err := r.box.Remove(e.ID); err != nil {
			r.log.Error("could not remove a delivered message from the outbox", "error", err)
			break
		}
		delivered++
	}
	if delivered > 0 {
		r.log.Info("delivered messages kept while the server was unreachable", "count", delivered, "left", r.box.Len())
	}
}

func (r *runner) deliverKept(ctx context.Context, e outbox.Entry) error {
	switch e.Kind {
	case keptResult:
		var res agentproto.CommandResult
		if err := json.Unmarshal(e.Payload, &res); err != nil {
			return nil
		}
		return r.postResult(ctx, res)
	case keptHeartbeat:
		var hb agentproto.Heartbeat
		if err := json.Unmarshal(e.Payload, &hb); err != nil {
			return nil
		}
		return r.httpHeartbeat(ctx, hb)
	}
	r.log.Warn("unknown kind of kept message; dropped", "kind", e.Kind)
	return nil
}

func (r *runner) liveSession() *session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live
}

func (r *runner) setLive(s *session, live bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if live {
		r.live = s
	} else if r.live == s {
		r.live = nil
	}
}

// channelState is what a heartbeat sent over HTTP says of the live channel.
func (r *runner) channelState() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.channel
}

func (r *runner) setChannel(state string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.channel = state
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

// session holds one live channel until it fails, and reports whether the server welcomed it
// (the handshake succeeded). Text messages carry the JSON protocol, binary messages the
// frames of the streams the server opens.
func (r *runner) session(ctx context.Context) (welcomed bool, err error) {
	dialCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	ws, resp, err := websocket.Dial(dialCtx, wsURL(r.cfg.Server), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + r.cfg.AuthToken}, agentproto.HeaderStreams: {agentproto.StreamsVersion}}})
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode >= 300 {
			return false, readAPIError(resp)
		}
		return false, err
	}
	ws.SetReadLimit(64 << 20)
	defer ws.CloseNow()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	s := &session{r: r, ws: ws, ctx: sctx, acks: map[string]chan struct{}{}}
	s.streams = streams.NewSession(func(ctx context.Context, frame []byte) error {
		return ws.Write(ctx, websocket.MessageBinary, frame)
	}, streams.Options{Accept: r.caps.AcceptStream, Logger: r.log})
	err = s.read()
	r.setLive(s, false)
	s.streams.Close(fmt.Errorf("connection to the server lost: %w", err))
	return s.welcomed.Load(), err
}

type session struct {
	r        *runner
	ws       *websocket.Conn
	ctx      context.Context
	streams  *streams.Session
	welcomed atomic.Bool
	seq      atomic.Uint64
	mu       sync.Mutex
	acks     map[string]chan struct{} // heartbeats awaiting the server's acknowledgement
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

// heartbeat sends hb and waits for the server to acknowledge it recorded it. Without the
// acknowledgement the socket is taken for dead (a write may succeed into a connection the
// server no longer reads) and closed, and the caller keeps the heartbeat.
func (s *session) heartbeat(hb agentproto.Heartbeat) error {
	id := strconv.FormatUint(s.seq.Add(1), 10)
	ack := make(chan struct{})
	s.mu.Lock()
	s.acks[id] = ack
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.acks, id)
		s.mu.Unlock()
	}()
	if err := s.send(agentproto.TypeHeartbeat, id, hb); err != nil {
		return fmt.Errorf("send a heartbeat: %w", err)
	}
	t := time.NewTimer(ackTimeout)
	defer t.Stop()
	select {
	case <-ack:
		return nil
	case <-s.ctx.Done():
		return fmt.Errorf("heartbeat not acknowledged: %w", s.ctx.Err())
	case <-t.C:
		s.r.log.Warn("the server did not acknowledge a heartbeat; reconnecting", "after", ackTimeout)
		s.ws.CloseNow()
		return errors.New("heartbeat not acknowledged")
	}
}

func (s *session) handle(msg agentproto.Message) error {
	switch msg.Type {
	case agentproto.TypeWelcome:
		var w agentproto.Welcome
		if err := json.Unmarshal(msg.Payload, &w); err == nil {
			s.r.applyConfig(w.Config)
		}
		s.welcomed.Store(true)
		s.r.setLive(s, true)
		s.r.log.Info("connected to the server", "server", s.r.cfg.Server)
		nudge(s.r.beatNow)
		nudge(s.r.flushNow)
	case agentproto.TypeHeartbeatAck:
		s.mu.Lock()
		if ack, ok := s.acks[msg.ID]; ok {
			close(ack)
			delete(s.acks, msg.ID)
		}
		s.mu.Unlock()
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
		go s.r.execute(c)
	case agentproto.TypeCall:
		var c agentproto.Call
		if err := json.Unmarshal(msg.Payload, &c); err != nil {
			return nil
		}
		go func() { _ = s.send(agentproto.TypeCallResult, c.ID, s.r.caps.Answer(s.ctx, c)) }()
	case agentproto.TypeStop:
		return errStopped
	}
	return nil
}

// applyConfig takes the server's settings and, when they changed, saves them in the
// configuration: the next start, and the watchdog (which reads the file), use them too.
func (r *runner) applyConfig(c agentproto.Config) {
	if c.HeartbeatIntervalSeconds <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg.Settings == c {
		return
	}
	r.cfg.Settings = c
	if err := SaveConfig(r.opts.ConfigPath, r.cfg); err != nil {
		r.log.Error("could not save the server's settings; they hold until the agent restarts", "error", err)
	}
}

// httpHeartbeat reports over HTTP and runs the commands that come back.
func (r *runner) httpHeartbeat(ctx context.Context, hb agentproto.Heartbeat) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var resp agentproto.HeartbeatResponse
	if err := r.http.do(ctx, http.MethodPost, apiPath(agentproto.PathHeartbeat, r.cfg.DeviceID), hb, &resp, nil); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	nudge(r.dialNow)
	if resp.Config != nil {
		r.applyConfig(*resp.Config)
	}
	for _, c := range resp.Commands {
		go r.execute(c)
	}
	return nil
}

// execute carries out a command under the agent's lifetime, not the connection's, so it runs
// to its end when the connection drops, and reports its result (unless its capability
// reports it later itself). A command the server cancelled before it arrived is refused, and
// one it cancels while it runs has its context cancelled and is reported cancelled.
func (r *runner) execute(c agentproto.Command) {
	ctx, cancelled, err := r.cmds.begin(r.ctx, c.ID)
	if err != nil {
		r.log.Error("could not record the commands cancelled before they arrived", "error", err)
	}
	if cancelled {
		r.report(agentproto.CommandResult{CommandID: c.ID, Status: agentproto.ResultCancelled, Error: "cancelled before it reached the agent"})
		return
	}
	if ctx == nil {
		r.log.Info("a command delivered again while it runs; ignored", "commandId", c.ID)
		return
	}
	res := r.runCommand(ctx, c)
	if errors.Is(context.Cause(ctx), errCancelled) {
		if res.Status == capability.ResultPending {
			// Cancelled as it was being scheduled: take it back.
			r.caps.Withdraw(c.ID)
		}
		res.Status, res.Error = agentproto.ResultCancelled, "cancelled while it ran"
	}
	pending := res.Status == capability.ResultPending
	if err := r.cmds.end(c.ID, !pending); err != nil {
		r.log.Error("could not record that a command ended", "commandId", c.ID, "error", err)
	}
	if !pending {
		r.report(res)
	}
}

// reportPending is the Reporter of the capabilities: the outcome of a command they held
// pending (a reboot) ends it, like a result the agent reports itself.
func (r *runner) reportPending(res agentproto.CommandResult) {
	if err := r.cmds.ended(res.CommandID); err != nil {
		r.log.Error("could not record that a command ended", "commandId", res.CommandID, "error", err)
	}
	r.report(res)
}

// cancelCommand carries out cancel_command, for a command of any kind.
func (r *runner) cancelCommand(_ context.Context, c agentproto.Command) agentproto.CommandResult {
	var cc agentproto.CancelCommand
	if err := json.Unmarshal(c.Payload, &cc); err != nil || cc.CommandID == "" {
		return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: "cancel_command needs {commandId}"}
	}
	return r.cmds.cancel(cc.CommandID, r.caps.Withdraw)
}

// runCommand carries out a command with its capability, within the command's timeout.
func (r *runner) runCommand(ctx context.Context, c agentproto.Command) agentproto.CommandResult {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(max(c.TimeoutSeconds, 1))*time.Second)
	defer cancel()
	ctx = capability.WithOutput(ctx, r.sendOutput)
	res := r.caps.RunCommand(ctx, c)
	res.CommandID = c.ID
	res.DurationMs = time.Since(start).Milliseconds()
	return res
}

// sendOutput sends a piece of a running command's output over the live channel, when there
// is one; without it the piece is dropped (the result carries the whole output).
func (r *runner) sendOutput(o agentproto.CommandOutput) { r.sendLive(agentproto.TypeCommandOutput, o) }

// fetch downloads a file for a capability: a server path with the agent's token, or an
// http(s) address of another server without it. Only the command's context bounds it, as a
// package file may take long.
func (r *runner) fetch(ctx context.Context, url string) (io.ReadCloser, error) {
	header := http.Header{}
	switch {
	case strings.HasPrefix(url, "/api/v1/"):
		header.Set("Authorization", "Bearer "+r.cfg.AuthToken)
		url = strings.TrimRight(r.cfg.Server, "/") + url
	case !strings.HasPrefix(url, "https://") && !strings.HasPrefix(url, "http://"):
		return nil, fmt.Errorf("cannot download %q: only server paths and http(s) addresses", url)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header = header
	resp, err := downloads.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, fmt.Errorf("download %s: %w", url, readAPIError(resp))
	}
	return resp.Body, nil
}

// downloads is the client of fetch: no overall timeout, but one for each step of a connection.
var downloads = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSHandshakeTimeout: 30 * time.Second,
	ResponseHeaderTimeout: 60 * time.Second, IdleConnTimeout: 90 * time.Second}}

// sendLive sends a message over the live channel, when there is one; without it the message
// is dropped.
func (r *runner) sendLive(msgType string, payload any) {
	if s := r.liveSession(); s != nil {
		_ = s.send(msgType, "", payload)
	}
}

// report delivers a result over HTTP, whose answer confirms the server recorded it, and keeps
// it in the outbox when the server cannot be reached. It is kept even when the agent is
// ending: the result of a command interrupted by a stop still tells the server what happened.
func (r *runner) report(res agentproto.CommandResult) {
	err := r.postResult(context.WithoutCancel(r.ctx), res)
	if err == nil || r.retiredBy(err) {
		return
	}
	if permanent(err) {
		r.log.Warn("the server rejected a command result", "commandId", res.CommandID, "error", err)
		return
	}
	r.log.Warn("could not report a command result; keeping it until the server is back", "commandId", res.CommandID, "error", err)
	r.keep(keptResult, res)
}

func (r *runner) postResult(ctx context.Context, res agentproto.CommandResult) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if err := r.http.do(ctx, http.MethodPost, apiPath(agentproto.PathCommandResult, r.cfg.DeviceID, res.CommandID), res, nil, nil); err != nil {
		return fmt.Errorf("report the result of command %s: %w", res.CommandID, err)
	}
	return nil
}

func (r *runner) refreshInventory(ctx context.Context, _ agentproto.Command) agentproto.CommandResult {
	if err := r.sendInventory(ctx); err != nil {
		return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: err.Error()}
	}
	return agentproto.CommandResult{Status: agentproto.ResultCompleted}
}

// inventoryLoop reports the full inventory at start and every inventory interval of the
// server; a failed report is tried again within minutes.
func (r *runner) inventoryLoop(ctx context.Context) {
	retry := newBackoff(inventoryRetryMin, inventoryRetryMax)
	for ctx.Err() == nil {
		_, _, wait := r.intervals()
		if err := r.sendInventory(ctx); err != nil {
			if r.retiredBy(err) || ctx.Err() != nil {
				return
			}
			wait = retry.next()
			r.log.Warn("inventory report failed; retrying", "error", err, "in", wait.Round(time.Second))
		} else {
			retry.reset()
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

func (r *runner) sendInventory(ctx context.Context) error {
	inv := inventory.Collect(ctx, inventory.Options{PackageRoot: r.cfg.PackageRoot})
	if err := r.http.do(ctx, http.MethodPost, apiPath(agentproto.PathInventory, r.cfg.DeviceID), inv, nil, nil); err != nil {
		return fmt.Errorf("send inventory: %w", err)
	}
	return nil
}
