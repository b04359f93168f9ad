// Package search answers the cross-cutting read routes: device tags (GET /tags,
// GET /tags/devices) and the global search box (GET /search). It owns no tables; every query
// applies the caller's scope like the domain packages do.
package search

import (
	"log/slog"

	"gale/internal/domains/tenancy"
	"gale/internal/platform/access"
	"gale/internal/platform/httpapi"
	"gale/internal/platform/store"
)

// Service answers tag and search queries.
type Service struct {
	db     *store.DB
	logger *slog.Logger
}

// Deps are what the search service works with.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
}

// New returns the search service.
func New(d Deps) *Service {
	return &Service{db: d.DB, logger: d.Logger}
}

// Register adds the /tags and /search routes.
func (s *Service) Register(api *httpapi.Server) {
	s.registerTags(api)
	s.registerSearch(api)
}

// deviceInScope keeps devices (alias d) in scope whose organization is not deleted; the
// statements devices exports keep the live ones.
func deviceInScope(scope access.Scope, a *store.Args) string {
	return "(" + scope.OrgFilter(a, "d.org_id", "d.partner_id") + " AND " + tenancy.LiveOrg("d.org_id") + ")"
}
