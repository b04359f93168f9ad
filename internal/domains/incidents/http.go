package incidents

import (
	"context"
	"net/http"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type incidentFeedInput struct {
	OrgID  string `query:"orgId" format:"uuid"`
	Kind   string `query:"kind" enum:"tracked,finding"`
	Source string `query:"source" enum:"native,edr_a,edr_b"`
	Page   int    `query:"page" minimum:"1" default:"1" doc:"1-based page number; default 1."`
	Limit  int    `query:"limit" minimum:"1" maximum:"100" default:"25" doc:"Page size, 1 to 100; default 25."`
}

type incidentFeedOutput struct{ Body IncidentFeedPage }

type incidentIDPath struct {
	ID string `path:"id" format:"uuid"`
}

type incidentOutput struct{ Body Incident }

type incidentCreateInput struct{ Body IncidentCreate }

type incidentUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body IncidentUpdate
}

type connectorOutput struct{ Body IncidentEDRConnector }

type connectorCreateInput struct{ Body IncidentEDRConnectorInput }

type connectorUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body IncidentEDRConnectorUpdate
}

type connectorListInput struct {
	httpapi.PageQuery
	OrgID string `query:"orgId" format:"uuid"`
}

type connectorTestOutput struct{ Body IncidentEDRConnectorTest }

