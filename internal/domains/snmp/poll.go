package snmp

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
	"gale/internal/domains/systemtools"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Dispatch settings.
const (
	// DispatchEvery is how often due devices are claimed.
	DispatchEvery = 5 * time.Second
	// maxClaim bounds the devices one dispatch claims; the rest stay due for the next.
	maxClaim = 500
	// lease is how long a claimed device waits before it is due again if its poll never
	// reports (the node stopped): the poll's outcome sets the real next time.
	lease = 5 * time.Minute
	// maxTargetsPerCall bounds the devices one snmp_poll call asks an agent for.
	maxTargetsPerCall = 100
	// pollCallTimeout bounds a dispatch's snmp_poll call; requestTimeout a poll now or test.
	pollCallTimeout = 90 * time.Second
	requestTimeout  = 30 * time.Second
	// noProbeRetry is when a device whose site has no agent online is tried again.
	noProbeRetry = time.Minute
	// agentsAtOnce bounds the agents one dispatch asks at the same time.
	agentsAtOnce = 8
)

// claimDue takes the enabled devices due at now, moving each one's next poll a lease ahead
// in one conditional UPDATE: of two concurrent dispatches, each device goes to one.
func (s *Service) claimDue(ctx context.Context, now time.Time) ([]device, error) {
	var ids []string
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		var err error
		ids, err = store.QueryStrings(ctx, tx, `UPDATE snmp_devices SET next_poll_at = $1 WHERE id IN (SELECT d.id FROM snmp_devices d
			WHERE d.enabled AND d.next_poll_at <= $2 AND `+tenancy.LiveOrg("d.org_id")+` ORDER BY d.next_poll_at LIMIT $3)
			AND enabled AND next_poll_at <= $2 RETURNING id`, now.Add(lease), now, maxClaim)
		if err != nil {
			return fmt.Errorf("claim due SNMP devices: %w", err)
		}
		return nil
	})
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	return s.devicesByID(ctx, s.db, ids)
}

func (s *Service) devicesByID(ctx context.Context, q store.Querier, ids []string) ([]device, error) {
	var a store.Args
	out, err := store.QueryAll(ctx, q, `SELECT `+deviceColumns+` FROM snmp_devices d WHERE d.id IN `+a.In(ids)+` ORDER BY d.id`,
		a.Values(), scanDevice)
	if err != nil {
		return nil, fmt.Errorf("load SNMP devices: %w", err)
	}
	return out, nil
}

