package partnerapi

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
)

// PrincipalKey is the API view of a service principal's key. It never carries the raw key
// or its hash.
type PrincipalKey struct {
	ID          string     `json:"id" format:"uuid"`
	PrincipalID string     `json:"principalId" format:"uuid"`
	Name        string     `json:"name"`
	Prefix      string     `json:"prefix" doc:"The first characters of the key, to tell keys apart."`
	Status      string     `json:"status" enum:"active,revoked,expired"`
	ExpiresAt   *time.Time `json:"expiresAt"`
	RateLimit   *int       `json:"rateLimit" doc:"The key's own write budget per hour; the smaller of it and the principal's applies."`
	LastUsedAt  *time.Time `json:"lastUsedAt" doc:"Updated at most once a minute."`
	RevokedAt   *time.Time `json:"revokedAt"`
	CreatedBy   *string    `json:"createdBy"`
	CreatedAt   time.Time  `json:"createdAt"`
}

// IssuedPrincipalKey is the answer of key creation and rotation: the key and, this once, its raw value.
type IssuedPrincipalKey struct {
	PrincipalKey
	Key string `json:"key" doc:"The raw key, shown only now; send it as X-API-Key on /partner-api routes."`
}

// NewKey is the body of a key creation.
type NewKey struct {
	Name      string     `json:"name" minLength:"1" maxLength:"200"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty" doc:"When the key stops working; in the future. Absent: when the principal does."`
	RateLimit *int       `json:"rateLimit,omitempty" minimum:"1" maximum:"10000" doc:"The key's own write budget per hour."`
}

const keyColumns = `k.id, k.principal_id, k.name, k.key_prefix, k.expires_at, k.rate_limit, k.last_used_at, k.revoked_at,
	k.created_by, k.created_at`

func (s *Service) scanKey(row store.Scanner) (PrincipalKey, error) {
	var k PrincipalKey
	var expires, lastUsed, revoked sql.NullTime
	var rate sql.NullInt64
	var createdBy sql.NullString
	err := row.Scan(&k.ID, &k.PrincipalID, &k.Name, &k.Prefix, &expires, &rate, &lastUsed, &revoked, &createdBy, &k.CreatedAt)
	if err != nil {
		return k, err
	}
	k.ExpiresAt, k.LastUsedAt, k.RevokedAt = store.TimePtr(expires), store.TimePtr(lastUsed), store.TimePtr(revoked)
	k.RateLimit, k.CreatedBy, k.CreatedAt = intPtr(rate), store.StringPtr(createdBy), k.CreatedAt.UTC()
	k.Status = keyStatus(k.RevokedAt, k.ExpiresAt, s.now())
	return k, nil
}

func keyStatus(revoked, expires *time.Time, now time.Time) string {
	switch {
	case revoked != nil:
		return StatusRevoked
	case expires != nil && !expires.After(now):
		return StatusExpired
	}
	return StatusActive
}

// newRawKey returns a fresh raw key with its stored hash and display prefix.
func newRawKey() (raw, hash, prefix string) {
	raw = secrets.Token(KeyPrefix, 32)
	return raw, secrets.Hash(raw), raw[:keyPrefixLen]
}

// ListKeys lists the keys of a service principal in scope, newest first.
func (s *Service) ListKeys(ctx context.Context, principalID string, page store.Page) ([]PrincipalKey, string, *int, error) {
	if _, err := s.GetPrincipal(ctx, principalID); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"k.principal_id = " + a.Add(principalID)}
	return store.List(ctx, s.db, store.ListQuery{Columns: keyColumns, From: " FROM service_principal_keys k", Conds: conds,
		Args: &a, SortKey: "k.id", SortID: "k.id", Desc: true}, page, s.scanKey,
		func(k PrincipalKey) (string, string) { return k.ID, k.ID })
}

func (s *Service) getKey(ctx context.Context, q store.Querier, principalID, id string) (PrincipalKey, error) {
	var a store.Args
	return store.ByID(ctx, q, "service principal key", `SELECT `+keyColumns+` FROM service_principal_keys k`, "k.id", id, &a,
		[]string{"k.principal_id = " + a.Add(principalID)}, s.scanKey)
}

func keyDetails(p ServicePrincipal, k PrincipalKey) map[string]any {
	return map[string]any{"principalId": p.ID, "principalName": p.Name, "keyId": k.ID, "name": k.Name, "prefix": k.Prefix,
		"expiresAt": k.ExpiresAt, "rateLimit": k.RateLimit}
}

