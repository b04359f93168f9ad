package httpapi_test

import (
	"context"
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
