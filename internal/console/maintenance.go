package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/groups"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
)

// maintenancePageSize is the windows list's page.
const maintenancePageSize = 50

// maintenanceOccurrencesShown is how many occurrences a window's page lists, from a week ago.
const maintenanceOccurrencesShown = 14

// maintenanceTargetChoices bounds the sites, groups and devices the form offers as targets.
const maintenanceTargetChoices = 200

// What a window's row says of it, from its status and its occurrence under way or next.
const (
	windowInEffect  = "active"
	windowUpcoming  = "upcoming"
	windowEnded     = "ended"
	windowCancelled = "cancelled"
)

// maintenanceWindow is a window with its occurrence under way or next (nil: none is left).
type maintenanceWindow struct {
	maintenance.MaintenanceWindow
	Next *maintenance.MaintenanceOccurrence
}

// State is active (an occurrence is under way), upcoming, ended (no occurrence left) or
// cancelled.
func (w maintenanceWindow) State() string {
	switch {
	case w.Next != nil && w.Next.Status == maintenance.Active:
		return windowInEffect
	case w.Status == maintenance.WindowCancelled:
		return windowCancelled
	case w.Next != nil:
		return windowUpcoming
	}
	return windowEnded
}

// Schedule says when the window's first occurrence is and how it repeats.
func (w maintenanceWindow) Schedule() string {
	start, end := wallText(w.StartTime), wallText(w.EndTime)
	if day, _, ok := strings.Cut(start, " "); ok {
		end = strings.TrimPrefix(end, day+" ")
	}
	s := start + " to " + end + " (" + w.Timezone + ")"
	switch w.Recurrence {
	case maintenance.Once:
		return s
	case maintenance.Custom:
		s += ", repeating " + store.Deref(w.RRule)
	default:
		s += ", repeating " + w.Recurrence
	}
	if w.RecurrenceEnd != nil {
		s += " until " + w.RecurrenceEnd.UTC().Format(timeLayout)
	}
	return s
}

// TargetsText says which devices the window covers.
func (w maintenanceWindow) TargetsText() string {
	if w.Targets.Type == maintenance.TargetAll {
		return "every device of the organization"
	}
	return targetsPhrase(devices.Targets{Type: w.Targets.Type, IDs: w.Targets.IDs}, false)
}

