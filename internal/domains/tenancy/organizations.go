package tenancy

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Organization statuses. The partner API may only create active or trial organizations.
var orgStatuses = []string{"active", "trial", "suspended", "churned"}

// Contact is a person to reach (billing, site contact).
type Contact struct {
	Name  string `json:"name,omitempty" maxLength:"200"`
	Email string `json:"email,omitempty" maxLength:"320"`
	Phone string `json:"phone,omitempty" maxLength:"50"`
}

// Organization is the API view of an organization (a customer of the partner).
type Organization struct {
	ID                         string          `json:"id" format:"uuid"`
	PartnerID                  string          `json:"partnerId" format:"uuid"`
	Name                       string          `json:"name"`
	Slug                       string          `json:"slug"`
	Type                       string          `json:"type"`
	Status                     string          `json:"status" enum:"active,trial,suspended,churned"`
	MaxEnrollmentKeyTTLMinutes *int            `json:"maxEnrollmentKeyTtlMinutes" doc:"Longest lifetime of an enrollment key minted for this organization; null means no cap."`
	ContractStart              *string         `json:"contractStart" format:"date"`
	ContractEnd                *string         `json:"contractEnd" format:"date"`
	BillingContact             *Contact        `json:"billingContact"`
	Settings                   json.RawMessage `json:"settings" doc:"Free-form organization settings (a JSON object)."`
	CreatedAt                  time.Time       `json:"createdAt"`
	UpdatedAt                  time.Time       `json:"updatedAt"`
	DeletedAt                  *time.Time      `json:"deletedAt,omitempty"`
	// encoded is the organization's JSON, kept with a row of the list cache (see cacheOrg).
	encoded []byte
}

// cacheOrg readies an organization row for the list cache: with its encoding, which the
// lists that take it from the cache then copy.
func cacheOrg(o *Organization) (*Organization, time.Time) {
	if b, err := o.AppendJSON(nil); err == nil {
		o.encoded = b
	}
	return o, time.Time{}
}

// OrganizationInput holds the writable fields; nil fields are left as they are (on create,
// defaults apply).
type OrganizationInput struct {
	Name                       *string         `json:"name,omitempty" minLength:"1" maxLength:"200"`
	Slug                       *string         `json:"slug,omitempty" maxLength:"63" doc:"Unique; derived from the name (and de-duplicated) when absent. An explicit duplicate is 409 SLUG_CONFLICT."`
	Type                       *string         `json:"type,omitempty" maxLength:"50" doc:"Free-form classification; default customer."`
	Status                     *string         `json:"status,omitempty" enum:"active,trial,suspended,churned"`
	MaxEnrollmentKeyTTLMinutes *int            `json:"maxEnrollmentKeyTtlMinutes,omitempty" minimum:"1" maximum:"525600"`
	ContractStart              *string         `json:"contractStart,omitempty" format:"date"`
	ContractEnd                *string         `json:"contractEnd,omitempty" format:"date"`
	BillingContact             *Contact        `json:"billingContact,omitempty"`
	Settings                   *map[string]any `json:"settings,omitempty"`
}

// NewOrganization is a create request.
type NewOrganization struct {
	OrganizationInput
	// PartnerID is required of system callers and taken from the caller otherwise.
	PartnerID string
	// DefaultSite, when set, creates a first site with this name in the same transaction.
	DefaultSite string
	Timezone    string
}

var orgColumns = `o.id, o.partner_id, o.name, o.slug, o.type, o.status, o.max_enrollment_key_ttl_minutes, o.billing_contact,
	o.settings, ` + store.TimeColumns("o.contract_start", "o.contract_end", "o.created_at", "o.updated_at", "o.deleted_at")

func scanOrg(row store.Scanner) (Organization, error) {
	var o Organization
	// One allocation for everything Scan needs addresses of (deletedAt points into it).
	v := new(struct {
		ttl                                   sql.NullInt64
		billing                               sql.NullString
		settings                              string
		start, end, created, updated, deleted store.NullTime
	})
	err := row.Scan(&o.ID, &o.PartnerID, &o.Name, &o.Slug, &o.Type, &o.Status, &v.ttl, &v.billing, &v.settings,
		&v.start, &v.end, &v.created, &v.updated, &v.deleted)
	if err != nil {
		return o, err
	}
	o.CreatedAt, o.UpdatedAt, o.DeletedAt = v.created.Time, v.updated.Time, v.deleted.Ptr()
	if v.ttl.Valid {
		n := int(v.ttl.Int64)
		o.MaxEnrollmentKeyTTLMinutes = &n
	}
	o.ContractStart, o.ContractEnd = dateString(v.start), dateString(v.end)
	if v.billing.Valid && v.billing.String != "" && v.billing.String != "null" {
		var c Contact
		if json.Unmarshal([]byte(v.billing.String), &c) == nil {
			o.BillingContact = &c
		}
	}
	o.Settings = json.RawMessage(v.settings)
	return o, nil
}

