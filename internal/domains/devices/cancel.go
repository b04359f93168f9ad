package devices

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// CancelPolicy says how a command its agent already has (sent) is cancelled. A queued command
// of any kind is cancelled at once: it never goes out.
type CancelPolicy int

const (
	// CancelRefused: once sent, the command cannot be cancelled (409 NOT_CANCELLABLE), e.g.
	// refresh_inventory.
	CancelRefused CancelPolicy = iota
	// CancelStops: the command ends cancelled at once, and a cancel_command tells the agent to
	// stop it (run_script: its process tree is killed). A result it reports later is ignored.
	CancelStops
	// CancelConfirmed: a cancel_command asks the agent to withdraw the command, which stays
	// sent until the agent answers: withdrawn, the command ends cancelled; too late (the
	// machine is already going down), it ends as what really happens (reboot, shutdown).
	CancelConfirmed
)

// cancelTimeout is how long the agent may take to carry out a cancel_command.
const cancelTimeout = 60

// CancelCommand cancels a command that has not ended, as its kind's CancelSent says once
// the agent has it. A command already final is a 409 CONFLICT: of a cancellation racing the
// command's result exactly one wins, decided by a conditional update, and a result that comes
// after a cancellation is ignored.
func (s *Service) CancelCommand(ctx context.Context, deviceID, commandID string) (DeviceCommand, error) {
	scope := access.ScopeFrom(ctx)
	live := s.notifier.Connected(deviceID)
	var c DeviceCommand
	var withdrawal *DeviceCommand
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		d, queued, err := s.getActiveToCommand(ctx, tx, scope, deviceID)
		if err != nil {
			return err
		}
		if c, err = getCommand(ctx, tx, deviceID, commandID); err != nil {
			return err
		}
		policy := CancelStops
		switch {
		case c.Status != CommandQueued && c.Status != CommandSent:
			return apperr.Conflict("the command already ended: it is " + c.Status)
		case c.Type == agentproto.CommandCancel:
			return apperr.ConflictCode("NOT_CANCELLABLE", "a cancellation cannot itself be cancelled")
		case c.Status == CommandSent:
			policy = s.kinds[c.Type].CancelSent
		}
		if policy == CancelRefused {
			return apperr.ConflictCode("NOT_CANCELLABLE", "the agent already has this "+c.Type+" command, which cannot be cancelled once sent")
		}
		// The update decides against a result or a delivery racing the cancellation: it
		// applies only to the state read. A confirmed cancellation leaves the state as it is
		// but still holds the row, so a result waits until the cancel_command is recorded.
		now := s.clock.Now()
		status, completed := CommandCancelled, &now
		if c.Status == CommandSent && policy == CancelConfirmed {
			status, completed = c.Status, nil
		}
		res, err := tx.ExecContext(ctx, `UPDATE device_commands SET status = $1, completed_at = $2
			WHERE id = $3 AND device_id = $4 AND status = $5`, status, completed, c.ID, deviceID, c.Status)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			if err != nil {
				return err
			}
			return apperr.Conflict("the command changed state meanwhile; read it again")
		}
		details := map[string]any{"commandId": c.ID, "type": c.Type, "status": c.Status}
		if c.Status == CommandSent {
			payload, err := json.Marshal(agentproto.CancelCommand{CommandID: c.ID})
			if err != nil {
				return err
			}
			w, _, err := insertCommand(ctx, tx, d, CommandInput{Type: agentproto.CommandCancel}, string(payload), cancelTimeout,
				live && !queued, now)
			if err != nil {
				return err
			}
			withdrawal, details["cancellationId"] = &w, w.ID
		}
		c.Status, c.CompletedAt = status, completed
		return audit.Record(ctx, tx, audit.Entry{Action: "device.command.cancel", ResourceType: "device", ResourceID: d.ID,
			ResourceName: d.Hostname, PartnerID: d.PartnerID, OrgID: d.OrgID, Details: details})
	})
	if err != nil {
		return DeviceCommand{}, fmt.Errorf("cancel command %s of device %s: %w", commandID, deviceID, err)
	}
	if withdrawal != nil {
		s.dispatch(ctx, withdrawal)
	}
	return c, nil
}

// confirmCancellation ends cancelled the command a completed cancel_command withdrew on the
// agent (a CancelConfirmed kind), unless it already ended. tx records the cancel_command's
// result.
func confirmCancellation(ctx context.Context, tx *sql.Tx, deviceID, payload string, now time.Time) error {
	var cc agentproto.CancelCommand
	if err := json.Unmarshal([]byte(payload), &cc); err != nil || !store.ValidID(cc.CommandID) {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE device_commands SET status = $1, completed_at = $2 WHERE id = $3 AND device_id = $4
		AND status IN ($5, $6)`, CommandCancelled, now, cc.CommandID, deviceID, CommandQueued, CommandSent)
	return err
}
