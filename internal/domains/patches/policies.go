package patches

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"gale/internal/domains/audit"
	"gale/internal/domains/devices"
	"gale/internal/domains/groups"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/jsonenc"
	"gale/internal/platform/store"
)

// Reboot behaviours of a policy's installs.
const (
	RebootNever      = "never"
	RebootIfRequired = "if_required"
	RebootAlways     = "always"
)

// Schedule frequencies of a policy.
const (
	PolicyDaily   = "daily"
	PolicyWeekly  = "weekly"
	PolicyMonthly = "monthly"
)

// Limits of a policy.
const (
	MaxPolicyRings      = 10
	MaxPolicyDeferral   = 365
	MaxPolicyRingDelay  = 90
	maxPolicyLastJobIDs = 50
)

// CodePolicyNameTaken answers a name another policy of the same scope holds.
const CodePolicyNameTaken = "PATCH_POLICY_NAME_TAKEN"

var (
	policyCategories = []string{CategorySecurity, CategoryBugfix, CategoryFeature, CategoryOther}
	policySeverities = []string{SeverityCritical, SeverityImportant, SeverityModerate, SeverityLow, SeverityUnknown}
)

// PatchPolicyAutoApprove says which patches a policy approves by itself: those whose category
// is among categories and whose severity is among severities. An empty list matches nothing,
// so both empty approve nothing.
type PatchPolicyAutoApprove struct {
	Categories []string `json:"categories" required:"false" maxItems:"4" doc:"security, bugfix, feature, other."`
	Severities []string `json:"severities" required:"false" maxItems:"5" doc:"critical, important, moderate, low, unknown."`
}

// PatchPolicySchedule is when a policy runs: daily, on some days of the week, or on a day of
// the month, at a wall-clock time in a time zone.
type PatchPolicySchedule struct {
	Frequency  string `json:"frequency" enum:"daily,weekly,monthly"`
	Time       string `json:"time" maxLength:"5" doc:"HH:MM, 24-hour, in timezone."`
	DaysOfWeek []int  `json:"daysOfWeek,omitempty" maxItems:"7" doc:"weekly: 0 (Sunday) to 6."`
	DayOfMonth int    `json:"dayOfMonth,omitempty" doc:"monthly: 1 to 28, or -1 for the last day of the month."`
	Timezone   string `json:"timezone,omitempty" maxLength:"64" doc:"An IANA time zone; default UTC."`
}

// PatchPolicyRing is a step of a staged rollout: devices of its groups install a patch
// delayDays after the policy's deferral.
type PatchPolicyRing struct {
	Name      string   `json:"name" minLength:"1" maxLength:"100"`
	GroupIDs  []string `json:"groupIds" minItems:"1" maxItems:"100"`
	DelayDays int      `json:"delayDays" minimum:"0" maximum:"90"`
}

// PatchPolicy is the API view of a patch policy.
type PatchPolicy struct {
	ID                  string                 `json:"id" format:"uuid"`
	PartnerID           string                 `json:"partnerId" format:"uuid"`
	OrgID               *string                `json:"orgId" doc:"null: a partner-wide policy."`
	Name                string                 `json:"name"`
	Description         string                 `json:"description"`
	Enabled             bool                   `json:"enabled"`
	AutoApprove         PatchPolicyAutoApprove `json:"autoApprove"`
	DeferralDays        int                    `json:"deferralDays"`
	DeadlineDays        *int                   `json:"deadlineDays"`
	RebootBehavior      string                 `json:"rebootBehavior" enum:"never,if_required,always"`
	Schedule            *PatchPolicySchedule   `json:"schedule"`
	MaintenanceWindowID *string                `json:"maintenanceWindowId"`
	Targets             devices.Targets        `json:"targets"`
	Rings               []PatchPolicyRing      `json:"rings"`
	NextRunAt           *time.Time             `json:"nextRunAt" doc:"The next run; null when disabled. Window-based: the start of the window's next occurrence the policy has not run in (past while one is under way: the run is due), null when the window has none."`
	LastRunAt           *time.Time             `json:"lastRunAt"`
	LastJobIDs          []string               `json:"lastJobIds" doc:"The install jobs the last run started."`
	LastApproved        int                    `json:"lastApproved" doc:"Patches the last run approved."`
	CreatedBy           *string                `json:"createdBy"`
	CreatedAt           time.Time              `json:"createdAt"`
	UpdatedAt           time.Time              `json:"updatedAt"`
	// lastOccurrenceID is the window occurrence the policy last ran in.
	lastOccurrenceID string
}

