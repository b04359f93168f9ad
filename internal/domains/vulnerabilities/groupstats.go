package vulnerabilities

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"gale/internal/platform/store"
)

// groupRef is a group of one organization: the unit the by-software counts are kept by.
type groupRef struct{ org, group string }

// groupSet gathers the groups a transaction changed.
type groupSet map[groupRef]bool

func (g groupSet) add(org, group string) { g[groupRef{org, group}] = true }

func (g groupSet) sorted() []groupRef {
	out := make([]groupRef, 0, len(g))
	for r := range g {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b groupRef) int {
		if c := strings.Compare(a.org, b.org); c != 0 {
			return c
		}
		return strings.Compare(a.group, b.group)
	})
	return out
}

// refreshGroups recomputes the by-software counts of each group from its findings, in tx,
// one group after another in a fixed order; each takes its group's lock row first.
func (s *Service) refreshGroups(ctx context.Context, tx *sql.Tx, groups groupSet) error {
	for _, g := range groups.sorted() {
		if err := s.refreshGroup(ctx, tx, g); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) refreshGroup(ctx context.Context, tx *sql.Tx, g groupRef) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO vuln_group_keys (org_id, group_key) VALUES ($1, $2)
		ON CONFLICT (org_id, group_key) DO UPDATE SET group_key = excluded.group_key`, g.org, g.group); err != nil {
		return fmt.Errorf("lock group %s of %s: %w", g.group, g.org, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM vuln_group_stats WHERE org_id = $1 AND group_key = $2`, g.org, g.group); err != nil {
		return fmt.Errorf("clear the counts of group %s: %w", g.group, err)
	}
	versions, err := store.QueryAll(ctx, tx, `SELECT status, fixed_version FROM vuln_findings WHERE org_id = $1 AND group_key = $2
		GROUP BY status, fixed_version`, []any{g.org, g.group}, scanKeyedVersion)
	if err != nil {
		return fmt.Errorf("read the fixed versions of group %s: %w", g.group, err)
	}
	fixed := highestFixed(versions)
	type row struct {
		status, partner                              string
		findings, devices, critical, ke, ready, risk int
	}
	out, err := store.QueryAll(ctx, tx, `SELECT status, partner_id, COUNT(*), COUNT(DISTINCT device_id),
		SUM(CASE WHEN severity_rank = 4 THEN 1 ELSE 0 END), SUM(CASE WHEN known_exploited THEN 1 ELSE 0 END),
		COUNT(DISTINCT CASE WHEN patch_id IS NOT NULL THEN device_id END),
		SUM(severity_rank * severity_rank + CASE WHEN known_exploited THEN 25 ELSE 0 END)
		FROM vuln_findings WHERE org_id = $1 AND group_key = $2 GROUP BY status, partner_id`, []any{g.org, g.group},
		func(sc store.Scanner) (row, error) {
			var r row
			return r, sc.Scan(&r.status, &r.partner, &r.findings, &r.devices, &r.critical, &r.ke, &r.ready, &r.risk)
		})
	if err != nil {
		return fmt.Errorf("count group %s: %w", g.group, err)
	}
	for _, r := range out {
		if _, err := tx.ExecContext(ctx, `INSERT INTO vuln_group_stats (partner_id, org_id, group_key, status, findings, devices, critical,
			known_exploited, patch_ready, risk, fixed_version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, r.partner, g.org, g.group,
			r.status, r.findings, r.devices, r.critical, r.ke, r.ready, r.risk, fixed[r.status]); err != nil {
			return fmt.Errorf("store the counts of group %s: %w", g.group, err)
		}
	}
	return nil
}

// groupsOf adds to into the groups of the rows (org_id, group_key) a statement returns.
func groupsOf(ctx context.Context, q store.Querier, query string, args []any, into groupSet) error {
	refs, err := store.QueryAll(ctx, q, query, args, func(r store.Scanner) (groupRef, error) {
		var g groupRef
		return g, r.Scan(&g.org, &g.group)
	})
	for _, g := range refs {
		into[g] = true
	}
	return err
}

// keyedVersion is a fixed version of a group (or of a finding status).
type keyedVersion struct{ key, version string }

func scanKeyedVersion(r store.Scanner) (keyedVersion, error) {
	var v keyedVersion
	return v, r.Scan(&v.key, &v.version)
}

// highestFixed returns the highest fixed version of each key; no fix ("") is left out.
func highestFixed(versions []keyedVersion) map[string]string {
	best := map[string]string{}
	for _, v := range versions {
		if have, ok := best[v.key]; v.version != "" && (!ok || higher(have, v.version)) {
			best[v.key] = v.version
		}
	}
	return best
}

// RecountGroups recomputes the by-software counts of every group that has findings (a
// repair, and the benchmarks' setup).
func (s *Service) RecountGroups(ctx context.Context) error {
	groups := groupSet{}
	if err := groupsOf(ctx, s.db, `SELECT DISTINCT org_id, group_key FROM vuln_findings`, nil, groups); err != nil {
		return fmt.Errorf("list the groups: %w", err)
	}
	return s.refreshInBatches(ctx, groups)
}
