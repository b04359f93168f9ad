package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/jsonenc/jsonenctest"
)

// fakeAuth accepts "Bearer good" (full rights, no MFA), "Bearer mfa" (full rights, MFA) and
// "Bearer weak" (no permissions).
type fakeAuth struct{}

func (fakeAuth) Authenticate(_ context.Context, r *http.Request) (*access.Principal, error) {
	switch r.Header.Get("Authorization") {
	case "Bearer good":
		return &access.Principal{Kind: access.ActorUser, ID: "u1", Permissions: access.Permissions{access.FullAdmin}, Scope: access.SystemScope()}, nil
	case "Bearer mfa":
		return &access.Principal{Kind: access.ActorUser, ID: "u1", Permissions: access.Permissions{access.FullAdmin}, Scope: access.SystemScope(), MFA: true}, nil
	case "Bearer weak":
		return &access.Principal{Kind: access.ActorUser, ID: "u2", Scope: access.SystemScope()}, nil
	}
	return nil, apperr.Unauthorized("missing credential")
}

type deniedLog struct{ denied []string }

func (d *deniedLog) RecordDenied(_ context.Context, action, reason string) {
	d.denied = append(d.denied, action+": "+reason)
}

type thingBody struct {
	Name  string `json:"name" maxLength:"50"`
	Count int    `json:"count,omitempty" minimum:"0"`
}

func newServer(t *testing.T, enable2FA bool) (*httptest.Server, *deniedLog) {
	t.Helper()
	denied := &deniedLog{}
	s := httpapi.New(slog.New(slog.NewTextHandler(io.Discard, nil)), fakeAuth{}, denied,
		httpapi.Options{MaxBodyBytes: 1024, Enable2FA: enable2FA, Version: "test"})
	httpapi.Register(s, httpapi.Route{ID: "create-organization", Method: "POST", Path: "/things", Tag: "t", Permission: access.OrganizationsWrite, MFA: true, Status: 201},
		func(_ context.Context, in *struct{ Body thingBody }) (*struct{ Body thingBody }, error) {
			return &struct{ Body thingBody }{in.Body}, nil
		})
	httpapi.Register(s, httpapi.Route{ID: "panic", Method: "GET", Path: "/panic", Tag: "t"},
		func(context.Context, *struct{}) (*struct{}, error) { panic("secret internals") })
	httpapi.Register(s, httpapi.Route{ID: "fail", Method: "GET", Path: "/fail", Tag: "t"},
		func(context.Context, *struct{}) (*struct{}, error) { return nil, io.ErrUnexpectedEOF })
	httpapi.Register(s, httpapi.Route{ID: "limited", Method: "GET", Path: "/limited", Tag: "t", Public: true},
		func(context.Context, *struct{}) (*struct{}, error) { return nil, apperr.RateLimited(1500 * 1e6) })
	httpapi.Register(s, httpapi.Route{ID: "page", Method: "GET", Path: "/page", Tag: "t", Public: true},
		func(_ context.Context, in *struct{ httpapi.PageQuery }) (*struct{ Body store }, error) {
			p, err := in.Normalize(httpapi.MaxPageSize)
			return &struct{ Body store }{store{Limit: p.Limit}}, err
		})
	httpapi.Register(s, httpapi.Route{ID: "list-root", Method: "GET", Path: "/things/", Tag: "t", Public: true},
		func(context.Context, *struct{}) (*struct{}, error) { return nil, nil })
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv, denied
}

type store struct {
	Limit int `json:"limit"`
}

