package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"gale/internal/domains/devices"
	"gale/internal/domains/groups"
	"gale/internal/domains/patches"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
)

// patchPoliciesPage lists the patch policies in view.
type patchPoliciesPage struct {
	Policies  []policyRow
	Next      string
	CanCreate bool
}

// policyRow is a policy with how it runs, in words.
type policyRow struct {
	patches.PatchPolicy
	Runs string
}

// weekdays name the days of a weekly schedule, 0 (Sunday) to 6.
var weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}

// runsText says when a policy runs.
func runsText(x patches.PatchPolicy) string {
	s := x.Schedule
	if s == nil {
		if x.MaintenanceWindowID != nil {
			return "In its maintenance window"
		}
		return "Never"
	}
	at := s.Time + " " + s.Timezone
	switch s.Frequency {
	case patches.PolicyDaily:
		return "Daily at " + at
	case patches.PolicyWeekly:
		days := make([]string, 0, len(s.DaysOfWeek))
		for _, d := range s.DaysOfWeek {
			if d >= 0 && d < len(weekdays) {
				days = append(days, weekdays[d])
			}
		}
		return "Weekly on " + strings.Join(days, ", ") + " at " + at
	case patches.PolicyMonthly:
		if s.DayOfMonth == -1 {
			return "Monthly on the last day at " + at
		}
		return fmt.Sprintf("Monthly on day %d at %s", s.DayOfMonth, at)
	}
	return s.Frequency
}

func (c *Console) patchPolicies(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "list-patch-policies"); err != nil {
		return err
	}
	in := r.URL.Query()
	list, next, _, err := c.PatchPolicies.List(ctx, patches.PolicyFilter{OrgID: c.currentOrg(r)},
		store.Page{Limit: patchPageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	pg := patchPoliciesPage{Next: nextPage(r, next), CanCreate: c.HTTP.Permits(ctx, "create-patch-policy")}
	for _, x := range list {
		pg.Policies = append(pg.Policies, policyRow{PatchPolicy: x, Runs: runsText(x)})
	}
	return c.render(w, r, http.StatusOK, "patch-policies", "", view{Title: "Patch policies", Section: "patches", Data: pg})
}

// patchPolicyPage is one policy.
type patchPolicyPage struct {
	Policy  patches.PatchPolicy
	Runs    string
	CanEdit bool
	// Groups name the groups of the policy's targets and rings, where the user may read them.
	Groups map[string]string
}

func (c *Console) patchPolicy(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "get-patch-policy"); err != nil {
		return err
	}
	x, err := c.PatchPolicies.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := patchPolicyPage{Policy: x, Runs: runsText(x), CanEdit: c.HTTP.Permits(ctx, "update-patch-policy"), Groups: map[string]string{}}
	list, err := c.policyGroups(r, store.Deref(x.OrgID))
	if err != nil {
		return err
	}
	for _, g := range list {
		pg.Groups[g.ID] = g.Name
	}
	return c.render(w, r, http.StatusOK, "patch-policy", "", view{Title: x.Name, Section: "patches", Data: pg})
}

// policyGroups are the groups a policy of the organization (or partner-wide: "") may name.
func (c *Console) policyGroups(r *http.Request, orgID string) ([]groups.Group, error) {
	if !c.HTTP.Permits(r.Context(), "list-groups") {
		return nil, nil
	}
	list, _, _, err := c.Groups.List(r.Context(), groups.ListFilter{OrgID: orgID}, store.Page{Limit: maxRunnableScripts})
	return list, err
}

// policyForm is the policy editor's data.
type policyForm struct {
	Policy   patches.PatchPolicy
	Schedule patches.PatchPolicySchedule
	New      bool
	// PartnerWide offers a policy for every organization of the user's partner.
	PartnerWide bool
	OrgID       string
	Groups      []groups.Group
	// Window tells that the policy runs in a maintenance window: it stays unless a schedule
	// is chosen.
	Window bool
	// KeepTargets tells that the policy aims at sites or devices, which the editor leaves as
	// they are.
	KeepTargets bool
	Error       *apperr.Error

	Categories, Severities, Weekdays []string
}

func (f policyForm) HasCategory(v string) bool {
	return slices.Contains(f.Policy.AutoApprove.Categories, v)
}
func (f policyForm) HasSeverity(v string) bool {
	return slices.Contains(f.Policy.AutoApprove.Severities, v)
}
func (f policyForm) HasDay(d int) bool { return slices.Contains(f.Schedule.DaysOfWeek, d) }
func (f policyForm) HasGroup(id string) bool {
	return f.Policy.Targets.Type == "groups" && slices.Contains(f.Policy.Targets.IDs, id)
}

