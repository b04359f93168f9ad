package security

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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

// Threat statuses.
const (
	ThreatActive      = "active"
	ThreatQuarantined = "quarantined"
	ThreatRemoved     = "removed"
)

// Error codes of threat actions.
const (
	CodeActionPending = "ACTION_PENDING"
	CodeThreatState   = "INVALID_THREAT_STATE"
)

// SecurityThreat is a file a scan flagged.
type SecurityThreat struct {
	ID              string    `json:"id" format:"uuid"`
	OrgID           string    `json:"orgId" format:"uuid"`
	DeviceID        string    `json:"deviceId" format:"uuid"`
	Name            string    `json:"name"`
	Category        string    `json:"category"`
	Severity        string    `json:"severity" enum:"critical,high,medium,low"`
	Status          string    `json:"status" enum:"active,quarantined,removed"`
	FilePath        string    `json:"filePath"`
	SHA256          string    `json:"sha256"`
	Size            int64     `json:"size"`
	Location        string    `json:"location" doc:"Where the file is now: its path, its place in the quarantine, or empty once removed."`
	PendingAction   *string   `json:"pendingAction" enum:"quarantine,remove,restore" doc:"The action sent to the agent and not confirmed yet."`
	LastActionError *string   `json:"lastActionError"`
	DetectedAt      time.Time `json:"detectedAt"`
	LastSeenAt      time.Time `json:"lastSeenAt"`
	UpdatedAt       time.Time `json:"updatedAt"`
}

const threatColumns = `t.id, t.org_id, t.device_id, t.name, t.category, t.severity, t.status, t.file_path, t.sha256, t.size,
	t.location, t.pending_action, t.last_action_error, t.detected_at, t.last_seen_at, t.updated_at, t.partner_id, t.action_seq,
	t.pending_command_id`

// threatRow is a threat with what the actions need.
type threatRow struct {
	SecurityThreat
	partnerID      string
	seq            int
	pendingCommand string
}

func scanThreat(sc store.Scanner) (threatRow, error) {
	var t threatRow
	var pending, lastErr, cmd sql.NullString
	err := sc.Scan(&t.ID, &t.OrgID, &t.DeviceID, &t.Name, &t.Category, &t.Severity, &t.Status, &t.FilePath, &t.SHA256, &t.Size,
		&t.Location, &pending, &lastErr, &t.DetectedAt, &t.LastSeenAt, &t.UpdatedAt, &t.partnerID, &t.seq, &cmd)
	t.PendingAction, t.LastActionError, t.pendingCommand = store.StringPtr(pending), store.StringPtr(lastErr), cmd.String
	t.DetectedAt, t.LastSeenAt, t.UpdatedAt = t.DetectedAt.UTC(), t.LastSeenAt.UTC(), t.UpdatedAt.UTC()
	return t, err
}

func threatFilter(scope access.Scope, a *store.Args) []string {
	return []string{scope.OrgFilter(a, "t.org_id", "t.partner_id"), tenancy.LiveOrg("t.org_id")}
}

func getThreat(ctx context.Context, q store.Querier, scope access.Scope, id string) (threatRow, error) {
	var a store.Args
	return store.ByID(ctx, q, "threat", `SELECT `+threatColumns+` FROM security_threats t`, "t.id", id, &a, threatFilter(scope, &a), scanThreat)
}

// ThreatFilter narrows threat lists.
type ThreatFilter struct {
	OrgID, DeviceID, Status, Severity, Category string
}

// ListThreats lists threats in scope, most recently detected first.
func (s *Service) ListThreats(ctx context.Context, f ThreatFilter, page store.Page) ([]SecurityThreat, string, *int, error) {
	if f.DeviceID != "" {
		if _, err := s.deviceInScope(ctx, f.DeviceID); err != nil {
			return nil, "", nil, err
		}
	}
	var a store.Args
	conds := threatFilter(access.ScopeFrom(ctx), &a)
	for col, v := range map[string]string{"t.org_id": f.OrgID, "t.device_id": f.DeviceID, "t.status": f.Status, "t.severity": f.Severity,
		"t.category": f.Category} {
		if v != "" {
			conds = append(conds, col+" = "+a.Add(v))
		}
	}
	rows, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: threatColumns, From: " FROM security_threats t", Conds: conds,
		Args: &a, SortKey: "t.id", SortID: "t.id", Desc: true}, page, scanThreat, func(t threatRow) (string, string) { return t.ID, t.ID })
	if err != nil {
		return nil, "", nil, fmt.Errorf("list threats: %w", err)
	}
	out := make([]SecurityThreat, len(rows))
	for i, r := range rows {
		out[i] = r.SecurityThreat
	}
	return out, next, total, nil
}

// actionFrom lists the statuses each action may start from, and where it ends.
var actionFrom = map[string]struct {
	from []string
	to   string
	verb string
}{
	agentproto.ThreatQuarantine: {[]string{ThreatActive}, ThreatQuarantined, "quarantined"},
	agentproto.ThreatRestore:    {[]string{ThreatQuarantined}, ThreatActive, "restored"},
	agentproto.ThreatRemove:     {[]string{ThreatActive, ThreatQuarantined}, ThreatRemoved, "removed"},
}

