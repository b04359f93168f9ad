package systemtools

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"gale/internal/domains/agenthub"
	"gale/internal/domains/devices"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/streams"
)

const (
	// MaxStreamedUploadBytes bounds an upload sent as a raw body: the bytes flow to the agent
	// as they arrive, so the limit guards the device's disk, not the server's memory.
	MaxStreamedUploadBytes = 10 << 30
	// MaxJSONUploadBodyBytes bounds the JSON body of a base64 upload: 50 MiB encoded, and
	// room for the other fields.
	MaxJSONUploadBodyBytes = agentproto.MaxFileUploadBytes*4/3 + 64<<10
)

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

// TransferOptions are what a caller of Download or Upload adds to the transfer.
type TransferOptions struct {
	// Mode and Overwrite are an upload's: the new file's octal permissions, and whether it
	// replaces an existing file.
	Mode      string
	Overwrite bool
	// MaxBytes, when positive, caps a download and a base64 upload: a file the agent says is
	// larger is refused with 413, and one of unknown size is cut off past it. A raw upload's
	// cap is its route's raw body limit (httpapi.Route.RawBodyBytes), which fails the body's
	// reader with 413.
	MaxBytes int64
	// Audit adds to the details of the transfer's audit entry (what it belongs to).
	Audit map[string]any
}

// DownloadOutput is the answer of a file download: the bytes as application/octet-stream.
type DownloadOutput struct {
	ContentType        string `header:"Content-Type"`
	ContentDisposition string `header:"Content-Disposition"`
	ContentLength      string `header:"Content-Length"`
	Checksum           string `header:"X-Checksum-Sha256"`
	Body               func(huma.Context)
}

