package devices

import (
	"gale/internal/platform/access"

	"context"
	"net/http"
	"strings"
	"time"

	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type listInput struct {
	Cursor                string `query:"cursor" doc:"nextCursor of the previous page."`
	Limit                 int    `query:"limit" minimum:"1" doc:"Page size. Cursor mode: default 50, a value above 500 is clamped to 500. Legacy page mode: default 50, clamped to 100."`
	Page                  int    `query:"page" minimum:"1" doc:"Legacy page number (1-based): answers {data, pagination} with the total."`
	Sort                  string `query:"sort" enum:"hostname,lastSeen,enrolled" doc:"Default hostname."`
	SortDir               string `query:"sortDir" enum:"asc,desc" doc:"Default asc."`
	OrgID                 string `query:"orgId" format:"uuid"`
	OrgIDs                string `query:"orgIds" doc:"Comma-separated organization IDs."`
	SiteIDs               string `query:"siteIds" doc:"Comma-separated site IDs."`
	GroupIDs              string `query:"groupIds" doc:"Comma-separated group IDs: devices in any of them."`
	Status                string `query:"status" enum:"pending,online,offline,decommissioned"`
	Search                string `query:"search" maxLength:"200" doc:"Matches any part of the hostname or display name, ignoring case."`
	OSType                string `query:"osType" enum:"linux,windows,macos" doc:"Gale extension: the devices of one operating system."`
	Tag                   string `query:"tag" maxLength:"64" doc:"Gale extension: the devices that carry this tag."`
	IncludeDecommissioned bool   `query:"includeDecommissioned"`
	IncludeTotal          bool   `query:"includeTotal" doc:"Cursor mode: also count every matching device."`
}

// DeviceList is the answer of GET /devices: {devices, nextCursor, limit, total?} in cursor
// mode, {data, pagination} in legacy page mode.
type DeviceList struct {
	Devices    *[]*Device          `json:"devices,omitempty" doc:"Cursor mode."`
	NextCursor *string             `json:"nextCursor,omitempty" doc:"Cursor mode: pass back as cursor; empty on the last page."`
	Limit      *int                `json:"limit,omitempty" doc:"Cursor mode: the page size used."`
	Total      *int                `json:"total,omitempty" doc:"Cursor mode with includeTotal."`
	Data       *[]*Device          `json:"data,omitempty" doc:"Legacy page mode."`
	Pagination *httpapi.Pagination `json:"pagination,omitempty" doc:"Legacy page mode."`
}

type deviceListOutput struct{ Body DeviceList }

type detailOutput struct{ Body Detail }

type deviceOutput struct{ Body Device }

type updateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body Update
}

type moveInput struct {
	ID   string `path:"id" format:"uuid"`
	Body struct {
		OrgID  string `json:"orgId" format:"uuid"`
		SiteID string `json:"siteId,omitempty" format:"uuid" doc:"Default: the organization's first site."`
	}
}

type provisionInput struct{ Body ProvisionInput }

type provisionOutput struct{ Body Provisioned }

type commandInput struct {
	ID   string `path:"id" format:"uuid"`
	Body CommandInput
}

type commandOutput struct{ Body DeviceCommand }

type commandPath struct {
	ID        string `path:"id" format:"uuid"`
	CommandID string `path:"commandId" format:"uuid"`
}

type listCommandsInput struct {
	ID string `path:"id" format:"uuid"`
	httpapi.PageQuery
	Status string `query:"status" enum:"queued,sent,completed,failed,timed_out,cancelled"`
}

type bulkInput struct{ Body BulkInput }

type bulkOutput struct{ Body BulkResult }

type softwareInput struct {
	ID string `path:"id" format:"uuid"`
	httpapi.PageQuery
	Search string `query:"search" maxLength:"200"`
}

type metricsInput struct {
	ID    string    `path:"id" format:"uuid"`
	Since time.Time `query:"since" doc:"Default: one hour ago."`
}

type metricsOutput struct {
	Body struct {
		Data []MetricPoint `json:"data"`
	}
}

