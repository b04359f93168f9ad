// Package partnerapi is the partner API: the machine-to-machine surface under /partner-api
// that an MSP's provisioning system and data warehouse call with a service-principal key
// (X-API-Key: svc_sp_...). It owns the service principals and their keys, which partner
// administrators manage at /partner-service-principals; it authenticates those keys; it
// creates organizations, sites and enrollment keys through their domains' services under the
// partner API's rules, idempotency and rate limits; and it exports the partner's data page by
// page with signed cursors.
package partnerapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/enrollment"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/clock"
	"gale/internal/platform/ratelimit"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
)

// Organizations is what the partner API needs of the tenancy service.
type Organizations interface {
	CreateOrganizationIn(ctx context.Context, tx *sql.Tx, in tenancy.NewOrganization) (tenancy.Organization, error)
	GetOrganizationIn(ctx context.Context, q store.Querier, id string) (tenancy.Organization, error)
	CreateSiteIn(ctx context.Context, tx *sql.Tx, org tenancy.Organization, in tenancy.SiteInput) (tenancy.Site, error)
}

// EnrollmentKeys mints enrollment keys.
type EnrollmentKeys interface {
	CreateIn(ctx context.Context, tx *sql.Tx, in enrollment.NewEnrollmentKey, p enrollment.Policy) (enrollment.IssuedKey, error)
}

// Options configure the service.
type Options struct {
	// KeyDefaultTTL is the lifetime of an enrollment key minted without ttlMinutes or
	// expiresAt: the default of keys made by hand (ENROLLMENT_KEY_DEFAULT_TTL_MINUTES).
	KeyDefaultTTL time.Duration
	// KeyMaxTTL caps the lifetime of keys minted here, on top of the organization's own cap
	// (PARTNER_API_ENROLLMENT_KEY_MAX_TTL_MINUTES).
	KeyMaxTTL time.Duration
	// CursorSecret is the server secret export cursors are signed with (a key derived from
	// it); all nodes share it.
	CursorSecret []byte
}

// Service implements service principals, their authentication and the partner API.
type Service struct {
	db      *store.DB
	logger  *slog.Logger
	audit   *audit.Log
	box     *secrets.Box
	limiter *ratelimit.Limiter
	orgs    Organizations
	keys    EnrollmentKeys
	opts    Options
	// cursorKey signs export cursors.
	cursorKey []byte
	clock     clock.Clock
}

// Deps is what the partner API is built from, and the services it acts through.
type Deps struct {
	DB      *store.DB
	Logger  *slog.Logger
	Audit   *audit.Log
	Box     *secrets.Box
	Limiter *ratelimit.Limiter
	// Clock is the time of expiry checks and the idempotency window (nil: the system clock).
	Clock clock.Clock
	Orgs  Organizations
	Keys  EnrollmentKeys
}

// New returns the partner API service.
func New(d Deps, opts Options) *Service {
	mac := hmac.New(sha256.New, opts.CursorSecret)
	mac.Write([]byte("gale partner-api export cursor v1"))
	return &Service{db: d.DB, logger: d.Logger, audit: d.Audit, box: d.Box, limiter: d.Limiter, orgs: d.Orgs, keys: d.Keys,
		clock: clock.Or(d.Clock), opts: opts, cursorKey: mac.Sum(nil)}
}

// now is the time of expiry checks and the idempotency window.
func (s *Service) now() time.Time { return s.clock.Now() }

// Purge deletes idempotency records past their window; the periodic cleanup job calls it.
func (s *Service) Purge(ctx context.Context) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM partner_api_idempotency WHERE expires_at <= $1`, s.now())
	if err != nil {
		return 0, fmt.Errorf("purge idempotency records: %w", err)
	}
	return res.RowsAffected()
}
