package alertchannels

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/groups"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Match selects the alerts a policy applies to; an empty list matches everything.
type PolicyMatch struct {
	Severities []string `json:"severities,omitempty" doc:"critical, high, medium, low, info."`
	OrgIDs     []string `json:"orgIds,omitempty"`
	SiteIDs    []string `json:"siteIds,omitempty"`
	GroupIDs   []string `json:"groupIds,omitempty" doc:"The alert's device is a member of one of these groups."`
}

// TimeWindow limits a policy to some days and hours in a time zone; outside it the policy
// does not match (routing goes on to the next one).
type PolicyTimeWindow struct {
	Days     []string `json:"days,omitempty" doc:"mon..sun; none: every day."`
	Start    string   `json:"start,omitempty" doc:"HH:MM, inclusive."`
	End      string   `json:"end,omitempty" doc:"HH:MM, exclusive; before start: the window runs past midnight."`
	Timezone string   `json:"timezone,omitempty" doc:"IANA name; default UTC."`
}

// Step is one escalation step: its channels are notified delayMinutes after the alert
// triggered if it is still active then (step 0: at once).
type PolicyStep struct {
	DelayMinutes int      `json:"delayMinutes" minimum:"0" maximum:"10080"`
	ChannelIDs   []string `json:"channelIds" minItems:"1" maxItems:"20"`
}

// Policy is an alert routing and escalation policy.
type AlertPolicy struct {
	ID         string            `json:"id" format:"uuid"`
	PartnerID  string            `json:"partnerId" format:"uuid"`
	OrgID      *string           `json:"orgId"`
	Name       string            `json:"name"`
	Priority   int               `json:"priority" doc:"Lower first: the first matching policy routes the alert."`
	Match      PolicyMatch       `json:"match"`
	TimeWindow *PolicyTimeWindow `json:"timeWindow"`
	Steps      []PolicyStep      `json:"steps"`
	Enabled    bool              `json:"enabled"`
	CreatedAt  time.Time         `json:"createdAt"`
	UpdatedAt  time.Time         `json:"updatedAt"`
}

// NewPolicy is the body of a create.
type NewAlertPolicy struct {
	PartnerID  string            `json:"partnerId,omitempty" format:"uuid"`
	OrgID      string            `json:"orgId,omitempty" format:"uuid"`
	Name       string            `json:"name" maxLength:"200"`
	Priority   int               `json:"priority,omitempty" minimum:"0" maximum:"100000" doc:"Default 100."`
	Match      PolicyMatch       `json:"match,omitempty"`
	TimeWindow *PolicyTimeWindow `json:"timeWindow,omitempty"`
	Steps      []PolicyStep      `json:"steps" minItems:"1" maxItems:"10"`
	Enabled    *bool             `json:"enabled,omitempty"`
}

// PolicyUpdate holds the writable fields; absent fields stay.
type AlertPolicyUpdate struct {
	Name       *string           `json:"name,omitempty" maxLength:"200"`
	Priority   *int              `json:"priority,omitempty" minimum:"0" maximum:"100000"`
	Match      *PolicyMatch      `json:"match,omitempty"`
	TimeWindow *PolicyTimeWindow `json:"timeWindow,omitempty" doc:"{} removes the window."`
	Steps      []PolicyStep      `json:"steps,omitempty" maxItems:"10"`
	Enabled    *bool             `json:"enabled,omitempty"`
}

var severities = []string{"critical", "high", "medium", "low", "info"}
var dayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

func validMatch(m PolicyMatch) error {
	for _, s := range m.Severities {
		if !slices.Contains(severities, s) {
			return apperr.Invalid("match.severities", "'"+s+"' is not critical, high, medium, low or info")
		}
	}
	for _, l := range [][]string{m.OrgIDs, m.SiteIDs, m.GroupIDs} {
		for _, id := range l {
			if !store.ValidID(id) {
				return apperr.Invalid("match", "'"+id+"' is not an ID")
			}
		}
	}
	return nil
}

func minuteOfDay(s string) (int, bool) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, false
	}
	return t.Hour()*60 + t.Minute(), true
}

