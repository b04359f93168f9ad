package discovery

import (
	"context"
	"net/http"

	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
)

type discoveryIDPath struct {
	ID string `path:"id" format:"uuid"`
}

type discoveryProfileOutput struct{ Body DiscoveryProfile }

type discoveryJobOutput struct{ Body DiscoveryJob }

type discoveryAssetOutput struct{ Body DiscoveryAsset }

type discoveryTopologyOutput struct{ Body DiscoveryTopology }

type discoveryProfileCreateInput struct{ Body DiscoveryProfileInput }

type discoveryProfileUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body DiscoveryProfileUpdate
}

type discoveryProfilesInput struct {
	httpapi.PageQuery
	OrgID  string `query:"orgId" format:"uuid"`
	SiteID string `query:"siteId" format:"uuid"`
}

type discoveryScanInput struct{ Body DiscoveryScanRequest }

type discoveryJobsInput struct {
	httpapi.PageQuery
	ProfileID string `query:"profileId" format:"uuid"`
	Status    string `query:"status" enum:"scheduled,running,completed,failed,cancelled"`
	SiteID    string `query:"siteId" format:"uuid"`
	OrgID     string `query:"orgId" format:"uuid"`
}

type discoveryAssetsInput struct {
	httpapi.PageQuery
	OrgID  string `query:"orgId" format:"uuid"`
	SiteID string `query:"siteId" format:"uuid"`
	Type   string `query:"type" enum:"workstation,server,router,switch,firewall,printer,access_point,nas,phone,camera,iot,unknown"`
	Status string `query:"status" enum:"new,linked,ignored"`
	Search string `query:"search" maxLength:"100" doc:"Part of the IP address, hostname or MAC address."`
}

type discoveryLinkInput struct {
	ID   string `path:"id" format:"uuid"`
	Body DiscoveryLinkRequest
}

type discoveryIgnoreInput struct {
	ID   string `path:"id" format:"uuid"`
	Body DiscoveryIgnoreRequest
}

type discoveryTopologyInput struct {
	OrgID  string `query:"orgId" format:"uuid"`
	SiteID string `query:"siteId" format:"uuid"`
}

