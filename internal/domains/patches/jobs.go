package patches

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
	"gale/internal/wire/pkgversion"
)

// Scan queues a patch_scan on each Linux device named (1 to 10,000): the job, its device rows
// and the commands in one transaction, the commands on their way once it committed. Devices
// that get no command (another OS, decommissioned, not found) are reported in skipped.
func (s *Service) Scan(ctx context.Context, in PatchScanRequest) (PatchJobStart, error) {
	if len(in.DeviceIDs) == 0 || len(in.DeviceIDs) > MaxScanDevices {
		return PatchJobStart{}, apperr.Invalid("deviceIds", "name 1 to 10000 devices")
	}
	ids := unique(in.DeviceIDs)
	switch in.Source {
	case "", SourceLinux:
	case SourceThirdParty:
		return s.scanThirdParty(ctx, ids)
	default:
		return PatchJobStart{}, apperr.BadRequest("SCAN_SOURCE_UNSUPPORTED", "scans cover the linux and third_party sources only")
	}
	var out PatchJobStart
	var cmds []devices.DeviceCommand
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		partnerID, orgID, err := jobPlace(ctx, tx, ids)
		if err != nil {
			return err
		}
		job, err := s.insertJob(ctx, tx, JobScan, partnerID, orgID, "", "")
		if err != nil {
			return err
		}
		payload := json.RawMessage(store.EncodeJSON(agentproto.PatchScan{Refresh: in.Refresh}))
		var rows []jobDeviceRow
		out.Skipped = []PatchSkippedDevice{}
		for first := 0; first < len(ids); first += bulkChunk {
			res, err := s.devices.SendBulkIn(ctx, tx, devices.BulkInput{DeviceIDs: ids[first:min(first+bulkChunk, len(ids))],
				OnlyOS: []string{agentproto.OSLinux}, Audited: true,
				CommandInput: devices.CommandInput{Type: agentproto.CommandPatchScan, Payload: payload}})
			if err != nil {
				return err
			}
			for _, c := range res.Commands {
				rows = append(rows, jobDeviceRow{deviceID: c.DeviceID, orgID: c.OrgID, commandID: c.ID, status: JobDeviceQueued})
			}
			out.Skipped = append(out.Skipped, skippedOf(res)...)
			cmds = append(cmds, res.Commands...)
		}
		if out.PatchJob, err = s.recordJob(ctx, tx, job, partnerID, rows, len(out.Skipped)); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "patch.scan", ResourceType: "patch_job", ResourceID: job.ID,
			PartnerID: partnerID, OrgID: orgID, Details: map[string]any{"devices": len(rows), "skipped": len(out.Skipped), "refresh": in.Refresh}})
	})
	if err != nil {
		return PatchJobStart{}, fmt.Errorf("start a patch scan: %w", err)
	}
	s.devices.Dispatch(ctx, cmds)
	return out, nil
}

