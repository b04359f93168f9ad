package alerts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gale/internal/access"
	"gale/internal/audit"
	"gale/internal/store"
)

// device is what evaluation needs to know about a device.
type device struct {
	ID, PartnerID, OrgID, SiteID, Hostname, Status string
	LastSeen, SilentSince                          *time.Time
	groups                                         []string
	groupsLoaded                                   bool
}

const evalDeviceColumns = `d.id, d.partner_id, d.org_id, d.site_id, d.hostname, d.status, d.last_seen_at, d.main_agent_silent_since`

func scanDevice(row store.Scanner) (*device, error) {
	d := &device{}
	var seen, silent sql.NullTime
	if err := row.Scan(&d.ID, &d.PartnerID, &d.OrgID, &d.SiteID, &d.Hostname, &d.Status, &seen, &silent); err != nil {
		return nil, err
	}
	d.LastSeen, d.SilentSince = utcPtr(seen), utcPtr(silent)
	return d, nil
}

// Observation is what a leaf condition saw on a device.
type Observation struct {
	Type            string   `json:"type"`
	Metric          string   `json:"metric,omitempty"`
	Operator        string   `json:"operator,omitempty"`
	Threshold       *float64 `json:"threshold,omitempty"`
	Value           *float64 `json:"value" doc:"The observed value: the metric's average over the window, minutes offline or silent, failed commands in the window; null when there was no data."`
	DurationMinutes int      `json:"durationMinutes"`
	Samples         *int     `json:"samples,omitempty" doc:"Heartbeat samples in the window (threshold)."`
	Holds           bool     `json:"holds"`
}

// evaluation is the outcome of a rule on a device.
type evaluation struct {
	holds bool
	obs   []Observation
}

// evaluator computes conditions for one device at one instant, reading each fact once.
type evaluator struct {
	q   store.Querier
	d   *device
	now time.Time
	// window is the longest threshold window (minutes) the evaluation needs; samples hold the
	// heartbeats of that window once loaded.
	window  int
	samples []sample
	loaded  bool
	failed  map[string]int
}

func newEvaluator(q store.Querier, d *device, now time.Time, rules ...Rule) *evaluator {
	e := &evaluator{q: q, d: d, now: now, failed: map[string]int{}}
	for _, r := range rules {
		e.window = max(e.window, maxWindow(r.cond))
	}
	return e
}

func (e *evaluator) eval(ctx context.Context, c Condition) (evaluation, error) {
	if c.IsGroup() {
		out := evaluation{holds: c.Logic == "and"}
		for _, sub := range c.Conditions {
			r, err := e.eval(ctx, sub)
			if err != nil {
				return out, err
			}
			out.obs = append(out.obs, r.obs...)
			if c.Logic == "and" {
				out.holds = out.holds && r.holds
			} else {
				out.holds = out.holds || r.holds
			}
		}
		return out, nil
	}
	dur := 0
	if c.DurationMinutes != nil {
		dur = *c.DurationMinutes
	}
	o := Observation{Type: c.Type, DurationMinutes: dur}
	window := time.Duration(dur) * time.Minute
	switch c.Type {
	case CondThreshold:
		o.Metric, o.Operator, o.Threshold = c.Metric, c.Operator, c.Value
		v, n, err := e.average(ctx, c.Metric, dur)
		if err != nil {
			return evaluation{}, err
		}
		o.Value, o.Samples = v, &n
		o.Holds = v != nil && c.Value != nil && compare(c.Operator, *v, *c.Value)
	case CondOffline:
		if e.d.Status == "offline" && e.d.LastSeen != nil {
			m := minutes(e.now.Sub(*e.d.LastSeen))
			o.Value = &m
			o.Holds = e.now.Sub(*e.d.LastSeen) >= window
		}
	case CondAgentSilent:
		if e.d.SilentSince != nil {
			m := minutes(e.now.Sub(*e.d.SilentSince))
			o.Value = &m
			o.Holds = e.now.Sub(*e.d.SilentSince) >= window
		}
	case CondCommandFailed:
		n, err := e.failedCommands(ctx, c.CommandTypes, dur)
		if err != nil {
			return evaluation{}, err
		}
		f := float64(n)
		o.Value = &f
		o.Holds = n > 0
	}
	return evaluation{holds: o.Holds, obs: []Observation{o}}, nil
}

