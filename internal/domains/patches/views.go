package patches

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// deviceStates are the states of a patch on a device, in the order pages list them.
var deviceStates = []string{DeviceStatePending, DeviceStateMissing, DeviceStateFailed, DeviceStateInstalled, DeviceStateSkipped}

// DevicePatch is a patch as it stands on one device: its state there, the versions seen, and
// (in Patch.PatchApproval) the decision that applies to the device's organization.
type DevicePatch struct {
	Patch
	OrgID            string     `json:"orgId"`
	State            string     `json:"state"`
	InstalledVersion string     `json:"installedVersion"`
	AvailableVersion string     `json:"availableVersion"`
	Error            *string    `json:"error"`
	InstalledAt      *time.Time `json:"installedAt"`
	StateChangedAt   time.Time  `json:"stateChangedAt"`
}

// DevicePatchFilter narrows a device's patches to some states (none: every state).
type DevicePatchFilter struct {
	States []string
}

func checkStates(states []string) error {
	for _, st := range states {
		if !slices.Contains(deviceStates, st) {
			return apperr.Invalid("state", "one of pending, missing, failed, installed, skipped")
		}
	}
	return nil
}

// DevicePatches lists the patches offered to a device in scope, newest first, each with its
// state there and the decision that applies to the device's organization. A device out of
// scope has none.
func (s *Service) DevicePatches(ctx context.Context, deviceID string, f DevicePatchFilter, page store.Page) ([]DevicePatch, string, *int, error) {
	if err := checkStates(f.States); err != nil {
		return nil, "", nil, err
	}
	if !store.ValidID(deviceID) {
		return nil, "", nil, apperr.NotFound("device")
	}
	var a store.Args
	conds := []string{"pd.device_id = " + a.Add(deviceID), orgRows(access.ScopeFrom(ctx), &a, "pd.org_id", "pd.partner_id")}
	if len(f.States) > 0 {
		conds = append(conds, "pd.status IN "+a.In(f.States))
	}
	list, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: patchColumns + `, pd.org_id, pd.status, pd.installed_version,
		pd.available_version, pd.error, pd.installed_at, pd.updated_at`, From: " FROM patch_devices pd JOIN patches p ON p.id = pd.patch_id",
		Conds: conds, Args: &a, SortKey: "p.id", SortID: "p.id", Desc: true}, page, func(row store.Scanner) (DevicePatch, error) {
		var d DevicePatch
		var errMsg sql.NullString
		var installed sql.NullTime
		p, err := scanPatch(store.ScanAlso{Row: row, Dest: []any{&d.OrgID, &d.State, &d.InstalledVersion, &d.AvailableVersion, &errMsg, &installed,
			&d.StateChangedAt}})
		d.Patch, d.Error, d.InstalledAt = p, store.StringPtr(errMsg), store.TimePtr(installed)
		return d, err
	}, func(d DevicePatch) (string, string) { return d.ID, d.ID })
	if err != nil {
		return nil, "", nil, fmt.Errorf("list the patches of device %s: %w", deviceID, err)
	}
	// The decisions that apply, read per organization (a device has one; a move may leave
	// rows of its former one until its next scan).
	byOrg := map[string][]int{}
	for i, d := range list {
		byOrg[d.OrgID] = append(byOrg[d.OrgID], i)
	}
	now := s.clock.Now()
	for org, at := range byOrg {
		ps := make([]Patch, len(at))
		for j, i := range at {
			ps[j] = list[i].Patch
		}
		if err := withApprovals(ctx, s.db, ps, org, now); err != nil {
			return nil, "", nil, err
		}
		for j, i := range at {
			list[i].PatchApproval = ps[j].PatchApproval
		}
	}
	return list, next, total, nil
}

