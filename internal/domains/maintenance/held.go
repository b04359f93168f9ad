package maintenance

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"gale/internal/domains/devices"
	"gale/internal/domains/groups"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// inEffect is a window with an active occurrence, as Held reads it.
type inEffect struct {
	orgID   string
	targets MaintenanceTargets
}

// Held reports, for each device ID given, whether an active occurrence of a window that
// suppresses what covers it now. A window covers the devices of its organization it targets:
// all of them, those of its sites or groups, or those it names. With no active occurrence
// suppressing what (the usual case) it is one query; otherwise at most three more (the
// devices' organizations, their sites, their groups), whatever the number of devices. q is the
// caller's transaction or the database.
func (s *Service) Held(ctx context.Context, q store.Querier, what Suppression, deviceIDs []string) (map[string]bool, error) {
	col, ok := what.column()
	if !ok {
		return nil, fmt.Errorf("maintenance: unknown suppression %q", what)
	}
	out := make(map[string]bool, len(deviceIDs))
	for _, id := range deviceIDs {
		out[id] = false
	}
	if len(deviceIDs) == 0 {
		return out, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT DISTINCT w.id, w.org_id, w.target_type, w.target_ids FROM maintenance_occurrences o
		JOIN maintenance_windows w ON w.id = o.window_id WHERE o.status = $1 AND `+col+` AND `+tenancy.LiveOrg("w.org_id"), Active)
	if err != nil {
		return nil, fmt.Errorf("read windows in effect: %w", err)
	}
	var windows []inEffect
	bySite, byGroup := false, false
	for rows.Next() {
		var id, ids string
		var x inEffect
		if err := rows.Scan(&id, &x.orgID, &x.targets.Type, &ids); err != nil {
			rows.Close()
			return nil, err
		}
		if x.targets.IDs, err = store.DecodeStrings(ids); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read targets of window %s: %w", id, err)
		}
		bySite = bySite || x.targets.Type == TargetSites
		byGroup = byGroup || x.targets.Type == TargetGroups
		windows = append(windows, x)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if len(windows) == 0 {
		return out, nil
	}
	valid := make([]string, 0, len(deviceIDs))
	for _, id := range deviceIDs {
		if store.ValidID(id) {
			valid = append(valid, id)
		}
	}
	owners, err := devices.Owners(ctx, q, valid)
	if err != nil {
		return nil, fmt.Errorf("read owners of devices: %w", err)
	}
	sites, groupsOf := map[string]string{}, map[string][]string{}
	if bySite {
		if sites, err = devices.Sites(ctx, q, valid); err != nil {
			return nil, fmt.Errorf("read sites of devices: %w", err)
		}
	}
	if byGroup {
		if groupsOf, err = groups.Memberships(ctx, q, valid); err != nil {
			return nil, fmt.Errorf("read groups of devices: %w", err)
		}
	}
	for _, id := range valid {
		owner, ok := owners[id]
		if !ok {
			continue
		}
		for _, w := range windows {
			if w.orgID == owner.OrgID && covers(w.targets, id, sites[id], groupsOf[id]) {
				out[id] = true
				break
			}
		}
	}
	return out, nil
}

// covers reports whether a window's targets cover a device of its organization, in the
// given site and groups.
func covers(t MaintenanceTargets, deviceID, site string, groups []string) bool {
	switch t.Type {
	case TargetAll:
		return true
	case TargetDevices:
		return slices.Contains(t.IDs, deviceID)
	case TargetSites:
		return slices.Contains(t.IDs, site)
	case TargetGroups:
		return slices.ContainsFunc(groups, func(g string) bool { return slices.Contains(t.IDs, g) })
	}
	return false
}

// HeldFromAutomations reports, for each device ID, whether an active occurrence of a window
// suppressing automations covers it now: Held for automations, over the database, for the
// automations service to leave those devices out of a run with one call per run.
func (s *Service) HeldFromAutomations(ctx context.Context, deviceIDs []string) (map[string]bool, error) {
	return s.Held(ctx, s.db, Automations, deviceIDs)
}

// WindowActive reports whether an occurrence of the window is active now, for work scheduled
// "in the window" (software deployments). A window that does not exist (deleted) is 404.
func (s *Service) WindowActive(ctx context.Context, windowID string) (bool, error) {
	if !store.ValidID(windowID) {
		return false, apperr.NotFound("maintenance window")
	}
	var exists, active bool
	err := s.db.QueryRowContext(ctx, `SELECT TRUE, EXISTS (SELECT 1 FROM maintenance_occurrences o WHERE o.window_id = w.id
		AND o.status = $1) FROM maintenance_windows w WHERE w.id = $2`, Active, windowID).Scan(&exists, &active)
	if errors.Is(err, sql.ErrNoRows) {
		return false, apperr.NotFound("maintenance window")
	}
	if err != nil {
		return false, fmt.Errorf("load maintenance window %s: %w", windowID, err)
	}
	return active, nil
}

// NextOccurrence returns the window's occurrence under way (active) or, without one, its next
// scheduled occurrence, passing over the occurrence except (one a job has run in already);
// nil when it has none. The window must be of organization orgID (404 otherwise), for jobs of
// that organization that run "in a window".
func (s *Service) NextOccurrence(ctx context.Context, orgID, windowID, except string) (*MaintenanceOccurrence, error) {
	if !store.ValidID(windowID) || !store.ValidID(orgID) {
		return nil, apperr.NotFound("maintenance window")
	}
	var a store.Args
	conds := append([]string{"w.id = " + a.Add(windowID), "w.org_id = " + a.Add(orgID)}, windowFilter(access.SystemScope(), &a)...)
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT w.id FROM maintenance_windows w WHERE `+store.Where(conds), a.Values()...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, apperr.NotFound("maintenance window")
	}
	if err != nil {
		return nil, fmt.Errorf("load maintenance window %s: %w", windowID, err)
	}
	if !store.ValidID(except) {
		except = windowID // no occurrence has the window's ID
	}
	o, err := scanOccurrence(s.db.QueryRowContext(ctx, `SELECT `+occurrenceColumns+` FROM maintenance_occurrences o
		WHERE o.window_id = $1 AND o.status IN ($2, $3) AND o.id <> $4 ORDER BY o.starts_at LIMIT 1`, windowID, Active, Scheduled, except))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load next occurrence of window %s: %w", windowID, err)
	}
	return &o, nil
}
