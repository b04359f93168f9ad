package httpapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/platform/httpapi"
)

// admissionServer serves /api/v1/work, which blocks until release is closed, behind an
// admission of one request in flight and one waiting; /api/v1/agents/... is agents' traffic.
func admissionServer(t *testing.T, wait time.Duration) (srv *httptest.Server, started chan string, release chan struct{}) {
	s := httpapi.New(slog.New(slog.DiscardHandler), fakeAuth{}, &deniedLog{}, httpapi.Options{
		Admission: httpapi.Admission{InFlight: 1, Queue: 1, Wait: wait}})
	s.AgentRoutes(httpapi.Prefix + "/agents/")
	started, release = make(chan string, 10), make(chan struct{})
	block := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- r.URL.Query().Get("n")
		<-release
		w.WriteHeader(http.StatusNoContent)
	})
	s.Handle("GET "+httpapi.Prefix+"/work", block)
	s.Handle("GET "+httpapi.Prefix+"/agents/work", block)
	s.Handle("GET /health", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	s.Handle("GET "+httpapi.Prefix+"/stream", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		started <- "stream"
		<-release
	}))
	srv = httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return srv, started, release
}

// get sends a GET in the background and returns where its response arrives.
func get(t *testing.T, url string) <-chan *http.Response {
	out := make(chan *http.Response, 1)
	go func() {
		res, err := http.Get(url)
		if err != nil {
			t.Error(err)
			close(out)
			return
		}
		out <- res
	}()
	return out
}

// assertBusy checks a 503 SERVER_BUSY in the error envelope with Retry-After.
func assertBusy(t *testing.T, res *http.Response) {
	t.Helper()
	defer res.Body.Close()
	var body struct {
		Error struct{ Code, Message string }
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusServiceUnavailable || body.Error.Code != "SERVER_BUSY" || res.Header.Get("Retry-After") != "1" {
		t.Fatalf("got %d %+v Retry-After %q; want 503 SERVER_BUSY with Retry-After: 1", res.StatusCode, body.Error, res.Header.Get("Retry-After"))
	}
}

// With the node's API requests all in flight and its queue full, the next request is answered
// 503 SERVER_BUSY at once, while agents' requests and health checks are served all the same;
// the one that waited is served once a turn frees.
func TestAdmissionRefusesWhenTheQueueIsFullButNeverHoldsAgents(t *testing.T) {
	srv, started, release := admissionServer(t, time.Minute)
	first := get(t, srv.URL+"/api/v1/work?n=1")
	if n := <-started; n != "1" {
		t.Fatalf("started %s", n)
	}
	second := get(t, srv.URL+"/api/v1/work?n=2")
	// The second waits in the queue; a third finds it full.
	for !strings.Contains(body(t, srv.URL+"/metrics"), "gale_api_requests_waiting 1") {
		time.Sleep(10 * time.Millisecond)
	}
	assertBusy(t, <-get(t, srv.URL+"/api/v1/work?n=3"))

	// Agents' traffic runs beside the full API: both blocked handlers run at once.
	agent := get(t, srv.URL+"/api/v1/agents/work?n=agent")
	if n := <-started; n != "agent" {
		t.Fatalf("started %s; want the agent's request", n)
	}
	if got := body(t, srv.URL+"/health"); got != "ok" {
		t.Fatalf("health check answered %q", got)
	}
	close(release)
	for _, ch := range []<-chan *http.Response{first, second, agent} {
		res := <-ch
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			t.Fatalf("got %d; want 204", res.StatusCode)
		}
	}
	if n := <-started; n != "2" {
		t.Fatalf("started %s; want the queued request", n)
	}
}

// A request that waited longer than the admission's wait is refused with 503 SERVER_BUSY.
func TestAdmissionRefusesAfterTheWait(t *testing.T) {
	srv, started, _ := admissionServer(t, 50*time.Millisecond)
	get(t, srv.URL+"/api/v1/work?n=1")
	<-started
	assertBusy(t, <-get(t, srv.URL+"/api/v1/work?n=2"))
}

// A streaming response gives its turn back once it starts streaming: it waits on the network,
// not on the node.
func TestAdmissionReleasesStreamingResponses(t *testing.T) {
	srv, started, release := admissionServer(t, time.Minute)
	stream := get(t, srv.URL+"/api/v1/stream")
	if n := <-started; n != "stream" {
		t.Fatalf("started %s", n)
	}
	work := get(t, srv.URL+"/api/v1/work?n=1")
	if n := <-started; n != "1" {
		t.Fatalf("started %s; want the request after the stream", n)
	}
	close(release)
	var wg sync.WaitGroup
	for _, ch := range []<-chan *http.Response{stream, work} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res := <-ch; res != nil {
				res.Body.Close()
			}
		}()
	}
	wg.Wait()
}

// body returns the body of a GET.
func body(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
