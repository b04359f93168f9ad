// Package agenthub holds the live channel to agents: one WebSocket per agent, over which
// the server pushes commands and system-tool calls the moment they are queued, and the
// agent sends heartbeats, the answers to calls and its reports. Command results do not ride
// the socket: the agent posts them over HTTP (devices), whose answer confirms they were
// recorded. State that matters lives in the database (devices); the hub only carries it, so
// an agent may reconnect to any node.
//
// The socket's text messages carry that JSON protocol; its binary messages carry the frames
// of streams (package streams) the server opens to the agent, for agents that speak them.
// OpenStream reaches an agent held by this node directly, and one held by another node
// through that node (relay.go).
package agenthub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"gale/internal/domains/devices"
	"gale/internal/platform/apperr"
	"gale/internal/platform/bus"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/nodes"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/streams"
)

// Options tune the hub.
type Options struct {
	// PingInterval is how often the server pings each agent; a missing pong closes the socket.
	PingInterval time.Duration
	// MaxMessageBytes limits one frame from an agent.
	MaxMessageBytes int64
	// Workers is how many goroutines do the database work of all connections: no more than
	// the agents' lane has connections for (store.DB.AgentConns), so that work waits here, in
	// arrival order, rather than in the database pool.
	Workers int
	// MaxStreams caps the open streams of each agent connection; zero means
	// streams.DefaultMaxStreams.
	MaxStreams int
	// Nodes records which agents this node holds and finds the holder of the others, so that
	// streams reach agents held by other nodes. Nil: this node reaches only its own agents.
	Nodes *nodes.Registry
	// ChannelWait is how long AwaitLiveChannel waits for the live channel of an agent that
	// reported it is opening it; zero does not wait.
	ChannelWait time.Duration
}

// The hub's bus channels.
const (
	chanWork     = "gale_agent_work"
	chanStop     = "gale_agent_stop"
	chanCallDone = "gale_agent_call_done"
)

// Hub tracks this node's agent connections.
type Hub struct {
	devices *devices.Service
	bus     bus.Bus
	logger  *slog.Logger
	opts    Options

	mu    sync.Mutex
	conns map[string]*conn
	// watchers are the requests waiting for a device's connection to register (AwaitLiveChannel).
	watchers map[string]*watcher

	waiters sync.Map // call ID → chan struct{}

	// work carries database work from connections to the workers; quit stops them.
	work      chan func()
	quit      chan struct{}
	closeOnce sync.Once

	relays atomic.Int64 // node-to-node stream connections open, both directions

	// handlers are the message types other domains declared, beyond the hub's own.
	handlers map[string]MessageHandler

	heartbeatSeconds prometheus.Histogram
	connections      prometheus.Gauge
	channelWaits     prometheus.Gauge
}

// watcher is closed once a connection of its device registers on this node; n requests wait
// on it.
type watcher struct {
	registered chan struct{}
	n          int
}

// MessageHandler handles one type of message agents send over their live channel; it runs on
// the hub's database workers, with the sending agent.
type MessageHandler func(ctx context.Context, agent devices.Agent, payload json.RawMessage) error

// Message is what a domain declares on the module kernel for a type of message its agents
// send over the live channel (check results, scan findings, elevation requests): they ride the
// channel without a change to the hub.
type Message struct {
	Type   string
	Handle MessageHandler
}

// plug takes in the message types other modules declared, once every module is built. A type
// the hub or another domain handles is a wiring mistake.
func (h *Hub) plug(messages []Message) error {
	for _, m := range messages {
		if err := h.handle(m.Type, m.Handle); err != nil {
			return err
		}
	}
	return nil
}

func (h *Hub) handle(typ string, fn MessageHandler) error {
	switch typ {
	case agentproto.TypeHeartbeat, agentproto.TypeCallResult:
		return fmt.Errorf("message type %s is the hub's own", typ)
	}
	if _, ok := h.handlers[typ]; ok {
		return fmt.Errorf("message type %s handled twice", typ)
	}
	h.handlers[typ] = fn
	return nil
}

// Deps are what the hub works with.
type Deps struct {
	Devices *devices.Service
	// Bus carries wake-ups, stops and answered calls between the nodes.
	Bus    bus.Bus
	Logger *slog.Logger
	// Metrics registers the hub's metrics (nil: not registered).
	Metrics prometheus.Registerer
}

