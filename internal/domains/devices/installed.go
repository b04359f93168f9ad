package devices

import (
	"context"
	"fmt"
	"strings"

	"gale/internal/platform/store"
)

// NamedInstall is a package installed on a device, found by its name.
type NamedInstall struct {
	DeviceID, PartnerID, OrgID, OSType string
	// Name is the name as the device lists it; Source how it was installed (dpkg, rpm,
	// registry, app, snap, flatpak).
	Name, Version, Source string
}

// installedChunk is how many devices one InstalledNamed statement reads.
const installedChunk = 300

// InstalledNamed returns the packages of the live devices among ids whose name is one of
// names, compared without case, in device and name order: for domains that recognise
// applications by their package names (third-party patches). Callers check scope.
func InstalledNamed(ctx context.Context, q store.Querier, ids, names []string) ([]NamedInstall, error) {
	if len(ids) == 0 || len(names) == 0 {
		return nil, nil
	}
	lower := make([]string, len(names))
	for i, n := range names {
		lower[i] = strings.ToLower(n)
	}
	var out []NamedInstall
	for first := 0; first < len(ids); first += installedChunk {
		var a store.Args
		chunk, err := store.QueryAll(ctx, q, `SELECT d.id, d.partner_id, d.org_id, d.os_type, s.name, s.version, s.source
			FROM device_software s JOIN devices d ON d.id = s.device_id
			WHERE s.device_id IN `+a.In(ids[first:min(first+installedChunk, len(ids))])+` AND d.decommissioned_at IS NULL
			AND lower(s.name) IN `+a.In(lower)+` ORDER BY d.id, s.name, s.id`, a.Values(), func(row store.Scanner) (NamedInstall, error) {
			var n NamedInstall
			return n, row.Scan(&n.DeviceID, &n.PartnerID, &n.OrgID, &n.OSType, &n.Name, &n.Version, &n.Source)
		})
		if err != nil {
			return nil, fmt.Errorf("read installed packages by name: %w", err)
		}
		out = append(out, chunk...)
	}
	return out, nil
}
