package security

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// SecurityScanSchedule is when a policy's devices are scanned: every day at DailyTime (UTC,
// HH:MM) with a quick or full scan.
type SecurityScanSchedule struct {
	ScanType  string `json:"scanType" enum:"quick,full"`
	DailyTime string `json:"dailyTime" pattern:"^([01][0-9]|2[0-3]):[0-5][0-9]$" doc:"UTC time of day, HH:MM."`
}

// SecurityPolicy is what devices' security is judged against: an organization's own, else its
// partner's default (orgId null), else the built-in one.
type SecurityPolicy struct {
	ID                string                `json:"id" doc:"\"builtin\" for the built-in policy."`
	PartnerID         string                `json:"partnerId,omitempty"`
	OrgID             *string               `json:"orgId" doc:"null for the partner's default."`
	Name              string                `json:"name"`
	RequireFirewall   bool                  `json:"requireFirewall"`
	RequireEncryption bool                  `json:"requireEncryption"`
	RequireAntivirus  bool                  `json:"requireAntivirus,omitempty"`
	MinPasswordLength int                   `json:"minPasswordLength" doc:"0: not judged."`
	MaxAdministrators int                   `json:"maxAdministrators" doc:"Administrators that can sign in, root aside; 0: not judged."`
	ScanSchedule      *SecurityScanSchedule `json:"scanSchedule"`
	CreatedBy         *string               `json:"createdBy,omitempty"`
	CreatedAt         *time.Time            `json:"createdAt,omitempty"`
	UpdatedAt         *time.Time            `json:"updatedAt,omitempty"`
}

// builtinPolicy applies where neither the organization nor its partner has one.
var builtinPolicy = SecurityPolicy{ID: "builtin", Name: "Built-in", RequireFirewall: true, MinPasswordLength: 8, MaxAdministrators: 5}

// SecurityPolicyInput creates or replaces a policy.
type SecurityPolicyInput struct {
	OrgID             *string               `json:"orgId,omitempty" format:"uuid" doc:"POST only: the organization; absent (for a partner caller reaching every organization) makes the partner's default."`
	PartnerID         string                `json:"partnerId,omitempty" format:"uuid" doc:"POST only: system callers name the partner of a default policy."`
	Name              string                `json:"name" minLength:"1" maxLength:"200"`
	RequireFirewall   bool                  `json:"requireFirewall,omitempty" doc:"Absent: false (PUT replaces every setting)."`
	RequireEncryption bool                  `json:"requireEncryption,omitempty"`
	RequireAntivirus  bool                  `json:"requireAntivirus,omitempty"`
	MinPasswordLength int                   `json:"minPasswordLength,omitempty" minimum:"0" maximum:"128"`
	MaxAdministrators int                   `json:"maxAdministrators,omitempty" minimum:"0" maximum:"1000"`
	ScanSchedule      *SecurityScanSchedule `json:"scanSchedule,omitempty"`
}

var dailyTime = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)

func (in SecurityPolicyInput) validate() error {
	var d []apperr.Detail
	if in.Name == "" || len(in.Name) > 200 {
		d = append(d, apperr.Detail{Field: "name", Message: "1 to 200 characters"})
	}
	if in.MinPasswordLength < 0 || in.MinPasswordLength > 128 {
		d = append(d, apperr.Detail{Field: "minPasswordLength", Message: "0 to 128"})
	}
	if in.MaxAdministrators < 0 || in.MaxAdministrators > 1000 {
		d = append(d, apperr.Detail{Field: "maxAdministrators", Message: "0 to 1000"})
	}
	if sc := in.ScanSchedule; sc != nil {
		if sc.ScanType != "quick" && sc.ScanType != "full" {
			d = append(d, apperr.Detail{Field: "scanSchedule.scanType", Message: "quick or full"})
		}
		if !dailyTime.MatchString(sc.DailyTime) {
			d = append(d, apperr.Detail{Field: "scanSchedule.dailyTime", Message: "HH:MM (UTC)"})
		}
	}
	if len(d) > 0 {
		return apperr.InvalidFields(d)
	}
	return nil
}

const policyColumns = `p.id, p.partner_id, p.org_id, p.name, p.require_firewall, p.require_encryption, p.require_antivirus,
	p.min_password_length, p.max_administrators, p.scan_schedule, p.created_by, p.created_at, p.updated_at`

