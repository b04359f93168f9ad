package automations

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/alerts"
	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/scripts"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
)

const runColumns = `r.id, r.automation_id, r.partner_id, r.org_id, r.status, r.triggered_by, r.trigger_event_id, r.scheduled_for, r.payload,
	r.current_action, r.device_ids, r.definition, r.depth, r.error, r.created_by, r.started_at, r.completed_at`

// runRow is a run with what its progress needs.
type runRow struct {
	AutomationRun
	partnerID string
	def       definition
	// deviceIDs are the devices the run acts on; nil until its first action starts.
	deviceIDs []string
	depth     int
}

func scanRun(row store.Scanner) (runRow, error) {
	var r runRow
	var org, event, payload, devs, errMsg, by sql.NullString
	var sched, done sql.NullTime
	var def string
	err := row.Scan(&r.ID, &r.AutomationID, &r.partnerID, &org, &r.Status, &r.TriggeredBy, &event, &sched, &payload, &r.CurrentAction,
		&devs, &def, &r.depth, &errMsg, &by, &r.StartedAt, &done)
	if err != nil {
		return r, err
	}
	r.OrgID, r.TriggerEventID, r.Error, r.CreatedBy = store.StringPtr(org), store.StringPtr(event), store.StringPtr(errMsg), store.StringPtr(by)
	r.ScheduledFor, r.CompletedAt = store.TimePtr(sched), store.TimePtr(done)
	if err := json.Unmarshal([]byte(def), &r.def); err != nil {
		return r, fmt.Errorf("read run %s: %w", r.ID, err)
	}
	if payload.Valid {
		if err := json.Unmarshal([]byte(payload.String), &r.Payload); err != nil {
			return r, fmt.Errorf("read run %s payload: %w", r.ID, err)
		}
	}
	if devs.Valid {
		if err := json.Unmarshal([]byte(devs.String), &r.deviceIDs); err != nil {
			return r, fmt.Errorf("read run %s devices: %w", r.ID, err)
		}
		r.DeviceCount = len(r.deviceIDs)
	}
	return r, nil
}

func runFilter(scope access.Scope, a *store.Args) string {
	return scope.OrgFilter(a, "r.org_id", "r.partner_id")
}

func loadRun(ctx context.Context, q store.Querier, scope access.Scope, id string) (runRow, error) {
	var a store.Args
	return store.ByID(ctx, q, "run", `SELECT `+runColumns+` FROM automation_runs r`, "r.id", id, &a, []string{runFilter(scope, &a)}, scanRun)
}

// GetRun returns a run in scope with its steps.
func (s *Service) GetRun(ctx context.Context, id string) (AutomationRun, error) {
	r, err := loadRun(ctx, s.db, access.ScopeFrom(ctx), id)
	if err != nil {
		return AutomationRun{}, err
	}
	r.Steps, err = s.steps(ctx, s.db, r.ID, -1)
	return r.AutomationRun, err
}

// ListRuns lists an automation's runs, newest first (without their steps).
func (s *Service) ListRuns(ctx context.Context, automationID, status string, page store.Page) ([]AutomationRun, string, *int, error) {
	if _, err := s.Get(ctx, automationID); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"r.automation_id = " + a.Add(automationID), runFilter(access.ScopeFrom(ctx), &a)}
	if status != "" {
		conds = append(conds, "r.status = "+a.Add(status))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: runColumns, From: " FROM automation_runs r", Conds: conds, Args: &a,
		SortKey: "r.id", SortID: "r.id", Desc: true}, page, func(row store.Scanner) (AutomationRun, error) {
		r, err := scanRun(row)
		return r.AutomationRun, err
	}, func(r AutomationRun) (string, string) { return r.ID, r.ID })
}

const stepColumns = `st.id, st.action_index, st.action_type, st.device_id, st.status, st.execution_id, st.command_id, st.alert_id,
	st.exit_code, st.output, st.error, st.started_at, st.completed_at, COALESCE(st.batch_id, '')`

