// Package apptest runs a whole Gale server in a test: a fresh migrated database (SQLite, or
// PostgreSQL with TEST_DATABASE_URL), the real router with real authentication, and helpers
// to sign in and call the API as a client would.
package apptest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/auth"
	"gale/internal/domains/identity"
	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/platform/config"
	"gale/internal/platform/store"
	"gale/internal/platform/store/storetest"
	"gale/internal/wire/agentproto"

	"github.com/coder/websocket"
)

// Credentials of the system administrator every Env starts with.
const (
	AdminEmail    = "admin@gale.test"
	AdminPassword = "Admin-Passw0rd"
)

// Env is a running server.
type Env struct {
	T      testing.TB
	App    *app.App
	Server *httptest.Server
}

// Option changes the configuration before the server starts.
type Option func(*config.Config)

// WithClock runs the server (and every node started with SecondNode) on clk, so a test moves
// time instead of sleeping.
func WithClock(clk clock.Clock) Option { return func(c *config.Config) { c.Clock = clk } }

// Config returns the test configuration: cheap argon2id parameters and no sign-in delay,
// so tests stay fast, webhooks allowed to reach local receivers, and API requests let wait
// for their turn as long as a test may take (races of many callers on a machine busy with
// other tests; admission's refusals have tests of their own); everything else as in
// production.
func Config(t testing.TB) config.Config {
	cfg := config.Defaults()
	cfg.DatabaseURL = storetest.URL(t)
	cfg.DataDir = t.TempDir()
	cfg.JWTSecret = []byte("test-secret-test-secret-test-secret-0123")
	cfg.EncryptionKey = bytes.Repeat([]byte{7}, 32)
	cfg.Argon2MemoryKiB, cfg.Argon2Iterations, cfg.Argon2Parallelism = 1024, 1, 1
	cfg.LoginResponseFloor = 0
	// Outbound webhooks may reach the test's own httptest receivers on 127.0.0.1; tests of
	// the refusal turn it off.
	cfg.WebhookAllowPrivateTargets = true
	cfg.APIQueueWait = 10 * time.Minute
	cfg.BootstrapAdminEmail, cfg.BootstrapAdminPassword = AdminEmail, AdminPassword
	return cfg
}

// New starts a server for t, stopped when t ends. Its PUBLIC_URL and NODE_ADDRESS are the test
// server's own address (options may change them), so links and the install script point at
// it, and other nodes reach it.
func New(t testing.TB, opts ...Option) *Env {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	cfg := Config(t)
	cfg.PublicURL = "http://" + srv.Listener.Addr().String()
	cfg.NodeAddress = cfg.PublicURL
	for _, o := range opts {
		o(&cfg)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return start(t, srv, cfg, logger)
}

func start(t testing.TB, srv *httptest.Server, cfg config.Config, logger *slog.Logger) *Env {
	t.Helper()
	a, err := app.New(context.Background(), cfg, logger)
	if err != nil {
		srv.Close()
		t.Fatalf("start app: %v", err)
	}
	srv.Config.Handler = a.Handler()
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		a.Close()
	})
	return &Env{T: t, App: a, Server: srv}
}

// SecondNode starts another server on the same database, as a second node behind a load
// balancer would run; options change its configuration.
func (e *Env) SecondNode(opts ...Option) *Env {
	e.T.Helper()
	srv := httptest.NewUnstartedServer(nil)
	cfg := e.App.Config
	cfg.NodeAddress = "http://" + srv.Listener.Addr().String()
	for _, o := range opts {
		o(&cfg)
	}
	return start(e.T, srv, cfg, e.App.Logger)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Response is an API answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test when it does not decode.
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// Map decodes the body as a JSON object.
func (r *Response) Map(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.JSON(t, &m)
	return m
}

// ErrorCode returns error.code of an error envelope, or "".
func (r *Response) ErrorCode() string {
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &env)
	return env.Error.Code
}

// Caller is who a request is sent as.
type Caller struct {
	Token  string // bearer access token
	APIKey string // X-API-Key
	// Header holds further headers (a console session's Cookie).
	Header http.Header
}

// apply sets the caller's credential and headers on req.
func (c Caller) apply(req *http.Request) {
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.APIKey != "" {
		req.Header.Set("X-API-Key", c.APIKey)
	}
	for k, v := range c.Header {
		req.Header[k] = v
	}
}

// Bearer is a caller with an access token.
func Bearer(token string) Caller { return Caller{Token: token} }

