package partnerapi

import (
	"fmt"

	"gale/internal/platform/access"
	"gale/internal/platform/partnerexport"

	"context"
	"net/http"

	"gale/internal/domains/enrollment"
	"gale/internal/domains/tenancy"
	"gale/internal/platform/httpapi"
)

type idPath struct {
	ID string `path:"id" format:"uuid"`
}

type keyPath struct {
	ID    string `path:"id" format:"uuid"`
	KeyID string `path:"keyId" format:"uuid"`
}

type listInput struct {
	httpapi.PageQuery
}

type listKeysInput struct {
	ID string `path:"id" format:"uuid"`
	httpapi.PageQuery
}

type principalOutput struct{ Body ServicePrincipal }

type createPrincipalInput struct{ Body NewServicePrincipal }

type updatePrincipalInput struct {
	ID   string `path:"id" format:"uuid"`
	Body ServicePrincipalUpdate
}

type createKeyInput struct {
	ID   string `path:"id" format:"uuid"`
	Body NewKey
}

type issuedKeyOutput struct{ Body IssuedPrincipalKey }

// Register adds the management routes (/partner-service-principals) and the partner API
// (/partner-api), and makes the server authenticate the latter with service-principal keys.
func (s *Service) Register(api *httpapi.Server) {
	api.SetServicePrincipals(s)
	s.registerManagement(api)
	s.registerProvisioning(api)
}

