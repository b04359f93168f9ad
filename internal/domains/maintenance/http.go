package maintenance

import (
	"context"
	"net/http"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type maintenanceIDPath struct {
	ID string `path:"id" format:"uuid"`
}

type maintenanceWindowOutput struct{ Body MaintenanceWindow }

type maintenanceOccurrenceOutput struct{ Body MaintenanceOccurrence }

type maintenanceCreateInput struct{ Body MaintenanceWindowInput }

type maintenanceUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body MaintenanceWindowUpdate
}

type maintenanceWindowsInput struct {
	httpapi.PageQuery
	OrgID  string `query:"orgId" format:"uuid"`
	Status string `query:"status" enum:"active,cancelled"`
}

type maintenanceOccurrencesInput struct {
	httpapi.PageQuery
	WindowID string    `query:"windowId" format:"uuid"`
	OrgID    string    `query:"orgId" format:"uuid"`
	Status   string    `query:"status" enum:"scheduled,active,completed,cancelled"`
	From     time.Time `query:"from" doc:"Only occurrences ending after this instant."`
	To       time.Time `query:"to" doc:"Only occurrences starting before this instant."`
}

type maintenanceWindowOccurrencesInput struct {
	httpapi.PageQuery
	ID     string    `path:"id" format:"uuid"`
	Status string    `query:"status" enum:"scheduled,active,completed,cancelled"`
	From   time.Time `query:"from" doc:"Only occurrences ending after this instant."`
	To     time.Time `query:"to" doc:"Only occurrences starting before this instant."`
}

