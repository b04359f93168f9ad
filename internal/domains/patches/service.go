package patches

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"gale/internal/domains/devices"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/tenancy"
	"gale/internal/domains/thirdparty"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/blob"
	"gale/internal/platform/clock"
	"gale/internal/platform/jobs"
	"gale/internal/platform/jsonenc"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Service keeps patches, approvals, jobs and reports.
type Service struct {
	db          *store.DB
	logger      *slog.Logger
	clock       clock.Clock
	devices     *devices.Service
	tenancy     *tenancy.Service
	blobs       blob.Store
	maintenance *maintenance.Service
	// hold says which devices a maintenance window keeps from package changes now; nil: none.
	hold    func(ctx context.Context, tx *sql.Tx, deviceIDs []string) (map[string]bool, error)
	catalog *thirdparty.Service
	// reports is this node's builder of queued reports, woken when one is queued here.
	reports *jobs.Loop
}

// Deps is what the patches service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// Clock is the time patch policies run on; nil: the system clock.
	Clock   clock.Clock
	Devices *devices.Service
	Blobs   blob.Store
	// Maintenance says which devices may not have packages changed now (a window suppressing
	// patches): install and rollback work for them waits (JobDeviceWaiting) until
	// ReleaseWaiting finds them free. Nil holds nothing.
	Maintenance *maintenance.Service
	// Catalog is the third-party catalog that third-party patches come from; nil: none.
	Catalog *thirdparty.Service
	// Tenancy names the organizations and sites of compliance reports.
	Tenancy *tenancy.Service
}

// New returns the patches service.
func New(d Deps) *Service {
	s := &Service{db: d.DB, logger: d.Logger, clock: clock.Or(d.Clock), devices: d.Devices, tenancy: d.Tenancy, blobs: d.Blobs,
		maintenance: d.Maintenance, catalog: d.Catalog}
	if m := d.Maintenance; m != nil {
		s.hold = func(ctx context.Context, tx *sql.Tx, ids []string) (map[string]bool, error) {
			return m.Held(ctx, tx, maintenance.Patches, ids)
		}
	}
	s.reports = jobs.NewLoop("patch report", reportPoll, d.Logger, s.buildReports)
	return s
}

// held says which of the devices a maintenance window keeps from package changes now.
func (s *Service) held(ctx context.Context, tx *sql.Tx, ids []string) (map[string]bool, error) {
	if s.hold == nil || len(ids) == 0 {
		return map[string]bool{}, nil
	}
	return s.hold(ctx, tx, ids)
}

// commandKinds are the patch_scan and patch_install command kinds, whose results the patches
// domain records.
func (s *Service) commandKinds() []devices.CommandKind {
	return []devices.CommandKind{
		{Name: agentproto.CommandPatchScan, DefaultTimeout: 900, Validate: validateScan,
			OS: []string{agentproto.OSLinux}, OnResult: s.onScanResult, CancelSent: devices.CancelStops,
			PayloadDoc: "{refresh?}: list the updates the package manager offers; the result is recorded by the patches domain."},
		{Name: agentproto.CommandPatchInstall, DefaultTimeout: 1800, Validate: validateInstall,
			OS: []string{agentproto.OSLinux}, OnResult: s.onInstallResult,
			PayloadDoc: "{packages: [{name, version}] (1 to 500), rollback?}: install exactly these versions."},
	}
}

func validateScan(raw json.RawMessage, _ string) (any, error) {
	var p agentproto.PatchScan
	if len(raw) == 0 || string(raw) == "null" {
		return p, nil
	}
	if err := jsonenc.DecodeStrict(raw, &p); err != nil {
		return nil, apperr.Invalid("payload", "patch_scan takes {refresh?}: "+err.Error())
	}
	return p, nil
}

// maxInstallers bounds the catalog installers of one patch_install.
const maxInstallers = 50

func validateInstall(raw json.RawMessage, _ string) (any, error) {
	var p agentproto.PatchInstall
	if err := jsonenc.DecodeStrictRequired(raw, &p); err != nil {
		return nil, apperr.Invalid("payload", "patch_install takes {packages: [{name, version}], installers?: [...], rollback?}: "+err.Error())
	}
	if n := len(p.Packages) + len(p.Installers); n == 0 || len(p.Packages) > 500 || len(p.Installers) > maxInstallers {
		return nil, apperr.Invalid("payload.packages", fmt.Sprintf("name 1 to 500 packages and at most %d installers", maxInstallers))
	}
	for i, in := range p.Installers {
		if strings.TrimSpace(in.Name) == "" || strings.TrimSpace(in.Version) == "" || in.URL == "" || in.SHA256 == "" || in.FileType == "" {
			return nil, apperr.Invalid(fmt.Sprintf("payload.installers[%d]", i), "an installer needs a url, sha256, fileType, name and version")
		}
	}
	for i, pv := range p.Packages {
		if strings.TrimSpace(pv.Name) == "" || strings.TrimSpace(pv.Version) == "" {
			return nil, apperr.Invalid(fmt.Sprintf("payload.packages[%d]", i), "a package needs a name and a version")
		}
	}
	return p, nil
}

// partnerRows keeps the partner-scoped rows (column col) the scope may see: a partner's and
// its organizations' callers see their partner's, a system caller every live partner's.
func partnerRows(scope access.Scope, a *store.Args, col string) string {
	switch scope.Level {
	case access.LevelSystem:
		return tenancy.LivePartner(col)
	case access.LevelPartner, access.LevelOrganization:
		if scope.PartnerID == "" {
			return "FALSE"
		}
		return col + " = " + a.Add(scope.PartnerID)
	}
	return "FALSE"
}

// orgRows keeps rows of organizations in scope (alias columns), live organizations only.
func orgRows(scope access.Scope, a *store.Args, orgCol, partnerCol string) string {
	return scope.OrgFilter(a, orgCol, partnerCol) + " AND " + tenancy.LiveOrg(orgCol)
}

// actor returns who acts: the principal's ID and e-mail, nil without one.
func actor(ctx context.Context) (id, email any) {
	if p := access.PrincipalFrom(ctx); p != nil {
		return p.ID, p.Email
	}
	return nil, nil
}

// insertRows runs multi-row INSERTs of items: head is the statement up to VALUES, tail what
// follows the rows (ON CONFLICT ...), row renders one row's placeholders. A statement takes
// up to maxParams placeholders: SQLite finds a numbered placeholder by a linear search, so
// one statement of thousands costs more than several smaller ones.
func insertRows[T any](ctx context.Context, tx *sql.Tx, head, tail string, items []T, row func(a *store.Args, it T) []string) error {
	var a store.Args
	rows := make([]string, 0, rowsPerStatement)
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		_, err := tx.ExecContext(ctx, head+" VALUES "+strings.Join(rows, ", ")+tail, a.Values()...)
		a, rows = store.Args{}, rows[:0]
		return err
	}
	for _, it := range items {
		rows = append(rows, "("+strings.Join(row(&a, it), ", ")+")")
		if len(a.Values()) >= maxParams || len(rows) == rowsPerStatement {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}
