package patches

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/domains/thirdparty"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/pkgversion"
)

// Third-party patches come from the platform's third-party catalog: an application the
// catalog knows (by its installed-package names) installed on a device at a version older
// than the catalog's latest for that device's system is a pending patch, installed from the
// catalog's installer with its checksum. The external ID is <catalog entry>:<version>.

// catalogManager is the version ordering of a catalog installer's file type: Debian's for deb,
// RPM's for rpm, and Debian's (which orders dotted numbers as people expect) for the others.
func catalogManager(fileType string) string {
	if fileType == agentproto.FileRPM {
		return agentproto.ManagerDnf
	}
	return agentproto.ManagerApt
}

// installedFileType is the installer file type that updates a package installed by source on
// Linux; elsewhere any installer of the system will do ("").
func installedFileType(osType, source string) string {
	if osType != agentproto.OSLinux {
		return ""
	}
	switch source {
	case "dpkg":
		return agentproto.FileDeb
	case "rpm":
		return agentproto.FileRPM
	}
	return "-" // snap, flatpak: no catalog installer updates these
}

// offer is a catalog version that updates an application installed on a device.
type offer struct {
	entry     *thirdparty.Package
	version   thirdparty.Version
	installed devices.NamedInstall
}

func (o offer) externalID() string { return o.entry.ID + ":" + o.version.Version }

// catalogIndex finds catalog entries by installed-package name (lower case).
type catalogIndex struct {
	byName map[string][]*thirdparty.Package
	byID   map[string]*thirdparty.Package
	names  []string
}

func newCatalogIndex(entries []thirdparty.Package) catalogIndex {
	ix := catalogIndex{byName: map[string][]*thirdparty.Package{}, byID: map[string]*thirdparty.Package{}}
	for i := range entries {
		e := &entries[i]
		ix.byID[e.ID] = e
		for _, n := range e.PackageNames {
			n = strings.ToLower(n)
			if _, ok := ix.byName[n]; !ok {
				ix.names = append(ix.names, n)
			}
			ix.byName[n] = append(ix.byName[n], e)
		}
	}
	return ix
}

// latestFor is the newest version of e that installs on the system of n and updates n.
func latestFor(e *thirdparty.Package, n devices.NamedInstall) (thirdparty.Version, bool) {
	want := installedFileType(n.OSType, n.Source)
	for _, v := range e.Versions { // newest first
		if v.OSType == n.OSType && (want == "" || v.FileType == want) {
			return v, true
		}
	}
	return thirdparty.Version{}, false
}

// offers returns, per device, the catalog versions newer than what it has installed, one per
// catalog entry.
func (ix catalogIndex) offers(installs []devices.NamedInstall) map[string][]offer {
	out := map[string][]offer{}
	seen := map[string]bool{}
	for _, n := range installs {
		for _, e := range ix.byName[strings.ToLower(n.Name)] {
			key := n.DeviceID + "/" + e.ID
			if seen[key] {
				continue
			}
			v, ok := latestFor(e, n)
			if !ok {
				continue
			}
			seen[key] = true
			if c, err := pkgversion.Compare(catalogManager(v.FileType), v.Version, n.Version); err == nil && c > 0 {
				out[n.DeviceID] = append(out[n.DeviceID], offer{entry: e, version: v, installed: n})
			}
		}
	}
	return out
}

