// Package apikeys owns the API keys users create for scripts and integrations. A key is sent
// in X-API-Key; it acts as its creator, limited to its own grants, so it never exceeds what
// the creator may do now. Keys are stored only as hashes; the raw key is shown once, on
// create and on rotate. Partner service-principal keys (svc_sp_) are a different credential
// and do not live here.
package apikeys

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"time"
	"unicode/utf8"

	"gale/internal/domains/audit"
	"gale/internal/domains/auth"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// Key statuses, derived from revoked_at and expires_at.
const (
	StatusActive  = "active"
	StatusRevoked = "revoked"
	StatusExpired = "expired"
)

// rawPrefix starts every raw key; prefixLen characters of the raw key are kept for display.
const (
	rawPrefix = "gk_"
	prefixLen = 10
)

// Service implements API keys: the routes that manage them and the verifier auth calls for
// X-API-Key.
type Service struct {
	db     *store.DB
	logger *slog.Logger
	clock  clock.Clock
	auth   *auth.Service
}

// Deps is what the API key service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	Clock  clock.Clock
	// Auth loads the principal of a key's creator, whose reach the key never exceeds.
	Auth *auth.Service
}

// New returns the API key service.
func New(d Deps) *Service {
	return &Service{db: d.DB, logger: d.Logger, clock: clock.Or(d.Clock), auth: d.Auth}
}

// APIKey is the API view of a key. It never carries the raw key or its hash.
type APIKey struct {
	ID          string       `json:"id" format:"uuid"`
	Name        string       `json:"name"`
	Prefix      string       `json:"prefix" doc:"The first characters of the key, to tell keys apart."`
	Permissions []string     `json:"permissions" doc:"The key's grants; it acts with these intersected with its creator's current permissions."`
	Scope       access.Level `json:"scope" enum:"system,partner,organization"`
	PartnerID   *string      `json:"partnerId"`
	OrgID       *string      `json:"orgId"`
	CreatedBy   *string      `json:"createdBy" doc:"The creating user; null once that user is deleted."`
	ExpiresAt   *time.Time   `json:"expiresAt"`
	LastUsedAt  *time.Time   `json:"lastUsedAt" doc:"Updated at most once a minute."`
	RevokedAt   *time.Time   `json:"revokedAt"`
	Status      string       `json:"status" enum:"active,revoked,expired"`
	CreatedAt   time.Time    `json:"createdAt"`
	UpdatedAt   time.Time    `json:"updatedAt"`
}

// Input holds the writable fields of a key; nil fields are left as they are (on create,
// name and permissions are required).
type Input struct {
	Name        *string    `json:"name,omitempty" minLength:"1" maxLength:"200"`
	Permissions []string   `json:"permissions,omitempty" maxItems:"200" doc:"Grants such as devices:read, devices:* or *:read; each must be held by the caller."`
	ExpiresAt   *time.Time `json:"expiresAt,omitempty" doc:"When the key stops working; must be in the future. Absent means it does not expire."`
}

// Created is the answer of create and rotate: the key and, this once, its raw value.
type Created struct {
	APIKey APIKey `json:"apiKey"`
	Key    string `json:"key" doc:"The raw key, shown only now; send it as X-API-Key."`
}

const keyColumns = `k.id, k.name, k.key_prefix, k.permissions, k.scope, k.partner_id, k.org_id, k.created_by,
	k.expires_at, k.last_used_at, k.revoked_at, k.created_at, k.updated_at`

