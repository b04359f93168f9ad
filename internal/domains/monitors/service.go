package monitors

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gale/internal/domains/agenthub"
	"gale/internal/domains/alerts"
	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Caller runs a call on a device's agent and waits for its answer (the agent hub).
type Caller interface {
	// AwaitLiveChannel reports whether the agent holds its live channel on any node, waiting a
	// moment for an agent that reported it is opening it.
	AwaitLiveChannel(ctx context.Context, deviceID string) (agenthub.Reach, error)
	Call(ctx context.Context, deviceID, method string, args any, timeout time.Duration) (json.RawMessage, error)
}

// Service keeps monitors and their results.
type Service struct {
	db      *store.DB
	logger  *slog.Logger
	clock   clock.Clock
	devices *devices.Service
	alerts  *alerts.Service
	agents  Caller
	// wake tells the event dispatcher that events were committed.
	wake func()
	// retention is how long results are kept.
	retention time.Duration
}

// Deps are what the monitors service works with.
type Deps struct {
	DB *store.DB
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock is the time checks are scheduled on; nil: the system clock.
	Clock   clock.Clock
	Devices *devices.Service
	Alerts  *alerts.Service
	Agents  Caller
	// Wake is called once events were committed; nil for none.
	Wake func()
}

// Options are the monitor settings of the server configuration.
type Options struct {
	// Retention is how long results are kept (default 30 days).
	Retention time.Duration
}

// New returns the monitors service.
func New(d Deps, opts Options) *Service {
	wake, logger, retention := d.Wake, d.Logger, opts.Retention
	if wake == nil {
		wake = func() {}
	}
	if logger == nil {
		logger = slog.Default()
	}
	if retention <= 0 {
		retention = 30 * 24 * time.Hour
	}
	return &Service{db: d.DB, logger: logger, clock: clock.Or(d.Clock), devices: d.Devices, alerts: d.Alerts, agents: d.Agents,
		wake: wake, retention: retention}
}

func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

const monitorColumns = `m.id, m.partner_id, m.org_id, m.site_id, m.name, m.type, m.target, m.config, m.alert_rules,
	m.interval_seconds, m.timeout_seconds, m.enabled, m.status, m.last_check_at, m.last_response_ms, m.last_error,
	m.consecutive_failures, m.next_check_at, m.created_by, m.created_at, m.updated_at`

func scanMonitor(r store.Scanner) (Monitor, error) {
	var m Monitor
	var site, lastErr, by sql.NullString
	var last sql.NullTime
	var resp sql.NullFloat64
	var cfg, rules string
	var next time.Time
	if err := r.Scan(&m.ID, &m.PartnerID, &m.OrgID, &site, &m.Name, &m.Type, &m.Target, &cfg, &rules, &m.IntervalSeconds,
		&m.TimeoutSeconds, &m.Enabled, &m.Status, &last, &resp, &lastErr, &m.ConsecutiveFailures, &next, &by, &m.CreatedAt,
		&m.UpdatedAt); err != nil {
		return m, err
	}
	m.SiteID, m.LastError, m.CreatedBy, m.LastCheckAt = store.StringPtr(site), store.StringPtr(lastErr), store.StringPtr(by), store.TimePtr(last)
	if m.LastCheckAt != nil {
		t := m.LastCheckAt.UTC()
		m.LastCheckAt = &t
	}
	if resp.Valid {
		m.LastResponseMs = &resp.Float64
	}
	if m.Enabled {
		next = next.UTC()
		m.NextCheckAt = &next
	}
	m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	if err := errors.Join(json.Unmarshal([]byte(cfg), &m.Config), json.Unmarshal([]byte(rules), &m.AlertRules)); err != nil {
		return m, fmt.Errorf("read monitor %s: %w", m.ID, err)
	}
	return m, nil
}

// monitorFilter keeps the monitors (alias m) in scope, of live organizations.
func monitorFilter(scope access.Scope, a *store.Args) []string {
	return []string{scope.OrgFilter(a, "m.org_id", "m.partner_id"), tenancy.LiveOrg("m.org_id")}
}

func getMonitor(ctx context.Context, q store.Querier, scope access.Scope, id string) (Monitor, error) {
	var a store.Args
	return store.ByID(ctx, q, "monitor", `SELECT `+monitorColumns+` FROM monitors m`, "m.id", id, &a, monitorFilter(scope, &a), scanMonitor)
}

