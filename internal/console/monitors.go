package console

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"gale/internal/domains/alerts"
	"gale/internal/domains/monitors"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// monitorPageSize is the monitors list's page.
const monitorPageSize = 50

// monitorResultsShown is how many of a monitor's latest results its page lists.
const monitorResultsShown = 30

// monitorStatuses are the list's status tabs, in order.
var monitorStatuses = []string{"online", "offline", "degraded", "unknown"}

// monitorTypes name the kinds of monitors.
var monitorTypes = map[string]string{"icmp_ping": "Ping", "tcp_port": "TCP port", "http_check": "HTTP(S)", "dns_check": "DNS",
	"service_check": "Service"}

// monitorView is a monitor as the pages show it.
type monitorView struct{ monitors.Monitor }

// TypeName names the monitor's kind.
func (m monitorView) TypeName() string {
	if n, ok := monitorTypes[m.Type]; ok {
		return n
	}
	return m.Type
}

// Response is the last response time, "" without one.
func (m monitorView) Response() string { return responseText(m.LastResponseMs) }

// Where is what the monitor checks, with the port of a TCP check.
func (m monitorView) Where() string {
	if m.Type == "tcp_port" && m.Config.Port > 0 {
		return fmt.Sprintf("%s:%d", m.Target, m.Config.Port)
	}
	return m.Target
}

// RuleText says when an alert rule raises its alert, and at which severity.
func (m monitorView) RuleText(r monitors.MonitorAlertRule) string {
	var when string
	switch r.Condition {
	case monitors.ConditionOffline:
		when = "offline"
	case monitors.ConditionDegraded:
		when = "degraded"
	case monitors.ConditionResponseTimeGT:
		when = "response time above " + responseText(r.Threshold)
	case monitors.ConditionConsecutiveFailures:
		when = "more failures in a row than "
		if r.Threshold != nil {
			when += fmt.Sprintf("%g", *r.Threshold)
		}
	default:
		when = r.Condition
	}
	return when + ": " + r.Severity
}

func responseText(ms *float64) string {
	if ms == nil {
		return ""
	}
	if *ms < 100 {
		return fmt.Sprintf("%.1f ms", *ms)
	}
	return fmt.Sprintf("%.0f ms", *ms)
}

// monitorListPage lists the monitors in scope with their current status.
type monitorListPage struct {
	Monitors []monitorView
	Status   string
	Search   string
	Next     string
	Counts   map[string]int
	All      int
	// CanCreate offers the form of a new monitor.
	CanCreate bool
}

func (c *Console) monitorList(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "list-monitors"); err != nil {
		return err
	}
	in := r.URL.Query()
	pg := monitorListPage{Status: in.Get("status"), Search: strings.TrimSpace(in.Get("q")), CanCreate: c.HTTP.Permits(ctx, "create-monitor")}
	if pg.Status != "" && !slices.Contains(monitorStatuses, pg.Status) {
		return apperr.Invalid("status", "online, offline, degraded or unknown")
	}
	if utf8.RuneCountInString(pg.Search) > 200 {
		return apperr.Invalid("q", "search for at most 200 characters")
	}
	org := c.currentOrg(r)
	list, next, _, err := c.Monitors.List(ctx, monitors.ListFilter{OrgID: org, Status: pg.Status, Search: pg.Search},
		store.Page{Limit: monitorPageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	for _, m := range list {
		pg.Monitors = append(pg.Monitors, monitorView{m})
	}
	pg.Next = nextPage(r, next)
	if c.HTTP.Permits(ctx, "get-monitors-dashboard") {
		d, err := c.Monitors.Dashboard(ctx, org)
		if err != nil {
			return err
		}
		pg.Counts, pg.All = d.ByStatus, d.Total
	}
	return c.render(w, r, http.StatusOK, "monitors", "", view{Title: "Monitors", Section: "monitors", Data: pg})
}

// monitorPage is a monitor's page: its definition, status, latest results and open alerts.
type monitorPage struct {
	monitorView
	Results             []monitorResult
	Alerts              []alerts.Alert
	CanWrite, CanDelete bool
}

// monitorResult is one stored result.
type monitorResult struct{ monitors.MonitorResult }

// Response is the result's response time, "" without one.
func (r monitorResult) Response() string { return responseText(r.ResponseMs) }

func (c *Console) monitorDetail(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "get-monitor"); err != nil {
		return err
	}
	m, err := c.Monitors.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := monitorPage{monitorView: monitorView{m}, CanWrite: c.HTTP.Permits(ctx, "update-monitor"), CanDelete: c.HTTP.Permits(ctx, "delete-monitor")}
	if err := c.monitorExtras(r, &pg); err != nil {
		return err
	}
	return c.render(w, r, http.StatusOK, "monitor", targeted(r, "monitor-state"), view{Title: m.Name, Section: "monitors", Data: pg})
}

