package automations

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/alertchannels"
	"gale/internal/domains/alerts"
	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/scripts"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/jobs"
	"gale/internal/platform/jsonenc"
	"gale/internal/platform/secrets"
	"gale/internal/platform/store"
)

// MaintenanceWindows is what holds automations back from devices in a maintenance window
// (the maintenance domain's service; tests stand in for it).
type MaintenanceWindows interface {
	// HeldFromAutomations reports, for each device, whether a window in effect now holds
	// automations back from it.
	HeldFromAutomations(ctx context.Context, deviceIDs []string) (map[string]bool, error)
}

// Service keeps automations and runs them.
type Service struct {
	db          *store.DB
	logger      *slog.Logger
	box         *secrets.Box
	clock       clock.Clock
	publicURL   string
	devices     *devices.Service
	scripts     *scripts.Service
	alerts      *alerts.Service
	notify      *alertchannels.Service
	maintenance MaintenanceWindows
	// runner moves this node's share of running runs on.
	runner *jobs.Loop
}

// Deps is what the automations service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	Box    *secrets.Box
	// Clock is the time schedules run on; nil: the system clock.
	Clock   clock.Clock
	Devices *devices.Service
	Scripts *scripts.Service
	Alerts  *alerts.Service
	Notify  *alertchannels.Service
	// Maintenance holds automations back from devices in a window that suppresses them; nil:
	// every device is allowed.
	Maintenance *maintenance.Service
}

// Options are the automation settings of the server configuration.
type Options struct {
	// PublicURL makes the addresses of webhook triggers.
	PublicURL string
}

// New returns the automations service.
func New(d Deps, opts Options) *Service {
	s := &Service{db: d.DB, logger: d.Logger, box: d.Box, clock: clock.Or(d.Clock), publicURL: opts.PublicURL, devices: d.Devices,
		scripts: d.Scripts, alerts: d.Alerts, notify: d.Notify}
	if d.Maintenance != nil {
		s.maintenance = d.Maintenance
	}
	s.runner = jobs.NewLoop("advance automation runs", runnerEvery, d.Logger, s.AdvanceAll)
	return s
}

const automationColumns = `a.id, a.partner_id, a.org_id, a.name, a.description, a.enabled, a.trigger_type, a.trigger_config,
	a.webhook_secret_hint, a.conditions, a.actions, a.targets, a.on_failure, a.notify_channel_ids, a.created_by, a.created_at,
	a.updated_at, a.last_run_at, a.next_run_at`

func (s *Service) scanAutomation(row store.Scanner) (Automation, error) {
	var x Automation
	var org, hint, targets, by sql.NullString
	var typ, trig, conds, acts, chans string
	var last, next sql.NullTime
	err := row.Scan(&x.ID, &x.PartnerID, &org, &x.Name, &x.Description, &x.Enabled, &typ, &trig, &hint, &conds, &acts, &targets,
		&x.OnFailure, &chans, &by, &x.CreatedAt, &x.UpdatedAt, &last, &next)
	if err != nil {
		return x, err
	}
	x.OrgID, x.CreatedBy, x.LastRunAt, x.NextRunAt = store.StringPtr(org), store.StringPtr(by), store.TimePtr(last), store.TimePtr(next)
	for _, f := range []struct {
		raw string
		v   any
	}{{trig, &x.Trigger}, {conds, &x.Conditions}, {acts, &x.Actions}, {chans, &x.NotifyChannelIDs}} {
		if err := json.Unmarshal([]byte(f.raw), f.v); err != nil {
			return x, fmt.Errorf("read automation %s: %w", x.ID, err)
		}
	}
	if targets.Valid {
		x.Targets = &devices.Targets{}
		if err := json.Unmarshal([]byte(targets.String), x.Targets); err != nil {
			return x, fmt.Errorf("read automation %s targets: %w", x.ID, err)
		}
	}
	x.Trigger.Type = typ
	if typ == TriggerWebhook {
		x.Trigger.WebhookURL, x.Trigger.SecretHint = s.webhookURL(x.ID), hint.String
	}
	if x.Conditions == nil {
		x.Conditions = []AutomationCondition{}
	}
	return x, nil
}

func (s *Service) webhookURL(id string) string {
	return s.publicURL + "/api/v1/automations/" + id + "/webhook"
}

