package devices

import (
	"context"
	"database/sql"
	"encoding/json"

	"gale/internal/access"
	"gale/internal/agentproto"
	"gale/internal/apperr"
	"gale/internal/audit"
	"gale/internal/store"
)

// cancelTimeout is how long the agent may take to withdraw a scheduled reboot or shutdown.
const cancelTimeout = 60

// cancellableOnAgent are the kinds an agent can still withdraw once it has them: they wait
// out their delay on the agent before anything happens.
var cancellableOnAgent = map[string]bool{agentproto.CommandReboot: true, agentproto.CommandShutdown: true}

// CancelCommand cancels a command that has not ended: a queued one of any kind never goes
// out; a sent reboot or shutdown is withdrawn on the agent too, by a cancel_command sent after
// it. Either ends cancelled at once; a result the agent reports for it later is ignored.
// Other sent commands are already running and cannot be cancelled (409).
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
		if !store.ValidID(commandID) {
			return apperr.NotFound("command")
		}
		if c, err = getCommand(ctx, tx, deviceID, commandID); err != nil {
			return err
		}
		switch {
		case c.Status != CommandQueued && c.Status != CommandSent:
			return apperr.Conflict("the command already ended: it is " + c.Status)
		case c.Type == agentproto.CommandCancel:
			return apperr.ConflictCode("NOT_CANCELLABLE", "a cancellation cannot itself be cancelled")
		case c.Status == CommandSent && !cancellableOnAgent[c.Type]:
			return apperr.ConflictCode("NOT_CANCELLABLE", "the agent is already running this "+c.Type+
				" command; once sent, only a reboot or shutdown (which waits out its delay) can be cancelled")
		}
		now := store.Now()
		res, err := tx.ExecContext(ctx, `UPDATE device_commands SET status = $1, completed_at = $2
			WHERE id = $3 AND device_id = $4 AND status = $5`, CommandCancelled, now, c.ID, deviceID, c.Status)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			if err != nil {
				return err
			}
			return apperr.Conflict("the command changed state meanwhile; read it again")
		}
		wasSent := c.Status == CommandSent
		details := map[string]any{"commandId": c.ID, "type": c.Type, "status": c.Status}
		c.Status, c.CompletedAt = CommandCancelled, &now
		if wasSent {
			payload, err := json.Marshal(agentproto.CancelCommand{CommandID: c.ID})
			if err != nil {
				return err
			}
			w, _, err := insertCommand(ctx, tx, d, CommandInput{Type: agentproto.CommandCancel}, string(payload), cancelTimeout, live && !queued)
			if err != nil {
				return err
			}
			withdrawal, details["cancellationId"] = &w, w.ID
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "device.command.cancel", ResourceType: "device", ResourceID: d.ID,
			ResourceName: d.Hostname, PartnerID: d.PartnerID, OrgID: d.OrgID, Details: details})
	})
	if err != nil {
		return DeviceCommand{}, err
	}
	if withdrawal != nil {
		s.dispatch(ctx, withdrawal)
	}
	return c, nil
}
