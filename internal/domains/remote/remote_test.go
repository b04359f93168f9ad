package remote_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/remote"
	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/platform/config"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

// onlineDevice enrolls a simulated agent in the tenant's organization and holds its live
// channel, answering every call with result, until the test ends.
func onlineDevice(e *apptest.Env, ten apptest.Tenant, result string) string {
	e.T.Helper()
	r := e.EnrollAgent(ten, "web-01")
	e.AnswerCalls(r.AuthToken, func(agentproto.Call) (json.RawMessage, *agentproto.CallError) {
		return json.RawMessage(result), nil
	})
	return r.DeviceID
}

type session struct {
	ID              string  `json:"id"`
	OrgID           string  `json:"orgId"`
	DeviceID        string  `json:"deviceId"`
	UserID          string  `json:"userId"`
	Type            string  `json:"type"`
	Status          string  `json:"status"`
	StartedAt       *string `json:"startedAt"`
	EndedAt         *string `json:"endedAt"`
	DurationSeconds *int64  `json:"durationSeconds"`
	EndReason       *string `json:"endReason"`
	ScreenCapture   *string `json:"screenCapture"`
}

type sessionList struct {
	Data []session `json:"data"`
}

func create(e *apptest.Env, c apptest.Caller, deviceID, typ string) session {
	e.T.Helper()
	var s session
	e.Must(201, c, "POST", api+"/remote/sessions", map[string]any{"deviceId": deviceID, "type": typ}).JSON(e.T, &s)
	return s
}

func list(e *apptest.Env, c apptest.Caller, path string) []session {
	e.T.Helper()
	var l sessionList
	e.Must(200, c, "GET", api+path, nil).JSON(e.T, &l)
	return l.Data
}