// filter keeps the automations (alias a) in scope: partner-wide ones only for callers that
// reach the whole partner, as they act in every organization.
func filter(scope access.Scope, a *store.Args) string {
	return scope.OrgFilter(a, "a.org_id", "a.partner_id")
}

func (s *Service) get(ctx context.Context, q store.Querier, scope access.Scope, id string) (Automation, error) {
	var a store.Args
	return store.ByID(ctx, q, "automation", `SELECT `+automationColumns+` FROM automations a`, "a.id", id, &a,
		[]string{filter(scope, &a)}, s.scanAutomation)
}

// Get returns an automation in scope.
func (s *Service) Get(ctx context.Context, id string) (Automation, error) {
	return s.get(ctx, s.db, access.ScopeFrom(ctx), id)
}

// ListFilter narrows a list of automations.
type ListFilter struct {
	OrgID       string
	TriggerType string
	Enabled     *bool
}

// List lists the automations in scope, newest first.
func (s *Service) List(ctx context.Context, f ListFilter, page store.Page) ([]Automation, string, *int, error) {
	var a store.Args
	conds := []string{filter(access.ScopeFrom(ctx), &a)}
	if f.OrgID != "" {
		conds = append(conds, "a.org_id = "+a.Add(f.OrgID))
	}
	if f.TriggerType != "" {
		conds = append(conds, "a.trigger_type = "+a.Add(f.TriggerType))
	}
	if f.Enabled != nil {
		conds = append(conds, "a.enabled = "+a.Add(*f.Enabled))
	}
	return store.List(ctx, s.db, store.ListQuery{Columns: automationColumns, From: " FROM automations a", Conds: conds, Args: &a,
		SortKey: "a.id", SortID: "a.id", Desc: true}, page, s.scanAutomation, func(x Automation) (string, string) { return x.ID, x.ID })
}

// actorFor is the principal an automation acts as: a system actor named after it, reaching
// only its organization (or its partner, for a partner-wide one), with what its actions need.
func actorFor(id, name, partnerID string, orgID *string) *access.Principal {
	scope := access.Scope{Level: access.LevelPartner, PartnerID: partnerID}
	if orgID != nil {
		scope = access.Scope{Level: access.LevelOrganization, PartnerID: partnerID, OrgID: *orgID}
	}
	return &access.Principal{Kind: access.ActorSystem, ID: id, Email: "automation:" + id, Name: "automation " + name, Scope: scope,
		Permissions: access.Permissions{string(access.DevicesRead), string(access.DevicesExecute), string(access.ScriptsRead),
			string(access.ScriptsExecute), string(access.AlertsWrite), string(access.NotificationsRead)}}
}

// checkReferences makes sure the scripts and channels an automation names are within its
// reach and its command kinds exist, so that a definition that could never run is refused when saved.
func (s *Service) checkReferences(ctx context.Context, actor *access.Principal, actions []AutomationAction, channels []string) error {
	ctx = access.WithPrincipal(ctx, actor)
	var c checker
	for i, a := range actions {
		switch a.Type {
		case ActionRunScript:
			if _, err := s.scripts.Get(ctx, a.ScriptID); apperr.IsCode(err, apperr.CodeNotFound) {
				c.fail(fmt.Sprintf("actions[%d].scriptId", i), "no such script within the automation's reach")
			} else if err != nil {
				return fmt.Errorf("check script %s: %w", a.ScriptID, err)
			}
		case ActionRunCommand:
			if kinds := s.devices.CommandKindNames(); !slices.Contains(kinds, a.Command.Type) {
				c.fail(fmt.Sprintf("actions[%d].command.type", i), "type must be one of %s", strings.Join(kinds, ", "))
			}
		case ActionNotify:
			if err := s.checkChannels(ctx, &c, fmt.Sprintf("actions[%d].channelIds", i), a.ChannelIDs); err != nil {
				return err
			}
		}
	}
	if err := s.checkChannels(ctx, &c, "notifyChannelIds", channels); err != nil {
		return err
	}
	return c.err()
}

func (s *Service) checkChannels(ctx context.Context, c *checker, field string, ids []string) error {
	for _, id := range ids {
		if _, err := s.notify.GetChannel(ctx, id); apperr.IsCode(err, apperr.CodeNotFound) {
			c.fail(field, "no such channel within the automation's reach: %s", id)
		} else if err != nil {
			return fmt.Errorf("check channel %s: %w", id, err)
		}
	}
	return nil
}

