package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/alerts"
	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/testkit/apptest"

	"github.com/pquerna/otp/totp"
)

// visitor is a browser without JavaScript: a cookie jar, redirects not followed.
type visitor struct {
	t    *testing.T
	e    *apptest.Env
	c    *http.Client
	csrf string
}

func newVisitor(t *testing.T, e *apptest.Env) *visitor {
	jar, _ := cookiejar.New(nil)
	return &visitor{t: t, e: e, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type page struct {
	status   int
	location string
	body     string
	header   http.Header
}

func (v *visitor) do(method, path string, form url.Values, header map[string]string) page {
	v.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, v.e.Server.URL+path, body)
	if err != nil {
		v.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", v.e.Server.URL)
	}
	for k, val := range header {
		req.Header.Set(k, val)
	}
	res, err := v.c.Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	p := page{status: res.StatusCode, location: res.Header.Get("Location"), body: string(b), header: res.Header}
	if m := csrfField.FindStringSubmatch(p.body); m != nil {
		v.csrf = m[1]
	}
	return p
}

// missingID is an ID nothing has.
const missingID = "00000000-0000-4000-8000-000000000000"

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func (v *visitor) get(path string) page { return v.do(http.MethodGet, path, nil, nil) }

func (v *visitor) post(path string, form url.Values) page {
	return v.do(http.MethodPost, path, form, nil)
}

// signIn signs in through the form and reads a page for its CSRF token.
func (v *visitor) signIn(email, password string) {
	v.t.Helper()
	p := v.post("/signin", url.Values{"email": {email}, "password": {password}, "next": {"/"}})
	if p.status != http.StatusSeeOther || p.location != "/" {
		v.t.Fatalf("sign in as %s: %d to %q\n%s", email, p.status, p.location, p.body)
	}
	if p := v.get("/"); p.status != http.StatusOK || v.csrf == "" {
		v.t.Fatalf("home after sign-in: %d, csrf %q", p.status, v.csrf)
	}
}

func must(t *testing.T, p page, status int, contains ...string) {
	t.Helper()
	if p.status != status {
		t.Fatalf("status %d, want %d (to %q)\n%s", p.status, status, p.location, p.body)
	}
	for _, s := range contains {
		if !strings.Contains(p.body, s) {
			t.Fatalf("the page lacks %q:\n%s", s, p.body)
		}
	}
}

// sameAsMissing fails unless another tenant's resource answers exactly as a missing one: 404.
func sameAsMissing(t *testing.T, what string, foreign, missing page) {
	t.Helper()
	if foreign.status != http.StatusNotFound || missing.status != http.StatusNotFound || strip(foreign.body) != strip(missing.body) {
		t.Fatalf("%s: another tenant's answers %d, a missing one %d\n%s", what, foreign.status, missing.status, foreign.body)
	}
}

func system() context.Context {
	return access.WithPrincipal(context.Background(), &access.Principal{Kind: access.ActorSystem, Scope: access.SystemScope()})
}

func TestSignInPagesAndSignOut(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Acme")
	dev := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "ws-acme-01"})

	v := newVisitor(t, e)
	p := v.get("/devices?q=ws")
	if p.status != http.StatusSeeOther || p.location != "/signin?next=%2Fdevices%3Fq%3Dws" {
		t.Fatalf("a signed-out visit: %d to %q; want the sign-in page, coming back after it", p.status, p.location)
	}
	must(t, v.get(p.location), http.StatusOK, `action="/signin"`, `name="next" value="/devices?q=ws"`)
	must(t, v.post("/signin", url.Values{"email": {apptest.AdminEmail}, "password": {"wrong"}}), http.StatusUnauthorized,
		"invalid email or password")

	v.signIn(apptest.AdminEmail, apptest.AdminPassword)
	home := v.get("/")
	must(t, home, http.StatusOK, "Recently offline", `href="/patches"><span class="tile-label">Patch compliance</span><span class="tile-value">100%</span>`,
		"no device scanned yet", `<span class="tile-label">Security score</span><span class="tile-value">100</span>`, "no device reported yet")
	if csp := home.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Fatalf("the page's CSP is %q", csp)
	}
	must(t, v.get("/devices"), http.StatusOK, "ws-acme-01", `href="/devices/`+dev+`"`)
	must(t, v.get("/devices?q=nothing-like-it"), http.StatusOK, "No device matches this filter")
	must(t, v.get("/devices/"+dev), http.StatusOK, "<h1>ws-acme-01</h1>", "Acme Customer")
	if strings.Contains(v.get("/devices/"+dev).body, "data-chart") {
		t.Fatal("a device without metrics has a chart")
	}
	for i, cpu := range []float64{12.5, 40, 97} {
		if _, err := e.App.DB.SQL.Exec(`INSERT INTO device_metrics (device_id, recorded_at, cpu_percent, ram_percent, disk_percent, sample)
			VALUES ($1, $2, $3, 50, 60, '{}')`, dev, time.Now().UTC().Add(time.Duration(i-3)*time.Minute), cpu); err != nil {
			t.Fatal(err)
		}
	}
	must(t, v.get("/devices/"+dev), http.StatusOK, `data-chart="{&#34;t&#34;:[`, `&#34;cpu&#34;:[12.5,40,97]`, "uPlot.iife.min.js")
	must(t, v.get("/devices/00000000-0000-4000-8000-000000000000"), http.StatusNotFound, "Not found")
	must(t, v.get("/alerts"), http.StatusOK, "no alert is open")

	// Signing out ends the session: its cookie no longer opens a page, even sent again.
	cookie := v.c.Jar.Cookies(mustURL(t, e.Server.URL))
	must(t, v.post("/signout", url.Values{"csrf": {v.csrf}}), http.StatusSeeOther)
	again := newVisitor(t, e)
	again.c.Jar.SetCookies(mustURL(t, e.Server.URL), cookie)
	if p := again.get("/"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/signin") {
		t.Fatalf("the cookie of a signed-out session opened the home page: %d %q", p.status, p.location)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A user of one organization never sees another's device: not in the list, and its page is
// the same 404 as a missing device's.
func TestAnotherOrganizationsDeviceIsNotFound(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	mine := e.NewTenant(admin, "Mine")
	theirs := e.NewTenant(admin, "Theirs")
	e.InsertDevice(apptest.DeviceRow{PartnerID: mine.PartnerID, OrgID: mine.OrgID, SiteID: mine.SiteID, Hostname: "mine-01"})
	foreign := e.InsertDevice(apptest.DeviceRow{PartnerID: theirs.PartnerID, OrgID: theirs.OrgID, SiteID: theirs.SiteID, Hostname: "theirs-01"})
	a, err := app.Service[*alerts.Service](e.App).Raise(system(), alerts.Raised{DeviceID: foreign, Severity: "high", Title: "Disk full on theirs-01"})
	if err != nil {
		t.Fatal(err)
	}

	v := newVisitor(t, e)
	v.signIn("mine-org@gale.test", apptest.UserPassword)
	list := v.get("/devices")
	must(t, list, http.StatusOK, "mine-01")
	if strings.Contains(list.body, "theirs-01") {
		t.Fatal("the list shows another organization's device")
	}
	foreignPage, missing := v.get("/devices/"+foreign), v.get("/devices/00000000-0000-4000-8000-000000000000")
	must(t, foreignPage, http.StatusNotFound, "Not found")
	if strip(foreignPage.body) != strip(missing.body) {
		t.Fatalf("another organization's device does not look like a missing one:\n%s\n---\n%s", foreignPage.body, missing.body)
	}
	must(t, v.get("/devices/"+foreign+"/software"), http.StatusNotFound)
	must(t, v.get("/alerts/"+a.ID), http.StatusNotFound)
	if inbox := v.get("/alerts"); strings.Contains(inbox.body, "Disk full") {
		t.Fatal("the inbox shows another organization's alert")
	}
	acted := v.do(http.MethodPost, "/alerts/"+a.ID+"/acknowledge", url.Values{}, map[string]string{"X-CSRF-Token": v.csrf})
	must(t, acted, http.StatusNotFound)
	if got, _ := app.Service[*alerts.Service](e.App).Get(system(), a.ID); got.Status != alerts.StatusActive {
		t.Fatalf("another organization's user changed the alert to %s", got.Status)
	}
}

var requestID = regexp.MustCompile(`Request ID: <code>[0-9a-f]+</code>`)

func strip(body string) string { return requestID.ReplaceAllString(body, "") }

// A state-changing request needs the session's CSRF token, in the form or in the header htmx
// sends; the sign-in form needs to come from a page of the server.
func TestCSRF(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Acme")
	dev := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "ws-01"})
	svc := app.Service[*alerts.Service](e.App)
	raise := func() string {
		a, err := svc.Raise(system(), alerts.Raised{DeviceID: dev, Severity: "high", Title: "CPU hot"})
		if err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	status := func(id string) string {
		a, err := svc.Get(system(), id)
		if err != nil {
			t.Fatal(err)
		}
		return a.Status
	}

	v := newVisitor(t, e)
	v.signIn(apptest.AdminEmail, apptest.AdminPassword)
	id := raise()
	must(t, v.post("/alerts/"+id+"/acknowledge", url.Values{}), http.StatusForbidden, "security token")
	must(t, v.post("/alerts/"+id+"/acknowledge", url.Values{"csrf": {strings.Repeat("0", 64)}}), http.StatusForbidden)
	if s := status(id); s != alerts.StatusActive {
		t.Fatalf("a request without a valid token changed the alert to %s", s)
	}
	p := v.post("/alerts/"+id+"/acknowledge", url.Values{"csrf": {v.csrf}})
	if p.status != http.StatusSeeOther || p.location != "/alerts/"+id || status(id) != alerts.StatusAcknowledged {
		t.Fatalf("the form with its token: %d to %q, alert %s", p.status, p.location, status(id))
	}
	// htmx sends the token as a header and swaps the row it gets back.
	row := v.do(http.MethodPost, "/alerts/"+id+"/resolve", url.Values{}, map[string]string{"X-CSRF-Token": v.csrf, "HX-Request": "true"})
	must(t, row, http.StatusOK, `<tr id="alert-`+id+`">`, "resolved")
	// A second resolve loses: the API's 409, shown in the page's notice area.
	again := v.do(http.MethodPost, "/alerts/"+id+"/resolve", url.Values{}, map[string]string{"X-CSRF-Token": v.csrf, "HX-Request": "true"})
	must(t, again, http.StatusConflict, `class="notice notice-error"`)
	if again.header.Get("HX-Retarget") != "#notice" {
		t.Fatalf("an htmx error is not sent to the notice area: %v", again.header)
	}

	// A session's token is no other session's.
	other := newVisitor(t, e)
	other.signIn(apptest.AdminEmail, apptest.AdminPassword)
	if other.csrf == v.csrf {
		t.Fatal("two sessions share a CSRF token")
	}
	id2 := raise()
	must(t, other.post("/alerts/"+id2+"/acknowledge", url.Values{"csrf": {v.csrf}}), http.StatusForbidden)

	// The sign-in form posted from another site is refused before the password is checked.
	evil := newVisitor(t, e)
	p = evil.do(http.MethodPost, "/signin", url.Values{"email": {apptest.AdminEmail}, "password": {apptest.AdminPassword}},
		map[string]string{"Origin": "https://evil.example"})
	must(t, p, http.StatusForbidden)
	if len(evil.c.Jar.Cookies(mustURL(t, e.Server.URL))) != 0 {
		t.Fatal("a cross-site sign-in got a session")
	}
}