// forKeys loads a principal of the caller's partner for a key operation: the caller walks
// away with a working credential of the principal, so it must hold all the principal's scopes.
func (s *Service) forKeys(ctx context.Context, tx *sql.Tx, principalID string) (*access.Principal, ServicePrincipal, error) {
	caller, err := manager(ctx, nil)
	if err != nil {
		return nil, ServicePrincipal{}, err
	}
	p, err := s.getPrincipal(ctx, tx, caller.Scope, principalID)
	if err != nil {
		return nil, p, err
	}
	if !caller.Permissions.Covers(p.Scopes) {
		return nil, p, apperr.Forbidden("a key hands out the principal's scopes; the caller must hold all of them")
	}
	return caller, p, nil
}

// CreateKey issues a key of a service principal of the caller's partner; the raw key is in
// the answer only.
func (s *Service) CreateKey(ctx context.Context, principalID string, in NewKey) (IssuedPrincipalKey, error) {
	name := strings.TrimSpace(in.Name)
	if name == "" {
		return IssuedPrincipalKey{}, apperr.Invalid("name", "name is required")
	}
	expires, err := s.checkExpiry("expiresAt", in.ExpiresAt)
	if err != nil {
		return IssuedPrincipalKey{}, err
	}
	var out IssuedPrincipalKey
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		caller, p, err := s.forKeys(ctx, tx, principalID)
		if err != nil {
			return err
		}
		raw, hash, prefix := newRawKey()
		id, now := store.NewID(), s.now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO service_principal_keys (id, principal_id, partner_id, name, key_prefix,
			key_hash, expires_at, rate_limit, created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`,
			id, p.ID, p.PartnerID, name, prefix, hash, expires, in.RateLimit, caller.UserID, now); err != nil {
			return fmt.Errorf("insert service principal key: %w", err)
		}
		k, err := s.getKey(ctx, tx, p.ID, id)
		if err != nil {
			return err
		}
		out = IssuedPrincipalKey{PrincipalKey: k, Key: raw}
		return audit.Record(ctx, tx, audit.Entry{Action: "service_principal.key.create", ResourceType: "service_principal",
			ResourceID: p.ID, ResourceName: p.Name, PartnerID: p.PartnerID, Details: keyDetails(p, k)})
	})
	if err != nil {
		return out, fmt.Errorf("create service principal key: %w", err)
	}
	return out, nil
}

// RotateKey replaces a key's secret: the old raw key stops working at once, the new one is
// in the answer only. Name, expiry and rate limit stay.
func (s *Service) RotateKey(ctx context.Context, principalID, id string) (IssuedPrincipalKey, error) {
	var out IssuedPrincipalKey
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		_, p, err := s.forKeys(ctx, tx, principalID)
		if err != nil {
			return err
		}
		before, err := s.getKey(ctx, tx, p.ID, id)
		if err != nil {
			return err
		}
		raw, hash, prefix := newRawKey()
		res, err := tx.ExecContext(ctx, `UPDATE service_principal_keys SET key_hash = $1, key_prefix = $2, updated_at = $3
			WHERE id = $4 AND revoked_at IS NULL`, hash, prefix, s.now(), id)
		if err != nil {
			return fmt.Errorf("rotate service principal key %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apperr.Conflict("the key is revoked; create a new one")
		}
		k, err := s.getKey(ctx, tx, p.ID, id)
		if err != nil {
			return err
		}
		out = IssuedPrincipalKey{PrincipalKey: k, Key: raw}
		d := keyDetails(p, k)
		d["oldPrefix"] = before.Prefix
		return audit.Record(ctx, tx, audit.Entry{Action: "service_principal.key.rotate", ResourceType: "service_principal",
			ResourceID: p.ID, ResourceName: p.Name, PartnerID: p.PartnerID, Details: d})
	})
	if err != nil {
		return out, fmt.Errorf("rotate service principal key: %w", err)
	}
	return out, nil
}

// RevokeKey stops a key for good. Revoking a revoked key is a conflict.
func (s *Service) RevokeKey(ctx context.Context, principalID, id string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		caller, err := manager(ctx, nil)
		if err != nil {
			return err
		}
		p, err := s.getPrincipal(ctx, tx, caller.Scope, principalID)
		if err != nil {
			return err
		}
		k, err := s.getKey(ctx, tx, p.ID, id)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE service_principal_keys SET revoked_at = $1, updated_at = $1
			WHERE id = $2 AND revoked_at IS NULL`, s.now(), id)
		if err != nil {
			return fmt.Errorf("revoke service principal key %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apperr.Conflict("the key is already revoked")
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "service_principal.key.revoke", ResourceType: "service_principal",
			ResourceID: p.ID, ResourceName: p.Name, PartnerID: p.PartnerID, Details: keyDetails(p, k)})
	})
}
