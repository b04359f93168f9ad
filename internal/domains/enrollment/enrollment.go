// Package enrollment owns enrollment keys: the credentials an agent presents, once per
// install, to join an organization (and optionally a site). A key is stored only as hashes;
// its raw value, and its own enrollment secret when it has one, are shown once, on create and
// on rotate. The device service calls Claim inside its enrolling transaction and MintForDevice
// when it pre-creates a device.
package enrollment

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
)

// Key statuses, derived in this order: revoked, expired, used up, active.
const (
	StatusActive  = "active"
	StatusExpired = "expired"
	StatusRevoked = "revoked"
	StatusUsedUp  = "used_up"
)

// Sources of keys: who minted them.
const (
	SourceAPI        = "api"
	SourceProvision  = "provision"
	SourcePartnerAPI = "partner_api"
)

// Limits of §8.
const (
	MaxUsageLimit = 100000
	MaxTTLMinutes = 525600
)

const (
	rawKeyBytes = 32
	prefixLen   = 8
)

// Service implements enrollment keys.
type Service struct {
	db         *store.DB
	logger     *slog.Logger
	defaultTTL time.Duration
	clock      clock.Clock
}

// Deps are what the service works with.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// Clock is the time keys expire by (nil: the system clock).
	Clock clock.Clock
}

// Options configure the service.
type Options struct {
	// DefaultTTL is the lifetime of a key created at POST /enrollment-keys without ttlMinutes
	// or expiresAt (ENROLLMENT_KEY_DEFAULT_TTL_MINUTES).
	DefaultTTL time.Duration
}

// New returns the enrollment key service.
func New(d Deps, opts Options) *Service {
	return &Service{db: d.DB, logger: d.Logger, defaultTTL: opts.DefaultTTL, clock: clock.Or(d.Clock)}
}

// EnrollmentKey is the API view of a key. It never carries the raw key, the secret, or
// their hashes.
type EnrollmentKey struct {
	ID                  string     `json:"id" format:"uuid"`
	OrgID               string     `json:"orgId" format:"uuid"`
	PartnerID           string     `json:"partnerId" format:"uuid"`
	SiteID              *string    `json:"siteId" doc:"Devices enrolling with this key land in this site; null lets the agent choose (or the organization's first site)."`
	Name                string     `json:"name"`
	KeyPrefix           string     `json:"keyPrefix" doc:"The first 8 characters of the raw key, to tell keys apart."`
	MaxUsage            int        `json:"maxUsage"`
	UsageCount          int        `json:"usageCount"`
	ExpiresAt           time.Time  `json:"expiresAt"`
	RevokedAt           *time.Time `json:"revokedAt"`
	Status              string     `json:"status" enum:"active,expired,revoked,used_up"`
	HasEnrollmentSecret bool       `json:"hasEnrollmentSecret" doc:"The key has its own enrollment secret; otherwise agents enroll with the server's AGENT_ENROLLMENT_SECRET."`
	Source              string     `json:"source" enum:"api,provision,partner_api" doc:"Who minted the key: api (this API), provision (POST /devices/provision), or partner_api (a service principal)."`
	DeviceID            *string    `json:"deviceId" doc:"The pre-created device a provisioning key enrolls; null otherwise."`
	CreatedBy           *string    `json:"createdBy" doc:"The user (or service principal) that created the key."`
	LastUsedAt          *time.Time `json:"lastUsedAt"`
	CreatedAt           time.Time  `json:"createdAt"`
}

// IssuedKey is the answer of create and rotate: the key and, this once, its raw values.
type IssuedKey struct {
	EnrollmentKey
	Key              string `json:"key" doc:"The raw enrollment key, shown only now."`
	EnrollmentSecret string `json:"enrollmentSecret,omitempty" doc:"The key's own enrollment secret, shown only now; present when the key has one."`
}

// NewEnrollmentKey is a create request (the enrollment key body of §2, with orgId optional here).
type NewEnrollmentKey struct {
	OrgID                 string     `json:"orgId,omitempty" format:"uuid" doc:"May be omitted by organization callers and when the partner has exactly one organization."`
	Name                  string     `json:"name" minLength:"1" maxLength:"200"`
	SiteID                string     `json:"siteId,omitempty" format:"uuid" doc:"Pins enrolling devices to this site of the organization."`
	MaxUsage              *int       `json:"maxUsage,omitempty" minimum:"1" maximum:"100000" doc:"How many devices may enroll with the key; default 1."`
	TTLMinutes            *int       `json:"ttlMinutes,omitempty" minimum:"1" maximum:"525600" doc:"Lifetime in minutes; not together with expiresAt."`
	ExpiresAt             *time.Time `json:"expiresAt,omitempty" doc:"When the key stops working; in the future, at most 525600 minutes ahead; not together with ttlMinutes."`
	IssueEnrollmentSecret bool       `json:"issueEnrollmentSecret,omitempty" doc:"Mint a per-key enrollmentSecret (returned once); without it the key enrolls with the global AGENT_ENROLLMENT_SECRET."`
}