func unique(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

func skippedOf(res devices.BulkResult) []PatchSkippedDevice {
	out := make([]PatchSkippedDevice, 0, len(res.Skipped)+len(res.Failed))
	for _, it := range append(res.Skipped, res.Failed...) {
		reason := it.Reason
		if it.Code == apperr.CodeNotFound {
			reason = "no such device, or decommissioned"
		}
		out = append(out, PatchSkippedDevice{DeviceID: it.DeviceID, Code: it.Code, Reason: reason})
	}
	return out
}

// jobPlace is the partner (and, for an organization's caller, the organization) a job
// belongs to: the caller's. A system caller's job belongs to the partner of the devices it
// names, which must be one.
func jobPlace(ctx context.Context, q store.Querier, deviceIDs []string) (partnerID, orgID string, err error) {
	scope := access.ScopeFrom(ctx)
	switch scope.Level {
	case access.LevelOrganization:
		return scope.PartnerID, scope.OrgID, nil
	case access.LevelPartner:
		return scope.PartnerID, "", nil
	case access.LevelSystem:
		valid := make([]string, 0, len(deviceIDs))
		for _, id := range deviceIDs {
			if store.ValidID(id) {
				valid = append(valid, id)
			}
		}
		partners := map[string]bool{}
		for first := 0; first < len(valid); first += rowsPerStatement {
			owners, err := devices.Owners(ctx, q, valid[first:min(first+rowsPerStatement, len(valid))])
			if err != nil {
				return "", "", err
			}
			for _, o := range owners {
				partners[o.PartnerID] = true
				partnerID = o.PartnerID
			}
		}
		if len(partners) > 1 {
			return "", "", apperr.Invalid("deviceIds", "a job's devices belong to one partner")
		}
		if partnerID == "" {
			return "", "", apperr.Invalid("deviceIds", "no such device")
		}
		return partnerID, "", nil
	}
	return "", "", apperr.Forbidden("no partner to work for")
}

type jobDeviceRow struct {
	deviceID, orgID, commandID, status string
	packages                           []PatchPackageVersion
	errMsg                             string
}

func (s *Service) insertJob(ctx context.Context, tx *sql.Tx, kind, partnerID, orgID, patchID, reboot string) (PatchJob, error) {
	by, email := actor(ctx)
	j := PatchJob{ID: store.NewID(), Kind: kind, Status: JobRunning, CreatedAt: s.clock.Now()}
	if orgID != "" {
		j.OrgID = &orgID
	}
	if patchID != "" {
		j.PatchID = &patchID
	}
	if e, ok := email.(string); ok {
		j.CreatedBy = &e
	}
	if reboot == "" {
		reboot = RebootNever
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO patch_jobs (id, partner_id, org_id, kind, status, patch_id, created_by, created_by_email,
		created_at, reboot_behavior) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, j.ID, partnerID, store.NullIfEmpty(orgID), kind,
		JobRunning, store.NullIfEmpty(patchID), by, email, j.CreatedAt, reboot)
	if err != nil {
		return j, fmt.Errorf("insert patch job: %w", err)
	}
	return j, nil
}

// recordJob writes a job's device rows and its skipped count, finishes a job left without
// work, and returns it with its totals.
func (s *Service) recordJob(ctx context.Context, tx *sql.Tx, j PatchJob, partnerID string, rows []jobDeviceRow, skipped int) (PatchJob, error) {
	now := s.clock.Now()
	err := insertRows(ctx, tx, `INSERT INTO patch_job_devices (job_id, device_id, partner_id, org_id, command_id, status, packages, error,
		updated_at)`, "", rows, func(a *store.Args, r jobDeviceRow) []string {
		var pkgs any
		if r.packages != nil {
			pkgs = store.EncodeJSON(r.packages)
		}
		return []string{a.Add(j.ID), a.Add(r.deviceID), a.Add(partnerID), a.Add(r.orgID), a.Add(store.NullIfEmpty(r.commandID)),
			a.Add(r.status), a.Add(pkgs), a.Add(store.NullIfEmpty(r.errMsg)), a.Add(now)}
	})
	if err != nil {
		return j, fmt.Errorf("insert patch job devices: %w", err)
	}
	if skipped > 0 {
		if _, err := tx.ExecContext(ctx, `UPDATE patch_jobs SET skipped = $1 WHERE id = $2`, skipped, j.ID); err != nil {
			return j, fmt.Errorf("record the skipped devices of patch job %s: %w", j.ID, err)
		}
	}
	if err := s.finishJob(ctx, tx, j.ID); err != nil {
		return j, err
	}
	return getJob(ctx, tx, access.Scope{Level: access.LevelSystem}, j.ID, j.Commands)
}

// deviceWork is what an install or rollback does on one device.
type deviceWork struct {
	orgID    string
	packages []PatchPackageVersion
}

// InstallIn records, in the caller's transaction, an install job putting the approved
// pending (or failed) patches among patchIDs on each device named (1 to 500 each): one
// patch_install command per device, with the newest approved version of each package.
// Devices with nothing to install are skipped; devices a maintenance window holds get their rows waiting and
// no command (ReleaseWaiting queues them later). Once the transaction has committed, the
// caller hands job.Commands to devices' Dispatch.
func (s *Service) InstallIn(ctx context.Context, tx *sql.Tx, deviceIDs, patchIDs []string, opts InstallOptions) (PatchJob, error) {
	if len(deviceIDs) == 0 || len(deviceIDs) > MaxInstallDevices {
		return PatchJob{}, apperr.Invalid("deviceIds", "name 1 to 500 devices")
	}
	if len(patchIDs) == 0 || len(patchIDs) > MaxBulkApprove {
		return PatchJob{}, apperr.Invalid("patchIds", "name 1 to 500 patches")
	}
	scope := access.ScopeFrom(ctx)
	deviceIDs, patchIDs = validIDs(unique(deviceIDs)), validIDs(unique(patchIDs))
	work := map[string]*deviceWork{}
	var thirdParty []thirdPartyItem
	orgOf := map[string]string{}
	if len(deviceIDs) > 0 && len(patchIDs) > 0 {
		type open struct{ dev, org, patch, name, ext, version, source string }
		var a store.Args
		list, err := store.QueryAll(ctx, tx, `SELECT pd.device_id, pd.org_id, pd.patch_id, p.package_id, p.external_id, pd.available_version,
			p.source FROM patch_devices pd JOIN patches p ON p.id = pd.patch_id
			WHERE pd.device_id IN `+a.In(deviceIDs)+` AND pd.patch_id IN `+a.In(patchIDs)+` AND pd.status IN (`+
			a.Add(DeviceStatePending)+`, `+a.Add(DeviceStateFailed)+`) AND `+orgRows(scope, &a, "pd.org_id", "pd.partner_id")+
			` AND `+effectiveApproval(&a, "pd.patch_id", "pd.org_id", s.clock.Now())+` = `+a.Add(ApprovalApproved)+
			` ORDER BY pd.device_id, p.package_id`, a.Values(), func(sc store.Scanner) (o open, err error) {
			err = sc.Scan(&o.dev, &o.org, &o.patch, &o.name, &o.ext, &o.version, &o.source)
			return o, err
		})
		if err != nil {
			return PatchJob{}, fmt.Errorf("read the patches to install: %w", err)
		}
		for _, o := range list {
			if o.source == SourceThirdParty {
				thirdParty = append(thirdParty, thirdPartyItem{deviceID: o.dev, patchID: o.patch, entryID: o.name, version: o.version})
				orgOf[o.dev] = o.org
				continue
			}
			w := work[o.dev]
			if w == nil {
				w = &deviceWork{orgID: o.org}
				work[o.dev] = w
			}
			w.packages = newest(w.packages, PatchPackageVersion{PatchID: o.patch, Name: o.name, Version: o.version},
				strings.SplitN(o.ext, ":", 2)[0])
		}
	}
	installers, unavailable, err := s.thirdPartyInstallers(ctx, tx, thirdParty)
	if err != nil {
		return PatchJob{}, err
	}
	for dev, pkgs := range installers {
		w := work[dev]
		if w == nil {
			w = &deviceWork{orgID: orgOf[dev]}
			work[dev] = w
		}
		for _, p := range pkgs {
			// The package manager's own update of the same package goes first.
			if !slices.ContainsFunc(w.packages, func(have PatchPackageVersion) bool { return have.Name == p.Name }) {
				w.packages = append(w.packages, p)
			}
		}
	}
	var skipped []PatchSkippedDevice
	for _, id := range deviceIDs {
		if work[id] == nil {
			reason := "no approved pending patch among those named (or no such device)"
			if why, ok := unavailable[id]; ok {
				reason = "no approved pending patch can be installed: " + why
			}
			skipped = append(skipped, PatchSkippedDevice{DeviceID: id, Code: "NOTHING_TO_INSTALL", Reason: reason})
		}
	}
	partnerID, orgID, err := jobPlace(ctx, tx, deviceIDs)
	if err != nil {
		return PatchJob{}, err
	}
	job, err := s.startPackageJob(ctx, tx, JobInstall, partnerID, orgID, "", work, false, opts, skipped)
	return job.PatchJob, err
}

// ApproveAndInstall approves each patch of approve (patch → organizations) where it still
// awaits a decision (a declined patch stays declined, and its devices are then skipped), and
// starts the install job of InstallIn, in one transaction; the commands go out once it has
// committed.
func (s *Service) ApproveAndInstall(ctx context.Context, deviceIDs, patchIDs []string, approve map[string][]string, note string,
	opts InstallOptions) (PatchJob, error) {
	var job PatchJob
	err := s.db.Write(ctx, func(tx *sql.Tx) (err error) {
		for patchID, orgs := range approve {
			for _, org := range orgs {
				if _, err := s.decide(ctx, tx, patchID, ApprovalApproved, note, org, nil); err != nil && !apperr.IsCode(err, "APPROVAL_CONFLICT") {
					return err
				}
			}
		}
		job, err = s.InstallIn(ctx, tx, deviceIDs, patchIDs, opts)
		return err
	})
	if err != nil {
		return PatchJob{}, fmt.Errorf("approve and install patches: %w", err)
	}
	s.devices.Dispatch(ctx, job.Commands)
	return job, nil
}

// Install is InstallIn in a transaction of its own, with the commands dispatched.
func (s *Service) Install(ctx context.Context, deviceIDs, patchIDs []string, opts InstallOptions) (PatchJob, error) {
	var job PatchJob
	err := s.db.Write(ctx, func(tx *sql.Tx) (err error) {
		job, err = s.InstallIn(ctx, tx, deviceIDs, patchIDs, opts)
		return err
	})
	if err != nil {
		return PatchJob{}, fmt.Errorf("start a patch install: %w", err)
	}
	s.devices.Dispatch(ctx, job.Commands)
	return job, nil
}

func validIDs(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if store.ValidID(id) {
			out = append(out, id)
		}
	}
	return out
}