// A session ends after the idle timeout without a request; a live page's own refreshes do
// not keep it alive.
func TestIdleTimeout(t *testing.T) {
	clk := clock.NewFake(time.Now())
	e := apptest.New(t, apptest.WithClock(clk))
	v := newVisitor(t, e)
	v.signIn(apptest.AdminEmail, apptest.AdminPassword)
	idle := e.App.Config.ConsoleIdleTimeout

	clk.Advance(idle - time.Minute)
	must(t, v.get("/"), http.StatusOK)
	clk.Advance(idle - time.Minute)
	must(t, v.get("/"), http.StatusOK)
	clk.Advance(idle / 2)
	must(t, v.do(http.MethodGet, "/", nil, map[string]string{"X-Gale-Live": "1", "HX-Request": "true"}), http.StatusOK)
	clk.Advance(idle/2 + time.Minute)
	p := v.get("/devices")
	if p.status != http.StatusSeeOther || !strings.Contains(p.location, "without+activity") {
		t.Fatalf("after the idle timeout: %d to %q; want the sign-in page saying why", p.status, p.location)
	}
}

// The return address after sign-in stays on this server.
func TestSignInReturnsOnlyWithinTheServer(t *testing.T) {
	e := apptest.New(t)
	for next, want := range map[string]string{"/alerts": "/alerts", "//evil.example/x": "/", "https://evil.example": "/",
		`/\evil.example`: "/"} {
		v := newVisitor(t, e)
		p := v.post("/signin", url.Values{"email": {apptest.AdminEmail}, "password": {apptest.AdminPassword}, "next": {next}})
		if p.status != http.StatusSeeOther || p.location != want {
			t.Errorf("next %q: %d to %q, want %q", next, p.status, p.location, want)
		}
	}
}

