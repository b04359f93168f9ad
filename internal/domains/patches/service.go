package patches

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/domains/thirdparty"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/blob"
	"gale/internal/platform/jobs"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Service keeps patches, approvals, jobs and reports.
type Service struct {
	db      *store.DB
	logger  *slog.Logger
	devices *devices.Service
	blobs   blob.Store
	// Hold, when set, says which devices may not have packages changed now (a maintenance
	// window's rule): install and rollback work for them waits (JobDeviceWaiting) until
	// ReleaseWaiting finds them free. Nil holds nothing.
	Hold func(ctx context.Context, tx *sql.Tx, deviceIDs []string) (map[string]bool, error)
	// Catalog is the third-party catalog that third-party patches come from; nil: none.
	Catalog *thirdparty.Service
	// reports is this node's builder of queued reports, woken when one is queued here.
	reports *jobs.Loop
}

// New returns the patches service and registers its command kinds with dev.
func New(db *store.DB, logger *slog.Logger, dev *devices.Service, blobs blob.Store) *Service {
	s := &Service{db: db, logger: logger, devices: dev, blobs: blobs}
	s.reports = jobs.NewLoop("patch report", reportPoll, logger, s.buildReports)
	dev.RegisterCommandKind(devices.CommandKind{Name: agentproto.CommandPatchScan, DefaultTimeout: 900, Validate: validateScan,
		OS: []string{agentproto.OSLinux}, OnResult: s.onScanResult, CancelSent: devices.CancelStops,
		PayloadDoc: "{refresh?}: list the updates the package manager offers; the result is recorded by the patches domain."})
	dev.RegisterCommandKind(devices.CommandKind{Name: agentproto.CommandPatchInstall, DefaultTimeout: 1800, Validate: validateInstall,
		OS: []string{agentproto.OSLinux}, OnResult: s.onInstallResult,
		PayloadDoc: "{packages: [{name, version}] (1 to 500), rollback?}: install exactly these versions."})
	return s
}

func validateScan(raw json.RawMessage, _ string) (any, error) {
	var p agentproto.PatchScan
	if len(raw) == 0 || string(raw) == "null" {
		return p, nil
	}
	if err := strictJSON(raw, &p); err != nil {
		return nil, apperr.Invalid("payload", "patch_scan takes {refresh?}: "+err.Error())
	}
	return p, nil
}

// maxInstallers bounds the catalog installers of one patch_install.
const maxInstallers = 50

func validateInstall(raw json.RawMessage, _ string) (any, error) {
	var p agentproto.PatchInstall
	if err := strictJSON(raw, &p); err != nil {
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

func strictJSON(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return fmt.Errorf("payload is missing")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
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

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
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
