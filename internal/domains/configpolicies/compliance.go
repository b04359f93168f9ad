package configpolicies

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

const complianceColumns = `c.policy_id, p.name, p.enforcement, c.device_id, c.org_id, c.state, c.results, c.error, c.evaluated_at,
	c.changed_at, c.command_id, c.alert_id, c.remediation_execution_id, c.remediated_at`

const complianceFrom = ` FROM policy_compliance c JOIN policies p ON p.id = c.policy_id`

func scanCompliance(row store.Scanner) (PolicyDeviceCompliance, error) {
	var x PolicyDeviceCompliance
	var results, errMsg, cmd, alert, remediation sql.NullString
	var evaluated, remediated sql.NullTime
	err := row.Scan(&x.PolicyID, &x.PolicyName, &x.Enforcement, &x.DeviceID, &x.OrgID, &x.State, &results, &errMsg, &evaluated,
		&x.ChangedAt, &cmd, &alert, &remediation, &remediated)
	if err != nil {
		return x, err
	}
	x.Error, x.AlertID, x.RemediationExecutionID = store.StringPtr(errMsg), store.StringPtr(alert), store.StringPtr(remediation)
	x.EvaluatedAt, x.RemediatedAt, x.EvaluationPending = store.TimePtr(evaluated), store.TimePtr(remediated), cmd.Valid
	x.Results = []PolicyRuleOutcome{}
	if results.Valid {
		if err := json.Unmarshal([]byte(results.String), &x.Results); err != nil {
			return x, fmt.Errorf("read compliance results: %w", err)
		}
	}
	return x, nil
}

// rowFilter keeps the compliance rows (alias c) of devices in organizations in scope.
func rowFilter(scope access.Scope, a *store.Args) string {
	return scope.OrgFilter(a, "c.org_id", "c.partner_id") + " AND " + tenancy.LiveOrg("c.org_id")
}

func checkState(state string) error {
	switch state {
	case "", StateCompliant, StateNonCompliant, StatePending, StateError:
		return nil
	}
	return apperr.Invalid("state", "state must be compliant, non_compliant, pending or error")
}

// ListCompliance lists the devices a policy is assigned to with their compliance, by device ID.
func (s *Service) ListCompliance(ctx context.Context, id, state string, page store.Page) ([]PolicyDeviceCompliance, string, *int, error) {
	if err := checkState(state); err != nil {
		return nil, "", nil, err
	}
	if _, err := s.Get(ctx, id); err != nil {
		return nil, "", nil, err
	}
	var a store.Args
	conds := []string{"c.policy_id = " + a.Add(id), rowFilter(access.ScopeFrom(ctx), &a)}
	if state != "" {
		conds = append(conds, "c.state = "+a.Add(state))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: complianceColumns, From: complianceFrom, Conds: conds, Args: &a,
		SortKey: "c.device_id", SortID: "c.device_id"}, page, scanCompliance,
		func(x PolicyDeviceCompliance) (string, string) { return x.DeviceID, x.DeviceID })
}

// DeviceReport lists every policy assigned to a device in scope, with its state and results.
func (s *Service) DeviceReport(ctx context.Context, deviceID string) (PolicyDeviceReport, error) {
	d, err := s.devices.Get(ctx, deviceID)
	if err != nil {
		return PolicyDeviceReport{}, err
	}
	var a store.Args
	list, err := store.QueryAll(ctx, s.db, `SELECT `+complianceColumns+complianceFrom+` WHERE c.device_id = `+a.Add(d.ID)+` AND `+
		rowFilter(access.ScopeFrom(ctx), &a)+` ORDER BY p.name, p.id`, a.Values(), scanCompliance)
	if err != nil {
		return PolicyDeviceReport{}, fmt.Errorf("read device compliance: %w", err)
	}
	out := PolicyDeviceReport{DeviceID: d.ID, State: StateCompliant, Policies: list}
	for _, x := range list {
		if rank(x.State) > rank(out.State) {
			out.State = x.State
		}
	}
	return out, nil
}

// rank orders states from best to worst.
func rank(state string) int {
	switch state {
	case StatePending:
		return 1
	case StateError:
		return 2
	case StateNonCompliant:
		return 3
	}
	return 0
}

