package devices

import (
	"context"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Exports of the partner API: devices and what their agents reported, page by page in a
// stable order (see store.Seek). Decommissioned devices stay in the exports (with their
// status), so an incremental sync learns that they left; devices of deleted organizations
// do not.

// exportConds keeps devices (alias d) in scope whose organization is not deleted.
func exportConds(ctx context.Context, a *store.Args) []string {
	return []string{access.ScopeFrom(ctx).OrgFilter(a, "d.org_id", "d.partner_id"), tenancy.LiveOrg("d.org_id")}
}

// ExportDevices returns a page of devices in scope in ID order, or with sk.Since those changed
// since then (any attribute, status, tag or contact) in (updatedAt, ID) order.
func (s *Service) ExportDevices(ctx context.Context, sk store.Seek) ([]Device, bool, error) {
	var a store.Args
	conds := exportConds(ctx, &a)
	keys := sk.Keys(&a, &conds, "d.updated_at", "d.id")
	return store.SeekPage(ctx, s.db, store.SeekQuery{Columns: deviceColumns, From: " FROM devices d",
		Conds: conds, Args: &a, Keys: keys}, sk, s.sc.scan)
}

// InventoryRow is one device's last reported inventory, as the partner API exports it.
type InventoryRow struct {
	DeviceID string `json:"deviceId" format:"uuid"`
	OrgID    string `json:"orgId" format:"uuid"`
	SiteID   string `json:"siteId" format:"uuid"`
	DeviceInventory
}

// ExportInventory returns a page of the last inventories of devices in scope in device ID
// order, or with sk.Since those received since then in (receivedAt, device ID) order.
func (s *Service) ExportInventory(ctx context.Context, sk store.Seek) ([]InventoryRow, bool, error) {
	var a store.Args
	conds := exportConds(ctx, &a)
	keys := sk.Keys(&a, &conds, "i.received_at", "i.device_id")
	return store.SeekPage(ctx, s.db, store.SeekQuery{Columns: "i.device_id, d.org_id, d.site_id, i." +
		"os, i.hardware, i.disks, i.network, i.users, i.errors, i.software_count, i.collected_at, i.received_at",
		From: " FROM device_inventory i JOIN devices d ON d.id = i.device_id", Conds: conds, Args: &a, Keys: keys}, sk,
		func(sc store.Scanner) (InventoryRow, error) {
			var r InventoryRow
			inv, err := scanInventory(sc, &r.DeviceID, &r.OrgID, &r.SiteID)
			r.DeviceInventory = inv
			return r, err
		})
}

// SoftwareRow is one installed package of a device, as the partner API exports it.
type SoftwareRow struct {
	ID       string `json:"id" format:"uuid"`
	DeviceID string `json:"deviceId" format:"uuid"`
	OrgID    string `json:"orgId" format:"uuid"`
	SiteID   string `json:"siteId" format:"uuid"`
	agentproto.Software
}

// ExportSoftware returns a page of the installed software of devices in scope in ID order.
// Rows keep their IDs across inventories (see softwareID), so with sk.Since the page holds
// the complete lists of the devices whose inventory arrived since then, still in ID order.
func (s *Service) ExportSoftware(ctx context.Context, sk store.Seek) ([]SoftwareRow, bool, error) {
	var a store.Args
	conds := exportConds(ctx, &a)
	if !sk.Since.IsZero() {
		conds = append(conds, "w.device_id IN (SELECT device_id FROM device_inventory WHERE received_at >= "+a.Add(sk.Since)+")")
	}
	return store.SeekPage(ctx, s.db, store.SeekQuery{Columns: `w.id, w.device_id, d.org_id, d.site_id, w.name, w.version,
		w.publisher, w.architecture, w.install_date, w.size_bytes, w.source`,
		From: " FROM device_software w JOIN devices d ON d.id = w.device_id", Conds: conds, Args: &a,
		Keys: []string{"w.id"}}, sk, func(sc store.Scanner) (SoftwareRow, error) {
		var r SoftwareRow
		err := sc.Scan(&r.ID, &r.DeviceID, &r.OrgID, &r.SiteID, &r.Name, &r.Version, &r.Publisher, &r.Architecture,
			&r.InstallDate, &r.SizeBytes, &r.Source)
		return r, err
	})
}