// Assets carry their hash: kept for a year, compressed when the browser takes gzip.
func TestAssets(t *testing.T) {
	e := apptest.New(t)
	v := newVisitor(t, e)
	signin := v.get("/signin")
	m := regexp.MustCompile(`href="(/assets/console\.css\?v=[0-9a-f]+)"`).FindStringSubmatch(signin.body)
	if m == nil {
		t.Fatalf("no stylesheet link:\n%s", signin.body)
	}
	css := v.do(http.MethodGet, m[1], nil, map[string]string{"Accept-Encoding": "gzip"})
	if css.status != http.StatusOK || css.header.Get("Content-Encoding") != "gzip" ||
		!strings.Contains(css.header.Get("Cache-Control"), "immutable") || css.header.Get("Content-Type") != "text/css; charset=utf-8" {
		t.Fatalf("stylesheet: %d %v", css.status, css.header)
	}
	stale := v.get("/assets/console.css?v=old")
	if stale.status != http.StatusOK || stale.header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("an asset asked with another hash: %d %v", stale.status, stale.header)
	}
	must(t, v.get("/assets/nothing.js"), http.StatusNotFound)
}

// The inbox acts on the selected alerts, each on its own: the notice counts what moved and
// what had moved already.
func TestAlertBulk(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Acme")
	dev := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "ws-01"})
	svc := app.Service[*alerts.Service](e.App)
	var ids []string
	for _, title := range []string{"CPU hot", "Disk full"} {
		a, err := svc.Raise(system(), alerts.Raised{DeviceID: dev, Severity: "high", Title: title})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	v := newVisitor(t, e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)
	must(t, v.get("/alerts"), http.StatusOK, `name="ids" value="`+ids[0]+`"`, "Acknowledge selected", `<a href="/devices/`+dev+`">ws-01</a>`)
	hx := map[string]string{"X-CSRF-Token": v.csrf, "HX-Request": "true"}
	must(t, v.do(http.MethodPost, "/alerts/"+ids[0]+"/acknowledge", url.Values{}, hx), http.StatusOK, `<a href="/devices/`+dev+`">ws-01</a>`)
	must(t, v.do(http.MethodPost, "/alerts/"+ids[0]+"/resolve", url.Values{}, hx), http.StatusOK, "resolved")
	ids = ids[1:]
	p := v.do(http.MethodPost, "/alerts/bulk", url.Values{"action": {"acknowledge"}, "ids": ids}, hx)
	must(t, p, http.StatusOK, "1 alert acknowledged")
	if p.header.Get("HX-Trigger") != "live" {
		t.Fatalf("the inbox is not told to refresh: %v", p.header)
	}
	for _, id := range ids {
		if a, _ := svc.Get(system(), id); a.Status != alerts.StatusAcknowledged {
			t.Fatalf("alert %s is %s after the bulk acknowledge", id, a.Status)
		}
	}
	must(t, v.do(http.MethodPost, "/alerts/bulk", url.Values{"action": {"acknowledge"}, "ids": ids}, hx), http.StatusOK,
		"0 alerts acknowledged; 1 had already moved on")
	must(t, v.do(http.MethodPost, "/alerts/bulk", url.Values{"action": {"dismiss"}, "ids": ids}, hx), http.StatusBadRequest)
	must(t, v.do(http.MethodPost, "/alerts/bulk", url.Values{"action": {"resolve"}}, hx), http.StatusBadRequest, "select the alerts first")
	many := make([]string, 101)
	for i := range many {
		many[i] = ids[0]
	}
	must(t, v.do(http.MethodPost, "/alerts/bulk", url.Values{"action": {"resolve"}, "ids": many}, hx), http.StatusBadRequest, "at most 100")
}

