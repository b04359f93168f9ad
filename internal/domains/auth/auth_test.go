package auth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/auth"

	"github.com/pquerna/otp/totp"

	"gale/internal/platform/config"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

const loginPath = "/api/v1/auth/login"

type session struct {
	AccessToken      string `json:"accessToken"`
	RefreshToken     string `json:"refreshToken"`
	ExpiresInSeconds int    `json:"expiresInSeconds"`
	MFARequired      bool   `json:"mfaRequired"`
	TempToken        string `json:"tempToken"`
	User             struct {
		ID    string `json:"id"`
		Email string `json:"email"`
	} `json:"user"`
}

func login(e *apptest.Env, email, password string) (*apptest.Response, session) {
	r := e.Do(apptest.Anonymous, "POST", loginPath, map[string]string{"email": email, "password": password})
	var s session
	if r.Status == http.StatusOK {
		r.JSON(e.T, &s)
	}
	return r, s
}

func claims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLoginReturnsTokensAndUser(t *testing.T) {
	e := apptest.New(t)
	r, s := login(e, " ADMIN@gale.test ", apptest.AdminPassword)
	if r.Status != 200 || s.AccessToken == "" || s.RefreshToken == "" || s.User.Email != apptest.AdminEmail || s.MFARequired {
		t.Fatalf("login = %d %s", r.Status, r.Body)
	}
	c := claims(t, s.AccessToken)
	exp, iat := c["exp"].(float64), c["iat"].(float64)
	if exp-iat != 900 || s.ExpiresInSeconds != 900 {
		t.Errorf("access token lives %vs (expiresInSeconds %d), want 900", exp-iat, s.ExpiresInSeconds)
	}
	if c["mfa"] != false || c["scope"] != "system" || c["type"] != "access" {
		t.Errorf("claims = %v", c)
	}
	e.Must(200, apptest.Bearer(s.AccessToken), "GET", "/api/v1/orgs/partners", nil)
}

func TestLoginFailuresLookAlike(t *testing.T) {
	e := apptest.New(t)
	wrong, _ := login(e, apptest.AdminEmail, "Wrong-Passw0rd")
	unknown, _ := login(e, "nobody@gale.test", "Wrong-Passw0rd")
	if wrong.Status != 401 || unknown.Status != 401 || string(wrong.Body) != string(unknown.Body) {
		t.Fatalf("wrong password: %d %s; unknown email: %d %s; want identical 401s", wrong.Status, wrong.Body, unknown.Status, unknown.Body)
	}
}

func TestLoginTakesAtLeastTheFloor(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.LoginResponseFloor = 150 * time.Millisecond })
	for _, email := range []string{apptest.AdminEmail, "nobody@gale.test"} {
		start := time.Now()
		login(e, email, "Wrong-Passw0rd")
		if d := time.Since(start); d < 150*time.Millisecond {
			t.Errorf("failed login of %s answered in %s, before the 150ms floor", email, d)
		}
	}
}

func TestFailedSignInsAreSecurityEvents(t *testing.T) {
	e := apptest.New(t)
	login(e, "nobody@gale.test", "x")
	var n int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE action = 'auth.login' AND result = 'failure'
		AND category = 'security' AND actor_email = 'nobody@gale.test' AND ip IS NOT NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d failed sign-in events, want 1", n)
	}
}

