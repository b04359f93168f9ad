package audit

import (
	"context"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type entryOutput struct{ Body LogEntry }

type listInput struct {
	httpapi.PageQuery
	Filters
}

type searchInput struct {
	httpapi.PageQuery
	Filters
	Q string `query:"q" required:"true" minLength:"2" maxLength:"200" doc:"Text matched case-insensitively against action, resource name, type and ID, actor email and request ID."`
}

type exportInput struct {
	Filters
	Format string `query:"format" enum:"csv,json" default:"csv"`
}

type exportBody struct {
	Format  string   `json:"format,omitempty" enum:"csv,json" default:"csv"`
	Filters *Filters `json:"filters,omitempty"`
}

type exportPostInput struct{ Body exportBody }

type periodQuery struct {
	From string `query:"from" maxLength:"64" doc:"RFC 3339 time, inclusive; default 30 days before to."`
	To   string `query:"to" maxLength:"64" doc:"RFC 3339 time, exclusive; default now."`
}

type activityOutput struct {
	Body struct {
		From time.Time       `json:"from"`
		To   time.Time       `json:"to"`
		Data []ActorActivity `json:"data"`
	}
}

type securityEventsInput struct {
	httpapi.PageQuery
	Result string `query:"result" enum:"success,failure,denied"`
	From   string `query:"from" maxLength:"64" doc:"RFC 3339 time; entries at or after it."`
	To     string `query:"to" maxLength:"64" doc:"RFC 3339 time; entries before it."`
}

type complianceOutput struct{ Body Compliance }

type statsInput struct {
	Days int `query:"days" minimum:"1" default:"14" doc:"Days of perDay, today included; default 14, values above 90 are clamped to 90."`
}

type statsOutput struct{ Body Stats }

func (l *Log) list(ctx context.Context, pq httpapi.PageQuery, c Criteria) (*httpapi.ListBody[LogEntry], error) {
	page, err := pq.Normalize(httpapi.MaxPageSize)
	if err != nil {
		return nil, err
	}
	rows, next, total, err := l.List(ctx, c, page)
	if err != nil {
		return nil, err
	}
	return httpapi.ListPage(rows, next, page, total), nil
}

// exportStream validates the request and returns the streamed export of entries in the
// caller's scope.
func (l *Log) exportStream(ctx context.Context, f Filters, format string) (*huma.StreamResponse, error) {
	c, err := f.Criteria()
	if err != nil {
		return nil, err
	}
	if format == "" {
		format = FormatCSV
	}
	scope := access.ScopeFrom(ctx)
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		contentType := "text/csv; charset=utf-8"
		if format == FormatJSON {
			contentType = "application/json"
		}
		hctx.SetHeader("Content-Type", contentType)
		hctx.SetHeader("Content-Disposition", `attachment; filename="`+ExportFilename(format, l.clock.Now())+`"`)
		hctx.SetHeader("Cache-Control", "no-store")
		hctx.SetStatus(http.StatusOK)
		n, err := l.Export(ctx, scope, c, format, hctx.BodyWriter())
		entry := Entry{Action: "audit.export", ResourceType: "audit_log", Result: ResultSuccess,
			PartnerID: scope.PartnerID, OrgID: scope.OrgID, Details: map[string]any{"format": format, "rows": n, "filters": f}}
		if err != nil {
			entry.Result = ResultFailure
			l.logger.ErrorContext(ctx, "audit export failed", "rows", n, "error", err,
				"requestId", access.RequestFrom(ctx).ID)
		}
		// Who took a copy of the log is itself worth knowing.
		l.Security(ctx, entry)
	}}, nil
}

