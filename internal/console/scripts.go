package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"gale/internal/domains/groups"
	"gale/internal/domains/scripts"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
)

// scriptPageSize is the library's page.
const scriptPageSize = 50

// scriptListPage is the library's data.
type scriptListPage struct {
	Scripts   []scripts.Script
	Search    string
	OS        string
	Next      string
	CanCreate bool
}

func (c *Console) scriptList(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "list-scripts"); err != nil {
		return err
	}
	in := r.URL.Query()
	pg := scriptListPage{Search: strings.TrimSpace(in.Get("q")), OS: in.Get("os"), CanCreate: c.HTTP.Permits(r.Context(), "create-script")}
	list, next, _, err := c.Scripts.List(r.Context(), scripts.ListFilter{Search: pg.Search, OSType: pg.OS, OrgID: c.currentOrg(r)},
		store.Page{Limit: scriptPageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	pg.Scripts = list
	pg.Next = nextPage(r, next)
	return c.render(w, r, http.StatusOK, "scripts", "", view{Title: "Scripts", Section: "scripts", Data: pg})
}

// scriptPage is a script's page: its definition, versions and latest executions, and where
// it may run.
type scriptPage struct {
	Script     scripts.Script
	Versions   []scripts.ScriptVersion
	Executions []scripts.ScriptExecution
	Groups     []groups.Group
	CanRun     bool
	CanEdit    bool
}

// scriptExecutionsShown and scriptVersionsShown are how many of a script's latest executions
// and versions its page lists.
const (
	scriptExecutionsShown = 25
	scriptVersionsShown   = 25
)

func (c *Console) scriptDetail(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "get-script"); err != nil {
		return err
	}
	sc, err := c.Scripts.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := scriptPage{Script: sc, CanRun: c.HTTP.Permits(ctx, "execute-script"), CanEdit: c.HTTP.Permits(ctx, "update-script")}
	if c.HTTP.Permits(ctx, "list-script-versions") {
		if pg.Versions, _, _, err = c.Scripts.Versions(ctx, sc.ID, store.Page{Limit: scriptVersionsShown}); err != nil {
			return err
		}
	}
	if c.HTTP.Permits(ctx, "list-script-executions") {
		if pg.Executions, _, _, err = c.Scripts.ListExecutions(ctx, sc.ID, scripts.ExecutionFilter{},
			store.Page{Limit: scriptExecutionsShown}); err != nil {
			return err
		}
	}
	if pg.CanRun && c.HTTP.Permits(ctx, "list-groups") && c.HTTP.Permits(ctx, "list-group-devices") {
		if pg.Groups, _, _, err = c.Groups.List(ctx, groups.ListFilter{OrgID: c.currentOrg(r)},
			store.Page{Limit: maxRunnableScripts}); err != nil {
			return err
		}
	}
	return c.render(w, r, http.StatusOK, "script", "", view{Title: sc.Name, Section: "scripts", Data: pg})
}

// runOnGroup runs a script on the members of a group, as the API's execute does with their
// device IDs (up to its limit of 500 devices).
func (c *Console) runOnGroup(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	for _, op := range []string{"execute-script", "list-group-devices"} {
		if err := c.allow(ctx, op); err != nil {
			return err
		}
	}
	scriptID, groupID := r.PathValue("id"), r.PostFormValue("group")
	if groupID == "" {
		return apperr.Invalid("group", "choose the group to run the script on")
	}
	members, _, _, err := c.Groups.Members(ctx, groupID, store.Page{Limit: maxBulkDevices})
	if err != nil {
		return err
	}
	if len(members) == 0 {
		return apperr.Invalid("group", "the group has no device")
	}
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.DeviceID
	}
	res, err := c.Scripts.Execute(ctx, scriptID, scripts.ScriptRun{DeviceIDs: ids})
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/scripts/"+scriptID+"?started="+strconv.Itoa(len(res.Executions))+"&skipped="+
		strconv.Itoa(len(res.Skipped)+len(res.Failed)), http.StatusSeeOther)
	return nil
}

// executionPage is one execution: its device, outcome and output, live while it runs.
type executionPage struct {
	Execution scripts.ScriptExecution
	Output    runOutput
	Running   bool
}

func (c *Console) executionDetail(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "get-script-execution"); err != nil {
		return err
	}
	x, err := c.Scripts.GetExecution(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := executionPage{Execution: x, Output: runOutput{DeviceID: x.DeviceID, CommandID: x.CommandID, Script: x.ScriptName}}
	return c.render(w, r, http.StatusOK, "execution", "", view{Title: x.ScriptName, Section: "scripts", Data: pg})
}

