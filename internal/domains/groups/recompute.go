package groups

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/customfields"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// systemActor changes memberships on its own: recomputation after a device changed, and the
// periodic sweep.
var systemActor = MembershipActor{Type: string(access.ActorSystem)}

// actorFrom is the caller of the request behind a change, or the system outside a request.
func actorFrom(ctx context.Context) MembershipActor {
	p := access.PrincipalFrom(ctx)
	if p == nil {
		return systemActor
	}
	id := p.ID
	return MembershipActor{Type: string(p.Kind), ID: &id}
}

// dynamicGroup is a dynamic group with its parsed filter.
type dynamicGroup struct {
	ID     string
	Filter *Filter
}

// deviceRef names a device in a membership change.
type deviceRef struct{ ID, Hostname string }

// memberState is a device's membership row.
type memberState struct {
	Source string
	Pinned bool
}

// sourceFor is the source of a member row: dynamic when the filter matches.
func sourceFor(match bool) string {
	if match {
		return SourceDynamic
	}
	return SourceStatic
}

const snapshotColumns = `d.id, d.hostname, d.display_name, d.os_type, d.os_name, d.os_version, d.site_id, d.status, d.last_seen_at,
	d.decommissioned_at`

func scanSnapshot(row store.Scanner) (*Snapshot, error) {
	var d Snapshot
	var display sql.NullString
	var seen, decommissioned sql.NullTime
	if err := row.Scan(&d.ID, &d.Hostname, &display, &d.OSType, &d.OSName, &d.OSVersion, &d.SiteID, &d.Status, &seen,
		&decommissioned); err != nil {
		return nil, err
	}
	d.DisplayName, d.LastSeen, d.decommissioned = store.StringPtr(display), store.TimePtr(seen), decommissioned.Valid
	return &d, nil
}

// loadOrgSnapshots loads every device of an organization that is not decommissioned, by
// hostname, with its tags and, when custom is set, its custom field values.
func loadOrgSnapshots(ctx context.Context, q store.Querier, orgID string, custom bool) ([]*Snapshot, error) {
	out, err := store.QueryAll(ctx, q, `SELECT `+snapshotColumns+` FROM devices d WHERE d.org_id = $1 AND d.decommissioned_at IS NULL
		ORDER BY d.hostname, d.id`, []any{orgID}, scanSnapshot)
	if err != nil {
		return nil, fmt.Errorf("read devices of organization %s: %w", orgID, err)
	}
	byID := make(map[string]*Snapshot, len(out))
	for _, d := range out {
		byID[d.ID] = d
	}
	tags, err := store.QueryAll(ctx, q, `SELECT t.device_id, t.tag FROM device_tags t JOIN devices d ON d.id = t.device_id
		WHERE d.org_id = $1 AND d.decommissioned_at IS NULL`, []any{orgID}, scanPair)
	if err != nil {
		return nil, fmt.Errorf("read device tags of organization %s: %w", orgID, err)
	}
	for _, t := range tags {
		if d := byID[t[0]]; d != nil {
			d.Tags = append(d.Tags, t[1])
		}
	}
	if custom {
		values, err := customfields.OrgEffectiveValues(ctx, q, orgID)
		if err != nil {
			return nil, err
		}
		for _, d := range out {
			d.Custom = values[d.ID]
		}
	}
	return out, nil
}