// PatchPolicyInput is the body of a create.
type PatchPolicyInput struct {
	PartnerID           string                  `json:"partnerId,omitempty" format:"uuid" doc:"System callers: the partner of a partner-wide policy."`
	OrgID               string                  `json:"orgId,omitempty" format:"uuid" doc:"The organization; omitted: partner-wide (callers reaching the whole partner), or an organization caller's own."`
	Name                string                  `json:"name" minLength:"1" maxLength:"255"`
	Description         string                  `json:"description,omitempty" maxLength:"4000" multiline:"true"`
	Enabled             *bool                   `json:"enabled,omitempty" doc:"Default true."`
	AutoApprove         *PatchPolicyAutoApprove `json:"autoApprove,omitempty"`
	DeferralDays        int                     `json:"deferralDays,omitempty" minimum:"0" maximum:"365"`
	DeadlineDays        *int                    `json:"deadlineDays,omitempty" minimum:"0" maximum:"365"`
	RebootBehavior      string                  `json:"rebootBehavior,omitempty" enum:"never,if_required,always" doc:"Default if_required."`
	Schedule            *PatchPolicySchedule    `json:"schedule,omitempty" doc:"Either schedule or maintenanceWindowId."`
	MaintenanceWindowID string                  `json:"maintenanceWindowId,omitempty" format:"uuid" doc:"A window of the policy's organization: the policy runs once per occurrence, while it is active."`
	Targets             devices.Targets         `json:"targets"`
	Rings               []PatchPolicyRing       `json:"rings,omitempty" maxItems:"10"`
}

// PatchPolicyUpdate is the body of a PATCH: absent fields stay. A schedule replaces a
// maintenance window and the other way round.
type PatchPolicyUpdate struct {
	Name                *string                 `json:"name,omitempty" minLength:"1" maxLength:"255"`
	Description         *string                 `json:"description,omitempty" maxLength:"4000" multiline:"true"`
	Enabled             *bool                   `json:"enabled,omitempty"`
	AutoApprove         *PatchPolicyAutoApprove `json:"autoApprove,omitempty"`
	DeferralDays        *int                    `json:"deferralDays,omitempty" minimum:"0" maximum:"365"`
	DeadlineDays        *int                    `json:"deadlineDays,omitempty" minimum:"-1" maximum:"365" doc:"-1 removes the deadline."`
	RebootBehavior      *string                 `json:"rebootBehavior,omitempty" enum:"never,if_required,always"`
	Schedule            *PatchPolicySchedule    `json:"schedule,omitempty"`
	MaintenanceWindowID *string                 `json:"maintenanceWindowId,omitempty" format:"uuid"`
	Targets             *devices.Targets        `json:"targets,omitempty"`
	Rings               *[]PatchPolicyRing      `json:"rings,omitempty" maxItems:"10"`
}

// Policies keeps patch policies and runs them: it approves the patches they name and starts
// install jobs through the patches service.
type Policies struct {
	patches     *Service
	db          *store.DB
	logger      *slog.Logger
	clock       clock.Clock
	devices     *devices.Service
	maintenance *maintenance.Service
}

// newPolicies returns the patch policies of s, which run on its clock and honour its
// maintenance windows.
func newPolicies(s *Service) *Policies {
	return &Policies{patches: s, db: s.db, logger: s.logger, clock: s.clock, devices: s.devices, maintenance: s.maintenance}
}

const policyColumns = `pp.id, pp.partner_id, pp.org_id, pp.name, pp.description, pp.enabled, pp.auto_approve, pp.deferral_days,
	pp.deadline_days, pp.reboot_behavior, pp.schedule, pp.maintenance_window_id, pp.targets, pp.rings, pp.next_run_at, pp.last_run_at,
	pp.last_job_ids, pp.last_approved, pp.last_occurrence_id, pp.created_by, pp.created_at, pp.updated_at`