func TestSessionLifecycle(t *testing.T) {
	clk := clock.NewFake(time.Now())
	e := apptest.New(t, apptest.WithClock(clk))
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := onlineDevice(e, ten, `{}`)

	s := create(e, ten.Org, dev, "terminal")
	if s.Status != "pending" || s.DeviceID != dev || s.OrgID != ten.OrgID || s.EndedAt != nil || s.DurationSeconds != nil {
		t.Fatalf("new session = %+v", s)
	}
	var got session
	e.Must(200, ten.Org, "GET", api+"/remote/sessions/"+s.ID, nil).JSON(t, &got)
	if got.ID != s.ID || got.Status != "pending" {
		t.Fatalf("get = %+v", got)
	}
	if active := list(e, ten.Org, "/remote/sessions"); len(active) != 1 || active[0].ID != s.ID {
		t.Fatalf("active list = %+v", active)
	}
	if hist := list(e, ten.Org, "/remote/sessions/history"); len(hist) != 0 {
		t.Fatalf("history before the end = %+v", hist)
	}

	var ended session
	e.Must(200, ten.Org, "POST", api+"/remote/sessions/"+s.ID+"/end", nil).JSON(t, &ended)
	if ended.Status != "disconnected" || ended.EndedAt == nil || ended.DurationSeconds == nil || *ended.DurationSeconds != 0 {
		t.Fatalf("ended session = %+v", ended)
	}
	if r := e.Do(ten.Org, "POST", api+"/remote/sessions/"+s.ID+"/end", nil); r.Status != 409 || r.ErrorCode() != "SESSION_ENDED" {
		t.Fatalf("second end = %d %s", r.Status, r.Body)
	}
	if active := list(e, ten.Org, "/remote/sessions"); len(active) != 0 {
		t.Fatalf("active list after the end = %+v", active)
	}
	if hist := list(e, ten.Org, "/remote/sessions/history"); len(hist) != 1 || hist[0].ID != s.ID || hist[0].DurationSeconds == nil {
		t.Fatalf("history = %+v", hist)
	}

	// Stale: pending over 5 minutes, connecting over 2.
	pending := create(e, ten.Org, dev, "desktop")
	clk.Advance(4 * time.Minute)
	var stale struct {
		Expired int64 `json:"expired"`
	}
	e.Must(200, ten.Org, "DELETE", api+"/remote/sessions/stale", nil).JSON(t, &stale)
	if stale.Expired != 0 {
		t.Fatalf("expired after 4 minutes: %d", stale.Expired)
	}
	clk.Advance(2 * time.Minute)
	e.Must(200, ten.Org, "DELETE", api+"/remote/sessions/stale", nil).JSON(t, &stale)
	if stale.Expired != 1 {
		t.Fatalf("expired after 6 minutes: %d, want 1", stale.Expired)
	}
	e.Must(200, ten.Org, "GET", api+"/remote/sessions/"+pending.ID, nil).JSON(t, &got)
	if got.Status != "failed" || got.EndReason == nil || !strings.Contains(*got.EndReason, "stale") {
		t.Fatalf("stale session = %+v", got)
	}

	// A desktop offer moves the session to active, with the agent's word on screen capture.
	desk := create(e, ten.Org, dev, "desktop")
	var answer agentproto.DesktopDescription
	e.Must(200, ten.Org, "POST", api+"/remote/sessions/"+desk.ID+"/offer", map[string]any{"sdp": "v=0"}).JSON(t, &answer)
	e.Must(200, ten.Org, "GET", api+"/remote/sessions/"+desk.ID, nil).JSON(t, &got)
	if got.Status != "active" || got.StartedAt == nil {
		t.Fatalf("desktop after the offer = %+v", got)
	}
	e.Must(200, ten.Org, "POST", api+"/remote/sessions/"+desk.ID+"/ice", map[string]any{"candidate": "candidate:1 1 udp 1 10.0.0.1 5000 typ host", "sdpMid": "0"})
	e.Must(200, ten.Org, "POST", api+"/remote/sessions/"+desk.ID+"/answer", map[string]any{"sdp": "v=0"})
	if r := e.Do(ten.Org, "POST", api+"/remote/sessions/"+desk.ID+"/offer", map[string]any{}); r.Status != 400 {
		t.Fatalf("offer without sdp = %d %s", r.Status, r.Body)
	}
	var codeOut struct {
		Code      string `json:"code"`
		ExpiresAt string `json:"expiresAt"`
	}
	e.Must(200, ten.Org, "POST", api+"/remote/sessions/"+desk.ID+"/desktop-connect-code", nil).JSON(t, &codeOut)
	if !strings.HasPrefix(codeOut.Code, "tkt_") || codeOut.ExpiresAt == "" {
		t.Fatalf("connect code = %+v", codeOut)
	}
	// The code stands for its user once, without a bearer token, on its own session only.
	connect := func(id, code string, sdp string) *apptest.Response {
		return e.Do(apptest.Anonymous, "POST", api+"/remote/sessions/"+id+"/desktop-connect", map[string]any{"code": code, "sdp": sdp})
	}
	if r := connect(desk.ID, codeOut.Code, ""); r.Status != 400 {
		t.Fatalf("connect without sdp = %d %s", r.Status, r.Body)
	}
	other := create(e, ten.Org, dev, "desktop")
	if r := connect(other.ID, codeOut.Code, "v=0"); r.Status != 401 || r.ErrorCode() != "INVALID_TICKET" {
		t.Fatalf("code on another session = %d %s", r.Status, r.Body)
	}
	if r := connect(desk.ID, codeOut.Code, "v=0"); r.Status != 200 {
		t.Fatalf("connect with the code = %d %s", r.Status, r.Body)
	}
	if r := connect(desk.ID, codeOut.Code, "v=0"); r.Status != 401 || r.ErrorCode() != "INVALID_TICKET" {
		t.Fatalf("a used code = %d %s", r.Status, r.Body)
	}
	e.Must(200, ten.Org, "POST", api+"/remote/sessions/"+other.ID+"/end", nil)

	// Operations of the other type are refused.
	term := create(e, ten.Org, dev, "terminal")
	for path, body := range map[string]any{"/offer": map[string]any{"sdp": "v=0"}, "/desktop-connect-code": nil} {
		if r := e.Do(ten.Org, "POST", api+"/remote/sessions/"+term.ID+path, body); r.Status != 400 || r.ErrorCode() != "SESSION_TYPE_MISMATCH" {
			t.Fatalf("%s on a terminal = %d %s", path, r.Status, r.Body)
		}
	}
	if r := e.Do(ten.Org, "POST", api+"/remote/sessions/"+desk.ID+"/ws-ticket", nil); r.Status != 400 || r.ErrorCode() != "SESSION_TYPE_MISMATCH" {
		t.Fatalf("ws-ticket on a desktop = %d %s", r.Status, r.Body)
	}
}

