package mobile

import (
	"gale/internal/platform/access"

	"context"
	"net/http"

	"gale/internal/domains/alerts"
	"gale/internal/domains/devices"
	"gale/internal/domains/notifications"
	"gale/internal/platform/httpapi"
)

type registerInput struct{ Body notifications.TokenInput }

type unregisterInput struct {
	Body struct {
		Token string `json:"token" minLength:"1" maxLength:"4096"`
	}
}

type unregisterOutput struct {
	Body struct {
		Removed bool `json:"removed" doc:"false when the token was not registered to the caller."`
	}
}

type devicesInput struct {
	httpapi.PageQuery
	Search string `query:"search" maxLength:"200" doc:"Part of the hostname or display name."`
	Status string `query:"status" doc:"online, offline, ..."`
	OrgID  string `query:"orgId" format:"uuid"`
}

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type inboxInput struct{ httpapi.PageQuery }

type resolveInput struct {
	ID   string `path:"id" format:"uuid"`
	Body *struct {
		Note *string `json:"note,omitempty" maxLength:"2000" multiline:"true"`
	} `required:"false"`
}

type actionInput struct {
	ID   string `path:"id" format:"uuid"`
	Body DeviceAction
}

// Register adds the /mobile routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Mobile"
	const who = "Signed-in users only: an API key gets 403. "
	httpapi.Register(api, httpapi.Route{ID: "mobile-register-push", Method: http.MethodPost, Path: "/mobile/notifications/register",
		Tag: tag, Summary: "Register a phone's push token",
		Description: who + "Idempotent per token; a token registered by another user moves to the caller."},
		func(ctx context.Context, in *registerInput) (*struct{ Body notifications.PushToken }, error) {
			t, err := s.notifications.RegisterToken(ctx, in.Body)
			return &struct{ Body notifications.PushToken }{t}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "mobile-unregister-push", Method: http.MethodPost, Path: "/mobile/notifications/unregister",
		Tag: tag, Summary: "Unregister a phone's push token", Description: who + "Removes the caller's token; {removed}."},
		func(ctx context.Context, in *unregisterInput) (*unregisterOutput, error) {
			ok, err := s.notifications.UnregisterToken(ctx, in.Body.Token)
			out := &unregisterOutput{}
			out.Body.Removed = ok
			return out, err
		})
	httpapi.Register(api, httpapi.Route{ID: "mobile-list-devices", Method: http.MethodGet, Path: "/mobile/devices", Tag: tag,
		Permission: access.DevicesRead, Summary: "List devices for a phone",
		Description: who + "Compact rows by hostname (decommissioned excluded) with orgName and openAlertCount; cursor paging; search."},
		func(ctx context.Context, in *devicesInput) (*httpapi.ListBody[DeviceRow], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListDevices(ctx, DeviceFilter{Search: in.Search, Status: in.Status, OrgID: in.OrgID}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "mobile-get-device", Method: http.MethodGet, Path: "/mobile/devices/{id}", Tag: tag,
		Permission: access.DevicesRead, Summary: "A device for a phone", Description: who + "The device, the last hour of metrics and its open alerts.",
		Errors: []int{404}},
		func(ctx context.Context, in *idPath) (*struct{ Body DeviceDetail }, error) {
			d, err := s.GetDevice(ctx, in.ID)
			return &struct{ Body DeviceDetail }{d}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "mobile-device-settings", Method: http.MethodGet, Path: "/mobile/devices/{id}/settings", Tag: tag,
		Permission: access.DevicesRead, Summary: "What the caller may do with a device",
		Description: who + "Actions allowed, organization and site names, agent version, watchdogStatus.", Errors: []int{404}},
		func(ctx context.Context, in *idPath) (*struct{ Body DeviceSettings }, error) {
			d, err := s.Settings(ctx, in.ID)
			return &struct{ Body DeviceSettings }{d}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "mobile-device-action", Method: http.MethodPost, Path: "/mobile/devices/{id}/actions", Tag: tag,
		Permission: access.DevicesExecute, Status: http.StatusCreated, Summary: "Run an action on a device",
		Description: who + "Queues the device command of the action and returns it, as POST /devices/{id}/commands: " +
			"a second refresh_inventory while one is pending is 409 ALREADY_PENDING.", Errors: []int{404, 409}},
		func(ctx context.Context, in *actionInput) (*struct{ Body devices.DeviceCommand }, error) {
			c, err := s.Act(ctx, in.ID, in.Body)
			return &struct{ Body devices.DeviceCommand }{c}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "mobile-alert-inbox", Method: http.MethodGet, Path: "/mobile/alerts/inbox", Tag: tag,
		Permission: access.AlertsRead, Summary: "Open alerts for a phone", Description: who + "Active, acknowledged and suppressed alerts, newest first."},
		func(ctx context.Context, in *inboxInput) (*httpapi.ListBody[alerts.Alert], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.Inbox(ctx, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "mobile-acknowledge-alert", Method: http.MethodPost, Path: "/mobile/alerts/{id}/acknowledge",
		Tag: tag, Permission: access.AlertsAcknowledge, Summary: "Acknowledge an alert", Errors: []int{404, 409},
		Description: who + "As POST /alerts/{id}/acknowledge: only from active, otherwise 409 CONFLICT."},
		func(ctx context.Context, in *idPath) (*struct{ Body alerts.Alert }, error) {
			x, err := s.Acknowledge(ctx, in.ID)
			return &struct{ Body alerts.Alert }{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "mobile-resolve-alert", Method: http.MethodPost, Path: "/mobile/alerts/{id}/resolve",
		Tag: tag, Permission: access.AlertsWrite, Summary: "Resolve an alert", Errors: []int{404, 409},
		Description: who + "As POST /alerts/{id}/resolve: a terminal alert gets 409 CONFLICT. Body {note?}."},
		func(ctx context.Context, in *resolveInput) (*struct{ Body alerts.Alert }, error) {
			var note *string
			if in.Body != nil {
				note = in.Body.Note
			}
			x, err := s.Resolve(ctx, in.ID, note)
			return &struct{ Body alerts.Alert }{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "mobile-summary", Method: http.MethodGet, Path: "/mobile/summary", Tag: tag,
		Permission: access.DevicesRead, Summary: "Counts for a phone's home screen",
		Description: who + "{devices: {total, online, offline}, alerts: {bySeverity, total}, unreadNotifications}; alert counts are zero without alerts:read."},
		func(ctx context.Context, _ *struct{}) (*struct{ Body HomeSummary }, error) {
			sum, err := s.GetSummary(ctx)
			return &struct{ Body HomeSummary }{sum}, err
		})
}
