package tunnels

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"gale/internal/domains/agenthub"
	"gale/internal/domains/devices"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/streams"
)

// openTimeout bounds opening a connection through the agent: the stream, the agent's lookup
// and dial, and its header.
const openTimeout = 30 * time.Second

// ServeHTTP is the proxy, ALL /api/v1/tunnel-http/{tunnelId}/{path...}. A request with the
// ticket parameter redeems the ticket and is redirected to the same URL without it, with the
// cookie set; every other request needs the cookie of this tunnel. Errors are the API's
// envelope: 401 without a valid cookie of this tunnel (a cookie of another tunnel included)
// or with a used ticket, 403 when the user lost remote:access, 404 NOT_FOUND when the tunnel
// or its device left the user's reach, 404 TUNNEL_CLOSED once it is closed or expired, 503
// AGENT_OFFLINE when the device's agent is not connected.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("tunnelId")
	if !store.ValidID(id) {
		httpapi.WriteError(w, apperr.NotFound("tunnel"))
		return
	}
	if raw, ok := ticketParam(r.URL.RawQuery); ok {
		s.redeem(w, r, id, raw)
		return
	}
	userID, ok := s.cookieUser(r, id)
	if !ok {
		httpapi.WriteError(w, apperr.Unauthorized("this tunnel takes only its own cookie, set by opening the url of an http-ticket "+
			"(POST /api/v1/tunnels/{id}/http-ticket); a bearer token is not accepted here"))
		return
	}
	t, err := s.authorize(r.Context(), id, userID, true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.proxy(w, r, t)
}

// redirectToSlash sends /api/v1/tunnel-http/{tunnelId} to the proxy's root.
func redirectToSlash(w http.ResponseWriter, r *http.Request) {
	loc := r.URL.EscapedPath() + "/"
	if r.URL.RawQuery != "" {
		loc += "?" + r.URL.RawQuery
	}
	http.Redirect(w, r, loc, http.StatusMovedPermanently)
}

// ticketParam finds the ticket parameter in a raw query.
func ticketParam(rawQuery string) (string, bool) {
	for _, part := range strings.Split(rawQuery, "&") {
		k, v, _ := strings.Cut(part, "=")
		if k == TicketParam {
			v, err := url.QueryUnescape(v)
			return v, err == nil
		}
	}
	return "", false
}

// withoutTicket is the raw query without the ticket parameter, the rest as it was sent.
func withoutTicket(rawQuery string) string {
	var kept []string
	for _, part := range strings.Split(rawQuery, "&") {
		if k, _, _ := strings.Cut(part, "="); k != TicketParam && part != "" {
			kept = append(kept, part)
		}
	}
	return strings.Join(kept, "&")
}

// redeem uses an http-ticket and, when it is good and its user may still use the tunnel,
// sets the cookie and redirects to the URL without the ticket.
func (s *Service) redeem(w http.ResponseWriter, r *http.Request, id, raw string) {
	tk, err := s.tickets.Redeem(r.Context(), ticketKind, id, raw)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The cookie is set even while the agent is offline: the ticket is spent, and the
	// proxy's next request says whether the agent is back.
	t, err := s.authorize(r.Context(), id, tk.UserID, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	expires := s.clock.Now().Add(CookieTTL)
	if t.ExpiresAt.Before(expires) {
		expires = t.ExpiresAt
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.cookieValue(id, tk.UserID, expires), Path: ProxyPath(id),
		Expires: expires, MaxAge: int(expires.Sub(s.clock.Now()) / time.Second), HttpOnly: true,
		Secure: r.TLS != nil || strings.HasPrefix(s.opts.PublicURL, "https://"), SameSite: http.SameSiteLaxMode})
	loc := r.URL.EscapedPath()
	if q := withoutTicket(r.URL.RawQuery); q != "" {
		loc += "?" + q
	}
	http.Redirect(w, r, loc, http.StatusSeeOther)
}