// Policy is what the surface creating a key decides about it.
type Policy struct {
	// Source is recorded on the key.
	Source string
	// DefaultTTL applies when the request names no lifetime.
	DefaultTTL time.Duration
	// MaxTTL, when positive, caps lifetimes on top of the organization's own cap.
	MaxTTL time.Duration
}

const keyColumns = `k.id, k.org_id, k.partner_id, k.site_id, k.name, k.key_prefix, k.max_usage, k.usage_count,
	k.expires_at, k.revoked_at, k.secret_hash IS NOT NULL, k.source, k.device_id, k.created_by, k.last_used_at, k.created_at`

const keysFrom = ` FROM enrollment_keys k`

// liveOrg hides keys of soft-deleted organizations, as their sites are hidden with them.
var liveOrg = tenancy.LiveOrg("k.org_id")

func (s *Service) scanKey(row store.Scanner) (EnrollmentKey, error) {
	var k EnrollmentKey
	var site, device, createdBy sql.NullString
	var revoked, lastUsed sql.NullTime
	err := row.Scan(&k.ID, &k.OrgID, &k.PartnerID, &site, &k.Name, &k.KeyPrefix, &k.MaxUsage, &k.UsageCount,
		&k.ExpiresAt, &revoked, &k.HasEnrollmentSecret, &k.Source, &device, &createdBy, &lastUsed, &k.CreatedAt)
	if err != nil {
		return k, err
	}
	k.SiteID, k.DeviceID, k.CreatedBy = store.StringPtr(site), store.StringPtr(device), store.StringPtr(createdBy)
	k.RevokedAt, k.LastUsedAt = store.TimePtr(revoked), store.TimePtr(lastUsed)
	k.ExpiresAt, k.CreatedAt = k.ExpiresAt.UTC(), k.CreatedAt.UTC()
	k.Status = status(k.RevokedAt != nil, k.ExpiresAt, k.UsageCount, k.MaxUsage, s.clock.Now())
	return k, nil
}

func status(revoked bool, expires time.Time, used, max int, now time.Time) string {
	switch {
	case revoked:
		return StatusRevoked
	case !expires.After(now):
		return StatusExpired
	case used >= max:
		return StatusUsedUp
	}
	return StatusActive
}

// ListFilter narrows a list of keys.
type ListFilter struct {
	OrgID  string
	SiteID string
	Status string
}

// List returns keys in the caller's scope, newest first, the next page's cursor and (legacy
// page mode) the total.
func (s *Service) List(ctx context.Context, f ListFilter, page store.Page) ([]EnrollmentKey, string, *int, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "k.org_id", "k.partner_id"), liveOrg}
	if f.OrgID != "" {
		conds = append(conds, "k.org_id = "+a.Add(f.OrgID))
	}
	if f.SiteID != "" {
		conds = append(conds, "k.site_id = "+a.Add(f.SiteID))
	}
	switch f.Status {
	case "":
	case StatusRevoked:
		conds = append(conds, "k.revoked_at IS NOT NULL")
	case StatusExpired:
		conds = append(conds, "k.revoked_at IS NULL AND k.expires_at <= "+a.Add(s.clock.Now()))
	case StatusUsedUp:
		conds = append(conds, "k.revoked_at IS NULL AND k.expires_at > "+a.Add(s.clock.Now())+" AND k.usage_count >= k.max_usage")
	case StatusActive:
		conds = append(conds, "k.revoked_at IS NULL AND k.expires_at > "+a.Add(s.clock.Now())+" AND k.usage_count < k.max_usage")
	default:
		return nil, "", nil, apperr.Invalid("status", "use active, expired, revoked or used_up")
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: keyColumns, From: keysFrom, Conds: conds, Args: &a,
		SortKey: "k.id", SortID: "k.id", Desc: true}, page, s.scanKey,
		func(k EnrollmentKey) (string, string) { return k.ID, k.ID })
}

// Get returns a key in the caller's scope.
func (s *Service) Get(ctx context.Context, id string) (EnrollmentKey, error) {
	return s.get(ctx, s.db, access.ScopeFrom(ctx), id)
}