func (s *Service) scanKey(row store.Scanner) (APIKey, error) {
	var k APIKey
	var perms string
	var partnerID, orgID, createdBy sql.NullString
	var expires, lastUsed, revoked sql.NullTime
	err := row.Scan(&k.ID, &k.Name, &k.Prefix, &perms, &k.Scope, &partnerID, &orgID, &createdBy,
		&expires, &lastUsed, &revoked, &k.CreatedAt, &k.UpdatedAt)
	if err != nil {
		return k, err
	}
	if k.Permissions, err = store.DecodeStrings(perms); err != nil {
		return k, fmt.Errorf("decode permissions of API key %s: %w", k.ID, err)
	}
	k.PartnerID, k.OrgID, k.CreatedBy = store.StringPtr(partnerID), store.StringPtr(orgID), store.StringPtr(createdBy)
	k.ExpiresAt, k.LastUsedAt, k.RevokedAt = store.TimePtr(expires), store.TimePtr(lastUsed), store.TimePtr(revoked)
	k.Status = status(k.RevokedAt, k.ExpiresAt, s.clock.Now())
	return k, nil
}

func status(revoked, expires *time.Time, now time.Time) string {
	switch {
	case revoked != nil:
		return StatusRevoked
	case expires != nil && !expires.After(now):
		return StatusExpired
	}
	return StatusActive
}

// scopeCovers reports whether a caller of scope reaches everything a key of the given level
// and tenancy may reach, so handing it the key's raw value gives it nothing new.
func scopeCovers(scope access.Scope, k APIKey) bool {
	switch scope.Level {
	case access.LevelSystem:
		return true
	case access.LevelPartner:
		if k.PartnerID == nil || *k.PartnerID != scope.PartnerID {
			return false
		}
		if k.OrgID == nil {
			return k.Scope == access.LevelPartner && scope.OrgIDs == nil
		}
		return scope.OrgIDs == nil || slices.Contains(scope.OrgIDs, *k.OrgID)
	case access.LevelOrganization:
		return k.OrgID != nil && *k.OrgID == scope.OrgID
	}
	return false
}

// ListFilter narrows a list of keys.
type ListFilter struct {
	// Status keeps keys of one status (active, revoked, expired); empty keeps all.
	Status string
}

// List returns keys in the caller's scope, newest first, the cursor of the next page, and
// (legacy page mode) the total.
func (s *Service) List(ctx context.Context, f ListFilter, page store.Page) ([]APIKey, string, *int, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).TenantFilter(&a, "k.org_id", "k.partner_id")}
	now := s.clock.Now()
	switch f.Status {
	case "":
	case StatusActive:
		conds = append(conds, "k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > "+a.Add(now)+")")
	case StatusRevoked:
		conds = append(conds, "k.revoked_at IS NOT NULL")
	case StatusExpired:
		conds = append(conds, "k.revoked_at IS NULL AND k.expires_at IS NOT NULL AND k.expires_at <= "+a.Add(now))
	default:
		return nil, "", nil, apperr.Invalid("status", "use active, revoked or expired")
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: keyColumns, From: " FROM api_keys k", Conds: conds,
		Args: &a, SortKey: "k.id", SortID: "k.id", Desc: true}, page, s.scanKey,
		func(k APIKey) (string, string) { return k.ID, k.ID })
}

// Get returns a key in the caller's scope.
func (s *Service) Get(ctx context.Context, id string) (APIKey, error) {
	return s.get(ctx, s.db, access.ScopeFrom(ctx), id)
}

func (s *Service) get(ctx context.Context, q store.Querier, scope access.Scope, id string) (APIKey, error) {
	var a store.Args
	conds := []string{scope.TenantFilter(&a, "k.org_id", "k.partner_id")}
	return store.ByID(ctx, q, "API key", `SELECT `+keyColumns+` FROM api_keys k`, "k.id", id, &a, conds, s.scanKey)
}

