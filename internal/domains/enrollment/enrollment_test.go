package enrollment_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"

	"gale/internal/domains/enrollment"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/testkit/apptest"
)

const keysPath = "/api/v1/enrollment-keys"

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

type key struct {
	ID                  string     `json:"id"`
	OrgID               string     `json:"orgId"`
	PartnerID           string     `json:"partnerId"`
	SiteID              *string    `json:"siteId"`
	Name                string     `json:"name"`
	KeyPrefix           string     `json:"keyPrefix"`
	MaxUsage            int        `json:"maxUsage"`
	UsageCount          int        `json:"usageCount"`
	ExpiresAt           time.Time  `json:"expiresAt"`
	RevokedAt           *time.Time `json:"revokedAt"`
	Status              string     `json:"status"`
	HasEnrollmentSecret bool       `json:"hasEnrollmentSecret"`
	Source              string     `json:"source"`
	CreatedBy           *string    `json:"createdBy"`
	LastUsedAt          *time.Time `json:"lastUsedAt"`
	Key                 string     `json:"key"`
	EnrollmentSecret    string     `json:"enrollmentSecret"`
}

func create(e *apptest.Env, c apptest.Caller, body map[string]any) key {
	e.T.Helper()
	var k key
	e.Must(http.StatusCreated, c, "POST", keysPath, body).JSON(e.T, &k)
	return k
}

func get(e *apptest.Env, c apptest.Caller, id string) key {
	e.T.Helper()
	var k key
	e.Must(http.StatusOK, c, "GET", keysPath+"/"+id, nil).JSON(e.T, &k)
	return k
}

type keyList struct {
	Data       []key `json:"data"`
	Pagination struct {
		HasMore bool   `json:"hasMore"`
		Cursor  string `json:"cursor"`
	} `json:"pagination"`
}

func list(e *apptest.Env, c apptest.Caller, query string) keyList {
	e.T.Helper()
	var l keyList
	e.Must(http.StatusOK, c, "GET", keysPath+query, nil).JSON(e.T, &l)
	return l
}

func listIDs(l keyList) []string {
	out := []string{}
	for _, k := range l.Data {
		out = append(out, k.ID)
	}
	return out
}

// claim runs Claim in its own transaction, as the enrolling route would.
func claim(e *apptest.Env, rawKey, secret, global string) (enrollment.Claimed, error) {
	var c enrollment.Claimed
	err := e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
		var err error
		c, err = app.Service[*enrollment.Service](e.App).Claim(context.Background(), tx, rawKey, secret, global)
		return err
	})
	return c, err
}

