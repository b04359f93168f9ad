package scripts

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
	"gale/internal/domains/maintenance"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Execution statuses: pending until the device's agent has it, queued while it waits there
// for its turn, running once its process started, then one of the final states.
const (
	StatusPending   = "pending"
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusTimeout   = "timeout"
	StatusCancelled = "cancelled"
)

// Events an execution records when its result arrives.
const (
	EventCompleted = "script.completed"
	EventFailed    = "script.failed"
)

// ScriptExecution is one run of a script on one device.
type ScriptExecution struct {
	ID             string            `json:"id" format:"uuid"`
	ScriptID       string            `json:"scriptId" format:"uuid"`
	ScriptName     string            `json:"scriptName"`
	ScriptVersion  int               `json:"scriptVersion"`
	BatchID        string            `json:"batchId" format:"uuid" doc:"Executions started by one request share it."`
	DeviceID       string            `json:"deviceId" format:"uuid"`
	OrgID          string            `json:"orgId" format:"uuid"`
	CommandID      string            `json:"commandId" format:"uuid" doc:"The device command that carries it (GET /devices/{id}/commands/{commandId})."`
	Status         string            `json:"status" enum:"pending,queued,running,completed,failed,timeout,cancelled"`
	Parameters     map[string]string `json:"parameters" doc:"The values the script received, as text."`
	RunAs          string            `json:"runAs"`
	ExitCode       *int              `json:"exitCode"`
	Severity       *string           `json:"severity" doc:"The exit-code mapping's severity of a failure."`
	Stdout         *string           `json:"stdout" doc:"While running: what the script printed so far (text only)."`
	Stderr         *string           `json:"stderr"`
	StdoutEncoding string            `json:"stdoutEncoding,omitempty" enum:"base64"`
	StderrEncoding string            `json:"stderrEncoding,omitempty" enum:"base64"`
	Truncated      bool              `json:"truncated" doc:"Output past 1 MiB per stream was dropped."`
	Error          *string           `json:"error"`
	TriggeredBy    *string           `json:"triggeredBy"`
	CreatedAt      time.Time         `json:"createdAt"`
	SentAt         *time.Time        `json:"sentAt"`
	StartedAt      *time.Time        `json:"startedAt"`
	CompletedAt    *time.Time        `json:"completedAt"`
	DurationMs     *int64            `json:"durationMs"`
}

// ScriptRun is a request to run a script on devices.
type ScriptRun struct {
	DeviceIDs  []string       `json:"deviceIds" minItems:"1" maxItems:"500"`
	Parameters map[string]any `json:"parameters,omitempty" doc:"Parameter name to value (string, number or boolean); checked against the script's parameters."`
	RunAs      string         `json:"runAs,omitempty" enum:"system,user,elevated" doc:"Overrides the script's runAs."`
}

// ScriptRunResult reports an execute request per device.
type ScriptRunResult struct {
	BatchID    string             `json:"batchId" format:"uuid"`
	Executions []ScriptExecution  `json:"executions"`
	Skipped    []devices.BulkItem `json:"skipped" doc:"Devices not run on purpose, each with its code: another OS than the script's (NOT_SUPPORTED_ON_OS), a maintenance window (MAINTENANCE_WINDOW)."`
	Failed     []devices.BulkItem `json:"failed" doc:"Devices not found (or out of the script's scope)."`
}

const executionColumns = `e.id, e.script_id, s.name, e.script_version, e.batch_id, e.device_id, e.org_id, e.command_id, e.parameters,
	e.run_as, e.outcome, e.severity, e.triggered_by_email, e.created_at, `

const executionFrom = ` FROM script_executions e JOIN scripts s ON s.id = e.script_id`