// Get returns a monitor in scope.
func (s *Service) Get(ctx context.Context, id string) (Monitor, error) {
	return getMonitor(ctx, s.db, access.ScopeFrom(ctx), id)
}

// ListFilter narrows List.
type ListFilter struct {
	OrgID, SiteID, Type, Status string
	Enabled                     *bool
	// Search keeps monitors whose name or target contains it (any case).
	Search string
}

// List lists the monitors in scope, newest first.
func (s *Service) List(ctx context.Context, f ListFilter, page store.Page) ([]Monitor, string, *int, error) {
	var a store.Args
	conds := monitorFilter(access.ScopeFrom(ctx), &a)
	for col, v := range map[string]string{"m.org_id": f.OrgID, "m.site_id": f.SiteID, "m.type": f.Type, "m.status": f.Status} {
		if v != "" {
			conds = append(conds, col+" = "+a.Add(v))
		}
	}
	if f.Enabled != nil {
		conds = append(conds, "m.enabled = "+a.Add(*f.Enabled))
	}
	if f.Search != "" {
		conds = append(conds, store.Contains(&a, f.Search, "m.name", "m.target"))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: monitorColumns, From: " FROM monitors m", Conds: conds, Args: &a,
		SortKey: "m.id", SortID: "m.id", Desc: true}, page, scanMonitor, func(m Monitor) (string, string) { return m.ID, m.ID })
}

// checkPlace makes sure the site and the service check's device are of the organization.
func checkPlace(ctx context.Context, q store.Querier, orgID string, sp spec) error {
	var c checker
	if sp.SiteID != "" {
		owners, err := tenancy.SiteOwners(ctx, q, []string{sp.SiteID})
		if err != nil {
			return fmt.Errorf("check the monitor's site: %w", err)
		}
		if o, ok := owners[sp.SiteID]; !ok || o.OrgID != orgID {
			c.fail("siteId", "no such site in the organization")
		}
	}
	if sp.Type == agentproto.MonitorServiceCheck && sp.Config.DeviceID != "" {
		owners, err := devices.Owners(ctx, q, []string{sp.Config.DeviceID})
		if err != nil {
			return fmt.Errorf("check the monitor's device: %w", err)
		}
		if o, ok := owners[sp.Config.DeviceID]; !ok || o.OrgID != orgID {
			c.fail("config.deviceId", "no such device in the organization")
		}
	}
	return c.err()
}

func orDefault(v *int, def int) int {
	if v == nil {
		return def
	}
	return *v
}

// Create adds a monitor.
func (s *Service) Create(ctx context.Context, in MonitorInput) (Monitor, error) {
	var m Monitor
	err := s.db.Write(ctx, func(tx *sql.Tx) (err error) {
		m, err = s.CreateIn(ctx, tx, in)
		return err
	})
	if err != nil {
		return m, fmt.Errorf("create monitor: %w", err)
	}
	return m, nil
}

// CreateIn adds a monitor in the caller's transaction, placed and checked like Create (the
// scope comes from ctx). An enabled monitor is due at once.
func (s *Service) CreateIn(ctx context.Context, tx *sql.Tx, in MonitorInput) (Monitor, error) {
	sp := spec{SiteID: in.SiteID, Name: in.Name, Type: in.Type, Target: in.Target, Interval: orDefault(in.IntervalSeconds, DefaultInterval),
		Timeout: orDefault(in.TimeoutSeconds, DefaultTimeout), Enabled: in.Enabled == nil || *in.Enabled, Rules: in.AlertRules}
	if in.Config != nil {
		sp.Config = *in.Config
	}
	var c checker
	sp.validate(&c)
	if err := c.err(); err != nil {
		return Monitor{}, err
	}
	at, err := tenancy.Place(ctx, tx, access.ScopeFrom(ctx), in.OrgID, tenancy.PlaceOptions{Noun: "monitor"})
	if err != nil {
		return Monitor{}, fmt.Errorf("place monitor: %w", err)
	}
	if err := checkPlace(ctx, tx, at.OrgID, sp); err != nil {
		return Monitor{}, err
	}
	id, now := store.NewID(), s.now()
	if _, err := tx.ExecContext(ctx, `INSERT INTO monitors (id, partner_id, org_id, site_id, device_id, name, type, target, config,
		alert_rules, interval_seconds, timeout_seconds, enabled, status, next_check_at, created_by, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $15, $15)`, id, at.PartnerID, at.OrgID,
		store.NullIfEmpty(sp.SiteID), store.NullIfEmpty(sp.Config.DeviceID), sp.Name, sp.Type, sp.Target, store.EncodeJSON(sp.Config),
		store.EncodeJSON(sp.Rules), sp.Interval, sp.Timeout, sp.Enabled, agentproto.MonitorUnknown, now, access.ActorName(ctx)); err != nil {
		return Monitor{}, fmt.Errorf("insert monitor: %w", err)
	}
	m, err := getMonitor(ctx, tx, access.SystemScope(), id)
	if err != nil {
		return m, err
	}
	return m, audit.Record(ctx, tx, audit.Entry{Action: "monitor.create", ResourceType: "monitor", ResourceID: id, ResourceName: m.Name,
		PartnerID: m.PartnerID, OrgID: m.OrgID, Details: auditView(m)})
}

