package alerts

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Rule is the API view of an alert rule.
type Rule struct {
	ID              string          `json:"id" format:"uuid"`
	PartnerID       string          `json:"partnerId" format:"uuid"`
	OrgID           *string         `json:"orgId" doc:"The one organization the rule applies to; null: every organization of the partner."`
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	Severity        string          `json:"severity" enum:"critical,high,medium,low,info"`
	Enabled         bool            `json:"enabled"`
	Targets         RuleTargets     `json:"targets"`
	Conditions      json.RawMessage `json:"conditions" doc:"A condition or {logic: and|or, conditions: [...]}, nestable 3 levels deep."`
	TitleTemplate   string          `json:"titleTemplate"`
	MessageTemplate string          `json:"messageTemplate"`
	AutoResolve     bool            `json:"autoResolve"`
	CooldownMinutes int             `json:"cooldownMinutes"`
	ChannelIDs      []string        `json:"channelIds" doc:"Notification channels this rule's alerts go to; empty: routing policies decide."`
	CreatedAt       time.Time       `json:"createdAt"`
	UpdatedAt       time.Time       `json:"updatedAt"`

	cond Condition
}

// NewRule is the body of a rule create.
type NewRule struct {
	PartnerID       string          `json:"partnerId,omitempty" format:"uuid" doc:"System callers only, and required for them."`
	OrgID           string          `json:"orgId,omitempty" format:"uuid" doc:"Restrict the rule to one organization. Organization callers: their own (the default)."`
	TemplateID      string          `json:"templateId,omitempty" doc:"A built-in or custom template: the fields this body leaves out are taken from it."`
	Name            string          `json:"name,omitempty" maxLength:"200" doc:"Required unless a template gives it."`
	Description     string          `json:"description,omitempty" maxLength:"2000" multiline:"true"`
	Severity        string          `json:"severity,omitempty" doc:"critical, high, medium, low or info."`
	Enabled         *bool           `json:"enabled,omitempty" doc:"Default true."`
	Targets         *RuleTargets    `json:"targets,omitempty" doc:"Default {type: all}."`
	Conditions      json.RawMessage `json:"conditions,omitempty" doc:"threshold {type, metric: cpuPercent|ramPercent|diskPercent, operator: gt|gte|lt|lte|eq|neq, value, durationMinutes 0..1440}; offline {type, durationMinutes}; agent_silent {type, durationMinutes}; command_failed {type, commandTypes?, durationMinutes (window, default 60)}; or {logic: and|or, conditions}."`
	TitleTemplate   string          `json:"titleTemplate,omitempty" maxLength:"1000" doc:"Placeholders {{hostname}}, {{value}}, {{threshold}}, {{metric}}. Default: the rule's name on {{hostname}}."`
	MessageTemplate string          `json:"messageTemplate,omitempty" maxLength:"1000" multiline:"true"`
	AutoResolve     *bool           `json:"autoResolve,omitempty" doc:"Default true: the alert resolves itself when the condition stops holding."`
	CooldownMinutes *int            `json:"cooldownMinutes,omitempty" doc:"Default 5: no new alert for the same rule and device this long after the last one ended."`
	ChannelIDs      []string        `json:"channelIds,omitempty" maxItems:"20" doc:"Notification channels (/alerts/channels) the alerts go to, before any policy."`
}

// RuleUpdate holds the writable fields of a rule; absent fields stay.
type RuleUpdate struct {
	Name            *string         `json:"name,omitempty" maxLength:"200"`
	Description     *string         `json:"description,omitempty" maxLength:"2000" multiline:"true"`
	Severity        *string         `json:"severity,omitempty"`
	Enabled         *bool           `json:"enabled,omitempty"`
	Targets         *RuleTargets    `json:"targets,omitempty"`
	Conditions      json.RawMessage `json:"conditions,omitempty"`
	TitleTemplate   *string         `json:"titleTemplate,omitempty" maxLength:"1000"`
	MessageTemplate *string         `json:"messageTemplate,omitempty" maxLength:"1000" multiline:"true"`
	AutoResolve     *bool           `json:"autoResolve,omitempty"`
	CooldownMinutes *int            `json:"cooldownMinutes,omitempty"`
	ChannelIDs      []string        `json:"channelIds,omitempty" maxItems:"20" doc:"Replaces the rule's channels; [] removes them."`
}

