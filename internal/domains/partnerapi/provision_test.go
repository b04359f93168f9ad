package partnerapi_test

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/partnerapi"

	"gale/internal/platform/config"
	"gale/internal/testkit/apptest"
)

// Rule 1: the surface is create-only. DELETE is 405 in the envelope on every route, and the
// OpenAPI document has no DELETE under /partner-api.
func TestNoDeleteRoutes(t *testing.T) {
	e := newEnv(t)
	p := e.full("Deleter")
	for _, path := range []string{"/organizations", "/sites", "/enrollment-keys", "/devices", "/custom-fields"} {
		r := e.Do(p.Caller, "DELETE", papi+path, nil)
		wantError(t, r, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
		if allow := r.Header.Get("Allow"); strings.Contains(allow, "DELETE") || allow == "" {
			t.Errorf("DELETE %s: Allow = %q", path, allow)
		}
	}
	wantError(t, e.Do(p.Caller, "DELETE", papi+"/organizations/"+e.ten.OrgID, nil), http.StatusNotFound, "NOT_FOUND")
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	e.Must(http.StatusOK, apptest.Anonymous, "GET", "/api/v1/openapi.json", nil).JSON(t, &doc)
	n := 0
	for path, ops := range doc.Paths {
		if !strings.HasPrefix(path, "/partner-api/") {
			continue
		}
		n += len(ops)
		for method := range ops {
			if method != "get" && method != "post" {
				t.Errorf("%s %s is documented; the partner API is create-only", method, path)
			}
		}
	}
	if n != 16 {
		t.Errorf("%d partner API operations documented, want the 16 of the spec", n)
	}
	if e.Do(p.Caller, "GET", papi+"/organizations", nil).Status != http.StatusOK {
		t.Fatal("the organization is gone")
	}
}

// Rule 2: maxOrganizations holds when 20 creates race for the last slot.
func TestOrgLimitUnderConcurrentCreates(t *testing.T) {
	e := newEnv(t)
	p := e.full("Onboarding")
	e.Must(http.StatusOK, e.admin, "PATCH", "/api/v1/orgs/partners/"+e.ten.PartnerID, map[string]any{"maxOrganizations": 2})
	const n = 20
	statuses := make([]*apptest.Response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			statuses[i] = e.Do(p.Caller, "POST", papi+"/organizations", map[string]any{"name": fmt.Sprintf("Racer %d", i),
				"slug": fmt.Sprintf("racer-%d", i)})
		}()
	}
	close(start)
	wg.Wait()
	created := 0
	for _, r := range statuses {
		switch {
		case r.Status == http.StatusCreated:
			created++
		case r.Status == http.StatusConflict && r.ErrorCode() == "partner_provisioning_org_limit_reached":
			if r.Header.Get("Retry-After") != "" {
				t.Errorf("the org limit carries Retry-After; it is not retryable")
			}
		default:
			t.Errorf("racing create = %d %s", r.Status, r.Body)
		}
	}
	if created != 1 {
		t.Fatalf("%d creates succeeded, want exactly 1", created)
	}
	if got := e.Must(http.StatusOK, e.admin, "GET", "/api/v1/orgs/partners/"+e.ten.PartnerID, nil).Map(t)["organizationCount"]; got != float64(2) {
		t.Errorf("organizationCount = %v, want 2", got)
	}
	if n := e.countRows(`SELECT COUNT(*) FROM organizations WHERE partner_id = $1`, e.ten.PartnerID); n != 2 {
		t.Errorf("%d organizations, want 2", n)
	}
	wantError(t, e.Do(p.Caller, "POST", papi+"/organizations", map[string]any{"name": "Late", "slug": "late"}),
		http.StatusConflict, "partner_provisioning_org_limit_reached")
}

