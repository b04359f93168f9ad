package agenthub

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/nodes"
	"gale/internal/wire/streams"
)

// PathRelay is the internal endpoint through which another node opens a stream to an agent
// this node holds. It is not part of the API: only nodes, signing with the shared node key,
// may use it.
//
// The asking node sends a WebSocket upgrade naming the device, the stream kind and its args,
// signed (nodes.Registry.Sign). The holder opens the stream to its agent first, so a failure
// is an ordinary HTTP error answer with the hub's error code; then it upgrades, and the
// asking node opens one stream (package streams) over that socket, which the holder joins to
// the agent's. One socket per relayed stream: TCP's own flow control and the streams windows
// keep each relayed stream's memory bounded on both nodes.
const PathRelay = "/internal/v1/streams"

// Headers of a relay request, besides the nodes package's signature headers.
const (
	headerRelayDevice = "X-Gale-Stream-Device"
	headerRelayKind   = "X-Gale-Stream-Kind"
	headerRelayArgs   = "X-Gale-Stream-Args" // the args' JSON, base64url without padding
)

// relayOpenTimeout bounds the holder's wait for the asking node's OPEN after the upgrade.
const relayOpenTimeout = 10 * time.Second

// relayReadLimit is the largest message of a relay socket: a frame of the default size, with
// room to spare.
const relayReadLimit = 2 * streams.DefaultMaxFrameData

// relayFields are what a relay request's signature covers.
func relayFields(deviceID, kind, args string) []string {
	return []string{PathRelay, deviceID, kind, args}
}

// openRelayed opens the stream through the node that holds the device's agent.
func (h *Hub) openRelayed(ctx context.Context, deviceID, kind string, args any) (*streams.Stream, error) {
	reg := h.opts.Nodes
	if reg == nil {
		return nil, ErrNotConnected
	}
	holder, err := reg.Holder(ctx, deviceID)
	if errors.Is(err, nodes.ErrNoHolder) || (err == nil && holder.ID == reg.Self().ID) {
		return nil, ErrNotConnected
	}
	if err != nil {
		return nil, err
	}
	var rawArgs []byte
	if args != nil {
		if rawArgs, err = json.Marshal(args); err != nil {
			return nil, fmt.Errorf("marshal args: %w", err)
		}
	}
	encodedArgs := base64.RawURLEncoding.EncodeToString(rawArgs)
	header := http.Header{headerRelayDevice: {deviceID}, headerRelayKind: {kind}, headerRelayArgs: {encodedArgs}}
	reg.Sign(header, relayFields(deviceID, kind, encodedArgs)...)
	ws, resp, err := websocket.Dial(ctx, strings.TrimRight(holder.Address, "/")+PathRelay, &websocket.DialOptions{
		HTTPHeader: header, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, relayRefusal(holder, resp)
		}
		return nil, fmt.Errorf("reach node %s at %s: %w", holder.ID, holder.Address, err)
	}
	link := h.newRelayLink(ws, true, nil)
	go link.read()
	st, err := link.sess.Open(ctx, kind, nil)
	if err != nil {
		link.close()
		return nil, fmt.Errorf("relay through node %s: %w", holder.ID, streamError(err))
	}
	go link.closeWhenOver(st)
	return st, nil
}

// relayRefusal turns the holder's error answer back into the hub's error.
func relayRefusal(holder nodes.Node, resp *http.Response) error {
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	body, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(body, &env)
	for _, known := range []*apperr.Error{ErrNotConnected, ErrStreamsUnsupported, ErrTooManyStreams} {
		if env.Error.Code == known.Code {
			return known
		}
	}
	if env.Error.Code == ErrStreamRefused.Code {
		return &refusedError{reason: env.Error.Message}
	}
	return fmt.Errorf("node %s at %s answered %d %s: %s", holder.ID, holder.Address, resp.StatusCode, env.Error.Code, env.Error.Message)
}