// An active desktop lives while its agent reports it connected, ends with the agent's reason
// when the agent reports it closed, and is lost when the reports stop; an agent touches only
// its own device's sessions.
func TestDesktopSessionsFollowTheirAgentsReports(t *testing.T) {
	clk := clock.NewFake(time.Now())
	e := apptest.New(t, apptest.WithClock(clk))
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := onlineDevice(e, ten, `{}`)
	other := e.EnrollAgent(ten, "web-02")
	svc := app.Service[*remote.Service](e.App)
	report := func(deviceID string, st agentproto.DesktopState) {
		t.Helper()
		payload, _ := json.Marshal(st)
		if err := svc.DesktopState(context.Background(), devices.Agent{DeviceID: deviceID, PartnerID: ten.PartnerID, OrgID: ten.OrgID}, payload); err != nil {
			t.Fatal(err)
		}
	}
	open := func() session {
		d := create(e, ten.Org, dev, "desktop")
		e.Must(200, ten.Org, "POST", api+"/remote/sessions/"+d.ID+"/offer", map[string]any{"sdp": "v=0"})
		return d
	}
	get := func(id string) session {
		var x session
		e.Must(200, ten.Org, "GET", api+"/remote/sessions/"+id, nil).JSON(t, &x)
		return x
	}
	kept, lost, closed := open(), open(), open()

	// Reports keep one alive past the lost limit; another device's report counts for nothing.
	for range 5 {
		clk.Advance(40 * time.Second)
		report(dev, agentproto.DesktopState{Connected: []string{kept.ID, "not-an-id"}})
		report(other.DeviceID, agentproto.DesktopState{Connected: []string{lost.ID}, Closed: []agentproto.DesktopClosed{{SessionID: closed.ID, Reason: "x"}}})
	}
	e.Must(200, ten.Org, "DELETE", api+"/remote/sessions/stale", nil)
	if x := get(kept.ID); x.Status != "active" {
		t.Fatalf("a reported desktop = %+v", x)
	}
	if x := get(lost.ID); x.Status != "failed" || x.EndReason == nil || !strings.Contains(*x.EndReason, "stopped reporting the desktop") {
		t.Fatalf("an unreported desktop = %+v", x)
	}
	if x := get(closed.ID); x.Status != "failed" {
		t.Fatalf("a desktop closed by another device's report = %+v", x)
	}

	report(dev, agentproto.DesktopState{Closed: []agentproto.DesktopClosed{{SessionID: kept.ID, Reason: "the viewer closed the connection\x1b"}}})
	x := get(kept.ID)
	if x.Status != "disconnected" || x.EndReason == nil || *x.EndReason != "the device closed the desktop: the viewer closed the connection" {
		t.Fatalf("a desktop its agent closed = %+v", x)
	}
	report(dev, agentproto.DesktopState{Closed: []agentproto.DesktopClosed{{SessionID: kept.ID, Reason: "again"}}})
	if x := get(kept.ID); *x.EndReason != "the device closed the desktop: the viewer closed the connection" {
		t.Fatalf("a second close report changed the end: %+v", x)
	}
}