func TestCreateOrganization(t *testing.T) {
	e := newEnv(t)
	p := e.full("Onboarding")
	o := e.Must(http.StatusCreated, p.Caller, "POST", papi+"/organizations", map[string]any{"name": "Contoso",
		"slug": "contoso", "type": "msp-customer", "status": "trial"}).Map(t)
	if o["partnerId"] != e.ten.PartnerID || o["slug"] != "contoso" || o["status"] != "trial" || o["type"] != "msp-customer" {
		t.Fatalf("created = %v", o)
	}
	if n := e.countRows(`SELECT COUNT(*) FROM sites WHERE org_id = $1`, o["id"]); n != 0 {
		t.Errorf("%d sites created with the organization, want none", n)
	}
	wantError(t, e.Do(p.Caller, "POST", papi+"/organizations", map[string]any{"name": "Contoso again", "slug": "contoso"}),
		http.StatusConflict, "partner_provisioning_slug_conflict")
	for name, body := range map[string]map[string]any{
		"partnerId":        {"name": "X", "slug": "x", "partnerId": e.ten.PartnerID},
		"status suspended": {"name": "X", "slug": "x", "status": "suspended"},
		"status churned":   {"name": "X", "slug": "x", "status": "churned"},
		"slug missing":     {"name": "X"},
		"slug malformed":   {"name": "X", "slug": "Not A Slug"},
		"name missing":     {"slug": "x"},
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, e.Do(p.Caller, "POST", papi+"/organizations", body), http.StatusBadRequest, "VALIDATION_ERROR")
		})
	}
	if r := e.Do(p.Caller, "POST", papi+"/organizations", map[string]any{"name": "X", "slug": "x", "partnerId": e.ten.PartnerID}); !strings.Contains(string(r.Body), "partnerId") {
		t.Errorf("refusal of partnerId does not name it: %s", r.Body)
	}
}

// Rule 3: a site for an organization outside the principal's reach is 403.
func TestCreateSite(t *testing.T) {
	e := newEnv(t)
	p := e.full("Onboarding")
	st := e.Must(http.StatusCreated, p.Caller, "POST", papi+"/sites", map[string]any{"orgId": e.ten.OrgID, "name": "Berlin",
		"timezone": "Europe/Berlin", "address": map[string]any{"city": "Berlin"}, "contact": map[string]any{"name": "Ada"}}).Map(t)
	if st["orgId"] != e.ten.OrgID || st["siteId"] != st["id"] || st["name"] != "Berlin" || st["timezone"] != "Europe/Berlin" {
		t.Fatalf("site = %v", st)
	}
	beta := e.NewTenant(e.admin, "Beta")
	deleted := e.CreateOrg(e.ten.Partner, "", "Gone")
	e.Must(http.StatusNoContent, e.ten.Partner, "DELETE", "/api/v1/orgs/organizations/"+deleted, nil)
	for name, orgID := range map[string]string{"another partner's": beta.OrgID, "deleted": deleted,
		"unknown": "0190f5d2-0000-7000-8000-000000000000"} {
		t.Run(name, func(t *testing.T) {
			wantError(t, e.Do(p.Caller, "POST", papi+"/sites", map[string]any{"orgId": orgID, "name": "Nope"}), http.StatusForbidden, "FORBIDDEN")
		})
	}
	if n := e.countRows(`SELECT COUNT(*) FROM sites WHERE name = 'Nope'`); n != 0 {
		t.Errorf("%d refused sites were created", n)
	}
	wantError(t, e.Do(p.Caller, "POST", papi+"/sites", map[string]any{"orgId": e.ten.OrgID, "name": "Bad tz", "timezone": "Mars/Base"}),
		http.StatusBadRequest, "VALIDATION_ERROR")
	wantError(t, e.Do(p.Caller, "POST", papi+"/sites", map[string]any{"orgId": e.ten.OrgID, "name": "X", "partnerId": e.ten.PartnerID}),
		http.StatusBadRequest, "VALIDATION_ERROR")
}