func scanPolicy(row store.Scanner) (PatchPolicy, error) {
	var x PatchPolicy
	var org, auto, sched, window, occ, by sql.NullString
	var deadline sql.NullInt64
	var targets, rings, jobs string
	var next, last sql.NullTime
	err := row.Scan(&x.ID, &x.PartnerID, &org, &x.Name, &x.Description, &x.Enabled, &auto, &x.DeferralDays, &deadline, &x.RebootBehavior,
		&sched, &window, &targets, &rings, &next, &last, &jobs, &x.LastApproved, &occ, &by, &x.CreatedAt, &x.UpdatedAt)
	if err != nil {
		return x, err
	}
	x.OrgID, x.MaintenanceWindowID, x.CreatedBy = store.StringPtr(org), store.StringPtr(window), store.StringPtr(by)
	x.NextRunAt, x.LastRunAt, x.lastOccurrenceID = store.TimePtr(next), store.TimePtr(last), occ.String
	if deadline.Valid {
		d := int(deadline.Int64)
		x.DeadlineDays = &d
	}
	if sched.Valid {
		x.Schedule = &PatchPolicySchedule{}
		if err := json.Unmarshal([]byte(sched.String), x.Schedule); err != nil {
			return x, fmt.Errorf("read the schedule of patch policy %s: %w", x.ID, err)
		}
	}
	if auto.Valid {
		if err := json.Unmarshal([]byte(auto.String), &x.AutoApprove); err != nil {
			return x, fmt.Errorf("read the auto-approval of patch policy %s: %w", x.ID, err)
		}
	}
	for _, f := range []struct {
		raw string
		v   any
	}{{targets, &x.Targets}, {rings, &x.Rings}, {jobs, &x.LastJobIDs}} {
		if err := json.Unmarshal([]byte(f.raw), f.v); err != nil {
			return x, fmt.Errorf("read patch policy %s: %w", x.ID, err)
		}
	}
	x.AutoApprove.Categories, x.AutoApprove.Severities = jsonenc.NonNil(x.AutoApprove.Categories), jsonenc.NonNil(x.AutoApprove.Severities)
	x.Rings, x.LastJobIDs, x.Targets.IDs = jsonenc.NonNil(x.Rings), jsonenc.NonNil(x.LastJobIDs), jsonenc.NonNil(x.Targets.IDs)
	return x, nil
}

// policyFilter keeps the policies in scope: partner-wide ones only for callers that reach the
// whole partner, as they act in every organization; organizations live.
func policyFilter(scope access.Scope, a *store.Args) string {
	return scope.OrgFilter(a, "pp.org_id", "pp.partner_id") + " AND " + tenancy.LiveOrg("pp.org_id") + " AND " + tenancy.LivePartner("pp.partner_id")
}

func getPolicy(ctx context.Context, q store.Querier, scope access.Scope, id string) (PatchPolicy, error) {
	var a store.Args
	return store.ByID(ctx, q, "patch policy", `SELECT `+policyColumns+` FROM patch_policies pp`, "pp.id", id, &a,
		[]string{policyFilter(scope, &a)}, scanPolicy)
}

// Get returns a policy in scope.
func (p *Policies) Get(ctx context.Context, id string) (PatchPolicy, error) {
	x, err := getPolicy(ctx, p.db, access.ScopeFrom(ctx), id)
	if err != nil {
		return x, err
	}
	return x, p.windowRun(ctx, &x)
}