func TestOfflineDeviceAndBadInput(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	offline := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "off", Status: "offline"})
	if r := e.Do(ten.Org, "POST", api+"/remote/sessions", map[string]any{"deviceId": offline, "type": "terminal"}); r.Status != 400 || r.ErrorCode() != "DEVICE_OFFLINE" {
		t.Fatalf("offline device = %d %s", r.Status, r.Body)
	}
	// Online by its heartbeats, but without the live channel sessions need.
	online := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "http-only"})
	if r := e.Do(ten.Org, "POST", api+"/remote/sessions", map[string]any{"deviceId": online, "type": "terminal"}); r.Status != 400 || r.ErrorCode() != "DEVICE_OFFLINE" {
		t.Fatalf("device without a live channel = %d %s", r.Status, r.Body)
	}
	if r := e.Do(ten.Org, "POST", api+"/remote/sessions", map[string]any{"deviceId": online, "type": "vnc"}); r.Status != 400 {
		t.Fatalf("unknown type = %d %s", r.Status, r.Body)
	}
	if r := e.Do(ten.Org, "POST", api+"/remote/sessions", map[string]any{"deviceId": store.NewID(), "type": "terminal"}); r.Status != 404 {
		t.Fatalf("unknown device = %d %s", r.Status, r.Body)
	}
	if r := e.Do(ten.Org, "GET", api+"/remote/sessions/not-a-uuid", nil); r.Status != 400 && r.Status != 404 {
		t.Fatalf("malformed id = %d %s", r.Status, r.Body)
	}
	if len(list(e, ten.Org, "/remote/sessions")) != 0 {
		t.Fatal("a refused create left a session")
	}
	// A viewer without remote:access is refused.
	_, viewer := e.CreateUser("viewer@gale.test", access.LevelOrganization, ten.PartnerID, ten.OrgID, access.RoleOrgViewer)
	if r := e.Do(viewer, "GET", api+"/remote/sessions", nil); r.Status != 403 {
		t.Fatalf("viewer listing = %d %s", r.Status, r.Body)
	}
}

// Every route answers 404 for a session of another tenant, exactly as for a missing one.
func TestTenancy(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Alpha")
	b := e.NewTenant(admin, "Beta")
	devA := onlineDevice(e, a, `{}`)
	devB := onlineDevice(e, b, `{}`)
	term := create(e, a.Org, devA, "terminal")
	desk := create(e, a.Org, devA, "desktop")
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/remote/sessions/" + term.ID, nil},
		{"POST", "/remote/sessions/" + term.ID + "/end", nil},
		{"POST", "/remote/sessions/" + term.ID + "/ws-ticket", nil},
		{"POST", "/remote/sessions/" + desk.ID + "/desktop-connect-code", nil},
		{"POST", "/remote/sessions/" + desk.ID + "/offer", map[string]any{"sdp": "v=0"}},
		{"POST", "/remote/sessions/" + desk.ID + "/answer", map[string]any{"sdp": "v=0"}},
		{"POST", "/remote/sessions/" + desk.ID + "/ice", map[string]any{"candidate": ""}},
		{"GET", "/remote/sessions/" + store.NewID(), nil},
	} {
		for _, caller := range []apptest.Caller{b.Org, b.Partner} {
			if r := e.Do(caller, c.method, api+c.path, c.body); r.Status != 404 || r.ErrorCode() != "NOT_FOUND" {
				t.Fatalf("%s %s by another tenant = %d %s", c.method, c.path, r.Status, r.Body)
			}
		}
	}
	if r := e.Do(b.Org, "POST", api+"/remote/sessions", map[string]any{"deviceId": devA, "type": "terminal"}); r.Status != 404 {
		t.Fatalf("session on another tenant's device = %d %s", r.Status, r.Body)
	}
	if l := list(e, b.Org, "/remote/sessions"); len(l) != 0 {
		t.Fatalf("another tenant lists %+v", l)
	}
	var stale struct {
		Expired int64 `json:"expired"`
	}
	e.Must(200, b.Org, "DELETE", api+"/remote/sessions/stale", nil).JSON(t, &stale)
	own := create(e, b.Org, devB, "terminal")
	if l := list(e, b.Partner, "/remote/sessions"); len(l) != 1 || l[0].ID != own.ID {
		t.Fatalf("partner of B lists %+v", l)
	}
	if l := list(e, a.Partner, "/remote/sessions"); len(l) != 2 {
		t.Fatalf("partner of A lists %d sessions, want 2", len(l))
	}
	if l := list(e, admin, "/remote/sessions"); len(l) != 3 {
		t.Fatalf("the system admin lists %d sessions, want 3", len(l))
	}
}

