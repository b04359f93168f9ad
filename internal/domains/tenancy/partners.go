// Package tenancy owns the tenancy tree above devices: partners (the MSPs), their
// organizations (customers) and the organizations' sites. Every read and write is confined to
// the caller's access.Scope; anything outside it is "not found".
package tenancy

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
)

// Service implements partners, organizations and sites.
type Service struct {
	db     *store.DB
	logger *slog.Logger
	clock  clock.Clock
	// orgRows caches organization rows for lists, and orgPages which rows made each page
	// (nil: none).
	orgRows  *store.RowCache[*Organization]
	orgPages *store.PageCache
}

// Deps is what the tenancy service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	Clock  clock.Clock
}

// Options configure the tenancy service.
type Options struct {
	// CacheRows is how many organization rows lists keep cached on this node (0: none).
	CacheRows int
	// PageTTL is how long, when rows are cached, their pages are kept (0: none).
	PageTTL time.Duration
}

// New returns the tenancy service.
func New(d Deps, opts Options) *Service {
	s := &Service{db: d.DB, logger: d.Logger, clock: clock.Or(d.Clock), orgRows: store.NewRowCache(opts.CacheRows, cacheOrg)}
	if s.orgRows != nil {
		s.orgPages = store.NewPageCache(opts.PageTTL)
	}
	return s
}

// ForgetPages drops the organization pages this node kept (see store.PageCache).
func (s *Service) ForgetPages() { s.orgPages.Forget() }

// Partner statuses.
const (
	PartnerActive    = "active"
	PartnerSuspended = "suspended"
)

// Partner is the API view of a partner.
type Partner struct {
	ID                string          `json:"id" format:"uuid"`
	Name              string          `json:"name"`
	Slug              string          `json:"slug"`
	Status            string          `json:"status" enum:"active,suspended"`
	MaxOrganizations  *int            `json:"maxOrganizations" doc:"Cap on the partner's organizations; null means no cap."`
	OrganizationCount int             `json:"organizationCount"`
	BillingEmail      *string         `json:"billingEmail"`
	Settings          json.RawMessage `json:"settings" doc:"Free-form partner settings (a JSON object)."`
	CreatedAt         time.Time       `json:"createdAt"`
	UpdatedAt         time.Time       `json:"updatedAt"`
}

// PartnerInput holds the writable fields of a partner; nil fields are left as they are.
type PartnerInput struct {
	Name             *string         `json:"name,omitempty" minLength:"1" maxLength:"200"`
	Slug             *string         `json:"slug,omitempty" maxLength:"63" doc:"Lower-case letters, digits and dashes; derived from the name when absent."`
	Status           *string         `json:"status,omitempty" enum:"active,suspended" doc:"System scope only."`
	MaxOrganizations *int            `json:"maxOrganizations,omitempty" minimum:"0" maximum:"1000000" doc:"System scope only."`
	BillingEmail     *string         `json:"billingEmail,omitempty" maxLength:"320" format:"email"`
	Settings         *map[string]any `json:"settings,omitempty" doc:"Free-form partner settings (timezone, branding, defaults)."`
}

const partnerColumns = `id, name, slug, status, max_organizations, org_count, billing_email, settings, created_at, updated_at`

func scanPartner(row store.Scanner) (Partner, error) {
	var p Partner
	var maxOrgs sql.NullInt64
	var billing sql.NullString
	var settings string
	err := row.Scan(&p.ID, &p.Name, &p.Slug, &p.Status, &maxOrgs, &p.OrganizationCount, &billing, &settings,
		&p.CreatedAt, &p.UpdatedAt)
	if err != nil {
		return p, err
	}
	if maxOrgs.Valid {
		n := int(maxOrgs.Int64)
		p.MaxOrganizations = &n
	}
	if billing.Valid {
		p.BillingEmail = &billing.String
	}
	p.Settings = json.RawMessage(settings)
	return p, nil
}

