package audit

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// DefaultReportPeriod is the period of a report when the caller gives no from.
const DefaultReportPeriod = 30 * 24 * time.Hour

// Period is a validated report period: from inclusive, to exclusive.
type Period struct {
	From time.Time
	To   time.Time
}

// ReportPeriod parses from and to (RFC 3339, both optional): to defaults to now, from to
// 30 days before to.
func ReportPeriod(from, to string, now time.Time) (Period, error) {
	f, err := parseTime("from", from)
	if err != nil {
		return Period{}, err
	}
	t, err := parseTime("to", to)
	if err != nil {
		return Period{}, err
	}
	if t.IsZero() {
		t = now.UTC()
	}
	if f.IsZero() {
		f = t.Add(-DefaultReportPeriod)
	}
	if f.After(t) {
		return Period{}, apperr.Invalid("from", "from is after to")
	}
	return Period{From: f, To: t}, nil
}

// ActorActivity is what one actor did in a period.
type ActorActivity struct {
	ActorID        *string   `json:"actorId"`
	ActorEmail     *string   `json:"actorEmail"`
	ActorType      string    `json:"actorType"`
	Actions        int       `json:"actions" doc:"Entries of the actor in the period."`
	Changes        int       `json:"changes" doc:"Entries of category change."`
	SecurityEvents int       `json:"securityEvents" doc:"Entries of category security."`
	Failures       int       `json:"failures" doc:"Entries whose result is failure or denied."`
	LastActivityAt time.Time `json:"lastActivityAt"`
}

// maxActivityRows caps the user-activity report.
const maxActivityRows = 1000

// UserActivity summarizes each actor's entries in the period, most active first.
func (l *Log) UserActivity(ctx context.Context, p Period) ([]ActorActivity, error) {
	var a store.Args
	conds := Criteria{FromTime: p.From, ToTime: p.To}.conditions(access.ScopeFrom(ctx), &a)
	out, err := store.QueryAll(ctx, l.db, `SELECT actor_id, actor_email, actor_type, COUNT(*),
		COALESCE(SUM(CASE WHEN category = 'change' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN category = 'security' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN result <> 'success' THEN 1 ELSE 0 END), 0),
		MAX(occurred_at)
		FROM audit_logs WHERE `+store.Where(conds)+`
		GROUP BY actor_type, actor_id, actor_email
		ORDER BY COUNT(*) DESC, MAX(occurred_at) DESC LIMIT `+a.Add(maxActivityRows), a.Values(), scanActivity)
	if err != nil {
		return nil, fmt.Errorf("query user activity: %w", err)
	}
	return out, nil
}

func scanActivity(row store.Scanner) (ActorActivity, error) {
	var r ActorActivity
	var id, email sql.NullString
	var last any
	if err := row.Scan(&id, &email, &r.ActorType, &r.Actions, &r.Changes, &r.SecurityEvents, &r.Failures, &last); err != nil {
		return r, err
	}
	r.ActorID, r.ActorEmail = store.StringPtr(id), store.StringPtr(email)
	var err error
	r.LastActivityAt, err = aggregateTime(last)
	return r, err
}

// aggregateTime reads MAX(occurred_at): a time on PostgreSQL, the stored text on SQLite
// (which does not type aggregates).
func aggregateTime(v any) (time.Time, error) {
	switch t := v.(type) {
	case time.Time:
		return t.UTC(), nil
	case []byte:
		return aggregateTime(string(t))
	case string:
		for _, layout := range []string{"2006-01-02 15:04:05.999999999-07:00", time.RFC3339Nano, "2006-01-02 15:04:05.999999999"} {
			if parsed, err := time.Parse(layout, t); err == nil {
				return parsed.UTC(), nil
			}
		}
		return time.Time{}, fmt.Errorf("unrecognized time %q", t)
	case nil:
		return time.Time{}, nil
	}
	return time.Time{}, fmt.Errorf("unrecognized time value %T", v)
}

// Compliance is the compliance summary of a period.
type Compliance struct {
	From           time.Time   `json:"from"`
	To             time.Time   `json:"to"`
	TotalEvents    int         `json:"totalEvents"`
	Changes        int         `json:"changes"`
	SecurityEvents int         `json:"securityEvents"`
	FailedSignIns  int         `json:"failedSignIns" doc:"auth.login entries with result failure."`
	DeniedRequests int         `json:"deniedRequests" doc:"Entries with result denied."`
	MFAAdoption    MFAAdoption `json:"mfaAdoption"`
}

// MFAAdoption counts active users in scope and those with MFA enabled (now, not in the period).
type MFAAdoption struct {
	Users   int     `json:"users"`
	WithMFA int     `json:"withMfa"`
	Percent float64 `json:"percent" doc:"withMfa / users x 100, one decimal; 0 without users."`
}