func TestSessionCaps(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := onlineDevice(e, ten, `{}`)
	for range 5 {
		create(e, ten.Org, dev, "terminal")
	}
	r := e.Do(ten.Org, "POST", api+"/remote/sessions", map[string]any{"deviceId": dev, "type": "terminal"})
	if r.Status != 429 || r.ErrorCode() != "SESSION_LIMIT_REACHED" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("sixth session of a user = %d %s %v", r.Status, r.Body, r.Header)
	}
	_, other := e.CreateUser("second@gale.test", access.LevelOrganization, ten.PartnerID, ten.OrgID, "")
	for range 5 {
		create(e, other, dev, "desktop")
	}
	_, third := e.CreateUser("third@gale.test", access.LevelOrganization, ten.PartnerID, ten.OrgID, "")
	if r := e.Do(third, "POST", api+"/remote/sessions", map[string]any{"deviceId": dev, "type": "terminal"}); r.Status != 429 ||
		!strings.Contains(string(r.Body), "organization") {
		t.Fatalf("eleventh session of the organization = %d %s", r.Status, r.Body)
	}
	// Ending one frees a place.
	first := list(e, ten.Org, "/remote/sessions")[0]
	e.Must(200, ten.Org, "POST", api+"/remote/sessions/"+first.ID+"/end", nil)
	create(e, third, dev, "terminal")
}

// Thirty concurrent creates by three users of one organization: at most five per user and ten
// in all succeed; the rest get 429.
func TestConcurrentCreatesKeepTheCaps(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := onlineDevice(e, ten, `{}`)
	users := []apptest.Caller{ten.Org}
	for i := range 2 {
		_, c := e.CreateUser(fmt.Sprintf("user%d@gale.test", i), access.LevelOrganization, ten.PartnerID, ten.OrgID, "")
		users = append(users, c)
	}
	var mu sync.Mutex
	created := map[int]int{}
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			r := e.Do(users[i%3], "POST", api+"/remote/sessions", map[string]any{"deviceId": dev, "type": "terminal"})
			mu.Lock()
			defer mu.Unlock()
			statuses[r.Status]++
			if r.Status == 201 {
				created[i%3]++
			}
		})
	}
	wg.Wait()
	if statuses[201] != 10 || statuses[429] != 20 {
		t.Fatalf("statuses = %v, want 10 created and 20 refused", statuses)
	}
	for u, n := range created {
		if n > 5 {
			t.Fatalf("user %d got %d sessions", u, n)
		}
	}
	if l := list(e, ten.Org, "/remote/sessions"); len(l) != 10 {
		t.Fatalf("%d active sessions, want 10", len(l))
	}
}

func TestMFAGatesSessionsAndTickets(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.Enable2FA = true })
	admin := e.Admin()
	id := store.NewID()
	for _, c := range []struct{ path string }{{"/remote/sessions"}, {"/remote/sessions/" + id + "/ws-ticket"},
		{"/remote/sessions/" + id + "/desktop-connect-code"}} {
		r := e.Do(admin, "POST", api+c.path, map[string]any{"deviceId": id, "type": "terminal"})
		if r.Status != 403 || r.ErrorCode() != "MFA_REQUIRED" {
			t.Fatalf("POST %s without MFA = %d %s", c.path, r.Status, r.Body)
		}
	}
	e.Must(200, admin, "GET", api+"/remote/sessions", nil)
}

