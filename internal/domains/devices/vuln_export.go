package devices

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gale/internal/platform/store"
)

// InstalledPackage is a package installed on a live device, for vulnerability correlation.
type InstalledPackage struct {
	DeviceID, PartnerID, OrgID string
	Name, Version, Source      string
}

// SoftwareOf returns the packages of the live devices among ids (at most installedChunk a
// statement), named one of names when names is not nil, in device order. Callers check scope.
func SoftwareOf(ctx context.Context, q store.Querier, ids, names []string) ([]InstalledPackage, error) {
	if len(ids) == 0 || (names != nil && len(names) == 0) {
		return nil, nil
	}
	var out []InstalledPackage
	for first := 0; first < len(ids); first += installedChunk {
		var a store.Args
		cond := ""
		if names != nil {
			cond = " AND s.name IN " + a.In(names)
		}
		part, err := store.QueryAll(ctx, q, `SELECT d.id, d.partner_id, d.org_id, s.name, s.version, s.source
			FROM device_software s JOIN devices d ON d.id = s.device_id
			WHERE s.device_id IN `+a.In(ids[first:min(first+installedChunk, len(ids))])+` AND d.decommissioned_at IS NULL`+cond, a.Values(),
			func(sc store.Scanner) (p InstalledPackage, err error) {
				err = sc.Scan(&p.DeviceID, &p.PartnerID, &p.OrgID, &p.Name, &p.Version, &p.Source)
				return p, err
			})
		if err != nil {
			return nil, fmt.Errorf("read installed packages: %w", err)
		}
		out = append(out, part...)
	}
	return out, nil
}

// LiveIDsAfter returns up to limit IDs of live (not decommissioned) devices above after, in
// ID order: a walk over the fleet.
func LiveIDsAfter(ctx context.Context, q store.Querier, after string, limit int) ([]string, error) {
	var a store.Args
	cond := ""
	if after != "" {
		cond = " AND id > " + a.Add(after)
	}
	out, err := store.QueryStrings(ctx, q, `SELECT id FROM devices WHERE decommissioned_at IS NULL`+cond+` ORDER BY id LIMIT `+a.Add(limit), a.Values()...)
	if err != nil {
		return nil, fmt.Errorf("list live devices: %w", err)
	}
	return out, nil
}

// DevicesWithSoftware returns the live devices that have a package named one of names.
func DevicesWithSoftware(ctx context.Context, q store.Querier, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	var a store.Args
	out, err := store.QueryStrings(ctx, q, `SELECT DISTINCT d.id FROM device_software s JOIN devices d ON d.id = s.device_id
		WHERE s.name IN `+a.In(names)+` AND d.decommissioned_at IS NULL ORDER BY d.id`, a.Values()...)
	if err != nil {
		return nil, fmt.Errorf("find devices by package: %w", err)
	}
	return out, nil
}

// InventoryAt is when a live device's inventory was last stored; ok is false for a device
// missing or decommissioned, at is zero before its first inventory.
func InventoryAt(ctx context.Context, q store.Querier, id string) (at time.Time, ok bool, err error) {
	var t sql.NullTime
	err = q.QueryRowContext(ctx, `SELECT inventory_at FROM devices WHERE id = $1 AND decommissioned_at IS NULL`, id).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the inventory time of device %s: %w", id, err)
	}
	return t.Time, true, nil
}

// OnlineAmong returns the devices among ids that are online and live, the most recently
// heard from first.
func OnlineAmong(ctx context.Context, q store.Querier, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var a store.Args
	out, err := store.QueryStrings(ctx, q, `SELECT id FROM devices WHERE id IN `+a.In(ids)+` AND status = `+a.Add(StatusOnline)+
		` AND decommissioned_at IS NULL ORDER BY last_seen_at DESC, id`, a.Values()...)
	if err != nil {
		return nil, fmt.Errorf("find online devices: %w", err)
	}
	return out, nil
}

// DevicesWithSoftware is DevicesWithSoftware on the service's database.
func (s *Service) DevicesWithSoftware(ctx context.Context, names []string) ([]string, error) {
	return DevicesWithSoftware(ctx, s.db, names)
}

// OnlineAmong is OnlineAmong on the service's database.
func (s *Service) OnlineAmong(ctx context.Context, ids []string) ([]string, error) {
	return OnlineAmong(ctx, s.db, ids)
}