// wantClaimError checks Claim's refusal: status, code and message.
func wantClaimError(t *testing.T, err error, status int, message string) {
	t.Helper()
	ae, ok := apperr.As(err)
	if !ok || httpapi.StatusOf(ae) != status || ae.Message != message {
		t.Fatalf("claim error = %v, want %d %q", err, status, message)
	}
	code := map[int]string{401: apperr.CodeUnauthorized, 403: apperr.CodeForbidden}[status]
	if ae.Code != code {
		t.Fatalf("claim error code = %s, want %s", ae.Code, code)
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func expectError(t *testing.T, r *apptest.Response, status int, code string) {
	t.Helper()
	if r.Status != status || r.ErrorCode() != code {
		t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, status, code)
	}
}

func secondOrg(e *apptest.Env, ten apptest.Tenant, name string) (orgID, siteID string) {
	e.T.Helper()
	orgID = e.CreateOrg(ten.Partner, "", name)
	var sites struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	e.Must(http.StatusOK, ten.Partner, "GET", "/api/v1/orgs/sites?orgId="+orgID, nil).JSON(e.T, &sites)
	return orgID, sites.Data[0].ID
}

func TestCreateShowsRawValuesOnceAndStoresHashes(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")

	before := time.Now()
	// orgId omitted: the partner has exactly one organization.
	k := create(e, ten.Partner, map[string]any{"name": "Front desk"})
	after := time.Now()
	if !hex64.MatchString(k.Key) || k.KeyPrefix != k.Key[:8] {
		t.Fatalf("raw key %q, prefix %q", k.Key, k.KeyPrefix)
	}
	if k.OrgID != ten.OrgID || k.PartnerID != ten.PartnerID || k.SiteID != nil || k.Name != "Front desk" {
		t.Fatalf("created key = %+v", k)
	}
	if k.MaxUsage != 1 || k.UsageCount != 0 || k.Status != enrollment.StatusActive || k.Source != "api" || k.CreatedBy == nil {
		t.Fatalf("defaults = %+v", k)
	}
	if k.EnrollmentSecret != "" || k.HasEnrollmentSecret {
		t.Fatalf("a secret was issued without being asked for: %+v", k)
	}
	// Default lifetime: 60 minutes.
	if k.ExpiresAt.Before(before.Add(60*time.Minute-time.Second)) || k.ExpiresAt.After(after.Add(60*time.Minute+time.Second)) {
		t.Fatalf("expiresAt = %v, want about now+60m", k.ExpiresAt)
	}

	// Reads never show raw values.
	r := e.Must(http.StatusOK, ten.Partner, "GET", keysPath+"/"+k.ID, nil)
	if strings.Contains(string(r.Body), k.Key) || strings.Contains(string(r.Body), `"key"`) ||
		strings.Contains(string(r.Body), "Hash") || strings.Contains(string(r.Body), "hash") {
		t.Fatalf("GET shows the key or a hash: %s", r.Body)
	}
	if l := e.Must(http.StatusOK, ten.Partner, "GET", keysPath, nil); strings.Contains(string(l.Body), k.Key) {
		t.Fatalf("list shows the raw key: %s", l.Body)
	}

	// The database holds only hashes and the prefix.
	var keyHash, prefix string
	var secretHash sql.NullString
	if err := e.App.DB.SQL.QueryRow(`SELECT key_hash, key_prefix, secret_hash FROM enrollment_keys WHERE id = $1`, k.ID).
		Scan(&keyHash, &prefix, &secretHash); err != nil {
		t.Fatal(err)
	}
	if keyHash != sha(k.Key) || prefix != k.Key[:8] || secretHash.Valid {
		t.Fatalf("stored key_hash %s prefix %s secret %v", keyHash, prefix, secretHash)
	}

	// With a secret, asked for.
	ks := create(e, ten.Partner, map[string]any{"name": "With secret", "orgId": ten.OrgID, "siteId": ten.SiteID,
		"maxUsage": 5, "ttlMinutes": 1440, "issueEnrollmentSecret": true})
	if !hex64.MatchString(ks.EnrollmentSecret) || !ks.HasEnrollmentSecret || ks.MaxUsage != 5 || ks.SiteID == nil || *ks.SiteID != ten.SiteID {
		t.Fatalf("key with secret = %+v", ks)
	}
	if d := time.Until(ks.ExpiresAt); d < 1439*time.Minute || d > 1441*time.Minute {
		t.Fatalf("ttlMinutes 1440 expires in %v", d)
	}
	if err := e.App.DB.SQL.QueryRow(`SELECT secret_hash FROM enrollment_keys WHERE id = $1`, ks.ID).Scan(&secretHash); err != nil {
		t.Fatal(err)
	}
	if secretHash.String != sha(ks.EnrollmentSecret) {
		t.Fatalf("secret_hash %v is not the hash of the secret", secretHash)
	}
	if g := get(e, ten.Partner, ks.ID); g.EnrollmentSecret != "" || g.Key != "" || !g.HasEnrollmentSecret {
		t.Fatalf("GET of a key with secret = %+v", g)
	}

	// An explicit expiresAt is kept.
	at := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second)
	ke := create(e, ten.Partner, map[string]any{"name": "Until", "expiresAt": at})
	if !ke.ExpiresAt.Equal(at) {
		t.Fatalf("expiresAt = %v, want %v", ke.ExpiresAt, at)
	}

	// Audit entries never carry raw values.
	var n int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE action = 'enrollment_key.create' AND org_id = $1`, ten.OrgID).Scan(&n); err != nil || n != 3 {
		t.Fatalf("create audit entries = %d (%v), want 3", n, err)
	}
	assertAuditClean(t, e, k.Key, ks.Key, ks.EnrollmentSecret)
}

func assertAuditClean(t *testing.T, e *apptest.Env, raws ...string) {
	t.Helper()
	rows, err := e.App.DB.SQL.Query(`SELECT details FROM audit_logs WHERE resource_type = 'enrollment_key'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		for _, raw := range raws {
			if strings.Contains(d, raw) || strings.Contains(d, sha(raw)) {
				t.Fatalf("audit details %s carry a raw value or its hash", d)
			}
		}
	}
}