// New returns a hub over the device service and bus, registering its metrics.
func New(d Deps, opts Options) *Hub {
	if opts.PingInterval <= 0 {
		opts.PingInterval = 30 * time.Second
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = 64 << 20
	}
	if opts.Workers <= 0 {
		opts.Workers = 8
	}
	h := &Hub{devices: d.Devices, bus: d.Bus, logger: d.Logger, opts: opts, conns: map[string]*conn{}, watchers: map[string]*watcher{},
		handlers: map[string]MessageHandler{}, work: make(chan func()), quit: make(chan struct{}),
		heartbeatSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gale_agent_heartbeat_seconds",
			Help: "Time to record one agent heartbeat.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gale_agent_connections",
			Help: "Agent WebSocket connections held by this node."}),
		channelWaits: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gale_agent_channel_waits",
			Help: "Requests on this node waiting for an agent to open its live channel."}),
	}
	if d.Metrics != nil {
		d.Metrics.MustRegister(h.heartbeatSeconds, h.connections, h.channelWaits)
	}
	for range opts.Workers {
		go h.worker()
	}
	d.Bus.Subscribe(chanWork, func(id string) {
		if c := h.conn(id); c != nil {
			c.wake()
		}
	})
	d.Bus.Subscribe(chanStop, func(id string) {
		if c := h.conn(id); c != nil {
			c.stop()
		}
	})
	d.Bus.Subscribe(chanCallDone, func(id string) {
		if ch, ok := h.waiters.Load(id); ok {
			select {
			case ch.(chan struct{}) <- struct{}{}:
			default:
			}
		}
	})
	return h
}

// worker runs database work handed over by connections until the hub closes.
func (h *Hub) worker() {
	for {
		select {
		case fn := <-h.work:
			fn()
		case <-h.quit:
			return
		}
	}
}

// run does fn on a worker and waits for it; false when ctx ended or the hub closed first.
// Connections hand their database work over instead of doing it on their own goroutines:
// those calls need deep stacks (tens of KiB), and a goroutine keeps the stack it grew, so
// thousands of connections would each hold one.
func (h *Hub) run(ctx context.Context, fn func()) bool {
	done := make(chan struct{})
	select {
	case h.work <- func() { fn(); close(done) }:
	case <-ctx.Done():
		return false
	case <-h.quit:
		return false
	}
	<-done
	return true
}

// Work tells the node holding the device's socket that it has queued work.
// A device connected to this node is woken at once; for one connected elsewhere the bus
// carries the word (on PostgreSQL a NOTIFY, which costs a round trip and the listener's turn).
func (h *Hub) Work(ctx context.Context, deviceID string) {
	if c := h.conn(deviceID); c != nil {
		c.wake()
		return
	}
	h.bus.Publish(ctx, chanWork, deviceID)
}

// Deliver hands a command already recorded as sent to this node's connection of the device;
// false when the node holds none (or it is closing), and then the command must be queued again.
func (h *Hub) Deliver(deviceID string, cmd agentproto.Command) bool {
	c := h.conn(deviceID)
	return c != nil && c.push(cmd)
}

// Stop tells the node holding the device's socket to stop the agent.
func (h *Hub) Stop(ctx context.Context, deviceID string) { h.bus.Publish(ctx, chanStop, deviceID) }

// Connected reports whether this node holds a socket of the device.
func (h *Hub) Connected(deviceID string) bool { return h.conn(deviceID) != nil }

// LiveChannel reports whether any node holds a live channel of the device's agent: this node,
// or another one as the nodes registry records it (on PostgreSQL; SQLite serves one node).
// A device that reports only over HTTP heartbeats has none, and calls cannot reach it.
func (h *Hub) LiveChannel(ctx context.Context, deviceID string) (bool, error) {
	if h.Connected(deviceID) {
		return true, nil
	}
	reg := h.opts.Nodes
	if reg == nil {
		return false, nil
	}
	holder, err := reg.Holder(ctx, deviceID)
	if errors.Is(err, nodes.ErrNoHolder) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// A record naming this node without a socket here is one whose release has not landed yet.
	return holder.ID != reg.Self().ID, nil
}

// Reach says whether a device's agent can take calls and streams now.
type Reach int

const (
	// Reachable: its live channel is up, on this node or another.
	Reachable Reach = iota
	// Connecting: its agent reported that it is opening its live channel, which did not come
	// up within the wait.
	Connecting
	// HTTPOnly: its agent reports over HTTP heartbeats only: it said its channel is down, or
	// said nothing of one.
	HTTPOnly
)

// channelPoll is how often AwaitLiveChannel looks for a channel another node registered.
const channelPoll = 250 * time.Millisecond