// scanOrgRow is scanOrg for the rows of lists and exports, which hand out pointers to the
// rows they read (the list cache shares them between requests).
func scanOrgRow(row store.Scanner) (*Organization, error) {
	o, err := scanOrg(row)
	return &o, err
}

func dateString(t store.NullTime) *string {
	if !t.Valid {
		return nil
	}
	s := t.Time.Format(time.DateOnly)
	return &s
}

func parseDate(field string, s *string) (any, error) {
	if s == nil {
		return nil, nil
	}
	t, err := time.Parse(time.DateOnly, *s)
	if err != nil {
		return nil, apperr.Invalid(field, "use a date like 2026-01-31")
	}
	return t.Format(time.DateOnly), nil
}

// OrgListFilter narrows a list of organizations.
type OrgListFilter struct {
	Search         string
	Status         string
	PartnerID      string
	IncludeDeleted bool
}

// ListOrganizations lists organizations in scope by name. The result carries the total
// only in legacy page mode.
func (s *Service) ListOrganizations(ctx context.Context, f OrgListFilter, page store.Page) ([]*Organization, string, *int, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "o.id", "o.partner_id")}
	if !f.IncludeDeleted {
		conds = append(conds, "o.deleted_at IS NULL")
	}
	if f.Search != "" {
		conds = append(conds, store.Contains(&a, f.Search, "o.name", "o.slug"))
	}
	if f.Status != "" {
		conds = append(conds, "o.status = "+a.Add(f.Status))
	}
	if f.PartnerID != "" {
		conds = append(conds, "o.partner_id = "+a.Add(f.PartnerID))
	}
	return store.CachedList(ctx, s.db, store.ListQuery{Columns: orgColumns, From: " FROM organizations o", Conds: conds,
		Args: &a, SortKey: "o.name", SortID: "o.id", Version: "o.row_version", Pages: s.orgPages}, page, s.orgRows, scanOrgRow,
		func(o *Organization) (string, string) { return o.Name, o.ID })
}

// GetOrganization returns an organization in scope.
func (s *Service) GetOrganization(ctx context.Context, id string) (Organization, error) {
	return s.getOrg(ctx, s.db, access.ScopeFrom(ctx), id, false)
}

// GetOrganizationIn is GetOrganization inside the caller's transaction.
func (s *Service) GetOrganizationIn(ctx context.Context, q store.Querier, id string) (Organization, error) {
	return s.getOrg(ctx, q, access.ScopeFrom(ctx), id, false)
}

// ExportOrganizations returns a page of the live organizations in scope in ID order, or with
// s.Since those changed since then in (updatedAt, ID) order.
func (s *Service) ExportOrganizations(ctx context.Context, sk store.Seek) ([]*Organization, bool, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "o.id", "o.partner_id"), "o.deleted_at IS NULL"}
	keys := sk.Keys(&a, &conds, "o.updated_at", "o.id")
	return store.SeekPage(ctx, s.db, store.SeekQuery{Columns: orgColumns, From: " FROM organizations o", Conds: conds,
		Args: &a, Keys: keys}, sk, scanOrgRow)
}

func (s *Service) getOrg(ctx context.Context, q store.Querier, scope access.Scope, id string, withDeleted bool) (Organization, error) {
	var a store.Args
	conds := []string{scope.OrgFilter(&a, "o.id", "o.partner_id")}
	if !withDeleted {
		conds = append(conds, "o.deleted_at IS NULL")
	}
	return store.ByID(ctx, q, "organization", `SELECT `+orgColumns+` FROM organizations o`, "o.id", id, &a, conds, scanOrg)
}

// ErrOrgLimit is the refusal of a new organization beyond the partner's maxOrganizations.
// The partner API maps it to its own code.
var ErrOrgLimit = &apperr.Error{Kind: apperr.KindConflict, Code: "ORG_LIMIT_REACHED",
	Message: "the partner has reached its maxOrganizations; raise the limit or delete an organization"}

