package auth

import (
	"testing"
	"time"
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