func (s *Service) registerManagement(api *httpapi.Server) {
	const tag = "Partner service principals"
	const base = "/partner-service-principals"

	httpapi.Register(api, httpapi.Route{ID: "list-service-principals", Method: http.MethodGet, Path: base, Tag: tag,
		Permission: access.ServicePrincipalsRead, Summary: "List service principals",
		Description: "The partner's service principals (all of them for system callers), newest first."},
		func(ctx context.Context, in *listInput) (*httpapi.ListBody[ServicePrincipal], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListPrincipals(ctx, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-service-principal", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: base, Tag: tag,
		Permission: access.ServicePrincipalsWrite, Status: http.StatusCreated, Summary: "Create a service principal",
		Description: "A signed-in partner user who reaches every organization of the partner, holding every scope it hands " +
			"on. The principal authenticates on /partner-api with keys created below."},
		func(ctx context.Context, in *createPrincipalInput) (*principalOutput, error) {
			p, err := s.CreatePrincipal(ctx, in.Body)
			return &principalOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-service-principal", Method: http.MethodGet, Path: base + "/{id}", Tag: tag,
		Permission: access.ServicePrincipalsRead, Summary: "Get a service principal"},
		func(ctx context.Context, in *idPath) (*principalOutput, error) {
			p, err := s.GetPrincipal(ctx, in.ID)
			return &principalOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-service-principal", MFA: true, ChangesAccess: true, Method: http.MethodPatch, Path: base + "/{id}", Tag: tag,
		Permission: access.ServicePrincipalsWrite, Summary: "Change or disable a service principal",
		Description: "status disabled stops every key of the principal at once; active brings them back."},
		func(ctx context.Context, in *updatePrincipalInput) (*principalOutput, error) {
			p, err := s.UpdatePrincipal(ctx, in.ID, in.Body)
			return &principalOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-service-principal-keys", Method: http.MethodGet, Path: base + "/{id}/keys",
		Tag: tag, Permission: access.ServicePrincipalsRead, Summary: "List a service principal's keys",
		Description: "Newest first. Raw keys are never listed."},
		func(ctx context.Context, in *listKeysInput) (*httpapi.ListBody[PrincipalKey], error) {
			page, err := in.Normalize(httpapi.MaxPageSize)
			if err != nil {
				return nil, err
			}
			rows, next, total, err := s.ListKeys(ctx, in.ID, page)
			if err != nil {
				return nil, err
			}
			return httpapi.ListPage(rows, next, page, total), nil
		})
	httpapi.Register(api, httpapi.Route{ID: "create-service-principal-key", MFA: true, ChangesAccess: true, Method: http.MethodPost, Path: base + "/{id}/keys",
		Tag: tag, Permission: access.ServicePrincipalsWrite, Status: http.StatusCreated, Summary: "Create a service principal key",
		Description: "The raw key (svc_sp_...) is in the answer and shown only this once; Gale keeps its SHA-256 hash. " +
			"The caller must hold every scope of the principal."},
		func(ctx context.Context, in *createKeyInput) (*issuedKeyOutput, error) {
			k, err := s.CreateKey(ctx, in.ID, in.Body)
			return &issuedKeyOutput{k}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "rotate-service-principal-key", MFA: true, ChangesAccess: true, Method: http.MethodPost,
		Path: base + "/{id}/keys/{keyId}/rotate", Tag: tag, Permission: access.ServicePrincipalsWrite,
		Summary:     "Rotate a service principal key",
		Description: "Issues a new raw key, shown only this once; the old one stops working at once. A revoked key is 409."},
		func(ctx context.Context, in *keyPath) (*issuedKeyOutput, error) {
			k, err := s.RotateKey(ctx, in.ID, in.KeyID)
			return &issuedKeyOutput{k}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "revoke-service-principal-key", MFA: true, ChangesAccess: true, Method: http.MethodDelete,
		Path: base + "/{id}/keys/{keyId}", Tag: tag, Permission: access.ServicePrincipalsWrite, Status: http.StatusNoContent,
		Summary: "Revoke a service principal key", Description: "The key stops working at once. Revoking a revoked key is 409."},
		func(ctx context.Context, in *keyPath) (*struct{}, error) {
			return nil, s.RevokeKey(ctx, in.ID, in.KeyID)
		})
}

const partnerTag = "Partner API"

type orgCreateInput struct{ Body OrganizationBody }

type orgCreated struct {
	RateLimitHeaders
	Body tenancy.Organization
}

type siteCreateInput struct{ Body SiteBody }

type siteCreated struct {
	RateLimitHeaders
	Body tenancy.Site
}

type keyCreateInput struct {
	IdempotencyKey string `header:"X-Idempotency-Key" maxLength:"255" doc:"Makes a retry safe: for 24 hours, the same key with the same body answers the first answer again without minting; with another body it is 422."`
	Body           EnrollmentKeyBody
}

type keyCreated struct {
	RateLimitHeaders
	Replayed string `header:"Idempotent-Replayed" doc:"true when the answer is the stored answer of an earlier request with the same X-Idempotency-Key."`
	Body     enrollment.IssuedKey
}

func (s *Service) registerProvisioning(api *httpapi.Server) {
	httpapi.Register(api, httpapi.Route{ID: "partner-create-organization", ChangesAccess: true, Method: http.MethodPost, Path: "/partner-api/organizations",
		Tag: partnerTag, ServicePrincipal: true, Permission: access.OrganizationsWrite, Status: http.StatusCreated,
		Summary: "Create an organization", Errors: []int{http.StatusConflict, http.StatusTooManyRequests},
		Description: "Under the principal's partner, counted against its maxOrganizations (409 " + CodeOrgLimit +
			", not retryable). A taken slug is 409 " + CodeSlugConflict + ". No first site is created. Counts against the write budget."},
		func(ctx context.Context, in *orgCreateInput) (*orgCreated, error) {
			o, rl, err := s.CreateOrganization(ctx, in.Body)
			return &orgCreated{rl, o}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "partner-create-site", ChangesAccess: true, Method: http.MethodPost, Path: "/partner-api/sites",
		Tag: partnerTag, ServicePrincipal: true, Permission: access.SitesWrite, Status: http.StatusCreated, Summary: "Create a site",
		Errors:      []int{http.StatusTooManyRequests},
		Description: "orgId must be an organization of the principal's partner (403 otherwise). Counts against the write budget."},
		func(ctx context.Context, in *siteCreateInput) (*siteCreated, error) {
			st, rl, err := s.CreateSite(ctx, in.Body)
			return &siteCreated{rl, st}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "partner-create-enrollment-key", Method: http.MethodPost,
		Path: "/partner-api/enrollment-keys", Tag: partnerTag, ServicePrincipal: true, Permission: access.EnrollmentKeysWrite,
		Status: http.StatusCreated, Summary: "Create an enrollment key",
		Errors: []int{http.StatusUnprocessableEntity, http.StatusTooManyRequests},
		Description: "The principal needs an expiresAt and sourceCidrs (403 " + CodeRestrictions + "). The raw key (and " +
			"enrollmentSecret) is in the answer. Without ttlMinutes or expiresAt the key lives ENROLLMENT_KEY_DEFAULT_TTL_MINUTES, " +
			"shortened to PARTNER_API_ENROLLMENT_KEY_MAX_TTL_MINUTES and the organization's maxEnrollmentKeyTtlMinutes; a longer " +
			"explicit lifetime is 400. Limited to 10 per hour per principal and 100 per hour per partner, apart from the write budget."},
		func(ctx context.Context, in *keyCreateInput) (*keyCreated, error) {
			k, rl, replayed, err := s.CreateEnrollmentKey(ctx, in.IdempotencyKey, in.Body)
			out := &keyCreated{RateLimitHeaders: rl, Body: k}
			if replayed {
				out.Replayed = "true"
			}
			return out, err
		})
}

// specExports are the exports the spec lists (§8), with the scope each needs. Each is
// registered from the Export its domain declares, or, while Gale has no such domain, as an
// always-empty page with the same route, scope and shape.
var specExports = []struct {
	name    string
	scope   access.Perm
	summary string
	// domain names what Gale lacks while nobody declares the export.
	domain string
}{
	{"organizations", access.OrganizationsRead, "Export organizations", "organizations"},
	{"sites", access.SitesRead, "Export sites", "sites"},
	{"devices", access.DevicesRead, "Export devices", "devices"},
	{"device-inventory", access.InventoryRead, "Export device inventory", "device inventory"},
	{"device-software", access.InventoryRead, "Export installed software", "installed software"},
	{"device-relationships", access.InventoryRead, "Export topology edges", "stored topology edges between devices"},
	{"configuration-policies", access.ConfigurationRead, "Export configuration policies", "configuration policies"},
	{"configuration-assignments", access.ConfigurationRead, "Export policy assignments", "configuration policies"},
	{"scripts", access.ScriptsRead, "Export scripts", "scripts"},
	{"automations", access.ConfigurationRead, "Export automations", "automations"},
	{"backup-configurations", access.BackupConfigurationRead, "Export backup configuration", "backup configurations"},
	{"custom-fields", access.CustomFieldsRead, "Export custom field definitions", "custom fields"},
	{"custom-field-values", access.CustomFieldsRead, "Export custom field values", "custom fields"},
}

// registerExports registers the exports the modules declared and the spec's others.
func (s *Service) registerExports(api *httpapi.Server, declared []partnerexport.Declared) error {
	byName := map[string]partnerexport.Declared{}
	for _, d := range declared {
		if byName[d.ExportName()] != nil {
			return fmt.Errorf("partner export %s is declared twice", d.ExportName())
		}
		byName[d.ExportName()] = d
	}
	for _, e := range specExports {
		if d := byName[e.name]; d != nil {
			d.Register(api, s)
			delete(byName, e.name)
			continue
		}
		partnerexport.Export[map[string]any]{Name: e.name, Scope: e.scope, Summary: e.summary,
			Description: "Always an empty page for now: Gale has no " + e.domain + " yet. The route, its scope check and its " +
				"shape are final, so integrations can be built against it; it fills when that domain lands."}.Register(api, s)
	}
	for _, d := range declared {
		if byName[d.ExportName()] != nil {
			d.Register(api, s)
		}
	}
	return nil
}
