package httpapi

import (
	"context"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"gale/internal/platform/apperr"
)

// RawBody is a request body sent as application/octet-stream to an operation that takes one
// (Route.RawBodyBytes). It streams to the handler as it arrives: the server reads none of it
// first, so a file of any size passes through in bounded memory.
type RawBody struct {
	// Reader yields the bytes; past the route's limit it fails with a 413 error.
	Reader io.Reader
	// Size is the length the request declared, -1 when it declared none (chunked).
	Size int64
}

type rawBodyKey struct{}

// RawBodyFrom returns the raw body of the request ctx belongs to, when it was sent raw.
func RawBodyFrom(ctx context.Context) (RawBody, bool) {
	b, ok := ctx.Value(rawBodyKey{}).(RawBody)
	return b, ok
}

// rawBody is the middleware of operations that take a raw body, after authorization and
// before huma reads the body: a raw body is set aside in the context for the handler, and
// huma (and the input policy's JSON rules) see an empty one. Other bodies pass as they are.
func (s *Server) rawBody(limit int64) func(huma.Context, func(huma.Context)) {
	return func(hctx huma.Context, next func(huma.Context)) {
		req, _ := humago.Unwrap(hctx)
		if mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type")); mt != "application/octet-stream" {
			next(hctx)
			return
		}
		if req.ContentLength > limit {
			s.writeHumaError(hctx, tooLarge(limit))
			return
		}
		body := RawBody{Reader: &limitedReader{r: req.Body, limit: limit, left: limit}, Size: req.ContentLength}
		req.Body, req.ContentLength = http.NoBody, 0
		req.Header.Del("Content-Type")
		next(huma.WithContext(hctx, context.WithValue(hctx.Context(), rawBodyKey{}, body)))
	}
}

func tooLarge(limit int64) *apperr.Error {
	return &apperr.Error{Kind: apperr.KindTooLarge, Code: apperr.CodeTooLarge,
		Message: "the body is larger than this operation's limit of " + strconv.FormatInt(limit, 10) + " bytes"}
}

// limitedReader fails the read past limit bytes with 413.
type limitedReader struct {
	r           io.Reader
	limit, left int64
}

func (b *limitedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			return 0, tooLarge(b.limit)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// documentRawBody adds application/octet-stream to the request body of operations that take
// a raw one.
func documentRawBody(_ *huma.OpenAPI, op *huma.Operation) {
	if op.Metadata[metaRawBody] != true {
		return
	}
	if op.RequestBody == nil {
		op.RequestBody = &huma.RequestBody{Content: map[string]*huma.MediaType{}}
	}
	op.RequestBody.Content["application/octet-stream"] = &huma.MediaType{Schema: &huma.Schema{Type: "string", Format: "binary"}}
}

// metaRawBody marks, in an operation's Metadata, that it takes a raw body.
const metaRawBody = "galeRawBody"