// The device list's bulk actions: a script on the selected devices, a static group, a reboot;
// a device of another organization among them is reported, not touched.
func TestDeviceBulk(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	other := e.NewTenant(admin, "Other")
	a := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "ws-a"})
	b := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "ws-b"})
	foreign := e.InsertDevice(apptest.DeviceRow{PartnerID: other.PartnerID, OrgID: other.OrgID, SiteID: other.SiteID, Hostname: "ws-x"})
	var script, group struct {
		ID string `json:"id"`
	}
	e.Must(http.StatusCreated, ten.Org, "POST", "/api/v1/scripts", map[string]any{"name": "Hello", "osTypes": []string{"linux"},
		"language": "sh", "content": "echo hello"}).JSON(t, &script)
	e.Must(http.StatusCreated, ten.Org, "POST", "/api/v1/groups", map[string]any{"orgId": ten.OrgID, "name": "Kiosks",
		"type": "static"}).JSON(t, &group)

	v := newVisitor(t, e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)
	must(t, v.get("/devices"), http.StatusOK, "Run on selected", "Kiosks", "Reboot selected", `name="ids" value="`+a+`"`)
	hx := map[string]string{"X-CSRF-Token": v.csrf, "HX-Request": "true"}
	ids := []string{a, b, foreign}
	must(t, v.do(http.MethodPost, "/devices/bulk", url.Values{"action": {"run-script"}, "script": {script.ID}, "ids": ids}, hx),
		http.StatusOK, "2 devices: the script started")
	must(t, v.do(http.MethodPost, "/devices/bulk", url.Values{"action": {"add-to-group"}, "group": {group.ID}, "ids": ids}, hx),
		http.StatusOK, "2 devices: added to the group")
	var members struct {
		Data []struct {
			DeviceID string `json:"deviceId"`
		} `json:"data"`
	}
	e.Must(http.StatusOK, ten.Org, "GET", "/api/v1/groups/"+group.ID+"/devices", nil).JSON(t, &members)
	if len(members.Data) != 2 {
		t.Fatalf("the group has %d members, want the 2 devices of the organization", len(members.Data))
	}
	must(t, v.do(http.MethodPost, "/devices/bulk", url.Values{"action": {"reboot"}, "ids": ids}, hx), http.StatusOK,
		"2 devices: a reboot is on its way")
	var cmds struct {
		Data []struct {
			Type string `json:"type"`
		} `json:"data"`
	}
	e.Must(http.StatusOK, admin, "GET", "/api/v1/devices/"+foreign+"/commands", nil).JSON(t, &cmds)
	if len(cmds.Data) != 0 {
		t.Fatalf("the device of another organization got %d commands", len(cmds.Data))
	}
	must(t, v.do(http.MethodPost, "/devices/bulk", url.Values{"action": {"run-script"}, "ids": ids}, hx), http.StatusBadRequest,
		"choose the script to run")
	must(t, v.do(http.MethodPost, "/devices/bulk", url.Values{"action": {"wipe"}, "ids": ids}, hx), http.StatusBadRequest)
	must(t, v.post("/devices/bulk", url.Values{"action": {"reboot"}, "ids": ids}), http.StatusForbidden)
}

// Forms keep the API's input policy: no NUL or control characters, at most 1 MiB.
func TestFormInputPolicy(t *testing.T) {
	e := apptest.New(t)
	v := newVisitor(t, e)
	must(t, v.post("/signin", url.Values{"email": {"admin\x00@gale.test"}, "password": {"x"}}), http.StatusBadRequest, "control characters")
	v.signIn(apptest.AdminEmail, apptest.AdminPassword)
	must(t, v.get("/devices?q=a%00b"), http.StatusBadRequest, "control characters")
	must(t, v.post("/devices/bulk", url.Values{"csrf": {v.csrf}, "action": {"reboot\x1b"}}), http.StatusBadRequest)
	big := v.post("/devices/bulk", url.Values{"csrf": {v.csrf}, "script": {strings.Repeat("x", 1<<20)}})
	must(t, big, http.StatusRequestEntityTooLarge)
}

