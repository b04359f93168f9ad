package groups

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"gale/internal/platform/store"
)

// What other domains read of group memberships: conditions and statements they splice into
// their own queries, and small read-only lookups. The SQL about these tables stays here.

// MemberOf is the condition that the device in column deviceCol is a member of one of the
// groups groupIDs (not empty), with its arguments added to a.
func MemberOf(a *store.Args, deviceCol string, groupIDs []string) string {
	return "EXISTS (SELECT 1 FROM device_group_members m WHERE m.device_id = " + deviceCol + " AND m.group_id IN " +
		a.In(groupIDs) + ")"
}

// SelectMemberships is a SELECT of columns (over group_id) with a row for each group the
// device deviceExpr is a member of.
func SelectMemberships(columns, deviceExpr string) string {
	return "SELECT " + columns + " FROM device_group_members WHERE device_id = " + deviceExpr
}

// InAny reports whether the device is a member of one of the groups groupIDs (not empty).
func InAny(ctx context.Context, q store.Querier, deviceID string, groupIDs []string) (bool, error) {
	var a store.Args
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM device_group_members WHERE device_id = `+a.Add(deviceID)+
		` AND group_id IN `+a.In(groupIDs)+` LIMIT 1`, a.Values()...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check the groups of device %s: %w", deviceID, err)
	}
	return true, nil
}
