// Package desktop is the agent's side of a remote desktop: a WebRTC peer (pion) per remote
// session, set up by the signalling calls the server relays (agentproto.MethodDesktop*). The
// peer accepts the viewer's data channels and echoes what arrives on the "control" channel,
// so a viewer can see the connection work. It carries no screen: capture is not implemented
// by this agent, and the answer says so (and why: no display server on this host, or none yet
// supported), so the viewer shows a clear message instead of a black screen.
package desktop

import (
	"context"
	"encoding/json"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/pion/webrtc/v4"

	"gale/internal/agent/capability"
	"gale/internal/wire/agentproto"
)

// ControlChannel is the data channel whose messages the agent echoes.
const ControlChannel = "control"

// Limits: how many peers the agent keeps at once, how long one may take to connect, and how
// long the agent gathers its ICE candidates before answering with those it has.
const (
	maxPeers       = 4
	connectTimeout = 2 * time.Minute
	gatherTimeout  = 5 * time.Second
)

// Desktop keeps the agent's WebRTC peers, by remote session, and reports them to the server
// (agentproto.TypeDesktopState).
type Desktop struct {
	mu        sync.Mutex
	peers     map[string]*webrtc.PeerConnection
	connected map[string]bool
	send      capability.Messenger
}

// New returns a Desktop with no peers.
func New() *Desktop {
	return &Desktop{peers: map[string]*webrtc.PeerConnection{}, connected: map[string]bool{}, send: func(string, any) {}}
}

// Register registers the signalling calls with reg, and the reports of connected peers.
func (d *Desktop) Register(reg *capability.Registry) {
	reg.Call(agentproto.MethodDesktopOffer, d.offer)
	reg.Call(agentproto.MethodDesktopAnswer, d.answer)
	reg.Call(agentproto.MethodDesktopICE, d.ice)
	reg.Call(agentproto.MethodDesktopClose, d.close)
	d.send = reg.Send
	reg.OnStart(func(ctx context.Context, _ capability.Reporter) {
		go d.reportConnected(ctx, agentproto.DesktopStateEvery)
	})
}

// reportConnected tells the server every interval which sessions have a connected peer, while
// there are any, so it keeps those sessions and ends the ones the agent no longer serves.
func (d *Desktop) reportConnected(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.mu.Lock()
		ids := make([]string, 0, len(d.connected))
		for id := range d.connected {
			ids = append(ids, id)
		}
		d.mu.Unlock()
		if len(ids) > 0 {
			d.send(agentproto.TypeDesktopState, agentproto.DesktopState{Connected: ids})
		}
	}
}

func invalid(msg string) error {
	return &agentproto.CallError{Code: agentproto.ErrInvalid, Message: msg}
}

func decode(raw json.RawMessage, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return invalid("malformed arguments: " + err.Error())
	}
	return nil
}

// captureNote says why the screen is not shared.
func captureNote() string {
	if runtime.GOOS == "linux" && os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return "screen capture is not available on this host: it has no display server (neither DISPLAY nor WAYLAND_DISPLAY is set)"
	}
	return "screen capture is not available on this host: this agent cannot capture its display yet"
}

func describe(desc *webrtc.SessionDescription) agentproto.DesktopDescription {
	return agentproto.DesktopDescription{Type: desc.Type.String(), SDP: desc.SDP, ScreenCapture: agentproto.CaptureUnavailable,
		CaptureNote: captureNote()}
}

func (d *Desktop) peer(sessionID string) *webrtc.PeerConnection {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peers[sessionID]
}

func (d *Desktop) offer(ctx context.Context, raw json.RawMessage) (any, error) {
	var a agentproto.DesktopOfferArgs
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	if a.SessionID == "" {
		return nil, invalid("sessionId is required")
	}
	if a.SDP == "" {
		if !a.ICERestart {
			return nil, invalid("send an SDP offer, or ask for an ICE restart")
		}
		return d.restart(ctx, a.SessionID)
	}
	pc := d.peer(a.SessionID)
	created := pc == nil
	if created {
		var err error
		if pc, err = d.newPeer(a.SessionID, a.ICEServers); err != nil {
			return nil, err
		}
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: a.SDP}); err != nil {
		if created {
			d.drop(a.SessionID, pc, "")
		}
		return nil, invalid("the offer was refused: " + err.Error())
	}
	answer, err := pc.CreateAnswer(nil)
	if err != nil {
		return nil, err
	}
	return d.settle(ctx, pc, answer)
}

