package software

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
	"gale/internal/platform/events"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

const deploymentColumns = `d.id, d.partner_id, d.org_id, d.name, d.catalog_id, d.version_id, s.name, v.version, d.targets,
	d.schedule_mode, d.window_id, d.status, d.created_by, d.created_at, d.updated_at, d.completed_at`

const deploymentFrom = ` FROM software_deployments d JOIN software_catalog s ON s.id = d.catalog_id
	JOIN software_versions v ON v.id = d.version_id`

func scanDeployment(row store.Scanner) (SoftwareDeployment, error) {
	var x SoftwareDeployment
	var targets string
	var window, by sql.NullString
	var done sql.NullTime
	err := row.Scan(&x.ID, &x.PartnerID, &x.OrgID, &x.Name, &x.CatalogID, &x.VersionID, &x.SoftwareName, &x.Version, &targets,
		&x.Schedule.Mode, &window, &x.Status, &by, &x.CreatedAt, &x.UpdatedAt, &done)
	if err != nil {
		return x, err
	}
	if err := json.Unmarshal([]byte(targets), &x.Targets); err != nil {
		return x, fmt.Errorf("read targets of deployment %s: %w", x.ID, err)
	}
	x.Schedule.WindowID, x.CreatedBy, x.CompletedAt = window.String, store.StringPtr(by), store.TimePtr(done)
	return x, nil
}

// deploymentFilter keeps the deployments (alias d) of live organizations in scope.
func deploymentFilter(scope access.Scope, a *store.Args) string {
	return scope.OrgFilter(a, "d.org_id", "d.partner_id") + " AND " + tenancy.LiveOrg("d.org_id")
}

// resultJoin joins each device row (alias r) to its command (alias c), when it has one.
func resultJoin() string { return " LEFT" + devices.CommandJoin("r.command_id") }

// effectiveStatus is a device's status from its stored one and its command's state: a queued
// row is running once the agent has its command, and ends with a command that ended without a
// result of the agent (timed out, cancelled through the devices API) until the periodic
// reconciliation stores that.
func effectiveStatus(stored string, command sql.NullString) string {
	if stored != DeviceQueued || !command.Valid {
		return stored
	}
	switch command.String {
	case devices.CommandQueued:
		return DeviceQueued
	case devices.CommandSent:
		return DeviceRunning
	case devices.CommandCancelled:
		return DeviceCancelled
	}
	return DeviceFailed
}

// withCounts fills in the devices per status of deployments.
func withCounts(ctx context.Context, q store.Querier, list []SoftwareDeployment) error {
	if len(list) == 0 {
		return nil
	}
	ids := make([]string, len(list))
	at := map[string]int{}
	for i, x := range list {
		ids[i], at[x.ID] = x.ID, i
		list[i].Counts = map[string]int{}
	}
	type count struct {
		id, stored string
		command    sql.NullString
		n          int
	}
	var a store.Args
	counts, err := store.QueryAll(ctx, q, `SELECT r.deployment_id, r.status, c.status, COUNT(*) FROM software_deployment_devices r`+
		resultJoin()+` WHERE r.deployment_id IN `+a.In(ids)+` GROUP BY r.deployment_id, r.status, c.status`, a.Values(),
		func(sc store.Scanner) (c count, err error) {
			err = sc.Scan(&c.id, &c.stored, &c.command, &c.n)
			return c, err
		})
	if err != nil {
		return fmt.Errorf("count deployment devices: %w", err)
	}
	for _, c := range counts {
		list[at[c.id]].Counts[effectiveStatus(c.stored, c.command)] += c.n
	}
	return nil
}

// DeploymentFilter narrows a list of deployments.
type DeploymentFilter struct {
	OrgID     string
	Status    string
	CatalogID string
}

