package configpolicies

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
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/events"
	"gale/internal/platform/jsonenc"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// ScheduleEvery is how often the schedule looks for policies due for evaluation.
const ScheduleEvery = time.Minute

// staleAfter is how long an evaluation may stay outstanding before it counts as lost: the
// longest a command waits for its device, runs and has its result delivered late.
var staleAfter = devices.QueueTTL + evaluateTimeout*time.Second + devices.ResultGrace

// commandKind is the policy_evaluate command kind.
func (s *Service) commandKind() devices.CommandKind {
	return devices.CommandKind{Name: agentproto.CommandPolicyEvaluate, DefaultTimeout: evaluateTimeout, MaxTimeout: 600,
		OS: []string{agentproto.OSLinux}, Validate: validatePayload, OnResult: s.onEvaluateResult,
		PayloadDoc: "policy_evaluate: {policyId, rules: [{type, ...}]} as a configuration policy's rules; the result is {results: [{rule, type, passed, actual, message}]}."}
}

// validatePayload checks a policy_evaluate payload as a policy's rules are checked.
func validatePayload(raw json.RawMessage, _ string) (any, error) {
	var p agentproto.PolicyEvaluate
	if err := jsonenc.DecodeStrict(raw, &p); err != nil {
		return nil, apperr.Invalid("payload", "a policy_evaluate payload is {policyId, rules}: "+err.Error())
	}
	var c checker
	if len(p.Rules) == 0 || len(p.Rules) > maxRules {
		c.fail("payload.rules", "1 to %d rules", maxRules)
	}
	for i, r := range p.Rules {
		pr := PolicyRule{Type: r.Type, Name: r.Name, MinVersion: r.MinVersion, MountPoint: r.MountPoint, MinFreeGB: r.MinFreeGB,
			MinFreePercent: r.MinFreePercent, Path: r.Path, Key: r.Key, Expected: r.Expected, Operator: r.Operator}
		checkRule(&c, fmt.Sprintf("payload.rules[%d]", i), &pr)
		p.Rules[i].MountPoint = pr.MountPoint
	}
	return p, c.err()
}

// resolveDevices lists the devices a policy is assigned to, as the policy's actor sees them
// (another tenant's IDs in its targets match nothing); decommissioned devices are left out.
func (s *Service) resolveDevices(ctx context.Context, p Policy) ([]devices.Device, error) {
	r, err := s.devices.ResolveTargets(access.WithPrincipal(ctx, actorFor(p)), p.Targets.Type, p.Targets.IDs, maxTargetDevices)
	if err != nil {
		return nil, fmt.Errorf("resolve the targets of policy %s: %w", p.ID, err)
	}
	if r.Exceeds {
		return nil, devices.TooManyTargets(maxTargetDevices)
	}
	return r.Devices, nil
}

// claimAndEvaluate queues a due active policy's evaluations, claiming its round first: the
// conditional move of next_evaluation_at lets one node (or request) take each round.
func (s *Service) claimAndEvaluate(ctx context.Context, id string) (PolicyEvaluation, error) {
	p, err := s.get(ctx, s.db, access.SystemScope(), id)
	if err != nil {
		return PolicyEvaluation{}, err
	}
	now := s.clock.Now()
	res, err := s.db.ExecContext(ctx, `UPDATE policies SET last_evaluated_at = $1, next_evaluation_at = $2
		WHERE id = $3 AND status = $4 AND next_evaluation_at <= $1`, now, now.Add(time.Duration(p.CheckIntervalMinutes)*time.Minute), id,
		StatusActive)
	if err != nil {
		return PolicyEvaluation{}, fmt.Errorf("claim the evaluation of policy %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return PolicyEvaluation{}, nil
	}
	return s.evaluate(ctx, p)
}

// RunSchedule queues the evaluations of every active policy that is due.
func (s *Service) RunSchedule(ctx context.Context) error {
	ids, err := store.QueryStrings(ctx, s.db, `SELECT id FROM policies WHERE status = $1 AND next_evaluation_at <= $2
		ORDER BY next_evaluation_at, id LIMIT 500`, StatusActive, s.clock.Now())
	if err != nil {
		return fmt.Errorf("list due policies: %w", err)
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, err := s.claimAndEvaluate(ctx, id); err != nil && !apperr.IsCode(err, apperr.CodeNotFound) {
			s.logger.WarnContext(ctx, "evaluate policy", "policy", id, "error", err)
		}
	}
	return nil
}

// Evaluate queues evaluations of an active policy to every assigned device now (202); an
// inactive one is 409 POLICY_INACTIVE. Its schedule restarts from now.
func (s *Service) Evaluate(ctx context.Context, id string) (PolicyEvaluation, error) {
	p, err := s.Get(ctx, id)
	if err != nil {
		return PolicyEvaluation{}, err
	}
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		res, err := tx.ExecContext(ctx, `UPDATE policies SET last_evaluated_at = $1, next_evaluation_at = $2 WHERE id = $3 AND status = $4`,
			now, now.Add(time.Duration(p.CheckIntervalMinutes)*time.Minute), id, StatusActive)
		if err != nil {
			return fmt.Errorf("evaluate policy %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return apperr.ConflictCode("POLICY_INACTIVE", "the policy is inactive; activate it first")
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "policy.evaluate", ResourceType: "policy", ResourceID: id, ResourceName: p.Name,
			PartnerID: p.PartnerID, OrgID: store.Deref(p.OrgID)})
	})
	if err != nil {
		return PolicyEvaluation{}, fmt.Errorf("evaluate policy: %w", err)
	}
	return s.evaluate(ctx, p)
}