// reserveOrgSlot counts one more organization against the partner's cap. The conditional
// update is the cap: concurrent creators cannot both take the last slot, on any node.
func reserveOrgSlot(ctx context.Context, tx *sql.Tx, partnerID string) error {
	var n int
	err := tx.QueryRowContext(ctx, `UPDATE partners SET org_count = org_count + 1 WHERE id = $1 AND deleted_at IS NULL
		AND (max_organizations IS NULL OR org_count < max_organizations) RETURNING org_count`, partnerID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM partners WHERE id = $1 AND deleted_at IS NULL)`, partnerID).Scan(&exists); err != nil {
			return fmt.Errorf("load partner %s: %w", partnerID, err)
		}
		if !exists {
			return apperr.NotFound("partner")
		}
		return ErrOrgLimit
	}
	if err != nil {
		return fmt.Errorf("count an organization of partner %s: %w", partnerID, err)
	}
	return nil
}

// CreateOrganization creates an organization under the caller's partner (or, for system
// callers, the given partner), counting it against maxOrganizations, with an optional first
// site, all in one transaction.
func (s *Service) CreateOrganization(ctx context.Context, in NewOrganization) (Organization, error) {
	var o Organization
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var err error
		o, err = s.CreateOrganizationIn(ctx, tx, in)
		return err
	})
	if err != nil {
		return o, fmt.Errorf("create organization: %w", err)
	}
	return o, nil
}

// CreateOrganizationIn is CreateOrganization inside the caller's transaction (the partner API
// counts its rate limits in the same one). A full partner is ErrOrgLimit, a taken explicit
// slug ErrSlugConflict.
func (s *Service) CreateOrganizationIn(ctx context.Context, tx *sql.Tx, in NewOrganization) (Organization, error) {
	scope := access.ScopeFrom(ctx)
	partnerID, err := partnerForCreate(scope, in.PartnerID)
	if err != nil {
		return Organization{}, err
	}
	if err := checkName(in.Name); err != nil {
		return Organization{}, err
	}
	start, err := parseDate("contractStart", in.ContractStart)
	if err != nil {
		return Organization{}, err
	}
	end, err := parseDate("contractEnd", in.ContractEnd)
	if err != nil {
		return Organization{}, err
	}
	if in.Timezone != "" {
		if err := validTimezone(in.Timezone); err != nil {
			return Organization{}, err
		}
	}
	if err := reserveOrgSlot(ctx, tx, partnerID); err != nil {
		return Organization{}, err
	}
	slug, err := chooseSlug(ctx, tx, "organizations", *in.Name, in.Slug)
	if err != nil {
		return Organization{}, err
	}
	id, now := store.NewID(), s.clock.Now()
	orgType, status := "customer", "active"
	if in.Type != nil {
		orgType = *in.Type
	}
	if in.Status != nil {
		status = *in.Status
	}
	settings := map[string]any{}
	if in.Settings != nil {
		settings = *in.Settings
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO organizations (id, partner_id, name, slug, type, status,
		max_enrollment_key_ttl_minutes, contract_start, contract_end, billing_contact, settings, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)`,
		id, partnerID, *in.Name, slug, orgType, status, in.MaxEnrollmentKeyTTLMinutes, start, end,
		store.EncodeJSONOrNull(in.BillingContact), encodeObject(settings), now)
	if err != nil {
		return Organization{}, slugConflict(err)
	}
	// A partner user limited to selected organizations keeps reaching what it creates.
	if p := access.PrincipalFrom(ctx); p != nil && scope.OrgLimited() && p.Kind == access.ActorUser {
		if _, err := tx.ExecContext(ctx, `INSERT INTO user_org_access (user_id, org_id) VALUES ($1, $2)`, p.UserID, id); err != nil {
			return Organization{}, fmt.Errorf("give user %s organization %s: %w", p.UserID, id, err)
		}
	}
	o, err := s.getOrg(ctx, tx, access.SystemScope(), id, false)
	if err != nil {
		return o, err
	}
	if err := audit.Record(ctx, tx, audit.Entry{Action: "organization.create", ResourceType: "organization",
		ResourceID: id, ResourceName: o.Name, PartnerID: partnerID, OrgID: id, Details: audit.Snapshot(o)}); err != nil {
		return o, err
	}
	if in.DefaultSite != "" {
		tz := in.Timezone
		if tz == "" {
			tz = "UTC"
		}
		if _, err := s.insertSite(ctx, tx, o, SiteInput{Name: &in.DefaultSite, Timezone: &tz}); err != nil {
			return o, err
		}
	}
	return o, nil
}

