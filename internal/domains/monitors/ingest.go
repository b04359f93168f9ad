package monitors

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
	"gale/internal/platform/access"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Bounds of what a stored result keeps of an agent's answer.
const (
	maxErrorText   = 1000
	maxDetailsJSON = 8192
)

// normalize bounds an agent's result: a status other than online, offline or degraded is an
// offline with a reason, the error and details are capped.
func normalize(r agentproto.MonitorCheckResult) agentproto.MonitorCheckResult {
	switch r.Status {
	case agentproto.MonitorOnline, agentproto.MonitorOffline, agentproto.MonitorDegraded:
	default:
		r.Error = fmt.Sprintf("the agent answered the status %q", r.Status)
		r.Status = agentproto.MonitorOffline
	}
	if len(r.Error) > maxErrorText {
		r.Error = r.Error[:maxErrorText]
	}
	if r.Details == nil || len(store.EncodeJSON(r.Details)) > maxDetailsJSON {
		r.Details = map[string]any{}
	}
	if r.Status == agentproto.MonitorOffline && r.Error == "" {
		r.Error = "the check failed"
	}
	return r
}

// ingest stores a result of monitor m (read in tx) checked now by the agent of device probe,
// moves the monitor's state and evaluates its alert rules, in tx. A result older than the
// monitor's last (a batch that arrives after a check run by hand) is stored without moving
// the state.
func (s *Service) ingest(ctx context.Context, tx *sql.Tx, m Monitor, probe string, r agentproto.MonitorCheckResult) (MonitorResult, error) {
	out, err := s.apply(ctx, tx, m, probe, r)
	if err != nil {
		return out, err
	}
	return out, insertResults(ctx, tx, []storedResult{{m, out}})
}

// storedResult is a result to insert, with its monitor.
type storedResult struct {
	m Monitor
	r MonitorResult
}

// resultsPerInsert bounds the rows of one INSERT (9 arguments each).
const resultsPerInsert = 200