// Holds lists what the window holds back.
func (w maintenanceWindow) Holds() string {
	var out []string
	for _, h := range []struct {
		on   bool
		name string
	}{{w.SuppressAlerts, "alerts"}, {w.SuppressPatches, "patches"}, {w.SuppressAutomations, "automations"}, {w.SuppressScripts, "scripts"}} {
		if h.on {
			out = append(out, h.name)
		}
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}

// wallText shows a stored wall-clock time (YYYY-MM-DDTHH:MM:SS) as YYYY-MM-DD HH:MM.
func wallText(s string) string {
	if t, err := time.Parse("2006-01-02T15:04:05", s); err == nil {
		return t.Format("2006-01-02 15:04")
	}
	return s
}

// maintenanceListPage lists the windows in scope.
type maintenanceListPage struct {
	Windows   []maintenanceWindow
	Status    string
	Next      string
	CanCreate bool
}

func (c *Console) maintenanceList(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "list-maintenance-windows"); err != nil {
		return err
	}
	in := r.URL.Query()
	pg := maintenanceListPage{Status: in.Get("status"), CanCreate: c.HTTP.Permits(ctx, "create-maintenance-window")}
	if pg.Status != "" && pg.Status != maintenance.WindowActive && pg.Status != maintenance.WindowCancelled {
		return apperr.Invalid("status", "active or cancelled")
	}
	list, next, _, err := c.Maintenance.ListWindows(ctx, maintenance.WindowFilter{OrgID: c.currentOrg(r), Status: pg.Status},
		store.Page{Limit: maintenancePageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	ids := make([]string, len(list))
	for i, x := range list {
		ids[i] = x.ID
	}
	upcoming, err := c.Maintenance.NextOccurrences(ctx, ids)
	if err != nil {
		return err
	}
	for _, x := range list {
		row := maintenanceWindow{MaintenanceWindow: x}
		if o, ok := upcoming[x.ID]; ok {
			row.Next = &o
		}
		pg.Windows = append(pg.Windows, row)
	}
	pg.Next = nextPage(r, next)
	return c.render(w, r, http.StatusOK, "maintenance", "", view{Title: "Maintenance windows", Section: "maintenance", Data: pg})
}

// maintenancePage is a window's page: its definition, what it covers, its occurrences around
// now, and what may be done with them.
type maintenancePage struct {
	maintenanceWindow
	Occurrences []maintenance.MaintenanceOccurrence
	// Named are the names of the sites, groups or devices the window targets, as far as the
	// user may list them.
	Named    []string
	CanWrite bool
}

func (c *Console) maintenanceDetail(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "get-maintenance-window"); err != nil {
		return err
	}
	x, err := c.Maintenance.GetWindow(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := maintenancePage{maintenanceWindow: maintenanceWindow{MaintenanceWindow: x}, CanWrite: c.HTTP.Permits(ctx, "update-maintenance-window")}
	next, err := c.Maintenance.NextOccurrences(ctx, []string{x.ID})
	if err != nil {
		return err
	}
	if o, ok := next[x.ID]; ok {
		pg.Next = &o
	}
	if c.HTTP.Permits(ctx, "list-maintenance-window-occurrences") {
		from := c.clock.Now().UTC().Add(-7 * 24 * time.Hour)
		if pg.Occurrences, _, _, err = c.Maintenance.ListWindowOccurrences(ctx, x.ID, maintenance.OccurrenceFilter{From: &from},
			store.Page{Limit: maintenanceOccurrencesShown}); err != nil {
			return err
		}
	}
	if pg.Named, err = c.targetNames(r, x.OrgID, x.Targets); err != nil {
		return err
	}
	return c.render(w, r, http.StatusOK, "maintenance-window", "", view{Title: x.Name, Section: "maintenance", Data: pg})
}

// targetNames names the sites, groups or devices of an organization that targets list, those
// the user may list.
func (c *Console) targetNames(r *http.Request, orgID string, t maintenance.MaintenanceTargets) ([]string, error) {
	if len(t.IDs) == 0 {
		return nil, nil
	}
	choices, err := c.targetChoices(r, orgID)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for _, ch := range map[string][]targetChoice{maintenance.TargetSites: choices.Sites, maintenance.TargetGroups: choices.Groups,
		maintenance.TargetDevices: choices.Devices}[t.Type] {
		names[ch.ID] = ch.Name
	}
	var out []string
	for _, id := range t.IDs {
		if n, ok := names[id]; ok {
			out = append(out, n)
		}
	}
	return out, nil
}

// targetChoice is a site, group or device a window may target.
type targetChoice struct {
	ID, Name string
	Checked  bool
}

// targetChoices are the sites, groups and devices of an organization that a form offers.
type targetChoices struct {
	Sites, Groups, Devices []targetChoice
}

func (c *Console) targetChoices(r *http.Request, orgID string) (targetChoices, error) {
	ctx := r.Context()
	var out targetChoices
	page := store.Page{Limit: maintenanceTargetChoices}
	if c.HTTP.Permits(ctx, "list-sites") {
		sites, _, _, err := c.Tenancy.ListSites(ctx, tenancy.SiteListFilter{OrgID: orgID}, page)
		if err != nil {
			return out, err
		}
		for _, s := range sites {
			out.Sites = append(out.Sites, targetChoice{ID: s.ID, Name: s.Name})
		}
	}
	if c.HTTP.Permits(ctx, "list-groups") {
		list, _, _, err := c.Groups.List(ctx, groups.ListFilter{OrgID: orgID}, page)
		if err != nil {
			return out, err
		}
		for _, g := range list {
			out.Groups = append(out.Groups, targetChoice{ID: g.ID, Name: g.Name})
		}
	}
	if c.HTTP.Permits(ctx, "list-devices") {
		list, _, _, err := c.Devices.List(ctx, devices.ListFilter{OrgIDs: []string{orgID}}, page)
		if err != nil {
			return out, err
		}
		for _, d := range list {
			out.Devices = append(out.Devices, targetChoice{ID: d.ID, Name: d.Name()})
		}
	}
	return out, nil
}

// maintenanceForm is the new window's form, as typed.
type maintenanceForm struct {
	// OrgID is the organization the window is for: the user's own, the switcher's, or one
	// chosen in the form (which then offers only all its devices as targets).
	OrgID string
	// ChooseOrg offers the organizations of the switcher's list.
	ChooseOrg                            bool
	Name, Description                    string
	StartTime, EndTime, DurationMinutes  string
	Timezone, Recurrence, TargetType     string
	SuppressAlerts, SuppressPatches      bool
	SuppressAutomations, SuppressScripts bool
	Choices                              targetChoices
	Error                                *apperr.Error
}

// HasChoices tells whether the form offers sites, groups or devices to target.
func (f maintenanceForm) HasChoices() bool {
	return len(f.Choices.Sites)+len(f.Choices.Groups)+len(f.Choices.Devices) > 0
}

func (c *Console) maintenanceNew(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-maintenance-window"); err != nil {
		return err
	}
	f := maintenanceForm{Recurrence: maintenance.Once, TargetType: maintenance.TargetAll, SuppressAlerts: true, DurationMinutes: "60"}
	return c.maintenanceEditor(w, r, http.StatusOK, f)
}

// maintenanceEditor shows the form, with the organization and target choices filled in.
func (c *Console) maintenanceEditor(w http.ResponseWriter, r *http.Request, status int, f maintenanceForm) error {
	p := access.PrincipalFrom(r.Context())
	switch {
	case p.Scope.Level == access.LevelOrganization:
		f.OrgID = p.Scope.OrgID
	case c.currentOrg(r) != "":
		f.OrgID = c.currentOrg(r)
	default:
		f.ChooseOrg = true
	}
	if f.OrgID != "" {
		var err error
		if f.Choices, err = c.targetChoices(r, f.OrgID); err != nil {
			return err
		}
		if f.Timezone == "" && c.HTTP.Permits(r.Context(), "list-sites") {
			sites, _, _, err := c.Tenancy.ListSites(r.Context(), tenancy.SiteListFilter{OrgID: f.OrgID}, store.Page{Limit: 1})
			if err != nil {
				return err
			}
			if len(sites) > 0 {
				f.Timezone = sites[0].Timezone
			}
		}
		ids := r.PostForm
		mark := func(list []targetChoice, field string) {
			for i := range list {
				list[i].Checked = slices.Contains(ids[field], list[i].ID)
			}
		}
		mark(f.Choices.Sites, "siteIds")
		mark(f.Choices.Groups, "groupIds")
		mark(f.Choices.Devices, "deviceIds")
	}
	if f.Timezone == "" {
		f.Timezone = "UTC"
	}
	return c.render(w, r, status, "maintenance-new", "", view{Title: "New maintenance window", Section: "maintenance", Data: f})
}

// formWallLayouts are the date-times a form sends (datetime-local, with or without seconds).
var formWallLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02 15:04:05"}

func parseFormWall(s string) (time.Time, bool) {
	for _, l := range formWallLayouts {
		if t, err := time.Parse(l, strings.TrimSpace(s)); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// maintenanceInput reads the form into the API's create body: a start (now when left
// empty), and an end or a duration.
func (c *Console) maintenanceInput(form url.Values, f maintenanceForm) (maintenance.MaintenanceWindowInput, error) {
	in := maintenance.MaintenanceWindowInput{OrgID: form.Get("orgId"), Name: f.Name, Description: f.Description, Timezone: f.Timezone,
		Recurrence: f.Recurrence, Targets: maintenance.MaintenanceTargets{Type: f.TargetType},
		SuppressAlerts: &f.SuppressAlerts, SuppressPatches: &f.SuppressPatches, SuppressAutomations: &f.SuppressAutomations,
		SuppressScripts: &f.SuppressScripts}
	switch f.TargetType {
	case maintenance.TargetSites:
		in.Targets.IDs = form["siteIds"]
	case maintenance.TargetGroups:
		in.Targets.IDs = form["groupIds"]
	case maintenance.TargetDevices:
		in.Targets.IDs = form["deviceIds"]
	}
	var start time.Time
	if strings.TrimSpace(f.StartTime) == "" {
		loc, err := time.LoadLocation(f.Timezone)
		if err != nil || f.Timezone == "" || f.Timezone == "Local" {
			return in, apperr.Invalid("timezone", "an IANA time zone, such as Europe/Berlin")
		}
		start = c.clock.Now().In(loc).Truncate(time.Minute)
		start = time.Date(start.Year(), start.Month(), start.Day(), start.Hour(), start.Minute(), 0, 0, time.UTC)
	} else {
		var ok bool
		if start, ok = parseFormWall(f.StartTime); !ok {
			return in, apperr.Invalid("startTime", "a date and time, such as 2026-05-01T22:00")
		}
	}
	in.StartTime = start.Format("2006-01-02T15:04:05")
	switch {
	case strings.TrimSpace(f.EndTime) != "":
		end, ok := parseFormWall(f.EndTime)
		if !ok {
			return in, apperr.Invalid("endTime", "a date and time, such as 2026-05-02T02:00")
		}
		in.EndTime = end.Format("2006-01-02T15:04:05")
	case strings.TrimSpace(f.DurationMinutes) != "":
		n, err := strconv.Atoi(strings.TrimSpace(f.DurationMinutes))
		if err != nil || n < 1 {
			return in, apperr.Invalid("durationMinutes", "a whole number of minutes, at least 1")
		}
		if n > int(maintenance.MaxDuration/time.Minute) {
			return in, apperr.Invalid("durationMinutes", "at most 31 days (44640 minutes)")
		}
		in.EndTime = start.Add(time.Duration(n) * time.Minute).Format("2006-01-02T15:04:05")
	default:
		return in, apperr.Invalid("endTime", "give the end, or the duration in minutes")
	}
	return in, nil
}

func (c *Console) maintenanceCreate(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "create-maintenance-window"); err != nil {
		return err
	}
	form := r.PostForm
	f := maintenanceForm{Name: form.Get("name"), Description: form.Get("description"), StartTime: form.Get("startTime"),
		EndTime: form.Get("endTime"), DurationMinutes: form.Get("durationMinutes"), Timezone: strings.TrimSpace(form.Get("timezone")),
		Recurrence: form.Get("recurrence"), TargetType: form.Get("targets.type"), SuppressAlerts: form.Get("suppressAlerts") != "",
		SuppressPatches: form.Get("suppressPatches") != "", SuppressAutomations: form.Get("suppressAutomations") != "",
		SuppressScripts: form.Get("suppressScripts") != ""}
	if f.TargetType == "" {
		f.TargetType = maintenance.TargetAll
	}
	if f.Recurrence == "" {
		f.Recurrence = maintenance.Once
	}
	in, err := c.maintenanceInput(form, f)
	if err == nil {
		var x maintenance.MaintenanceWindow
		if x, err = c.Maintenance.CreateWindow(r.Context(), in); err == nil {
			http.Redirect(w, r, "/maintenance/"+x.ID, http.StatusSeeOther)
			return nil
		}
	}
	ae, ok := apperr.As(err)
	if !ok || (ae.Kind != apperr.KindInvalid && ae.Kind != apperr.KindConflict) {
		return err
	}
	f.Error = ae
	return c.maintenanceEditor(w, r, httpapi.StatusOf(ae), f)
}

func (c *Console) maintenanceCancel(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "cancel-maintenance-window"); err != nil {
		return err
	}
	x, err := c.Maintenance.CancelWindow(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	seeOther(w, r, "/maintenance/"+x.ID)
	return nil
}

func (c *Console) maintenanceDelete(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "delete-maintenance-window"); err != nil {
		return err
	}
	if err := c.Maintenance.DeleteWindow(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	seeOther(w, r, "/maintenance")
	return nil
}

func (c *Console) occurrenceStart(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "start-maintenance-occurrence"); err != nil {
		return err
	}
	o, err := c.Maintenance.StartOccurrence(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	seeOther(w, r, "/maintenance/"+o.WindowID)
	return nil
}

func (c *Console) occurrenceEnd(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "end-maintenance-occurrence"); err != nil {
		return err
	}
	o, err := c.Maintenance.EndOccurrence(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	seeOther(w, r, "/maintenance/"+o.WindowID)
	return nil
}
