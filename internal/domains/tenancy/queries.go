package tenancy

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// What other domains read of partners, organizations and sites: conditions and joins they
// splice into their own queries, and small read-only lookups. The SQL about these tables
// stays here, in the package that owns them.

// LiveOrg is the condition that the organization in column orgCol is not deleted; a row
// without an organization (NULL: a row of the partner as a whole) passes. It is one filter
// over the (few) deleted organizations rather than a join or a correlated EXISTS, so rows
// still come straight from an index in key order: keyset pages of exports stay index scans
// (PostgreSQL may otherwise plan a join and a sort of every row after the cursor).
func LiveOrg(orgCol string) string {
	return "(" + orgCol + " IS NULL OR " + orgCol + " NOT IN (SELECT id FROM organizations WHERE deleted_at IS NOT NULL))"
}

// LivePartner is the condition that the partner in column partnerCol is not deleted; a row
// without a partner (NULL: a system row) passes.
func LivePartner(partnerCol string) string {
	return "(" + partnerCol + " IS NULL OR " + partnerCol + " NOT IN (SELECT id FROM partners WHERE deleted_at IS NOT NULL))"
}

// PartnerOfOrg is the scalar subquery giving the partner of the organization in orgExpr (a
// column or a placeholder).
func PartnerOfOrg(orgExpr string) string {
	return "(SELECT partner_id FROM organizations WHERE id = " + orgExpr + ")"
}

// JoinOrg joins organizations under alias to the rows whose organization is in orgCol, for
// lists that show the organization's name (alias.name) beside each row.
func JoinOrg(alias, orgCol string) string {
	return " JOIN organizations " + alias + " ON " + alias + ".id = " + orgCol
}

// OrgInScope returns the partner of the organization orgID when it is live and the scope
// reaches it; ok is false otherwise.
func OrgInScope(ctx context.Context, q store.Querier, scope access.Scope, orgID string) (partnerID string, ok bool, err error) {
	var a store.Args
	conds := []string{"o.id = " + a.Add(orgID), "o.deleted_at IS NULL", scope.OrgFilter(&a, "o.id", "o.partner_id")}
	err = q.QueryRowContext(ctx, `SELECT o.partner_id FROM organizations o WHERE `+store.Where(conds), a.Values()...).Scan(&partnerID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("load organization %s: %w", orgID, err)
	}
	return partnerID, true, nil
}

// IsLivePartner reports whether partner partnerID exists and is not deleted.
func IsLivePartner(ctx context.Context, q store.Querier, partnerID string) (bool, error) {
	var live bool
	err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM partners WHERE id = $1 AND deleted_at IS NULL)`, partnerID).Scan(&live)
	if err != nil {
		return false, fmt.Errorf("load partner %s: %w", partnerID, err)
	}
	return live, nil
}

// SoleOrg returns the only live organization of a partner; ok is false when it has none or
// several.
func SoleOrg(ctx context.Context, q store.Querier, partnerID string) (orgID string, ok bool, err error) {
	ids, err := store.QueryStrings(ctx, q, `SELECT id FROM organizations WHERE partner_id = $1 AND deleted_at IS NULL
		ORDER BY id LIMIT 2`, partnerID)
	if err != nil {
		return "", false, fmt.Errorf("list organizations of partner %s: %w", partnerID, err)
	}
	if len(ids) != 1 {
		return "", false, nil
	}
	return ids[0], true, nil
}

// EnrollmentKeyTTLCap returns an organization's maxEnrollmentKeyTtlMinutes (NULL: no cap);
// ok is false when there is no such organization.
func EnrollmentKeyTTLCap(ctx context.Context, q store.Querier, orgID string) (capMinutes sql.NullInt64, ok bool, err error) {
	err = q.QueryRowContext(ctx, `SELECT max_enrollment_key_ttl_minutes FROM organizations WHERE id = $1`, orgID).Scan(&capMinutes)
	if errors.Is(err, sql.ErrNoRows) {
		return capMinutes, false, nil
	}
	if err != nil {
		return capMinutes, false, fmt.Errorf("load key lifetime cap of organization %s: %w", orgID, err)
	}
	return capMinutes, true, nil
}

// CountSitesOf returns how many of siteIDs (counted once each) are sites of organization orgID.
func CountSitesOf(ctx context.Context, q store.Querier, orgID string, siteIDs []string) (int, error) {
	var a store.Args
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM sites WHERE org_id = `+a.Add(orgID)+` AND id IN `+a.In(siteIDs),
		a.Values()...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count sites of organization %s: %w", orgID, err)
	}
	return n, nil
}

// FirstSite returns the oldest site of organization orgID; ok is false when it has none.
func FirstSite(ctx context.Context, q store.Querier, orgID string) (siteID string, ok bool, err error) {
	err = q.QueryRowContext(ctx, `SELECT id FROM sites WHERE org_id = $1 ORDER BY created_at, id LIMIT 1`, orgID).Scan(&siteID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("load first site of organization %s: %w", orgID, err)
	}
	return siteID, true, nil
}

