package auth

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"gale/internal/domains/identity"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

func jwtSubject(id string) jwt.RegisteredClaims { return jwt.RegisteredClaims{Subject: id} }

// ServicePrincipalKeyPrefix marks partner-API keys; they work only on /partner-api.
const ServicePrincipalKeyPrefix = "svc_sp_"

// Authenticate resolves the request's credential: X-API-Key, else Authorization: Bearer.
func (s *Service) Authenticate(ctx context.Context, r *http.Request) (*access.Principal, error) {
	if key := r.Header.Get("X-API-Key"); key != "" {
		if strings.HasPrefix(key, ServicePrincipalKeyPrefix) {
			return nil, apperr.Unauthorized("service-principal keys work only on /partner-api routes")
		}
		if s.apiKeys == nil {
			return nil, apperr.Unauthorized("invalid API key")
		}
		return s.apiKeys.Verify(ctx, key)
	}
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || raw == "" {
		return nil, apperr.Unauthorized("missing credential: send Authorization: Bearer <accessToken> or X-API-Key")
	}
	return s.principalFromJWT(ctx, raw)
}

func (s *Service) principalFromJWT(ctx context.Context, raw string) (*access.Principal, error) {
	c, err := s.parse(raw, tokenAccess)
	if err != nil {
		return nil, apperr.Unauthorized("invalid or expired access token")
	}
	now := s.clock.Now()
	if p, ok := s.principals.get(raw, now); ok {
		return p, nil
	}
	generation := s.principals.Generation()
	cred, err := loadCredential(ctx, s.db, `u.id = $1 AND EXISTS (SELECT 1 FROM refresh_tokens t
		WHERE t.family_id = $2 AND t.revoked_at IS NULL)`, c.Subject, c.SessionID)
	if err != nil {
		return nil, err
	}
	if cred == nil || cred.Status != identity.StatusActive || cred.TokenEpoch != c.Epoch {
		return nil, apperr.Unauthorized("session ended; sign in again")
	}
	p, err := UserPrincipal(ctx, s.db, cred)
	if err != nil {
		return nil, err
	}
	p.MFA, p.SessionID = c.MFA, c.SessionID
	s.principals.put(raw, p, generation, now)
	return p, nil
}

// UserPrincipal builds the principal of an active user: scope from its level and
// organization access, permissions from its role.
func UserPrincipal(ctx context.Context, q store.Querier, c *credentialRow) (*access.Principal, error) {
	var perms access.Permissions
	if err := json.Unmarshal([]byte(c.Permissions), &perms); err != nil {
		return nil, err
	}
	scope := access.Scope{Level: c.Scope, PartnerID: c.PartnerID.String, OrgID: c.OrgID.String}
	if c.Scope == access.LevelPartner {
		switch c.OrgAccess {
		case identity.OrgAccessSelected:
			ids, err := identity.SelectedOrgIDs(ctx, q, c.ID)
			if err != nil {
				return nil, err
			}
			scope.OrgIDs = ids
		case identity.OrgAccessNone:
			scope.OrgIDs = []string{}
		}
	}
	return &access.Principal{Kind: access.ActorUser, ID: c.ID, UserID: c.ID, Email: c.Email, Name: c.Name,
		Scope: scope, RoleID: c.RoleID, Permissions: perms}, nil
}

// PrincipalForUser loads the principal of an active user by ID (API keys act with their
// creator's reach); nil when the user is missing or not active.
func PrincipalForUser(ctx context.Context, q store.Querier, userID string) (*access.Principal, error) {
	c, err := loadCredential(ctx, q, "u.id = $1", userID)
	if err != nil || c == nil || c.Status != identity.StatusActive {
		return nil, err
	}
	return UserPrincipal(ctx, q, c)
}

// PrincipalForUser loads the principal of an active user by ID; nil when the user is missing
// or not active.
func (s *Service) PrincipalForUser(ctx context.Context, userID string) (*access.Principal, error) {
	return PrincipalForUser(ctx, s.db, userID)
}