// Register adds the /incidents routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Incidents"
	route := func(id, method, path string, perm access.Perm, summary, desc string, errors ...int) httpapi.Route {
		return httpapi.Route{ID: id, Method: method, Path: path, Tag: tag, Permission: perm, Summary: summary, Description: desc, Errors: errors}
	}
	httpapi.Register(api, route("get-incident-feed", http.MethodGet, "/incidents/feed", access.AlertsRead, "Incident feed",
		"Tracked incidents and the EDR findings not yet promoted, in scope: p1 first, then the most recent detection first. "+
			"Finding rows additionally need devices:read; a caller with alerts:read only sees tracked incidents (a kind=finding or "+
			"edr source filter then matches nothing). A promoted finding appears once, as its tracked incident."),
		func(ctx context.Context, in *incidentFeedInput) (*incidentFeedOutput, error) {
			page, limit := in.Page, in.Limit
			if page == 0 {
				page = 1
			}
			if limit == 0 {
				limit = FeedDefaultLimit
			}
			out, err := s.Feed(ctx, FeedFilter{OrgID: in.OrgID, Kind: in.Kind, Source: in.Source}, page, limit)
			return &incidentFeedOutput{out}, err
		})
	create := route("create-incident", http.MethodPost, "/incidents", access.IncidentsWrite, "Open an incident",
		"Opens a tracked incident by hand (origin manual), status open.")
	create.Status = http.StatusCreated
	httpapi.Register(api, create, func(ctx context.Context, in *incidentCreateInput) (*incidentOutput, error) {
		x, err := s.Create(ctx, in.Body)
		return &incidentOutput{x}, err
	})
	httpapi.Register(api, route("get-incident", http.MethodGet, "/incidents/{id}", access.IncidentsRead, "Get a tracked incident",
		"", http.StatusNotFound),
		func(ctx context.Context, in *incidentIDPath) (*incidentOutput, error) {
			x, err := s.Get(ctx, in.ID)
			return &incidentOutput{x}, err
		})
	httpapi.Register(api, route("update-incident", http.MethodPatch, "/incidents/{id}", access.IncidentsWrite, "Change a tracked incident",
		"Changes the fields sent. A status change must be allowed from the current status, and is made only if the status did not move "+
			"meanwhile: 409 INCIDENT_STATUS_CONFLICT otherwise (also for the status it has already).", http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *incidentUpdateInput) (*incidentOutput, error) {
			x, err := s.Update(ctx, in.ID, in.Body)
			return &incidentOutput{x}, err
		})
	httpapi.Register(api, route("get-incident-finding", http.MethodGet, "/incidents/findings/{id}", access.IncidentsRead, "Get an EDR finding",
		"A finding, promoted or not. Needs devices:read too.", http.StatusNotFound),
		func(ctx context.Context, in *incidentIDPath) (*incidentOutput, error) {
			x, err := s.GetFinding(ctx, in.ID)
			return &incidentOutput{x}, err
		})
	promote := route("promote-incident-finding", http.MethodPost, "/incidents/findings/{id}/promote", access.IncidentsWrite,
		"Promote a finding to a tracked incident",
		"Opens a tracked incident from the finding (its title, severity, device, detection time, EDR status and console link); the "+
			"incident takes the finding's place in the feed with trackedIncidentId set to its own ID. Needs devices:read too. "+
			"409 FINDING_ALREADY_PROMOTED the second time.", http.StatusNotFound, http.StatusConflict)
	promote.Status = http.StatusCreated
	httpapi.Register(api, promote, func(ctx context.Context, in *incidentIDPath) (*incidentOutput, error) {
		x, err := s.Promote(ctx, in.ID)
		return &incidentOutput{x}, err
	})
	httpapi.Register(api, route("list-incident-edr-connectors", http.MethodGet, "/incidents/edr-connectors", access.IncidentsRead,
		"List EDR connectors", "Connectors in scope, newest first. API keys are never returned."),
		func(ctx context.Context, in *connectorListInput) (*httpapi.ListBody[IncidentEDRConnector], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListConnectors(ctx, in.OrgID, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	createConn := route("create-incident-edr-connector", http.MethodPost, "/incidents/edr-connectors", access.IncidentsWrite,
		"Create an EDR connector", "Connects an organization to an EDR provider (edr_a or edr_b; their APIs are in the API notes). "+
			"The API key is stored encrypted and never returned. An enabled connector is polled at the poller's next round, then every "+
			"pollIntervalSeconds.")
	createConn.Status = http.StatusCreated
	httpapi.Register(api, createConn, func(ctx context.Context, in *connectorCreateInput) (*connectorOutput, error) {
		c, err := s.CreateConnector(ctx, in.Body)
		return &connectorOutput{c}, err
	})
	httpapi.Register(api, route("get-incident-edr-connector", http.MethodGet, "/incidents/edr-connectors/{id}", access.IncidentsRead,
		"Get an EDR connector", "", http.StatusNotFound),
		func(ctx context.Context, in *incidentIDPath) (*connectorOutput, error) {
			c, err := s.GetConnector(ctx, in.ID)
			return &connectorOutput{c}, err
		})
	httpapi.Register(api, route("update-incident-edr-connector", http.MethodPatch, "/incidents/edr-connectors/{id}", access.IncidentsWrite,
		"Change an EDR connector", "Changes the fields sent. Enabling it, or a new baseUrl or apiKey, makes it due at once.", http.StatusNotFound),
		func(ctx context.Context, in *connectorUpdateInput) (*connectorOutput, error) {
			c, err := s.UpdateConnector(ctx, in.ID, in.Body)
			return &connectorOutput{c}, err
		})
	del := route("delete-incident-edr-connector", http.MethodDelete, "/incidents/edr-connectors/{id}", access.IncidentsWrite,
		"Delete an EDR connector", "Deletes the connector and its findings that were not promoted; promoted ones stay with their incidents.",
		http.StatusNotFound)
	del.Status = http.StatusNoContent
	httpapi.Register(api, del, func(ctx context.Context, in *incidentIDPath) (*struct{}, error) {
		return nil, s.DeleteConnector(ctx, in.ID)
	})
	httpapi.Register(api, route("test-incident-edr-connector", http.MethodPost, "/incidents/edr-connectors/{id}/test", access.IncidentsWrite,
		"Test an EDR connector", "Reads one page of findings from the provider with the connector's settings; stores nothing. "+
			"ok false with the reason when the provider cannot be reached or answers unexpectedly.", http.StatusNotFound),
		func(ctx context.Context, in *incidentIDPath) (*connectorTestOutput, error) {
			r, err := s.TestConnector(ctx, in.ID)
			return &connectorTestOutput{r}, err
		})
}