// Names returns the names of an organization and a site; a missing one is empty.
func Names(ctx context.Context, q store.Querier, orgID, siteID string) (orgName, siteName string, err error) {
	var org, site sql.NullString
	err = q.QueryRowContext(ctx, `SELECT o.name, (SELECT s.name FROM sites s WHERE s.id = $2) FROM organizations o WHERE o.id = $1`,
		orgID, siteID).Scan(&org, &site)
	if errors.Is(err, sql.ErrNoRows) {
		err = nil
	}
	if err != nil {
		return "", "", fmt.Errorf("load names of organization %s and site %s: %w", orgID, siteID, err)
	}
	return org.String, site.String, nil
}

// SharedRowsFilter renders the condition keeping the rows the scope may see of a table whose
// rows belong to a partner as a whole (orgCol NULL) or to one of its organizations (custom
// fields, alert rules): a partner caller sees its partner's partner-wide rows and those of the
// organizations it reaches; an organization caller its partner's partner-wide rows and its
// own; nobody the rows of a deleted organization.
func SharedRowsFilter(scope access.Scope, a *store.Args, orgCol, partnerCol string) string {
	live := LiveOrg(orgCol)
	switch scope.Level {
	case access.LevelSystem:
		return live
	case access.LevelOrganization:
		if scope.OrgID == "" || scope.PartnerID == "" {
			return "FALSE"
		}
		return "(" + live + " AND " + partnerCol + " = " + a.Add(scope.PartnerID) + " AND (" + orgCol + " IS NULL OR " +
			orgCol + " = " + a.Add(scope.OrgID) + "))"
	}
	return "(" + live + " AND " + scope.TenantFilter(a, orgCol, partnerCol) + ")"
}

// OrgsInScope renders the FROM and WHERE of a read of the live organizations (alias o) the
// scope reaches, for views of other domains (search) that add their columns and conditions.
func OrgsInScope(scope access.Scope, a *store.Args) string {
	return " FROM organizations o WHERE o.deleted_at IS NULL AND " + scope.OrgFilter(a, "o.id", "o.partner_id")
}

// Owner is the partner and organization a row belongs to.
type Owner struct{ PartnerID, OrgID string }

// Owners runs query, which selects id, partner_id and org_id of the rows of one table whose
// IDs are in the list it ends with (an "IN " clause is appended), and returns each found row's
// owner by ID. Domains whose rows other domains reference (sites, groups, devices) answer
// "whose is this ID" with it, keeping the SQL in the owning package.
func Owners(ctx context.Context, q store.Querier, query string, ids []string) (map[string]Owner, error) {
	out := make(map[string]Owner, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var a store.Args
	owned, err := store.QueryAll(ctx, q, query+" IN "+a.In(ids), a.Values(), func(row store.Scanner) (ownedRow, error) {
		var r ownedRow
		err := row.Scan(&r.id, &r.PartnerID, &r.OrgID)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("load owners: %w", err)
	}
	for _, r := range owned {
		out[r.id] = r.Owner
	}
	return out, nil
}

// ownedRow is a row's ID with its owner.
type ownedRow struct {
	id string
	Owner
}

// OrgOwners returns the owner of each live organization among ids (its OrgID is itself).
func OrgOwners(ctx context.Context, q store.Querier, ids []string) (map[string]Owner, error) {
	return Owners(ctx, q, `SELECT id, partner_id, id FROM organizations WHERE deleted_at IS NULL AND id`, ids)
}

// SiteOwners returns the owner of each site of a live organization among ids.
func SiteOwners(ctx context.Context, q store.Querier, ids []string) (map[string]Owner, error) {
	return Owners(ctx, q, `SELECT id, partner_id, org_id FROM sites WHERE `+LiveOrg("org_id")+` AND id`, ids)
}

// The reads above, for domains that make them outside a transaction of their own: on the
// service's database.

// Place is Place on the service's database.
func (s *Service) Place(ctx context.Context, scope access.Scope, orgID string, opts PlaceOptions) (Placement, error) {
	return Place(ctx, s.db, scope, orgID, opts)
}

// OrgInScope is OrgInScope on the service's database.
func (s *Service) OrgInScope(ctx context.Context, scope access.Scope, orgID string) (partnerID string, ok bool, err error) {
	return OrgInScope(ctx, s.db, scope, orgID)
}

// Names is Names on the service's database.
func (s *Service) Names(ctx context.Context, orgID, siteID string) (orgName, siteName string, err error) {
	return Names(ctx, s.db, orgID, siteID)
}

// OrgOwners is OrgOwners on the service's database.
func (s *Service) OrgOwners(ctx context.Context, ids []string) (map[string]Owner, error) {
	return OrgOwners(ctx, s.db, ids)
}
