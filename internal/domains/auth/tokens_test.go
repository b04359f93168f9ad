package auth

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestRememberedTokensStillExpire: a token whose claims were verified once is refused once it
// expires, and is never accepted as a token of another type.
func TestRememberedTokensStillExpire(t *testing.T) {
	s := &Service{opts: Options{JWTSecret: []byte("0123456789abcdef0123456789abcdef")}}
	raw, err := s.sign(Claims{Type: tokenAccess, Epoch: 1, RegisteredClaims: jwtSubject("user-1")}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // verified, then remembered
		if c, err := s.parse(raw, tokenAccess); err != nil || c.Subject != "user-1" {
			t.Fatalf("parse = %+v, %v; want the claims", c, err)
		}
	}
	if _, err := s.parse(raw, tokenMFAPending); err == nil {
		t.Fatal("an access token passed as an MFA token")
	}
	s.verified.get(raw).ExpiresAt.Time = time.Now().Add(-time.Second)
	if _, err := s.parse(raw, tokenAccess); err == nil {
		t.Fatal("a remembered token was accepted after it expired")
	}
}

// TestTokensIssuedInTheFutureAreRefused: an issue time beyond the clock skew, or none, is
// refused; one a few seconds ahead (another node's clock) is accepted.
func TestTokensIssuedInTheFutureAreRefused(t *testing.T) {
	s := &Service{opts: Options{JWTSecret: []byte("0123456789abcdef0123456789abcdef")}}
	signAt := func(issued *jwt.NumericDate) string {
		t.Helper()
		c := Claims{Type: tokenAccess, RegisteredClaims: jwtSubject("user-1")}
		c.Issuer, c.IssuedAt, c.ExpiresAt = issuer, issued, jwt.NewNumericDate(time.Now().Add(2*time.Hour))
		raw, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.opts.JWTSecret)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	for _, tc := range []struct {
		name   string
		issued *jwt.NumericDate
		ok     bool
	}{
		{"now", jwt.NewNumericDate(time.Now()), true},
		{"within the skew", jwt.NewNumericDate(time.Now().Add(30 * time.Second)), true},
		{"an hour ahead", jwt.NewNumericDate(time.Now().Add(time.Hour)), false},
		{"without iat", nil, false},
	} {
		if _, err := s.parse(signAt(tc.issued), tokenAccess); (err == nil) != tc.ok {
			t.Errorf("%s: parse error = %v, want accepted %v", tc.name, err, tc.ok)
		}
	}
}