// Rule 4: minting needs a principal with an expiry and a source-CIDR allowlist.
func TestMintingNeedsRestrictions(t *testing.T) {
	e := newEnv(t)
	key := map[string]any{"orgId": e.ten.OrgID, "name": "laptop"}
	noExpiry := restricted("No expiry")
	delete(noExpiry, "expiresAt")
	noCIDRs := restricted("No CIDRs")
	delete(noCIDRs, "sourceCidrs")
	for name, body := range map[string]map[string]any{"no expiry": noExpiry, "no allowlist": noCIDRs} {
		t.Run(name, func(t *testing.T) {
			p := e.newPrincipal(e.ten.Partner, body)
			wantError(t, e.Do(p.Caller, "POST", papi+"/enrollment-keys", key), http.StatusForbidden,
				"partner_provisioning_principal_restrictions_required")
			e.Must(http.StatusCreated, p.Caller, "POST", papi+"/sites", map[string]any{"orgId": e.ten.OrgID, "name": name})
		})
	}
	if n := e.countRows(`SELECT COUNT(*) FROM enrollment_keys WHERE source = 'partner_api'`); n != 0 {
		t.Fatalf("%d keys minted by unrestricted principals", n)
	}
	p := e.full("Restricted")
	k := e.Must(http.StatusCreated, p.Caller, "POST", papi+"/enrollment-keys", map[string]any{"orgId": e.ten.OrgID,
		"name": "laptop", "siteId": e.ten.SiteID, "maxUsage": 5, "issueEnrollmentSecret": true}).Map(t)
	if len(k["key"].(string)) != 64 || k["enrollmentSecret"] == "" || k["source"] != "partner_api" || k["createdBy"] != p.ID ||
		k["siteId"] != e.ten.SiteID || k["maxUsage"] != float64(5) || k["partnerId"] != e.ten.PartnerID {
		t.Fatalf("minted = %v", k)
	}
	beta := e.NewTenant(e.admin, "Beta")
	wantError(t, e.Do(p.Caller, "POST", papi+"/enrollment-keys", map[string]any{"orgId": beta.OrgID, "name": "x"}),
		http.StatusForbidden, "FORBIDDEN")
	wantError(t, e.Do(p.Caller, "POST", papi+"/enrollment-keys", map[string]any{"orgId": e.ten.OrgID, "name": "x",
		"partnerId": e.ten.PartnerID}), http.StatusBadRequest, "VALIDATION_ERROR")
	wantError(t, e.Do(p.Caller, "POST", papi+"/enrollment-keys", map[string]any{"orgId": e.ten.OrgID, "name": "x",
		"ttlMinutes": 60, "expiresAt": time.Now().Add(time.Hour).UTC()}), http.StatusBadRequest, "VALIDATION_ERROR")
	wantError(t, e.Do(p.Caller, "POST", papi+"/enrollment-keys", map[string]any{"orgId": e.ten.OrgID, "name": "x",
		"maxUsage": 100001}), http.StatusBadRequest, "VALIDATION_ERROR")
}

