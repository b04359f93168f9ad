package monitors

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"gale/internal/domains/agenthub"
	"gale/internal/domains/alerts"
	"gale/internal/domains/systemtools"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// callGrace is added to a check's timeout for the call's round trip.
const callGrace = 10 * time.Second

// run has an online agent of the monitor's site (or organization; for a service check its
// device) run c now, over its live channel, and returns its result and the agent's device.
func (s *Service) run(ctx context.Context, m Monitor, c agentproto.MonitorCheck) (agentproto.MonitorCheckResult, string, error) {
	var out agentproto.MonitorCheckResult
	agent, err := s.devices.PickProbe(ctx, s.db, probeTarget(m))
	if err != nil {
		return out, "", err
	}
	reach, err := s.agents.AwaitLiveChannel(ctx, agent)
	if err != nil {
		return out, "", fmt.Errorf("check the live channel of agent %s: %w", agent, err)
	}
	switch reach {
	case agenthub.Connecting:
		return out, "", &apperr.Error{Kind: apperr.KindUnavailable, Code: systemtools.CodeAgentOffline,
			Message: "the agent chosen to run the check is connecting its live channel, which a check run now needs: retry in a few seconds"}
	case agenthub.HTTPOnly:
		return out, "", &apperr.Error{Kind: apperr.KindUnavailable, Code: systemtools.CodeAgentOffline,
			Message: "the agent chosen to run the check reports over HTTP heartbeats only; a check run now needs its live connection: retry once it reconnects"}
	}
	raw, err := s.agents.Call(ctx, agent, agentproto.CallMonitorCheck, c, time.Duration(c.TimeoutSeconds)*time.Second+callGrace)
	if err != nil {
		return out, "", fmt.Errorf("call %s on agent %s: %w", agentproto.CallMonitorCheck, agent, err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, "", &apperr.Error{Kind: apperr.KindUpstream, Code: agentproto.ErrFailed, Message: "the agent's answer was unreadable"}
	}
	out.MonitorID = m.ID
	return normalize(out), agent, nil
}

// Check runs a monitor's check now on an agent and stores the result like a scheduled one.
func (s *Service) Check(ctx context.Context, id string) (MonitorResult, error) {
	m, err := s.Get(ctx, id)
	if err != nil {
		return MonitorResult{}, err
	}
	r, agent, err := s.run(ctx, m, checkOf(m))
	if err != nil {
		return MonitorResult{}, err
	}
	var out MonitorResult
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		m, err := getMonitor(ctx, tx, access.SystemScope(), id)
		if err != nil {
			return err
		}
		out, err = s.ingest(ctx, tx, m, agent, r)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("check monitor: %w", err)
	}
	s.wake()
	return out, nil
}

// MonitorTestInput overrides what a test checks, to try an edit before saving it.
type MonitorTestInput struct {
	SiteID         *string                   `json:"siteId,omitempty"`
	Type           *string                   `json:"type,omitempty"`
	Target         *string                   `json:"target,omitempty" maxLength:"2048"`
	Config         *agentproto.MonitorConfig `json:"config,omitempty"`
	TimeoutSeconds *int                      `json:"timeoutSeconds,omitempty"`
}

// Test runs a monitor's check now, with what in overrides, and returns the result without
// storing anything.
func (s *Service) Test(ctx context.Context, id string, in MonitorTestInput) (MonitorResult, error) {
	m, err := s.Get(ctx, id)
	if err != nil {
		return MonitorResult{}, err
	}
	sp := spec{SiteID: store.Deref(m.SiteID), Name: m.Name, Type: m.Type, Target: m.Target, Config: m.Config, Interval: m.IntervalSeconds,
		Timeout: m.TimeoutSeconds}
	store.Assign(&sp.SiteID, in.SiteID)
	store.Assign(&sp.Type, in.Type)
	store.Assign(&sp.Target, in.Target)
	store.Assign(&sp.Config, in.Config)
	store.Assign(&sp.Timeout, in.TimeoutSeconds)
	var c checker
	sp.validate(&c)
	if err := c.err(); err != nil {
		return MonitorResult{}, err
	}
	if err := checkPlace(ctx, s.db, m.OrgID, sp); err != nil {
		return MonitorResult{}, err
	}
	m.Type, m.Target, m.Config, m.TimeoutSeconds = sp.Type, sp.Target, sp.Config, sp.Timeout
	m.SiteID = nil
	if sp.SiteID != "" {
		m.SiteID = &sp.SiteID
	}
	r, _, err := s.run(ctx, m, checkOf(m))
	if err != nil {
		return MonitorResult{}, err
	}
	return MonitorResult{MonitorID: m.ID, CheckedAt: s.now(), Status: r.Status, ResponseMs: r.ResponseMs, Error: r.Error, Details: r.Details}, nil
}

