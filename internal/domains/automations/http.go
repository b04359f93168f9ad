package automations

import (
	"context"
	"net/http"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type runPath struct {
	RunID string `path:"runId" format:"uuid"`
}

type listInput struct {
	httpapi.PageQuery
	OrgID       string `query:"orgId" format:"uuid"`
	TriggerType string `query:"triggerType" enum:"schedule,event,webhook,manual"`
	Enabled     string `query:"enabled" enum:"true,false"`
}

type automationOutput struct{ Body Automation }

type createInput struct{ Body AutomationInput }

type updateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body AutomationUpdate
}

type startInput struct {
	ID   string `path:"id" format:"uuid"`
	Body *AutomationRunStart
}

type runOutput struct{ Body AutomationRun }

type runsInput struct {
	httpapi.PageQuery
	ID     string `path:"id" format:"uuid"`
	Status string `query:"status" enum:"running,completed,failed,partial"`
}

type webhookInput struct {
	ID        string `path:"id" format:"uuid"`
	Timestamp string `header:"X-Gale-Timestamp" doc:"Unix milliseconds; within 5 minutes of the server's clock."`
	Signature string `header:"X-Gale-Signature" doc:"sha256=<hex HMAC-SHA256(secret, \"<timestamp>.<body>\")>."`
	RawBody   []byte
}

func (in startInput) start() AutomationRunStart {
	if in.Body == nil {
		return AutomationRunStart{}
	}
	return *in.Body
}

// Register adds the /automations routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Automations"
	httpapi.Register(api, httpapi.Route{ID: "list-automations", Method: http.MethodGet, Path: "/automations", Tag: tag,
		Permission: access.AutomationsRead, Summary: "List automations", Description: "Automations in scope, newest first."},
		func(ctx context.Context, in *listInput) (*httpapi.ListBody[Automation], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			f := ListFilter{OrgID: in.OrgID, TriggerType: in.TriggerType}
			if in.Enabled != "" {
				on := in.Enabled == "true"
				f.Enabled = &on
			}
			rows, next, total, err := s.List(ctx, f, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-automation", Method: http.MethodPost, Path: "/automations", Tag: tag,
		Permission: access.AutomationsWrite, Status: http.StatusCreated, Summary: "Create an automation",
		Description: "A trigger (schedule, event, webhook or manual), optional conditions, 1 to 20 actions in order and targets. " +
			"A webhook trigger's signing secret is in this answer only (trigger.secret). See the API notes."},
		func(ctx context.Context, in *createInput) (*automationOutput, error) {
			x, err := s.Create(ctx, in.Body)
			return &automationOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-automation-run", Method: http.MethodGet, Path: "/automations/runs/{runId}", Tag: tag,
		Permission: access.AutomationsRead, Summary: "Get an automation run", Description: "The run with its steps, per action and device."},
		func(ctx context.Context, in *runPath) (*runOutput, error) {
			r, err := s.GetRun(ctx, in.RunID)
			return &runOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-automation", Method: http.MethodGet, Path: "/automations/{id}", Tag: tag,
		Permission: access.AutomationsRead, Summary: "Get an automation"},
		func(ctx context.Context, in *idPath) (*automationOutput, error) {
			x, err := s.Get(ctx, in.ID)
			return &automationOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-automation", Method: http.MethodPatch, Path: "/automations/{id}", Tag: tag,
		Permission: access.AutomationsWrite, Summary: "Change an automation",
		Description: "Absent fields stay; runs already started keep the definition they started with. rotateSecret makes a new webhook secret."},
		func(ctx context.Context, in *updateInput) (*automationOutput, error) {
			x, err := s.Update(ctx, in.ID, in.Body)
			return &automationOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-automation", Method: http.MethodDelete, Path: "/automations/{id}", Tag: tag,
		Permission: access.AutomationsDelete, Status: http.StatusNoContent, Summary: "Delete an automation",
		Description: "With its runs. Refused while a run is running (409 AUTOMATION_RUNNING).", Errors: []int{http.StatusConflict}},
		func(ctx context.Context, in *idPath) (*struct{}, error) { return nil, s.Delete(ctx, in.ID) })
	httpapi.Register(api, httpapi.Route{ID: "trigger-automation", Method: http.MethodPost, Path: "/automations/{id}/trigger", Tag: tag,
		Permission: access.AutomationsExecute, Status: http.StatusAccepted, Summary: "Fire an automation as its trigger would",
		Description: "Starts a run with the conditions applied; a payload.deviceId narrows it to that device. A disabled automation is 400 " +
			"AUTOMATION_DISABLED; for an event trigger, a payload its filter would not let through is 422 TRIGGER_FILTER_MISMATCH.",
		Errors: []int{http.StatusUnprocessableEntity}},
		func(ctx context.Context, in *startInput) (*runOutput, error) {
			r, err := s.Start(ctx, in.ID, StartedByTrigger, in.start())
			return &runOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "run-automation", Method: http.MethodPost, Path: "/automations/{id}/run", Tag: tag,
		Permission: access.AutomationsExecute, Status: http.StatusAccepted, Summary: "Run an automation now",
		Description: "Starts a run on every target at once, without the conditions. A disabled automation is 400 AUTOMATION_DISABLED."},
		func(ctx context.Context, in *startInput) (*runOutput, error) {
			r, err := s.Start(ctx, in.ID, StartedByRun, in.start())
			return &runOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-automation-runs", Method: http.MethodGet, Path: "/automations/{id}/runs", Tag: tag,
		Permission: access.AutomationsRead, Summary: "List an automation's runs", Description: "Newest first, without their steps."},
		func(ctx context.Context, in *runsInput) (*httpapi.ListBody[AutomationRun], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListRuns(ctx, in.ID, in.Status, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "automation-webhook", Method: http.MethodPost, Path: "/automations/{id}/webhook", Tag: tag,
		Public: true, Status: http.StatusAccepted, MaxBodyBytes: 64 << 10, Summary: "Fire a webhook automation",
		Description: "No credential: the call is signed with the automation's secret (X-Gale-Signature over \"<X-Gale-Timestamp>.<body>\", " +
			"as Gale signs outbound webhooks), the timestamp within 5 minutes. A bad signature or a stale timestamp is 401; " +
			"the same signed call twice is 409 WEBHOOK_REPLAYED. The body, a JSON object (sent as application/json; {} for none), " +
			"is the run's payload.",
		Errors: []int{http.StatusUnauthorized, http.StatusConflict}},
		func(ctx context.Context, in *webhookInput) (*runOutput, error) {
			r, err := s.ReceiveWebhook(ctx, in.ID, in.Timestamp, in.Signature, in.RawBody)
			return &runOutput{r}, err
		})
}
