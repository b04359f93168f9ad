// Package httpapi is Gale's HTTP edge: the router, the middleware every request crosses
// (request ID, logging, metrics, recovery), the error envelope, operation registration with
// authentication, permission and MFA checks, paging helpers and the OpenAPI document.
package httpapi

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"gale/internal/platform/access"
)

// Prefix is the base path of the versioned API.
const Prefix = "/api/v1"

// Authenticator turns a request's credential into a principal. It returns an *apperr.Error
// (401) when the credential is missing or refused.
type Authenticator interface {
	Authenticate(ctx context.Context, r *http.Request) (*access.Principal, error)
}

// SecurityRecorder records refusals (permission denied, MFA missing) as security events.
type SecurityRecorder interface {
	RecordDenied(ctx context.Context, action, reason string)
}

// Options configure the server.
type Options struct {
	MaxBodyBytes   int64
	Enable2FA      bool
	TrustedProxies []*net.IPNet
	Version        string
	// HSTSMaxAge, when set, is sent as Strict-Transport-Security on every answer.
	HSTSMaxAge time.Duration
	// AfterWrite runs once an operation marked ChangesAccess has succeeded (its transactions
	// committed): such a write may have changed who may do what, or an organization.
	AfterWrite func(context.Context)
	// Admission bounds the API requests served at once; zero InFlight admits every request.
	Admission Admission
}

// Server holds the router and the huma API that domains register operations on.
type Server struct {
	API      huma.API
	mux      *router
	auth     Authenticator
	security SecurityRecorder
	logger   *slog.Logger
	opts     Options
	metrics  *metrics
	registry *prometheus.Registry
	// servicePrincipals authenticates the partner API's operations; nil until installed.
	servicePrincipals Authenticator
	// routes are the registered operations by ID, for Allow.
	routes map[string]Route
	// admission admits API requests (nil: all at once); agentPrefixes are the paths of agents'
	// traffic, which it never holds back (see admit).
	admission     *gate
	agentPrefixes []string
}

// huma makes its errors with a package variable: set once, before any server exists, so that
// servers built at once (tests) never write it while another registers operations.
func init() { huma.NewError = newHumaError }

// New builds the server. Domains then register their operations with Register, and plain
// handlers (WebSocket, downloads) with Handle.
func New(logger *slog.Logger, auth Authenticator, security SecurityRecorder, opts Options) *Server {
	mux := &router{}
	cfg := huma.DefaultConfig("Gale API", opts.Version)
	cfg.Info.Description = "Gale remote monitoring and management. Errors always take the form " +
		"{\"error\": {\"code\", \"message\", \"details\"?}}. Lists return {data, pagination: {hasMore, cursor}}; " +
		"pass cursor back to read the next page. Where a path matches both a fixed segment and a parameter " +
		"(/alerts/channels/{id} and /alerts/{id}/acknowledge), the operation with the fixed segment answers " +
		"when it serves the method."
	cfg.CreateHooks = nil
	cfg.Formats = map[string]huma.Format{"application/json": jsonFormat, "json": jsonFormat}
	cfg.DocsPath = ""
	cfg.Components.Schemas = huma.NewMapRegistry("#/components/schemas/", schemaName)
	cfg.SchemasPath = ""
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", BearerFormat: "JWT"},
		"apiKey": {Type: "apiKey", In: "header", Name: "X-API-Key"},
		"servicePrincipalKey": {Type: "apiKey", In: "header", Name: "X-API-Key",
			Description: "A partner service-principal key, svc_sp_...; it works only on /partner-api operations."},
	}
	cfg.OnAddOperation = append(cfg.OnAddOperation, documentErrors, documentRawBody)
	api := humago.NewWithPrefix(mux, Prefix, cfg)
	reg := prometheus.NewRegistry()
	s := &Server{API: api, mux: mux, auth: auth, security: security, logger: logger, opts: opts,
		metrics: newMetrics(reg), registry: reg, routes: map[string]Route{}}
	if opts.Admission.InFlight > 0 {
		s.admission = newGate(opts.Admission, reg)
	}
	mux.HandleFunc("GET "+Prefix+"/docs", serveDocs)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return s
}

// schemaName is huma's name for a schema, with "any" named Any: the default names a generic
// over map[string]any "ListMapStringInterface {}", which is no valid component name.
func schemaName(t reflect.Type, hint string) string {
	return strings.ReplaceAll(huma.DefaultSchemaNamer(t, hint), "Interface {}", "Any")
}

// SetAuthenticator installs the authenticator of signed-in operations, and SetSecurityRecorder
// what records their refusals: the modules that own them install them while wiring, before
// serving.
func (s *Server) SetAuthenticator(a Authenticator) { s.auth = a }