// scanThirdParty is a scan of the third_party source: the devices' last reported software
// (their inventory) against the catalog, on the server, in one transaction. The job's
// devices are done when it returns.
func (s *Service) scanThirdParty(ctx context.Context, ids []string) (PatchJobStart, error) {
	if s.catalog == nil {
		return PatchJobStart{}, apperr.BadRequest("SCAN_SOURCE_UNSUPPORTED", "this server has no third-party catalog")
	}
	var out PatchJobStart
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		partnerID, orgID, err := jobPlace(ctx, tx, ids)
		if err != nil {
			return err
		}
		job, err := s.insertJob(ctx, tx, JobScan, partnerID, orgID, "", "")
		if err != nil {
			return err
		}
		entries, err := s.catalog.Entries(ctx, tx)
		if err != nil {
			return err
		}
		ix := newCatalogIndex(entries)
		owners, err := ownersOf(ctx, tx, ids)
		if err != nil {
			return err
		}
		scope := access.ScopeFrom(ctx)
		var live []string
		out.Skipped = []PatchSkippedDevice{}
		for _, id := range ids {
			o, ok := owners[id]
			if !ok || o.PartnerID != partnerID || !scope.CanSeeOrg(o.OrgID, o.PartnerID) {
				out.Skipped = append(out.Skipped, PatchSkippedDevice{DeviceID: id, Code: apperr.CodeNotFound, Reason: "no such device"})
				continue
			}
			live = append(live, id)
		}
		installs, err := devices.InstalledNamed(ctx, tx, live, ix.names)
		if err != nil {
			return err
		}
		offered := ix.offers(installs)
		byDevice := map[string][]devices.NamedInstall{}
		for _, n := range installs {
			byDevice[n.DeviceID] = append(byDevice[n.DeviceID], n)
		}
		now := s.clock.Now()
		rows := make([]jobDeviceRow, 0, len(live))
		for _, id := range live {
			if err := s.ingestThirdParty(ctx, tx, id, owners[id], offered[id], ix, byDevice[id], now); err != nil {
				return err
			}
			rows = append(rows, jobDeviceRow{deviceID: id, orgID: owners[id].OrgID, status: JobDeviceCompleted})
		}
		if out.PatchJob, err = s.recordJob(ctx, tx, job, partnerID, rows, len(out.Skipped)); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "patch.scan", ResourceType: "patch_job", ResourceID: job.ID,
			PartnerID: partnerID, OrgID: orgID, Details: map[string]any{"devices": len(rows), "skipped": len(out.Skipped),
				"source": SourceThirdParty}})
	})
	return out, err
}

// ownersOf reads the owners of the devices among ids, in chunks.
func ownersOf(ctx context.Context, q store.Querier, ids []string) (map[string]tenancy.Owner, error) {
	valid := validIDs(ids)
	out := map[string]tenancy.Owner{}
	for first := 0; first < len(valid); first += rowsPerStatement {
		owners, err := devices.Owners(ctx, q, valid[first:min(first+rowsPerStatement, len(valid))])
		if err != nil {
			return nil, err
		}
		for id, o := range owners {
			out[id] = o
		}
	}
	return out, nil
}

