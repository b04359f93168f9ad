package agenthub

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"gale/internal/domains/devices"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/streams"
)

// conn is one agent's socket on this node.
type conn struct {
	hub    *Hub
	id     string // tells this connection from an earlier or later one of the same agent
	agent  devices.Agent
	ws     *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	wakeup chan struct{}
	once   sync.Once
	// streams carries the streams opened to the agent over binary messages; nil when the
	// agent does not speak streams.
	streams *streams.Session

	// check asks the serve loop to look in the database for queued work; outbox holds commands
	// already recorded as sent, which go out as they are.
	check  atomic.Bool
	mu     sync.Mutex
	outbox []agentproto.Command
	closed bool

	// inbox holds the agent's messages other than heartbeats (results, output, reports), handled
	// in order by a goroutine that runs while there are some: a heartbeat is handled as it is
	// read, never behind the agent's own burst of results. room is closed when a full inbox
	// takes messages again.
	inbox    []agentproto.Message
	draining bool
	room     chan struct{}
	// drained is closed when the inbox's goroutine ends.
	drained chan struct{}
}

// maxInbox is how many of an agent's messages wait to be handled before the connection stops
// reading from it: an agent sending faster than the server records slows down, not the server.
const maxInbox = 64

// wake has the serve loop look for queued commands and calls.
func (c *conn) wake() {
	c.check.Store(true)
	c.signal()
}

// push has the serve loop send a command recorded as sent; false when the connection closed.
func (c *conn) push(cmd agentproto.Command) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.outbox = append(c.outbox, cmd)
	c.signal()
	return true
}

// takeOutbox empties the outbox; once closing, it also refuses further commands.
func (c *conn) takeOutbox(closing bool) []agentproto.Command {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.outbox
	c.outbox, c.closed = nil, c.closed || closing
	return out
}

func (c *conn) signal() {
	select {
	case c.wakeup <- struct{}{}:
	default:
	}
}

func (c *conn) send(typ, id string, payload any) error {
	raw, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	msg, err := json.Marshal(agentproto.Message{ID: id, Type: typ, Payload: raw})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageText, msg)
}

// sendFrame writes one frame of the streams session; the session calls it from one goroutine
// at a time, and the socket keeps it whole among the JSON messages other goroutines write.
func (c *conn) sendFrame(ctx context.Context, frame []byte) error {
	return c.ws.Write(ctx, websocket.MessageBinary, frame)
}

func (c *conn) close(code websocket.StatusCode, reason string) {
	c.once.Do(func() {
		c.cancel()
		_ = c.ws.Close(code, reason)
	})
}

// stop tells the agent its device was decommissioned and closes the socket.
func (c *conn) stop() {
	_ = c.send(agentproto.TypeStop, "", struct {
		Reason string `json:"reason"`
	}{"device decommissioned"})
	c.close(websocket.StatusNormalClosure, "device decommissioned")
}

// serveLoop pushes queued commands and calls whenever the connection is woken, and pings the
// agent every ping interval, closing the connection when it stops answering. One goroutine does
// both (besides the reader) because a node holds thousands of these.
func (c *conn) serveLoop(pingEvery time.Duration) {
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-ping.C:
			ctx, cancel := context.WithTimeout(c.ctx, pingEvery)
			err := c.ws.Ping(ctx)
			cancel()
			if err != nil {
				c.close(websocket.StatusPolicyViolation, "no pong")
				return
			}
		case <-c.wakeup:
			for _, cmd := range c.takeOutbox(false) {
				c.sendCommand(cmd)
			}
			if c.check.Swap(false) {
				c.hub.run(c.ctx, c.deliver)
			}
		}
	}
}

func (c *conn) sendCommand(cmd agentproto.Command) {
	if err := c.send(agentproto.TypeCommand, cmd.ID, cmd); err != nil {
		c.log().Warn("command not delivered; it times out unless the agent reports it", "commandId", cmd.ID, "error", err)
	}
}

// deliver sends the device's queued commands and calls.
func (c *conn) deliver() {
	cmds, err := c.hub.devices.TakeQueued(c.ctx, c.agent.DeviceID)
	if err != nil && c.ctx.Err() == nil {
		c.log().Warn("taking queued commands failed", "error", err)
	}
	for _, cmd := range cmds {
		c.sendCommand(cmd)
	}
	calls, err := c.hub.devices.TakeCalls(c.ctx, c.agent.DeviceID)
	if err != nil && c.ctx.Err() == nil {
		c.log().Warn("taking queued calls failed", "error", err)
	}
	for _, call := range calls {
		if err := c.send(agentproto.TypeCall, call.ID, call); err != nil {
			c.log().Warn("call not delivered", "callId", call.ID, "error", err)
		}
	}
}