// checkGrants refuses grants outside the catalog (400) and grants the caller does not hold
// itself (403): nobody hands on more than they have.
func checkGrants(p *access.Principal, grants []string) ([]string, error) {
	if len(grants) == 0 {
		return nil, apperr.Invalid("permissions", "name at least one permission")
	}
	var out []string
	for _, g := range grants {
		if !access.ValidGrant(g) {
			return nil, apperr.Invalid("permissions", fmt.Sprintf("%q is not a permission", g))
		}
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	if !p.Permissions.Covers(out) {
		return nil, apperr.Forbidden("a key cannot hold permissions its creator does not hold")
	}
	return out, nil
}

// checkName applies the API's rule for a key's name (1 to 200 characters) to every caller.
func checkName(name string) error {
	if name == "" || utf8.RuneCountInString(name) > 200 {
		return apperr.Invalid("name", "a name has 1 to 200 characters")
	}
	return nil
}

func (s *Service) checkExpiry(t *time.Time) (any, error) {
	if t == nil {
		return nil, nil
	}
	u := t.UTC().Truncate(time.Microsecond)
	if !u.After(s.clock.Now()) {
		return nil, apperr.Invalid("expiresAt", "must be in the future")
	}
	return u, nil
}

// newRawKey returns a fresh raw key with its stored hash and display prefix.
func newRawKey() (raw, hash, prefix string) {
	raw = rawToken()
	return raw, hashKey(raw), raw[:prefixLen]
}

func optional(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// Create makes a key for the calling user, within the user's tenancy and permissions.
func (s *Service) Create(ctx context.Context, in Input) (Created, error) {
	p := access.PrincipalFrom(ctx)
	if p == nil || p.Kind != access.ActorUser {
		return Created{}, apperr.Forbidden("only a signed-in user can create API keys")
	}
	if in.Name == nil {
		return Created{}, apperr.Invalid("name", "name is required")
	}
	if err := checkName(*in.Name); err != nil {
		return Created{}, err
	}
	grants, err := checkGrants(p, in.Permissions)
	if err != nil {
		return Created{}, err
	}
	expires, err := s.checkExpiry(in.ExpiresAt)
	if err != nil {
		return Created{}, err
	}
	scope := p.Scope
	if !scope.Level.Valid() {
		return Created{}, apperr.Forbidden("the caller has no tenancy to give the key")
	}
	var partnerID, orgID *string
	if scope.PartnerID != "" {
		partnerID = &scope.PartnerID
	}
	if scope.Level == access.LevelOrganization {
		orgID = &scope.OrgID
	}
	raw, hash, prefix := newRawKey()
	var out Created
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		id, now := store.NewID(), s.clock.Now()
		_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (id, partner_id, org_id, scope, created_by, name, key_prefix,
			key_hash, permissions, expires_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)`,
			id, optional(partnerID), optional(orgID), string(scope.Level), p.UserID, *in.Name, prefix, hash,
			store.EncodeStrings(grants), expires, now)
		if err != nil {
			return fmt.Errorf("insert API key: %w", err)
		}
		k, err := s.get(ctx, tx, access.SystemScope(), id)
		if err != nil {
			return err
		}
		out = Created{APIKey: k, Key: raw}
		return audit.Record(ctx, tx, audit.Entry{Action: "api_key.create", ResourceType: "api_key", ResourceID: id,
			ResourceName: k.Name, PartnerID: store.Deref(k.PartnerID), OrgID: store.Deref(k.OrgID), Details: details(k)})
	})
	if err != nil {
		return out, fmt.Errorf("create API key: %w", err)
	}
	return out, nil
}

// details is what the audit log keeps of a key: never the raw key or its hash.
func details(k APIKey) map[string]any {
	d := map[string]any{"name": k.Name, "prefix": k.Prefix, "permissions": k.Permissions, "scope": k.Scope}
	if k.ExpiresAt != nil {
		d["expiresAt"] = k.ExpiresAt.Format(time.RFC3339)
	}
	return d
}

// Update changes a key's name, grants or expiry. New grants must be held by the caller.
func (s *Service) Update(ctx context.Context, id string, in Input) (APIKey, error) {
	p := access.PrincipalFrom(ctx)
	if p == nil {
		return APIKey{}, apperr.Unauthorized("sign in first")
	}
	if in.Name != nil {
		if err := checkName(*in.Name); err != nil {
			return APIKey{}, err
		}
	}
	var grants []string
	if in.Permissions != nil {
		var err error
		if grants, err = checkGrants(p, in.Permissions); err != nil {
			return APIKey{}, err
		}
	}
	expires, err := s.checkExpiry(in.ExpiresAt)
	if err != nil {
		return APIKey{}, err
	}
	var k APIKey
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.get(ctx, tx, p.Scope, id)
		if err != nil {
			return err
		}
		ch := store.NewChanges(s.clock.Now())
		changes := map[string]any{}
		if in.Name != nil {
			ch.Set("name", *in.Name)
			changes["name"] = map[string]any{"from": before.Name, "to": *in.Name}
		}
		if grants != nil {
			ch.Set("permissions", store.EncodeStrings(grants))
			changes["permissions"] = map[string]any{"from": before.Permissions, "to": grants}
		}
		if expires != nil {
			ch.Set("expires_at", expires)
			changes["expiresAt"] = map[string]any{"from": before.ExpiresAt, "to": expires}
		}
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id)+` AND revoked_at IS NULL`,
			ch.Args.Values()...)
		if err != nil {
			return fmt.Errorf("update API key %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apperr.Conflict("the API key is revoked")
		}
		if k, err = s.get(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "api_key.update", ResourceType: "api_key", ResourceID: id,
			ResourceName: k.Name, PartnerID: store.Deref(k.PartnerID), OrgID: store.Deref(k.OrgID), Details: changes})
	})
	if err != nil {
		return k, fmt.Errorf("update API key: %w", err)
	}
	return k, nil
}

// Revoke stops a key for good. Revoking a revoked key is a conflict.
func (s *Service) Revoke(ctx context.Context, id string) error {
	scope := access.ScopeFrom(ctx)
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		k, err := s.get(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		now := s.clock.Now()
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET revoked_at = $1, updated_at = $1 WHERE id = $2 AND revoked_at IS NULL`,
			now, id)
		if err != nil {
			return fmt.Errorf("revoke API key %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apperr.Conflict("the API key is already revoked")
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "api_key.revoke", ResourceType: "api_key", ResourceID: id,
			ResourceName: k.Name, PartnerID: store.Deref(k.PartnerID), OrgID: store.Deref(k.OrgID),
			Details: map[string]any{"prefix": k.Prefix}})
	})
}