// windowRun fills in the next run of an enabled window-based policy: the start of its
// window's occurrence that it has not run in yet (one under way started in the past: the run
// is due now), or nil when the window has no such occurrence.
func (p *Policies) windowRun(ctx context.Context, x *PatchPolicy) error {
	if !x.Enabled || x.MaintenanceWindowID == nil || x.OrgID == nil {
		return nil
	}
	occ, err := p.maintenance.NextOccurrence(ctx, *x.OrgID, *x.MaintenanceWindowID, x.lastOccurrenceID)
	if apperr.IsCode(err, apperr.CodeNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if occ != nil {
		at := occ.StartsAt
		x.NextRunAt = &at
	}
	return nil
}

// PolicyFilter narrows a list of policies.
type PolicyFilter struct {
	OrgID   string
	Enabled *bool
}

// List lists the policies in scope, newest first.
func (p *Policies) List(ctx context.Context, f PolicyFilter, page store.Page) ([]PatchPolicy, string, *int, error) {
	var a store.Args
	conds := []string{policyFilter(access.ScopeFrom(ctx), &a)}
	if f.OrgID != "" {
		conds = append(conds, "pp.org_id = "+a.Add(f.OrgID))
	}
	if f.Enabled != nil {
		conds = append(conds, "pp.enabled = "+a.Add(*f.Enabled))
	}
	list, next, total, err := store.List(ctx, p.db, store.ListQuery{Columns: policyColumns, From: " FROM patch_policies pp", Conds: conds,
		Args: &a, SortKey: "pp.id", SortID: "pp.id", Desc: true}, page, scanPolicy, func(x PatchPolicy) (string, string) { return x.ID, x.ID })
	for i := range list {
		if err == nil {
			err = p.windowRun(ctx, &list[i])
		}
	}
	return list, next, total, err
}

// policyActor is the principal a policy acts as: a system actor named after it, reaching its
// organization, or its partner for a partner-wide one.
func policyActor(x PatchPolicy) *access.Principal {
	scope := access.Scope{Level: access.LevelPartner, PartnerID: x.PartnerID}
	if x.OrgID != nil {
		scope = access.Scope{Level: access.LevelOrganization, PartnerID: x.PartnerID, OrgID: *x.OrgID}
	}
	return &access.Principal{Kind: access.ActorSystem, ID: x.ID, Email: "policy " + x.Name, Name: "patch policy " + x.Name, Scope: scope}
}

func policyNameTaken(name string) error {
	return apperr.ConflictCode(CodePolicyNameTaken, "a patch policy named "+name+" already exists in this scope")
}

// check validates a policy's definition: its fields, and that the window, organizations,
// sites and groups it names are within its reach (its organization, or its partner), read
// through q (the caller's transaction).
func (p *Policies) check(ctx context.Context, q store.Querier, x *PatchPolicy) error {
	x.Name = strings.TrimSpace(x.Name)
	if x.Name == "" || len(x.Name) > 255 {
		return apperr.Invalid("name", "a name of 1 to 255 characters")
	}
	if err := checkList("autoApprove.categories", x.AutoApprove.Categories, policyCategories); err != nil {
		return err
	}
	if err := checkList("autoApprove.severities", x.AutoApprove.Severities, policySeverities); err != nil {
		return err
	}
	if x.DeferralDays < 0 || x.DeferralDays > MaxPolicyDeferral {
		return apperr.Invalid("deferralDays", "0 to 365 days")
	}
	if x.DeadlineDays != nil && (*x.DeadlineDays < 0 || *x.DeadlineDays > MaxPolicyDeferral) {
		return apperr.Invalid("deadlineDays", "0 to 365 days")
	}
	if !slices.Contains([]string{RebootNever, RebootIfRequired, RebootAlways}, x.RebootBehavior) {
		return apperr.Invalid("rebootBehavior", "one of never, if_required, always")
	}
	switch {
	case (x.Schedule == nil) == (x.MaintenanceWindowID == nil):
		return apperr.Invalid("schedule", "a policy runs either on a schedule or in a maintenance window (maintenanceWindowId)")
	case x.Schedule != nil:
		if err := checkSchedule(x.Schedule); err != nil {
			return err
		}
	case x.OrgID == nil:
		return apperr.Invalid("maintenanceWindowId", "maintenance windows belong to an organization: a window-based policy names its organization (orgId)")
	default:
		if _, err := p.maintenance.NextOccurrence(ctx, *x.OrgID, *x.MaintenanceWindowID, ""); apperr.IsCode(err, apperr.CodeNotFound) {
			return apperr.Invalid("maintenanceWindowId", "no such maintenance window in the policy's organization")
		} else if err != nil {
			return err
		}
	}
	if err := p.devices.CheckTargets(ctx, q, &x.Targets, tenancy.Owner{PartnerID: x.PartnerID, OrgID: store.Deref(x.OrgID)}); err != nil {
		return err
	}
	return p.checkRings(ctx, q, x)
}

func checkList(field string, values, allowed []string) error {
	seen := map[string]bool{}
	for _, v := range values {
		if !slices.Contains(allowed, v) {
			return apperr.Invalid(field, "each one of "+strings.Join(allowed, ", "))
		}
		if seen[v] {
			return apperr.Invalid(field, v+" is named twice")
		}
		seen[v] = true
	}
	return nil
}

func checkSchedule(s *PatchPolicySchedule) error {
	if s.Timezone == "" {
		s.Timezone = "UTC"
	}
	if _, err := policyLocation(s.Timezone); err != nil {
		return apperr.Invalid("schedule.timezone", "an IANA time zone, such as Europe/Berlin")
	}
	if _, _, ok := clockTime(s.Time); !ok {
		return apperr.Invalid("schedule.time", "HH:MM, 00:00 to 23:59")
	}
	switch s.Frequency {
	case PolicyDaily:
	case PolicyWeekly:
		if len(s.DaysOfWeek) == 0 {
			return apperr.Invalid("schedule.daysOfWeek", "a weekly schedule names its days (0 = Sunday to 6)")
		}
	case PolicyMonthly:
		if s.DayOfMonth != -1 && (s.DayOfMonth < 1 || s.DayOfMonth > 28) {
			return apperr.Invalid("schedule.dayOfMonth", "1 to 28, or -1 for the last day of the month")
		}
	default:
		return apperr.Invalid("schedule.frequency", "one of daily, weekly, monthly")
	}
	if s.Frequency != PolicyWeekly && len(s.DaysOfWeek) > 0 {
		return apperr.Invalid("schedule.daysOfWeek", "weekly schedules only")
	}
	if s.Frequency != PolicyMonthly && s.DayOfMonth != 0 {
		return apperr.Invalid("schedule.dayOfMonth", "monthly schedules only")
	}
	seen := map[int]bool{}
	for _, d := range s.DaysOfWeek {
		if d < 0 || d > 6 || seen[d] {
			return apperr.Invalid("schedule.daysOfWeek", "distinct days, 0 (Sunday) to 6")
		}
		seen[d] = true
	}
	slices.Sort(s.DaysOfWeek)
	return nil
}

func ownedBy(owners map[string]tenancy.Owner, id string, x *PatchPolicy) bool {
	o, ok := owners[id]
	return ok && o.PartnerID == x.PartnerID && (x.OrgID == nil || o.OrgID == *x.OrgID)
}

func (p *Policies) checkRings(ctx context.Context, q store.Querier, x *PatchPolicy) error {
	x.Rings = jsonenc.NonNil(x.Rings)
	if len(x.Rings) > MaxPolicyRings {
		return apperr.Invalid("rings", "at most 10 rings")
	}
	names := map[string]bool{}
	var ids []string
	for i, r := range x.Rings {
		field := fmt.Sprintf("rings[%d]", i)
		r.Name = strings.TrimSpace(r.Name)
		if r.Name == "" || names[strings.ToLower(r.Name)] {
			return apperr.Invalid(field+".name", "each ring has a name of its own")
		}
		names[strings.ToLower(r.Name)] = true
		if r.DelayDays < 0 || r.DelayDays > MaxPolicyRingDelay {
			return apperr.Invalid(field+".delayDays", "0 to 90 days")
		}
		if i > 0 && r.DelayDays < x.Rings[i-1].DelayDays {
			return apperr.Invalid(field+".delayDays", "rings are in order: a ring's delay is at least the one before it")
		}
		r.GroupIDs = unique(r.GroupIDs)
		if len(r.GroupIDs) == 0 {
			return apperr.Invalid(field+".groupIds", "a ring names at least one group")
		}
		for _, id := range r.GroupIDs {
			if !store.ValidID(id) {
				return apperr.Invalid(field+".groupIds", "not a valid ID: "+id)
			}
		}
		x.Rings[i] = r
		ids = append(ids, r.GroupIDs...)
	}
	if len(ids) == 0 {
		return nil
	}
	owners, err := groups.Owners(ctx, q, unique(ids))
	if err != nil {
		return fmt.Errorf("read the owners of the rings' groups: %w", err)
	}
	for i, r := range x.Rings {
		for _, id := range r.GroupIDs {
			if !ownedBy(owners, id, x) {
				return apperr.Invalid(fmt.Sprintf("rings[%d].groupIds", i), "no such group within the policy's reach: "+id)
			}
		}
	}
	return nil
}

// nextRunOf is a policy's next scheduled run after now; nil when disabled or window-based.
func nextRunOf(x PatchPolicy, now time.Time) any {
	if !x.Enabled || x.Schedule == nil {
		return nil
	}
	next, err := x.Schedule.Next(now)
	if err != nil {
		return nil
	}
	return next.UTC()
}

func policyDeadline(x PatchPolicy) any {
	if x.DeadlineDays == nil {
		return nil
	}
	return *x.DeadlineDays
}

func policySchedule(x PatchPolicy) any {
	if x.Schedule == nil {
		return nil
	}
	return store.EncodeJSON(x.Schedule)
}

func policyAudit(x PatchPolicy) map[string]any {
	return map[string]any{"enabled": x.Enabled, "autoApprove": x.AutoApprove, "deferralDays": x.DeferralDays, "deadlineDays": x.DeadlineDays,
		"rebootBehavior": x.RebootBehavior, "schedule": x.Schedule, "maintenanceWindowId": x.MaintenanceWindowID, "targets": x.Targets,
		"rings": len(x.Rings)}
}

// Create adds a policy.
func (p *Policies) Create(ctx context.Context, in PatchPolicyInput) (PatchPolicy, error) {
	scope := access.ScopeFrom(ctx)
	var out PatchPolicy
	err := p.db.Write(ctx, func(tx *sql.Tx) error {
		at, err := tenancy.Place(ctx, tx, scope, in.OrgID, tenancy.PlaceOptions{Noun: "patch policy", PartnerID: in.PartnerID,
			PartnerWide: true})
		if err != nil {
			return err
		}
		x := PatchPolicy{ID: store.NewID(), PartnerID: at.PartnerID, Name: in.Name, Description: in.Description,
			Enabled: in.Enabled == nil || *in.Enabled, DeferralDays: in.DeferralDays, DeadlineDays: in.DeadlineDays,
			RebootBehavior: in.RebootBehavior, Schedule: in.Schedule, Targets: in.Targets, Rings: in.Rings}
		if at.OrgID != "" {
			x.OrgID = &at.OrgID
		}
		if in.AutoApprove != nil {
			x.AutoApprove = *in.AutoApprove
		}
		if in.MaintenanceWindowID != "" {
			x.MaintenanceWindowID = &in.MaintenanceWindowID
		}
		if x.RebootBehavior == "" {
			x.RebootBehavior = RebootIfRequired
		}
		if err := p.check(ctx, tx, &x); err != nil {
			return err
		}
		now := p.clock.Now()
		_, email := actor(ctx)
		if _, err := tx.ExecContext(ctx, `INSERT INTO patch_policies (id, partner_id, org_id, name, description, enabled, auto_approve,
			deferral_days, deadline_days, reboot_behavior, schedule, maintenance_window_id, targets, rings, next_run_at, created_by,
			created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $17)`,
			x.ID, x.PartnerID, store.NullIfEmpty(at.OrgID), x.Name, x.Description, x.Enabled, store.EncodeJSON(x.AutoApprove), x.DeferralDays,
			policyDeadline(x), x.RebootBehavior, policySchedule(x), store.NullIfEmpty(in.MaintenanceWindowID), store.EncodeJSON(x.Targets),
			store.EncodeJSON(x.Rings), nextRunOf(x, now), email, now); err != nil {
			if store.IsUniqueViolation(err) {
				return policyNameTaken(x.Name)
			}
			return fmt.Errorf("insert patch policy: %w", err)
		}
		if out, err = getPolicy(ctx, tx, access.SystemScope(), x.ID); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "patch_policy.create", ResourceType: "patch_policy", ResourceID: x.ID,
			ResourceName: x.Name, PartnerID: x.PartnerID, OrgID: at.OrgID, Details: policyAudit(out)})
	})
	if err != nil {
		return out, fmt.Errorf("create patch policy: %w", err)
	}
	return out, p.windowRun(ctx, &out)
}

