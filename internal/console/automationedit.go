package console

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"gale/internal/domains/automations"
	"gale/internal/domains/devices"
	"gale/internal/domains/scripts"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// automationActionKinds are the kinds of action the form offers. A device command without a
// payload (reboot, inventory) stands for a run_command action of that command.
var automationActionKinds = []opsChoice{{automations.ActionRunScript, "Run a script"}, {automations.ActionCreateAlert, "Raise an alert"},
	{agentproto.CommandReboot, "Reboot the device"}, {agentproto.CommandRefreshInventory, "Refresh the device's inventory"}}

// automationCommands are the device commands the form offers as actions.
var automationCommands = []string{agentproto.CommandReboot, agentproto.CommandRefreshInventory}

// actionKeep is the kind of a row holding an action the form cannot show, kept as it is.
const actionKeep = "keep"

// automationActionRows is how many action rows the form shows at least.
const automationActionRows = 5

// automationMaxActions is the API's limit on an automation's actions.
const automationMaxActions = 20

// automationScriptChoices bounds the scripts the form offers.
const automationScriptChoices = 500

// actionRow is one action row of the form; Type "" is a blank row.
type actionRow struct {
	// N numbers the row from 1, for its labels.
	N                        int
	Type                     string
	ScriptID, Parameters     string
	Severity, Title, Message string
	// Keep is the index, in the automation as it stands, of the action a keep row holds;
	// KeepText says what that action does.
	Keep, KeepText string
}

// automationForm is an automation's editor, new or existing, as typed.
type automationForm struct {
	// ID is the automation edited, "" for a new one; Saved its name as it stands.
	ID, Saved string
	// OrgID is its organization, "" for a partner-wide automation (edited only).
	OrgID                string
	ChooseOrg, OrgLocked bool
	Name, Description    string
	Enabled              bool
	// The trigger: its type and the fields of a schedule (cron, time zone) or an event (type,
	// filter as name=value lines). Webhook tells an automation started by a signed webhook,
	// whose trigger the form keeps.
	TriggerType, Cron, Timezone, EventType, Filter string
	Webhook                                        bool
	// TargetType is organization, sites, groups, devices; none (the device the event names);
	// or keep (targets the form cannot show, described by KeepTargets).
	TargetType  string
	NoTargets   bool
	KeepTargets string
	// Selected are the sites, groups or devices ticked.
	Selected []string
	Choices  targetChoices
	// OnFailure is stop, continue or (kept as it is) notify.
	OnFailure string
	Notify    bool
	// Conditions counts the conditions an automation keeps as they are.
	Conditions int
	Actions    []actionRow
	Scripts    []targetChoice
	Kinds      []opsChoice
	EventTypes []string
	Severities []string
	Error      *apperr.Error
}

// New tells the form of a new automation.
func (f automationForm) New() bool { return f.ID == "" }

// Action is where the form posts.
func (f automationForm) Action() string {
	if f.New() {
		return "/automations"
	}
	return "/automations/" + f.ID
}

// HasChoices tells whether the form offers sites, groups or devices to target.
func (f automationForm) HasChoices() bool {
	return len(f.Choices.Sites)+len(f.Choices.Groups)+len(f.Choices.Devices) > 0
}

func (c *Console) automationNew(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-automation"); err != nil {
		return err
	}
	f := automationForm{Enabled: true, TriggerType: automations.TriggerManual, Timezone: "UTC", TargetType: devices.TargetOrganization,
		OnFailure: automations.OnFailureStop, NoTargets: true}
	return c.automationEditor(w, r, http.StatusOK, f)
}

func (c *Console) automationEdit(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "update-automation"); err != nil {
		return err
	}
	x, err := c.Automations.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.automationEditor(w, r, http.StatusOK, automationFormOf(x))
}

