package snmp

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// SNMPMetricValue is the latest value of an OID of a device, named by the device's template
// or the catalog: its number or text, and for a counter its rate per second.
type SNMPMetricValue struct {
	OID         string    `json:"oid"`
	Name        string    `json:"name"`
	Label       string    `json:"label"`
	Unit        string    `json:"unit"`
	Type        string    `json:"type" doc:"The type the device answered: integer, counter32, counter64, gauge32, timeticks, octet_string, oid, ip_address, ..."`
	Value       *float64  `json:"value"`
	Text        *string   `json:"text"`
	Rate        *float64  `json:"rate" doc:"Counters: the change per second since the previous poll; null on the first poll and after a reset."`
	CollectedAt time.Time `json:"collectedAt"`
}

// SNMPLatest is the latest value of every OID of a device.
type SNMPLatest struct {
	DeviceID    string            `json:"deviceId"`
	CollectedAt *time.Time        `json:"collectedAt" doc:"The last successful poll; null before the first."`
	Values      []SNMPMetricValue `json:"values"`
}

// namer names OIDs for a device: its template's names, then the catalog's, then the OID.
type namer map[string]SNMPTemplateOID

func (s *Service) namer(ctx context.Context, d device) (namer, error) {
	tos, err := s.templateOIDs(ctx, s.db, d.TemplateID)
	if err != nil {
		return nil, err
	}
	n := namer{}
	for _, o := range tos {
		n[o.OID] = o
	}
	return n, nil
}

func (n namer) name(oid string) SNMPTemplateOID {
	if o, ok := n[oid]; ok {
		return o
	}
	if o, ok := lookupCatalog(oid); ok {
		return o
	}
	return SNMPTemplateOID{OID: oid, Name: oid, Label: oid}
}

// oidOf finds the OID a name stands for among the device's template and the catalog.
func (n namer) oidOf(name string) (string, bool) {
	for oid, o := range n {
		if o.Name == name {
			return oid, true
		}
	}
	for _, c := range catalog {
		if !c.Column && c.Name == name {
			return c.OID, true
		}
	}
	return "", false
}

// Latest returns the latest value of each OID of a device in scope.
func (s *Service) Latest(ctx context.Context, deviceID string) (SNMPLatest, error) {
	d, err := s.getDevice(ctx, s.db, access.ScopeFrom(ctx), deviceID)
	if err != nil {
		return SNMPLatest{}, err
	}
	n, err := s.namer(ctx, d)
	if err != nil {
		return SNMPLatest{}, err
	}
	values, err := s.latestValues(ctx, d.ID, n, "")
	return SNMPLatest{DeviceID: d.ID, CollectedAt: d.LastSuccessAt, Values: values}, err
}