func splitIDs(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Register adds the /devices routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Devices"
	s.registerPosture(api, tag)

	httpapi.Register(api, httpapi.Route{ID: "list-devices", Method: http.MethodGet, Path: "/devices", Tag: tag, Permission: access.DevicesRead,
		Summary: "List devices", Description: "Cursor mode answers {devices, nextCursor, limit, total?}; the legacy page parameter answers " +
			"{data, pagination}. Decommissioned devices are left out unless includeDecommissioned is set."},
		func(ctx context.Context, in *listInput) (*deviceListOutput, error) {
			if in.Cursor != "" && in.Page > 0 {
				return nil, apperr.Invalid("page", "use either cursor or page, not both")
			}
			limit := in.Limit
			if limit <= 0 {
				limit = DefaultPageSize
			}
			max := MaxCursorPageSize
			if in.Page > 0 {
				max = MaxLegacyPageSize
			}
			limit = min(limit, max)
			f := ListFilter{OrgIDs: splitIDs(in.OrgIDs), SiteIDs: splitIDs(in.SiteIDs), GroupIDs: splitIDs(in.GroupIDs),
				Status: in.Status, Search: in.Search, OSType: in.OSType, Tag: in.Tag, Sort: in.Sort, Desc: in.SortDir == "desc",
				IncludeDecommissioned: in.IncludeDecommissioned, IncludeTotal: in.IncludeTotal}
			if in.OrgID != "" {
				f.OrgIDs = append(f.OrgIDs, in.OrgID)
			}
			page := store.Page{Limit: limit, Cursor: in.Cursor, Number: in.Page}
			rows, next, total, err := s.List(ctx, f, page)
			if err != nil {
				return nil, err
			}
			if in.Page > 0 {
				lp := httpapi.ListPage(rows, "", page, total)
				return &deviceListOutput{Body: DeviceList{Data: &rows, Pagination: &lp.Body.Pagination}}, nil
			}
			return &deviceListOutput{Body: DeviceList{Devices: &rows, NextCursor: &next, Limit: &limit, Total: total}}, nil
		})

	httpapi.Register(api, httpapi.Route{ID: "get-device", Method: http.MethodGet, Path: "/devices/{id}", Tag: tag, Permission: access.DevicesRead,
		Summary: "Get a device", Description: "Status, hardware, OS, network, the last inventory and the last hour of metrics."},
		func(ctx context.Context, in *idPath) (*detailOutput, error) {
			d, err := s.GetDetail(ctx, in.ID)
			return &detailOutput{Body: d}, err
		})

	httpapi.Register(api, httpapi.Route{ID: "update-device", Method: http.MethodPatch, Path: "/devices/{id}", Tag: tag, Permission: access.DevicesWrite,
		Summary: "Update a device", Description: "Display name, tags and site (within the organization)."},
		func(ctx context.Context, in *updateInput) (*deviceOutput, error) {
			d, err := s.UpdateDevice(ctx, in.ID, in.Body)
			return &deviceOutput{Body: d}, err
		})

	httpapi.Register(api, httpapi.Route{ID: "decommission-device", MFA: true, Method: http.MethodDelete, Path: "/devices/{id}", Tag: tag,
		Permission: access.DevicesDelete, Status: http.StatusNoContent, Summary: "Decommission a device",
		Description: "The agent's tokens stop working at once, waiting commands are cancelled, a connected agent is told to stop, " +
			"and the device leaves lists (unless includeDecommissioned) and groups. The record stays readable."},
		func(ctx context.Context, in *idPath) (*struct{}, error) { return nil, s.Decommission(ctx, in.ID) })

	httpapi.Register(api, httpapi.Route{ID: "provision-device", Method: http.MethodPost, Path: "/devices/provision", Tag: tag,
		Permission: access.DevicesWrite, Status: http.StatusCreated, Summary: "Pre-create a device",
		Description: "Creates one device record in status pending and returns a single-use enrollment payload (key, secret, server " +
			"address and the command line to run). An agent enrolling with it claims this record."},
		func(ctx context.Context, in *provisionInput) (*provisionOutput, error) {
			p, err := s.Provision(ctx, in.Body)
			return &provisionOutput{Body: p}, err
		})

	httpapi.Register(api, httpapi.Route{ID: "move-device-org", MFA: true, Method: http.MethodPost, Path: "/devices/{id}/move-org", Tag: tag,
		Permission: access.DevicesWrite, Summary: "Move a device to another organization",
		Description: "Only to another organization of the same partner. The device leaves the groups of its old organization."},
		func(ctx context.Context, in *moveInput) (*deviceOutput, error) {
			d, err := s.MoveOrg(ctx, in.ID, in.Body.OrgID, in.Body.SiteID)
			return &deviceOutput{Body: d}, err
		})

	httpapi.Register(api, httpapi.Route{ID: "send-device-command", Method: http.MethodPost, Path: "/devices/{id}/commands", Tag: tag,
		Permission: access.DevicesExecute, Status: http.StatusCreated, Summary: "Send a command",
		Description: "Queues a durable command and pushes it to the agent at once when connected (else on its next contact; a command " +
			"not delivered within an hour times out). A second refresh_inventory while one is queued or sent is 409 ALREADY_PENDING."},
		func(ctx context.Context, in *commandInput) (*commandOutput, error) {
			c, err := s.SendCommand(ctx, in.ID, in.Body)
			return &commandOutput{Body: c}, err
		})

	httpapi.Register(api, httpapi.Route{ID: "bulk-device-commands", Method: http.MethodPost, Path: "/devices/bulk/commands", Tag: tag,
		Permission: access.DevicesExecute, Summary: "Send a command to many devices",
		Description: "Up to 500 devices. Answers {commands, skipped, failed}: skipped devices got no command on purpose (a pending " +
			"refresh_inventory, a script language their OS lacks); failed ones do not exist in your scope."},
		func(ctx context.Context, in *bulkInput) (*bulkOutput, error) {
			r, err := s.SendBulk(ctx, in.Body)
			return &bulkOutput{Body: r}, err
		})

	httpapi.Register(api, httpapi.Route{ID: "list-device-commands", Method: http.MethodGet, Path: "/devices/{id}/commands", Tag: tag,
		Permission: access.DevicesRead, Summary: "List a device's commands", Description: "Newest first."},
		func(ctx context.Context, in *listCommandsInput) (*httpapi.ListBody[DeviceCommand], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListCommands(ctx, in.ID, in.Status, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})

	httpapi.Register(api, httpapi.Route{ID: "get-device-command", Method: http.MethodGet, Path: "/devices/{id}/commands/{commandId}", Tag: tag,
		Permission: access.DevicesRead, Summary: "Get a command with its result"},
		func(ctx context.Context, in *commandPath) (*commandOutput, error) {
			c, err := s.GetCommand(ctx, in.ID, in.CommandID)
			return &commandOutput{Body: c}, err
		})

	httpapi.Register(api, httpapi.Route{ID: "cancel-device-command", Method: http.MethodPost, Path: "/devices/{id}/commands/{commandId}/cancel",
		Tag: tag, Permission: access.DevicesExecute, Summary: "Cancel a command (Gale extension)",
		Description: "A queued command of any kind is cancelled before it goes out. Once sent, its kind decides: a script ends " +
			"cancelled at once and the agent is sent a cancel_command that stops it (its whole process tree); a reboot or shutdown " +
			"stays sent while the agent is asked to withdraw it (and tell the logged-in users), and ends cancelled when the agent " +
			"confirms, or as what really happens when it is too late; other kinds (refresh_inventory) are 409 NOT_CANCELLABLE. " +
			"Answers the command in its new state. A command that already ended, or ends while the cancellation is decided, is " +
			"409 CONFLICT: a result reported after a cancellation is ignored. Audited."},
		func(ctx context.Context, in *commandPath) (*commandOutput, error) {
			c, err := s.CancelCommand(ctx, in.ID, in.CommandID)
			return &commandOutput{Body: c}, err
		})

	httpapi.Register(api, httpapi.Route{ID: "list-device-software", Method: http.MethodGet, Path: "/devices/{id}/software", Tag: tag,
		Permission: access.DevicesRead, Summary: "List a device's installed software", Description: "From the last inventory, by name."},
		func(ctx context.Context, in *softwareInput) (*httpapi.ListBody[InstalledSoftware], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.Software(ctx, in.ID, in.Search, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})

	httpapi.Register(api, httpapi.Route{ID: "get-device-metrics", Method: http.MethodGet, Path: "/devices/{id}/metrics", Tag: tag,
		Permission: access.DevicesRead, Summary: "A device's metrics history", Description: "CPU, memory and disk samples from heartbeats, oldest first."},
		func(ctx context.Context, in *metricsInput) (*metricsOutput, error) {
			since := in.Since
			if since.IsZero() {
				since = s.clock.Now().Add(-time.Hour)
			}
			pts, err := s.Metrics(ctx, in.ID, since)
			out := &metricsOutput{}
			out.Body.Data = pts
			return out, err
		})

	s.registerAgentRoutes(api)
}