// automationFormOf is the form filled in with an automation as it stands.
func automationFormOf(x automations.Automation) automationForm {
	f := automationForm{ID: x.ID, Saved: x.Name, OrgID: store.Deref(x.OrgID), Name: x.Name, Description: x.Description, Enabled: x.Enabled,
		TriggerType: x.Trigger.Type, Cron: x.Trigger.Cron, Timezone: x.Trigger.Timezone, EventType: x.Trigger.EventType,
		OnFailure: x.OnFailure}
	f.Filter = filterText(x.Trigger.Filter)
	automationFormKeeps(&f, x)
	switch t := x.Targets; {
	case t == nil:
		f.TargetType = "none"
	case x.OrgID == nil && len(t.IDs) > 0:
		f.TargetType = actionKeep
	default:
		f.TargetType, f.Selected = t.Type, t.IDs
	}
	for i, a := range x.Actions {
		f.Actions = append(f.Actions, actionRowOf(i, a))
	}
	return f
}

// automationFormKeeps notes what of an automation the form keeps as it stands.
func automationFormKeeps(f *automationForm, x automations.Automation) {
	f.Webhook = x.Trigger.Type == automations.TriggerWebhook
	f.NoTargets = x.Targets == nil
	if x.OrgID == nil && x.Targets != nil && len(x.Targets.IDs) > 0 {
		f.KeepTargets = targetsPhrase(devices.Targets{Type: x.Targets.Type, IDs: x.Targets.IDs}, true)
	}
	f.Notify = x.OnFailure == automations.OnFailureNotify
	f.Conditions = len(x.Conditions)
	for i, row := range f.Actions {
		if j, err := strconv.Atoi(row.Keep); row.Type == actionKeep && err == nil && j >= 0 && j < len(x.Actions) {
			f.Actions[i].KeepText = automationAction(x.Actions[j])
		}
	}
}

func filterText(filter map[string]string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(filter)) {
		out = append(out, k+"="+filter[k])
	}
	return strings.Join(out, "\n")
}

// actionRowOf is the row that shows the action at index i, or keeps it when the form cannot
// show it.
func actionRowOf(i int, a automations.AutomationAction) actionRow {
	switch a.Type {
	case automations.ActionRunScript:
		var params []string
		for _, k := range slices.Sorted(maps.Keys(a.Parameters)) {
			params = append(params, k+"="+fmt.Sprint(a.Parameters[k]))
		}
		return actionRow{Type: a.Type, ScriptID: a.ScriptID, Parameters: strings.Join(params, "\n")}
	case automations.ActionCreateAlert:
		return actionRow{Type: a.Type, Severity: a.Severity, Title: a.Title, Message: a.Message}
	case automations.ActionRunCommand:
		if a.Command != nil && slices.Contains(automationCommands, a.Command.Type) && emptyPayload(a.Command.Payload) && a.Command.TimeoutSeconds == 0 {
			return actionRow{Type: a.Command.Type}
		}
	}
	return actionRow{Type: actionKeep, Keep: strconv.Itoa(i), KeepText: automationAction(a)}
}

func emptyPayload(p json.RawMessage) bool {
	s := strings.TrimSpace(string(p))
	return s == "" || s == "null" || s == "{}"
}

// automationEditor shows the form, with the organization's sites, groups, devices and
// scripts to choose from.
func (c *Console) automationEditor(w http.ResponseWriter, r *http.Request, status int, f automationForm) error {
	ctx := r.Context()
	if f.New() {
		f.OrgID, f.OrgLocked = c.opsFormOrg(r)
		f.ChooseOrg = f.OrgID == ""
	}
	if !f.ChooseOrg {
		if f.OrgID != "" {
			var err error
			if f.Choices, err = c.targetChoices(r, f.OrgID); err != nil {
				return err
			}
			for _, list := range [][]targetChoice{f.Choices.Sites, f.Choices.Groups, f.Choices.Devices} {
				for i := range list {
					list[i].Checked = slices.Contains(f.Selected, list[i].ID)
				}
			}
		}
		if c.HTTP.Permits(ctx, "list-scripts") {
			list, _, _, err := c.Scripts.List(ctx, scripts.ListFilter{OrgID: f.OrgID}, store.Page{Limit: automationScriptChoices})
			if err != nil {
				return err
			}
			for _, s := range list {
				f.Scripts = append(f.Scripts, targetChoice{ID: s.ID, Name: s.Name})
			}
		}
	}
	f.Kinds, f.EventTypes, f.Severities = automationActionKinds, automations.EventTypes, opsSeverities
	for rows := min(automationMaxActions, max(automationActionRows, len(f.Actions)+1)); len(f.Actions) < rows; {
		f.Actions = append(f.Actions, actionRow{Severity: "medium"})
	}
	for i := range f.Actions {
		f.Actions[i].N = i + 1
	}
	title := "New automation"
	if !f.New() {
		title = "Edit " + f.Saved
	}
	return c.render(w, r, status, "automation-edit", "", view{Title: title, Section: "automations", Data: f})
}