// SecurityThreatAction is the answer to a threat action: the threat (still in its old status,
// with the pending action) and the command that carries the action to the agent.
type SecurityThreatAction struct {
	Threat    SecurityThreat `json:"threat"`
	CommandID string         `json:"commandId" format:"uuid"`
}

// finalCommand reports whether a command ended without its result reaching the threat (it
// timed out or was cancelled), so that its pending action has lapsed.
func finalCommand(status string) bool {
	return status == devices.CommandTimedOut || status == devices.CommandCancelled || status == devices.CommandFailed ||
		status == devices.CommandCompleted
}

// Act queues a threat action. The threat's status moves only when the agent confirms: the
// answer is the threat as it was, with the pending action. A second action while one is
// pending is 409 ACTION_PENDING; an action the status does not allow 409 INVALID_THREAT_STATE.
func (s *Service) Act(ctx context.Context, id, action string) (SecurityThreatAction, error) {
	spec := actionFrom[action]
	scope := access.ScopeFrom(ctx)
	var out SecurityThreatAction
	var cmds []devices.DeviceCommand
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		t, err := getThreat(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if t.PendingAction != nil {
			var status string
			err := tx.QueryRowContext(ctx, `SELECT c.status FROM security_threats t`+devices.CommandJoin("t.pending_command_id")+
				` WHERE t.id = $1`, id).Scan(&status)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("read the pending action of threat %s: %w", id, err)
			}
			if err == nil && !finalCommand(status) {
				return apperr.ConflictCode(CodeActionPending, "a "+*t.PendingAction+" of this threat is under way; wait for the agent's answer")
			}
		}
		allowed := false
		for _, f := range spec.from {
			allowed = allowed || t.Status == f
		}
		if !allowed {
			return apperr.ConflictCode(CodeThreatState, "a "+t.Status+" threat cannot be "+spec.verb)
		}
		owners, err := devices.Owners(ctx, tx, []string{t.DeviceID})
		if err != nil {
			return err
		}
		if o, ok := owners[t.DeviceID]; !ok || o.OrgID != t.OrgID {
			return apperr.ConflictCode("DEVICE_MOVED", "the device left the organization the threat was found in")
		}
		res, err := s.devices.SendBulkIn(systemCtx(ctx), tx, devices.BulkInput{DeviceIDs: []string{t.DeviceID}, Audited: true,
			CommandInput: devices.CommandInput{Type: agentproto.CommandThreatAction,
				Payload: json.RawMessage(store.EncodeJSON(agentproto.ThreatAction{Action: action, FilePath: t.FilePath, SHA256: t.SHA256}))}})
		if err != nil {
			return err
		}
		if err := bulkRefusal(res); err != nil {
			return err
		}
		cmds = res.Commands
		cmd := res.Commands[0].ID
		r, err := tx.ExecContext(ctx, `UPDATE security_threats SET pending_action = $1, pending_command_id = $2, action_seq = action_seq + 1,
			updated_at = $3 WHERE id = $4 AND action_seq = $5`, action, cmd, s.now(), id, t.seq)
		if err != nil {
			return fmt.Errorf("record the action on threat %s: %w", id, err)
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return apperr.ConflictCode(CodeActionPending, "another action on this threat was just started")
		}
		t, err = getThreat(ctx, tx, access.SystemScope(), id)
		if err != nil {
			return err
		}
		out = SecurityThreatAction{Threat: t.SecurityThreat, CommandID: cmd}
		return audit.Record(ctx, tx, audit.Entry{Action: "threat." + action, ResourceType: "threat", ResourceID: id, ResourceName: t.Name,
			PartnerID: t.partnerID, OrgID: t.OrgID, Details: map[string]any{"deviceId": t.DeviceID, "filePath": t.FilePath, "commandId": cmd}})
	})
	if err != nil {
		return out, fmt.Errorf("act on threat: %w", err)
	}
	s.devices.Dispatch(ctx, cmds)
	return out, nil
}

// bulkRefusal turns a device SendBulkIn did not queue a command for into the error to answer.
func bulkRefusal(res devices.BulkResult) error {
	if len(res.Commands) == 1 {
		return nil
	}
	for _, f := range res.Failed {
		if f.Code == apperr.CodeNotFound {
			return apperr.NotFound("device")
		}
		return apperr.ConflictCode(f.Code, f.Reason)
	}
	for _, sk := range res.Skipped {
		return apperr.ConflictCode(sk.Code, sk.Reason)
	}
	return apperr.NotFound("device")
}

// threatEvent is the data of threat.* events.
func threatEvent(t SecurityThreat) map[string]any {
	return map[string]any{"id": t.ID, "deviceId": t.DeviceID, "orgId": t.OrgID, "name": t.Name, "category": t.Category,
		"severity": t.Severity, "status": t.Status, "filePath": t.FilePath, "sha256": t.SHA256, "detectedAt": t.DetectedAt}
}