func scanPolicy(sc store.Scanner) (SecurityPolicy, error) {
	var p SecurityPolicy
	var org, by sql.NullString
	var sched string
	var created, updated time.Time
	if err := sc.Scan(&p.ID, &p.PartnerID, &org, &p.Name, &p.RequireFirewall, &p.RequireEncryption, &p.RequireAntivirus,
		&p.MinPasswordLength, &p.MaxAdministrators, &sched, &by, &created, &updated); err != nil {
		return p, err
	}
	p.OrgID, p.CreatedBy = store.StringPtr(org), store.StringPtr(by)
	created, updated = created.UTC(), updated.UTC()
	p.CreatedAt, p.UpdatedAt = &created, &updated
	if err := json.Unmarshal([]byte(sched), &p.ScanSchedule); err != nil {
		return p, fmt.Errorf("read policy %s: %w", p.ID, err)
	}
	return p, nil
}

// policySet holds the policies of some partners.
type policySet struct {
	byOrg     map[string]SecurityPolicy
	byPartner map[string]SecurityPolicy
}

// forOrg is the policy that applies to an organization.
func (ps *policySet) forOrg(partnerID, orgID string) SecurityPolicy {
	if p, ok := ps.byOrg[orgID]; ok {
		return p
	}
	if p, ok := ps.byPartner[partnerID]; ok {
		return p
	}
	return builtinPolicy
}

func loadPolicies(ctx context.Context, q store.Querier, partnerIDs []string) (*policySet, error) {
	ps := &policySet{byOrg: map[string]SecurityPolicy{}, byPartner: map[string]SecurityPolicy{}}
	for first := 0; first < len(partnerIDs); first += maxParams {
		var a store.Args
		policies, err := store.QueryAll(ctx, q, `SELECT `+policyColumns+` FROM security_policies p WHERE p.partner_id IN `+
			a.In(partnerIDs[first:min(first+maxParams, len(partnerIDs))]), a.Values(), scanPolicy)
		if err != nil {
			return nil, fmt.Errorf("load security policies: %w", err)
		}
		for _, p := range policies {
			if p.OrgID != nil {
				ps.byOrg[*p.OrgID] = p
			} else {
				ps.byPartner[p.PartnerID] = p
			}
		}
	}
	return ps, nil
}

// policyFilter keeps policies in scope: an organization's caller sees its organization's and
// its partner's default (read only).
func policyFilter(scope access.Scope, a *store.Args) string {
	if scope.Level == access.LevelOrganization {
		return "(p.org_id = " + a.Add(scope.OrgID) + " OR (p.org_id IS NULL AND p.partner_id = " + a.Add(scope.PartnerID) + "))"
	}
	return "(" + scope.TenantFilter(a, "p.org_id", "p.partner_id") + ") AND (p.org_id IS NULL OR " + tenancy.LiveOrg("p.org_id") + ")"
}

// ListPolicies lists the policies in scope, by ID.
func (s *Service) ListPolicies(ctx context.Context, orgID string, page store.Page) ([]SecurityPolicy, string, *int, error) {
	var a store.Args
	conds := []string{policyFilter(access.ScopeFrom(ctx), &a)}
	if orgID != "" {
		conds = append(conds, "p.org_id = "+a.Add(orgID))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: policyColumns, From: " FROM security_policies p", Conds: conds, Args: &a,
		SortKey: "p.id", SortID: "p.id"}, page, scanPolicy, func(p SecurityPolicy) (string, string) { return p.ID, p.ID })
}

func getPolicy(ctx context.Context, q store.Querier, scope access.Scope, id string) (SecurityPolicy, error) {
	var a store.Args
	return store.ByID(ctx, q, "security policy", `SELECT `+policyColumns+` FROM security_policies p`, "p.id", id, &a, []string{policyFilter(scope, &a)}, scanPolicy)
}

var errPolicyExists = apperr.ConflictCode("POLICY_EXISTS", "the organization (or partner default) already has a security policy: change it with PUT")

func scheduleJSON(s *SecurityScanSchedule) string {
	if s == nil {
		return "null"
	}
	return store.EncodeJSON(s)
}