// Key is a caller with an API key.
func Key(key string) Caller { return Caller{APIKey: key} }

// Anonymous sends no credential.
var Anonymous = Caller{}

// Do sends a request; body is encoded as JSON unless it is a string or []byte (sent as is).
func (e *Env) Do(c Caller, method, path string, body any) *Response {
	e.T.Helper()
	var rdr io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rdr = strings.NewReader(b)
	case []byte:
		rdr = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.T.Fatalf("encode body: %v", err)
		}
		rdr = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.Server.URL+path, rdr)
	if err != nil {
		e.T.Fatalf("request: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.apply(req)
	res, err := e.Server.Client().Do(req)
	if err != nil {
		e.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return &Response{Status: res.StatusCode, Header: res.Header, Body: raw}
}

// Must sends a request and fails the test unless the status is want; it returns the response.
func (e *Env) Must(want int, c Caller, method, path string, body any) *Response {
	e.T.Helper()
	r := e.Do(c, method, path, body)
	if r.Status != want {
		e.T.Fatalf("%s %s = %d %s, want %d", method, path, r.Status, r.Body, want)
	}
	return r
}

// Login signs in and returns the access token.
func (e *Env) Login(email, password string) string {
	e.T.Helper()
	r := e.Must(http.StatusOK, Anonymous, "POST", "/api/v1/auth/login", map[string]string{"email": email, "password": password})
	var out struct {
		AccessToken string `json:"accessToken"`
	}
	r.JSON(e.T, &out)
	if out.AccessToken == "" {
		e.T.Fatalf("login of %s returned no access token: %s", email, r.Body)
	}
	return out.AccessToken
}

// Admin signs in as the system administrator.
func (e *Env) Admin() Caller { return Bearer(e.Login(AdminEmail, AdminPassword)) }

// CreatePartner creates a partner as the system administrator and returns its ID.
func (e *Env) CreatePartner(admin Caller, name string) string {
	e.T.Helper()
	r := e.Must(http.StatusCreated, admin, "POST", "/api/v1/orgs/partners", map[string]any{"name": name})
	return r.Map(e.T)["id"].(string)
}

// CreateOrg creates an organization (with its default site) and returns its ID.
func (e *Env) CreateOrg(c Caller, partnerID, name string) string {
	e.T.Helper()
	body := map[string]any{"name": name}
	if partnerID != "" {
		body["partnerId"] = partnerID
	}
	r := e.Must(http.StatusCreated, c, "POST", "/api/v1/orgs/organizations", body)
	return r.Map(e.T)["id"].(string)
}

// UserPassword is the password of users made by CreateUser.
const UserPassword = "User-Passw0rd"

// CreateUser inserts an active user directly and returns its ID and a signed-in caller.
// roleID empty means the level's administrator role.
func (e *Env) CreateUser(email string, level access.Level, partnerID, orgID, roleID string) (string, Caller) {
	e.T.Helper()
	cfg := e.App.Config
	id, err := identity.CreateUser(context.Background(), e.App.DB, identity.NewUser{Email: email, Name: email,
		PasswordHash: auth.HashPassword(UserPassword, auth.Argon2Params{MemoryKiB: cfg.Argon2MemoryKiB,
			Iterations: cfg.Argon2Iterations, Parallelism: cfg.Argon2Parallelism}),
		Level: level, PartnerID: partnerID, OrgID: orgID, RoleID: roleID})
	if err != nil {
		e.T.Fatalf("create user %s: %v", email, err)
	}
	return id, Bearer(e.Login(email, UserPassword))
}

// Tenant is a partner with one organization and signed-in callers at each level.
type Tenant struct {
	PartnerID string
	OrgID     string
	SiteID    string
	// Partner is a Partner Admin of the partner; Org an Organization Admin of the organization.
	Partner Caller
	Org     Caller
}

// NewTenant makes a partner, an organization with its default site, and an admin user at
// each level. prefix keeps names and emails apart.
func (e *Env) NewTenant(admin Caller, prefix string) Tenant {
	e.T.Helper()
	t := Tenant{PartnerID: e.CreatePartner(admin, prefix+" MSP")}
	t.OrgID = e.CreateOrg(admin, t.PartnerID, prefix+" Customer")
	var sites struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	e.Must(http.StatusOK, admin, "GET", "/api/v1/orgs/sites?orgId="+t.OrgID, nil).JSON(e.T, &sites)
	if len(sites.Data) > 0 {
		t.SiteID = sites.Data[0].ID
	}
	_, t.Partner = e.CreateUser(strings.ToLower(prefix)+"-partner@gale.test", access.LevelPartner, t.PartnerID, "", "")
	_, t.Org = e.CreateUser(strings.ToLower(prefix)+"-org@gale.test", access.LevelOrganization, t.PartnerID, t.OrgID, "")
	return t
}

// Eventually retries check until it returns true or the deadline passes (for background work).
func Eventually(t testing.TB, within time.Duration, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CreatePartnerDirect inserts a partner straight into the database (for servers whose
// gates keep a plain session from creating one) and returns its ID.
func (e *Env) CreatePartnerDirect() string {
	e.T.Helper()
	id, now := store.NewID(), store.Now()
	if _, err := e.App.DB.SQL.Exec(`INSERT INTO partners (id, name, slug, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)`,
		id, "Direct "+id, "direct-"+id, now); err != nil {
		e.T.Fatalf("insert partner: %v", err)
	}
	return id
}

// DeviceRow is a device inserted straight into the database for tests that need devices
// without a running agent. Empty fields get plausible values.
type DeviceRow struct {
	PartnerID, OrgID, SiteID string
	Hostname                 string
	Status                   string // default online
	OSType, OSName           string // default linux, Debian GNU/Linux
	OSVersion                string
	LastSeen                 time.Time // default now
	Tags                     []string
}

// InsertDevice adds d to the database and returns its ID.
func (e *Env) InsertDevice(d DeviceRow) string {
	e.T.Helper()
	id, now := store.NewID(), store.Now()
	if d.Status == "" {
		d.Status = "online"
	}
	if d.OSType == "" {
		d.OSType, d.OSName = "linux", "Debian GNU/Linux"
	}
	if d.LastSeen.IsZero() {
		d.LastSeen = now
	}
	err := e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO devices (id, partner_id, org_id, site_id, hostname, status, os_type, os_name, os_version,
			created_at, updated_at, enrolled_at, last_seen_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $10, $11)`,
			id, d.PartnerID, d.OrgID, d.SiteID, d.Hostname, d.Status, d.OSType, d.OSName, d.OSVersion, now, d.LastSeen.UTC()); err != nil {
			return err
		}
		for _, tag := range d.Tags {
			if _, err := tx.Exec(`INSERT INTO device_tags (device_id, partner_id, tag) VALUES ($1, $2, $3)`, id, d.PartnerID, tag); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.T.Fatalf("insert device: %v", err)
	}
	return id
}

// EnrollAgent enrolls an agent of a Linux machine named hostname in the tenant's organization,
// with a single-use enrollment key and its secret as an installer would, and has the agent
// report once over HTTP, as it does when it starts; it returns what the agent receives. The
// device is online from then on, reporting (as far as the server knows) over HTTP only until
// its live channel is dialled (DialAgent).
func (e *Env) EnrollAgent(ten Tenant, hostname string) agentproto.EnrollResponse {
	e.T.Helper()
	var k struct {
		Key    string `json:"key"`
		Secret string `json:"enrollmentSecret"`
	}
	e.Must(http.StatusCreated, ten.Partner, "POST", "/api/v1/enrollment-keys", map[string]any{"orgId": ten.OrgID, "name": hostname,
		"maxUsage": 1, "issueEnrollmentSecret": true}).JSON(e.T, &k)
	var r agentproto.EnrollResponse
	e.Must(http.StatusCreated, Anonymous, "POST", "/api/v1"+agentproto.PathEnroll, agentproto.EnrollRequest{EnrollmentKey: k.Key,
		EnrollmentSecret: k.Secret, Hostname: hostname, OSType: agentproto.OSLinux, OSVersion: "12", Architecture: "amd64",
		AgentVersion: "1.0.0"}).JSON(e.T, &r)
	e.Must(http.StatusOK, Bearer(r.AuthToken), "POST", "/api/v1/agents/"+r.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "1.0.0"})
	return r
}

// ReportOpeningChannel has the device's agent report over HTTP that it is opening its live
// channel, as an agent does right after it starts.
func (e *Env) ReportOpeningChannel(dev agentproto.EnrollResponse) {
	e.T.Helper()
	e.Must(http.StatusOK, Bearer(dev.AuthToken), "POST", "/api/v1/agents/"+dev.DeviceID+"/heartbeat",
		agentproto.Heartbeat{AgentVersion: "1.0.0", LiveChannel: agentproto.LiveChannelConnecting})
}

// WaitChannelWaits waits until n requests on this node wait for an agent to open its live
// channel (the gauge gale_agent_channel_waits), so that a test opens the channel while a
// request waits for it.
func (e *Env) WaitChannelWaits(n int) {
	e.T.Helper()
	want := fmt.Sprintf("\ngale_agent_channel_waits %d\n", n)
	Eventually(e.T, 10*time.Second, func() bool {
		return strings.Contains(string(e.Must(http.StatusOK, Anonymous, "GET", "/metrics", nil).Body), want)
	})
}

// DialAgent opens an agent's live channel with its token, as an agent would, and returns it
// once the server's welcome arrived (the channel is registered then), with the context the
// test reads and writes it under. Both end with the test.
func (e *Env) DialAgent(token string) (*websocket.Conn, context.Context) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e.T.Cleanup(cancel)
	url := "ws" + strings.TrimPrefix(e.Server.URL, "http") + "/api/v1" + agentproto.PathWebSocket
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		e.T.Fatalf("dial the agent channel: %v", err)
	}
	e.T.Cleanup(func() { ws.CloseNow() })
	var m agentproto.Message
	if _, data, err := ws.Read(ctx); err != nil || json.Unmarshal(data, &m) != nil || m.Type != agentproto.TypeWelcome {
		e.T.Fatalf("first message on the agent channel = %s %v, want welcome", data, err)
	}
	return ws, ctx
}

// AnswerCalls opens the agent's live channel (token) and answers each call it gets with what
// answer returns for it, until the test ends or the channel closes; it returns the channel.
func (e *Env) AnswerCalls(token string, answer func(agentproto.Call) (json.RawMessage, *agentproto.CallError)) *websocket.Conn {
	e.T.Helper()
	ws, ctx := e.DialAgent(token)
	go func() {
		for {
			_, data, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var m agentproto.Message
			var call agentproto.Call
			if json.Unmarshal(data, &m) != nil || m.Type != agentproto.TypeCall || json.Unmarshal(m.Payload, &call) != nil {
				continue
			}
			res := agentproto.CallResult{CallID: m.ID}
			res.Result, res.Error = answer(call)
			payload, _ := json.Marshal(res)
			reply, _ := json.Marshal(agentproto.Message{ID: m.ID, Type: agentproto.TypeCallResult, Payload: payload})
			if ws.Write(ctx, websocket.MessageText, reply) != nil {
				return
			}
		}
	}()
	return ws
}

// StartMaintenance creates, as c, a maintenance window of organization orgID over targets
// ({"type": "all"}, {"type": "sites", "ids": [...]}, ...) that suppresses alerts alone, and
// starts its one occurrence by hand, active for a month of the server's clock. It returns the
// occurrence's ID, for EndMaintenance.
func (e *Env) StartMaintenance(c Caller, orgID string, targets map[string]any) string {
	e.T.Helper()
	from := clock.Or(e.App.Config.Clock).Now().UTC().Add(24 * time.Hour)
	var w struct {
		ID string `json:"id"`
	}
	e.Must(http.StatusCreated, c, "POST", "/api/v1/maintenance/windows", map[string]any{"orgId": orgID, "name": "Maintenance",
		"startTime": from.Format("2006-01-02T15:04:05"), "endTime": from.Add(30 * 24 * time.Hour).Format("2006-01-02T15:04:05"),
		"timezone": "UTC", "recurrence": "once", "targets": targets, "suppressAlerts": true}).JSON(e.T, &w)
	var occ struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	e.Must(http.StatusOK, c, "GET", "/api/v1/maintenance/windows/"+w.ID+"/occurrences", nil).JSON(e.T, &occ)
	if len(occ.Data) != 1 {
		e.T.Fatalf("the window has %d occurrences, want 1", len(occ.Data))
	}
	e.Must(http.StatusOK, c, "POST", "/api/v1/maintenance/occurrences/"+occ.Data[0].ID+"/start", nil)
	return occ.Data[0].ID
}

// EndMaintenance ends, as c, an occurrence StartMaintenance started.
func (e *Env) EndMaintenance(c Caller, occurrenceID string) {
	e.T.Helper()
	e.Must(http.StatusOK, c, "POST", "/api/v1/maintenance/occurrences/"+occurrenceID+"/end", nil)
}
