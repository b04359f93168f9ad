package partnerapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"gale/internal/platform/access"
	"gale/internal/platform/config"
	"gale/internal/platform/secrets"
	"gale/internal/testkit/apptest"
)

// auditActions lists the actions of change entries about a resource, oldest first, with
// their actor types.
func (e *env) auditActions(resourceID string) (actions []string, actors []string) {
	e.t.Helper()
	rows, err := e.App.DB.SQL.Query(`SELECT action, actor_type FROM audit_logs WHERE resource_id = $1 AND category = 'change'
		ORDER BY id`, resourceID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var a, t string
		if err := rows.Scan(&a, &t); err != nil {
			e.t.Fatal(err)
		}
		actions, actors = append(actions, a), append(actors, t)
	}
	return actions, actors
}

func TestPrincipalAndKeyLifecycle(t *testing.T) {
	e := newEnv(t)
	pa := e.ten.Partner
	body := restricted("Provisioning", "organizations:write", "organizations:read")
	body["description"] = "the PSA's onboarding flow"
	body["rateLimit"] = 60
	body["sourceCidrs"] = []string{"127.0.0.1", "10.0.0.0/8", "2001:db8::/32", "10.0.0.0/8"}
	created := e.Must(http.StatusCreated, pa, "POST", mgmt, body).Map(t)
	id := created["id"].(string)
	if created["partnerId"] != e.ten.PartnerID || created["status"] != "active" || created["rateLimit"] != float64(60) ||
		created["description"] != "the PSA's onboarding flow" {
		t.Fatalf("created principal = %v", created)
	}
	if got := created["scopes"].([]any); len(got) != 2 || got[0] != "organizations:read" {
		t.Errorf("scopes = %v, want the two, sorted", got)
	}
	if got := created["sourceCidrs"].([]any); len(got) != 3 || got[0] != "127.0.0.1/32" || got[2] != "2001:db8::/32" {
		t.Errorf("sourceCidrs = %v, want canonical CIDRs without the duplicate", got)
	}
	if r := e.Do(pa, "POST", mgmt, restricted("provisioning")); r.Status != http.StatusConflict {
		t.Errorf("a second principal of the same name (any case) = %d, want 409", r.Status)
	}

	// Keys: the raw key is shown once and stored only as its hash.
	issued := e.Must(http.StatusCreated, pa, "POST", mgmt+"/"+id+"/keys", map[string]any{"name": "nightly", "rateLimit": 30}).Map(t)
	raw, keyID := issued["key"].(string), issued["id"].(string)
	if !strings.HasPrefix(raw, "svc_sp_") || len(raw) < 40 || issued["status"] != "active" || !strings.HasPrefix(raw, issued["prefix"].(string)) {
		t.Fatalf("issued key = %v", issued)
	}
	var list page
	e.Must(http.StatusOK, pa, "GET", mgmt+"/"+id+"/keys", nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0]["key"] != nil || strings.Contains(string(e.Must(200, pa, "GET", mgmt+"/"+id+"/keys", nil).Body), raw) {
		t.Fatalf("key list = %v; want one key without its raw value", list.Data)
	}
	if n := e.countRows(`SELECT COUNT(*) FROM service_principal_keys WHERE key_hash = $1`, secrets.Hash(raw)); n != 1 {
		t.Fatalf("%d keys stored under the hash of the raw key, want 1", n)
	}
	if n := e.countRows(`SELECT COUNT(*) FROM service_principal_keys WHERE key_hash = $1 OR key_prefix = $1`, raw); n != 0 {
		t.Fatal("the raw key is stored")
	}
	e.Must(http.StatusOK, apptest.Key(raw), "GET", papi+"/organizations", nil)

	// Update: the list reads it back; disabling stops the keys at once, enabling restores them.
	upd := e.Must(http.StatusOK, pa, "PATCH", mgmt+"/"+id, map[string]any{"scopes": []string{"organizations:read"},
		"sourceCidrs": []string{"127.0.0.0/8"}}).Map(t)
	if len(upd["scopes"].([]any)) != 1 || len(upd["sourceCidrs"].([]any)) != 1 {
		t.Fatalf("updated = %v", upd)
	}
	e.Must(http.StatusOK, pa, "PATCH", mgmt+"/"+id, map[string]any{"status": "disabled"})
	wantError(t, e.Do(apptest.Key(raw), "GET", papi+"/organizations", nil), http.StatusUnauthorized, "UNAUTHORIZED")
	e.Must(http.StatusOK, pa, "PATCH", mgmt+"/"+id, map[string]any{"status": "active"})
	e.Must(http.StatusOK, apptest.Key(raw), "GET", papi+"/organizations", nil)
	var all page
	e.Must(http.StatusOK, pa, "GET", mgmt, nil).JSON(t, &all)
	if len(all.Data) != 1 || all.Data[0]["id"] != id || all.Data[0]["status"] != "active" {
		t.Fatalf("principal list = %v", all.Data)
	}
	e.Must(http.StatusOK, pa, "GET", mgmt+"/"+id, nil)

	// Rotation: the old key stops at once, the new one works.
	rotated := e.Must(http.StatusOK, pa, "POST", mgmt+"/"+id+"/keys/"+keyID+"/rotate", nil).Map(t)
	newRaw := rotated["key"].(string)
	if newRaw == raw || rotated["id"] != keyID || rotated["rateLimit"] != float64(30) {
		t.Fatalf("rotated = %v", rotated)
	}
	wantError(t, e.Do(apptest.Key(raw), "GET", papi+"/organizations", nil), http.StatusUnauthorized, "UNAUTHORIZED")
	e.Must(http.StatusOK, apptest.Key(newRaw), "GET", papi+"/organizations", nil)

	// Revocation is final.
	e.Must(http.StatusNoContent, pa, "DELETE", mgmt+"/"+id+"/keys/"+keyID, nil)
	wantError(t, e.Do(apptest.Key(newRaw), "GET", papi+"/organizations", nil), http.StatusUnauthorized, "UNAUTHORIZED")
	if r := e.Do(pa, "DELETE", mgmt+"/"+id+"/keys/"+keyID, nil); r.Status != http.StatusConflict {
		t.Errorf("revoking a revoked key = %d, want 409", r.Status)
	}
	if r := e.Do(pa, "POST", mgmt+"/"+id+"/keys/"+keyID+"/rotate", nil); r.Status != http.StatusConflict {
		t.Errorf("rotating a revoked key = %d, want 409", r.Status)
	}

	// Every management write is in the audit log, by the user.
	actions, actors := e.auditActions(id)
	want := []string{"service_principal.create", "service_principal.key.create", "service_principal.update",
		"service_principal.update", "service_principal.update", "service_principal.key.rotate", "service_principal.key.revoke"}
	if !slices.Equal(actions, want) {
		t.Errorf("audit actions = %v, want %v", actions, want)
	}
	for _, a := range actors {
		if a != string(access.ActorUser) {
			t.Errorf("management entry by %s, want user", a)
		}
	}
	logs := string(e.Must(http.StatusOK, pa, "GET", "/api/v1/audit/logs?resourceId="+id, nil).Body)
	if strings.Contains(logs, raw) || strings.Contains(logs, newRaw) || strings.Contains(logs, secrets.Hash(newRaw)) {
		t.Error("the audit log holds a raw key or its hash")
	}
}

