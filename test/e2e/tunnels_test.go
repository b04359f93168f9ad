package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"gale/internal/domains/tunnels"
	"gale/internal/platform/config"
	"gale/internal/platform/store/storetest"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// tunnelTarget is a device web page on the agent's machine: it answers what it received.
func tunnelTarget(t *testing.T) (*httptest.Server, int) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery,
			"host": r.Host, "authorization": r.Header.Get("Authorization"), "cookie": r.Header.Get("Cookie"), "body": string(body)})
	})
	mux.HandleFunc("/login-first", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: "s1", Path: "/"})
		http.Redirect(w, r, "/login?next=%2F", http.StatusFound)
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		typ, msg, err := ws.Read(r.Context())
		if err == nil {
			_ = ws.Write(r.Context(), typ, append([]byte("echo:"), msg...))
		}
		_ = ws.Close(websocket.StatusNormalClosure, "")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "8192")
		_, _ = w.Write([]byte(strings.Repeat("x", 8192)))
	})
	mux.HandleFunc("/big-stream", func(w http.ResponseWriter, r *http.Request) {
		for range 8 {
			_, _ = w.Write([]byte(strings.Repeat("y", 1024)))
			w.(http.Flusher).Flush()
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, srv.Listener.Addr().(*net.TCPAddr).Port
}

// tunnelClient calls the proxy as a browser would, without following redirects.
type tunnelClient struct {
	t    *testing.T
	node *apptest.Env
}

func (c tunnelClient) do(method, path string, header http.Header, body string) (*http.Response, []byte, error) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.node.Server.URL+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	return res, raw, err
}

func (c tunnelClient) must(want int, method, path string, header http.Header, body string) (*http.Response, []byte) {
	c.t.Helper()
	res, raw, err := c.do(method, path, header, body)
	if err != nil || res.StatusCode != want {
		c.t.Fatalf("%s %s = %d %s (%v), want %d", method, path, res.StatusCode, raw, err, want)
	}
	return res, raw
}

// openTunnel creates a tunnel as admin, redeems an http-ticket for it and returns the tunnel
// and the proxy's cookie.
func openTunnel(t *testing.T, node *apptest.Env, admin apptest.Caller, body map[string]any) (tunnels.Tunnel, *http.Cookie) {
	t.Helper()
	var tn tunnels.Tunnel
	node.Must(http.StatusCreated, admin, "POST", "/api/v1/tunnels", body).JSON(t, &tn)
	var tk tunnels.Ticket
	node.Must(http.StatusOK, admin, "POST", "/api/v1/tunnels/"+tn.ID+"/http-ticket", nil).JSON(t, &tk)
	res, _ := tunnelClient{t, node}.must(http.StatusSeeOther, "GET", strings.TrimPrefix(tk.URL, node.Server.URL), nil, "")
	for _, c := range res.Cookies() {
		if c.Name == tunnels.CookieName {
			return tn, c
		}
	}
	t.Fatalf("the ticket set no cookie: %v", res.Header)
	return tn, nil
}

// cookieHeader is the cookie as a browser sends it back.
func cookieHeader(c *http.Cookie) string { return c.Name + "=" + c.Value }

func apiError(raw []byte) string {
	var env struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(raw, &env)
	return env.Error.Code
}

func TestTunnelServesALocalPageThroughTheRealAgent(t *testing.T) {
	node := apptest.New(t, func(c *config.Config) {
		c.TunnelAllowDeviceLocal = true
		c.TunnelMaxResponseBytes = 4096
	})
	agent := startStreamAgent(t, node)
	_, port := tunnelTarget(t)
	admin := node.Admin()
	client := tunnelClient{t, node}
	target := map[string]any{"deviceId": agent.deviceID, "targetHost": "127.0.0.1", "targetPort": port, "scheme": "http"}
	a, cookie := openTunnel(t, node, admin, target)
	root := tunnels.ProxyPath(a.ID)
	withCookie := http.Header{"Cookie": {cookieHeader(cookie) + "; theme=dark"}, "Authorization": {"Bearer not-for-the-target"}}

	_, raw := client.must(http.StatusOK, "GET", root+"status/page%20one?x=1&y=%2F", withCookie, "")
	var seen map[string]string
	if err := json.Unmarshal(raw, &seen); err != nil {
		t.Fatalf("page = %s", raw)
	}
	want := map[string]string{"method": "GET", "path": "/status/page one", "query": "x=1&y=%2F", "host": "127.0.0.1:" + strconv.Itoa(port),
		"authorization": "", "cookie": "theme=dark", "body": ""}
	for k, v := range want {
		if seen[k] != v {
			t.Errorf("the target saw %s = %q, want %q", k, seen[k], v)
		}
	}
	_, raw = client.must(http.StatusOK, "POST", root+"form", withCookie, "a=1&b=2")
	if err := json.Unmarshal(raw, &seen); err != nil || seen["body"] != "a=1&b=2" || seen["method"] != "POST" {
		t.Fatalf("posted page = %s", raw)
	}

	// Redirects to the target's root and its cookies stay under the tunnel's path.
	res, _ := client.must(http.StatusFound, "GET", root+"login-first", withCookie, "")
	if loc := res.Header.Get("Location"); loc != root+"login?next=%2F" {
		t.Errorf("Location = %q, want %s", loc, root+"login?next=%2F")
	}
	if set := res.Header.Get("Set-Cookie"); set != "sid=s1; Path="+root {
		t.Errorf("Set-Cookie = %q, want sid=s1; Path=%s", set, root)
	}

	// A WebSocket upgrade passes through.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(node.Server.URL, "http")+root+"ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Cookie": {cookieHeader(cookie)}}})
	if err != nil {
		t.Fatalf("WebSocket through the tunnel: %v", err)
	}
	if err := ws.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := ws.Read(ctx); err != nil || string(msg) != "echo:hi" {
		t.Errorf("WebSocket answer = %q %v, want echo:hi", msg, err)
	}
	ws.CloseNow()

	// The size cap: a declared length above it is refused before any byte, a streamed answer
	// that outgrows it is cut off.
	if res, raw, _ := client.do("GET", root+"big", withCookie, ""); res.StatusCode != http.StatusBadGateway || apiError(raw) != tunnels.CodeTooLarge {
		t.Errorf("answer over the cap = %d %s, want 502 %s", res.StatusCode, raw, tunnels.CodeTooLarge)
	}
	if res, raw, err := client.do("GET", root+"big-stream", withCookie, ""); err == nil || len(raw) > 4096 {
		t.Errorf("streamed answer over the cap = %d, %d bytes (%v), want cut off at 4096", res.StatusCode, len(raw), err)
	}

	// Only the cookie opens the proxy: a bearer token does not, nor tunnel A's cookie on tunnel B.
	bearer := http.Header{"Authorization": {"Bearer " + admin.Token}}
	if res, raw, _ := client.do("GET", root, bearer, ""); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("proxy with a bearer token = %d %s, want 401", res.StatusCode, raw)
	}
	b, cookieB := openTunnel(t, node, admin, target)
	if res, raw, _ := client.do("GET", tunnels.ProxyPath(b.ID), withCookie, ""); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("tunnel A's cookie on tunnel B = %d %s, want 401", res.StatusCode, raw)
	}
	client.must(http.StatusOK, "GET", tunnels.ProxyPath(b.ID), http.Header{"Cookie": {cookieHeader(cookieB)}}, "")

	// Closed: the cookie opens nothing any more.
	node.Must(http.StatusNoContent, admin, "DELETE", "/api/v1/tunnels/"+a.ID, nil)
	if res, raw, _ := client.do("GET", root, withCookie, ""); res.StatusCode != http.StatusNotFound || apiError(raw) != tunnels.CodeClosed {
		t.Errorf("closed tunnel = %d %s, want 404 %s", res.StatusCode, raw, tunnels.CodeClosed)
	}

	// An https target: its certificate must verify, unless the tunnel accepts any.
	tlsTarget := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "over tls") }))
	defer tlsTarget.Close()
	tlsPort := tlsTarget.Listener.Addr().(*net.TCPAddr).Port
	strict, strictCookie := openTunnel(t, node, admin, map[string]any{"deviceId": agent.deviceID, "targetHost": "127.0.0.1", "targetPort": tlsPort, "scheme": "https"})
	if res, raw, _ := client.do("GET", tunnels.ProxyPath(strict.ID), http.Header{"Cookie": {cookieHeader(strictCookie)}}, ""); res.StatusCode != http.StatusBadGateway ||
		apiError(raw) != tunnels.CodeUpstream {
		t.Errorf("https target with an unknown certificate = %d %s, want 502 %s", res.StatusCode, raw, tunnels.CodeUpstream)
	}
	lax, laxCookie := openTunnel(t, node, admin, map[string]any{"deviceId": agent.deviceID, "targetHost": "127.0.0.1", "targetPort": tlsPort, "scheme": "https",
		"insecureTls": true})
	if _, raw := client.must(http.StatusOK, "GET", tunnels.ProxyPath(lax.ID), http.Header{"Cookie": {cookieHeader(laxCookie)}}, ""); string(raw) != "over tls" {
		t.Errorf("https target with insecureTls = %q", raw)
	}

	// The agent gone: 503 at once.
	agent.stop()
	waitFor(t, 15*time.Second, "the agent's connection is gone", func() bool { return !hubOf(node).Connected(agent.deviceID) })
	if res, raw, _ := client.do("GET", tunnels.ProxyPath(b.ID), http.Header{"Cookie": {cookieHeader(cookieB)}}, ""); res.StatusCode != http.StatusServiceUnavailable ||
		apiError(raw) != tunnels.CodeAgentOffline {
		t.Errorf("tunnel of a disconnected agent = %d %s, want 503 %s", res.StatusCode, raw, tunnels.CodeAgentOffline)
	}
}

