package apikeys_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/config"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

type keyView struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Prefix      string     `json:"prefix"`
	Permissions []string   `json:"permissions"`
	Scope       string     `json:"scope"`
	PartnerID   *string    `json:"partnerId"`
	OrgID       *string    `json:"orgId"`
	CreatedBy   *string    `json:"createdBy"`
	ExpiresAt   *time.Time `json:"expiresAt"`
	LastUsedAt  *time.Time `json:"lastUsedAt"`
	RevokedAt   *time.Time `json:"revokedAt"`
	Status      string     `json:"status"`
}

type created struct {
	APIKey keyView `json:"apiKey"`
	Key    string  `json:"key"`
}

type keyList struct {
	Data       []keyView `json:"data"`
	Pagination struct {
		HasMore bool   `json:"hasMore"`
		Cursor  string `json:"cursor"`
	} `json:"pagination"`
}

func createKey(t *testing.T, e *apptest.Env, c apptest.Caller, name string, perms ...string) created {
	t.Helper()
	var out created
	e.Must(http.StatusCreated, c, "POST", "/api/v1/api-keys", map[string]any{"name": name, "permissions": perms}).JSON(t, &out)
	return out
}

func exec(t *testing.T, e *apptest.Env, query string, args ...any) {
	t.Helper()
	if _, err := e.App.DB.SQL.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func listIDs(t *testing.T, e *apptest.Env, c apptest.Caller, query string) []string {
	t.Helper()
	var l keyList
	e.Must(http.StatusOK, c, "GET", "/api/v1/api-keys"+query, nil).JSON(t, &l)
	var ids []string
	for _, k := range l.Data {
		ids = append(ids, k.ID)
	}
	return ids
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func TestRawKeyShownOnceAndStoredHashed(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	c := createKey(t, e, ten.Partner, "ci", "organizations:read")

	if !strings.HasPrefix(c.Key, "gk_") || len(c.Key) < 40 {
		t.Fatalf("raw key = %q, want gk_ and 32 random bytes", c.Key)
	}
	if c.APIKey.Prefix != c.Key[:10] || c.APIKey.Status != "active" || c.APIKey.Scope != "partner" ||
		c.APIKey.PartnerID == nil || *c.APIKey.PartnerID != ten.PartnerID || c.APIKey.OrgID != nil || c.APIKey.CreatedBy == nil {
		t.Fatalf("created view = %+v", c.APIKey)
	}
	get := e.Must(http.StatusOK, ten.Partner, "GET", "/api/v1/api-keys/"+c.APIKey.ID, nil)
	list := e.Must(http.StatusOK, ten.Partner, "GET", "/api/v1/api-keys", nil)
	for _, r := range []*apptest.Response{get, list} {
		body := string(r.Body)
		if strings.Contains(body, c.Key) || strings.Contains(body, secrets.Hash(c.Key)) || strings.Contains(body, `"key"`) {
			t.Fatalf("read returned the raw key or its hash: %s", body)
		}
	}

	var hash, prefix string
	if err := e.App.DB.SQL.QueryRow(`SELECT key_hash, key_prefix FROM api_keys WHERE id = $1`, c.APIKey.ID).Scan(&hash, &prefix); err != nil {
		t.Fatal(err)
	}
	if hash != secrets.Hash(c.Key) || prefix != c.Key[:10] {
		t.Fatalf("stored hash %q prefix %q, want the SHA-256 of the key and its first 10 characters", hash, prefix)
	}
	var n int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE action = 'api_key.create' AND resource_id = $1`,
		c.APIKey.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("api_key.create audit entries = %d (%v), want 1", n, err)
	}
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE CAST(details AS TEXT) LIKE $1`, "%"+c.Key[10:]+"%").Scan(&n); err != nil || n != 0 {
		t.Fatalf("audit entries holding the raw key = %d (%v), want 0", n, err)
	}
}

func TestKeyAuthenticatesWithItsGrants(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	c := createKey(t, e, ten.Partner, "reader", "organizations:read")
	key := apptest.Key(c.Key)

	var orgs struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	e.Must(http.StatusOK, key, "GET", "/api/v1/orgs/organizations", nil).JSON(t, &orgs)
	if len(orgs.Data) != 1 || orgs.Data[0].ID != ten.OrgID {
		t.Fatalf("organizations seen by the key = %+v, want the tenant's one", orgs.Data)
	}
	if r := e.Do(key, "POST", "/api/v1/orgs/organizations", map[string]any{"name": "Nope"}); r.Status != http.StatusForbidden {
		t.Fatalf("POST organizations with a read-only key = %d %s, want 403", r.Status, r.Body)
	}
	if r := e.Do(apptest.Key(c.Key+"x"), "GET", "/api/v1/orgs/organizations", nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("unknown key = %d, want 401", r.Status)
	}

	var k keyView
	e.Must(http.StatusOK, ten.Partner, "GET", "/api/v1/api-keys/"+c.APIKey.ID, nil).JSON(t, &k)
	if k.LastUsedAt == nil {
		t.Fatalf("lastUsedAt not set after use: %+v", k)
	}
}

func TestKeyNeverExceedsItsCreator(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")

	// A key whose grants exceed its creator (written directly, as the API refuses it): an
	// Organization Viewer's key with *:* acts as the viewer.
	viewerID, viewer := e.CreateUser("viewer@gale.test", access.LevelOrganization, ten.PartnerID, ten.OrgID, access.RoleOrgViewer)
	raw := "gk_viewer-key-for-the-intersection-test-0123456789"
	now := store.Now()
	exec(t, e, `INSERT INTO api_keys (id, partner_id, org_id, scope, created_by, name, key_prefix, key_hash, permissions,
		created_at, updated_at) VALUES ($1, $2, $3, 'organization', $4, 'wide', $5, $6, '["*:*"]', $7, $7)`,
		store.NewID(), ten.PartnerID, ten.OrgID, viewerID, raw[:10], secrets.Hash(raw), now)
	vk := apptest.Key(raw)
	e.Must(http.StatusOK, vk, "GET", "/api/v1/orgs/sites", nil)
	if r := e.Do(vk, "POST", "/api/v1/orgs/sites", map[string]any{"name": "Extra"}); r.Status != http.StatusForbidden {
		t.Fatalf("viewer's *:* key creating a site = %d %s, want 403", r.Status, r.Body)
	}
	if r := e.Do(viewer, "POST", "/api/v1/orgs/sites", map[string]any{"name": "Extra"}); r.Status != http.StatusForbidden {
		t.Fatalf("viewer creating a site = %d, want 403", r.Status)
	}

	// A creator who loses rights takes them from the key at once.
	adminID, orgAdmin := e.CreateUser("orgadmin@gale.test", access.LevelOrganization, ten.PartnerID, ten.OrgID, "")
	c := createKey(t, e, orgAdmin, "sites", "sites:*", "organizations:read")
	key := apptest.Key(c.Key)
	e.Must(http.StatusCreated, key, "POST", "/api/v1/orgs/sites", map[string]any{"name": "Branch"})
	exec(t, e, `UPDATE users SET role_id = $1 WHERE id = $2`, access.RoleOrgViewer, adminID)
	if r := e.Do(key, "POST", "/api/v1/orgs/sites", map[string]any{"name": "Branch 2"}); r.Status != http.StatusForbidden {
		t.Fatalf("key of a demoted creator creating a site = %d %s, want 403", r.Status, r.Body)
	}
	e.Must(http.StatusOK, key, "GET", "/api/v1/orgs/sites", nil)
}

func TestEscalationRefused(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	// An Organization Admin holds no partner-level permission.
	for _, perms := range [][]string{{"*:*"}, {"partners:write"}, {"devices:read", "billing:manage"}, {"*:read"}} {
		r := e.Do(ten.Org, "POST", "/api/v1/api-keys", map[string]any{"name": "x", "permissions": perms})
		if r.Status != http.StatusForbidden || r.ErrorCode() != "FORBIDDEN" {
			t.Errorf("create with %v = %d %s, want 403 FORBIDDEN", perms, r.Status, r.Body)
		}
	}
	for _, perms := range [][]string{{"nope:read"}, {"devices"}, {}} {
		if r := e.Do(ten.Org, "POST", "/api/v1/api-keys", map[string]any{"name": "x", "permissions": perms}); r.Status != http.StatusBadRequest {
			t.Errorf("create with %v = %d %s, want 400", perms, r.Status, r.Body)
		}
	}
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	if r := e.Do(ten.Org, "POST", "/api/v1/api-keys", map[string]any{"name": "x", "permissions": []string{"devices:read"},
		"expiresAt": past}); r.Status != http.StatusBadRequest {
		t.Errorf("create with a past expiresAt = %d %s, want 400", r.Status, r.Body)
	}

	c := createKey(t, e, ten.Org, "ok", "devices:*", "sites:read")
	if r := e.Do(ten.Org, "PATCH", "/api/v1/api-keys/"+c.APIKey.ID, map[string]any{"permissions": []string{"*:*"}}); r.Status != http.StatusForbidden {
		t.Fatalf("update to *:* = %d %s, want 403", r.Status, r.Body)
	}
	future := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	var k keyView
	e.Must(http.StatusOK, ten.Org, "PATCH", "/api/v1/api-keys/"+c.APIKey.ID, map[string]any{"name": "renamed",
		"permissions": []string{"devices:read"}, "expiresAt": future.Format(time.RFC3339)}).JSON(t, &k)
	if k.Name != "renamed" || len(k.Permissions) != 1 || k.Permissions[0] != "devices:read" || k.ExpiresAt == nil || !k.ExpiresAt.Equal(future) {
		t.Fatalf("updated key = %+v", k)
	}
}

func TestRotate(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	c := createKey(t, e, ten.Partner, "rotating", "organizations:read")
	e.Must(http.StatusOK, apptest.Key(c.Key), "GET", "/api/v1/orgs/organizations", nil)

	var r created
	e.Must(http.StatusOK, ten.Partner, "POST", "/api/v1/api-keys/"+c.APIKey.ID+"/rotate", nil).JSON(t, &r)
	if r.Key == "" || r.Key == c.Key || r.APIKey.ID != c.APIKey.ID || r.APIKey.Prefix != r.Key[:10] {
		t.Fatalf("rotate = %+v", r)
	}
	if res := e.Do(apptest.Key(c.Key), "GET", "/api/v1/orgs/organizations", nil); res.Status != http.StatusUnauthorized {
		t.Fatalf("old key after rotate = %d, want 401", res.Status)
	}
	e.Must(http.StatusOK, apptest.Key(r.Key), "GET", "/api/v1/orgs/organizations", nil)

	e.Must(http.StatusNoContent, ten.Partner, "DELETE", "/api/v1/api-keys/"+c.APIKey.ID, nil)
	if res := e.Do(ten.Partner, "POST", "/api/v1/api-keys/"+c.APIKey.ID+"/rotate", nil); res.Status != http.StatusConflict {
		t.Fatalf("rotate a revoked key = %d %s, want 409", res.Status, res.Body)
	}
}

func TestRotateNeedsTheKeysReach(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	// An Organization Admin may see and manage its organization's keys, but cannot take over
	// a key whose grants it does not hold.
	_, other := e.CreateUser("other@gale.test", access.LevelOrganization, ten.PartnerID, ten.OrgID, "")
	c := createKey(t, e, other, "theirs", "devices:read")
	e.Must(http.StatusOK, ten.Org, "POST", "/api/v1/api-keys/"+c.APIKey.ID+"/rotate", nil)

	// A Partner Admin restricted to no organizations cannot rotate a
	// partner-level key.
	pid, limited := e.CreateUser("limited@gale.test", access.LevelPartner, ten.PartnerID, "", "")
	exec(t, e, `UPDATE users SET org_access = 'none' WHERE id = $1`, pid)
	pk := createKey(t, e, ten.Partner, "partner-wide", "organizations:read")
	if r := e.Do(limited, "POST", "/api/v1/api-keys/"+pk.APIKey.ID+"/rotate", nil); r.Status != http.StatusForbidden {
		t.Fatalf("rotate by an organization-limited partner user = %d %s, want 403", r.Status, r.Body)
	}
}

func TestRevoke(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	c := createKey(t, e, ten.Partner, "doomed", "organizations:read")
	keep := createKey(t, e, ten.Partner, "kept", "organizations:read")
	e.Must(http.StatusNoContent, ten.Partner, "DELETE", "/api/v1/api-keys/"+c.APIKey.ID, nil)
	if r := e.Do(apptest.Key(c.Key), "GET", "/api/v1/orgs/organizations", nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("revoked key = %d, want 401", r.Status)
	}
	if r := e.Do(ten.Partner, "DELETE", "/api/v1/api-keys/"+c.APIKey.ID, nil); r.Status != http.StatusConflict {
		t.Fatalf("second revoke = %d %s, want 409", r.Status, r.Body)
	}
	if r := e.Do(ten.Partner, "PATCH", "/api/v1/api-keys/"+c.APIKey.ID, map[string]any{"name": "x"}); r.Status != http.StatusConflict {
		t.Fatalf("update of a revoked key = %d %s, want 409", r.Status, r.Body)
	}
	var k keyView
	e.Must(http.StatusOK, ten.Partner, "GET", "/api/v1/api-keys/"+c.APIKey.ID, nil).JSON(t, &k)
	if k.Status != "revoked" || k.RevokedAt == nil {
		t.Fatalf("revoked key view = %+v", k)
	}
	if ids := listIDs(t, e, ten.Partner, "?status=revoked"); len(ids) != 1 || ids[0] != c.APIKey.ID {
		t.Fatalf("revoked keys = %v, want [%s]", ids, c.APIKey.ID)
	}
	if ids := listIDs(t, e, ten.Partner, "?status=active"); len(ids) != 1 || ids[0] != keep.APIKey.ID {
		t.Fatalf("active keys = %v, want [%s]", ids, keep.APIKey.ID)
	}
	var n int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE action = 'api_key.revoke' AND resource_id = $1`,
		c.APIKey.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("api_key.revoke audit entries = %d (%v), want 1", n, err)
	}
}

func TestExpiredKey(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	c := createKey(t, e, ten.Partner, "short", "organizations:read")
	exec(t, e, `UPDATE api_keys SET expires_at = $1 WHERE id = $2`, store.Now().Add(-time.Minute), c.APIKey.ID)
	if r := e.Do(apptest.Key(c.Key), "GET", "/api/v1/orgs/organizations", nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("expired key = %d, want 401", r.Status)
	}
	var k keyView
	e.Must(http.StatusOK, ten.Partner, "GET", "/api/v1/api-keys/"+c.APIKey.ID, nil).JSON(t, &k)
	if k.Status != "expired" {
		t.Fatalf("status = %q, want expired", k.Status)
	}
	if ids := listIDs(t, e, ten.Partner, "?status=expired"); len(ids) != 1 || ids[0] != c.APIKey.ID {
		t.Fatalf("expired keys = %v", ids)
	}
	if ids := listIDs(t, e, ten.Partner, "?status=active"); len(ids) != 0 {
		t.Fatalf("active keys = %v, want none", ids)
	}
}

func TestServicePrincipalKeyRefusedOnMainAPI(t *testing.T) {
	e := apptest.New(t)
	r := e.Do(apptest.Key("svc_sp_"+strings.Repeat("a", 43)), "GET", "/api/v1/orgs/organizations", nil)
	if r.Status != http.StatusUnauthorized {
		t.Fatalf("svc_sp_ key on the main API = %d, want 401", r.Status)
	}
}

func TestKeyCannotCreateKeys(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	c := createKey(t, e, ten.Partner, "all", "*:*")
	r := e.Do(apptest.Key(c.Key), "POST", "/api/v1/api-keys", map[string]any{"name": "child", "permissions": []string{"devices:read"}})
	if r.Status != http.StatusForbidden {
		t.Fatalf("key creating a key = %d %s, want 403", r.Status, r.Body)
	}
	// It may still read keys, within its creator's reach.
	if ids := listIDs(t, e, apptest.Key(c.Key), ""); !contains(ids, c.APIKey.ID) {
		t.Fatalf("keys seen by the key = %v", ids)
	}
}

func TestDisabledCreator(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	uid, user := e.CreateUser("tech@gale.test", access.LevelPartner, ten.PartnerID, "", "")
	c := createKey(t, e, user, "tech", "organizations:read")
	e.Must(http.StatusOK, apptest.Key(c.Key), "GET", "/api/v1/orgs/organizations", nil)
	exec(t, e, `UPDATE users SET status = 'disabled' WHERE id = $1`, uid)
	if r := e.Do(apptest.Key(c.Key), "GET", "/api/v1/orgs/organizations", nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("key of a disabled creator = %d, want 401", r.Status)
	}
}

func TestTenancyIsolation(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	a := e.NewTenant(admin, "Alpha")
	b := e.NewTenant(admin, "Beta")
	bPartnerKey := createKey(t, e, b.Partner, "beta partner", "organizations:read")
	bOrgKey := createKey(t, e, b.Org, "beta org", "sites:read")
	aPartnerKey := createKey(t, e, a.Partner, "alpha partner", "organizations:read")
	aOrgKey := createKey(t, e, a.Org, "alpha org", "sites:read")

	for _, id := range []string{bPartnerKey.APIKey.ID, bOrgKey.APIKey.ID} {
		for _, c := range []apptest.Caller{a.Partner, a.Org} {
			for _, req := range []struct {
				method, path string
				body         any
			}{
				{"GET", "/api/v1/api-keys/" + id, nil},
				{"PATCH", "/api/v1/api-keys/" + id, map[string]any{"name": "mine"}},
				{"DELETE", "/api/v1/api-keys/" + id, nil},
				{"POST", "/api/v1/api-keys/" + id + "/rotate", nil},
			} {
				if r := e.Do(c, req.method, req.path, req.body); r.Status != http.StatusNotFound {
					t.Errorf("%s %s by another tenant = %d %s, want 404", req.method, req.path, r.Status, r.Body)
				}
			}
		}
	}

	aPartnerSees := listIDs(t, e, a.Partner, "")
	if len(aPartnerSees) != 2 || !contains(aPartnerSees, aPartnerKey.APIKey.ID) || !contains(aPartnerSees, aOrgKey.APIKey.ID) {
		t.Fatalf("partner A sees %v, want its two keys", aPartnerSees)
	}
	if aOrgSees := listIDs(t, e, a.Org, ""); len(aOrgSees) != 1 || aOrgSees[0] != aOrgKey.APIKey.ID {
		t.Fatalf("organization A sees %v, want only its own key", aOrgSees)
	}
	if all := listIDs(t, e, admin, ""); len(all) != 4 {
		t.Fatalf("system sees %d keys, want 4", len(all))
	}
	// B's keys were untouched by A's attempts.
	e.Must(http.StatusOK, apptest.Key(bPartnerKey.Key), "GET", "/api/v1/orgs/organizations", nil)
	var k keyView
	e.Must(http.StatusOK, b.Partner, "GET", "/api/v1/api-keys/"+bPartnerKey.APIKey.ID, nil).JSON(t, &k)
	if k.Name != "beta partner" || k.Status != "active" {
		t.Fatalf("B's key after A's attempts = %+v", k)
	}
}

func TestListPaging(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Acme")
	var want []string
	for _, n := range []string{"one", "two", "three"} {
		want = append([]string{createKey(t, e, ten.Partner, n, "organizations:read").APIKey.ID}, want...)
	}
	var got []string
	cursor := ""
	for range 5 {
		var l keyList
		e.Must(http.StatusOK, ten.Partner, "GET", "/api/v1/api-keys?limit=2&cursor="+cursor, nil).JSON(t, &l)
		for _, k := range l.Data {
			got = append(got, k.ID)
		}
		if !l.Pagination.HasMore {
			break
		}
		cursor = l.Pagination.Cursor
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged keys = %v, want newest first %v", got, want)
	}
	if r := e.Do(ten.Partner, "GET", "/api/v1/api-keys?cursor=garbage", nil); r.Status != http.StatusBadRequest {
		t.Fatalf("bad cursor = %d, want 400", r.Status)
	}
}

// With ENABLE_2FA on, a bare JWT session is refused on tenancy writes, but an API key is a
// different credential and is not gated.
func TestKeysAreNotMFAGated(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.Enable2FA = true })
	admin := e.Admin()
	p := e.CreatePartnerDirect()
	if r := e.Do(admin, "POST", "/api/v1/orgs/organizations", map[string]any{"name": "Gated", "partnerId": p}); r.Status != 403 || r.ErrorCode() != "MFA_REQUIRED" {
		t.Fatalf("bare session = %d %s, want 403 MFA_REQUIRED", r.Status, r.Body)
	}
	if r := e.Do(admin, "POST", "/api/v1/api-keys", map[string]any{"name": "k", "permissions": []string{"organizations:write"}}); r.Status != 403 {
		t.Fatalf("creating a key without MFA = %d, want 403", r.Status)
	}
	var adminID string
	if err := e.App.DB.SQL.QueryRow(`SELECT id FROM users WHERE email = $1`, apptest.AdminEmail).Scan(&adminID); err != nil {
		t.Fatal(err)
	}
	raw := "gk_test-key-for-mfa-gate-0123456789"
	now := store.Now()
	exec(t, e, `INSERT INTO api_keys (id, scope, created_by, name, key_prefix, key_hash, permissions, created_at, updated_at)
		VALUES ($1, 'system', $2, 'k', 'gk_test-ke', $3, '["organizations:*"]', $4, $4)`, store.NewID(), adminID, secrets.Hash(raw), now)
	e.Must(http.StatusCreated, apptest.Key(raw), "POST", "/api/v1/orgs/organizations", map[string]any{"name": "By key", "partnerId": p})
}