func auditView(m Monitor) map[string]any {
	return map[string]any{"type": m.Type, "target": m.Target, "siteId": m.SiteID, "config": m.Config, "intervalSeconds": m.IntervalSeconds,
		"timeoutSeconds": m.TimeoutSeconds, "enabled": m.Enabled, "alertRules": m.AlertRules}
}

func source(m Monitor) alerts.Source {
	src := alerts.Source{Type: alerts.SourceMonitor, ID: m.ID, PartnerID: m.PartnerID, OrgID: m.OrgID, SiteID: store.Deref(m.SiteID)}
	if m.Type == agentproto.MonitorServiceCheck {
		src.DeviceID = m.Config.DeviceID
	}
	return src
}

func ruleKey(id string) string { return "rule:" + id }

// Update changes a monitor (PATCH). A change of what is checked, or enabling it, makes it due
// at once; disabling it or dropping a rule resolves the open alerts concerned.
func (s *Service) Update(ctx context.Context, id string, in MonitorUpdate) (Monitor, error) {
	scope := access.ScopeFrom(ctx)
	var out Monitor
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		m, err := getMonitor(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		sp := spec{SiteID: store.Deref(m.SiteID), Name: m.Name, Type: m.Type, Target: m.Target, Config: m.Config, Interval: m.IntervalSeconds,
			Timeout: m.TimeoutSeconds, Enabled: m.Enabled, Rules: m.AlertRules, knownRules: map[string]bool{}}
		for _, r := range m.AlertRules {
			sp.knownRules[r.ID] = true
		}
		store.Assign(&sp.SiteID, in.SiteID)
		store.Assign(&sp.Name, in.Name)
		store.Assign(&sp.Type, in.Type)
		store.Assign(&sp.Target, in.Target)
		store.Assign(&sp.Config, in.Config)
		store.Assign(&sp.Interval, in.IntervalSeconds)
		store.Assign(&sp.Timeout, in.TimeoutSeconds)
		store.Assign(&sp.Enabled, in.Enabled)
		store.Assign(&sp.Rules, in.AlertRules)
		var c checker
		sp.validate(&c)
		if err := c.err(); err != nil {
			return err
		}
		if err := checkPlace(ctx, tx, m.OrgID, sp); err != nil {
			return err
		}
		now := s.now()
		ch := store.NewChanges(now)
		ch.Set("site_id", store.NullIfEmpty(sp.SiteID))
		ch.Set("device_id", store.NullIfEmpty(sp.Config.DeviceID))
		ch.Set("name", sp.Name)
		ch.Set("type", sp.Type)
		ch.Set("target", sp.Target)
		ch.Set("config", store.EncodeJSON(sp.Config))
		ch.Set("alert_rules", store.EncodeJSON(sp.Rules))
		ch.Set("interval_seconds", sp.Interval)
		ch.Set("timeout_seconds", sp.Timeout)
		ch.Set("enabled", sp.Enabled)
		changed := sp.Type != m.Type || sp.Target != m.Target || store.EncodeJSON(sp.Config) != store.EncodeJSON(m.Config) || sp.Interval != m.IntervalSeconds ||
			sp.SiteID != store.Deref(m.SiteID)
		if sp.Enabled && (!m.Enabled || changed) {
			ch.Set("next_check_at", now)
		}
		if changed || !sp.Enabled {
			ch.Set("status", agentproto.MonitorUnknown)
			ch.Set("consecutive_failures", 0)
			ch.Set("firing", "[]")
		}
		if _, err := tx.ExecContext(ctx, `UPDATE monitors SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id),
			ch.Args.Values()...); err != nil {
			return fmt.Errorf("update monitor %s: %w", id, err)
		}
		if err := s.resolveDropped(ctx, tx, m, sp, changed); err != nil {
			return err
		}
		if out, err = getMonitor(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		if out.Status != m.Status {
			if err := s.statusChanged(ctx, tx, out, m.Status); err != nil {
				return err
			}
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "monitor.update", ResourceType: "monitor", ResourceID: id, ResourceName: out.Name,
			PartnerID: out.PartnerID, OrgID: out.OrgID, Details: auditView(out)})
	})
	if err != nil {
		return out, fmt.Errorf("update monitor: %w", err)
	}
	s.wake()
	return out, nil
}

// resolveDropped resolves the open alerts of the rules an update removed, or every open alert
// when the monitor is disabled or now checks something else.
func (s *Service) resolveDropped(ctx context.Context, tx *sql.Tx, before Monitor, sp spec, changed bool) error {
	src := source(before)
	if !sp.Enabled {
		return s.alerts.ResolveFrom(ctx, tx, src, "", "the monitor was disabled")
	}
	if changed {
		return s.alerts.ResolveFrom(ctx, tx, src, "", "the monitor's check was changed")
	}
	kept := map[string]bool{}
	for _, r := range sp.Rules {
		kept[r.ID] = true
	}
	for _, r := range before.AlertRules {
		if !kept[r.ID] {
			if err := s.alerts.ResolveFrom(ctx, tx, src, ruleKey(r.ID), "the alert rule was removed"); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetEnabledIn enables or disables a monitor in scope in the caller's transaction: enabling
// makes it due at once, disabling resolves its open alerts.
func (s *Service) SetEnabledIn(ctx context.Context, tx *sql.Tx, id string, enabled bool) error {
	m, err := getMonitor(ctx, tx, access.ScopeFrom(ctx), id)
	if err != nil {
		return err
	}
	if m.Enabled == enabled {
		return nil
	}
	now := s.now()
	ch := store.NewChanges(now)
	ch.Set("enabled", enabled)
	if enabled {
		ch.Set("next_check_at", now)
	} else {
		ch.Set("status", agentproto.MonitorUnknown)
		ch.Set("consecutive_failures", 0)
		ch.Set("firing", "[]")
	}
	if _, err := tx.ExecContext(ctx, `UPDATE monitors SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id), ch.Args.Values()...); err != nil {
		return fmt.Errorf("enable monitor %s: %w", id, err)
	}
	if !enabled {
		if err := s.alerts.ResolveFrom(ctx, tx, source(m), "", "the monitor was disabled"); err != nil {
			return err
		}
		if m.Status != agentproto.MonitorUnknown {
			m2 := m
			m2.Status = agentproto.MonitorUnknown
			if err := s.statusChanged(ctx, tx, m2, m.Status); err != nil {
				return err
			}
		}
	}
	action := "monitor.disable"
	if enabled {
		action = "monitor.enable"
	}
	return audit.Record(ctx, tx, audit.Entry{Action: action, ResourceType: "monitor", ResourceID: id, ResourceName: m.Name,
		PartnerID: m.PartnerID, OrgID: m.OrgID})
}

// Delete removes a monitor with its results and resolves its open alerts.
func (s *Service) Delete(ctx context.Context, id string) error {
	scope := access.ScopeFrom(ctx)
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		m, err := getMonitor(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if err := s.alerts.ResolveFrom(ctx, tx, source(m), "", "the monitor was deleted"); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM monitor_results WHERE monitor_id = $1`, id); err != nil {
			return fmt.Errorf("delete results of monitor %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM monitors WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete monitor %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "monitor.delete", ResourceType: "monitor", ResourceID: id, ResourceName: m.Name,
			PartnerID: m.PartnerID, OrgID: m.OrgID})
	})
	if err != nil {
		return fmt.Errorf("delete monitor: %w", err)
	}
	s.wake()
	return nil
}
