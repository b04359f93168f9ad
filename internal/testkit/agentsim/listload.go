package agentsim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// ListLoad is what a phase of the list load measured.
type ListLoad struct {
	Elapsed time.Duration
	// OK counts the 200 answers; Overloaded the 503s (the server's queue of API work was full:
	// the client then waits as Retry-After says, 1 s when it says nothing); Errors every other
	// status and every failed request, the first of them described in FirstError.
	OK         int
	Overloaded int
	Errors     int
	FirstError string
	// P50 and P99 are of the 200 answers.
	P50, P99 time.Duration
	// BareP99 is the latency of a bare request (GET /health: no database, no authentication)
	// sent every 50 ms meanwhile: the host's floor.
	BareP99 time.Duration
}

// PerSecond is the rate of 200 answers.
func (l ListLoad) PerSecond() float64 {
	if l.Elapsed <= 0 {
		return 0
	}
	return float64(l.OK) / l.Elapsed.Seconds()
}

func (l ListLoad) String() string {
	s := fmt.Sprintf("%.0f requests/s (%d answered 200 in %s), p50 %s, p99 %s; 503: %d, other errors: %d; bare request p99 %s",
		l.PerSecond(), l.OK, l.Elapsed.Round(time.Millisecond), l.P50.Round(time.Microsecond), l.P99.Round(time.Microsecond),
		l.Overloaded, l.Errors, l.BareP99.Round(time.Microsecond))
	if l.FirstError != "" {
		s += " (first error: " + l.FirstError + ")"
	}
	return s
}

// listWarmUp is how long the list clients run before the first phase, so that their
// connections, the server's caches and its database connections are all open when timing
// starts.
const listWarmUp = 3 * time.Second

// listLoad is the run's list clients; their connections last from one phase to the next.
type listLoad struct {
	s      *sim
	client *http.Client
}

func (s *sim) newListLoad() *listLoad {
	return &listLoad{s: s, client: &http.Client{Timeout: time.Minute,
		Transport: &http.Transport{MaxIdleConnsPerHost: s.o.ListClients}}}
}

// run sends GET ListPath from every client, one request after another, for d; the requests
// under way at the end are let finish, so that the server logs no request cut short.
func (l *listLoad) run(ctx context.Context, d time.Duration) ListLoad {
	phase, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	bare := make(chan []time.Duration, 1)
	go func() { bare <- l.s.probe(phase, 50*time.Millisecond) }()
	var mu sync.Mutex
	var out ListLoad
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for range l.s.o.ListClients {
		wg.Go(func() {
			var mine ListLoad
			var local []time.Duration
			for phase.Err() == nil {
				took, status, wait, err := l.get(ctx)
				switch {
				case err != nil || (status != http.StatusOK && status != http.StatusServiceUnavailable):
					mine.Errors++
					if mine.FirstError == "" {
						mine.FirstError = fmt.Sprintf("status %d %v", status, err)
					}
					sleep(phase, 100*time.Millisecond)
				case status == http.StatusServiceUnavailable:
					mine.Overloaded++
					sleep(phase, wait)
				default:
					local = append(local, took)
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			out.Overloaded += mine.Overloaded
			out.Errors += mine.Errors
			if out.FirstError == "" {
				out.FirstError = mine.FirstError
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	out.Elapsed = time.Since(start)
	out.OK = len(lat)
	out.P50, out.P99, _ = percentiles(lat)
	_, out.BareP99, _ = percentiles(<-bare)
	return out
}

// get sends one list request and reads its answer whole; wait is how long a 503 asks to wait.
func (l *listLoad) get(ctx context.Context) (took time.Duration, status int, wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.s.o.Server+l.s.o.ListPath, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+l.s.o.AdminToken)
	start := time.Now()
	res, err := l.client.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return 0, res.StatusCode, 0, err
	}
	wait = time.Second
	if n, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && n >= 0 {
		wait = time.Duration(n) * time.Second
	}
	return time.Since(start), res.StatusCode, wait, nil
}