// AwaitLiveChannel is LiveChannel for a request that needs the channel now. When the channel
// is not up but the device's agent reported that it is opening it (it has just started, or
// lost its channel a moment ago), it waits up to Options.ChannelWait for the channel to come
// up on any node. It holds no transaction and no lock while it waits: a connection registering
// on this node ends the wait at once, one on another node is seen within channelPoll.
func (h *Hub) AwaitLiveChannel(ctx context.Context, deviceID string) (Reach, error) {
	w := h.watch(deviceID)
	defer h.unwatch(deviceID, w)
	live, err := h.LiveChannel(ctx, deviceID)
	if err != nil || live {
		return Reachable, err
	}
	coming, err := h.devices.LiveChannelComing(ctx, deviceID)
	if err != nil || !coming {
		return HTTPOnly, err
	}
	if h.opts.ChannelWait <= 0 {
		return Connecting, nil
	}
	h.channelWaits.Inc()
	defer h.channelWaits.Dec()
	deadline := time.NewTimer(h.opts.ChannelWait)
	defer deadline.Stop()
	poll := time.NewTicker(channelPoll)
	defer poll.Stop()
	for {
		select {
		case <-w.registered:
			return Reachable, nil
		case <-poll.C:
		case <-deadline.C:
			return Connecting, nil
		case <-ctx.Done():
			return Connecting, ctx.Err()
		}
		if live, err := h.LiveChannel(ctx, deviceID); err != nil || live {
			return Reachable, err
		}
	}
}

// watch has the next registration of a connection of the device close the watcher it returns;
// it is taken before the first look, so a registration in between is not missed.
func (h *Hub) watch(deviceID string) *watcher {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.watchers[deviceID]
	if w == nil {
		w = &watcher{registered: make(chan struct{})}
		h.watchers[deviceID] = w
	}
	w.n++
	return w
}

func (h *Hub) unwatch(deviceID string, w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.n--; w.n == 0 && h.watchers[deviceID] == w {
		delete(h.watchers, deviceID)
	}
}

func (h *Hub) conn(deviceID string) *conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns[deviceID]
}

// register makes c the device's connection, closing an older one: one socket per agent.
func (h *Hub) register(c *conn) {
	h.mu.Lock()
	old := h.conns[c.agent.DeviceID]
	h.conns[c.agent.DeviceID] = c
	w := h.watchers[c.agent.DeviceID]
	delete(h.watchers, c.agent.DeviceID)
	h.mu.Unlock()
	if w != nil {
		close(w.registered)
	}
	h.connections.Inc()
	if old != nil {
		old.close(websocket.StatusPolicyViolation, "replaced by a newer connection of the same agent")
	}
}

// unregister forgets c; commands handed to it that it did not send go back to the queue.
func (h *Hub) unregister(c *conn) {
	h.mu.Lock()
	if h.conns[c.agent.DeviceID] == c {
		delete(h.conns, c.agent.DeviceID)
	}
	h.mu.Unlock()
	h.connections.Dec()
	if c.streams != nil {
		c.streams.Close(errAgentDisconnected)
	}
	if h.opts.Nodes != nil {
		ctx := context.WithoutCancel(c.ctx)
		h.run(ctx, func() {
			if err := h.opts.Nodes.Released(ctx, c.agent.DeviceID, c.id); err != nil {
				c.log().Warn("the agent's connection stays recorded until this node stops", "error", err)
			}
		})
	}
	if left := c.takeOutbox(true); len(left) > 0 {
		ids := make([]string, len(left))
		for i, cmd := range left {
			ids[i] = cmd.ID
		}
		ctx := context.WithoutCancel(c.ctx)
		h.run(ctx, func() {
			if err := h.devices.Requeue(ctx, c.agent.DeviceID, ids); err != nil {
				c.log().Warn("commands of a closed connection were not queued again; they time out", "error", err)
			}
		})
	}
}

// Close closes every connection (shutdown); agents reconnect to another node or later.
func (h *Hub) Close() {
	h.mu.Lock()
	conns := make([]*conn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.close(websocket.StatusGoingAway, "server shutting down")
	}
	h.closeOnce.Do(func() { close(h.quit) })
}

// BearerToken returns the token of an Authorization: Bearer header.
func BearerToken(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}