// Download streams the file at path of the device to the caller: from the agent's file.read
// stream, or, from an agent without file streams, in one call (at most 50 MiB). The device
// must be in scope and its agent connected (503 AGENT_OFFLINE). The transfer is audited.
func (s *Service) Download(ctx context.Context, deviceID, path string, opts TransferOptions) (*DownloadOutput, error) {
	d, err := s.device(ctx, deviceID)
	if err != nil {
		return nil, err
	}
	name := path[strings.LastIndexAny(path, `/\`)+1:]
	if o, streamed, err := s.streamDownload(ctx, d, path, name, opts); streamed || err != nil {
		return o, err
	}
	var c agentproto.FileContent
	audit := map[string]any{"path": path}
	maps.Copy(audit, opts.Audit)
	err = s.call(ctx, d.ID, agentproto.MethodFileDownload, agentproto.PathArgs{Path: path}, &c, transferTimeout)
	var b []byte
	if err == nil {
		b, err = base64.StdEncoding.DecodeString(c.Content)
		audit["sizeBytes"] = len(b)
		switch {
		case err != nil:
			err = &apperr.Error{Kind: apperr.KindUpstream, Code: agentproto.ErrFailed, Message: "the agent sent an unreadable file"}
		case opts.MaxBytes > 0 && int64(len(b)) > opts.MaxBytes:
			err = fileTooLarge(int64(len(b)), opts.MaxBytes)
		}
	}
	if err := s.record(ctx, d, agentproto.MethodFileDownload, audit, err); err != nil {
		return nil, err
	}
	return &DownloadOutput{ContentType: "application/octet-stream", Checksum: c.SHA256, ContentDisposition: attachment(name),
		ContentLength: strconv.Itoa(len(b)), Body: func(hctx huma.Context) { _, _ = hctx.BodyWriter().Write(b) }}, nil
}

func fileTooLarge(size, limit int64) error {
	return &apperr.Error{Kind: apperr.KindTooLarge, Code: apperr.CodeTooLarge,
		Message: fmt.Sprintf("the file has %d bytes, more than the limit of %d", size, limit)}
}

// streamDownload starts a download through a file.read stream. The agent's header decides
// the answer's headers; the bytes then flow from the stream into the response, and the audit
// entry is written once they did, or broke off. ok is false when the agent has no file
// streams.
func (s *Service) streamDownload(ctx context.Context, d devices.Device, path, name string, opts TransferOptions) (out *DownloadOutput, ok bool, err error) {
	audit := map[string]any{"path": path}
	maps.Copy(audit, opts.Audit)
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
	if opts.MaxBytes > 0 && h.SizeBytes != nil && *h.SizeBytes > opts.MaxBytes {
		st.Close()
		return nil, true, s.record(ctx, d, agentproto.MethodFileDownload, audit, fileTooLarge(*h.SizeBytes, opts.MaxBytes))
	}
	out = &DownloadOutput{ContentType: "application/octet-stream", Checksum: h.SHA256,
		ContentDisposition: attachment(name)}
	if h.SizeBytes != nil && *h.SizeBytes >= 0 {
		out.ContentLength = strconv.FormatInt(*h.SizeBytes, 10)
	}
	out.Body = func(hctx huma.Context) {
		defer st.Close()
		// A client that goes away ends the transfer at once rather than at the next write.
		stop := context.AfterFunc(hctx.Context(), func() { st.Close() })
		defer stop()
		var src io.Reader = r
		if opts.MaxBytes > 0 {
			src = io.LimitReader(r, opts.MaxBytes+1)
		}
		n, err := io.CopyBuffer(hctx.BodyWriter(), src, make([]byte, 64<<10))
		switch {
		case err == nil && opts.MaxBytes > 0 && n > opts.MaxBytes:
			err = fmt.Errorf("the file grew past the limit of %d bytes", opts.MaxBytes)
		case err == nil && h.SizeBytes != nil && *h.SizeBytes >= 0 && n != *h.SizeBytes:
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
func (s *Service) streamUpload(ctx context.Context, d devices.Device, args agentproto.FileWriteArgs, body io.Reader, extra map[string]any) (e agentproto.FileEntry, ok bool, err error) {
	audit := map[string]any{"path": args.Path, "overwrite": args.Overwrite}
	maps.Copy(audit, extra)
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

// UploadBase64 writes content, a file's bytes in base64 (a JSON upload, at most 50 MiB), to
// the file at path of the device and answers the new file's entry: streamed to the agent as
// it is decoded, or passed on in a call to an agent without file streams. opts.MaxBytes,
// when positive, caps the file (413). The device must be in scope and its agent connected
// (503 AGENT_OFFLINE). The transfer is audited.
func (s *Service) UploadBase64(ctx context.Context, deviceID, path, content string, opts TransferOptions) (agentproto.FileEntry, error) {
	size := int64(base64.StdEncoding.DecodedLen(len(content)) - (len(content) - len(strings.TrimRight(content, "="))))
	if size > agentproto.MaxFileUploadBytes {
		return agentproto.FileEntry{}, apperr.Invalid("content", "the file is larger than 50 MiB")
	}
	if opts.MaxBytes > 0 && size > opts.MaxBytes {
		return agentproto.FileEntry{}, fileTooLarge(size, opts.MaxBytes)
	}
	d, err := s.device(ctx, deviceID)
	if err != nil {
		return agentproto.FileEntry{}, err
	}
	decoded := base64.NewDecoder(base64.StdEncoding, strings.NewReader(content))
	e, streamed, err := s.streamUpload(ctx, d, agentproto.FileWriteArgs{Path: path, Mode: opts.Mode, Overwrite: opts.Overwrite}, decoded, opts.Audit)
	if streamed {
		return e, err
	}
	call := agentproto.FileUploadArgs{Path: path, Content: content, Overwrite: opts.Overwrite, Mode: opts.Mode}
	return e, s.uploadCall(ctx, d, call, size, opts.Audit, &e)
}

// uploadCall writes a file of size bytes through a call, for an agent without file streams,
// and audits it with extra in its details.
func (s *Service) uploadCall(ctx context.Context, d devices.Device, call agentproto.FileUploadArgs, size int64, extra map[string]any, e *agentproto.FileEntry) error {
	audit := describe(call).(map[string]any)
	audit["sizeBytes"] = size
	maps.Copy(audit, extra)
	return s.record(ctx, d, agentproto.MethodFileUpload, audit, s.call(ctx, d.ID, agentproto.MethodFileUpload, call, e, transferTimeout))
}

// Upload writes the raw body to the file at path of the device and answers the new file's
// entry: streamed to the agent as it arrives, or, for an agent without file streams, read
// whole (at most 50 MiB) and passed on in a call. The device must be in scope and its agent
// connected (503 AGENT_OFFLINE). The transfer is audited.
func (s *Service) Upload(ctx context.Context, deviceID, path string, body httpapi.RawBody, opts TransferOptions) (agentproto.FileEntry, error) {
	if path == "" {
		return agentproto.FileEntry{}, apperr.Invalid("path", "a raw upload names its file in the query parameter path")
	}
	d, err := s.device(ctx, deviceID)
	if err != nil {
		return agentproto.FileEntry{}, err
	}
	args := agentproto.FileWriteArgs{Path: path, Mode: opts.Mode, Overwrite: opts.Overwrite}
	if body.Size >= 0 {
		args.SizeBytes = &body.Size
	}
	e, streamed, err := s.streamUpload(ctx, d, args, body.Reader, opts.Audit)
	if streamed {
		return e, err
	}
	data, err := io.ReadAll(io.LimitReader(body.Reader, agentproto.MaxFileUploadBytes+1))
	if err != nil {
		if _, ok := apperr.As(err); ok {
			return e, err
		}
		return e, apperr.BadRequest(apperr.CodeValidation, "reading the request body failed: "+err.Error())
	}
	if len(data) > agentproto.MaxFileUploadBytes {
		return e, &apperr.Error{Kind: apperr.KindTooLarge, Code: apperr.CodeTooLarge,
			Message: "the device's agent predates file streams and takes at most 50 MiB; update the agent"}
	}
	call := agentproto.FileUploadArgs{Path: path, Content: base64.StdEncoding.EncodeToString(data), Overwrite: opts.Overwrite, Mode: opts.Mode}
	return e, s.uploadCall(ctx, d, call, int64(len(data)), opts.Audit, &e)
}