const resultColumns = `r.id, r.monitor_id, r.checked_at, r.status, r.response_ms, r.error, r.details`

func scanResult(row store.Scanner) (MonitorResult, error) {
	var r MonitorResult
	var resp sql.NullFloat64
	var details string
	if err := row.Scan(&r.ID, &r.MonitorID, &r.CheckedAt, &r.Status, &resp, &r.Error, &details); err != nil {
		return r, err
	}
	r.CheckedAt = r.CheckedAt.UTC()
	if resp.Valid {
		r.ResponseMs = &resp.Float64
	}
	if err := json.Unmarshal([]byte(details), &r.Details); err != nil {
		return r, fmt.Errorf("read result %s: %w", r.ID, err)
	}
	return r, nil
}

// ResultFilter is the range of Results: checked at from or later, before to.
type ResultFilter struct {
	From, To *time.Time
}

// Results lists a monitor's stored results, newest first.
func (s *Service) Results(ctx context.Context, id string, f ResultFilter, page store.Page) ([]MonitorResult, string, *int, error) {
	if _, err := s.Get(ctx, id); err != nil {
		return nil, "", nil, err
	}
	if f.From != nil && f.To != nil && !f.From.Before(*f.To) {
		return nil, "", nil, apperr.Invalid("to", "to must be after from")
	}
	var a store.Args
	conds := []string{"r.monitor_id = " + a.Add(id)}
	if f.From != nil {
		conds = append(conds, "r.checked_at >= "+a.Add(f.From.UTC()))
	}
	if f.To != nil {
		conds = append(conds, "r.checked_at < "+a.Add(f.To.UTC()))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: resultColumns, From: " FROM monitor_results r", Conds: conds, Args: &a,
		SortKey: "r.checked_at", SortID: "r.id", Desc: true, KeyArg: func(k string) (any, error) { return time.Parse(time.RFC3339Nano, k) }},
		page, scanResult, func(r MonitorResult) (string, string) { return r.CheckedAt.Format(time.RFC3339Nano), r.ID })
}

// Purge deletes the results older than the retention.
func (s *Service) Purge(ctx context.Context) (int64, error) {
	return s.db.Purge(ctx, "monitor results",
		store.Deletion{SQL: `DELETE FROM monitor_results WHERE checked_at < $1`, Args: []any{s.now().Add(-s.retention)}})
}

// MonitorDashboard counts the monitors in scope.
type MonitorDashboard struct {
	Total         int            `json:"total"`
	Enabled       int            `json:"enabled"`
	ByStatus      map[string]int `json:"byStatus" doc:"online, offline, degraded, unknown."`
	ByType        map[string]int `json:"byType" doc:"icmp_ping, tcp_port, http_check, dns_check, service_check."`
	OpenAlerts    int            `json:"openAlerts" doc:"Open (active, acknowledged, suppressed) alerts of monitors."`
	AlertsBySev   map[string]int `json:"openAlertsBySeverity" doc:"critical, high, medium, low, info."`
	AvgResponseMs *float64       `json:"avgResponseMs" doc:"Average last response time of the online monitors; null when none."`
}

