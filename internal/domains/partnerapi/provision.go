package partnerapi

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"gale/internal/domains/enrollment"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/apperr"
)

// Error codes of the partner API (§4, §7).
const (
	CodeOrgLimit           = "partner_provisioning_org_limit_reached"
	CodeSlugConflict       = "partner_provisioning_slug_conflict"
	CodeRestrictions       = "partner_provisioning_principal_restrictions_required"
	CodeIdempotencyReused  = "IDEMPOTENCY_KEY_REUSED"
	CodeIdempotencyPending = "IDEMPOTENCY_KEY_IN_PROGRESS"
)

// OrganizationBody is the organization create body of §2. partnerId is never accepted: the
// organization belongs to the principal's partner.
type OrganizationBody struct {
	Name   string `json:"name" minLength:"1" maxLength:"200"`
	Slug   string `json:"slug" minLength:"1" maxLength:"63" doc:"Lower-case letters, digits and single dashes; unique. A taken slug is 409 partner_provisioning_slug_conflict."`
	Type   string `json:"type,omitempty" maxLength:"50" doc:"Free-form classification; default customer."`
	Status string `json:"status,omitempty" enum:"active,trial" doc:"Default active."`
}

// SiteBody is the site create body of §2.
type SiteBody struct {
	OrgID    string           `json:"orgId" format:"uuid" doc:"An organization of the principal's partner; any other is 403."`
	Name     string           `json:"name" minLength:"1" maxLength:"200"`
	Timezone string           `json:"timezone,omitempty" maxLength:"64" doc:"IANA time zone; default UTC."`
	Address  *tenancy.Address `json:"address,omitempty"`
	Contact  *tenancy.Contact `json:"contact,omitempty"`
}

// EnrollmentKeyBody is the enrollment key create body of §2.
type EnrollmentKeyBody struct {
	OrgID                 string     `json:"orgId" format:"uuid" doc:"An organization of the principal's partner; any other is 403."`
	Name                  string     `json:"name" minLength:"1" maxLength:"200"`
	SiteID                string     `json:"siteId,omitempty" format:"uuid" doc:"Pins enrolling devices to this site of the organization."`
	MaxUsage              *int       `json:"maxUsage,omitempty" minimum:"1" maximum:"100000" doc:"Default 1."`
	IssueEnrollmentSecret bool       `json:"issueEnrollmentSecret,omitempty" doc:"Mint a per-key enrollmentSecret, returned once."`
	TTLMinutes            *int       `json:"ttlMinutes,omitempty" minimum:"1" maximum:"525600" doc:"Not together with expiresAt."`
	ExpiresAt             *time.Time `json:"expiresAt,omitempty" doc:"Not together with ttlMinutes."`
}

// normalized is the body as the idempotency check compares it: the same instant written in
// another zone is the same request.
func normalized(in EnrollmentKeyBody) EnrollmentKeyBody {
	if in.ExpiresAt != nil {
		t := in.ExpiresAt.UTC()
		in.ExpiresAt = &t
	}
	return in
}

// reachableOrg loads an organization of the principal's partner; any other (or none) is 403.
func (s *Service) reachableOrg(ctx context.Context, tx *sql.Tx, orgID string) (tenancy.Organization, error) {
	org, err := s.orgs.GetOrganizationIn(ctx, tx, orgID)
	if apperr.IsCode(err, apperr.CodeNotFound) {
		return org, apperr.Forbidden("orgId is not an organization of the service principal's partner")
	}
	return org, err
}

// write runs fn in one transaction after counting the request against the write budget of
// its principal and key, so a request that fails spends nothing.
func (s *Service) write(ctx context.Context, fn func(tx *sql.Tx) error) (RateLimitHeaders, error) {
	var rl RateLimitHeaders
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		c, err := s.credentialOf(ctx, tx)
		if err != nil {
			return err
		}
		if rl, err = s.spend(ctx, tx, writeBudgets(c)); err != nil {
			return err
		}
		return fn(tx)
	})
	return rl, err
}

