package software

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/blob"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Service keeps the catalog, runs deployments and reads inventories.
type Service struct {
	db      *store.DB
	logger  *slog.Logger
	clock   clock.Clock
	devices *devices.Service
	tenancy *tenancy.Service
	blobs   blob.Store
	// hold says which devices a maintenance window keeps from installs now; nil: none.
	hold func(ctx context.Context, tx *sql.Tx, deviceIDs []string) (map[string]bool, error)
	// windowActive tells whether an occurrence of a maintenance window is active now; nil
	// makes deployments scheduled for a window unavailable.
	windowActive func(ctx context.Context, windowID string) (bool, error)
}

// Deps is what the software service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// Clock is the time rows are stamped with; nil: the system clock.
	Clock   clock.Clock
	Devices *devices.Service
	Blobs   blob.Store
	// Maintenance tells which of a deployment's devices must wait (a window suppressing
	// patches, of which installs are one kind of change: those devices get no command until
	// ReleaseWaiting finds them free) and whether a window a deployment is scheduled for is
	// active. Nil holds none and makes deployments scheduled for a window unavailable (400).
	Maintenance *maintenance.Service
	// Tenancy places deployments in the caller's organization.
	Tenancy *tenancy.Service
}

// New returns the software service.
func New(d Deps) *Service {
	s := &Service{db: d.DB, logger: d.Logger, clock: clock.Or(d.Clock), devices: d.Devices, tenancy: d.Tenancy, blobs: d.Blobs}
	if m := d.Maintenance; m != nil {
		s.hold = func(ctx context.Context, tx *sql.Tx, ids []string) (map[string]bool, error) {
			return m.Held(ctx, tx, maintenance.Patches, ids)
		}
		s.windowActive = m.WindowActive
	}
	return s
}

// held says which of the devices a maintenance window keeps from installs now; it runs in
// the deployment's transaction.
func (s *Service) held(ctx context.Context, tx *sql.Tx, ids []string) (map[string]bool, error) {
	if s.hold == nil || len(ids) == 0 {
		return map[string]bool{}, nil
	}
	return s.hold(ctx, tx, ids)
}

var errPartnerWide = apperr.Forbidden("partner-wide catalog items are managed by callers who reach every organization of the partner")

func nameTaken(name string) error {
	return apperr.ConflictCode("SOFTWARE_NAME_TAKEN", "a catalog item named "+name+" already exists in this scope")
}

const catalogColumns = `s.id, s.partner_id, s.org_id, s.name, s.package_name, s.vendor, s.description, s.category, s.supported_os,
	s.created_by, s.created_at, s.updated_at`

func scanItem(row store.Scanner) (SoftwareCatalogItem, error) {
	var it SoftwareCatalogItem
	var org, by sql.NullString
	var osJSON string
	err := row.Scan(&it.ID, &it.PartnerID, &org, &it.Name, &it.PackageName, &it.Vendor, &it.Description, &it.Category, &osJSON,
		&by, &it.CreatedAt, &it.UpdatedAt)
	if err != nil {
		return it, err
	}
	it.OrgID, it.CreatedBy = store.StringPtr(org), store.StringPtr(by)
	if err := json.Unmarshal([]byte(osJSON), &it.SupportedOS); err != nil {
		return it, fmt.Errorf("read supported systems of %s: %w", it.ID, err)
	}
	return it, nil
}

// catalogFilter keeps the live catalog items (alias s) the scope may see: the partner's
// partner-wide ones and those of organizations in reach.
func catalogFilter(scope access.Scope, a *store.Args) string {
	return "s.deleted_at IS NULL AND " + tenancy.SharedRowsFilter(scope, a, "s.org_id", "s.partner_id")
}

const versionColumns = `v.id, v.catalog_id, v.version, v.download_url, v.blob_key, v.sha256, v.size_bytes, v.file_type, v.silent_args,
	v.supported_os, v.release_notes, v.created_by, v.created_at`

func scanVersion(row store.Scanner) (SoftwareVersion, error) {
	var v SoftwareVersion
	var link, key, by sql.NullString
	var size sql.NullInt64
	var osJSON string
	err := row.Scan(&v.ID, &v.CatalogID, &v.Version, &link, &key, &v.SHA256, &size, &v.FileType, &v.SilentArgs, &osJSON,
		&v.ReleaseNotes, &by, &v.CreatedAt)
	if err != nil {
		return v, err
	}
	v.DownloadURL, v.Uploaded, v.CreatedBy = store.StringPtr(link), key.Valid, store.StringPtr(by)
	if size.Valid {
		v.SizeBytes = &size.Int64
	}
	if err := json.Unmarshal([]byte(osJSON), &v.SupportedOS); err != nil {
		return v, fmt.Errorf("read supported systems of version %s: %w", v.ID, err)
	}
	return v, nil
}