// monitorExtras reads a monitor's latest results and open alerts, as far as the user may.
func (c *Console) monitorExtras(r *http.Request, pg *monitorPage) error {
	ctx := r.Context()
	if c.HTTP.Permits(ctx, "list-monitor-results") {
		list, _, _, err := c.Monitors.Results(ctx, pg.ID, monitors.ResultFilter{}, store.Page{Limit: monitorResultsShown})
		if err != nil {
			return err
		}
		pg.Results = pg.Results[:0]
		for _, x := range list {
			pg.Results = append(pg.Results, monitorResult{x})
		}
	}
	if c.HTTP.Permits(ctx, "list-monitor-own-alerts") {
		var err error
		if pg.Alerts, _, _, err = c.Monitors.MonitorAlerts(ctx, pg.ID, monitors.AlertFilter{Statuses: openAlertStatuses},
			store.Page{Limit: 20}); err != nil {
			return err
		}
	}
	return nil
}

// monitorCheck runs the monitor's check now and stores its result, as the API's check does;
// an htmx request gets the page's status region back, with the new result.
func (c *Console) monitorCheck(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "check-monitor"); err != nil {
		return err
	}
	if _, err := c.Monitors.Check(ctx, r.PathValue("id")); err != nil {
		return err
	}
	if r.Header.Get("HX-Request") == "" {
		http.Redirect(w, r, "/monitors/"+r.PathValue("id"), http.StatusSeeOther)
		return nil
	}
	m, err := c.Monitors.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := monitorPage{monitorView: monitorView{m}, CanWrite: c.HTTP.Permits(ctx, "update-monitor"), CanDelete: c.HTTP.Permits(ctx, "delete-monitor")}
	if err := c.monitorExtras(r, &pg); err != nil {
		return err
	}
	return c.render(w, r, http.StatusOK, "monitor", "monitor-state", view{Data: pg})
}

func (c *Console) monitorEnable(w http.ResponseWriter, r *http.Request) error {
	return c.monitorSetEnabled(w, r, true)
}

func (c *Console) monitorDisable(w http.ResponseWriter, r *http.Request) error {
	return c.monitorSetEnabled(w, r, false)
}

// monitorSetEnabled resumes or pauses a monitor, as a PATCH of enabled does.
func (c *Console) monitorSetEnabled(w http.ResponseWriter, r *http.Request, on bool) error {
	if err := c.allow(r.Context(), "update-monitor"); err != nil {
		return err
	}
	m, err := c.Monitors.Update(r.Context(), r.PathValue("id"), monitors.MonitorUpdate{Enabled: &on})
	if err != nil {
		return err
	}
	seeOther(w, r, "/monitors/"+m.ID)
	return nil
}

func (c *Console) monitorDelete(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "delete-monitor"); err != nil {
		return err
	}
	if err := c.Monitors.Delete(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	seeOther(w, r, "/monitors")
	return nil
}