// latestValues reads the latest values of a device (of one OID when oid is set), in OID order.
func (s *Service) latestValues(ctx context.Context, deviceID string, n namer, oid string) ([]SNMPMetricValue, error) {
	var a store.Args
	conds := []string{"device_id = " + a.Add(deviceID)}
	if oid != "" {
		conds = append(conds, "oid = "+a.Add(oid))
	}
	out, err := store.QueryAll(ctx, s.db, `SELECT oid, type, value, text, rate, collected_at FROM snmp_latest WHERE `+store.Where(conds),
		a.Values(), func(row store.Scanner) (SNMPMetricValue, error) {
			var v SNMPMetricValue
			var num, rate sql.NullFloat64
			var text sql.NullString
			if err := row.Scan(&v.OID, &v.Type, &num, &text, &rate, &v.CollectedAt); err != nil {
				return v, err
			}
			o := n.name(v.OID)
			v.Name, v.Label, v.Unit, v.Text, v.CollectedAt = o.Name, o.Label, o.Unit, store.StringPtr(text), v.CollectedAt.UTC()
			if num.Valid {
				v.Value = &num.Float64
			}
			if rate.Valid {
				v.Rate = &rate.Float64
			}
			return v, nil
		})
	if err != nil {
		return nil, fmt.Errorf("load latest SNMP values: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return oidLess(out[i].OID, out[j].OID) })
	return out, nil
}

// Buckets of history.
var buckets = map[string]time.Duration{"5m": 5 * time.Minute, "15m": 15 * time.Minute, "1h": time.Hour, "6h": 6 * time.Hour, "1d": 24 * time.Hour}

// History limits.
const (
	MaxHistoryOIDs    = 20
	MaxHistoryBuckets = 2016
	MaxHistoryRange   = 366 * 24 * time.Hour
)

// HistoryQuery asks for the history of OIDs (or names) of a device.
type HistoryQuery struct {
	OIDs   []string
	Names  []string
	From   time.Time
	To     time.Time
	Bucket string
}

// SNMPHistory is the history of OIDs of a device in buckets.
type SNMPHistory struct {
	DeviceID string       `json:"deviceId"`
	From     time.Time    `json:"from"`
	To       time.Time    `json:"to"`
	Bucket   string       `json:"bucket" enum:"5m,15m,1h,6h,1d"`
	Series   []SNMPSeries `json:"series"`
}

// SNMPSeries is the history of one OID: for a counter, of its rate per second.
type SNMPSeries struct {
	OID    string      `json:"oid"`
	Name   string      `json:"name"`
	Label  string      `json:"label"`
	Unit   string      `json:"unit"`
	Rate   bool        `json:"rate" doc:"The points are rates per second of a counter."`
	Points []SNMPPoint `json:"points"`
}

// SNMPPoint is one bucket with samples: its start (a multiple of the width since the Unix
// epoch), and the average, minimum, maximum and count
// of its samples. Buckets without samples are left out.
type SNMPPoint struct {
	Start time.Time `json:"start"`
	Avg   float64   `json:"avg"`
	Min   float64   `json:"min"`
	Max   float64   `json:"max"`
	Count int       `json:"count"`
}

// History returns the buckets of OIDs of a device in scope over [from, to). Buckets are
// aligned to multiples of their width since the Unix epoch (UTC); buckets of an hour or more
// come from hourly aggregates, whose hours at the edges count whole. Limits: 1 to 20 OIDs (or names), at most 2016 buckets, a range of at most 366 days.
func (s *Service) History(ctx context.Context, deviceID string, q HistoryQuery) (SNMPHistory, error) {
	d, err := s.getDevice(ctx, s.db, access.ScopeFrom(ctx), deviceID)
	if err != nil {
		return SNMPHistory{}, err
	}
	if q.Bucket == "" {
		q.Bucket = "1h"
	}
	size, ok := buckets[q.Bucket]
	if !ok {
		return SNMPHistory{}, apperr.Invalid("bucket", "5m, 15m, 1h, 6h or 1d")
	}
	if q.To.IsZero() {
		q.To = s.now()
	}
	if q.From.IsZero() {
		q.From = q.To.Add(-24 * time.Hour)
	}
	q.From, q.To = q.From.UTC().Truncate(time.Second), q.To.UTC().Truncate(time.Second)
	var c checker
	switch {
	case !q.From.Before(q.To):
		c.fail("from", "before to")
	case q.To.Sub(q.From) > MaxHistoryRange:
		c.fail("from", "a range of at most 366 days")
	case (q.To.Sub(q.From)+size-1)/size > MaxHistoryBuckets:
		c.fail("bucket", "at most %d buckets: a larger bucket or a shorter range", MaxHistoryBuckets)
	}
	n, err := s.namer(ctx, d)
	if err != nil {
		return SNMPHistory{}, err
	}
	var oids []string
	seen := map[string]bool{}
	for i, o := range q.OIDs {
		oid, why := validOID(o)
		if why != "" {
			c.fail(fmt.Sprintf("oid[%d]", i), "%s", why)
		} else if !seen[oid] {
			seen[oid] = true
			oids = append(oids, oid)
		}
	}
	for i, name := range q.Names {
		oid, ok := n.oidOf(name)
		if !ok {
			c.fail(fmt.Sprintf("name[%d]", i), "no OID of the device's template or the catalog is named %q", name)
		} else if !seen[oid] {
			seen[oid] = true
			oids = append(oids, oid)
		}
	}
	if len(oids) == 0 && len(c.details) == 0 {
		c.fail("oid", "name 1 to %d OIDs (oid) or names (name)", MaxHistoryOIDs)
	}
	if len(oids) > MaxHistoryOIDs {
		c.fail("oid", "at most %d OIDs", MaxHistoryOIDs)
	}
	if err := c.err(); err != nil {
		return SNMPHistory{}, err
	}
	counters, err := s.counterOIDs(ctx, d.ID, oids)
	if err != nil {
		return SNMPHistory{}, err
	}
	out := SNMPHistory{DeviceID: d.ID, From: q.From, To: q.To, Bucket: q.Bucket, Series: make([]SNMPSeries, len(oids))}
	at := map[string]int{}
	for i, oid := range oids {
		o := n.name(oid)
		out.Series[i] = SNMPSeries{OID: oid, Name: o.Name, Label: o.Label, Unit: o.Unit, Rate: counters[oid], Points: []SNMPPoint{}}
		if counters[oid] {
			out.Series[i].Unit = o.Unit + "/s"
		}
		at[oid] = i
	}
	from, width := q.From.Unix(), int64(size/time.Second)
	add := func(oid string, p SNMPPoint) { out.Series[at[oid]].Points = append(out.Series[at[oid]].Points, p) }
	var rated, plain []string
	for _, oid := range oids {
		if counters[oid] {
			rated = append(rated, oid)
		} else {
			plain = append(plain, oid)
		}
	}
	if width >= 3600 {
		err = s.rollupBuckets(ctx, d.ID, oids, from-from%3600, q.To.Unix(), width, add)
	} else {
		for _, part := range []struct {
			col  string
			oids []string
		}{{"value", plain}, {"rate", rated}} {
			if len(part.oids) > 0 && err == nil {
				err = s.buckets(ctx, d.ID, part.col, part.oids, from, q.To.Unix(), width, add)
			}
		}
	}
	if err != nil {
		return out, err
	}
	return out, nil
}

// buckets aggregates col (value or rate) of oids of a device over [from, to) in buckets of
// width seconds (aligned to multiples of width since the Unix epoch), calling add for each
// bucket with samples, in order.
func (s *Service) buckets(ctx context.Context, deviceID, col string, oids []string, from, to, width int64,
	add func(string, SNMPPoint)) error {
	var a store.Args
	w := a.Add(width)
	return s.points(ctx, `SELECT oid, collected_at / `+w+` AS k, AVG(`+col+`), MIN(`+col+`), MAX(`+col+`), COUNT(`+col+`)
		FROM snmp_metrics WHERE device_id = `+a.Add(deviceID)+` AND oid IN `+a.In(oids)+` AND collected_at >= `+a.Add(from)+
		` AND collected_at < `+a.Add(to)+` GROUP BY oid, k ORDER BY oid, k`, a.Values(), width, add)
}

// rollupBuckets is buckets of an hour or more, from the hourly aggregates of [from, to).
func (s *Service) rollupBuckets(ctx context.Context, deviceID string, oids []string, from, to, width int64,
	add func(string, SNMPPoint)) error {
	var a store.Args
	w := a.Add(width)
	return s.points(ctx, `SELECT oid, hour / `+w+` AS k, SUM(total) / SUM(samples), MIN(lowest), MAX(highest), SUM(samples)
		FROM snmp_rollups WHERE device_id = `+a.Add(deviceID)+` AND oid IN `+a.In(oids)+` AND hour >= `+a.Add(from)+
		` AND hour < `+a.Add(to)+` GROUP BY oid, k ORDER BY oid, k`, a.Values(), width, add)
}

// oidPoint is a bucket of an OID's history.
type oidPoint struct {
	oid   string
	point SNMPPoint
}

func (s *Service) points(ctx context.Context, query string, args []any, width int64, add func(string, SNMPPoint)) error {
	ps, err := store.QueryAll(ctx, s.db, query, args, func(row store.Scanner) (oidPoint, error) {
		var p oidPoint
		var k int64
		var avg, lo, hi sql.NullFloat64
		if err := row.Scan(&p.oid, &k, &avg, &lo, &hi, &p.point.Count); err != nil {
			return p, err
		}
		p.point.Start, p.point.Avg, p.point.Min, p.point.Max = time.Unix(k*width, 0).UTC(), avg.Float64, lo.Float64, hi.Float64
		return p, nil
	})
	if err != nil {
		return fmt.Errorf("load SNMP history: %w", err)
	}
	for _, p := range ps {
		if p.point.Count > 0 {
			add(p.oid, p.point)
		}
	}
	return nil
}

// counterOIDs returns which of oids the device last answered as counters.
func (s *Service) counterOIDs(ctx context.Context, deviceID string, oids []string) (map[string]bool, error) {
	var a store.Args
	counters, err := store.QueryStrings(ctx, s.db, `SELECT oid FROM snmp_latest WHERE device_id = `+a.Add(deviceID)+` AND oid IN `+
		a.In(oids)+` AND type IN ('counter32', 'counter64')`, a.Values()...)
	if err != nil {
		return nil, fmt.Errorf("load OID types: %w", err)
	}
	out := make(map[string]bool, len(counters))
	for _, oid := range counters {
		out[oid] = true
	}
	return out, nil
}

// SNMPSample is one stored sample of an OID.
type SNMPSample struct {
	CollectedAt time.Time `json:"collectedAt"`
	Value       float64   `json:"value"`
	Rate        *float64  `json:"rate"`
}

// SNMPOIDMetrics is the latest value and the recent samples of one OID of a device.
type SNMPOIDMetrics struct {
	DeviceID string           `json:"deviceId"`
	OID      string           `json:"oid"`
	Name     string           `json:"name"`
	Label    string           `json:"label"`
	Unit     string           `json:"unit"`
	Latest   *SNMPMetricValue `json:"latest" doc:"null when the device never answered the OID."`
	Samples  []SNMPSample     `json:"samples" doc:"Newest first."`
}

// OIDMetrics returns the latest value and the newest limit samples of an OID of a device.
func (s *Service) OIDMetrics(ctx context.Context, deviceID, rawOID string, limit int) (SNMPOIDMetrics, error) {
	d, err := s.getDevice(ctx, s.db, access.ScopeFrom(ctx), deviceID)
	if err != nil {
		return SNMPOIDMetrics{}, err
	}
	oid, why := validOID(rawOID)
	if why != "" {
		return SNMPOIDMetrics{}, apperr.Invalid("oid", why)
	}
	n, err := s.namer(ctx, d)
	if err != nil {
		return SNMPOIDMetrics{}, err
	}
	o := n.name(oid)
	out := SNMPOIDMetrics{DeviceID: d.ID, OID: oid, Name: o.Name, Label: o.Label, Unit: o.Unit, Samples: []SNMPSample{}}
	latest, err := s.latestValues(ctx, d.ID, n, oid)
	if err != nil {
		return out, err
	}
	if len(latest) > 0 {
		out.Latest = &latest[0]
	}
	samples, err := store.QueryAll(ctx, s.db, `SELECT collected_at, value, rate FROM snmp_metrics WHERE device_id = $1 AND oid = $2
		ORDER BY collected_at DESC LIMIT $3`, []any{d.ID, oid, limit}, func(row store.Scanner) (SNMPSample, error) {
		var unix int64
		var sm SNMPSample
		var rate sql.NullFloat64
		if err := row.Scan(&unix, &sm.Value, &rate); err != nil {
			return sm, err
		}
		sm.CollectedAt = time.Unix(unix, 0).UTC()
		if rate.Valid {
			sm.Rate = &rate.Float64
		}
		return sm, nil
	})
	if err != nil {
		return out, fmt.Errorf("load SNMP samples: %w", err)
	}
	out.Samples = samples
	return out, nil
}

// SNMPDashboard summarizes the SNMP devices in scope.
type SNMPDashboard struct {
	Devices       SNMPDeviceCounts     `json:"devices"`
	PollsLastHour SNMPPollCounts       `json:"pollsLastHour"`
	Alerting      []SNMPAlertingDevice `json:"alertingDevices" doc:"Devices with breached thresholds (open threshold alerts), most first; at most 20."`
	TopBreaching  []SNMPBreachingOID   `json:"topBreachingOids" doc:"OIDs with the most breached thresholds; at most 10."`
}

// SNMPDeviceCounts counts devices by status; disabled ones apart.
type SNMPDeviceCounts struct {
	Total    int `json:"total"`
	Online   int `json:"online"`
	Offline  int `json:"offline"`
	Unknown  int `json:"unknown"`
	Disabled int `json:"disabled"`
}

// SNMPPollCounts counts the polls of the last hour.
type SNMPPollCounts struct {
	Total  int `json:"total"`
	Failed int `json:"failed"`
}

// SNMPAlertingDevice is a device with breached thresholds.
type SNMPAlertingDevice struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Status   string `json:"status"`
	Breached int    `json:"breachedThresholds"`
}

// SNMPBreachingOID is an OID with breached thresholds.
type SNMPBreachingOID struct {
	OID      string `json:"oid"`
	Name     string `json:"name"`
	Breached int    `json:"breachedThresholds"`
}

// Dashboard summarizes the devices in scope (of one organization when orgID is set).
func (s *Service) Dashboard(ctx context.Context, orgID string) (SNMPDashboard, error) {
	scope := access.ScopeFrom(ctx)
	filter := func(a *store.Args, alias string) string {
		conds := []string{scope.OrgFilter(a, alias+".org_id", alias+".partner_id"), tenancy.LiveOrg(alias + ".org_id")}
		if orgID != "" {
			conds = append(conds, alias+".org_id = "+a.Add(orgID))
		}
		return store.Where(conds)
	}
	out := SNMPDashboard{Alerting: []SNMPAlertingDevice{}, TopBreaching: []SNMPBreachingOID{}}
	type statusCount struct {
		status  string
		enabled bool
		n       int
	}
	var a store.Args
	counts, err := store.QueryAll(ctx, s.db, `SELECT d.status, d.enabled, COUNT(*) FROM snmp_devices d WHERE `+filter(&a, "d")+
		` GROUP BY d.status, d.enabled`, a.Values(), func(row store.Scanner) (statusCount, error) {
		var c statusCount
		return c, row.Scan(&c.status, &c.enabled, &c.n)
	})
	if err != nil {
		return out, fmt.Errorf("count SNMP devices: %w", err)
	}
	for _, c := range counts {
		out.Devices.Total += c.n
		switch {
		case !c.enabled:
			out.Devices.Disabled += c.n
		case c.status == StatusOnline:
			out.Devices.Online += c.n
		case c.status == StatusOffline:
			out.Devices.Offline += c.n
		default:
			out.Devices.Unknown += c.n
		}
	}
	a = store.Args{}
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN p.ok THEN 0 ELSE 1 END), 0) FROM snmp_polls p WHERE `+
		filter(&a, "p")+` AND p.polled_at >= `+a.Add(s.now().Add(-time.Hour)), a.Values()...).Scan(&out.PollsLastHour.Total,
		&out.PollsLastHour.Failed); err != nil {
		return out, fmt.Errorf("count SNMP polls: %w", err)
	}
	a = store.Args{}
	alerting, err := store.QueryAll(ctx, s.db, `SELECT d.id, d.name, d.status, COUNT(*) AS n FROM snmp_thresholds t
		JOIN snmp_devices d ON d.id = t.device_id WHERE t.breached AND `+filter(&a, "d")+
		` GROUP BY d.id, d.name, d.status ORDER BY n DESC, d.id LIMIT 20`, a.Values(), func(row store.Scanner) (SNMPAlertingDevice, error) {
		var x SNMPAlertingDevice
		return x, row.Scan(&x.ID, &x.Name, &x.Status, &x.Breached)
	})
	if err != nil {
		return out, fmt.Errorf("list alerting SNMP devices: %w", err)
	}
	out.Alerting = alerting
	a = store.Args{}
	breaching, err := store.QueryAll(ctx, s.db, `SELECT t.oid, COUNT(*) AS n FROM snmp_thresholds t WHERE t.breached AND `+
		filter(&a, "t")+` GROUP BY t.oid ORDER BY n DESC, t.oid LIMIT 10`, a.Values(), func(row store.Scanner) (SNMPBreachingOID, error) {
		var x SNMPBreachingOID
		if err := row.Scan(&x.OID, &x.Breached); err != nil {
			return x, err
		}
		x.Name = x.OID
		if c, ok := lookupCatalog(x.OID); ok {
			x.Name = c.Name
		}
		return x, nil
	})
	if err != nil {
		return out, fmt.Errorf("list breaching OIDs: %w", err)
	}
	out.TopBreaching = breaching
	return out, nil
}

// Purge deletes metric samples and hourly aggregates older than the retention and poll records older than a day.
func (s *Service) Purge(ctx context.Context) (int64, error) {
	now := s.now()
	return s.db.Purge(ctx, "SNMP metrics",
		store.Deletion{SQL: `DELETE FROM snmp_metrics WHERE collected_at < $1`, Args: []any{now.Add(-s.retention).Unix()}},
		store.Deletion{SQL: `DELETE FROM snmp_rollups WHERE hour < $1`, Args: []any{now.Add(-s.retention).Unix()}},
		store.Deletion{SQL: `DELETE FROM snmp_polls WHERE polled_at < $1`, Args: []any{now.Add(-24 * time.Hour)}})
}
