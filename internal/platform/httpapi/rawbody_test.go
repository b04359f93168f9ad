package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gale/internal/platform/httpapi"
)

// An operation that takes a raw body gets it streamed, bounded by its limit, while its JSON
// body still works; the document says it takes application/octet-stream.
func TestRawBody(t *testing.T) {
	s := httpapi.New(slog.New(slog.DiscardHandler), fakeAuth{}, &deniedLog{}, httpapi.Options{MaxBodyBytes: 1024, Version: "test"})
	type in struct {
		Body *struct {
			Text string `json:"text"`
		}
	}
	type out struct{ Body string }
	httpapi.Register(s, httpapi.Route{ID: "upload", Method: "POST", Path: "/upload", Tag: "t", RawBodyBytes: 100},
		func(ctx context.Context, in *in) (*out, error) {
			if raw, ok := httpapi.RawBodyFrom(ctx); ok {
				b, err := io.ReadAll(raw.Reader)
				if err != nil {
					return nil, err
				}
				return &out{Body: "raw " + string(b)}, nil
			}
			if in.Body == nil {
				return &out{Body: "none"}, nil
			}
			return &out{Body: "json " + in.Body.Text}, nil
		})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	send := func(body io.Reader, contentType string, size int64) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/api/v1/upload", body)
		req.Header.Set("Authorization", "Bearer good")
		req.Header.Set("Content-Type", contentType)
		req.ContentLength = size
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, strings.TrimSpace(string(b))
	}
	if st, b := send(strings.NewReader("0123456789"), "application/octet-stream", 10); st != 200 || b != `"raw 0123456789"` {
		t.Errorf("raw body: %d %s", st, b)
	}
	if st, b := send(strings.NewReader(`{"text":"hi"}`), "application/json", 13); st != 200 || b != `"json hi"` {
		t.Errorf("JSON body: %d %s", st, b)
	}
	big := bytes.Repeat([]byte("x"), 200)
	if st, b := send(bytes.NewReader(big), "application/octet-stream", 200); st != 413 || !strings.Contains(b, "PAYLOAD_TOO_LARGE") {
		t.Errorf("declared too large: %d %s", st, b)
	}
	// Without a declared length the limit stops the read itself.
	if st, b := send(io.MultiReader(bytes.NewReader(big)), "application/octet-stream", -1); st != 413 || !strings.Contains(b, "PAYLOAD_TOO_LARGE") {
		t.Errorf("streamed too large: %d %s", st, b)
	}
	doc := s.API.OpenAPI().Paths["/upload"].Post.RequestBody
	if doc == nil || doc.Content["application/octet-stream"] == nil || doc.Content["application/json"] == nil {
		t.Errorf("the document's request body %+v lacks a content type", doc)
	}
}