// dialThroughAgent opens a tunnel.dial stream as a server would and returns the agent's header.
func dialThroughAgent(t *testing.T, node *apptest.Env, deviceID string, args agentproto.TunnelDialArgs) agentproto.TunnelDialHeader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := hubOf(node).OpenStream(ctx, deviceID, agentproto.StreamTunnelDial, args)
	if err != nil {
		t.Fatalf("open the stream: %v", err)
	}
	defer st.Close()
	line, err := bufio.NewReader(st).ReadBytes('\n')
	if err != nil {
		t.Fatalf("read the header: %v", err)
	}
	var h agentproto.TunnelDialHeader
	if err := json.Unmarshal(line, &h); err != nil {
		t.Fatalf("header %q: %v", line, err)
	}
	return h
}

func TestTheAgentRefusesDeviceLocalTargetsItWasNotAllowed(t *testing.T) {
	node := apptest.New(t)
	agent := startStreamAgent(t, node)
	_, port := tunnelTarget(t)
	admin := node.Admin()

	r := node.Do(admin, "POST", "/api/v1/tunnels", map[string]any{"deviceId": agent.deviceID, "targetHost": "127.0.0.1", "targetPort": port, "scheme": "http"})
	if r.Status != http.StatusBadRequest || r.ErrorCode() != tunnels.CodeDeviceLocal {
		t.Fatalf("loopback tunnel by default = %d %s, want 400 %s", r.Status, r.Body, tunnels.CodeDeviceLocal)
	}
	// A server tricked into asking (a name that resolves to loopback, a bug) still gets no
	// connection: the agent checks the addresses itself.
	for _, host := range []string{"127.0.0.1", "localhost", "::ffff:127.0.0.1"} {
		h := dialThroughAgent(t, node, agent.deviceID, agentproto.TunnelDialArgs{Host: host, Port: port})
		if h.Error == nil || h.Error.Code != agentproto.ErrTargetForbidden {
			t.Errorf("agent dialing %s unallowed = %+v, want %s", host, h, agentproto.ErrTargetForbidden)
		}
	}
	if h := dialThroughAgent(t, node, agent.deviceID, agentproto.TunnelDialArgs{Host: "127.0.0.1", Port: port, AllowDeviceLocal: true}); h.Error != nil ||
		h.Address != fmt.Sprintf("127.0.0.1:%d", port) {
		t.Errorf("agent dialing 127.0.0.1 allowed = %+v, want connected", h)
	}
}