// loadSnapshot loads one device with its tags and, when custom is set, its custom field values.
func loadSnapshot(ctx context.Context, q store.Querier, deviceID string, custom bool) (*Snapshot, error) {
	d, err := scanSnapshot(q.QueryRowContext(ctx, `SELECT `+snapshotColumns+` FROM devices d WHERE d.id = $1`, deviceID))
	if err != nil {
		return nil, err
	}
	if d.Tags, err = store.QueryStrings(ctx, q, `SELECT tag FROM device_tags WHERE device_id = $1`, deviceID); err != nil {
		return nil, err
	}
	if custom {
		if d.Custom, err = customfields.EffectiveValues(ctx, q, deviceID); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// lockSuffix locks the rows a query reads until the transaction ends, on PostgreSQL (SQLite
// runs one write transaction at a time). Readers of a group's filter share the lock; a
// change of the filter, or a full recomputation, waits for them and they for it, so a
// device is never evaluated against a filter that a concurrent transaction is replacing.
func (s *Service) lockSuffix(share bool) string {
	if share {
		return s.db.ForShare()
	}
	return s.db.ForUpdate()
}

// DeviceChanged re-evaluates, inside the caller's transaction, every dynamic group of the
// device's organization for that device: it joins the groups whose filter it now matches and
// leaves those it no longer matches (pinned memberships stay), logging each change with the
// system as actor. An organization without dynamic groups costs one query.
func (s *Service) DeviceChanged(ctx context.Context, tx *sql.Tx, deviceID string) error {
	groups, err := s.loadDynamic(ctx, tx, `g.org_id = (SELECT d.org_id FROM devices d WHERE d.id = $1)`, true, deviceID)
	if err != nil || len(groups) == 0 {
		return err
	}
	custom := slices.ContainsFunc(groups, func(g dynamicGroup) bool { return g.Filter.UsesCustomFields() })
	d, err := loadSnapshot(ctx, tx, deviceID, custom)
	if err != nil {
		return fmt.Errorf("load device %s for its groups: %w", deviceID, err)
	}
	states, err := memberStatesOfDevice(ctx, tx, deviceID)
	if err != nil {
		return err
	}
	ref := []deviceRef{{d.ID, d.Hostname}}
	now := s.clock.Now()
	for _, g := range groups {
		m, in := states[g.ID]
		if d.decommissioned {
			if in {
				if err := leave(ctx, tx, g.ID, ref, true, ReasonDecommissioned, systemActor, now); err != nil {
					return err
				}
			}
			continue
		}
		match := g.Filter.Match(d, now)
		switch {
		case !in && match:
			err = join(ctx, tx, g.ID, ref, SourceDynamic, false, ReasonMatches, systemActor, now)
		case in && m.Pinned && m.Source != sourceFor(match):
			err = setSource(ctx, tx, g.ID, []string{d.ID}, sourceFor(match))
		case in && !m.Pinned && !match:
			err = leave(ctx, tx, g.ID, ref, false, ReasonNoLongerMatches, systemActor, now)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// loadDynamic loads the dynamic groups (alias g) that cond selects, by ID, locking them
// shared or exclusively (see lockSuffix).
func (s *Service) loadDynamic(ctx context.Context, q store.Querier, cond string, share bool, args ...any) ([]dynamicGroup, error) {
	out, err := store.QueryAll(ctx, q, `SELECT g.id, g.filter FROM device_groups g WHERE g.type = 'dynamic' AND `+cond+
		` ORDER BY g.id`+s.lockSuffix(share), args, scanDynamic)
	if err != nil {
		return nil, fmt.Errorf("read dynamic groups: %w", err)
	}
	return out, nil
}

func scanDynamic(row store.Scanner) (dynamicGroup, error) {
	var g dynamicGroup
	var raw sql.NullString
	if err := row.Scan(&g.ID, &raw); err != nil {
		return g, err
	}
	var err error
	if g.Filter, err = mustParse(raw.String); err != nil {
		return g, fmt.Errorf("group %s: %w", g.ID, err)
	}
	return g, nil
}

func memberStatesOfDevice(ctx context.Context, q store.Querier, deviceID string) (map[string]memberState, error) {
	return memberStates(ctx, q, `SELECT group_id, source, pinned FROM device_group_members WHERE device_id = $1`, deviceID)
}

func memberStatesOfGroup(ctx context.Context, q store.Querier, groupID string) (map[string]memberState, error) {
	return memberStates(ctx, q, `SELECT device_id, source, pinned FROM device_group_members WHERE group_id = $1`, groupID)
}

func memberStates(ctx context.Context, q store.Querier, query, arg string) (map[string]memberState, error) {
	type keyed struct {
		key   string
		state memberState
	}
	list, err := store.QueryAll(ctx, q, query, []any{arg}, func(row store.Scanner) (keyed, error) {
		var k keyed
		return k, row.Scan(&k.key, &k.state.Source, &k.state.Pinned)
	})
	if err != nil {
		return nil, fmt.Errorf("read group memberships: %w", err)
	}
	out := make(map[string]memberState, len(list))
	for _, k := range list {
		out[k.key] = k.state
	}
	return out, nil
}

// DeviceLeftOrg removes a device from every group of its current organization, static and
// dynamic, pinned or not, logging each as left with the reason ("device moved", "device
// decommissioned"). It runs inside the caller's transaction, before the device changes
// organization.
func (s *Service) DeviceLeftOrg(ctx context.Context, tx *sql.Tx, deviceID, reason string) error {
	var hostname string
	err := tx.QueryRowContext(ctx, `SELECT hostname FROM devices WHERE id = $1`, deviceID).Scan(&hostname)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load device %s leaving its groups: %w", deviceID, err)
	}
	left, err := store.QueryStrings(ctx, tx, `DELETE FROM device_group_members WHERE device_id = $1 AND group_id IN
		(SELECT g.id FROM device_groups g JOIN devices d ON d.org_id = g.org_id WHERE d.id = $1) RETURNING group_id`, deviceID)
	if err != nil {
		return fmt.Errorf("remove device %s from its groups: %w", deviceID, err)
	}
	slices.Sort(left)
	act, now := actorFrom(ctx), s.clock.Now()
	var entries []logRow
	for _, g := range left {
		entries = append(entries, logRow{g, deviceID, hostname, ActionLeft, reason, act, now})
	}
	return writeLog(ctx, tx, entries)
}

// RecomputeGroup re-evaluates one dynamic group against every device of its organization in
// a transaction of its own. Creating a group or changing its filter recomputes it inside the
// writing transaction instead.
func (s *Service) RecomputeGroup(ctx context.Context, groupID string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		var a store.Args
		orgID, err := store.ByID(ctx, tx, "dynamic group", `SELECT org_id FROM device_groups`, "id", groupID, &a,
			[]string{"type = 'dynamic'"}, func(row store.Scanner) (string, error) {
				var orgID string
				return orgID, row.Scan(&orgID)
			})
		if err != nil {
			return err
		}
		groups, err := s.loadDynamic(ctx, tx, `g.id = $1`, false, groupID)
		if err != nil {
			return err
		}
		return s.recomputeOrg(ctx, tx, orgID, groups, ReasonMatches, ReasonNoLongerMatches, systemActor)
	})
}

// RecomputeAll re-evaluates every dynamic group, one organization per transaction. It runs
// periodically (job groups-recompute) for what no device change announces: time passing
// (lastSeen conditions) and changed custom field defaults. An organization that fails is
// logged and the others still run; the errors are returned together.
func (s *Service) RecomputeAll(ctx context.Context) error {
	orgs, err := store.QueryStrings(ctx, s.db, `SELECT DISTINCT g.org_id FROM device_groups g
		WHERE g.type = 'dynamic' AND `+tenancy.LiveOrg("g.org_id")+` ORDER BY g.org_id`)
	if err != nil {
		return fmt.Errorf("read organizations with dynamic groups: %w", err)
	}
	var errs []error
	for _, orgID := range orgs {
		err := s.db.Write(ctx, func(tx *sql.Tx) error {
			groups, err := s.loadDynamic(ctx, tx, `g.org_id = $1`, false, orgID)
			if err != nil {
				return err
			}
			return s.recomputeOrg(ctx, tx, orgID, groups, ReasonMatches, ReasonNoLongerMatches, systemActor)
		})
		if err != nil {
			s.logger.ErrorContext(ctx, "recompute dynamic groups", "orgId", orgID, "error", err)
			errs = append(errs, fmt.Errorf("organization %s: %w", orgID, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// recomputeOrg evaluates the given dynamic groups of an organization against every device of
// it, loaded once.
func (s *Service) recomputeOrg(ctx context.Context, tx *sql.Tx, orgID string, groups []dynamicGroup, joinReason, leaveReason string, act MembershipActor) error {
	if len(groups) == 0 {
		return nil
	}
	custom := slices.ContainsFunc(groups, func(g dynamicGroup) bool { return g.Filter.UsesCustomFields() })
	devs, err := loadOrgSnapshots(ctx, tx, orgID, custom)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	for _, g := range groups {
		if err := recomputeGroup(ctx, tx, g, devs, now, joinReason, leaveReason, act); err != nil {
			return fmt.Errorf("recompute group %s: %w", g.ID, err)
		}
	}
	return nil
}

// recomputeGroup brings one group's membership in line with its filter over devs, the
// organization's devices: matching devices join, others leave unless pinned, pinned members
// get the source that says whether they match. Members that are no longer among devs
// (decommissioned, or in another organization) leave, pinned or not.
func recomputeGroup(ctx context.Context, tx *sql.Tx, g dynamicGroup, devs []*Snapshot, now time.Time, joinReason, leaveReason string, act MembershipActor) error {
	states, err := memberStatesOfGroup(ctx, tx, g.ID)
	if err != nil {
		return err
	}
	var joins, leaves []deviceRef
	var toDynamic, toStatic []string
	seen := make(map[string]bool, len(devs))
	for _, d := range devs {
		seen[d.ID] = true
		match := g.Filter.Match(d, now)
		m, in := states[d.ID]
		switch {
		case !in && match:
			joins = append(joins, deviceRef{d.ID, d.Hostname})
		case in && m.Pinned && m.Source != sourceFor(match):
			if match {
				toDynamic = append(toDynamic, d.ID)
			} else {
				toStatic = append(toStatic, d.ID)
			}
		case in && !m.Pinned && !match:
			leaves = append(leaves, deviceRef{d.ID, d.Hostname})
		}
	}
	var gone []string
	for id := range states {
		if !seen[id] {
			gone = append(gone, id)
		}
	}
	if err := removeGone(ctx, tx, g.ID, gone, now); err != nil {
		return err
	}
	if err := setSource(ctx, tx, g.ID, toDynamic, SourceDynamic); err != nil {
		return err
	}
	if err := setSource(ctx, tx, g.ID, toStatic, SourceStatic); err != nil {
		return err
	}
	if err := leave(ctx, tx, g.ID, leaves, false, leaveReason, act, now); err != nil {
		return err
	}
	return join(ctx, tx, g.ID, joins, SourceDynamic, false, joinReason, act, now)
}

// removeGone takes members out of a group that are decommissioned or no longer in its
// organization: a safety net behind DeviceLeftOrg.
func removeGone(ctx context.Context, tx *sql.Tx, groupID string, ids []string, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	type goneDevice struct {
		ref            deviceRef
		decommissioned bool
	}
	var a store.Args
	list, err := store.QueryAll(ctx, tx, `SELECT id, hostname, decommissioned_at FROM devices WHERE id IN `+a.In(ids), a.Values(),
		func(row store.Scanner) (goneDevice, error) {
			var d goneDevice
			var at sql.NullTime
			err := row.Scan(&d.ref.ID, &d.ref.Hostname, &at)
			d.decommissioned = at.Valid
			return d, err
		})
	if err != nil {
		return fmt.Errorf("read devices gone from group %s: %w", groupID, err)
	}
	var decommissioned, moved []deviceRef
	for _, d := range list {
		if d.decommissioned {
			decommissioned = append(decommissioned, d.ref)
		} else {
			moved = append(moved, d.ref)
		}
	}
	if err := leave(ctx, tx, groupID, decommissioned, true, ReasonDecommissioned, systemActor, now); err != nil {
		return err
	}
	return leave(ctx, tx, groupID, moved, true, ReasonDeviceMoved, systemActor, now)
}

// batch is how many rows one multi-row statement writes.
const batch = 200

// join inserts members (skipping any a concurrent transaction added first) and logs each
// device that joined, at now.
func join(ctx context.Context, tx *sql.Tx, groupID string, devs []deviceRef, source string, pinned bool, reason string, act MembershipActor,
	now time.Time) error {
	var addedBy any
	if act.ID != nil {
		addedBy = *act.ID
	}
	for start := 0; start < len(devs); start += batch {
		part := devs[start:min(start+batch, len(devs))]
		var a store.Args
		values := make([]string, len(part))
		for i, d := range part {
			values[i] = "(" + strings.Join([]string{a.Add(groupID), a.Add(d.ID), a.Add(source), a.Add(pinned), a.Add(now), a.Add(addedBy)}, ", ") + ")"
		}
		done, err := returnedIDs(ctx, tx, `INSERT INTO device_group_members (group_id, device_id, source, pinned, added_at, added_by)
			VALUES `+strings.Join(values, ", ")+` ON CONFLICT (group_id, device_id) DO NOTHING RETURNING device_id`, a.Values()...)
		if err != nil {
			return fmt.Errorf("add members to group %s: %w", groupID, err)
		}
		if err := writeLog(ctx, tx, logRows(groupID, part, done, ActionJoined, reason, act, now)); err != nil {
			return err
		}
	}
	return nil
}

// leave deletes members (pinned ones only when withPinned) and logs each device that left,
// at now.
func leave(ctx context.Context, tx *sql.Tx, groupID string, devs []deviceRef, withPinned bool, reason string, act MembershipActor,
	now time.Time) error {
	for start := 0; start < len(devs); start += batch {
		part := devs[start:min(start+batch, len(devs))]
		ids := make([]string, len(part))
		for i, d := range part {
			ids[i] = d.ID
		}
		var a store.Args
		query := `DELETE FROM device_group_members WHERE group_id = ` + a.Add(groupID) + ` AND device_id IN ` + a.In(ids)
		if !withPinned {
			query += ` AND pinned = ` + a.Add(false)
		}
		done, err := returnedIDs(ctx, tx, query+` RETURNING device_id`, a.Values()...)
		if err != nil {
			return fmt.Errorf("remove members from group %s: %w", groupID, err)
		}
		if err := writeLog(ctx, tx, logRows(groupID, part, done, ActionLeft, reason, act, now)); err != nil {
			return err
		}
	}
	return nil
}

func setSource(ctx context.Context, tx *sql.Tx, groupID string, ids []string, source string) error {
	for start := 0; start < len(ids); start += batch {
		var a store.Args
		_, err := tx.ExecContext(ctx, `UPDATE device_group_members SET source = `+a.Add(source)+` WHERE group_id = `+a.Add(groupID)+
			` AND device_id IN `+a.In(ids[start:min(start+batch, len(ids))]), a.Values()...)
		if err != nil {
			return fmt.Errorf("set the source of members of group %s: %w", groupID, err)
		}
	}
	return nil
}

func returnedIDs(ctx context.Context, tx *sql.Tx, query string, args ...any) (map[string]bool, error) {
	ids, err := store.QueryStrings(ctx, tx, query, args...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// logRow is one membership log entry to write.
type logRow struct {
	GroupID, DeviceID, Hostname, Action, Reason string
	Actor                                       MembershipActor
	At                                          time.Time
}

// logRows makes the entries of the devices in done, in the order of devs.
func logRows(groupID string, devs []deviceRef, done map[string]bool, action, reason string, act MembershipActor, at time.Time) []logRow {
	var out []logRow
	for _, d := range devs {
		if done[d.ID] {
			out = append(out, logRow{groupID, d.ID, d.Hostname, action, reason, act, at})
		}
	}
	return out
}

// writeLog appends entries to membership logs. IDs are time-ordered, so entries written
// later sort as newer, also within one transaction.
func writeLog(ctx context.Context, tx *sql.Tx, entries []logRow) error {
	for start := 0; start < len(entries); start += batch {
		var a store.Args
		var values []string
		for _, e := range entries[start:min(start+batch, len(entries))] {
			var actorID any
			if e.Actor.ID != nil {
				actorID = *e.Actor.ID
			}
			values = append(values, "("+strings.Join([]string{a.Add(store.NewID()), a.Add(e.GroupID), a.Add(e.DeviceID), a.Add(e.Hostname),
				a.Add(e.Action), a.Add(e.Reason), a.Add(e.Actor.Type), a.Add(actorID), a.Add(e.At)}, ", ")+")")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO device_group_log (id, group_id, device_id, hostname, action, reason, actor_type,
			actor_id, occurred_at) VALUES `+strings.Join(values, ", "), a.Values()...); err != nil {
			return fmt.Errorf("write the membership log: %w", err)
		}
	}
	return nil
}