// Create adds an automation.
func (s *Service) Create(ctx context.Context, in AutomationInput) (Automation, error) {
	if in.OnFailure == "" {
		in.OnFailure = OnFailureStop
	}
	scope := access.ScopeFrom(ctx)
	id := store.NewID()
	enabled := in.Enabled == nil || *in.Enabled
	var x Automation
	var secret string
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, scope, in.OrgID, tenancy.PlaceOptions{Noun: "automation", PartnerID: in.PartnerID, PartnerWide: true})
		if err != nil {
			return err
		}
		if err := validate(in.Name, in.Description, &in.Trigger, in.Conditions, in.Actions, in.Targets, in.OnFailure, in.NotifyChannelIDs,
			at.OrgID); err != nil {
			return err
		}
		if in.Targets != nil {
			if err := s.devices.CheckTargets(ctx, tx, in.Targets, tenancy.Owner{PartnerID: at.PartnerID, OrgID: at.OrgID}); err != nil {
				return err
			}
		}
		var org *string
		if at.OrgID != "" {
			org = &at.OrgID
		}
		if err := s.checkReferences(ctx, actorFor(id, in.Name, at.PartnerID, org), in.Actions, in.NotifyChannelIDs); err != nil {
			return err
		}
		now := s.clock.Now()
		var sealed, hint any
		secret, sealed, hint = s.newSecret(in.Trigger.Type)
		if _, err := tx.ExecContext(ctx, `INSERT INTO automations (id, partner_id, org_id, name, description, enabled, trigger_type,
			trigger_config, event_type, webhook_secret, webhook_secret_hint, conditions, actions, targets, on_failure, notify_channel_ids,
			created_by, created_at, updated_at, next_run_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
			$16, $17, $18, $18, $19)`, id, at.PartnerID, store.NullIfEmpty(at.OrgID), in.Name, in.Description, enabled, in.Trigger.Type,
			store.EncodeJSON(in.Trigger), store.NullIfEmpty(in.Trigger.EventType), sealed, hint, store.EncodeJSON(jsonenc.NonNil(in.Conditions)), store.EncodeJSON(in.Actions),
			targetsValue(in.Targets), in.OnFailure, store.EncodeJSON(jsonenc.NonNil(in.NotifyChannelIDs)), access.ActorName(ctx), now,
			nextRun(in.Trigger, enabled, now)); err != nil {
			if store.IsUniqueViolation(err) {
				return nameTaken(in.Name)
			}
			return fmt.Errorf("insert automation: %w", err)
		}
		if x, err = s.get(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "automation.create", ResourceType: "automation", ResourceID: id,
			ResourceName: in.Name, PartnerID: at.PartnerID, OrgID: at.OrgID,
			Details: map[string]any{"trigger": in.Trigger.Type, "actions": len(in.Actions), "enabled": enabled}})
	})
	if err != nil {
		return Automation{}, fmt.Errorf("create automation: %w", err)
	}
	x.Trigger.Secret = secret
	return x, nil
}

// nameTaken is the answer to a name that another automation of the scope holds.
func nameTaken(name string) error {
	return apperr.ConflictCode("AUTOMATION_NAME_TAKEN", "an automation named "+name+" already exists in this scope")
}

// newSecret makes a webhook trigger's signing secret: the secret, sealed, and its hint.
func (s *Service) newSecret(triggerType string) (secret string, sealed, hint any) {
	if triggerType != TriggerWebhook {
		return "", nil, nil
	}
	secret = secrets.Token("whsec_", 32)
	return secret, s.box.Seal(secret), secret[len(secret)-4:]
}

func targetsValue(t *devices.Targets) any {
	if t == nil {
		return nil
	}
	return store.EncodeJSON(t)
}

// nextRun is a schedule's next occurrence after now; nil for other triggers or when disabled.
func nextRun(t AutomationTrigger, enabled bool, now time.Time) any {
	if t.Type != TriggerSchedule || !enabled {
		return nil
	}
	sched, err := clock.ParseCron(t.Cron, t.Timezone)
	if err != nil {
		return nil
	}
	return sched.Next(now).UTC()
}

