package httpapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"gale/internal/platform/apperr"
)

// reached is what a test route saw: its own pattern, r.Pattern and the path values.
type reached struct {
	route   string
	pattern string
	values  map[string]string
}

// newTestRouter registers each pattern with a handler that answers which pattern it is and
// the values of the parameters it names.
func newTestRouter(t *testing.T, patterns ...string) *router {
	t.Helper()
	rt := &router{}
	for _, p := range patterns {
		rt.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			got := reached{route: p, pattern: r.Pattern, values: map[string]string{}}
			for _, seg := range strings.Split(p, "/") {
				if name, ok := strings.CutPrefix(seg, "{"); ok {
					name = strings.TrimSuffix(strings.TrimSuffix(name, "}"), "...")
					got.values[name] = r.PathValue(name)
				}
			}
			w.Header().Set("X-Route", got.route)
			_ = json.NewEncoder(w).Encode(map[string]any{"route": got.route, "pattern": got.pattern, "values": got.values})
		})
	}
	return rt
}

// serve sends method path (as written on the wire, so possibly percent-encoded) to rt.
func serve(rt *router, method, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	rt.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w
}

// reach asks rt for method path and returns which route answered it.
func reach(t *testing.T, rt *router, method, path string) reached {
	t.Helper()
	w := serve(rt, method, path)
	if w.Code != http.StatusOK {
		t.Fatalf("%s %s = %d %s, want 200", method, path, w.Code, w.Body)
	}
	if method == http.MethodHead {
		return reached{route: w.Header().Get("X-Route")}
	}
	var body struct {
		Route   string            `json:"route"`
		Pattern string            `json:"pattern"`
		Values  map[string]string `json:"values"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	return reached{route: body.Route, pattern: body.Pattern, values: body.Values}
}

func TestRouterLiteralBeatsParameter(t *testing.T) {
	rt := newTestRouter(t, "GET /scripts/{id}/executions", "GET /scripts/executions/{id}",
		"POST /scripts/import/{id}", "POST /scripts/{id}/execute", "GET /scripts/{id}")
	for _, c := range []struct{ method, path, route, id string }{
		{"GET", "/scripts/executions/e1", "GET /scripts/executions/{id}", "e1"},
		{"GET", "/scripts/s1/executions", "GET /scripts/{id}/executions", "s1"},
		{"GET", "/scripts/executions/executions", "GET /scripts/executions/{id}", "executions"},
		{"POST", "/scripts/import/lib1", "POST /scripts/import/{id}", "lib1"},
		{"POST", "/scripts/s1/execute", "POST /scripts/{id}/execute", "s1"},
		{"GET", "/scripts/executions", "GET /scripts/{id}", "executions"},
	} {
		got := reach(t, rt, c.method, c.path)
		if got.route != c.route || got.pattern != c.route || got.values["id"] != c.id {
			t.Errorf("%s %s reached %s (r.Pattern %q) with id %q, want %s with id %q",
				c.method, c.path, got.route, got.pattern, got.values["id"], c.route, c.id)
		}
	}
}

// A path that leads nowhere down a literal, or to a route of another method, goes back and
// tries the parameter.
func TestRouterBacktracksFromLiteralToParameter(t *testing.T) {
	rt := newTestRouter(t, "GET /a/b/c", "GET /a/{x}/d",
		"PATCH /monitors/alerts/{id}", "GET /monitors/{monitorId}/alerts", "GET /files/b/{name}", "GET /files/{path...}")
	for _, c := range []struct{ method, path, route, name, value string }{
		{"GET", "/a/b/c", "GET /a/b/c", "", ""},
		{"GET", "/a/b/d", "GET /a/{x}/d", "x", "b"},
		{"GET", "/monitors/alerts/alerts", "GET /monitors/{monitorId}/alerts", "monitorId", "alerts"},
		{"PATCH", "/monitors/alerts/alerts", "PATCH /monitors/alerts/{id}", "id", "alerts"},
		{"GET", "/files/b/n", "GET /files/b/{name}", "name", "n"},
		{"GET", "/files/b/n/deeper", "GET /files/{path...}", "path", "b/n/deeper"},
		{"GET", "/files/", "GET /files/{path...}", "path", ""},
	} {
		got := reach(t, rt, c.method, c.path)
		if got.route != c.route || (c.name != "" && got.values[c.name] != c.value) {
			t.Errorf("%s %s reached %s with %v, want %s with %s=%q", c.method, c.path, got.route, got.values, c.route, c.name, c.value)
		}
	}
}

func TestRouterAnswersUnknownPathsAndMethodsInTheEnvelope(t *testing.T) {
	rt := newTestRouter(t, "GET /orgs/{id}", "DELETE /orgs/{id}", "POST /orgs/sites", "GET /orgs/", "PUT /orgs/{id}/x")
	for _, c := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/nope", 404, apperr.CodeNotFound, ""},
		{"GET", "/orgs", 404, apperr.CodeNotFound, ""},
		{"GET", "/orgs/o1/", 404, apperr.CodeNotFound, ""},
		{"GET", "/orgs/o1/extra", 404, apperr.CodeNotFound, ""},
		{"GET", "//orgs/o1", 404, apperr.CodeNotFound, ""},
		{"POST", "/orgs/o1", 405, apperr.CodeMethod, "DELETE, GET, HEAD"},
		// /orgs/sites is a literal route (POST) and matches /orgs/{id} (GET, DELETE) too.
		{"PATCH", "/orgs/sites", 405, apperr.CodeMethod, "DELETE, GET, HEAD, POST"},
		{"DELETE", "/orgs/", 405, apperr.CodeMethod, "GET, HEAD"},
	} {
		w := serve(rt, c.method, c.path)
		var body envelope
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		if w.Code != c.status || body.Error.Code != c.code || w.Header().Get("Allow") != c.allow {
			t.Errorf("%s %s = %d %q, Allow %q; want %d %q, Allow %q", c.method, c.path, w.Code, body.Error.Code,
				w.Header().Get("Allow"), c.status, c.code, c.allow)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s has Content-Type %q", c.method, c.path, ct)
		}
	}
}

func TestRouterServesHeadWithGet(t *testing.T) {
	rt := newTestRouter(t, "GET /health", "GET /both", "HEAD /both")
	if got := reach(t, rt, "HEAD", "/health"); got.route != "GET /health" {
		t.Errorf("HEAD /health reached %q, want GET /health", got.route)
	}
	if got := reach(t, rt, "HEAD", "/both"); got.route != "HEAD /both" {
		t.Errorf("HEAD /both reached %q, want its own route", got.route)
	}
}

func TestRouterPatternWithoutMethodServesEveryMethod(t *testing.T) {
	rt := newTestRouter(t, "/proxy/{id}", "DELETE /proxy/{id}")
	for _, method := range []string{"GET", "PUT", "OPTIONS"} {
		if got := reach(t, rt, method, "/proxy/p1"); got.route != "/proxy/{id}" || got.values["id"] != "p1" {
			t.Errorf("%s /proxy/p1 reached %s with %v", method, got.route, got.values)
		}
	}
	if got := reach(t, rt, "DELETE", "/proxy/p1"); got.route != "DELETE /proxy/{id}" {
		t.Errorf("DELETE /proxy/p1 reached %s, want its own route", got.route)
	}
}

// Each segment is unescaped on its own, so an encoded slash stays inside its parameter.
func TestRouterDecodesParameters(t *testing.T) {
	rt := newTestRouter(t, "GET /keys/{id}/values/{name}", "GET /files/{path...}", "GET /literal")
	got := reach(t, rt, "GET", "/keys/a%2Fb/values/c%20d%25")
	if got.route != "GET /keys/{id}/values/{name}" || got.values["id"] != "a/b" || got.values["name"] != "c d%" {
		t.Errorf("reached %s with %v, want id a/b and name %q", got.route, got.values, "c d%")
	}
	if got := reach(t, rt, "GET", "/files/x%2Fy/z"); got.values["path"] != "x/y/z" {
		t.Errorf("the rest of the path is %q, want x/y/z", got.values["path"])
	}
	if got := reach(t, rt, "GET", "/%6Citeral"); got.route != "GET /literal" {
		t.Errorf("an encoded literal reached %s", got.route)
	}
}

func TestRouterRefusesARouteRegisteredTwice(t *testing.T) {
	for _, c := range []struct{ first, second string }{
		{"GET /a/{id}", "GET /a/{id}"},
		{"GET /a/{id}", "GET /a/{key}"},
		{"/a/{id}", "/a/{id}"},
		{"GET /a/{rest...}", "GET /a/{path...}"},
	} {
		func() {
			defer func() {
				v := recover()
				if msg := fmt.Sprint(v); !strings.Contains(msg, "registered twice") || !strings.Contains(msg, c.second) {
					t.Errorf("registering %q after %q: panic %v, want one saying it is registered twice", c.second, c.first, v)
				}
			}()
			newTestRouter(t, c.first, c.second)
		}()
	}
}

func TestRouterRefusesMalformedPatterns(t *testing.T) {
	for _, p := range []string{"GET a", "GET /a/{id", "GET /a/x{id}", "GET /{rest...}/a", "GET /a/{}", "GET /a/{id}/{id}"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("pattern %q registered", p)
				}
			}()
			newTestRouter(t, p)
		}()
	}
}

// Matching a route allocates nothing but what the parameters' values need.
func TestRouterLookupDoesNotAllocate(t *testing.T) {
	rt := &router{}
	rt.HandleFunc("GET /api/v1/devices", func(http.ResponseWriter, *http.Request) {})
	rt.HandleFunc("GET /api/v1/devices/{id}", func(http.ResponseWriter, *http.Request) {})
	r := httptest.NewRequest("GET", "/api/v1/devices?limit=50", nil)
	if n := testing.AllocsPerRun(100, func() { rt.ServeHTTP(nil, r) }); n != 0 {
		t.Errorf("a literal route allocates %v times per request", n)
	}
}

// readSpecRoutes returns the patterns of testdata/spec-routes.txt; ALL routes are written
// without a method.
func readSpecRoutes(tb testing.TB) []string {
	f, err := os.Open("testdata/spec-routes.txt")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var patterns []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		patterns = append(patterns, strings.TrimPrefix(line, "ALL "))
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return patterns
}

// Every route of the API specification reaches its own handler, with its parameters, in one
// router: none shadows or collides with another.
func TestRouterServesEveryRouteOfTheSpecification(t *testing.T) {
	patterns := readSpecRoutes(t)
	if len(patterns) < 600 {
		t.Fatalf("read %d routes from testdata/spec-routes.txt, want every route of the specification", len(patterns))
	}
	rt := newTestRouter(t, patterns...)
	for _, p := range patterns {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			method, path = "PUT", p
		}
		// Each parameter gets a value no literal segment has, with an encoded slash in it.
		want := map[string]string{}
		segments := strings.Split(path, "/")
		for i, seg := range segments {
			if name, ok := strings.CutPrefix(seg, "{"); ok {
				name = strings.TrimSuffix(strings.TrimSuffix(name, "}"), "...")
				want[name] = "v/" + name
				segments[i] = "v%2F" + name
			}
		}
		got := reach(t, rt, method, strings.Join(segments, "/"))
		if got.route != p || got.pattern != p {
			t.Errorf("%s %s reached %s (r.Pattern %q)", method, path, got.route, got.pattern)
			continue
		}
		for name, v := range want {
			if got.values[name] != v {
				t.Errorf("%s: {%s} = %q, want %q", p, name, got.values[name], v)
			}
		}
	}
	t.Logf("%d routes", len(patterns))
}

// BenchmarkRouter matches a literal and a parameterised path among every route of the
// specification.
func BenchmarkRouter(b *testing.B) {
	rt := &router{}
	for _, p := range readSpecRoutes(b) {
		rt.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
	}
	for _, path := range []string{"/devices", "/orgs/organizations/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"} {
		b.Run(path, func(b *testing.B) {
			r := httptest.NewRequest("GET", path+"?limit=50", nil)
			b.ReportAllocs()
			for b.Loop() {
				rt.ServeHTTP(nil, r)
			}
		})
	}
}