// evaluate brings the policy's compliance rows in step with its targets (new devices pending,
// devices that left dropped), ends evaluations outstanding for too long as errors, and queues
// an evaluation to each device without one outstanding.
func (s *Service) evaluate(ctx context.Context, p Policy) (PolicyEvaluation, error) {
	devs, err := s.resolveDevices(ctx, p)
	if err != nil {
		return PolicyEvaluation{}, err
	}
	out := PolicyEvaluation{Devices: len(devs), Skipped: []PolicyDeviceNote{}}
	actx := access.WithPrincipal(ctx, actorFor(p))
	payload := json.RawMessage(store.EncodeJSON(agentproto.PolicyEvaluate{PolicyID: p.ID, Rules: wireRules(p.Rules)}))
	var sent []devices.DeviceCommand
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		idle, busy, err := s.syncRows(ctx, tx, p, devs, now)
		if err != nil {
			return err
		}
		out.AlreadyPending = busy
		for chunk := range slices.Chunk(idle, 500) {
			res, err := s.devices.SendBulkIn(actx, tx, devices.BulkInput{DeviceIDs: chunk, Audited: true,
				CommandInput: devices.CommandInput{Type: agentproto.CommandPolicyEvaluate, Payload: payload}})
			if err != nil {
				return fmt.Errorf("send the evaluations of policy %s: %w", p.ID, err)
			}
			for _, c := range res.Commands {
				if _, err := tx.ExecContext(ctx, `UPDATE policy_compliance SET command_id = $1, queued_at = $2 WHERE policy_id = $3
					AND device_id = $4`, c.ID, now, p.ID, c.DeviceID); err != nil {
					return fmt.Errorf("record the evaluation of %s: %w", c.DeviceID, err)
				}
			}
			sent = append(sent, res.Commands...)
			for _, it := range append(res.Skipped, res.Failed...) {
				out.Skipped = append(out.Skipped, PolicyDeviceNote{DeviceID: it.DeviceID, Code: it.Code, Reason: it.Reason})
				if err := s.recordError(ctx, tx, p, it.DeviceID, it.Code+": "+it.Reason, now); err != nil {
					return err
				}
			}
		}
		out.Queued = len(sent)
		return nil
	})
	if err != nil {
		return PolicyEvaluation{}, err
	}
	s.devices.Dispatch(ctx, sent)
	return out, nil
}

