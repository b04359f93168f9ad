package devices

import (
	"context"
	"fmt"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/store"
)

// Owners returns the owner of each device among ids, for domains whose rows name devices
// (alert rule targets).
func Owners(ctx context.Context, q store.Querier, ids []string) (map[string]tenancy.Owner, error) {
	return tenancy.Owners(ctx, q, `SELECT id, partner_id, org_id FROM devices WHERE id`, ids)
}

// Sites returns the site of each device among ids, for domains that target devices by site
// (maintenance windows).
func Sites(ctx context.Context, q store.Querier, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var a store.Args
	if err := putPairs(ctx, q, out, `SELECT id, site_id FROM devices WHERE id IN `+a.In(ids), a.Values()); err != nil {
		return nil, fmt.Errorf("read the sites of devices: %w", err)
	}
	return out, nil
}

// putPairs runs a query of two text columns and puts each row's second value into m under its
// first, in row order.
func putPairs(ctx context.Context, q store.Querier, m map[string]string, query string, args []any) error {
	pairs, err := store.QueryAll(ctx, q, query, args, func(row store.Scanner) ([2]string, error) {
		var p [2]string
		return p, row.Scan(&p[0], &p[1])
	})
	for _, p := range pairs {
		m[p[0]] = p[1]
	}
	return err
}