func TestAccountLocksAfterFiveFailuresAndUnlocksByItself(t *testing.T) {
	e := apptest.New(t)
	for i := 0; i < 5; i++ {
		if r, _ := login(e, apptest.AdminEmail, "Wrong-Passw0rd"); r.Status != 401 {
			t.Fatalf("failure %d: %d", i+1, r.Status)
		}
	}
	// The per-account attempt budget would also refuse now; forget it to see the lock itself.
	clear := func(pattern string) {
		if _, err := e.App.DB.SQL.Exec(`DELETE FROM rate_limits WHERE key LIKE $1`, pattern); err != nil {
			t.Fatal(err)
		}
	}
	clear("login:account:%")
	r, _ := login(e, apptest.AdminEmail, apptest.AdminPassword)
	if r.Status != 429 || r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "locked") {
		t.Fatalf("correct password while locked = %d %s (Retry-After %q), want 429 locked", r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	clear("login:locked:%") // the lock's window has passed
	if r, _ := login(e, apptest.AdminEmail, apptest.AdminPassword); r.Status != 200 {
		t.Fatalf("after the lock expired = %d %s, want 200", r.Status, r.Body)
	}
}

func TestLoginRateLimitPerIPAndPerAccount(t *testing.T) {
	e := apptest.New(t)
	for i := 0; i < 5; i++ {
		login(e, "someone@gale.test", "x")
	}
	if r, _ := login(e, "someone@gale.test", "x"); r.Status != 429 || r.ErrorCode() != "RATE_LIMITED" {
		t.Fatalf("6th attempt on one account = %d %s, want 429", r.Status, r.Body)
	}
	for i := 0; i < 4; i++ {
		login(e, "other@gale.test", "x")
	}
	r, _ := login(e, "third@gale.test", "x")
	if r.Status != 429 || r.Header.Get("Retry-After") == "" {
		t.Fatalf("11th attempt from one IP = %d %s, want 429 with Retry-After", r.Status, r.Body)
	}
}

func TestRateLimitCountersAreShared(t *testing.T) {
	// Two servers on one database model two nodes: attempts on one count on the other.
	e := apptest.New(t)
	other := e.SecondNode()
	for i := 0; i < 5; i++ {
		login(e, "shared@gale.test", "x")
	}
	if r, _ := login(other, "shared@gale.test", "x"); r.Status != 429 {
		t.Fatalf("6th attempt on the other node = %d, want 429", r.Status)
	}
}

func TestRefreshRotatesAndReuseEndsTheFamily(t *testing.T) {
	e := apptest.New(t)
	_, s := login(e, apptest.AdminEmail, apptest.AdminPassword)
	r := e.Must(200, apptest.Anonymous, "POST", "/api/v1/auth/refresh", map[string]string{"refreshToken": s.RefreshToken})
	var next session
	r.JSON(t, &next)
	if next.RefreshToken == "" || next.RefreshToken == s.RefreshToken || next.AccessToken == "" {
		t.Fatalf("refresh = %s", r.Body)
	}
	e.Must(200, apptest.Bearer(next.AccessToken), "GET", "/api/v1/orgs/partners", nil)
	// Replaying the rotated token is taken as theft: the whole family ends.
	if r := e.Do(apptest.Anonymous, "POST", "/api/v1/auth/refresh", map[string]string{"refreshToken": s.RefreshToken}); r.Status != 401 {
		t.Fatalf("replayed refresh token = %d, want 401", r.Status)
	}
	if r := e.Do(apptest.Anonymous, "POST", "/api/v1/auth/refresh", map[string]string{"refreshToken": next.RefreshToken}); r.Status != 401 {
		t.Fatalf("newest token of a revoked family = %d, want 401", r.Status)
	}
	if r := e.Do(apptest.Bearer(next.AccessToken), "GET", "/api/v1/orgs/partners", nil); r.Status != 401 {
		t.Fatalf("access token of a revoked family = %d, want 401", r.Status)
	}
	if r := e.Do(apptest.Anonymous, "POST", "/api/v1/auth/refresh", map[string]string{"refreshToken": "grt_nonsense"}); r.Status != 401 {
		t.Fatalf("unknown refresh token = %d, want 401", r.Status)
	}
}

func TestLogoutRevokesTheSession(t *testing.T) {
	e := apptest.New(t)
	_, s := login(e, apptest.AdminEmail, apptest.AdminPassword)
	_, other := login(e, apptest.AdminEmail, apptest.AdminPassword)
	e.Must(204, apptest.Bearer(s.AccessToken), "POST", "/api/v1/auth/logout", nil)
	if r := e.Do(apptest.Bearer(s.AccessToken), "GET", "/api/v1/orgs/partners", nil); r.Status != 401 {
		t.Errorf("access token after logout = %d, want 401", r.Status)
	}
	if r := e.Do(apptest.Anonymous, "POST", "/api/v1/auth/refresh", map[string]string{"refreshToken": s.RefreshToken}); r.Status != 401 {
		t.Errorf("refresh after logout = %d, want 401", r.Status)
	}
	// Another session of the same user is untouched; logging out by refresh token works too.
	e.Must(200, apptest.Bearer(other.AccessToken), "GET", "/api/v1/orgs/partners", nil)
	e.Must(204, apptest.Anonymous, "POST", "/api/v1/auth/logout", map[string]string{"refreshToken": other.RefreshToken})
	if r := e.Do(apptest.Bearer(other.AccessToken), "GET", "/api/v1/orgs/partners", nil); r.Status != 401 {
		t.Errorf("access token after logout by refresh token = %d, want 401", r.Status)
	}
}

func TestChangePasswordEndsEverySession(t *testing.T) {
	e := apptest.New(t)
	_, s := login(e, apptest.AdminEmail, apptest.AdminPassword)
	c := apptest.Bearer(s.AccessToken)
	if r := e.Do(c, "POST", "/api/v1/auth/change-password", map[string]string{"currentPassword": apptest.AdminPassword, "newPassword": "short"}); r.Status != 400 {
		t.Fatalf("weak password = %d, want 400", r.Status)
	}
	e.Must(204, c, "POST", "/api/v1/auth/change-password", map[string]string{"currentPassword": apptest.AdminPassword, "newPassword": "Brand-New-Passw0rd"})
	if r := e.Do(c, "GET", "/api/v1/orgs/partners", nil); r.Status != 401 {
		t.Errorf("old access token = %d, want 401", r.Status)
	}
	if r, _ := login(e, apptest.AdminEmail, apptest.AdminPassword); r.Status != 401 {
		t.Errorf("old password = %d, want 401", r.Status)
	}
	if r, _ := login(e, apptest.AdminEmail, "Brand-New-Passw0rd"); r.Status != 200 {
		t.Errorf("new password = %d, want 200", r.Status)
	}
}

func TestPasswordResetLinkWithoutSMTP(t *testing.T) {
	e := apptest.New(t)
	// Forgot-password answers the same for known and unknown addresses.
	a := e.Must(202, apptest.Anonymous, "POST", "/api/v1/auth/forgot-password", map[string]string{"email": apptest.AdminEmail})
	b := e.Must(202, apptest.Anonymous, "POST", "/api/v1/auth/forgot-password", map[string]string{"email": "nobody@gale.test"})
	if string(a.Body) != string(b.Body) {
		t.Fatalf("forgot-password answers differ: %s vs %s", a.Body, b.Body)
	}
	var id string
	if err := e.App.DB.SQL.QueryRow(`SELECT id FROM users WHERE email = $1`, apptest.AdminEmail).Scan(&id); err != nil {
		t.Fatal(err)
	}
	link, err := app.Service[*auth.Service](e.App).IssuePasswordReset(context.Background(), id)
	if err != nil || !strings.Contains(link, "/reset-password?token=") {
		t.Fatalf("IssuePasswordReset = %q, %v; want a link when SMTP is not configured", link, err)
	}
	token := link[strings.Index(link, "token=")+6:]
	e.Must(204, apptest.Anonymous, "POST", "/api/v1/auth/reset-password", map[string]string{"token": token, "password": "Reset-Passw0rd"})
	if r := e.Do(apptest.Anonymous, "POST", "/api/v1/auth/reset-password", map[string]string{"token": token, "password": "Again-Passw0rd"}); r.Status != 400 {
		t.Errorf("second use of a reset token = %d, want 400", r.Status)
	}
	if r, _ := login(e, apptest.AdminEmail, "Reset-Passw0rd"); r.Status != 200 {
		t.Errorf("login with the reset password = %d", r.Status)
	}
}

// totpCodes returns codes for the previous, current and next 30-second step, waiting first
// if a step boundary is about to pass so the three stay valid for the test's duration.
func totpCodes(t *testing.T, secret string) [3]string {
	t.Helper()
	if rem := 30 - time.Now().Unix()%30; rem < 5 {
		time.Sleep(time.Duration(rem+1) * time.Second)
	}
	now := time.Now()
	var out [3]string
	for i, d := range []time.Duration{-30 * time.Second, 0, 30 * time.Second} {
		c, err := totp.GenerateCode(secret, now.Add(d))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = c
	}
	return out
}

func enableMFA(t *testing.T, e *apptest.Env, c apptest.Caller, password string) (secret string, codes [3]string, recovery []string) {
	t.Helper()
	if r := e.Do(c, "POST", "/api/v1/auth/mfa/setup", map[string]string{"currentPassword": "Wrong-Passw0rd"}); r.Status != 401 {
		t.Fatalf("setup with a wrong password = %d, want 401", r.Status)
	}
	var setup struct {
		Secret     string `json:"secret"`
		OTPAuthURL string `json:"otpAuthUrl"`
	}
	e.Must(200, c, "POST", "/api/v1/auth/mfa/setup", map[string]string{"currentPassword": password}).JSON(t, &setup)
	if setup.Secret == "" || !strings.HasPrefix(setup.OTPAuthURL, "otpauth://totp/") {
		t.Fatalf("setup = %+v", setup)
	}
	codes = totpCodes(t, setup.Secret)
	if r := e.Do(c, "POST", "/api/v1/auth/mfa/enable", map[string]string{"code": "000000", "currentPassword": password}); r.Status != 401 {
		t.Fatalf("enable with a wrong code = %d, want 401", r.Status)
	}
	var enabled struct {
		RecoveryCodes []string `json:"recoveryCodes"`
	}
	e.Must(200, c, "POST", "/api/v1/auth/mfa/enable", map[string]string{"code": codes[0], "currentPassword": password}).JSON(t, &enabled)
	if len(enabled.RecoveryCodes) != 10 {
		t.Fatalf("%d recovery codes, want 10", len(enabled.RecoveryCodes))
	}
	return setup.Secret, codes, enabled.RecoveryCodes
}

func TestMFALoginVerifyReplayAndRecovery(t *testing.T) {
	e := apptest.New(t)
	_, s := login(e, apptest.AdminEmail, apptest.AdminPassword)
	_, codes, recovery := enableMFA(t, e, apptest.Bearer(s.AccessToken), apptest.AdminPassword)

	r, challenge := login(e, apptest.AdminEmail, apptest.AdminPassword)
	if r.Status != 200 || !challenge.MFARequired || challenge.TempToken == "" || challenge.AccessToken != "" || challenge.RefreshToken != "" {
		t.Fatalf("login with MFA = %d %s; want mfaRequired, tempToken and no tokens", r.Status, r.Body)
	}
	// The code used to enable MFA (an older step) cannot be used again.
	if r := e.Do(apptest.Anonymous, "POST", "/api/v1/auth/mfa/verify", map[string]string{"tempToken": challenge.TempToken, "code": codes[0]}); r.Status != 401 {
		t.Fatalf("reused TOTP code = %d, want 401", r.Status)
	}
	var done session
	e.Must(200, apptest.Anonymous, "POST", "/api/v1/auth/mfa/verify", map[string]string{"tempToken": challenge.TempToken, "code": codes[1]}).JSON(t, &done)
	if claims(t, done.AccessToken)["mfa"] != true {
		t.Fatalf("verified session claims = %v, want mfa true", claims(t, done.AccessToken))
	}
	_, again := login(e, apptest.AdminEmail, apptest.AdminPassword)
	if r := e.Do(apptest.Anonymous, "POST", "/api/v1/auth/mfa/verify", map[string]string{"tempToken": again.TempToken, "code": codes[1]}); r.Status != 401 {
		t.Fatalf("same TOTP code twice = %d, want 401", r.Status)
	}
	e.Must(200, apptest.Anonymous, "POST", "/api/v1/auth/mfa/verify", map[string]string{"tempToken": again.TempToken, "code": recovery[0]})
	_, third := login(e, apptest.AdminEmail, apptest.AdminPassword)
	if r := e.Do(apptest.Anonymous, "POST", "/api/v1/auth/mfa/verify", map[string]string{"tempToken": third.TempToken, "code": recovery[0]}); r.Status != 401 {
		t.Fatalf("recovery code twice = %d, want 401", r.Status)
	}
	if r := e.Do(apptest.Anonymous, "POST", "/api/v1/auth/mfa/verify", map[string]string{"tempToken": "not-a-token", "code": codes[2]}); r.Status != 401 {
		t.Fatalf("bad tempToken = %d, want 401", r.Status)
	}
	// An access token is not a tempToken.
	if r := e.Do(apptest.Anonymous, "POST", "/api/v1/auth/mfa/verify", map[string]string{"tempToken": done.AccessToken, "code": codes[2]}); r.Status != 401 {
		t.Fatalf("access token as tempToken = %d, want 401", r.Status)
	}
}

func TestMFAVerifyIsRateLimited(t *testing.T) {
	e := apptest.New(t)
	_, s := login(e, apptest.AdminEmail, apptest.AdminPassword)
	enableMFA(t, e, apptest.Bearer(s.AccessToken), apptest.AdminPassword)
	_, challenge := login(e, apptest.AdminEmail, apptest.AdminPassword)
	for i := 0; i < 5; i++ {
		e.Do(apptest.Anonymous, "POST", "/api/v1/auth/mfa/verify", map[string]string{"tempToken": challenge.TempToken, "code": "000000"})
	}
	r := e.Do(apptest.Anonymous, "POST", "/api/v1/auth/mfa/verify", map[string]string{"tempToken": challenge.TempToken, "code": "000000"})
	if r.Status != 429 || r.Header.Get("Retry-After") == "" {
		t.Fatalf("6th verify = %d %s, want 429 with Retry-After", r.Status, r.Body)
	}
}

func TestMFAGateAndStepUp(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.Enable2FA = true })
	_, s := login(e, apptest.AdminEmail, apptest.AdminPassword)
	c := apptest.Bearer(s.AccessToken)
	r := e.Do(c, "POST", "/api/v1/orgs/partners", map[string]string{"name": "Gated"})
	if r.Status != 403 || !strings.Contains(string(r.Body), `"message":"MFA required"`) {
		t.Fatalf("gated write without MFA = %d %s, want 403 MFA required", r.Status, r.Body)
	}
	e.Must(200, c, "GET", "/api/v1/orgs/partners", nil) // reads are not gated
	_, codes, _ := enableMFA(t, e, c, apptest.AdminPassword)
	var up session
	e.Must(200, c, "POST", "/api/v1/auth/mfa/step-up", map[string]string{"code": codes[1]}).JSON(t, &up)
	if claims(t, up.AccessToken)["mfa"] != true || claims(t, up.AccessToken)["sid"] != claims(t, s.AccessToken)["sid"] {
		t.Fatalf("step-up token claims = %v", claims(t, up.AccessToken))
	}
	e.Must(201, apptest.Bearer(up.AccessToken), "POST", "/api/v1/orgs/partners", map[string]string{"name": "Gated"})
	// The session's refresh token now yields MFA-completed tokens.
	var refreshed session
	e.Must(200, apptest.Anonymous, "POST", "/api/v1/auth/refresh", map[string]string{"refreshToken": s.RefreshToken}).JSON(t, &refreshed)
	if claims(t, refreshed.AccessToken)["mfa"] != true {
		t.Fatalf("refreshed after step-up: mfa = %v, want true", claims(t, refreshed.AccessToken)["mfa"])
	}
	if r := e.Do(c, "POST", "/api/v1/auth/mfa/step-up", map[string]string{"code": codes[1]}); r.Status != 401 {
		t.Fatalf("step-up with a used code = %d, want 401", r.Status)
	}
}

