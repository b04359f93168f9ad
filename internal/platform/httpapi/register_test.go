package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
)

func TestNotImplementedIs501(t *testing.T) {
	s := httpapi.New(slog.New(slog.NewTextHandler(io.Discard, nil)), fakeAuth{}, &deniedLog{}, httpapi.Options{Version: "test"})
	httpapi.Register(s, httpapi.Route{ID: "unready", Method: "POST", Path: "/unready", Tag: "t", Errors: []int{501}},
		func(context.Context, *struct{}) (*struct{}, error) {
			return nil, apperr.NotImplemented("UNREADY", "not available yet")
		})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	res, env, raw := call(t, srv, "POST", "/unready", "good", "")
	if res.StatusCode != 501 || env.Error.Code != "UNREADY" || env.Error.Message != "not available yet" {
		t.Fatalf("POST /unready = %d %s, want 501 UNREADY", res.StatusCode, raw)
	}
}

type idInput struct {
	ID string `path:"id"`
}

func TestARouteWithAPathParameterDeclares404(t *testing.T) {
	s := httpapi.New(slog.New(slog.NewTextHandler(io.Discard, nil)), fakeAuth{}, &deniedLog{}, httpapi.Options{Version: "test"})
	byID := func(context.Context, *idInput) (*struct{}, error) { return nil, nil }
	httpapi.Register(s, httpapi.Route{ID: "get-thing", Method: "GET", Path: "/things/{id}", Tag: "t"}, byID)
	httpapi.Register(s, httpapi.Route{ID: "move-thing", Method: "POST", Path: "/things/{id}/move", Tag: "t", Errors: []int{404, 409}}, byID)
	httpapi.Register(s, httpapi.Route{ID: "list-things", Method: "GET", Path: "/things", Tag: "t"},
		func(context.Context, *struct{}) (*struct{}, error) { return nil, nil })
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	res, err := srv.Client().Get(srv.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, method string
		want404      bool
	}{
		{"/things/{id}", "get", true},
		{"/things/{id}/move", "post", true},
		{"/things", "get", false},
	} {
		if _, ok := doc.Paths[c.path][c.method].Responses["404"]; ok != c.want404 {
			t.Errorf("%s %s documents 404: %v, want %v", c.method, c.path, ok, c.want404)
		}
	}
}