// Update changes a policy (PATCH). Its organization never changes. A change of schedule or
// of enabled computes the next run again.
func (p *Policies) Update(ctx context.Context, id string, in PatchPolicyUpdate) (PatchPolicy, error) {
	if in.Schedule != nil && in.MaintenanceWindowID != nil {
		return PatchPolicy{}, apperr.Invalid("schedule", "a policy runs either on a schedule or in a maintenance window (maintenanceWindowId)")
	}
	var out PatchPolicy
	err := p.db.Write(ctx, func(tx *sql.Tx) error {
		before, err := getPolicy(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		after := before
		store.Assign(&after.Name, in.Name)
		store.Assign(&after.Description, in.Description)
		store.Assign(&after.Enabled, in.Enabled)
		store.Assign(&after.AutoApprove, in.AutoApprove)
		store.Assign(&after.DeferralDays, in.DeferralDays)
		store.Assign(&after.RebootBehavior, in.RebootBehavior)
		store.Assign(&after.Targets, in.Targets)
		store.Assign(&after.Rings, in.Rings)
		if in.DeadlineDays != nil {
			after.DeadlineDays = in.DeadlineDays
			if *in.DeadlineDays == -1 {
				after.DeadlineDays = nil
			}
		}
		if in.Schedule != nil {
			after.Schedule, after.MaintenanceWindowID = in.Schedule, nil
		}
		if in.MaintenanceWindowID != nil {
			after.Schedule, after.MaintenanceWindowID = nil, in.MaintenanceWindowID
		}
		if err := p.check(ctx, tx, &after); err != nil {
			return err
		}
		now := p.clock.Now()
		c := store.NewChanges(now)
		c.Set("name", after.Name)
		c.Set("description", after.Description)
		c.Set("enabled", after.Enabled)
		c.Set("auto_approve", store.EncodeJSON(after.AutoApprove))
		c.Set("deferral_days", after.DeferralDays)
		c.Set("deadline_days", policyDeadline(after))
		c.Set("reboot_behavior", after.RebootBehavior)
		c.Set("schedule", policySchedule(after))
		c.Set("maintenance_window_id", store.NullIfEmpty(store.Deref(after.MaintenanceWindowID)))
		c.Set("targets", store.EncodeJSON(after.Targets))
		c.Set("rings", store.EncodeJSON(after.Rings))
		if policySchedule(after) != policySchedule(before) || after.Enabled != before.Enabled {
			c.Set("next_run_at", nextRunOf(after, now))
		}
		if store.Deref(after.MaintenanceWindowID) != store.Deref(before.MaintenanceWindowID) {
			c.Set("last_occurrence_id", nil)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE patch_policies SET `+c.SQL()+` WHERE id = `+c.Args.Add(id), c.Args.Values()...); err != nil {
			if store.IsUniqueViolation(err) {
				return policyNameTaken(after.Name)
			}
			return fmt.Errorf("update patch policy %s: %w", id, err)
		}
		if out, err = getPolicy(ctx, tx, access.SystemScope(), id); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "patch_policy.update", ResourceType: "patch_policy", ResourceID: id,
			ResourceName: out.Name, PartnerID: out.PartnerID, OrgID: store.Deref(out.OrgID), Details: policyAudit(out)})
	})
	if err != nil {
		return out, fmt.Errorf("update patch policy: %w", err)
	}
	return out, p.windowRun(ctx, &out)
}

// Delete removes a policy. The jobs it started stay.
func (p *Policies) Delete(ctx context.Context, id string) error {
	return p.db.Write(ctx, func(tx *sql.Tx) error {
		x, err := getPolicy(ctx, tx, access.ScopeFrom(ctx), id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM patch_policies WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete patch policy %s: %w", id, err)
		}
		return audit.Record(ctx, tx, audit.Entry{Action: "patch_policy.delete", ResourceType: "patch_policy", ResourceID: id,
			ResourceName: x.Name, PartnerID: x.PartnerID, OrgID: store.Deref(x.OrgID)})
	})
}