func encodeObject(m map[string]any) string {
	if m == nil {
		return "{}"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func requireSystem(scope access.Scope) error {
	if !scope.IsSystem() {
		return apperr.Forbidden("only system administrators can do this")
	}
	return nil
}

// ListPartners lists partners (system scope only), by name.
func (s *Service) ListPartners(ctx context.Context, page store.Page) ([]Partner, string, *int, error) {
	if err := requireSystem(access.ScopeFrom(ctx)); err != nil {
		return nil, "", nil, err
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: partnerColumns, From: " FROM partners",
		Conds: []string{"deleted_at IS NULL"}, Args: &store.Args{}, SortKey: "name", SortID: "id"}, page, scanPartner,
		func(p Partner) (string, string) { return p.Name, p.ID })
}

// GetPartner returns a partner in scope.
func (s *Service) GetPartner(ctx context.Context, id string) (Partner, error) {
	return s.getPartner(ctx, s.db, access.ScopeFrom(ctx), id)
}

func (s *Service) getPartner(ctx context.Context, q store.Querier, scope access.Scope, id string) (Partner, error) {
	if !scope.CanSeePartner(id) {
		return Partner{}, apperr.NotFound("partner")
	}
	return store.ByID(ctx, q, "partner", `SELECT `+partnerColumns+` FROM partners`, "id", id, &store.Args{},
		[]string{"deleted_at IS NULL"}, scanPartner)
}

// MyPartner returns the caller's own partner.
func (s *Service) MyPartner(ctx context.Context) (Partner, error) {
	scope := access.ScopeFrom(ctx)
	if scope.Level != access.LevelPartner {
		return Partner{}, apperr.NotFound("partner (the caller is not a partner user)")
	}
	return s.GetPartner(ctx, scope.PartnerID)
}

// CreatePartner creates a partner (system scope only).
func (s *Service) CreatePartner(ctx context.Context, in PartnerInput) (Partner, error) {
	if err := requireSystem(access.ScopeFrom(ctx)); err != nil {
		return Partner{}, err
	}
	if err := checkName(in.Name); err != nil {
		return Partner{}, err
	}
	var p Partner
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		slug, err := chooseSlug(ctx, tx, "partners", *in.Name, in.Slug)
		if err != nil {
			return err
		}
		id, now := store.NewID(), s.clock.Now()
		status := PartnerActive
		if in.Status != nil {
			status = *in.Status
		}
		settings := map[string]any{}
		if in.Settings != nil {
			settings = *in.Settings
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO partners (id, name, slug, status, max_organizations, billing_email, settings,
			created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`,
			id, *in.Name, slug, status, in.MaxOrganizations, in.BillingEmail, encodeObject(settings), now)
		if err != nil {
			return slugConflict(err)
		}
		if p, err = s.getPartner(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "partner.create", ResourceType: "partner", ResourceID: id,
			ResourceName: p.Name, PartnerID: id, Details: audit.Snapshot(p)})
	})
	if err != nil {
		return p, fmt.Errorf("create partner: %w", err)
	}
	return p, nil
}

// maxNameLen bounds the name of a partner, organization or site, as the API's schema does.
const maxNameLen = 200

// checkName requires a name of 1 to maxNameLen characters: the API's schema checks it before
// a request reaches the service, other callers (the console) rely on this.
func checkName(name *string) error {
	if name == nil || *name == "" {
		return apperr.Invalid("name", "name is required")
	}
	if utf8.RuneCountInString(*name) > maxNameLen {
		return apperr.Invalid("name", "a name has at most 200 characters")
	}
	return nil
}

// UpdatePartner changes a partner. Status and maxOrganizations are for system callers; a
// partner caller may change its own name, billing email and settings.
func (s *Service) UpdatePartner(ctx context.Context, id string, in PartnerInput) (Partner, error) {
	scope := access.ScopeFrom(ctx)
	if !scope.IsSystem() && (in.Status != nil || in.MaxOrganizations != nil || in.Slug != nil) {
		if _, err := s.GetPartner(ctx, id); err != nil {
			return Partner{}, err
		}
		return Partner{}, apperr.Forbidden("status, slug and maxOrganizations are set by system administrators")
	}
	var p Partner
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.getPartner(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		ch := store.NewChanges(s.clock.Now())
		if in.Name != nil {
			ch.Set("name", *in.Name)
		}
		if in.Slug != nil {
			if err := validSlug(*in.Slug); err != nil {
				return err
			}
			ch.Set("slug", *in.Slug)
		}
		if in.Status != nil {
			ch.Set("status", *in.Status)
		}
		if in.MaxOrganizations != nil {
			ch.Set("max_organizations", *in.MaxOrganizations)
		}
		if in.BillingEmail != nil {
			ch.Set("billing_email", *in.BillingEmail)
		}
		if in.Settings != nil {
			ch.Set("settings", encodeObject(*in.Settings))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE partners SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id), ch.Args.Values()...); err != nil {
			return slugConflict(err)
		}
		if p, err = s.getPartner(ctx, tx, scope, id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "partner.update", ResourceType: "partner", ResourceID: id,
			ResourceName: p.Name, PartnerID: id, Details: audit.Diff(before, p)})
	})
	if err != nil {
		return p, fmt.Errorf("update partner: %w", err)
	}
	return p, nil
}

// DeletePartner soft-deletes a partner with no remaining organizations (system scope only);
// its users can no longer sign in.
func (s *Service) DeletePartner(ctx context.Context, id string) error {
	if err := requireSystem(access.ScopeFrom(ctx)); err != nil {
		return err
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		p, err := s.getPartner(ctx, tx, access.SystemScope(), id)
		if err != nil {
			return err
		}
		if p.OrganizationCount > 0 {
			return apperr.Conflict(fmt.Sprintf("the partner still has %d organizations; delete them first", p.OrganizationCount))
		}
		res, err := tx.ExecContext(ctx, `UPDATE partners SET deleted_at = $1, updated_at = $1 WHERE id = $2 AND deleted_at IS NULL
			AND org_count = 0`, s.clock.Now(), id)
		if err != nil {
			return fmt.Errorf("delete partner %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apperr.Conflict("the partner changed meanwhile; retry")
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "partner.delete", ResourceType: "partner", ResourceID: id,
			ResourceName: p.Name, PartnerID: id})
	})
}
