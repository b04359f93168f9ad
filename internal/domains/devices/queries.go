package devices

import (
	"context"
	"slices"

	"gale/internal/platform/store"
)

// What other domains read of devices, their metrics and their commands: statements and
// joins they splice into their own queries, and small read-only lookups. The SQL about these
// tables stays here, in the package that owns them.

// Join joins the device (under alias) whose ID is idExpr, a column or a placeholder.
func Join(alias, idExpr string) string {
	return " JOIN devices " + alias + " ON " + alias + ".id = " + idExpr
}

// live is the condition that the device (alias d) is not decommissioned.
const live = "d.decommissioned_at IS NULL"

// SelectLive is a SELECT of columns from the live (not decommissioned) devices, alias d,
// with joins, that meet conds; the caller may append ORDER BY and LIMIT.
func SelectLive(columns, joins string, conds ...string) string {
	return "SELECT " + columns + " FROM devices d" + joins + " WHERE " + store.Where(append(slices.Clip(conds), live))
}

// ListLive is the list (see store.List) of columns from the live devices, alias d, with
// joins, that meet conds (their arguments in a), by hostname.
func ListLive(columns, joins string, conds []string, a *store.Args) store.ListQuery {
	return store.ListQuery{Columns: columns, From: " FROM devices d" + joins, Conds: append(slices.Clip(conds), live), Args: a,
		SortKey: "d.hostname", SortID: "d.id"}
}

// JoinTags joins the tags of the device (alias d), a row per tag under alias.
func JoinTags(alias string) string {
	return " JOIN device_tags " + alias + " ON " + alias + ".device_id = d.id"
}

// HasTag is the condition that the device in column deviceCol carries tag, with its argument
// added to a.
func HasTag(a *store.Args, deviceCol, tag string) string {
	return "EXISTS (SELECT 1 FROM device_tags t WHERE t.device_id = " + deviceCol + " AND t.tag = " + a.Add(tag) + ")"
}

// SelectTags is the statement of the tags of the devices ids (not empty), a row of device ID
// and tag each, in tag order, with its arguments added to a.
func SelectTags(a *store.Args, ids []string) string {
	return "SELECT device_id, tag FROM device_tags WHERE device_id IN " + a.In(ids) + " ORDER BY tag"
}

// SelectSamples is a SELECT of columns (over recorded_at, cpu_percent, ram_percent and
// disk_percent) from the heartbeat metrics of the device deviceExpr recorded since fromExpr,
// and from the last one before it: a window's samples and the device's latest sample, even
// when the window holds none.
func SelectSamples(columns, deviceExpr, fromExpr string) string {
	return "SELECT " + columns + " FROM device_metrics WHERE device_id = " + deviceExpr + " AND recorded_at >= " +
		"COALESCE((SELECT MAX(m.recorded_at) FROM device_metrics m WHERE m.device_id = " + deviceExpr +
		" AND m.recorded_at < " + fromExpr + "), " + fromExpr + ")"
}

// SelectFailedCommands is a SELECT of columns (over type and completed_at) from the commands
// of the device deviceExpr that failed or timed out since fromExpr.
func SelectFailedCommands(columns, deviceExpr, fromExpr string) string {
	return "SELECT " + columns + " FROM device_commands WHERE device_id = " + deviceExpr + " AND status IN ('" +
		CommandFailed + "', '" + CommandTimedOut + "') AND completed_at >= " + fromExpr
}

// Hostname returns the hostname of the device id, decommissioned or not (sql.ErrNoRows when
// there is none).
func Hostname(ctx context.Context, q store.Querier, id string) (string, error) {
	var host string
	err := q.QueryRowContext(ctx, `SELECT hostname FROM devices WHERE id = $1`, id).Scan(&host)
	return host, err
}
