package groups

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

const membersFrom = " FROM device_group_members m JOIN devices d ON d.id = m.device_id"

// Members lists the devices of a group in scope by hostname.
func (s *Service) Members(ctx context.Context, groupID string, page store.Page) ([]Member, string, *int, error) {
	g, err := getGroup(ctx, s.db, access.ScopeFrom(ctx), groupID)
	if err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"m.group_id = " + a.Add(g.ID), "d.decommissioned_at IS NULL"}
	return store.List(ctx, s.db, store.ListQuery{Columns: memberColumns, From: membersFrom, Conds: conds, Args: &a,
		SortKey: "d.hostname", SortID: "d.id"}, page, scanMember, func(m Member) (string, string) { return m.Hostname, m.DeviceID })
}

func getMember(ctx context.Context, q store.Querier, groupID, deviceID string) (Member, error) {
	m, err := scanMember(q.QueryRowContext(ctx, `SELECT `+memberColumns+membersFrom+` WHERE m.group_id = $1 AND m.device_id = $2`,
		groupID, deviceID))
	if errors.Is(err, sql.ErrNoRows) {
		return m, apperr.NotFound("group member")
	}
	if err != nil {
		return m, fmt.Errorf("load member %s of group %s: %w", deviceID, groupID, err)
	}
	return m, nil
}

var errDynamicAdd = apperr.Invalid("deviceIds", "the group is dynamic: its members follow its filter. To keep a device in it "+
	"whatever the filter says, pin it with POST /groups/{id}/devices/{deviceId}/pin")

// AddDevices adds devices to a static group in scope, reporting per device: added, skipped
// (already a member) or failed (not a device in scope, decommissioned, or of another
// organization than the group's).
func (s *Service) AddDevices(ctx context.Context, groupID string, deviceIDs []string) (AddResult, error) {
	out := AddResult{Added: []AddedItem{}, Skipped: []AddOutcome{}, Failed: []AddOutcome{}}
	if len(deviceIDs) == 0 || len(deviceIDs) > MaxAddDevices {
		return out, apperr.Invalid("deviceIds", "give 1 to 500 device IDs")
	}
	scope := access.ScopeFrom(ctx)
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		g, err := s.writableGroup(ctx, tx, scope, groupID)
		if err != nil {
			return err
		}
		if g.Type == TypeDynamic {
			return errDynamicAdd
		}
		var ids []string
		seen := map[string]bool{}
		for _, id := range deviceIDs {
			if seen[id] {
				continue
			}
			seen[id] = true
			ids = append(ids, id)
		}
		var valid []string
		for _, id := range ids {
			if store.ValidID(id) {
				valid = append(valid, id)
			}
		}
		devs, err := visibleDevices(ctx, tx, scope, valid)
		if err != nil {
			return err
		}
		states, err := memberStatesOfGroup(ctx, tx, g.ID)
		if err != nil {
			return err
		}
		var joins []deviceRef
		for _, id := range ids {
			d, found := devs[id]
			switch {
			case !store.ValidID(id):
				out.Failed = append(out.Failed, AddOutcome{DeviceID: id, Code: apperr.CodeValidation, Reason: "not a valid device ID"})
			case !found:
				out.Failed = append(out.Failed, AddOutcome{DeviceID: id, Code: apperr.CodeNotFound, Reason: "no such device"})
			case d.decommissioned:
				out.Failed = append(out.Failed, AddOutcome{DeviceID: id, Code: apperr.CodeNotFound, Reason: "the device is decommissioned"})
			case d.orgID != g.OrgID:
				out.Failed = append(out.Failed, AddOutcome{DeviceID: id, Code: apperr.CodeValidation,
					Reason: "the device belongs to another organization than the group"})
			default:
				if _, in := states[id]; in {
					out.Skipped = append(out.Skipped, AddOutcome{DeviceID: id, Code: apperr.CodeConflict, Reason: "already a member"})
					continue
				}
				joins = append(joins, deviceRef{id, d.hostname})
				out.Added = append(out.Added, AddedItem{DeviceID: id, Hostname: d.hostname})
			}
		}
		if len(joins) == 0 {
			return nil
		}
		if err := join(ctx, tx, g.ID, joins, SourceStatic, false, ReasonAddedByUser, actorFrom(ctx), s.clock.Now()); err != nil {
			return err
		}
		added := make([]string, len(joins))
		for i, d := range joins {
			added[i] = d.ID
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "device_group.add_devices", ResourceType: "device_group", ResourceID: g.ID,
			ResourceName: g.Name, PartnerID: g.PartnerID, OrgID: g.OrgID, Details: map[string]any{"deviceIds": added}})
	})
	if err != nil {
		return AddResult{}, fmt.Errorf("add devices to group: %w", err)
	}
	return out, nil
}

