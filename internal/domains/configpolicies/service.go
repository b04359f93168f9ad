package configpolicies

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"gale/internal/domains/alerts"
	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/scripts"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/jobs"
	"gale/internal/platform/store"
)

// Service keeps policies and the compliance of their devices.
type Service struct {
	db      *store.DB
	logger  *slog.Logger
	clock   clock.Clock
	devices *devices.Service
	scripts *scripts.Service
	alerts  *alerts.Service
	// followUps is this node's worker of alerts, remediations and re-evaluations.
	followUps *jobs.Loop
}

// Deps is what the policies service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// Clock is the time evaluations are scheduled and taken for lost on; nil: the system clock.
	Clock   clock.Clock
	Devices *devices.Service
	// Scripts runs the remediation scripts.
	Scripts *scripts.Service
	// Alerts raises and resolves the alerts of non-compliant devices.
	Alerts *alerts.Service
}

// New returns the policies service.
func New(d Deps) *Service {
	s := &Service{db: d.DB, logger: d.Logger, clock: clock.Or(d.Clock), devices: d.Devices, scripts: d.Scripts, alerts: d.Alerts}
	s.followUps = jobs.NewLoop("policy follow-ups", followUpEvery, d.Logger, s.RunFollowUps)
	return s
}

const policyColumns = `p.id, p.partner_id, p.org_id, p.name, p.description, p.status, p.enforcement, p.check_interval_minutes, p.rules,
	p.remediation_script_id, p.target_type, p.created_by, p.created_at, p.updated_at, p.last_evaluated_at, p.next_evaluation_at`

func scanPolicy(row store.Scanner) (Policy, error) {
	var x Policy
	var org, script, by sql.NullString
	var rules string
	var last, next sql.NullTime
	err := row.Scan(&x.ID, &x.PartnerID, &org, &x.Name, &x.Description, &x.Status, &x.Enforcement, &x.CheckIntervalMinutes, &rules,
		&script, &x.Targets.Type, &by, &x.CreatedAt, &x.UpdatedAt, &last, &next)
	if err != nil {
		return x, err
	}
	x.OrgID, x.RemediationScriptID, x.CreatedBy = store.StringPtr(org), store.StringPtr(script), store.StringPtr(by)
	x.LastEvaluatedAt, x.NextEvaluationAt = store.TimePtr(last), store.TimePtr(next)
	if err := json.Unmarshal([]byte(rules), &x.Rules); err != nil {
		return x, fmt.Errorf("read policy %s rules: %w", x.ID, err)
	}
	x.Targets.IDs = []string{}
	return x, nil
}

// withTargets reads the target IDs of the policies.
func withTargets(ctx context.Context, q store.Querier, list []Policy) error {
	if len(list) == 0 {
		return nil
	}
	ids := make([]string, len(list))
	at := map[string]int{}
	for i, p := range list {
		ids[i], at[p.ID] = p.ID, i
	}
	type target struct{ policyID, targetID string }
	var a store.Args
	targets, err := store.QueryAll(ctx, q, `SELECT policy_id, target_id FROM policy_targets WHERE policy_id IN `+a.In(ids)+
		` AND target_id IS NOT NULL ORDER BY policy_id, target_key`, a.Values(), func(row store.Scanner) (target, error) {
		var t target
		return t, row.Scan(&t.policyID, &t.targetID)
	})
	if err != nil {
		return fmt.Errorf("read policy targets: %w", err)
	}
	for _, t := range targets {
		list[at[t.policyID]].Targets.IDs = append(list[at[t.policyID]].Targets.IDs, t.targetID)
	}
	return nil
}

// filter keeps the policies (alias p) in scope: partner-wide ones only for callers that reach
// the whole partner, as they apply in every organization.
func filter(scope access.Scope, a *store.Args) string {
	return scope.OrgFilter(a, "p.org_id", "p.partner_id") + " AND " + tenancy.LiveOrg("p.org_id")
}

func (s *Service) get(ctx context.Context, q store.Querier, scope access.Scope, id string) (Policy, error) {
	var a store.Args
	x, err := store.ByID(ctx, q, "policy", `SELECT `+policyColumns+` FROM policies p`, "p.id", id, &a, []string{filter(scope, &a)},
		scanPolicy)
	if err != nil {
		return x, err
	}
	list := []Policy{x}
	err = withTargets(ctx, q, list)
	return list[0], err
}

// Get returns a policy in scope.
func (s *Service) Get(ctx context.Context, id string) (Policy, error) {
	return s.get(ctx, s.db, access.ScopeFrom(ctx), id)
}