func (s *Service) get(ctx context.Context, q store.Querier, scope access.Scope, id string) (EnrollmentKey, error) {
	var a store.Args
	conds := []string{scope.OrgFilter(&a, "k.org_id", "k.partner_id"), liveOrg}
	return store.ByID(ctx, q, "enrollment key", `SELECT `+keyColumns+keysFrom, "k.id", id, &a, conds, s.scanKey)
}

// Create mints a key for an organization in the caller's scope. The /enrollment-keys route
// passes its own policy; the partner API passes its default, cap and source.
func (s *Service) Create(ctx context.Context, in NewEnrollmentKey, p Policy) (IssuedKey, error) {
	var out IssuedKey
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = s.CreateIn(ctx, tx, in, p)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("create enrollment key: %w", err)
	}
	return out, nil
}

// CreateIn is Create inside the caller's transaction (the partner API records its
// idempotency key and counts its mint limits in the same one).
func (s *Service) CreateIn(ctx context.Context, tx *sql.Tx, in NewEnrollmentKey, p Policy) (IssuedKey, error) {
	name := strings.TrimSpace(in.Name)
	if name == "" || utf8.RuneCountInString(name) > 200 {
		return IssuedKey{}, apperr.Invalid("name", "name is required (1 to 200 characters)")
	}
	maxUsage := 1
	if in.MaxUsage != nil {
		maxUsage = *in.MaxUsage
	}
	if maxUsage < 1 || maxUsage > MaxUsageLimit {
		return IssuedKey{}, apperr.Invalid("maxUsage", fmt.Sprintf("must be 1 to %d", MaxUsageLimit))
	}
	partnerID, orgID, err := s.resolveOrg(ctx, tx, access.ScopeFrom(ctx), in.OrgID)
	if err != nil {
		return IssuedKey{}, err
	}
	if in.SiteID != "" {
		n, err := tenancy.CountSitesOf(ctx, tx, orgID, []string{in.SiteID})
		if err != nil {
			return IssuedKey{}, err
		}
		if n == 0 {
			return IssuedKey{}, apperr.Invalid("siteId", "no such site in the organization")
		}
	}
	expires, err := s.Expiry(ctx, tx, orgID, in.TTLMinutes, in.ExpiresAt, p)
	if err != nil {
		return IssuedKey{}, err
	}
	return s.insert(ctx, tx, keyRow{partnerID: partnerID, orgID: orgID, siteID: in.SiteID, name: name,
		maxUsage: maxUsage, expires: expires, withSecret: in.IssueEnrollmentSecret, source: p.Source})
}

// resolveOrg finds the organization a new key belongs to. orgId may be omitted only where
// there is one obvious organization: the caller's own, or the partner's only one.
func (s *Service) resolveOrg(ctx context.Context, tx *sql.Tx, scope access.Scope, orgID string) (string, string, error) {
	if orgID == "" && scope.Level == access.LevelPartner {
		sole, ok, err := tenancy.SoleOrg(ctx, tx, scope.PartnerID)
		if err != nil {
			return "", "", err
		}
		if !ok || !scope.CanSeeOrg(sole, scope.PartnerID) {
			return "", "", apperr.Invalid("orgId", "orgId is required unless the partner has exactly one organization")
		}
		orgID = sole
	}
	at, err := tenancy.Place(ctx, tx, scope, orgID, tenancy.PlaceOptions{Noun: "enrollment key"})
	return at.PartnerID, at.OrgID, err
}

// keyRow is a key about to be inserted.
type keyRow struct {
	partnerID, orgID, siteID, deviceID string
	name                               string
	maxUsage                           int
	expires                            time.Time
	withSecret                         bool
	source                             string
}