// visibleDevice is what adding and pinning need of a device.
type visibleDevice struct {
	id, orgID, hostname string
	decommissioned      bool
}

// visibleDevices loads the devices among ids that the scope sees, by ID.
func visibleDevices(ctx context.Context, q store.Querier, scope access.Scope, ids []string) (map[string]visibleDevice, error) {
	out := map[string]visibleDevice{}
	if len(ids) == 0 {
		return out, nil
	}
	var a store.Args
	list, err := store.QueryAll(ctx, q, `SELECT d.id, d.org_id, d.hostname, d.decommissioned_at FROM devices d WHERE d.id IN `+a.In(ids)+
		` AND `+scope.OrgFilter(&a, "d.org_id", "d.partner_id"), a.Values(), func(row store.Scanner) (visibleDevice, error) {
		var d visibleDevice
		var at sql.NullTime
		err := row.Scan(&d.id, &d.orgID, &d.hostname, &at)
		d.decommissioned = at.Valid
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("read devices to add to a group: %w", err)
	}
	for _, d := range list {
		out[d.id] = d
	}
	return out, nil
}

// RemoveDevice takes a device out of a static group in scope.
func (s *Service) RemoveDevice(ctx context.Context, groupID, deviceID string) error {
	scope := access.ScopeFrom(ctx)
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		g, err := s.writableGroup(ctx, tx, scope, groupID)
		if err != nil {
			return err
		}
		if g.Type == TypeDynamic {
			return apperr.Invalid("deviceId", "the group is dynamic: its members follow its filter. Change the filter, "+
				"or unpin a pinned device with DELETE /groups/{id}/devices/{deviceId}/pin")
		}
		m, err := getMember(ctx, tx, g.ID, deviceID)
		if err != nil {
			return err
		}
		if err := leave(ctx, tx, g.ID, []deviceRef{{m.DeviceID, m.Hostname}}, true, ReasonRemovedByUser, actorFrom(ctx),
			s.clock.Now()); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "device_group.remove_device", ResourceType: "device_group", ResourceID: g.ID,
			ResourceName: g.Name, PartnerID: g.PartnerID, OrgID: g.OrgID, Details: map[string]any{"deviceId": deviceID}})
	})
}

var errStaticPin = apperr.Invalid("id", "pinning is for dynamic groups; a static group's members stay until removed")

// Pin keeps a device in a dynamic group in scope whatever its filter says, adding it when it
// is not a member yet.
func (s *Service) Pin(ctx context.Context, groupID, deviceID string) (Member, error) {
	scope := access.ScopeFrom(ctx)
	var m Member
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		g, err := s.writableGroup(ctx, tx, scope, groupID)
		if err != nil {
			return err
		}
		if g.Type != TypeDynamic {
			return errStaticPin
		}
		devs, err := visibleDevices(ctx, tx, scope, []string{deviceID})
		if err != nil {
			return err
		}
		d, found := devs[deviceID]
		if !found || d.decommissioned {
			return apperr.NotFound("device")
		}
		if d.orgID != g.OrgID {
			return apperr.Invalid("deviceId", "the device belongs to another organization than the group")
		}
		act, now := actorFrom(ctx), s.clock.Now()
		ref := []deviceRef{{deviceID, d.hostname}}
		states, err := memberStatesOfDevice(ctx, tx, deviceID)
		if err != nil {
			return err
		}
		state, in := states[g.ID]
		switch {
		case in && state.Pinned:
			m, err = getMember(ctx, tx, g.ID, deviceID)
			return err
		case in:
			if _, err := tx.ExecContext(ctx, `UPDATE device_group_members SET pinned = $1 WHERE group_id = $2 AND device_id = $3`,
				true, g.ID, deviceID); err != nil {
				return fmt.Errorf("pin device %s in group %s: %w", deviceID, g.ID, err)
			}
		default:
			f, err := mustParse(string(g.Filter))
			if err != nil {
				return err
			}
			snap, err := loadSnapshot(ctx, tx, deviceID, f.UsesCustomFields())
			if err != nil {
				return fmt.Errorf("load device %s to pin: %w", deviceID, err)
			}
			if err := join(ctx, tx, g.ID, ref, sourceFor(f.Match(snap, now)), true, ReasonPinnedByUser, act, now); err != nil {
				return err
			}
		}
		if err := writeLog(ctx, tx, []logRow{{g.ID, deviceID, d.hostname, ActionPinned, ReasonPinnedByUser, act, now}}); err != nil {
			return err
		}
		if m, err = getMember(ctx, tx, g.ID, deviceID); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "device_group.pin", ResourceType: "device_group", ResourceID: g.ID,
			ResourceName: g.Name, PartnerID: g.PartnerID, OrgID: g.OrgID, Details: map[string]any{"deviceId": deviceID}})
	})
	if err != nil {
		return m, fmt.Errorf("pin device to group: %w", err)
	}
	return m, nil
}

