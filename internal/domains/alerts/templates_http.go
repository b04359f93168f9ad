package alerts

import (
	"gale/internal/platform/access"

	"context"
	"net/http"

	"gale/internal/platform/httpapi"
)

type templateOutput struct{ Body Template }

type createTemplateInput struct{ Body NewTemplate }

type updateTemplateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body TemplateUpdate
}

type templateListInput struct {
	httpapi.PageQuery
}

type builtInOutput struct {
	Body struct {
		Data []Template `json:"data"`
	}
}

type correlationsInput struct {
	AlertID string `query:"alertId" required:"true" format:"uuid" doc:"The alert whose group to find."`
	CorrelationQuery
}

type analyzeInput struct {
	Body *CorrelationQuery `required:"false"`
}

type groupsOutput struct {
	Body struct {
		Data []CorrelationGroup `json:"data"`
	}
}

// RegisterTemplates adds the /alert-templates routes: templates and correlation.
func (s *Service) RegisterTemplates(api *httpapi.Server) {
	const tag = "Alert templates"
	httpapi.Register(api, httpapi.Route{ID: "list-alert-templates", Method: http.MethodGet, Path: "/alert-templates/templates", Tag: tag,
		Permission: access.AlertsRead, Summary: "List custom alert templates",
		Description: "The custom templates in scope, by name; the built-in ones are at /alert-templates/templates/built-in."},
		func(ctx context.Context, in *templateListInput) (*httpapi.ListBody[Template], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListTemplates(ctx, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "list-built-in-alert-templates", Method: http.MethodGet, Path: "/alert-templates/templates/built-in",
		Tag: tag, Permission: access.AlertsRead, Summary: "List the built-in alert templates",
		Description: "High CPU, high memory, low disk space, disk almost full, device offline, agent silent, command failed, reboot failed. Fixed IDs; never change."},
		func(ctx context.Context, _ *struct{}) (*builtInOutput, error) {
			out := &builtInOutput{}
			out.Body.Data = BuiltInTemplates()
			return out, nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-alert-template", Method: http.MethodPost, Path: "/alert-templates/templates", Tag: tag,
		Permission: access.AlertsWrite, Status: http.StatusCreated, Summary: "Create an alert template",
		Description: "Conditions are validated as a rule's. A rule names a template with templateId."},
		func(ctx context.Context, in *createTemplateInput) (*templateOutput, error) {
			t, err := s.CreateTemplate(ctx, in.Body)
			return &templateOutput{t}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-alert-template", Method: http.MethodPatch, Path: "/alert-templates/templates/{id}", Tag: tag,
		Permission: access.AlertsWrite, Summary: "Change a custom alert template", Errors: []int{404},
		Description: "Built-in templates cannot change (403). Rules made from the template keep their own copy."},
		func(ctx context.Context, in *updateTemplateInput) (*templateOutput, error) {
			t, err := s.UpdateTemplate(ctx, in.ID, in.Body)
			return &templateOutput{t}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-alert-template", Method: http.MethodDelete, Path: "/alert-templates/templates/{id}", Tag: tag,
		Permission: access.AlertsWrite, Status: http.StatusNoContent, Summary: "Delete a custom alert template", Errors: []int{404}},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.DeleteTemplate(ctx, in.ID)
		})

	httpapi.Register(api, httpapi.Route{ID: "get-alert-correlation", Method: http.MethodGet, Path: "/alert-templates/correlations", Tag: tag,
		Permission: access.AlertsRead, Summary: "The correlation group of an alert", Errors: []int{404},
		Description: "The group the alert belongs to (resolved alerts included, last 7 days unless sinceHours says otherwise), or group null."},
		func(ctx context.Context, in *correlationsInput) (*struct{ Body AlertCorrelation }, error) {
			c, err := s.CorrelationOf(ctx, in.AlertID, in.CorrelationQuery)
			return &struct{ Body AlertCorrelation }{c}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-alert-correlation-groups", Method: http.MethodGet, Path: "/alert-templates/correlations/groups",
		Tag: tag, Permission: access.AlertsRead, Summary: "Groups of related open alerts",
		Description: "Alerts of one rule on several devices of one site, each triggered within windowMinutes of the previous (a site outage, say), largest groups first."},
		func(ctx context.Context, in *CorrelationQuery) (*groupsOutput, error) {
			res, err := s.Correlate(ctx, *in)
			if err != nil {
				return nil, err
			}
			out := &groupsOutput{}
			out.Body.Data = res.Groups
			return out, nil
		})
	httpapi.Register(api, httpapi.Route{ID: "analyze-alert-correlations", Method: http.MethodPost, Path: "/alert-templates/correlations/analyze",
		Tag: tag, Permission: access.AlertsRead, Summary: "Group related alerts now",
		Description: "Body {windowMinutes?, minAlerts?, sinceHours?, includeResolved?, orgId?}; answers the groups and how many alerts were analyzed. Stores nothing."},
		func(ctx context.Context, in *analyzeInput) (*struct{ Body CorrelationResult }, error) {
			var q CorrelationQuery
			if in.Body != nil {
				q = *in.Body
			}
			res, err := s.Correlate(ctx, q)
			return &struct{ Body CorrelationResult }{res}, err
		})
}
