package console

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"gale/internal/domains/automations"
	"gale/internal/domains/devices"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// automationPageSize is the automations list's page.
const automationPageSize = 50

// automationRunsShown is how many of an automation's latest runs its page lists.
const automationRunsShown = 25

// automationListPage lists the automations in scope, each with its latest run.
type automationListPage struct {
	Rows []automationRow
	// Trigger and Enabled are the filters as sent.
	Trigger, Enabled string
	Next             string
	// CanCreate offers the form of a new automation.
	CanCreate bool
}

// automationRow is an automation of the list with its latest run, nil before the first.
type automationRow struct {
	automations.Automation
	Last *automations.AutomationRun
}

// Filtered tells a list narrowed by a filter.
func (p automationListPage) Filtered() bool { return p.Trigger != "" || p.Enabled != "" }

var automationTriggers = []string{automations.TriggerSchedule, automations.TriggerEvent, automations.TriggerWebhook, automations.TriggerManual}

func (c *Console) automationList(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "list-automations"); err != nil {
		return err
	}
	in := r.URL.Query()
	pg := automationListPage{Trigger: in.Get("trigger"), Enabled: in.Get("enabled"), CanCreate: c.HTTP.Permits(ctx, "create-automation")}
	f := automations.ListFilter{OrgID: c.currentOrg(r), TriggerType: pg.Trigger}
	if pg.Trigger != "" && !slices.Contains(automationTriggers, pg.Trigger) {
		return apperr.Invalid("trigger", "schedule, event, webhook or manual")
	}
	switch pg.Enabled {
	case "":
	case "true", "false":
		on := pg.Enabled == "true"
		f.Enabled = &on
	default:
		return apperr.Invalid("enabled", "true or false")
	}
	list, next, _, err := c.Automations.List(ctx, f, store.Page{Limit: automationPageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	ids := make([]string, len(list))
	for i, x := range list {
		ids[i] = x.ID
	}
	last := map[string]automations.AutomationRun{}
	if c.HTTP.Permits(ctx, "list-automation-runs") {
		if last, err = c.Automations.LastRuns(ctx, ids); err != nil {
			return err
		}
	}
	for _, x := range list {
		row := automationRow{Automation: x}
		if run, ok := last[x.ID]; ok {
			row.Last = &run
		}
		pg.Rows = append(pg.Rows, row)
	}
	pg.Next = nextPage(r, next)
	return c.render(w, r, http.StatusOK, "automations", "", view{Title: "Automations", Section: "automations", Data: pg})
}

// automationPage is an automation's page: what starts it, what it does to which devices,
// and its latest runs.
type automationPage struct {
	automations.Automation
	Runs              []automations.AutomationRun
	CanRun, CanToggle bool
	// CanDelete offers the automation's deletion; CanToggle its editor too.
	CanDelete bool
}

func (c *Console) automationDetail(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "get-automation"); err != nil {
		return err
	}
	x, err := c.Automations.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := automationPage{Automation: x, CanRun: c.HTTP.Permits(ctx, "run-automation"), CanToggle: c.HTTP.Permits(ctx, "update-automation"),
		CanDelete: c.HTTP.Permits(ctx, "delete-automation")}
	if c.HTTP.Permits(ctx, "list-automation-runs") {
		if pg.Runs, _, _, err = c.Automations.ListRuns(ctx, x.ID, "", store.Page{Limit: automationRunsShown}); err != nil {
			return err
		}
	}
	return c.render(w, r, http.StatusOK, "automation", "", view{Title: x.Name, Section: "automations", Data: pg})
}

// automationRun runs an automation now on all its targets, as the API's run does, and shows
// the run as it goes.
func (c *Console) automationRun(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "run-automation"); err != nil {
		return err
	}
	run, err := c.Automations.Start(r.Context(), r.PathValue("id"), automations.StartedByRun, automations.AutomationRunStart{})
	if err != nil {
		return err
	}
	seeOther(w, r, "/automations/runs/"+run.ID)
	return nil
}

func (c *Console) automationEnable(w http.ResponseWriter, r *http.Request) error {
	return c.automationSetEnabled(w, r, true)
}

func (c *Console) automationDisable(w http.ResponseWriter, r *http.Request) error {
	return c.automationSetEnabled(w, r, false)
}

// automationSetEnabled turns an automation on or off, as a PATCH of enabled does.
func (c *Console) automationSetEnabled(w http.ResponseWriter, r *http.Request, on bool) error {
	if err := c.allow(r.Context(), "update-automation"); err != nil {
		return err
	}
	x, err := c.Automations.Update(r.Context(), r.PathValue("id"), automations.AutomationUpdate{Enabled: &on})
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/automations/"+x.ID, http.StatusSeeOther)
	return nil
}