func TestMFADisableAndRecoveryCodeRegeneration(t *testing.T) {
	e := apptest.New(t)
	_, s := login(e, apptest.AdminEmail, apptest.AdminPassword)
	c := apptest.Bearer(s.AccessToken)
	_, codes, recovery := enableMFA(t, e, c, apptest.AdminPassword)
	var regen struct {
		RecoveryCodes []string `json:"recoveryCodes"`
	}
	e.Must(200, c, "POST", "/api/v1/auth/mfa/recovery-codes", map[string]string{"currentPassword": apptest.AdminPassword}).JSON(t, &regen)
	if len(regen.RecoveryCodes) != 10 || regen.RecoveryCodes[0] == recovery[0] {
		t.Fatalf("regenerated codes = %v", regen.RecoveryCodes)
	}
	if r := e.Do(c, "POST", "/api/v1/auth/mfa/disable", map[string]string{"code": recovery[0], "currentPassword": apptest.AdminPassword}); r.Status != 401 {
		t.Fatalf("disable with a replaced recovery code = %d, want 401", r.Status)
	}
	e.Must(204, c, "POST", "/api/v1/auth/mfa/disable", map[string]string{"code": codes[1], "currentPassword": apptest.AdminPassword})
	if r, sess := login(e, apptest.AdminEmail, apptest.AdminPassword); r.Status != 200 || sess.MFARequired || sess.AccessToken == "" {
		t.Fatalf("login after disabling MFA = %d %s", r.Status, r.Body)
	}
	var secret, stored *string
	if err := e.App.DB.SQL.QueryRow(`SELECT mfa_secret, mfa_pending_secret FROM users WHERE email = $1`, apptest.AdminEmail).Scan(&secret, &stored); err != nil {
		t.Fatal(err)
	}
	if secret != nil || stored != nil {
		t.Error("MFA secrets kept after disabling")
	}
}

