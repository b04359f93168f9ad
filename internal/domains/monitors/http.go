package monitors

import (
	"context"
	"net/http"
	"time"

	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
	"gale/internal/domains/systemtools"
	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type monitorIDPath struct {
	ID string `path:"id" format:"uuid"`
}

type monitorOutput struct{ Body Monitor }

type monitorCreateInput struct{ Body MonitorInput }

type monitorUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body MonitorUpdate
}

type monitorListInput struct {
	httpapi.PageQuery
	OrgID   string `query:"orgId" format:"uuid"`
	SiteID  string `query:"siteId" format:"uuid"`
	Type    string `query:"type" enum:"icmp_ping,tcp_port,http_check,dns_check,service_check"`
	Status  string `query:"status" enum:"online,offline,degraded,unknown"`
	Enabled string `query:"enabled" enum:"true,false"`
	Search  string `query:"search" maxLength:"200" doc:"Monitors whose name or target contains this text (any case)."`
}

type monitorResultOutput struct{ Body MonitorResult }

type monitorTestInput struct {
	ID   string `path:"id" format:"uuid"`
	Body *MonitorTestInput
}

type monitorResultsInput struct {
	ID     string    `path:"id" format:"uuid"`
	From   time.Time `query:"from" doc:"Results checked at this time or later."`
	To     time.Time `query:"to" doc:"Results checked before this time."`
	Limit  int       `query:"limit" minimum:"1" doc:"Page size; default 100, at most 1000 (larger is clamped)."`
	Cursor string    `query:"cursor" doc:"Opaque cursor from the previous page's pagination.cursor."`
}

type monitorDashboardInput struct {
	OrgID string `query:"orgId" format:"uuid"`
}

type monitorDashboardOutput struct{ Body MonitorDashboard }

type monitorAlertsInput struct {
	httpapi.PageQuery
	Status    string `query:"status" enum:"active,acknowledged,suppressed,resolved,dismissed" doc:"Default: every status but dismissed."`
	Severity  string `query:"severity" enum:"critical,high,medium,low,info"`
	MonitorID string `query:"monitorId" format:"uuid"`
	OrgID     string `query:"orgId" format:"uuid"`
}

type monitorOwnAlertsInput struct {
	httpapi.PageQuery
	MonitorID string `path:"monitorId" format:"uuid"`
	Status    string `query:"status" enum:"active,acknowledged,suppressed,resolved,dismissed" doc:"Default: every status but dismissed."`
	Severity  string `query:"severity" enum:"critical,high,medium,low,info"`
}

type monitorAlertActInput struct {
	ID   string `path:"id" format:"uuid"`
	Body struct {
		Status string     `json:"status" enum:"acknowledged,resolved,suppressed"`
		Note   *string    `json:"note,omitempty" maxLength:"2000" doc:"resolved: the resolution note." multiline:"true"`
		Until  *time.Time `json:"until,omitempty" doc:"suppressed: when the suppression ends; absent: until someone acts."`
	}
}

type monitorAlertOutput struct{ Body alerts.Alert }

