package tunnels_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/domains/tunnels"
	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/platform/config"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

// fixture is a server with a tenant and an online device (inserted, no agent connected).
type fixture struct {
	*apptest.Env
	ten    apptest.Tenant
	device string
}

func newFixture(t *testing.T, opts ...apptest.Option) *fixture {
	e := apptest.New(t, opts...)
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "gw-01"})
	return &fixture{Env: e, ten: ten, device: dev}
}

func (f *fixture) create(c apptest.Caller, body map[string]any) tunnels.Tunnel {
	f.T.Helper()
	if body["deviceId"] == nil {
		body["deviceId"] = f.device
	}
	var t tunnels.Tunnel
	f.Must(http.StatusCreated, c, "POST", api+"/tunnels", body).JSON(f.T, &t)
	return t
}

func (f *fixture) ticket(c apptest.Caller, id string) tunnels.Ticket {
	f.T.Helper()
	var tk tunnels.Ticket
	f.Must(http.StatusOK, c, "POST", api+"/tunnels/"+id+"/http-ticket", nil).JSON(f.T, &tk)
	return tk
}

// browser sends requests as a browser would, without following redirects.
func (f *fixture) browser(method, rawURL string, header http.Header) *http.Response {
	f.T.Helper()
	req, err := http.NewRequest(method, rawURL, nil)
	if err != nil {
		f.T.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		f.T.Fatalf("%s %s: %v", method, rawURL, err)
	}
	res.Body.Close()
	return res
}

// redeem opens the ticket's URL and returns the cookie it sets.
func (f *fixture) redeem(tk tunnels.Ticket) *http.Cookie {
	f.T.Helper()
	res := f.browser("GET", tk.URL, nil)
	if res.StatusCode != http.StatusSeeOther {
		f.T.Fatalf("redeem = %d, want 303", res.StatusCode)
	}
	for _, c := range res.Cookies() {
		if c.Name == tunnels.CookieName {
			return c
		}
	}
	f.T.Fatalf("redeem set no %s cookie: %v", tunnels.CookieName, res.Header["Set-Cookie"])
	return nil
}

func TestCreateValidatesTheTarget(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		body map[string]any
		code string
	}{
		{"port zero", map[string]any{"targetHost": "10.0.0.5", "targetPort": 0, "scheme": "http"}, "VALIDATION_ERROR"},
		{"port too high", map[string]any{"targetHost": "10.0.0.5", "targetPort": 65536, "scheme": "http"}, "VALIDATION_ERROR"},
		{"scheme", map[string]any{"targetHost": "10.0.0.5", "targetPort": 80, "scheme": "ftp"}, "VALIDATION_ERROR"},
		{"url as host", map[string]any{"targetHost": "http://printer", "targetPort": 80, "scheme": "http"}, "VALIDATION_ERROR"},
		{"host with port", map[string]any{"targetHost": "printer:80", "targetPort": 80, "scheme": "http"}, "VALIDATION_ERROR"},
		{"empty host", map[string]any{"targetHost": "", "targetPort": 80, "scheme": "http"}, "VALIDATION_ERROR"},
		{"insecureTls on http", map[string]any{"targetHost": "10.0.0.5", "targetPort": 80, "scheme": "http", "insecureTls": true}, "VALIDATION_ERROR"},
		{"ttl too long", map[string]any{"targetHost": "10.0.0.5", "targetPort": 80, "scheme": "http", "ttlMinutes": 10081}, "VALIDATION_ERROR"},
		{"loopback v4", map[string]any{"targetHost": "127.0.0.1", "targetPort": 80, "scheme": "http"}, tunnels.CodeDeviceLocal},
		{"loopback range", map[string]any{"targetHost": "127.8.9.10", "targetPort": 80, "scheme": "http"}, tunnels.CodeDeviceLocal},
		{"loopback v6", map[string]any{"targetHost": "::1", "targetPort": 80, "scheme": "http"}, tunnels.CodeDeviceLocal},
		{"loopback v6 bracketed", map[string]any{"targetHost": "[::1]", "targetPort": 80, "scheme": "http"}, tunnels.CodeDeviceLocal},
		{"mapped loopback", map[string]any{"targetHost": "::ffff:127.0.0.1", "targetPort": 80, "scheme": "http"}, tunnels.CodeDeviceLocal},
		{"localhost", map[string]any{"targetHost": "LocalHost.", "targetPort": 80, "scheme": "http"}, tunnels.CodeDeviceLocal},
		{"under localhost", map[string]any{"targetHost": "app.localhost", "targetPort": 80, "scheme": "http"}, tunnels.CodeDeviceLocal},
		{"link-local v4", map[string]any{"targetHost": "169.254.169.254", "targetPort": 80, "scheme": "http"}, tunnels.CodeDeviceLocal},
		{"link-local v6", map[string]any{"targetHost": "fe80::1", "targetPort": 80, "scheme": "http"}, tunnels.CodeDeviceLocal},
		{"unspecified", map[string]any{"targetHost": "0.0.0.0", "targetPort": 80, "scheme": "http"}, tunnels.CodeDeviceLocal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.body["deviceId"] = f.device
			r := f.Do(f.ten.Org, "POST", api+"/tunnels", tc.body)
			if r.Status != http.StatusBadRequest || r.ErrorCode() != tc.code {
				t.Fatalf("create = %d %s, want 400 %s", r.Status, r.Body, tc.code)
			}
		})
	}
	var list struct {
		Data []tunnels.Tunnel `json:"data"`
	}
	f.Must(http.StatusOK, f.ten.Org, "GET", api+"/tunnels", nil).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("refused creates left %d tunnels", len(list.Data))
	}
	if r := f.Do(f.ten.Org, "POST", api+"/tunnels", map[string]any{"deviceId": "0190f3f0-0000-7000-8000-000000000000",
		"targetHost": "10.0.0.5", "targetPort": 80, "scheme": "http"}); r.Status != http.StatusNotFound {
		t.Fatalf("create on an unknown device = %d %s, want 404", r.Status, r.Body)
	}
}

