package rollouts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// RunnerEvery is how often the runner moves running deployments on.
const RunnerEvery = 5 * time.Second

// errRaced stops work that another request or node did first: its transaction rolls back.
var errRaced = errors.New("deployment moved on meanwhile")

// deviceRow is a deployment's device as the runner reads it.
type deviceRow struct {
	DeviceID    string
	Batch       int
	Status      string
	Attempts    int
	CommandID   string
	CompletedAt *time.Time
}

func rowsWhere(ctx context.Context, q store.Querier, cond string, args ...any) ([]deviceRow, error) {
	out, err := store.QueryAll(ctx, q, `SELECT device_id, batch, status, attempts, command_id, completed_at FROM rollout_devices WHERE `+
		cond+` ORDER BY device_id`, args, func(row store.Scanner) (deviceRow, error) {
		var r deviceRow
		var cmd sql.NullString
		var done sql.NullTime
		err := row.Scan(&r.DeviceID, &r.Batch, &r.Status, &r.Attempts, &cmd, &done)
		r.CommandID, r.CompletedAt = cmd.String, store.TimePtr(done)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("read deployment devices: %w", err)
	}
	return out, nil
}

// batchRows are the devices of a batch that have not gone out.
func (s *Service) batchRows(ctx context.Context, id string, batch int) ([]deviceRow, error) {
	return rowsWhere(ctx, s.db, `rollout_id = $1 AND batch = $2 AND status = $3`, id, batch, DevicePending)
}

func (s *Service) deviceRows(ctx context.Context, q store.Querier, id, deviceID string) ([]deviceRow, error) {
	if !store.ValidID(deviceID) {
		return nil, nil
	}
	return rowsWhere(ctx, q, `rollout_id = $1 AND device_id = $2`, id, deviceID)
}

// deployRows delivers the payload to rows in one transaction, after pre (a transition that
// must hold for the delivery), and dispatches the commands once committed. A payload that
// cannot be delivered at all (its script deleted since) fails this attempt of every row. It
// returns errRaced when another request or node claimed a row first.
func (s *Service) deployRows(ctx context.Context, x Deployment, rows []deviceRow, pre func(tx *sql.Tx) error) error {
	d, err := s.deployer(x.payloadType)
	if err != nil {
		return err
	}
	var cmds []devices.DeviceCommand
	var derr error
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		if pre != nil {
			if err := pre(tx); err != nil {
				return err
			}
		}
		cmds, derr = s.deployIn(ctx, tx, d, x, rows)
		return derr
	})
	if derr != nil {
		if _, ok := apperr.As(derr); ok {
			cmds = nil
			err = s.db.Write(ctx, func(tx *sql.Tx) error {
				if pre != nil {
					if err := pre(tx); err != nil {
						return err
					}
				}
				return s.failRows(ctx, tx, x.ID, rows, describe(derr))
			})
		}
	}
	if err != nil {
		return err
	}
	s.devices.Dispatch(ctx, cmds)
	return nil
}

// claim moves a row on from the state read, conditionally: another claim of the same row
// rolls this transaction back.
func claim(ctx context.Context, tx *sql.Tx, id string, r deviceRow, set string, args ...any) error {
	n := len(args)
	args = append(args, id, r.DeviceID, r.Status, r.Attempts)
	res, err := tx.ExecContext(ctx, `UPDATE rollout_devices SET `+set+fmt.Sprintf(` WHERE rollout_id = $%d AND device_id = $%d
		AND status = $%d AND attempts = $%d`, n+1, n+2, n+3, n+4), args...)
	if err != nil {
		return fmt.Errorf("claim deployment device %s: %w", r.DeviceID, err)
	}
	if c, err := res.RowsAffected(); err != nil || c != 1 {
		return errRaced
	}
	return nil
}