// Deadline is the deadline field's value: empty for none.
func (f policyForm) Deadline() string {
	if f.Policy.DeadlineDays == nil {
		return ""
	}
	return strconv.Itoa(*f.Policy.DeadlineDays)
}

func (c *Console) policyEditor(w http.ResponseWriter, r *http.Request, status int, f policyForm) error {
	f.PartnerWide = f.New && access.PrincipalFrom(r.Context()).Scope.Level == access.LevelPartner
	f.Categories, f.Severities, f.Weekdays = patchCategories, patchSeverities, weekdays
	if f.Policy.Schedule != nil {
		f.Schedule = *f.Policy.Schedule
	} else if f.New {
		f.Schedule = patches.PatchPolicySchedule{Frequency: patches.PolicyWeekly, Time: "02:00", DaysOfWeek: []int{6}, Timezone: "UTC"}
	}
	f.Window = !f.New && f.Policy.MaintenanceWindowID != nil && f.Policy.Schedule == nil
	f.KeepTargets = !f.New && f.Policy.Targets.Type != "organization" && f.Policy.Targets.Type != "groups"
	org := f.OrgID
	if !f.New {
		org = store.Deref(f.Policy.OrgID)
	}
	var err error
	if f.Groups, err = c.policyGroups(r, org); err != nil {
		return err
	}
	title := "New patch policy"
	if !f.New {
		title = "Edit " + f.Policy.Name
	}
	return c.render(w, r, status, "patch-policy-edit", "", view{Title: title, Section: "patches", Data: f})
}

func (c *Console) patchPolicyNew(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-patch-policy"); err != nil {
		return err
	}
	return c.policyEditor(w, r, http.StatusOK, policyForm{New: true, OrgID: c.currentOrg(r), Policy: patches.PatchPolicy{Enabled: true,
		RebootBehavior: patches.RebootIfRequired, Targets: devices.Targets{Type: "organization"},
		AutoApprove: patches.PatchPolicyAutoApprove{Categories: []string{patches.CategorySecurity},
			Severities: []string{patches.SeverityCritical, patches.SeverityImportant}}}})
}

func (c *Console) patchPolicyEdit(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "update-patch-policy"); err != nil {
		return err
	}
	x, err := c.PatchPolicies.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.policyEditor(w, r, http.StatusOK, policyForm{Policy: x})
}

// policyFields is what the editor sent. Schedule is nil when no frequency was chosen (a
// window-based policy keeps its window), Targets when no target type was (the editor leaves
// sites and devices as they are).
type policyFields struct {
	Name, Description, RebootBehavior string
	Enabled                           bool
	AutoApprove                       patches.PatchPolicyAutoApprove
	DeferralDays                      int
	DeadlineDays                      *int
	Schedule                          *patches.PatchPolicySchedule
	Targets                           *devices.Targets
}

// formInt reads a whole number of a form; "" is def.
func formInt(form url.Values, field string, def int) (int, error) {
	v := strings.TrimSpace(form.Get(field))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, apperr.Invalid(field, field+" is a whole number")
	}
	return n, nil
}

