package partnerapi_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"gale/internal/testkit/apptest"
)

// rateHeaders reads X-RateLimit-* of an answer.
func rateHeaders(t *testing.T, r *apptest.Response) (limit, remaining int, reset time.Time) {
	t.Helper()
	var err error
	if limit, err = strconv.Atoi(r.Header.Get("X-RateLimit-Limit")); err != nil {
		t.Fatalf("X-RateLimit-Limit = %q (%d %s)", r.Header.Get("X-RateLimit-Limit"), r.Status, r.Body)
	}
	if remaining, err = strconv.Atoi(r.Header.Get("X-RateLimit-Remaining")); err != nil {
		t.Fatalf("X-RateLimit-Remaining = %q", r.Header.Get("X-RateLimit-Remaining"))
	}
	sec, err := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil {
		t.Fatalf("X-RateLimit-Reset = %q", r.Header.Get("X-RateLimit-Reset"))
	}
	return limit, remaining, time.Unix(sec, 0)
}

// limited fails unless r is 429 with Retry-After (within the hour) and X-RateLimit-Remaining 0,
// naming what was spent.
func limited(t *testing.T, r *apptest.Response, what string) {
	t.Helper()
	wantError(t, r, http.StatusTooManyRequests, "RATE_LIMITED")
	after, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || after < 1 || after > 3600 {
		t.Errorf("Retry-After = %q, want 1 to 3600 seconds", r.Header.Get("Retry-After"))
	}
	if _, remaining, _ := rateHeaders(t, r); remaining != 0 {
		t.Errorf("X-RateLimit-Remaining on 429 = %d, want 0", remaining)
	}
	if !strings.Contains(string(r.Body), what) {
		t.Errorf("429 %s does not mention %q", r.Body, what)
	}
}

func site(i int, orgID string) map[string]any {
	return map[string]any{"orgId": orgID, "name": fmt.Sprintf("Site %03d", i)}
}

// Writes: 120 per hour per principal, counted in the database; mints have budgets of their
// own; the window ends after an hour.
func TestWriteBudget(t *testing.T) {
	e := newEnv(t)
	p := e.full("Busy")
	for i := 1; i <= 120; i++ {
		r := e.Must(http.StatusCreated, p.Caller, "POST", papi+"/sites", site(i, e.ten.OrgID))
		if limit, remaining, reset := rateHeaders(t, r); limit != 120 || remaining != 120-i || time.Until(reset) > time.Hour+time.Minute {
			t.Fatalf("write %d: X-RateLimit %d/%d reset %s", i, limit, remaining, reset)
		}
	}
	limited(t, e.Do(p.Caller, "POST", papi+"/sites", site(121, e.ten.OrgID)), "120 writes per hour")
	limited(t, e.Do(p.Caller, "POST", papi+"/organizations", map[string]any{"name": "X", "slug": "x"}), "120 writes per hour")
	if n := e.countRows(`SELECT COUNT(*) FROM sites WHERE org_id = $1`, e.ten.OrgID); n != 121 {
		t.Fatalf("%d sites, want the default one and 120", n)
	}
	// Reads are not limited, and report the write budget.
	r := e.Must(http.StatusOK, p.Caller, "GET", papi+"/sites?limit=1", nil)
	if limit, remaining, _ := rateHeaders(t, r); limit != 120 || remaining != 0 {
		t.Errorf("read while spent: X-RateLimit %d/%d, want 120/0", limit, remaining)
	}
	// Mints are counted apart from writes.
	k := e.Must(http.StatusCreated, p.Caller, "POST", papi+"/enrollment-keys", map[string]any{"orgId": e.ten.OrgID, "name": "k"})
	if limit, remaining, _ := rateHeaders(t, k); limit != 10 || remaining != 9 {
		t.Errorf("mint: X-RateLimit %d/%d, want 10/9", limit, remaining)
	}
	// Another principal of the partner has its own budget.
	e.Must(http.StatusCreated, e.full("Quiet").Caller, "POST", papi+"/sites", site(200, e.ten.OrgID))
	// The budget is held in the database: a second node refuses too.
	second := e.SecondNode()
	if r := second.Do(p.Caller, "POST", papi+"/sites", site(122, e.ten.OrgID)); r.Status != http.StatusTooManyRequests {
		t.Errorf("second node = %d, want 429", r.Status)
	}
	// An hour later the budget is back. (Only the first node's clock moves; the second
	// node keeps real time and still refuses.)
	e.advance(61 * time.Minute)
	r = e.Must(http.StatusCreated, p.Caller, "POST", papi+"/sites", site(122, e.ten.OrgID))
	if _, remaining, _ := rateHeaders(t, r); remaining != 119 {
		t.Errorf("first write of the next window leaves %d, want 119", remaining)
	}
}

