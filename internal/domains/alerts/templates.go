package alerts

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// Template is the reusable part of a rule: conditions, severity and texts. Built-in templates
// come with Gale and never change; custom ones belong to a partner or one organization, scoped
// like rules.
type Template struct {
	ID              string          `json:"id" format:"uuid"`
	BuiltIn         bool            `json:"builtIn"`
	PartnerID       *string         `json:"partnerId" doc:"null for built-in templates."`
	OrgID           *string         `json:"orgId"`
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	Category        string          `json:"category" doc:"performance, availability, agent, commands or any custom word."`
	Severity        string          `json:"severity" enum:"critical,high,medium,low,info"`
	Conditions      json.RawMessage `json:"conditions"`
	TitleTemplate   string          `json:"titleTemplate"`
	MessageTemplate string          `json:"messageTemplate"`
	AutoResolve     bool            `json:"autoResolve"`
	CooldownMinutes int             `json:"cooldownMinutes"`
	CreatedAt       *time.Time      `json:"createdAt" doc:"null for built-in templates."`
	UpdatedAt       *time.Time      `json:"updatedAt"`
}

// NewTemplate is the body of a template create.
type NewTemplate struct {
	PartnerID       string          `json:"partnerId,omitempty" format:"uuid" doc:"System callers only, and required for them."`
	OrgID           string          `json:"orgId,omitempty" format:"uuid" doc:"Restrict the template to one organization. Organization callers: their own (the default)."`
	Name            string          `json:"name" maxLength:"200"`
	Description     string          `json:"description,omitempty" maxLength:"2000" multiline:"true"`
	Category        string          `json:"category,omitempty" maxLength:"64"`
	Severity        string          `json:"severity"`
	Conditions      json.RawMessage `json:"conditions" doc:"As a rule's conditions."`
	TitleTemplate   string          `json:"titleTemplate,omitempty" maxLength:"1000"`
	MessageTemplate string          `json:"messageTemplate,omitempty" maxLength:"1000" multiline:"true"`
	AutoResolve     *bool           `json:"autoResolve,omitempty" doc:"Default true."`
	CooldownMinutes *int            `json:"cooldownMinutes,omitempty" doc:"Default 5."`
}

// TemplateUpdate holds the writable fields of a custom template; absent fields stay.
type TemplateUpdate struct {
	Name            *string         `json:"name,omitempty" maxLength:"200"`
	Description     *string         `json:"description,omitempty" maxLength:"2000" multiline:"true"`
	Category        *string         `json:"category,omitempty" maxLength:"64"`
	Severity        *string         `json:"severity,omitempty"`
	Conditions      json.RawMessage `json:"conditions,omitempty"`
	TitleTemplate   *string         `json:"titleTemplate,omitempty" maxLength:"1000"`
	MessageTemplate *string         `json:"messageTemplate,omitempty" maxLength:"1000" multiline:"true"`
	AutoResolve     *bool           `json:"autoResolve,omitempty"`
	CooldownMinutes *int            `json:"cooldownMinutes,omitempty"`
}

func builtIn(id, name, desc, category, severity, conds, title, message string) Template {
	return Template{ID: id, BuiltIn: true, Name: name, Description: desc, Category: category, Severity: severity,
		Conditions: json.RawMessage(conds), TitleTemplate: title, MessageTemplate: message, AutoResolve: true, CooldownMinutes: defaultCooldown}
}