// SetSecurityRecorder: see SetAuthenticator.
func (s *Server) SetSecurityRecorder(r SecurityRecorder) { s.security = r }

// SetServicePrincipals installs the authenticator of the partner API's operations (routes
// registered with ServicePrincipal). Call it while wiring, before serving.
func (s *Server) SetServicePrincipals(a Authenticator) { s.servicePrincipals = a }

// Registry is the Prometheus registry served at /metrics, for domains' own metrics.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Handle registers a plain handler (health checks, WebSocket upgrades) on the router.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Handler returns the whole middleware chain around the router.
func (s *Server) Handler() http.Handler {
	return s.securityHeaders(s.recoverer(s.requestMeta(s.observe(s.admit(s.mux)))))
}

// requestMeta assigns the request ID (kept from a well-formed X-Request-Id or minted),
// echoes it, and stores it with the client address for logs and the audit log.
func (s *Server) requestMeta(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set("X-Request-Id", id)
		meta := access.Request{ID: id, IP: ClientIP(r, s.opts.TrustedProxies), UserAgent: r.UserAgent()}
		next.ServeHTTP(w, r.WithContext(access.WithRequest(r.Context(), meta)))
	})
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ClientIP is the caller's address: the connection's peer, or the last untrusted hop of
// X-Forwarded-For when the peer is a trusted proxy.
func ClientIP(r *http.Request, trusted []*net.IPNet) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if !isTrusted(host, trusted) {
		return host
	}
	hops := strings.Split(r.Header.Get("X-Forwarded-For"), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		if hop == "" {
			continue
		}
		if !isTrusted(hop, trusted) {
			return hop
		}
	}
	return host
}

func isTrusted(ip string, trusted []*net.IPNet) bool {
	parsed := net.ParseIP(ip)
	if parsed == nil {
		return false
	}
	for _, n := range trusted {
		if n.Contains(parsed) {
			return true
		}
	}
	return false
}

// statusWriter remembers the status for logs and metrics. It sends the status line with the
// first byte of the body (or at the end of the request), so that a body written whole
// (WriteWhole) goes with its Content-Length rather than in chunks. It implements Unwrap and
// Flush so streaming responses and http.ResponseController keep working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
	sent   bool
	bytes  int64
	// streaming, when set, runs once the response starts streaming (a flush, a hijack).
	streaming func()
}

func (w *statusWriter) WriteHeader(code int) {
	switch {
	case code == http.StatusSwitchingProtocols:
		// The final answer of an upgrade, sent before the connection is taken over.
		w.status, w.sent = code, true
		w.ResponseWriter.WriteHeader(code)
	case code >= 100 && code < 200:
		w.ResponseWriter.WriteHeader(code)
	case w.status == 0:
		w.status = code
	}
}

// send sends the status line and headers, once.
func (w *statusWriter) send() {
	if w.sent {
		return
	}
	w.sent = true
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.ResponseWriter.WriteHeader(w.status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.send()
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// WriteWhole writes b as the whole body, with its length when nothing was sent yet.
func (w *statusWriter) WriteWhole(b []byte) (int, error) {
	if !w.sent {
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	}
	return w.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack hands the connection over to a handler that answers on it itself (a proxied
// upgrade): nothing more is sent through the writer, and the request is logged as switching
// protocols.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		if w.streaming != nil {
			w.streaming()
		}
		w.sent = true
		if w.status == 0 {
			w.status = http.StatusSwitchingProtocols
		}
	}
	return conn, rw, err
}

func (w *statusWriter) Flush() {
	w.send()
	if w.streaming != nil {
		w.streaming()
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// observe logs each request with its request ID and records metrics by route pattern.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		sw.send()
		elapsed := time.Since(start)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		s.metrics.observe(r.Method, route, sw.status, elapsed)
		level := slog.LevelInfo
		if sw.status >= 500 {
			level = slog.LevelError
		}
		s.logger.LogAttrs(r.Context(), level, "request",
			slog.String("requestId", access.RequestFrom(r.Context()).ID),
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", sw.status), slog.Int64("bytes", sw.bytes),
			slog.Duration("duration", elapsed), slog.String("ip", access.RequestFrom(r.Context()).IP))
	})
}

// recoverer turns a panic into 500 INTERNAL, logging the value but not sending it.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.logger.Error("panic serving request", "panic", v, "path", r.URL.Path,
					"requestId", w.Header().Get("X-Request-Id"))
				WriteError(w, internalError())
			}
		}()
		next.ServeHTTP(w, r)
	})
}
