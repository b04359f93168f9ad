package monitors

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Scheduling.
const (
	// DispatchEvery is how often the scheduler looks for due monitors.
	DispatchEvery = 2 * time.Second
	// claimBatch bounds the monitors one round claims; more wait for the next round.
	claimBatch = 10000
	// maxChecksPerCommand bounds the checks of one monitor_checks command.
	maxChecksPerCommand = 500
	// agentParallel is how many checks an agent runs at once (its netcheck capability's bound).
	agentParallel = 32
	// batchGrace is added to a batch's timeout for the agent's own overhead.
	batchGrace = 30
)

// schedulerCtx is the context the scheduler sends commands in: the system's.
func schedulerCtx(ctx context.Context) context.Context {
	return access.WithPrincipal(ctx, &access.Principal{Kind: access.ActorSystem, ID: "monitors", Name: "monitor scheduler",
		Scope: access.SystemScope()})
}

// Dispatch claims the enabled monitors that are due (up to claimBatch a round) and sends
// their checks, one monitor_checks command per agent (in chunks of 500 checks). The claim
// moves each monitor's next_check_at one interval on with a conditional UPDATE, so concurrent
// runs (several nodes) dispatch each due monitor once per interval. A monitor no online agent
// can check goes unknown, saying why.
func (s *Service) Dispatch(ctx context.Context) error {
	ctx = schedulerCtx(ctx)
	now := s.now()
	intervals, err := store.QueryAll(ctx, s.db, `SELECT DISTINCT interval_seconds FROM monitors WHERE enabled AND next_check_at <= $1`,
		[]any{now}, func(row store.Scanner) (int, error) {
			var i int
			return i, row.Scan(&i)
		})
	if err != nil {
		return fmt.Errorf("find due monitors: %w", err)
	}
	if len(intervals) == 0 {
		return nil
	}
	var cmds []devices.DeviceCommand
	var due []Monitor
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		due = nil
		for _, interval := range intervals {
			if len(due) >= claimBatch {
				break
			}
			ms, err := claim(ctx, tx, now, interval, claimBatch-len(due))
			if err != nil {
				return err
			}
			due = append(due, ms...)
		}
		cmds, err = s.send(ctx, tx, due)
		return err
	})
	if err != nil {
		return fmt.Errorf("dispatch monitor checks: %w", err)
	}
	s.devices.Dispatch(ctx, cmds)
	if len(due) > 0 {
		s.wake()
	}
	return nil
}

// claim moves the next check of up to limit due monitors of one interval to now plus the
// interval and returns them. The WHERE is evaluated again on rows a concurrent claim changed,
// so a monitor goes to one claim.
func claim(ctx context.Context, tx *sql.Tx, now time.Time, interval, limit int) ([]Monitor, error) {
	next := now.Add(time.Duration(interval) * time.Second)
	cols := strings.ReplaceAll(monitorColumns, "m.", "")
	out, err := store.QueryAll(ctx, tx, `UPDATE monitors SET next_check_at = $1 WHERE id IN (SELECT d.id FROM monitors d
		WHERE d.enabled AND d.interval_seconds = $2 AND d.next_check_at <= $3 AND `+tenancy.LiveOrg("d.org_id")+`
		ORDER BY d.next_check_at LIMIT `+fmt.Sprint(limit)+`) AND enabled AND next_check_at <= $3 RETURNING `+cols,
		[]any{next, interval, now}, scanMonitor)
	if err != nil {
		return nil, fmt.Errorf("claim due monitors: %w", err)
	}
	return out, nil
}

// probeTarget is where a monitor's check may run.
func probeTarget(m Monitor) devices.ProbeTarget {
	if m.Type == agentproto.MonitorServiceCheck {
		return devices.ProbeTarget{OrgID: m.OrgID, DeviceID: m.Config.DeviceID}
	}
	return devices.ProbeTarget{OrgID: m.OrgID, SiteID: store.Deref(m.SiteID)}
}

func checkOf(m Monitor) agentproto.MonitorCheck {
	return agentproto.MonitorCheck{MonitorID: m.ID, Type: m.Type, Target: m.Target, Config: m.Config, TimeoutSeconds: m.TimeoutSeconds}
}

