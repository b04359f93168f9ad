package devices

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// CodeNoProbeAgent answers work that needs an online agent of a site or organization to act
// on the server's behalf (a monitor's check, a discovery scan, an SNMP poll) when none is.
const CodeNoProbeAgent = "NO_ONLINE_AGENT"

// ProbeTarget says where work that an agent does on the server's behalf may run.
type ProbeTarget struct {
	OrgID string
	// SiteID, when set, keeps the work inside the site: only its agents are asked.
	SiteID string
	// DeviceID, when set, names the one agent to run on (it must be of the organization, and
	// of the site when one is given).
	DeviceID string
	// OSTypes, when set, keeps agents of these systems (linux, windows, macos).
	OSTypes []string
}

// PickProbe returns an online, not decommissioned agent for the target: the named device, or
// else one of the site's (or the organization's) online agents, the one heard from most
// recently. With none online it answers 409 NO_ONLINE_AGENT, saying where it looked.
func (s *Service) PickProbe(ctx context.Context, q store.Querier, t ProbeTarget) (string, error) {
	var a store.Args
	conds := []string{"d.org_id = " + a.Add(t.OrgID), "d.status = " + a.Add(StatusOnline), "d.decommissioned_at IS NULL"}
	where := "the organization"
	if t.SiteID != "" {
		conds = append(conds, "d.site_id = "+a.Add(t.SiteID))
		where = "the site"
	}
	if t.DeviceID != "" {
		conds = append(conds, "d.id = "+a.Add(t.DeviceID))
		where = "the device " + t.DeviceID
	}
	if len(t.OSTypes) > 0 {
		conds = append(conds, "d.os_type IN "+a.In(t.OSTypes))
	}
	var id string
	err := q.QueryRowContext(ctx, `SELECT d.id FROM devices d WHERE `+store.Where(conds)+
		` ORDER BY d.last_seen_at DESC, d.id LIMIT 1`, a.Values()...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", apperr.ConflictCode(CodeNoProbeAgent, "no agent of "+where+" is online to do this: bring one online, or choose another site or device")
	}
	if err != nil {
		return "", fmt.Errorf("pick an agent: %w", err)
	}
	return id, nil
}