// Register adds the read-only /audit routes. None of them changes or deletes an entry.
func (l *Log) Register(api *httpapi.Server) {
	const tag = "Audit"
	filterDoc := "Filters: actorId, actorType, action (exact), actionPrefix, resourceType, resourceId, category, result, " +
		"orgId, from (inclusive) and to (exclusive, RFC 3339)."
	listDoc := filterDoc + " Newest first; cursor paging (default 100, at most 500), or legacy page and limit (with total)."

	list := func(ctx context.Context, in *listInput) (*httpapi.ListBody[LogEntry], error) {
		c, err := in.Filters.Criteria()
		if err != nil {
			return nil, err
		}
		return l.list(ctx, in.PageQuery, c)
	}
	httpapi.Register(api, httpapi.Route{ID: "list-audit", Method: http.MethodGet, Path: "/audit", Tag: tag,
		Permission: access.AuditRead, Summary: "List audit entries", Description: "Same as GET /audit/logs. " + listDoc}, list)
	httpapi.Register(api, httpapi.Route{ID: "list-audit-logs", Method: http.MethodGet, Path: "/audit/logs", Tag: tag,
		Permission: access.AuditRead, Summary: "List audit entries", Description: "Entries in the caller's scope. " + listDoc}, list)
	httpapi.Register(api, httpapi.Route{ID: "get-audit-log", Method: http.MethodGet, Path: "/audit/logs/{id}", Tag: tag,
		Permission: access.AuditRead, Summary: "Get an audit entry"},
		func(ctx context.Context, in *idPath) (*entryOutput, error) {
			e, err := l.Get(ctx, in.ID)
			return &entryOutput{e}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "search-audit", Method: http.MethodGet, Path: "/audit/search", Tag: tag,
		Permission: access.AuditRead, Summary: "Search audit entries", Description: "q matches action, resource name, type and ID, " +
			"actor email and request ID, case-insensitively. " + listDoc},
		func(ctx context.Context, in *searchInput) (*httpapi.ListBody[LogEntry], error) {
			c, err := in.Filters.Criteria()
			if err != nil {
				return nil, err
			}
			c.Search = in.Q
			return l.list(ctx, in.PageQuery, c)
		})

	exportDoc := "Streams the entries in the caller's scope that match the filters, newest first, as CSV (a header row, " +
		"RFC 4180 quoting, details as a JSON string column; cells starting with = + - @ get a leading apostrophe so " +
		"spreadsheets do not run them) or as one JSON array. At most " + strconv.Itoa(MaxExportRows) +
		" rows per export: narrow from/to to export more."
	httpapi.Register(api, httpapi.Route{ID: "export-audit", Method: http.MethodGet, Path: "/audit/export", Tag: tag,
		Permission: access.AuditExport, Summary: "Export audit entries", Description: exportDoc + " " + filterDoc},
		func(ctx context.Context, in *exportInput) (*huma.StreamResponse, error) {
			return l.exportStream(ctx, in.Filters, in.Format)
		})
	httpapi.Register(api, httpapi.Route{ID: "export-audit-filtered", Method: http.MethodPost, Path: "/audit/export", Tag: tag,
		Permission: access.AuditExport, Summary: "Export audit entries with filters in the body",
		Description: exportDoc + " The body's filters take the same fields as the query of GET /audit/export."},
		func(ctx context.Context, in *exportPostInput) (*huma.StreamResponse, error) {
			var f Filters
			if in.Body.Filters != nil {
				f = *in.Body.Filters
			}
			return l.exportStream(ctx, f, in.Body.Format)
		})
	documentExport(api)

	httpapi.Register(api, httpapi.Route{ID: "audit-user-activity", Method: http.MethodGet, Path: "/audit/reports/user-activity", Tag: tag,
		Permission: access.AuditRead, Summary: "Activity per actor",
		Description: "Per actor in the period (default the last 30 days): entries, changes, security events, failures " +
			"(failure or denied) and the last activity, most active first."},
		func(ctx context.Context, in *periodQuery) (*activityOutput, error) {
			p, err := ReportPeriod(in.From, in.To, l.clock.Now())
			if err != nil {
				return nil, err
			}
			rows, err := l.UserActivity(ctx, p)
			if err != nil {
				return nil, err
			}
			out := &activityOutput{}
			out.Body.From, out.Body.To, out.Body.Data = p.From, p.To, rows
			return out, nil
		})
	httpapi.Register(api, httpapi.Route{ID: "audit-security-events", Method: http.MethodGet, Path: "/audit/reports/security-events", Tag: tag,
		Permission: access.AuditRead, Summary: "Security events",
		Description: "Entries of category security (sign-ins, failed sign-ins, refusals, MFA changes), newest first, " +
			"paged like GET /audit/logs; filter by result, from and to."},
		func(ctx context.Context, in *securityEventsInput) (*httpapi.ListBody[LogEntry], error) {
			c, err := Filters{Category: CategorySecurity, Result: in.Result, From: in.From, To: in.To}.Criteria()
			if err != nil {
				return nil, err
			}
			return l.list(ctx, in.PageQuery, c)
		})
	httpapi.Register(api, httpapi.Route{ID: "audit-compliance", Method: http.MethodGet, Path: "/audit/reports/compliance", Tag: tag,
		Permission: access.AuditRead, Summary: "Compliance summary",
		Description: "For the period (default the last 30 days): events, changes, security events, failed sign-ins, " +
			"denied requests, and the MFA adoption of the active users in scope (as of now)."},
		func(ctx context.Context, in *periodQuery) (*complianceOutput, error) {
			p, err := ReportPeriod(in.From, in.To, l.clock.Now())
			if err != nil {
				return nil, err
			}
			c, err := l.Compliance(ctx, p)
			return &complianceOutput{c}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "audit-stats", Method: http.MethodGet, Path: "/audit/stats", Tag: tag,
		Permission: access.AuditRead, Summary: "Audit statistics",
		Description: "Counts of all entries in scope by category and result, the 10 most frequent actions, and entries per UTC day."},
		func(ctx context.Context, in *statsInput) (*statsOutput, error) {
			days := min(max(in.Days, 1), MaxStatsDays)
			st, err := l.Stats(ctx, days, l.clock.Now())
			return &statsOutput{st}, err
		})
}

// documentExport says in the OpenAPI document what the export operations return, which
// huma cannot infer from a stream.
func documentExport(api *httpapi.Server) {
	item := api.API.OpenAPI().Paths["/audit/export"]
	if item == nil {
		return
	}
	entry := api.API.OpenAPI().Components.Schemas.Schema(reflect.TypeOf(LogEntry{}), true, "")
	for _, op := range []*huma.Operation{item.Get, item.Post} {
		if op == nil {
			continue
		}
		resp := op.Responses[strconv.Itoa(http.StatusOK)]
		if resp == nil {
			resp = &huma.Response{}
			op.Responses[strconv.Itoa(http.StatusOK)] = resp
		}
		resp.Description = "The export, as an attachment (Content-Disposition)."
		resp.Content = map[string]*huma.MediaType{
			"text/csv":         {Schema: &huma.Schema{Type: "string"}},
			"application/json": {Schema: &huma.Schema{Type: "array", Items: entry}},
		}
	}
}
