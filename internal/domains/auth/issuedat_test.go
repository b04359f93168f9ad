package auth_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"gale/internal/testkit/apptest"
)

// TestAccessTokenIssuedInTheFutureIsUnauthorized: a correctly signed access token whose iat
// lies an hour ahead is answered 401, while the same claims issued now pass.
func TestAccessTokenIssuedInTheFutureIsUnauthorized(t *testing.T) {
	e := apptest.New(t)
	token := e.Admin().Token
	claims := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(token, claims); err != nil {
		t.Fatal(err)
	}
	resign := func(issued time.Time) apptest.Caller {
		claims["iat"] = issued.Unix()
		raw, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(e.App.Config.JWTSecret)
		if err != nil {
			t.Fatal(err)
		}
		return apptest.Bearer(raw)
	}
	e.Must(http.StatusOK, resign(time.Now()), "GET", "/api/v1/users/me", nil)
	if r := e.Do(resign(time.Now().Add(time.Hour)), "GET", "/api/v1/users/me", nil); r.Status != http.StatusUnauthorized || r.ErrorCode() != "UNAUTHORIZED" {
		t.Fatalf("token issued an hour ahead = %d %s, want 401", r.Status, r.Body)
	}
}
