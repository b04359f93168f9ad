package rollouts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
)

func unprocessable(code, msg string) error {
	return &apperr.Error{Kind: apperr.KindUnprocessable, Code: code, Message: msg}
}

// resolve lists the devices a deployment's targets name now, within its organization (ctx is
// its actor), leaving decommissioned ones out.
func (s *Service) resolve(ctx context.Context, x Deployment) ([]string, error) {
	r, err := s.devices.ResolveTargets(ctx, x.Targets.Type, x.Targets.IDs, MaxDevices)
	if err != nil {
		return nil, fmt.Errorf("resolve the targets of deployment %s: %w", x.ID, err)
	}
	if r.Exceeds {
		return nil, unprocessable(CodeTooManyDevices, fmt.Sprintf("the targets name more than %d devices", MaxDevices))
	}
	return r.IDs(), nil
}

// Initialize resolves a draft's targets into its devices, numbered into batches (one for an
// immediate deployment), and makes it pending.
func (s *Service) Initialize(ctx context.Context, id string) (Deployment, error) {
	x, err := load(ctx, s.db, access.ScopeFrom(ctx), id)
	if err != nil {
		return x, err
	}
	if x.Status != StatusDraft {
		return x, errState("initialize", x.Status)
	}
	actx := s.actorCtx(ctx, x)
	d, err := s.deployer(x.payloadType)
	if err != nil {
		return x, err
	}
	if _, err := d.Validate(actx, x.Payload); err != nil {
		return x, err
	}
	ids, err := s.resolve(actx, x)
	if err != nil {
		return x, err
	}
	if len(ids) == 0 {
		return x, unprocessable(CodeNoDevices, "the targets name no device of the deployment's organization")
	}
	size := len(ids)
	if x.Strategy.Mode == ModeStaggered {
		size = x.Strategy.BatchSize
	}
	batches := (len(ids) + size - 1) / size
	now := s.clock.Now()
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		ok, err := transition(ctx, tx, id, []string{StatusDraft}, StatusPending, now, map[string]any{"batch_count": batches, "current_batch": 0})
		if err != nil {
			return err
		}
		if !ok {
			return errState("initialize", "no longer a draft")
		}
		for first := 0; first < len(ids); first += 100 {
			var a store.Args
			rows := make([]string, 0, 100)
			for i := first; i < min(first+100, len(ids)); i++ {
				rows = append(rows, "("+strings.Join([]string{a.Add(id), a.Add(ids[i]), a.Add(x.PartnerID), a.Add(x.OrgID),
					a.Add(i/size + 1), a.Add(DevicePending), a.Add(now)}, ", ")+")")
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO rollout_devices (rollout_id, device_id, partner_id, org_id, batch, status, updated_at)
				VALUES `+strings.Join(rows, ", "), a.Values()...); err != nil {
				return fmt.Errorf("insert deployment devices: %w", err)
			}
		}
		return audit.Record(ctx, tx, s.entry("deployment.initialize", x, map[string]any{"devices": len(ids), "batches": batches}))
	})
	if err != nil {
		return Deployment{}, fmt.Errorf("initialize deployment: %w", err)
	}
	return s.get(ctx, s.db, access.SystemScope(), id)
}

// mayDeploy checks that the caller may deliver the deployment's payload: besides
// configuration:write, its type's own execute permission.
func (s *Service) mayDeploy(ctx context.Context, x Deployment) (Deployer, error) {
	d, err := s.deployer(x.payloadType)
	if err != nil {
		return nil, err
	}
	if p := access.PrincipalFrom(ctx); p == nil || !p.Can(d.Permission()) {
		return nil, apperr.Forbidden("delivering a " + d.Type() + " payload needs the permission " + string(d.Permission()))
	}
	return d, nil
}

// record writes an event about a deployment.
func (s *Service) record(ctx context.Context, tx *sql.Tx, typ string, x Deployment, more map[string]any) error {
	data := map[string]any{"deploymentId": x.ID, "name": x.Name, "payloadType": x.payloadType}
	for k, v := range more {
		data[k] = v
	}
	if _, err := events.Record(ctx, tx, events.Event{Type: typ, PartnerID: x.PartnerID, OrgID: x.OrgID, ResourceType: "deployment",
		ResourceID: x.ID}, data); err != nil {
		return fmt.Errorf("record %s of deployment %s: %w", typ, x.ID, err)
	}
	return nil
}

// Start makes a pending deployment running and sends its first batch, in one transaction. Of
// concurrent starts one wins; the others are 409 DEPLOYMENT_STATE_CONFLICT.
func (s *Service) Start(ctx context.Context, id string) (Deployment, error) {
	x, err := load(ctx, s.db, access.ScopeFrom(ctx), id)
	if err != nil {
		return x, err
	}
	if _, err := s.mayDeploy(ctx, x); err != nil {
		return x, err
	}
	if x.Status != StatusPending {
		return x, errState("start", x.Status)
	}
	rows, err := s.batchRows(ctx, id, 1)
	if err != nil {
		return x, err
	}
	now := s.clock.Now()
	pre := func(tx *sql.Tx) error {
		ok, err := transition(ctx, tx, id, []string{StatusPending}, StatusRunning, now, map[string]any{"started_at": now, "current_batch": 1})
		if err != nil {
			return err
		}
		if !ok {
			return errState("start", "no longer pending")
		}
		x.Status = StatusRunning
		if err := s.record(ctx, tx, EventStarted, x, map[string]any{"status": StatusRunning, "batches": x.BatchCount}); err != nil {
			return err
		}
		return audit.Record(ctx, tx, s.entry("deployment.start", x, nil))
	}
	if err := s.deployRows(s.actorCtx(ctx, x), x, rows, pre); err != nil {
		return Deployment{}, err
	}
	s.advance(ctx, id)
	return s.get(ctx, s.db, access.SystemScope(), id)
}

// Pause stops a running deployment from sending more: devices under way finish.
func (s *Service) Pause(ctx context.Context, id string) (Deployment, error) {
	return s.move(ctx, id, "pause", []string{StatusRunning}, StatusPaused, func(x Deployment) map[string]any {
		return map[string]any{"pause_reason": "paused by " + fmt.Sprint(access.ActorName(ctx))}
	}, EventPaused)
}

// Resume lets a paused deployment go on: a batch that settled (the one that paused it) is not
// counted again, so the next batch goes out at once.
func (s *Service) Resume(ctx context.Context, id string) (Deployment, error) {
	x, err := load(ctx, s.db, access.ScopeFrom(ctx), id)
	if err != nil {
		return x, err
	}
	if _, err := s.mayDeploy(ctx, x); err != nil {
		return x, err
	}
	out, err := s.move(ctx, id, "resume", []string{StatusPaused}, StatusRunning, func(Deployment) map[string]any {
		return map[string]any{"pause_reason": nil}
	}, "")
	if err != nil {
		return out, err
	}
	s.advance(ctx, id)
	return s.get(ctx, s.db, access.SystemScope(), id)
}

// move is a transition requested by a caller, with its audit entry and event (when typ is set).
func (s *Service) move(ctx context.Context, id, action string, from []string, to string, extra func(Deployment) map[string]any,
	typ string) (Deployment, error) {
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		x, err := load(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		if !slices.Contains(from, x.Status) {
			return errState(action, x.Status)
		}
		ok, err := transition(ctx, tx, id, from, to, s.clock.Now(), extra(x))
		if err != nil {
			return err
		}
		if !ok {
			return errState(action, "no longer "+x.Status)
		}
		if typ != "" {
			if err := s.record(ctx, tx, typ, x, map[string]any{"status": to, "reason": "requested"}); err != nil {
				return err
			}
		}
		return audit.Record(ctx, tx, s.entry("deployment."+action, x, nil))
	})
	if err != nil {
		return Deployment{}, err
	}
	return s.get(ctx, s.db, access.SystemScope(), id)
}

// Cancel ends a deployment that has not ended: devices not yet sent are cancelled, with the
// commands still queued for them; devices whose command the agent already has finish.
func (s *Service) Cancel(ctx context.Context, id string) (Deployment, error) {
	var x Deployment
	var queued []deviceRow
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var err error
		if x, err = load(ctx, tx, access.ScopeFrom(ctx), id); err != nil {
			return err
		}
		from := []string{StatusDraft, StatusPending, StatusRunning, StatusPaused}
		if !slices.Contains(from, x.Status) {
			return errState("cancel", x.Status)
		}
		now := s.clock.Now()
		ok, err := transition(ctx, tx, id, from, StatusCancelled, now, map[string]any{"completed_at": now, "next_batch_at": nil})
		if err != nil {
			return err
		}
		if !ok {
			return errState("cancel", "no longer "+x.Status)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE rollout_devices SET status = $1, completed_at = $2, updated_at = $2
			WHERE rollout_id = $3 AND status IN ($4, $5)`, DeviceCancelled, now, id, DevicePending, DeviceWaiting); err != nil {
			return fmt.Errorf("cancel deployment devices: %w", err)
		}
		if queued, err = rowsWhere(ctx, tx, `rollout_id = $1 AND status = $2`, id, DeviceQueued); err != nil {
			return err
		}
		if err := s.record(ctx, tx, EventCancelled, x, map[string]any{"status": StatusCancelled}); err != nil {
			return err
		}
		return audit.Record(ctx, tx, s.entry("deployment.cancel", x, map[string]any{"previousStatus": x.Status}))
	})
	if err != nil {
		return Deployment{}, fmt.Errorf("cancel deployment: %w", err)
	}
	s.cancelQueued(s.actorCtx(ctx, x), x, queued)
	return s.get(ctx, s.db, access.SystemScope(), id)
}