func TestCreateValidation(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Alpha")
	other := e.NewTenant(admin, "Beta")

	for name, body := range map[string]map[string]any{
		"no name":             {"orgId": ten.OrgID},
		"blank name":          {"orgId": ten.OrgID, "name": "   "},
		"long name":           {"orgId": ten.OrgID, "name": strings.Repeat("n", 201)},
		"maxUsage 0":          {"orgId": ten.OrgID, "name": "k", "maxUsage": 0},
		"maxUsage 100001":     {"orgId": ten.OrgID, "name": "k", "maxUsage": 100001},
		"ttlMinutes 0":        {"orgId": ten.OrgID, "name": "k", "ttlMinutes": 0},
		"ttlMinutes 525601":   {"orgId": ten.OrgID, "name": "k", "ttlMinutes": 525601},
		"ttl and expiresAt":   {"orgId": ten.OrgID, "name": "k", "ttlMinutes": 10, "expiresAt": time.Now().Add(time.Hour)},
		"expiresAt past":      {"orgId": ten.OrgID, "name": "k", "expiresAt": time.Now().Add(-time.Minute)},
		"expiresAt too far":   {"orgId": ten.OrgID, "name": "k", "expiresAt": time.Now().Add(525601 * time.Minute)},
		"partnerId":           {"orgId": ten.OrgID, "name": "k", "partnerId": ten.PartnerID},
		"foreign orgId":       {"orgId": other.OrgID, "name": "k"},
		"foreign siteId":      {"orgId": ten.OrgID, "name": "k", "siteId": other.SiteID},
		"unknown orgId":       {"orgId": "00000000-0000-7000-8000-00000000dead", "name": "k"},
		"orgId not a uuid":    {"orgId": "nope", "name": "k"},
		"maxUsage not an int": {"orgId": ten.OrgID, "name": "k", "maxUsage": "many"},
	} {
		t.Run(name, func(t *testing.T) {
			expectError(t, e.Do(ten.Partner, "POST", keysPath, body), http.StatusBadRequest, apperr.CodeValidation)
		})
	}
	// Limits themselves are accepted.
	create(e, ten.Partner, map[string]any{"orgId": ten.OrgID, "name": "k", "maxUsage": 100000, "ttlMinutes": 525600})
	create(e, ten.Partner, map[string]any{"orgId": ten.OrgID, "name": "k", "maxUsage": 1, "ttlMinutes": 1})

	// A site of another organization of the same partner is refused too.
	_, site2 := secondOrg(e, ten, "Alpha Two")
	expectError(t, e.Do(ten.Partner, "POST", keysPath, map[string]any{"orgId": ten.OrgID, "name": "k", "siteId": site2}),
		http.StatusBadRequest, apperr.CodeValidation)
	var n int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM enrollment_keys`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("keys stored = %d (%v), want only the 2 valid ones", n, err)
	}
}

func TestOrgIDMayBeOmittedOnlyWhenObvious(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Alpha")

	k := create(e, ten.Partner, map[string]any{"name": "single org"})
	if k.OrgID != ten.OrgID {
		t.Fatalf("omitted orgId resolved to %s, want %s", k.OrgID, ten.OrgID)
	}
	// The system administrator always names the organization.
	expectError(t, e.Do(admin, "POST", keysPath, map[string]any{"name": "k"}), http.StatusBadRequest, apperr.CodeValidation)
	create(e, admin, map[string]any{"name": "k", "orgId": ten.OrgID})

	org2, _ := secondOrg(e, ten, "Alpha Two")
	r := e.Do(ten.Partner, "POST", keysPath, map[string]any{"name": "two orgs"})
	expectError(t, r, http.StatusBadRequest, apperr.CodeValidation)
	if !strings.Contains(string(r.Body), "orgId") {
		t.Fatalf("refusal does not name orgId: %s", r.Body)
	}
	// An organization caller's own organization is obvious.
	if k := create(e, ten.Org, map[string]any{"name": "org caller"}); k.OrgID != ten.OrgID {
		t.Fatalf("org caller's key went to %s", k.OrgID)
	}
	// An organization caller cannot mint for a sibling organization.
	expectError(t, e.Do(ten.Org, "POST", keysPath, map[string]any{"name": "k", "orgId": org2}), http.StatusBadRequest, apperr.CodeValidation)

	// A deleted organization no longer counts: one live organization again.
	e.Must(http.StatusNoContent, ten.Partner, "DELETE", "/api/v1/orgs/organizations/"+org2, nil)
	if k := create(e, ten.Partner, map[string]any{"name": "single again"}); k.OrgID != ten.OrgID {
		t.Fatalf("key went to %s", k.OrgID)
	}
}

func TestOrganizationCapBoundsLifetime(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	e.Must(http.StatusOK, ten.Partner, "PATCH", "/api/v1/orgs/organizations/"+ten.OrgID, map[string]any{"maxEnrollmentKeyTtlMinutes": 30})

	// The default (60) is shortened to the cap silently.
	k := create(e, ten.Partner, map[string]any{"name": "default"})
	if d := time.Until(k.ExpiresAt); d > 30*time.Minute || d < 29*time.Minute {
		t.Fatalf("default key under a 30-minute cap expires in %v", d)
	}
	// An explicit lifetime above the cap is refused, naming it.
	r := e.Do(ten.Partner, "POST", keysPath, map[string]any{"name": "long", "ttlMinutes": 31})
	expectError(t, r, http.StatusBadRequest, apperr.CodeValidation)
	if !strings.Contains(string(r.Body), "30 minutes") {
		t.Fatalf("refusal does not name the cap: %s", r.Body)
	}
	expectError(t, e.Do(ten.Partner, "POST", keysPath, map[string]any{"name": "long", "expiresAt": time.Now().Add(2 * time.Hour)}),
		http.StatusBadRequest, apperr.CodeValidation)
	create(e, ten.Partner, map[string]any{"name": "at cap", "ttlMinutes": 30})
	create(e, ten.Partner, map[string]any{"name": "below", "expiresAt": time.Now().Add(20 * time.Minute)})
}

func TestExpiryPolicyMaxTTL(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	svc, ctx := app.Service[*enrollment.Service](e.App), context.Background()
	db := e.App.DB.SQL

	// A surface's own cap (the partner API's) clamps the default and refuses longer requests.
	p := enrollment.Policy{DefaultTTL: 30 * 24 * time.Hour, MaxTTL: 2 * time.Hour}
	exp, err := svc.Expiry(ctx, db, ten.OrgID, nil, nil, p)
	if err != nil || time.Until(exp) > 2*time.Hour || time.Until(exp) < 119*time.Minute {
		t.Fatalf("default under MaxTTL 2h = %v (%v)", exp, err)
	}
	ttl := 121
	if _, err := svc.Expiry(ctx, db, ten.OrgID, &ttl, nil, p); !apperr.IsCode(err, apperr.CodeValidation) {
		t.Fatalf("ttl above MaxTTL: %v", err)
	}
	// The organization's cap wins when smaller.
	e.Must(http.StatusOK, ten.Partner, "PATCH", "/api/v1/orgs/organizations/"+ten.OrgID, map[string]any{"maxEnrollmentKeyTtlMinutes": 15})
	exp, err = svc.Expiry(ctx, db, ten.OrgID, nil, nil, p)
	if err != nil || time.Until(exp) > 15*time.Minute {
		t.Fatalf("default under org cap 15m = %v (%v)", exp, err)
	}
	ttl = 16
	if _, err := svc.Expiry(ctx, db, ten.OrgID, &ttl, nil, p); err == nil || !strings.Contains(err.(*apperr.Error).Details[0].Message, "15 minutes") {
		t.Fatalf("ttl above org cap: %v", err)
	}
}

func TestClaim(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	const global = "global-enrollment-secret"

	// A key with its own secret accepts only that secret.
	ks := create(e, ten.Partner, map[string]any{"name": "own", "siteId": ten.SiteID, "maxUsage": 2, "issueEnrollmentSecret": true})
	_, err := claim(e, ks.Key, "wrong", global)
	wantClaimError(t, err, 403, "wrong enrollment secret")
	_, err = claim(e, ks.Key, global, global)
	wantClaimError(t, err, 403, "wrong enrollment secret")
	c, err := claim(e, ks.Key, ks.EnrollmentSecret, global)
	if err != nil || c.KeyID != ks.ID || c.OrgID != ten.OrgID || c.PartnerID != ten.PartnerID || c.SiteID != ten.SiteID || c.DeviceID != "" {
		t.Fatalf("claim = %+v, %v", c, err)
	}
	// Failed claims used nothing.
	if g := get(e, ten.Partner, ks.ID); g.UsageCount != 1 || g.LastUsedAt == nil || g.Status != enrollment.StatusActive {
		t.Fatalf("after one claim: %+v", g)
	}

	// Without its own secret, the key needs the global one; no global secret, no enrollment.
	kg := create(e, ten.Partner, map[string]any{"name": "global", "maxUsage": 1})
	_, err = claim(e, kg.Key, "", "")
	wantClaimError(t, err, 403, "wrong enrollment secret")
	_, err = claim(e, kg.Key, "anything", "")
	wantClaimError(t, err, 403, "wrong enrollment secret")
	_, err = claim(e, kg.Key, "wrong", global)
	wantClaimError(t, err, 403, "wrong enrollment secret")
	if c, err = claim(e, kg.Key, global, global); err != nil || c.SiteID != "" {
		t.Fatalf("claim with the global secret = %+v, %v", c, err)
	}
	// maxUsage 1: used up.
	_, err = claim(e, kg.Key, global, global)
	wantClaimError(t, err, 401, "enrollment key has no uses left")
	if g := get(e, ten.Partner, kg.ID); g.Status != enrollment.StatusUsedUp || g.UsageCount != 1 {
		t.Fatalf("used-up key = %+v", g)
	}

	_, err = claim(e, strings.Repeat("0", 64), global, global)
	wantClaimError(t, err, 401, "unknown enrollment key")

	// Expired.
	kx := create(e, ten.Partner, map[string]any{"name": "expiring"})
	if _, err := e.App.DB.SQL.Exec(`UPDATE enrollment_keys SET expires_at = $1 WHERE id = $2`, time.Now().UTC().Add(-time.Second), kx.ID); err != nil {
		t.Fatal(err)
	}
	_, err = claim(e, kx.Key, global, global)
	wantClaimError(t, err, 401, "enrollment key expired")
	if g := get(e, ten.Partner, kx.ID); g.Status != enrollment.StatusExpired {
		t.Fatalf("expired key status = %s", g.Status)
	}

	// Revoked: at once, and revoking again is fine.
	e.Must(http.StatusNoContent, ten.Partner, "DELETE", keysPath+"/"+ks.ID, nil)
	e.Must(http.StatusNoContent, ten.Partner, "DELETE", keysPath+"/"+ks.ID, nil)
	_, err = claim(e, ks.Key, ks.EnrollmentSecret, global)
	wantClaimError(t, err, 401, "enrollment key revoked")
	if g := get(e, ten.Partner, ks.ID); g.Status != enrollment.StatusRevoked || g.RevokedAt == nil {
		t.Fatalf("revoked key = %+v", g)
	}
	var n int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE action = 'enrollment_key.revoke' AND resource_id = $1`, ks.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("revoke audit entries = %d (%v), want 1 (the second revoke changed nothing)", n, err)
	}

	// Keys of a deleted organization enroll nothing.
	org2, _ := secondOrg(e, ten, "Alpha Two")
	k2 := create(e, ten.Partner, map[string]any{"name": "doomed", "orgId": org2})
	e.Must(http.StatusNoContent, ten.Partner, "DELETE", "/api/v1/orgs/organizations/"+org2, nil)
	_, err = claim(e, k2.Key, global, global)
	wantClaimError(t, err, 401, "unknown enrollment key")
}

