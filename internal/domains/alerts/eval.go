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

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/groups"
	"gale/internal/domains/maintenance"
	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// device is what evaluation needs to know about a device.
type device struct {
	ID, PartnerID, OrgID, SiteID, Hostname, Status string
	LastSeen, SilentSince                          *time.Time
	// groups are the groups the device is a member of (read with the facts of an evaluation).
	groups []string
}

// subject is the device as a maintenance window covers it.
func (d *device) subject() maintenance.Subject {
	return maintenance.Subject{OrgID: d.OrgID, SiteID: d.SiteID, DeviceIDs: []string{d.ID}}
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
	// need is the history the conditions read; samples (newest first) and failures hold it
	// once loaded.
	need                          windows
	samples                       []sample
	failures                      []failure
	samplesLoaded, failuresLoaded bool
}

func newEvaluator(q store.Querier, d *device, now time.Time, rules ...*Rule) *evaluator {
	e := &evaluator{q: q, d: d, now: now, need: noWindows}
	for _, r := range rules {
		e.need = e.need.union(neededWindows(r.cond))
	}
	return e
}

// adopt takes the history that f read for the windows w, where it covers the conditions'.
func (e *evaluator) adopt(f *facts, w windows) {
	if w.metrics >= e.need.metrics {
		e.samples, e.samplesLoaded = f.samples, true
	}
	if w.commands >= e.need.commands {
		e.failures, e.failuresLoaded = f.failures, true
	}
}