// ListDeployments lists the deployments in scope, newest first.
func (s *Service) ListDeployments(ctx context.Context, f DeploymentFilter, page store.Page) ([]SoftwareDeployment, string, *int, error) {
	var a store.Args
	conds := []string{deploymentFilter(access.ScopeFrom(ctx), &a)}
	if f.OrgID != "" {
		conds = append(conds, "d.org_id = "+a.Add(f.OrgID))
	}
	if f.Status != "" {
		conds = append(conds, "d.status = "+a.Add(f.Status))
	}
	if f.CatalogID != "" {
		conds = append(conds, "d.catalog_id = "+a.Add(f.CatalogID))
	}
	list, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: deploymentColumns, From: deploymentFrom, Conds: conds, Args: &a,
		SortKey: "d.id", SortID: "d.id", Desc: true}, page, scanDeployment, func(x SoftwareDeployment) (string, string) { return x.ID, x.ID })
	if err == nil {
		err = withCounts(ctx, s.db, list)
	}
	return list, next, total, err
}

// GetDeployment returns a deployment in scope.
func (s *Service) GetDeployment(ctx context.Context, id string) (SoftwareDeployment, error) {
	x, err := getDeployment(ctx, s.db, access.ScopeFrom(ctx), id)
	if err != nil {
		return x, err
	}
	list := []SoftwareDeployment{x}
	err = withCounts(ctx, s.db, list)
	return list[0], err
}

func getDeployment(ctx context.Context, q store.Querier, scope access.Scope, id string) (SoftwareDeployment, error) {
	var a store.Args
	return store.ByID(ctx, q, "deployment", `SELECT `+deploymentColumns+deploymentFrom, "d.id", id, &a,
		[]string{deploymentFilter(scope, &a)}, scanDeployment)
}

const resultColumns = `r.id, r.deployment_id, r.device_id, r.status, r.command_id, r.reason, r.installed_version, r.previous_version,
	r.created_at, r.updated_at, c.status, c.error, c.completed_at`

func scanResult(row store.Scanner) (SoftwareDeploymentResult, error) {
	var x SoftwareDeploymentResult
	var cmd, reason, installed, previous, cstatus, cerr sql.NullString
	var done sql.NullTime
	err := row.Scan(&x.ID, &x.DeploymentID, &x.DeviceID, &x.Status, &cmd, &reason, &installed, &previous, &x.CreatedAt, &x.UpdatedAt,
		&cstatus, &cerr, &done)
	if err != nil {
		return x, err
	}
	x.CommandID, x.Reason, x.InstalledVersion, x.PreviousVersion = store.StringPtr(cmd), store.StringPtr(reason),
		store.StringPtr(installed), store.StringPtr(previous)
	x.CompletedAt = store.TimePtr(done)
	stored := x.Status
	x.Status = effectiveStatus(stored, cstatus)
	if stored == DeviceQueued && x.Status != DeviceQueued && x.Status != DeviceRunning && x.Reason == nil {
		x.Reason = store.StringPtr(cerr)
	}
	return x, nil
}

// Results lists the devices of a deployment in scope.
func (s *Service) Results(ctx context.Context, id, status string, page store.Page) ([]SoftwareDeploymentResult, string, *int, error) {
	if _, err := getDeployment(ctx, s.db, access.ScopeFrom(ctx), id); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"r.deployment_id = " + a.Add(id)}
	switch status {
	case "":
	case DeviceQueued, DeviceRunning:
		cs := devices.CommandQueued
		if status == DeviceRunning {
			cs = devices.CommandSent
		}
		conds = append(conds, "r.status = "+a.Add(DeviceQueued)+" AND c.status = "+a.Add(cs))
	default:
		conds = append(conds, "r.status = "+a.Add(status))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: resultColumns, From: " FROM software_deployment_devices r" + resultJoin(),
		Conds: conds, Args: &a, SortKey: "r.id", SortID: "r.id"}, page, scanResult,
		func(x SoftwareDeploymentResult) (string, string) { return x.ID, x.ID })
}

// narrowed returns ctx whose caller reaches only the organization of a deployment.
func narrowed(ctx context.Context, partnerID, orgID string) context.Context {
	p := access.PrincipalFrom(ctx)
	var n access.Principal
	if p != nil {
		n = *p
	} else {
		n = access.Principal{Kind: access.ActorSystem, ID: "software-deployments", Name: "software deployments"}
	}
	n.Scope = access.Scope{Level: access.LevelOrganization, PartnerID: partnerID, OrgID: orgID}
	return access.WithPrincipal(ctx, &n)
}