// syncRows makes the policy's compliance rows those of devs and returns the devices to
// evaluate now (none outstanding) and the count of those with an evaluation outstanding. An
// evaluation outstanding past staleAfter has been lost: the device is in error until the
// evaluation queued now reports.
func (s *Service) syncRows(ctx context.Context, tx *sql.Tx, p Policy, devs []devices.Device, now time.Time) ([]string, int, error) {
	type row struct {
		deviceID, orgID string
		queued          *time.Time
	}
	rows, err := store.QueryAll(ctx, tx, `SELECT device_id, org_id, queued_at FROM policy_compliance WHERE policy_id = $1`, []any{p.ID},
		func(sc store.Scanner) (row, error) {
			var r row
			var q sql.NullTime
			err := sc.Scan(&r.deviceID, &r.orgID, &q)
			r.queued = store.TimePtr(q)
			return r, err
		})
	if err != nil {
		return nil, 0, fmt.Errorf("read compliance of policy %s: %w", p.ID, err)
	}
	have := make(map[string]row, len(rows))
	for _, r := range rows {
		have[r.deviceID] = r
	}
	want := map[string]bool{}
	var idle []string
	busy := 0
	for _, d := range devs {
		want[d.ID] = true
		r, ok := have[d.ID]
		if ok && r.orgID != d.OrgID {
			// The device moved to another organization of the partner: its row follows it.
			if _, err := tx.ExecContext(ctx, `UPDATE policy_compliance SET org_id = $1 WHERE policy_id = $2 AND device_id = $3`, d.OrgID,
				p.ID, d.ID); err != nil {
				return nil, 0, fmt.Errorf("move compliance row: %w", err)
			}
		}
		switch {
		case !ok:
			if _, err := tx.ExecContext(ctx, `INSERT INTO policy_compliance (policy_id, device_id, partner_id, org_id, state, changed_at)
				VALUES ($1, $2, $3, $4, $5, $6)`, p.ID, d.ID, d.PartnerID, d.OrgID, StatePending, now); err != nil {
				return nil, 0, fmt.Errorf("add compliance row: %w", err)
			}
		case r.queued != nil && now.Sub(*r.queued) < staleAfter:
			busy++
			continue
		case r.queued != nil:
			if err := s.recordError(ctx, tx, p, d.ID, "the agent did not report the evaluation in time", now); err != nil {
				return nil, 0, err
			}
		}
		idle = append(idle, d.ID)
	}
	for id := range have {
		if !want[id] {
			if _, err := tx.ExecContext(ctx, `DELETE FROM policy_compliance WHERE policy_id = $1 AND device_id = $2`, p.ID, id); err != nil {
				return nil, 0, fmt.Errorf("drop compliance row: %w", err)
			}
		}
	}
	return idle, busy, nil
}