// log is the hub's logger for this device, made only when there is something to log.
func (c *conn) log() *slog.Logger { return c.hub.logger.With("deviceId", c.agent.DeviceID) }

// readLoop handles what the agent sends until the socket closes. Stream frames are handed
// to the session, which never waits on a stream's reader.
func (c *conn) readLoop() {
	for {
		typ, data, err := c.ws.Read(c.ctx)
		if err != nil {
			c.awaitInbox()
			c.close(websocket.StatusNormalClosure, "")
			return
		}
		if typ == websocket.MessageBinary {
			c.receiveFrame(data)
			continue
		}
		var msg agentproto.Message
		if err := json.Unmarshal(data, &msg); err != nil {
			c.log().Warn("unreadable agent message", "error", err)
			continue
		}
		if msg.Type == agentproto.TypeHeartbeat {
			c.report(msg, c.heartbeat(msg))
			continue
		}
		if !c.enqueue(msg) {
			return
		}
	}
}

// inboxGrace is how long a closed connection's messages already read may take to be handled.
const inboxGrace = 10 * time.Second

// awaitInbox waits for the messages the agent sent before its connection ended to be handled.
func (c *conn) awaitInbox() {
	c.mu.Lock()
	drained := c.drained
	c.mu.Unlock()
	if drained == nil {
		return
	}
	t := time.NewTimer(inboxGrace)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
	}
}

func (c *conn) report(msg agentproto.Message, err error) {
	if err != nil && c.ctx.Err() == nil {
		c.log().Warn("agent message failed", "type", msg.Type, "error", err)
	}
}

// enqueue hands msg to the inbox, waiting while it is full; false when the connection ended
// meanwhile.
func (c *conn) enqueue(msg agentproto.Message) bool {
	for {
		c.mu.Lock()
		if len(c.inbox) < maxInbox {
			c.inbox = append(c.inbox, msg)
			if !c.draining {
				c.draining, c.drained = true, make(chan struct{})
				go c.drain(c.drained)
			}
			c.mu.Unlock()
			return true
		}
		if c.room == nil {
			c.room = make(chan struct{})
		}
		room := c.room
		c.mu.Unlock()
		select {
		case <-room:
		case <-c.ctx.Done():
			return false
		}
	}
}

// drain handles the inbox's messages in order until it is empty, then closes drained.
func (c *conn) drain(drained chan struct{}) {
	defer close(drained)
	for {
		c.mu.Lock()
		if len(c.inbox) == 0 || c.ctx.Err() != nil {
			c.inbox, c.draining = nil, false
			c.mu.Unlock()
			return
		}
		msg := c.inbox[0]
		c.inbox = c.inbox[1:]
		if c.room != nil {
			close(c.room)
			c.room = nil
		}
		c.mu.Unlock()
		c.report(msg, c.handle(msg))
	}
}

func (c *conn) receiveFrame(frame []byte) {
	if c.streams == nil {
		c.log().Warn("binary message from an agent that announced no streams; ignored")
		return
	}
	if err := c.streams.Receive(frame); err != nil {
		c.log().Warn("unreadable stream frame from the agent; ignored", "error", err)
	}
}

// heartbeat records a heartbeat and acknowledges it.
func (c *conn) heartbeat(msg agentproto.Message) error {
	var hb agentproto.Heartbeat
	if err := json.Unmarshal(msg.Payload, &hb); err != nil {
		return err
	}
	// Not on the hub's workers: the heartbeat only waits here for its group's commit, which
	// the device service makes on a goroutine of its own.
	start := time.Now()
	waiting, err := c.hub.devices.Heartbeat(c.ctx, c.agent, hb)
	c.hub.heartbeatSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		return err
	}
	if waiting {
		c.wake()
	}
	return c.send(agentproto.TypeHeartbeatAck, msg.ID, struct{}{})
}

// handle handles a message other than a heartbeat.
func (c *conn) handle(msg agentproto.Message) error {
	switch msg.Type {
	case agentproto.TypeCallResult:
		var r agentproto.CallResult
		if err := json.Unmarshal(msg.Payload, &r); err != nil {
			return err
		}
		ok, err := false, context.Canceled
		c.hub.run(c.ctx, func() { ok, err = c.hub.devices.AnswerCall(c.ctx, c.agent, r) })
		if ok {
			c.hub.bus.Publish(c.ctx, chanCallDone, r.CallID)
		}
		return err
	default:
		fn, ok := c.hub.handlers[msg.Type]
		if !ok {
			return fmt.Errorf("unknown message type %q", msg.Type)
		}
		err := context.Canceled
		c.hub.run(c.ctx, func() { err = fn(c.ctx, c.agent, msg.Payload) })
		return err
	}
}