// cancelQueued cancels the commands of queued devices that the agent does not have yet and
// marks those devices cancelled; a command already sent runs to its end.
func (s *Service) cancelQueued(ctx context.Context, x Deployment, rows []deviceRow) {
	for _, r := range rows {
		if r.CommandID == "" {
			continue
		}
		c, err := s.devices.GetCommand(ctx, r.DeviceID, r.CommandID)
		if err != nil || c.Status != devices.CommandQueued {
			continue
		}
		if _, err := s.devices.CancelCommand(ctx, r.DeviceID, r.CommandID); err != nil {
			if _, ok := apperr.As(err); !ok {
				s.logger.WarnContext(ctx, "cancel a deployment's command", "deployment", x.ID, "device", r.DeviceID, "error", err)
			}
			continue
		}
		err = s.db.Write(ctx, func(tx *sql.Tx) error {
			now := s.clock.Now()
			_, err := tx.ExecContext(ctx, `UPDATE rollout_devices SET status = $1, completed_at = $2, updated_at = $2
				WHERE rollout_id = $3 AND device_id = $4 AND command_id = $5 AND status IN ($6, $7)`, DeviceCancelled, now, x.ID, r.DeviceID,
				r.CommandID, DeviceQueued, DeviceRunning)
			return err
		})
		if err != nil {
			s.logger.WarnContext(ctx, "record a cancelled deployment device", "deployment", x.ID, "device", r.DeviceID, "error", err)
		}
	}
}

