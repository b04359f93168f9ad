package streams

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// Frame types, byte 0 of every frame. The values are part of the protocol: never renumber.
const (
	frameOpen   byte = 1
	frameAccept byte = 2
	frameData   byte = 3
	frameWindow byte = 4
	frameFin    byte = 5
	frameReset  byte = 6
)

// headerLen is the size of the frame header: the type byte and the big-endian stream ID.
const headerLen = 5

// Reset codes, carried by RESET frames and exposed by ResetError.Code.
const (
	// CodeRefused: the kind is unknown or Options.Accept refused the stream.
	CodeRefused = "refused"
	// CodeTooManyStreams: the accepting session already had MaxStreams open streams.
	CodeTooManyStreams = "too_many_streams"
	// CodeProtocolError: the peer broke the protocol on this stream (more DATA than its
	// credit, DATA after FIN, a frame for a stream that never existed, ...).
	CodeProtocolError = "protocol_error"
	// CodeCancelled: the application closed the stream, or gave up opening it, before the
	// end.
	CodeCancelled = "cancelled"
	// CodeClosed: the sender's session is shutting down. Session.Close does not send it, as
	// it runs when the connection is already gone; the code is reserved for a peer that ends
	// its streams while its connection stays up.
	CodeClosed = "closed"
)

// ResetError is how a stream fails when it was reset: by the peer (RESET frame), for a
// protocol violation of the peer, or when opening it was refused. Open returns it, and so
// do Read and Write of a reset stream.
type ResetError struct {
	Code    string // one of the Code constants, or another code sent by the peer
	Message string // human-readable detail, may be empty
}

func (e *ResetError) Error() string {
	if e.Message == "" {
		return "streams: stream reset: " + e.Code
	}
	return "streams: stream reset: " + e.Code + ": " + e.Message
}

// openPayload is the JSON payload of OPEN.
type openPayload struct {
	Kind   string          `json:"kind"`
	Args   json.RawMessage `json:"args,omitempty"`
	Window uint32          `json:"window"`
}

// acceptPayload is the JSON payload of ACCEPT.
type acceptPayload struct {
	Window uint32 `json:"window"`
}

// resetPayload is the JSON payload of RESET.
type resetPayload struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// newFrame builds a frame; the payload is copied.
func newFrame(typ byte, id uint32, payload []byte) []byte {
	f := make([]byte, headerLen, headerLen+len(payload))
	f[0] = typ
	binary.BigEndian.PutUint32(f[1:headerLen], id)
	return append(f, payload...)
}

// newJSONFrame builds a frame with a JSON payload. The payload types above always marshal.
func newJSONFrame(typ byte, id uint32, payload any) []byte {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(fmt.Sprintf("streams: marshal frame payload: %v", err))
	}
	return newFrame(typ, id, b)
}

func newWindowFrame(id uint32, increment uint32) []byte {
	return newFrame(frameWindow, id, binary.BigEndian.AppendUint32(nil, increment))
}

func newResetFrame(id uint32, code, message string) []byte {
	return newJSONFrame(frameReset, id, resetPayload{Code: code, Message: message})
}

// windowIncrement decodes a WINDOW payload; ok is false unless it is 4 bytes and not zero.
func windowIncrement(payload []byte) (increment uint32, ok bool) {
	if len(payload) != 4 {
		return 0, false
	}
	increment = binary.BigEndian.Uint32(payload)
	return increment, increment > 0
}

// parseHeader splits a frame into its type, stream ID and payload (which aliases frame).
func parseHeader(frame []byte) (typ byte, id uint32, payload []byte, err error) {
	if len(frame) < headerLen {
		return 0, 0, nil, fmt.Errorf("%w: %d bytes, shorter than the header", ErrMalformedFrame, len(frame))
	}
	typ = frame[0]
	if typ < frameOpen || typ > frameReset {
		return 0, 0, nil, fmt.Errorf("%w: unknown frame type %d", ErrMalformedFrame, typ)
	}
	return typ, binary.BigEndian.Uint32(frame[1:headerLen]), frame[headerLen:], nil
}

// frameName names a frame type in log lines and protocol-error messages.
func frameName(typ byte) string {
	switch typ {
	case frameOpen:
		return "OPEN"
	case frameAccept:
		return "ACCEPT"
	case frameData:
		return "DATA"
	case frameWindow:
		return "WINDOW"
	case frameFin:
		return "FIN"
	case frameReset:
		return "RESET"
	}
	return fmt.Sprintf("type %d", typ)
}