// eval evaluates the condition; with observe it also reports what each leaf saw (which only
// an alert's context and the rule test need).
func (e *evaluator) eval(ctx context.Context, c Condition, observe bool) (evaluation, error) {
	if c.IsGroup() {
		out := evaluation{holds: c.Logic == "and"}
		for _, sub := range c.Conditions {
			r, err := e.eval(ctx, sub, observe)
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
	var v float64 // the observed value, when seen
	seen := false
	switch c.Type {
	case CondThreshold:
		avg, n, err := e.average(ctx, c.Metric, dur)
		if err != nil {
			return evaluation{}, err
		}
		v, seen = avg, n > 0
		o.Holds = seen && c.Value != nil && compare(c.Operator, v, *c.Value)
		if observe {
			samples := n
			o.Metric, o.Operator, o.Threshold, o.Samples = c.Metric, c.Operator, c.Value, &samples
		}
	case CondOffline:
		if e.d.Status == "offline" && e.d.LastSeen != nil {
			v, seen = minutes(e.now.Sub(*e.d.LastSeen)), true
			o.Holds = e.now.Sub(*e.d.LastSeen) >= window
		}
	case CondAgentSilent:
		if e.d.SilentSince != nil {
			v, seen = minutes(e.now.Sub(*e.d.SilentSince)), true
			o.Holds = e.now.Sub(*e.d.SilentSince) >= window
		}
	case CondCommandFailed:
		n, err := e.failedCommands(ctx, c.CommandTypes, dur)
		if err != nil {
			return evaluation{}, err
		}
		v, seen = float64(n), true
		o.Holds = n > 0
	}
	if !observe {
		return evaluation{holds: o.Holds}, nil
	}
	if seen {
		value := v
		o.Value = &value
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
// threshold condition needs (see facts.samples).
func (e *evaluator) loadSamples(ctx context.Context) error {
	if e.samplesLoaded {
		return nil
	}
	f, err := readFacts(ctx, e.q, e.d.ID, e.now, false, windows{metrics: e.need.metrics, commands: -1})
	if err != nil {
		return fmt.Errorf("load metrics: %w", err)
	}
	e.samples, e.samplesLoaded = f.samples, true
	return nil
}

// average is the metric's average over the last dur minutes of heartbeats, and how many
// there were (none: no data); with dur 0 the latest sample.
func (e *evaluator) average(ctx context.Context, metric string, dur int) (float64, int, error) {
	if err := e.loadSamples(ctx); err != nil {
		return 0, 0, err
	}
	if dur == 0 {
		if len(e.samples) == 0 {
			return 0, 0, nil
		}
		return e.samples[0].metric(metric), 1, nil
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
		return 0, 0, nil
	}
	return math.Round(sum/float64(n)*100) / 100, n, nil
}

// failure is a command of the device that failed or timed out.
type failure struct {
	typ string
	at  time.Time
}

// failedCommands counts the device's commands that ended failed or timed out within the
// last dur minutes, of the given types (any type when none).
func (e *evaluator) failedCommands(ctx context.Context, types []string, dur int) (int, error) {
	if !e.failuresLoaded {
		f, err := readFacts(ctx, e.q, e.d.ID, e.now, false, windows{metrics: -1, commands: e.need.commands})
		if err != nil {
			return 0, fmt.Errorf("count failed commands: %w", err)
		}
		e.failures, e.failuresLoaded = f.failures, true
	}
	from := e.now.Add(-time.Duration(dur) * time.Minute)
	n := 0
	for _, c := range e.failures {
		if !c.at.Before(from) && (len(types) == 0 || slices.Contains(types, c.typ)) {
			n++
		}
	}
	return n, nil
}

// windows are the history an evaluation reads, in minutes back from its instant: the longest
// threshold window and the longest failed-command window; -1 when no condition reads it.
type windows struct{ metrics, commands int }

var noWindows = windows{metrics: -1, commands: -1}

func (w windows) union(o windows) windows {
	return windows{metrics: max(w.metrics, o.metrics), commands: max(w.commands, o.commands)}
}

// neededWindows is the history the conditions read.
func neededWindows(c Condition) windows {
	if c.IsGroup() {
		w := noWindows
		for _, sub := range c.Conditions {
			w = w.union(neededWindows(sub))
		}
		return w
	}
	dur := 0
	if c.DurationMinutes != nil {
		dur = *c.DurationMinutes
	}
	switch c.Type {
	case CondThreshold:
		return windows{metrics: dur, commands: -1}
	case CondCommandFailed:
		return windows{metrics: -1, commands: dur}
	}
	return noWindows
}

// facts are what an evaluation reads of a device. They come as the rows of one UNION ALL
// statement, so that an evaluation in the steady state costs a single round trip. Each row
// starts with its kind (below); the other columns are shared by the kinds and typed alike in
// every branch so that both dialects unite them: s1–s4 identifiers, s5–s6 text, t1–t2 times,
// f1–f3 metrics, n the rule count and x the latest rule change (a time on PostgreSQL, text on
// SQLite). The first branch names the columns, so on SQLite it decides which are read as times.
type facts struct {
	dev *device
	// rules and rulesLatest are the signature of the device's rule set (see applicableRules).
	rules       int
	rulesLatest any
	open        map[string]bool
	// samples are the heartbeats of the metrics window and the one before it, newest first:
	// the newest is the latest sample, which the conditions without a window read even when
	// the window holds none.
	samples  []sample
	failures []failure
}

// The kinds of facts rows.
const (
	factDevice = iota + 1 // the live device (s1–s6, t1–t2) and its rule-set signature (n, x)
	factOpen              // a rule with an open alert on the device (s1)
	factGroup             // a group the device is a member of (s1)
	factSample            // a heartbeat (t1, f1–f3)
	factFailed            // a command failed or timed out in the commands window (s6 its type, t1)
)

// factsQuery is the statement that reads the device's facts, and its arguments: with
// withDevice the device, its rule-set signature, open alerts and groups, then the metrics and
// failed commands of the windows w. Its text depends only on which of them it reads.
func factsQuery(deviceID string, now time.Time, withDevice bool, w windows) (string, []any) {
	var a store.Args
	dev := a.Add(deviceID)
	kind := func(k int) string { return strconv.Itoa(k) + ", " }
	var parts []string
	if withDevice {
		parts = append(parts,
			devices.SelectLive(kind(factDevice)+evalDeviceColumns+`, CAST(NULL AS DOUBLE PRECISION),
			CAST(NULL AS DOUBLE PRECISION), CAST(NULL AS DOUBLE PRECISION), s.n, s.latest`,
				` CROSS JOIN (SELECT COUNT(*) AS n, MAX(r.updated_at) AS latest FROM alert_rules r`+devices.Join("rd", dev)+
					` WHERE r.partner_id = rd.partner_id AND (r.org_id IS NULL OR r.org_id = rd.org_id)) s`, "d.id = "+dev),
			fmt.Sprintf(`SELECT %d, rule_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
			FROM alerts WHERE device_id = %s AND rule_id IS NOT NULL AND status IN %s`, factOpen, dev, a.In(openStatuses)),
			groups.SelectMemberships(kind(factGroup)+`group_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`, dev))
	}
	if w.metrics >= 0 {
		from := a.Add(now.Add(-time.Duration(w.metrics) * time.Minute))
		parts = append(parts, devices.SelectSamples(kind(factSample)+`NULL, NULL, NULL, NULL, NULL, NULL, recorded_at, NULL,
			cpu_percent, ram_percent, disk_percent, NULL, NULL`, dev, from))
	}
	if w.commands >= 0 {
		from := a.Add(now.Add(-time.Duration(w.commands) * time.Minute))
		parts = append(parts, devices.SelectFailedCommands(kind(factFailed)+`NULL, NULL, NULL, NULL, NULL, type, completed_at, NULL,
			NULL, NULL, NULL, NULL, NULL`, dev, from))
	}
	return strings.Join(parts, "\nUNION ALL\n"), a.Values()
}

// readFacts reads the facts of factsQuery (no device when it is not live).
func readFacts(ctx context.Context, q store.Querier, deviceID string, now time.Time, withDevice bool, w windows) (*facts, error) {
	query, args := factsQuery(deviceID, now, withDevice, w)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return scanFacts(rows)
}

func scanFacts(rows *sql.Rows) (*facts, error) {
	defer rows.Close()
	f := &facts{open: map[string]bool{}}
	var groups []string
	// Scanned into once per call, not per row: each destination escapes to the heap.
	var kind int
	var s1, s2, s3, s4, s5, s6 sql.NullString
	var t1, t2 sql.NullTime
	var f1, f2, f3 sql.NullFloat64
	var n sql.NullInt64
	var x any
	for rows.Next() {
		if err := rows.Scan(&kind, &s1, &s2, &s3, &s4, &s5, &s6, &t1, &t2, &f1, &f2, &f3, &n, &x); err != nil {
			return nil, err
		}
		switch kind {
		case factDevice:
			f.dev = &device{ID: s1.String, PartnerID: s2.String, OrgID: s3.String, SiteID: s4.String, Hostname: s5.String,
				Status: s6.String, LastSeen: utcPtr(t1), SilentSince: utcPtr(t2)}
			f.rules, f.rulesLatest = int(n.Int64), x
		case factOpen:
			f.open[s1.String] = true
		case factGroup:
			groups = append(groups, s1.String)
		case factSample:
			f.samples = append(f.samples, sample{at: t1.Time, cpu: f1.Float64, ram: f2.Float64, disk: f3.Float64})
		case factFailed:
			f.failures = append(f.failures, failure{typ: s6.String, at: t1.Time})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if f.dev != nil {
		f.dev.groups = groups
	}
	slices.SortFunc(f.samples, func(a, b sample) int { return b.at.Compare(a.at) })
	return f, nil
}

// targets reports whether the rule watches the device.
func targets(r *Rule, d *device) bool {
	switch r.Targets.Type {
	case "all":
		return true
	case "org":
		return slices.Contains(r.Targets.IDs, d.OrgID)
	case "site":
		return slices.Contains(r.Targets.IDs, d.SiteID)
	case "device":
		return slices.Contains(r.Targets.IDs, d.ID)
	case "group":
		for _, g := range r.Targets.IDs {
			if slices.Contains(d.groups, g) {
				return true
			}
		}
	}
	return false
}

// applicableRules returns the enabled rules of the device's partner and organization whose
// targets include the device. The rule set of a (partner, organization) pair is cached with
// its signature (how many rules and the latest updated_at), which the facts carry: any
// create, change or delete (on any node) changes the signature, so the set is read again. (A
// delete and a create in the same interval keep the count, but the new rule's updated_at is
// the newest, unless the creating node's clock is behind the others.)
func (s *Service) applicableRules(ctx context.Context, q store.Querier, f *facts) ([]*Rule, error) {
	if f.rules == 0 {
		return nil, nil
	}
	d := f.dev
	sig := ruleSig{n: f.rules, latest: fmt.Sprint(f.rulesLatest)} // a time or text: compared as printed
	key := d.PartnerID + "/" + d.OrgID
	set, ok := s.rules.get(key)
	if !ok || set.sig != sig {
		rules, err := store.QueryAll(ctx, q, `SELECT `+ruleColumns+` FROM alert_rules r WHERE r.partner_id = $1
			AND (r.org_id IS NULL OR r.org_id = $2) AND r.enabled = $3 ORDER BY r.id`, []any{d.PartnerID, d.OrgID, true}, scanRule)
		if err != nil {
			return nil, fmt.Errorf("load the alert rules of %s: %w", key, err)
		}
		set = ruleSet{sig: sig, rules: rules}
		s.rules.put(key, set)
	}
	var out []*Rule
	for i := range set.rules {
		if targets(&set.rules[i], d) {
			out = append(out, &set.rules[i])
		}
	}
	return out, nil
}

// ruleSig identifies a version of a rule set.
type ruleSig struct {
	n      int
	latest string
}

// ruleSet is the decoded enabled rules of a (partner, organization) pair with the signature
// they were read at. Rules are never changed in place, so the slices are shared.
type ruleSet struct {
	sig   ruleSig
	rules []Rule
}

// memo is a map shared by evaluations, emptied when it outgrows its bound.
type memo[V any] struct {
	mu    sync.Mutex
	bound int
	m     map[string]V
}

func (c *memo[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

func (c *memo[V]) put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]V{}
	}
	if len(c.m) > c.bound {
		clear(c.m)
	}
	c.m[key] = v
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
// hold. It is the hook of heartbeats and command results.
//
// Unless an alert opens or resolves, or the rules changed, it is one statement: the facts are
// read together with the history of the windows the device's previous evaluation needed.
func (s *Service) EvaluateDevice(ctx context.Context, tx *sql.Tx, deviceID string) error {
	_, err := s.evaluate(ctx, tx, deviceID)
	return err
}

// evaluate is EvaluateDevice; with a nil tx it reads outside a transaction, writes nothing,
// and reports whether an alert is due to open or resolve.
func (s *Service) evaluate(ctx context.Context, tx *sql.Tx, deviceID string) (bool, error) {
	var q store.Querier = s.db
	if tx != nil {
		q = tx
	}
	now := s.clock.Now()
	w, ok := s.windows.get(deviceID)
	if !ok {
		w = noWindows
	}
	// The facts statement is long: through the store's statement cache SQLite compiles it
	// once per connection rather than at every evaluation.
	query, args := factsQuery(deviceID, now, true, w)
	var rows *sql.Rows
	var err error
	if tx != nil {
		rows, err = s.db.TxQueryContext(ctx, tx, query, args...)
	} else {
		rows, err = s.db.QueryContext(ctx, query, args...)
	}
	if err != nil {
		return false, fmt.Errorf("load device facts: %w", err)
	}
	f, err := scanFacts(rows)
	if err != nil {
		return false, fmt.Errorf("load device facts: %w", err)
	}
	if f.dev == nil {
		return false, nil
	}
	rules, err := s.applicableRules(ctx, q, f)
	if err != nil {
		return false, err
	}
	ev := newEvaluator(q, f.dev, now, rules...)
	ev.adopt(f, w)
	s.windows.put(deviceID, ev.need)
	due := false
	for _, r := range rules {
		res, err := ev.eval(ctx, r.cond, false)
		if err != nil {
			return false, fmt.Errorf("evaluate rule %s on device %s: %w", r.ID, f.dev.ID, err)
		}
		opens, resolves := res.holds && !f.open[r.ID], !res.holds && f.open[r.ID] && r.AutoResolve
		due = due || opens || resolves
		if tx == nil {
			continue
		}
		// Only a change costs a write: the open set was read in this transaction, and should a
		// concurrent one have changed it, the unique index and the conditional update still
		// decide (and the next evaluation catches up).
		switch {
		case opens:
			// Again, from the facts already read, with the observations for the alert's context.
			if res, err = ev.eval(ctx, r.cond, true); err == nil {
				err = s.open(ctx, tx, r, f.dev, res, now)
			}
		case resolves:
			err = s.autoResolve(ctx, tx, r, f.dev, now)
		}
		if err != nil {
			return false, err
		}
	}
	return due, nil
}

// open inserts the alert unless an open alert of the rule and device exists (the partial
// unique index decides, under any concurrency) or the last one ended less than the cooldown
// ago.
func (s *Service) open(ctx context.Context, tx *sql.Tx, r *Rule, d *device, res evaluation, now time.Time) error {
	id := store.NewID()
	ctxJSON := store.EncodeJSON(map[string]any{"ruleName": r.Name, "hostname": d.Hostname, "observations": res.obs})
	cooldownStart := now.Add(-time.Duration(r.CooldownMinutes) * time.Minute)
	var cooling int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM alerts c WHERE c.rule_id = $1 AND c.device_id = $2
		AND (c.resolved_at >= $3 OR c.dismissed_at >= $3)`, r.ID, d.ID, cooldownStart).Scan(&cooling); err != nil {
		return fmt.Errorf("check cooldown: %w", err)
	}
	if cooling > 0 {
		return nil
	}
	if held, err := s.held(ctx, tx, d.subject()); err != nil || held {
		return err
	}
	result, err := tx.ExecContext(ctx, `INSERT INTO alerts (id, partner_id, org_id, site_id, device_id, source_id, rule_id, severity,
		status, title, message, context, triggered_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9, $10, $11, $12, $12)
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
func (s *Service) autoResolve(ctx context.Context, tx *sql.Tx, r *Rule, d *device, now time.Time) error {
	var a store.Args
	return resolveOpen(ctx, tx, now, "", &a, "rule_id = "+a.Add(r.ID)+" AND device_id = "+a.Add(d.ID))
}

// EvaluateAll is the periodic sweep (job alerts-evaluate). It returns suppressed alerts whose
// suppressedUntil passed to active, then evaluates every live device of every partner that
// has enabled rules, so that time-based conditions (offline, agent silent, windows running
// out) open and resolve alerts without a heartbeat. Each device is read outside a
// transaction; only a device with an alert due to open or resolve gets a write transaction,
// in which it is evaluated again. (On SQLite a write transaction holds the database's one
// write lock, which heartbeats wait for.)
func (s *Service) EvaluateAll(ctx context.Context) error {
	if err := s.endSuppressions(ctx); err != nil {
		return err
	}
	ids, err := store.QueryStrings(ctx, s.db, devices.SelectLive("d.id", "",
		`EXISTS (SELECT 1 FROM alert_rules r WHERE r.partner_id = d.partner_id AND r.enabled = $1)`)+` ORDER BY d.id`, true)
	if err != nil {
		return fmt.Errorf("list the devices to evaluate: %w", err)
	}
	var errs []error
	for _, id := range ids {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		due, err := s.evaluate(ctx, nil, id)
		if err == nil && due {
			err = s.db.Write(ctx, func(tx *sql.Tx) error { return s.EvaluateDevice(ctx, tx, id) })
		}
		if err != nil {
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
	conds := []string{"d.partner_id = " + a.Add(r.PartnerID), scope.OrgFilter(&a, "d.org_id", "d.partner_id")}
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
		conds = append(conds, groups.MemberOf(&a, "d.id", r.Targets.IDs))
	}
	devs, err := store.QueryAll(ctx, s.db, devices.SelectLive(evalDeviceColumns, "", conds...)+
		` ORDER BY d.hostname, d.id LIMIT `+a.Add(maxTestDevices+1), a.Values(), scanDevice)
	if err != nil {
		return RuleTest{}, fmt.Errorf("load the target devices of rule %s: %w", r.ID, err)
	}
	now := s.clock.Now()
	out := RuleTest{RuleID: r.ID, EvaluatedAt: now, Results: []TestResult{}}
	if len(devs) > maxTestDevices {
		devs, out.Truncated = devs[:maxTestDevices], true
	}
	for _, d := range devs {
		res, err := newEvaluator(s.db, d, now, &r).eval(ctx, r.cond, true)
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
	resolved, err := store.QueryAll(ctx, tx, `UPDATE alerts SET status = `+a.Add(StatusResolved)+`, resolved_at = `+a.Add(now)+
		`, resolved_by = NULL, resolution_note = `+a.Add(noteArg)+`, updated_at = `+a.Add(now)+` WHERE `+cond+
		` AND status IN `+a.In(openStatuses)+` RETURNING `+returnColumns, a.Values(), scanAlert)
	if err != nil {
		return fmt.Errorf("resolve open alerts: %w", err)
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
	return resolveOpen(ctx, tx, s.clock.Now(), reason, &a, "device_id = "+a.Add(deviceID))
}

// endSuppressions returns suppressed alerts whose suppressedUntil has passed to active.
func (s *Service) endSuppressions(ctx context.Context) error {
	now := s.clock.Now()
	// Most sweeps find none: asking first spares them a write transaction.
	var due bool
	if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM alerts WHERE status = $1
		AND suppressed_until IS NOT NULL AND suppressed_until <= $2)`, StatusSuppressed, now).Scan(&due); err != nil {
		return fmt.Errorf("look for ended suppressions: %w", err)
	}
	if !due {
		return nil
	}
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		back, err := store.QueryAll(ctx, tx, `UPDATE alerts SET status = $1, suppressed_until = NULL, updated_at = $2
			WHERE status = $3 AND suppressed_until IS NOT NULL AND suppressed_until <= $2 RETURNING `+returnColumns,
			[]any{StatusActive, now, StatusSuppressed}, scanAlert)
		if err != nil {
			return fmt.Errorf("end suppressions: %w", err)
		}
		for _, x := range back {
			if err := audit.Record(ctx, tx, audit.Entry{Action: "alert.unsuppress", ResourceType: "alert", ResourceID: x.ID,
				ResourceName: x.Title, PartnerID: x.PartnerID, OrgID: x.OrgID, Details: map[string]any{"status": x.Status},
				Actor: systemActor}); err != nil {
				return fmt.Errorf("audit the end of the suppression of alert %s: %w", x.ID, err)
			}
		}
		return nil
	})
}

// EvaluateAllIsolated is EvaluateIsolated for the devices of a group of heartbeats recorded
// together: one savepoint for the group and, should an evaluation fail, each device again in
// its own, so that one device's fault costs the others nothing.
func (s *Service) EvaluateAllIsolated(ctx context.Context, tx *sql.Tx, deviceIDs []string) error {
	if len(deviceIDs) == 1 {
		return s.EvaluateIsolated(ctx, tx, deviceIDs[0])
	}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT alerts_evaluation`); err != nil {
		return fmt.Errorf("open the alert evaluation's savepoint: %w", err)
	}
	for _, id := range deviceIDs {
		err := s.EvaluateDevice(ctx, tx, id)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT alerts_evaluation`); err != nil {
			return fmt.Errorf("roll the failed alert evaluation back: %w", err)
		}
		for _, id := range deviceIDs {
			if err := s.EvaluateIsolated(ctx, tx, id); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

// EvaluateIsolated is EvaluateDevice inside a savepoint of tx, for the heartbeat and
// command-result hooks: should the evaluation fail, its writes are rolled back alone and the
// failure logged, so the heartbeat or result that triggered it still commits (the device
// does not look offline because of an alerting fault); the alerts-evaluate job tries again.
// The savepoint comes before the evaluation's first read, as on PostgreSQL any failed
// statement, a read too, aborts the transaction unless rolled back to a savepoint. It is
// left for the commit to release with the rest, which spares a round trip; statements tx
// runs after this call belong to it, harmlessly.
func (s *Service) EvaluateIsolated(ctx context.Context, tx *sql.Tx, deviceID string) error {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT alerts_evaluation`); err != nil {
		return fmt.Errorf("open the alert evaluation's savepoint: %w", err)
	}
	err := s.EvaluateDevice(ctx, tx, deviceID)
	if err == nil || ctx.Err() != nil {
		return err
	}
	s.logger.ErrorContext(ctx, "alert evaluation failed; the device's change is kept", "device", deviceID, "error", err)
	if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT alerts_evaluation`); err != nil {
		return fmt.Errorf("roll the failed alert evaluation back: %w", err)
	}
	return nil
}
