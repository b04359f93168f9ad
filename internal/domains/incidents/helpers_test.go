package incidents_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/incidents"
	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

const api = "/api/v1"

var start = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

type fixture struct {
	e     *apptest.Env
	clk   *clock.Fake
	admin apptest.Caller
	a, b  apptest.Tenant
}

func newFixture(t *testing.T) fixture {
	clk := clock.NewFake(start)
	e := apptest.New(t, apptest.WithClock(clk))
	admin := e.Admin()
	return fixture{e: e, clk: clk, admin: admin, a: e.NewTenant(admin, "Alpha"), b: e.NewTenant(admin, "Bravo")}
}

func (f fixture) service() *incidents.Service { return app.Service[*incidents.Service](f.e.App) }

// must sends a request and fails t unless the status is want.
func (f fixture) must(t *testing.T, want int, c apptest.Caller, method, path string, body any) *apptest.Response {
	t.Helper()
	r := f.e.Do(c, method, path, body)
	if r.Status != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, r.Status, r.Body, want)
	}
	return r
}

// mustCode sends a request and fails t unless the status and error code are as wanted.
func (f fixture) mustCode(t *testing.T, want int, code string, c apptest.Caller, method, path string, body any) {
	t.Helper()
	r := f.must(t, want, c, method, path, body)
	if code != "" && r.ErrorCode() != code {
		t.Fatalf("%s %s: code %q (%s), want %q", method, path, r.ErrorCode(), r.Body, code)
	}
}

type feed struct {
	Data       []incidents.IncidentFeedRow
	Pagination incidents.IncidentFeedPagination
}

func (f fixture) feed(t *testing.T, c apptest.Caller, query string) feed {
	t.Helper()
	var out feed
	f.must(t, http.StatusOK, c, "GET", api+"/incidents/feed?"+query, nil).JSON(t, &out)
	return out
}

// row is a feed row inserted directly.
type row struct {
	tenant    apptest.Tenant
	kind      string // default tracked
	source    string // default native / edr_a for findings
	severity  int
	detected  time.Time
	title     string
	edrStatus string
}

// insert adds feed rows straight into the table and returns their IDs.
func (f fixture) insert(t testing.TB, rows ...row) []string {
	t.Helper()
	ids := make([]string, len(rows))
	err := f.e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
		for i, r := range rows {
			id := store.NewID()
			ids[i] = id
			kind, source, origin, status := r.kind, r.source, "manual", "open"
			var ref, edr any = id, nil
			if kind == "" {
				kind = incidents.KindTracked
			}
			if kind == incidents.KindFinding {
				origin, ref, status = "edr", nil, "new"
				if source == "" {
					source = incidents.ProviderA
				}
			} else {
				source = incidents.SourceNative
			}
			if r.edrStatus != "" {
				edr = r.edrStatus
			}
			title := r.title
			if title == "" {
				title = fmt.Sprintf("%s %d", kind, i)
			}
			if _, err := tx.Exec(`INSERT INTO incidents (id, partner_id, org_id, kind, source, source_id, origin, origin_ref, title, severity, status,
				edr_status, detected_at, in_feed, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15)`,
				id, r.tenant.PartnerID, r.tenant.OrgID, kind, source, "src-"+id, origin, ref, title, r.severity, status, edr,
				r.detected.UTC(), true, store.Now()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("insert rows: %v", err)
	}
	return ids
}

// roleUser makes a partner user of the tenant whose role grants perms.
func (f fixture) roleUser(t *testing.T, ten apptest.Tenant, name string, perms ...string) apptest.Caller {
	t.Helper()
	var role struct {
		ID string `json:"id"`
	}
	f.must(t, http.StatusCreated, ten.Partner, "POST", api+"/roles", map[string]any{"name": name, "scope": "partner",
		"permissions": perms}).JSON(t, &role)
	_, c := f.e.CreateUser(strings.ToLower(name)+"@gale.test", access.LevelPartner, ten.PartnerID, "", role.ID)
	return c
}

// concurrently sends n copies of a request at once and counts the statuses.
func (f fixture) concurrently(n int, c apptest.Caller, method, path string, body any) map[int]int {
	var mu sync.Mutex
	var wg sync.WaitGroup
	counts := map[int]int{}
	for range n {
		wg.Go(func() {
			r := f.e.Do(c, method, path, body)
			mu.Lock()
			counts[r.Status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return counts
}

func (f fixture) runEvents(t *testing.T) {
	t.Helper()
	if err := f.e.App.Events.RunOnce(context.Background()); err != nil {
		t.Fatalf("run events: %v", err)
	}
}

func (f fixture) poll(t *testing.T) {
	t.Helper()
	if err := f.service().PollDue(context.Background()); err != nil {
		t.Fatalf("poll: %v", err)
	}
}