// readPolicy reads the editor's form; the service checks the values.
func readPolicy(form url.Values) (policyFields, error) {
	f := policyFields{Name: form.Get("name"), Description: form.Get("description"), RebootBehavior: form.Get("rebootBehavior"),
		Enabled: form.Get("enabled") == "true", AutoApprove: patches.PatchPolicyAutoApprove{
			Categories: nonNil(form["autoApprove.categories"]), Severities: nonNil(form["autoApprove.severities"])}}
	var err error
	if f.DeferralDays, err = formInt(form, "deferralDays", 0); err != nil {
		return f, err
	}
	if strings.TrimSpace(form.Get("deadlineDays")) != "" {
		n, err := formInt(form, "deadlineDays", 0)
		if err != nil {
			return f, err
		}
		f.DeadlineDays = &n
	}
	if freq := form.Get("schedule.frequency"); freq != "" {
		s := patches.PatchPolicySchedule{Frequency: freq, Time: form.Get("schedule.time"), Timezone: strings.TrimSpace(form.Get("schedule.timezone"))}
		if freq == patches.PolicyWeekly {
			for _, d := range form["schedule.daysOfWeek"] {
				n, err := strconv.Atoi(d)
				if err != nil {
					return f, apperr.Invalid("schedule.daysOfWeek", "days are 0 (Sunday) to 6")
				}
				s.DaysOfWeek = append(s.DaysOfWeek, n)
			}
		}
		if freq == patches.PolicyMonthly {
			if s.DayOfMonth, err = formInt(form, "schedule.dayOfMonth", 0); err != nil {
				return f, err
			}
		}
		f.Schedule = &s
	}
	switch t := form.Get("targets.type"); t {
	case "":
	case "organization":
		f.Targets = &devices.Targets{Type: t, IDs: []string{}}
	case "groups":
		f.Targets = &devices.Targets{Type: t, IDs: nonNil(form["targets.ids"])}
	default:
		return f, apperr.Invalid("targets.type", "the whole organization, or groups")
	}
	return f, nil
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// shown is the policy as the editor shows it again after a refusal: base with what was sent.
func (f policyFields) shown(base patches.PatchPolicy) patches.PatchPolicy {
	base.Name, base.Description, base.RebootBehavior, base.Enabled = f.Name, f.Description, f.RebootBehavior, f.Enabled
	base.AutoApprove, base.DeferralDays, base.DeadlineDays = f.AutoApprove, f.DeferralDays, f.DeadlineDays
	if f.Schedule != nil {
		base.Schedule = f.Schedule
	}
	if f.Targets != nil {
		base.Targets = *f.Targets
	}
	return base
}

func (c *Console) patchPolicyCreate(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-patch-policy"); err != nil {
		return err
	}
	orgID := r.PostFormValue("orgId")
	f, err := readPolicy(r.PostForm)
	if err == nil {
		in := patches.PatchPolicyInput{OrgID: orgID, Name: f.Name, Description: f.Description, Enabled: &f.Enabled,
			AutoApprove: &f.AutoApprove, DeferralDays: f.DeferralDays, DeadlineDays: f.DeadlineDays, RebootBehavior: f.RebootBehavior,
			Schedule: f.Schedule}
		if f.Targets == nil {
			err = apperr.Invalid("targets.type", "choose what the policy covers: the whole organization, or groups")
		} else {
			in.Targets = *f.Targets
			var x patches.PatchPolicy
			if x, err = c.PatchPolicies.Create(r.Context(), in); err == nil {
				http.Redirect(w, r, "/patches/policies/"+x.ID, http.StatusSeeOther)
				return nil
			}
		}
	}
	return c.policyRefused(w, r, err, policyForm{New: true, OrgID: orgID, Policy: f.shown(patches.PatchPolicy{})})
}

func (c *Console) patchPolicyUpdate(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "update-patch-policy"); err != nil {
		return err
	}
	x, err := c.PatchPolicies.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	f, err := readPolicy(r.PostForm)
	if err == nil {
		deadline := -1
		if f.DeadlineDays != nil {
			deadline = *f.DeadlineDays
		}
		in := patches.PatchPolicyUpdate{Name: &f.Name, Description: &f.Description, Enabled: &f.Enabled, AutoApprove: &f.AutoApprove,
			DeferralDays: &f.DeferralDays, DeadlineDays: &deadline, RebootBehavior: &f.RebootBehavior, Schedule: f.Schedule,
			Targets: f.Targets}
		if _, err = c.PatchPolicies.Update(r.Context(), x.ID, in); err == nil {
			http.Redirect(w, r, "/patches/policies/"+x.ID, http.StatusSeeOther)
			return nil
		}
	}
	return c.policyRefused(w, r, err, policyForm{Policy: f.shown(x)})
}

// policyRefused shows the editor again with the service's refusal, what was typed kept; an
// error that is not a refusal of the input goes to the error page.
func (c *Console) policyRefused(w http.ResponseWriter, r *http.Request, err error, f policyForm) error {
	ae, ok := apperr.As(err)
	if !ok || (ae.Kind != apperr.KindInvalid && ae.Kind != apperr.KindConflict) {
		return err
	}
	f.Error = ae
	return c.policyEditor(w, r, httpapi.StatusOf(ae), f)
}

// patchPolicyAct turns a policy on or off, or deletes it.
func (c *Console) patchPolicyAct(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	id := r.PathValue("id")
	switch action := r.PathValue("action"); action {
	case "enable", "disable":
		if err := c.allow(ctx, "update-patch-policy"); err != nil {
			return err
		}
		on := action == "enable"
		if _, err := c.PatchPolicies.Update(ctx, id, patches.PatchPolicyUpdate{Enabled: &on}); err != nil {
			return err
		}
		http.Redirect(w, r, "/patches/policies/"+id, http.StatusSeeOther)
	case "delete":
		if err := c.allow(ctx, "delete-patch-policy"); err != nil {
			return err
		}
		if err := c.PatchPolicies.Delete(ctx, id); err != nil {
			return err
		}
		http.Redirect(w, r, "/patches/policies", http.StatusSeeOther)
	default:
		return apperr.NotFound("page")
	}
	return nil
}