// ingestThirdParty records what the catalog offers one device: its patches and its pending
// rows; open third-party rows no longer offered are installed when the application reached
// their version, and dropped otherwise (the application is gone, or a newer version
// superseded them).
func (s *Service) ingestThirdParty(ctx context.Context, tx *sql.Tx, deviceID string, o tenancy.Owner, offers []offer, ix catalogIndex,
	installed []devices.NamedInstall, now time.Time) error {
	current := map[string]string{}
	for _, n := range installed {
		for _, e := range ix.byName[strings.ToLower(n.Name)] {
			if _, ok := current[e.ID]; !ok {
				current[e.ID] = n.Version
			}
		}
	}
	slices.SortFunc(offers, func(a, b offer) int { return strings.Compare(a.externalID(), b.externalID()) })
	keep := map[string]bool{}
	for _, of := range offers {
		keep[of.externalID()] = true
		category := CategoryBugfix
		if len(of.version.CVEIDs) > 0 {
			category = CategorySecurity
		}
		cves := of.version.CVEIDs
		if cves == nil {
			cves = []string{}
		}
		var patchID string
		err := tx.QueryRowContext(ctx, `INSERT INTO patches (id, partner_id, source, external_id, package_id, title, version, vendor, cve_ids,
			severity, category, requires_reboot, description, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,
			FALSE, $12, $13, $13) ON CONFLICT (partner_id, source, external_id) DO UPDATE SET vendor = excluded.vendor,
			cve_ids = excluded.cve_ids, severity = excluded.severity, category = excluded.category, updated_at = excluded.updated_at
			RETURNING id`, store.NewID(), o.PartnerID, SourceThirdParty, of.externalID(), of.entry.ID,
			of.entry.Vendor+" "+of.entry.Name+" "+of.version.Version, of.version.Version, of.entry.Vendor, store.EncodeJSON(cves),
			of.entry.DefaultSeverity, category, of.entry.Description, now).Scan(&patchID)
		if err != nil {
			return fmt.Errorf("record third-party patch %s: %w", of.externalID(), err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO patch_devices (device_id, patch_id, partner_id, org_id, source, status, installed_version,
			available_version, offered_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
			ON CONFLICT (device_id, patch_id) DO UPDATE SET
			status = CASE WHEN patch_devices.status = 'failed' THEN 'failed' ELSE 'pending' END, org_id = excluded.org_id,
			installed_version = excluded.installed_version, available_version = excluded.available_version, updated_at = excluded.updated_at
			WHERE patch_devices.status NOT IN ('pending', 'failed') OR patch_devices.installed_version <> excluded.installed_version
			OR patch_devices.org_id <> excluded.org_id`, deviceID, patchID, o.PartnerID, o.OrgID, SourceThirdParty, DeviceStatePending,
			of.installed.Version, of.version.Version, now)
		if err != nil {
			return fmt.Errorf("record third-party patch %s of device %s: %w", of.externalID(), deviceID, err)
		}
	}
	type openRow struct{ patchID, ext, entryID, version string }
	open, err := store.QueryAll(ctx, tx, `SELECT pd.patch_id, p.external_id, p.package_id, p.version FROM patch_devices pd
		JOIN patches p ON p.id = pd.patch_id WHERE pd.device_id = $1 AND pd.source = $2 AND pd.status IN ($3, $4, $5)`,
		[]any{deviceID, SourceThirdParty, DeviceStatePending, DeviceStateFailed, DeviceStateSkipped},
		func(sc store.Scanner) (r openRow, err error) {
			err = sc.Scan(&r.patchID, &r.ext, &r.entryID, &r.version)
			return r, err
		})
	if err != nil {
		return fmt.Errorf("read the open third-party patches of device %s: %w", deviceID, err)
	}
	for _, r := range open {
		if keep[r.ext] {
			continue
		}
		have, ok := current[r.entryID]
		reached := false
		if e := ix.byID[r.entryID]; ok && e != nil {
			fileType := ""
			for _, v := range e.Versions {
				if v.Version == r.version {
					fileType = v.FileType
				}
			}
			c, err := pkgversion.Compare(catalogManager(fileType), have, r.version)
			reached = err == nil && c >= 0
		}
		var err error
		if reached {
			_, err = tx.ExecContext(ctx, `UPDATE patch_devices SET status = $1, installed_version = $2, installed_at = $3, error = NULL,
				updated_at = $3 WHERE device_id = $4 AND patch_id = $5`, DeviceStateInstalled, have, now, deviceID, r.patchID)
		} else {
			_, err = tx.ExecContext(ctx, `DELETE FROM patch_devices WHERE device_id = $1 AND patch_id = $2`, deviceID, r.patchID)
		}
		if err != nil {
			return fmt.Errorf("close third-party patch %s of device %s: %w", r.ext, deviceID, err)
		}
	}
	return s.refreshSummary(ctx, tx, deviceID, o, false, time.Time{})
}

// thirdPartyInstallers turns the third-party rows of an install into catalog installers: the
// version's download, checksum and file type, and the name the device lists the application
// under (what the agent installs and reports). Rows whose version left the catalog, or whose
// application the device no longer lists, are left out with the reason.
func (s *Service) thirdPartyInstallers(ctx context.Context, tx *sql.Tx, items []thirdPartyItem) (map[string][]PatchPackageVersion, map[string]string, error) {
	if len(items) == 0 {
		return nil, nil, nil
	}
	if s.catalog == nil {
		return nil, nil, errors.New("third-party patches need the third-party catalog")
	}
	entries, err := s.catalog.Entries(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	ix := newCatalogIndex(entries)
	var ids []string
	for _, it := range items {
		if !slices.Contains(ids, it.deviceID) {
			ids = append(ids, it.deviceID)
		}
	}
	installs, err := devices.InstalledNamed(ctx, tx, ids, ix.names)
	if err != nil {
		return nil, nil, err
	}
	nameOn := map[string]string{} // device/entry → the name the device lists
	for _, n := range installs {
		for _, e := range ix.byName[strings.ToLower(n.Name)] {
			if _, ok := nameOn[n.DeviceID+"/"+e.ID]; !ok {
				nameOn[n.DeviceID+"/"+e.ID] = n.Name
			}
		}
	}
	out, missing := map[string][]PatchPackageVersion{}, map[string]string{}
	for _, it := range items {
		e := ix.byID[it.entryID]
		var v *thirdparty.Version
		if e != nil {
			for i := range e.Versions {
				if e.Versions[i].Version == it.version {
					v = &e.Versions[i]
				}
			}
		}
		name, listed := nameOn[it.deviceID+"/"+it.entryID]
		switch {
		case v == nil:
			missing[it.deviceID] = "version " + it.version + " left the third-party catalog"
		case !listed:
			missing[it.deviceID] = "the device no longer lists the application"
		default:
			out[it.deviceID] = append(out[it.deviceID], PatchPackageVersion{PatchID: it.patchID, Name: name, Version: it.version,
				Installer: &PatchInstaller{URL: v.DownloadURL, SHA256: v.SHA256, FileType: v.FileType}})
		}
	}
	return out, missing, nil
}

// thirdPartyItem is a third-party patch to install on a device.
type thirdPartyItem struct{ deviceID, patchID, entryID, version string }
