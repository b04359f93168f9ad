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

	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// linuxExternalID names a Linux update: every version of a package on one architecture is a
// patch of its own.
func linuxExternalID(manager string, u agentproto.PackageUpdate) string {
	return manager + ":" + u.Name + ":" + u.Architecture + ":" + u.AvailableVersion
}

// linuxClass is the severity and category of a Linux update. The agent knows only whether an
// update comes from a security archive; without advisory data a security update is
// important and any other one a bugfix of unknown severity.
func linuxClass(u agentproto.PackageUpdate) (severity, category string) {
	if u.Security {
		return SeverityImportant, CategorySecurity
	}
	return SeverityUnknown, CategoryBugfix
}

// onScanResult records a patch_scan result in the result's transaction: the updates offered
// become the partner's patches and the device's pending ones, pending ones no longer offered
// are installed (the package moved on), and the device's summary and job follow.
func (s *Service) onScanResult(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error {
	if r.Status != agentproto.ResultCompleted {
		return s.resultDone(ctx, tx, r.CommandID, false, resultError(r, "the scan failed"))
	}
	var res agentproto.PatchScanResult
	if err := json.Unmarshal(r.Result, &res); err != nil || res.Manager == "" {
		return s.resultDone(ctx, tx, r.CommandID, false, "the scan's result could not be read")
	}
	owners, err := devices.Owners(ctx, tx, []string{deviceID})
	if err != nil {
		return fmt.Errorf("read the owner of device %s: %w", deviceID, err)
	}
	o, ok := owners[deviceID]
	if !ok {
		return nil
	}
	if err := s.IngestScan(ctx, tx, deviceID, o, res); err != nil {
		return err
	}
	return s.resultDone(ctx, tx, r.CommandID, true, "")
}

func resultError(r agentproto.CommandResult, fallback string) string {
	if e := strings.TrimSpace(r.Error); e != "" {
		return e
	}
	return fallback + " (" + r.Status + ")"
}

// scanRow is one update of a scan as the ingest statements read it.
type scanRow struct {
	ID          string `json:"id"`
	Ext         string `json:"ext"`
	Name        string `json:"name"`
	Title       string `json:"title"`
	Version     string `json:"version"`
	Severity    string `json:"sev"`
	Category    string `json:"cat"`
	Reboot      bool   `json:"reboot"`
	Description string `json:"descr"`
	Installed   string `json:"installed"`
}

// scanRowsFrom is the FROM clause reading the scan rows of the JSON array in $1 (alias j), and
// col the expression of one of their fields: the rows go to the database as one parameter,
// so a scan of thousands of updates is one statement per table.
func (s *Service) scanRowsFrom() (from string, col func(name string) string) {
	return s.db.JSONRows("$1", "j", `id uuid, ext text, name text, title text, version text, sev text, cat text,
			reboot boolean, descr text, installed text`)
}

// IngestScan stores what a scan of a device found, in the caller's transaction: the
// partner's patches and the device's pending ones (one statement each, whatever the number
// of updates), the ones no longer offered as installed, and the device's summary.
func (s *Service) IngestScan(ctx context.Context, tx *sql.Tx, deviceID string, o tenancy.Owner, res agentproto.PatchScanResult) error {
	now := s.clock.Now()
	byID := map[string]agentproto.PackageUpdate{}
	for _, u := range res.Updates {
		if u.Name == "" || u.AvailableVersion == "" {
			continue
		}
		byID[linuxExternalID(res.Manager, u)] = u
	}
	// One order for every writer, so two scans of one partner never wait on each other in a cycle.
	ext := make([]string, 0, len(byID))
	for id := range byID {
		ext = append(ext, id)
	}
	slices.Sort(ext)
	rows := make([]scanRow, len(ext))
	for i, id := range ext {
		u := byID[id]
		sev, cat := linuxClass(u)
		rows[i] = scanRow{ID: store.NewID(), Ext: id, Name: u.Name, Title: u.Name + " " + u.AvailableVersion, Version: u.AvailableVersion,
			Severity: sev, Category: cat, Reboot: u.RequiresReboot, Description: u.Summary, Installed: u.InstalledVersion}
	}
	if len(rows) > 0 {
		from, j := s.scanRowsFrom()
		data := store.EncodeJSON(rows)
		_, err := s.db.TxExecContext(ctx, tx, `INSERT INTO patches (id, partner_id, source, external_id, package_id, title, version, severity,
			category, requires_reboot, description, created_at, updated_at)
			SELECT `+j("id")+`, `+s.db.TypedParam(2, "UUID")+`, 'linux', `+j("ext")+`, `+j("name")+`, `+j("title")+`, `+j("version")+`, `+
			j("sev")+`, `+j("cat")+`, `+j("reboot")+`, `+j("descr")+`, `+s.db.TypedParam(3, "TIMESTAMPTZ")+`, `+s.db.TypedParam(3, "TIMESTAMPTZ")+`
			FROM `+from+` WHERE TRUE ON CONFLICT (partner_id, source, external_id) DO NOTHING`, data, o.PartnerID, now)
		if err != nil {
			return fmt.Errorf("record the patches of a scan: %w", err)
		}
		// CROSS JOIN keeps the scan rows the outer loop on SQLite, each finding its patch by the
		// unique index. A row that stays pending (or failed) at the same versions is not
		// rewritten: a scan that finds nothing new writes little.
		_, err = s.db.TxExecContext(ctx, tx, `INSERT INTO patch_devices (device_id, patch_id, partner_id, org_id, source, status, installed_version,
			available_version, offered_at, updated_at)
			SELECT `+s.db.TypedParam(5, "UUID")+`, p.id, p.partner_id, `+s.db.TypedParam(4, "UUID")+`, 'linux', 'pending', `+j("installed")+`, `+j("version")+`, `+
			s.db.TypedParam(3, "TIMESTAMPTZ")+`, `+s.db.TypedParam(3, "TIMESTAMPTZ")+`
			FROM `+from+` CROSS JOIN patches p
			WHERE p.partner_id = `+s.db.TypedParam(2, "UUID")+` AND p.source = 'linux' AND p.external_id = `+j("ext")+`
			ON CONFLICT (device_id, patch_id) DO UPDATE SET
			status = CASE WHEN patch_devices.status = 'failed' THEN 'failed' ELSE 'pending' END, org_id = excluded.org_id,
			installed_version = excluded.installed_version, available_version = excluded.available_version, updated_at = excluded.updated_at
			WHERE patch_devices.status NOT IN ('pending', 'failed') OR patch_devices.installed_version <> excluded.installed_version
			OR patch_devices.org_id <> excluded.org_id`, data, o.PartnerID, now, o.OrgID, deviceID)
		if err != nil {
			return fmt.Errorf("record the device patches of a scan: %w", err)
		}
	}
	if err := s.installGone(ctx, tx, deviceID, byID, now); err != nil {
		return err
	}
	return s.refreshSummary(ctx, tx, deviceID, o, res.RebootRequired, now)
}

// installGone marks installed the device's open Linux patches that the scan (whose updates
// are offered) no longer offers: the package moved on. Every scan result runs it, so it reads
// through the statement cache (TxQueryContext), which store.QueryAll, taking a Querier, cannot.
func (s *Service) installGone(ctx context.Context, tx *sql.Tx, deviceID string, offered map[string]agentproto.PackageUpdate, now time.Time) error {
	rows, err := s.db.TxQueryContext(ctx, tx, `SELECT pd.patch_id, p.external_id FROM patch_devices pd JOIN patches p ON p.id = pd.patch_id
		WHERE pd.device_id = $1 AND pd.source = 'linux' AND pd.status IN ('pending', 'failed', 'skipped')`, deviceID)
	if err != nil {
		return fmt.Errorf("read the open patches of device %s: %w", deviceID, err)
	}
	var gone []string
	for rows.Next() {
		var id, ext string
		if err := rows.Scan(&id, &ext); err != nil {
			rows.Close()
			return fmt.Errorf("read the open patches of device %s: %w", deviceID, err)
		}
		if _, ok := offered[ext]; !ok {
			gone = append(gone, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the open patches of device %s: %w", deviceID, err)
	}
	for first := 0; first < len(gone); first += maxParams {
		var a store.Args
		if _, err := tx.ExecContext(ctx, `UPDATE patch_devices SET status = `+a.Add(DeviceStateInstalled)+`, installed_at = `+a.Add(now)+
			`, updated_at = `+a.Add(now)+`, error = NULL WHERE device_id = `+a.Add(deviceID)+` AND patch_id IN `+
			a.In(gone[first:min(first+maxParams, len(gone))]), a.Values()...); err != nil {
			return fmt.Errorf("record the patches a scan no longer offers: %w", err)
		}
	}
	return nil
}

// refreshSummary recounts a device's patches into its summary, in one statement. reboot is
// what the device said of a pending reboot; scanned, when not zero, the time of its scan.
func (s *Service) refreshSummary(ctx context.Context, tx *sql.Tx, deviceID string, o tenancy.Owner, reboot bool, scanned time.Time) error {
	rebootSet, scanSet := "excluded.reboot_required", "excluded.last_scan_at"
	var scan any
	if scanned.IsZero() {
		// An install that asks for a reboot adds to what the last scan said.
		rebootSet, scanSet = "(patch_device_summaries.reboot_required OR excluded.reboot_required)", "patch_device_summaries.last_scan_at"
	} else {
		scan = scanned
	}
	p := s.db.TypedParam
	_, err := s.db.TxExecContext(ctx, tx, `INSERT INTO patch_device_summaries (device_id, partner_id, org_id, pending, critical_pending,
		installed, failed, reboot_required, last_scan_at, updated_at)
		SELECT `+p(1, "UUID")+`, `+p(2, "UUID")+`, `+p(3, "UUID")+`, COALESCE(SUM(CASE WHEN pd.status = $4 THEN 1 ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN pd.status = $4 AND (p.severity = $5 OR p.category = $6) THEN 1 ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN pd.status = $7 THEN 1 ELSE 0 END), 0),
			COALESCE(SUM(CASE WHEN pd.status = $8 THEN 1 ELSE 0 END), 0), `+p(9, "BOOLEAN")+`, `+p(10, "TIMESTAMPTZ")+`, `+p(11, "TIMESTAMPTZ")+`
		FROM patch_devices pd JOIN patches p ON p.id = pd.patch_id WHERE pd.device_id = $1
		ON CONFLICT (device_id) DO UPDATE SET partner_id = excluded.partner_id, org_id = excluded.org_id,
			pending = excluded.pending, critical_pending = excluded.critical_pending, installed = excluded.installed,
			failed = excluded.failed, reboot_required = `+rebootSet+`, last_scan_at = `+scanSet+`, updated_at = excluded.updated_at`,
		deviceID, o.PartnerID, o.OrgID, DeviceStatePending, SeverityCritical, CategorySecurity, DeviceStateInstalled, DeviceStateFailed,
		reboot, scan, s.clock.Now())
	if err != nil {
		return fmt.Errorf("refresh the patch summary of device %s: %w", deviceID, err)
	}
	return nil
}

// onInstallResult records a patch_install result of a job in the result's transaction: each
// package's outcome on the device's patch, then the summary and the job. A patch_install
// sent outside a job changes no patch state: the next scan finds what it did.
func (s *Service) onInstallResult(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error {
	var kind, orgID, partnerID, reboot string
	var raw sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT j.kind, jd.partner_id, jd.org_id, jd.packages, j.reboot_behavior FROM patch_job_devices jd
		JOIN patch_jobs j ON j.id = jd.job_id WHERE jd.command_id = $1 AND jd.device_id = $2`, r.CommandID, deviceID).
		Scan(&kind, &partnerID, &orgID, &raw, &reboot)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the job of command %s: %w", r.CommandID, err)
	}
	var pkgs []PatchPackageVersion
	if raw.Valid {
		if err := json.Unmarshal([]byte(raw.String), &pkgs); err != nil {
			return fmt.Errorf("read the packages of command %s: %w", r.CommandID, err)
		}
	}
	var res agentproto.PatchInstallResult
	if len(r.Result) > 0 {
		if err := json.Unmarshal(r.Result, &res); err != nil {
			res = agentproto.PatchInstallResult{}
		}
	}
	outcomes := map[string]agentproto.PackageOutcome{}
	for _, oc := range res.Packages {
		outcomes[oc.Name] = oc
	}
	now := s.clock.Now()
	for _, p := range pkgs {
		oc, ok := outcomes[p.Name]
		if !ok {
			oc = agentproto.PackageOutcome{Name: p.Name, Version: p.Version, Status: agentproto.PackageFailed, Error: resultError(r, "no outcome reported")}
		}
		if err := applyOutcome(ctx, tx, kind, deviceID, p, oc, now); err != nil {
			return err
		}
	}
	if err := s.refreshSummary(ctx, tx, deviceID, tenancy.Owner{PartnerID: partnerID, OrgID: orgID}, res.RebootRequired, time.Time{}); err != nil {
		return err
	}
	ok := r.Status == agentproto.ResultCompleted
	if ok && kind == JobInstall && (reboot == RebootAlways || (reboot == RebootIfRequired && res.RebootRequired)) {
		if err := s.queueReboot(ctx, tx, deviceID, partnerID, orgID); err != nil {
			return err
		}
	}
	return s.resultDone(ctx, tx, r.CommandID, ok, resultErrorIf(r))
}

// queueReboot queues a reboot of the device after its patches, with RebootDelaySeconds of
// notice; devices sends it once the result's transaction has committed.
func (s *Service) queueReboot(ctx context.Context, tx *sql.Tx, deviceID, partnerID, orgID string) error {
	actx := access.WithPrincipal(ctx, &access.Principal{Kind: access.ActorSystem, ID: "patches", Name: "patch job",
		Scope: access.Scope{Level: access.LevelOrganization, PartnerID: partnerID, OrgID: orgID}})
	_, err := s.devices.SendBulkIn(actx, tx, devices.BulkInput{DeviceIDs: []string{deviceID}, Audited: true,
		CommandInput: devices.CommandInput{Type: agentproto.CommandReboot, Payload: json.RawMessage(store.EncodeJSON(agentproto.PowerDelay{DelaySeconds: RebootDelaySeconds}))}})
	if err != nil {
		return fmt.Errorf("queue the reboot of device %s after its patches: %w", deviceID, err)
	}
	return nil
}

func resultErrorIf(r agentproto.CommandResult) string {
	if r.Status == agentproto.ResultCompleted {
		return ""
	}
	return resultError(r, "the install failed")
}

// applyOutcome records what happened to one package. An install moves the patch to
// installed (keeping the version it replaced), failed or skipped; a rollback that took the
// package back makes the patch pending again, at the older version.
func applyOutcome(ctx context.Context, tx *sql.Tx, kind, deviceID string, p PatchPackageVersion, oc agentproto.PackageOutcome, now time.Time) error {
	var q string
	var args []any
	switch {
	case kind == JobRollback && oc.Status == agentproto.PackageInstalled:
		q, args = `UPDATE patch_devices SET status = $1, installed_version = $2, previous_version = '', installed_at = NULL, error = NULL,
			updated_at = $3 WHERE device_id = $4 AND patch_id = $5`, []any{DeviceStatePending, oc.Version, now, deviceID, p.PatchID}
	case kind == JobRollback && oc.Status == agentproto.PackageFailed:
		q, args = `UPDATE patch_devices SET error = $1, updated_at = $2 WHERE device_id = $3 AND patch_id = $4`,
			[]any{outcomeError(oc), now, deviceID, p.PatchID}
	case kind == JobRollback:
		return nil
	case oc.Status == agentproto.PackageInstalled:
		q, args = `UPDATE patch_devices SET status = $1, installed_version = $2, previous_version = $3, installed_at = $4, error = NULL,
			updated_at = $4 WHERE device_id = $5 AND patch_id = $6`, []any{DeviceStateInstalled, oc.Version, oc.PreviousVersion, now, deviceID, p.PatchID}
	case oc.Status == agentproto.PackageSkipped:
		q, args = `UPDATE patch_devices SET status = $1, error = NULL, updated_at = $2 WHERE device_id = $3 AND patch_id = $4`,
			[]any{DeviceStateSkipped, now, deviceID, p.PatchID}
	default:
		q, args = `UPDATE patch_devices SET status = $1, error = $2, updated_at = $3 WHERE device_id = $4 AND patch_id = $5`,
			[]any{DeviceStateFailed, outcomeError(oc), now, deviceID, p.PatchID}
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("record the outcome of %s on device %s: %w", p.Name, deviceID, err)
	}
	return nil
}

func outcomeError(oc agentproto.PackageOutcome) string {
	if oc.Error != "" {
		return oc.Error
	}
	return "the package manager reported " + oc.Status
}

// resultDone ends the job work of a result's command and, once the result's transaction has
// committed, finishes the job if that was its last open work (see settleJobs).
func (s *Service) resultDone(ctx context.Context, tx *sql.Tx, commandID string, ok bool, errMsg string) error {
	jobID, err := s.deviceDone(ctx, tx, commandID, ok, errMsg)
	if err != nil || jobID == "" {
		return err
	}
	// Results are recorded through devices.RecordResult only, so the hook is always there.
	devices.AfterResult(ctx, func(ctx context.Context) {
		if err := s.settleJobs(ctx, []string{jobID}); err != nil {
			s.logger.ErrorContext(ctx, "finish a patch job after a result; the job sweep will", "job", jobID, "error", err)
		}
	})
	return nil
}

// deviceDone ends a job's work on a device (found by its command) and returns the job's ID, ""
// when the command had no open work (a repeated or late result). Whether that ended the job
// is known only once tx has committed: the caller hands the ID to settleJobs then.
func (s *Service) deviceDone(ctx context.Context, tx *sql.Tx, commandID string, ok bool, errMsg string) (string, error) {
	status := JobDeviceCompleted
	if !ok {
		status = JobDeviceFailed
	}
	var jobID string
	err := s.db.TxQueryRowContext(ctx, tx, `UPDATE patch_job_devices SET status = $1, error = $2, updated_at = $3
		WHERE command_id = $4 AND status = $5 RETURNING job_id`, status, store.NullIfEmpty(errMsg), s.clock.Now(), commandID,
		JobDeviceQueued).Scan(&jobID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("end the job work of command %s: %w", commandID, err)
	}
	return jobID, nil
}

// openWork asks whether a job has work waiting or queued. Asked after every device's result:
// the partial index answers it without reading the job's other devices.
const openWork = `SELECT EXISTS (SELECT 1 FROM patch_job_devices WHERE job_id = $1 AND status IN ('waiting', 'queued'))`

// settleJobs finishes, each in a transaction of its own, the jobs among ids left without open
// work, after the transactions that ended their work have committed. Transactions ending a
// job's last devices at the same time cannot see each other's changes (READ COMMITTED on
// PostgreSQL): asked inside them, each would find the other's device still queued and the job
// would stay running. Asked after its commit, the last of them to ask sees every one, and the
// conditional update in finishJob lets one of those that find the job done finish it. Results
// of one job then wait on no common row, so they commit in parallel.
func (s *Service) settleJobs(ctx context.Context, ids []string) error {
	for _, id := range ids {
		var open bool
		if err := s.db.QueryRowContext(ctx, openWork, id).Scan(&open); err != nil {
			return fmt.Errorf("look for the open work of patch job %s: %w", id, err)
		}
		if open {
			continue
		}
		if err := s.db.Write(ctx, func(tx *sql.Tx) error { return s.finishJob(ctx, tx, id) }); err != nil {
			return err
		}
	}
	return nil
}

// finishJob marks a job completed (failed when every device failed) if it has no open work,
// and records patch.job_completed; the conditional update makes that happen once. Only a
// transaction that cannot race another ending the job's work calls it (settleJobs, or the one
// creating the job).
func (s *Service) finishJob(ctx context.Context, tx *sql.Tx, jobID string) error {
	var open bool
	if err := s.db.TxQueryRowContext(ctx, tx, openWork, jobID).Scan(&open); err != nil {
		return fmt.Errorf("look for the open work of patch job %s: %w", jobID, err)
	}
	if open {
		return nil
	}
	t, err := jobTotals(ctx, tx, jobID)
	if err != nil {
		return err
	}
	status := JobCompleted
	if t.Devices > 0 && t.Failed == t.Devices {
		status = JobFailed
	}
	var partnerID, kind string
	var orgID sql.NullString
	err = tx.QueryRowContext(ctx, `UPDATE patch_jobs SET status = $1, completed_at = $2 WHERE id = $3 AND status = $4
		RETURNING partner_id, org_id, kind`, status, s.clock.Now(), jobID, JobRunning).Scan(&partnerID, &orgID, &kind)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finish patch job %s: %w", jobID, err)
	}
	if _, err := events.Record(ctx, tx, events.Event{Type: EventJobCompleted, PartnerID: partnerID, OrgID: orgID.String,
		ResourceType: "patch_job", ResourceID: jobID}, map[string]any{"jobId": jobID, "kind": kind, "status": status, "totals": t}); err != nil {
		return fmt.Errorf("record the completion of patch job %s: %w", jobID, err)
	}
	return nil
}

// jobDeviceStatus is a job device's state as shown: queued work whose command the agent took
// is running. jobDeviceCommand joins the command of queued work only: the rest of a job's
// devices, most of them once it ran, cost no lookup.
const jobDeviceStatus = `CASE WHEN c.status = '` + devices.CommandSent + `' THEN '` + JobDeviceRunning + `' ELSE jd.status END`

var jobDeviceCommand = devices.CommandLeftJoin(`CASE WHEN jd.status = '` + JobDeviceQueued + `' THEN jd.command_id END`)

// jobTotals counts a job's devices by state.
func jobTotals(ctx context.Context, q store.Querier, jobID string) (PatchJobTotals, error) {
	all, err := totalsOf(ctx, q, []string{jobID})
	return all[jobID], err
}

func totalsOf(ctx context.Context, q store.Querier, jobIDs []string) (map[string]PatchJobTotals, error) {
	out := make(map[string]PatchJobTotals, len(jobIDs))
	if len(jobIDs) == 0 {
		return out, nil
	}
	type count struct {
		jobID, status string
		n             int
	}
	var a store.Args
	counts, err := store.QueryAll(ctx, q, `SELECT job_id, status, COUNT(*) FROM (SELECT jd.job_id, `+jobDeviceStatus+` AS status
		FROM patch_job_devices jd`+jobDeviceCommand+` WHERE jd.job_id IN `+a.In(jobIDs)+`) d GROUP BY job_id, status`, a.Values(),
		func(sc store.Scanner) (c count, err error) {
			err = sc.Scan(&c.jobID, &c.status, &c.n)
			return c, err
		})
	if err != nil {
		return nil, fmt.Errorf("count job devices: %w", err)
	}
	for _, c := range counts {
		t := out[c.jobID]
		t.Devices += c.n
		switch c.status {
		case JobDeviceWaiting:
			t.Waiting += c.n
		case JobDeviceQueued:
			t.Queued += c.n
		case JobDeviceRunning:
			t.Running += c.n
		case JobDeviceCompleted:
			t.Completed += c.n
		case JobDeviceFailed:
			t.Failed += c.n
		}
		out[c.jobID] = t
	}
	return out, nil
}