// validWindow checks w; an empty window (no start) means none.
func validWindow(w *PolicyTimeWindow) (*PolicyTimeWindow, error) {
	if w == nil || (w.Start == "" && w.End == "" && len(w.Days) == 0) {
		return nil, nil
	}
	out := *w
	_, ok1 := minuteOfDay(w.Start)
	_, ok2 := minuteOfDay(w.End)
	if !ok1 || !ok2 || w.Start == w.End {
		return nil, apperr.Invalid("timeWindow", "start and end are different HH:MM times")
	}
	for _, d := range w.Days {
		if !slices.Contains(dayNames, strings.ToLower(d)) {
			return nil, apperr.Invalid("timeWindow.days", "'"+d+"' is not mon, tue, wed, thu, fri, sat or sun")
		}
	}
	if out.Timezone == "" {
		out.Timezone = "UTC"
	}
	if _, err := time.LoadLocation(out.Timezone); err != nil {
		return nil, apperr.Invalid("timeWindow.timezone", "'"+w.Timezone+"' is not an IANA time zone")
	}
	return &out, nil
}

// inWindow reports whether t falls in w (nil: always).
func inWindow(w *PolicyTimeWindow, t time.Time) bool {
	if w == nil {
		return true
	}
	loc, err := time.LoadLocation(w.Timezone)
	if err != nil {
		return false
	}
	t = t.In(loc)
	start, _ := minuteOfDay(w.Start)
	end, _ := minuteOfDay(w.End)
	m := t.Hour()*60 + t.Minute()
	day := t.Weekday()
	if start > end && m < end {
		// The early part of a window that started the evening before.
		day = (day + 6) % 7
	}
	if len(w.Days) > 0 && !slices.ContainsFunc(w.Days, func(d string) bool { return strings.EqualFold(d, dayNames[day]) }) {
		return false
	}
	if start < end {
		return m >= start && m < end
	}
	return m >= start || m < end
}

// validSteps checks the steps and that every channel is one the policy's tenant may use.
func validSteps(ctx context.Context, q store.Querier, steps []PolicyStep, partnerID, orgID string) ([]PolicyStep, error) {
	if len(steps) == 0 || len(steps) > 10 {
		return nil, apperr.Invalid("steps", "1 to 10 steps")
	}
	out := make([]PolicyStep, len(steps))
	for i, st := range steps {
		if st.DelayMinutes < 0 || st.DelayMinutes > 10080 || (i > 0 && st.DelayMinutes < out[i-1].DelayMinutes) {
			return nil, apperr.Invalid("steps", "delayMinutes are 0 to 10080 and do not decrease from step to step")
		}
		if len(st.ChannelIDs) == 0 {
			return nil, apperr.Invalid("steps", "every step names at least one channel")
		}
		if err := checkChannels(ctx, q, "steps", st.ChannelIDs, partnerID, orgID); err != nil {
			return nil, err
		}
		out[i] = PolicyStep{DelayMinutes: st.DelayMinutes, ChannelIDs: slices.Compact(slices.Clone(st.ChannelIDs))}
	}
	return out, nil
}

// checkChannels refuses channel IDs that are not channels of the partner usable by orgID
// (partner-wide channels, or the organization's own).
func checkChannels(ctx context.Context, q store.Querier, field string, ids []string, partnerID, orgID string) error {
	for _, id := range ids {
		if !store.ValidID(id) {
			return apperr.Invalid(field, "no such channel: "+id)
		}
		var chOrg sql.NullString
		err := q.QueryRowContext(ctx, `SELECT org_id FROM notification_channels WHERE id = $1 AND partner_id = $2`, id, partnerID).Scan(&chOrg)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && chOrg.Valid && chOrg.String != orgID) {
			return apperr.Invalid(field, "no such channel: "+id)
		}
		if err != nil {
			return fmt.Errorf("check channel %s: %w", id, err)
		}
	}
	return nil
}

// matchTargets are the lists of a match that name organizations, sites and groups, and whose
// package tells the owner of each.
var matchTargets = []struct {
	field, noun string
	ids         func(PolicyMatch) []string
	owners      func(context.Context, store.Querier, []string) (map[string]tenancy.Owner, error)
}{
	{"match.orgIds", "organization", func(m PolicyMatch) []string { return m.OrgIDs }, tenancy.OrgOwners},
	{"match.siteIds", "site", func(m PolicyMatch) []string { return m.SiteIDs }, tenancy.SiteOwners},
	{"match.groupIds", "group", func(m PolicyMatch) []string { return m.GroupIDs }, groups.Owners},
}