// ListFilter narrows a list of policies.
type ListFilter struct {
	OrgID       string
	Status      string
	Enforcement string
	Query       string
}

func (f ListFilter) conds(scope access.Scope, a *store.Args) []string {
	conds := []string{filter(scope, a)}
	if f.OrgID != "" {
		conds = append(conds, "p.org_id = "+a.Add(f.OrgID))
	}
	if f.Status != "" {
		conds = append(conds, "p.status = "+a.Add(f.Status))
	}
	if f.Enforcement != "" {
		conds = append(conds, "p.enforcement = "+a.Add(f.Enforcement))
	}
	if q := strings.TrimSpace(f.Query); q != "" {
		conds = append(conds, store.Contains(a, q, "p.name", "p.description"))
	}
	return conds
}

// List lists the policies in scope, newest first.
func (s *Service) List(ctx context.Context, f ListFilter, page store.Page) ([]Policy, string, *int, error) {
	var a store.Args
	rows, next, total, err := store.List(ctx, s.db, store.ListQuery{Columns: policyColumns, From: " FROM policies p",
		Conds: f.conds(access.ScopeFrom(ctx), &a), Args: &a, SortKey: "p.id", SortID: "p.id", Desc: true}, page, scanPolicy,
		func(x Policy) (string, string) { return x.ID, x.ID })
	if err != nil {
		return nil, "", nil, fmt.Errorf("list policies: %w", err)
	}
	return rows, next, total, withTargets(ctx, s.db, rows)
}

// actorFor is the principal a policy acts as: a system actor named after it, reaching only its
// organization (or its partner, for a partner-wide one), with what evaluation and enforcement need.
func actorFor(p Policy) *access.Principal {
	scope := access.Scope{Level: access.LevelPartner, PartnerID: p.PartnerID}
	if p.OrgID != nil {
		scope = access.Scope{Level: access.LevelOrganization, PartnerID: p.PartnerID, OrgID: *p.OrgID}
	}
	return &access.Principal{Kind: access.ActorSystem, ID: p.ID, Email: "policy:" + p.ID, Name: "policy " + p.Name, Scope: scope,
		Permissions: access.Permissions{string(access.DevicesRead), string(access.DevicesExecute), string(access.ScriptsRead),
			string(access.ScriptsExecute), string(access.AlertsRead), string(access.AlertsWrite)}}
}

// checkScript makes sure the remediation script is visible in the policy's scope: a script of
// the policy's organization or a partner-wide one; a partner-wide policy needs a partner-wide script.
func (s *Service) checkScript(ctx context.Context, p Policy) error {
	if p.RemediationScriptID == nil {
		return nil
	}
	sc, err := s.scripts.Get(access.WithPrincipal(ctx, actorFor(p)), *p.RemediationScriptID)
	if apperr.IsCode(err, apperr.CodeNotFound) || (err == nil && p.OrgID == nil && sc.OrgID != nil) {
		return apperr.Invalid("remediationScriptId", "no such script within the policy's reach")
	}
	if err != nil {
		return fmt.Errorf("check remediation script %s: %w", *p.RemediationScriptID, err)
	}
	return nil
}

func nameTaken(name string) error {
	return apperr.ConflictCode("POLICY_NAME_TAKEN", "a policy named "+name+" already exists in this scope")
}

// fromInput is the policy a create or replace describes.
func fromInput(in PolicyInput) Policy {
	p := Policy{Name: in.Name, Description: in.Description, Status: in.Status, Enforcement: in.Enforcement,
		CheckIntervalMinutes: in.CheckIntervalMinutes, Rules: in.Rules, Targets: in.Targets}
	if in.RemediationScriptID != "" {
		id := in.RemediationScriptID
		p.RemediationScriptID = &id
	}
	return p
}