// authorize returns the tunnel if it is open and the user may still use it: active, holding
// remote:access, reaching the tunnel's organization and device, whose agent is connected
// when needAgent is set.
func (s *Service) authorize(ctx context.Context, id, userID string, needAgent bool) (Tunnel, error) {
	p, err := s.auth.PrincipalForUser(ctx, userID)
	if err != nil {
		return Tunnel{}, fmt.Errorf("load the principal of user %s: %w", userID, err)
	}
	if p == nil {
		return Tunnel{}, apperr.Unauthorized("the user of this tunnel's cookie is no longer active")
	}
	if !p.Can(access.RemoteAccess) {
		return Tunnel{}, apperr.Forbidden("missing permission " + string(access.RemoteAccess))
	}
	ctx = access.WithPrincipal(ctx, p)
	t, err := s.get(ctx, s.db, p.Scope, id)
	if err != nil {
		return t, err
	}
	if t.Status != StatusOpen {
		return t, &apperr.Error{Kind: apperr.KindNotFound, Code: CodeClosed, Message: "the tunnel is " + t.Status}
	}
	d, err := s.devices.Get(ctx, t.DeviceID)
	if err != nil {
		return t, err
	}
	if d.DecommissionedAt != nil {
		return t, apperr.NotFound("device")
	}
	if !needAgent {
		return t, nil
	}
	live := d.Status == devices.StatusOnline
	if live {
		if live, err = s.agents.LiveChannel(ctx, t.DeviceID); err != nil {
			return t, err
		}
	}
	if !live {
		return t, offline()
	}
	return t, nil
}

func offline() *apperr.Error {
	return &apperr.Error{Kind: apperr.KindUnavailable, Code: CodeAgentOffline,
		Message: "the device's agent is not connected; the tunnel works again once it is"}
}

// writeError answers err in the envelope; an error without a kind is logged and answered as
// 500 without its details, as the API does.
func (s *Service) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae, ok := apperr.As(err)
	if !ok {
		s.logger.ErrorContext(r.Context(), "tunnel request failed", "path", r.URL.Path, "error", err,
			"requestId", access.RequestFrom(r.Context()).ID)
		ae = &apperr.Error{Kind: apperr.KindInternal, Code: apperr.CodeInternal,
			Message: "internal error; the request ID in X-Request-Id identifies it in the server log"}
	}
	httpapi.WriteError(w, ae)
}

// The headers the API sets on every answer that would break the target's pages: its own
// policy and framing rules and caching come with its answers instead.
var apiOnlyHeaders = []string{"Content-Security-Policy", "X-Frame-Options", "Cache-Control"}

// proxy forwards the request to the tunnel's target through the device's agent.
func (s *Service) proxy(w http.ResponseWriter, r *http.Request, t Tunnel) {
	root := strings.TrimSuffix(ProxyPath(t.ID), "/")
	rp := &httputil.ReverseProxy{
		Transport: s.transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			out := pr.Out
			rest := strings.TrimPrefix(pr.In.URL.EscapedPath(), root)
			path, err := url.PathUnescape(rest)
			if err != nil {
				path = rest
			}
			out.URL = &url.URL{Scheme: t.Scheme, Host: t.ID, Path: path, RawPath: rest, RawQuery: pr.In.URL.RawQuery}
			out.Host = hostHeader(t)
			out.Header.Del("Authorization")
			out.Header.Del("X-API-Key")
			dropCookie(out.Header)
		},
		ModifyResponse: func(res *http.Response) error { return s.modifyResponse(res, t, root) },
		ErrorHandler:   s.proxyError,
		ErrorLog:       slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	for _, h := range apiOnlyHeaders {
		w.Header().Del(h)
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxResponseBytes)
	}
	rp.ServeHTTP(w, r)
}

// hostHeader is the Host the target expects: its name, with the port unless it is the
// scheme's default.
func hostHeader(t Tunnel) string {
	if (t.Scheme == "http" && t.TargetPort == 80) || (t.Scheme == "https" && t.TargetPort == 443) {
		if strings.Contains(t.TargetHost, ":") {
			return "[" + t.TargetHost + "]"
		}
		return t.TargetHost
	}
	return net.JoinHostPort(t.TargetHost, strconv.Itoa(t.TargetPort))
}

