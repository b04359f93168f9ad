package notifications

import (
	"context"
	"net/http"

	"gale/internal/platform/httpapi"
)

type listInput struct {
	httpapi.PageQuery
	Unread bool `query:"unread" doc:"Only unread notifications."`
}

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type markBody struct {
	Read bool `json:"read" doc:"true marks read (keeping the first read time), false unread."`
}

type markInput struct {
	ID   string `path:"id" format:"uuid"`
	Body markBody
}

type countOutput struct {
	Body struct {
		Count int `json:"count"`
	}
}

type clearOutput struct {
	Body struct {
		Deleted int `json:"deleted"`
	}
}

// Register adds the /notifications routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Notifications"
	const who = "Signed-in users only: an API key gets 403. "
	httpapi.Register(api, httpapi.Route{ID: "list-notifications", Method: http.MethodGet, Path: "/notifications", Tag: tag,
		Summary: "List my notifications", Description: who + "Newest first; unread=true keeps unread ones."},
		func(ctx context.Context, in *listInput) (*httpapi.ListBody[Notification], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.List(ctx, in.Unread, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "count-unread-notifications", Method: http.MethodGet, Path: "/notifications/unread-count",
		Tag: tag, Summary: "Count my unread notifications", Description: who},
		func(ctx context.Context, _ *struct{}) (*countOutput, error) {
			n, err := s.UnreadCount(ctx)
			out := &countOutput{}
			out.Body.Count = n
			return out, err
		})
	httpapi.Register(api, httpapi.Route{ID: "mark-notification", Method: http.MethodPatch, Path: "/notifications/{id}", Tag: tag,
		Summary: "Mark a notification read or unread", Description: who + "Body {read: true|false}. Another user's notification is 404.",
		Errors: []int{404}},
		func(ctx context.Context, in *markInput) (*struct{ Body Notification }, error) {
			n, err := s.MarkRead(ctx, in.ID, in.Body.Read)
			return &struct{ Body Notification }{n}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-notification", Method: http.MethodDelete, Path: "/notifications/{id}", Tag: tag,
		Status: http.StatusNoContent, Summary: "Delete a notification", Description: who + "Another user's notification is 404.",
		Errors: []int{404}},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.Delete(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "clear-notifications", Method: http.MethodDelete, Path: "/notifications", Tag: tag,
		Summary: "Delete all my notifications", Description: who + "Returns {deleted}."},
		func(ctx context.Context, _ *struct{}) (*clearOutput, error) {
			n, err := s.Clear(ctx)
			out := &clearOutput{}
			out.Body.Deleted = n
			return out, err
		})
}