// resolve lists the live devices the targets hold, within ctx's organization (a named device
// decommissioned since the targets were checked is left out).
func (s *Service) resolve(ctx context.Context, t devices.Targets) ([]devices.Device, error) {
	r, err := s.devices.ResolveTargets(ctx, t.Type, t.IDs, MaxDeploymentDevices)
	switch {
	case err != nil:
		return nil, err
	case r.Exceeds:
		return nil, devices.TooManyTargets(MaxDeploymentDevices)
	}
	return r.Devices, nil
}

// installPayload is the software_install payload of a version for a device.
func installPayload(v versionRow, deviceID string) json.RawMessage {
	p := agentproto.SoftwareInstall{SHA256: v.SHA256, FileType: v.FileType, Name: v.Item.PackageName, Version: v.Version,
		SilentArgs: v.SilentArgs}
	if v.SizeBytes != nil {
		p.SizeBytes = *v.SizeBytes
	}
	if v.BlobKey != "" {
		p.URL = agentFilePath(deviceID, v.ID)
	} else {
		p.URL = store.Deref(v.DownloadURL)
	}
	return json.RawMessage(store.EncodeJSON(p))
}

// CreateDeployment deploys a version to the devices its targets resolve to in one
// organization: devices of another system are skipped, held ones wait, the others get a
// software_install command; all in one transaction, the commands dispatched once committed.
func (s *Service) CreateDeployment(ctx context.Context, in SoftwareDeploymentInput) (SoftwareDeployment, error) {
	scope := access.ScopeFrom(ctx)
	sched := SoftwareDeploymentSchedule{Mode: ScheduleNow}
	if in.Schedule != nil {
		sched = *in.Schedule
	}
	switch sched.Mode {
	case ScheduleNow:
		if sched.WindowID != "" {
			return SoftwareDeployment{}, apperr.Invalid("schedule.windowId", "windowId goes with mode maintenance_window")
		}
	case ScheduleMaintenanceWindow:
		if !store.ValidID(sched.WindowID) {
			return SoftwareDeployment{}, apperr.Invalid("schedule.windowId", "mode maintenance_window needs the window's ID")
		}
		if s.windowActive == nil {
			return SoftwareDeployment{}, apperr.BadRequest("MAINTENANCE_WINDOWS_UNAVAILABLE",
				"deployments scheduled for a maintenance window are not available on this server")
		}
	default:
		return SoftwareDeployment{}, apperr.Invalid("schedule.mode", "mode is now or maintenance_window")
	}
	at, err := s.tenancy.Place(ctx, scope, in.OrgID, tenancy.PlaceOptions{Noun: "deployment"})
	if err != nil {
		return SoftwareDeployment{}, err
	}
	if err := s.devices.CheckTargets(ctx, s.db, &in.Targets, tenancy.Owner{PartnerID: at.PartnerID, OrgID: at.OrgID}); err != nil {
		return SoftwareDeployment{}, err
	}
	v, err := getVersion(ctx, s.db, scope, in.VersionID)
	if apperr.IsCode(err, apperr.CodeNotFound) || (err == nil && (v.Item.PartnerID != at.PartnerID || (v.Item.OrgID != nil && *v.Item.OrgID != at.OrgID))) {
		return SoftwareDeployment{}, apperr.Invalid("versionId", "no such version for this organization")
	}
	if err != nil {
		return SoftwareDeployment{}, err
	}
	octx := narrowed(ctx, at.PartnerID, at.OrgID)
	devs, err := s.resolve(octx, in.Targets)
	if err != nil {
		return SoftwareDeployment{}, err
	}
	if len(devs) == 0 {
		return SoftwareDeployment{}, apperr.Invalid("targets", "the targets hold no devices")
	}
	open := true
	if sched.Mode == ScheduleMaintenanceWindow {
		if open, err = s.windowActive(ctx, sched.WindowID); err != nil {
			return SoftwareDeployment{}, err
		}
	}
	name := strings.TrimSpace(in.Name)
	if name == "" {
		name = v.Item.Name + " " + v.Version
	}
	var cmds []devices.DeviceCommand
	var id string
	err = s.db.Write(ctx, func(tx *sql.Tx) (err error) {
		id, cmds, _, err = s.deployIn(ctx, tx, at, v, devs, newDeployment{name: name, targets: in.Targets, schedule: sched, open: open,
			hold: true})
		return err
	})
	if err != nil {
		return SoftwareDeployment{}, fmt.Errorf("create deployment: %w", err)
	}
	s.devices.Dispatch(ctx, cmds)
	return s.GetDeployment(ctx, id)
}

