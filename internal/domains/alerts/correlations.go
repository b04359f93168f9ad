package alerts

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/store"
)

// CorrelationQuery says which alerts to group and how close they must be.
type CorrelationQuery struct {
	// WindowMinutes: alerts of one rule on one site belong together when each was triggered
	// within this many minutes of the previous one (1..1440, default 15).
	WindowMinutes int `json:"windowMinutes,omitempty" query:"windowMinutes" minimum:"0" maximum:"1440" doc:"Default 15."`
	// MinAlerts is the smallest group reported (2..1000, default 3).
	MinAlerts int `json:"minAlerts,omitempty" query:"minAlerts" minimum:"0" maximum:"1000" doc:"Default 3; at least 2."`
	// SinceHours bounds how far back alerts are read (1..168, default 24).
	SinceHours int `json:"sinceHours,omitempty" query:"sinceHours" minimum:"0" maximum:"168" doc:"Default 24."`
	// IncludeResolved groups resolved alerts too (a wave that has already passed).
	IncludeResolved bool   `json:"includeResolved,omitempty" query:"includeResolved"`
	OrgID           string `json:"orgId,omitempty" query:"orgId" format:"uuid"`
}

func (q *CorrelationQuery) defaults() {
	if q.WindowMinutes <= 0 {
		q.WindowMinutes = 15
	}
	if q.MinAlerts <= 0 {
		q.MinAlerts = 3
	}
	if q.MinAlerts < 2 {
		q.MinAlerts = 2
	}
	if q.SinceHours <= 0 {
		q.SinceHours = 24
	}
}

// CorrelationGroup is a set of related alerts: one rule firing on several devices of one
// site close together (say, a site's devices going offline at once: a site outage).
type CorrelationGroup struct {
	ID               string    `json:"id" doc:"The ID of the group's first alert; stable while the group grows."`
	Reason           string    `json:"reason"`
	OrgID            string    `json:"orgId"`
	SiteID           string    `json:"siteId"`
	RuleID           string    `json:"ruleId"`
	Title            string    `json:"title" doc:"The first alert's title."`
	Severity         string    `json:"severity" doc:"The highest severity in the group."`
	AlertIDs         []string  `json:"alertIds"`
	DeviceCount      int       `json:"deviceCount"`
	OpenCount        int       `json:"openCount"`
	FirstTriggeredAt time.Time `json:"firstTriggeredAt"`
	LastTriggeredAt  time.Time `json:"lastTriggeredAt"`
}

// CorrelationResult is the answer of an analysis.
type CorrelationResult struct {
	AnalyzedAlerts int                `json:"analyzedAlerts"`
	Truncated      bool               `json:"truncated" doc:"More than 10000 alerts matched: the newest 10000 were grouped."`
	Groups         []CorrelationGroup `json:"groups"`
}

const maxCorrelated = 10000

var severityRank = map[string]int{"critical": 5, "high": 4, "medium": 3, "low": 2, "info": 1}

