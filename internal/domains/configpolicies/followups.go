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

	"gale/internal/domains/alerts"
	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/scripts"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// followUpEvery is how often a node's worker looks for follow-up work nobody woke it for.
const followUpEvery = time.Second

// Wake makes this node's follow-up worker look now.
func (s *Service) Wake() { s.followUps.Wake() }

// StartWorker starts this node's follow-up worker, until StopWorker. Every node runs one;
// each piece of work is claimed with a conditional update, so it is done once.
func (s *Service) StartWorker(ctx context.Context) { s.followUps.Start(ctx) }

// StopWorker stops the worker and waits for it.
func (s *Service) StopWorker() { s.followUps.Stop() }

// dueRow is a compliance row with follow-up work.
type dueRow struct {
	policyID, deviceID, follow, state string
	alertID                           *string
}

// RunFollowUps does the enforcement due after transitions: raise an alert on a device that
// became non-compliant (warn and enforce), run the remediation script on it first (enforce),
// resolve the alert once it is compliant again, and evaluate it again once a remediation ended.
func (s *Service) RunFollowUps(ctx context.Context) error {
	due, err := store.QueryAll(ctx, s.db, `SELECT c.policy_id, c.device_id, c.follow_up, c.state, c.alert_id FROM policy_compliance c
		WHERE c.follow_up IS NOT NULL AND `+tenancy.LiveOrg("c.org_id")+` ORDER BY c.policy_id, c.device_id LIMIT 500`, nil,
		func(row store.Scanner) (dueRow, error) {
			var r dueRow
			var alert sql.NullString
			err := row.Scan(&r.policyID, &r.deviceID, &r.follow, &r.state, &alert)
			r.alertID = store.StringPtr(alert)
			return r, err
		})
	if err != nil {
		return fmt.Errorf("list policy follow-ups: %w", err)
	}
	policies := map[string]*Policy{}
	for _, r := range due {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p, ok := policies[r.policyID]
		if !ok {
			x, err := s.get(ctx, s.db, access.SystemScope(), r.policyID)
			if apperr.IsCode(err, apperr.CodeNotFound) {
				policies[r.policyID] = nil
				continue
			}
			if err != nil {
				return err
			}
			p, policies[r.policyID] = &x, &x
		}
		if p == nil {
			continue
		}
		if err := s.followUp(ctx, *p, r); err != nil {
			s.logger.WarnContext(ctx, "policy follow-up", "policy", r.policyID, "device", r.deviceID, "work", r.follow, "error", err)
		}
	}
	return nil
}

// claim takes a row's follow-up work (false: another node took it, or it changed), setting
// the next piece of work due, in tx.
func claim(ctx context.Context, tx *sql.Tx, r dueRow, next any) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE policy_compliance SET follow_up = $1 WHERE policy_id = $2 AND device_id = $3 AND follow_up = $4`,
		next, r.policyID, r.deviceID, r.follow)
	if err != nil {
		return false, fmt.Errorf("claim policy follow-up: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

func (s *Service) followUp(ctx context.Context, p Policy, r dueRow) error {
	if p.Status != StatusActive && r.follow != followResolve {
		return s.release(ctx, r, nil) // an inactive policy enforces nothing
	}
	actx := access.WithPrincipal(ctx, actorFor(p))
	switch r.follow {
	case followEvaluate:
		return s.reevaluate(actx, p, r)
	case followRemediate:
		if r.state != StateNonCompliant || p.RemediationScriptID == nil {
			return s.release(ctx, r, followAlert)
		}
		var cmds []devices.DeviceCommand
		err := s.db.Write(ctx, func(tx *sql.Tx) error {
			if ok, err := claim(ctx, tx, r, followAlert); err != nil || !ok {
				return err
			}
			var err error
			cmds, err = s.remediateIn(actx, tx, p, []string{r.deviceID}, nil)
			return err
		})
		if err != nil {
			return err
		}
		s.devices.Dispatch(ctx, cmds)
		s.Wake()
		return nil
	case followAlert:
		var won bool
		err := s.db.Write(ctx, func(tx *sql.Tx) (err error) {
			won, err = claim(ctx, tx, r, nil)
			return err
		})
		if err != nil || !won || r.state != StateNonCompliant || r.alertID != nil || p.Enforcement == EnforceMonitor {
			return err
		}
		return s.raise(actx, p, r)
	case followResolve:
		var won bool
		err := s.db.Write(ctx, func(tx *sql.Tx) error {
			var err error
			if won, err = claim(ctx, tx, r, nil); err != nil || !won {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE policy_compliance SET alert_id = NULL WHERE policy_id = $1 AND device_id = $2`,
				r.policyID, r.deviceID); err != nil {
				return fmt.Errorf("forget the alert of %s: %w", r.deviceID, err)
			}
			return nil
		})
		if err != nil || !won || r.alertID == nil {
			return err
		}
		note := "the device complies with the policy " + p.Name + " again"
		_, err = s.alerts.Act(actx, *r.alertID, alerts.ActionResolve, alerts.ActionInput{Note: &note})
		if ae, ok := apperr.As(err); ok && (ae.Kind == apperr.KindConflict || ae.Code == apperr.CodeNotFound) {
			return nil // someone resolved or dismissed it already
		}
		if err != nil {
			return fmt.Errorf("resolve alert %s: %w", *r.alertID, err)
		}
		return nil
	}
	return s.release(ctx, r, nil)
}