// Scripts: written and edited in the console (each save a version), refused input shown in the
// editor with what was typed, run on a group, and another organization's script not found.
func TestScriptPages(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	other := e.NewTenant(admin, "Other")
	dev := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "ws-a"})
	var group, foreign struct {
		ID string `json:"id"`
	}
	e.Must(http.StatusCreated, ten.Org, "POST", "/api/v1/groups", map[string]any{"orgId": ten.OrgID, "name": "Kiosks",
		"type": "static"}).JSON(t, &group)
	e.Must(http.StatusOK, ten.Org, "POST", "/api/v1/groups/"+group.ID+"/devices", map[string]any{"deviceIds": []string{dev}})
	e.Must(http.StatusCreated, other.Org, "POST", "/api/v1/scripts", map[string]any{"name": "Theirs", "osTypes": []string{"linux"},
		"language": "sh", "content": "echo"}).JSON(t, &foreign)

	v := newVisitor(t, e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)
	must(t, v.get("/scripts"), http.StatusOK, "No scripts yet", `href="/scripts/new"`)
	must(t, v.get("/scripts/new"), http.StatusOK, `name="content"`)
	form := url.Values{"csrf": {v.csrf}, "name": {"Disk check"}, "language": {"bash"}, "osTypes": {"linux"}, "runAs": {"system"},
		"timeoutSeconds": {"60"}, "content": {""}}
	refused := v.post("/scripts", form)
	must(t, refused, http.StatusBadRequest, "Not saved", "content is empty", `value="Disk check"`)
	form.Set("content", "df -h\r\n")
	created := v.post("/scripts", form)
	if created.status != http.StatusSeeOther || !strings.HasPrefix(created.location, "/scripts/") {
		t.Fatalf("create: %d to %q\n%s", created.status, created.location, created.body)
	}
	page := v.get(created.location)
	must(t, page, http.StatusOK, "<h1>Disk check</h1>", "df -h", "Kiosks")
	id := strings.TrimPrefix(created.location, "/scripts/")

	must(t, v.get("/scripts/"+id+"/edit"), http.StatusOK, `value="Disk check"`, "df -h")
	form.Set("content", "df -h /")
	form.Set("versionNote", "only the root")
	must(t, v.post("/scripts/"+id, form), http.StatusSeeOther)
	must(t, v.get("/scripts/"+id), http.StatusOK, "df -h /", "only the root", "<dd>2</dd>")

	run := v.post("/scripts/"+id+"/run", url.Values{"csrf": {v.csrf}, "group": {group.ID}})
	if run.status != http.StatusSeeOther || !strings.Contains(run.location, "started=1") {
		t.Fatalf("run on the group: %d to %q\n%s", run.status, run.location, run.body)
	}
	detail := v.get("/scripts/" + id)
	m := regexp.MustCompile(`href="/scripts/executions/([0-9a-f-]+)"`).FindStringSubmatch(detail.body)
	if m == nil {
		t.Fatalf("no run listed:\n%s", detail.body)
	}
	must(t, v.get("/scripts/executions/"+m[1]), http.StatusOK, "Run of Disk check", `data-stream="/devices/`+dev+`/commands/`)

	must(t, v.get("/scripts/"+foreign.ID), http.StatusNotFound, "Not found")
	must(t, v.get("/scripts/"+foreign.ID+"/edit"), http.StatusNotFound)
	must(t, v.post("/scripts/"+foreign.ID, form), http.StatusNotFound)
	must(t, v.post("/scripts/"+foreign.ID+"/run", url.Values{"csrf": {v.csrf}, "group": {group.ID}}), http.StatusNotFound)
}

// The guide from an empty installation to the install command: a partner, an organization,
// then an enrollment key whose command names this server, the key and its secret.
func TestStartGuide(t *testing.T) {
	e := apptest.New(t)
	v := newVisitor(t, e)
	v.signIn(apptest.AdminEmail, apptest.AdminPassword)
	must(t, v.get("/"), http.StatusOK, `href="/start"`)
	must(t, v.get("/start"), http.StatusOK, "Create the partner", "After the partner.")
	must(t, v.post("/start/partner", url.Values{"csrf": {v.csrf}, "name": {strings.Repeat("x", 201)}}), http.StatusBadRequest,
		"at most 200 characters")
	must(t, v.post("/start/partner", url.Values{"csrf": {v.csrf}, "name": {"Acme IT"}}), http.StatusSeeOther)
	page := v.get("/start")
	must(t, page, http.StatusOK, "Done: Acme IT.", "Create the organization")
	partnerID := regexp.MustCompile(`<option value="([0-9a-f-]+)">Acme IT</option>`).FindStringSubmatch(page.body)
	if partnerID == nil {
		t.Fatalf("no partner to choose:\n%s", page.body)
	}
	must(t, v.post("/start/organization", url.Values{"csrf": {v.csrf}, "partnerId": {partnerID[1]}, "name": {"Contoso"}}),
		http.StatusSeeOther)
	page = v.get("/start")
	must(t, page, http.StatusOK, "Create the key and show the install command")
	orgID := regexp.MustCompile(`<option value="([0-9a-f-]+)">Contoso</option>`).FindStringSubmatch(page.body)
	must(t, v.post("/start/key", url.Values{"csrf": {v.csrf}, "orgId": {orgID[1]}, "name": {"Laptops"}, "maxUsage": {"0"}}),
		http.StatusBadRequest)
	created := v.post("/start/key", url.Values{"csrf": {v.csrf}, "orgId": {orgID[1]}, "name": {"Laptops"}, "maxUsage": {"3"},
		"ttlHours": {"2"}})
	m := regexp.MustCompile(`curl -fsSL ` + regexp.QuoteMeta(e.App.Config.PublicURL) +
		`/api/v1/agents/install.sh \| sudo sh -s -- --key (\S+) --secret (\S+)</pre>`).FindStringSubmatch(created.body)
	if created.status != http.StatusCreated || m == nil {
		t.Fatalf("the key: %d\n%s", created.status, created.body)
	}
	var keys struct {
		Data []struct {
			Name     string `json:"name"`
			MaxUsage int    `json:"maxUsage"`
		} `json:"data"`
	}
	e.Must(http.StatusOK, e.Admin(), "GET", "/api/v1/enrollment-keys?orgId="+orgID[1], nil).JSON(t, &keys)
	if len(keys.Data) != 1 || keys.Data[0].Name != "Laptops" || keys.Data[0].MaxUsage != 3 {
		t.Fatalf("enrollment keys = %+v", keys.Data)
	}
	// The key and secret of the command enroll an agent.
	res := e.Do(apptest.Anonymous, "POST", "/api/v1/agents/enroll", map[string]any{"enrollmentKey": m[1], "enrollmentSecret": m[2],
		"hostname": "laptop-1", "osType": "linux", "osVersion": "12", "architecture": "amd64", "agentVersion": "1.0.0"})
	if res.Status != http.StatusCreated {
		t.Fatalf("enrolling with the command's key: %d %s", res.Status, res.Body)
	}

	// An organization's user cannot create a partner.
	e.NewTenant(e.Admin(), "Other")
	org := newVisitor(t, e)
	org.signIn("other-org@gale.test", apptest.UserPassword)
	must(t, org.get("/start"), http.StatusOK)
	must(t, org.post("/start/partner", url.Values{"csrf": {org.csrf}, "name": {"Mine"}}), http.StatusForbidden)
}