func scanExecution(row store.Scanner) (ScriptExecution, error) {
	var x ScriptExecution
	var params string
	var outcome, severity, by sql.NullString
	c, err := devices.ScanWithCommand(row, &x.ID, &x.ScriptID, &x.ScriptName, &x.ScriptVersion, &x.BatchID, &x.DeviceID, &x.OrgID,
		&x.CommandID, &params, &x.RunAs, &outcome, &severity, &by, &x.CreatedAt)
	if err != nil {
		return x, err
	}
	if err := json.Unmarshal([]byte(params), &x.Parameters); err != nil {
		return x, fmt.Errorf("read execution parameters: %w", err)
	}
	x.Severity, x.TriggeredBy = store.StringPtr(severity), store.StringPtr(by)
	x.Status = executionStatus(c, outcome.String)
	x.ExitCode, x.Stdout, x.Stderr, x.StdoutEncoding, x.StderrEncoding = c.ExitCode, c.Stdout, c.Stderr, c.StdoutEncoding, c.StderrEncoding
	x.Truncated, x.Error, x.SentAt, x.StartedAt, x.CompletedAt, x.DurationMs = c.Truncated, c.Error, c.SentAt, c.StartedAt, c.CompletedAt, c.DurationMs
	return x, nil
}

// executionStatus is an execution's status from its command's state and the outcome its
// exit-code mapping gave the result.
func executionStatus(c devices.DeviceCommand, outcome string) string {
	switch c.Status {
	case devices.CommandQueued:
		return StatusPending
	case devices.CommandSent:
		if c.StartedAt == nil {
			return StatusQueued
		}
		return StatusRunning
	case devices.CommandTimedOut:
		return StatusTimeout
	case devices.CommandCancelled:
		return StatusCancelled
	}
	if outcome != "" {
		return outcome
	}
	return StatusFailed
}

// statusCondition renders the condition keeping executions of a status.
func statusCondition(status string, a *store.Args) (string, error) {
	switch status {
	case StatusPending:
		return "c.status = " + a.Add(devices.CommandQueued), nil
	case StatusQueued:
		return "c.status = " + a.Add(devices.CommandSent) + " AND c.started_at IS NULL", nil
	case StatusRunning:
		return "c.status = " + a.Add(devices.CommandSent) + " AND c.started_at IS NOT NULL", nil
	case StatusTimeout:
		return "c.status = " + a.Add(devices.CommandTimedOut), nil
	case StatusCancelled:
		return "c.status = " + a.Add(devices.CommandCancelled), nil
	case StatusCompleted:
		return "e.outcome = " + a.Add(StatusCompleted), nil
	case StatusFailed:
		return "(e.outcome = " + a.Add(StatusFailed) + " OR (e.outcome IS NULL AND c.status = " + a.Add(devices.CommandFailed) + "))", nil
	}
	return "", apperr.Invalid("status", "status must be one of pending, queued, running, completed, failed, timeout, cancelled")
}

// executionFilter keeps the executions (alias e) of organizations in scope.
func executionFilter(scope access.Scope, a *store.Args) string {
	return scope.OrgFilter(a, "e.org_id", "e.partner_id") + " AND " + tenancy.LiveOrg("e.org_id")
}

// narrowedTo returns ctx whose caller reaches only the devices a script may run on: those of
// its organization, or of its partner for a partner-wide script, within the caller's own scope.
func narrowedTo(ctx context.Context, sc Script) context.Context {
	p := access.PrincipalFrom(ctx)
	if p == nil {
		return ctx
	}
	n := *p
	if sc.OrgID != nil {
		n.Scope = access.Scope{Level: access.LevelOrganization, PartnerID: sc.PartnerID, OrgID: *sc.OrgID}
	} else if p.Scope.IsSystem() {
		n.Scope = access.Scope{Level: access.LevelPartner, PartnerID: sc.PartnerID}
	}
	return access.WithPrincipal(ctx, &n)
}

// scriptEnv checks the values given for a script's parameters and returns them as the
// script's environment.
func scriptEnv(params []ScriptParameter, given map[string]any) (map[string]string, error) {
	var details []apperr.Detail
	env := map[string]string{}
	known := map[string]ScriptParameter{}
	for _, p := range params {
		known[p.Name] = p
	}
	for name := range given {
		if _, ok := known[name]; !ok {
			details = append(details, apperr.Detail{Field: "parameters." + name, Message: "the script has no parameter " + name})
		}
	}
	for _, p := range params {
		v, ok := given[p.Name]
		if !ok || v == nil {
			v = p.DefaultValue
		}
		if v == nil {
			if p.Required {
				details = append(details, apperr.Detail{Field: "parameters." + p.Name, Message: p.Name + " is required"})
			}
			continue
		}
		s, err := paramValue(p, v)
		if err != nil {
			details = append(details, apperr.Detail{Field: "parameters." + p.Name, Message: err.Error()})
			continue
		}
		env[p.Name] = s
	}
	if len(details) > 0 {
		return nil, apperr.InvalidFields(details)
	}
	return env, nil
}

