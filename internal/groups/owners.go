package groups

import (
	"context"

	"gale/internal/store"
	"gale/internal/tenancy"
)

// Owners returns the owner of each group of a live organization among ids, for domains whose
// rows name groups (alert rule targets, policy matches).
func Owners(ctx context.Context, q store.Querier, ids []string) (map[string]tenancy.Owner, error) {
	return tenancy.Owners(ctx, q, `SELECT id, partner_id, org_id FROM device_groups WHERE `+tenancy.LiveOrg("org_id")+` AND id`, ids)
}