const ruleColumns = `r.id, r.partner_id, r.org_id, r.name, r.description, r.severity, r.enabled, r.targets, r.conditions,
	r.title_template, r.message_template, r.auto_resolve, r.cooldown_minutes, r.created_at, r.updated_at, r.channel_ids`

func scanRule(row store.Scanner) (Rule, error) {
	var r Rule
	var org sql.NullString
	var targets, conds, channels string
	err := row.Scan(&r.ID, &r.PartnerID, &org, &r.Name, &r.Description, &r.Severity, &r.Enabled, &targets, &conds,
		&r.TitleTemplate, &r.MessageTemplate, &r.AutoResolve, &r.CooldownMinutes, &r.CreatedAt, &r.UpdatedAt, &channels)
	if err != nil {
		return r, err
	}
	if r.ChannelIDs, _ = store.DecodeStrings(channels); r.ChannelIDs == nil {
		r.ChannelIDs = []string{}
	}
	r.OrgID = store.StringPtr(org)
	_ = json.Unmarshal([]byte(targets), &r.Targets)
	if r.Targets.IDs == nil {
		r.Targets.IDs = []string{}
	}
	_ = json.Unmarshal([]byte(conds), &r.cond)
	r.Conditions, _ = json.Marshal(r.cond)
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, nil
}

// ruleFilter keeps the rules (alias r) the scope may see, as custom fields do: a partner
// caller its partner's partner-wide rules and those of organizations it reaches; an
// organization caller its partner's partner-wide rules and its own.
func ruleFilter(scope access.Scope, a *store.Args) string { return ownedFilter(scope, a, "r") }

// ownedFilter is ruleFilter for any table of partner-wide or organization rows (alias t).
func ownedFilter(scope access.Scope, a *store.Args, t string) string {
	return tenancy.SharedRowsFilter(scope, a, t+".org_id", t+".partner_id")
}

var errPartnerWide = apperr.Forbidden("partner-wide rules are managed by the partner")

// ListRules lists the rules in scope, by name.
func (s *Service) ListRules(ctx context.Context, orgID string, page store.Page) ([]Rule, string, *int, error) {
	var a store.Args
	conds := []string{ruleFilter(access.ScopeFrom(ctx), &a)}
	if orgID != "" {
		conds = append(conds, "(r.org_id = "+a.Add(orgID)+" OR (r.org_id IS NULL AND r.partner_id = "+
			tenancy.PartnerOfOrg(a.Add(orgID))+"))")
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: ruleColumns, From: " FROM alert_rules r", Conds: conds, Args: &a,
		SortKey: "r.name", SortID: "r.id"}, page, scanRule, func(r Rule) (string, string) { return r.Name, r.ID })
}

// GetRule returns a rule in scope.
func (s *Service) GetRule(ctx context.Context, id string) (Rule, error) {
	return getRule(ctx, s.db, access.ScopeFrom(ctx), id)
}

func getRule(ctx context.Context, q store.Querier, scope access.Scope, id string) (Rule, error) {
	var a store.Args
	return store.ByID(ctx, q, "alert rule", `SELECT `+ruleColumns+` FROM alert_rules r`, "r.id", id, &a,
		[]string{ruleFilter(scope, &a)}, scanRule)
}

func manageableRule(ctx context.Context, q store.Querier, scope access.Scope, id string) (Rule, error) {
	r, err := getRule(ctx, q, scope, id)
	if err == nil && r.OrgID == nil && !tenancy.ReachesWholePartner(scope) {
		return r, errPartnerWide
	}
	return r, err
}