// checkMatchTargets refuses, as checkChannels does, organization, site and group IDs of a
// match that do not exist, are not of the policy's partner (and organization, for an
// organization's policy) or are out of the caller's scope.
func checkMatchTargets(ctx context.Context, q store.Querier, scope access.Scope, m PolicyMatch, partnerID, orgID string) error {
	for _, t := range matchTargets {
		owners, err := t.owners(ctx, q, t.ids(m))
		if err != nil {
			return err
		}
		for _, id := range t.ids(m) {
			o, ok := owners[id]
			if !ok || o.PartnerID != partnerID || (orgID != "" && o.OrgID != orgID) || !scope.CanSeeOrg(o.OrgID, o.PartnerID) {
				return apperr.Invalid(t.field, "no such "+t.noun+": "+id)
			}
		}
	}
	return nil
}

const policyColumns = `p.id, p.partner_id, p.org_id, p.name, p.priority, p.match, p.time_window, p.steps, p.enabled, p.created_at, p.updated_at`

func scanPolicy(sc store.Scanner) (AlertPolicy, error) {
	var p AlertPolicy
	var org, window sql.NullString
	var match, steps string
	if err := sc.Scan(&p.ID, &p.PartnerID, &org, &p.Name, &p.Priority, &match, &window, &steps, &p.Enabled, &p.CreatedAt, &p.UpdatedAt); err != nil {
		return p, err
	}
	p.OrgID = store.StringPtr(org)
	if err := json.Unmarshal([]byte(match), &p.Match); err != nil {
		return p, err
	}
	if err := json.Unmarshal([]byte(steps), &p.Steps); err != nil {
		return p, err
	}
	if window.Valid && window.String != "" {
		p.TimeWindow = &PolicyTimeWindow{}
		if err := json.Unmarshal([]byte(window.String), p.TimeWindow); err != nil {
			return p, err
		}
	}
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	return p, nil
}

func (s *Service) getPolicy(ctx context.Context, q store.Querier, scope access.Scope, id string) (AlertPolicy, error) {
	var a store.Args
	return store.ByID(ctx, q, "policy", `SELECT `+policyColumns+` FROM alert_policies p`, "p.id", id, &a,
		[]string{filter(scope, &a, "p")}, scanPolicy)
}

// GetPolicy returns a policy in scope.
func (s *Service) GetPolicy(ctx context.Context, id string) (AlertPolicy, error) {
	return s.getPolicy(ctx, s.db, access.ScopeFrom(ctx), id)
}

// ListPolicies lists the policies in scope, newest first.
func (s *Service) ListPolicies(ctx context.Context, page store.Page) ([]AlertPolicy, string, *int, error) {
	var a store.Args
	conds := []string{filter(access.ScopeFrom(ctx), &a, "p")}
	return store.List(ctx, s.db, store.ListQuery{Columns: policyColumns, From: " FROM alert_policies p", Conds: conds, Args: &a,
		SortKey: "p.id", SortID: "p.id", Desc: true}, page, scanPolicy, func(p AlertPolicy) (string, string) { return p.ID, p.ID })
}