// builtInTemplates are the templates every tenant can start from. Their IDs are fixed.
var builtInTemplates = []Template{
	builtIn("00000000-0000-7000-8000-000000000301", "High CPU", "CPU above 90% on average for 15 minutes.", "performance", "high",
		`{"type":"threshold","metric":"cpuPercent","operator":"gt","value":90,"durationMinutes":15}`,
		"High CPU on {{hostname}}", "CPU averaged {{value}}% over 15 minutes (threshold {{threshold}}%)."),
	builtIn("00000000-0000-7000-8000-000000000302", "High memory", "Memory above 90% on average for 15 minutes.", "performance", "medium",
		`{"type":"threshold","metric":"ramPercent","operator":"gt","value":90,"durationMinutes":15}`,
		"High memory use on {{hostname}}", "Memory averaged {{value}}% over 15 minutes (threshold {{threshold}}%)."),
	builtIn("00000000-0000-7000-8000-000000000303", "Low disk space", "Disk 90% full or more.", "performance", "high",
		`{"type":"threshold","metric":"diskPercent","operator":"gte","value":90,"durationMinutes":0}`,
		"Low disk space on {{hostname}}", "The disk is {{value}}% full (threshold {{threshold}}%)."),
	builtIn("00000000-0000-7000-8000-000000000304", "Disk almost full", "Disk 97% full or more.", "performance", "critical",
		`{"type":"threshold","metric":"diskPercent","operator":"gte","value":97,"durationMinutes":0}`,
		"Disk almost full on {{hostname}}", "The disk is {{value}}% full (threshold {{threshold}}%)."),
	builtIn("00000000-0000-7000-8000-000000000305", "Device offline", "No contact from the device for 10 minutes.", "availability", "high",
		`{"type":"offline","durationMinutes":10}`,
		"{{hostname}} is offline", "{{hostname}} has been offline for {{value}} minutes."),
	builtIn("00000000-0000-7000-8000-000000000306", "Agent silent", "The watchdog runs but the main agent has been silent for 15 minutes.", "agent", "medium",
		`{"type":"agent_silent","durationMinutes":15}`,
		"Gale agent silent on {{hostname}}", "The main agent has been silent for {{value}} minutes while its watchdog reports."),
	builtIn("00000000-0000-7000-8000-000000000307", "Command failed", "A command failed or timed out in the last hour.", "commands", "low",
		`{"type":"command_failed","durationMinutes":60}`,
		"A command failed on {{hostname}}", "{{value}} command(s) failed or timed out in the last hour."),
	builtIn("00000000-0000-7000-8000-000000000308", "Reboot failed", "A reboot command failed or timed out in the last hour.", "commands", "medium",
		`{"type":"command_failed","commandTypes":["reboot"],"durationMinutes":60}`,
		"Reboot failed on {{hostname}}", "A reboot of {{hostname}} failed or timed out."),
}

// BuiltInTemplates returns the built-in templates.
func BuiltInTemplates() []Template { return slices.Clone(builtInTemplates) }

func findBuiltIn(id string) (Template, bool) {
	for _, t := range builtInTemplates {
		if t.ID == id {
			return t, true
		}
	}
	return Template{}, false
}

const templateColumns = `t.id, t.partner_id, t.org_id, t.name, t.description, t.category, t.severity, t.conditions,
	t.title_template, t.message_template, t.auto_resolve, t.cooldown_minutes, t.created_at, t.updated_at`

func scanTemplate(row store.Scanner) (Template, error) {
	var t Template
	var partner string
	var org sql.NullString
	var conds string
	var created, updated time.Time
	err := row.Scan(&t.ID, &partner, &org, &t.Name, &t.Description, &t.Category, &t.Severity, &conds, &t.TitleTemplate,
		&t.MessageTemplate, &t.AutoResolve, &t.CooldownMinutes, &created, &updated)
	if err != nil {
		return t, err
	}
	created, updated = created.UTC(), updated.UTC()
	t.PartnerID, t.OrgID, t.CreatedAt, t.UpdatedAt = &partner, store.StringPtr(org), &created, &updated
	var c Condition
	_ = json.Unmarshal([]byte(conds), &c)
	t.Conditions, _ = json.Marshal(c)
	return t, nil
}

// ListTemplates lists the custom templates in scope, by name.
func (s *Service) ListTemplates(ctx context.Context, page store.Page) ([]Template, string, *int, error) {
	var a store.Args
	conds := []string{ownedFilter(access.ScopeFrom(ctx), &a, "t")}
	return store.List(ctx, s.db, store.ListQuery{Columns: templateColumns, From: " FROM alert_templates t", Conds: conds, Args: &a,
		SortKey: "t.name", SortID: "t.id"}, page, scanTemplate, func(t Template) (string, string) { return t.Name, t.ID })
}

// template returns a built-in template or a custom one in scope.
func template(ctx context.Context, q store.Querier, scope access.Scope, id string) (Template, error) {
	if t, ok := findBuiltIn(id); ok {
		return t, nil
	}
	var a store.Args
	return store.ByID(ctx, q, "alert template", `SELECT `+templateColumns+` FROM alert_templates t`, "t.id", id, &a,
		[]string{ownedFilter(scope, &a, "t")}, scanTemplate)
}

var errBuiltIn = apperr.Forbidden("built-in templates cannot change; create a custom template from it instead")

func manageableTemplate(ctx context.Context, q store.Querier, scope access.Scope, id string) (Template, error) {
	if _, ok := findBuiltIn(id); ok {
		return Template{}, errBuiltIn
	}
	t, err := template(ctx, q, scope, id)
	if err == nil && t.OrgID == nil && !tenancy.ReachesWholePartner(scope) {
		return t, errPartnerWideTemplate
	}
	return t, err
}

var errPartnerWideTemplate = apperr.Forbidden("partner-wide templates are managed by the partner")