func TestDeviceLocalTargetsNeedTheOperatorsSetting(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.TunnelAllowDeviceLocal = true })
	tn := f.create(f.ten.Org, map[string]any{"targetHost": "127.0.0.1", "targetPort": 8080, "scheme": "http"})
	if tn.TargetHost != "127.0.0.1" || tn.Status != tunnels.StatusOpen {
		t.Fatalf("created %+v", tn)
	}
}

func TestTunnelLifecycle(t *testing.T) {
	f := newFixture(t)
	tn := f.create(f.ten.Org, map[string]any{"targetHost": "Printer.LAN", "targetPort": 8443, "scheme": "https", "insecureTls": true, "ttlMinutes": 30})
	if tn.ID == "" || tn.DeviceID != f.device || tn.OrgID != f.ten.OrgID || tn.PartnerID != f.ten.PartnerID || tn.TargetHost != "printer.lan" ||
		tn.TargetPort != 8443 || tn.Scheme != "https" || !tn.InsecureTLS || tn.Status != tunnels.StatusOpen || tn.CreatedBy == nil ||
		tn.ExpiresAt.Sub(tn.CreatedAt).Minutes() != 30 {
		t.Fatalf("created %+v", tn)
	}
	other := f.create(f.ten.Partner, map[string]any{"targetHost": "10.1.2.3", "targetPort": 80, "scheme": "http"})
	if other.ExpiresAt.Sub(other.CreatedAt) != tunnels.DefaultTTL {
		t.Fatalf("default lifetime = %s", other.ExpiresAt.Sub(other.CreatedAt))
	}

	var got tunnels.Tunnel
	f.Must(http.StatusOK, f.ten.Org, "GET", api+"/tunnels/"+tn.ID, nil).JSON(t, &got)
	if got.ID != tn.ID || got.TargetHost != "printer.lan" {
		t.Fatalf("get = %+v", got)
	}
	var list struct {
		Data []tunnels.Tunnel `json:"data"`
	}
	f.Must(http.StatusOK, f.ten.Org, "GET", api+"/tunnels?deviceId="+f.device, nil).JSON(t, &list)
	if len(list.Data) != 2 || list.Data[0].ID != other.ID || list.Data[1].ID != tn.ID {
		t.Fatalf("list = %+v, want newest first", list.Data)
	}

	f.Must(http.StatusNoContent, f.ten.Org, "DELETE", api+"/tunnels/"+tn.ID, nil)
	f.Must(http.StatusOK, f.ten.Org, "GET", api+"/tunnels/"+tn.ID, nil).JSON(t, &got)
	if got.Status != tunnels.StatusClosed || got.ClosedAt == nil || got.ClosedBy == nil {
		t.Fatalf("closed tunnel = %+v", got)
	}
	if r := f.Do(f.ten.Org, "DELETE", api+"/tunnels/"+tn.ID, nil); r.Status != http.StatusConflict || r.ErrorCode() != tunnels.CodeClosed {
		t.Fatalf("second delete = %d %s, want 409 %s", r.Status, r.Body, tunnels.CodeClosed)
	}
	if r := f.Do(f.ten.Org, "POST", api+"/tunnels/"+tn.ID+"/http-ticket", nil); r.Status != http.StatusConflict || r.ErrorCode() != tunnels.CodeClosed {
		t.Fatalf("ticket of a closed tunnel = %d %s, want 409", r.Status, r.Body)
	}
	for status, want := range map[string]string{"open": other.ID, "closed": tn.ID} {
		f.Must(http.StatusOK, f.ten.Org, "GET", api+"/tunnels?status="+status, nil).JSON(t, &list)
		if len(list.Data) != 1 || list.Data[0].ID != want {
			t.Fatalf("status=%s lists %+v, want %s", status, list.Data, want)
		}
	}

	var audit struct {
		Data []struct {
			Action string `json:"action"`
		} `json:"data"`
	}
	f.Must(http.StatusOK, f.Admin(), "GET", api+"/audit/logs?resourceId="+tn.ID, nil).JSON(t, &audit)
	actions := map[string]bool{}
	for _, a := range audit.Data {
		actions[a.Action] = true
	}
	if !actions["tunnel.create"] || !actions["tunnel.delete"] {
		t.Fatalf("audit of the tunnel = %+v, want tunnel.create and tunnel.delete", audit.Data)
	}
}