// Execute runs a script on devices: one execution per device, each carried by a run_script
// command, all recorded in one transaction. Devices of another OS than the script's are
// reported, not run.
func (s *Service) Execute(ctx context.Context, scriptID string, in ScriptRun) (ScriptRunResult, error) {
	var out ScriptRunResult
	var cmds []devices.DeviceCommand
	err := s.db.Write(ctx, func(tx *sql.Tx) (err error) {
		out, cmds, err = s.ExecuteIn(ctx, tx, scriptID, in)
		return err
	})
	if err != nil {
		return ScriptRunResult{}, fmt.Errorf("execute script: %w", err)
	}
	s.devices.Dispatch(ctx, cmds)
	return out, nil
}

// ExecuteIn records what Execute does in the caller's transaction, so that a domain starting
// scripts (an automation's run) records its own rows with them; once the transaction has
// committed, the caller hands the commands returned to devices' Dispatch.
func (s *Service) ExecuteIn(ctx context.Context, tx *sql.Tx, scriptID string, in ScriptRun) (ScriptRunResult, []devices.DeviceCommand, error) {
	if len(in.DeviceIDs) == 0 || len(in.DeviceIDs) > MaxExecuteDevices {
		return ScriptRunResult{}, nil, apperr.Invalid("deviceIds", "name 1 to 500 devices")
	}
	sc, err := getScript(ctx, tx, access.ScopeFrom(ctx), scriptID)
	if err != nil {
		return ScriptRunResult{}, nil, err
	}
	runAs := sc.RunAs
	if in.RunAs != "" {
		runAs = in.RunAs
	}
	env, err := scriptEnv(sc.Parameters, in.Parameters)
	if err != nil {
		return ScriptRunResult{}, nil, err
	}
	if err := refuseLanguage(narrowedTo(ctx, sc), tx, sc, in.DeviceIDs); err != nil {
		return ScriptRunResult{}, nil, err
	}
	targets, held, err := s.notHeld(narrowedTo(ctx, sc), tx, in.DeviceIDs)
	if err != nil {
		return ScriptRunResult{}, nil, err
	}
	payload := store.EncodeJSON(agentproto.RunScript{Language: sc.Language, Script: sc.Content, Env: env, MaxOutputBytes: devices.DefaultOutputBytes,
		RunAs: runAs})
	res := devices.BulkResult{}
	if len(targets) > 0 {
		res, err = s.devices.SendBulkIn(narrowedTo(ctx, sc), tx, devices.BulkInput{DeviceIDs: targets, OnlyOS: sc.OSTypes, Audited: true,
			CommandInput: devices.CommandInput{Type: agentproto.CommandRunScript, Payload: json.RawMessage(payload), TimeoutSeconds: sc.TimeoutSeconds}})
		if err != nil {
			return ScriptRunResult{}, nil, err
		}
	}
	res.Skipped = append(res.Skipped, held...)
	out := ScriptRunResult{BatchID: store.NewID(), Executions: []ScriptExecution{}, Skipped: res.Skipped, Failed: res.Failed}
	if err := insertExecutions(ctx, tx, sc, out.BatchID, res.Commands, store.EncodeJSON(env), runAs, s.clock.Now()); err != nil {
		return ScriptRunResult{}, nil, err
	}
	if len(res.Commands) > 0 {
		if out.Executions, err = s.batch(ctx, tx, out.BatchID); err != nil {
			return ScriptRunResult{}, nil, err
		}
	}
	deviceIDs := make([]string, len(res.Commands))
	for i, c := range res.Commands {
		deviceIDs[i] = c.DeviceID
	}
	err = audit.Record(ctx, tx, audit.Entry{Action: "script.execute", ResourceType: "script", ResourceID: sc.ID, ResourceName: sc.Name,
		PartnerID: sc.PartnerID, OrgID: store.Deref(sc.OrgID), Details: map[string]any{"batchId": out.BatchID, "version": sc.Version,
			"deviceIds": deviceIDs, "skipped": len(res.Skipped), "failed": len(res.Failed)}})
	if err != nil {
		return ScriptRunResult{}, nil, err
	}
	return out, res.Commands, nil
}

