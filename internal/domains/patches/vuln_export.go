package patches

import (
	"context"
	"fmt"

	"gale/internal/platform/store"
)

// PendingPatch is a Linux patch pending (or failed) on a device: the version it offers of
// a package, for vulnerability correlation and remediation.
type PendingPatch struct {
	DeviceID, OrgID, PatchID string
	Package, Version         string
	InstalledVersion         string
	Category                 string
}

// PendingFor returns the pending or failed Linux patches of the devices among deviceIDs
// (at most 500 a statement), of packages named one of names when names is not nil.
// Callers check scope.
func PendingFor(ctx context.Context, q store.Querier, deviceIDs, names []string) ([]PendingPatch, error) {
	if len(deviceIDs) == 0 || (names != nil && len(names) == 0) {
		return nil, nil
	}
	var out []PendingPatch
	for first := 0; first < len(deviceIDs); first += bulkChunk {
		var a store.Args
		cond := ""
		if names != nil {
			cond = " AND p.package_id IN " + a.In(names)
		}
		part, err := store.QueryAll(ctx, q, `SELECT pd.device_id, pd.org_id, pd.patch_id, p.package_id, pd.available_version,
			pd.installed_version, p.category FROM patch_devices pd JOIN patches p ON p.id = pd.patch_id
			WHERE pd.device_id IN `+a.In(deviceIDs[first:min(first+bulkChunk, len(deviceIDs))])+` AND pd.source = 'linux'
			AND pd.status IN ('pending', 'failed')`+cond, a.Values(), func(sc store.Scanner) (p PendingPatch, err error) {
			err = sc.Scan(&p.DeviceID, &p.OrgID, &p.PatchID, &p.Package, &p.Version, &p.InstalledVersion, &p.Category)
			return p, err
		})
		if err != nil {
			return nil, fmt.Errorf("read pending patches: %w", err)
		}
		out = append(out, part...)
	}
	return out, nil
}

// DevicesPending returns the devices on which a Linux patch of package name at version is
// pending (or failed).
func DevicesPending(ctx context.Context, q store.Querier, name, version string) ([]string, error) {
	out, err := store.QueryStrings(ctx, q, `SELECT DISTINCT pd.device_id FROM patch_devices pd JOIN patches p ON p.id = pd.patch_id
		WHERE p.package_id = $1 AND pd.available_version = $2 AND pd.source = 'linux' AND pd.status IN ('pending', 'failed')
		ORDER BY pd.device_id LIMIT 500`, name, version)
	if err != nil {
		return nil, fmt.Errorf("find devices with %s %s pending: %w", name, version, err)
	}
	return out, nil
}

// PendingFor is PendingFor on the service's database.
func (s *Service) PendingFor(ctx context.Context, deviceIDs, names []string) ([]PendingPatch, error) {
	return PendingFor(ctx, s.db, deviceIDs, names)
}

// DevicesPending is DevicesPending on the service's database.
func (s *Service) DevicesPending(ctx context.Context, name, version string) ([]string, error) {
	return DevicesPending(ctx, s.db, name, version)
}