func scanStep(row store.Scanner) (AutomationRunStep, error) {
	var st AutomationRunStep
	var dev, exec, cmd, alert, out, errMsg sql.NullString
	var exit sql.NullInt64
	var done sql.NullTime
	err := row.Scan(&st.ID, &st.ActionIndex, &st.ActionType, &dev, &st.Status, &exec, &cmd, &alert, &exit, &out, &errMsg, &st.StartedAt, &done,
		&st.batchID)
	st.DeviceID, st.ExecutionID, st.CommandID, st.AlertID = store.StringPtr(dev), store.StringPtr(exec), store.StringPtr(cmd), store.StringPtr(alert)
	st.Output, st.Error, st.CompletedAt = store.StringPtr(out), store.StringPtr(errMsg), store.TimePtr(done)
	if exit.Valid {
		n := int(exit.Int64)
		st.ExitCode = &n
	}
	return st, err
}

// steps reads a run's steps, of one action (or all when action is -1), in order.
func (s *Service) steps(ctx context.Context, q store.Querier, runID string, action int) ([]AutomationRunStep, error) {
	query := `SELECT ` + stepColumns + ` FROM automation_run_steps st WHERE st.run_id = $1`
	args := []any{runID}
	if action >= 0 {
		query += ` AND st.action_index = $2`
		args = append(args, action)
	}
	out, err := store.QueryAll(ctx, q, query+` ORDER BY st.action_index, st.id`, args, scanStep)
	if err != nil {
		return nil, fmt.Errorf("read run %s steps: %w", runID, err)
	}
	return out, nil
}

// start says how a run begins.
type start struct {
	by           string
	eventID      string
	originRunID  string
	depth        int
	scheduledFor *time.Time
	payload      map[string]any
	// onlyDevice narrows the run to one device (named by its event or payload).
	onlyDevice string
	// conditions: whether the automation's conditions apply (all but run).
	conditions bool
}

