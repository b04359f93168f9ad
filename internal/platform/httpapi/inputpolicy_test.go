package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gale/internal/platform/httpapi"
)

type noteBody struct {
	Name   string            `json:"name"`
	Notes  string            `json:"notes,omitempty" multiline:"true"`
	Tags   []string          `json:"tags,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	Inner  *struct {
		Title string `json:"title"`
	} `json:"inner,omitempty"`
	Settings map[string]any  `json:"settings,omitempty"`
	Raw      json.RawMessage `json:"raw,omitempty"`
}

func policyServer(t *testing.T, opts httpapi.Options) *httptest.Server {
	t.Helper()
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = 4 << 20
	}
	s := httpapi.New(slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil, opts)
	echo := func(_ context.Context, in *struct{ Body noteBody }) (*struct{ Body noteBody }, error) {
		return &struct{ Body noteBody }{in.Body}, nil
	}
	httpapi.Register(s, httpapi.Route{ID: "create-note", Method: "POST", Path: "/notes", Tag: "t", Public: true}, echo)
	httpapi.Register(s, httpapi.Route{ID: "agent-note", Method: "POST", Path: "/agent-notes", Tag: "t", Public: true, Agent: true}, echo)
	httpapi.Register(s, httpapi.Route{ID: "rotate-note", Method: "POST", Path: "/notes/{id}/rotate", Tag: "t", Public: true},
		func(_ context.Context, in *struct {
			ID string `path:"id"`
		}) (*struct{ Body string }, error) {
			return &struct{ Body string }{in.ID}, nil
		})
	httpapi.Register(s, httpapi.Route{ID: "list-notes", Method: "GET", Path: "/notes", Tag: "t", Public: true},
		func(_ context.Context, in *struct {
			Q string `query:"q"`
		}) (*struct{ Body string }, error) {
			return &struct{ Body string }{in.Q}, nil
		})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

type policyAnswer struct {
	status int
	header http.Header
	code   string
	msg    string
	fields []string
	body   string
}

func send(t *testing.T, srv *httptest.Server, method, path, contentType string, body io.Reader) policyAnswer {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+"/api/v1"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Details []struct {
				Field string `json:"field"`
			} `json:"details"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &env)
	a := policyAnswer{status: res.StatusCode, header: res.Header, code: env.Error.Code, msg: env.Error.Message, body: string(raw)}
	for _, d := range env.Error.Details {
		a.fields = append(a.fields, d.Field)
	}
	return a
}

func postJSON(t *testing.T, srv *httptest.Server, path, body string) policyAnswer {
	t.Helper()
	return send(t, srv, "POST", path, "application/json", strings.NewReader(body))
}

func TestBodyWithNULIsRefusedNamingTheField(t *testing.T) {
	srv := policyServer(t, httpapi.Options{})
	for _, tc := range []struct{ body, field string }{
		{`{"name":"a\u0000b"}`, "name"},
		{`"\u0000"`, "body"},
		{`{"name":"ok","tags":["x","\u0000"]}`, "tags[1]"},
		{`{"name":"ok","settings":{"a":{"b":[1,{"c":"x\u0000"}]}}}`, "settings.a.b[1].c"},
		{`{"name":"ok","settings":{"a\u0000":1}}`, "settings"},
		{`{"name":"ok","raw":{"k":"\u0000"}}`, "raw.k"},
		{`{"name":"ok","labels":{"k":"v"},"notes":"\u0000"}`, "notes"},
	} {
		a := postJSON(t, srv, "/notes", tc.body)
		if a.status != 400 || a.code != "VALIDATION_ERROR" || len(a.fields) != 1 || a.fields[0] != tc.field {
			t.Errorf("POST %s = %d %s, want 400 VALIDATION_ERROR on %s", tc.body, a.status, a.body, tc.field)
		}
	}
	if a := postJSON(t, srv, "/notes", `{"name":"a\\u0000b"}`); a.status != 200 {
		t.Errorf("an escaped backslash before u0000 = %d %s, want 200", a.status, a.body)
	}
}

func TestBodyNestingIsBounded(t *testing.T) {
	srv := policyServer(t, httpapi.Options{})
	nested := func(depth int) string {
		return `{"name":"x","settings":{"a":` + strings.Repeat("[", depth-2) + strings.Repeat("]", depth-2) + `}}`
	}
	if a := postJSON(t, srv, "/notes", nested(httpapi.MaxJSONDepth)); a.status != 200 {
		t.Fatalf("%d levels = %d %s, want 200", httpapi.MaxJSONDepth, a.status, a.body)
	}
	for _, path := range []string{"/notes", "/agent-notes"} {
		a := postJSON(t, srv, path, nested(5000))
		if a.status != 400 || a.code != "VALIDATION_ERROR" || len(a.fields) != 1 || !strings.HasPrefix(a.fields[0], "settings.a[0]") {
			t.Errorf("POST %s nested 5000 levels = %d %s, want 400 naming settings.a", path, a.status, a.body)
		}
	}
}

func TestAgentBodiesKeepOnlyTheDepthRule(t *testing.T) {
	srv := policyServer(t, httpapi.Options{})
	a := postJSON(t, srv, "/agent-notes", `{"name":"a\u0000b\u001b[31m","tags":["\u0007"]}`)
	if a.status != 200 {
		t.Fatalf("agent body with NUL and controls = %d %s, want 200 (the service cleans it)", a.status, a.body)
	}
}