// release replaces follow-up work that no longer applies.
func (s *Service) release(ctx context.Context, r dueRow, next any) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		_, err := claim(ctx, tx, r, next)
		return err
	})
}

// raise opens the alert of a non-compliant device and records it on the row. The claim came
// first, so of nodes racing one raises; if the raise fails, the work is put back.
func (s *Service) raise(ctx context.Context, p Policy, r dueRow) error {
	var failed []string
	var results string
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(results, '[]') FROM policy_compliance WHERE policy_id = $1 AND device_id = $2`,
		r.policyID, r.deviceID).Scan(&results); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read the results of %s: %w", r.deviceID, err)
	}
	var outcomes []PolicyRuleOutcome
	_ = json.Unmarshal([]byte(results), &outcomes)
	for _, o := range outcomes {
		if !o.Passed {
			failed = append(failed, fmt.Sprintf("rule %d (%s): %s", o.Rule, o.Type, o.Message))
		}
	}
	severity := "medium"
	if p.Enforcement == EnforceEnforce {
		severity = "high"
	}
	x, err := s.alerts.Raise(ctx, alerts.Raised{DeviceID: r.deviceID, Severity: severity, Title: "Policy " + p.Name + " not met",
		Message: "The device does not comply with the policy " + p.Name + ". " + strings.Join(failed, "; "),
		Context: map[string]any{"source": "policy", "policyId": p.ID, "enforcement": p.Enforcement}})
	if apperr.IsCode(err, apperr.CodeNotFound) {
		return nil // the device left since
	}
	if errors.Is(err, alerts.ErrHeld) {
		return nil // a maintenance window holds the device's alerts: the next evaluation still non-compliant raises again
	}
	if err != nil {
		if rerr := s.release(context.WithoutCancel(ctx), dueRow{policyID: r.policyID, deviceID: r.deviceID}, followAlert); rerr != nil {
			s.logger.WarnContext(ctx, "put back a policy alert", "policy", r.policyID, "device", r.deviceID, "error", rerr)
		}
		return fmt.Errorf("raise the alert of %s: %w", r.deviceID, err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE policy_compliance SET alert_id = $1 WHERE policy_id = $2 AND device_id = $3`, x.ID, r.policyID,
		r.deviceID); err != nil {
		return fmt.Errorf("record alert %s on %s: %w", x.ID, r.deviceID, err)
	}
	return nil
}

// reevaluate queues a new evaluation of a device whose remediation ended (unless one is
// outstanding already).
func (s *Service) reevaluate(ctx context.Context, p Policy, r dueRow) error {
	payload := json.RawMessage(store.EncodeJSON(agentproto.PolicyEvaluate{PolicyID: p.ID, Rules: wireRules(p.Rules)}))
	var cmds []devices.DeviceCommand
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		if ok, err := claim(ctx, tx, r, nil); err != nil || !ok {
			return err
		}
		var outstanding sql.NullString
		if err := tx.QueryRowContext(ctx, `SELECT command_id FROM policy_compliance WHERE policy_id = $1 AND device_id = $2`, r.policyID,
			r.deviceID).Scan(&outstanding); err != nil {
			return fmt.Errorf("read the evaluation outstanding on %s: %w", r.deviceID, err)
		}
		if outstanding.Valid || p.Status != StatusActive {
			return nil
		}
		res, err := s.devices.SendBulkIn(ctx, tx, devices.BulkInput{DeviceIDs: []string{r.deviceID}, Audited: true,
			CommandInput: devices.CommandInput{Type: agentproto.CommandPolicyEvaluate, Payload: payload}})
		if err != nil {
			return fmt.Errorf("send the evaluation of %s: %w", r.deviceID, err)
		}
		now := s.clock.Now()
		for _, c := range res.Commands {
			if _, err := tx.ExecContext(ctx, `UPDATE policy_compliance SET command_id = $1, queued_at = $2 WHERE policy_id = $3 AND device_id = $4`,
				c.ID, now, r.policyID, r.deviceID); err != nil {
				return fmt.Errorf("record the evaluation of %s: %w", r.deviceID, err)
			}
		}
		cmds = res.Commands
		return nil
	})
	if err != nil {
		return err
	}
	s.devices.Dispatch(ctx, cmds)
	return nil
}