// CreateOrganization creates an organization under the principal's partner, counted against
// its maxOrganizations (the conditional update in tenancy settles concurrent creators) and
// against the write budget. Full: 409 partner_provisioning_org_limit_reached; a taken slug:
// 409 partner_provisioning_slug_conflict. No default site is created.
func (s *Service) CreateOrganization(ctx context.Context, in OrganizationBody) (tenancy.Organization, RateLimitHeaders, error) {
	var out tenancy.Organization
	rl, err := s.write(ctx, func(tx *sql.Tx) error {
		req := tenancy.NewOrganization{OrganizationInput: tenancy.OrganizationInput{Name: &in.Name, Slug: &in.Slug}}
		if in.Type != "" {
			req.Type = &in.Type
		}
		if in.Status != "" {
			req.Status = &in.Status
		}
		var err error
		out, err = s.orgs.CreateOrganizationIn(ctx, tx, req)
		switch {
		case errors.Is(err, tenancy.ErrOrgLimit):
			return apperr.ConflictCode(CodeOrgLimit, "the partner has reached its maxOrganizations; retrying will not help "+
				"until a partner administrator raises the limit or deletes an organization")
		case errors.Is(err, tenancy.ErrSlugConflict):
			e := apperr.ConflictCode(CodeSlugConflict, "slug "+in.Slug+" is already in use")
			e.Details = tenancy.ErrSlugConflict.Details
			return e
		}
		return err
	})
	return out, rl, err
}

// CreateSite adds a site to an organization of the principal's partner (403 for any other),
// counted against the write budget.
func (s *Service) CreateSite(ctx context.Context, in SiteBody) (tenancy.Site, RateLimitHeaders, error) {
	var out tenancy.Site
	rl, err := s.write(ctx, func(tx *sql.Tx) error {
		org, err := s.reachableOrg(ctx, tx, in.OrgID)
		if err != nil {
			return err
		}
		site := tenancy.SiteInput{Name: &in.Name, Address: in.Address, Contact: in.Contact}
		if in.Timezone != "" {
			site.Timezone = &in.Timezone
		}
		out, err = s.orgs.CreateSiteIn(ctx, tx, org, site)
		return err
	})
	return out, rl, err
}

// CreateEnrollmentKey mints an enrollment key for an organization of the principal's partner.
// The principal needs an expiry and a source-CIDR allowlist (403
// partner_provisioning_principal_restrictions_required). Without ttlMinutes or expiresAt the
// key lives the default lifetime of keys made by hand, clamped to the partner API's cap and
// the organization's. Mints are counted against their own budgets, not the write budget.
// With an idempotency key, a retry with the same body answers the first answer again
// (replayed true) without minting.
func (s *Service) CreateEnrollmentKey(ctx context.Context, idemKey string, in EnrollmentKeyBody) (out enrollment.IssuedKey, rl RateLimitHeaders, replayed bool, err error) {
	var c *credential
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		var err error
		if c, err = s.credentialOf(ctx, tx); err != nil {
			return err
		}
		if c.ExpiresAt == nil || len(c.SourceCIDRs) == 0 {
			return apperr.ForbiddenCode(CodeRestrictions, "minting enrollment keys needs a service principal with both an "+
				"expiresAt and a sourceCidrs allowlist; a partner administrator can set them")
		}
		if idemKey != "" {
			first, err := s.claimIdempotencyKey(ctx, tx, c.ID, idemKey, normalized(in))
			if err != nil || first != nil {
				if first != nil {
					out, replayed = *first, true
				}
				return err
			}
		}
		if rl, err = s.spend(ctx, tx, mintBudgets(c)); err != nil {
			return err
		}
		if _, err := s.reachableOrg(ctx, tx, in.OrgID); err != nil {
			return err
		}
		out, err = s.keys.CreateIn(ctx, tx, enrollment.NewEnrollmentKey{OrgID: in.OrgID, Name: in.Name, SiteID: in.SiteID,
			MaxUsage: in.MaxUsage, TTLMinutes: in.TTLMinutes, ExpiresAt: in.ExpiresAt, IssueEnrollmentSecret: in.IssueEnrollmentSecret},
			enrollment.Policy{Source: enrollment.SourcePartnerAPI, DefaultTTL: s.opts.KeyDefaultTTL, MaxTTL: s.opts.KeyMaxTTL})
		if err != nil || idemKey == "" {
			return err
		}
		return s.rememberAnswer(ctx, tx, c.ID, idemKey, out)
	})
	if err == nil && replayed {
		rl, err = s.peek(ctx, mintBudgets(c))
	}
	return out, rl, replayed, err
}