// newDeployment is what deployIn records beside the version and the devices.
type newDeployment struct {
	name     string
	targets  devices.Targets
	schedule SoftwareDeploymentSchedule
	// open is false while the deployment waits for its maintenance window; hold asks which
	// devices a window keeps (false: a rollout decided that already).
	open, hold bool
}

// skippedDevice is a device a deployment left out, and why.
type skippedDevice struct{ deviceID, reason string }

// deployIn records, in tx, a deployment of v to devs in one organization: devices of another
// system are skipped, held ones wait, the others get a software_install command (returned for
// dispatch once tx commits), and the deployment's status is rolled up.
func (s *Service) deployIn(ctx context.Context, tx *sql.Tx, at tenancy.Placement, v versionRow, devs []devices.Device,
	n newDeployment) (string, []devices.DeviceCommand, []skippedDevice, error) {
	id, now := store.NewID(), s.clock.Now()
	if _, err := tx.ExecContext(ctx, `INSERT INTO software_deployments (id, partner_id, org_id, name, catalog_id, version_id, targets,
		schedule_mode, window_id, status, created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)`,
		id, at.PartnerID, at.OrgID, n.name, v.Item.ID, v.ID, store.EncodeJSON(n.targets), n.schedule.Mode, store.NullIfEmpty(n.schedule.WindowID),
		DeploymentPending, access.ActorName(ctx), now); err != nil {
		return "", nil, nil, fmt.Errorf("insert deployment: %w", err)
	}
	var skipped []skippedDevice
	var fits []string
	for _, d := range devs {
		reason := ""
		switch {
		case d.OSType == "":
			reason = "the device's system is not known yet"
		case !slices.Contains(v.SupportedOS, d.OSType):
			reason = "the version installs on " + strings.Join(v.SupportedOS, ", ") + ", not on " + d.OSType
		}
		if reason != "" {
			if err := insertResult(ctx, tx, id, at, d.ID, v.ID, DeviceSkipped, "", reason, now); err != nil {
				return "", nil, nil, err
			}
			skipped = append(skipped, skippedDevice{d.ID, reason})
			continue
		}
		fits = append(fits, d.ID)
	}
	held := map[string]bool{}
	if n.open && n.hold {
		var err error
		if held, err = s.held(ctx, tx, fits); err != nil {
			return "", nil, nil, fmt.Errorf("check held devices: %w", err)
		}
	}
	var send []string
	for _, devID := range fits {
		if !n.open || held[devID] {
			if err := insertResult(ctx, tx, id, at, devID, v.ID, DeviceWaiting, "", "", now); err != nil {
				return "", nil, nil, err
			}
			continue
		}
		send = append(send, devID)
	}
	cmds, err := s.send(narrowed(ctx, at.PartnerID, at.OrgID), tx, id, at, v, send, false)
	if err != nil {
		return "", nil, nil, err
	}
	sent := map[string]bool{}
	for _, c := range cmds {
		sent[c.DeviceID] = true
	}
	for _, devID := range send {
		if !sent[devID] {
			skipped = append(skipped, skippedDevice{devID, "the device could not be given the command"})
		}
	}
	if err := rollup(ctx, tx, id, now); err != nil {
		return "", nil, nil, err
	}
	err = audit.Record(ctx, tx, audit.Entry{Action: "software.deployment.create", ResourceType: "software_deployment", ResourceID: id,
		ResourceName: n.name, PartnerID: at.PartnerID, OrgID: at.OrgID, Details: map[string]any{"versionId": v.ID, "version": v.Version,
			"catalogId": v.Item.ID, "devices": len(devs), "commands": len(cmds), "schedule": n.schedule.Mode}})
	return id, cmds, skipped, err
}