// remediateIn runs the policy's remediation script on devices in tx, as the principal of
// ctx, and records each execution on its compliance row (its end queues a new evaluation).
func (s *Service) remediateIn(ctx context.Context, tx *sql.Tx, p Policy, deviceIDs []string, out *PolicyRemediation) ([]devices.DeviceCommand, error) {
	res, cmds, err := s.scripts.ExecuteIn(ctx, tx, *p.RemediationScriptID, scripts.ScriptRun{DeviceIDs: deviceIDs})
	if err != nil {
		return nil, fmt.Errorf("run the remediation of policy %s: %w", p.ID, err)
	}
	for _, x := range res.Executions {
		if _, err := tx.ExecContext(ctx, `UPDATE policy_compliance SET remediation_execution_id = $1, remediation_command_id = $2
			WHERE policy_id = $3 AND device_id = $4`, x.ID, x.CommandID, p.ID, x.DeviceID); err != nil {
			return nil, fmt.Errorf("record the remediation of %s: %w", x.DeviceID, err)
		}
		if out != nil {
			out.ExecutionIDs = append(out.ExecutionIDs, x.ID)
		}
	}
	if out != nil {
		for _, it := range append(res.Skipped, res.Failed...) {
			out.Skipped = append(out.Skipped, PolicyDeviceNote{DeviceID: it.DeviceID, Code: it.Code, Reason: it.Reason})
		}
	}
	return cmds, nil
}

// Remediate runs the remediation script, as the caller, on the policy's non-compliant devices
// (202); each device is evaluated again once its script ended. Without a remediation script:
// 400 NO_REMEDIATION. The caller also needs scripts:execute.
func (s *Service) Remediate(ctx context.Context, id string) (PolicyRemediation, error) {
	p, err := s.Get(ctx, id)
	if err != nil {
		return PolicyRemediation{}, err
	}
	if !access.PrincipalFrom(ctx).Can(access.ScriptsExecute) {
		return PolicyRemediation{}, apperr.Forbidden("remediation runs a script: it needs the permission " + string(access.ScriptsExecute))
	}
	if p.RemediationScriptID == nil {
		return PolicyRemediation{}, apperr.BadRequest("NO_REMEDIATION", "the policy has no remediation script")
	}
	out := PolicyRemediation{ExecutionIDs: []string{}, Skipped: []PolicyDeviceNote{}}
	var cmds []devices.DeviceCommand
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		var a store.Args
		ids, err := store.QueryStrings(ctx, tx, `SELECT c.device_id FROM policy_compliance c WHERE c.policy_id = `+a.Add(p.ID)+
			` AND c.state = `+a.Add(StateNonCompliant)+` AND `+access.ScopeFrom(ctx).OrgFilter(&a, "c.org_id", "c.partner_id")+
			` ORDER BY c.device_id`, a.Values()...)
		if err != nil {
			return fmt.Errorf("list non-compliant devices: %w", err)
		}
		out.Devices = len(ids)
		for chunk := range slices.Chunk(ids, scripts.MaxExecuteDevices) {
			c, err := s.remediateIn(ctx, tx, p, chunk, &out)
			if err != nil {
				return err
			}
			cmds = append(cmds, c...)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "policy.remediate", ResourceType: "policy", ResourceID: p.ID, ResourceName: p.Name,
			PartnerID: p.PartnerID, OrgID: store.Deref(p.OrgID), Details: map[string]any{"devices": len(ids),
				"executions": len(out.ExecutionIDs)}})
	})
	if err != nil {
		return PolicyRemediation{}, fmt.Errorf("remediate policy: %w", err)
	}
	s.devices.Dispatch(ctx, cmds)
	return out, nil
}