// Compliance summarizes the period's entries and the MFA adoption of the scope's users.
func (l *Log) Compliance(ctx context.Context, p Period) (Compliance, error) {
	scope := access.ScopeFrom(ctx)
	out := Compliance{From: p.From, To: p.To}
	var a store.Args
	conds := Criteria{FromTime: p.From, ToTime: p.To}.conditions(scope, &a)
	err := l.db.QueryRowContext(ctx, `SELECT COUNT(*),
		COALESCE(SUM(CASE WHEN category = 'change' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN category = 'security' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN action = 'auth.login' AND result = 'failure' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN result = 'denied' THEN 1 ELSE 0 END), 0)
		FROM audit_logs WHERE `+store.Where(conds), a.Values()...).
		Scan(&out.TotalEvents, &out.Changes, &out.SecurityEvents, &out.FailedSignIns, &out.DeniedRequests)
	if err != nil {
		return out, fmt.Errorf("count compliance events: %w", err)
	}
	var u store.Args
	err = l.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN mfa_enabled THEN 1 ELSE 0 END), 0)
		FROM users WHERE status = 'active' AND `+scope.TenantFilter(&u, "org_id", "partner_id"), u.Values()...).
		Scan(&out.MFAAdoption.Users, &out.MFAAdoption.WithMFA)
	if err != nil {
		return out, fmt.Errorf("count mfa adoption: %w", err)
	}
	if out.MFAAdoption.Users > 0 {
		out.MFAAdoption.Percent = math.Round(float64(out.MFAAdoption.WithMFA)*1000/float64(out.MFAAdoption.Users)) / 10
	}
	return out, nil
}

// Stats summarizes the log in scope.
type Stats struct {
	Total      int            `json:"total" doc:"All entries in scope."`
	ByCategory map[string]int `json:"byCategory"`
	ByResult   map[string]int `json:"byResult"`
	TopActions []ActionCount  `json:"topActions" doc:"The 10 most frequent actions."`
	PerDay     []DayCount     `json:"perDay" doc:"Entries per UTC day for the last days days, oldest first, today included; days without entries count 0."`
}

// ActionCount is how often an action occurs.
type ActionCount struct {
	Action string `json:"action"`
	Count  int    `json:"count"`
}

// DayCount is the number of entries on one UTC day.
type DayCount struct {
	Date  string `json:"date" format:"date"`
	Count int    `json:"count"`
}

// MaxStatsDays is the longest perDay window of Stats.
const MaxStatsDays = 90

// Stats counts the entries in scope by category, result and action, and per day for the
// last days days (UTC, today included).
func (l *Log) Stats(ctx context.Context, days int, now time.Time) (Stats, error) {
	scope := access.ScopeFrom(ctx)
	out := Stats{ByCategory: map[string]int{}, ByResult: map[string]int{}, TopActions: []ActionCount{}}
	group := func(col string, limit int, each func(key string, n int)) error {
		var a store.Args
		q := `SELECT ` + col + `, COUNT(*) FROM audit_logs WHERE ` + scope.TenantFilter(&a, "org_id", "partner_id") +
			` GROUP BY ` + col + ` ORDER BY COUNT(*) DESC, ` + col
		if limit > 0 {
			q += ` LIMIT ` + a.Add(limit)
		}
		counts, err := store.QueryAll(ctx, l.db, q, a.Values(), scanKeyCount)
		if err != nil {
			return fmt.Errorf("count audit entries by %s: %w", col, err)
		}
		for _, c := range counts {
			each(c.key, c.n)
		}
		return nil
	}
	if err := group("category", 0, func(k string, n int) { out.ByCategory[k] = n; out.Total += n }); err != nil {
		return out, err
	}
	if err := group("result", 0, func(k string, n int) { out.ByResult[k] = n }); err != nil {
		return out, err
	}
	if err := group("action", 10, func(k string, n int) { out.TopActions = append(out.TopActions, ActionCount{k, n}) }); err != nil {
		return out, err
	}

	today := now.UTC().Truncate(24 * time.Hour)
	since := today.AddDate(0, 0, -(days - 1))
	var a store.Args
	day := l.db.UTCDate("occurred_at")
	perDay, err := store.QueryAll(ctx, l.db, `SELECT `+day+`, COUNT(*) FROM audit_logs WHERE `+scope.TenantFilter(&a, "org_id", "partner_id")+
		` AND occurred_at >= `+a.Add(since)+` GROUP BY `+day, a.Values(), scanKeyCount)
	if err != nil {
		return out, fmt.Errorf("count audit entries per day: %w", err)
	}
	counts := map[string]int{}
	for _, c := range perDay {
		counts[strings.TrimSpace(c.key)] = c.n
	}
	for d := since; !d.After(today); d = d.AddDate(0, 0, 1) {
		k := d.Format(time.DateOnly)
		out.PerDay = append(out.PerDay, DayCount{Date: k, Count: counts[k]})
	}
	return out, nil
}

// keyCount is one row of a GROUP BY: the group's key and its number of entries.
type keyCount struct {
	key string
	n   int
}

func scanKeyCount(row store.Scanner) (keyCount, error) {
	var c keyCount
	err := row.Scan(&c.key, &c.n)
	return c, err
}