// readAutomationForm reads what the form sent.
func readAutomationForm(form url.Values) automationForm {
	f := automationForm{Name: strings.TrimSpace(form.Get("name")), Description: strings.TrimSpace(form.Get("description")),
		Enabled: form.Get("enabled") != "", TriggerType: form.Get("trigger.type"), Cron: strings.TrimSpace(form.Get("trigger.cron")),
		Timezone: strings.TrimSpace(form.Get("trigger.timezone")), EventType: form.Get("trigger.eventType"), Filter: form.Get("trigger.filter"),
		TargetType: form.Get("targets.type"), OnFailure: form.Get("onFailure")}
	f.Selected = append(append(append([]string{}, form["siteIds"]...), form["groupIds"]...), form["deviceIds"]...)
	for i := range automationMaxActions {
		key := func(name string) string { return fmt.Sprintf("actions[%d].%s", i, name) }
		row := actionRow{Type: form.Get(key("type")), ScriptID: form.Get(key("scriptId")), Parameters: form.Get(key("parameters")),
			Severity: form.Get(key("severity")), Title: strings.TrimSpace(form.Get(key("title"))), Message: strings.TrimSpace(form.Get(key("message"))),
			Keep: form.Get(key("keep"))}
		if row.Type != "" {
			f.Actions = append(f.Actions, row)
		}
	}
	return f
}