func TestRotate(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	const global = "global-enrollment-secret"

	k := create(e, ten.Partner, map[string]any{"name": "rotating", "maxUsage": 2, "issueEnrollmentSecret": true})
	if _, err := claim(e, k.Key, k.EnrollmentSecret, global); err != nil {
		t.Fatal(err)
	}
	var r key
	e.Must(http.StatusOK, ten.Partner, "POST", keysPath+"/"+k.ID+"/rotate", nil).JSON(t, &r)
	if r.ID != k.ID || !hex64.MatchString(r.Key) || r.Key == k.Key || r.KeyPrefix != r.Key[:8] ||
		!hex64.MatchString(r.EnrollmentSecret) || r.EnrollmentSecret == k.EnrollmentSecret || r.UsageCount != 0 || !r.ExpiresAt.Equal(k.ExpiresAt) {
		t.Fatalf("rotated = %+v (was %+v)", r, k)
	}
	_, err := claim(e, k.Key, k.EnrollmentSecret, global)
	wantClaimError(t, err, 401, "unknown enrollment key")
	_, err = claim(e, r.Key, k.EnrollmentSecret, global)
	wantClaimError(t, err, 403, "wrong enrollment secret")
	// Usage was reset: two more enrollments fit.
	for i := 0; i < 2; i++ {
		if _, err := claim(e, r.Key, r.EnrollmentSecret, global); err != nil {
			t.Fatalf("claim %d with the rotated key: %v", i, err)
		}
	}

	// A key without a secret stays without one.
	kg := create(e, ten.Partner, map[string]any{"name": "no secret"})
	var rg key
	e.Must(http.StatusOK, ten.Partner, "POST", keysPath+"/"+kg.ID+"/rotate", nil).JSON(t, &rg)
	if rg.EnrollmentSecret != "" || rg.HasEnrollmentSecret {
		t.Fatalf("rotate gave a secretless key a secret: %+v", rg)
	}
	if _, err := claim(e, rg.Key, global, global); err != nil {
		t.Fatal(err)
	}

	// Revoked and expired keys are not rotated.
	e.Must(http.StatusNoContent, ten.Partner, "DELETE", keysPath+"/"+kg.ID, nil)
	expectError(t, e.Do(ten.Partner, "POST", keysPath+"/"+kg.ID+"/rotate", nil), http.StatusConflict, apperr.CodeConflict)
	kx := create(e, ten.Partner, map[string]any{"name": "expired"})
	if _, err := e.App.DB.SQL.Exec(`UPDATE enrollment_keys SET expires_at = $1 WHERE id = $2`, time.Now().UTC().Add(-time.Second), kx.ID); err != nil {
		t.Fatal(err)
	}
	expectError(t, e.Do(ten.Partner, "POST", keysPath+"/"+kx.ID+"/rotate", nil), http.StatusConflict, apperr.CodeConflict)

	var n int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE action = 'enrollment_key.rotate'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rotate audit entries = %d (%v), want 2", n, err)
	}
	assertAuditClean(t, e, k.Key, k.EnrollmentSecret, r.Key, r.EnrollmentSecret, rg.Key)
}

