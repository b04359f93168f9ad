package tenancy

import (
	"gale/internal/platform/access"

	"context"
	"net/http"

	"gale/internal/platform/httpapi"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type partnerOutput struct{ Body Partner }

type partnerCreateInput struct{ Body PartnerInput }

type partnerUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body PartnerInput
}

type partnerMeInput struct{ Body PartnerInput }

type listPartnersInput struct {
	httpapi.PageQuery
}

type orgOutput struct{ Body Organization }

type orgCreateBody struct {
	OrganizationInput
	PartnerID         string `json:"partnerId,omitempty" format:"uuid" doc:"System callers only: the partner to create under."`
	CreateDefaultSite *bool  `json:"createDefaultSite,omitempty" doc:"Create a first site so devices have somewhere to land; default true."`
	DefaultSiteName   string `json:"defaultSiteName,omitempty" maxLength:"200" doc:"Name of that site; default \"Main Site\"."`
	Timezone          string `json:"timezone,omitempty" maxLength:"64" doc:"Time zone of that site; default UTC."`
}

type orgCreateInput struct{ Body orgCreateBody }

type orgUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body OrganizationInput
}

type listOrgsInput struct {
	httpapi.PageQuery
	Search         string `query:"search" maxLength:"200" doc:"Matches name or slug."`
	Status         string `query:"status" enum:"active,trial,suspended,churned"`
	PartnerID      string `query:"partnerId" format:"uuid" doc:"System callers: only this partner's organizations."`
	IncludeDeleted bool   `query:"includeDeleted" doc:"Also list soft-deleted organizations (they carry deletedAt)."`
}

type siteOutput struct{ Body Site }

type siteCreateBody struct {
	SiteInput
	OrgID string `json:"orgId,omitempty" format:"uuid" doc:"Required except for organization callers."`
}

type siteCreateInput struct{ Body siteCreateBody }

type siteUpdateInput struct {
	ID   string `path:"id" format:"uuid"`
	Body SiteInput
}

type listSitesInput struct {
	httpapi.PageQuery
	OrgID  string `query:"orgId" format:"uuid"`
	Search string `query:"search" maxLength:"200"`
}