// relayAnswer is the error answer of a relay request whose stream could not be opened; the
// asking node turns it back into the error with relayRefusal.
func relayAnswer(err error) *apperr.Error {
	var refused *refusedError
	if errors.As(err, &refused) {
		return &apperr.Error{Kind: ErrStreamRefused.Kind, Code: ErrStreamRefused.Code, Message: refused.reason}
	}
	if ae, ok := apperr.As(err); ok {
		return ae
	}
	return &apperr.Error{Kind: apperr.KindUpstream, Code: "STREAM_FAILED", Message: err.Error()}
}

// ServeRelay serves PathRelay: it opens the stream another node asks for to an agent this
// node holds, and relays it over the upgraded socket.
func (h *Hub) ServeRelay(w http.ResponseWriter, r *http.Request) {
	reg := h.opts.Nodes
	deviceID, kind, encodedArgs := r.Header.Get(headerRelayDevice), r.Header.Get(headerRelayKind), r.Header.Get(headerRelayArgs)
	if reg == nil {
		httpapi.WriteError(w, apperr.NotFound("relay endpoint"))
		return
	}
	node, err := reg.Verify(r.Context(), r.Header, relayFields(deviceID, kind, encodedArgs)...)
	if errors.Is(err, nodes.ErrUnauthenticated) {
		h.logger.WarnContext(r.Context(), "relay request refused", "reason", err)
		httpapi.WriteError(w, &apperr.Error{Kind: apperr.KindUnauthenticated, Code: apperr.CodeUnauthorized,
			Message: "not signed by a node of this installation"})
		return
	}
	if err != nil {
		h.logger.ErrorContext(r.Context(), "relay request not checked", "error", err)
		httpapi.WriteError(w, &apperr.Error{Kind: apperr.KindInternal, Code: apperr.CodeInternal, Message: "internal error"})
		return
	}
	args, err := base64.RawURLEncoding.DecodeString(encodedArgs)
	if err != nil || (len(args) > 0 && !json.Valid(args)) {
		httpapi.WriteError(w, apperr.Invalid(headerRelayArgs, "must be JSON, base64url-encoded"))
		return
	}
	c := h.conn(deviceID)
	if c == nil {
		httpapi.WriteError(w, ErrNotConnected)
		return
	}
	var rawArgs any
	if len(args) > 0 {
		rawArgs = json.RawMessage(args)
	}
	agentStream, err := c.openStream(r.Context(), kind, rawArgs)
	if err != nil {
		httpapi.WriteError(w, relayAnswer(err))
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		agentStream.Close()
		return
	}
	started := make(chan struct{})
	var once sync.Once
	var link *relayLink
	link = h.newRelayLink(ws, false, func(string, json.RawMessage) (streams.Handler, error) {
		accepted := false
		once.Do(func() { accepted = true; close(started) })
		if !accepted {
			return nil, errors.New("one stream per relay connection")
		}
		return func(_ context.Context, st *streams.Stream) {
			go link.closeWhenOver(st)
			join(st, agentStream, func() {
				// The asking node learns that the agent left, as it would on its own
				// connection, rather than of a stream merely cancelled.
				if errors.Is(context.Cause(agentStream.Context()), ErrNotConnected) {
					link.closeWith(websocket.StatusGoingAway, ErrNotConnected.Code)
				}
				agentStream.Close()
				st.Close()
			})
		}, nil
	})
	h.logger.DebugContext(r.Context(), "relaying a stream", "fromNode", node, "deviceId", deviceID, "kind", kind)
	go func() {
		select {
		case <-started:
		case <-time.After(relayOpenTimeout):
			agentStream.Close()
			link.close()
		}
	}()
	link.read()
}

// Frame types of the streams wire protocol (see package streams) that end a stream's
// directions: the relay watches for them to know when its socket may close.
const (
	frameFin   = 5
	frameReset = 6
)