// Dashboard counts the monitors in scope (of one organization when orgID is set) by status and
// type, their open alerts by severity and the online monitors' average response time.
func (s *Service) Dashboard(ctx context.Context, orgID string) (MonitorDashboard, error) {
	out := MonitorDashboard{ByStatus: map[string]int{}, ByType: map[string]int{}, AlertsBySev: map[string]int{}}
	for _, st := range statuses {
		out.ByStatus[st] = 0
	}
	for _, t := range types {
		out.ByType[t] = 0
	}
	for _, sv := range severities {
		out.AlertsBySev[sv] = 0
	}
	var a store.Args
	conds := monitorFilter(access.ScopeFrom(ctx), &a)
	if orgID != "" {
		conds = append(conds, "m.org_id = "+a.Add(orgID))
	}
	// group counts the monitors of one status and type.
	type group struct {
		status, typ string
		n, enabled  int
		responseSum sql.NullFloat64
		timed       int
	}
	groups, err := store.QueryAll(ctx, s.db, `SELECT m.status, m.type, COUNT(*), SUM(CASE WHEN m.enabled THEN 1 ELSE 0 END),
		SUM(CASE WHEN m.status = 'online' THEN m.last_response_ms END), SUM(CASE WHEN m.status = 'online' AND m.last_response_ms IS NOT NULL THEN 1 ELSE 0 END)
		FROM monitors m WHERE `+store.Where(conds)+` GROUP BY m.status, m.type`, a.Values(), func(row store.Scanner) (group, error) {
		var g group
		return g, row.Scan(&g.status, &g.typ, &g.n, &g.enabled, &g.responseSum, &g.timed)
	})
	if err != nil {
		return out, fmt.Errorf("count monitors: %w", err)
	}
	var sum float64
	var timed int
	for _, g := range groups {
		out.Total += g.n
		out.Enabled += g.enabled
		out.ByStatus[g.status] += g.n
		out.ByType[g.typ] += g.n
		sum += g.responseSum.Float64
		timed += g.timed
	}
	if timed > 0 {
		avg := sum / float64(timed)
		out.AvgResponseMs = &avg
	}
	open, err := s.alerts.SummarizeSource(ctx, orgID, alerts.SourceMonitor)
	if err != nil {
		return out, fmt.Errorf("summarize monitor alerts: %w", err)
	}
	out.OpenAlerts = open.Total
	maps.Copy(out.AlertsBySev, open.BySeverity)
	return out, nil
}

// AlertFilter narrows the monitor alerts listed.
type AlertFilter struct {
	Statuses, Severities []string
	MonitorID, OrgID     string
}

// Alerts lists the alerts of monitors in scope, newest first.
func (s *Service) Alerts(ctx context.Context, f AlertFilter, page store.Page) ([]alerts.Alert, string, *int, error) {
	return s.alerts.List(ctx, alerts.ListFilter{SourceType: alerts.SourceMonitor, SourceID: f.MonitorID, OrgID: f.OrgID,
		Statuses: f.Statuses, Severities: f.Severities}, page)
}

// MonitorAlerts lists the alerts of one monitor in scope.
func (s *Service) MonitorAlerts(ctx context.Context, id string, f AlertFilter, page store.Page) ([]alerts.Alert, string, *int, error) {
	if _, err := s.Get(ctx, id); err != nil {
		return nil, "", nil, err
	}
	f.MonitorID = id
	return s.Alerts(ctx, f, page)
}

// monitorAlert returns an alert in scope raised by a monitor; any other is not found.
func (s *Service) monitorAlert(ctx context.Context, id string) (alerts.Alert, error) {
	x, err := s.alerts.Get(ctx, id)
	var ae *apperr.Error
	if errors.As(err, &ae) && ae.Kind == apperr.KindNotFound {
		return x, apperr.NotFound("monitor alert")
	}
	if err != nil {
		return x, fmt.Errorf("load alert %s: %w", id, err)
	}
	if x.SourceType != alerts.SourceMonitor {
		return x, apperr.NotFound("monitor alert")
	}
	return x, nil
}

// alertActions maps the statuses a caller may set on a monitor alert to the alert actions.
var alertActions = map[string]string{alerts.StatusAcknowledged: alerts.ActionAcknowledge, alerts.StatusResolved: alerts.ActionResolve,
	alerts.StatusSuppressed: alerts.ActionSuppress}

// ActOnAlert moves a monitor alert to status (acknowledged, resolved, suppressed) through the
// alert state machine (409 when it cannot go there).
func (s *Service) ActOnAlert(ctx context.Context, id, status string, in alerts.ActionInput) (alerts.Alert, error) {
	action, ok := alertActions[status]
	if !ok {
		return alerts.Alert{}, apperr.Invalid("status", "status must be acknowledged, resolved or suppressed")
	}
	if _, err := s.monitorAlert(ctx, id); err != nil {
		return alerts.Alert{}, err
	}
	return s.alerts.Act(ctx, id, action, in)
}

// DismissAlert dismisses a monitor alert (409 when it is dismissed already).
func (s *Service) DismissAlert(ctx context.Context, id string) error {
	if _, err := s.monitorAlert(ctx, id); err != nil {
		return err
	}
	_, err := s.alerts.Act(ctx, id, alerts.ActionDismiss, alerts.ActionInput{})
	return err
}