// CreatePolicy adds an organization's policy, or a partner's default: one of each (409
// POLICY_EXISTS).
func (s *Service) CreatePolicy(ctx context.Context, in SecurityPolicyInput) (SecurityPolicy, error) {
	if err := in.validate(); err != nil {
		return SecurityPolicy{}, err
	}
	scope := access.ScopeFrom(ctx)
	var out SecurityPolicy
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, scope, store.Deref(in.OrgID), tenancy.PlaceOptions{Noun: "security policy", PartnerID: in.PartnerID,
			PartnerWide: true})
		if err != nil {
			return err
		}
		id, now := store.NewID(), s.now()
		_, err = tx.ExecContext(ctx, `INSERT INTO security_policies (id, partner_id, org_id, name, require_firewall, require_encryption,
			require_antivirus, min_password_length, max_administrators, scan_schedule, last_scheduled_day, created_by, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)`, id, at.PartnerID, store.NullIfEmpty(at.OrgID), in.Name,
			in.RequireFirewall, in.RequireEncryption, in.RequireAntivirus, in.MinPasswordLength, in.MaxAdministrators,
			scheduleJSON(in.ScanSchedule), scheduledDay(in.ScanSchedule, now), access.ActorName(ctx), now)
		if store.IsUniqueViolation(err) {
			return errPolicyExists
		}
		if err != nil {
			return fmt.Errorf("insert security policy: %w", err)
		}
		if out, err = getPolicy(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		if err := s.restateOrgs(ctx, tx, at.PartnerID, nonEmpty(at.OrgID)); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "security_policy.create", ResourceType: "security_policy", ResourceID: id,
			ResourceName: in.Name, PartnerID: at.PartnerID, OrgID: at.OrgID, Details: map[string]any{"policy": out}})
	})
	if err != nil {
		return out, fmt.Errorf("create security policy: %w", err)
	}
	return out, nil
}

// scheduledDay is the day a policy saved at now counts as scanned already: today when its
// time of day has passed (its first scan is tomorrow's, not one at once), else none.
func scheduledDay(sc *SecurityScanSchedule, now time.Time) string {
	if sc == nil {
		return ""
	}
	now = now.UTC()
	at, err := time.Parse("15:04", sc.DailyTime)
	if err != nil || now.Before(time.Date(now.Year(), now.Month(), now.Day(), at.Hour(), at.Minute(), 0, 0, time.UTC)) {
		return ""
	}
	return now.Format(time.DateOnly)
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// UpdatePolicy replaces a policy's settings (PUT); its organization stays. An organization's
// caller cannot change its partner's default (404, as it reads it only).
func (s *Service) UpdatePolicy(ctx context.Context, id string, in SecurityPolicyInput) (SecurityPolicy, error) {
	if err := in.validate(); err != nil {
		return SecurityPolicy{}, err
	}
	scope := access.ScopeFrom(ctx)
	var out SecurityPolicy
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		p, err := getPolicy(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if p.OrgID == nil && (scope.Level == access.LevelOrganization || scope.OrgLimited()) {
			return apperr.Forbidden("the partner's default policy concerns every organization of the partner")
		}
		if _, err := tx.ExecContext(ctx, `UPDATE security_policies SET name = $1, require_firewall = $2, require_encryption = $3,
			require_antivirus = $4, min_password_length = $5, max_administrators = $6, scan_schedule = $7, last_scheduled_day = $8,
			updated_at = $9 WHERE id = $10`,
			in.Name, in.RequireFirewall, in.RequireEncryption, in.RequireAntivirus, in.MinPasswordLength, in.MaxAdministrators,
			scheduleJSON(in.ScanSchedule), scheduledDay(in.ScanSchedule, s.now()), s.now(), id); err != nil {
			return fmt.Errorf("update security policy %s: %w", id, err)
		}
		if out, err = getPolicy(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		if err := s.restateOrgs(ctx, tx, p.PartnerID, nonEmpty(store.Deref(p.OrgID))); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "security_policy.update", ResourceType: "security_policy", ResourceID: id,
			ResourceName: in.Name, PartnerID: p.PartnerID, OrgID: store.Deref(p.OrgID), Details: map[string]any{"before": p, "after": out}})
	})
	if err != nil {
		return out, fmt.Errorf("update security policy: %w", err)
	}
	return out, nil
}