// CreatePolicy adds a policy.
func (s *Service) CreatePolicy(ctx context.Context, in NewAlertPolicy) (AlertPolicy, error) {
	scope := access.ScopeFrom(ctx)
	name, err := validName(in.Name)
	if err != nil {
		return AlertPolicy{}, err
	}
	if err := validMatch(in.Match); err != nil {
		return AlertPolicy{}, err
	}
	window, err := validWindow(in.TimeWindow)
	if err != nil {
		return AlertPolicy{}, err
	}
	prio := in.Priority
	if prio == 0 {
		prio = 100
	}
	enabled := in.Enabled == nil || *in.Enabled
	var out AlertPolicy
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, scope, in.OrgID, tenancy.PlaceOptions{Noun: "alert policy", PartnerID: in.PartnerID,
			PartnerWide: true, PartnerWideRefused: errPartnerWide})
		if err != nil {
			return err
		}
		partnerID, orgID := at.PartnerID, at.OrgID
		if err := checkMatchTargets(ctx, tx, scope, in.Match, partnerID, orgID); err != nil {
			return err
		}
		steps, err := validSteps(ctx, tx, in.Steps, partnerID, orgID)
		if err != nil {
			return err
		}
		id, now := store.NewID(), s.now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO alert_policies (id, partner_id, org_id, name, priority, match, time_window, steps,
			enabled, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)`, id, partnerID, store.NullIfEmpty(orgID),
			name, prio, store.EncodeJSON(in.Match), store.EncodeJSONOrNull(window), store.EncodeJSON(steps), enabled, now); err != nil {
			return fmt.Errorf("insert policy: %w", err)
		}
		if out, err = s.getPolicy(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "alert_policy.create", ResourceType: "alert_policy", ResourceID: id,
			ResourceName: name, PartnerID: partnerID, OrgID: orgID, Details: policyAudit(out)})
	})
	if err != nil {
		return out, fmt.Errorf("create alert policy: %w", err)
	}
	return out, nil
}

func policyAudit(p AlertPolicy) map[string]any {
	return map[string]any{"name": p.Name, "priority": p.Priority, "match": p.Match, "timeWindow": p.TimeWindow, "steps": p.Steps,
		"enabled": p.Enabled}
}

// UpdatePolicy changes a policy in scope.
func (s *Service) UpdatePolicy(ctx context.Context, id string, in AlertPolicyUpdate) (AlertPolicy, error) {
	scope := access.ScopeFrom(ctx)
	var out AlertPolicy
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.getPolicy(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		ch := store.NewChanges(s.now())
		if in.Name != nil {
			name, err := validName(*in.Name)
			if err != nil {
				return err
			}
			ch.Set("name", name)
		}
		if in.Priority != nil {
			ch.Set("priority", *in.Priority)
		}
		if in.Match != nil {
			if err := validMatch(*in.Match); err != nil {
				return err
			}
			if err := checkMatchTargets(ctx, tx, scope, *in.Match, before.PartnerID, store.Deref(before.OrgID)); err != nil {
				return err
			}
			ch.Set("match", store.EncodeJSON(*in.Match))
		}
		if in.TimeWindow != nil {
			w, err := validWindow(in.TimeWindow)
			if err != nil {
				return err
			}
			ch.Set("time_window", store.EncodeJSONOrNull(w))
		}
		if in.Steps != nil {
			steps, err := validSteps(ctx, tx, in.Steps, before.PartnerID, store.Deref(before.OrgID))
			if err != nil {
				return err
			}
			ch.Set("steps", store.EncodeJSON(steps))
		}
		if in.Enabled != nil {
			ch.Set("enabled", *in.Enabled)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE alert_policies SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id), ch.Args.Values()...); err != nil {
			return fmt.Errorf("update policy %s: %w", id, err)
		}
		if out, err = s.getPolicy(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "alert_policy.update", ResourceType: "alert_policy", ResourceID: id,
			ResourceName: out.Name, PartnerID: out.PartnerID, OrgID: store.Deref(out.OrgID),
			Details: audit.Diff(policyAudit(before), policyAudit(out))})
	})
	if err != nil {
		return out, fmt.Errorf("update alert policy: %w", err)
	}
	return out, nil
}

// DeletePolicy removes a policy in scope and cancels its pending escalation steps.
func (s *Service) DeletePolicy(ctx context.Context, id string) error {
	scope := access.ScopeFrom(ctx)
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		p, err := s.getPolicy(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE alert_escalations SET status = $1, updated_at = $2 WHERE policy_id = $3 AND status = $4`,
			escCancelled, s.now(), id, escPending); err != nil {
			return fmt.Errorf("cancel the escalations of policy %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM alert_policies WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete policy %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "alert_policy.delete", ResourceType: "alert_policy", ResourceID: id,
			ResourceName: p.Name, PartnerID: p.PartnerID, OrgID: store.Deref(p.OrgID), Details: policyAudit(p)})
	})
}