// Unpin lets a pinned device of a dynamic group in scope follow the filter again: it leaves
// at once when it does not match. Unpinning a member that is not pinned changes nothing.
func (s *Service) Unpin(ctx context.Context, groupID, deviceID string) error {
	scope := access.ScopeFrom(ctx)
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		g, err := s.writableGroup(ctx, tx, scope, groupID)
		if err != nil {
			return err
		}
		if g.Type != TypeDynamic {
			return errStaticPin
		}
		m, err := getMember(ctx, tx, g.ID, deviceID)
		if err != nil || !m.Pinned {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE device_group_members SET pinned = $1 WHERE group_id = $2 AND device_id = $3`,
			false, g.ID, deviceID); err != nil {
			return fmt.Errorf("unpin device %s in group %s: %w", deviceID, g.ID, err)
		}
		act, now := actorFrom(ctx), s.clock.Now()
		if err := writeLog(ctx, tx, []logRow{{g.ID, deviceID, m.Hostname, ActionUnpinned, ReasonUnpinnedByUser, act, now}}); err != nil {
			return err
		}
		f, err := mustParse(string(g.Filter))
		if err != nil {
			return err
		}
		snap, err := loadSnapshot(ctx, tx, deviceID, f.UsesCustomFields())
		if err != nil {
			return fmt.Errorf("load device %s to unpin: %w", deviceID, err)
		}
		ref := []deviceRef{{deviceID, m.Hostname}}
		if f.Match(snap, now) {
			err = setSource(ctx, tx, g.ID, []string{deviceID}, SourceDynamic)
		} else {
			err = leave(ctx, tx, g.ID, ref, false, ReasonNoLongerMatches, act, now)
		}
		if err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "device_group.unpin", ResourceType: "device_group", ResourceID: g.ID,
			ResourceName: g.Name, PartnerID: g.PartnerID, OrgID: g.OrgID, Details: map[string]any{"deviceId": deviceID}})
	})
}

// Preview evaluates a filter (raw, else the group's own) against the devices of a dynamic
// group's organization, changing nothing. It returns the count and the first limit matches
// by hostname.
func (s *Service) Preview(ctx context.Context, groupID string, raw json.RawMessage, limit int) (Preview, error) {
	g, err := getGroup(ctx, s.db, access.ScopeFrom(ctx), groupID)
	if err != nil {
		return Preview{}, err
	}
	if g.Type != TypeDynamic {
		return Preview{}, apperr.Invalid("id", "preview is for dynamic groups; a static group has no filter")
	}
	var f *Filter
	filter := g.Filter
	if isNull(raw) {
		if f, err = mustParse(string(g.Filter)); err != nil {
			return Preview{}, err
		}
	} else {
		var canonical string
		if f, canonical, err = parseFor(ctx, s.db, TypeDynamic, g.OrgID, raw); err != nil {
			return Preview{}, err
		}
		filter = json.RawMessage(canonical)
	}
	devs, err := loadOrgSnapshots(ctx, s.db, g.OrgID, f.UsesCustomFields())
	if err != nil {
		return Preview{}, err
	}
	states, err := memberStatesOfGroup(ctx, s.db, g.ID)
	if err != nil {
		return Preview{}, err
	}
	out := Preview{Filter: filter, Data: []PreviewDevice{}}
	now := s.clock.Now()
	for _, d := range devs {
		if !f.Match(d, now) {
			continue
		}
		out.Count++
		if len(out.Data) < limit {
			_, member := states[d.ID]
			out.Data = append(out.Data, PreviewDevice{DeviceID: d.ID, Hostname: d.Hostname, DisplayName: d.DisplayName,
				Status: d.Status, OSType: d.OSType, Member: member})
		}
	}
	out.HasMore = out.Count > len(out.Data)
	return out, nil
}

// MembershipLog lists a group's membership changes, newest first; deviceID narrows it to one
// device.
func (s *Service) MembershipLog(ctx context.Context, groupID, deviceID string, page store.Page) ([]MembershipEvent, string, *int, error) {
	g, err := getGroup(ctx, s.db, access.ScopeFrom(ctx), groupID)
	if err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"l.group_id = " + a.Add(g.ID)}
	if deviceID != "" {
		conds = append(conds, "l.device_id = "+a.Add(deviceID))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: logColumns, From: " FROM device_group_log l", Conds: conds, Args: &a,
		SortKey: "l.id", SortID: "l.id", Desc: true}, page, scanLog, func(e MembershipEvent) (string, string) { return e.ID, e.ID })
}