func partnerForCreate(scope access.Scope, requested string) (string, error) {
	switch scope.Level {
	case access.LevelSystem:
		if requested == "" {
			return "", apperr.Invalid("partnerId", "system administrators name the partner of a new organization")
		}
		return requested, nil
	case access.LevelPartner:
		if requested != "" && requested != scope.PartnerID {
			return "", apperr.NotFound("partner")
		}
		return scope.PartnerID, nil
	}
	return "", apperr.Forbidden("organization users cannot create organizations")
}

// UpdateOrganization changes an organization in scope.
func (s *Service) UpdateOrganization(ctx context.Context, id string, in OrganizationInput) (Organization, error) {
	scope := access.ScopeFrom(ctx)
	start, err := parseDate("contractStart", in.ContractStart)
	if err != nil {
		return Organization{}, err
	}
	end, err := parseDate("contractEnd", in.ContractEnd)
	if err != nil {
		return Organization{}, err
	}
	var o Organization
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.getOrg(ctx, tx, scope, id, false)
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
		if in.Type != nil {
			ch.Set("type", *in.Type)
		}
		if in.Status != nil {
			ch.Set("status", *in.Status)
		}
		if in.MaxEnrollmentKeyTTLMinutes != nil {
			ch.Set("max_enrollment_key_ttl_minutes", *in.MaxEnrollmentKeyTTLMinutes)
		}
		if in.ContractStart != nil {
			ch.Set("contract_start", start)
		}
		if in.ContractEnd != nil {
			ch.Set("contract_end", end)
		}
		if in.BillingContact != nil {
			ch.Set("billing_contact", store.EncodeJSONOrNull(in.BillingContact))
		}
		if in.Settings != nil {
			ch.Set("settings", encodeObject(*in.Settings))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE organizations SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id), ch.Args.Values()...); err != nil {
			return slugConflict(err)
		}
		if o, err = s.getOrg(ctx, tx, scope, id, false); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "organization.update", ResourceType: "organization",
			ResourceID: id, ResourceName: o.Name, PartnerID: o.PartnerID, OrgID: id, Details: audit.Diff(before, o)})
	})
	if err != nil {
		return o, fmt.Errorf("update organization: %w", err)
	}
	return o, nil
}

// DeleteOrganization soft-deletes an organization: it disappears from lists and lookups,
// frees its slot under maxOrganizations, and can be restored.
func (s *Service) DeleteOrganization(ctx context.Context, id string) error {
	scope := access.ScopeFrom(ctx)
	if scope.Level == access.LevelOrganization {
		return apperr.Forbidden("organization users cannot delete their organization")
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		o, err := s.getOrg(ctx, tx, scope, id, false)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE organizations SET deleted_at = $1, updated_at = $1 WHERE id = $2 AND deleted_at IS NULL`,
			s.clock.Now(), id)
		if err != nil {
			return fmt.Errorf("delete organization %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apperr.NotFound("organization")
		}
		if _, err := tx.ExecContext(ctx, `UPDATE partners SET org_count = org_count - 1 WHERE id = $1`, o.PartnerID); err != nil {
			return fmt.Errorf("uncount organization %s of partner %s: %w", id, o.PartnerID, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "organization.delete", ResourceType: "organization",
			ResourceID: id, ResourceName: o.Name, PartnerID: o.PartnerID, OrgID: id})
	})
}

// RestoreOrganization undoes a delete, if the partner's cap still has room.
func (s *Service) RestoreOrganization(ctx context.Context, id string) (Organization, error) {
	scope := access.ScopeFrom(ctx)
	if scope.Level == access.LevelOrganization {
		return Organization{}, apperr.Forbidden("organization users cannot restore organizations")
	}
	var o Organization
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.getOrg(ctx, tx, scope, id, true)
		if err != nil {
			return err
		}
		if before.DeletedAt == nil {
			return apperr.Conflict("the organization is not deleted")
		}
		if err := reserveOrgSlot(ctx, tx, before.PartnerID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE organizations SET deleted_at = NULL, updated_at = $1 WHERE id = $2 AND deleted_at IS NOT NULL`,
			s.clock.Now(), id)
		if err != nil {
			return fmt.Errorf("restore organization %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return apperr.Conflict("the organization is not deleted")
		}
		if o, err = s.getOrg(ctx, tx, scope, id, false); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "organization.restore", ResourceType: "organization",
			ResourceID: id, ResourceName: o.Name, PartnerID: o.PartnerID, OrgID: id})
	})
	if err != nil {
		return o, fmt.Errorf("restore organization: %w", err)
	}
	return o, nil
}
