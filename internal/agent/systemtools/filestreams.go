package systemtools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"gale/internal/wire/agentproto"
	"gale/internal/wire/streams"
)

// The file streams move a whole file of any size between the server and the agent through a
// stream (package streams), never holding more than a copy buffer and the stream's window in
// memory; the calls files.download and files.upload, which carry the file base64 in one
// message, remain for servers that do not open streams. The protocol is agentproto's
// (StreamFileRead, StreamFileWrite).

// copyBufferSize is the copy buffer of a transfer: it, and the stream's window, are all the
// memory a transfer takes, whatever the file's size.
const copyBufferSize = 64 << 10

// unknownSize is the sizeBytes of a file that reports no size.
const unknownSize = -1

func (t *Tools) serveFileRead(_ context.Context, s *streams.Stream) {
	var a agentproto.FileReadArgs
	f, header, err := t.openForStream(s.Args(), &a)
	if err != nil {
		refuse(s, err)
		return
	}
	defer f.Close()
	if err := sendHeader(s, header); err != nil {
		return
	}
	body := io.NewSectionReader(f, a.Offset, 1<<62)
	if *header.SizeBytes == unknownSize {
		_, err = io.CopyBuffer(s, body, make([]byte, copyBufferSize))
	} else {
		// Send no more than announced even if the file grew since; a file that shrank ends
		// the copy early, and returning without FIN resets the stream.
		_, err = io.CopyBuffer(s, io.LimitReader(body, *header.SizeBytes), make([]byte, copyBufferSize))
		if err == nil && body.Size() < a.Offset+*header.SizeBytes {
			err = io.ErrUnexpectedEOF
		}
	}
	if err != nil {
		return
	}
	finish(s)
}

// openForStream checks a read's args and opens its file; the header announces the bytes from
// the offset, their SHA-256 read in a first pass so that it can lead the bytes.
func (t *Tools) openForStream(raw json.RawMessage, a *agentproto.FileReadArgs) (*os.File, agentproto.FileStreamHeader, error) {
	var header agentproto.FileStreamHeader
	if err := json.Unmarshal(raw, a); err != nil {
		return nil, header, invalid("malformed arguments: %v", err)
	}
	if a.Offset < 0 {
		return nil, header, invalid("offset must not be negative")
	}
	p, err := t.checkPath(a.Path)
	if err != nil {
		return nil, header, err
	}
	file, info, err := openRegular(p)
	if err != nil {
		return nil, header, err
	}
	size := int64(unknownSize)
	header.Mode = fmt.Sprintf("%04o", info.Mode().Perm())
	if info.Size() > 0 {
		size = max(info.Size()-a.Offset, 0)
		sum := sha256.New()
		if _, err := io.CopyBuffer(sum, io.NewSectionReader(file, a.Offset, size), make([]byte, copyBufferSize)); err != nil {
			file.Close()
			return nil, header, fileError(p, err)
		}
		header.SHA256 = hex.EncodeToString(sum.Sum(nil))
	}
	header.SizeBytes = &size
	return file, header, nil
}

func (t *Tools) serveFileWrite(_ context.Context, s *streams.Stream) {
	var a agentproto.FileWriteArgs
	if err := json.Unmarshal(s.Args(), &a); err != nil {
		refuse(s, invalid("malformed arguments: %v", err))
		return
	}
	if a.SizeBytes != nil && *a.SizeBytes < 0 {
		refuse(s, invalid("sizeBytes must not be negative"))
		return
	}
	target, err := t.prepareWrite(a.Path, a.Mode, a.Overwrite)
	if err == nil && a.SizeBytes != nil {
		err = t.checkSpace(target.path, *a.SizeBytes)
	}
	if err != nil {
		refuse(s, err)
		return
	}
	if err := sendHeader(s, agentproto.FileStreamHeader{}); err != nil {
		return
	}
	sum := sha256.New()
	in := &streamReader{r: s}
	n, err := target.write(expectSize(in, a.SizeBytes), sum)
	switch {
	case in.err != nil:
		return // the transfer broke off: nobody is left to answer, and write removed its file
	case err != nil:
		refuse(s, writeError(target.path, err))
		return
	}
	entry, err := target.entry()
	if err != nil {
		refuse(s, err)
		return
	}
	if sendHeader(s, agentproto.FileStreamHeader{SizeBytes: &n, SHA256: hex.EncodeToString(sum.Sum(nil)), Entry: &entry}) == nil {
		_ = s.CloseWrite()
	}
}

// streamReader remembers why reading the stream failed, which tells a transfer cut off by
// the peer from a write that failed on the device.
type streamReader struct {
	r   io.Reader
	err error
}

func (r *streamReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

// errSizeMismatch fails a write whose bytes do not add up to the sizeBytes announced.
var errSizeMismatch = errors.New("size mismatch")

// expectSize fails the read once r yields more or fewer bytes than want, when given.
func expectSize(r io.Reader, want *int64) io.Reader {
	if want == nil {
		return r
	}
	return &sizedReader{r: r, left: *want}
}

type sizedReader struct {
	r    io.Reader
	left int64
}

func (r *sizedReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.left -= int64(n)
	switch {
	case r.left < 0:
		return n, fmt.Errorf("%w: more bytes than announced", errSizeMismatch)
	case err == io.EOF && r.left > 0:
		return n, fmt.Errorf("%w: %d bytes fewer than announced", errSizeMismatch, r.left)
	}
	return n, err
}

// writeError names why writing a file failed; a short transfer is the sender's mistake.
func writeError(p string, err error) error {
	if errors.Is(err, errSizeMismatch) {
		return invalid("%s was not written: %v", p, err)
	}
	return fileError(p, err)
}

// sendHeader writes one header line.
func sendHeader(s io.Writer, h agentproto.FileStreamHeader) error {
	line, err := json.Marshal(h)
	if err != nil {
		return err
	}
	_, err = s.Write(append(line, '\n'))
	return err
}

// refuse answers err as an error header and ends the stream so that the server reads it.
func refuse(s *streams.Stream, err error) {
	if sendHeader(s, agentproto.FileStreamHeader{Error: callError(err)}) == nil {
		finish(s)
	}
}

// finish half-closes the stream and waits for the server's FIN: returning earlier would
// reset the stream, and the server would lose what it did not read yet. What the server
// still sends (the rest of an upload refused midway) is discarded.
func finish(s *streams.Stream) {
	if s.CloseWrite() == nil {
		_, _ = io.CopyBuffer(io.Discard, s, make([]byte, copyBufferSize))
	}
}

// callError is err as the agent's error of a call.
func callError(err error) *agentproto.CallError {
	var ce *agentproto.CallError
	if errors.As(err, &ce) {
		return ce
	}
	return &agentproto.CallError{Code: agentproto.ErrFailed, Message: err.Error()}
}