// Update changes an automation (PATCH). The organization never changes.
func (s *Service) Update(ctx context.Context, id string, in AutomationUpdate) (Automation, error) {
	var x Automation
	var secret string
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.get(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		after := before
		store.Assign(&after.Name, in.Name)
		store.Assign(&after.Description, in.Description)
		store.Assign(&after.Enabled, in.Enabled)
		store.Assign(&after.Trigger, in.Trigger)
		store.Assign(&after.Conditions, in.Conditions)
		store.Assign(&after.Actions, in.Actions)
		store.Assign(&after.OnFailure, in.OnFailure)
		store.Assign(&after.NotifyChannelIDs, in.NotifyChannelIDs)
		if in.Targets != nil {
			after.Targets = in.Targets
		}
		if err := validate(after.Name, after.Description, &after.Trigger, after.Conditions, after.Actions, after.Targets, after.OnFailure,
			after.NotifyChannelIDs, store.Deref(after.OrgID)); err != nil {
			return err
		}
		if in.Targets != nil {
			owner := tenancy.Owner{PartnerID: after.PartnerID, OrgID: store.Deref(after.OrgID)}
			if err := s.devices.CheckTargets(ctx, tx, in.Targets, owner); err != nil {
				return err
			}
		}
		if err := s.checkReferences(ctx, actorFor(id, after.Name, after.PartnerID, after.OrgID), after.Actions, after.NotifyChannelIDs); err != nil {
			return err
		}
		now := s.clock.Now()
		c := store.NewChanges(now)
		c.Set("name", after.Name)
		c.Set("description", after.Description)
		c.Set("enabled", after.Enabled)
		c.Set("trigger_type", after.Trigger.Type)
		c.Set("trigger_config", store.EncodeJSON(after.Trigger))
		c.Set("event_type", store.NullIfEmpty(after.Trigger.EventType))
		c.Set("conditions", store.EncodeJSON(jsonenc.NonNil(after.Conditions)))
		c.Set("actions", store.EncodeJSON(after.Actions))
		c.Set("targets", targetsValue(after.Targets))
		c.Set("on_failure", after.OnFailure)
		c.Set("notify_channel_ids", store.EncodeJSON(jsonenc.NonNil(after.NotifyChannelIDs)))
		if after.Trigger.Type != before.Trigger.Type || store.EncodeJSON(after.Trigger) != store.EncodeJSON(before.Trigger) || after.Enabled != before.Enabled {
			c.Set("next_run_at", nextRun(after.Trigger, after.Enabled, now))
		}
		switch {
		case after.Trigger.Type != TriggerWebhook:
			c.Set("webhook_secret", nil)
			c.Set("webhook_secret_hint", nil)
		case before.Trigger.Type != TriggerWebhook || in.RotateSecret:
			var sealed, hint any
			secret, sealed, hint = s.newSecret(TriggerWebhook)
			c.Set("webhook_secret", sealed)
			c.Set("webhook_secret_hint", hint)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE automations SET `+c.SQL()+` WHERE id = `+c.Args.Add(id), c.Args.Values()...); err != nil {
			if store.IsUniqueViolation(err) {
				return nameTaken(after.Name)
			}
			return fmt.Errorf("update automation %s: %w", id, err)
		}
		if x, err = s.get(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "automation.update", ResourceType: "automation", ResourceID: id,
			ResourceName: x.Name, PartnerID: x.PartnerID, OrgID: store.Deref(x.OrgID),
			Details: map[string]any{"enabled": x.Enabled, "trigger": x.Trigger.Type, "secretRotated": secret != ""}})
	})
	x.Trigger.Secret = secret
	if err != nil {
		return x, fmt.Errorf("update automation: %w", err)
	}
	return x, nil
}

// Delete removes an automation and its runs; refused (409) while one of its runs is running.
// It takes the automation's row before counting its running runs, as a run's start does
// before inserting one, so a run starting meanwhile is either counted or never starts.
func (s *Service) Delete(ctx context.Context, id string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		x, err := s.get(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE automations SET updated_at = $1 WHERE id = $2`, s.clock.Now(), id); err != nil {
			return fmt.Errorf("lock automation %s: %w", id, err)
		}
		var running int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM automation_runs WHERE automation_id = $1 AND status = $2`, id,
			RunRunning).Scan(&running); err != nil {
			return fmt.Errorf("count running runs: %w", err)
		}
		if running > 0 {
			return apperr.ConflictCode("AUTOMATION_RUNNING", "a run of this automation is running; wait for it to end")
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM automations WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete automation %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "automation.delete", ResourceType: "automation", ResourceID: id,
			ResourceName: x.Name, PartnerID: x.PartnerID, OrgID: store.Deref(x.OrgID)})
	})
}