// Create adds a policy. An active policy is evaluated on its devices at once.
func (s *Service) Create(ctx context.Context, in PolicyInput) (Policy, error) {
	scope := access.ScopeFrom(ctx)
	var x Policy
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, scope, in.OrgID, tenancy.PlaceOptions{Noun: "policy", PartnerID: in.PartnerID, PartnerWide: true})
		if err != nil {
			return err
		}
		p := fromInput(in)
		p.ID, p.PartnerID = store.NewID(), at.PartnerID
		if at.OrgID != "" {
			p.OrgID = &at.OrgID
		}
		if err := normalize(&p); err != nil {
			return err
		}
		if err := s.checkScript(ctx, p); err != nil {
			return err
		}
		now := s.clock.Now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO policies (id, partner_id, org_id, name, description, status, enforcement,
			check_interval_minutes, rules, remediation_script_id, target_type, created_by, created_at, updated_at, next_evaluation_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, $14)`, p.ID, p.PartnerID, p.OrgID, p.Name,
			p.Description, p.Status, p.Enforcement, p.CheckIntervalMinutes, store.EncodeJSON(p.Rules), p.RemediationScriptID, p.Targets.Type,
			access.ActorName(ctx), now, nextEvaluation(p.Status, now)); err != nil {
			if store.IsUniqueViolation(err) {
				return nameTaken(p.Name)
			}
			return fmt.Errorf("insert policy: %w", err)
		}
		if err := writeTargets(ctx, tx, p, now); err != nil {
			return err
		}
		if x, err = s.get(ctx, tx, access.SystemScope(), p.ID); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "policy.create", ResourceType: "policy", ResourceID: p.ID, ResourceName: p.Name,
			PartnerID: p.PartnerID, OrgID: store.Deref(p.OrgID), Details: map[string]any{"status": p.Status, "enforcement": p.Enforcement,
				"rules": len(p.Rules), "targets": p.Targets.Type}})
	})
	if err != nil {
		return Policy{}, fmt.Errorf("create policy: %w", err)
	}
	return s.afterChange(ctx, x), nil
}

// nextEvaluation is when a policy of the status is next due: now while active (the schedule
// takes it on its next round), never while inactive.
func nextEvaluation(status string, now time.Time) any {
	if status != StatusActive {
		return nil
	}
	return now
}

// writeTargets replaces a policy's assignment rows.
func writeTargets(ctx context.Context, tx *sql.Tx, p Policy, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM policy_targets WHERE policy_id = $1`, p.ID); err != nil {
		return fmt.Errorf("clear policy targets: %w", err)
	}
	ids := p.Targets.IDs
	if len(ids) == 0 {
		ids = []string{""}
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `INSERT INTO policy_targets (policy_id, target_key, target_type, target_id, partner_id, org_id,
			created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`, p.ID, id, p.Targets.Type, store.NullIfEmpty(id), p.PartnerID, p.OrgID,
			now); err != nil {
			return fmt.Errorf("insert policy target: %w", err)
		}
	}
	return nil
}

// Replace replaces every field of a policy (PUT); the organization never changes.
func (s *Service) Replace(ctx context.Context, id string, in PolicyInput) (Policy, error) {
	return s.update(ctx, id, func(before Policy) (Policy, error) {
		if in.OrgID != "" && in.OrgID != store.Deref(before.OrgID) {
			return before, apperr.Invalid("orgId", "a policy's organization does not change")
		}
		after := fromInput(in)
		after.ID, after.PartnerID, after.OrgID = before.ID, before.PartnerID, before.OrgID
		after.CreatedAt, after.CreatedBy = before.CreatedAt, before.CreatedBy
		return after, nil
	})
}

// Patch changes the fields given (PATCH).
func (s *Service) Patch(ctx context.Context, id string, in PolicyPatch) (Policy, error) {
	return s.update(ctx, id, func(after Policy) (Policy, error) {
		store.Assign(&after.Name, in.Name)
		store.Assign(&after.Description, in.Description)
		store.Assign(&after.Status, in.Status)
		store.Assign(&after.Enforcement, in.Enforcement)
		store.Assign(&after.CheckIntervalMinutes, in.CheckIntervalMinutes)
		store.Assign(&after.Rules, in.Rules)
		store.Assign(&after.Targets, in.Targets)
		if in.RemediationScriptID != nil {
			after.RemediationScriptID = nil
			if *in.RemediationScriptID != "" {
				v := *in.RemediationScriptID
				after.RemediationScriptID = &v
			}
		}
		if in.CheckIntervalMinutes != nil && *in.CheckIntervalMinutes == 0 {
			after.CheckIntervalMinutes = -1 // zero is out of range here, not "the default"
		}
		return after, nil
	})
}