func minutes(d time.Duration) float64 { return math.Round(d.Minutes()*10) / 10 }

// sample is one heartbeat's metrics.
type sample struct {
	at             time.Time
	cpu, ram, disk float64
}

func (m sample) metric(name string) float64 {
	switch name {
	case "cpuPercent":
		return m.cpu
	case "ramPercent":
		return m.ram
	}
	return m.disk
}

// loadSamples reads, once per evaluation, the heartbeat samples of the longest window any
// threshold condition needs (newest first); with no window, the latest sample.
func (e *evaluator) loadSamples(ctx context.Context) error {
	if e.loaded {
		return nil
	}
	var rows *sql.Rows
	var err error
	if e.window > 0 {
		rows, err = e.q.QueryContext(ctx, `SELECT recorded_at, cpu_percent, ram_percent, disk_percent FROM device_metrics
			WHERE device_id = $1 AND recorded_at >= $2 ORDER BY recorded_at DESC`, e.d.ID, e.now.Add(-time.Duration(e.window)*time.Minute))
	} else {
		rows, err = e.q.QueryContext(ctx, `SELECT recorded_at, cpu_percent, ram_percent, disk_percent FROM device_metrics
			WHERE device_id = $1 ORDER BY recorded_at DESC LIMIT 1`, e.d.ID)
	}
	if err != nil {
		return fmt.Errorf("load metrics: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var m sample
		if err := rows.Scan(&m.at, &m.cpu, &m.ram, &m.disk); err != nil {
			return err
		}
		e.samples = append(e.samples, m)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	e.loaded = true
	return nil
}

// average is the metric's average over the last dur minutes of heartbeats; with dur 0 the
// latest sample. nil when the window holds no sample.
func (e *evaluator) average(ctx context.Context, metric string, dur int) (*float64, int, error) {
	if err := e.loadSamples(ctx); err != nil {
		return nil, 0, err
	}
	if dur == 0 {
		if len(e.samples) == 0 {
			// The window held nothing; the latest sample may be older.
			var m sample
			err := e.q.QueryRowContext(ctx, `SELECT recorded_at, cpu_percent, ram_percent, disk_percent FROM device_metrics
				WHERE device_id = $1 ORDER BY recorded_at DESC LIMIT 1`, e.d.ID).Scan(&m.at, &m.cpu, &m.ram, &m.disk)
			if errors.Is(err, sql.ErrNoRows) {
				return nil, 0, nil
			}
			if err != nil {
				return nil, 0, err
			}
			e.samples = append(e.samples, m)
		}
		v := e.samples[0].metric(metric)
		return &v, 1, nil
	}
	from := e.now.Add(-time.Duration(dur) * time.Minute)
	var sum float64
	n := 0
	for _, m := range e.samples {
		if m.at.Before(from) {
			break
		}
		sum += m.metric(metric)
		n++
	}
	if n == 0 {
		return nil, 0, nil
	}
	v := math.Round(sum/float64(n)*100) / 100
	return &v, n, nil
}

// maxWindow is the longest threshold window of the conditions.
func maxWindow(c Condition) int {
	if c.IsGroup() {
		m := 0
		for _, sub := range c.Conditions {
			m = max(m, maxWindow(sub))
		}
		return m
	}
	if c.Type == CondThreshold && c.DurationMinutes != nil {
		return *c.DurationMinutes
	}
	return 0
}

// failedCommands counts the device's commands that ended failed or timed out within the
// last dur minutes, of the given types (any type when none).
func (e *evaluator) failedCommands(ctx context.Context, types []string, dur int) (int, error) {
	key := strings.Join(types, ",") + "/" + strconv.Itoa(dur)
	if n, ok := e.failed[key]; ok {
		return n, nil
	}
	var a store.Args
	q := `SELECT COUNT(*) FROM device_commands WHERE device_id = ` + a.Add(e.d.ID) + ` AND status IN ('failed', 'timed_out')
		AND completed_at >= ` + a.Add(e.now.Add(-time.Duration(dur)*time.Minute))
	if len(types) > 0 {
		q += ` AND type IN ` + a.In(types)
	}
	var n int
	if err := e.q.QueryRowContext(ctx, q, a.Values()...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count failed commands: %w", err)
	}
	e.failed[key] = n
	return n, nil
}

// loadDevice reads a live (not decommissioned) device; nil when there is none.
func loadDevice(ctx context.Context, q store.Querier, id string) (*device, error) {
	d, err := scanDevice(q.QueryRowContext(ctx, `SELECT `+evalDeviceColumns+` FROM devices d WHERE d.id = $1
		AND d.decommissioned_at IS NULL`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return d, err
}

// inGroup reports whether the device is a member of any of the groups.
func inGroup(ctx context.Context, q store.Querier, d *device, ids []string) (bool, error) {
	if !d.groupsLoaded {
		rows, err := q.QueryContext(ctx, `SELECT group_id FROM device_group_members WHERE device_id = $1`, d.ID)
		if err != nil {
			return false, err
		}
		defer rows.Close()
		for rows.Next() {
			var g string
			if err := rows.Scan(&g); err != nil {
				return false, err
			}
			d.groups = append(d.groups, g)
		}
		if err := rows.Err(); err != nil {
			return false, err
		}
		d.groupsLoaded = true
	}
	for _, g := range ids {
		if slices.Contains(d.groups, g) {
			return true, nil
		}
	}
	return false, nil
}

// targets reports whether the rule watches the device.
func targets(ctx context.Context, q store.Querier, r Rule, d *device) (bool, error) {
	switch r.Targets.Type {
	case "all":
		return true, nil
	case "org":
		return slices.Contains(r.Targets.IDs, d.OrgID), nil
	case "site":
		return slices.Contains(r.Targets.IDs, d.SiteID), nil
	case "device":
		return slices.Contains(r.Targets.IDs, d.ID), nil
	case "group":
		return inGroup(ctx, q, d, r.Targets.IDs)
	}
	return false, nil
}

// applicableRules returns the enabled rules of the device's partner and organization whose
// targets include the device. The rule set of a (partner, organization) pair is cached with
// its signature (how many rules and the latest updated_at): one aggregate query confirms the
// cache, and any create, change or delete (on any node) changes the signature, so the set is
// read again. (A delete and a create in the same interval keep the count, but the new rule's
// updated_at is the newest, unless the creating node's clock is behind the others.)
func (s *Service) applicableRules(ctx context.Context, q store.Querier, d *device) ([]Rule, error) {
	var n int
	var latest any // a time on PostgreSQL, text on SQLite: compared as its printed form
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*), MAX(r.updated_at) FROM alert_rules r WHERE r.partner_id = $1
		AND (r.org_id IS NULL OR r.org_id = $2)`, d.PartnerID, d.OrgID).Scan(&n, &latest); err != nil {
		return nil, fmt.Errorf("check rules: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	sig := ruleSig{n: n, latest: fmt.Sprint(latest)}
	key := d.PartnerID + "/" + d.OrgID
	all, ok := s.rules.get(key, sig)
	if !ok {
		all = nil
		rows, err := q.QueryContext(ctx, `SELECT `+ruleColumns+` FROM alert_rules r WHERE r.partner_id = $1
			AND (r.org_id IS NULL OR r.org_id = $2) AND r.enabled = $3 ORDER BY r.id`, d.PartnerID, d.OrgID, true)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			r, err := scanRule(rows)
			if err != nil {
				rows.Close()
				return nil, err
			}
			all = append(all, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		s.rules.put(key, sig, all)
	}
	out := make([]Rule, 0, len(all))
	for _, r := range all {
		ok, err := targets(ctx, q, r, d)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// ruleSig identifies a version of a rule set.
type ruleSig struct {
	n      int
	latest string
}

// ruleCache keeps the decoded enabled rules of each (partner, organization) pair with the
// signature they were read at. Rules are never changed in place, so the slices are shared.
type ruleCache struct {
	mu   sync.Mutex
	sets map[string]ruleSet
}

type ruleSet struct {
	sig   ruleSig
	rules []Rule
}

func (c *ruleCache) get(key string, sig ruleSig) ([]Rule, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	set, ok := c.sets[key]
	if !ok || set.sig != sig {
		return nil, false
	}
	return set.rules, true
}

func (c *ruleCache) put(key string, sig ruleSig, rules []Rule) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sets == nil {
		c.sets = map[string]ruleSet{}
	}
	if len(c.sets) > 10000 {
		clear(c.sets)
	}
	c.sets[key] = ruleSet{sig: sig, rules: rules}
}

// render fills a template's placeholders from the device and the first threshold
// observation (or the first observation that holds).
func render(tmpl string, d *device, obs []Observation) string {
	var pick *Observation
	for i := range obs {
		if obs[i].Holds && (pick == nil || (pick.Type != CondThreshold && obs[i].Type == CondThreshold)) {
			pick = &obs[i]
		}
	}
	value, threshold, metric := "", "", ""
	if pick != nil {
		if pick.Value != nil {
			value = strconv.FormatFloat(*pick.Value, 'f', -1, 64)
		}
		if pick.Threshold != nil {
			threshold = strconv.FormatFloat(*pick.Threshold, 'f', -1, 64)
		}
		metric = pick.Metric
		if metric == "" {
			metric = pick.Type
		}
	}
	return strings.NewReplacer("{{hostname}}", d.Hostname, "{{value}}", value, "{{threshold}}", threshold,
		"{{metric}}", metric).Replace(tmpl)
}

// EvaluateDevice evaluates every applicable enabled rule on the device inside tx: it opens
// an alert for each rule whose conditions hold (unless one is open or the cooldown runs) and,
// for rules with autoResolve, resolves the open alert of each rule whose conditions no longer
// hold. It is the hook of heartbeats and command results and the body of the sweep.
func (s *Service) EvaluateDevice(ctx context.Context, tx *sql.Tx, deviceID string) error {
	d, err := loadDevice(ctx, tx, deviceID)
	if err != nil || d == nil {
		return err
	}
	rules, err := s.applicableRules(ctx, tx, d)
	if err != nil || len(rules) == 0 {
		return err
	}
	open, err := openRules(ctx, tx, d.ID)
	if err != nil {
		return err
	}
	now := s.now()
	ev := newEvaluator(tx, d, now, rules...)
	for _, r := range rules {
		res, err := ev.eval(ctx, r.cond)
		if err != nil {
			return fmt.Errorf("evaluate rule %s on device %s: %w", r.ID, d.ID, err)
		}
		// Only a change costs a write: the open set was read in this transaction, and should a
		// concurrent one have changed it, the unique index and the conditional update still
		// decide (and the next evaluation catches up).
		switch {
		case res.holds && !open[r.ID]:
			err = s.open(ctx, tx, r, d, res, now)
		case !res.holds && open[r.ID] && r.AutoResolve:
			err = s.autoResolve(ctx, tx, r, d, now)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// openRules returns the rules that have an open alert on the device.
func openRules(ctx context.Context, q store.Querier, deviceID string) (map[string]bool, error) {
	var a store.Args
	rows, err := q.QueryContext(ctx, `SELECT rule_id FROM alerts WHERE device_id = `+a.Add(deviceID)+` AND rule_id IS NOT NULL
		AND status IN `+a.In(openStatuses), a.Values()...)
	if err != nil {
		return nil, fmt.Errorf("load open alerts: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// open inserts the alert unless an open alert of the rule and device exists (the partial
// unique index decides, under any concurrency) or the last one ended less than the cooldown
// ago.
func (s *Service) open(ctx context.Context, tx *sql.Tx, r Rule, d *device, res evaluation, now time.Time) error {
	id := store.NewID()
	ctxJSON := encodeJSON(map[string]any{"ruleName": r.Name, "hostname": d.Hostname, "observations": res.obs})
	cooldownStart := now.Add(-time.Duration(r.CooldownMinutes) * time.Minute)
	var cooling int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM alerts c WHERE c.rule_id = $1 AND c.device_id = $2
		AND (c.resolved_at >= $3 OR c.dismissed_at >= $3)`, r.ID, d.ID, cooldownStart).Scan(&cooling); err != nil {
		return fmt.Errorf("check cooldown: %w", err)
	}
	if cooling > 0 {
		return nil
	}
	result, err := tx.ExecContext(ctx, `INSERT INTO alerts (id, partner_id, org_id, site_id, device_id, rule_id, severity, status,
		title, message, context, triggered_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)
		ON CONFLICT DO NOTHING`, id, d.PartnerID, d.OrgID, d.SiteID, d.ID, r.ID, r.Severity, StatusActive,
		truncate(render(r.TitleTemplate, d, res.obs), 500), truncate(render(r.MessageTemplate, d, res.obs), 4000), ctxJSON, now)
	if err != nil {
		return fmt.Errorf("open alert: %w", err)
	}
	if n, _ := result.RowsAffected(); n == 0 {
		return nil
	}
	x, err := getAlert(ctx, tx, access.SystemScope(), id)
	if err != nil {
		return err
	}
	return record(ctx, tx, x, transition{event: "alert.triggered", audit: "alert.trigger"}, systemActor)
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

// autoResolve resolves the rule's open alert on the device, as the system (resolvedBy null).
// A technician who moved it first wins; then there is nothing to do.
func (s *Service) autoResolve(ctx context.Context, tx *sql.Tx, r Rule, d *device, now time.Time) error {
	var a store.Args
	return resolveOpen(ctx, tx, now, "", &a, "rule_id = "+a.Add(r.ID)+" AND device_id = "+a.Add(d.ID))
}

// EvaluateAll is the periodic sweep (job alerts-evaluate). It returns suppressed alerts whose
// suppressedUntil passed to active, then evaluates every live device of
// every partner that has enabled rules, one transaction per device, so that time-based
// conditions (offline, agent silent, windows running out) open and resolve alerts without a
// heartbeat.
func (s *Service) EvaluateAll(ctx context.Context) error {
	if err := s.endSuppressions(ctx); err != nil {
		return err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT d.id FROM devices d WHERE d.decommissioned_at IS NULL
		AND EXISTS (SELECT 1 FROM alert_rules r WHERE r.partner_id = d.partner_id AND r.enabled = $1) ORDER BY d.id`, true)
	if err != nil {
		return err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := s.db.Write(ctx, func(tx *sql.Tx) error { return s.EvaluateDevice(ctx, tx, id) }); err != nil {
			errs = append(errs, err)
		}
	}
	s.wake()
	return errors.Join(errs...)
}

// TestResult is what a rule would do on one device now.
type TestResult struct {
	DeviceID     string        `json:"deviceId"`
	Hostname     string        `json:"hostname"`
	WouldFire    bool          `json:"wouldFire" doc:"The conditions hold now (an alert opens unless one is open or the cooldown runs)."`
	Observations []Observation `json:"observations"`
}

// RuleTest is the answer of a rule test.
type RuleTest struct {
	RuleID      string       `json:"ruleId"`
	EvaluatedAt time.Time    `json:"evaluatedAt"`
	Devices     int          `json:"devices" doc:"Target devices evaluated."`
	WouldFire   int          `json:"wouldFire" doc:"How many of them would fire."`
	Truncated   bool         `json:"truncated" doc:"More than 1000 target devices: only the first 1000 were evaluated."`
	Results     []TestResult `json:"results"`
}

const maxTestDevices = 1000

// TestRule evaluates a rule in scope now against its target devices in the caller's scope
// and reports, per device, whether it would fire and what it observed. It creates nothing.
func (s *Service) TestRule(ctx context.Context, id string) (RuleTest, error) {
	scope := access.ScopeFrom(ctx)
	r, err := getRule(ctx, s.db, scope, id)
	if err != nil {
		return RuleTest{}, err
	}
	var a store.Args
	conds := []string{"d.decommissioned_at IS NULL", "d.partner_id = " + a.Add(r.PartnerID), scope.OrgFilter(&a, "d.org_id", "d.partner_id")}
	if r.OrgID != nil {
		conds = append(conds, "d.org_id = "+a.Add(*r.OrgID))
	}
	switch r.Targets.Type {
	case "org":
		conds = append(conds, "d.org_id IN "+a.In(r.Targets.IDs))
	case "site":
		conds = append(conds, "d.site_id IN "+a.In(r.Targets.IDs))
	case "device":
		conds = append(conds, "d.id IN "+a.In(r.Targets.IDs))
	case "group":
		conds = append(conds, "d.id IN (SELECT m.device_id FROM device_group_members m WHERE m.group_id IN "+a.In(r.Targets.IDs)+")")
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+evalDeviceColumns+` FROM devices d WHERE `+store.Where(conds)+
		` ORDER BY d.hostname, d.id LIMIT `+a.Add(maxTestDevices+1), a.Values()...)
	if err != nil {
		return RuleTest{}, err
	}
	var devs []*device
	for rows.Next() {
		d, err := scanDevice(rows)
		if err != nil {
			rows.Close()
			return RuleTest{}, err
		}
		devs = append(devs, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return RuleTest{}, err
	}
	now := s.now()
	out := RuleTest{RuleID: r.ID, EvaluatedAt: now, Results: []TestResult{}}
	if len(devs) > maxTestDevices {
		devs, out.Truncated = devs[:maxTestDevices], true
	}
	for _, d := range devs {
		res, err := newEvaluator(s.db, d, now, r).eval(ctx, r.cond)
		if err != nil {
			return RuleTest{}, err
		}
		out.Results = append(out.Results, TestResult{DeviceID: d.ID, Hostname: d.Hostname, WouldFire: res.holds, Observations: res.obs})
		if res.holds {
			out.WouldFire++
		}
	}
	out.Devices = len(out.Results)
	return out, nil
}

// resolveOpen resolves, as the system, the open alerts matching cond (over the unqualified
// alerts columns, with its arguments in a), with an optional note, and records each.
func resolveOpen(ctx context.Context, tx *sql.Tx, now time.Time, note string, a *store.Args, cond string) error {
	var noteArg any
	if note != "" {
		noteArg = note
	}
	rows, err := tx.QueryContext(ctx, `UPDATE alerts SET status = `+a.Add(StatusResolved)+`, resolved_at = `+a.Add(now)+
		`, resolved_by = NULL, resolution_note = `+a.Add(noteArg)+`, updated_at = `+a.Add(now)+` WHERE `+cond+
		` AND status IN `+a.In(openStatuses)+` RETURNING `+returnColumns, a.Values()...)
	if err != nil {
		return fmt.Errorf("resolve open alerts: %w", err)
	}
	var resolved []Alert
	for rows.Next() {
		x, err := scanAlert(rows)
		if err != nil {
			rows.Close()
			return err
		}
		resolved = append(resolved, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, x := range resolved {
		if err := record(ctx, tx, x, transitions[ActionResolve], systemActor); err != nil {
			return err
		}
	}
	return nil
}

// DeviceLeftOrg resolves the device's open alerts when it is decommissioned or moved to
// another organization (the devices hook LeftOrg): they described it where it no longer is.
func (s *Service) DeviceLeftOrg(ctx context.Context, tx *sql.Tx, deviceID, reason string) error {
	var a store.Args
	return resolveOpen(ctx, tx, s.now(), reason, &a, "device_id = "+a.Add(deviceID))
}

// endSuppressions returns suppressed alerts whose suppressedUntil has passed to active.
func (s *Service) endSuppressions(ctx context.Context) error {
	now := s.now()
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE alerts SET status = $1, suppressed_until = NULL, updated_at = $2
			WHERE status = $3 AND suppressed_until IS NOT NULL AND suppressed_until <= $2 RETURNING `+returnColumns,
			StatusActive, now, StatusSuppressed)
		if err != nil {
			return fmt.Errorf("end suppressions: %w", err)
		}
		var back []Alert
		for rows.Next() {
			x, err := scanAlert(rows)
			if err != nil {
				rows.Close()
				return err
			}
			back = append(back, x)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, x := range back {
			if err := audit.Record(ctx, tx, audit.Entry{Action: "alert.unsuppress", ResourceType: "alert", ResourceID: x.ID,
				ResourceName: x.Title, PartnerID: x.PartnerID, OrgID: x.OrgID, Details: map[string]any{"status": x.Status},
				Actor: systemActor}); err != nil {
				return err
			}
		}
		return nil
	})
}

// EvaluateIsolated is EvaluateDevice inside a savepoint of tx, for the heartbeat and
// command-result hooks: should the evaluation fail, its writes are rolled back alone and the
// failure logged, so the heartbeat or result that triggered it still commits (the device
// does not look offline because of an alerting fault); the alerts-evaluate job tries again.
func (s *Service) EvaluateIsolated(ctx context.Context, tx *sql.Tx, deviceID string) error {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT alerts_evaluation`); err != nil {
		return err
	}
	if err := s.EvaluateDevice(ctx, tx, deviceID); err != nil {
		if ctx.Err() != nil {
			return err
		}
		s.logger.ErrorContext(ctx, "alert evaluation failed; the device's change is kept", "device", deviceID, "error", err)
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT alerts_evaluation`); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT alerts_evaluation`)
	return err
}