// settle sets the agent's own description and answers it once its candidates are gathered
// (or gatherTimeout passed), so the viewer needs no trickle from the agent.
func (d *Desktop) settle(ctx context.Context, pc *webrtc.PeerConnection, desc webrtc.SessionDescription) (any, error) {
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(desc); err != nil {
		return nil, err
	}
	select {
	case <-gathered:
	case <-time.After(gatherTimeout):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return describe(pc.LocalDescription()), nil
}

func (d *Desktop) restart(ctx context.Context, sessionID string) (any, error) {
	pc := d.peer(sessionID)
	if pc == nil {
		return nil, &agentproto.CallError{Code: agentproto.ErrNotFound, Message: "no desktop connection of this session to restart"}
	}
	offer, err := pc.CreateOffer(&webrtc.OfferOptions{ICERestart: true})
	if err != nil {
		return nil, invalid("an ICE restart cannot be offered now: " + err.Error())
	}
	return d.settle(ctx, pc, offer)
}

func (d *Desktop) newPeer(sessionID string, servers []agentproto.ICEServer) (*webrtc.PeerConnection, error) {
	cfg := webrtc.Configuration{}
	for _, s := range servers {
		cfg.ICEServers = append(cfg.ICEServers, webrtc.ICEServer{URLs: s.URLs, Username: s.Username, Credential: s.Credential})
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.peers) >= maxPeers {
		return nil, &agentproto.CallError{Code: agentproto.ErrFailed, Message: "this agent already serves its most remote desktops; end one first"}
	}
	pc, err := webrtc.NewPeerConnection(cfg)
	if err != nil {
		return nil, err
	}
	pc.OnDataChannel(func(dc *webrtc.DataChannel) {
		if dc.Label() != ControlChannel {
			return
		}
		dc.OnMessage(func(m webrtc.DataChannelMessage) {
			if m.IsString {
				_ = dc.SendText(string(m.Data))
			} else {
				_ = dc.Send(m.Data)
			}
		})
	})
	connected := make(chan struct{})
	var once sync.Once
	pc.OnConnectionStateChange(func(st webrtc.PeerConnectionState) {
		switch st {
		case webrtc.PeerConnectionStateConnected:
			once.Do(func() { close(connected) })
			d.mu.Lock()
			if d.peers[sessionID] == pc {
				d.connected[sessionID] = true
			}
			d.mu.Unlock()
		case webrtc.PeerConnectionStateFailed:
			d.drop(sessionID, pc, "the connection to the viewer failed")
		case webrtc.PeerConnectionStateClosed:
			d.drop(sessionID, pc, "the viewer closed the connection")
		}
	})
	// A viewer that never connects does not hold a peer for good.
	time.AfterFunc(connectTimeout, func() {
		select {
		case <-connected:
		default:
			d.drop(sessionID, pc, "no viewer connected within 2 minutes")
		}
	})
	d.peers[sessionID] = pc
	return pc, nil
}

// drop forgets and closes pc if it is still the session's peer, and tells the server why; an
// empty reason tells nothing (a refused offer leaves the session to the viewer's next one).
func (d *Desktop) drop(sessionID string, pc *webrtc.PeerConnection, reason string) {
	d.mu.Lock()
	mine := d.peers[sessionID] == pc
	if mine {
		delete(d.peers, sessionID)
		delete(d.connected, sessionID)
	}
	d.mu.Unlock()
	if mine && reason != "" {
		d.send(agentproto.TypeDesktopState, agentproto.DesktopState{Closed: []agentproto.DesktopClosed{{SessionID: sessionID, Reason: reason}}})
	}
	go pc.Close()
}

func (d *Desktop) answer(_ context.Context, raw json.RawMessage) (any, error) {
	var a agentproto.DesktopAnswerArgs
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	pc := d.peer(a.SessionID)
	if pc == nil {
		return nil, &agentproto.CallError{Code: agentproto.ErrNotFound, Message: "no desktop connection of this session"}
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: a.SDP}); err != nil {
		return nil, invalid("the answer was refused (the agent has no offer waiting for one?): " + err.Error())
	}
	return agentproto.Done{OK: true}, nil
}

func (d *Desktop) ice(_ context.Context, raw json.RawMessage) (any, error) {
	var a agentproto.DesktopICEArgs
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	pc := d.peer(a.SessionID)
	if pc == nil {
		return nil, &agentproto.CallError{Code: agentproto.ErrNotFound, Message: "no desktop connection of this session: send the offer first"}
	}
	if err := pc.AddICECandidate(webrtc.ICECandidateInit{Candidate: a.Candidate, SDPMid: a.SDPMid, SDPMLineIndex: a.SDPMLineIndex}); err != nil {
		return nil, invalid("the candidate was refused: " + err.Error())
	}
	return agentproto.Done{OK: true}, nil
}

func (d *Desktop) close(_ context.Context, raw json.RawMessage) (any, error) {
	var a agentproto.DesktopSessionArgs
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	if pc := d.peer(a.SessionID); pc != nil {
		d.drop(a.SessionID, pc, "the session was ended")
	}
	return agentproto.Done{OK: true}, nil
}