func TestAnotherTenantGets404OnEveryRoute(t *testing.T) {
	f := newFixture(t)
	tn := f.create(f.ten.Org, map[string]any{"targetHost": "10.0.0.5", "targetPort": 80, "scheme": "http"})
	beta := f.NewTenant(f.Admin(), "Beta")
	for _, c := range []apptest.Caller{beta.Partner, beta.Org} {
		for _, req := range []struct{ method, path string }{
			{"GET", "/tunnels/" + tn.ID}, {"DELETE", "/tunnels/" + tn.ID}, {"POST", "/tunnels/" + tn.ID + "/http-ticket"},
		} {
			if r := f.Do(c, req.method, api+req.path, nil); r.Status != http.StatusNotFound || r.ErrorCode() != "NOT_FOUND" {
				t.Fatalf("%s %s by another tenant = %d %s, want 404", req.method, req.path, r.Status, r.Body)
			}
		}
		if r := f.Do(c, "POST", api+"/tunnels", map[string]any{"deviceId": f.device, "targetHost": "10.0.0.5", "targetPort": 80,
			"scheme": "http"}); r.Status != http.StatusNotFound {
			t.Fatalf("create on another tenant's device = %d %s, want 404", r.Status, r.Body)
		}
		var list struct {
			Data []tunnels.Tunnel `json:"data"`
		}
		f.Must(http.StatusOK, c, "GET", api+"/tunnels", nil).JSON(t, &list)
		if len(list.Data) != 0 {
			t.Fatalf("another tenant lists %+v", list.Data)
		}
	}
	// The proxy too: a ticket of the tunnel cannot be had, and without one there is nothing.
	if res := f.browser("GET", f.Server.URL+tunnels.ProxyPath(tn.ID), nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("proxy without cookie = %d, want 401", res.StatusCode)
	}
	f.Must(http.StatusOK, f.ten.Org, "GET", api+"/tunnels/"+tn.ID, nil)
}