func TestMFASecretIsEncryptedAtRest(t *testing.T) {
	e := apptest.New(t)
	_, s := login(e, apptest.AdminEmail, apptest.AdminPassword)
	var setup struct {
		Secret string `json:"secret"`
	}
	e.Must(200, apptest.Bearer(s.AccessToken), "POST", "/api/v1/auth/mfa/setup", map[string]string{"currentPassword": apptest.AdminPassword}).JSON(t, &setup)
	var stored string
	if err := e.App.DB.SQL.QueryRow(`SELECT mfa_pending_secret FROM users WHERE email = $1`, apptest.AdminEmail).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored == "" || strings.Contains(stored, setup.Secret) {
		t.Fatalf("stored secret %q is not sealed", stored)
	}
}

func TestPasswordsAreArgon2id(t *testing.T) {
	e := apptest.New(t)
	var hash string
	if err := e.App.DB.SQL.QueryRow(`SELECT password_hash FROM users WHERE email = $1`, apptest.AdminEmail).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$v=19$") || strings.Contains(hash, apptest.AdminPassword) {
		t.Fatalf("password hash %q", hash)
	}
}

func TestCleanupPurgesExpiredTokens(t *testing.T) {
	e := apptest.New(t)
	_, s := login(e, apptest.AdminEmail, apptest.AdminPassword)
	past := store.Now().Add(-time.Hour)
	if _, err := e.App.DB.SQL.Exec(`UPDATE refresh_tokens SET expires_at = $1, family_expires_at = $1`, past); err != nil {
		t.Fatal(err)
	}
	if err := e.App.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM refresh_tokens`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d refresh tokens left after cleanup, want 0", n)
	}
	if r := e.Do(apptest.Anonymous, "POST", "/api/v1/auth/refresh", map[string]string{"refreshToken": s.RefreshToken}); r.Status != 401 {
		t.Fatalf("purged refresh token = %d, want 401", r.Status)
	}
}

// Only replaying a rotated token is treated as theft; a token of a session that was logged
// out is merely refused.
func TestReuseIsRecordedOnlyForRotatedTokens(t *testing.T) {
	e := apptest.New(t)
	_, s := login(e, apptest.AdminEmail, apptest.AdminPassword)
	e.Must(204, apptest.Anonymous, "POST", "/api/v1/auth/logout", map[string]string{"refreshToken": s.RefreshToken})
	if r := e.Do(apptest.Anonymous, "POST", "/api/v1/auth/refresh", map[string]string{"refreshToken": s.RefreshToken}); r.Status != 401 {
		t.Fatalf("refresh after logout = %d, want 401", r.Status)
	}
	count := func() int {
		var n int
		if err := e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE action = 'auth.session_revoked'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("%d reuse events after a logout, want 0", n)
	}
	_, s2 := login(e, apptest.AdminEmail, apptest.AdminPassword)
	e.Must(200, apptest.Anonymous, "POST", "/api/v1/auth/refresh", map[string]string{"refreshToken": s2.RefreshToken})
	e.Do(apptest.Anonymous, "POST", "/api/v1/auth/refresh", map[string]string{"refreshToken": s2.RefreshToken})
	if n := count(); n != 1 {
		t.Fatalf("%d reuse events after replaying a rotated token, want 1", n)
	}
}

// Re-checking a password is for a signed-in user; an API key acting for that user cannot
// manage the user's MFA or password.
func TestAPIKeyCannotManageMFAOrPassword(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	var key struct {
		Key string `json:"key"`
	}
	e.Must(201, admin, "POST", "/api/v1/api-keys", map[string]any{"name": "k", "permissions": []string{"*:read"}}).JSON(t, &key)
	c := apptest.Key(key.Key)
	for _, path := range []string{"/api/v1/auth/mfa/setup", "/api/v1/auth/mfa/recovery-codes"} {
		if r := e.Do(c, "POST", path, map[string]string{"currentPassword": apptest.AdminPassword}); r.Status != 403 {
			t.Errorf("API key on %s = %d, want 403", path, r.Status)
		}
	}
	if r := e.Do(c, "POST", "/api/v1/auth/change-password", map[string]string{"currentPassword": apptest.AdminPassword,
		"newPassword": "Other-Passw0rd"}); r.Status != 403 {
		t.Errorf("API key changing the password = %d, want 403", r.Status)
	}
}