// Dispatch polls the devices that are due: it claims them, picks the agent of each one's
// site (or its probe device), and asks each agent for its devices in snmp_poll calls of up
// to 100, a few agents at a time; every answer is stored as it comes. A device whose site has
// no agent online is tried again in a minute, without counting as a failure of the device.
func (s *Service) Dispatch(ctx context.Context) error {
	now := s.now()
	ds, err := s.claimDue(ctx, now)
	if err != nil || len(ds) == 0 {
		return err
	}
	byAgent := map[string][]device{}
	picked, why := map[string]string{}, map[string]string{}
	unplaced := map[string][]device{}
	for _, d := range ds {
		key := d.OrgID + "/" + d.SiteID + "/" + store.Deref(d.ProbeDeviceID)
		agent, ok := picked[key]
		if !ok {
			agent, err = s.devices.PickProbe(ctx, s.db, devices.ProbeTarget{OrgID: d.OrgID, SiteID: d.SiteID, DeviceID: store.Deref(d.ProbeDeviceID)})
			if err != nil {
				why[key] = reason(err)
			}
			picked[key] = agent
		}
		if agent == "" {
			unplaced[key] = append(unplaced[key], d)
			continue
		}
		byAgent[agent] = append(byAgent[agent], d)
	}
	for key, list := range unplaced {
		if err := s.postpone(ctx, list, now.Add(noProbeRetry), why[key]); err != nil {
			return err
		}
	}
	sem := make(chan struct{}, agentsAtOnce)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for agent, list := range byAgent {
		for start := 0; start < len(list); start += maxTargetsPerCall {
			batch := list[start:min(start+maxTargetsPerCall, len(list))]
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := s.pollThrough(ctx, agent, batch); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return firstErr
}

// reason is what an error tells a user.
func reason(err error) string {
	if e, ok := apperr.As(err); ok {
		return e.Message
	}
	return err.Error()
}

// postpone moves devices that could not be polled (no agent) to next, with why.
func (s *Service) postpone(ctx context.Context, ds []device, next time.Time, why string) error {
	if len(ds) == 0 {
		return nil
	}
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	var a store.Args
	_, err := s.db.ExecContext(ctx, `UPDATE snmp_devices SET next_poll_at = `+a.Add(next)+`, last_error = `+a.Add(why)+
		` WHERE id IN `+a.In(ids), a.Values()...)
	if err != nil {
		return fmt.Errorf("postpone SNMP devices: %w", err)
	}
	return nil
}

// pollThrough asks one agent for a batch of devices and stores the answers. An agent without
// its live channel cannot be asked: the devices are tried again in a minute.
func (s *Service) pollThrough(ctx context.Context, agent string, ds []device) error {
	if live, err := s.agents.LiveChannel(ctx, agent); err != nil {
		return fmt.Errorf("check the live channel of agent %s: %w", agent, err)
	} else if !live {
		return s.postpone(ctx, ds, s.now().Add(noProbeRetry), offline.Message)
	}
	targets := make([]agentproto.SNMPPollTarget, 0, len(ds))
	oidsOf := map[string][]string{}
	for _, d := range ds {
		oids, ok := oidsOf[d.TemplateID]
		if !ok {
			tos, err := s.templateOIDs(ctx, s.db, d.TemplateID)
			if err != nil {
				return err
			}
			oids = make([]string, len(tos))
			for i, o := range tos {
				oids[i] = o.OID
			}
			oidsOf[d.TemplateID] = oids
		}
		t, err := s.target(d)
		if err != nil {
			return err
		}
		targets = append(targets, agentproto.SNMPPollTarget{ID: d.ID, Target: t, OIDs: oids})
	}
	raw, err := s.agents.Call(ctx, agent, agentproto.CallSNMPPoll, agentproto.SNMPPoll{Targets: targets}, pollCallTimeout)
	if err != nil {
		return s.postpone(ctx, ds, s.now().Add(noProbeRetry), "the polling agent did not answer: "+reason(err))
	}
	var res agentproto.SNMPPollResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("read snmp_poll result of agent %s: %w", agent, err)
	}
	return s.Ingest(ctx, s.now(), agent, res.Results)
}

// previous is the last stored value of an OID, for rates.
type previous struct {
	typ   string
	value *float64
	at    time.Time
}

// threshold is a stored threshold with its state.
type threshold struct {
	SNMPThreshold
	breached bool
}

// Ingest stores the outcome of polls made at at by the agent of device probe, in one
// transaction: each answering device's numeric values (counters with their rate per second)
// and their hourly aggregates, its latest values, its schedule and status, and the alerts of
// its thresholds; each failing device's failure, its backoff and, from the third failure in a
// row, its offline status and alert. Results of devices that no longer exist are dropped.
func (s *Service) Ingest(ctx context.Context, at time.Time, probe string, results []agentproto.SNMPTargetResult) error {
	if len(results) == 0 {
		return nil
	}
	at = at.UTC().Truncate(time.Microsecond)
	return s.db.Write(ctx, func(tx *sql.Tx) error { return s.ingest(ctx, tx, at, probe, results) })
}

func (s *Service) ingest(ctx context.Context, tx *sql.Tx, at time.Time, probe string, results []agentproto.SNMPTargetResult) error {
	ids := make([]string, 0, len(results))
	for _, r := range results {
		if store.ValidID(r.ID) {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	ds, err := s.devicesByID(ctx, tx, ids)
	if err != nil {
		return err
	}
	devs := make(map[string]device, len(ds))
	for _, d := range ds {
		devs[d.ID] = d
	}
	prev, err := loadPrevious(ctx, tx, ids)
	if err != nil {
		return err
	}
	ths, err := loadThresholds(ctx, tx, ids)
	if err != nil {
		return err
	}
	var metrics, rollups, latest, polls [][]any
	unix := at.Unix()
	hour := unix - unix%3600
	done := make(map[string]bool, len(results))
	for _, r := range results {
		d, ok := devs[r.ID]
		if !ok || done[d.ID] {
			continue
		}
		done[d.ID] = true
		polls = append(polls, []any{d.ID, at, d.PartnerID, d.OrgID, r.Error == nil})
		if r.Error != nil {
			if err := s.failed(ctx, tx, d, probe, at, r.Error); err != nil {
				return err
			}
			continue
		}
		current := make(map[string]float64, len(r.Values))
		for _, v := range r.Values {
			oid, why := validOID(v.OID)
			if why != "" {
				continue
			}
			var rate *float64
			if p, ok := prev[d.ID][oid]; ok && isCounter(v.Type) && v.Number != nil && p.value != nil && at.After(p.at) {
				rate = counterRate(*p.value, *v.Number, v.Type, at.Sub(p.at).Seconds())
			}
			if v.Number != nil {
				metrics = append(metrics, []any{d.ID, oid, unix, d.PartnerID, d.OrgID, *v.Number, nullFloat(rate)})
				m, ok := *v.Number, !isCounter(v.Type)
				if rate != nil {
					m, ok = *rate, true
				}
				if ok {
					current[oid] = m
					rollups = append(rollups, []any{d.ID, oid, hour, d.PartnerID, d.OrgID, m, m, m, 1})
				}
			}
			latest = append(latest, []any{d.ID, oid, d.PartnerID, d.OrgID, v.Type, nullFloat(v.Number), nullString(v.Text), nullFloat(rate), at})
		}
		if err := s.answered(ctx, tx, d, at); err != nil {
			return err
		}
		if err := s.evaluate(ctx, tx, d, probe, ths[d.ID], current); err != nil {
			return err
		}
	}
	if err := insertRows(ctx, tx, `INSERT INTO snmp_metrics (device_id, oid, collected_at, partner_id, org_id, value, rate) VALUES `,
		metrics, ` ON CONFLICT (device_id, oid, collected_at) DO NOTHING`); err != nil {
		return fmt.Errorf("store SNMP metrics: %w", err)
	}
	if err := insertRows(ctx, tx, `INSERT INTO snmp_rollups (device_id, oid, hour, partner_id, org_id, total, lowest, highest, samples) VALUES `,
		rollups, ` ON CONFLICT (device_id, oid, hour) DO UPDATE SET total = snmp_rollups.total + excluded.total,
		lowest = CASE WHEN excluded.lowest < snmp_rollups.lowest THEN excluded.lowest ELSE snmp_rollups.lowest END,
		highest = CASE WHEN excluded.highest > snmp_rollups.highest THEN excluded.highest ELSE snmp_rollups.highest END,
		samples = snmp_rollups.samples + excluded.samples`); err != nil {
		return fmt.Errorf("store SNMP rollups: %w", err)
	}
	if err := insertRows(ctx, tx, `INSERT INTO snmp_latest (device_id, oid, partner_id, org_id, type, value, text, rate, collected_at) VALUES `,
		latest, ` ON CONFLICT (device_id, oid) DO UPDATE SET type = excluded.type, value = excluded.value, text = excluded.text,
		rate = excluded.rate, collected_at = excluded.collected_at`); err != nil {
		return fmt.Errorf("store latest SNMP values: %w", err)
	}
	if err := insertRows(ctx, tx, `INSERT INTO snmp_polls (device_id, polled_at, partner_id, org_id, ok) VALUES `, polls, ""); err != nil {
		return fmt.Errorf("record SNMP polls: %w", err)
	}
	return nil
}

// insertRows inserts rows in statements of up to 25 rows, full ones through one prepared
// statement: SQLite's parsing and binding of numbered parameters grow with the square of
// their count.
func insertRows(ctx context.Context, tx *sql.Tx, head string, rows [][]any, tail string) error {
	const chunk = 25
	statement := func(n, cols int) string {
		var b strings.Builder
		b.WriteString(head)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(" + store.Placeholders(i*cols+1, cols) + ")")
		}
		b.WriteString(tail)
		return b.String()
	}
	var full *sql.Stmt
	defer func() {
		if full != nil {
			full.Close()
		}
	}()
	for start := 0; start < len(rows); start += chunk {
		part := rows[start:min(start+chunk, len(rows))]
		args := make([]any, 0, len(part)*len(part[0]))
		for _, r := range part {
			args = append(args, r...)
		}
		var err error
		if len(part) < chunk {
			_, err = tx.ExecContext(ctx, statement(len(part), len(part[0])), args...)
		} else {
			if full == nil {
				if full, err = tx.PrepareContext(ctx, statement(chunk, len(part[0]))); err != nil {
					return err
				}
			}
			_, err = full.ExecContext(ctx, args...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func nullFloat(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

func nullString(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func isCounter(typ string) bool { return typ == "counter32" || typ == "counter64" }

// counterRate is the per-second rate of a counter from prev to cur over seconds. A counter
// lower than before wrapped when the distance through its maximum (2^32 or 2^64) is under
// half its range; otherwise it was reset, and there is no rate.
func counterRate(prev, cur float64, typ string, seconds float64) *float64 {
	if seconds <= 0 {
		return nil
	}
	delta := cur - prev
	if delta < 0 {
		span := math.Pow(2, 32)
		if typ == "counter64" {
			span = math.Pow(2, 64)
		}
		delta = span - prev + cur
		if delta <= 0 || delta > span/2 {
			return nil
		}
	}
	r := delta / seconds
	return &r
}

func loadPrevious(ctx context.Context, tx *sql.Tx, ids []string) (map[string]map[string]previous, error) {
	var a store.Args
	type stored struct {
		device, oid string
		previous
	}
	latest, err := store.QueryAll(ctx, tx, `SELECT device_id, oid, type, value, collected_at FROM snmp_latest WHERE device_id IN `+
		a.In(ids), a.Values(), func(row store.Scanner) (stored, error) {
		var p stored
		var v sql.NullFloat64
		if err := row.Scan(&p.device, &p.oid, &p.typ, &v, &p.at); err != nil {
			return p, err
		}
		if v.Valid {
			p.value = &v.Float64
		}
		return p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("load latest SNMP values: %w", err)
	}
	out := map[string]map[string]previous{}
	for _, p := range latest {
		if out[p.device] == nil {
			out[p.device] = map[string]previous{}
		}
		out[p.device][p.oid] = p.previous
	}
	return out, nil
}

// answered records a device's successful poll: online, due again an interval later; an
// offline device's alert is resolved.
func (s *Service) answered(ctx context.Context, tx *sql.Tx, d device, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE snmp_devices SET status = $1, consecutive_failures = 0, last_poll_at = $2,
		last_success_at = $2, last_error = NULL, next_poll_at = $3 WHERE id = $4`, StatusOnline, at,
		at.Add(time.Duration(d.IntervalSeconds)*time.Second), d.ID); err != nil {
		return fmt.Errorf("record SNMP poll of %s: %w", d.ID, err)
	}
	if d.Status == StatusOffline {
		return s.alerts.ResolveFrom(ctx, tx, source(d.SNMPDevice), "offline", "the SNMP device answers again")
	}
	return nil
}

// failed records a device's failed poll by probe's agent: one failure more, the next poll
// backed off, and from the third failure in a row the device offline with an alert. Every
// failure of an offline device raises the alert, which opens unless one is open: one that a
// maintenance window held back opens at the first failure after the window.
func (s *Service) failed(ctx context.Context, tx *sql.Tx, d device, probe string, at time.Time, e *agentproto.SNMPError) error {
	failures := d.ConsecutiveFailures + 1
	status := d.Status
	if failures >= OfflineAfter {
		status = StatusOffline
	}
	why := e.Kind + ": " + e.Message
	next := at.Add(Backoff(time.Duration(d.IntervalSeconds)*time.Second, failures))
	if _, err := tx.ExecContext(ctx, `UPDATE snmp_devices SET status = $1, consecutive_failures = $2, last_poll_at = $3, last_error = $4,
		next_poll_at = $5 WHERE id = $6`, status, failures, at, why, next, d.ID); err != nil {
		return fmt.Errorf("record SNMP poll failure of %s: %w", d.ID, err)
	}
	if status != StatusOffline {
		return nil
	}
	_, _, err := s.alerts.RaiseFrom(ctx, tx, observed(d.SNMPDevice, probe), alerts.SourceAlert{Key: "offline", Severity: "high",
		Title:   fmt.Sprintf("SNMP device %s is offline", d.Name),
		Message: fmt.Sprintf("%s (%s:%d) did not answer %d polls in a row; the last: %s", d.Name, d.IPAddress, d.Port, failures, why),
		Context: map[string]any{"ipAddress": d.IPAddress, "port": d.Port, "failures": failures, "error": why}})
	return err
}

// SNMPPollOutcome is the answer of a poll now: the values stored.
type SNMPPollOutcome struct {
	DeviceID      string            `json:"deviceId"`
	ProbeDeviceID string            `json:"probeDeviceId" doc:"The agent that polled."`
	CollectedAt   time.Time         `json:"collectedAt"`
	Values        []SNMPMetricValue `json:"values"`
}

// snmpError is the API's answer to an SNMP failure the agent reported.
func snmpError(e *agentproto.SNMPError) error {
	switch e.Kind {
	case agentproto.SNMPErrTimeout:
		return &apperr.Error{Kind: apperr.KindTimeout, Code: CodeSNMPTimeout, Message: "timeout: the SNMP device did not answer in time " +
			"(unreachable, no SNMP agent on the port, or, for v1 and v2c, a community it does not accept): " + e.Message}
	case agentproto.SNMPErrAuth:
		return &apperr.Error{Kind: apperr.KindUpstream, Code: CodeSNMPAuth, Message: "authentication failed: " + e.Message}
	}
	return &apperr.Error{Kind: apperr.KindUpstream, Code: CodeSNMPFailed, Message: "the SNMP request failed: " + e.Message}
}

// PollNow polls a device at once through its agent, stores the outcome like a scheduled
// poll's (a failure counts), and returns the values.
func (s *Service) PollNow(ctx context.Context, id string) (SNMPPollOutcome, error) {
	d, err := s.getDevice(ctx, s.db, access.ScopeFrom(ctx), id)
	if err != nil {
		return SNMPPollOutcome{}, err
	}
	agent, err := s.devices.PickProbe(ctx, s.db, devices.ProbeTarget{OrgID: d.OrgID, SiteID: d.SiteID, DeviceID: store.Deref(d.ProbeDeviceID)})
	if err != nil {
		return SNMPPollOutcome{}, err
	}
	tos, err := s.templateOIDs(ctx, s.db, d.TemplateID)
	if err != nil {
		return SNMPPollOutcome{}, err
	}
	oids := make([]string, len(tos))
	for i, o := range tos {
		oids[i] = o.OID
	}
	t, err := s.target(d)
	if err != nil {
		return SNMPPollOutcome{}, err
	}
	var res agentproto.SNMPGetResult
	if err := s.call(ctx, agent, agentproto.CallSNMPGet, agentproto.SNMPGet{Target: t, OIDs: oids}, &res); err != nil {
		return SNMPPollOutcome{}, err
	}
	at := s.now()
	if err := s.Ingest(ctx, at, agent, []agentproto.SNMPTargetResult{{ID: d.ID, Values: res.Values, Error: res.Error}}); err != nil {
		return SNMPPollOutcome{}, err
	}
	if res.Error != nil {
		return SNMPPollOutcome{}, snmpError(res.Error)
	}
	latest, err := s.Latest(ctx, d.ID)
	if err != nil {
		return SNMPPollOutcome{}, err
	}
	return SNMPPollOutcome{DeviceID: d.ID, ProbeDeviceID: agent, CollectedAt: at, Values: latest.Values}, nil
}

// offline answers a request whose agent holds no live channel.
var offline = &apperr.Error{Kind: apperr.KindUnavailable, Code: systemtools.CodeAgentOffline,
	Message: "the agent chosen to poll is online over HTTP only, without the live connection SNMP requests travel over: try again shortly"}

func (s *Service) call(ctx context.Context, agent, method string, args, out any) error {
	if live, err := s.agents.LiveChannel(ctx, agent); err != nil {
		return fmt.Errorf("check the live channel of agent %s: %w", agent, err)
	} else if !live {
		return offline
	}
	raw, err := s.agents.Call(ctx, agent, method, args, requestTimeout)
	if err != nil {
		return fmt.Errorf("call %s on agent %s: %w", method, agent, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("read %s answer of agent %s: %w", method, agent, err)
	}
	return nil
}

// SNMPTestInput overrides what a test asks with: absent fields are the device's own. A version
// needs credentials for it.
type SNMPTestInput struct {
	Port        *int             `json:"port,omitempty" minimum:"1" maximum:"65535"`
	Version     *string          `json:"version,omitempty" enum:"v1,v2c,v3"`
	Credentials *SNMPCredentials `json:"credentials,omitempty"`
}

// SNMPTestResult is what a device answered a test: its MIB-2 system group.
type SNMPTestResult struct {
	ProbeDeviceID string   `json:"probeDeviceId" doc:"The agent that asked."`
	SysDescr      *string  `json:"sysDescr"`
	SysObjectID   *string  `json:"sysObjectId"`
	SysUpTime     *float64 `json:"sysUpTime" doc:"Hundredths of a second."`
	SysContact    *string  `json:"sysContact"`
	SysName       *string  `json:"sysName"`
	SysLocation   *string  `json:"sysLocation"`
}

// Test asks a device for its system group through its agent, with its credentials or those
// of in; nothing is stored. Failures say what failed: 504 SNMP_TIMEOUT, 502 SNMP_AUTH_FAILED.
func (s *Service) Test(ctx context.Context, id string, in SNMPTestInput) (SNMPTestResult, error) {
	d, err := s.getDevice(ctx, s.db, access.ScopeFrom(ctx), id)
	if err != nil {
		return SNMPTestResult{}, err
	}
	t, err := s.target(d)
	if err != nil {
		return SNMPTestResult{}, err
	}
	var c checker
	if in.Port != nil {
		if *in.Port < 1 || *in.Port > 65535 {
			c.fail("port", "1 to 65535")
		}
		t.Port = *in.Port
	}
	if in.Version != nil && in.Credentials == nil && *in.Version != d.Version {
		c.fail("credentials", "another version needs credentials for it")
	}
	if in.Credentials != nil {
		version := d.Version
		if in.Version != nil {
			version = *in.Version
		}
		checkCredentials(&c, version, in.Credentials)
		t = toTarget(t.Host, t.Port, version, *in.Credentials)
	}
	if err := c.err(); err != nil {
		return SNMPTestResult{}, err
	}
	agent, err := s.devices.PickProbe(ctx, s.db, devices.ProbeTarget{OrgID: d.OrgID, SiteID: d.SiteID, DeviceID: store.Deref(d.ProbeDeviceID)})
	if err != nil {
		return SNMPTestResult{}, err
	}
	var res agentproto.SNMPGetResult
	if err := s.call(ctx, agent, agentproto.CallSNMPTest, agentproto.SNMPGet{Target: t}, &res); err != nil {
		return SNMPTestResult{}, err
	}
	if res.Error != nil {
		return SNMPTestResult{}, snmpError(res.Error)
	}
	out := SNMPTestResult{ProbeDeviceID: agent}
	for _, v := range res.Values {
		switch v.OID {
		case "1.3.6.1.2.1.1.1.0":
			out.SysDescr = v.Text
		case "1.3.6.1.2.1.1.2.0":
			out.SysObjectID = v.Text
		case "1.3.6.1.2.1.1.3.0":
			out.SysUpTime = v.Number
		case "1.3.6.1.2.1.1.4.0":
			out.SysContact = v.Text
		case "1.3.6.1.2.1.1.5.0":
			out.SysName = v.Text
		case "1.3.6.1.2.1.1.6.0":
			out.SysLocation = v.Text
		}
	}
	return out, nil
}