// deployIn delivers the payload to rows in tx: devices a maintenance window holds wait (when
// the deployment respects windows), the others are queued with their command, or skipped
// as the deployer reports.
func (s *Service) deployIn(ctx context.Context, tx *sql.Tx, d Deployer, x Deployment, rows []deviceRow) ([]devices.DeviceCommand, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	now := s.clock.Now()
	var held map[string]bool
	if x.RespectMaintenanceWindows {
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i] = r.DeviceID
		}
		var err error
		if held, err = s.held(ctx, tx, d.Type(), ids); err != nil {
			return nil, fmt.Errorf("maintenance windows of deployment %s: %w", x.ID, err)
		}
	}
	var ids []string
	for _, r := range rows {
		if held[r.DeviceID] {
			if r.Status != DeviceWaiting {
				if err := claim(ctx, tx, x.ID, r, `status = $1, updated_at = $2`, DeviceWaiting, now); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := claim(ctx, tx, x.ID, r, `status = $1, attempts = attempts + 1, command_id = NULL, error = NULL, started_at = $2,
			completed_at = NULL, updated_at = $2`, DeviceQueued, now); err != nil {
			return nil, err
		}
		ids = append(ids, r.DeviceID)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	res, err := d.Deploy(ctx, tx, x.Payload, ids)
	if err != nil {
		return nil, err
	}
	done := map[string]bool{}
	for _, c := range res.Commands {
		if _, err := tx.ExecContext(ctx, `UPDATE rollout_devices SET command_id = $1 WHERE rollout_id = $2 AND device_id = $3`, c.ID, x.ID,
			c.DeviceID); err != nil {
			return nil, fmt.Errorf("record deployment command: %w", err)
		}
		done[c.DeviceID] = true
	}
	end := func(device, status, msg string) error {
		_, err := tx.ExecContext(ctx, `UPDATE rollout_devices SET status = $1, error = $2, completed_at = $3, updated_at = $3
			WHERE rollout_id = $4 AND device_id = $5`, status, clip(msg), now, x.ID, device)
		done[device] = true
		return err
	}
	for _, sk := range res.Skipped {
		if err := end(sk.DeviceID, DeviceSkipped, sk.Reason); err != nil {
			return nil, fmt.Errorf("record skipped deployment device: %w", err)
		}
	}
	for _, id := range ids {
		if !done[id] {
			if err := end(id, DeviceFailed, "the "+d.Type()+" deployer did not deploy the device"); err != nil {
				return nil, fmt.Errorf("record undeployed deployment device: %w", err)
			}
		}
	}
	return res.Commands, nil
}

// failRows records a failed attempt of every row.
func (s *Service) failRows(ctx context.Context, tx *sql.Tx, id string, rows []deviceRow, msg string) error {
	now := s.clock.Now()
	for _, r := range rows {
		if err := claim(ctx, tx, id, r, `status = $1, attempts = attempts + 1, command_id = NULL, error = $2, started_at = $3,
			completed_at = $3, updated_at = $3`, DeviceFailed, clip(msg), now); err != nil {
			return err
		}
	}
	return nil
}

// describe tells what went wrong: an API error with its field details.
func describe(err error) string {
	ae, ok := apperr.As(err)
	if !ok {
		return err.Error()
	}
	msg := ae.Code + ": " + ae.Message
	for _, d := range ae.Details {
		msg += "; " + d.Field + ": " + d.Message
	}
	return msg
}

func clip(s string) any {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	if r := []rune(s); len(r) > maxErrorLen {
		return string(r[:maxErrorLen])
	}
	return s
}

// outcome is how a device ends from its command's result: succeeded when completed, failed
// otherwise, with why.
func outcome(completed bool, errMsg string, exit *int) (string, string) {
	if completed {
		return DeviceSucceeded, ""
	}
	if strings.TrimSpace(errMsg) == "" && exit != nil {
		errMsg = fmt.Sprintf("exit code %d", *exit)
	}
	if strings.TrimSpace(errMsg) == "" {
		errMsg = "failed"
	}
	return DeviceFailed, errMsg
}

// recordResult runs in the transaction that records an agent's result of a deployer's
// command: the deployment device the command carries ends. Commands no deployment sent
// change nothing.
func (s *Service) recordResult(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error {
	switch r.Status {
	case agentproto.ResultCompleted, agentproto.ResultFailed, agentproto.ResultTimedOut, agentproto.ResultCancelled:
	default:
		return nil
	}
	errMsg := r.Error
	if r.Status != agentproto.ResultCompleted && errMsg == "" && r.Status != agentproto.ResultFailed {
		errMsg = r.Status
	}
	status, msg := outcome(r.Status == agentproto.ResultCompleted, errMsg, r.ExitCode)
	now := s.clock.Now()
	if _, err := tx.ExecContext(ctx, `UPDATE rollout_devices SET status = $1, error = $2, completed_at = $3, updated_at = $3
		WHERE command_id = $4 AND device_id = $5 AND status IN ($6, $7)`, status, clip(msg), now, r.CommandID, deviceID, DeviceQueued,
		DeviceRunning); err != nil {
		return fmt.Errorf("record deployment device result: %w", err)
	}
	return nil
}

// reconcile brings the deployment's devices under way in step with their commands: running
// once the agent has the command, ended when it ended without a result (timed out, cancelled
// on the device's page) or no longer exists (the device was removed).
func (s *Service) reconcile(ctx context.Context, x Deployment) error {
	active, err := rowsWhere(ctx, s.db, `rollout_id = $1 AND status IN ($2, $3) AND command_id IS NOT NULL`, x.ID, DeviceQueued, DeviceRunning)
	if err != nil || len(active) == 0 {
		return err
	}
	type change struct {
		row         deviceRow
		status, msg string
	}
	// command is the command of a device under way, as the devices domain keeps it.
	type command struct {
		status, errMsg string
		exit           *int
	}
	type deviceCommand struct {
		device string
		command
	}
	list, err := store.QueryAll(ctx, s.db, `SELECT d.device_id, c.status, c.error, c.exit_code FROM rollout_devices d`+
		devices.CommandJoin("d.command_id")+` WHERE d.rollout_id = $1 AND d.status IN ($2, $3)`, []any{x.ID, DeviceQueued, DeviceRunning},
		func(row store.Scanner) (deviceCommand, error) {
			var dc deviceCommand
			var cerr sql.NullString
			var exit sql.NullInt64
			err := row.Scan(&dc.device, &dc.status, &cerr, &exit)
			dc.errMsg = cerr.String
			if exit.Valid {
				n := int(exit.Int64)
				dc.exit = &n
			}
			return dc, err
		})
	if err != nil {
		return fmt.Errorf("read deployment commands: %w", err)
	}
	seen := make(map[string]command, len(list))
	for _, dc := range list {
		seen[dc.device] = dc.command
	}
	var changes []change
	for _, r := range active {
		c, ok := seen[r.DeviceID]
		switch {
		case !ok:
			changes = append(changes, change{r, DeviceFailed, "its command no longer exists (device removed)"})
		case c.status == devices.CommandSent && r.Status == DeviceQueued:
			changes = append(changes, change{r, DeviceRunning, ""})
		case c.status == devices.CommandCompleted || c.status == devices.CommandFailed || c.status == devices.CommandTimedOut ||
			c.status == devices.CommandCancelled:
			msg := c.errMsg
			if msg == "" && c.status != devices.CommandFailed {
				msg = c.status
			}
			st, m := outcome(c.status == devices.CommandCompleted, msg, c.exit)
			changes = append(changes, change{r, st, m})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		for _, c := range changes {
			var done any
			if c.status != DeviceRunning {
				done = now
			}
			if _, err := tx.ExecContext(ctx, `UPDATE rollout_devices SET status = $1, error = $2, completed_at = $3, updated_at = $4
				WHERE rollout_id = $5 AND device_id = $6 AND command_id = $7 AND status = $8`, c.status, clip(c.msg), done, now, x.ID,
				c.row.DeviceID, c.row.CommandID, c.row.Status); err != nil {
				return fmt.Errorf("reconcile deployment device %s: %w", c.row.DeviceID, err)
			}
		}
		return nil
	})
}

// AdvanceAll moves every running deployment on (and keeps the devices of paused and cancelled
// ones in step with their commands).
func (s *Service) AdvanceAll(ctx context.Context) error {
	// Cancelled deployments too, while commands the agents had when it was cancelled run on.
	ids, err := store.QueryStrings(ctx, s.db, `SELECT r.id FROM rollouts r WHERE (r.status IN ($1, $2) OR (r.status = $3 AND EXISTS (
		SELECT 1 FROM rollout_devices d WHERE d.rollout_id = r.id AND d.status IN ($4, $5)))) AND `+tenancy.LiveOrg("r.org_id")+
		` ORDER BY r.id LIMIT 500`, StatusRunning, StatusPaused, StatusCancelled, DeviceQueued, DeviceRunning)
	if err != nil {
		return fmt.Errorf("list running deployments: %w", err)
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.advance(ctx, id)
	}
	return nil
}

// advance moves a deployment on as far as it can now; failures are logged and retried on the
// next round.
func (s *Service) advance(ctx context.Context, id string) {
	if err := s.advanceOne(ctx, id); err != nil && !errors.Is(err, errRaced) && ctx.Err() == nil {
		s.logger.WarnContext(ctx, "advance deployment", "deployment", id, "error", err)
	}
}

// maxSteps bounds the steps one advance takes (a batch settling, the next going out, ...);
// the next round takes it on.
const maxSteps = 16

func (s *Service) advanceOne(ctx context.Context, id string) error {
	for range maxSteps {
		x, err := load(ctx, s.db, access.SystemScope(), id)
		if err != nil || (x.Status != StatusRunning && x.Status != StatusPaused && x.Status != StatusCancelled) {
			return err
		}
		actx := s.actorCtx(ctx, x)
		if err := s.reconcile(actx, x); err != nil {
			return err
		}
		if x.Status != StatusRunning {
			return nil
		}
		now := s.clock.Now()
		due, err := s.dueRows(ctx, x, now)
		if err != nil {
			return err
		}
		if err := s.deployRows(actx, x, due, nil); err != nil {
			return err
		}
		if x.NextBatchAt == nil {
			moved, err := s.settle(ctx, x, now)
			if err != nil || !moved {
				return err
			}
			continue
		}
		if now.Before(*x.NextBatchAt) {
			return nil
		}
		if x.CurrentBatch < x.BatchCount {
			if err := s.dispatchNext(actx, x); err != nil {
				return err
			}
			continue
		}
		return s.finish(ctx, x)
	}
	return nil
}

// dueRows are the devices of batches gone out that may go (again) now: those waiting for a
// maintenance window, and failed ones with attempts left whose backoff passed.
func (s *Service) dueRows(ctx context.Context, x Deployment, now time.Time) ([]deviceRow, error) {
	rows, err := rowsWhere(ctx, s.db, `rollout_id = $1 AND batch <= $2 AND (status = $3 OR (status = $4 AND attempts < $5))`, x.ID,
		x.CurrentBatch, DeviceWaiting, DeviceFailed, x.Retry.MaxAttempts)
	if err != nil {
		return nil, err
	}
	backoff := time.Duration(x.Retry.BackoffMinutes) * time.Minute
	out := rows[:0]
	for _, r := range rows {
		if r.Status == DeviceWaiting || r.CompletedAt == nil || !now.Before(r.CompletedAt.Add(backoff)) {
			out = append(out, r)
		}
	}
	return out, nil
}

// openCond keeps the devices not settled: not ended, or failed with attempts left.
const openCond = `(status IN ($2, $3, $4, $5) OR (status = $6 AND attempts < $7))`

func (s *Service) counts(ctx context.Context, x Deployment, batch int) (open, failed, total int, err error) {
	args := []any{x.ID, DevicePending, DeviceWaiting, DeviceQueued, DeviceRunning, DeviceFailed, x.Retry.MaxAttempts}
	where := `rollout_id = $1`
	if batch > 0 {
		where += ` AND batch = $8`
		args = append(args, batch)
	}
	err = s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN `+openCond+` THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN status = $6 THEN 1 ELSE 0 END), 0) FROM rollout_devices WHERE `+where, args...).Scan(&total, &open, &failed)
	if err != nil {
		err = fmt.Errorf("count deployment %s devices: %w", x.ID, err)
	}
	return open, failed, total, err
}

// settle looks at the current batch once all its devices ended (or failed for good): when its
// failures reach a threshold the deployment pauses; otherwise the next batch is due after
// the delay (the end, at once, after the last batch). It reports whether it moved anything.
func (s *Service) settle(ctx context.Context, x Deployment, now time.Time) (bool, error) {
	open, failed, total, err := s.counts(ctx, x, x.CurrentBatch)
	if err != nil || open > 0 {
		return false, err
	}
	st := x.Strategy
	var reason string
	switch {
	case st.PauseOnFailures > 0 && failed >= st.PauseOnFailures:
		reason = fmt.Sprintf("%d of %d devices of batch %d failed, reaching pauseOnFailures (%d)", failed, total, x.CurrentBatch, st.PauseOnFailures)
	case st.PauseOnFailurePercent > 0 && failed > 0 && failed*100 >= st.PauseOnFailurePercent*total:
		reason = fmt.Sprintf("%d of %d devices of batch %d failed, reaching pauseOnFailurePercent (%d%%)", failed, total, x.CurrentBatch,
			st.PauseOnFailurePercent)
	}
	next := now
	if x.CurrentBatch < x.BatchCount {
		next = now.Add(time.Duration(st.DelayMinutes) * time.Minute)
	}
	moved := false
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		c := store.NewChanges(now)
		if reason != "" {
			// Resuming goes straight on to the next batch: this one is not counted again.
			c.Set("status", StatusPaused)
			c.Set("pause_reason", reason)
			next = now
		}
		c.Set("next_batch_at", next)
		res, err := tx.ExecContext(ctx, `UPDATE rollouts SET `+c.SQL()+` WHERE id = `+c.Args.Add(x.ID)+` AND status = `+c.Args.Add(StatusRunning)+
			` AND current_batch = `+c.Args.Add(x.CurrentBatch)+` AND next_batch_at IS NULL`, c.Args.Values()...)
		if err != nil {
			return fmt.Errorf("settle batch %d of deployment %s: %w", x.CurrentBatch, x.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		moved = true
		if reason == "" {
			return nil
		}
		return s.record(ctx, tx, EventPaused, x, map[string]any{"status": StatusPaused, "reason": reason, "batch": x.CurrentBatch,
			"failed": failed, "devices": total})
	})
	return moved && reason == "", err
}

// dispatchNext sends the next batch once it is due.
func (s *Service) dispatchNext(ctx context.Context, x Deployment) error {
	next := x.CurrentBatch + 1
	rows, err := s.batchRows(ctx, x.ID, next)
	if err != nil {
		return err
	}
	return s.deployRows(ctx, x, rows, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE rollouts SET current_batch = $1, next_batch_at = NULL, updated_at = $2
			WHERE id = $3 AND status = $4 AND current_batch = $5 AND next_batch_at IS NOT NULL`, next, s.clock.Now(), x.ID, StatusRunning,
			x.CurrentBatch)
		if err != nil {
			return fmt.Errorf("move deployment %s to batch %d: %w", x.ID, next, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errRaced
		}
		return nil
	})
}

// finish ends a deployment after its last batch once every device settled: completed when no
// device failed (skipped ones do not count), failed otherwise.
func (s *Service) finish(ctx context.Context, x Deployment) error {
	open, failed, _, err := s.counts(ctx, x, 0)
	if err != nil || open > 0 {
		return err
	}
	status, typ := StatusCompleted, EventCompleted
	if failed > 0 {
		status, typ = StatusFailed, EventFailed
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		res, err := tx.ExecContext(ctx, `UPDATE rollouts SET status = $1, completed_at = $2, updated_at = $2 WHERE id = $3 AND status = $4
			AND current_batch = $5 AND next_batch_at IS NOT NULL`, status, now, x.ID, StatusRunning, x.CurrentBatch)
		if err != nil {
			return fmt.Errorf("finish deployment %s: %w", x.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		one := []Deployment{x}
		if err := withTotals(ctx, tx, one); err != nil {
			return err
		}
		return s.record(ctx, tx, typ, x, map[string]any{"status": status, "totals": one[0].Totals})
	})
}