// Summary lists the policies in scope (as List filters them) with their devices' counts.
func (s *Service) Summary(ctx context.Context, f ListFilter, page store.Page) ([]PolicyComplianceSummary, string, *int, error) {
	list, next, total, err := s.List(ctx, f, page)
	if err != nil || len(list) == 0 {
		return []PolicyComplianceSummary{}, next, total, err
	}
	ids := make([]string, len(list))
	for i, p := range list {
		ids[i] = p.ID
	}
	type count struct {
		policyID, state string
		n               int
	}
	var a store.Args
	byState, err := store.QueryAll(ctx, s.db, `SELECT c.policy_id, c.state, COUNT(*) FROM policy_compliance c WHERE c.policy_id IN `+
		a.In(ids)+` AND `+rowFilter(access.ScopeFrom(ctx), &a)+` GROUP BY c.policy_id, c.state`, a.Values(),
		func(row store.Scanner) (count, error) {
			var c count
			return c, row.Scan(&c.policyID, &c.state, &c.n)
		})
	if err != nil {
		return nil, "", nil, fmt.Errorf("count compliance: %w", err)
	}
	counts := map[string]*PolicyStateCounts{}
	for _, c := range byState {
		if counts[c.policyID] == nil {
			counts[c.policyID] = &PolicyStateCounts{}
		}
		counts[c.policyID].add(c.state, c.n)
	}
	out := make([]PolicyComplianceSummary, len(list))
	for i, p := range list {
		c := counts[p.ID]
		if c == nil {
			c = &PolicyStateCounts{}
		}
		out[i] = PolicyComplianceSummary{PolicyID: p.ID, Name: p.Name, Status: p.Status, Enforcement: p.Enforcement, Compliant: c.Compliant,
			NonCompliant: c.NonCompliant, Pending: c.Pending, Error: c.Error, Total: c.Total, CompliancePercent: percent(c.Compliant, c.Total)}
	}
	return out, next, total, nil
}

func percent(n, total int) *float64 {
	if total == 0 {
		return nil
	}
	v := math.Round(float64(n)*1000/float64(total)) / 10
	return &v
}

// Stats counts, across the policies in scope, devices by their worst state, policy and device
// pairs by state, and policies by status and overall state.
func (s *Service) Stats(ctx context.Context, orgID string) (PolicyComplianceStats, error) {
	var out PolicyComplianceStats
	scope := access.ScopeFrom(ctx)
	var a store.Args
	conds := ListFilter{OrgID: orgID}.conds(scope, &a)
	conds = append(conds, rowFilter(scope, &a))
	// One row per active policy and device in scope: they are counted as they stream in,
	// never held all at once.
	rows, err := s.db.QueryContext(ctx, `SELECT c.device_id, c.policy_id, c.state FROM policy_compliance c JOIN policies p ON p.id = c.policy_id
		WHERE p.status = `+a.Add(StatusActive)+` AND `+store.Where(conds), a.Values()...)
	if err != nil {
		return out, fmt.Errorf("read compliance: %w", err)
	}
	worstDevice, worstPolicy := map[string]string{}, map[string]string{}
	for rows.Next() {
		var dev, pol, state string
		if err := rows.Scan(&dev, &pol, &state); err != nil {
			rows.Close()
			return out, fmt.Errorf("read compliance: %w", err)
		}
		out.Rows.add(state, 1)
		if w, ok := worstDevice[dev]; !ok || rank(state) > rank(w) {
			worstDevice[dev] = state
		}
		if w, ok := worstPolicy[pol]; !ok || rank(state) > rank(w) {
			worstPolicy[pol] = state
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("read compliance: %w", err)
	}
	for _, st := range worstDevice {
		out.Devices.add(st, 1)
	}
	type policyStatus struct{ id, status string }
	var b store.Args
	policies, err := store.QueryAll(ctx, s.db, `SELECT p.id, p.status FROM policies p WHERE `+
		store.Where(ListFilter{OrgID: orgID}.conds(scope, &b)), b.Values(), func(row store.Scanner) (policyStatus, error) {
		var p policyStatus
		return p, row.Scan(&p.id, &p.status)
	})
	if err != nil {
		return out, fmt.Errorf("read policies: %w", err)
	}
	for _, p := range policies {
		out.Policies.Total++
		if p.status != StatusActive {
			out.Policies.Inactive++
			continue
		}
		out.Policies.Active++
		switch worstPolicy[p.id] {
		case StateCompliant:
			out.Policies.Compliant++
		case StateNonCompliant:
			out.Policies.NonCompliant++
		case StateError:
			out.Policies.Error++
		default:
			out.Policies.Pending++
		}
	}
	return out, nil
}