// checkTargetsExist refuses target IDs that are not organizations, sites, groups or devices
// of the rule's partner (and organization, for an organization's rule) within the caller's
// reach.
func (s *Service) checkTargetsExist(ctx context.Context, q store.Querier, t RuleTargets, partnerID, orgID string) error {
	dt := t.devicesTargets()
	return s.devices.CheckTargets(ctx, q, &dt, tenancy.Owner{PartnerID: partnerID, OrgID: orgID})
}

func itoa(i int) string { return strconv.Itoa(i) }

// checkSeverity adds a problem when v is not a severity.
func checkSeverity(p *problems, v string) {
	if !slices.Contains(severities, v) {
		p.add("severity", "use one of %s", strings.Join(severities, ", "))
	}
}

func checkText(p *problems, field, v string, required bool, max int) string {
	v = strings.TrimSpace(v)
	if required && v == "" {
		p.add(field, "%s is required", field)
	}
	if utf8.RuneCountInString(v) > max {
		p.add(field, "at most %d characters", max)
	}
	return v
}

func checkCooldown(p *problems, v int) {
	if v < 0 || v > maxCooldown {
		p.add("cooldownMinutes", "cooldownMinutes must be 0 to %d", maxCooldown)
	}
}

// CreateRule adds a rule to the caller's partner (system callers: to in.PartnerID).
func (s *Service) CreateRule(ctx context.Context, in NewRule) (Rule, error) {
	scope := access.ScopeFrom(ctx)
	tpl, err := s.fromTemplate(ctx, &in)
	if err != nil {
		return Rule{}, err
	}
	var p problems
	name := checkText(&p, "name", in.Name, true, 200)
	desc := checkText(&p, "description", in.Description, false, 2000)
	checkSeverity(&p, in.Severity)
	targets := RuleTargets{Type: "all", IDs: []string{}}
	if in.Targets != nil {
		targets = *in.Targets
	}
	checkTargets(&targets, &p)
	cond := s.parseConditions(in.Conditions, &p)
	title := checkText(&p, "titleTemplate", in.TitleTemplate, false, maxTemplateLength)
	if title == "" {
		title = name + " on {{hostname}}"
	}
	message := checkText(&p, "messageTemplate", in.MessageTemplate, false, maxTemplateLength)
	cooldown := defaultCooldown
	if in.CooldownMinutes != nil {
		cooldown = *in.CooldownMinutes
		checkCooldown(&p, cooldown)
	}
	if err := p.err(); err != nil {
		return Rule{}, err
	}
	enabled, autoResolve := in.Enabled == nil || *in.Enabled, in.AutoResolve == nil || *in.AutoResolve
	var r Rule
	err = s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, scope, in.OrgID, tenancy.PlaceOptions{Noun: "rule", PartnerID: in.PartnerID,
			PartnerWide: true, PartnerWideRefused: errPartnerWide, OnlySystemNamesPartner: true})
		if err != nil {
			return err
		}
		partnerID, orgID := at.PartnerID, at.OrgID
		if tpl != nil && tpl.PartnerID != nil && *tpl.PartnerID != partnerID {
			return apperr.Invalid("templateId", "no such template")
		}
		if err := s.checkTargetsExist(ctx, tx, targets, partnerID, orgID); err != nil {
			return err
		}
		if err := s.checkChannels(ctx, tx, in.ChannelIDs, partnerID, orgID); err != nil {
			return err
		}
		id, now := store.NewID(), s.clock.Now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO alert_rules (id, partner_id, org_id, name, description, severity, enabled,
			targets, conditions, title_template, message_template, auto_resolve, cooldown_minutes, created_at, updated_at, channel_ids)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14, $15)`, id, partnerID, store.NullIfEmpty(orgID),
			name, desc, in.Severity, enabled, store.EncodeJSON(targets), store.EncodeJSON(cond), title, message, autoResolve, cooldown, now,
			store.EncodeStrings(dedupe(in.ChannelIDs))); err != nil {
			return fmt.Errorf("insert alert rule: %w", err)
		}
		if r, err = getRule(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "alert_rule.create", ResourceType: "alert_rule", ResourceID: id,
			ResourceName: r.Name, PartnerID: r.PartnerID, OrgID: orgID, Details: audit.Snapshot(r)})
	})
	if err != nil {
		return r, fmt.Errorf("create alert rule: %w", err)
	}
	return r, nil
}

// UpdateRule changes a rule the caller may manage.
func (s *Service) UpdateRule(ctx context.Context, id string, in RuleUpdate) (Rule, error) {
	scope := access.ScopeFrom(ctx)
	var p problems
	ch := store.NewChanges(s.clock.Now())
	if in.Name != nil {
		ch.Set("name", checkText(&p, "name", *in.Name, true, 200))
	}
	if in.Description != nil {
		ch.Set("description", checkText(&p, "description", *in.Description, false, 2000))
	}
	if in.Severity != nil {
		checkSeverity(&p, *in.Severity)
		ch.Set("severity", *in.Severity)
	}
	if in.Enabled != nil {
		ch.Set("enabled", *in.Enabled)
	}
	if in.Targets != nil {
		checkTargets(in.Targets, &p)
		ch.Set("targets", store.EncodeJSON(*in.Targets))
	}
	if in.Conditions != nil {
		cond := s.parseConditions(in.Conditions, &p)
		ch.Set("conditions", store.EncodeJSON(cond))
	}
	if in.TitleTemplate != nil {
		ch.Set("title_template", checkText(&p, "titleTemplate", *in.TitleTemplate, true, maxTemplateLength))
	}
	if in.MessageTemplate != nil {
		ch.Set("message_template", checkText(&p, "messageTemplate", *in.MessageTemplate, false, maxTemplateLength))
	}
	if in.AutoResolve != nil {
		ch.Set("auto_resolve", *in.AutoResolve)
	}
	if in.CooldownMinutes != nil {
		checkCooldown(&p, *in.CooldownMinutes)
		ch.Set("cooldown_minutes", *in.CooldownMinutes)
	}
	if err := p.err(); err != nil {
		return Rule{}, err
	}
	var r Rule
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := manageableRule(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if in.Targets != nil {
			if err := s.checkTargetsExist(ctx, tx, *in.Targets, before.PartnerID, store.Deref(before.OrgID)); err != nil {
				return err
			}
		}
		if in.ChannelIDs != nil {
			if err := s.checkChannels(ctx, tx, in.ChannelIDs, before.PartnerID, store.Deref(before.OrgID)); err != nil {
				return err
			}
			ch.Set("channel_ids", store.EncodeStrings(dedupe(in.ChannelIDs)))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE alert_rules SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id), ch.Args.Values()...); err != nil {
			return fmt.Errorf("update alert rule %s: %w", id, err)
		}
		if r, err = getRule(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "alert_rule.update", ResourceType: "alert_rule", ResourceID: id,
			ResourceName: r.Name, PartnerID: r.PartnerID, OrgID: store.Deref(r.OrgID), Details: audit.Diff(before, r)})
	})
	if err != nil {
		return r, fmt.Errorf("update alert rule: %w", err)
	}
	return r, nil
}

// DeleteRule removes a rule the caller may manage. Its alerts stay, with ruleId null.
func (s *Service) DeleteRule(ctx context.Context, id string) error {
	scope := access.ScopeFrom(ctx)
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		r, err := manageableRule(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM alert_rules WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete alert rule %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "alert_rule.delete", ResourceType: "alert_rule", ResourceID: id,
			ResourceName: r.Name, PartnerID: r.PartnerID, OrgID: store.Deref(r.OrgID), Details: audit.Snapshot(r)})
	})
}

func dedupe(ids []string) []string {
	out := []string{}
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