// PatchDevice is a live device in scope that a patch was offered to, with the patch's state
// there.
type PatchDevice struct {
	DeviceID         string    `json:"deviceId"`
	OrgID            string    `json:"orgId"`
	Hostname         string    `json:"hostname"`
	DisplayName      *string   `json:"displayName"`
	State            string    `json:"state"`
	InstalledVersion string    `json:"installedVersion"`
	AvailableVersion string    `json:"availableVersion"`
	Error            *string   `json:"error"`
	StateChangedAt   time.Time `json:"stateChangedAt"`
}

// PatchDevices lists the live devices in scope that a patch in scope was offered to, by
// hostname, narrowed to some states (none: every state). A patch out of scope is not found.
func (s *Service) PatchDevices(ctx context.Context, patchID string, states []string, page store.Page) ([]PatchDevice, string, *int, error) {
	if err := checkStates(states); err != nil {
		return nil, "", nil, err
	}
	scope := access.ScopeFrom(ctx)
	if _, err := s.getPatch(ctx, s.db, scope, patchID, ""); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"pd.patch_id = " + a.Add(patchID), orgRows(scope, &a, "pd.org_id", "pd.partner_id")}
	if len(states) > 0 {
		conds = append(conds, "pd.status IN "+a.In(states))
	}
	list, next, total, err := store.List(ctx, s.db, devices.ListLive(`d.id, pd.org_id, d.hostname, d.display_name, pd.status,
		pd.installed_version, pd.available_version, pd.error, pd.updated_at`, " JOIN patch_devices pd ON pd.device_id = d.id", conds, &a),
		page, func(row store.Scanner) (PatchDevice, error) {
			var d PatchDevice
			var name, errMsg sql.NullString
			err := row.Scan(&d.DeviceID, &d.OrgID, &d.Hostname, &name, &d.State, &d.InstalledVersion, &d.AvailableVersion, &errMsg,
				&d.StateChangedAt)
			d.DisplayName, d.Error = store.StringPtr(name), store.StringPtr(errMsg)
			return d, err
		}, func(d PatchDevice) (string, string) { return d.Hostname, d.DeviceID })
	if err != nil {
		return nil, "", nil, fmt.Errorf("list the devices of patch %s: %w", patchID, err)
	}
	return list, next, total, nil
}

// PatchDeviceSummary is what a device's patches add up to, as its last scan and the jobs since
// left them.
type PatchDeviceSummary struct {
	// Scanned tells whether the device has a summary at all: a scan or a job recorded one.
	Scanned         bool       `json:"scanned"`
	Pending         int        `json:"pending"`
	CriticalPending int        `json:"criticalPending"`
	Installed       int        `json:"installed"`
	Failed          int        `json:"failed"`
	RebootRequired  bool       `json:"rebootRequired"`
	LastScanAt      *time.Time `json:"lastScanAt"`
}

// DeviceSummary returns the patch summary of a device in scope; the zero summary (Scanned
// false) for a device never scanned, or out of scope.
func (s *Service) DeviceSummary(ctx context.Context, deviceID string) (PatchDeviceSummary, error) {
	var out PatchDeviceSummary
	if !store.ValidID(deviceID) {
		return out, nil
	}
	var a store.Args
	var scanned sql.NullTime
	err := s.db.QueryRowContext(ctx, `SELECT s.pending, s.critical_pending, s.installed, s.failed, s.reboot_required, s.last_scan_at
		FROM patch_device_summaries s WHERE s.device_id = `+a.Add(deviceID)+` AND `+orgRows(access.ScopeFrom(ctx), &a, "s.org_id", "s.partner_id"),
		a.Values()...).Scan(&out.Pending, &out.CriticalPending, &out.Installed, &out.Failed, &out.RebootRequired, &scanned)
	if errors.Is(err, sql.ErrNoRows) {
		return PatchDeviceSummary{}, nil
	}
	if err != nil {
		return out, fmt.Errorf("read the patch summary of device %s: %w", deviceID, err)
	}
	out.Scanned, out.LastScanAt = true, store.TimePtr(scanned)
	return out, nil
}