func TestViewersHaveNoTunnels(t *testing.T) {
	f := newFixture(t)
	_, viewer := f.CreateUser("viewer@gale.test", access.LevelOrganization, f.ten.PartnerID, f.ten.OrgID, access.RoleOrgViewer)
	tn := f.create(f.ten.Org, map[string]any{"targetHost": "10.0.0.5", "targetPort": 80, "scheme": "http"})
	for _, req := range []struct{ method, path string }{{"GET", "/tunnels"}, {"GET", "/tunnels/" + tn.ID}, {"POST", "/tunnels"},
		{"DELETE", "/tunnels/" + tn.ID}, {"POST", "/tunnels/" + tn.ID + "/http-ticket"}} {
		if r := f.Do(viewer, req.method, api+req.path, nil); r.Status != http.StatusForbidden {
			t.Fatalf("%s %s by a viewer = %d %s, want 403", req.method, req.path, r.Status, r.Body)
		}
	}
}

func TestCreateAndTicketNeedMFA(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.Enable2FA = true })
	admin := e.Admin()
	id := "0190f3f0-0000-7000-8000-000000000000"
	for _, path := range []string{"/tunnels", "/tunnels/" + id + "/http-ticket"} {
		r := e.Do(admin, "POST", api+path, map[string]any{"deviceId": id, "targetHost": "10.0.0.5", "targetPort": 80, "scheme": "http"})
		if r.Status != http.StatusForbidden || r.ErrorCode() != "MFA_REQUIRED" {
			t.Fatalf("POST %s without MFA = %d %s, want 403 MFA_REQUIRED", path, r.Status, r.Body)
		}
	}
	e.Must(http.StatusOK, admin, "GET", api+"/tunnels", nil)
	if r := e.Do(admin, "DELETE", api+"/tunnels/"+id, nil); r.Status != http.StatusNotFound {
		t.Fatalf("DELETE without MFA = %d %s, want 404 (not gated)", r.Status, r.Body)
	}
}