// errTooLarge answers a target's answer beyond the cap.
func (s *Service) errTooLarge() *apperr.Error {
	return &apperr.Error{Kind: apperr.KindUpstream, Code: CodeTooLarge,
		Message: "the target's answer is larger than " + strconv.FormatInt(s.opts.MaxResponseBytes, 10) + " bytes, the tunnels' cap"}
}

// modifyResponse caps the answer's size and maps redirects and cookies that point at the
// target's root back under the tunnel's path; nothing else of the answer changes.
func (s *Service) modifyResponse(res *http.Response, t Tunnel, root string) error {
	if res.StatusCode == http.StatusSwitchingProtocols {
		return nil // an upgraded connection (WebSocket) is a byte stream, not an answer to cap
	}
	if res.ContentLength > s.opts.MaxResponseBytes {
		return s.errTooLarge()
	}
	res.Body = &cappedBody{ReadCloser: res.Body, left: s.opts.MaxResponseBytes, err: s.errTooLarge()}
	if loc := res.Header.Get("Location"); loc != "" {
		res.Header.Set("Location", mapLocation(loc, t, root))
	}
	if cookies := res.Header.Values("Set-Cookie"); len(cookies) > 0 {
		res.Header.Del("Set-Cookie")
		for _, line := range cookies {
			if c, err := http.ParseSetCookie(line); err == nil && c.Name != CookieName {
				// The target's cookies stay with the tunnel's path, on the server's host.
				c.Path = root + "/" + strings.TrimPrefix(c.Path, "/")
				c.Domain = ""
				res.Header.Add("Set-Cookie", c.String())
			}
		}
	}
	return nil
}

// mapLocation maps a redirect to the target's own origin, or to a path from its root, to the
// same place under the tunnel's path; other redirects (relative, other hosts) stay.
func mapLocation(loc string, t Tunnel, root string) string {
	u, err := url.Parse(loc)
	if err != nil {
		return loc
	}
	switch {
	case u.Scheme == "" && u.Host == "" && strings.HasPrefix(u.Path, "/"):
	case u.Scheme == t.Scheme && strings.EqualFold(u.Host, hostHeader(t)):
		u.Scheme, u.Host = "", ""
	default:
		return loc
	}
	if u.Path == "" {
		u.Path = "/"
	}
	u.Path = root + u.Path
	if u.RawPath != "" {
		u.RawPath = root + u.RawPath
	}
	return u.String()
}

// cappedBody fails the read past left bytes; the proxy then cuts the connection, so that the
// client sees a broken answer rather than a complete-looking one.
type cappedBody struct {
	io.ReadCloser
	left int64
	err  error
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// At the cap: one more byte tells a longer answer from one that ends here.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			return 0, b.err
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// proxyError answers a failed round trip in the envelope.
func (s *Service) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	var tooBig *http.MaxBytesError
	var netErr net.Error
	ae, ok := apperr.As(err)
	switch {
	case ok:
	case errors.As(err, &tooBig):
		ae = &apperr.Error{Kind: apperr.KindTooLarge, Code: apperr.CodeTooLarge,
			Message: "the request body is larger than " + strconv.FormatInt(tooBig.Limit, 10) + " bytes, the tunnels' cap"}
	case r.Context().Err() != nil:
		return // the client went away: nobody reads an answer
	case errors.As(err, &netErr) && netErr.Timeout(), strings.Contains(err.Error(), "timeout awaiting response headers"):
		ae = &apperr.Error{Kind: apperr.KindTimeout, Code: CodeTimeout, Message: "the target did not answer in time"}
	default:
		ae = &apperr.Error{Kind: apperr.KindUpstream, Code: CodeUpstream, Message: "the target's answer failed: " + err.Error()}
	}
	httpapi.WriteError(w, ae)
}

// newTransport is the proxy's transport. A request's URL names the tunnel as its host, so
// kept-alive connections are pooled per tunnel; dialing opens a stream to the tunnel's agent.
// HTTP/1.1 only (the custom TLS dial leaves HTTP/2 off); no compression is added.
func (s *Service) newTransport() *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			c, _, err := s.dial(ctx, addr)
			return c, err
		},
		DialTLSContext:        s.dialTLS,
		ResponseHeaderTimeout: s.opts.ResponseTimeout,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       60 * time.Second,
		DisableCompression:    true,
		ExpectContinueTimeout: time.Second,
	}
}