// withLatest fills in the newest version of each item.
func withLatest(ctx context.Context, q store.Querier, items []SoftwareCatalogItem) error {
	if len(items) == 0 {
		return nil
	}
	ids := make([]string, len(items))
	at := map[string]int{}
	for i, it := range items {
		ids[i], at[it.ID] = it.ID, i
	}
	var a store.Args
	versions, err := store.QueryAll(ctx, q, `SELECT `+versionColumns+` FROM software_versions v WHERE v.catalog_id IN `+a.In(ids)+
		` ORDER BY v.created_at, v.id`, a.Values(), scanVersion)
	if err != nil {
		return fmt.Errorf("read latest versions: %w", err)
	}
	for i := range versions {
		items[at[versions[i].CatalogID]].LatestVersion = &versions[i]
	}
	return nil
}

// CatalogFilter narrows a list of catalog items.
type CatalogFilter struct {
	OrgID    string
	Category string
	OS       string
	Search   string
}

// ListCatalog lists the catalog items in scope by name.
func (s *Service) ListCatalog(ctx context.Context, f CatalogFilter, page store.Page) ([]SoftwareCatalogItem, string, *int, error) {
	var a store.Args
	conds := []string{catalogFilter(access.ScopeFrom(ctx), &a)}
	if f.OrgID != "" {
		conds = append(conds, "(s.org_id = "+a.Add(f.OrgID)+" OR (s.org_id IS NULL AND s.partner_id = "+tenancy.PartnerOfOrg(a.Add(f.OrgID))+"))")
	}
	if f.Category != "" {
		conds = append(conds, "lower(s.category) = "+a.Add(strings.ToLower(f.Category)))
	}
	if f.OS != "" {
		conds = append(conds, "CAST(s.supported_os AS TEXT) LIKE "+a.Add(`%"`+f.OS+`"%`))
	}
	if f.Search != "" {
		like := a.Add("%" + strings.ToLower(f.Search) + "%")
		conds = append(conds, "(lower(s.name) LIKE "+like+" OR lower(s.package_name) LIKE "+like+" OR lower(s.vendor) LIKE "+like+
			" OR lower(s.description) LIKE "+like+")")
	}
	list, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: catalogColumns, From: " FROM software_catalog s", Conds: conds,
		Args: &a, SortKey: "s.name", SortID: "s.id"}, page, scanItem, func(it SoftwareCatalogItem) (string, string) { return it.Name, it.ID })
	if err == nil {
		err = withLatest(ctx, s.db, list)
	}
	return list, next, total, err
}

// GetItem returns a catalog item in scope.
func (s *Service) GetItem(ctx context.Context, id string) (SoftwareCatalogItem, error) {
	it, err := getItem(ctx, s.db, access.ScopeFrom(ctx), id)
	if err != nil {
		return it, err
	}
	list := []SoftwareCatalogItem{it}
	err = withLatest(ctx, s.db, list)
	return list[0], err
}

func getItem(ctx context.Context, q store.Querier, scope access.Scope, id string) (SoftwareCatalogItem, error) {
	var a store.Args
	return store.ByID(ctx, q, "catalog item", `SELECT `+catalogColumns+` FROM software_catalog s`, "s.id", id, &a,
		[]string{catalogFilter(scope, &a)}, scanItem)
}

// manageable loads a catalog item in scope that the caller may change: a partner-wide one
// only when the caller reaches every organization of the partner.
func manageable(ctx context.Context, q store.Querier, scope access.Scope, id string) (SoftwareCatalogItem, error) {
	it, err := getItem(ctx, q, scope, id)
	if err == nil && it.OrgID == nil && !tenancy.ReachesWholePartner(scope) {
		return it, errPartnerWide
	}
	return it, err
}

// cleanOS checks a list of systems and returns it sorted, without repeats.
func cleanOS(field string, list []string) ([]string, error) {
	out := []string{}
	for _, os := range list {
		if os != OSWindows && os != OSMacOS && os != OSLinux {
			return nil, apperr.Invalid(field, "systems are windows, macos and linux")
		}
		if !slices.Contains(out, os) {
			out = append(out, os)
		}
	}
	slices.Sort(out)
	return out, nil
}