// Correlate groups the alerts in scope: alerts of one rule on devices of one site, each
// triggered within WindowMinutes of the one before, form a group when there are at least
// MinAlerts of them. Groups come largest first.
func (s *Service) Correlate(ctx context.Context, q CorrelationQuery) (CorrelationResult, error) {
	q.defaults()
	now := s.clock.Now()
	var a store.Args
	conds := []string{alertFilter(access.ScopeFrom(ctx), &a), "a.rule_id IS NOT NULL", "a.site_id IS NOT NULL",
		"a.triggered_at >= " + a.Add(now.Add(-time.Duration(q.SinceHours)*time.Hour))}
	sts := openStatuses
	if q.IncludeResolved {
		sts = append(slices.Clone(openStatuses), StatusResolved)
	}
	conds = append(conds, "a.status IN "+a.In(sts))
	if q.OrgID != "" {
		conds = append(conds, "a.org_id = "+a.Add(q.OrgID))
	}
	all, err := store.QueryAll(ctx, s.db, `SELECT `+alertColumns+` FROM alerts a WHERE `+store.Where(conds)+
		` ORDER BY a.id DESC LIMIT `+a.Add(maxCorrelated+1), a.Values(), scanAlert)
	if err != nil {
		return CorrelationResult{}, fmt.Errorf("load alerts to correlate: %w", err)
	}
	out := CorrelationResult{Groups: []CorrelationGroup{}}
	if len(all) > maxCorrelated {
		all, out.Truncated = all[:maxCorrelated], true
	}
	out.AnalyzedAlerts = len(all)
	type key struct{ site, rule string }
	buckets := map[key][]Alert{}
	var order []key
	for _, x := range all {
		k := key{*x.SiteID, *x.RuleID}
		if _, ok := buckets[k]; !ok {
			order = append(order, k)
		}
		buckets[k] = append(buckets[k], x)
	}
	window := time.Duration(q.WindowMinutes) * time.Minute
	for _, k := range order {
		b := buckets[k]
		slices.SortFunc(b, func(x, y Alert) int { return x.TriggeredAt.Compare(y.TriggeredAt) })
		start := 0
		for i := 1; i <= len(b); i++ {
			if i < len(b) && b[i].TriggeredAt.Sub(b[i-1].TriggeredAt) <= window {
				continue
			}
			if i-start >= q.MinAlerts {
				out.Groups = append(out.Groups, group(b[start:i], q.WindowMinutes))
			}
			start = i
		}
	}
	slices.SortStableFunc(out.Groups, func(x, y CorrelationGroup) int {
		if len(x.AlertIDs) != len(y.AlertIDs) {
			return len(y.AlertIDs) - len(x.AlertIDs)
		}
		return y.LastTriggeredAt.Compare(x.LastTriggeredAt)
	})
	return out, nil
}

func group(alerts []Alert, window int) CorrelationGroup {
	first, last := alerts[0], alerts[len(alerts)-1]
	g := CorrelationGroup{ID: first.ID, OrgID: first.OrgID, SiteID: *first.SiteID, RuleID: *first.RuleID, Title: first.Title,
		FirstTriggeredAt: first.TriggeredAt, LastTriggeredAt: last.TriggeredAt}
	devices := map[string]bool{}
	for _, x := range alerts {
		g.AlertIDs = append(g.AlertIDs, x.ID)
		if severityRank[x.Severity] > severityRank[g.Severity] {
			g.Severity = x.Severity
		}
		if x.DeviceID != nil {
			devices[*x.DeviceID] = true
		}
		if slices.Contains(openStatuses, x.Status) {
			g.OpenCount++
		}
	}
	g.DeviceCount = len(devices)
	g.Reason = "the same rule fired on " + itoa(g.DeviceCount) + " devices of one site, each within " + itoa(window) +
		" minutes of the previous"
	return g
}

// AlertCorrelation is the group an alert belongs to, if any.
type AlertCorrelation struct {
	AlertID string            `json:"alertId"`
	Group   *CorrelationGroup `json:"group" doc:"null when the alert is not part of a group."`
}

// CorrelationOf finds the group of one alert in scope (resolved alerts included).
func (s *Service) CorrelationOf(ctx context.Context, alertID string, q CorrelationQuery) (AlertCorrelation, error) {
	x, err := s.Get(ctx, alertID)
	if err != nil {
		return AlertCorrelation{}, err
	}
	q.IncludeResolved, q.OrgID = true, x.OrgID
	if q.SinceHours == 0 {
		q.SinceHours = 168
	}
	res, err := s.Correlate(ctx, q)
	if err != nil {
		return AlertCorrelation{}, err
	}
	out := AlertCorrelation{AlertID: x.ID}
	for i := range res.Groups {
		if slices.Contains(res.Groups[i].AlertIDs, x.ID) {
			out.Group = &res.Groups[i]
		}
	}
	return out, nil
}