// insert stores a new key with fresh raw values and records it in the audit log.
func (s *Service) insert(ctx context.Context, tx *sql.Tx, r keyRow) (IssuedKey, error) {
	raw, secret := newRaw(r.withSecret)
	id, now := store.NewID(), s.clock.Now()
	source := r.source
	if source == "" {
		source = SourceAPI
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO enrollment_keys (id, partner_id, org_id, site_id, name, key_hash, key_prefix,
		secret_hash, max_usage, expires_at, device_id, source, created_by, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14)`,
		id, r.partnerID, r.orgID, store.NullIfEmpty(r.siteID), r.name, secrets.Hash(raw), raw[:prefixLen],
		hashOrNull(secret), r.maxUsage, r.expires, store.NullIfEmpty(r.deviceID), source, store.NullIfEmpty(creator(ctx)), now)
	if err != nil {
		return IssuedKey{}, fmt.Errorf("insert enrollment key: %w", err)
	}
	k, err := s.get(ctx, tx, access.SystemScope(), id)
	if err != nil {
		return IssuedKey{}, err
	}
	d := map[string]any{"keyPrefix": k.KeyPrefix, "maxUsage": k.MaxUsage, "expiresAt": k.ExpiresAt.Format(time.RFC3339),
		"hasEnrollmentSecret": k.HasEnrollmentSecret, "source": k.Source}
	if k.SiteID != nil {
		d["siteId"] = *k.SiteID
	}
	if k.DeviceID != nil {
		d["deviceId"] = *k.DeviceID
	}
	return IssuedKey{EnrollmentKey: k, Key: raw, EnrollmentSecret: secret}, audit.Record(ctx, tx, audit.Entry{
		Action: "enrollment_key.create", ResourceType: "enrollment_key", ResourceID: id, ResourceName: k.Name,
		PartnerID: k.PartnerID, OrgID: k.OrgID, Details: d})
}

// newRaw returns a fresh raw key and, when asked, a fresh secret ("" otherwise).
func newRaw(withSecret bool) (key, secret string) {
	key = secrets.HexToken(rawKeyBytes)
	if withSecret {
		secret = secrets.HexToken(rawKeyBytes)
	}
	return key, secret
}

func hashOrNull(secret string) any {
	if secret == "" {
		return nil
	}
	return secrets.Hash(secret)
}

// creator is who a new key is attributed to: the acting user (also behind an API key), or
// the service principal.
func creator(ctx context.Context) string {
	p := access.PrincipalFrom(ctx)
	switch {
	case p == nil:
		return ""
	case p.UserID != "":
		return p.UserID
	}
	return p.ID
}

// Revoke stops a key in scope for good. Revoking a revoked key changes nothing and succeeds.
func (s *Service) Revoke(ctx context.Context, id string) error {
	scope := access.ScopeFrom(ctx)
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		k, err := s.get(ctx, tx, scope, id)
		if err != nil || k.RevokedAt != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE enrollment_keys SET revoked_at = $1, updated_at = $1 WHERE id = $2 AND revoked_at IS NULL`,
			s.clock.Now(), id)
		if err != nil {
			return fmt.Errorf("revoke enrollment key %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return nil
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "enrollment_key.revoke", ResourceType: "enrollment_key",
			ResourceID: id, ResourceName: k.Name, PartnerID: k.PartnerID, OrgID: k.OrgID,
			Details: map[string]any{"keyPrefix": k.KeyPrefix, "usageCount": k.UsageCount}})
	})
}

// rotate replaces a key's raw value (and its secret, if it has one) and resets its usage; the
// old raw key stops working at once. The expiry stays: rotating does not extend a key's life,
// so an expired key cannot be rotated (409) any more than a revoked one.
func (s *Service) rotate(ctx context.Context, id string) (IssuedKey, error) {
	scope := access.ScopeFrom(ctx)
	var out IssuedKey
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.get(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		switch before.Status {
		case StatusRevoked:
			return apperr.Conflict("the enrollment key is revoked")
		case StatusExpired:
			return apperr.Conflict("the enrollment key has expired; create a new one")
		}
		raw, secret := newRaw(before.HasEnrollmentSecret)
		res, err := tx.ExecContext(ctx, `UPDATE enrollment_keys SET key_hash = $1, key_prefix = $2, secret_hash = $3,
			usage_count = 0, updated_at = $4 WHERE id = $5 AND revoked_at IS NULL`,
			secrets.Hash(raw), raw[:prefixLen], hashOrNull(secret), s.clock.Now(), id)
		if err != nil {
			return fmt.Errorf("rotate enrollment key %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apperr.Conflict("the enrollment key is revoked")
		}
		k, err := s.get(ctx, tx, access.SystemScope(), id)
		if err != nil {
			return err
		}
		out = IssuedKey{EnrollmentKey: k, Key: raw, EnrollmentSecret: secret}
		return audit.Record(ctx, tx, audit.Entry{Action: "enrollment_key.rotate", ResourceType: "enrollment_key",
			ResourceID: id, ResourceName: k.Name, PartnerID: k.PartnerID, OrgID: k.OrgID,
			Details: map[string]any{"oldKeyPrefix": before.KeyPrefix, "keyPrefix": k.KeyPrefix,
				"usageCountBefore": before.UsageCount, "secretRotated": secret != ""}})
	})
	return out, err
}
