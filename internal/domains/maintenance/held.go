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
	if len(deviceIDs) == 0 {
		return map[string]bool{}, nil
	}
	windows, err := inEffectNow(ctx, q, what)
	if err != nil {
		return nil, err
	}
	return heldDevices(ctx, q, windows, deviceIDs)
}

// Subject is what a piece of work concerns when it is not only devices: something of an
// organization (a monitor, an SNMP device), at one of its sites or at none, and the devices it
// runs on or is observed from.
type Subject struct {
	OrgID     string
	SiteID    string
	DeviceIDs []string
}

// HeldSubject reports whether an active occurrence of a window that suppresses what covers the
// subject now: a window of its organization that targets all of it, or its site, or one of
// its devices (as Held). With no active occurrence suppressing what it is one query.
func (s *Service) HeldSubject(ctx context.Context, q store.Querier, what Suppression, sub Subject) (bool, error) {
	windows, err := inEffectNow(ctx, q, what)
	if err != nil || len(windows) == 0 {
		return false, err
	}
	for _, w := range windows {
		if w.orgID != sub.OrgID {
			continue
		}
		if w.targets.Type == TargetAll || (sub.SiteID != "" && w.targets.Type == TargetSites && slices.Contains(w.targets.IDs, sub.SiteID)) {
			return true, nil
		}
	}
	held, err := heldDevices(ctx, q, windows, sub.DeviceIDs)
	if err != nil {
		return false, err
	}
	for _, h := range held {
		if h {
			return true, nil
		}
	}
	return false, nil
}

// inEffectNow reads the windows with an active occurrence that suppress what.
func inEffectNow(ctx context.Context, q store.Querier, what Suppression) ([]inEffect, error) {
	col, ok := what.column()
	if !ok {
		return nil, fmt.Errorf("maintenance: unknown suppression %q", what)
	}
	windows, err := store.QueryAll(ctx, q, `SELECT DISTINCT w.id, w.org_id, w.target_type, w.target_ids FROM maintenance_occurrences o
		JOIN maintenance_windows w ON w.id = o.window_id WHERE o.status = $1 AND `+col+` AND `+tenancy.LiveOrg("w.org_id"),
		[]any{Active}, scanInEffect)
	if err != nil {
		return nil, fmt.Errorf("read windows in effect: %w", err)
	}
	return windows, nil
}

// heldDevices reports, for each device ID given, whether one of the windows covers it.
func heldDevices(ctx context.Context, q store.Querier, windows []inEffect, deviceIDs []string) (map[string]bool, error) {
	out := make(map[string]bool, len(deviceIDs))
	for _, id := range deviceIDs {
		out[id] = false
	}
	if len(windows) == 0 || len(deviceIDs) == 0 {
		return out, nil
	}
	bySite, byGroup := false, false
	for _, w := range windows {
		bySite = bySite || w.targets.Type == TargetSites
		byGroup = byGroup || w.targets.Type == TargetGroups
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

func scanInEffect(row store.Scanner) (inEffect, error) {
	var id, ids string
	var x inEffect
	if err := row.Scan(&id, &x.orgID, &x.targets.Type, &ids); err != nil {
		return x, err
	}
	var err error
	if x.targets.IDs, err = store.DecodeStrings(ids); err != nil {
		return x, fmt.Errorf("read targets of window %s: %w", id, err)
	}
	return x, nil
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
	var a store.Args
	return store.ByID(ctx, s.db, "maintenance window", `SELECT EXISTS (SELECT 1 FROM maintenance_occurrences o
		WHERE o.window_id = w.id AND o.status = `+a.Add(Active)+`) FROM maintenance_windows w`, "w.id", windowID, &a, nil,
		func(row store.Scanner) (bool, error) {
			var active bool
			return active, row.Scan(&active)
		})
}

// NextOccurrence returns the window's occurrence under way (active) or, without one, its next
// scheduled occurrence, passing over the occurrence except (one a job has run in already);
// nil when it has none. The window must be of organization orgID (404 otherwise), for jobs of
// that organization that run "in a window".
func (s *Service) NextOccurrence(ctx context.Context, orgID, windowID, except string) (*MaintenanceOccurrence, error) {
	// An organization ID that is not a UUID would fail the query on PostgreSQL rather than match nothing.
	if !store.ValidID(orgID) {
		return nil, apperr.NotFound("maintenance window")
	}
	var a store.Args
	conds := append([]string{"w.org_id = " + a.Add(orgID)}, windowFilter(access.SystemScope(), &a)...)
	if _, err := store.ByID(ctx, s.db, "maintenance window", `SELECT w.id FROM maintenance_windows w`, "w.id", windowID, &a, conds,
		func(row store.Scanner) (string, error) {
			var id string
			return id, row.Scan(&id)
		}); err != nil {
		return nil, fmt.Errorf("look up maintenance window: %w", err)
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