// RetryDevice deploys a failed device of a running, paused or failed deployment again now. A
// failed deployment runs again until that device ended.
func (s *Service) RetryDevice(ctx context.Context, id, deviceID string) (DeploymentDevice, error) {
	x, err := load(ctx, s.db, access.ScopeFrom(ctx), id)
	if err != nil {
		return DeploymentDevice{}, err
	}
	if _, err := s.mayDeploy(ctx, x); err != nil {
		return DeploymentDevice{}, err
	}
	rows, err := s.deviceRows(ctx, s.db, id, deviceID)
	if err != nil {
		return DeploymentDevice{}, err
	}
	if len(rows) == 0 {
		return DeploymentDevice{}, apperr.NotFound("deployment device")
	}
	if rows[0].Status != DeviceFailed {
		return DeploymentDevice{}, apperr.ConflictCode(CodeDeviceNotFail, "only a failed device can be retried; this one is "+rows[0].Status)
	}
	from := []string{StatusRunning, StatusPaused, StatusFailed}
	if !slices.Contains(from, x.Status) {
		return DeploymentDevice{}, errState("retry a device of", x.Status)
	}
	pre := func(tx *sql.Tx) error {
		now := s.clock.Now()
		// A failed deployment runs again, due to end as soon as its devices all ended.
		to, extra := x.Status, map[string]any{}
		if x.Status == StatusFailed {
			to, extra = StatusRunning, map[string]any{"completed_at": nil, "next_batch_at": now}
		}
		ok, err := transition(ctx, tx, id, []string{x.Status}, to, now, extra)
		if err != nil {
			return err
		}
		if !ok {
			return errState("retry a device of", "no longer "+x.Status)
		}
		return audit.Record(ctx, tx, s.entry("deployment.retry_device", x, map[string]any{"deviceId": deviceID}))
	}
	if err := s.deployRows(s.actorCtx(ctx, x), x, rows, pre); err != nil {
		if errors.Is(err, errRaced) {
			return DeploymentDevice{}, apperr.ConflictCode(CodeDeviceNotFail, "the device is no longer failed")
		}
		return DeploymentDevice{}, err
	}
	d, err := scanDevice(s.db.QueryRowContext(ctx, `SELECT `+deviceColumns+` FROM rollout_devices d WHERE d.rollout_id = $1 AND d.device_id = $2`,
		id, deviceID))
	if err != nil {
		return DeploymentDevice{}, fmt.Errorf("read device %s of deployment %s: %w", deviceID, id, err)
	}
	return d, nil
}