type envelope struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"details"`
	} `json:"error"`
}

func call(t *testing.T, srv *httptest.Server, method, path, auth, body string) (*http.Response, envelope, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+"/api/v1"+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var env envelope
	_ = json.Unmarshal(raw, &env)
	return res, env, string(raw)
}

func TestErrorsUseTheEnvelope(t *testing.T) {
	srv, _ := newServer(t, false)
	cases := []struct {
		name, method, path, auth, body string
		status                         int
		code                           string
	}{
		{"unknown route", "GET", "/nope", "good", "", 404, "NOT_FOUND"},
		{"subtree of an exact route", "GET", "/things/extra", "", "", 404, "NOT_FOUND"},
		{"wrong method", "DELETE", "/things", "good", "", 405, "METHOD_NOT_ALLOWED"},
		{"no credential", "POST", "/things", "", `{"name":"a"}`, 401, "UNAUTHORIZED"},
		{"missing permission", "POST", "/things", "weak", `{"name":"a"}`, 403, "FORBIDDEN"},
		{"malformed JSON", "POST", "/things", "good", `{"name":`, 400, "VALIDATION_ERROR"},
		{"wrong type", "POST", "/things", "good", `{"name": 5}`, 400, "VALIDATION_ERROR"},
		{"unknown field", "POST", "/things", "good", `{"name": "a", "x": 1}`, 400, "VALIDATION_ERROR"},
		{"constraint", "POST", "/things", "good", `{"name": "a", "count": -1}`, 400, "VALIDATION_ERROR"},
		{"body too large", "POST", "/things", "good", `{"name": "` + strings.Repeat("a", 2000) + `"}`, 413, "PAYLOAD_TOO_LARGE"},
		{"panic", "GET", "/panic", "good", "", 500, "INTERNAL"},
		{"unexpected error", "GET", "/fail", "good", "", 500, "INTERNAL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, env, raw := call(t, srv, c.method, c.path, c.auth, c.body)
			if res.StatusCode != c.status || env.Error.Code != c.code {
				t.Fatalf("%s %s = %d %s, want %d %s", c.method, c.path, res.StatusCode, raw, c.status, c.code)
			}
			if env.Error.Message == "" {
				t.Errorf("no message in %s", raw)
			}
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if res.Header.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id header")
			}
			if strings.Contains(raw, "secret internals") || strings.Contains(raw, "unexpected EOF") {
				t.Errorf("internals leaked: %s", raw)
			}
		})
	}
}

func TestValidationDetailsNameTheField(t *testing.T) {
	srv, _ := newServer(t, false)
	_, env, raw := call(t, srv, "POST", "/things", "good", `{"name": 5}`)
	if len(env.Error.Details) == 0 || env.Error.Details[0].Field != "name" {
		t.Fatalf("details = %s, want a detail for field name", raw)
	}
	if strings.Contains(raw, `"value"`) {
		t.Errorf("the submitted value is echoed: %s", raw)
	}
}

func TestMethodNotAllowedKeepsAllow(t *testing.T) {
	srv, _ := newServer(t, false)
	res, _, _ := call(t, srv, "PUT", "/things", "good", "")
	if !strings.Contains(res.Header.Get("Allow"), "POST") {
		t.Fatalf("Allow = %q, want it to list POST", res.Header.Get("Allow"))
	}
}

func TestRateLimitedCarriesRetryAfter(t *testing.T) {
	srv, _ := newServer(t, false)
	res, env, _ := call(t, srv, "GET", "/limited", "", "")
	if res.StatusCode != 429 || env.Error.Code != "RATE_LIMITED" || res.Header.Get("Retry-After") != "2" {
		t.Fatalf("got %d %s Retry-After=%q, want 429 RATE_LIMITED Retry-After 2", res.StatusCode, env.Error.Code, res.Header.Get("Retry-After"))
	}
}

func TestRequestIDIsKeptOrMinted(t *testing.T) {
	srv, _ := newServer(t, false)
	req, _ := http.NewRequest("GET", srv.URL+"/api/v1/nope", nil)
	req.Header.Set("X-Request-Id", "trace-123")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("X-Request-Id"); got != "trace-123" {
		t.Errorf("X-Request-Id = %q, want the caller's trace-123", got)
	}
	req.Header.Set("X-Request-Id", "bad id with spaces")
	if res, err = srv.Client().Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("X-Request-Id"); got == "" || strings.Contains(got, " ") {
		t.Errorf("X-Request-Id = %q, want a freshly minted ID", got)
	}
}

func TestMFAGateOnlyWhenEnabled(t *testing.T) {
	srv, denied := newServer(t, true)
	res, env, _ := call(t, srv, "POST", "/things", "good", `{"name":"a"}`)
	if res.StatusCode != 403 || env.Error.Message != "MFA required" {
		t.Fatalf("without MFA: %d %q, want 403 \"MFA required\"", res.StatusCode, env.Error.Message)
	}
	if len(denied.denied) != 1 {
		t.Errorf("refusal not recorded as a security event: %v", denied.denied)
	}
	if res, _, raw := call(t, srv, "POST", "/things", "mfa", `{"name":"a"}`); res.StatusCode != 201 {
		t.Fatalf("with MFA: %d %s, want 201", res.StatusCode, raw)
	}
	off, _ := newServer(t, false)
	if res, _, raw := call(t, off, "POST", "/things", "good", `{"name":"a"}`); res.StatusCode != 201 {
		t.Fatalf("ENABLE_2FA off: %d %s, want 201", res.StatusCode, raw)
	}
}

func TestPageLimitDefaultsAndClamps(t *testing.T) {
	srv, _ := newServer(t, false)
	for q, want := range map[string]int{"": 100, "?limit=7": 7, "?limit=100000": 500} {
		res, _, raw := call(t, srv, "GET", "/page"+q, "", "")
		var got store
		_ = json.Unmarshal([]byte(raw), &got)
		if res.StatusCode != 200 || got.Limit != want {
			t.Errorf("limit for %q = %d (%d), want %d", q, got.Limit, res.StatusCode, want)
		}
	}
	if res, env, _ := call(t, srv, "GET", "/page?limit=0", "", ""); res.StatusCode != 400 || env.Error.Code != "VALIDATION_ERROR" {
		t.Errorf("limit=0: %d %s, want 400", res.StatusCode, env.Error.Code)
	}
	if res, _, _ := call(t, srv, "GET", "/page?page=2&cursor=abc", "", ""); res.StatusCode != 400 {
		t.Errorf("page with cursor: %d, want 400", res.StatusCode)
	}
}

func TestOpenAPIDocumentsOperationsAndDocsPage(t *testing.T) {
	srv, _ := newServer(t, false)
	res, err := srv.Client().Get(srv.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string                     `json:"operationId"`
			Responses   map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	op := doc.Paths["/things"]["post"]
	if op.OperationID != "create-organization" {
		t.Fatalf("POST /things not documented (paths: %d)", len(doc.Paths))
	}
	if _, ok := op.Responses["400"]; !ok {
		t.Errorf("400 not documented: %v", op.Responses)
	}
	if _, ok := op.Responses["422"]; ok {
		t.Errorf("422 documented; the API answers 400")
	}
	page, err := srv.Client().Get(srv.URL + "/api/v1/docs")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != 200 || !strings.Contains(string(body), "openapi.json") || strings.Contains(string(body), "https://") {
		t.Errorf("docs page: %d, must render openapi.json without loading anything from the internet", page.StatusCode)
	}
}

func TestClientIPTrustsOnlyConfiguredProxies(t *testing.T) {
	_, trusted, _ := netParseCIDR("10.0.0.0/8")
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.2.3:5555"
	r.Header.Set("X-Forwarded-For", "203.0.113.9, 10.9.9.9")
	if got := httpapi.ClientIP(r, trusted); got != "203.0.113.9" {
		t.Errorf("behind trusted proxy: %s, want 203.0.113.9", got)
	}
	if got := httpapi.ClientIP(r, nil); got != "10.1.2.3" {
		t.Errorf("no trusted proxies: %s, want the peer 10.1.2.3", got)
	}
}

func netParseCIDR(s string) (struct{}, []*net.IPNet, error) {
	_, n, err := net.ParseCIDR(s)
	return struct{}{}, []*net.IPNet{n}, err
}

// TestListJSONFallsBackToEncodingJSON: rows without their own encoder make the envelope
// encode through encoding/json, unchanged.
func TestListJSONFallsBackToEncodingJSON(t *testing.T) {
	type row struct {
		Name string  `json:"name"`
		Note *string `json:"note,omitempty"`
	}
	total := 1
	jsonenctest.Match(t, "plain", httpapi.List[row]{Data: []row{{Name: "<a&b>"}}, Pagination: httpapi.Pagination{Page: 1, Total: &total}})
	jsonenctest.Match(t, "nil", httpapi.List[row]{})
}

// A JSON answer is sent whole with its Content-Length, not in chunks; a handler that writes
// and flushes as it goes still streams, and a status with no body still arrives.
func TestResponsesCarryTheirLengthAndStreamsStillStream(t *testing.T) {
	s := httpapi.New(slog.New(slog.NewTextHandler(io.Discard, nil)), fakeAuth{}, &deniedLog{}, httpapi.Options{Version: "test"})
	type row struct {
		Name string `json:"name"`
	}
	httpapi.Register(s, httpapi.Route{ID: "big", Method: "GET", Path: "/big", Tag: "t", Public: true},
		func(context.Context, *struct{}) (*struct{ Body httpapi.List[row] }, error) {
			out := &struct{ Body httpapi.List[row] }{}
			for i := 0; i < 500; i++ {
				out.Body.Data = append(out.Body.Data, row{Name: strings.Repeat("x", 40)})
			}
			return out, nil
		})
	headersSeen := make(chan struct{})
	s.Handle("GET /stream", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte("first "))
		http.NewResponseController(w).Flush()
		<-headersSeen // the client has the status and the first part while the handler still runs
		_, _ = w.Write([]byte("second"))
	}))
	s.Handle("DELETE /gone", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	res, err := http.Get(srv.URL + "/api/v1/big")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.ContentLength != int64(len(body)) || len(res.TransferEncoding) != 0 || len(body) < 20000 {
		t.Fatalf("JSON answer: status %d, Content-Length %d for %d bytes, Transfer-Encoding %v", res.StatusCode,
			res.ContentLength, len(body), res.TransferEncoding)
	}

	res, err = http.Get(srv.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, len("first "))
	if _, err := io.ReadFull(res.Body, first); err != nil || res.StatusCode != http.StatusAccepted {
		t.Fatalf("stream: status %d, first part %q, %v", res.StatusCode, first, err)
	}
	close(headersSeen)
	rest, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(first)+string(rest) != "first second" || len(res.TransferEncoding) == 0 {
		t.Fatalf("stream: body %q, Transfer-Encoding %v", string(first)+string(rest), res.TransferEncoding)
	}

	req, _ := http.NewRequest("DELETE", srv.URL+"/gone", nil)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("status with no body = %d, want 204", res.StatusCode)
	}
}

// AfterWrite follows only the successful operations that declare ChangesAccess: not reads,
// not other writes, not a refused write.
func TestAfterWriteFollowsOnlySuccessfulAccessChanges(t *testing.T) {
	var writes []string
	s := httpapi.New(slog.New(slog.NewTextHandler(io.Discard, nil)), fakeAuth{}, &deniedLog{},
		httpapi.Options{Version: "test", AfterWrite: func(ctx context.Context) {
			writes = append(writes, access.PrincipalFrom(ctx).ID)
		}})
	ok := func(context.Context, *struct{}) (*struct{}, error) { return nil, nil }
	httpapi.Register(s, httpapi.Route{ID: "read", Method: "GET", Path: "/things", Tag: "t"}, ok)
	httpapi.Register(s, httpapi.Route{ID: "write", Method: "POST", Path: "/things", Tag: "t", ChangesAccess: true}, ok)
	httpapi.Register(s, httpapi.Route{ID: "other-write", Method: "PUT", Path: "/things", Tag: "t"}, ok)
	httpapi.Register(s, httpapi.Route{ID: "refuse", Method: "DELETE", Path: "/things", Tag: "t", ChangesAccess: true},
		func(context.Context, *struct{}) (*struct{}, error) { return nil, apperr.Conflict("no") })
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	for _, c := range []struct{ method, path, auth string }{
		{"GET", "/things", "good"}, {"POST", "/things", "good"}, {"PUT", "/things", "good"}, {"DELETE", "/things", "good"},
		{"POST", "/things", "bad"},
	} {
		call(t, srv, c.method, c.path, c.auth, "")
	}
	if strings.Join(writes, ",") != "u1" {
		t.Fatalf("AfterWrite ran for %q, want the successful POST only", writes)
	}
}

// An operation that names a permission missing from the catalog does not register.
func TestUnknownPermissionFailsRegistration(t *testing.T) {
	s := httpapi.New(slog.New(slog.NewTextHandler(io.Discard, nil)), fakeAuth{}, &deniedLog{}, httpapi.Options{Version: "test"})
	defer func() {
		if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "devices:reed") {
			t.Fatalf("panic %v, want one naming devices:reed", v)
		}
	}()
	httpapi.Register(s, httpapi.Route{ID: "typo", Method: "GET", Path: "/typo", Tag: "t", Permission: "devices:reed"},
		func(context.Context, *struct{}) (*struct{}, error) { return nil, nil })
}