// trigger is the trigger the form gives: the fields of its type only.
func (f automationForm) trigger() (automations.AutomationTrigger, error) {
	t := automations.AutomationTrigger{Type: f.TriggerType}
	switch f.TriggerType {
	case automations.TriggerSchedule:
		t.Cron, t.Timezone = f.Cron, f.Timezone
	case automations.TriggerEvent:
		t.EventType = f.EventType
		for _, l := range strings.Split(strings.ReplaceAll(f.Filter, "\r\n", "\n"), "\n") {
			if strings.TrimSpace(l) == "" {
				continue
			}
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				return t, apperr.Invalid("trigger.filter", "one name=value a line, such as severity=critical")
			}
			if t.Filter == nil {
				t.Filter = map[string]string{}
			}
			t.Filter[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return t, nil
}

// targets are the targets the form gives; nil for none (the device an event names), which
// on an existing automation leaves its targets as they are (the API's change cannot remove
// them).
func (f automationForm) targets(before *automations.Automation) (*devices.Targets, error) {
	switch f.TargetType {
	case devices.TargetOrganization:
		return &devices.Targets{Type: devices.TargetOrganization, IDs: []string{}}, nil
	case devices.TargetSites, devices.TargetGroups, devices.TargetDevices:
		return &devices.Targets{Type: f.TargetType, IDs: f.Selected}, nil
	case "none":
		if before != nil && before.Targets != nil {
			return nil, apperr.Invalid("targets.type", "an automation's targets cannot be removed: choose the devices it acts on")
		}
		return nil, nil
	case actionKeep:
		if before != nil && before.Targets != nil {
			return nil, nil
		}
	}
	return nil, apperr.Invalid("targets.type", "choose the devices it acts on")
}

// actions are the actions of the rows filled in, in order; a keep row takes the action of
// before it holds.
func (f automationForm) actions(before *automations.Automation) ([]automations.AutomationAction, error) {
	out := []automations.AutomationAction{}
	for i, row := range f.Actions {
		field := func(name string) string { return fmt.Sprintf("actions[%d].%s", i, name) }
		switch row.Type {
		case actionKeep:
			j, err := strconv.Atoi(row.Keep)
			if err != nil || before == nil || j < 0 || j >= len(before.Actions) {
				return nil, apperr.Invalid(field("type"), "choose what the action does")
			}
			out = append(out, before.Actions[j])
		case automations.ActionRunScript:
			a := automations.AutomationAction{Type: row.Type, ScriptID: row.ScriptID}
			for _, l := range strings.Split(strings.ReplaceAll(row.Parameters, "\r\n", "\n"), "\n") {
				if strings.TrimSpace(l) == "" {
					continue
				}
				k, v, ok := strings.Cut(l, "=")
				if !ok || strings.TrimSpace(k) == "" {
					return nil, apperr.Invalid(field("parameters"), "one name=value a line, such as SERVICE_NAME=nginx")
				}
				if a.Parameters == nil {
					a.Parameters = map[string]any{}
				}
				a.Parameters[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
			out = append(out, a)
		case automations.ActionCreateAlert:
			out = append(out, automations.AutomationAction{Type: row.Type, Severity: row.Severity, Title: row.Title, Message: row.Message})
		default:
			if slices.Contains(automationCommands, row.Type) {
				out = append(out, automations.AutomationAction{Type: automations.ActionRunCommand, Command: &devices.CommandInput{Type: row.Type}})
			} else {
				out = append(out, automations.AutomationAction{Type: row.Type})
			}
		}
	}
	return out, nil
}

func (c *Console) automationCreate(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "create-automation"); err != nil {
		return err
	}
	f := readAutomationForm(r.PostForm)
	f.NoTargets = true
	x, err := func() (automations.Automation, error) {
		trigger, err := f.trigger()
		if err != nil {
			return automations.Automation{}, err
		}
		targets, err := f.targets(nil)
		if err != nil {
			return automations.Automation{}, err
		}
		actions, err := f.actions(nil)
		if err != nil {
			return automations.Automation{}, err
		}
		return c.Automations.Create(ctx, automations.AutomationInput{OrgID: r.PostForm.Get("orgId"), Name: f.Name, Description: f.Description,
			Enabled: &f.Enabled, Trigger: trigger, Actions: actions, Targets: targets, OnFailure: f.OnFailure})
	}()
	if err != nil {
		return c.automationRefused(w, r, f, err)
	}
	http.Redirect(w, r, "/automations/"+x.ID, http.StatusSeeOther)
	return nil
}

// automationUpdate saves the form as the automation, as a PATCH does: its conditions, the
// channels told of a failure and what the form cannot show stay as they are.
func (c *Console) automationUpdate(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "update-automation"); err != nil {
		return err
	}
	before, err := c.Automations.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	f := readAutomationForm(r.PostForm)
	f.ID, f.Saved, f.OrgID = before.ID, before.Name, store.Deref(before.OrgID)
	automationFormKeeps(&f, before)
	_, err = func() (automations.Automation, error) {
		trigger, err := f.trigger()
		if err != nil {
			return automations.Automation{}, err
		}
		targets, err := f.targets(&before)
		if err != nil {
			return automations.Automation{}, err
		}
		actions, err := f.actions(&before)
		if err != nil {
			return automations.Automation{}, err
		}
		return c.Automations.Update(ctx, before.ID, automations.AutomationUpdate{Name: &f.Name, Description: &f.Description,
			Enabled: &f.Enabled, Trigger: &trigger, Actions: &actions, Targets: targets, OnFailure: &f.OnFailure})
	}()
	if err != nil {
		return c.automationRefused(w, r, f, err)
	}
	http.Redirect(w, r, "/automations/"+before.ID, http.StatusSeeOther)
	return nil
}

func (c *Console) automationRefused(w http.ResponseWriter, r *http.Request, f automationForm, err error) error {
	ae := formRefusal(err)
	if ae == nil {
		return err
	}
	f.Error = ae
	return c.automationEditor(w, r, httpapi.StatusOf(ae), f)
}

func (c *Console) automationDelete(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "delete-automation"); err != nil {
		return err
	}
	if err := c.Automations.Delete(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	seeOther(w, r, "/automations")
	return nil
}