// A user turns two-step verification on from the console; sign-in then asks for a code; a
// password change ends the session.
func TestAccountMFAAndPassword(t *testing.T) {
	e := apptest.New(t)
	v := newVisitor(t, e)
	v.signIn(apptest.AdminEmail, apptest.AdminPassword)
	must(t, v.get("/account"), http.StatusOK, "Off.", `action="/account/mfa/setup"`)
	must(t, v.post("/account/mfa/setup", url.Values{"csrf": {v.csrf}, "password": {"wrong"}}), http.StatusUnauthorized)
	setup := v.post("/account/mfa/setup", url.Values{"csrf": {v.csrf}, "password": {apptest.AdminPassword}})
	m := regexp.MustCompile(`id="mfa-secret">([A-Z2-7]+)</pre>`).FindStringSubmatch(setup.body)
	if setup.status != http.StatusOK || m == nil || !strings.Contains(setup.body, `href="otpauth://totp/`) {
		t.Fatalf("setup: %d\n%s", setup.status, setup.body)
	}
	code, _ := totp.GenerateCode(m[1], time.Now())
	on := v.post("/account/mfa/enable", url.Values{"csrf": {v.csrf}, "code": {code}, "password": {apptest.AdminPassword}})
	must(t, on, http.StatusOK, "Two-step verification is on", "recovery codes")
	must(t, v.get("/account"), http.StatusOK, "On: signing in asks for a code")

	other := newVisitor(t, e)
	p := other.post("/signin", url.Values{"email": {apptest.AdminEmail}, "password": {apptest.AdminPassword}, "next": {"/"}})
	must(t, p, http.StatusOK, `action="/signin/mfa"`)
	temp := regexp.MustCompile(`name="tempToken" value="([^"]+)"`).FindStringSubmatch(p.body)
	next, _ := totp.GenerateCode(m[1], time.Now().Add(30*time.Second))
	if p := other.post("/signin/mfa", url.Values{"tempToken": {temp[1]}, "code": {next}, "next": {"/"}}); p.status != http.StatusSeeOther {
		t.Fatalf("second step: %d\n%s", p.status, p.body)
	}

	must(t, v.post("/account/password", url.Values{"csrf": {v.csrf}, "current": {apptest.AdminPassword}, "next": {"short"}}),
		http.StatusBadRequest)
	changed := v.post("/account/password", url.Values{"csrf": {v.csrf}, "current": {apptest.AdminPassword}, "next": {"New-Passw0rd-1"}})
	if changed.status != http.StatusSeeOther || !strings.HasPrefix(changed.location, "/signin") {
		t.Fatalf("change password: %d to %q", changed.status, changed.location)
	}
	if p := other.get("/"); p.status != http.StatusSeeOther {
		t.Fatalf("another session of the user survived the password change: %d", p.status)
	}
}

// The audit log page searches the entries in the user's scope.
func TestAuditPage(t *testing.T) {
	e := apptest.New(t)
	v := newVisitor(t, e)
	v.signIn(apptest.AdminEmail, apptest.AdminPassword)
	must(t, v.get("/"), http.StatusOK, `href="/audit"`)
	must(t, v.get("/audit?q=auth.login"), http.StatusOK, "<code>auth.login</code>", apptest.AdminEmail)
	if p := v.get("/audit?q=nothing.of.the.kind"); !strings.Contains(p.body, "No entry matches") {
		t.Fatalf("a search that matches nothing:\n%s", p.body)
	}
	must(t, v.get("/audit?category=other"), http.StatusBadRequest)
	must(t, v.get("/audit?q="+strings.Repeat("x", 201)), http.StatusBadRequest)
}

// The keys page lists the active enrollment keys of the user's scope and revokes them; a
// revoked key no longer enrolls, and another organization's key is not found.
func TestKeysPage(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	other := e.NewTenant(admin, "Other")
	var mine, theirs struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	e.Must(http.StatusCreated, ten.Org, "POST", "/api/v1/enrollment-keys", map[string]any{"orgId": ten.OrgID, "name": "Laptops"}).JSON(t, &mine)
	e.Must(http.StatusCreated, other.Org, "POST", "/api/v1/enrollment-keys", map[string]any{"orgId": other.OrgID, "name": "Theirs"}).JSON(t, &theirs)
	v := newVisitor(t, e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)
	page := v.get("/settings")
	must(t, page, http.StatusOK, "Laptops", `action="/settings/enrollment-keys/`+mine.ID+`/revoke"`)
	if strings.Contains(page.body, "Theirs") {
		t.Fatal("the keys page lists another organization's key")
	}
	must(t, v.post("/settings/enrollment-keys/"+theirs.ID+"/revoke", url.Values{"csrf": {v.csrf}}), http.StatusNotFound)
	must(t, v.post("/settings/enrollment-keys/"+mine.ID+"/revoke", url.Values{"csrf": {v.csrf}}), http.StatusSeeOther)
	must(t, v.get("/settings"), http.StatusOK, "No active enrollment key")
	var key struct {
		Status string `json:"status"`
	}
	e.Must(http.StatusOK, admin, "GET", "/api/v1/enrollment-keys/"+mine.ID, nil).JSON(t, &key)
	if key.Status != "revoked" {
		t.Fatalf("the key is %s after revoking it in the console", key.Status)
	}
}