// update applies change to a policy in one transaction. A policy whose rules, targets or
// status changed is due at once (the devices it now covers are evaluated on the new rules).
func (s *Service) update(ctx context.Context, id string, change func(Policy) (Policy, error)) (Policy, error) {
	var x Policy
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.get(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		after, err := change(before)
		if err != nil {
			return err
		}
		if err := normalize(&after); err != nil {
			return err
		}
		if err := s.checkScript(ctx, after); err != nil {
			return err
		}
		now := s.clock.Now()
		c := store.NewChanges(now)
		c.Set("name", after.Name)
		c.Set("description", after.Description)
		c.Set("status", after.Status)
		c.Set("enforcement", after.Enforcement)
		c.Set("check_interval_minutes", after.CheckIntervalMinutes)
		c.Set("rules", store.EncodeJSON(after.Rules))
		c.Set("remediation_script_id", after.RemediationScriptID)
		c.Set("target_type", after.Targets.Type)
		redo := after.Status != before.Status || store.EncodeJSON(after.Rules) != store.EncodeJSON(before.Rules) || store.EncodeJSON(after.Targets) != store.EncodeJSON(before.Targets)
		if redo {
			c.Set("next_evaluation_at", nextEvaluation(after.Status, now))
		} else if after.CheckIntervalMinutes != before.CheckIntervalMinutes && before.LastEvaluatedAt != nil && after.Status == StatusActive {
			c.Set("next_evaluation_at", before.LastEvaluatedAt.Add(time.Duration(after.CheckIntervalMinutes)*time.Minute))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE policies SET `+c.SQL()+` WHERE id = `+c.Args.Add(id), c.Args.Values()...); err != nil {
			if store.IsUniqueViolation(err) {
				return nameTaken(after.Name)
			}
			return fmt.Errorf("update policy %s: %w", id, err)
		}
		if store.EncodeJSON(after.Targets) != store.EncodeJSON(before.Targets) {
			if err := writeTargets(ctx, tx, after, now); err != nil {
				return err
			}
		}
		if x, err = s.get(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "policy.update", ResourceType: "policy", ResourceID: id, ResourceName: x.Name,
			PartnerID: x.PartnerID, OrgID: store.Deref(x.OrgID), Details: map[string]any{"status": x.Status, "enforcement": x.Enforcement,
				"rules": len(x.Rules), "targets": x.Targets.Type}})
	})
	if err != nil {
		return Policy{}, err
	}
	return s.afterChange(ctx, x), nil
}

// Delete removes a policy, its assignments and its compliance rows.
func (s *Service) Delete(ctx context.Context, id string) error {
	return s.db.Write(ctx, func(tx *sql.Tx) error {
		x, err := s.get(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM policies WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete policy %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "policy.delete", ResourceType: "policy", ResourceID: id, ResourceName: x.Name,
			PartnerID: x.PartnerID, OrgID: store.Deref(x.OrgID)})
	})
}

// SetStatus activates or deactivates a policy. Of concurrent callers one wins; the others,
// and a policy already in the status, get 409 POLICY_ALREADY_ACTIVE or POLICY_ALREADY_INACTIVE.
func (s *Service) SetStatus(ctx context.Context, id, status string) (Policy, error) {
	var x Policy
	err := s.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := s.get(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		from := StatusInactive
		if status == StatusInactive {
			from = StatusActive
		}
		now := s.clock.Now()
		res, err := tx.ExecContext(ctx, `UPDATE policies SET status = $1, updated_at = $2, next_evaluation_at = $3 WHERE id = $4 AND status = $5`,
			status, now, nextEvaluation(status, now), id, from)
		if err != nil {
			return fmt.Errorf("set policy %s %s: %w", id, status, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return apperr.ConflictCode("POLICY_ALREADY_"+strings.ToUpper(status), "the policy is already "+status)
		}
		if x, err = s.get(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		action := "policy.activate"
		if status == StatusInactive {
			action = "policy.deactivate"
		}
		return audit.Record(ctx, tx, audit.Entry{Action: action, ResourceType: "policy", ResourceID: id, ResourceName: before.Name,
			PartnerID: before.PartnerID, OrgID: store.Deref(before.OrgID)})
	})
	if err != nil {
		return Policy{}, fmt.Errorf("set policy status: %w", err)
	}
	return s.afterChange(ctx, x), nil
}

// afterChange brings a policy's compliance rows in step with a change at once and returns the
// policy as it then stands: an active policy's devices are resolved and evaluated (as its
// schedule would, which is due now); an inactive one keeps its rows as they stand. A failure
// is logged: the schedule takes it up.
func (s *Service) afterChange(ctx context.Context, p Policy) Policy {
	if p.Status != StatusActive {
		return p
	}
	ctx = context.WithoutCancel(ctx)
	if _, err := s.claimAndEvaluate(ctx, p.ID); err != nil {
		s.logger.WarnContext(ctx, "evaluate a changed policy", "policy", p.ID, "error", err)
		return p
	}
	if x, err := s.get(ctx, s.db, access.SystemScope(), p.ID); err == nil {
		return x
	}
	return p
}