func checkLine(field, v string, required bool) (string, error) {
	v = strings.TrimSpace(v)
	if required && v == "" {
		return "", apperr.Invalid(field, field+" is required")
	}
	return v, nil
}

// CreateItem adds a catalog item.
func (s *Service) CreateItem(ctx context.Context, in SoftwareCatalogInput) (SoftwareCatalogItem, error) {
	var err error
	if in.Name, err = checkLine("name", in.Name, true); err != nil {
		return SoftwareCatalogItem{}, err
	}
	if in.PackageName, err = checkLine("packageName", in.PackageName, true); err != nil {
		return SoftwareCatalogItem{}, err
	}
	if len(in.SupportedOS) == 0 {
		return SoftwareCatalogItem{}, apperr.Invalid("supportedOs", "name at least one system")
	}
	if in.SupportedOS, err = cleanOS("supportedOs", in.SupportedOS); err != nil {
		return SoftwareCatalogItem{}, err
	}
	var it SoftwareCatalogItem
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, access.ScopeFrom(ctx), in.OrgID, tenancy.PlaceOptions{Noun: "catalog item", PartnerID: in.PartnerID,
			PartnerWide: true, PartnerWideRefused: errPartnerWide})
		if err != nil {
			return err
		}
		id, now := store.NewID(), s.clock.Now()
		_, err = tx.ExecContext(ctx, `INSERT INTO software_catalog (id, partner_id, org_id, name, package_name, vendor, description, category,
			supported_os, created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)`,
			id, at.PartnerID, store.NullIfEmpty(at.OrgID), in.Name, in.PackageName, strings.TrimSpace(in.Vendor), strings.TrimSpace(in.Description),
			strings.TrimSpace(in.Category), store.EncodeJSON(in.SupportedOS), access.ActorName(ctx), now)
		if store.IsUniqueViolation(err) {
			return nameTaken(in.Name)
		}
		if err != nil {
			return fmt.Errorf("insert catalog item: %w", err)
		}
		if it, err = getItem(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "software.catalog.create", ResourceType: "software_catalog", ResourceID: id,
			ResourceName: it.Name, PartnerID: at.PartnerID, OrgID: at.OrgID})
	})
	if err != nil {
		return it, fmt.Errorf("create catalog item: %w", err)
	}
	return it, nil
}

// UpdateItem changes a catalog item's fields; its scope never changes.
func (s *Service) UpdateItem(ctx context.Context, id string, in SoftwareCatalogPatch) (SoftwareCatalogItem, error) {
	var it SoftwareCatalogItem
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := manageable(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		after := before
		var changed []string
		if in.Name != nil {
			if after.Name, err = checkLine("name", *in.Name, true); err != nil {
				return err
			}
			changed = append(changed, "name")
		}
		if in.PackageName != nil {
			if after.PackageName, err = checkLine("packageName", *in.PackageName, true); err != nil {
				return err
			}
			changed = append(changed, "packageName")
		}
		if in.Vendor != nil {
			after.Vendor, changed = strings.TrimSpace(*in.Vendor), append(changed, "vendor")
		}
		if in.Description != nil {
			after.Description, changed = strings.TrimSpace(*in.Description), append(changed, "description")
		}
		if in.Category != nil {
			after.Category, changed = strings.TrimSpace(*in.Category), append(changed, "category")
		}
		if in.SupportedOS != nil {
			if after.SupportedOS, err = cleanOS("supportedOs", in.SupportedOS); err != nil {
				return err
			}
			if len(after.SupportedOS) == 0 {
				return apperr.Invalid("supportedOs", "name at least one system")
			}
			changed = append(changed, "supportedOs")
		}
		_, err = tx.ExecContext(ctx, `UPDATE software_catalog SET name = $1, package_name = $2, vendor = $3, description = $4, category = $5,
			supported_os = $6, updated_at = $7 WHERE id = $8`, after.Name, after.PackageName, after.Vendor, after.Description, after.Category,
			store.EncodeJSON(after.SupportedOS), s.clock.Now(), id)
		if store.IsUniqueViolation(err) {
			return nameTaken(after.Name)
		}
		if err != nil {
			return fmt.Errorf("update catalog item %s: %w", id, err)
		}
		if it, err = getItem(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "software.catalog.update", ResourceType: "software_catalog", ResourceID: id,
			ResourceName: it.Name, PartnerID: it.PartnerID, OrgID: store.Deref(it.OrgID), Details: map[string]any{"fields": changed}})
	})
	if err != nil {
		return it, fmt.Errorf("update catalog item: %w", err)
	}
	list := []SoftwareCatalogItem{it}
	err = withLatest(ctx, s.db, list)
	return list[0], err
}

