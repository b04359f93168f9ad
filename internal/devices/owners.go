package devices

import (
	"context"

	"gale/internal/store"
	"gale/internal/tenancy"
)

// Owners returns the owner of each device among ids, for domains whose rows name devices
// (alert rule targets).
func Owners(ctx context.Context, q store.Querier, ids []string) (map[string]tenancy.Owner, error) {
	return tenancy.Owners(ctx, q, `SELECT id, partner_id, org_id FROM devices WHERE id`, ids)
}
