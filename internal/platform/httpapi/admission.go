package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Admission bounds the work this node takes from people and integrations at once, so that
// agents' messages (heartbeats, results, enrollment, stream data) always find the node
// responsive: when a technician's dashboard or an integration floods the API, the fleet
// must not look offline. Agent routes, health checks and metrics never wait here.
type Admission struct {
	// InFlight is how many API requests run at once; the rest wait in arrival order.
	InFlight int
	// Queue is how many may wait; a request finding it full is refused at once.
	Queue int
	// Wait is how long a request may wait for its turn before it is refused.
	Wait time.Duration
}

// errBusy answers a request refused by admission.
var errBusy = &apperr.Error{Kind: apperr.KindUnavailable, Code: "SERVER_BUSY",
	Message: "the server is busy with other requests; retry after the time in Retry-After", RetryAfter: time.Second}

// gate is Admission at work: a counting semaphore whose waiters are served in arrival order.
type gate struct {
	opts  Admission
	mu    sync.Mutex
	inUse int
	queue []chan struct{}

	inFlight, waiting prometheus.Gauge
	refused           prometheus.Counter
}

func newGate(opts Admission, reg prometheus.Registerer) *gate {
	g := &gate{opts: opts,
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gale_api_requests_in_flight",
			Help: "API requests being served by this node (agent routes not counted)."}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gale_api_requests_waiting",
			Help: "API requests waiting for their turn on this node."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "gale_api_requests_refused_total",
			Help: "API requests answered 503 SERVER_BUSY because the node's queue was full or their wait too long."}),
	}
	reg.MustRegister(g.inFlight, g.waiting, g.refused)
	return g
}

// acquire waits for a turn: errBusy when the queue is full or the wait too long, ctx's error
// when the caller went away.
func (g *gate) acquire(ctx context.Context) error {
	g.mu.Lock()
	if g.inUse < g.opts.InFlight {
		g.inUse++
		g.mu.Unlock()
		g.inFlight.Inc()
		return nil
	}
	if len(g.queue) >= g.opts.Queue {
		g.mu.Unlock()
		g.refused.Inc()
		return errBusy
	}
	turn := make(chan struct{})
	g.queue = append(g.queue, turn)
	g.mu.Unlock()
	g.waiting.Inc()
	defer g.waiting.Dec()
	timer := time.NewTimer(g.opts.Wait)
	defer timer.Stop()
	var err error
	select {
	case <-turn:
		g.inFlight.Inc()
		return nil
	case <-timer.C:
		err = errBusy
	case <-ctx.Done():
		err = ctx.Err()
	}
	g.mu.Lock()
	i := slices.Index(g.queue, turn)
	if i >= 0 {
		g.queue = slices.Delete(g.queue, i, i+1)
	}
	g.mu.Unlock()
	if i < 0 {
		// The turn came as the wait ended: take it after all.
		g.inFlight.Inc()
		return nil
	}
	if errors.Is(err, errBusy) {
		g.refused.Inc()
	}
	return err
}

// release hands the turn to the next waiter.
func (g *gate) release() {
	g.inFlight.Dec()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) > 0 {
		next := g.queue[0]
		g.queue = g.queue[1:]
		close(next)
		return
	}
	g.inUse--
}

// AgentRoutes declares paths (prefixes) that carry agents' traffic: they bypass admission,
// and their database work runs in the agents' own lane (store.AgentWork). Call it while
// wiring, before serving.
func (s *Server) AgentRoutes(prefixes ...string) {
	s.agentPrefixes = append(s.agentPrefixes, prefixes...)
}

func (s *Server) agentRoute(path string) bool {
	for _, p := range s.agentPrefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// exempt tells the requests that never wait for admission besides agents': the node's own
// health and metrics, static files, and long-lived requests (upgrades to WebSocket, event
// streams), which would hold a turn for as long as they stay open.
func exempt(r *http.Request) bool {
	switch {
	case r.URL.Path == "/health", r.URL.Path == "/ready", r.URL.Path == "/metrics":
		return true
	case strings.HasPrefix(r.URL.Path, "/assets/"):
		return true
	case r.Header.Get("Upgrade") != "":
		return true
	case strings.Contains(r.Header.Get("Accept"), "text/event-stream"):
		return true
	}
	return false
}

// admit runs agents' requests in their lane at once, and the others in their turn.
func (s *Server) admit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.agentRoute(r.URL.Path) {
			next.ServeHTTP(w, r.WithContext(store.AgentWork(r.Context())))
			return
		}
		if s.admission == nil || exempt(r) {
			next.ServeHTTP(w, r)
			return
		}
		if err := s.admission.acquire(r.Context()); err != nil {
			if ae, ok := apperr.As(err); ok {
				WriteError(w, ae)
			}
			return
		}
		var once sync.Once
		release := func() { once.Do(s.admission.release) }
		defer release()
		if sw, ok := w.(*statusWriter); ok {
			// A response that streams (flushes, or takes the connection over) has done its
			// work of answering; what follows is waiting on the network.
			sw.streaming = release
		}
		next.ServeHTTP(w, r)
	})
}