// Rule 5: the default lifetime is the one of keys made by hand, clamped by
// PARTNER_API_ENROLLMENT_KEY_MAX_TTL_MINUTES and by the organization's own cap.
func TestMintedKeyLifetime(t *testing.T) {
	expiresIn := func(t *testing.T, k map[string]any) time.Duration {
		t.Helper()
		at, err := time.Parse(time.RFC3339, k["expiresAt"].(string))
		if err != nil {
			t.Fatal(err)
		}
		return time.Until(at)
	}
	near := func(t *testing.T, got, want time.Duration) {
		t.Helper()
		if got < want-time.Minute || got > want+time.Minute {
			t.Errorf("key lives %s, want about %s", got.Round(time.Second), want)
		}
	}
	t.Run("default", func(t *testing.T) {
		e := newEnv(t, func(c *config.Config) { c.PartnerAPIEnrollmentKeyDefaultTTL = 3 * time.Hour })
		p := e.full("Keys")
		near(t, expiresIn(t, e.Must(201, p.Caller, "POST", papi+"/enrollment-keys", map[string]any{"orgId": e.ten.OrgID, "name": "a"}).Map(t)), 3*time.Hour)
		near(t, expiresIn(t, e.Must(201, p.Caller, "POST", papi+"/enrollment-keys", map[string]any{"orgId": e.ten.OrgID, "name": "b",
			"ttlMinutes": 30}).Map(t)), 30*time.Minute)
	})
	t.Run("clamped by the partner API cap", func(t *testing.T) {
		e := newEnv(t, func(c *config.Config) {
			c.PartnerAPIEnrollmentKeyDefaultTTL, c.PartnerAPIEnrollmentKeyMaxTTL = 30*24*time.Hour, 2*time.Hour
		})
		p := e.full("Keys")
		near(t, expiresIn(t, e.Must(201, p.Caller, "POST", papi+"/enrollment-keys", map[string]any{"orgId": e.ten.OrgID, "name": "a"}).Map(t)), 2*time.Hour)
		r := e.Do(p.Caller, "POST", papi+"/enrollment-keys", map[string]any{"orgId": e.ten.OrgID, "name": "b", "ttlMinutes": 180})
		wantError(t, r, http.StatusBadRequest, "VALIDATION_ERROR")
		if !strings.Contains(string(r.Body), "at most 120 minutes") {
			t.Errorf("refusal does not name the cap: %s", r.Body)
		}
		// The main API is not bound by the partner API's cap.
		e.Must(201, e.ten.Partner, "POST", "/api/v1/enrollment-keys", map[string]any{"orgId": e.ten.OrgID, "name": "c", "ttlMinutes": 180})
	})
	t.Run("clamped by the organization's cap", func(t *testing.T) {
		e := newEnv(t, func(c *config.Config) { c.PartnerAPIEnrollmentKeyDefaultTTL = 30 * 24 * time.Hour })
		e.Must(http.StatusOK, e.ten.Partner, "PATCH", "/api/v1/orgs/organizations/"+e.ten.OrgID, map[string]any{"maxEnrollmentKeyTtlMinutes": 45})
		p := e.full("Keys")
		near(t, expiresIn(t, e.Must(201, p.Caller, "POST", papi+"/enrollment-keys", map[string]any{"orgId": e.ten.OrgID, "name": "a"}).Map(t)), 45*time.Minute)
		wantError(t, e.Do(p.Caller, "POST", papi+"/enrollment-keys", map[string]any{"orgId": e.ten.OrgID, "name": "b",
			"expiresAt": time.Now().Add(2 * time.Hour).UTC()}), http.StatusBadRequest, "VALIDATION_ERROR")
	})
}

