package console

import (
	"context"
	"net/http"

	"gale/internal/domains/alerts"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// openAlertStatuses are the statuses of alerts that still need someone.
var openAlertStatuses = []string{alerts.StatusActive, alerts.StatusAcknowledged}

// alertPageSize is the inbox's page.
const alertPageSize = 50

// alertListPage is the inbox's data.
type alertListPage struct {
	Rows     []alertRow
	Status   string
	Severity string
	Next     string
	Self     string
	Summary  alerts.Summary
	CanAct   bool
}

// alertStatusTabs are the inbox's status filters: open (active and acknowledged) by default.
var alertStatusTabs = map[string][]string{
	"":             openAlertStatuses,
	"active":       {alerts.StatusActive},
	"acknowledged": {alerts.StatusAcknowledged},
	"resolved":     {alerts.StatusResolved},
}

func (c *Console) alertList(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "list-alerts"); err != nil {
		return err
	}
	in := r.URL.Query()
	pg := alertListPage{Status: in.Get("status"), Severity: in.Get("severity"), Self: r.URL.RequestURI(),
		CanAct: c.HTTP.Permits(r.Context(), "acknowledge-alert")}
	statuses, ok := alertStatusTabs[pg.Status]
	if !ok {
		return apperr.Invalid("status", "show open, active, acknowledged or resolved alerts")
	}
	f := alerts.ListFilter{Statuses: statuses, OrgID: c.currentOrg(r)}
	if pg.Severity != "" {
		f.Severities = []string{pg.Severity}
	}
	list, next, _, err := c.Alerts.List(r.Context(), f, store.Page{Limit: alertPageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	names := c.alertDevices(r.Context(), list)
	for _, a := range list {
		pg.Rows = append(pg.Rows, alertRow{Alert: a, CanAct: pg.CanAct, Device: names[deref(a.DeviceID)]})
	}
	pg.Next = nextPage(r, next)
	if pg.Summary, err = c.Alerts.Summarize(r.Context(), f.OrgID); err != nil {
		return err
	}
	return c.render(w, r, http.StatusOK, "alerts", targeted(r, "alert-table"), view{Title: "Alerts", Section: "alerts", Data: pg})
}

// alertDetailPage is an alert page's data.
type alertDetailPage struct {
	Alert  alerts.Alert
	CanAct bool
}

// alertDetail is where the links of notifications (PUBLIC_URL/alerts/{id}) land.
func (c *Console) alertDetail(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "get-alert"); err != nil {
		return err
	}
	a, err := c.Alerts.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := alertDetailPage{Alert: a, CanAct: c.HTTP.Permits(r.Context(), "acknowledge-alert")}
	return c.render(w, r, http.StatusOK, "alert", "", view{Title: a.Title, Section: "alerts", Data: pg})
}

// alertActions are the inbox's actions and the API operations whose rules they follow.
var alertActions = map[string]string{alerts.ActionAcknowledge: "acknowledge-alert", alerts.ActionResolve: "resolve-alert"}

// alertAct acknowledges or resolves an alert: from the inbox its row is replaced, from the
// alert's page the page is shown again.
func (c *Console) alertAct(w http.ResponseWriter, r *http.Request) error {
	action := r.PathValue("action")
	op, ok := alertActions[action]
	if !ok {
		return apperr.NotFound("page")
	}
	if err := c.allow(r.Context(), op); err != nil {
		return err
	}
	var in alerts.ActionInput
	if note := r.PostFormValue("note"); note != "" {
		in.Note = &note
	}
	a, err := c.Alerts.Act(r.Context(), r.PathValue("id"), action, in)
	if err != nil {
		return err
	}
	if r.Header.Get("HX-Request") != "" {
		row := alertRow{Alert: a, CanAct: true, Device: c.alertDevices(r.Context(), []alerts.Alert{a})[deref(a.DeviceID)]}
		return c.render(w, r, http.StatusOK, "alerts", "alert-row", view{Data: row})
	}
	http.Redirect(w, r, "/alerts/"+a.ID, http.StatusSeeOther)
	return nil
}

// alertRow is one row of the inbox.
type alertRow struct {
	Alert  alerts.Alert
	CanAct bool
	// Device names the alert's device; "" when the user may not list devices.
	Device string
}

// alertDevices names the devices of alerts by ID (see deviceNames).
func (c *Console) alertDevices(ctx context.Context, list []alerts.Alert) map[string]string {
	var ids []string
	for _, a := range list {
		if a.DeviceID != nil {
			ids = append(ids, *a.DeviceID)
		}
	}
	return c.deviceNames(ctx, ids)
}

// maxBulkAlerts is how many alerts one bulk action takes, as the API's bulk operation.
const maxBulkAlerts = 100

// bulkOutcome is the notice a bulk action answers.
type bulkOutcome struct {
	Action                string
	Done, Changed, Absent int
}

// alertBulk acknowledges or resolves the selected alerts, each on its own as the API's bulk
// operation does; the inbox then refreshes itself.
func (c *Console) alertBulk(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return apperr.Invalid("form", "the form could not be read")
	}
	action := r.PostForm.Get("action")
	op, ok := alertActions[action]
	if !ok {
		return apperr.Invalid("action", "acknowledge or resolve the selected alerts")
	}
	if err := c.allow(r.Context(), op); err != nil {
		return err
	}
	ids := r.PostForm["ids"]
	if len(ids) == 0 {
		return apperr.Invalid("ids", "select the alerts first")
	}
	if len(ids) > maxBulkAlerts {
		return apperr.Invalid("ids", "select at most 100 alerts at a time")
	}
	results, err := c.Alerts.Bulk(r.Context(), action, ids, alerts.ActionInput{})
	if err != nil {
		return err
	}
	out := bulkOutcome{Action: action}
	for _, res := range results {
		switch res.Status {
		case "ok":
			out.Done++
		case "conflict":
			out.Changed++
		default:
			out.Absent++
		}
	}
	toNotice(w)
	return c.render(w, r, http.StatusOK, "alerts", "bulk-outcome", view{Data: out})
}