// recordError puts a device in error under a policy, its outstanding evaluation ended.
func (s *Service) recordError(ctx context.Context, tx *sql.Tx, p Policy, deviceID, msg string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE policy_compliance SET changed_at = CASE WHEN state = $1 THEN changed_at ELSE $2 END,
		state = $1, error = $3, evaluated_at = $2, command_id = NULL, queued_at = NULL WHERE policy_id = $4 AND device_id = $5`,
		StateError, now, truncate(msg, maxEvaluationErrLen), p.ID, deviceID)
	if err != nil {
		return fmt.Errorf("record the error of %s: %w", deviceID, err)
	}
	return nil
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

// Follow-up work after a transition, done by RunFollowUps outside the result's transaction
// (it goes through the alerts and scripts services, which write in transactions of their own,
// and commands it queues go out once committed).
const (
	followAlert     = "alert"
	followRemediate = "remediate"
	followResolve   = "resolve"
	followEvaluate  = "evaluate"
)

// onEvaluateResult records a policy_evaluate result, in the result's transaction: the state
// (compliant when every rule passed, non_compliant otherwise, error when the command failed),
// the rule results, and on a transition its event and the enforcement due.
func (s *Service) onEvaluateResult(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error {
	var policyID, prev, orgID string
	var alertID sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT policy_id, state, org_id, alert_id FROM policy_compliance WHERE command_id = $1 AND device_id = $2`,
		r.CommandID, deviceID).Scan(&policyID, &prev, &orgID, &alertID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // the policy was deleted, or the device left its targets
	}
	if err != nil {
		return fmt.Errorf("find the evaluation %s: %w", r.CommandID, err)
	}
	p, err := s.get(ctx, tx, access.SystemScope(), policyID)
	if apperr.IsCode(err, apperr.CodeNotFound) {
		return nil // its organization was deleted
	}
	if err != nil {
		return err
	}
	state, results, errMsg := outcome(p, r)
	now := s.clock.Now()
	var follow any
	switch {
	case state == prev && state == StateNonCompliant && p.Enforcement != EnforceMonitor && !alertID.Valid:
		// Still non-compliant and never alerted (a maintenance window held the alert back):
		// the alert is due now, after any work due already (COALESCE below keeps it).
		follow = followAlert
	case state == prev:
	case state == StateNonCompliant && p.Enforcement == EnforceEnforce && p.RemediationScriptID != nil:
		follow = followRemediate
	case state == StateNonCompliant && p.Enforcement != EnforceMonitor:
		follow = followAlert
	case state == StateCompliant && alertID.Valid:
		follow = followResolve
	}
	if _, err := tx.ExecContext(ctx, `UPDATE policy_compliance SET state = $1, results = $2, error = $3, evaluated_at = $4,
		changed_at = CASE WHEN state = $1 THEN changed_at ELSE $5 END, command_id = NULL, queued_at = NULL,
		follow_up = CASE WHEN state = $1 THEN COALESCE(follow_up, $6) ELSE $6 END WHERE policy_id = $7 AND device_id = $8`, state, store.EncodeJSON(results),
		store.NullIfEmpty(errMsg), now, now, follow, policyID, deviceID); err != nil {
		return fmt.Errorf("record the evaluation of policy %s: %w", policyID, err)
	}
	if follow != nil {
		s.Wake()
	}
	typ := ""
	switch {
	case state == prev:
	case state == StateNonCompliant:
		typ = EventNonCompliant
	case state == StateCompliant && (prev == StateNonCompliant || prev == StateError):
		typ = EventCompliant
	}
	if typ == "" {
		return nil
	}
	var failed []PolicyRuleOutcome
	for _, x := range results {
		if !x.Passed {
			failed = append(failed, x)
		}
	}
	if _, err := events.Record(ctx, tx, events.Event{Type: typ, PartnerID: p.PartnerID, OrgID: orgID, ResourceType: "policy", ResourceID: p.ID},
		map[string]any{"policyId": p.ID, "policyName": p.Name, "deviceId": deviceID, "state": state, "previousState": prev,
			"enforcement": p.Enforcement, "failedRules": failed}); err != nil {
		return fmt.Errorf("record %s of policy %s: %w", typ, p.ID, err)
	}
	return nil
}

// outcome reads a result: the state, the per-rule results and the error of a failed command.
// A result that does not answer every rule of the policy is an error.
func outcome(p Policy, r agentproto.CommandResult) (string, []PolicyRuleOutcome, string) {
	results := []PolicyRuleOutcome{}
	if r.Status != agentproto.ResultCompleted {
		msg := r.Error
		if msg == "" {
			msg = "the evaluation ended " + r.Status
		}
		return StateError, results, msg
	}
	var res agentproto.PolicyEvaluateResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		return StateError, results, "unreadable evaluation result: " + err.Error()
	}
	passed := make([]bool, len(p.Rules))
	for _, x := range res.Results {
		if x.Rule < 0 || x.Rule >= len(p.Rules) {
			continue
		}
		results = append(results, PolicyRuleOutcome{Rule: x.Rule, Type: x.Type, Passed: x.Passed, Actual: truncate(x.Actual, maxRuleText),
			Message: truncate(x.Message, maxRuleText)})
		passed[x.Rule] = x.Passed
	}
	if len(results) != len(p.Rules) {
		return StateError, results, fmt.Sprintf("the agent answered %d of %d rules (the policy changed meanwhile, or the agent is older)",
			len(results), len(p.Rules))
	}
	for _, ok := range passed {
		if !ok {
			return StateNonCompliant, results, ""
		}
	}
	return StateCompliant, results, ""
}

// onRemediationResult runs in the transaction of a run_script result: when the script was a
// policy's remediation, the device is due for a new evaluation, so it goes compliant without
// waiting for the schedule.
func (s *Service) onRemediationResult(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error {
	res, err := tx.ExecContext(ctx, `UPDATE policy_compliance SET follow_up = $1, remediation_command_id = NULL, remediated_at = $2
		WHERE remediation_command_id = $3 AND device_id = $4`, followEvaluate, s.clock.Now(), r.CommandID, deviceID)
	if err != nil {
		return fmt.Errorf("record a remediation's end: %w", err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		s.Wake()
	}
	return nil
}
