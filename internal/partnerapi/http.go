package partnerapi

import (
	"context"
	"net/http"
	"time"

	"gale/internal/customfields"
	"gale/internal/devices"
	"gale/internal/enrollment"
	"gale/internal/httpapi"
	"gale/internal/tenancy"
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
	s.registerExports(api)
}

func (s *Service) registerManagement(api *httpapi.Server) {
	const tag = "Partner service principals"
	const base = "/partner-service-principals"

	httpapi.Register(api, httpapi.Route{ID: "list-service-principals", Method: http.MethodGet, Path: base, Tag: tag,
		Permission: "service-principals:read", Summary: "List service principals",
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
	httpapi.Register(api, httpapi.Route{ID: "create-service-principal", Method: http.MethodPost, Path: base, Tag: tag,
		Permission: "service-principals:write", Status: http.StatusCreated, Summary: "Create a service principal",
		Description: "A signed-in partner user who reaches every organization of the partner, holding every scope it hands " +
			"on. The principal authenticates on /partner-api with keys created below."},
		func(ctx context.Context, in *createPrincipalInput) (*principalOutput, error) {
			p, err := s.CreatePrincipal(ctx, in.Body)
			return &principalOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "get-service-principal", Method: http.MethodGet, Path: base + "/{id}", Tag: tag,
		Permission: "service-principals:read", Summary: "Get a service principal"},
		func(ctx context.Context, in *idPath) (*principalOutput, error) {
			p, err := s.GetPrincipal(ctx, in.ID)
			return &principalOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "update-service-principal", Method: http.MethodPatch, Path: base + "/{id}", Tag: tag,
		Permission: "service-principals:write", Summary: "Change or disable a service principal",
		Description: "status disabled stops every key of the principal at once; active brings them back."},
		func(ctx context.Context, in *updatePrincipalInput) (*principalOutput, error) {
			p, err := s.UpdatePrincipal(ctx, in.ID, in.Body)
			return &principalOutput{p}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "list-service-principal-keys", Method: http.MethodGet, Path: base + "/{id}/keys",
		Tag: tag, Permission: "service-principals:read", Summary: "List a service principal's keys",
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
	httpapi.Register(api, httpapi.Route{ID: "create-service-principal-key", Method: http.MethodPost, Path: base + "/{id}/keys",
		Tag: tag, Permission: "service-principals:write", Status: http.StatusCreated, Summary: "Create a service principal key",
		Description: "The raw key (svc_sp_...) is in the answer and shown only this once; Gale keeps its SHA-256 hash. " +
			"The caller must hold every scope of the principal."},
		func(ctx context.Context, in *createKeyInput) (*issuedKeyOutput, error) {
			k, err := s.CreateKey(ctx, in.ID, in.Body)
			return &issuedKeyOutput{k}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "rotate-service-principal-key", Method: http.MethodPost,
		Path: base + "/{id}/keys/{keyId}/rotate", Tag: tag, Permission: "service-principals:write",
		Summary:     "Rotate a service principal key",
		Description: "Issues a new raw key, shown only this once; the old one stops working at once. A revoked key is 409."},
		func(ctx context.Context, in *keyPath) (*issuedKeyOutput, error) {
			k, err := s.RotateKey(ctx, in.ID, in.KeyID)
			return &issuedKeyOutput{k}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "revoke-service-principal-key", Method: http.MethodDelete,
		Path: base + "/{id}/keys/{keyId}", Tag: tag, Permission: "service-principals:write", Status: http.StatusNoContent,
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
	httpapi.Register(api, httpapi.Route{ID: "partner-create-organization", Method: http.MethodPost, Path: "/partner-api/organizations",
		Tag: partnerTag, ServicePrincipal: true, Permission: "organizations:write", Status: http.StatusCreated,
		Summary: "Create an organization", Errors: []int{http.StatusConflict, http.StatusTooManyRequests},
		Description: "Under the principal's partner, counted against its maxOrganizations (409 " + CodeOrgLimit +
			", not retryable). A taken slug is 409 " + CodeSlugConflict + ". No first site is created. Counts against the write budget."},
		func(ctx context.Context, in *orgCreateInput) (*orgCreated, error) {
			o, rl, err := s.CreateOrganization(ctx, in.Body)
			return &orgCreated{rl, o}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "partner-create-site", Method: http.MethodPost, Path: "/partner-api/sites",
		Tag: partnerTag, ServicePrincipal: true, Permission: "sites:write", Status: http.StatusCreated, Summary: "Create a site",
		Errors:      []int{http.StatusTooManyRequests},
		Description: "orgId must be an organization of the principal's partner (403 otherwise). Counts against the write budget."},
		func(ctx context.Context, in *siteCreateInput) (*siteCreated, error) {
			st, rl, err := s.CreateSite(ctx, in.Body)
			return &siteCreated{rl, st}, err
		})
	httpapi.Register(api, httpapi.Route{ID: "partner-create-enrollment-key", Method: http.MethodPost,
		Path: "/partner-api/enrollment-keys", Tag: partnerTag, ServicePrincipal: true, Permission: "enrollment-keys:write",
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

// notYet describes an export whose domain Gale does not have yet.
func notYet(what string) string {
	return "Always an empty page for now: Gale has no " + what + " yet. The route, its scope check and its shape are " +
		"final, so integrations can be built against it; it fills when that domain lands."
}

func (s *Service) registerExports(api *httpapi.Server) {
	registerExport(api, s, export[*tenancy.Organization]{name: "organizations", scope: "organizations:read",
		summary: "Export organizations", description: "The partner's organizations (not deleted ones).",
		fetch: s.orgs.ExportOrganizations,
		key:   func(o *tenancy.Organization) (time.Time, []string) { return o.UpdatedAt, []string{o.ID} }})
	registerExport(api, s, export[tenancy.Site]{name: "sites", scope: "sites:read", summary: "Export sites",
		description: "Sites of the partner's organizations; each row carries orgId, siteId and name.",
		fetch:       s.orgs.ExportSites,
		key:         func(st tenancy.Site) (time.Time, []string) { return st.UpdatedAt, []string{st.ID} }})
	registerExport(api, s, export[devices.Device]{name: "devices", scope: "devices:read", summary: "Export devices",
		description: "Devices of the partner's organizations, decommissioned ones included (with their status). A heartbeat " +
			"changes a device (lastSeen), so with updatedSince every device that was online since then is exported.",
		fetch: s.devices.ExportDevices,
		key:   func(d devices.Device) (time.Time, []string) { return d.UpdatedAt, []string{d.ID} }})
	registerExport(api, s, export[devices.InventoryRow]{name: "device-inventory", scope: "inventory:read",
		summary: "Export device inventory", description: "Each device's last reported inventory; updatedSince compares receivedAt.",
		fetch: s.devices.ExportInventory,
		key:   func(r devices.InventoryRow) (time.Time, []string) { return r.ReceivedAt, []string{r.DeviceID} }})
	registerExport(api, s, export[devices.SoftwareRow]{name: "device-software", scope: "inventory:read", byID: true,
		summary: "Export installed software",
		description: "Installed packages of every device. Each inventory replaces a device's list with new rows, so with " +
			"updatedSince the export holds the complete lists of the devices that reported since then (replace those " +
			"devices' lists); rows stay in ID order.",
		fetch: s.devices.ExportSoftware,
		key:   func(r devices.SoftwareRow) (time.Time, []string) { return time.Time{}, []string{r.ID} }})
	registerExport(api, s, export[map[string]any]{name: "device-relationships", scope: "inventory:read",
		summary: "Export topology edges", description: notYet("network discovery or topology")})
	registerExport(api, s, export[map[string]any]{name: "configuration-policies", scope: "configuration:read",
		summary: "Export configuration policies", description: notYet("configuration policies")})
	registerExport(api, s, export[map[string]any]{name: "configuration-assignments", scope: "configuration:read",
		summary: "Export policy assignments", description: notYet("configuration policies")})
	registerExport(api, s, export[map[string]any]{name: "scripts", scope: "scripts:read",
		summary: "Export scripts", description: notYet("scripts")})
	registerExport(api, s, export[map[string]any]{name: "automations", scope: "configuration:read",
		summary: "Export automations", description: notYet("automations")})
	registerExport(api, s, export[map[string]any]{name: "backup-configurations", scope: "backup-configuration:read",
		summary: "Export backup configuration", description: notYet("backup configurations")})
	registerExport(api, s, export[customfields.Field]{name: "custom-fields", scope: "custom-fields:read",
		summary: "Export custom field definitions", fetch: s.fields.ExportFields,
		description: "Partner-wide definitions and those of the partner's organizations.",
		key:         func(f customfields.Field) (time.Time, []string) { return f.UpdatedAt, []string{f.ID} }})
	registerExport(api, s, export[customfields.ExportedValue]{name: "custom-field-values", scope: "custom-fields:read",
		summary: "Export custom field values", fetch: s.fields.ExportValues,
		description: "Values set on devices (a field's default is on its definition). A cleared value leaves the export.",
		key: func(v customfields.ExportedValue) (time.Time, []string) {
			return v.UpdatedAt, []string{v.DeviceID, v.FieldID}
		}})
}

func registerExport[T any](api *httpapi.Server, s *Service, e export[T]) {
	httpapi.Register(api, httpapi.Route{ID: "partner-export-" + e.name, Method: http.MethodGet, Path: "/partner-api/" + e.name,
		Tag: partnerTag, ServicePrincipal: true, Permission: e.scope, Summary: e.summary,
		Description: e.description + " Cursor-paged: follow pagination.cursor while hasMore; limit up to 500. " +
			"Without updatedSince rows come in ID order; with it, in order of change."},
		func(ctx context.Context, in *ExportQuery) (*exportPage[T], error) {
			return runExport(ctx, s, e, in)
		})
}