// The switcher narrows the pages to an organization, then to one of its sites; an
// organization outside the user's scope narrows to nothing rather than showing it.
func TestSwitcher(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	acme := e.NewTenant(admin, "Acme")
	other := e.NewTenant(admin, "Other")
	var branch struct {
		ID string `json:"id"`
	}
	e.Must(http.StatusCreated, admin, "POST", "/api/v1/orgs/sites", map[string]any{"orgId": acme.OrgID, "name": "Branch"}).JSON(t, &branch)
	e.InsertDevice(apptest.DeviceRow{PartnerID: acme.PartnerID, OrgID: acme.OrgID, SiteID: acme.SiteID, Hostname: "hq-01"})
	e.InsertDevice(apptest.DeviceRow{PartnerID: acme.PartnerID, OrgID: acme.OrgID, SiteID: branch.ID, Hostname: "branch-01"})
	e.InsertDevice(apptest.DeviceRow{PartnerID: other.PartnerID, OrgID: other.OrgID, SiteID: other.SiteID, Hostname: "other-01"})
	e.Must(http.StatusCreated, admin, "POST", "/api/v1/orgs/organizations", map[string]any{"partnerId": acme.PartnerID, "name": `R&D <Lab>`})

	v := newVisitor(t, e)
	v.signIn(apptest.AdminEmail, apptest.AdminPassword)
	must(t, v.get("/devices"), http.StatusOK, "hq-01", "branch-01", "other-01", `id="scope-org"`, ">R&amp;D &lt;Lab&gt;</option>", `<optgroup label="`)
	must(t, v.post("/scope", url.Values{"csrf": {v.csrf}, "org": {acme.OrgID}, "next": {"/devices"}}), http.StatusSeeOther)
	list := v.get("/devices")
	must(t, list, http.StatusOK, "hq-01", "branch-01", `id="scope-site"`, `<option value="`+acme.OrgID+`" selected>`)
	if strings.Contains(list.body, "other-01") {
		t.Fatal("narrowed to Acme, the list shows another organization's device")
	}
	must(t, v.post("/scope", url.Values{"csrf": {v.csrf}, "org": {acme.OrgID}, "site": {branch.ID}, "next": {"/devices"}}), http.StatusSeeOther)
	list = v.get("/devices")
	if !strings.Contains(list.body, "branch-01") || strings.Contains(list.body, "hq-01") {
		t.Fatalf("narrowed to the branch site:\n%s", list.body)
	}
	// Another organization forgets the site.
	must(t, v.post("/scope", url.Values{"csrf": {v.csrf}, "org": {other.OrgID}, "site": {branch.ID}, "next": {"/devices"}}), http.StatusSeeOther)
	must(t, v.get("/devices"), http.StatusOK, "other-01")

	// A user of one organization who sets another's in the switcher sees nothing of it.
	u := newVisitor(t, e)
	u.signIn("acme-org@gale.test", apptest.UserPassword)
	must(t, u.post("/scope", url.Values{"csrf": {u.csrf}, "org": {other.OrgID}, "next": {"/devices"}}), http.StatusSeeOther)
	if p := u.get("/devices"); strings.Contains(p.body, "other-01") || p.status != http.StatusOK {
		t.Fatalf("a foreign organization in the switcher: %d\n%s", p.status, p.body)
	}
}

// The users page lists the users in the caller's scope only.
func TestUsersPage(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	e.NewTenant(admin, "Acme")
	e.NewTenant(admin, "Other")
	v := newVisitor(t, e)
	v.signIn("acme-partner@gale.test", apptest.UserPassword)
	page := v.get("/users")
	must(t, page, http.StatusOK, "acme-org@gale.test", "acme-partner@gale.test")
	if strings.Contains(page.body, "other-org@gale.test") || strings.Contains(page.body, apptest.AdminEmail) {
		t.Fatal("the users page shows users outside the partner")
	}
	if p := v.get("/users?q=acme-org"); strings.Contains(p.body, `<div class="muted small">acme-partner@gale.test</div>`) {
		t.Fatal("the search did not narrow the list")
	}
}

// The processes page asks the device's agent; without one connected it says so, and another
// organization's device is not found.
func TestProcessesPage(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	other := e.NewTenant(admin, "Other")
	mine := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "ws-a"})
	foreign := e.InsertDevice(apptest.DeviceRow{PartnerID: other.PartnerID, OrgID: other.OrgID, SiteID: other.SiteID, Hostname: "ws-x"})
	v := newVisitor(t, e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)
	must(t, v.get("/devices/"+foreign+"/processes"), http.StatusNotFound)
	offline := v.get("/devices/" + mine + "/processes")
	if offline.status != http.StatusServiceUnavailable || !strings.Contains(offline.body, "agent is not connected") ||
		!strings.Contains(offline.body, `href="/devices/`+mine+`/services"`) {
		t.Fatalf("processes of a device without a connected agent: %d\n%s", offline.status, offline.body)
	}
	hx := map[string]string{"X-CSRF-Token": v.csrf, "HX-Request": "true"}
	must(t, v.do(http.MethodPost, "/devices/"+mine+"/processes/0/kill", url.Values{}, hx), http.StatusBadRequest)
	must(t, v.do(http.MethodPost, "/devices/"+mine+"/processes/12/kill", url.Values{"signal": {"HUP"}}, hx), http.StatusBadRequest)
	must(t, v.do(http.MethodPost, "/devices/"+foreign+"/processes/12/kill", url.Values{}, hx), http.StatusNotFound)
}