type maintenanceActiveInput struct {
	httpapi.PageQuery
	OrgID string `query:"orgId" format:"uuid"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Register adds the /maintenance routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Maintenance windows"
	notFound := []int{http.StatusNotFound}
	conflict := []int{http.StatusNotFound, http.StatusConflict}
	httpapi.Register(api, httpapi.Route{ID: "list-maintenance-windows", Method: http.MethodGet, Path: "/maintenance/windows", Tag: tag,
		Permission: access.MaintenanceRead, Summary: "List maintenance windows", Description: "Windows in scope, newest first."},
		func(ctx context.Context, in *maintenanceWindowsInput) (*httpapi.ListBody[MaintenanceWindow], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListWindows(ctx, WindowFilter{OrgID: in.OrgID, Status: in.Status}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-maintenance-window", Method: http.MethodPost, Path: "/maintenance/windows", Tag: tag,
		Permission: access.MaintenanceWrite, Status: http.StatusCreated, Summary: "Create a maintenance window",
		Description: "startTime and endTime are the first occurrence, read as wall-clock times in timezone; recurrence repeats it " +
			"(see the API notes for daylight-saving changes and month ends). Occurrences of the next 90 days are written at once. " +
			"Target IDs must be sites, groups or devices of the window's organization."},
		func(ctx context.Context, in *maintenanceCreateInput) (*maintenanceWindowOutput, error) {
			w, err := s.CreateWindow(ctx, in.Body)
			return &maintenanceWindowOutput{w}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-maintenance-window", Method: http.MethodGet, Path: "/maintenance/windows/{id}", Tag: tag,
		Permission: access.MaintenanceRead, Summary: "Get a maintenance window", Errors: notFound},
		func(ctx context.Context, in *maintenanceIDPath) (*maintenanceWindowOutput, error) {
			w, err := s.GetWindow(ctx, in.ID)
			return &maintenanceWindowOutput{w}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-maintenance-window", Method: http.MethodPatch, Path: "/maintenance/windows/{id}",
		Tag: tag, Permission: access.MaintenanceWrite, Summary: "Change a maintenance window",
		Description: "Absent fields stay. Scheduled occurrences are written anew from the changed window; active and completed ones " +
			"stay. A cancelled window: 409 " + CodeWindowCancelled + ".", Errors: conflict},
		func(ctx context.Context, in *maintenanceUpdateInput) (*maintenanceWindowOutput, error) {
			w, err := s.UpdateWindow(ctx, in.ID, in.Body)
			return &maintenanceWindowOutput{w}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-maintenance-window", Method: http.MethodDelete, Path: "/maintenance/windows/{id}",
		Tag: tag, Permission: access.MaintenanceWrite, Status: http.StatusNoContent, Summary: "Delete a maintenance window",
		Description: "With its occurrences. Refused while one of them is active (409 " + CodeWindowActive + "): end it first.",
		Errors:      conflict},
		func(ctx context.Context, in *maintenanceIDPath) (*struct{}, error) {
			return nil, s.DeleteWindow(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "cancel-maintenance-window", Method: http.MethodPost, Path: "/maintenance/windows/{id}/cancel",
		Tag: tag, Permission: access.MaintenanceWrite, Summary: "Cancel a maintenance window",
		Description: "Its scheduled occurrences are cancelled and no more are written; an active one runs to its end. Cancelled " +
			"already: 409 " + CodeWindowCancelled + ".", Errors: conflict},
		func(ctx context.Context, in *maintenanceIDPath) (*maintenanceWindowOutput, error) {
			w, err := s.CancelWindow(ctx, in.ID)
			return &maintenanceWindowOutput{w}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-maintenance-window-occurrences", Method: http.MethodGet,
		Path: "/maintenance/windows/{id}/occurrences", Tag: tag, Permission: access.MaintenanceRead,
		Summary: "List a window's occurrences", Description: "By start.", Errors: notFound},
		func(ctx context.Context, in *maintenanceWindowOccurrencesInput) (*httpapi.ListBody[MaintenanceOccurrence], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListWindowOccurrences(ctx, in.ID, OccurrenceFilter{Status: in.Status, From: timePtr(in.From),
				To: timePtr(in.To)}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "list-maintenance-occurrences", Method: http.MethodGet, Path: "/maintenance/occurrences",
		Tag: tag, Permission: access.MaintenanceRead, Summary: "List maintenance occurrences",
		Description: "Occurrences in scope, by start; from and to keep those overlapping [from, to)."},
		func(ctx context.Context, in *maintenanceOccurrencesInput) (*httpapi.ListBody[MaintenanceOccurrence], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListOccurrences(ctx, OccurrenceFilter{WindowID: in.WindowID, OrgID: in.OrgID, Status: in.Status,
				From: timePtr(in.From), To: timePtr(in.To)}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "get-maintenance-occurrence", Method: http.MethodGet, Path: "/maintenance/occurrences/{id}",
		Tag: tag, Permission: access.MaintenanceRead, Summary: "Get a maintenance occurrence", Errors: notFound},
		func(ctx context.Context, in *maintenanceIDPath) (*maintenanceOccurrenceOutput, error) {
			o, err := s.GetOccurrence(ctx, in.ID)
			return &maintenanceOccurrenceOutput{o}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "start-maintenance-occurrence", Method: http.MethodPost,
		Path: "/maintenance/occurrences/{id}/start", Tag: tag, Permission: access.MaintenanceWrite, Summary: "Start an occurrence now",
		Description: "A scheduled occurrence becomes active now, until its end. Not scheduled (also the loser of two concurrent " +
			"starts): 409 " + CodeOccurrenceNotPlanned + ".", Errors: conflict},
		func(ctx context.Context, in *maintenanceIDPath) (*maintenanceOccurrenceOutput, error) {
			o, err := s.StartOccurrence(ctx, in.ID)
			return &maintenanceOccurrenceOutput{o}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "end-maintenance-occurrence", Method: http.MethodPost,
		Path: "/maintenance/occurrences/{id}/end", Tag: tag, Permission: access.MaintenanceWrite, Summary: "End an occurrence now",
		Description: "An active occurrence completes now and is not started again. Not active: 409 " + CodeOccurrenceNotActive + ".",
		Errors:      conflict},
		func(ctx context.Context, in *maintenanceIDPath) (*maintenanceOccurrenceOutput, error) {
			o, err := s.EndOccurrence(ctx, in.ID)
			return &maintenanceOccurrenceOutput{o}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-active-maintenance", Method: http.MethodGet, Path: "/maintenance/active", Tag: tag,
		Permission: access.MaintenanceRead, Summary: "Windows in effect now",
		Description: "The windows in scope with an active occurrence, each with it."},
		func(ctx context.Context, in *maintenanceActiveInput) (*httpapi.ListBody[MaintenanceActive], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListActive(ctx, in.OrgID, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
}