// DeleteItem removes a catalog item (softly: its deployments stay readable). An item with
// deployments that have not ended is refused (409 SOFTWARE_DEPLOYING).
func (s *Service) DeleteItem(ctx context.Context, id string) error {
	var keys []string
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		it, err := manageable(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		var open int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM software_deployments WHERE catalog_id = $1 AND status IN ($2, $3)`,
			id, DeploymentPending, DeploymentRunning).Scan(&open); err != nil {
			return fmt.Errorf("count open deployments: %w", err)
		}
		if open > 0 {
			return apperr.ConflictCode("SOFTWARE_DEPLOYING", fmt.Sprintf("%d deployments of this item have not ended; cancel them or wait", open))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE software_catalog SET deleted_at = $1 WHERE id = $2`, s.clock.Now(), id); err != nil {
			return fmt.Errorf("delete catalog item %s: %w", id, err)
		}
		keys, err = store.QueryStrings(ctx, tx, `SELECT blob_key FROM software_versions WHERE catalog_id = $1 AND blob_key IS NOT NULL`, id)
		if err != nil {
			return fmt.Errorf("list uploaded files of %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "software.catalog.delete", ResourceType: "software_catalog", ResourceID: id,
			ResourceName: it.Name, PartnerID: it.PartnerID, OrgID: store.Deref(it.OrgID)})
	})
	if err != nil {
		return fmt.Errorf("delete catalog item: %w", err)
	}
	// No deployment of the item is open, so no agent needs its uploaded files any more.
	for _, k := range keys {
		if err := s.blobs.Delete(context.WithoutCancel(ctx), k); err != nil {
			s.logger.ErrorContext(ctx, "an uploaded file of a deleted catalog item stays in blob storage", "key", k, "error", err)
		}
	}
	return nil
}

// Versions lists a page of a catalog item's versions, newest first.
func (s *Service) Versions(ctx context.Context, id string, page store.Page) ([]SoftwareVersion, string, *int, error) {
	if _, err := getItem(ctx, s.db, access.ScopeFrom(ctx), id); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	return store.List(ctx, s.db, store.ListQuery{Columns: versionColumns, From: " FROM software_versions v",
		Conds: []string{"v.catalog_id = " + a.Add(id)}, Args: &a, SortKey: "v.created_at", SortID: "v.id", Desc: true,
		KeyArg: func(k string) (any, error) { return time.Parse(time.RFC3339Nano, k) }},
		page, scanVersion, func(v SoftwareVersion) (string, string) { return v.CreatedAt.UTC().Format(time.RFC3339Nano), v.ID })
}

// versionSpec is a checked version, of either origin.
type versionSpec struct {
	Version, FileType, SilentArgs, Notes string
	SupportedOS                          []string
}

// checkVersion checks what a version of the item declares: the file type fits the systems.
func checkVersion(it SoftwareCatalogItem, version, fileType, silentArgs, notes string, supported []string) (versionSpec, error) {
	v := versionSpec{SilentArgs: strings.TrimSpace(silentArgs), Notes: strings.TrimSpace(notes)}
	var err error
	if v.Version, err = checkLine("version", version, true); err != nil {
		return v, err
	}
	if len(v.Version) > 100 {
		return v, apperr.Invalid("version", "at most 100 characters")
	}
	os, ok := agentproto.FileTypeOS[fileType]
	if !ok {
		return v, apperr.Invalid("fileType", "fileType is one of deb, rpm, msi, exe, pkg, dmg")
	}
	v.FileType = fileType
	if v.SupportedOS, err = cleanOS("supportedOs", supported); err != nil {
		return v, err
	}
	if len(v.SupportedOS) == 0 {
		v.SupportedOS = []string{os}
	}
	if len(v.SupportedOS) != 1 || v.SupportedOS[0] != os {
		return v, apperr.Invalid("fileType", "a "+fileType+" file installs on "+os+" only")
	}
	if !slices.Contains(it.SupportedOS, os) {
		return v, apperr.Invalid("fileType", "the catalog item does not support "+os)
	}
	return v, nil
}

