package partnerapi_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"gale/internal/platform/config"
	"gale/internal/testkit/apptest"
)

// refused fails unless the request is refused with status and a message containing want.
func refused(t *testing.T, r *apptest.Response, status int, want string) {
	t.Helper()
	if r.Status != status || !strings.Contains(string(r.Body), want) {
		t.Fatalf("got %d %s, want %d mentioning %q", r.Status, r.Body, status, want)
	}
}

func TestAuthenticationRefusals(t *testing.T) {
	e := newEnv(t)
	orgs := papi + "/organizations"
	ok := e.full("Good")
	e.Must(http.StatusOK, ok.Caller, "GET", orgs, nil)

	t.Run("unknown key", func(t *testing.T) {
		refused(t, e.Do(apptest.Key("svc_sp_"+strings.Repeat("x", 43)), "GET", orgs, nil), 401, "invalid service-principal key")
	})
	t.Run("no credential", func(t *testing.T) {
		refused(t, e.Do(apptest.Anonymous, "GET", orgs, nil), 401, "X-API-Key: svc_sp_")
	})
	t.Run("user session", func(t *testing.T) {
		refused(t, e.Do(e.ten.Partner, "GET", orgs, nil), 401, "does not accept user sessions")
		refused(t, e.Do(e.admin, "POST", orgs, map[string]any{"name": "x", "slug": "x"}), 401, "does not accept user sessions")
	})
	t.Run("user API key", func(t *testing.T) {
		gk := e.Must(http.StatusCreated, e.ten.Partner, "POST", "/api/v1/api-keys", map[string]any{"name": "ci",
			"permissions": []string{"organizations:read"}}).Map(t)["key"].(string)
		e.Must(http.StatusOK, apptest.Key(gk), "GET", "/api/v1/orgs/organizations", nil)
		refused(t, e.Do(apptest.Key(gk), "GET", orgs, nil), 401, "user API keys do not work on the partner API")
	})
	t.Run("service principal key on the main API", func(t *testing.T) {
		refused(t, e.Do(ok.Caller, "GET", "/api/v1/orgs/organizations", nil), 401, "work only on /partner-api")
		refused(t, e.Do(ok.Caller, "POST", "/api/v1/orgs/organizations", map[string]any{"name": "x"}), 401, "work only on /partner-api")
	})
	t.Run("revoked key", func(t *testing.T) {
		p := e.full("Revoked")
		e.Must(http.StatusNoContent, e.ten.Partner, "DELETE", mgmt+"/"+p.ID+"/keys/"+p.KeyID, nil)
		refused(t, e.Do(p.Caller, "GET", orgs, nil), 401, "revoked")
	})
	t.Run("disabled principal", func(t *testing.T) {
		p := e.full("Disabled")
		e.Must(http.StatusOK, e.ten.Partner, "PATCH", mgmt+"/"+p.ID, map[string]any{"status": "disabled"})
		refused(t, e.Do(p.Caller, "GET", orgs, nil), 401, "disabled")
	})
	t.Run("expired principal and key", func(t *testing.T) {
		body := restricted("Short-lived")
		body["expiresAt"] = time.Now().Add(2 * time.Hour).UTC()
		p := e.newPrincipal(e.ten.Partner, body)
		long := e.full("Long-lived")
		shortKey := e.Must(http.StatusCreated, e.ten.Partner, "POST", mgmt+"/"+long.ID+"/keys",
			map[string]any{"name": "short", "expiresAt": time.Now().Add(time.Hour).UTC()}).Map(t)["key"].(string)
		e.Must(http.StatusOK, p.Caller, "GET", orgs, nil)
		e.Must(http.StatusOK, apptest.Key(shortKey), "GET", orgs, nil)
		e.advance(90 * time.Minute)
		refused(t, e.Do(apptest.Key(shortKey), "GET", orgs, nil), 401, "key has expired")
		e.Must(http.StatusOK, p.Caller, "GET", orgs, nil)
		e.advance(time.Hour)
		refused(t, e.Do(p.Caller, "GET", orgs, nil), 401, "service principal has expired")
		if got := e.Must(http.StatusOK, e.ten.Partner, "GET", mgmt+"/"+p.ID, nil).Map(t)["status"]; got != "expired" {
			t.Errorf("status of the expired principal = %v, want expired", got)
		}
		e.Must(http.StatusOK, long.Caller, "GET", orgs, nil)
	})
	t.Run("address outside the allowlist", func(t *testing.T) {
		body := restricted("Office only")
		body["sourceCidrs"] = []string{"192.0.2.0/24", "2001:db8::/32"}
		p := e.newPrincipal(e.ten.Partner, body)
		refused(t, e.Do(p.Caller, "GET", orgs, nil), 403, "outside the service principal's source-CIDR allowlist")
		refused(t, e.Do(p.Caller, "POST", orgs, map[string]any{"name": "x", "slug": "outside"}), 403, "allowlist")
	})
	// Refusals of known principals are security events.
	if n := e.countRows(`SELECT COUNT(*) FROM audit_logs WHERE action = 'partner_api.authenticate' AND category = 'security'
		AND actor_type = 'service_principal'`); n < 5 {
		t.Errorf("%d security events of refused principals, want at least 5", n)
	}
}