func TestANameResolvingToLoopbackIsRefusedEvenWithTheSetting(t *testing.T) {
	name, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	addrs, err := net.LookupIP(name)
	if err != nil || len(addrs) == 0 || !addrs[0].IsLoopback() {
		t.Skipf("this machine's name %s does not resolve to loopback (%v %v)", name, addrs, err)
	}
	node := apptest.New(t, func(c *config.Config) { c.TunnelAllowDeviceLocal = true })
	agent := startStreamAgent(t, node)
	_, port := tunnelTarget(t)
	// The setting lets tunnels name a device-local address; a name is not one, so the agent is
	// told not to reach such addresses, and refuses what the name resolves to.
	tn, cookie := openTunnel(t, node, node.Admin(), map[string]any{"deviceId": agent.deviceID, "targetHost": name, "targetPort": port, "scheme": "http"})
	res, raw, _ := tunnelClient{t, node}.do("GET", tunnels.ProxyPath(tn.ID), http.Header{"Cookie": {cookieHeader(cookie)}}, "")
	if res.StatusCode != http.StatusForbidden || apiError(raw) != tunnels.CodeTargetForbidden {
		t.Fatalf("tunnel to %s = %d %s, want 403 %s", name, res.StatusCode, raw, tunnels.CodeTargetForbidden)
	}
}

// TestTunnelWorksThroughEitherNode proxies through the node that does not hold the agent's
// connection (the stream is relayed) and uses one node's cookie on the other.
func TestTunnelWorksThroughEitherNode(t *testing.T) {
	if storetest.Backend() != "postgres" {
		t.Skip("several nodes need PostgreSQL (set TEST_DATABASE_URL): SQLite serves one node")
	}
	opener := apptest.New(t, func(c *config.Config) { c.TunnelAllowDeviceLocal = true })
	holder := opener.SecondNode()
	agent := startStreamAgent(t, holder)
	_, port := tunnelTarget(t)
	tn, cookie := openTunnel(t, opener, opener.Admin(), map[string]any{"deviceId": agent.deviceID, "targetHost": "127.0.0.1",
		"targetPort": port, "scheme": "http"})
	withCookie := http.Header{"Cookie": {cookieHeader(cookie)}}
	for name, node := range map[string]*apptest.Env{"relayed": opener, "direct": holder} {
		_, raw := tunnelClient{t, node}.must(http.StatusOK, "GET", tunnels.ProxyPath(tn.ID)+"x", withCookie, "")
		var seen map[string]string
		if err := json.Unmarshal(raw, &seen); err != nil || seen["path"] != "/x" {
			t.Errorf("%s: page = %s", name, raw)
		}
	}
}
