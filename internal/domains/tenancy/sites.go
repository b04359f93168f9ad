package tenancy

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Address is a postal address.
type Address struct {
	Line1      string `json:"line1,omitempty" maxLength:"200"`
	Line2      string `json:"line2,omitempty" maxLength:"200"`
	City       string `json:"city,omitempty" maxLength:"100"`
	Region     string `json:"region,omitempty" maxLength:"100"`
	PostalCode string `json:"postalCode,omitempty" maxLength:"20"`
	Country    string `json:"country,omitempty" maxLength:"100"`
}

// Site is the API view of a site (a location of an organization).
type Site struct {
	ID        string    `json:"id" format:"uuid"`
	SiteID    string    `json:"siteId" format:"uuid" doc:"Same as id."`
	OrgID     string    `json:"orgId" format:"uuid"`
	PartnerID string    `json:"partnerId" format:"uuid"`
	Name      string    `json:"name"`
	Timezone  string    `json:"timezone" doc:"IANA time zone, e.g. Europe/Berlin."`
	Address   *Address  `json:"address"`
	Contact   *Contact  `json:"contact"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// SiteInput holds a site's writable fields; nil fields are left as they are.
type SiteInput struct {
	Name     *string  `json:"name,omitempty" minLength:"1" maxLength:"200"`
	Timezone *string  `json:"timezone,omitempty" maxLength:"64" doc:"IANA time zone; default UTC."`
	Address  *Address `json:"address,omitempty"`
	Contact  *Contact `json:"contact,omitempty"`
}

const siteColumns = `s.id, s.org_id, s.partner_id, s.name, s.timezone, s.address, s.contact, s.created_at, s.updated_at`

func scanSite(row store.Scanner) (Site, error) {
	var st Site
	var addr, contact sql.NullString
	err := row.Scan(&st.ID, &st.OrgID, &st.PartnerID, &st.Name, &st.Timezone, &addr, &contact, &st.CreatedAt, &st.UpdatedAt)
	if err != nil {
		return st, err
	}
	st.SiteID = st.ID
	if addr.Valid && addr.String != "null" {
		var a Address
		if json.Unmarshal([]byte(addr.String), &a) == nil {
			st.Address = &a
		}
	}
	if contact.Valid && contact.String != "null" {
		var c Contact
		if json.Unmarshal([]byte(contact.String), &c) == nil {
			st.Contact = &c
		}
	}
	return st, nil
}

func validTimezone(tz string) error {
	if _, err := time.LoadLocation(tz); err != nil || tz == "" || tz == "Local" {
		return apperr.Invalid("timezone", "use an IANA time zone such as Europe/London or America/New_York")
	}
	return nil
}

// SiteListFilter narrows a list of sites.
type SiteListFilter struct {
	OrgID  string
	Search string
}

// ListSites lists sites of organizations in scope, by name.
func (s *Service) ListSites(ctx context.Context, f SiteListFilter, page store.Page) ([]Site, string, *int, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "s.org_id", "s.partner_id"), LiveOrg("s.org_id")}
	if f.OrgID != "" {
		conds = append(conds, "s.org_id = "+a.Add(f.OrgID))
	}
	if f.Search != "" {
		conds = append(conds, store.Contains(&a, f.Search, "s.name"))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: siteColumns, From: " FROM sites s", Conds: conds,
		Args: &a, SortKey: "s.name", SortID: "s.id"}, page, scanSite, func(st Site) (string, string) { return st.Name, st.ID })
}

// ExportSites returns a page of the sites of live organizations in scope in ID order, or with
// s.Since those changed since then in (updatedAt, ID) order.
func (s *Service) ExportSites(ctx context.Context, sk store.Seek) ([]Site, bool, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).OrgFilter(&a, "s.org_id", "s.partner_id"), LiveOrg("s.org_id")}
	keys := sk.Keys(&a, &conds, "s.updated_at", "s.id")
	return store.SeekPage(ctx, s.db, store.SeekQuery{Columns: siteColumns, From: " FROM sites s", Conds: conds,
		Args: &a, Keys: keys}, sk, scanSite)
}

// GetSite returns a site in scope.
func (s *Service) GetSite(ctx context.Context, id string) (Site, error) {
	return s.getSite(ctx, s.db, access.ScopeFrom(ctx), id)
}

func (s *Service) getSite(ctx context.Context, q store.Querier, scope access.Scope, id string) (Site, error) {
	var a store.Args
	conds := []string{scope.OrgFilter(&a, "s.org_id", "s.partner_id"), LiveOrg("s.org_id")}
	return store.ByID(ctx, q, "site", `SELECT `+siteColumns+` FROM sites s`, "s.id", id, &a, conds, scanSite)
}

// CreateSite adds a site to an organization in scope. An organization caller may omit orgID.
func (s *Service) CreateSite(ctx context.Context, orgID string, in SiteInput) (Site, error) {
	scope := access.ScopeFrom(ctx)
	if orgID == "" {
		if scope.Level != access.LevelOrganization {
			return Site{}, apperr.Invalid("orgId", "orgId is required")
		}
		orgID = scope.OrgID
	}
	if in.Name == nil {
		return Site{}, apperr.Invalid("name", "name is required")
	}
	var st Site
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		org, err := s.getOrg(ctx, tx, scope, orgID, false)
		if err != nil {
			if apperr.IsCode(err, apperr.CodeNotFound) {
				return errNoSuchOrg()
			}
			return err
		}
		st, err = s.insertSite(ctx, tx, org, in)
		return err
	})
	if err != nil {
		return st, fmt.Errorf("create site: %w", err)
	}
	return st, nil
}

// CreateSiteIn adds a site to an organization the caller already resolved (the partner API
// checks its own reach first).
func (s *Service) CreateSiteIn(ctx context.Context, tx *sql.Tx, org Organization, in SiteInput) (Site, error) {
	return s.insertSite(ctx, tx, org, in)
}

func (s *Service) insertSite(ctx context.Context, tx *sql.Tx, org Organization, in SiteInput) (Site, error) {
	tz := "UTC"
	if in.Timezone != nil {
		tz = *in.Timezone
	}
	if err := validTimezone(tz); err != nil {
		return Site{}, err
	}
	id, now := store.NewID(), s.clock.Now()
	_, err := tx.ExecContext(ctx, `INSERT INTO sites (id, partner_id, org_id, name, timezone, address, contact, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`, id, org.PartnerID, org.ID, strings.TrimSpace(*in.Name), tz,
		store.EncodeJSONOrNull(in.Address), store.EncodeJSONOrNull(in.Contact), now)
	if store.IsUniqueViolation(err) {
		return Site{}, apperr.Conflict("the organization already has a site named " + *in.Name)
	}
	if err != nil {
		return Site{}, fmt.Errorf("insert site: %w", err)
	}
	st, err := s.getSite(ctx, tx, access.SystemScope(), id)
	if err != nil {
		return st, err
	}
	return st, audit.Record(ctx, tx, audit.Entry{Action: "site.create", ResourceType: "site", ResourceID: id,
		ResourceName: st.Name, PartnerID: org.PartnerID, OrgID: org.ID, Details: audit.Snapshot(st)})
}

// UpdateSite changes a site in scope.
func (s *Service) UpdateSite(ctx context.Context, id string, in SiteInput) (Site, error) {
	scope := access.ScopeFrom(ctx)
	if in.Timezone != nil {
		if err := validTimezone(*in.Timezone); err != nil {
			return Site{}, err
		}
	}
	var st Site
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.getSite(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		ch := store.NewChanges(s.clock.Now())
		if in.Name != nil {
			ch.Set("name", strings.TrimSpace(*in.Name))
		}
		if in.Timezone != nil {
			ch.Set("timezone", *in.Timezone)
		}
		if in.Address != nil {
			ch.Set("address", store.EncodeJSONOrNull(in.Address))
		}
		if in.Contact != nil {
			ch.Set("contact", store.EncodeJSONOrNull(in.Contact))
		}
		_, err = tx.ExecContext(ctx, `UPDATE sites SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id), ch.Args.Values()...)
		if store.IsUniqueViolation(err) {
			return apperr.Conflict("the organization already has a site with that name")
		}
		if err != nil {
			return fmt.Errorf("update site %s: %w", id, err)
		}
		if st, err = s.getSite(ctx, tx, scope, id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "site.update", ResourceType: "site", ResourceID: id,
			ResourceName: st.Name, PartnerID: st.PartnerID, OrgID: st.OrgID, Details: audit.Diff(before, st)})
	})
	if err != nil {
		return st, fmt.Errorf("update site: %w", err)
	}
	return st, nil
}

// DeleteSite removes a site in scope.
func (s *Service) DeleteSite(ctx context.Context, id string) error {
	scope := access.ScopeFrom(ctx)
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		st, err := s.getSite(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sites WHERE id = $1`, id); err != nil {
			if strings.Contains(strings.ToLower(err.Error()), "foreign key") {
				return apperr.Conflict("the site is still in use (devices or keys refer to it); move them first")
			}
			return fmt.Errorf("delete site %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "site.delete", ResourceType: "site", ResourceID: id,
			ResourceName: st.Name, PartnerID: st.PartnerID, OrgID: st.OrgID, Details: audit.Snapshot(st)})
	})
}