func TestPrincipalValidation(t *testing.T) {
	e := newEnv(t)
	pa := e.ten.Partner
	cases := map[string]map[string]any{
		"unknown scope":  {"name": "x", "scopes": []string{"devices:write"}},
		"no scope":       {"name": "x", "scopes": []string{}},
		"bad CIDR":       {"name": "x", "scopes": []string{"devices:read"}, "sourceCidrs": []string{"10.0.0.0/33"}},
		"not an address": {"name": "x", "scopes": []string{"devices:read"}, "sourceCidrs": []string{"office"}},
		"past expiry":    {"name": "x", "scopes": []string{"devices:read"}, "expiresAt": time.Now().Add(-time.Minute).UTC()},
		"rate limit":     {"name": "x", "scopes": []string{"devices:read"}, "rateLimit": 10001},
		"blank name":     {"name": "  ", "scopes": []string{"devices:read"}},
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			wantError(t, e.Do(pa, "POST", mgmt, body), http.StatusBadRequest, "VALIDATION_ERROR")
		})
	}
	p := e.full("Valid")
	wantError(t, e.Do(pa, "POST", mgmt+"/"+p.ID+"/keys", map[string]any{"name": "k", "rateLimit": 0}), http.StatusBadRequest, "VALIDATION_ERROR")
	wantError(t, e.Do(pa, "PATCH", mgmt+"/"+p.ID, map[string]any{"status": "expired"}), http.StatusBadRequest, "VALIDATION_ERROR")
}