// scriptForm is the editor's data: the script as the form shows it, and where a new one may
// be placed.
type scriptForm struct {
	Script scripts.Script
	// New is set for a script being created; it may belong to an organization of the
	// switcher's list.
	New bool
	// PartnerWide offers a script for every organization of the user's partner.
	PartnerWide bool
	OrgID       string
	Note        string
	Error       *apperr.Error
}

func (f scriptForm) HasOS(os string) bool {
	for _, o := range f.Script.OSTypes {
		if o == os {
			return true
		}
	}
	return false
}

func (c *Console) scriptNew(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-script"); err != nil {
		return err
	}
	f := scriptForm{New: true, Script: scripts.Script{Language: "bash", OSTypes: []string{"linux"}, TimeoutSeconds: scripts.DefaultTimeout,
		RunAs: scripts.RunAsSystem}, OrgID: c.currentOrg(r)}
	return c.scriptEditor(w, r, http.StatusOK, f)
}

func (c *Console) scriptEdit(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "update-script"); err != nil {
		return err
	}
	sc, err := c.Scripts.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.scriptEditor(w, r, http.StatusOK, scriptForm{Script: sc})
}

func (c *Console) scriptEditor(w http.ResponseWriter, r *http.Request, status int, f scriptForm) error {
	f.PartnerWide = f.New && access.PrincipalFrom(r.Context()).Scope.Level == access.LevelPartner
	title := "New script"
	if !f.New {
		title = "Edit " + f.Script.Name
	}
	return c.render(w, r, status, "script-edit", "", view{Title: title, Section: "scripts", Data: f})
}

// scriptInput reads the editor's form.
func scriptInput(form url.Values) (scripts.ScriptInput, error) {
	in := scripts.ScriptInput{Name: form.Get("name"), Description: form.Get("description"), Language: form.Get("language"),
		Content: strings.ReplaceAll(form.Get("content"), "\r\n", "\n"), RunAs: form.Get("runAs"), OSTypes: form["osTypes"],
		VersionNote: form.Get("versionNote")}
	if t := form.Get("timeoutSeconds"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil {
			return in, apperr.Invalid("timeoutSeconds", "timeoutSeconds must be a whole number of seconds")
		}
		in.TimeoutSeconds = n
	}
	return in, nil
}

// formScript shows what was sent back in the editor after a refusal.
func formScript(base scripts.Script, in scripts.ScriptInput) scripts.Script {
	base.Name, base.Description, base.Language, base.Content = in.Name, in.Description, in.Language, in.Content
	base.RunAs, base.OSTypes, base.TimeoutSeconds = in.RunAs, in.OSTypes, in.TimeoutSeconds
	return base
}

func (c *Console) scriptCreate(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-script"); err != nil {
		return err
	}
	in, err := scriptInput(r.PostForm)
	if err == nil {
		in.OrgID = r.PostFormValue("orgId")
		var sc scripts.Script
		if sc, err = c.Scripts.Create(r.Context(), in); err == nil {
			http.Redirect(w, r, "/scripts/"+sc.ID, http.StatusSeeOther)
			return nil
		}
	}
	return c.refused(w, r, err, scriptForm{New: true, Script: formScript(scripts.Script{}, in), OrgID: r.PostFormValue("orgId"),
		Note: in.VersionNote})
}

// scriptUpdate saves the editor's changes as a new version; what the editor does not show
// (parameters, the exit-code mapping, category and tags) is kept.
func (c *Console) scriptUpdate(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "update-script"); err != nil {
		return err
	}
	sc, err := c.Scripts.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	in, err := scriptInput(r.PostForm)
	if err == nil {
		in.Parameters, in.ExitCodeSeverityMapping, in.Tags = sc.Parameters, sc.ExitCodeSeverityMapping, sc.Tags
		if sc.CategoryID != nil {
			in.CategoryID = *sc.CategoryID
		}
		if _, err = c.Scripts.Update(r.Context(), sc.ID, in); err == nil {
			http.Redirect(w, r, "/scripts/"+sc.ID, http.StatusSeeOther)
			return nil
		}
	}
	return c.refused(w, r, err, scriptForm{Script: formScript(sc, in), Note: in.VersionNote})
}

// refused shows the editor again with the API's refusal above it, what was typed kept; an
// error that is not a refusal of the input goes to the error page.
func (c *Console) refused(w http.ResponseWriter, r *http.Request, err error, f scriptForm) error {
	ae, ok := apperr.As(err)
	if !ok || (ae.Kind != apperr.KindInvalid && ae.Kind != apperr.KindConflict) {
		return err
	}
	f.Error = ae
	return c.scriptEditor(w, r, httpapi.StatusOf(ae), f)
}
