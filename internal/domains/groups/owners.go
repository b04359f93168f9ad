package groups

import (
	"context"
	"fmt"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/store"
)

// Owners returns the owner of each group of a live organization among ids, for domains whose
// rows name groups (alert rule targets, policy matches).
func Owners(ctx context.Context, q store.Querier, ids []string) (map[string]tenancy.Owner, error) {
	return tenancy.Owners(ctx, q, `SELECT id, partner_id, org_id FROM device_groups WHERE `+tenancy.LiveOrg("org_id")+` AND id`, ids)
}

// Memberships returns the groups each device among ids belongs to, for domains that target
// devices by group (maintenance windows).
func Memberships(ctx context.Context, q store.Querier, ids []string) (map[string][]string, error) {
	out := make(map[string][]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var a store.Args
	pairs, err := store.QueryAll(ctx, q, `SELECT device_id, group_id FROM device_group_members WHERE device_id IN `+a.In(ids), a.Values(),
		scanPair)
	if err != nil {
		return nil, fmt.Errorf("read group memberships of devices: %w", err)
	}
	for _, p := range pairs {
		out[p[0]] = append(out[p[0]], p[1])
	}
	return out, nil
}

// scanPair scans a row of two text columns.
func scanPair(row store.Scanner) ([2]string, error) {
	var p [2]string
	return p, row.Scan(&p[0], &p[1])
}