// refuseLanguage refuses (400 NOT_SUPPORTED_ON_OS) to run a script on devices in scope whose
// system is among the script's but lacks its language: a script saved before its systems were
// checked against its language (a PowerShell script for Linux) would only fail on their agents.
// Devices of systems the script is not written for are left to be skipped.
func refuseLanguage(ctx context.Context, q store.Querier, sc Script, ids []string) error {
	var lacking []string
	for _, o := range sc.OSTypes {
		if !slices.Contains(agentproto.ScriptLanguages[o], sc.Language) {
			lacking = append(lacking, o)
		}
	}
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !store.ValidID(id) })
	if len(lacking) == 0 || len(ids) == 0 {
		return nil
	}
	var a store.Args
	found, err := store.QueryAll(ctx, q, devices.SelectLive("d.id, d.hostname, d.os_type", "", "d.id IN "+a.In(ids), "d.os_type IN "+a.In(lacking),
		access.ScopeFrom(ctx).OrgFilter(&a, "d.org_id", "d.partner_id"), tenancy.LiveOrg("d.org_id"))+" ORDER BY d.hostname, d.id",
		a.Values(), func(row store.Scanner) ([3]string, error) {
			var d [3]string
			return d, row.Scan(&d[0], &d[1], &d[2])
		})
	if err != nil || len(found) == 0 {
		return err
	}
	names := make([]string, len(found))
	details := make([]apperr.Detail, len(found))
	for i, d := range found {
		names[i] = d[1] + " (" + d[0] + ")"
		details[i] = apperr.Detail{Field: "deviceIds", Message: names[i] + " runs " + d[2] + ", which has no " + sc.Language + " (there: " +
			strings.Join(agentproto.ScriptLanguages[d[2]], ", ") + ")"}
	}
	if len(names) > 10 {
		names = append(names[:10], fmt.Sprintf("and %d more", len(found)-10))
	}
	return &apperr.Error{Kind: apperr.KindInvalid, Code: agentproto.ErrNotSupported, Details: details,
		Message: sc.Language + " does not run on " + strings.Join(lacking, " or ") + ": " + strings.Join(names, ", ") +
			"; leave these devices out, or change the script's systems"}
}

// notHeld splits the devices into those to run on and those a maintenance window holds back
// (skipped, MAINTENANCE_WINDOW); when every device is held the execution is refused (409).
// Only devices in the caller's scope count as held: others go on to be refused as unknown.
func (s *Service) notHeld(ctx context.Context, tx *sql.Tx, ids []string) ([]string, []devices.BulkItem, error) {
	if s.maintenance == nil {
		return ids, nil, nil
	}
	held, err := s.maintenance.Held(ctx, tx, maintenance.Scripts, ids)
	if err != nil {
		return nil, nil, err
	}
	var heldIDs []string
	for _, id := range ids {
		if held[id] {
			heldIDs = append(heldIDs, id)
		}
	}
	if len(heldIDs) == 0 {
		return ids, nil, nil
	}
	owners, err := devices.Owners(ctx, tx, heldIDs)
	if err != nil {
		return nil, nil, err
	}
	scope := access.ScopeFrom(ctx)
	var run []string
	var skipped []devices.BulkItem
	for _, id := range ids {
		if o, ok := owners[id]; ok && held[id] && scope.CanSeeOrg(o.OrgID, o.PartnerID) {
			skipped = append(skipped, devices.BulkItem{DeviceID: id, Code: codeMaintenanceWindow,
				Reason: "a maintenance window in effect holds scripts back from this device"})
		} else {
			run = append(run, id)
		}
	}
	if len(run) == 0 {
		return nil, nil, apperr.ConflictCode(codeMaintenanceWindow, "every device is in a maintenance window that holds scripts back")
	}
	return run, skipped, nil
}