func TestConcurrentClaimsHonorMaxUsage(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	second := e.SecondNode()
	const global = "global-enrollment-secret"
	k := create(e, ten.Partner, map[string]any{"name": "three", "maxUsage": 3})

	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, usedUp := 0, 0
	var other []error
	for i := 0; i < 12; i++ {
		node := e
		if i%2 == 1 {
			node = second
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := claim(node, k.Key, global, global)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case apperr.IsCode(err, apperr.CodeUnauthorized) && err.(*apperr.Error).Message == "enrollment key has no uses left":
				usedUp++
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	if ok != 3 || usedUp != 9 || len(other) > 0 {
		t.Fatalf("12 concurrent claims of a 3-use key: %d succeeded, %d used up, others %v", ok, usedUp, other)
	}
	if g := get(e, ten.Partner, k.ID); g.UsageCount != 3 || g.Status != enrollment.StatusUsedUp {
		t.Fatalf("after the race: %+v", g)
	}
}

func TestMintForDevice(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	deviceID := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: "pc-1", Status: "pending"})
	e.Must(http.StatusOK, ten.Partner, "PATCH", "/api/v1/orgs/organizations/"+ten.OrgID, map[string]any{"maxEnrollmentKeyTtlMinutes": 60})

	var raw, secret, id string
	err := e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
		var err error
		raw, secret, id, err = app.Service[*enrollment.Service](e.App).MintForDevice(context.Background(), tx, ten.PartnerID, ten.OrgID, ten.SiteID, deviceID, 24*time.Hour)
		return err
	})
	if err != nil || !hex64.MatchString(raw) || !hex64.MatchString(secret) {
		t.Fatalf("mint = %q %q %v", raw, secret, err)
	}
	k := get(e, ten.Partner, id)
	if k.MaxUsage != 1 || k.Source != "provision" || !k.HasEnrollmentSecret || time.Until(k.ExpiresAt) > time.Hour {
		t.Fatalf("provisioning key = %+v (want single use, own secret, clamped to the 60-minute cap)", k)
	}
	// The global secret does not open a key with its own secret.
	_, err = claim(e, raw, "global", "global")
	wantClaimError(t, err, 403, "wrong enrollment secret")
	c, err := claim(e, raw, secret, "")
	if err != nil || c.DeviceID != deviceID || c.SiteID != ten.SiteID || c.OrgID != ten.OrgID {
		t.Fatalf("claim of provisioning key = %+v, %v", c, err)
	}
	_, err = claim(e, raw, secret, "")
	wantClaimError(t, err, 401, "enrollment key has no uses left")
}

