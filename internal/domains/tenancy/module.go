package tenancy

import (
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/module"
	"gale/internal/platform/partnerexport"
)

// Module serves partners, organizations and sites.
var Module = module.Module{Name: "tenancy", Build: func(k *module.Kernel) error {
	s := New(Deps{DB: k.DB, Logger: k.Logger, Clock: k.Clock},
		Options{CacheRows: k.Config.ListCacheRows, PageTTL: k.Config.ListPageCacheTTL})
	s.Register(k.HTTP)
	k.Cache(s.ForgetPages)
	k.Provide(s)
	k.Declare(partnerexport.Export[*Organization]{Name: "organizations", Scope: access.OrganizationsRead,
		Summary: "Export organizations", Description: "The partner's organizations (not deleted ones).",
		Fetch: s.ExportOrganizations,
		Key:   func(o *Organization) (time.Time, []string) { return o.UpdatedAt, []string{o.ID} }})
	k.Declare(partnerexport.Export[Site]{Name: "sites", Scope: access.SitesRead, Summary: "Export sites",
		Description: "Sites of the partner's organizations; each row carries orgId, siteId and name.",
		Fetch:       s.ExportSites,
		Key:         func(st Site) (time.Time, []string) { return st.UpdatedAt, []string{st.ID} }})
	return nil
}}