// The key's own limit and the principal's own limit apply when smaller than 120.
func TestOwnLimits(t *testing.T) {
	e := newEnv(t)
	p := e.newPrincipal(e.ten.Partner, restricted("Throttled"), map[string]any{"name": "slow", "rateLimit": 3})
	for i := range 3 {
		r := e.Must(http.StatusCreated, p.Caller, "POST", papi+"/sites", site(i, e.ten.OrgID))
		if limit, remaining, _ := rateHeaders(t, r); limit != 3 || remaining != 2-i {
			t.Errorf("write %d: X-RateLimit %d/%d, want 3/%d", i, limit, remaining, 2-i)
		}
	}
	limited(t, e.Do(p.Caller, "POST", papi+"/sites", site(3, e.ten.OrgID)), "the key's own limit of 3")
	// Another key of the same principal draws on the principal's budget only.
	fast := e.Must(http.StatusCreated, e.ten.Partner, "POST", mgmt+"/"+p.ID+"/keys", map[string]any{"name": "fast"}).Map(t)["key"].(string)
	r := e.Must(http.StatusCreated, apptest.Key(fast), "POST", papi+"/sites", site(4, e.ten.OrgID))
	if limit, remaining, _ := rateHeaders(t, r); limit != 120 || remaining != 116 {
		t.Errorf("other key: X-RateLimit %d/%d, want 120/116", limit, remaining)
	}
	// The principal's own limit, once lowered, binds every key.
	e.Must(http.StatusOK, e.ten.Partner, "PATCH", mgmt+"/"+p.ID, map[string]any{"rateLimit": 4})
	limited(t, e.Do(apptest.Key(fast), "POST", papi+"/sites", site(5, e.ten.OrgID)), "the service principal's own limit of 4")
}

// Mints: 10 per hour per principal and 100 per hour per partner, apart from the write budget.
func TestMintBudgets(t *testing.T) {
	e := newEnv(t)
	key := map[string]any{"orgId": e.ten.OrgID, "name": "k"}
	principals := make([]principal, 11)
	for i := range principals {
		principals[i] = e.full(fmt.Sprintf("Minter %02d", i))
	}
	first := principals[0]
	for range 10 {
		e.Must(http.StatusCreated, first.Caller, "POST", papi+"/enrollment-keys", key)
	}
	limited(t, e.Do(first.Caller, "POST", papi+"/enrollment-keys", key), "10 enrollment keys per hour per service principal")
	// Writes are a separate budget, untouched by mints.
	r := e.Must(http.StatusCreated, first.Caller, "POST", papi+"/sites", site(1, e.ten.OrgID))
	if _, remaining, _ := rateHeaders(t, r); remaining != 119 {
		t.Errorf("write after 10 mints leaves %d of the write budget, want 119", remaining)
	}
	// Nine more principals bring the partner to 100.
	for _, p := range principals[1:10] {
		for range 10 {
			e.Must(http.StatusCreated, p.Caller, "POST", papi+"/enrollment-keys", key)
		}
	}
	limited(t, e.Do(principals[10].Caller, "POST", papi+"/enrollment-keys", key), "100 enrollment keys per hour per partner")
	if n := e.countRows(`SELECT COUNT(*) FROM enrollment_keys WHERE partner_id = $1 AND source = 'partner_api'`, e.ten.PartnerID); n != 100 {
		t.Fatalf("%d keys minted, want 100", n)
	}
	// Another partner's principals are not limited by this partner's mints.
	beta := e.NewTenant(e.admin, "Beta")
	b := e.newPrincipal(beta.Partner, restricted("Beta minter"))
	e.Must(http.StatusCreated, b.Caller, "POST", papi+"/enrollment-keys", map[string]any{"orgId": beta.OrgID, "name": "k"})
	// An hour later both budgets are back.
	e.advance(time.Hour + time.Minute)
	e.Must(http.StatusCreated, principals[10].Caller, "POST", papi+"/enrollment-keys", key)
	e.Must(http.StatusCreated, first.Caller, "POST", papi+"/enrollment-keys", key)
}
