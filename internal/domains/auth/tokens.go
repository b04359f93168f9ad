package auth

import (
	"errors"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"gale/internal/platform/store"
)

// Token types carried in the "type" claim, so a token of one kind never passes as another.
const (
	tokenAccess     = "access"
	tokenMFAPending = "mfa_pending"
	issuer          = "gale"
)

// Claims are the JWT claims of Gale's tokens. Permissions are not carried: they are
// resolved per request, so a role change takes effect at once.
type Claims struct {
	Email     string `json:"email,omitempty"`
	Scope     string `json:"scope,omitempty"`
	PartnerID string `json:"partnerId,omitempty"`
	OrgID     string `json:"orgId,omitempty"`
	RoleID    string `json:"roleId,omitempty"`
	MFA       bool   `json:"mfa"`
	Type      string `json:"type"`
	// SessionID is the refresh-token family; logout revokes it and with it the access token.
	SessionID string `json:"sid,omitempty"`
	// Epoch is the user's token epoch; a password change or a disabled account bumps it and
	// so refuses every token issued before.
	Epoch int `json:"ep"`
	jwt.RegisteredClaims
}

// Tokens live on the wall clock, not the service's clock: the JWT library checks expiry
// against it, and a token must not expire because the server's rules were moved in time.
func (s *Service) sign(c Claims, ttl time.Duration) (string, error) {
	now := time.Now()
	c.Issuer = issuer
	c.IssuedAt = jwt.NewNumericDate(now)
	c.ExpiresAt = jwt.NewNumericDate(now.Add(ttl))
	c.ID = store.NewID()
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.opts.JWTSecret)
}

var errBadToken = errors.New("invalid token")

// maxClockSkew is how far in the future a token's issue time may lie, for nodes whose clocks
// differ a little; a token issued later than that was not issued by a node of this server.
const maxClockSkew = time.Minute

// parse verifies signature, expiry, issue time, issuer and type.
func (s *Service) parse(raw, wantType string) (*Claims, error) {
	if c := s.verified.get(raw); c != nil {
		if c.Type != wantType || !time.Now().Before(c.ExpiresAt.Time) {
			return nil, errBadToken
		}
		return c, nil
	}
	var c Claims
	_, err := jwt.ParseWithClaims(raw, &c, func(*jwt.Token) (any, error) { return s.opts.JWTSecret, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer(issuer), jwt.WithExpirationRequired())
	if err != nil || c.Type != wantType || c.Subject == "" || c.IssuedAt == nil || c.IssuedAt.After(time.Now().Add(maxClockSkew)) {
		return nil, errBadToken
	}
	s.verified.put(raw, &c)
	return &c, nil
}

// verifiedTokens remembers the claims of tokens whose signature checked out, so a client
// sending the same access token with every request costs one verification and decoding of
// its claims, not one per request. It holds nothing a database lookup would say: whether the
// session and the user are still live is principalCache's business. Claims are shared
// read-only.
type verifiedTokens struct {
	mu     sync.RWMutex
	claims map[string]*Claims
}

// maxVerifiedTokens bounds the memory: past it the set starts over.
const maxVerifiedTokens = 10_000

func (v *verifiedTokens) get(raw string) *Claims {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.claims[raw]
}

func (v *verifiedTokens) put(raw string, c *Claims) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.claims == nil || len(v.claims) >= maxVerifiedTokens {
		v.claims = make(map[string]*Claims)
	}
	v.claims[raw] = c
}