// insertResult adds a device row of a deployment, made now.
func insertResult(ctx context.Context, tx *sql.Tx, deploymentID string, at tenancy.Placement, deviceID, versionID, status, commandID,
	reason string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO software_deployment_devices (id, deployment_id, partner_id, org_id, device_id, version_id,
		status, command_id, reason, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`,
		store.NewID(), deploymentID, at.PartnerID, at.OrgID, deviceID, versionID, status, store.NullIfEmpty(commandID),
		store.NullIfEmpty(reason), now)
	if err != nil {
		return fmt.Errorf("insert deployment device: %w", err)
	}
	return nil
}

// send gives devices their software_install commands in tx, one per device since each
// payload names the device's own download path, and records each device's row: queued with
// its command, or skipped with the reason the devices domain gave. With claimed the rows
// exist already (waiting devices released), else they are added.
func (s *Service) send(ctx context.Context, tx *sql.Tx, deploymentID string, at tenancy.Placement, v versionRow, deviceIDs []string,
	claimed bool) ([]devices.DeviceCommand, error) {
	var cmds []devices.DeviceCommand
	now := s.clock.Now()
	for _, devID := range deviceIDs {
		res, err := s.devices.SendBulkIn(ctx, tx, devices.BulkInput{DeviceIDs: []string{devID}, Audited: true,
			CommandInput: devices.CommandInput{Type: agentproto.CommandSoftwareInstall, Payload: installPayload(v, devID)}})
		if err != nil {
			return nil, err
		}
		status, commandID, reason := DeviceQueued, "", ""
		switch {
		case len(res.Commands) == 1:
			commandID = res.Commands[0].ID
			cmds = append(cmds, res.Commands[0])
		case len(res.Skipped) == 1:
			status, reason = DeviceSkipped, res.Skipped[0].Reason
		case len(res.Failed) == 1:
			status, reason = DeviceSkipped, res.Failed[0].Reason
		}
		if !claimed {
			if err := insertResult(ctx, tx, deploymentID, at, devID, v.ID, status, commandID, reason, now); err != nil {
				return nil, err
			}
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE software_deployment_devices SET status = $1, command_id = $2, reason = $3, updated_at = $4
			WHERE deployment_id = $5 AND device_id = $6`, status, store.NullIfEmpty(commandID), store.NullIfEmpty(reason), now,
			deploymentID, devID); err != nil {
			return nil, fmt.Errorf("record the command of a released device: %w", err)
		}
	}
	return cmds, nil
}