// automationRunPage is one run: its steps, refreshed while it runs.
type automationRunPage struct {
	automations.AutomationRun
	Automation string
	// Actions are the automation's actions as they stand, to name the steps' actions.
	Actions []automations.AutomationAction
}

// Running tells a run still under way, whose page keeps fetching its progress.
func (p automationRunPage) Running() bool { return p.Status == automations.RunRunning }

func (c *Console) automationRunDetail(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "get-automation-run"); err != nil {
		return err
	}
	run, err := c.Automations.GetRun(ctx, r.PathValue("runId"))
	if err != nil {
		return err
	}
	pg := automationRunPage{AutomationRun: run, Automation: "Automation"}
	// The automation may be gone, or out of reach for the user since: the run still shows.
	if x, err := c.Automations.Get(ctx, run.AutomationID); err == nil {
		pg.Automation, pg.Actions = x.Name, x.Actions
	}
	return c.render(w, r, http.StatusOK, "automation-run", targeted(r, "run-progress"),
		view{Title: "Run of " + pg.Automation, Section: "automations", Data: pg})
}

// TriggerText says what starts an automation.
func (x automationRow) TriggerText() string { return automationTrigger(x.Trigger) }

// TriggerText says what starts the automation.
func (p automationPage) TriggerText() string { return automationTrigger(p.Trigger) }

func automationTrigger(t automations.AutomationTrigger) string {
	switch t.Type {
	case automations.TriggerSchedule:
		tz := t.Timezone
		if tz == "" {
			tz = "UTC"
		}
		return "Schedule " + t.Cron + " (" + tz + ")"
	case automations.TriggerEvent:
		s := "Event " + t.EventType
		if len(t.Filter) > 0 {
			parts := make([]string, 0, len(t.Filter))
			for _, k := range slices.Sorted(maps.Keys(t.Filter)) {
				parts = append(parts, k+"="+t.Filter[k])
			}
			s += " where " + strings.Join(parts, ", ")
		}
		return s
	case automations.TriggerWebhook:
		return "Signed webhook"
	case automations.TriggerManual:
		return "Manual only"
	}
	return t.Type
}

// TargetsText says which devices an automation acts on.
func (p automationPage) TargetsText() string {
	t := p.Targets
	if t == nil {
		return "no devices"
	}
	return targetsPhrase(devices.Targets{Type: t.Type, IDs: t.IDs}, p.OrgID == nil)
}

func targetsPhrase(t devices.Targets, partnerWide bool) string {
	n := len(t.IDs)
	switch t.Type {
	case devices.TargetOrganization:
		if n == 0 {
			if partnerWide {
				return "every device of every organization of the partner"
			}
			return "every device of the organization"
		}
		return countOf(n, "organization")
	case devices.TargetSites:
		return "the devices of " + countOf(n, "site")
	case devices.TargetGroups:
		return "the devices of " + countOf(n, "group")
	case devices.TargetDevices:
		return countOf(n, "device")
	}
	return t.Type
}

func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// ActionText says what one action does.
func (p automationPage) ActionText(a automations.AutomationAction) string { return automationAction(a) }

// ActionText names the action of a step by its index.
func (p automationRunPage) ActionText(i int) string {
	if i < 0 || i >= len(p.Actions) {
		return "Action " + strconv.Itoa(i+1)
	}
	return automationAction(p.Actions[i])
}

func automationAction(a automations.AutomationAction) string {
	switch a.Type {
	case automations.ActionRunScript:
		return "Run a script"
	case automations.ActionRunCommand:
		if a.Command != nil {
			return "Send the device command " + a.Command.Type
		}
		return "Send a device command"
	case automations.ActionNotify:
		s := "Notify " + countOf(len(a.ChannelIDs), "channel")
		if a.Subject != "" {
			s += ": " + a.Subject
		}
		return s
	case automations.ActionCreateAlert:
		article := "a"
		if strings.HasPrefix(a.Severity, "i") {
			article = "an"
		}
		return fmt.Sprintf("Raise %s %s alert: %s", article, a.Severity, a.Title)
	}
	return a.Type
}

// seeOther sends the browser on to path after an action: a redirect, or for an htmx request
// (a form that asked for confirmation first) the header that makes htmx load path.
func seeOther(w http.ResponseWriter, r *http.Request, path string) {
	if r.Header.Get("HX-Request") != "" {
		w.Header().Set("HX-Redirect", path)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
}