func one(v string) []string {
	if v == "" {
		return nil
	}
	return []string{v}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Register adds the /monitors routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Monitors"
	const agent = " The check runs on an online agent of the monitor's site (else of its organization; a service check on its device): " +
		"409 " + devices.CodeNoProbeAgent + " when none is online, 503 " + systemtools.CodeAgentOffline + " when it has no live connection, " +
		"504 AGENT_TIMEOUT when it does not answer in time."
	route := func(id, method, path string, perm access.Perm, summary, desc string, errors ...int) httpapi.Route {
		return httpapi.Route{ID: id, Method: method, Path: path, Tag: tag, Permission: perm, Summary: summary, Description: desc, Errors: errors}
	}
	httpapi.Register(api, route("list-monitors", http.MethodGet, "/monitors", access.MonitorsRead, "List monitors", "Monitors in scope, newest first."),
		func(ctx context.Context, in *monitorListInput) (*httpapi.ListBody[Monitor], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			f := ListFilter{OrgID: in.OrgID, SiteID: in.SiteID, Type: in.Type, Status: in.Status, Search: in.Search}
			if in.Enabled != "" {
				e := in.Enabled == "true"
				f.Enabled = &e
			}
			rows, next, total, err := s.List(ctx, f, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	create := route("create-monitor", http.MethodPost, "/monitors", access.MonitorsWrite, "Create a monitor",
		"An enabled monitor is checked at once, then every intervalSeconds. Each field's rules are in the API notes; a wrong field is a 400 naming it.")
	create.Status = http.StatusCreated
	httpapi.Register(api, create, func(ctx context.Context, in *monitorCreateInput) (*monitorOutput, error) {
		m, err := s.Create(ctx, in.Body)
		return &monitorOutput{m}, err
	})
	httpapi.Register(api, route("get-monitors-dashboard", http.MethodGet, "/monitors/dashboard", access.MonitorsRead, "Monitor dashboard",
		"Monitors in scope by status and by type, their open alerts by severity, and the average response time of the online ones."),
		func(ctx context.Context, in *monitorDashboardInput) (*monitorDashboardOutput, error) {
			d, err := s.Dashboard(ctx, in.OrgID)
			return &monitorDashboardOutput{d}, err
		})
	httpapi.Register(api, route("get-monitor", http.MethodGet, "/monitors/{id}", access.MonitorsRead, "Get a monitor", "", http.StatusNotFound),
		func(ctx context.Context, in *monitorIDPath) (*monitorOutput, error) {
			m, err := s.Get(ctx, in.ID)
			return &monitorOutput{m}, err
		})
	httpapi.Register(api, route("update-monitor", http.MethodPatch, "/monitors/{id}", access.MonitorsWrite, "Change a monitor",
		"Changes the fields sent. A change of what is checked (type, target, config, interval, site) or enabling makes it due at once and its status unknown "+
			"until then, and resolves its open alerts; disabling resolves them too.", http.StatusNotFound),
		func(ctx context.Context, in *monitorUpdateInput) (*monitorOutput, error) {
			m, err := s.Update(ctx, in.ID, in.Body)
			return &monitorOutput{m}, err
		})
	del := route("delete-monitor", http.MethodDelete, "/monitors/{id}", access.MonitorsDelete, "Delete a monitor",
		"Deletes the monitor with its results; its open alerts are resolved.", http.StatusNotFound)
	del.Status = http.StatusNoContent
	httpapi.Register(api, del, func(ctx context.Context, in *monitorIDPath) (*struct{}, error) {
		return nil, s.Delete(ctx, in.ID)
	})
	httpapi.Register(api, route("check-monitor", http.MethodPost, "/monitors/{id}/check", access.MonitorsWrite, "Check a monitor now",
		"Runs the check now and stores its result like a scheduled one (status, alerts)."+agent,
		http.StatusNotFound, http.StatusConflict, http.StatusServiceUnavailable, http.StatusGatewayTimeout),
		func(ctx context.Context, in *monitorIDPath) (*monitorResultOutput, error) {
			r, err := s.Check(ctx, in.ID)
			return &monitorResultOutput{r}, err
		})
	httpapi.Register(api, route("test-monitor", http.MethodPost, "/monitors/{id}/test", access.MonitorsWrite, "Test a monitor",
		"Runs the check now and returns its result without storing anything. The optional body overrides type, target, config, "+
			"timeoutSeconds or siteId, to try an edit before saving it."+agent,
		http.StatusNotFound, http.StatusConflict, http.StatusServiceUnavailable, http.StatusGatewayTimeout),
		func(ctx context.Context, in *monitorTestInput) (*monitorResultOutput, error) {
			var body MonitorTestInput
			if in.Body != nil {
				body = *in.Body
			}
			r, err := s.Test(ctx, in.ID, body)
			return &monitorResultOutput{r}, err
		})
	httpapi.Register(api, route("list-monitor-results", http.MethodGet, "/monitors/{id}/results", access.MonitorsRead, "List a monitor's results",
		"Stored results checked in [from, to), newest first.", http.StatusNotFound),
		func(ctx context.Context, in *monitorResultsInput) (*httpapi.ListBody[MonitorResult], error) {
			page, err := httpapi.PageQuery{Limit: in.Limit, Cursor: in.Cursor}.Normalize(maxResultsPage)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.Results(ctx, in.ID, ResultFilter{From: timePtr(in.From), To: timePtr(in.To)}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, route("list-monitor-alerts", http.MethodGet, "/monitors/alerts", access.MonitorsRead, "List monitor alerts",
		"Alerts raised by monitors in scope, newest first."),
		func(ctx context.Context, in *monitorAlertsInput) (*httpapi.ListBody[alerts.Alert], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.Alerts(ctx, AlertFilter{Statuses: one(in.Status), Severities: one(in.Severity), MonitorID: in.MonitorID,
				OrgID: in.OrgID}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, route("list-monitor-own-alerts", http.MethodGet, "/monitors/{monitorId}/alerts", access.MonitorsRead,
		"List a monitor's alerts", "Newest first.", http.StatusNotFound),
		func(ctx context.Context, in *monitorOwnAlertsInput) (*httpapi.ListBody[alerts.Alert], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.MonitorAlerts(ctx, in.MonitorID, AlertFilter{Statuses: one(in.Status), Severities: one(in.Severity)}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, route("act-on-monitor-alert", http.MethodPatch, "/monitors/alerts/{id}", access.MonitorsWrite, "Acknowledge, resolve or suppress a monitor alert",
		"Moves the alert through the alert state machine: 409 when it cannot go there (already resolved, or moved by someone else first). "+
			"An alert not raised by a monitor is 404.", http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *monitorAlertActInput) (*monitorAlertOutput, error) {
			x, err := s.ActOnAlert(ctx, in.ID, in.Body.Status, alerts.ActionInput{Note: in.Body.Note, Until: in.Body.Until})
			return &monitorAlertOutput{x}, err
		})
	dismiss := route("dismiss-monitor-alert", http.MethodDelete, "/monitors/alerts/{id}", access.MonitorsDelete, "Dismiss a monitor alert",
		"Dismisses the alert (hidden from lists unless asked for by status): 409 when it is dismissed already. An alert not raised by a monitor is 404.",
		http.StatusNotFound, http.StatusConflict)
	dismiss.Status = http.StatusNoContent
	httpapi.Register(api, dismiss, func(ctx context.Context, in *monitorIDPath) (*struct{}, error) {
		return nil, s.DismissAlert(ctx, in.ID)
	})
}