func TestControlCharactersInBodyStrings(t *testing.T) {
	srv := policyServer(t, httpapi.Options{})
	for _, tc := range []struct {
		body  string
		field string // "" when accepted
	}{
		{`{"name":"Acme\u001b[2J"}`, "name"},
		{`{"name":"two\nlines"}`, "name"},
		{`{"name":"tab\there"}`, "name"},
		{`{"name":"del\u007f"}`, "name"},
		{`{"name":"c1\u0085"}`, "name"},
		{`{"name":"ok","notes":"line one\r\nline two\tindented"}`, ""},
		{`{"name":"ok","notes":"bell\u0007"}`, "notes"},
		{`{"name":"ok","notes":"c1\u009b"}`, "notes"},
		{`{"name":"ok","tags":["a","b\u0001"]}`, "tags[1]"},
		{`{"name":"ok","labels":{"k":"v\u0002"}}`, "labels.k"},
		{`{"name":"ok","inner":{"title":"t\u0003"}}`, "inner.title"},
		{`{"name":"ok","settings":{"free":"form\u0001\n"},"raw":{"r":"\u0002"}}`, ""},
		{`{"name":"Zürich – 東京 ✓"}`, ""},
	} {
		a := postJSON(t, srv, "/notes", tc.body)
		switch {
		case tc.field == "" && a.status != 200:
			t.Errorf("POST %s = %d %s, want 200", tc.body, a.status, a.body)
		case tc.field != "" && (a.status != 400 || a.code != "VALIDATION_ERROR" || len(a.fields) != 1 || a.fields[0] != tc.field):
			t.Errorf("POST %s = %d %s, want 400 on %s", tc.body, a.status, a.body, tc.field)
		}
	}
}

func TestOperationWithoutBodyRefusesOne(t *testing.T) {
	srv := policyServer(t, httpapi.Options{MaxBodyBytes: 1 << 20})
	for _, tc := range []struct {
		contentType, body string
		ok                bool
	}{
		{"", "", true},
		{"application/json", "{}", true},
		{"application/json", " { }\n", true},
		{"application/json", "  \r\n\t", true},
		{"application/json", `{"x":1}`, false},
		{"application/json", `{"x":`, false},
		{"text/plain", "hello", false},
		{"application/json", "[]", false},
		{"application/json", "{}" + strings.Repeat(" ", 100), false},
		{"application/json", strings.Repeat("a", 2<<20), false},
	} {
		a := send(t, srv, "POST", "/notes/abc/rotate", tc.contentType, strings.NewReader(tc.body))
		if tc.ok && a.status != 200 {
			t.Errorf("rotate with %.20q (%s) = %d %s, want 200", tc.body, tc.contentType, a.status, a.body)
		}
		if !tc.ok && (a.status != 400 || a.code != "VALIDATION_ERROR" || a.msg != "this operation takes no request body") {
			t.Errorf("rotate with %.20q (%s) = %d %s, want 400 VALIDATION_ERROR", tc.body, tc.contentType, a.status, a.body)
		}
	}
	// The body of a GET has no meaning and is never read.
	if a := send(t, srv, "GET", "/notes?q=x", "text/plain", strings.NewReader("ignored")); a.status != 200 {
		t.Errorf("GET with a body = %d %s, want 200", a.status, a.body)
	}
}

func TestNULInParametersIsRefused(t *testing.T) {
	srv := policyServer(t, httpapi.Options{})
	for _, tc := range []struct{ method, path, field string }{
		{"GET", "/notes?q=a%00b", "q"},
		{"GET", "/notes?q=ok&other%00=1", `other\u0000`},
		{"POST", "/notes/a%00b/rotate", "id"},
	} {
		a := send(t, srv, tc.method, tc.path, "", nil)
		if a.status != 400 || a.code != "VALIDATION_ERROR" || len(a.fields) != 1 || a.fields[0] != tc.field {
			t.Errorf("%s %s = %d %s, want 400 on %s", tc.method, tc.path, a.status, a.body, tc.field)
		}
	}
	if a := send(t, srv, "GET", "/notes?q=a%2500b", "", nil); a.status != 200 {
		t.Errorf("an escaped percent sign = %d %s, want 200", a.status, a.body)
	}
}

func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	srv := policyServer(t, httpapi.Options{})
	check := func(name string, a policyAnswer, api bool) {
		t.Helper()
		for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
			"Referrer-Policy": "no-referrer"} {
			if got := a.header.Get(k); got != want {
				t.Errorf("%s: %s = %q, want %q", name, k, got, want)
			}
		}
		if csp := a.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy = %q", name, csp)
		}
		if got := a.header.Get("Cache-Control"); api && got != "no-store" {
			t.Errorf("%s: Cache-Control = %q, want no-store", name, got)
		}
		if got := a.header.Get("Strict-Transport-Security"); got != "" {
			t.Errorf("%s: Strict-Transport-Security = %q without HSTS_MAX_AGE", name, got)
		}
	}
	check("success", postJSON(t, srv, "/notes", `{"name":"x"}`), true)
	check("validation error", postJSON(t, srv, "/notes", `{"name":1}`), true)
	check("unknown route", send(t, srv, "GET", "/nowhere", "", nil), true)
	check("openapi", send(t, srv, "GET", "/openapi.json", "", nil), true)
	docs := send(t, srv, "GET", "/docs", "", nil)
	check("docs", docs, true)
	if csp := docs.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'unsafe-inline'") {
		t.Errorf("the docs page cannot run its script: %q", csp)
	}
	res, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	check("outside the API", policyAnswer{header: res.Header}, false)

	hsts := policyServer(t, httpapi.Options{HSTSMaxAge: 365 * 24 * time.Hour})
	if got := send(t, hsts, "GET", "/nowhere", "", nil).header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
		t.Errorf("Strict-Transport-Security = %q, want max-age=31536000", got)
	}
}
