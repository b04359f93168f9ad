package snmp

import (
	"context"
	"net/http"
	"strings"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type snmpIDPath struct {
	ID string `path:"id" format:"uuid"`
}

type snmpDeviceIDPath struct {
	DeviceID string `path:"deviceId" format:"uuid"`
}

// snmpThresholdsPath names its device "id": the spec's GET /snmp/thresholds/:deviceId shares
// its place in the path with PATCH and DELETE /snmp/thresholds/:id, and one path takes one name.
type snmpThresholdsPath struct {
	DeviceID string `path:"id" format:"uuid" doc:"The SNMP device's ID."`
}

type snmpDevicesInput struct {
	httpapi.PageQuery
	OrgID  string `query:"orgId" format:"uuid"`
	SiteID string `query:"siteId" format:"uuid"`
	Status string `query:"status" enum:"unknown,online,offline"`
	Search string `query:"search" maxLength:"200" doc:"Part of the name or IP address."`
}

type snmpDeviceOutput struct{ Body SNMPDevice }

type snmpDeviceUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body SNMPDeviceUpdate
}

type snmpTestInput struct {
	ID   string `path:"id" format:"uuid"`
	Body *SNMPTestInput
}

type snmpTemplatesInput struct {
	httpapi.PageQuery
	OrgID   string `query:"orgId" format:"uuid"`
	BuiltIn string `query:"builtIn" enum:"true,false" doc:"true: the built-in templates only; false: the custom ones only."`
}

type snmpTemplateOutput struct{ Body SNMPTemplate }

type snmpTemplateUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body SNMPTemplateUpdate
}

type snmpBrowseInput struct {
	Query  string `query:"query" maxLength:"200" doc:"Part of the OID, name, label or MIB."`
	Prefix string `query:"prefix" maxLength:"600" doc:"Only OIDs under this numeric OID."`
	Limit  int    `query:"limit" minimum:"0" maximum:"500" doc:"Default 100."`
}

type snmpValidateInput struct {
	Body struct {
		OIDs []string `json:"oids" minItems:"1" maxItems:"500"`
	}
}

type snmpHistoryInput struct {
	DeviceID string    `path:"deviceId" format:"uuid"`
	OID      string    `query:"oid" maxLength:"12000" doc:"OIDs, comma-separated (up to 20)."`
	Name     string    `query:"name" maxLength:"4000" doc:"Names of OIDs in the device's template or the catalog, comma-separated, instead of or with oid."`
	From     time.Time `query:"from" doc:"Default: a day before to."`
	To       time.Time `query:"to" doc:"Default: now."`
	Bucket   string    `query:"bucket" enum:"5m,15m,1h,6h,1d" doc:"Default 1h."`
}

type snmpOIDInput struct {
	DeviceID string `path:"deviceId" format:"uuid"`
	OID      string `path:"oid" maxLength:"600"`
	Limit    int    `query:"limit" minimum:"0" maximum:"1000" doc:"Samples, newest first; default 100."`
}

type snmpDashboardInput struct {
	OrgID string `query:"orgId" format:"uuid"`
}

type snmpThresholdOutput struct{ Body SNMPThreshold }

type snmpThresholdUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body SNMPThresholdUpdate
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Register adds the /snmp routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "SNMP"
	notFound := []int{http.StatusNotFound}
	conflict := []int{http.StatusNotFound, http.StatusConflict}
	agentErrors := []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}
	read, write := access.SNMPRead, access.SNMPWrite
	httpapi.Register(api, httpapi.Route{ID: "list-snmp-devices", Method: http.MethodGet, Path: "/snmp/devices", Tag: tag, Permission: read,
		Summary: "List SNMP devices", Description: "Devices in scope, newest first."},
		func(ctx context.Context, in *snmpDevicesInput) (*httpapi.ListBody[SNMPDevice], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListDevices(ctx, DeviceFilter{OrgID: in.OrgID, SiteID: in.SiteID, Status: in.Status, Search: in.Search}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-snmp-device", Method: http.MethodPost, Path: "/snmp/devices", Tag: tag, Permission: write,
		Status: http.StatusCreated, Summary: "Add an SNMP device", Errors: []int{http.StatusConflict},
		Description: "Polled every intervalSeconds through an online agent of the site (or probeDeviceId). v1 and v2c take " +
			"credentials.community; v3 a username with authProtocol/authPassword and privProtocol/privPassword. Credentials are " +
			"stored encrypted and never returned. The same address and port twice in an organization: 409 " + CodeDeviceExists + "."},
		func(ctx context.Context, in *struct{ Body SNMPDeviceInput }) (*snmpDeviceOutput, error) {
			d, err := s.CreateDevice(ctx, in.Body)
			return &snmpDeviceOutput{d}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-snmp-device", Method: http.MethodGet, Path: "/snmp/devices/{id}", Tag: tag, Permission: read,
		Summary: "Get an SNMP device", Errors: notFound},
		func(ctx context.Context, in *snmpIDPath) (*snmpDeviceOutput, error) {
			d, err := s.GetDevice(ctx, in.ID)
			return &snmpDeviceOutput{d}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-snmp-device", Method: http.MethodPatch, Path: "/snmp/devices/{id}", Tag: tag,
		Permission: write, Summary: "Change an SNMP device", Errors: conflict,
		Description: "Absent fields stay. credentials replace the stored ones as a whole; a new version needs credentials for it. " +
			"Enabling makes the device due at once; disabling resolves its alerts."},
		func(ctx context.Context, in *snmpDeviceUpdateInput) (*snmpDeviceOutput, error) {
			d, err := s.UpdateDevice(ctx, in.ID, in.Body)
			return &snmpDeviceOutput{d}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-snmp-device", Method: http.MethodDelete, Path: "/snmp/devices/{id}", Tag: tag,
		Permission: write, Status: http.StatusNoContent, Summary: "Delete an SNMP device", Errors: notFound,
		Description: "With its metrics and thresholds; its open alerts are resolved."},
		func(ctx context.Context, in *snmpIDPath) (*struct{}, error) {
			return nil, s.DeleteDevice(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "poll-snmp-device", Method: http.MethodPost, Path: "/snmp/devices/{id}/poll", Tag: tag,
		Permission: write, Summary: "Poll an SNMP device now", Errors: agentErrors,
		Description: "Through an online agent of the site: the template's OIDs are asked, stored like a scheduled poll's (a failure " +
			"counts toward offline) and returned. No agent online: 409 NO_ONLINE_AGENT. The device does not answer: 504 " +
			CodeSNMPTimeout + "; it refuses the v3 user: 502 " + CodeSNMPAuth + "."},
		func(ctx context.Context, in *snmpIDPath) (*struct{ Body SNMPPollOutcome }, error) {
			out, err := s.PollNow(ctx, in.ID)
			return &struct{ Body SNMPPollOutcome }{out}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "test-snmp-device", Method: http.MethodPost, Path: "/snmp/devices/{id}/test", Tag: tag,
		Permission: write, Summary: "Test an SNMP device", Errors: agentErrors,
		Description: "Asks the device for sysDescr, sysObjectID, sysUpTime, sysContact, sysName and sysLocation with its " +
			"credentials, or with port, version and credentials of the body. Nothing is stored. Timeout: 504 " + CodeSNMPTimeout +
			"; authentication refused: 502 " + CodeSNMPAuth + "."},
		func(ctx context.Context, in *snmpTestInput) (*struct{ Body SNMPTestResult }, error) {
			var body SNMPTestInput
			if in.Body != nil {
				body = *in.Body
			}
			out, err := s.Test(ctx, in.ID, body)
			return &struct{ Body SNMPTestResult }{out}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-snmp-templates", Method: http.MethodGet, Path: "/snmp/templates", Tag: tag, Permission: read,
		Summary: "List SNMP templates", Description: "The built-in templates (on the first page) and the custom templates in scope, newest first."},
		func(ctx context.Context, in *snmpTemplatesInput) (*httpapi.ListBody[SNMPTemplate], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			var f TemplateFilter
			f.OrgID = in.OrgID
			if in.BuiltIn != "" {
				b := in.BuiltIn == "true"
				f.BuiltIn = &b
			}
			rows, next, total, err := s.ListTemplates(ctx, f, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-snmp-template", Method: http.MethodPost, Path: "/snmp/templates", Tag: tag,
		Permission: write, Status: http.StatusCreated, Summary: "Create an SNMP template", Errors: []int{http.StatusConflict},
		Description: "1 to 200 OIDs, numeric dotted, each once, with unique names. A name an organization's template has already: 409."},
		func(ctx context.Context, in *struct{ Body SNMPTemplateInput }) (*snmpTemplateOutput, error) {
			t, err := s.CreateTemplate(ctx, in.Body)
			return &snmpTemplateOutput{t}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-snmp-template", Method: http.MethodGet, Path: "/snmp/templates/{id}", Tag: tag,
		Permission: read, Summary: "Get an SNMP template", Errors: notFound},
		func(ctx context.Context, in *snmpIDPath) (*snmpTemplateOutput, error) {
			t, err := s.GetTemplate(ctx, in.ID)
			return &snmpTemplateOutput{t}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-snmp-template", Method: http.MethodPatch, Path: "/snmp/templates/{id}", Tag: tag,
		Permission: write, Summary: "Change an SNMP template", Errors: conflict,
		Description: "Custom templates only: a built-in one answers 403 " + CodeBuiltInTemplate + ". oids replaces the list."},
		func(ctx context.Context, in *snmpTemplateUpdateInput) (*snmpTemplateOutput, error) {
			t, err := s.UpdateTemplate(ctx, in.ID, in.Body)
			return &snmpTemplateOutput{t}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-snmp-template", Method: http.MethodDelete, Path: "/snmp/templates/{id}", Tag: tag,
		Permission: write, Status: http.StatusNoContent, Summary: "Delete an SNMP template", Errors: conflict,
		Description: "A built-in template: 403 " + CodeBuiltInTemplate + ". A template devices use: 409 " + CodeTemplateInUse + "."},
		func(ctx context.Context, in *snmpIDPath) (*struct{}, error) {
			return nil, s.DeleteTemplate(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "browse-snmp-oids", Method: http.MethodGet, Path: "/snmp/oids/browse", Tag: tag, Permission: read,
		Summary: "Browse OIDs", Description: "The built-in catalog (MIB-2 system, interfaces, IP, TCP, UDP, host resources, printer, " +
			"bridge, net-snmp) in OID order, then the OIDs of custom templates in scope."},
		func(ctx context.Context, in *snmpBrowseInput) (*struct{ Body []SNMPBrowseOID }, error) {
			limit := in.Limit
			if limit == 0 {
				limit = 100
			}
			out, err := s.Browse(ctx, in.Query, in.Prefix, limit)
			return &struct{ Body []SNMPBrowseOID }{out}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "validate-snmp-oids", Method: http.MethodPost, Path: "/snmp/oids/validate", Tag: tag,
		Permission: read, Summary: "Validate OIDs",
		Description: "Per OID: errors (not numeric dotted, a duplicate) and warnings (unknown to the catalog and the templates, a " +
			"table column without an instance)."},
		func(ctx context.Context, in *snmpValidateInput) (*struct{ Body SNMPValidation }, error) {
			out, err := s.ValidateOIDs(ctx, in.Body.OIDs)
			return &struct{ Body SNMPValidation }{out}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-snmp-metrics", Method: http.MethodGet, Path: "/snmp/metrics/{deviceId}", Tag: tag,
		Permission: read, Summary: "Latest SNMP values of a device", Errors: notFound,
		Description: "The latest value of each OID, named by the template or the catalog; counters with their rate per second."},
		func(ctx context.Context, in *snmpDeviceIDPath) (*struct{ Body SNMPLatest }, error) {
			out, err := s.Latest(ctx, in.DeviceID)
			return &struct{ Body SNMPLatest }{out}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-snmp-metrics-history", Method: http.MethodGet, Path: "/snmp/metrics/{deviceId}/history",
		Tag: tag, Permission: read, Summary: "SNMP history of a device", Errors: notFound,
		Description: "Average, minimum and maximum per bucket (from from) of up to 20 OIDs or names; counters as rates per second. " +
			"At most 2016 buckets and a range of 366 days."},
		func(ctx context.Context, in *snmpHistoryInput) (*struct{ Body SNMPHistory }, error) {
			out, err := s.History(ctx, in.DeviceID, HistoryQuery{OIDs: splitList(in.OID), Names: splitList(in.Name), From: in.From,
				To: in.To, Bucket: in.Bucket})
			return &struct{ Body SNMPHistory }{out}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-snmp-oid-metrics", Method: http.MethodGet, Path: "/snmp/metrics/{deviceId}/{oid}", Tag: tag,
		Permission: read, Summary: "One OID of a device", Errors: notFound,
		Description: "The latest value and the newest samples."},
		func(ctx context.Context, in *snmpOIDInput) (*struct{ Body SNMPOIDMetrics }, error) {
			limit := in.Limit
			if limit == 0 {
				limit = 100
			}
			out, err := s.OIDMetrics(ctx, in.DeviceID, in.OID, limit)
			return &struct{ Body SNMPOIDMetrics }{out}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-snmp-thresholds", Method: http.MethodGet, Path: "/snmp/thresholds/{id}", Tag: tag,
		Permission: read, Summary: "Thresholds of an SNMP device", Errors: notFound,
		Description: "id is the SNMP device's ID. Oldest first."},
		func(ctx context.Context, in *snmpThresholdsPath) (*struct{ Body []SNMPThreshold }, error) {
			out, err := s.ListThresholds(ctx, in.DeviceID)
			return &struct{ Body []SNMPThreshold }{out}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "create-snmp-threshold", Method: http.MethodPost, Path: "/snmp/thresholds", Tag: tag,
		Permission: write, Status: http.StatusCreated, Summary: "Add a threshold", Errors: notFound,
		Description: "An alert of severity opens when a poll's value of oid (a counter's rate per second) compares with value by " +
			"operator, and resolves when it no longer does. At most 100 a device."},
		func(ctx context.Context, in *struct{ Body SNMPThresholdInput }) (*snmpThresholdOutput, error) {
			t, err := s.CreateThreshold(ctx, in.Body)
			return &snmpThresholdOutput{t}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-snmp-threshold", Method: http.MethodPatch, Path: "/snmp/thresholds/{id}", Tag: tag,
		Permission: write, Summary: "Change a threshold", Errors: notFound,
		Description: "Absent fields stay. Its open alert is resolved; the next poll decides again."},
		func(ctx context.Context, in *snmpThresholdUpdateInput) (*snmpThresholdOutput, error) {
			t, err := s.UpdateThreshold(ctx, in.ID, in.Body)
			return &snmpThresholdOutput{t}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-snmp-threshold", Method: http.MethodDelete, Path: "/snmp/thresholds/{id}", Tag: tag,
		Permission: write, Status: http.StatusNoContent, Summary: "Delete a threshold", Errors: notFound,
		Description: "Its open alert is resolved."},
		func(ctx context.Context, in *snmpIDPath) (*struct{}, error) {
			return nil, s.DeleteThreshold(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "get-snmp-dashboard", Method: http.MethodGet, Path: "/snmp/dashboard", Tag: tag,
		Permission: read, Summary: "SNMP dashboard",
		Description: "Devices by status, polls of the last hour, devices with breached thresholds and the OIDs most breached."},
		func(ctx context.Context, in *snmpDashboardInput) (*struct{ Body SNMPDashboard }, error) {
			out, err := s.Dashboard(ctx, in.OrgID)
			return &struct{ Body SNMPDashboard }{out}, err
		})
}