func TestHTTPTicketTurnsIntoAPathScopedCookieOnce(t *testing.T) {
	f := newFixture(t)
	tn := f.create(f.ten.Org, map[string]any{"targetHost": "10.0.0.5", "targetPort": 80, "scheme": "http"})
	tk := f.ticket(f.ten.Org, tn.ID)
	u, err := url.Parse(tk.URL)
	if err != nil || u.Path != tunnels.ProxyPath(tn.ID) || u.Query().Get(tunnels.TicketParam) != tk.Ticket || tk.ExpiresAt.IsZero() {
		t.Fatalf("ticket = %+v", tk)
	}

	res := f.browser("GET", tk.URL+"&page=2&a=b", nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != tunnels.ProxyPath(tn.ID)+"?page=2&a=b" {
		t.Fatalf("redeem = %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
	set := res.Header.Get("Set-Cookie")
	for _, want := range []string{tunnels.CookieName + "=", "Path=" + tunnels.ProxyPath(tn.ID), "HttpOnly", "SameSite=Lax"} {
		if !strings.Contains(set, want) {
			t.Fatalf("Set-Cookie %q lacks %q", set, want)
		}
	}
	if strings.Contains(set, "Secure") {
		t.Fatalf("Set-Cookie %q is Secure over plain HTTP", set)
	}
	cookie := res.Cookies()[0]
	cookie = &http.Cookie{Name: cookie.Name, Value: cookie.Value}

	// Reused: refused.
	if res := f.browser("GET", tk.URL, nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("reused ticket = %d, want 401", res.StatusCode)
	}
	withCookie := http.Header{"Cookie": {cookie.String()}}
	// The cookie lets the request through to the device, whose agent is not connected here.
	req := f.Do(apptest.Caller{Header: withCookie}, "GET", tunnels.ProxyPath(tn.ID)+"status", nil)
	if req.Status != http.StatusServiceUnavailable || req.ErrorCode() != tunnels.CodeAgentOffline {
		t.Fatalf("proxied request with the cookie = %d %s, want 503 %s", req.Status, req.Body, tunnels.CodeAgentOffline)
	}
	// A bearer token is no credential of the proxy.
	if r := f.Do(f.ten.Org, "GET", tunnels.ProxyPath(tn.ID), nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("proxy with a bearer token = %d %s, want 401", r.Status, r.Body)
	}
	// A forged or altered cookie is none.
	forged := &http.Cookie{Name: tunnels.CookieName, Value: cookie.Value[:len(cookie.Value)-2] + "AA"}
	if r := f.Do(apptest.Caller{Header: http.Header{"Cookie": {forged.String()}}}, "GET", tunnels.ProxyPath(tn.ID), nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("proxy with a forged cookie = %d %s, want 401", r.Status, r.Body)
	}
	// Tunnel A's cookie and ticket do nothing on tunnel B.
	b := f.create(f.ten.Org, map[string]any{"targetHost": "10.0.0.6", "targetPort": 80, "scheme": "http"})
	if r := f.Do(apptest.Caller{Header: withCookie}, "GET", tunnels.ProxyPath(b.ID), nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("tunnel A's cookie on tunnel B = %d %s, want 401", r.Status, r.Body)
	}
	tkA := f.ticket(f.ten.Org, tn.ID)
	if res := f.browser("GET", f.Server.URL+tunnels.ProxyPath(b.ID)+"?"+tunnels.TicketParam+"="+url.QueryEscape(tkA.Ticket), nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("tunnel A's ticket on tunnel B = %d, want 401", res.StatusCode)
	}
	// Once closed, the cookie opens nothing.
	f.Must(http.StatusNoContent, f.ten.Org, "DELETE", api+"/tunnels/"+tn.ID, nil)
	if r := f.Do(apptest.Caller{Header: withCookie}, "GET", tunnels.ProxyPath(tn.ID), nil); r.Status != http.StatusNotFound || r.ErrorCode() != tunnels.CodeClosed {
		t.Fatalf("closed tunnel's proxy = %d %s, want 404 %s", r.Status, r.Body, tunnels.CodeClosed)
	}
	// Without the final slash, the proxy's root is a redirect away.
	if res := f.browser("GET", f.Server.URL+strings.TrimSuffix(tunnels.ProxyPath(b.ID), "/")+"?x=1", nil); res.StatusCode != http.StatusMovedPermanently ||
		res.Header.Get("Location") != tunnels.ProxyPath(b.ID)+"?x=1" {
		t.Fatalf("proxy root without slash = %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
}

func TestACookieStopsWorkingWhenItsUserLosesAccess(t *testing.T) {
	f := newFixture(t)
	userID, tech := f.CreateUser("tech@gale.test", access.LevelOrganization, f.ten.PartnerID, f.ten.OrgID, access.RoleOrgTechnician)
	tn := f.create(tech, map[string]any{"targetHost": "10.0.0.5", "targetPort": 80, "scheme": "http"})
	set := f.redeem(f.ticket(tech, tn.ID))
	cookie := &http.Cookie{Name: set.Name, Value: set.Value}
	withCookie := apptest.Caller{Header: http.Header{"Cookie": {cookie.String()}}}
	if r := f.Do(withCookie, "GET", tunnels.ProxyPath(tn.ID), nil); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("before = %d %s, want 503 (agent offline)", r.Status, r.Body)
	}
	f.Must(http.StatusOK, f.ten.Org, "POST", api+"/users/"+userID+"/role", map[string]any{"roleId": access.RoleOrgViewer})
	if r := f.Do(withCookie, "GET", tunnels.ProxyPath(tn.ID), nil); r.Status != http.StatusForbidden {
		t.Fatalf("after losing remote:access = %d %s, want 403", r.Status, r.Body)
	}
}

func TestConcurrentRedemptionsOfOneTicketHaveOneWinner(t *testing.T) {
	f := newFixture(t)
	tn := f.create(f.ten.Org, map[string]any{"targetHost": "10.0.0.5", "targetPort": 80, "scheme": "http"})
	tk := f.ticket(f.ten.Org, tn.ID)
	var wg sync.WaitGroup
	statuses := make(chan int, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses <- f.browser("GET", tk.URL, nil).StatusCode
		}()
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[http.StatusSeeOther] != 1 || counts[http.StatusUnauthorized] != 19 {
		t.Fatalf("20 redemptions = %v, want one 303 and 19 401", counts)
	}
}

func TestATunnelExpiresByItself(t *testing.T) {
	clk := clock.NewFake(time.Now())
	f := newFixture(t, apptest.WithClock(clk))
	tn := f.create(f.ten.Org, map[string]any{"targetHost": "10.0.0.5", "targetPort": 80, "scheme": "http", "ttlMinutes": 1})
	cookie := f.redeem(f.ticket(f.ten.Org, tn.ID))
	if cookie.Expires.After(tn.ExpiresAt.Add(time.Second)) {
		t.Fatalf("the cookie expires %s, after its tunnel (%s)", cookie.Expires, tn.ExpiresAt)
	}
	clk.Advance(2 * time.Minute)
	var got tunnels.Tunnel
	f.Must(http.StatusOK, f.ten.Org, "GET", api+"/tunnels/"+tn.ID, nil).JSON(t, &got)
	if got.Status != tunnels.StatusExpired {
		t.Fatalf("status after expiry = %s", got.Status)
	}
	if r := f.Do(f.ten.Org, "POST", api+"/tunnels/"+tn.ID+"/http-ticket", nil); r.Status != http.StatusConflict || r.ErrorCode() != tunnels.CodeClosed {
		t.Fatalf("ticket of an expired tunnel = %d %s, want 409 %s", r.Status, r.Body, tunnels.CodeClosed)
	}
	withCookie := apptest.Caller{Header: http.Header{"Cookie": {cookie.Name + "=" + cookie.Value}}}
	if r := f.Do(withCookie, "GET", tunnels.ProxyPath(tn.ID), nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("the cookie of an expired tunnel = %d %s, want 401", r.Status, r.Body)
	}
	var list struct {
		Data []tunnels.Tunnel `json:"data"`
	}
	f.Must(http.StatusOK, f.ten.Org, "GET", api+"/tunnels?status=expired", nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != tn.ID {
		t.Fatalf("expired tunnels = %+v", list.Data)
	}
}

// An agent that speaks no streams (an old one) has its device online and its live channel
// up, but cannot open the tunnel's connection.
func TestAnAgentWithoutStreamsCannotTunnel(t *testing.T) {
	f := newFixture(t)
	var key struct {
		Key    string `json:"key"`
		Secret string `json:"enrollmentSecret"`
	}
	f.Must(http.StatusCreated, f.ten.Org, "POST", api+"/enrollment-keys", map[string]any{"name": "old", "maxUsage": 1,
		"issueEnrollmentSecret": true}).JSON(t, &key)
	var dev agentproto.EnrollResponse
	f.Must(http.StatusCreated, apptest.Anonymous, "POST", api+"/agents/enroll", agentproto.EnrollRequest{EnrollmentKey: key.Key,
		EnrollmentSecret: key.Secret, Hostname: "old-01", OSType: "linux", OSVersion: "12", Architecture: "amd64", AgentVersion: "0.9.0"}).JSON(t, &dev)
	f.Must(http.StatusOK, apptest.Bearer(dev.AuthToken), "POST", api+"/agents/"+dev.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "0.9.0"})
	f.DialAgent(dev.AuthToken)
	tn := f.create(f.ten.Org, map[string]any{"deviceId": dev.DeviceID, "targetHost": "10.0.0.5", "targetPort": 80, "scheme": "http"})
	cookie := f.redeem(f.ticket(f.ten.Org, tn.ID))
	r := f.Do(apptest.Caller{Header: http.Header{"Cookie": {cookie.Name + "=" + cookie.Value}}}, "GET", tunnels.ProxyPath(tn.ID), nil)
	if r.Status != http.StatusBadGateway || r.ErrorCode() != tunnels.CodeUnsupported {
		t.Fatalf("tunnel through an agent without streams = %d %s, want 502 %s", r.Status, r.Body, tunnels.CodeUnsupported)
	}
}