// codeMaintenanceWindow marks devices, or a whole execution, held back by a maintenance window.
const codeMaintenanceWindow = "MAINTENANCE_WINDOW"

// insertExecutions records the executions a batch's commands carry, created at now, in
// statements of up to 100 rows.
func insertExecutions(ctx context.Context, tx *sql.Tx, sc Script, batchID string, cmds []devices.DeviceCommand, params, runAs string,
	now time.Time) error {
	var by any
	if p := access.PrincipalFrom(ctx); p != nil {
		by = p.Email
	}
	who := principalID(ctx)
	for first := 0; first < len(cmds); first += 100 {
		var a store.Args
		rows := make([]string, 0, 100)
		for _, c := range cmds[first:min(first+100, len(cmds))] {
			rows = append(rows, "("+strings.Join([]string{a.Add(store.NewID()), a.Add(sc.PartnerID), a.Add(c.OrgID), a.Add(sc.ID),
				a.Add(sc.Version), a.Add(batchID), a.Add(c.DeviceID), a.Add(c.ID), a.Add(params), a.Add(runAs),
				a.Add(mappingValue(sc.ExitCodeSeverityMapping)), a.Add(who), a.Add(by), a.Add(now)}, ", ")+")")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO script_executions (id, partner_id, org_id, script_id, script_version, batch_id,
			device_id, command_id, parameters, run_as, exit_code_mapping, triggered_by, triggered_by_email, created_at) VALUES `+
			strings.Join(rows, ", "), a.Values()...); err != nil {
			return fmt.Errorf("insert script executions: %w", err)
		}
	}
	return nil
}

func principalID(ctx context.Context) any {
	if p := access.PrincipalFrom(ctx); p != nil {
		return p.ID
	}
	return nil
}

// batch reads the executions of a batch, in creation order.
func (s *Service) batch(ctx context.Context, q store.Querier, batchID string) ([]ScriptExecution, error) {
	out, err := store.QueryAll(ctx, q, `SELECT `+executionColumns+devices.CommandColumns+executionFrom+devices.CommandJoin("e.command_id")+
		` WHERE e.batch_id = $1 ORDER BY e.id`, []any{batchID}, scanExecution)
	if err != nil {
		return nil, fmt.Errorf("read batch %s: %w", batchID, err)
	}
	return out, nil
}

// ExecutionFilter narrows a list of executions.
type ExecutionFilter struct {
	Status   string
	DeviceID string
	BatchID  string
}

// ListExecutions lists a script's executions, newest first.
func (s *Service) ListExecutions(ctx context.Context, scriptID string, f ExecutionFilter, page store.Page) ([]ScriptExecution, string, *int, error) {
	scope := access.ScopeFrom(ctx)
	if _, err := s.scriptWithHistory(ctx, scope, scriptID); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"e.script_id = " + a.Add(scriptID), executionFilter(scope, &a)}
	if f.Status != "" {
		cond, err := statusCondition(f.Status, &a)
		if err != nil {
			return nil, "", nil, err
		}
		conds = append(conds, cond)
	}
	if f.DeviceID != "" {
		conds = append(conds, "e.device_id = "+a.Add(f.DeviceID))
	}
	if f.BatchID != "" {
		conds = append(conds, "e.batch_id = "+a.Add(f.BatchID))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: executionColumns + devices.CommandColumns,
		From: executionFrom + devices.CommandJoin("e.command_id"), Conds: conds, Args: &a, SortKey: "e.id", SortID: "e.id", Desc: true},
		page, scanExecution, func(x ScriptExecution) (string, string) { return x.ID, x.ID })
}

// scriptWithHistory checks that a script, live or deleted, is in scope: a deleted script's
// executions stay readable.
func (s *Service) scriptWithHistory(ctx context.Context, scope access.Scope, id string) (string, error) {
	var a store.Args
	return store.ByID(ctx, s.db, "script", `SELECT s.name FROM scripts s`, "s.id", id, &a,
		[]string{tenancy.SharedRowsFilter(scope, &a, "s.org_id", "s.partner_id")}, func(row store.Scanner) (string, error) {
			var name string
			return name, row.Scan(&name)
		})
}

// GetExecution returns an execution in scope.
func (s *Service) GetExecution(ctx context.Context, id string) (ScriptExecution, error) {
	return getExecution(ctx, s.db, access.ScopeFrom(ctx), id)
}

func getExecution(ctx context.Context, q store.Querier, scope access.Scope, id string) (ScriptExecution, error) {
	var a store.Args
	return store.ByID(ctx, q, "execution", `SELECT `+executionColumns+devices.CommandColumns+executionFrom+devices.CommandJoin("e.command_id"),
		"e.id", id, &a, []string{executionFilter(scope, &a)}, scanExecution)
}

// CancelExecution cancels an execution that has not ended: a pending one at once, a queued
// or running one too, its process group killed on the agent. An ended one is 409; a cancel
// racing the result has one winner.
func (s *Service) CancelExecution(ctx context.Context, id string) (ScriptExecution, error) {
	x, err := s.GetExecution(ctx, id)
	if err != nil {
		return x, err
	}
	switch x.Status {
	case StatusPending, StatusQueued, StatusRunning:
	default:
		return x, apperr.ConflictCode("EXECUTION_ENDED", "the execution already ended ("+x.Status+")")
	}
	if _, err := s.devices.CancelCommand(ctx, x.DeviceID, x.CommandID); err != nil {
		if ae, ok := apperr.As(err); ok && ae.Kind == apperr.KindConflict {
			return x, apperr.ConflictCode("EXECUTION_ENDED", "the execution ended before it could be cancelled")
		}
		return x, err
	}
	return s.GetExecution(ctx, id)
}

// recordOutcome runs in the transaction that records a run_script result: it reads the exit
// code with the execution's mapping and records the script.completed or script.failed event.
// Results of run_script commands that no execution carries (sent directly) change nothing.
func recordOutcome(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error {
	var id, scriptID, partnerID, orgID, name string
	var mapping sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT e.id, e.script_id, e.partner_id, e.org_id, e.exit_code_mapping, s.name
		FROM script_executions e JOIN scripts s ON s.id = e.script_id WHERE e.command_id = $1 AND e.device_id = $2`,
		r.CommandID, deviceID).Scan(&id, &scriptID, &partnerID, &orgID, &mapping, &name)
	if errors.Is(err, sql.ErrNoRows) || (r.Status != agentproto.ResultCompleted && r.Status != agentproto.ResultFailed) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load the execution of command %s: %w", r.CommandID, err)
	}
	status, severity := StatusFailed, (*string)(nil)
	if r.Status == agentproto.ResultCompleted || (r.Status == agentproto.ResultFailed && r.ExitCode != nil) {
		var m map[string]*string
		if mapping.Valid && mapping.String != "" {
			if err := json.Unmarshal([]byte(mapping.String), &m); err != nil {
				return fmt.Errorf("read the exit-code mapping of execution %s: %w", id, err)
			}
		}
		exit := 0
		if r.ExitCode != nil {
			exit = *r.ExitCode
		}
		status, severity = outcome(m, exit)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE script_executions SET outcome = $1, severity = $2 WHERE id = $3`, status, severity, id); err != nil {
		return fmt.Errorf("record the outcome of execution %s: %w", id, err)
	}
	typ := EventCompleted
	if status == StatusFailed {
		typ = EventFailed
	}
	_, err = events.Record(ctx, tx, events.Event{Type: typ, PartnerID: partnerID, OrgID: orgID, ResourceType: "script_execution",
		ResourceID: id}, map[string]any{"executionId": id, "scriptId": scriptID, "scriptName": name, "deviceId": deviceID,
		"status": status, "exitCode": r.ExitCode, "severity": severity, "error": strings.TrimSpace(r.Error)})
	return err
}