// newest adds p to pkgs, keeping one version per package: the newest by the package
// manager's order.
func newest(pkgs []PatchPackageVersion, p PatchPackageVersion, manager string) []PatchPackageVersion {
	for i, have := range pkgs {
		if have.Name != p.Name {
			continue
		}
		if c, err := pkgversion.Compare(manager, p.Version, have.Version); err == nil && c > 0 {
			pkgs[i] = p
		}
		return pkgs
	}
	return append(pkgs, p)
}

// effectiveApproval is the expression of the decision that applies to a patch on a device of
// an organization: the organization's own, else the partner's, else pending. A deferral
// that has passed (by now) is pending again.
func effectiveApproval(a *store.Args, patchCol, orgCol string, now time.Time) string {
	return `COALESCE((SELECT CASE WHEN a.status = 'deferred' AND a.deferred_until <= ` + a.Add(now) + ` THEN 'pending' ELSE a.status END
		FROM patch_approvals a WHERE a.patch_id = ` + patchCol + ` AND a.org_key IN (CAST(` + orgCol + ` AS TEXT), '')
		ORDER BY a.org_key DESC LIMIT 1), 'pending')`
}

// startPackageJob records an install or rollback job: held devices wait, the others get
// their patch_install command.
func (s *Service) startPackageJob(ctx context.Context, tx *sql.Tx, kind, partnerID, orgID, patchID string, work map[string]*deviceWork,
	rollback bool, opts InstallOptions, skipped []PatchSkippedDevice) (PatchJobStart, error) {
	timeout := opts.TimeoutSeconds
	job, err := s.insertJob(ctx, tx, kind, partnerID, orgID, patchID, opts.RebootBehavior)
	if err != nil {
		return PatchJobStart{}, err
	}
	ids := make([]string, 0, len(work))
	for id := range work {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	held := map[string]bool{}
	if !opts.IgnoreHold {
		if held, err = s.held(ctx, tx, ids); err != nil {
			return PatchJobStart{}, fmt.Errorf("ask which devices are held: %w", err)
		}
	}
	var rows []jobDeviceRow
	for _, id := range ids {
		w := work[id]
		row := jobDeviceRow{deviceID: id, orgID: w.orgID, packages: w.packages, status: JobDeviceWaiting}
		if !held[id] {
			c, skip, err := s.sendInstall(ctx, tx, id, w.packages, rollback, timeout)
			if err != nil {
				return PatchJobStart{}, err
			}
			if skip != nil {
				skipped = append(skipped, *skip)
				continue
			}
			row.commandID, row.status = c.ID, JobDeviceQueued
			job.Commands = append(job.Commands, c)
		}
		rows = append(rows, row)
	}
	cmds := job.Commands
	job, err = s.recordJob(ctx, tx, job, partnerID, rows, len(skipped))
	if err != nil {
		return PatchJobStart{}, err
	}
	job.Commands = cmds
	if skipped == nil {
		skipped = []PatchSkippedDevice{}
	}
	err = audit.Record(ctx, tx, audit.Entry{Action: "patch." + kind, ResourceType: "patch_job", ResourceID: job.ID, PartnerID: partnerID,
		OrgID: orgID, Details: map[string]any{"devices": len(rows), "held": len(rows) - len(cmds), "skipped": len(skipped), "patchId": patchID}})
	return PatchJobStart{PatchJob: job, Skipped: skipped}, err
}

// sendInstall records the patch_install command of one device.
func (s *Service) sendInstall(ctx context.Context, tx *sql.Tx, deviceID string, pkgs []PatchPackageVersion, rollback bool,
	timeout int) (devices.DeviceCommand, *PatchSkippedDevice, error) {
	p := agentproto.PatchInstall{Rollback: rollback}
	for _, pv := range pkgs {
		if in := pv.Installer; in != nil {
			p.Installers = append(p.Installers, agentproto.SoftwareInstall{URL: in.URL, SHA256: in.SHA256, FileType: in.FileType,
				Name: pv.Name, Version: pv.Version})
			continue
		}
		p.Packages = append(p.Packages, agentproto.PackageVersion{Name: pv.Name, Version: pv.Version})
	}
	res, err := s.devices.SendBulkIn(ctx, tx, devices.BulkInput{DeviceIDs: []string{deviceID}, OnlyOS: []string{agentproto.OSLinux},
		Audited: true, CommandInput: devices.CommandInput{Type: agentproto.CommandPatchInstall, Payload: json.RawMessage(store.EncodeJSON(p)),
			TimeoutSeconds: timeout}})
	if err != nil {
		return devices.DeviceCommand{}, nil, err
	}
	if len(res.Commands) == 1 {
		return res.Commands[0], nil, nil
	}
	sk := skippedOf(res)
	if len(sk) == 0 {
		return devices.DeviceCommand{}, nil, errors.New("the device got no command and no reason")
	}
	return devices.DeviceCommand{}, &sk[0], nil
}

// Rollback takes a patch back on devices (1 to 500) where it is installed: each gets a
// patch_install with Rollback of the version the install replaced. Devices where it is not
// installed, or without a recorded previous version, are skipped.
func (s *Service) Rollback(ctx context.Context, patchID string, in PatchRollbackRequest) (PatchJobStart, error) {
	if len(in.DeviceIDs) == 0 || len(in.DeviceIDs) > MaxInstallDevices {
		return PatchJobStart{}, apperr.Invalid("deviceIds", "name 1 to 500 devices")
	}
	scope := access.ScopeFrom(ctx)
	var out PatchJobStart
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		p, err := s.getPatch(ctx, tx, scope, patchID, "")
		if err != nil {
			return err
		}
		if p.Source == SourceThirdParty {
			return apperr.ConflictCode("ROLLBACK_UNSUPPORTED", "a third-party patch cannot be rolled back: install the older version from the software catalog")
		}
		ids := unique(in.DeviceIDs)
		type row struct{ id, org, status, previous string }
		found := map[string]row{}
		if v := validIDs(ids); len(v) > 0 {
			var a store.Args
			list, err := store.QueryAll(ctx, tx, `SELECT pd.device_id, pd.org_id, pd.status, pd.previous_version FROM patch_devices pd
				WHERE pd.patch_id = `+a.Add(p.ID)+` AND pd.device_id IN `+a.In(v)+` AND `+orgRows(scope, &a, "pd.org_id", "pd.partner_id"),
				a.Values(), func(sc store.Scanner) (r row, err error) {
					err = sc.Scan(&r.id, &r.org, &r.status, &r.previous)
					return r, err
				})
			if err != nil {
				return fmt.Errorf("read the devices of patch %s: %w", p.ID, err)
			}
			for _, r := range list {
				found[r.id] = r
			}
		}
		work := map[string]*deviceWork{}
		skipped := []PatchSkippedDevice{}
		for _, id := range ids {
			r, ok := found[id]
			switch {
			case !ok:
				skipped = append(skipped, PatchSkippedDevice{DeviceID: id, Code: apperr.CodeNotFound, Reason: "the patch was never offered to this device (or no such device)"})
			case r.status != DeviceStateInstalled:
				skipped = append(skipped, PatchSkippedDevice{DeviceID: id, Code: "NOT_INSTALLED", Reason: "the patch is " + r.status + " on this device, not installed"})
			case r.previous == "":
				skipped = append(skipped, PatchSkippedDevice{DeviceID: id, Code: "NO_PREVIOUS_VERSION", Reason: "no previous version was recorded when the patch was installed"})
			default:
				work[id] = &deviceWork{orgID: r.org, packages: []PatchPackageVersion{{PatchID: p.ID, Name: p.PackageID, Version: r.previous}}}
			}
		}
		orgID := ""
		if scope.Level == access.LevelOrganization {
			orgID = scope.OrgID
		}
		out, err = s.startPackageJob(ctx, tx, JobRollback, p.PartnerID, orgID, p.ID, work, true, InstallOptions{}, skipped)
		return err
	})
	if err != nil {
		return PatchJobStart{}, fmt.Errorf("start a patch rollback: %w", err)
	}
	s.devices.Dispatch(ctx, out.Commands)
	return out, nil
}