// Principals are managed by signed-in partner users who reach every organization and hold
// the scopes they hand on; other partners, organization users and API keys cannot.
func TestWhoManagesPrincipals(t *testing.T) {
	e := newEnv(t)
	p := e.full("Alpha sync")
	beta := e.NewTenant(e.admin, "Beta")
	if r := e.Do(beta.Partner, "GET", mgmt+"/"+p.ID, nil); r.Status != http.StatusNotFound {
		t.Errorf("another partner reading the principal = %d, want 404", r.Status)
	}
	if r := e.Do(beta.Partner, "POST", mgmt+"/"+p.ID+"/keys", map[string]any{"name": "k"}); r.Status != http.StatusNotFound {
		t.Errorf("another partner minting a key = %d, want 404", r.Status)
	}
	if l := e.page(beta.Partner, mgmt); len(l.Data) != 0 {
		t.Errorf("another partner lists %v", l.Data)
	}
	if r := e.Do(e.ten.Org, "POST", mgmt, restricted("Org")); r.Status != http.StatusForbidden {
		t.Errorf("an organization user creating a principal = %d, want 403", r.Status)
	}
	if r := e.Do(e.admin, "POST", mgmt, restricted("System")); r.Status != http.StatusForbidden {
		t.Errorf("a system administrator creating a principal = %d, want 403 (principals belong to a partner)", r.Status)
	}
	// A partner user limited to selected organizations would hand out a reach it lacks.
	limitedID, limited := e.CreateUser("limited@gale.test", access.LevelPartner, e.ten.PartnerID, "", "")
	e.exec(`UPDATE users SET org_access = 'selected' WHERE id = $1`, limitedID)
	if r := e.Do(limited, "POST", mgmt, restricted("Limited")); r.Status != http.StatusForbidden {
		t.Errorf("a partner user with selected organizations = %d %s, want 403", r.Status, r.Body)
	}
	// A custom role that may manage principals but holds only devices:read hands on only that.
	role := e.Must(http.StatusCreated, e.ten.Partner, "POST", "/api/v1/roles", map[string]any{"name": "Integrations", "scope": "partner",
		"permissions": []string{"service-principals:read", "service-principals:write", "devices:read"}}).Map(t)
	_, integrator := e.CreateUser("integrator@gale.test", access.LevelPartner, e.ten.PartnerID, "", role["id"].(string))
	e.Must(http.StatusCreated, integrator, "POST", mgmt, map[string]any{"name": "Reader", "scopes": []string{"devices:read"}})
	if r := e.Do(integrator, "POST", mgmt, map[string]any{"name": "Writer", "scopes": []string{"organizations:write"}}); r.Status != http.StatusForbidden {
		t.Errorf("handing on a scope the creator lacks = %d, want 403", r.Status)
	}
	if r := e.Do(integrator, "POST", mgmt+"/"+p.ID+"/keys", map[string]any{"name": "k"}); r.Status != http.StatusForbidden {
		t.Errorf("minting a key of a principal with more scopes than the caller = %d, want 403", r.Status)
	}
	// A user API key may read principals but not create them: that is a human action.
	gk := e.Must(http.StatusCreated, e.ten.Partner, "POST", "/api/v1/api-keys", map[string]any{"name": "ci",
		"permissions": []string{"service-principals:read", "service-principals:write"}}).Map(t)["key"].(string)
	e.Must(http.StatusOK, apptest.Key(gk), "GET", mgmt, nil)
	if r := e.Do(apptest.Key(gk), "POST", mgmt, restricted("By key")); r.Status != http.StatusForbidden {
		t.Errorf("an API key creating a principal = %d, want 403", r.Status)
	}
	if r := e.Do(apptest.Key(gk), "POST", mgmt+"/"+p.ID+"/keys", map[string]any{"name": "k"}); r.Status != http.StatusForbidden {
		t.Errorf("an API key creating a principal key = %d, want 403", r.Status)
	}
	// A service principal key does not work on the management routes.
	if r := e.Do(p.Caller, "GET", mgmt, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("a service principal key on the main API = %d, want 401", r.Status)
	}
}

