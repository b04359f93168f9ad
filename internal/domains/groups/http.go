package groups

import (
	"gale/internal/platform/access"

	"context"
	"encoding/json"
	"net/http"

	"gale/internal/platform/httpapi"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type memberPath struct {
	ID       string `path:"id" format:"uuid"`
	DeviceID string `path:"deviceId" format:"uuid"`
}

type groupOutput struct{ Body Group }

type createInput struct{ Body NewGroup }

type updateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body GroupUpdate
}

type listInput struct {
	httpapi.PageQuery
	OrgID  string `query:"orgId" format:"uuid"`
	Type   string `query:"type" enum:"static,dynamic"`
	Search string `query:"search" maxLength:"200" doc:"Matches the name."`
}

type membersInput struct {
	httpapi.PageQuery
	ID string `path:"id" format:"uuid"`
}

type addInput struct {
	ID   string `path:"id" format:"uuid"`
	Body struct {
		DeviceIDs []string `json:"deviceIds" minItems:"1" maxItems:"500" doc:"1 to 500 device IDs of the group's organization."`
	}
}

type addOutput struct{ Body AddResult }

type memberOutput struct{ Body Member }

type previewInput struct {
	ID    string `path:"id" format:"uuid"`
	Limit int    `query:"limit" minimum:"1" doc:"Most matching devices listed; default 100, a value above 500 is clamped to 500. count covers them all."`
	Body  *struct {
		Filter json.RawMessage `json:"filter,omitempty" doc:"A filter to try instead of the group's own (not saved)."`
	}
}

type previewOutput struct{ Body Preview }

type logInput struct {
	httpapi.PageQuery
	ID       string `path:"id" format:"uuid"`
	DeviceID string `query:"deviceId" format:"uuid" doc:"Only this device's entries."`
}

// Register adds the /groups routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Device groups"
	httpapi.Register(api, httpapi.Route{ID: "list-groups", Method: http.MethodGet, Path: "/groups", Tag: tag,
		Permission: access.DevicesRead, Summary: "List device groups",
		Description: "Groups of organizations in scope, by name, each with its deviceCount."},
		func(ctx context.Context, in *listInput) (*httpapi.ListBody[Group], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.List(ctx, ListFilter{OrgID: in.OrgID, Type: in.Type, Search: in.Search}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-group", Method: http.MethodPost, Path: "/groups", Tag: tag,
		Permission: access.DevicesWrite, Status: http.StatusCreated, Summary: "Create a device group",
		Description: "A static group is filled by hand; a dynamic group's members are the organization's devices matching " +
			"its filter, computed at once. Names are unique per organization ignoring case (409)."},
		func(ctx context.Context, in *createInput) (*groupOutput, error) {
			g, err := s.Create(ctx, in.Body)
			return &groupOutput{g}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-group", Method: http.MethodGet, Path: "/groups/{id}", Tag: tag,
		Permission: access.DevicesRead, Summary: "Get a device group"},
		func(ctx context.Context, in *idPath) (*groupOutput, error) {
			g, err := s.Get(ctx, in.ID)
			return &groupOutput{g}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-group", Method: http.MethodPatch, Path: "/groups/{id}", Tag: tag,
		Permission: access.DevicesWrite, Summary: "Change a device group",
		Description: "type is immutable. A new filter recomputes the membership at once; each change is logged as \"group filter changed\"."},
		func(ctx context.Context, in *updateInput) (*groupOutput, error) {
			g, err := s.Update(ctx, in.ID, in.Body)
			return &groupOutput{g}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-group", Method: http.MethodDelete, Path: "/groups/{id}", Tag: tag,
		Permission: access.DevicesWrite, Status: http.StatusNoContent, Summary: "Delete a device group",
		Description: "The devices stay; the group's memberships and membership log go with it."},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.Delete(ctx, in.ID)
		})

	httpapi.Register(api, httpapi.Route{ID: "list-group-devices", Method: http.MethodGet, Path: "/groups/{id}/devices", Tag: tag,
		Permission: access.DevicesRead, Summary: "List a group's devices",
		Description: "Members by hostname, with source (static: by hand; dynamic: matches the filter) and pinned."},
		func(ctx context.Context, in *membersInput) (*httpapi.ListBody[Member], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.Members(ctx, in.ID, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "add-group-devices", Method: http.MethodPost, Path: "/groups/{id}/devices", Tag: tag,
		Permission: access.DevicesWrite, Summary: "Add devices to a static group",
		Description: "Answers per device: added, skipped (already a member) or failed (no such device in scope, decommissioned, " +
			"or of another organization). A dynamic group is refused (400): pin devices into it instead."},
		func(ctx context.Context, in *addInput) (*addOutput, error) {
			r, err := s.AddDevices(ctx, in.ID, in.Body.DeviceIDs)
			return &addOutput{r}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "remove-group-device", Method: http.MethodDelete, Path: "/groups/{id}/devices/{deviceId}",
		Tag: tag, Permission: access.DevicesWrite, Status: http.StatusNoContent, Summary: "Remove a device from a static group",
		Description: "404 when the device is not a member. A dynamic group is refused (400): its members follow its filter."},
		func(ctx context.Context, in *memberPath) (*struct{}, error) {
			return nil, s.RemoveDevice(ctx, in.ID, in.DeviceID)
		})
	httpapi.Register(api, httpapi.Route{ID: "preview-group", Method: http.MethodPost, Path: "/groups/{id}/preview", Tag: tag,
		Permission: access.DevicesRead, Summary: "Preview a dynamic group's membership",
		Description: "The devices of the group's organization that the filter (the body's, else the group's) matches now, with " +
			"their count. Changes nothing, so it needs only read permission."},
		func(ctx context.Context, in *previewInput) (*previewOutput, error) {
			var raw json.RawMessage
			if in.Body != nil {
				raw = in.Body.Filter
			}
			limit := in.Limit
			if limit == 0 {
				limit = httpapi.DefaultPageSize
			}
			limit = min(limit, httpapi.MaxPageSize)
			p, err := s.Preview(ctx, in.ID, raw, limit)
			return &previewOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "pin-group-device", Method: http.MethodPost, Path: "/groups/{id}/devices/{deviceId}/pin",
		Tag: tag, Permission: access.DevicesWrite, Summary: "Pin a device in a dynamic group",
		Description: "The device stays a member whatever the filter says; it joins now if it was not a member. Static groups: 400."},
		func(ctx context.Context, in *memberPath) (*memberOutput, error) {
			m, err := s.Pin(ctx, in.ID, in.DeviceID)
			return &memberOutput{m}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "unpin-group-device", Method: http.MethodDelete, Path: "/groups/{id}/devices/{deviceId}/pin",
		Tag: tag, Permission: access.DevicesWrite, Status: http.StatusNoContent, Summary: "Unpin a device in a dynamic group",
		Description: "The device follows the filter again: it leaves at once when it does not match. Static groups: 400."},
		func(ctx context.Context, in *memberPath) (*struct{}, error) {
			return nil, s.Unpin(ctx, in.ID, in.DeviceID)
		})
	httpapi.Register(api, httpapi.Route{ID: "list-group-membership-log", Method: http.MethodGet, Path: "/groups/{id}/membership-log",
		Tag: tag, Permission: access.DevicesRead, Summary: "A group's membership log",
		Description: "Every join, leave, pin and unpin, newest first, with its reason and actor."},
		func(ctx context.Context, in *logInput) (*httpapi.ListBody[MembershipEvent], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.MembershipLog(ctx, in.ID, in.DeviceID, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
}