func TestListFiltersAndPaging(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	const global = "g"
	org2, site2 := secondOrg(e, ten, "Alpha Two")

	active := create(e, ten.Partner, map[string]any{"name": "active", "orgId": ten.OrgID, "siteId": ten.SiteID, "maxUsage": 2})
	usedUp := create(e, ten.Partner, map[string]any{"name": "used up", "orgId": ten.OrgID})
	if _, err := claim(e, usedUp.Key, global, global); err != nil {
		t.Fatal(err)
	}
	revoked := create(e, ten.Partner, map[string]any{"name": "revoked", "orgId": ten.OrgID})
	e.Must(http.StatusNoContent, ten.Partner, "DELETE", keysPath+"/"+revoked.ID, nil)
	expired := create(e, ten.Partner, map[string]any{"name": "expired", "orgId": ten.OrgID})
	if _, err := e.App.DB.SQL.Exec(`UPDATE enrollment_keys SET expires_at = $1 WHERE id = $2`, time.Now().UTC().Add(-time.Second), expired.ID); err != nil {
		t.Fatal(err)
	}
	other := create(e, ten.Partner, map[string]any{"name": "org two", "orgId": org2, "siteId": site2})

	all := listIDs(list(e, ten.Partner, ""))
	want := []string{other.ID, expired.ID, revoked.ID, usedUp.ID, active.ID} // newest first
	if strings.Join(all, ",") != strings.Join(want, ",") {
		t.Fatalf("list = %v, want %v", all, want)
	}
	for q, w := range map[string][]string{
		"?status=active":                         {other.ID, active.ID},
		"?status=used_up":                        {usedUp.ID},
		"?status=revoked":                        {revoked.ID},
		"?status=expired":                        {expired.ID},
		"?orgId=" + org2:                         {other.ID},
		"?siteId=" + ten.SiteID:                  {active.ID},
		"?orgId=" + ten.OrgID + "&status=active": {active.ID},
	} {
		l := list(e, ten.Partner, q)
		if strings.Join(listIDs(l), ",") != strings.Join(w, ",") {
			t.Errorf("list%s = %v, want %v", q, listIDs(l), w)
		}
		for _, k := range l.Data {
			if strings.Contains(q, "status=") && !strings.Contains(q, "status="+k.Status) {
				t.Errorf("list%s row status %s", q, k.Status)
			}
		}
	}
	expectError(t, e.Do(ten.Partner, "GET", keysPath+"?status=bogus", nil), http.StatusBadRequest, apperr.CodeValidation)

	// Cursor paging visits every row once, in order.
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		q := "?limit=2"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		l := list(e, ten.Partner, q)
		seen = append(seen, listIDs(l)...)
		if !l.Pagination.HasMore {
			break
		}
		cursor = l.Pagination.Cursor
		if pages > 5 {
			t.Fatal("paging does not end")
		}
	}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("paged = %v, want %v", seen, want)
	}
}