// Register adds the /discovery routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Network discovery"
	notFound := []int{http.StatusNotFound}
	conflict := []int{http.StatusNotFound, http.StatusConflict}
	httpapi.Register(api, httpapi.Route{ID: "list-discovery-profiles", Method: http.MethodGet, Path: "/discovery/profiles", Tag: tag,
		Permission: access.DiscoveryRead, Summary: "List discovery profiles", Description: "Profiles in scope, by name."},
		func(ctx context.Context, in *discoveryProfilesInput) (*httpapi.ListBody[DiscoveryProfile], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListProfiles(ctx, ProfileFilter{OrgID: in.OrgID, SiteID: in.SiteID}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-discovery-profile", Method: http.MethodPost, Path: "/discovery/profiles", Tag: tag,
		Permission: access.DiscoveryWrite, Status: http.StatusCreated, Summary: "Create a discovery profile",
		Description: "What a site's agent scans and when. Subnets are IPv4 CIDRs covering at most 1,024 addresses in all (65,536 " +
			"with deepScan); SNMP credentials are stored encrypted and never returned. A name taken in the site: 409 NAME_TAKEN.",
		Errors: []int{http.StatusConflict}},
		func(ctx context.Context, in *discoveryProfileCreateInput) (*discoveryProfileOutput, error) {
			p, err := s.CreateProfile(ctx, in.Body)
			return &discoveryProfileOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-discovery-profile", Method: http.MethodGet, Path: "/discovery/profiles/{id}", Tag: tag,
		Permission: access.DiscoveryRead, Summary: "Get a discovery profile", Errors: notFound},
		func(ctx context.Context, in *discoveryIDPath) (*discoveryProfileOutput, error) {
			p, err := s.GetProfile(ctx, in.ID)
			return &discoveryProfileOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-discovery-profile", Method: http.MethodPatch, Path: "/discovery/profiles/{id}",
		Tag: tag, Permission: access.DiscoveryWrite, Summary: "Change a discovery profile",
		Description: "Absent fields stay; a schedule sent has its next run computed anew.", Errors: conflict},
		func(ctx context.Context, in *discoveryProfileUpdateInput) (*discoveryProfileOutput, error) {
			p, err := s.UpdateProfile(ctx, in.ID, in.Body)
			return &discoveryProfileOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-discovery-profile", Method: http.MethodDelete, Path: "/discovery/profiles/{id}",
		Tag: tag, Permission: access.DiscoveryWrite, Status: http.StatusNoContent, Summary: "Delete a discovery profile",
		Description: "With its jobs; the assets stay. While a scan of it is scheduled or running: 409 " + CodeScanActive + ".",
		Errors:      conflict},
		func(ctx context.Context, in *discoveryIDPath) (*struct{}, error) {
			return nil, s.DeleteProfile(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "start-discovery-scan", Method: http.MethodPost, Path: "/discovery/scan", Tag: tag,
		Permission: access.DiscoveryWrite, Status: http.StatusAccepted, Summary: "Scan a profile's networks now",
		Description: "An online agent of the profile's site scans (the one named, the profile's, or the one heard from most " +
			"recently). A profile out of reach: 404. No agent online: 409 NO_ONLINE_AGENT; a scan of the profile scheduled or running: 409 " + CodeScanActive + ".",
		Errors: conflict},
		func(ctx context.Context, in *discoveryScanInput) (*discoveryJobOutput, error) {
			j, err := s.Scan(ctx, in.Body)
			return &discoveryJobOutput{j}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-discovery-jobs", Method: http.MethodGet, Path: "/discovery/jobs", Tag: tag,
		Permission: access.DiscoveryRead, Summary: "List discovery jobs", Description: "Jobs in scope, newest first."},
		func(ctx context.Context, in *discoveryJobsInput) (*httpapi.ListBody[DiscoveryJob], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListJobs(ctx, JobFilter{ProfileID: in.ProfileID, Status: in.Status, SiteID: in.SiteID, OrgID: in.OrgID}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "get-discovery-job", Method: http.MethodGet, Path: "/discovery/jobs/{id}", Tag: tag,
		Permission: access.DiscoveryRead, Summary: "Get a discovery job", Errors: notFound},
		func(ctx context.Context, in *discoveryIDPath) (*discoveryJobOutput, error) {
			j, err := s.GetJob(ctx, in.ID)
			return &discoveryJobOutput{j}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "cancel-discovery-job", Method: http.MethodPost, Path: "/discovery/jobs/{id}/cancel", Tag: tag,
		Permission: access.DiscoveryWrite, Summary: "Cancel a running discovery job",
		Description: "The agent is told to stop; a result arriving later is dropped. Not running: 409 " + CodeJobNotRunning + ".",
		Errors:      conflict},
		func(ctx context.Context, in *discoveryIDPath) (*discoveryJobOutput, error) {
			j, err := s.CancelJob(ctx, in.ID)
			return &discoveryJobOutput{j}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-discovery-assets", Method: http.MethodGet, Path: "/discovery/assets", Tag: tag,
		Permission: access.DiscoveryRead, Summary: "List discovered assets", Description: "Assets in scope, by IP address."},
		func(ctx context.Context, in *discoveryAssetsInput) (*httpapi.ListBody[DiscoveryAsset], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListAssets(ctx, AssetFilter{OrgID: in.OrgID, SiteID: in.SiteID, Type: in.Type, Status: in.Status,
				Search: in.Search}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "link-discovery-asset", Method: http.MethodPost, Path: "/discovery/assets/{id}/link", Tag: tag,
		Permission: access.DiscoveryWrite, Summary: "Link an asset to a managed device",
		Description: "A device of the asset's organization; later scans keep the link.", Errors: notFound},
		func(ctx context.Context, in *discoveryLinkInput) (*discoveryAssetOutput, error) {
			x, err := s.LinkAsset(ctx, in.ID, in.Body)
			return &discoveryAssetOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "ignore-discovery-asset", Method: http.MethodPost, Path: "/discovery/assets/{id}/ignore",
		Tag: tag, Permission: access.DiscoveryWrite, Summary: "Ignore an asset",
		Description: "With a reason; later scans keep it ignored. A link it had is dropped.", Errors: notFound},
		func(ctx context.Context, in *discoveryIgnoreInput) (*discoveryAssetOutput, error) {
			x, err := s.IgnoreAsset(ctx, in.ID, in.Body)
			return &discoveryAssetOutput{x}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-discovery-asset", Method: http.MethodDelete, Path: "/discovery/assets/{id}", Tag: tag,
		Permission: access.DiscoveryWrite, Status: http.StatusNoContent, Summary: "Delete an asset",
		Description: "A later scan that sees the address creates it anew. With its monitoring on: 409 " + CodeMonitoringEnabled + ".",
		Errors:      conflict},
		func(ctx context.Context, in *discoveryIDPath) (*struct{}, error) {
			return nil, s.DeleteAsset(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "get-discovery-topology", Method: http.MethodGet, Path: "/discovery/topology", Tag: tag,
		Permission: access.DiscoveryRead, Summary: "Network topology",
		Description: "Subnets, gateways and assets of an organization or a site, and what joins them (see the API notes).",
		Errors:      notFound},
		func(ctx context.Context, in *discoveryTopologyInput) (*discoveryTopologyOutput, error) {
			t, err := s.Topology(ctx, TopologyFilter{OrgID: in.OrgID, SiteID: in.SiteID})
			return &discoveryTopologyOutput{t}, err
		})
	s.registerMonitoring(api, tag)
}