// With ENABLE_2FA, creating, changing, and issuing, rotating or revoking keys of principals
// needs an MFA-completed session.
func TestManagementIsMFAGated(t *testing.T) {
	e := &env{Env: apptest.New(t, func(c *config.Config) { c.Enable2FA = true }), t: t}
	partnerID := e.CreatePartnerDirect()
	_, pa := e.CreateUser("mfa-partner@gale.test", access.LevelPartner, partnerID, "", "")
	gated := func(method, path string, body any) {
		t.Helper()
		r := e.Do(pa, method, path, body)
		if r.Status != http.StatusForbidden || r.ErrorCode() != "MFA_REQUIRED" || !strings.Contains(string(r.Body), "MFA required") {
			t.Errorf("%s %s without MFA = %d %s, want 403 MFA required", method, path, r.Status, r.Body)
		}
	}
	gated("POST", mgmt, restricted("Gated"))
	e.Must(http.StatusOK, pa, "GET", mgmt, nil) // reads are not gated

	// Complete MFA (enable, then step up) and create the principal and its key.
	var setup struct {
		Secret string `json:"secret"`
	}
	e.Must(http.StatusOK, pa, "POST", "/api/v1/auth/mfa/setup", map[string]string{"currentPassword": apptest.UserPassword}).JSON(t, &setup)
	code := func(at time.Time) string {
		c, err := totp.GenerateCode(setup.Secret, at)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	e.Must(http.StatusOK, pa, "POST", "/api/v1/auth/mfa/enable", map[string]string{"code": code(time.Now()),
		"currentPassword": apptest.UserPassword})
	var up struct {
		AccessToken string `json:"accessToken"`
	}
	e.Must(http.StatusOK, pa, "POST", "/api/v1/auth/mfa/step-up", map[string]string{"code": code(time.Now().Add(30 * time.Second))}).JSON(t, &up)
	mfa := apptest.Bearer(up.AccessToken)
	p := e.newPrincipal(mfa, restricted("Gated"))

	gated("PATCH", mgmt+"/"+p.ID, map[string]any{"status": "disabled"})
	gated("POST", mgmt+"/"+p.ID+"/keys", map[string]any{"name": "k"})
	gated("POST", mgmt+"/"+p.ID+"/keys/"+p.KeyID+"/rotate", nil)
	gated("DELETE", mgmt+"/"+p.ID+"/keys/"+p.KeyID, nil)
	// The principal itself is not MFA-gated.
	e.Must(http.StatusCreated, p.Caller, "POST", papi+"/organizations", map[string]any{"name": "No MFA", "slug": "no-mfa"})
	e.Must(http.StatusNoContent, mfa, "DELETE", mgmt+"/"+p.ID+"/keys/"+p.KeyID, nil)
}