// relayLink is one node-to-node socket carrying one stream.
type relayLink struct {
	hub  *Hub
	ws   *websocket.Conn
	sess *streams.Session

	mu                        sync.Mutex
	sentFin, receivedFin, end bool          // what crossed the wire; end: a RESET did
	over                      chan struct{} // closed once the stream is over on the wire
	closeOnce                 sync.Once
}

func (h *Hub) newRelayLink(ws *websocket.Conn, initiator bool, accept func(string, json.RawMessage) (streams.Handler, error)) *relayLink {
	ws.SetReadLimit(relayReadLimit)
	l := &relayLink{hub: h, ws: ws, over: make(chan struct{})}
	l.sess = streams.NewSession(l.send, streams.Options{Initiator: initiator, MaxStreams: 1, Accept: accept, Logger: h.logger})
	h.relays.Add(1)
	return l
}

func (l *relayLink) send(ctx context.Context, frame []byte) error {
	if err := l.ws.Write(ctx, websocket.MessageBinary, frame); err != nil {
		return err
	}
	l.saw(frame[0], true)
	return nil
}

// saw notes a frame that crossed the wire. The stream is over on the wire once both FINs, or
// a RESET, did: nothing more needs the socket, though the reader may not have read all yet.
func (l *relayLink) saw(typ byte, sent bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case typ == frameFin && sent:
		l.sentFin = true
	case typ == frameFin:
		l.receivedFin = true
	case typ == frameReset:
		l.end = true
	default:
		return
	}
	if l.end || (l.sentFin && l.receivedFin) {
		select {
		case <-l.over:
		default:
			close(l.over)
		}
	}
}

// read hands the socket's frames to the session until the socket closes. A socket lost
// before the stream was over fails the stream; once it was over, the stream stays readable
// to its end.
func (l *relayLink) read() {
	for {
		typ, frame, err := l.ws.Read(context.Background())
		if err != nil {
			select {
			case <-l.over:
			default:
				if websocket.CloseStatus(err) == websocket.StatusGoingAway && strings.Contains(err.Error(), ErrNotConnected.Code) {
					err = errAgentDisconnected
				} else {
					err = fmt.Errorf("relay connection lost: %w", err)
				}
				l.sess.Close(err)
				l.close()
			}
			return
		}
		if typ != websocket.MessageBinary || len(frame) == 0 {
			continue
		}
		if err := l.sess.Receive(frame); err != nil {
			l.hub.logger.Warn("unreadable frame on a relay connection; ignored", "error", err)
			continue
		}
		l.saw(frame[0], false)
	}
}

// closeWhenOver closes the socket once st ended and its last frames crossed the wire: closing
// at the stream's end alone could drop a FIN still waiting to be sent.
func (l *relayLink) closeWhenOver(st *streams.Stream) {
	<-st.Context().Done()
	select {
	case <-l.over:
	case <-time.After(relayOpenTimeout):
	}
	l.close()
}

func (l *relayLink) close() { l.closeWith(websocket.StatusNormalClosure, "") }

// closeWith closes the socket with a status and reason the other node reads, and the session.
func (l *relayLink) closeWith(code websocket.StatusCode, reason string) {
	l.closeOnce.Do(func() {
		l.ws.Close(code, reason)
		l.sess.Close(nil)
		l.hub.relays.Add(-1)
	})
}

// join relays a and b to each other until both directions ended, passing each FIN on; a
// failure of either direction calls abort, once, which must end both streams.
func join(a, b *streams.Stream, abort func()) {
	var once sync.Once
	failed := func() { once.Do(abort) }
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(b, a, failed)
	}()
	pipe(a, b, failed)
	<-done
	a.Close()
	b.Close()
}

// pipe copies src to dst, then half-closes dst.
func pipe(dst, src *streams.Stream, failed func()) {
	if _, err := io.Copy(dst, src); err != nil {
		failed()
		return
	}
	_ = dst.CloseWrite()
}
