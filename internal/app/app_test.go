package app_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/platform/jobs"
	"gale/internal/testkit/apptest"
)

// syncBuffer collects log output written from several goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestBootstrapAdminOnlyOnEmptyDatabaseAndPasswordNeverLogged(t *testing.T) {
	cfg := apptest.Config(t)
	cfg.BootstrapAdminPassword = "Very-Secret-Passw0rd"
	var logs syncBuffer
	a, err := app.New(context.Background(), cfg, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if !strings.Contains(logs.String(), "created the first system administrator") {
		t.Fatalf("no creation logged: %s", logs.String())
	}
	// A later start with other bootstrap values creates nobody: the database has users.
	cfg.BootstrapAdminEmail = "second@gale.test"
	b, err := app.New(context.Background(), cfg, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var n int
	if err := b.DB.SQL.QueryRow(`SELECT COUNT(*) FROM users`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d users after the second start, want 1", n)
	}
	if strings.Contains(logs.String(), "Very-Secret-Passw0rd") {
		t.Fatal("the bootstrap password appears in the log")
	}
}

func TestEmptyDatabaseWithoutBootstrapExplainsTheWayOut(t *testing.T) {
	cfg := apptest.Config(t)
	cfg.BootstrapAdminEmail, cfg.BootstrapAdminPassword = "", ""
	var logs syncBuffer
	a, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !strings.Contains(logs.String(), "BOOTSTRAP_ADMIN_EMAIL") || !strings.Contains(logs.String(), "gale user create") {
		t.Fatalf("log does not say how to create the first user: %s", logs.String())
	}
}

func TestWeakBootstrapPasswordIsRefused(t *testing.T) {
	cfg := apptest.Config(t)
	cfg.BootstrapAdminPassword = "short"
	if a, err := app.New(context.Background(), cfg, slog.New(slog.DiscardHandler)); err == nil {
		a.Close()
		t.Fatal("start with a weak bootstrap password succeeded")
	}
}

func TestGracefulShutdownFinishesInFlightRequests(t *testing.T) {
	cfg := apptest.Config(t)
	a, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	a.HTTP.Handle("GET /slow", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		time.Sleep(300 * time.Millisecond)
		w.Write([]byte("done"))
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- a.Serve(ctx, ln) }()

	type result struct {
		status int
		body   string
		err    error
	}
	got := make(chan result, 1)
	go func() {
		res, err := http.Get("http://" + ln.Addr().String() + "/slow")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		got <- result{status: res.StatusCode, body: string(b)}
	}()
	<-started
	cancel() // as SIGTERM does
	r := <-got
	if r.err != nil || r.status != 200 || r.body != "done" {
		t.Fatalf("in-flight request during shutdown: %+v, want 200 done", r)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve returned %v", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/health"); err == nil {
		t.Fatal("server still accepts connections after shutdown")
	}
}

func TestPeriodicCleanupRunsOnTheJobQueue(t *testing.T) {
	e := apptest.New(t)
	done := make(chan error, 1)
	err := e.App.StartJobs(context.Background(), jobs.Options{OnDone: func(name string, err error) {
		if name == "cleanup" {
			select {
			case done <- err:
			default:
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("cleanup failed: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cleanup job did not run within 30s of the queue starting")
	}
}

func TestReadyFollowsTheDatabaseAndHealthDoesNot(t *testing.T) {
	e := apptest.New(t)
	e.Must(200, apptest.Anonymous, "GET", "/ready", nil)
	e.App.DB.SQL.Close()
	r := e.Do(apptest.Anonymous, "GET", "/ready", nil)
	if r.Status != 503 || r.ErrorCode() != "NOT_READY" {
		t.Fatalf("/ready without a database = %d %s, want 503 NOT_READY", r.Status, r.Body)
	}
	e.Must(200, apptest.Anonymous, "GET", "/health", nil)
}

func TestMetricsCountRequestsByRoute(t *testing.T) {
	e := apptest.New(t)
	e.Do(apptest.Anonymous, "GET", "/api/v1/orgs/organizations", nil)
	body := string(e.Must(200, apptest.Anonymous, "GET", "/metrics", nil).Body)
	want := `gale_http_requests_total{method="GET",route="GET /api/v1/orgs/organizations",status="401"} 1`
	if !strings.Contains(body, want) || !strings.Contains(body, "gale_http_request_duration_seconds_bucket") {
		t.Fatalf("metrics lack %s:\n%.2000s", want, body)
	}
}