// A terminal ticket opens once: the agent here speaks no streams, so the first use reaches
// the agent and fails the session; the second is refused as a used ticket.
func TestTerminalTicketIsSingleUse(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := onlineDevice(e, ten, `{}`)
	s := create(e, ten.Org, dev, "terminal")
	var tk struct {
		Ticket    string `json:"ticket"`
		ExpiresAt string `json:"expiresAt"`
		URL       string `json:"url"`
	}
	e.Must(200, ten.Org, "POST", api+"/remote/sessions/"+s.ID+"/ws-ticket", nil).JSON(t, &tk)
	wantURL := "ws" + strings.TrimPrefix(e.Server.URL, "http") + api + "/remote/sessions/" + s.ID + "/terminal?ticket="
	if !strings.HasPrefix(tk.URL, wantURL) || tk.Ticket == "" {
		t.Fatalf("ticket = %+v, want a URL starting %s", tk, wantURL)
	}
	get := func(ticket string) *http.Response {
		resp, err := http.Get(e.Server.URL + api + "/remote/sessions/" + s.ID + "/terminal?ticket=" + ticket)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := get(tk.Ticket); resp.StatusCode == http.StatusSwitchingProtocols || resp.StatusCode == 401 {
		t.Fatalf("first use = %d, want the agent's refusal", resp.StatusCode)
	}
	if resp := get(tk.Ticket); resp.StatusCode != 401 {
		t.Fatalf("reused ticket = %d, want 401", resp.StatusCode)
	}
	if resp := get("tkt_made-up"); resp.StatusCode != 401 {
		t.Fatalf("unknown ticket = %d, want 401", resp.StatusCode)
	}
	var got session
	e.Must(200, ten.Org, "GET", api+"/remote/sessions/"+s.ID, nil).JSON(t, &got)
	if got.Status != "failed" || got.EndedAt == nil {
		t.Fatalf("session after a failed open = %+v", got)
	}
	// An ended session issues no more tickets.
	if r := e.Do(ten.Org, "POST", api+"/remote/sessions/"+s.ID+"/ws-ticket", nil); r.Status != 409 {
		t.Fatalf("ticket of an ended session = %d %s", r.Status, r.Body)
	}
}

func TestICEServers(t *testing.T) {
	e := apptest.New(t)
	var out struct {
		ICEServers []agentproto.ICEServer `json:"iceServers"`
	}
	e.Must(200, e.Admin(), "GET", api+"/remote/ice-servers", nil).JSON(t, &out)
	if out.ICEServers == nil || len(out.ICEServers) != 0 {
		t.Fatalf("ice servers without configuration = %+v, want an empty list", out.ICEServers)
	}

	e2 := apptest.New(t, func(c *config.Config) {
		c.RemoteSTUNURLs = []string{"stun:stun.example.net:3478"}
		c.RemoteTURNURLs = []string{"turn:turn.example.net:3478"}
		c.RemoteTURNSecret = "0123456789abcdef"
	})
	e2.Must(200, e2.Admin(), "GET", api+"/remote/ice-servers", nil).JSON(t, &out)
	if len(out.ICEServers) != 2 || out.ICEServers[0].URLs[0] != "stun:stun.example.net:3478" || out.ICEServers[0].Username != "" {
		t.Fatalf("ice servers = %+v", out.ICEServers)
	}
	turn := out.ICEServers[1]
	expiry, user, ok := strings.Cut(turn.Username, ":")
	if !ok || user == "" || turn.Credential == "" {
		t.Fatalf("turn server = %+v", turn)
	}
	mac := hmac.New(sha1.New, []byte("0123456789abcdef"))
	mac.Write([]byte(turn.Username))
	if turn.Credential != base64.StdEncoding.EncodeToString(mac.Sum(nil)) {
		t.Fatalf("turn credential %q is not base64(HMAC-SHA1(secret, username))", turn.Credential)
	}
	exp, _ := strconv.ParseInt(expiry, 10, 64)
	if d := time.Until(time.Unix(exp, 0)); d < 50*time.Minute || d > 61*time.Minute {
		t.Fatalf("turn credentials expire in %s, want an hour", d)
	}
}

// A session asked for right after the agent started, before its live channel is up, waits for
// the channel; one whose channel does not come up within the wait is refused as connecting.
func TestASessionWaitsForAnAgentOpeningItsLiveChannel(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.AgentChannelWait = 30 * time.Second })
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := e.EnrollAgent(ten, "web-01")
	e.ReportOpeningChannel(dev)
	done := make(chan *apptest.Response, 1)
	go func() {
		done <- e.Do(ten.Org, "POST", api+"/remote/sessions", map[string]any{"deviceId": dev.DeviceID, "type": "terminal"})
	}()
	e.WaitChannelWaits(1)
	e.DialAgent(dev.AuthToken)
	if r := <-done; r.Status != http.StatusCreated {
		t.Fatalf("session asked while the agent's channel was connecting = %d %s", r.Status, r.Body)
	}

	quick := apptest.New(t, func(c *config.Config) { c.AgentChannelWait = 200 * time.Millisecond })
	ten = quick.NewTenant(quick.Admin(), "Alpha")
	dev = quick.EnrollAgent(ten, "web-02")
	quick.ReportOpeningChannel(dev)
	r := quick.Do(ten.Org, "POST", api+"/remote/sessions", map[string]any{"deviceId": dev.DeviceID, "type": "terminal"})
	if r.Status != http.StatusBadRequest || r.ErrorCode() != "DEVICE_OFFLINE" || !strings.Contains(string(r.Body), "connecting its live channel") {
		t.Fatalf("session on an agent whose channel never comes up = %d %s", r.Status, r.Body)
	}
}