func (s *Service) recordThreatEvent(ctx context.Context, tx *sql.Tx, typ string, t threatRow) error {
	_, err := events.Record(ctx, tx, events.Event{Type: typ, PartnerID: t.partnerID, OrgID: t.OrgID, ResourceType: "threat",
		ResourceID: t.ID}, threatEvent(t.SecurityThreat))
	return err
}

// onThreatAction records the agent's answer to a threat_action: a success moves the threat's
// status (conditionally: from a status the action starts from, with the command still
// pending), a failure clears the pending action and keeps the error.
func (s *Service) onThreatAction(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error {
	var id, action, status string
	err := tx.QueryRowContext(ctx, `SELECT id, pending_action, status FROM security_threats WHERE pending_command_id = $1 AND device_id = $2`,
		r.CommandID, deviceID).Scan(&id, &action, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find the threat of command %s: %w", r.CommandID, err)
	}
	now := s.now()
	spec := actionFrom[action]
	var res agentproto.ThreatActionResult
	if r.Status == agentproto.ResultCompleted && json.Unmarshal(r.Result, &res) == nil {
		var a store.Args
		q := `UPDATE security_threats SET status = ` + a.Add(spec.to) + `, location = ` + a.Add(res.Location) +
			`, pending_action = NULL, pending_command_id = NULL, last_action_error = NULL, updated_at = ` + a.Add(now) +
			` WHERE id = ` + a.Add(id) + ` AND pending_command_id = ` + a.Add(r.CommandID) + ` AND status IN ` + a.In(spec.from)
		if _, err := tx.ExecContext(ctx, q, a.Values()...); err != nil {
			return fmt.Errorf("move threat %s: %w", id, err)
		}
		t, err := getThreat(ctx, tx, access.SystemScope(), id)
		if err != nil {
			return err
		}
		if t.Status == spec.to {
			if err := s.recordThreatEvent(ctx, tx, "threat."+spec.verb, t); err != nil {
				return err
			}
		}
		return s.restate(ctx, tx, deviceID)
	}
	msg := r.Error
	if msg == "" {
		msg = "the agent answered " + r.Status
	}
	if _, err := tx.ExecContext(ctx, `UPDATE security_threats SET pending_action = NULL, pending_command_id = NULL, last_action_error = $1,
		updated_at = $2 WHERE id = $3 AND pending_command_id = $4`, msg, now, id, r.CommandID); err != nil {
		return fmt.Errorf("record the failed action on threat %s: %w", id, err)
	}
	return nil
}

// recordThreats upserts the threats a scan found; each new one (or one found again after it
// was removed) records threat.detected.
func (s *Service) recordThreats(ctx context.Context, tx *sql.Tx, scanID, partnerID, orgID, deviceID string, found []agentproto.FoundThreat) error {
	now := s.now()
	for _, f := range found {
		sev := f.Severity
		switch sev {
		case "critical", "high", "medium", "low":
		default:
			sev = "medium"
		}
		var id, status string
		err := tx.QueryRowContext(ctx, `SELECT id, status FROM security_threats WHERE device_id = $1 AND sha256 = $2 AND file_path = $3`,
			deviceID, f.SHA256, f.FilePath).Scan(&id, &status)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			id = store.NewID()
			if _, err := tx.ExecContext(ctx, `INSERT INTO security_threats (id, partner_id, org_id, device_id, name, category, severity,
				status, file_path, sha256, size, location, scan_id, detected_at, last_seen_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $9, $12, $13, $13, $13)
				ON CONFLICT (device_id, sha256, file_path) DO NOTHING`, id, partnerID, orgID, deviceID, f.Name, f.Category, sev, ThreatActive,
				f.FilePath, f.SHA256, f.Size, scanID, now); err != nil {
				return fmt.Errorf("record threat: %w", err)
			}
		case err != nil:
			return fmt.Errorf("find threat: %w", err)
		case status == ThreatActive:
			if _, err := tx.ExecContext(ctx, `UPDATE security_threats SET last_seen_at = $1, updated_at = $1 WHERE id = $2`, now, id); err != nil {
				return fmt.Errorf("record threat seen: %w", err)
			}
			continue
		default:
			// Found at its path again: a removed threat is back (a new detection), a quarantined
			// one was put back.
			if _, err := tx.ExecContext(ctx, `UPDATE security_threats SET status = $1, location = file_path, last_seen_at = $2,
				detected_at = CASE WHEN status = 'removed' THEN $2 ELSE detected_at END, updated_at = $2, scan_id = $3 WHERE id = $4`,
				ThreatActive, now, scanID, id); err != nil {
				return fmt.Errorf("record threat found again: %w", err)
			}
			if status != ThreatRemoved {
				continue
			}
		}
		t, err := getThreat(ctx, tx, access.SystemScope(), id)
		if err != nil {
			return err
		}
		if err := s.recordThreatEvent(ctx, tx, "threat.detected", t); err != nil {
			return err
		}
	}
	return nil
}
