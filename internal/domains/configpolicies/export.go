package configpolicies

import (
	"context"
	"database/sql"
	"fmt"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// ExportPolicies returns a page of the policies of the caller's partner in ID order, or with
// sk.Since those changed since then in (updatedAt, ID) order.
func (s *Service) ExportPolicies(ctx context.Context, sk store.Seek) ([]Policy, bool, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).TenantFilter(&a, "p.org_id", "p.partner_id"), tenancy.LiveOrg("p.org_id")}
	keys := sk.Keys(&a, &conds, "p.updated_at", "p.id")
	list, more, err := store.SeekPage(ctx, s.db, store.SeekQuery{Columns: policyColumns, From: " FROM policies p", Conds: conds, Args: &a,
		Keys: keys}, sk, scanPolicy)
	if err != nil {
		return nil, false, fmt.Errorf("export policies: %w", err)
	}
	return list, more, withTargets(ctx, s.db, list)
}

// ExportAssignments returns a page of the policies' targets, one row per policy and target,
// in (policy ID, target) order, or with sk.Since those assigned since then in (assignedAt,
// policy ID, target) order. A changed target list replaces the policy's rows.
func (s *Service) ExportAssignments(ctx context.Context, sk store.Seek) ([]PolicyAssignment, bool, error) {
	var a store.Args
	conds := []string{access.ScopeFrom(ctx).TenantFilter(&a, "t.org_id", "t.partner_id"), tenancy.LiveOrg("t.org_id")}
	keys := sk.Keys(&a, &conds, "t.created_at", "t.policy_id", "t.target_key")
	return store.SeekPage(ctx, s.db, store.SeekQuery{Columns: "t.policy_id, t.org_id, t.target_type, t.target_id, t.created_at",
		From: " FROM policy_targets t", Conds: conds, Args: &a, Keys: keys}, sk, func(row store.Scanner) (PolicyAssignment, error) {
		var x PolicyAssignment
		var org, target sql.NullString
		err := row.Scan(&x.PolicyID, &org, &x.TargetType, &target, &x.AssignedAt)
		x.OrgID, x.TargetID = store.StringPtr(org), store.StringPtr(target)
		return x, err
	})
}