// dial opens a connection to the target of the tunnel named in addr (its ID and a port).
func (s *Service) dial(ctx context.Context, addr string) (net.Conn, Tunnel, error) {
	id, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, Tunnel{}, err
	}
	// The request was authorized; the tunnel is read again as it may have closed since.
	t, err := s.get(ctx, s.db, access.SystemScope(), id)
	if err != nil {
		return nil, t, err
	}
	if t.Status != StatusOpen {
		return nil, t, &apperr.Error{Kind: apperr.KindNotFound, Code: CodeClosed, Message: "the tunnel is " + t.Status}
	}
	c, err := s.open(ctx, t)
	return c, t, err
}

func (s *Service) dialTLS(ctx context.Context, _, addr string) (net.Conn, error) {
	c, t, err := s.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(c, &tls.Config{ServerName: t.TargetHost, InsecureSkipVerify: t.InsecureTLS, NextProtos: []string{"http/1.1"}})
	hctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		c.Close()
		return nil, &apperr.Error{Kind: apperr.KindUpstream, Code: CodeUpstream,
			Message: "TLS with the target failed (for a self-signed device certificate, create the tunnel with insecureTls): " + err.Error()}
	}
	return tc, nil
}

// open opens a tunnel.dial stream to the tunnel's target and reads the agent's header.
func (s *Service) open(ctx context.Context, t Tunnel) (net.Conn, error) {
	args := agentproto.TunnelDialArgs{Host: t.TargetHost, Port: t.TargetPort,
		AllowDeviceLocal: s.opts.AllowDeviceLocal && agentproto.IsDeviceLocalName(t.TargetHost)}
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	st, err := s.agents.OpenStream(octx, t.DeviceID, agentproto.StreamTunnelDial, args)
	switch {
	case err == nil:
	case errors.Is(err, agenthub.ErrNotConnected):
		return nil, offline()
	case errors.Is(err, agenthub.ErrStreamsUnsupported), errors.Is(err, agenthub.ErrStreamRefused):
		return nil, &apperr.Error{Kind: apperr.KindUpstream, Code: CodeUnsupported,
			Message: "the device's agent cannot open tunnels; update the agent"}
	case errors.Is(err, context.DeadlineExceeded):
		return nil, &apperr.Error{Kind: apperr.KindTimeout, Code: CodeTimeout, Message: "the device's agent did not answer in time"}
	default:
		return nil, err
	}
	r := bufio.NewReaderSize(st, 4<<10)
	_ = st.SetReadDeadline(time.Now().Add(openTimeout))
	line, err := r.ReadSlice('\n')
	_ = st.SetReadDeadline(time.Time{})
	var h agentproto.TunnelDialHeader
	if err == nil {
		err = json.Unmarshal(line, &h)
	}
	if err != nil || h.Error != nil {
		st.Close()
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &apperr.Error{Kind: apperr.KindTimeout, Code: CodeTimeout, Message: "the device's agent did not connect to the target in time"}
	case err != nil:
		return nil, &apperr.Error{Kind: apperr.KindUpstream, Code: CodeUpstream, Message: "the agent's answer was unreadable: " + err.Error()}
	case h.Error == nil:
		return &conn{Stream: st, r: r}, nil
	case h.Error.Code == agentproto.ErrTargetForbidden:
		return nil, &apperr.Error{Kind: apperr.KindForbidden, Code: CodeTargetForbidden, Message: h.Error.Message}
	default:
		return nil, &apperr.Error{Kind: apperr.KindUpstream, Code: CodeTargetUnreachable,
			Message: "the device could not connect to the target: " + h.Error.Message}
	}
}

// conn is a tunnel's stream read through the reader that read its header.
type conn struct {
	*streams.Stream
	r *bufio.Reader
}

func (c *conn) Read(p []byte) (int, error) { return c.r.Read(p) }