// Rotate replaces a key's secret: the old raw key stops working at once and the new one is
// returned this once. The caller must reach everything the key may reach (its tenancy and
// its grants), since it walks away with a working credential.
func (s *Service) Rotate(ctx context.Context, id string) (Created, error) {
	p := access.PrincipalFrom(ctx)
	if p == nil {
		return Created{}, apperr.Unauthorized("sign in first")
	}
	raw, hash, prefix := newRawKey()
	var out Created
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.get(ctx, tx, p.Scope, id)
		if err != nil {
			return err
		}
		if !scopeCovers(p.Scope, before) || !p.Permissions.Covers(before.Permissions) {
			return apperr.Forbidden("rotating a key hands out its access; the caller must hold all of it")
		}
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET key_hash = $1, key_prefix = $2, updated_at = $3
			WHERE id = $4 AND revoked_at IS NULL`, hash, prefix, s.clock.Now(), id)
		if err != nil {
			return fmt.Errorf("rotate API key %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apperr.Conflict("the API key is revoked")
		}
		k, err := s.get(ctx, tx, access.SystemScope(), id)
		if err != nil {
			return err
		}
		out = Created{APIKey: k, Key: raw}
		return audit.Record(ctx, tx, audit.Entry{Action: "api_key.rotate", ResourceType: "api_key", ResourceID: id,
			ResourceName: k.Name, PartnerID: store.Deref(k.PartnerID), OrgID: store.Deref(k.OrgID),
			Details: map[string]any{"oldPrefix": before.Prefix, "prefix": k.Prefix}})
	})
	if err != nil {
		return out, fmt.Errorf("rotate API key: %w", err)
	}
	return out, nil
}
