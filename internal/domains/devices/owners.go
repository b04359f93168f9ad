package devices

import (
	"context"

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
	rows, err := q.QueryContext(ctx, `SELECT id, site_id FROM devices WHERE id IN `+a.In(ids), a.Values()...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, site string
		if err := rows.Scan(&id, &site); err != nil {
			return nil, err
		}
		out[id] = site
	}
	return out, rows.Err()
}
