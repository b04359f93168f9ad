package systemtools

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"gale/internal/agenthub"
	"gale/internal/agentproto"
	"gale/internal/apperr"
	"gale/internal/devices"
	"gale/internal/httpapi"
	"gale/internal/streams"
)

// MaxStreamedUploadBytes bounds an upload sent as a raw body: the bytes flow to the agent as
// they arrive, so the limit guards the device's disk, not the server's memory.
const MaxStreamedUploadBytes = 10 << 30

// openFileStream opens a file stream to the device's agent. ok is false when the agent
// cannot (it predates streams, or these kinds): the caller then falls back to the calls.
func (s *Service) openFileStream(ctx context.Context, deviceID, kind string, args any) (st *streams.Stream, ok bool, err error) {
	st, err = s.agents.OpenStream(ctx, deviceID, kind, args)
	if errors.Is(err, agenthub.ErrStreamsUnsupported) || errors.Is(err, agenthub.ErrStreamRefused) {
		return nil, false, nil
	}
	return st, err == nil, err
}

// readHeader reads the agent's next header line, within timeout unless it is zero, and
// answers its error as the API's.
func readHeader(r *bufio.Reader, st *streams.Stream, timeout time.Duration) (agentproto.FileStreamHeader, error) {
	if timeout > 0 {
		_ = st.SetReadDeadline(time.Now().Add(timeout))
		defer st.SetReadDeadline(time.Time{})
	}
	var h agentproto.FileStreamHeader
	line, err := r.ReadBytes('\n')
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return h, &apperr.Error{Kind: apperr.KindTimeout, Code: "AGENT_TIMEOUT", Message: "the agent did not answer in time"}
		}
		return h, &apperr.Error{Kind: apperr.KindUpstream, Code: agentproto.ErrFailed, Message: "the transfer broke off: " + err.Error()}
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return h, &apperr.Error{Kind: apperr.KindUpstream, Code: agentproto.ErrFailed, Message: "the agent's answer was unreadable"}
	}
	if h.Error != nil {
		return h, agentError(h.Error)
	}
	return h, nil
}

// agentError turns an agent's refusal into the API's error, as the hub does for calls.
func agentError(e *agentproto.CallError) error {
	switch e.Code {
	case agentproto.ErrNotFound:
		return &apperr.Error{Kind: apperr.KindNotFound, Code: apperr.CodeNotFound, Message: e.Message}
	case agentproto.ErrInvalid:
		return &apperr.Error{Kind: apperr.KindInvalid, Code: apperr.CodeValidation, Message: e.Message}
	case agentproto.ErrNotSupported:
		return &apperr.Error{Kind: apperr.KindInvalid, Code: agentproto.ErrNotSupported, Message: e.Message}
	case agentproto.ErrInsufficientSpace:
		return &apperr.Error{Kind: apperr.KindConflict, Code: agentproto.ErrInsufficientSpace, Message: e.Message}
	default:
		return &apperr.Error{Kind: apperr.KindUpstream, Code: agentproto.ErrFailed, Message: "the operation failed on the device: " + e.Message}
	}
}

// streamDownload starts a download through a file.read stream. The agent's header decides
// the answer's headers; the bytes then flow from the stream into the response, and the audit
// entry is written once they did, or broke off. ok is false when the agent has no file
// streams.
func (s *Service) streamDownload(ctx context.Context, d devices.Device, path, name string) (out *downloadOutput, ok bool, err error) {
	audit := map[string]any{"path": path}
	st, ok, err := s.openFileStream(ctx, d.ID, agentproto.StreamFileRead, map[string]any{"path": path})
	if err != nil {
		return nil, true, s.record(ctx, d, agentproto.MethodFileDownload, audit, err)
	}
	if !ok {
		return nil, false, nil
	}
	r := bufio.NewReaderSize(st, 4<<10)
	h, err := readHeader(r, st, transferTimeout)
	if err != nil {
		st.Close()
		return nil, true, s.record(ctx, d, agentproto.MethodFileDownload, audit, err)
	}
	out = &downloadOutput{ContentType: "application/octet-stream", Checksum: h.SHA256,
		ContentDisposition: attachment(name)}
	if h.SizeBytes != nil && *h.SizeBytes >= 0 {
		out.ContentLength = strconv.FormatInt(*h.SizeBytes, 10)
	}
	out.Body = func(hctx huma.Context) {
		defer st.Close()
		// A client that goes away ends the transfer at once rather than at the next write.
		stop := context.AfterFunc(hctx.Context(), func() { st.Close() })
		defer stop()
		n, err := io.CopyBuffer(hctx.BodyWriter(), r, make([]byte, 64<<10))
		if err == nil && h.SizeBytes != nil && *h.SizeBytes >= 0 && n != *h.SizeBytes {
			err = fmt.Errorf("the agent sent %d of %d bytes", n, *h.SizeBytes)
		}
		audit["sizeBytes"] = n
		if err != nil {
			err = &apperr.Error{Kind: apperr.KindUpstream, Code: agentproto.ErrFailed, Message: "the transfer broke off: " + err.Error()}
		}
		_ = s.record(context.WithoutCancel(hctx.Context()), d, agentproto.MethodFileDownload, audit, err)
		if err != nil {
			// The status is sent: only a cut connection tells the client the file is incomplete.
			panic(http.ErrAbortHandler)
		}
	}
	return out, true, nil
}

