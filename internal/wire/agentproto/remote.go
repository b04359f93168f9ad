package agentproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// Remote sessions: a terminal is a stream of kind StreamTerminal carrying TermFrames; a
// remote desktop is WebRTC, whose signalling the server relays to the agent with the
// desktop calls below.

// StreamTerminal opens a PTY running a login shell on the device; args TerminalArgs. Both
// directions carry TermFrames. The agent's first frame is TermStarted, or TermError (the
// shell could not start, or the system has no PTYs) after which it closes the stream.
const StreamTerminal = "terminal"

// TerminalArgs are the args of StreamTerminal: the initial window size.
type TerminalArgs struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// Types of a TermFrame.
const (
	// TermData carries terminal bytes: keystrokes to the agent, output from it.
	TermData byte = 0
	// TermResize carries the new window size to the agent: cols then rows, two bytes each,
	// big-endian.
	TermResize byte = 1
	// TermStarted tells the server the shell runs; its payload names the shell.
	TermStarted byte = 2
	// TermError tells the server why there is no shell: a JSON CallError.
	TermError byte = 3
)

// MaxTermPayload bounds a TermFrame's payload: larger data is sent as several frames.
const MaxTermPayload = 32 << 10

// A TermFrame is a type byte, a two-byte big-endian payload length and the payload.
const termHeader = 3

// ErrTermFrame is the error of a malformed TermFrame.
var ErrTermFrame = errors.New("malformed terminal frame")

// WriteTermFrame writes one frame of typ with payload (at most MaxTermPayload bytes).
func WriteTermFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxTermPayload {
		return fmt.Errorf("%w: %d bytes of payload", ErrTermFrame, len(payload))
	}
	buf := make([]byte, termHeader+len(payload))
	buf[0] = typ
	binary.BigEndian.PutUint16(buf[1:], uint16(len(payload)))
	copy(buf[termHeader:], payload)
	_, err := w.Write(buf)
	return err
}

// WriteTermData writes b as TermData frames.
func WriteTermData(w io.Writer, b []byte) error {
	for len(b) > 0 {
		n := min(len(b), MaxTermPayload)
		if err := WriteTermFrame(w, TermData, b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// ResizePayload is the payload of a TermResize frame.
func ResizePayload(cols, rows uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, cols), rows)
}

// ParseResize reads a TermResize payload.
func ParseResize(p []byte) (cols, rows uint16, err error) {
	if len(p) != 4 {
		return 0, 0, fmt.Errorf("%w: a resize carries 4 bytes, not %d", ErrTermFrame, len(p))
	}
	return binary.BigEndian.Uint16(p), binary.BigEndian.Uint16(p[2:]), nil
}

// ReadTermFrame reads the next frame; its payload is valid until the next call with buf.
// io.EOF means the stream ended between frames.
func ReadTermFrame(r io.Reader, buf []byte) (typ byte, payload []byte, err error) {
	var h [termHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: cut in its header", ErrTermFrame)
		}
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint16(h[1:]))
	if n > MaxTermPayload {
		return 0, nil, fmt.Errorf("%w: %d bytes of payload", ErrTermFrame, n)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	payload = buf[:n]
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, fmt.Errorf("%w: cut in its payload: %v", ErrTermFrame, err)
	}
	return h[0], payload, nil
}

// Desktop signalling calls. Each names the remote session; the agent keeps one WebRTC peer
// per session.
const (
	// MethodDesktopOffer: DesktopOfferArgs → DesktopDescription. With an SDP offer the agent
	// answers it (a new peer, or a renegotiation of the session's); with ICERestart and no SDP
	// the agent offers an ICE restart of the session's peer, to be answered with
	// MethodDesktopAnswer.
	MethodDesktopOffer = "desktop.offer"
	// MethodDesktopAnswer: DesktopAnswerArgs → Done. The viewer's answer to the agent's offer.
	MethodDesktopAnswer = "desktop.answer"
	// MethodDesktopICE: DesktopICEArgs → Done. A trickled ICE candidate of the viewer.
	MethodDesktopICE = "desktop.ice"
	// MethodDesktopClose: DesktopSessionArgs → Done. Closes the session's peer, if any.
	MethodDesktopClose = "desktop.close"
)

// ICEServer is a STUN or TURN server a WebRTC peer may use, as RTCIceServer.
type ICEServer struct {
	URLs       []string `json:"urls"`
	Username   string   `json:"username,omitempty"`
	Credential string   `json:"credential,omitempty"`
}

// DesktopOfferArgs are the args of MethodDesktopOffer.
type DesktopOfferArgs struct {
	SessionID  string      `json:"sessionId"`
	SDP        string      `json:"sdp,omitempty"`
	ICERestart bool        `json:"iceRestart,omitempty"`
	ICEServers []ICEServer `json:"iceServers,omitempty"`
}

// Screen capture availability in a DesktopDescription.
const (
	CaptureAvailable   = "available"
	CaptureUnavailable = "unavailable"
)

// DesktopDescription is an SDP the agent made (type "answer" or "offer"); its candidates are
// in the SDP (the agent gathers them before answering). ScreenCapture says whether a video
// track carries the screen; CaptureNote why not.
type DesktopDescription struct {
	Type          string `json:"type"`
	SDP           string `json:"sdp"`
	ScreenCapture string `json:"screenCapture"`
	CaptureNote   string `json:"captureNote,omitempty"`
}

// DesktopAnswerArgs are the args of MethodDesktopAnswer.
type DesktopAnswerArgs struct {
	SessionID string `json:"sessionId"`
	SDP       string `json:"sdp"`
}

// DesktopICEArgs are the args of MethodDesktopICE, as RTCIceCandidateInit.
type DesktopICEArgs struct {
	SessionID     string  `json:"sessionId"`
	Candidate     string  `json:"candidate"`
	SDPMid        *string `json:"sdpMid,omitempty"`
	SDPMLineIndex *uint16 `json:"sdpMLineIndex,omitempty"`
}

// DesktopSessionArgs name a session (MethodDesktopClose).
type DesktopSessionArgs struct {
	SessionID string `json:"sessionId"`
}

// TypeDesktopState is the agent's report on its desktop connections (payload DesktopState),
// sent every DesktopStateEvery while it has connected ones, and at once when one closes, so
// the server ends sessions whose viewer went away and keeps the others alive.
const TypeDesktopState = "desktop_state"

// DesktopStateEvery is how often an agent with connected desktops reports them.
const DesktopStateEvery = 30 * time.Second

// DesktopState lists the sessions whose peer is connected, and those whose peer closed.
type DesktopState struct {
	Connected []string        `json:"connected,omitempty"`
	Closed    []DesktopClosed `json:"closed,omitempty"`
}

// DesktopClosed is a desktop peer the agent closed, and why.
type DesktopClosed struct {
	SessionID string `json:"sessionId"`
	Reason    string `json:"reason"`
}