// rollup sets a deployment's status from its devices: pending while no command went out,
// running once one did, and once no device is waiting or queued, completed (no failure),
// failed (failures and no install) or partial. The final status is recorded once, with its
// event. It first takes the deployment's row, so that results recorded at the same time
// count each other's devices: the last one sees them all. now stamps the change.
func rollup(ctx context.Context, tx *sql.Tx, id string, now time.Time) error {
	var current string
	err := tx.QueryRowContext(ctx, `UPDATE software_deployments SET updated_at = $1 WHERE id = $2 AND status IN ($3, $4) RETURNING status`,
		now, id, DeploymentPending, DeploymentRunning).Scan(&current)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock deployment %s: %w", id, err)
	}
	if current == DeploymentRunning {
		// A running deployment with devices still to go stays running: learnt from the index
		// by one lookup, not by counting every device at every result.
		var open bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM software_deployment_devices WHERE status IN ('waiting', 'queued')
			AND deployment_id = $1)`, id).Scan(&open); err != nil {
			return fmt.Errorf("look for the open devices of deployment %s: %w", id, err)
		}
		if open {
			return nil
		}
	}
	counts, err := storedCounts(ctx, tx, id)
	if err != nil {
		return err
	}
	status := DeploymentPending
	switch {
	case counts[DeviceWaiting]+counts[DeviceQueued] > 0:
		if counts[DeviceQueued]+counts[DeviceInstalled]+counts[DeviceFailed] > 0 {
			status = DeploymentRunning
		}
	case counts[DeviceFailed] > 0 && counts[DeviceInstalled] == 0:
		status = DeploymentFailed
	case counts[DeviceFailed] > 0:
		status = DeploymentPartial
	default:
		status = DeploymentCompleted
	}
	final := status != DeploymentPending && status != DeploymentRunning
	var done any
	if final {
		done = now
	}
	if _, err := tx.ExecContext(ctx, `UPDATE software_deployments SET status = $1, completed_at = $2 WHERE id = $3`, status, done, id); err != nil {
		return fmt.Errorf("set deployment %s status: %w", id, err)
	}
	if !final {
		return nil
	}
	return recordCompleted(ctx, tx, id, status, counts)
}

// storedCounts counts a deployment's devices per stored status.
func storedCounts(ctx context.Context, tx *sql.Tx, id string) (map[string]int, error) {
	type count struct {
		status string
		n      int
	}
	list, err := store.QueryAll(ctx, tx, `SELECT status, COUNT(*) FROM software_deployment_devices WHERE deployment_id = $1 GROUP BY status`,
		[]any{id}, func(sc store.Scanner) (c count, err error) {
			err = sc.Scan(&c.status, &c.n)
			return c, err
		})
	if err != nil {
		return nil, fmt.Errorf("count the devices of deployment %s: %w", id, err)
	}
	counts := make(map[string]int, len(list))
	for _, c := range list {
		counts[c.status] = c.n
	}
	return counts, nil
}

// recordCompleted records the software.deployment_completed event of a deployment that
// reached its final status.
func recordCompleted(ctx context.Context, tx *sql.Tx, id, status string, counts map[string]int) error {
	var partnerID, orgID, name, versionID string
	if err := tx.QueryRowContext(ctx, `SELECT partner_id, org_id, name, version_id FROM software_deployments WHERE id = $1`, id).
		Scan(&partnerID, &orgID, &name, &versionID); err != nil {
		return fmt.Errorf("load deployment %s: %w", id, err)
	}
	if _, err := events.Record(ctx, tx, events.Event{Type: EventDeploymentCompleted, PartnerID: partnerID, OrgID: orgID,
		ResourceType: "software_deployment", ResourceID: id}, map[string]any{"deploymentId": id, "name": name, "versionId": versionID,
		"status": status, "counts": counts}); err != nil {
		return fmt.Errorf("record the completion of deployment %s: %w", id, err)
	}
	return nil
}

// CancelDeployment cancels a pending or running deployment (409 DEPLOYMENT_ENDED otherwise;
// of two cancels one wins): its waiting devices are cancelled, and so are those whose
// command is still queued on the server, through the devices domain. Devices whose agent has
// the command already are left to finish and report: an installer is not interrupted.
func (s *Service) CancelDeployment(ctx context.Context, id string) (SoftwareDeployment, error) {
	scope := access.ScopeFrom(ctx)
	x, err := getDeployment(ctx, s.db, scope, id)
	if err != nil {
		return x, err
	}
	type queued struct{ rowID, deviceID, commandID string }
	var pending []queued
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		res, err := tx.ExecContext(ctx, `UPDATE software_deployments SET status = $1, completed_at = $2, updated_at = $2
			WHERE id = $3 AND status IN ($4, $5)`, DeploymentCancelled, now, id, DeploymentPending, DeploymentRunning)
		if err != nil {
			return fmt.Errorf("cancel deployment %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			if err != nil {
				return fmt.Errorf("cancel deployment %s: %w", id, err)
			}
			return apperr.ConflictCode("DEPLOYMENT_ENDED", "the deployment already ended")
		}
		if _, err := tx.ExecContext(ctx, `UPDATE software_deployment_devices SET status = $1, reason = $2, updated_at = $3
			WHERE deployment_id = $4 AND status = $5`, DeviceCancelled, "the deployment was cancelled", now, id, DeviceWaiting); err != nil {
			return fmt.Errorf("cancel waiting devices: %w", err)
		}
		pending, err = store.QueryAll(ctx, tx, `SELECT r.id, r.device_id, r.command_id FROM software_deployment_devices r`+
			devices.CommandJoin("r.command_id")+` WHERE r.deployment_id = $1 AND r.status = $2 AND c.status = $3`,
			[]any{id, DeviceQueued, devices.CommandQueued}, func(sc store.Scanner) (q queued, err error) {
				err = sc.Scan(&q.rowID, &q.deviceID, &q.commandID)
				return q, err
			})
		if err != nil {
			return fmt.Errorf("list queued devices: %w", err)
		}
		counts, err := storedCounts(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := recordCompleted(ctx, tx, id, DeploymentCancelled, counts); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "software.deployment.cancel", ResourceType: "software_deployment", ResourceID: id,
			ResourceName: x.Name, PartnerID: x.PartnerID, OrgID: x.OrgID, Details: map[string]any{"queuedCommands": len(pending)}})
	})
	if err != nil {
		return SoftwareDeployment{}, fmt.Errorf("cancel deployment: %w", err)
	}
	octx := narrowed(ctx, x.PartnerID, x.OrgID)
	for _, q := range pending {
		_, err := s.devices.CancelCommand(octx, q.deviceID, q.commandID)
		if ae, ok := apperr.As(err); ok && ae.Kind == apperr.KindConflict {
			// The agent took the command meanwhile: it runs and reports.
			continue
		}
		if err != nil && !apperr.IsCode(err, apperr.CodeNotFound) {
			return SoftwareDeployment{}, fmt.Errorf("cancel the command of device %s: %w", q.deviceID, err)
		}
		if _, err := s.db.ExecContext(ctx, `UPDATE software_deployment_devices SET status = $1, reason = $2, updated_at = $3
			WHERE id = $4 AND status = $5`, DeviceCancelled, "the deployment was cancelled", s.clock.Now(), q.rowID, DeviceQueued); err != nil {
			return SoftwareDeployment{}, fmt.Errorf("record a cancelled device: %w", err)
		}
	}
	return s.GetDeployment(ctx, id)
}

// onInstallResult runs in the transaction that records a software_install result: the
// device's row becomes installed (with the version the agent reports) or failed (with the
// agent's error), and the deployment's status follows. Results of commands no deployment
// carries change nothing.
func (s *Service) onInstallResult(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error {
	var rowID, deploymentID string
	err := tx.QueryRowContext(ctx, `SELECT id, deployment_id FROM software_deployment_devices WHERE command_id = $1 AND device_id = $2
		AND status = $3`, r.CommandID, deviceID, DeviceQueued).Scan(&rowID, &deploymentID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the deployment of command %s: %w", r.CommandID, err)
	}
	status, reason := DeviceFailed, strings.TrimSpace(r.Error)
	var installed, previous any
	switch r.Status {
	case agentproto.ResultCompleted:
		var out agentproto.SoftwareInstallResult
		if len(r.Result) > 0 {
			if err := json.Unmarshal(r.Result, &out); err != nil {
				return fmt.Errorf("read software_install result %s: %w", r.CommandID, err)
			}
		}
		status, reason = DeviceInstalled, ""
		installed, previous = store.NullIfEmpty(out.Version), store.NullIfEmpty(out.PreviousVersion)
	case agentproto.ResultCancelled:
		status = DeviceCancelled
	}
	if status != DeviceInstalled && reason == "" {
		reason = "the agent reported " + r.Status
	}
	now := s.clock.Now()
	if _, err := tx.ExecContext(ctx, `UPDATE software_deployment_devices SET status = $1, reason = $2, installed_version = $3,
		previous_version = $4, updated_at = $5 WHERE id = $6`, status, store.NullIfEmpty(reason), installed, previous, now, rowID); err != nil {
		return fmt.Errorf("record the outcome of deployment device %s: %w", rowID, err)
	}
	return rollup(ctx, tx, deploymentID, now)
}

// Reconcile stores the end of devices whose command ended without a result of the agent
// (timed out, or cancelled through the devices API), and rolls up their deployments. It runs
// periodically.
func (s *Service) Reconcile(ctx context.Context) error {
	type ended struct{ rowID, deploymentID, status, reason string }
	list, err := store.QueryAll(ctx, s.db, `SELECT r.id, r.deployment_id, c.status, c.error FROM software_deployment_devices r`+
		devices.CommandJoin("r.command_id")+` WHERE r.status = $1 AND c.status NOT IN ($2, $3) LIMIT 1000`,
		[]any{DeviceQueued, devices.CommandQueued, devices.CommandSent}, func(sc store.Scanner) (e ended, err error) {
			var reason sql.NullString
			err = sc.Scan(&e.rowID, &e.deploymentID, &e.status, &reason)
			e.reason = reason.String
			return e, err
		})
	if err != nil {
		return fmt.Errorf("list ended commands: %w", err)
	}
	for _, e := range list {
		status := effectiveStatus(DeviceQueued, sql.NullString{String: e.status, Valid: true})
		if e.reason == "" {
			e.reason = "the command ended " + e.status
		}
		err := s.db.Write(ctx, func(tx *sql.Tx) error {
			now := s.clock.Now()
			res, err := tx.ExecContext(ctx, `UPDATE software_deployment_devices SET status = $1, reason = $2, updated_at = $3
				WHERE id = $4 AND status = $5`, status, e.reason, now, e.rowID, DeviceQueued)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return nil
			}
			return rollup(ctx, tx, e.deploymentID, now)
		})
		if err != nil {
			return fmt.Errorf("reconcile deployment device %s: %w", e.rowID, err)
		}
	}
	return nil
}

// ReleaseWaiting gives their commands to the waiting devices of open deployments that are
// no longer held: the deployment's maintenance window (if it names one) is active and no
// window holds them. It runs periodically; whoever changes a hold may call it too.
func (s *Service) ReleaseWaiting(ctx context.Context) error {
	type waiting struct {
		id, versionID, mode string
		window              sql.NullString
		at                  tenancy.Placement
	}
	list, err := store.QueryAll(ctx, s.db, `SELECT DISTINCT d.id, d.partner_id, d.org_id, d.version_id, d.schedule_mode, d.window_id
		FROM software_deployments d JOIN software_deployment_devices r ON r.deployment_id = d.id
		WHERE d.status IN ($1, $2) AND r.status = $3`, []any{DeploymentPending, DeploymentRunning, DeviceWaiting},
		func(sc store.Scanner) (w waiting, err error) {
			err = sc.Scan(&w.id, &w.at.PartnerID, &w.at.OrgID, &w.versionID, &w.mode, &w.window)
			return w, err
		})
	if err != nil {
		return fmt.Errorf("list waiting deployments: %w", err)
	}
	for _, w := range list {
		if w.mode == ScheduleMaintenanceWindow {
			if s.windowActive == nil {
				continue
			}
			active, err := s.windowActive(ctx, w.window.String)
			if err != nil {
				return fmt.Errorf("check the window of deployment %s: %w", w.id, err)
			}
			if !active {
				continue
			}
		}
		if err := s.release(ctx, w.id, w.versionID, w.at); err != nil {
			return err
		}
	}
	return nil
}

// release sends the commands of one deployment's waiting devices that no window holds.
func (s *Service) release(ctx context.Context, id, versionID string, at tenancy.Placement) error {
	octx := narrowed(ctx, at.PartnerID, at.OrgID)
	var cmds []devices.DeviceCommand
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		v, err := getVersion(ctx, tx, access.SystemScope(), versionID)
		if apperr.IsCode(err, apperr.CodeNotFound) {
			// Its catalog item was deleted with the deployment still open: nothing to send.
			return nil
		}
		if err != nil {
			return err
		}
		ids, err := store.QueryStrings(ctx, tx, `SELECT device_id FROM software_deployment_devices WHERE deployment_id = $1 AND status = $2
			ORDER BY device_id`, id, DeviceWaiting)
		if err != nil || len(ids) == 0 {
			return err
		}
		held, err := s.held(ctx, tx, ids)
		if err != nil {
			return fmt.Errorf("check held devices: %w", err)
		}
		free := slices.DeleteFunc(ids, func(id string) bool { return held[id] })
		if len(free) == 0 {
			return nil
		}
		// Claim the rows first: a release running at the same time elsewhere sends nothing twice.
		now := s.clock.Now()
		var a store.Args
		claimed, err := store.QueryStrings(ctx, tx, `UPDATE software_deployment_devices SET status = `+a.Add(DeviceQueued)+`, updated_at = `+
			a.Add(now)+` WHERE deployment_id = `+a.Add(id)+` AND status = `+a.Add(DeviceWaiting)+` AND device_id IN `+a.In(free)+
			` RETURNING device_id`, a.Values()...)
		if err != nil {
			return err
		}
		slices.Sort(claimed)
		if cmds, err = s.send(octx, tx, id, at, v, claimed, true); err != nil {
			return err
		}
		return rollup(ctx, tx, id, now)
	})
	if err != nil {
		return fmt.Errorf("release deployment %s: %w", id, err)
	}
	s.devices.Dispatch(ctx, cmds)
	return nil
}