// CreateTemplate adds a custom template.
func (s *Service) CreateTemplate(ctx context.Context, in NewTemplate) (Template, error) {
	scope := access.ScopeFrom(ctx)
	var p problems
	name := checkText(&p, "name", in.Name, true, 200)
	desc := checkText(&p, "description", in.Description, false, 2000)
	category := checkText(&p, "category", in.Category, false, 64)
	checkSeverity(&p, in.Severity)
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
		return Template{}, err
	}
	var t Template
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, scope, in.OrgID, tenancy.PlaceOptions{Noun: "template", PartnerID: in.PartnerID,
			PartnerWide: true, PartnerWideRefused: errPartnerWideTemplate, OnlySystemNamesPartner: true})
		if err != nil {
			return err
		}
		partnerID, orgID := at.PartnerID, at.OrgID
		id, now := store.NewID(), s.clock.Now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO alert_templates (id, partner_id, org_id, name, description, category, severity,
			conditions, title_template, message_template, auto_resolve, cooldown_minutes, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)`, id, partnerID, store.NullIfEmpty(orgID), name, desc,
			category, in.Severity, store.EncodeJSON(cond), title, message, in.AutoResolve == nil || *in.AutoResolve, cooldown, now); err != nil {
			return fmt.Errorf("insert alert template: %w", err)
		}
		if t, err = template(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "alert_template.create", ResourceType: "alert_template", ResourceID: id,
			ResourceName: t.Name, PartnerID: partnerID, OrgID: orgID, Details: audit.Snapshot(t)})
	})
	if err != nil {
		return t, fmt.Errorf("create alert template: %w", err)
	}
	return t, nil
}

// UpdateTemplate changes a custom template the caller may manage. Rules made from it keep
// their own copy.
func (s *Service) UpdateTemplate(ctx context.Context, id string, in TemplateUpdate) (Template, error) {
	scope := access.ScopeFrom(ctx)
	var p problems
	ch := store.NewChanges(s.clock.Now())
	if in.Name != nil {
		ch.Set("name", checkText(&p, "name", *in.Name, true, 200))
	}
	if in.Description != nil {
		ch.Set("description", checkText(&p, "description", *in.Description, false, 2000))
	}
	if in.Category != nil {
		ch.Set("category", checkText(&p, "category", *in.Category, false, 64))
	}
	if in.Severity != nil {
		checkSeverity(&p, *in.Severity)
		ch.Set("severity", *in.Severity)
	}
	if in.Conditions != nil {
		ch.Set("conditions", store.EncodeJSON(s.parseConditions(in.Conditions, &p)))
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
	var t Template
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := manageableTemplate(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if err := p.err(); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE alert_templates SET `+ch.SQL()+` WHERE id = `+ch.Args.Add(id), ch.Args.Values()...); err != nil {
			return fmt.Errorf("update alert template %s: %w", id, err)
		}
		if t, err = template(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "alert_template.update", ResourceType: "alert_template", ResourceID: id,
			ResourceName: t.Name, PartnerID: store.Deref(t.PartnerID), OrgID: store.Deref(t.OrgID), Details: audit.Diff(before, t)})
	})
	if err != nil {
		return t, fmt.Errorf("update alert template: %w", err)
	}
	return t, nil
}

// DeleteTemplate removes a custom template the caller may manage.
func (s *Service) DeleteTemplate(ctx context.Context, id string) error {
	scope := access.ScopeFrom(ctx)
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		t, err := manageableTemplate(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM alert_templates WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete alert template %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "alert_template.delete", ResourceType: "alert_template", ResourceID: id,
			ResourceName: t.Name, PartnerID: store.Deref(t.PartnerID), OrgID: store.Deref(t.OrgID), Details: audit.Snapshot(t)})
	})
}

// fromTemplate fills the fields a rule body leaves out from the template it names.
func (s *Service) fromTemplate(ctx context.Context, in *NewRule) (*Template, error) {
	if in.TemplateID == "" {
		return nil, nil
	}
	t, err := template(ctx, s.db, access.ScopeFrom(ctx), in.TemplateID)
	if apperr.IsCode(err, apperr.CodeNotFound) {
		return nil, apperr.Invalid("templateId", "no such template")
	}
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(in.Name) == "" {
		in.Name = t.Name
	}
	if in.Description == "" {
		in.Description = t.Description
	}
	if in.Severity == "" {
		in.Severity = t.Severity
	}
	if in.Conditions == nil {
		in.Conditions = t.Conditions
	}
	if in.TitleTemplate == "" {
		in.TitleTemplate = t.TitleTemplate
	}
	if in.MessageTemplate == "" {
		in.MessageTemplate = t.MessageTemplate
	}
	if in.AutoResolve == nil {
		in.AutoResolve = &t.AutoResolve
	}
	if in.CooldownMinutes == nil {
		in.CooldownMinutes = &t.CooldownMinutes
	}
	return &t, nil
}