// streamUpload writes body to the device through a file.write stream and answers the new
// file's entry; args.SizeBytes, when set, is the body's length. ok is false when the agent
// has no file streams; body is untouched then.
func (s *Service) streamUpload(ctx context.Context, d devices.Device, args agentproto.FileWriteArgs, body io.Reader) (e agentproto.FileEntry, ok bool, err error) {
	audit := map[string]any{"path": args.Path, "overwrite": args.Overwrite}
	if args.SizeBytes != nil {
		audit["sizeBytes"] = *args.SizeBytes
	}
	st, ok, err := s.openFileStream(ctx, d.ID, agentproto.StreamFileWrite, args)
	if err != nil {
		return e, true, s.record(ctx, d, agentproto.MethodFileUpload, audit, err)
	}
	if !ok {
		return e, false, nil
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { st.Close() })
	defer stop()
	r := bufio.NewReaderSize(st, 4<<10)
	if _, err := readHeader(r, st, defaultTimeout); err != nil {
		return e, true, s.record(ctx, d, agentproto.MethodFileUpload, audit, err)
	}
	sent := make(chan error, 1)
	go func() {
		_, err := io.CopyBuffer(st, body, make([]byte, 64<<10))
		if err != nil {
			// Without FIN the agent takes the transfer for broken and keeps nothing.
			st.Close()
			sent <- err
			return
		}
		sent <- st.CloseWrite()
	}()
	// The result comes after the bytes, however long they take, or early when the agent gave
	// up (a full disk); a client or agent that goes away ends the wait.
	result, err := readHeader(r, st, 0)
	st.Close()
	if sendErr := <-sent; sendErr != nil {
		// The request body failed first: the agent's answer only says the stream was cut.
		err = sendErr
		if _, ok := apperr.As(sendErr); !ok {
			err = apperr.BadRequest(apperr.CodeValidation, "reading the request body failed: "+sendErr.Error())
		}
	}
	if err != nil {
		return e, true, s.record(ctx, d, agentproto.MethodFileUpload, audit, err)
	}
	if result.SizeBytes != nil {
		audit["sizeBytes"] = *result.SizeBytes
	}
	audit["sha256"] = result.SHA256
	if result.Entry != nil {
		e = *result.Entry
	}
	return e, true, s.record(ctx, d, agentproto.MethodFileUpload, audit, nil)
}

// attachment is the Content-Disposition of a download named name.
func attachment(name string) string { return "attachment; filename=" + strconv.Quote(name) }

// uploadJSON writes the file of a JSON upload: streamed to the agent as its base64 is
// decoded, or passed on in a call to an agent without file streams.
func (s *Service) uploadJSON(ctx context.Context, d devices.Device, in *uploadInput) (agentproto.FileEntry, error) {
	if in.Body == nil {
		return agentproto.FileEntry{}, apperr.Invalid("body", "send a JSON body, or the raw bytes as application/octet-stream")
	}
	b := in.Body
	if base64.StdEncoding.DecodedLen(len(b.Content)) > agentproto.MaxFileUploadBytes+2 {
		return agentproto.FileEntry{}, apperr.Invalid("content", "the file is larger than 50 MiB")
	}
	content := base64.NewDecoder(base64.StdEncoding, strings.NewReader(b.Content))
	e, streamed, err := s.streamUpload(ctx, d, agentproto.FileWriteArgs{Path: b.Path, Mode: b.Mode, Overwrite: b.Overwrite}, content)
	if streamed {
		return e, err
	}
	args := agentproto.FileUploadArgs{Path: b.Path, Content: b.Content, Overwrite: b.Overwrite, Mode: b.Mode}
	err = s.act(ctx, d.ID, agentproto.MethodFileUpload, args, &e, transferTimeout)
	return e, err
}

// uploadRaw writes the file of a raw upload: streamed to the agent as it arrives, or, for an
// agent without file streams, read whole (at most 50 MiB) and passed on in a call.
func (s *Service) uploadRaw(ctx context.Context, d devices.Device, in *uploadInput, raw httpapi.RawBody) (agentproto.FileEntry, error) {
	if in.Path == "" {
		return agentproto.FileEntry{}, apperr.Invalid("path", "a raw upload names its file in the query parameter path")
	}
	args := agentproto.FileWriteArgs{Path: in.Path, Mode: in.Mode, Overwrite: in.Overwrite}
	if raw.Size >= 0 {
		args.SizeBytes = &raw.Size
	}
	e, streamed, err := s.streamUpload(ctx, d, args, raw.Reader)
	if streamed {
		return e, err
	}
	data, err := io.ReadAll(io.LimitReader(raw.Reader, agentproto.MaxFileUploadBytes+1))
	if err != nil {
		return e, apperr.BadRequest(apperr.CodeValidation, "reading the request body failed: "+err.Error())
	}
	if len(data) > agentproto.MaxFileUploadBytes {
		return e, &apperr.Error{Kind: apperr.KindTooLarge, Code: "PAYLOAD_TOO_LARGE",
			Message: "the device's agent predates file streams and takes at most 50 MiB; update the agent"}
	}
	call := agentproto.FileUploadArgs{Path: in.Path, Content: base64.StdEncoding.EncodeToString(data), Overwrite: in.Overwrite, Mode: in.Mode}
	err = s.act(ctx, d.ID, agentproto.MethodFileUpload, call, &e, transferTimeout)
	return e, err
}