// ServeHTTP upgrades an authenticated agent to its live channel.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var agent devices.Agent
	var err error
	if !h.run(r.Context(), func() { agent, err = h.devices.AuthenticateAgent(r.Context(), BearerToken(r)) }) {
		httpapi.WriteError(w, &apperr.Error{Kind: apperr.KindUnavailable, Code: "SHUTTING_DOWN",
			Message: "the server is shutting down; connect again"})
		return
	}
	if err != nil {
		if ae, ok := apperr.As(err); ok {
			httpapi.WriteError(w, ae)
			return
		}
		h.logger.ErrorContext(r.Context(), "agent authentication failed", "error", err)
		httpapi.WriteError(w, &apperr.Error{Kind: apperr.KindInternal, Code: apperr.CodeInternal, Message: "internal error"})
		return
	}
	if agent.Role != agentproto.RoleAgent {
		httpapi.WriteError(w, apperr.Forbidden("the watchdog reports over HTTP; only the main agent opens the live channel"))
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	ws.SetReadLimit(h.opts.MaxMessageBytes)
	ctx, cancel := context.WithCancel(devices.AgentContext(context.WithoutCancel(r.Context()), agent))
	c := &conn{hub: h, id: store.NewID(), agent: agent, ws: ws, ctx: ctx, cancel: cancel, wakeup: make(chan struct{}, 1)}
	if r.Header.Get(agentproto.HeaderStreams) != "" {
		c.streams = streams.NewSession(c.sendFrame, streams.Options{Initiator: true, MaxStreams: h.opts.MaxStreams, Logger: c.log()})
	}
	// Recorded before the hub knows the connection, so that once this node reports the agent
	// connected, other nodes find it too.
	if h.opts.Nodes != nil {
		h.run(ctx, func() {
			if err := h.opts.Nodes.Held(ctx, agent.DeviceID, c.id); err != nil {
				c.log().Warn("other nodes cannot open streams to this agent until it reconnects", "error", err)
			}
		})
	}
	h.register(c)
	defer h.unregister(c)
	defer cancel()
	if err := c.send(agentproto.TypeWelcome, "", agentproto.Welcome{DeviceID: agent.DeviceID, Config: h.devices.AgentConfig()}); err != nil {
		return
	}
	c.wake()
	go c.serveLoop(h.opts.PingInterval)
	c.readLoop()
}

// Call asks a device's agent to run a system tool and waits for the answer. The device must
// already be known to be in the caller's scope.
func (h *Hub) Call(ctx context.Context, deviceID, method string, args any, timeout time.Duration) (json.RawMessage, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	id, err := h.devices.QueueCall(ctx, deviceID, method, raw, timeout)
	if err != nil {
		return nil, err
	}
	done := make(chan struct{}, 1)
	h.waiters.Store(id, done)
	defer h.waiters.Delete(id)
	h.Work(ctx, deviceID)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	// The poll covers a notification lost between nodes.
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for {
		select {
		case <-done:
		case <-poll.C:
		case <-deadline.C:
			_ = h.devices.ExpireCall(context.WithoutCancel(ctx), id)
			return nil, &apperr.Error{Kind: apperr.KindTimeout, Code: "AGENT_TIMEOUT",
				Message: "the agent did not answer within " + timeout.String() + "; it may be busy or its connection may have dropped: try again"}
		case <-ctx.Done():
			_ = h.devices.ExpireCall(context.WithoutCancel(ctx), id)
			return nil, ctx.Err()
		}
		result, callErr, answered, err := h.devices.CallOutcome(ctx, id)
		if err != nil {
			return nil, err
		}
		if !answered {
			continue
		}
		if callErr != nil {
			return nil, callError(callErr)
		}
		return result, nil
	}
}

// callError turns an agent's refusal into the API's error.
func callError(e *agentproto.CallError) error {
	switch e.Code {
	case agentproto.ErrNotFound:
		return &apperr.Error{Kind: apperr.KindNotFound, Code: apperr.CodeNotFound, Message: e.Message}
	case agentproto.ErrInvalid, agentproto.ErrUnknownMethod:
		return &apperr.Error{Kind: apperr.KindInvalid, Code: apperr.CodeValidation, Message: e.Message}
	case agentproto.ErrNotSupported:
		return &apperr.Error{Kind: apperr.KindInvalid, Code: agentproto.ErrNotSupported, Message: e.Message}
	case agentproto.ErrInsufficientSpace:
		return &apperr.Error{Kind: apperr.KindConflict, Code: agentproto.ErrInsufficientSpace, Message: e.Message}
	default:
		return &apperr.Error{Kind: apperr.KindUpstream, Code: agentproto.ErrFailed, Message: "the operation failed on the device: " + e.Message}
	}
}