// insertRun records a new run of x in tx, with its automation.started event and audit entry
// (the actor is ctx's). A schedule run whose occurrence another node already started is not
// inserted (false).
func (s *Service) insertRun(ctx context.Context, tx *sql.Tx, x Automation, st start) (string, bool, error) {
	def := definition{Actions: x.Actions, Targets: x.Targets, OnFailure: x.OnFailure, NotifyChannelIDs: x.NotifyChannelIDs,
		Name: x.Name, OnlyDevice: st.onlyDevice, Conditions: []AutomationCondition{}}
	if st.conditions {
		def.Conditions = x.Conditions
	}
	var payload any
	if st.payload != nil {
		payload = store.EncodeJSON(st.payload)
	}
	id, now := store.NewID(), s.clock.Now()
	// Touching the automation first takes its row: a delete waits for this run, or wins and
	// this run does not start.
	res, err := tx.ExecContext(ctx, `UPDATE automations SET last_run_at = $1 WHERE id = $2`, now, x.ID)
	if err != nil {
		return "", false, fmt.Errorf("mark automation %s run: %w", x.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return "", false, apperr.NotFound("automation")
	}
	var sched any
	if st.scheduledFor != nil {
		sched = *st.scheduledFor
	}
	res, err = tx.ExecContext(ctx, `INSERT INTO automation_runs (id, automation_id, partner_id, org_id, status, triggered_by,
		trigger_event_id, origin_run_id, depth, payload, definition, current_action, scheduled_for, created_by, started_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, -1, $12, $13, $14) ON CONFLICT (automation_id, scheduled_for) DO NOTHING`,
		id, x.ID, x.PartnerID, x.OrgID, RunRunning, st.by, store.NullIfEmpty(st.eventID), store.NullIfEmpty(st.originRunID), st.depth,
		payload, store.EncodeJSON(def), sched, access.ActorName(ctx), now)
	if err != nil {
		return "", false, fmt.Errorf("insert run of automation %s: %w", x.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return "", false, nil
	}
	org := store.Deref(x.OrgID)
	if _, err := events.Record(ctx, tx, events.Event{Type: EventStarted, PartnerID: x.PartnerID, OrgID: org, ResourceType: "automation_run",
		ResourceID: id}, map[string]any{"automationId": x.ID, "automationName": x.Name, "runId": id, "triggeredBy": st.by,
		"status": RunRunning, "depth": st.depth}); err != nil {
		return "", false, fmt.Errorf("record start of run %s: %w", id, err)
	}
	return id, true, audit.Record(ctx, tx, audit.Entry{Action: "automation.run", ResourceType: "automation", ResourceID: x.ID,
		ResourceName: x.Name, PartnerID: x.PartnerID, OrgID: org, Details: map[string]any{"runId": id, "triggeredBy": st.by}})
}

// errDisabled answers a request to start a disabled automation.
var errDisabled = apperr.BadRequest("AUTOMATION_DISABLED", "the automation is disabled; enable it first")

// errFilterMismatch answers a trigger whose payload the event trigger's filter would not let
// through: the event it stands for would not have fired the automation.
var errFilterMismatch = &apperr.Error{Kind: apperr.KindUnprocessable, Code: "TRIGGER_FILTER_MISMATCH",
	Message: "the payload does not match the trigger's filter, so the event it describes would not fire this automation; nothing ran"}

// Start begins a run of an automation at a technician's request: run (immediately, without
// the conditions) or trigger (as its trigger would fire it: conditions apply, and a deviceId
// in the payload narrows it to that device). It returns the run once its first action started.
func (s *Service) Start(ctx context.Context, id string, by string, in AutomationRunStart) (AutomationRun, error) {
	var runID string
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		x, err := s.get(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		if !x.Enabled {
			return errDisabled
		}
		st := start{by: by, payload: in.Payload, conditions: by == StartedByTrigger}
		if st.conditions && x.Trigger.Type == TriggerEvent && !matches(x.Trigger.Filter, eventFacts(events.Event{}, in.Payload)) {
			return errFilterMismatch
		}
		if st.conditions {
			if dev, ok := in.Payload["deviceId"].(string); ok {
				if !store.ValidID(dev) {
					return apperr.Invalid("payload.deviceId", "not a valid ID")
				}
				st.onlyDevice = dev
			}
		}
		runID, _, err = s.insertRun(ctx, tx, x, st)
		return err
	})
	if err != nil {
		return AutomationRun{}, fmt.Errorf("start automation run: %w", err)
	}
	s.advance(ctx, runID)
	return s.GetRun(ctx, runID)
}

// Wake makes this node's runner look at running runs now.
func (s *Service) Wake() { s.runner.Wake() }

// runnerEvery is how often a node's runner looks at running runs when nobody woke it.
const runnerEvery = time.Second

// StartRunner starts this node's runner: it moves running runs on (steps that ended, the
// next action, the end) until StopRunner. Every node runs one; each move is a conditional
// update, so two nodes never do the same work twice.
func (s *Service) StartRunner(ctx context.Context) { s.runner.Start(ctx) }

// StopRunner stops the runner and waits for it.
func (s *Service) StopRunner() { s.runner.Stop() }

// AdvanceAll moves every running run on.
func (s *Service) AdvanceAll(ctx context.Context) error {
	ids, err := store.QueryStrings(ctx, s.db, `SELECT id FROM automation_runs WHERE status = $1 ORDER BY id LIMIT 500`, RunRunning)
	if err != nil {
		return fmt.Errorf("list running runs: %w", err)
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.advance(ctx, id)
	}
	return nil
}

// advance moves a run on as far as it can now; failures are logged and retried on the next round.
func (s *Service) advance(ctx context.Context, runID string) {
	if err := s.advanceRun(ctx, runID); err != nil && ctx.Err() == nil {
		s.logger.WarnContext(ctx, "advance automation run", "run", runID, "error", err)
	}
}

func (s *Service) advanceRun(ctx context.Context, runID string) error {
	for {
		r, err := loadRun(ctx, s.db, access.SystemScope(), runID)
		if err != nil || r.Status != RunRunning {
			return err
		}
		actx := access.WithPrincipal(ctx, actorFor(r.AutomationID, r.def.Name, r.partnerID, r.OrgID))
		if r.CurrentAction >= 0 {
			steps, err := s.refreshSteps(actx, r)
			if err != nil {
				return err
			}
			if slices.ContainsFunc(steps, func(st AutomationRunStep) bool { return st.Status == StepRunning }) {
				return nil
			}
			failed := slices.ContainsFunc(steps, func(st AutomationRunStep) bool { return st.Status == StepFailed })
			if (failed && r.def.OnFailure != OnFailureContinue) || r.CurrentAction == len(r.def.Actions)-1 {
				return s.finish(actx, r, "")
			}
		}
		devs, resolveErr := r.deviceIDs, error(nil)
		if devs == nil {
			devs, resolveErr = s.resolveDevices(actx, r)
		}
		if resolveErr != nil {
			if _, ok := apperr.As(resolveErr); !ok {
				return resolveErr
			}
			return s.finish(actx, r, describe(resolveErr))
		}
		next := r.CurrentAction + 1
		res, err := s.db.ExecContext(ctx, `UPDATE automation_runs SET current_action = $1, device_ids = COALESCE(device_ids, $2)
			WHERE id = $3 AND current_action = $4 AND status = $5`, next, store.EncodeJSON(devs), r.ID, r.CurrentAction, RunRunning)
		if err != nil {
			return fmt.Errorf("claim action %d of run %s: %w", next, r.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // another node moved it on
		}
		if err := s.perform(actx, r, next, devs); err != nil {
			return err
		}
	}
}

// resolveDevices lists the devices a run acts on: its targets (or the one device its event
// or payload named, when within them), those meeting its conditions, outside maintenance.
func (s *Service) resolveDevices(ctx context.Context, r runRow) ([]string, error) {
	t := r.def.Targets
	if t == nil && r.def.OnlyDevice == "" {
		return []string{}, nil
	}
	kind, ids := devices.TargetDevices, []string{r.def.OnlyDevice}
	if t != nil {
		kind, ids = t.Type, t.IDs
	}
	res, err := s.devices.ResolveTargets(ctx, kind, ids, maxTargetDevices)
	if err != nil {
		return nil, fmt.Errorf("resolve the targets of run %s: %w", r.ID, err)
	}
	list := res.Devices
	if r.def.OnlyDevice != "" {
		list = slices.DeleteFunc(list, func(d devices.Device) bool { return d.ID != r.def.OnlyDevice })
	}
	out := []string{}
	for _, d := range list {
		if meets(d, r.def.Conditions) {
			out = append(out, d.ID)
		}
	}
	if len(out) > maxTargetDevices {
		return nil, devices.TooManyTargets(maxTargetDevices)
	}
	if s.maintenance == nil || len(out) == 0 {
		return out, nil
	}
	held, err := s.maintenance.HeldFromAutomations(ctx, out)
	if err != nil {
		return nil, fmt.Errorf("check maintenance windows for run %s: %w", r.ID, err)
	}
	out = slices.DeleteFunc(out, func(id string) bool { return held[id] })
	if len(out) == 0 {
		return nil, apperr.ConflictCode("MAINTENANCE_WINDOW", "every target device is in a maintenance window that holds automations back")
	}
	return out, nil
}

// meets reports whether a device passes every condition.
func meets(d devices.Device, conds []AutomationCondition) bool {
	for _, c := range conds {
		var have []string
		switch c.Field {
		case "osType":
			have = []string{d.OSType}
		case "status":
			have = []string{d.Status}
		case "hostname":
			have = []string{d.Hostname}
		case "siteId":
			have = []string{d.SiteID}
		case "tag":
			have = d.Tags
		}
		if !holds(c, have) {
			return false
		}
	}
	return true
}

// holds applies one condition to a device's values of its field (a tag condition reads
// "the device has a tag that ...").
func holds(c AutomationCondition, have []string) bool {
	eq := func(v string) bool {
		return slices.ContainsFunc(have, func(h string) bool { return strings.EqualFold(h, v) })
	}
	switch c.Operator {
	case "eq":
		return eq(c.Value)
	case "neq":
		return !eq(c.Value)
	case "in":
		return slices.ContainsFunc(c.Values, eq)
	case "notIn":
		return !slices.ContainsFunc(c.Values, eq)
	case "contains":
		return slices.ContainsFunc(have, func(h string) bool { return strings.Contains(strings.ToLower(h), strings.ToLower(c.Value)) })
	}
	return false
}

// newStep is a step to record.
type newStep struct {
	device, status, execution, batch, command, alert, errMsg string
}

// perform starts action idx of a run on its devices and records its steps.
func (s *Service) perform(ctx context.Context, r runRow, idx int, devs []string) error {
	a := r.def.Actions[idx]
	var steps []newStep
	// An action that could not start at all (a script deleted since, a bad parameter) is one
	// failed step.
	failAll := func(err error) {
		if _, ok := apperr.As(err); !ok {
			s.logger.WarnContext(ctx, "automation action failed", "run", r.ID, "action", idx, "error", err)
		}
		steps = append(steps, newStep{status: StepFailed, errMsg: describe(err)})
	}
	bulk := func(skipped, failed []devices.BulkItem) {
		for _, it := range skipped {
			steps = append(steps, newStep{device: it.DeviceID, status: StepSkipped, errMsg: it.Code + ": " + it.Reason})
		}
		for _, it := range failed {
			steps = append(steps, newStep{device: it.DeviceID, status: StepFailed, errMsg: it.Code + ": " + it.Reason})
		}
	}
	// handOver gives each chunk of devices its work with hand, which also appends the chunk's
	// steps. The work and its steps commit together (a node that stops midway loses neither
	// without the other), and the commands are dispatched once they did. Work that could not
	// start is one failed step.
	handOver := func(hand func(tx *sql.Tx, chunk []string) ([]devices.DeviceCommand, error)) error {
		for chunk := range slices.Chunk(devs, chunkDevices) {
			var cmds []devices.DeviceCommand
			var xerr error
			err := s.db.Write(ctx, func(tx *sql.Tx) error {
				if cmds, xerr = hand(tx, chunk); xerr != nil {
					return xerr
				}
				return s.writeStepsIn(ctx, tx, r, idx, a.Type, steps)
			})
			steps = steps[:0]
			if xerr != nil {
				failAll(xerr)
				return nil
			}
			if err != nil {
				return err
			}
			s.devices.Dispatch(ctx, cmds)
		}
		return nil
	}
	switch a.Type {
	case ActionRunScript:
		err := handOver(func(tx *sql.Tx, chunk []string) ([]devices.DeviceCommand, error) {
			res, cmds, err := s.scripts.ExecuteIn(ctx, tx, a.ScriptID, scripts.ScriptRun{DeviceIDs: chunk, Parameters: a.Parameters})
			if err != nil {
				return nil, err
			}
			for _, x := range res.Executions {
				steps = append(steps, newStep{device: x.DeviceID, status: StepRunning, execution: x.ID, batch: res.BatchID, command: x.CommandID})
			}
			bulk(res.Skipped, res.Failed)
			return cmds, nil
		})
		if err != nil {
			return err
		}
	case ActionRunCommand:
		err := handOver(func(tx *sql.Tx, chunk []string) ([]devices.DeviceCommand, error) {
			res, err := s.devices.SendBulkIn(ctx, tx, devices.BulkInput{DeviceIDs: chunk, CommandInput: *a.Command})
			if err != nil {
				return nil, err
			}
			for _, c := range res.Commands {
				steps = append(steps, newStep{device: c.DeviceID, status: StepRunning, command: c.ID})
			}
			bulk(res.Skipped, res.Failed)
			return res.Commands, nil
		})
		if err != nil {
			return err
		}
	case ActionNotify:
		subject := a.Subject
		if subject == "" {
			subject = "Automation " + r.def.Name
		}
		if _, xerr := s.notify.Announce(ctx, a.ChannelIDs, subject, a.Message); xerr != nil {
			failAll(xerr)
			break
		}
		steps = append(steps, newStep{status: StepCompleted})
	case ActionCreateAlert:
		for _, dev := range devs {
			// Asked for in so many words: suppressAutomations, not suppressAlerts, holds it back.
			x, xerr := s.alerts.Raise(ctx, alerts.Raised{DeviceID: dev, Severity: a.Severity, Title: a.Title, Message: a.Message,
				Context: map[string]any{"automationId": r.AutomationID, "automationRunId": r.ID}, Requested: true})
			if xerr != nil {
				if _, ok := apperr.As(xerr); !ok {
					s.logger.WarnContext(ctx, "automation alert failed", "run", r.ID, "device", dev, "error", xerr)
				}
				steps = append(steps, newStep{device: dev, status: StepFailed, errMsg: describe(xerr)})
				continue
			}
			steps = append(steps, newStep{device: dev, status: StepCompleted, alert: x.ID})
		}
	}
	return s.writeSteps(ctx, r, idx, a.Type, steps)
}

// writeSteps records new steps of an action in a transaction of their own.
func (s *Service) writeSteps(ctx context.Context, r runRow, idx int, actionType string, steps []newStep) error {
	if len(steps) == 0 {
		return nil
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error { return s.writeStepsIn(ctx, tx, r, idx, actionType, steps) })
}

// writeStepsIn records new steps of an action in tx, in statements of up to 100 rows.
func (s *Service) writeStepsIn(ctx context.Context, tx *sql.Tx, r runRow, idx int, actionType string, steps []newStep) error {
	const stepsPerStatement = 100
	now := s.clock.Now()
	for chunk := range slices.Chunk(steps, stepsPerStatement) {
		var a store.Args
		rows := make([]string, 0, len(chunk))
		for _, st := range chunk {
			var done any
			if st.status != StepRunning {
				done = now
			}
			rows = append(rows, "("+strings.Join([]string{a.Add(store.NewID()), a.Add(r.ID), a.Add(idx), a.Add(actionType),
				a.Add(store.NullIfEmpty(st.device)), a.Add(st.status), a.Add(store.NullIfEmpty(st.execution)),
				a.Add(store.NullIfEmpty(st.batch)), a.Add(store.NullIfEmpty(st.command)), a.Add(store.NullIfEmpty(st.alert)),
				a.Add(nullText(st.errMsg, maxErrorLen)), a.Add(now), a.Add(done)}, ", ")+")")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO automation_run_steps (id, run_id, action_index, action_type, device_id, status,
			execution_id, batch_id, command_id, alert_id, error, started_at, completed_at) VALUES `+strings.Join(rows, ", "),
			a.Values()...); err != nil {
			return fmt.Errorf("insert run steps: %w", err)
		}
	}
	return nil
}

// describe tells what went wrong for a step or run: an API error with its field details.
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

func nullText(s string, max int) any {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	if r := []rune(s); len(r) > max {
		return string(r[:max])
	}
	return s
}

// ended is how a running step's work ended, once it has.
type ended struct {
	status, output, errMsg string
	exit                   *int
}

// refreshSteps reads the work of the current action's running steps through the scripts and
// devices services, records the steps that ended, and returns the action's steps.
func (s *Service) refreshSteps(ctx context.Context, r runRow) ([]AutomationRunStep, error) {
	steps, err := s.steps(ctx, s.db, r.ID, r.CurrentAction)
	if err != nil {
		return nil, err
	}
	var scriptID string
	if a := r.def.Actions[r.CurrentAction]; a.Type == ActionRunScript {
		scriptID = a.ScriptID
	}
	batches, err := s.batchOutcomes(ctx, scriptID, steps)
	if err != nil {
		return nil, err
	}
	done := map[string]ended{}
	for _, st := range steps {
		if st.Status != StepRunning {
			continue
		}
		if st.batchID != "" && scriptID != "" {
			if e, over := batches.outcome(st); over {
				done[st.ID] = e
			}
			continue
		}
		e, over, err := s.stepOutcome(ctx, st)
		if err != nil {
			return nil, err
		}
		if over {
			done[st.ID] = e
		}
	}
	if len(done) == 0 {
		return steps, nil
	}
	if err := s.recordEnded(ctx, done); err != nil {
		return nil, err
	}
	for i := range steps {
		if e, ok := done[steps[i].ID]; ok {
			steps[i].Status = e.status
		}
	}
	return steps, nil
}

// endedPerWrite is how many steps one transaction records as ended. A run of ten thousand
// devices ends thousands of steps in one round; on SQLite a single transaction for all of
// them would hold the database's one writer for seconds, and heartbeats would wait behind it.
const endedPerWrite = 100

// recordEnded records steps that ended, in transactions of endedPerWrite steps. Each update
// is conditional on the step still running, so a round that stops halfway is taken up by the
// next.
func (s *Service) recordEnded(ctx context.Context, done map[string]ended) error {
	ids := make([]string, 0, len(done))
	for id := range done {
		ids = append(ids, id)
	}
	for first := 0; first < len(ids); first += endedPerWrite {
		err := s.db.Write(ctx, func(tx *sql.Tx) error {
			now := s.clock.Now()
			for _, id := range ids[first:min(first+endedPerWrite, len(ids))] {
				e := done[id]
				if _, err := tx.ExecContext(ctx, `UPDATE automation_run_steps SET status = $1, exit_code = $2, output = $3, error = $4,
					completed_at = $5 WHERE id = $6 AND status = $7`, e.status, e.exit, nullText(e.output, maxOutputLen),
					nullText(e.errMsg, maxErrorLen), now, id, StepRunning); err != nil {
					return fmt.Errorf("record step %s: %w", id, err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// executionOutcome is how a script execution ended; false while it has not.
func executionOutcome(x scripts.ScriptExecution) (ended, bool) {
	switch x.Status {
	case scripts.StatusPending, scripts.StatusQueued, scripts.StatusRunning:
		return ended{}, false
	}
	e := ended{status: StepFailed, output: store.Deref(x.Stdout), exit: x.ExitCode, errMsg: x.Status}
	if x.Status == scripts.StatusCompleted {
		e.status, e.errMsg = StepCompleted, ""
	}
	if x.Error != nil && *x.Error != "" {
		e.errMsg = *x.Error
	} else if x.Stderr != nil && *x.Stderr != "" && e.status == StepFailed {
		e.errMsg = *x.Stderr
	}
	return e, true
}

// executions are script executions of batches by ID, as the scripts service lists them.
type executions map[string]scripts.ScriptExecution

// outcome is how a step's execution ended; an execution its batch no longer holds (its
// device was removed) has failed.
func (xs executions) outcome(st AutomationRunStep) (ended, bool) {
	x, ok := xs[*st.ExecutionID]
	if !ok {
		return ended{status: StepFailed, errMsg: "its work no longer exists (device removed)"}, true
	}
	return executionOutcome(x)
}

// batchOutcomes lists, page by page, the executions of the batches that running steps of a
// run_script action wait for: one read per 500 executions rather than one per step.
func (s *Service) batchOutcomes(ctx context.Context, scriptID string, steps []AutomationRunStep) (executions, error) {
	out := executions{}
	seen := map[string]bool{}
	for _, st := range steps {
		if st.Status != StepRunning || st.batchID == "" || scriptID == "" || seen[st.batchID] {
			continue
		}
		seen[st.batchID] = true
		page := store.Page{Limit: chunkDevices}
		for {
			list, next, _, err := s.scripts.ListExecutions(ctx, scriptID, scripts.ExecutionFilter{BatchID: st.batchID}, page)
			if apperr.IsCode(err, apperr.CodeNotFound) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("list executions of batch %s: %w", st.batchID, err)
			}
			for _, x := range list {
				out[x.ID] = x
			}
			if next == "" {
				break
			}
			page.Cursor = next
		}
	}
	return out, nil
}

// stepOutcome reads how a step's script execution or device command ended; false while it runs.
func (s *Service) stepOutcome(ctx context.Context, st AutomationRunStep) (ended, bool, error) {
	gone := ended{status: StepFailed, errMsg: "its work no longer exists (device removed)"}
	if st.ExecutionID != nil {
		x, err := s.scripts.GetExecution(ctx, *st.ExecutionID)
		if apperr.IsCode(err, apperr.CodeNotFound) {
			return gone, true, nil
		}
		if err != nil {
			return ended{}, false, fmt.Errorf("read execution %s: %w", *st.ExecutionID, err)
		}
		e, over := executionOutcome(x)
		return e, over, nil
	}
	if st.CommandID != nil && st.DeviceID != nil {
		c, err := s.devices.GetCommand(ctx, *st.DeviceID, *st.CommandID)
		if apperr.IsCode(err, apperr.CodeNotFound) {
			return gone, true, nil
		}
		if err != nil {
			return ended{}, false, fmt.Errorf("read command %s: %w", *st.CommandID, err)
		}
		switch c.Status {
		case devices.CommandQueued, devices.CommandSent:
			return ended{}, false, nil
		}
		e := ended{status: StepFailed, output: store.Deref(c.Stdout), exit: c.ExitCode, errMsg: c.Status}
		if c.Status == devices.CommandCompleted {
			e.status, e.errMsg = StepCompleted, ""
		}
		if c.Error != nil && *c.Error != "" {
			e.errMsg = *c.Error
		}
		return e, true, nil
	}
	return ended{status: StepFailed, errMsg: "nothing to wait for"}, true, nil
}

// finish ends a run: failed when it could not act (errMsg) or every step that acted failed,
// partial when some did, completed otherwise. Of nodes finishing the same run one wins and
// records automation.completed (completed) or automation.failed (failed, partial); with
// onFailure notify, a run that did not complete is announced on the automation's channels.
func (s *Service) finish(ctx context.Context, r runRow, errMsg string) error {
	all, err := s.steps(ctx, s.db, r.ID, -1)
	if err != nil {
		return err
	}
	var ok, failed int
	for _, st := range all {
		switch st.Status {
		case StepCompleted:
			ok++
		case StepFailed:
			failed++
		}
	}
	status := RunCompleted
	switch {
	case errMsg != "" || (failed > 0 && ok == 0):
		status = RunFailed
	case failed > 0:
		status = RunPartial
	}
	won := false
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE automation_runs SET status = $1, error = $2, completed_at = $3 WHERE id = $4 AND status = $5`,
			status, nullText(errMsg, maxErrorLen), s.clock.Now(), r.ID, RunRunning)
		if err != nil {
			return fmt.Errorf("finish run %s: %w", r.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		won = true
		typ := EventCompleted
		if status != RunCompleted {
			typ = EventFailed
		}
		_, err = events.Record(ctx, tx, events.Event{Type: typ, PartnerID: r.partnerID, OrgID: store.Deref(r.OrgID),
			ResourceType: "automation_run", ResourceID: r.ID}, map[string]any{"automationId": r.AutomationID, "automationName": r.def.Name,
			"runId": r.ID, "status": status, "completedSteps": ok, "failedSteps": failed, "error": errMsg, "depth": r.depth})
		return err
	})
	if err != nil || !won || status == RunCompleted || r.def.OnFailure != OnFailureNotify {
		return err
	}
	msg := fmt.Sprintf("The run %s of the automation %s ended %s: %d steps completed, %d failed.", r.ID, r.def.Name, status, ok, failed)
	if errMsg != "" {
		msg += " " + errMsg
	}
	if _, err := s.notify.Announce(ctx, r.def.NotifyChannelIDs, "Automation "+r.def.Name+" "+status, msg); err != nil {
		s.logger.WarnContext(ctx, "announce a failed automation run", "run", r.ID, "error", err)
	}
	return nil
}

// LastRuns returns the latest run of each automation of automationIDs that is in scope and
// has run, by automation ID, without its steps: what a list of automations shows beside each.
func (s *Service) LastRuns(ctx context.Context, automationIDs []string) (map[string]AutomationRun, error) {
	out := map[string]AutomationRun{}
	ids := make([]string, 0, len(automationIDs))
	for _, id := range automationIDs {
		if store.ValidID(id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	var a store.Args
	latest := `r.id IN (SELECT (SELECT r2.id FROM automation_runs r2 WHERE r2.automation_id = x.id ORDER BY r2.id DESC LIMIT 1)
		FROM automations x WHERE x.id IN ` + a.In(ids) + `)`
	runs, err := store.QueryAll(ctx, s.db, `SELECT `+runColumns+` FROM automation_runs r WHERE `+
		store.Where([]string{latest, runFilter(access.ScopeFrom(ctx), &a)}), a.Values(), scanRun)
	if err != nil {
		return nil, fmt.Errorf("read latest automation runs: %w", err)
	}
	for _, r := range runs {
		out[r.AutomationID] = r.AutomationRun
	}
	return out, nil
}