// Every page and action that names a device, a command, a run or a key of another
// organization answers as for a missing one.
func TestForeignIDsAreNotFound(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	other := e.NewTenant(admin, "Other")
	e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "ws-a"})
	foreign := e.InsertDevice(apptest.DeviceRow{PartnerID: other.PartnerID, OrgID: other.OrgID, SiteID: other.SiteID, Hostname: "ws-x"})
	var script, theirScript, key struct {
		ID string `json:"id"`
	}
	body := map[string]any{"name": "Hello", "osTypes": []string{"linux"}, "language": "sh", "content": "echo hello"}
	e.Must(http.StatusCreated, ten.Org, "POST", "/api/v1/scripts", body).JSON(t, &script)
	e.Must(http.StatusCreated, other.Org, "POST", "/api/v1/scripts", body).JSON(t, &theirScript)
	var run struct {
		Executions []struct {
			ID        string `json:"id"`
			CommandID string `json:"commandId"`
		} `json:"executions"`
	}
	e.Must(http.StatusAccepted, other.Org, "POST", "/api/v1/scripts/"+theirScript.ID+"/execute", map[string]any{"deviceIds": []string{foreign}}).JSON(t, &run)
	e.Must(http.StatusCreated, other.Org, "POST", "/api/v1/api-keys", map[string]any{"name": "theirs", "permissions": []string{"devices:read"}}).JSON(t, &key)
	const missing = missingID

	v := newVisitor(t, e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)
	form := url.Values{"csrf": {v.csrf}, "script": {script.ID}}
	same := func(what string, foreignPage, missingPage page) {
		t.Helper()
		if foreignPage.status != missingPage.status || strip(foreignPage.body) != strip(missingPage.body) {
			t.Fatalf("%s: another organization's answers %d, a missing one %d", what, foreignPage.status, missingPage.status)
		}
	}
	same("run a script", v.post("/devices/"+foreign+"/run", form), v.post("/devices/"+missing+"/run", form))
	must(t, v.post("/devices/"+foreign+"/terminal", url.Values{"csrf": {v.csrf}}), http.StatusNotFound)
	must(t, v.get("/devices/"+foreign+"/commands/"+run.Executions[0].CommandID+"/output"), http.StatusNotFound)
	same("a run's page", v.get("/scripts/executions/"+run.Executions[0].ID), v.get("/scripts/executions/"+missing))
	must(t, v.get("/scripts/executions/"+run.Executions[0].ID), http.StatusNotFound)
	must(t, v.post("/settings/api-keys/"+key.ID+"/revoke", url.Values{"csrf": {v.csrf}}), http.StatusNotFound)
}

// The device list narrows to an operating system, a tag and a group, keeping each filter as
// another changes; a filter value that cannot exist is refused.
func TestDeviceFilters(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Acme")
	row := func(host, os string) string {
		return e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: host, OSType: os})
	}
	web, db := row("web-01", "linux"), row("db-01", "linux")
	row("desk-01", "windows")
	e.Must(http.StatusOK, ten.Org, "PATCH", "/api/v1/devices/"+web, map[string]any{"tags": []string{"prod", "web"}})
	e.Must(http.StatusOK, ten.Org, "PATCH", "/api/v1/devices/"+db, map[string]any{"tags": []string{"prod"}})
	var group struct {
		ID string `json:"id"`
	}
	e.Must(http.StatusCreated, ten.Org, "POST", "/api/v1/groups", map[string]any{"name": "Databases", "type": "static"}).JSON(t, &group)
	e.Must(http.StatusOK, ten.Org, "POST", "/api/v1/groups/"+group.ID+"/devices", map[string]any{"deviceIds": []string{db}})

	v := newVisitor(t, e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)
	listed := func(query string) string {
		t.Helper()
		p := v.get("/devices?" + query)
		must(t, p, http.StatusOK)
		var names []string
		for _, m := range regexp.MustCompile(`<a href="/devices/[0-9a-f-]+">([^<]+)</a>`).FindAllStringSubmatch(p.body, -1) {
			names = append(names, m[1])
		}
		return strings.Join(names, ",")
	}
	for query, want := range map[string]string{"os=windows": "desk-01", "os=linux": "db-01,web-01", "tag=prod": "db-01,web-01",
		"tag=web&os=linux": "web-01", "group=" + group.ID: "db-01", "group=" + group.ID + "&tag=web": ""} {
		if got := listed(query); got != want {
			t.Errorf("devices?%s lists %q, want %q", query, got, want)
		}
	}
	must(t, v.get("/devices?os=windows"), http.StatusOK, `<option value="windows" selected>`, `href="/devices?os=windows&amp;status=online"`,
		`<option value="`+group.ID+`">Databases</option>`)
	must(t, v.get("/devices?os=beos"), http.StatusBadRequest, "linux, windows or macos")
	// The rows, written outside html/template, escape what a device is called.
	e.Must(http.StatusOK, ten.Org, "PATCH", "/api/v1/devices/"+db, map[string]any{"displayName": `<b onmouseover="x">db</b>`})
	if p := v.get("/devices?q=onmouse"); !strings.Contains(p.body, `&lt;b onmouseover=&#34;x&#34;&gt;db&lt;/b&gt;`) || strings.Contains(p.body, "<b onmouseover") {
		t.Fatalf("a device's name is not escaped in the list:\n%s", p.body)
	}
	must(t, v.get("/devices?tag=%25%25"), http.StatusBadRequest, "a tag is 1 to 64")
	must(t, v.get("/devices?group=not-an-id"), http.StatusBadRequest)
}