// ReleaseWaiting queues the waiting work of install and rollback jobs whose devices no
// maintenance window keeps any more, up to 500 devices a call.
func (s *Service) ReleaseWaiting(ctx context.Context) error {
	type waiting struct {
		jobID, deviceID, partnerID, orgID, kind string
		jobOrg                                  sql.NullString
		packages                                []PatchPackageVersion
	}
	list, err := store.QueryAll(ctx, s.db, `SELECT jd.job_id, jd.device_id, jd.partner_id, jd.org_id, j.kind, j.org_id, jd.packages
		FROM patch_job_devices jd JOIN patch_jobs j ON j.id = jd.job_id WHERE jd.status = $1 ORDER BY jd.job_id LIMIT 500`,
		[]any{JobDeviceWaiting}, func(sc store.Scanner) (w waiting, err error) {
			var raw sql.NullString
			if err := sc.Scan(&w.jobID, &w.deviceID, &w.partnerID, &w.orgID, &w.kind, &w.jobOrg, &raw); err != nil {
				return w, err
			}
			if raw.Valid {
				if err := json.Unmarshal([]byte(raw.String), &w.packages); err != nil {
					return w, fmt.Errorf("read waiting packages of job %s: %w", w.jobID, err)
				}
			}
			return w, nil
		})
	if err != nil {
		return fmt.Errorf("read waiting patch work: %w", err)
	}
	if len(list) == 0 {
		return nil
	}
	var cmds []devices.DeviceCommand
	var touched []string
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		ids := make([]string, len(list))
		for i, w := range list {
			ids[i] = w.deviceID
		}
		held, err := s.held(ctx, tx, unique(ids))
		if err != nil {
			return fmt.Errorf("ask which devices are held: %w", err)
		}
		now := s.clock.Now()
		for _, w := range list {
			if held[w.deviceID] {
				continue
			}
			// The job's own reach: its partner, or the organization that started it.
			scope := access.Scope{Level: access.LevelPartner, PartnerID: w.partnerID}
			if w.jobOrg.Valid {
				scope = access.Scope{Level: access.LevelOrganization, PartnerID: w.partnerID, OrgID: w.jobOrg.String}
			}
			actx := access.WithPrincipal(ctx, &access.Principal{Kind: access.ActorSystem, ID: w.jobID, Email: "patch-job:" + w.jobID,
				Name: "patch job", Scope: scope})
			c, skip, err := s.sendInstall(actx, tx, w.deviceID, w.packages, w.kind == JobRollback, 0)
			if err != nil {
				return err
			}
			status, cmdID, errMsg := JobDeviceQueued, any(nil), any(nil)
			if skip != nil {
				status, errMsg = JobDeviceFailed, skip.Reason
			} else {
				cmdID = c.ID
				cmds = append(cmds, c)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE patch_job_devices SET status = $1, command_id = $2, error = $3, updated_at = $4
				WHERE job_id = $5 AND device_id = $6 AND status = $7`, status, cmdID, errMsg, now, w.jobID, w.deviceID, JobDeviceWaiting); err != nil {
				return fmt.Errorf("release waiting work of job %s: %w", w.jobID, err)
			}
			touched = append(touched, w.jobID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("release waiting patch work: %w", err)
	}
	s.devices.Dispatch(ctx, cmds)
	return s.settleJobs(ctx, unique(touched))
}

// SweepJobs fails the job work whose command ended without a result recorded here (timed
// out, cancelled), so its job can finish, and finishes the jobs whose work all ended on a node
// that stopped before it could (see settleJobs).
func (s *Service) SweepJobs(ctx context.Context) error {
	unsettled, err := store.QueryStrings(ctx, s.db, `SELECT j.id FROM patch_jobs j WHERE j.status = $1 AND NOT EXISTS
		(SELECT 1 FROM patch_job_devices jd WHERE jd.job_id = j.id AND jd.status IN ('waiting', 'queued'))`, JobRunning)
	if err != nil {
		return fmt.Errorf("read the patch jobs left without open work: %w", err)
	}
	if err := s.settleJobs(ctx, unsettled); err != nil {
		return err
	}
	type endedCommand struct{ id, status string }
	var a store.Args
	ended, err := store.QueryAll(ctx, s.db, `SELECT jd.command_id, c.status FROM patch_job_devices jd`+devices.CommandJoin("jd.command_id")+
		` WHERE jd.status = `+a.Add(JobDeviceQueued)+` AND c.status IN (`+a.Add(devices.CommandTimedOut)+`, `+a.Add(devices.CommandCancelled)+
		`, `+a.Add(devices.CommandFailed)+`, `+a.Add(devices.CommandCompleted)+`) LIMIT 1000`, a.Values(),
		func(sc store.Scanner) (c endedCommand, err error) {
			err = sc.Scan(&c.id, &c.status)
			return c, err
		})
	if err != nil {
		return fmt.Errorf("read ended patch commands: %w", err)
	}
	if len(ended) == 0 {
		return nil
	}
	var touched []string
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		for _, c := range ended {
			jobID, err := s.deviceDone(ctx, tx, c.id, false, "the command ended ("+c.status+") without a result recorded")
			if err != nil {
				return err
			}
			if jobID != "" {
				touched = append(touched, jobID)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.settleJobs(ctx, unique(touched))
}

const jobColumns = `j.id, j.kind, j.status, j.patch_id, j.org_id, j.skipped, j.created_by_email, j.created_at, j.completed_at`

func scanJob(row store.Scanner) (PatchJob, error) {
	var j PatchJob
	var patch, org, by sql.NullString
	var done sql.NullTime
	err := row.Scan(&j.ID, &j.Kind, &j.Status, &patch, &org, &j.Totals.Skipped, &by, &j.CreatedAt, &done)
	j.PatchID, j.OrgID, j.CreatedBy, j.CompletedAt = store.StringPtr(patch), store.StringPtr(org), store.StringPtr(by), store.TimePtr(done)
	return j, err
}

// jobFilter keeps the jobs the scope may see: an organization's caller sees its
// organization's jobs, a partner's caller its partner's.
func jobFilter(scope access.Scope, a *store.Args) string {
	if scope.Level == access.LevelOrganization {
		return "j.org_id = " + a.Add(scope.OrgID) + " AND " + tenancy.LiveOrg("j.org_id")
	}
	return partnerRows(scope, a, "j.partner_id") + " AND " + tenancy.LiveOrg("j.org_id")
}

func getJob(ctx context.Context, q store.Querier, scope access.Scope, id string, cmds []devices.DeviceCommand) (PatchJob, error) {
	var a store.Args
	j, err := store.ByID(ctx, q, "patch job", `SELECT `+jobColumns+` FROM patch_jobs j`, "j.id", id, &a,
		[]string{jobFilter(scope, &a)}, scanJob)
	if err != nil {
		return j, err
	}
	skipped := j.Totals.Skipped
	if j.Totals, err = jobTotals(ctx, q, id); err != nil {
		return j, err
	}
	j.Totals.Skipped, j.Commands = skipped, cmds
	return j, nil
}

// JobFilter narrows a list of jobs.
type JobFilter struct{ Kind, Status string }

// ListJobs lists the jobs in scope, newest first, each with its totals.
func (s *Service) ListJobs(ctx context.Context, f JobFilter, page store.Page) ([]PatchJob, string, *int, error) {
	var a store.Args
	conds := []string{jobFilter(access.ScopeFrom(ctx), &a)}
	if f.Kind != "" {
		conds = append(conds, "j.kind = "+a.Add(f.Kind))
	}
	if f.Status != "" {
		conds = append(conds, "j.status = "+a.Add(f.Status))
	}
	list, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: jobColumns, From: " FROM patch_jobs j", Conds: conds, Args: &a,
		SortKey: "j.id", SortID: "j.id", Desc: true}, page, scanJob, func(j PatchJob) (string, string) { return j.ID, j.ID })
	if err != nil {
		return nil, "", nil, fmt.Errorf("list patch jobs: %w", err)
	}
	ids := make([]string, len(list))
	for i, j := range list {
		ids[i] = j.ID
	}
	totals, err := totalsOf(ctx, s.db, ids)
	if err != nil {
		return nil, "", nil, err
	}
	for i := range list {
		t := totals[list[i].ID]
		t.Skipped = list[i].Totals.Skipped
		list[i].Totals = t
	}
	return list, next, total, nil
}

// GetJob returns a job in scope with its devices (those in the caller's scope).
func (s *Service) GetJob(ctx context.Context, id string) (PatchJobDetail, error) {
	scope := access.ScopeFrom(ctx)
	j, err := getJob(ctx, s.db, scope, id, nil)
	if err != nil {
		return PatchJobDetail{}, err
	}
	var a store.Args
	list, err := store.QueryAll(ctx, s.db, `SELECT jd.device_id, jd.org_id, jd.command_id, `+jobDeviceStatus+`, jd.packages, jd.error,
		jd.updated_at FROM patch_job_devices jd`+jobDeviceCommand+` WHERE jd.job_id = `+a.Add(id)+` AND `+scope.OrgFilter(&a, "jd.org_id", "jd.partner_id")+
		` ORDER BY jd.device_id`, a.Values(), func(sc store.Scanner) (d PatchJobDevice, err error) {
		var cmd, pkgs, errMsg sql.NullString
		if err := sc.Scan(&d.DeviceID, &d.OrgID, &cmd, &d.Status, &pkgs, &errMsg, &d.UpdatedAt); err != nil {
			return d, err
		}
		d.CommandID, d.Error = store.StringPtr(cmd), store.StringPtr(errMsg)
		if pkgs.Valid && pkgs.String != "" {
			if err := json.Unmarshal([]byte(pkgs.String), &d.Packages); err != nil {
				return d, fmt.Errorf("read the packages of job %s: %w", id, err)
			}
		}
		return d, nil
	})
	if err != nil {
		return PatchJobDetail{}, fmt.Errorf("read the devices of job %s: %w", id, err)
	}
	return PatchJobDetail{PatchJob: j, Devices: list}, nil
}
