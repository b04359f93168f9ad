package partnerapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"gale/internal/domains/partnerapi"
	"gale/internal/platform/clock"
	"gale/internal/testkit/apptest"
)

const (
	mgmt = "/api/v1/partner-service-principals"
	papi = "/api/v1/partner-api"
)

// env is a server with one tenant whose Partner Admin manages service principals.
type env struct {
	*apptest.Env
	t     *testing.T
	admin apptest.Caller
	ten   apptest.Tenant
	// clock is the server's clock (see advance).
	clock *clock.Fake
}

func newEnv(t *testing.T, opts ...apptest.Option) *env {
	t.Helper()
	clk := clock.NewFake(time.Now())
	e := &env{Env: apptest.New(t, append(opts, apptest.WithClock(clk))...), t: t, clock: clk}
	e.admin = e.Admin()
	e.ten = e.NewTenant(e.admin, "Alpha")
	return e
}

// advance moves the server's clock (expiries, rate-limit windows, idempotency) forward.
func (e *env) advance(d time.Duration) { e.clock.Advance(d) }

// principal is a service principal with one key.
type principal struct {
	ID, KeyID, Key string
	Caller         apptest.Caller
}

// allScopes is every scope of the partner API.
var allScopes = partnerapi.Scopes

// restricted is a principal body with an expiry and an allowlist (loopback, as tests call
// from there), so it may mint enrollment keys.
func restricted(name string, scopes ...string) map[string]any {
	if len(scopes) == 0 {
		scopes = allScopes
	}
	return map[string]any{"name": name, "scopes": scopes, "expiresAt": time.Now().Add(30 * 24 * time.Hour).UTC(),
		"sourceCidrs": []string{"127.0.0.0/8", "::1"}}
}

// newPrincipal creates a principal from body as caller, with one key (key body keyBody, or a
// plain one).
func (e *env) newPrincipal(caller apptest.Caller, body map[string]any, keyBody ...map[string]any) principal {
	e.t.Helper()
	var p principal
	p.ID = e.Must(http.StatusCreated, caller, "POST", mgmt, body).Map(e.t)["id"].(string)
	kb := map[string]any{"name": "automation"}
	if len(keyBody) > 0 {
		kb = keyBody[0]
	}
	k := e.Must(http.StatusCreated, caller, "POST", mgmt+"/"+p.ID+"/keys", kb).Map(e.t)
	p.KeyID, p.Key = k["id"].(string), k["key"].(string)
	p.Caller = apptest.Key(p.Key)
	return p
}

// full is a principal of the env's tenant with every scope and the restrictions.
func (e *env) full(name string) principal {
	return e.newPrincipal(e.ten.Partner, restricted(name))
}

// page is one export answer.
type page struct {
	Data       []map[string]any `json:"data"`
	Pagination struct {
		HasMore bool   `json:"hasMore"`
		Cursor  string `json:"cursor"`
	} `json:"pagination"`
}

func (e *env) page(c apptest.Caller, path string) page {
	e.t.Helper()
	var p page
	e.Must(http.StatusOK, c, "GET", path, nil).JSON(e.t, &p)
	return p
}

// traverse follows an export's cursor to the end, calling between (if set) after each page,
// and returns every row in order.
func (e *env) traverse(c apptest.Caller, path string, between func()) []map[string]any {
	e.t.Helper()
	var rows []map[string]any
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	p := e.page(c, path)
	for {
		rows = append(rows, p.Data...)
		if !p.Pagination.HasMore {
			if p.Pagination.Cursor != "" {
				e.t.Fatalf("last page of %s carries a cursor", path)
			}
			return rows
		}
		if between != nil {
			between()
		}
		p = e.page(c, path+sep+"cursor="+p.Pagination.Cursor)
	}
}

// wantError fails unless r is the error envelope with status and code.
func wantError(t *testing.T, r *apptest.Response, status int, code string) {
	t.Helper()
	if r.Status != status || r.ErrorCode() != code {
		t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, status, code)
	}
}

// countRows counts the rows of a table matching where.
func (e *env) countRows(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.App.DB.SQL.QueryRow(query, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (e *env) exec(query string, args ...any) {
	e.t.Helper()
	if _, err := e.App.DB.SQL.Exec(query, args...); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
}

// ids lists the id field of rows.
func ids(rows []map[string]any, field string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i], _ = r[field].(string)
	}
	return out
}

func decode(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return m
}