// insertResults stores results, many rows a statement.
func insertResults(ctx context.Context, tx *sql.Tx, rs []storedResult) error {
	for first := 0; first < len(rs); first += resultsPerInsert {
		var a store.Args
		var rows []string
		for _, x := range rs[first:min(first+resultsPerInsert, len(rs))] {
			var resp any
			if x.r.ResponseMs != nil {
				resp = *x.r.ResponseMs
			}
			rows = append(rows, "("+strings.Join([]string{a.Add(x.r.ID), a.Add(x.m.ID), a.Add(x.m.PartnerID), a.Add(x.m.OrgID), a.Add(x.r.CheckedAt),
				a.Add(x.r.Status), a.Add(resp), a.Add(x.r.Error), a.Add(store.EncodeJSON(x.r.Details))}, ", ")+")")
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO monitor_results (id, monitor_id, partner_id, org_id, checked_at, status, response_ms,
			error, details) VALUES `+strings.Join(rows, ", "), a.Values()...); err != nil {
			return fmt.Errorf("store monitor results: %w", err)
		}
	}
	return nil
}

// apply moves monitor m's state by a result checked now by probe's agent and evaluates its
// alert rules, in tx, and returns the result to store (see ingest).
func (s *Service) apply(ctx context.Context, tx *sql.Tx, m Monitor, probe string, r agentproto.MonitorCheckResult) (MonitorResult, error) {
	r = normalize(r)
	now := s.now()
	out := MonitorResult{ID: store.NewID(), MonitorID: m.ID, CheckedAt: now, Status: r.Status, ResponseMs: r.ResponseMs, Error: r.Error,
		Details: r.Details}
	var resp any
	if r.ResponseMs != nil {
		resp = *r.ResponseMs
	}
	var failures int
	var firing string
	err := tx.QueryRowContext(ctx, `UPDATE monitors SET status = $1, last_check_at = $2, last_response_ms = $3, last_error = $4,
		consecutive_failures = CASE WHEN $5 THEN consecutive_failures + 1 ELSE 0 END
		WHERE id = $6 AND (last_check_at IS NULL OR last_check_at <= $2) RETURNING consecutive_failures, firing`,
		r.Status, now, resp, store.NullIfEmpty(r.Error), r.Status == agentproto.MonitorOffline, m.ID).Scan(&failures, &firing)
	if errors.Is(err, sql.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("update monitor %s: %w", m.ID, err)
	}
	if r.Status != m.Status {
		before := m.Status
		m.Status = r.Status
		if err := s.statusChanged(ctx, tx, m, before); err != nil {
			return out, err
		}
	}
	var was []string
	if err := json.Unmarshal([]byte(firing), &was); err != nil {
		return out, fmt.Errorf("read the firing rules of monitor %s: %w", m.ID, err)
	}
	firingNow, err := s.evaluate(ctx, tx, m, probe, r, failures, was)
	if err != nil || slices.Equal(firingNow, was) {
		return out, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE monitors SET firing = $1 WHERE id = $2`, store.EncodeJSON(firingNow), m.ID); err != nil {
		return out, fmt.Errorf("update the firing rules of monitor %s: %w", m.ID, err)
	}
	return out, nil
}

// holds says whether a rule's condition holds for a result; known is false when the result
// says nothing of it (a response time rule and a check without an answer).
func holds(rule MonitorAlertRule, r agentproto.MonitorCheckResult, failures int) (hold, known bool) {
	switch rule.Condition {
	case ConditionOffline:
		return r.Status == agentproto.MonitorOffline, true
	case ConditionDegraded:
		return r.Status == agentproto.MonitorDegraded, true
	case ConditionResponseTimeGT:
		if r.ResponseMs == nil {
			return false, false
		}
		return *r.ResponseMs > *rule.Threshold, true
	case ConditionConsecutiveFailures:
		return float64(failures) > *rule.Threshold, true
	}
	return false, false
}

func describe(rule MonitorAlertRule) string {
	switch rule.Condition {
	case ConditionOffline:
		return "is offline"
	case ConditionDegraded:
		return "is degraded"
	case ConditionResponseTimeGT:
		return "answers slower than " + strconv.FormatFloat(*rule.Threshold, 'f', -1, 64) + " ms"
	}
	return "failed more than " + strconv.FormatFloat(*rule.Threshold, 'f', -1, 64) + " times in a row"
}

// evaluate raises the alerts of the rules whose condition holds and resolves those of the
// rules among was (whose condition held at the last result) whose condition no longer holds.
// It returns the rules whose condition holds now (or held and is not known now). A rule whose
// alert a maintenance window holds back (over the agent's device that checked, the monitor's
// site or its organization) stays firing: every result that sees its condition raises the
// alert again, so the first after the window opens it.
func (s *Service) evaluate(ctx context.Context, tx *sql.Tx, m Monitor, probe string, r agentproto.MonitorCheckResult, failures int, was []string) ([]string, error) {
	src := source(m)
	src.ProbeID = probe
	firing := []string{}
	for _, rule := range m.AlertRules {
		hold, known := holds(rule, r, failures)
		switch {
		case !known:
			if slices.Contains(was, rule.ID) {
				firing = append(firing, rule.ID)
			}
		case hold:
			firing = append(firing, rule.ID)
			msg := fmt.Sprintf("%s %s (%s %s)", m.Name, describe(rule), m.Type, m.Target)
			if r.Error != "" {
				msg += ": " + r.Error
			}
			c := map[string]any{"monitorId": m.ID, "monitorName": m.Name, "type": m.Type, "target": m.Target, "condition": rule.Condition,
				"status": r.Status, "consecutiveFailures": failures}
			if rule.Threshold != nil {
				c["threshold"] = *rule.Threshold
			}
			if r.ResponseMs != nil {
				c["responseMs"] = *r.ResponseMs
			}
			if _, _, err := s.alerts.RaiseFrom(ctx, tx, src, alerts.SourceAlert{Key: ruleKey(rule.ID), Severity: rule.Severity,
				Title: "Monitor " + m.Name + " " + describe(rule), Message: msg, Context: c,
				Cooldown: time.Duration(*rule.CooldownMinutes) * time.Minute}); err != nil {
				return nil, err
			}
		case slices.Contains(was, rule.ID):
			if err := s.alerts.ResolveFrom(ctx, tx, src, ruleKey(rule.ID), "recovered: the monitor is "+r.Status); err != nil {
				return nil, err
			}
		}
	}
	return firing, nil
}

// statusChanged records monitor.status_changed for m, now in m.Status.
func (s *Service) statusChanged(ctx context.Context, tx *sql.Tx, m Monitor, from string) error {
	_, err := events.Record(ctx, tx, events.Event{Type: EventStatusChanged, PartnerID: m.PartnerID, OrgID: m.OrgID, ResourceType: "monitor",
		ResourceID: m.ID}, map[string]any{"monitorId": m.ID, "name": m.Name, "type": m.Type, "target": m.Target, "from": from, "to": m.Status,
		"lastError": m.LastError})
	if err != nil {
		return fmt.Errorf("record the status change of monitor %s: %w", m.ID, err)
	}
	return nil
}

// onChecks stores the results of a monitor_checks batch, in the transaction that records the
// command's result. Results of monitors not of the agent's organization, deleted or disabled
// since, are dropped; a batch that failed or timed out changes nothing (the next round checks
// again).
func (s *Service) onChecks(ctx context.Context, tx *sql.Tx, deviceID string, cr agentproto.CommandResult) error {
	if cr.Status != agentproto.ResultCompleted {
		return nil
	}
	var res agentproto.MonitorChecksResult
	if err := json.Unmarshal(cr.Result, &res); err != nil {
		s.logger.Warn("monitor checks: unreadable result", "device", deviceID, "command", cr.CommandID, "error", err)
		return nil
	}
	return s.ingestBatch(ctx, tx, deviceID, res.Results)
}

// ingestBatch stores the results a device's agent reported, in tx (see onChecks).
func (s *Service) ingestBatch(ctx context.Context, tx *sql.Tx, deviceID string, results []agentproto.MonitorCheckResult) error {
	owners, err := devices.Owners(ctx, tx, []string{deviceID})
	if err != nil {
		return fmt.Errorf("read the agent's organization: %w", err)
	}
	owner, ok := owners[deviceID]
	if !ok {
		return nil
	}
	ids := make([]string, 0, len(results))
	for _, r := range results {
		if store.ValidID(r.MonitorID) && !slices.Contains(ids, r.MonitorID) {
			ids = append(ids, r.MonitorID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	var a store.Args
	conds := append([]string{"m.id IN " + a.In(ids), "m.org_id = " + a.Add(owner.OrgID), "m.enabled"}, monitorFilter(access.SystemScope(), &a)...)
	ms, err := store.QueryAll(ctx, tx, `SELECT `+monitorColumns+` FROM monitors m WHERE `+store.Where(conds), a.Values(), scanMonitor)
	if err != nil {
		return fmt.Errorf("read the monitors of checks: %w", err)
	}
	byID := make(map[string]Monitor, len(ms))
	for _, m := range ms {
		byID[m.ID] = m
	}
	stored := make([]storedResult, 0, len(byID))
	for _, r := range results {
		m, ok := byID[r.MonitorID]
		if !ok {
			continue
		}
		delete(byID, r.MonitorID)
		out, err := s.apply(ctx, tx, m, deviceID, r)
		if err != nil {
			return err
		}
		stored = append(stored, storedResult{m, out})
	}
	return insertResults(ctx, tx, stored)
}