// The allowlist is checked against the caller's address as the server sees it: behind a
// trusted proxy, the X-Forwarded-For hop. Both families work.
func TestSourceCIDRsIPv4AndIPv6(t *testing.T) {
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	e := newEnv(t, func(c *config.Config) { c.TrustedProxies = []*net.IPNet{loopback} })
	body := restricted("Datacenter")
	body["sourceCidrs"] = []string{"203.0.113.0/24", "2001:db8:1::/48"}
	p := e.newPrincipal(e.ten.Partner, body)
	from := func(ip string) apptest.Caller {
		c := p.Caller
		c.Header = http.Header{"X-Forwarded-For": {ip}}
		return c
	}
	for ip, want := range map[string]int{
		"203.0.113.9":        http.StatusOK,
		"203.0.114.9":        http.StatusForbidden,
		"2001:db8:1::5":      http.StatusOK,
		"2001:db8:2::5":      http.StatusForbidden,
		"::ffff:203.0.113.9": http.StatusOK,
		"198.51.100.1":       http.StatusForbidden,
	} {
		if r := e.Do(from(ip), "GET", papi+"/sites", nil); r.Status != want {
			t.Errorf("caller %s = %d %s, want %d", ip, r.Status, r.Body, want)
		}
	}
	// The allowlist also binds minting.
	key := map[string]any{"orgId": e.ten.OrgID, "name": "from the DC"}
	e.Must(http.StatusCreated, from("2001:db8:1::7"), "POST", papi+"/enrollment-keys", key)
	refused(t, e.Do(from("2001:db8:9::7"), "POST", papi+"/enrollment-keys", key), 403, "allowlist")
}

// Each route needs its scope: a principal holding every scope but one is refused exactly
// there.
func TestEachRouteNeedsItsScope(t *testing.T) {
	e := newEnv(t)
	routes := []struct{ method, path, scope string }{
		{"GET", "/organizations", "organizations:read"},
		{"GET", "/sites", "sites:read"},
		{"GET", "/devices", "devices:read"},
		{"GET", "/device-inventory", "inventory:read"},
		{"GET", "/device-software", "inventory:read"},
		{"GET", "/device-relationships", "inventory:read"},
		{"GET", "/configuration-policies", "configuration:read"},
		{"GET", "/configuration-assignments", "configuration:read"},
		{"GET", "/scripts", "scripts:read"},
		{"GET", "/automations", "configuration:read"},
		{"GET", "/backup-configurations", "backup-configuration:read"},
		{"GET", "/custom-fields", "custom-fields:read"},
		{"GET", "/custom-field-values", "custom-fields:read"},
		{"POST", "/organizations", "organizations:write"},
		{"POST", "/sites", "sites:write"},
		{"POST", "/enrollment-keys", "enrollment-keys:write"},
	}
	without := map[string]principal{}
	for _, sc := range allScopes {
		var others []string
		for _, o := range allScopes {
			if o != sc {
				others = append(others, o)
			}
		}
		without[sc] = e.newPrincipal(e.ten.Partner, restricted("Without "+sc, others...))
	}
	bodies := map[string]any{
		"/organizations":   map[string]any{"name": "Scoped", "slug": "scoped"},
		"/sites":           map[string]any{"orgId": e.ten.OrgID, "name": "Scoped"},
		"/enrollment-keys": map[string]any{"orgId": e.ten.OrgID, "name": "Scoped"},
	}
	for _, rt := range routes {
		var body any
		if rt.method == "POST" {
			body = bodies[rt.path]
		}
		r := e.Do(without[rt.scope].Caller, rt.method, papi+rt.path, body)
		if r.Status != http.StatusForbidden || r.ErrorCode() != "FORBIDDEN" || !strings.Contains(string(r.Body), rt.scope) {
			t.Errorf("%s %s without %s = %d %s, want 403 naming the scope", rt.method, rt.path, rt.scope, r.Status, r.Body)
		}
		// Some other principal lacking a different scope gets through.
		other := without["organizations:read"]
		if rt.scope == "organizations:read" {
			other = without["sites:read"]
		}
		want := http.StatusOK
		if rt.method == "POST" {
			want = http.StatusCreated
		}
		if r := e.Do(other.Caller, rt.method, papi+rt.path, body); r.Status != want {
			t.Errorf("%s %s with %s = %d %s, want %d", rt.method, rt.path, rt.scope, r.Status, r.Body, want)
		}
	}
}