func TestTenancy(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	alpha := e.NewTenant(admin, "Alpha")
	beta := e.NewTenant(admin, "Beta")
	org2, _ := secondOrg(e, alpha, "Alpha Two")

	ka := create(e, alpha.Partner, map[string]any{"name": "alpha", "orgId": alpha.OrgID})
	ka2 := create(e, alpha.Partner, map[string]any{"name": "alpha two", "orgId": org2})
	kb := create(e, beta.Partner, map[string]any{"name": "beta"})

	// Another partner's key (and, for organization callers, another organization's) is missing.
	for _, c := range []struct {
		name   string
		caller apptest.Caller
		id     string
	}{{"beta partner on alpha key", beta.Partner, ka.ID}, {"beta org on alpha key", beta.Org, ka.ID},
		{"alpha org on sibling org key", alpha.Org, ka2.ID}, {"alpha partner on beta key", alpha.Partner, kb.ID}} {
		t.Run(c.name, func(t *testing.T) {
			expectError(t, e.Do(c.caller, "GET", keysPath+"/"+c.id, nil), http.StatusNotFound, apperr.CodeNotFound)
			expectError(t, e.Do(c.caller, "POST", keysPath+"/"+c.id+"/rotate", nil), http.StatusNotFound, apperr.CodeNotFound)
			expectError(t, e.Do(c.caller, "DELETE", keysPath+"/"+c.id, nil), http.StatusNotFound, apperr.CodeNotFound)
		})
	}
	// Nothing changed by those attempts.
	if g := get(e, alpha.Partner, ka.ID); g.Status != enrollment.StatusActive || g.KeyPrefix != ka.KeyPrefix {
		t.Fatalf("alpha key after foreign attempts: %+v", g)
	}
	if g := get(e, alpha.Partner, ka2.ID); g.Status != enrollment.StatusActive || g.KeyPrefix != ka2.KeyPrefix {
		t.Fatalf("alpha two key after sibling attempts: %+v", g)
	}

	// Lists never leak.
	if ids := listIDs(list(e, beta.Partner, "")); strings.Join(ids, ",") != kb.ID {
		t.Fatalf("beta partner lists %v", ids)
	}
	if ids := listIDs(list(e, beta.Partner, "?orgId="+alpha.OrgID)); len(ids) != 0 {
		t.Fatalf("beta partner filtering by alpha's org lists %v", ids)
	}
	if ids := listIDs(list(e, alpha.Org, "")); strings.Join(ids, ",") != ka.ID {
		t.Fatalf("alpha org caller lists %v, want only its organization's key", ids)
	}
	if ids := listIDs(list(e, alpha.Partner, "")); strings.Join(ids, ",") != ka2.ID+","+ka.ID {
		t.Fatalf("alpha partner lists %v", ids)
	}
	if ids := listIDs(list(e, admin, "")); len(ids) != 3 {
		t.Fatalf("system admin lists %v", ids)
	}

	// A partner user limited to selected organizations sees only those.
	_, limited := e.CreateUser("limited@gale.test", access.LevelPartner, alpha.PartnerID, "", access.RolePartnerTechnician)
	if _, err := e.App.DB.SQL.Exec(`UPDATE users SET org_access = 'selected' WHERE email = 'limited@gale.test'`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.App.DB.SQL.Exec(`INSERT INTO user_org_access (user_id, org_id) SELECT id, $1 FROM users WHERE email = 'limited@gale.test'`, org2); err != nil {
		t.Fatal(err)
	}
	if ids := listIDs(list(e, limited, "")); strings.Join(ids, ",") != ka2.ID {
		t.Fatalf("limited partner user lists %v, want only %s", ids, ka2.ID)
	}
	expectError(t, e.Do(limited, "GET", keysPath+"/"+ka.ID, nil), http.StatusNotFound, apperr.CodeNotFound)
	// Its partner has two organizations, so it names one; one it cannot reach is refused.
	expectError(t, e.Do(limited, "POST", keysPath, map[string]any{"name": "k", "orgId": alpha.OrgID}), http.StatusBadRequest, apperr.CodeValidation)
	create(e, limited, map[string]any{"name": "limited key", "orgId": org2})

	// Viewers read but do not write.
	_, viewer := e.CreateUser("viewer@gale.test", access.LevelOrganization, alpha.PartnerID, alpha.OrgID, access.RoleOrgViewer)
	if ids := listIDs(list(e, viewer, "")); strings.Join(ids, ",") != ka.ID {
		t.Fatalf("viewer lists %v", ids)
	}
	get(e, viewer, ka.ID)
	expectError(t, e.Do(viewer, "POST", keysPath, map[string]any{"name": "nope"}), http.StatusForbidden, apperr.CodeForbidden)
	expectError(t, e.Do(viewer, "POST", keysPath+"/"+ka.ID+"/rotate", nil), http.StatusForbidden, apperr.CodeForbidden)
	expectError(t, e.Do(viewer, "DELETE", keysPath+"/"+ka.ID, nil), http.StatusForbidden, apperr.CodeForbidden)
	// A technician may.
	_, tech := e.CreateUser("tech@gale.test", access.LevelOrganization, alpha.PartnerID, alpha.OrgID, access.RoleOrgTechnician)
	create(e, tech, map[string]any{"name": "tech key"})
	expectError(t, e.Do(apptest.Anonymous, "GET", keysPath, nil), http.StatusUnauthorized, apperr.CodeUnauthorized)
}