// send picks an agent for each claimed monitor, records one command per agent (per chunk),
// and marks the monitors without one unknown.
func (s *Service) send(ctx context.Context, tx *sql.Tx, ms []Monitor) ([]devices.DeviceCommand, error) {
	probes := map[string]string{}
	noAgent := map[string]string{}
	perAgent := map[string][]Monitor{}
	var agents []string
	var unknown []Monitor
	for _, m := range ms {
		t := probeTarget(m)
		key := t.OrgID + "/" + t.SiteID + "/" + t.DeviceID
		id, ok := probes[key]
		if _, none := noAgent[key]; !ok && !none {
			var err error
			id, err = s.devices.PickProbe(ctx, tx, t)
			if ae, isApp := apperr.As(err); isApp && ae.Code == devices.CodeNoProbeAgent {
				noAgent[key] = ae.Message
			} else if err != nil {
				return nil, err
			} else {
				probes[key] = id
			}
		}
		if reason, none := noAgent[key]; none {
			m.LastError = &reason
			unknown = append(unknown, m)
			continue
		}
		if _, seen := perAgent[id]; !seen {
			agents = append(agents, id)
		}
		perAgent[id] = append(perAgent[id], m)
	}
	if err := s.markUnknown(ctx, tx, unknown); err != nil {
		return nil, err
	}
	var cmds []devices.DeviceCommand
	for _, agent := range agents {
		list := perAgent[agent]
		for first := 0; first < len(list); first += maxChecksPerCommand {
			chunk := list[first:min(first+maxChecksPerCommand, len(list))]
			c, err := s.sendChecks(ctx, tx, agent, chunk)
			if err != nil {
				return nil, err
			}
			cmds = append(cmds, c...)
		}
	}
	return cmds, nil
}

// batchTimeout is how long an agent may take over checks run agentParallel at a time.
func batchTimeout(ms []Monitor) int {
	longest := 0
	for _, m := range ms {
		longest = max(longest, m.TimeoutSeconds)
	}
	rounds := (len(ms) + agentParallel - 1) / agentParallel
	return min(longest*rounds+batchGrace, 3600)
}

func (s *Service) sendChecks(ctx context.Context, tx *sql.Tx, agent string, ms []Monitor) ([]devices.DeviceCommand, error) {
	p := agentproto.MonitorChecks{Checks: make([]agentproto.MonitorCheck, len(ms))}
	for i, m := range ms {
		p.Checks[i] = checkOf(m)
	}
	res, err := s.devices.SendBulkIn(ctx, tx, devices.BulkInput{DeviceIDs: []string{agent}, Audited: true,
		CommandInput: devices.CommandInput{Type: agentproto.CommandMonitorChecks, Payload: json.RawMessage(store.EncodeJSON(p)), TimeoutSeconds: batchTimeout(ms)}})
	if err != nil {
		return nil, fmt.Errorf("send monitor checks to %s: %w", agent, err)
	}
	return res.Commands, nil
}

// markUnknown sets monitors unknown with their LastError as the reason (no agent could check
// them). Unknown raises and resolves no alert: nothing was learned of the target.
func (s *Service) markUnknown(ctx context.Context, tx *sql.Tx, ms []Monitor) error {
	for _, m := range ms {
		if _, err := tx.ExecContext(ctx, `UPDATE monitors SET status = $1, last_error = $2 WHERE id = $3`, agentproto.MonitorUnknown,
			*m.LastError, m.ID); err != nil {
			return fmt.Errorf("mark monitor %s unknown: %w", m.ID, err)
		}
		if m.Status != agentproto.MonitorUnknown {
			before := m.Status
			m.Status = agentproto.MonitorUnknown
			if err := s.statusChanged(ctx, tx, m, before); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateChecks checks a monitor_checks payload.
func validateChecks(payload json.RawMessage, _ string) (any, error) {
	var p agentproto.MonitorChecks
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, apperr.Invalid("payload", "payload must be {checks: [...]}")
	}
	if len(p.Checks) == 0 || len(p.Checks) > maxChecksPerCommand {
		return nil, apperr.Invalid("payload.checks", "1 to 500 checks")
	}
	return p, nil
}
