package partnerapi

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
)

// lastUsedEvery is how often, at most, a key's last_used_at is written.
const lastUsedEvery = time.Minute

// credential is a service-principal key with its principal.
type credential struct {
	ServicePrincipal
	KeyID       string
	KeyExpires  *time.Time
	KeyRevoked  bool
	KeyRate     *int
	KeyLastUsed *time.Time
}

// loadCredential reads the key matching cond ("k.key_hash = $1" or "k.id = $1") with its
// principal; nil when there is none, or its partner was deleted.
func (s *Service) loadCredential(ctx context.Context, q store.Querier, cond string, arg string) (*credential, error) {
	var c credential
	var expires, revoked, lastUsed sql.NullTime
	var rate sql.NullInt64
	p, err := s.scanPrincipal(store.ScanAlso{Row: q.QueryRowContext(ctx, `SELECT `+principalColumns+`, k.id, k.expires_at, k.revoked_at,
		k.rate_limit, k.last_used_at FROM service_principal_keys k JOIN service_principals p ON p.id = k.principal_id
		WHERE `+tenancy.LivePartner("p.partner_id")+` AND `+cond, arg),
		Dest: []any{&c.KeyID, &expires, &revoked, &rate, &lastUsed}})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load service principal key: %w", err)
	}
	c.ServicePrincipal = p
	c.KeyExpires, c.KeyRevoked, c.KeyRate, c.KeyLastUsed = store.TimePtr(expires), revoked.Valid, intPtr(rate), store.TimePtr(lastUsed)
	return &c, nil
}

// credentialOf reloads the credential of the request's principal (inside a write
// transaction, so the limits it reads are the ones the write is counted against).
func (s *Service) credentialOf(ctx context.Context, q store.Querier) (*credential, error) {
	p := access.PrincipalFrom(ctx)
	if p == nil || p.Kind != access.ActorServicePrincipal {
		return nil, apperr.Unauthorized("the partner API needs a service-principal key")
	}
	c, err := s.loadCredential(ctx, q, "k.id = $1", p.KeyID)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, apperr.Unauthorized("invalid service-principal key")
	}
	return c, nil
}

// Authenticate resolves X-API-Key: svc_sp_... to its service principal, for the partner
// API's routes (it implements httpapi.Authenticator). User sessions and user API keys are
// refused here, as service-principal keys are everywhere else. A principal that is disabled
// or expired, or a key that is revoked or expired, is 401; a caller outside the principal's
// source-CIDR allowlist is 403. Refusals of a known principal are security events.
func (s *Service) Authenticate(ctx context.Context, r *http.Request) (*access.Principal, error) {
	raw := r.Header.Get("X-API-Key")
	switch {
	case raw == "" && r.Header.Get("Authorization") != "":
		return nil, apperr.Unauthorized("the partner API does not accept user sessions: send a service-principal key as X-API-Key: svc_sp_...")
	case raw == "":
		return nil, apperr.Unauthorized("missing credential: send a service-principal key as X-API-Key: svc_sp_...")
	case !strings.HasPrefix(raw, KeyPrefix):
		return nil, apperr.Unauthorized("user API keys do not work on the partner API: send a service-principal key (svc_sp_...)")
	}
	c, err := s.loadCredential(ctx, s.db, "k.key_hash = $1", secrets.Hash(raw))
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, apperr.Unauthorized("invalid service-principal key")
	}
	p := &access.Principal{Kind: access.ActorServicePrincipal, ID: c.ID, Name: c.Name, KeyID: c.KeyID,
		Scope: access.Scope{Level: access.LevelPartner, PartnerID: c.PartnerID}, Permissions: access.Permissions(c.Scopes)}
	now, ip := s.now(), access.RequestFrom(ctx).IP
	var refusal *apperr.Error
	switch {
	case c.KeyRevoked:
		refusal = apperr.Unauthorized("the service-principal key was revoked")
	case c.KeyExpires != nil && !c.KeyExpires.After(now):
		refusal = apperr.Unauthorized("the service-principal key has expired")
	case c.Status == StatusDisabled:
		refusal = apperr.Unauthorized("the service principal is disabled")
	case c.Status == StatusExpired:
		refusal = apperr.Unauthorized("the service principal has expired")
	case !allows(c.SourceCIDRs, ip):
		refusal = apperr.Forbidden(fmt.Sprintf("requests from %s are outside the service principal's source-CIDR allowlist", ip))
	}
	if refusal != nil {
		s.audit.Security(access.WithPrincipal(ctx, p), audit.Entry{Action: "partner_api.authenticate",
			ResourceType: "service_principal", ResourceID: c.ID, ResourceName: c.Name, PartnerID: c.PartnerID,
			Details: map[string]any{"reason": refusal.Message, "keyId": c.KeyID}})
		return nil, refusal
	}
	if c.KeyLastUsed == nil || now.Sub(*c.KeyLastUsed) >= lastUsedEvery {
		s.touch(ctx, c.KeyID, now)
	}
	return p, nil
}

// touch records the use of a key, at most once a minute per key across all nodes. A failure
// is logged, never the request's failure.
func (s *Service) touch(ctx context.Context, id string, now time.Time) {
	_, err := s.db.ExecContext(ctx, `UPDATE service_principal_keys SET last_used_at = $1
		WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $3)`, now, id, now.Add(-lastUsedEvery))
	if err != nil {
		s.logger.WarnContext(ctx, "record service principal key use", "keyId", id, "error", err)
	}
}

var _ httpapi.Authenticator = (*Service)(nil)