func TestIdempotentKeyCreation(t *testing.T) {
	e := newEnv(t)
	p := e.full("Keys")
	withKey := func(k string) apptest.Caller {
		c := p.Caller
		c.Header = http.Header{"X-Idempotency-Key": {k}}
		return c
	}
	body := map[string]any{"orgId": e.ten.OrgID, "name": "onboarding", "issueEnrollmentSecret": true}
	first := e.Must(http.StatusCreated, withKey("onboard-1"), "POST", papi+"/enrollment-keys", body)
	again := e.Must(http.StatusCreated, withKey("onboard-1"), "POST", papi+"/enrollment-keys",
		map[string]any{"issueEnrollmentSecret": true, "name": "onboarding", "orgId": e.ten.OrgID})
	if string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" ||
		first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("replay = %s (%v), want the first answer %s", again.Body, again.Header, first.Body)
	}
	minted := func() int {
		return e.countRows(`SELECT COUNT(*) FROM enrollment_keys WHERE source = 'partner_api'`)
	}
	if minted() != 1 {
		t.Fatalf("%d keys minted, want 1", minted())
	}
	// The stored answer holds the raw key, so it is sealed.
	if n := e.countRows(`SELECT COUNT(*) FROM partner_api_idempotency WHERE response LIKE $1`,
		"%"+decode(t, first.Body)["key"].(string)+"%"); n != 0 {
		t.Error("the idempotency record holds the raw key in the clear")
	}
	// The same key with another body is refused; another key mints anew.
	r := e.Do(withKey("onboard-1"), "POST", papi+"/enrollment-keys", map[string]any{"orgId": e.ten.OrgID, "name": "other"})
	wantError(t, r, http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED")
	e.Must(http.StatusCreated, withKey("onboard-2"), "POST", papi+"/enrollment-keys", body)
	if minted() != 2 {
		t.Fatalf("%d keys minted, want 2", minted())
	}
	// Keys are per principal: another principal's same key is its own.
	other := e.full("Other keys")
	oc := other.Caller
	oc.Header = http.Header{"X-Idempotency-Key": {"onboard-1"}}
	if got := e.Must(http.StatusCreated, oc, "POST", papi+"/enrollment-keys", body).Header.Get("Idempotent-Replayed"); got != "" {
		t.Error("another principal's request replayed this principal's answer")
	}
	// A refused request is not remembered: the key stays usable.
	wantError(t, e.Do(withKey("onboard-3"), "POST", papi+"/enrollment-keys", map[string]any{"orgId": e.ten.OrgID, "name": "x",
		"siteId": "0190f5d2-0000-7000-8000-000000000000"}), http.StatusBadRequest, "VALIDATION_ERROR")
	e.Must(http.StatusCreated, withKey("onboard-3"), "POST", papi+"/enrollment-keys", body)
	// Concurrent duplicates mint once and all get the same answer.
	const n = 8
	answers := make([]*apptest.Response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = e.Do(withKey("burst"), "POST", papi+"/enrollment-keys", body)
		}()
	}
	wg.Wait()
	before := minted()
	for _, a := range answers {
		if a.Status != http.StatusCreated || string(a.Body) != string(answers[0].Body) {
			t.Fatalf("concurrent duplicate = %d %s, want 201 %s", a.Status, a.Body, answers[0].Body)
		}
	}
	if n := e.countRows(`SELECT COUNT(*) FROM enrollment_keys WHERE id = $1`, decode(t, answers[0].Body)["id"]); n != 1 {
		t.Fatal("the concurrent answer names no stored key")
	}
	// 4 distinct mints so far (onboard-1, onboard-2, other principal's, onboard-3) plus one burst.
	if before != 5 {
		t.Fatalf("%d keys minted after the burst, want 5", before)
	}
	// After the 24-hour window the key mints anew.
	e.advance(25 * time.Hour)
	late := e.Must(http.StatusCreated, withKey("onboard-1"), "POST", papi+"/enrollment-keys", body)
	if late.Header.Get("Idempotent-Replayed") != "" || decode(t, late.Body)["id"] == decode(t, first.Body)["id"] {
		t.Fatal("an idempotency key replayed after its window")
	}
	if n, err := app.Service[*partnerapi.Service](e.App).Purge(t.Context()); err != nil || n == 0 {
		t.Errorf("Purge = %d, %v; want the expired records gone", n, err)
	}
}

// Rule 6: every write is attributed to the principal in the audit log.
func TestWritesAreAttributedToThePrincipal(t *testing.T) {
	e := newEnv(t)
	p := e.full("Auditor")
	org := e.Must(201, p.Caller, "POST", papi+"/organizations", map[string]any{"name": "Audited", "slug": "audited"}).Map(t)["id"].(string)
	site := e.Must(201, p.Caller, "POST", papi+"/sites", map[string]any{"orgId": org, "name": "HQ"}).Map(t)["id"].(string)
	key := e.Must(201, p.Caller, "POST", papi+"/enrollment-keys", map[string]any{"orgId": org, "name": "k"}).Map(t)["id"].(string)
	var logs page
	e.Must(http.StatusOK, e.ten.Partner, "GET", "/api/v1/audit/logs?actorType=service_principal&limit=100", nil).JSON(t, &logs)
	got := map[string]string{}
	for _, l := range logs.Data {
		if l["category"] != "change" {
			continue
		}
		if l["actorId"] != p.ID || l["actorType"] != "service_principal" || l["ip"] == nil || l["requestId"] == nil {
			t.Errorf("entry %v is not attributed to the principal", l)
		}
		got[l["action"].(string)] = l["resourceId"].(string)
	}
	want := map[string]string{"organization.create": org, "site.create": site, "enrollment_key.create": key}
	for action, id := range want {
		if got[action] != id {
			t.Errorf("audit %s = %q, want %s (entries %v)", action, got[action], id, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("change entries by the principal: %v, want %v", slices.Sorted(maps.Keys(got)), want)
	}
}