// Register adds the /orgs routes.
func (s *Service) Register(api *httpapi.Server) {
	const tag = "Partners, organizations, sites"

	httpapi.Register(api, httpapi.Route{ID: "list-partners", Method: http.MethodGet, Path: "/orgs/partners", Tag: tag,
		Permission: access.PartnersRead, Summary: "List partners", Description: "System scope only."},
		func(ctx context.Context, in *listPartnersInput) (*httpapi.ListBody[Partner], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListPartners(ctx, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-partner", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: "/orgs/partners", Tag: tag,
		Permission: access.PartnersWrite, Status: http.StatusCreated, Summary: "Create a partner", Description: "System scope only."},
		func(ctx context.Context, in *partnerCreateInput) (*partnerOutput, error) {
			p, err := s.CreatePartner(ctx, in.Body)
			return &partnerOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-my-partner", Method: http.MethodGet, Path: "/orgs/partners/me", Tag: tag,
		Permission: access.PartnersRead, Summary: "The caller's partner and its settings"},
		func(ctx context.Context, _ *struct{}) (*partnerOutput, error) {
			p, err := s.MyPartner(ctx)
			return &partnerOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-my-partner", MFA: true, ChangesAccess: true, Method: http.MethodPatch, Path: "/orgs/partners/me", Tag: tag,
		Permission: access.PartnersWrite, Summary: "Change the caller's partner settings"},
		func(ctx context.Context, in *partnerMeInput) (*partnerOutput, error) {
			me, err := s.MyPartner(ctx)
			if err != nil {
				return nil, err
			}
			p, err := s.UpdatePartner(ctx, me.ID, in.Body)
			return &partnerOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-partner", Method: http.MethodGet, Path: "/orgs/partners/{id}", Tag: tag,
		Permission: access.PartnersRead, Summary: "Get a partner"},
		func(ctx context.Context, in *idPath) (*partnerOutput, error) {
			p, err := s.GetPartner(ctx, in.ID)
			return &partnerOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-partner", MFA: true, ChangesAccess: true, Method: http.MethodPatch, Path: "/orgs/partners/{id}", Tag: tag,
		Permission: access.PartnersWrite, Summary: "Change a partner", Description: "status, slug and maxOrganizations are system-only fields."},
		func(ctx context.Context, in *partnerUpdateInput) (*partnerOutput, error) {
			p, err := s.UpdatePartner(ctx, in.ID, in.Body)
			return &partnerOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-partner", MFA: true, ChangesAccess: true, Method: http.MethodDelete, Path: "/orgs/partners/{id}", Tag: tag,
		Permission: access.PartnersWrite, Status: http.StatusNoContent, Summary: "Delete a partner",
		Description: "System scope only. Soft delete; refused (409) while the partner has organizations."},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.DeletePartner(ctx, in.ID)
		})

	listOrgs := func(ctx context.Context, in *listOrgsInput) (*httpapi.ListBody[*Organization], error) {
		page, err := in.Normalize(httpapi.MaxPageSize)
		if err != nil {
			return nil, err
		}
		rows, next, total, err := s.ListOrganizations(ctx, OrgListFilter{Search: in.Search, Status: in.Status,
			PartnerID: in.PartnerID, IncludeDeleted: in.IncludeDeleted}, page)
		if err != nil {
			return nil, err
		}
		return httpapi.ListPage(rows, next, page, total), nil
	}
	httpapi.Register(api, httpapi.Route{ID: "list-orgs", Method: http.MethodGet, Path: "/orgs", Tag: tag,
		Permission: access.OrganizationsRead, Summary: "Organizations in scope", Description: "Same as GET /orgs/organizations."}, listOrgs)
	// The API has always listed organizations at /orgs/ too; OpenAPI paths take no trailing
	// slash, so that one is served but not documented.
	httpapi.Register(api, httpapi.Route{ID: "list-orgs-slash", Method: http.MethodGet, Path: "/orgs/", Tag: tag, Hidden: true,
		Permission: access.OrganizationsRead, Summary: "Organizations in scope"}, listOrgs)
	httpapi.Register(api, httpapi.Route{ID: "list-organizations", Method: http.MethodGet, Path: "/orgs/organizations", Tag: tag,
		Permission: access.OrganizationsRead, Summary: "List organizations",
		Description: "Organizations in the caller's scope, by name. Cursor paging, or legacy page and limit (with total)."}, listOrgs)
	httpapi.Register(api, httpapi.Route{ID: "create-organization", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: "/orgs/organizations", Tag: tag,
		Permission: access.OrganizationsWrite, Status: http.StatusCreated, Summary: "Create an organization",
		Description: "Counts against the partner's maxOrganizations (409 ORG_LIMIT_REACHED). A first site named \"Main Site\" is created unless createDefaultSite is false."},
		func(ctx context.Context, in *orgCreateInput) (*orgOutput, error) {
			req := NewOrganization{OrganizationInput: in.Body.OrganizationInput, PartnerID: in.Body.PartnerID, Timezone: in.Body.Timezone}
			if in.Body.CreateDefaultSite == nil || *in.Body.CreateDefaultSite {
				req.DefaultSite = in.Body.DefaultSiteName
				if req.DefaultSite == "" {
					req.DefaultSite = "Main Site"
				}
			}
			o, err := s.CreateOrganization(ctx, req)
			return &orgOutput{o}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-organization", Method: http.MethodGet, Path: "/orgs/organizations/{id}", Tag: tag,
		Permission: access.OrganizationsRead, Summary: "Get an organization"},
		func(ctx context.Context, in *idPath) (*orgOutput, error) {
			o, err := s.GetOrganization(ctx, in.ID)
			return &orgOutput{o}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-organization", MFA: true, ChangesAccess: true, Method: http.MethodPatch, Path: "/orgs/organizations/{id}", Tag: tag,
		Permission: access.OrganizationsWrite, Summary: "Change an organization"},
		func(ctx context.Context, in *orgUpdateInput) (*orgOutput, error) {
			o, err := s.UpdateOrganization(ctx, in.ID, in.Body)
			return &orgOutput{o}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-organization", MFA: true, ChangesAccess: true, Method: http.MethodDelete, Path: "/orgs/organizations/{id}", Tag: tag,
		Permission: access.OrganizationsDelete, Status: http.StatusNoContent, Summary: "Delete an organization",
		Description: "Soft delete: hidden from lists and lookups, its slot under maxOrganizations freed; POST .../restore brings it back."},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.DeleteOrganization(ctx, in.ID)
		})
	httpapi.Register(api, httpapi.Route{ID: "restore-organization", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: "/orgs/organizations/{id}/restore", Tag: tag,
		Permission: access.OrganizationsDelete, Summary: "Restore a deleted organization", Description: "Counts against maxOrganizations again."},
		func(ctx context.Context, in *idPath) (*orgOutput, error) {
			o, err := s.RestoreOrganization(ctx, in.ID)
			return &orgOutput{o}, err
		})

	httpapi.Register(api, httpapi.Route{ID: "list-sites", Method: http.MethodGet, Path: "/orgs/sites", Tag: tag,
		Permission: access.SitesRead, Summary: "List sites", Description: "Sites of organizations in scope, by name."},
		func(ctx context.Context, in *listSitesInput) (*httpapi.ListBody[Site], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListSites(ctx, SiteListFilter{OrgID: in.OrgID, Search: in.Search}, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-site", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: "/orgs/sites", Tag: tag,
		Permission: access.SitesWrite, Status: http.StatusCreated, Summary: "Create a site"},
		func(ctx context.Context, in *siteCreateInput) (*siteOutput, error) {
			st, err := s.CreateSite(ctx, in.Body.OrgID, in.Body.SiteInput)
			return &siteOutput{st}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-site", Method: http.MethodGet, Path: "/orgs/sites/{id}", Tag: tag,
		Permission: access.SitesRead, Summary: "Get a site"},
		func(ctx context.Context, in *idPath) (*siteOutput, error) {
			st, err := s.GetSite(ctx, in.ID)
			return &siteOutput{st}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-site", MFA: true, ChangesAccess: true, Method: http.MethodPatch, Path: "/orgs/sites/{id}", Tag: tag,
		Permission: access.SitesWrite, Summary: "Change a site"},
		func(ctx context.Context, in *siteUpdateInput) (*siteOutput, error) {
			st, err := s.UpdateSite(ctx, in.ID, in.Body)
			return &siteOutput{st}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "delete-site", MFA: true, ChangesAccess: true, Method: http.MethodDelete, Path: "/orgs/sites/{id}", Tag: tag,
		Permission: access.SitesDelete, Status: http.StatusNoContent, Summary: "Delete a site"},
		func(ctx context.Context, in *idPath) (*struct{}, error) {
			return nil, s.DeleteSite(ctx, in.ID)
		})
}