// AddVersion adds a version whose file is at an https address.
func (s *Service) AddVersion(ctx context.Context, itemID string, in SoftwareVersionInput) (SoftwareVersion, error) {
	u, err := url.Parse(strings.TrimSpace(in.DownloadURL))
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return SoftwareVersion{}, apperr.Invalid("downloadUrl", "downloadUrl must be an https address without credentials")
	}
	sum := strings.ToLower(in.SHA256)
	if !validSHA256(sum) {
		return SoftwareVersion{}, apperr.Invalid("sha256", "sha256 is the file's SHA-256 as 64 hex digits")
	}
	var size *int64
	if in.SizeBytes > 0 {
		size = &in.SizeBytes
	}
	var out SoftwareVersion
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		it, err := manageable(ctx, tx, access.ScopeFrom(ctx), itemID)
		if err != nil {
			return err
		}
		spec, err := checkVersion(it, in.Version, in.FileType, in.SilentArgs, in.ReleaseNotes, in.SupportedOS)
		if err != nil {
			return err
		}
		out, err = s.insertVersion(ctx, tx, it, store.NewID(), spec, u.String(), "", sum, size)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("add software version: %w", err)
	}
	return out, nil
}

func validSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func versionTaken(v string) error {
	return apperr.ConflictCode("SOFTWARE_VERSION_EXISTS", "the item already has a version "+v)
}

// insertVersion records a version of an item and audits it.
func (s *Service) insertVersion(ctx context.Context, tx *sql.Tx, it SoftwareCatalogItem, id string, spec versionSpec, link, blobKey, sum string,
	size *int64) (SoftwareVersion, error) {
	now := s.clock.Now()
	_, err := tx.ExecContext(ctx, `INSERT INTO software_versions (id, catalog_id, partner_id, org_id, version, download_url, blob_key,
		sha256, size_bytes, file_type, silent_args, supported_os, release_notes, created_by, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
		id, it.ID, it.PartnerID, it.OrgID, spec.Version, store.NullIfEmpty(link), store.NullIfEmpty(blobKey), sum, size, spec.FileType,
		spec.SilentArgs, store.EncodeJSON(spec.SupportedOS), spec.Notes, access.ActorName(ctx), now)
	if store.IsUniqueViolation(err) {
		return SoftwareVersion{}, versionTaken(spec.Version)
	}
	if err != nil {
		return SoftwareVersion{}, fmt.Errorf("insert version: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE software_catalog SET updated_at = $1 WHERE id = $2`, now, it.ID); err != nil {
		return SoftwareVersion{}, fmt.Errorf("touch catalog item %s: %w", it.ID, err)
	}
	v, err := scanVersion(tx.QueryRowContext(ctx, `SELECT `+versionColumns+` FROM software_versions v WHERE v.id = $1`, id))
	if err != nil {
		return v, fmt.Errorf("read version %s: %w", id, err)
	}
	return v, audit.Record(ctx, tx, audit.Entry{Action: "software.version.create", ResourceType: "software_catalog", ResourceID: it.ID,
		ResourceName: it.Name, PartnerID: it.PartnerID, OrgID: store.Deref(it.OrgID),
		Details: map[string]any{"versionId": id, "version": v.Version, "fileType": v.FileType, "uploaded": v.Uploaded, "sha256": v.SHA256}})
}

// versionRow is a version with its blob key and its catalog item.
type versionRow struct {
	SoftwareVersion
	BlobKey string
	Item    SoftwareCatalogItem
}

// getVersion loads a version of a live catalog item in scope.
func getVersion(ctx context.Context, q store.Querier, scope access.Scope, id string) (versionRow, error) {
	type ref struct {
		itemID  string
		blobKey sql.NullString
	}
	var r versionRow
	var a store.Args
	found, err := store.ByID(ctx, q, "version", `SELECT catalog_id, blob_key FROM software_versions`, "id", id, &a, nil,
		func(sc store.Scanner) (f ref, err error) {
			err = sc.Scan(&f.itemID, &f.blobKey)
			return f, err
		})
	if err != nil {
		return r, err
	}
	if r.Item, err = getItem(ctx, q, scope, found.itemID); err != nil {
		if apperr.IsCode(err, apperr.CodeNotFound) {
			return r, apperr.NotFound("version")
		}
		return r, err
	}
	r.BlobKey = found.blobKey.String
	r.SoftwareVersion, err = scanVersion(q.QueryRowContext(ctx, `SELECT `+versionColumns+` FROM software_versions v WHERE v.id = $1`, id))
	if err != nil {
		return r, fmt.Errorf("load version %s: %w", id, err)
	}
	return r, nil
}
