// Package streams multiplexes ordered, flow-controlled, bidirectional byte streams over one
// message-oriented connection: the agent's WebSocket to the server. A terminal session, a
// file transfer or a proxied HTTP connection each ride on a Stream, which is a net.Conn.
// Both the server and the agent use the package, so it depends on the standard library only.
//
// The package never touches a socket. A Session is given a send function that writes one
// binary message, and is fed every binary message that arrives through Session.Receive.
// Receive never waits for the application or for send, so a stream nobody reads cannot stall
// the connection's read loop, nor can a slow connection. send is called by one goroutine at a
// time.
//
// # Frames
//
// A frame is one binary message: byte 0 is the frame type, bytes 1 to 4 the stream ID (uint32,
// big-endian), the rest the payload. This is a wire protocol: it only ever grows compatibly.
//
//	type  name    payload
//	1     OPEN    JSON {"kind": string, "args": any JSON (optional), "window": uint32}
//	2     ACCEPT  JSON {"window": uint32}
//	3     DATA    the bytes: at least 1, at most the sender's MaxFrameData and its credit
//	4     WINDOW  uint32 big-endian: credit granted, in bytes, at least 1
//	5     FIN     empty: the sender will send no more DATA on the stream (a half close)
//	6     RESET   JSON {"code": string, "message": string}: the stream is aborted both ways
//
// The side created with Options.Initiator (the server) opens odd stream IDs, the other side
// even ones, so both may open streams without agreeing first. Each side opens IDs in
// increasing order, from 1 or 2, and never reuses one within a session: a frame for a stream
// that has ended is told apart from one for a stream that never existed. The first is a late
// frame and is ignored; the second is answered with RESET protocol_error.
//
// A stream starts with OPEN, naming a kind (what to run: a terminal, a proxied connection,
// ...) and its args. The other side answers ACCEPT, or RESET with code refused (unknown kind,
// or refused by Options.Accept) or too_many_streams. DATA, WINDOW and FIN flow only after
// ACCEPT. Each direction ends with its FIN; once both have, and the data is read, the
// stream is over. RESET ends both directions at once and discards what was not read; it is
// never answered. Its codes are the Code constants: refused, too_many_streams,
// protocol_error, cancelled (closed by the application before the end), closed (the
// sender's session is shutting down); a receiver takes unknown codes as they are.
//
// # Flow control
//
// Each direction of a stream has a window: how many bytes the sender may send that the
// receiver has not read yet. OPEN and ACCEPT carry each side's initial window, its
// Options.Window: the credit the other side starts with. Each DATA frame uses up its length
// in credit; a writer without credit waits. The receiver buffers what arrives and gives
// credit back with WINDOW as the application reads, once at least half the window was read,
// never earlier; so a stream is never asked to buffer more than its window, and a peer
// sending beyond its credit gets the stream reset with protocol_error. A reader that stops
// reading stops its writer with at most a window buffered: a session's memory is bounded by
// MaxStreams × Window.
//
// Writes are cut into frames of at most MaxFrameData bytes and a writer holds the connection
// for one frame at a time, so a large write does not hold up other streams; a writer waiting
// for credit does not hold the connection at all, and frames that Receive and Read must
// answer with (WINDOW, RESET) go out meanwhile.
package streams
