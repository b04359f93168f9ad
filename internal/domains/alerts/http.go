package alerts

import (
	"context"
	"net/http"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type ruleOutput struct{ Body Rule }

type createRuleInput struct{ Body NewRule }

type updateRuleInput struct {
	ID   string `path:"id" format:"uuid"`
	Body RuleUpdate
}

type listRulesInput struct {
	httpapi.PageQuery
	OrgID string `query:"orgId" format:"uuid" doc:"Rules that apply to this organization: its own and partner-wide ones."`
}

type testOutput struct{ Body RuleTest }

type listInput struct {
	httpapi.PageQuery
	Status   string `query:"status" doc:"Comma list of active, acknowledged, suppressed, resolved, dismissed. Default: every status but dismissed."`
	Severity string `query:"severity" doc:"Comma list of critical, high, medium, low, info."`
	OrgID    string `query:"orgId" format:"uuid"`
	DeviceID string `query:"deviceId" format:"uuid"`
	RuleID   string `query:"ruleId" format:"uuid"`
	// SourceType and SourceID keep the alerts of a kind of source or of one source.
	SourceType string `query:"sourceType" enum:"device,monitor,snmp_device"`
	SourceID   string `query:"sourceId" format:"uuid"`
}

type summaryInput struct {
	OrgID string `query:"orgId" format:"uuid"`
}

type alertOutput struct{ Body Alert }

type resolveBody struct {
	Note *string `json:"note,omitempty" maxLength:"2000" doc:"Resolution note." multiline:"true"`
}

type resolveInput struct {
	ID   string       `path:"id" format:"uuid"`
	Body *resolveBody `required:"false"`
}

type suppressBody struct {
	Until *time.Time `json:"until,omitempty" doc:"When the suppression ends; absent: until someone acts."`
}

type suppressInput struct {
	ID   string        `path:"id" format:"uuid"`
	Body *suppressBody `required:"false"`
}

type bulkBody struct {
	Action   string     `json:"action" enum:"acknowledge,resolve,suppress,dismiss"`
	AlertIDs []string   `json:"alertIds" minItems:"1" maxItems:"100" doc:"1 to 100 alert IDs."`
	Note     *string    `json:"note,omitempty" maxLength:"2000" doc:"resolve: the resolution note." multiline:"true"`
	Until    *time.Time `json:"until,omitempty" doc:"suppress: when the suppression ends."`
}

type bulkInput struct{ Body bulkBody }

type bulkOutput struct {
	Body struct {
		Results []AlertBulkResult `json:"results"`
	}
}

// Register adds the /alerts routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Alerts"
	httpapi.Register(api, httpapi.Route{ID: "list-alert-rules", Method: http.MethodGet, Path: "/alerts/rules", Tag: tag,
		Permission: access.AlertsRead, Summary: "List alert rules", Description: "Rules in scope, by name."},
		func(ctx context.Context, in *listRulesInput) (*httpapi.ListBody[Rule], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListRules(ctx, in.OrgID, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-alert-rule", Method: http.MethodPost, Path: "/alerts/rules", Tag: tag,
		Permission: access.AlertsWrite, Status: http.StatusCreated, Summary: "Create an alert rule",
		Description: "Validation problems come back together in details (400 VALIDATION_ERROR)."},
		func(ctx context.Context, in *createRuleInput) (*ruleOutput, error) {
			r, err := s.CreateRule(ctx, in.Body)
			return &ruleOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-alert-rule", Method: http.MethodGet, Path: "/alerts/rules/{id}", Tag: tag,
		Permission: access.AlertsRead, Summary: "Get an alert rule", Errors: []int{404}},
		func(ctx context.Context, in *idPath) (*ruleOutput, error) {
			r, err := s.GetRule(ctx, in.ID)
			return &ruleOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-alert-rule", Method: http.MethodPatch, Path: "/alerts/rules/{id}", Tag: tag,
		Permission: access.AlertsWrite, Summary: "Change an alert rule", Errors: []int{404},
		Description: "Partner-wide rules are changed only by callers reaching the whole partner (403 otherwise)."},
		func(ctx context.Context, in *updateRuleInput) (*ruleOutput, error) {
			r, err := s.UpdateRule(ctx, in.ID, in.Body)
			return &ruleOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-alert-rule", Method: http.MethodDelete, Path: "/alerts/rules/{id}", Tag: tag,
		Permission: access.AlertsWrite, Status: http.StatusNoContent, Summary: "Delete an alert rule", Errors: []int{404},
		Description: "The rule's alerts stay, with ruleId null."},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.DeleteRule(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "test-alert-rule", Method: http.MethodPost, Path: "/alerts/rules/{id}/test", Tag: tag,
		Permission: access.AlertsRead, Summary: "Test an alert rule", Errors: []int{404},
		Description: "Evaluates the rule now against its target devices and returns, per device, whether it would fire and the observed values. Creates nothing."},
		func(ctx context.Context, in *idPath) (*testOutput, error) {
			r, err := s.TestRule(ctx, in.ID)
			return &testOutput{r}, err
		})

	httpapi.Register(api, httpapi.Route{ID: "list-alerts", Method: http.MethodGet, Path: "/alerts", Tag: tag,
		Permission: access.AlertsRead, Summary: "List alerts",
		Description: "Newest first. Dismissed alerts are hidden unless status names dismissed."},
		func(ctx context.Context, in *listInput) (*httpapi.ListBody[Alert], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			f := ListFilter{OrgID: in.OrgID, DeviceID: in.DeviceID, RuleID: in.RuleID, SourceType: in.SourceType, SourceID: in.SourceID}
			if f.Statuses, err = splitList("status", in.Status, statuses); err != nil {
				return nil, err
			}
			if f.Severities, err = splitList("severity", in.Severity, severities); err != nil {
				return nil, err
			}
			rows, next, total, err := s.List(ctx, f, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "alerts-summary", Method: http.MethodGet, Path: "/alerts/summary", Tag: tag,
		Permission: access.AlertsRead, Summary: "Count open alerts", Description: "Open (active, acknowledged, suppressed) alerts in scope by status and by severity."},
		func(ctx context.Context, in *summaryInput) (*struct{ Body Summary }, error) {
			sum, err := s.Summarize(ctx, in.OrgID)
			return &struct{ Body Summary }{sum}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-alert", Method: http.MethodGet, Path: "/alerts/{id}", Tag: tag,
		Permission: access.AlertsRead, Summary: "Get an alert", Errors: []int{404}},
		func(ctx context.Context, in *idPath) (*alertOutput, error) {
			x, err := s.Get(ctx, in.ID)
			return &alertOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "acknowledge-alert", Method: http.MethodPost, Path: "/alerts/{id}/acknowledge", Tag: tag,
		Permission: access.AlertsAcknowledge, Summary: "Acknowledge an alert", Errors: []int{404, 409},
		Description: "Only from active; otherwise 409 CONFLICT (another caller or the auto-resolve evaluation moved it first)."},
		func(ctx context.Context, in *idPath) (*alertOutput, error) {
			x, err := s.Act(ctx, in.ID, ActionAcknowledge, ActionInput{})
			return &alertOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "resolve-alert", Method: http.MethodPost, Path: "/alerts/{id}/resolve", Tag: tag,
		Permission: access.AlertsWrite, Summary: "Resolve an alert", Errors: []int{404, 409},
		Description: "From active, acknowledged or suppressed; a terminal alert (resolved, dismissed) gets 409 CONFLICT. Body {note?}."},
		func(ctx context.Context, in *resolveInput) (*alertOutput, error) {
			var ai ActionInput
			if in.Body != nil {
				ai.Note = in.Body.Note
			}
			x, err := s.Act(ctx, in.ID, ActionResolve, ai)
			return &alertOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "suppress-alert", Method: http.MethodPost, Path: "/alerts/{id}/suppress", Tag: tag,
		Permission: access.AlertsWrite, Summary: "Suppress an alert", Errors: []int{404, 409},
		Description: "From active, acknowledged or suppressed; a terminal alert gets 409 CONFLICT. Body {until?} (future)."},
		func(ctx context.Context, in *suppressInput) (*alertOutput, error) {
			var ai ActionInput
			if in.Body != nil {
				ai.Until = in.Body.Until
			}
			x, err := s.Act(ctx, in.ID, ActionSuppress, ai)
			return &alertOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "dismiss-alert", Method: http.MethodPost, Path: "/alerts/{id}/dismiss", Tag: tag,
		Permission: access.AlertsWrite, Summary: "Dismiss an alert", Errors: []int{404, 409},
		Description: "From any status but dismissed, including resolved; dismissed is terminal and hidden from the default list. " +
			"A second dismiss gets 409 CONFLICT; dismissedAt and dismissedBy keep naming the first caller."},
		func(ctx context.Context, in *idPath) (*alertOutput, error) {
			x, err := s.Act(ctx, in.ID, ActionDismiss, ActionInput{})
			return &alertOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "bulk-alerts", Method: http.MethodPost, Path: "/alerts/bulk", Tag: tag,
		Permission: access.AlertsRead, Summary: "Act on up to 100 alerts",
		Description: "Applies the action to each alert in turn and reports per alert: ok (with the alert), conflict (409 of the single action) " +
			"or not_found. Needs alerts:acknowledge for acknowledge, alerts:write for the other actions."},
		func(ctx context.Context, in *bulkInput) (*bulkOutput, error) {
			perm := ActionPermission(in.Body.Action)
			if !access.PrincipalFrom(ctx).Can(perm) {
				return nil, apperr.Forbidden("missing permission " + string(perm))
			}
			res, err := s.Bulk(ctx, in.Body.Action, in.Body.AlertIDs, ActionInput{Note: in.Body.Note, Until: in.Body.Until})
			if err != nil {
				return nil, err
			}
			out := &bulkOutput{}
			out.Body.Results = res
			return out, nil
		})
}
