// Package console is Gale's web console: server-rendered pages for technicians, served by the
// same binary at / beside the API. A page is a thin handler over the same domain services the
// API calls, gated by the same rules (httpapi.Server.Allow with the API operation's ID), in the
// signed-in user's scope; it never reads the database itself. Sessions are cookies holding
// a refresh token of the API's own session families; state-changing requests carry a CSRF
// token; pages run no inline script.
package console

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"gale/internal/domains/alertchannels"
	"gale/internal/domains/alerts"
	"gale/internal/domains/apikeys"
	"gale/internal/domains/audit"
	"gale/internal/domains/auth"
	"gale/internal/domains/automations"
	"gale/internal/domains/devices"
	"gale/internal/domains/discovery"
	"gale/internal/domains/enrollment"
	"gale/internal/domains/groups"
	"gale/internal/domains/identity"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/monitors"
	"gale/internal/domains/patches"
	"gale/internal/domains/remote"
	"gale/internal/domains/scripts"
	"gale/internal/domains/security"
	"gale/internal/domains/systemtools"
	"gale/internal/domains/tenancy"
	"gale/internal/domains/vulnerabilities"
	"gale/internal/domains/webhooks"
	"gale/internal/platform/bus"
	"gale/internal/platform/clock"
	"gale/internal/platform/httpapi"
)

// Deps are the services the console's pages call.
type Deps struct {
	HTTP        *httpapi.Server
	Logger      *slog.Logger
	Clock       clock.Clock
	Bus         bus.Bus
	Auth        *auth.Service
	Identity    *identity.Service
	Tenancy     *tenancy.Service
	Devices     *devices.Service
	Alerts      *alerts.Service
	Scripts     *scripts.Service
	Remote      *remote.Service
	Groups      *groups.Service
	Enrollment  *enrollment.Service
	Audit       *audit.Log
	APIKeys     *apikeys.Service
	SystemTools *systemtools.Service

	// patches
	Patches       *patches.Service
	PatchPolicies *patches.Policies
	// Security and Vulnerabilities serve the security pages.
	Security        *security.Service
	Vulnerabilities *vulnerabilities.Service
	Automations     *automations.Service
	Maintenance     *maintenance.Service
	Monitors        *monitors.Service
	Discovery       *discovery.Service
	Channels        *alertchannels.Service
	Webhooks        *webhooks.Service
}

// Options configure the console.
type Options struct {
	// Secret keys the CSRF tokens.
	Secret []byte
	// Idle ends a session after this long without a request.
	Idle time.Duration
	// SecureCookies marks cookies Secure (the server is reached over TLS).
	SecureCookies bool
	// Version is shown in the footer.
	Version string
	// PublicURL is where agents reach the server: the install commands name it.
	PublicURL string
	// KeyTTL is the lifetime of an enrollment key created without one.
	KeyTTL time.Duration
}

// Console serves the pages.
type Console struct {
	Deps
	opts   Options
	clock  clock.Clock
	pages  pages
	assets *assets
	live   *hub
	// counts caches the fleet-wide summaries of the pages.
	counts *summaries
}

// New parses the pages and prepares the assets.
func New(d Deps, o Options) (*Console, error) {
	c := &Console{Deps: d, opts: o, clock: clock.Or(d.Clock)}
	var err error
	if c.assets, err = loadAssets(); err != nil {
		return nil, fmt.Errorf("console assets: %w", err)
	}
	if c.pages, err = parsePages(c.assets, c.clock); err != nil {
		return nil, fmt.Errorf("console pages: %w", err)
	}
	c.counts = newSummaries(c.clock)
	c.live = newHub(d.Logger, c.counts.clear)
	return c, nil
}

// Register adds the console's routes to the server's router.
func (c *Console) Register(h *httpapi.Server) {
	h.Handle("GET /assets/{path...}", http.HandlerFunc(c.assets.serve))
	h.Handle("GET /signin", c.public(c.signInPage))
	h.Handle("POST /signin", c.public(c.signIn))
	h.Handle("POST /signin/mfa", c.public(c.signInMFA))
	h.Handle("POST /signout", c.page(c.signOut))

	h.Handle("GET /", c.page(c.home))
	h.Handle("POST /scope", c.page(c.setScope))
	h.Handle("GET /audit", c.page(c.auditLog))
	h.Handle("GET /settings", c.page(c.settings))
	h.Handle("GET /users", c.page(c.users))
	h.Handle("POST /settings/enrollment-keys/{id}/revoke", c.page(c.revokeEnrollmentKey))
	h.Handle("POST /settings/api-keys/{id}/revoke", c.page(c.revokeAPIKey))
	h.Handle("GET /account", c.page(c.account))
	h.Handle("POST /account/mfa/setup", c.page(c.mfaSetup))
	h.Handle("POST /account/mfa/enable", c.page(c.mfaEnable))
	h.Handle("POST /account/mfa/disable", c.page(c.mfaDisable))
	h.Handle("POST /account/password", c.page(c.changePassword))
	h.Handle("GET /start", c.page(c.start))
	h.Handle("POST /start/partner", c.page(c.startPartner))
	h.Handle("POST /start/organization", c.page(c.startOrg))
	h.Handle("POST /start/key", c.page(c.startKey))
	h.Handle("GET /live", c.page(c.liveStream))

	h.Handle("GET /devices", c.page(c.deviceList))
	h.Handle("POST /devices/bulk", c.page(c.deviceBulk))
	h.Handle("GET /devices/{id}", c.page(c.deviceDetail))
	h.Handle("GET /devices/{id}/software", c.page(c.deviceSoftware))
	h.Handle("GET /devices/{id}/processes", c.page(c.processes))
	h.Handle("POST /devices/{id}/processes/{pid}/kill", c.page(c.killProcess))
	h.Handle("POST /devices/{id}/run", c.page(c.runScript))
	h.Handle("POST /devices/{id}/terminal", c.page(c.openTerminal))
	h.Handle("GET /devices/{id}/commands/{command}/output", c.page(c.outputStream))

	h.Handle("GET /scripts", c.page(c.scriptList))
	h.Handle("GET /scripts/new", c.page(c.scriptNew))
	h.Handle("POST /scripts", c.page(c.scriptCreate))
	h.Handle("GET /scripts/executions/{id}", c.page(c.executionDetail))
	h.Handle("GET /scripts/{id}", c.page(c.scriptDetail))
	h.Handle("POST /scripts/{id}", c.page(c.scriptUpdate))
	h.Handle("GET /scripts/{id}/edit", c.page(c.scriptEdit))
	h.Handle("POST /scripts/{id}/run", c.page(c.runOnGroup))

	h.Handle("GET /alerts", c.page(c.alertList))
	h.Handle("POST /alerts/bulk", c.page(c.alertBulk))
	h.Handle("GET /alerts/{id}", c.page(c.alertDetail))
	h.Handle("POST /alerts/{id}/{action}", c.page(c.alertAct))

	// patches
	h.Handle("GET /devices/{id}/patches", c.page(c.devicePatches))
	h.Handle("POST /devices/{id}/patches/scan", c.page(c.devicePatchScan))
	h.Handle("POST /devices/{id}/patches/install", c.page(c.devicePatchInstall))
	h.Handle("POST /devices/{id}/patches/{patch}/{action}", c.page(c.devicePatchDecide))
	h.Handle("GET /patches", c.page(c.patchList))
	h.Handle("POST /patches/bulk", c.page(c.patchBulk))
	h.Handle("GET /patches/jobs", c.page(c.patchJobs))
	h.Handle("GET /patches/jobs/{id}", c.page(c.patchJob))
	h.Handle("GET /patches/policies", c.page(c.patchPolicies))
	h.Handle("POST /patches/policies", c.page(c.patchPolicyCreate))
	h.Handle("GET /patches/policies/new", c.page(c.patchPolicyNew))
	h.Handle("GET /patches/policies/{id}", c.page(c.patchPolicy))
	h.Handle("POST /patches/policies/{id}", c.page(c.patchPolicyUpdate))
	h.Handle("GET /patches/policies/{id}/edit", c.page(c.patchPolicyEdit))
	h.Handle("POST /patches/policies/{id}/{action}", c.page(c.patchPolicyAct))
	h.Handle("GET /patches/{id}", c.page(c.patchDetail))
	h.Handle("POST /patches/{id}/{action}", c.page(c.patchDecide))
	// security and vulnerabilities
	h.Handle("GET /security", c.page(c.securityFleet))
	h.Handle("POST /security/threats/{id}/{action}", c.page(c.threatAct))
	h.Handle("GET /devices/{id}/security", c.page(c.deviceSecurityPage))
	h.Handle("POST /devices/{id}/security/scan", c.page(c.startScan))
	h.Handle("GET /devices/{id}/vulnerabilities", c.page(c.deviceVulnerabilities))
	h.Handle("GET /vulnerabilities", c.page(c.vulnerabilityList))
	h.Handle("POST /vulnerabilities/remediate", c.page(c.remediateCVE))
	h.Handle("GET /vulnerabilities/{id}", c.page(c.vulnerabilityDetail))
	h.Handle("POST /vulnerabilities/{id}/{action}", c.page(c.findingAct))
	// system tools
	h.Handle("GET /devices/{id}/services", c.page(c.services))
	h.Handle("POST /devices/{id}/services/{name}/{action}", c.page(c.serviceAction))
	h.Handle("GET /devices/{id}/logs", c.page(c.logs))
	h.Handle("GET /devices/{id}/files", c.page(c.files))
	h.Handle("GET /devices/{id}/files/download", c.page(c.downloadFile))
	h.Handle("POST /devices/{id}/files/upload", c.uploadForm(c.page(c.uploadFile)))
	// operations: automations, maintenance windows, monitors, discovery
	h.Handle("GET /automations", c.page(c.automationList))
	h.Handle("GET /automations/runs/{runId}", c.page(c.automationRunDetail))
	h.Handle("GET /automations/{id}", c.page(c.automationDetail))
	h.Handle("POST /automations/{id}/run", c.page(c.automationRun))
	h.Handle("POST /automations/{id}/enable", c.page(c.automationEnable))
	h.Handle("POST /automations/{id}/disable", c.page(c.automationDisable))
	h.Handle("GET /maintenance", c.page(c.maintenanceList))
	h.Handle("GET /maintenance/new", c.page(c.maintenanceNew))
	h.Handle("POST /maintenance", c.page(c.maintenanceCreate))
	h.Handle("GET /maintenance/{id}", c.page(c.maintenanceDetail))
	h.Handle("POST /maintenance/{id}/cancel", c.page(c.maintenanceCancel))
	h.Handle("POST /maintenance/{id}/delete", c.page(c.maintenanceDelete))
	h.Handle("POST /maintenance/occurrences/{id}/start", c.page(c.occurrenceStart))
	h.Handle("POST /maintenance/occurrences/{id}/end", c.page(c.occurrenceEnd))
	h.Handle("GET /monitors", c.page(c.monitorList))
	h.Handle("GET /monitors/{id}", c.page(c.monitorDetail))
	h.Handle("POST /monitors/{id}/check", c.page(c.monitorCheck))
	h.Handle("POST /monitors/{id}/enable", c.page(c.monitorEnable))
	h.Handle("POST /monitors/{id}/disable", c.page(c.monitorDisable))
	h.Handle("POST /monitors/{id}/delete", c.page(c.monitorDelete))
	h.Handle("GET /discovery", c.page(c.discoveryOverview))
	h.Handle("GET /discovery/profiles/{id}", c.page(c.discoveryProfile))
	h.Handle("POST /discovery/profiles/{id}/scan", c.page(c.discoveryScan))
	h.Handle("GET /discovery/jobs/{id}", c.page(c.discoveryJob))
	h.Handle("POST /discovery/jobs/{id}/cancel", c.page(c.discoveryCancel))
	h.Handle("GET /discovery/assets", c.page(c.discoveryAssets))
	h.Handle("GET /discovery/assets/{id}", c.page(c.discoveryAsset))
	h.Handle("POST /discovery/assets/{id}/link", c.page(c.discoveryLink))
	h.Handle("POST /discovery/assets/{id}/ignore", c.page(c.discoveryIgnore))
	h.Handle("POST /discovery/assets/{id}/delete", c.page(c.discoveryDelete))
	// settings: users, roles, API keys, notification channels, webhooks
	h.Handle("GET /users/invite", c.page(c.inviteForm))
	h.Handle("POST /users/invite", c.page(c.inviteUser))
	h.Handle("GET /users/{id}", c.page(c.userDetail))
	h.Handle("POST /users/{id}/role", c.page(c.assignRole))
	h.Handle("POST /users/{id}/status", c.page(c.setUserStatus))
	h.Handle("POST /users/{id}/resend-invite", c.page(c.resendInvite))
	h.Handle("POST /users/{id}/delete", c.page(c.deleteUser))
	h.Handle("GET /roles", c.page(c.roleList))
	h.Handle("GET /roles/new", c.page(c.roleNew))
	h.Handle("POST /roles", c.page(c.roleCreate))
	h.Handle("GET /roles/{id}", c.page(c.roleDetail))
	h.Handle("POST /roles/{id}", c.page(c.roleUpdate))
	h.Handle("GET /roles/{id}/edit", c.page(c.roleEdit))
	h.Handle("POST /roles/{id}/delete", c.page(c.roleDelete))
	h.Handle("GET /settings/api-keys/new", c.page(c.apiKeyNew))
	h.Handle("POST /settings/api-keys", c.page(c.apiKeyCreate))
	h.Handle("GET /settings/channels", c.page(c.channelList))
	h.Handle("GET /settings/channels/new", c.page(c.channelNew))
	h.Handle("POST /settings/channels", c.page(c.channelCreate))
	h.Handle("GET /settings/channels/{id}", c.page(c.channelDetail))
	h.Handle("POST /settings/channels/{id}", c.page(c.channelUpdate))
	h.Handle("GET /settings/channels/{id}/edit", c.page(c.channelEdit))
	h.Handle("POST /settings/channels/{id}/test", c.page(c.channelTest))
	h.Handle("POST /settings/channels/{id}/delete", c.page(c.channelDelete))
	h.Handle("GET /settings/webhooks", c.page(c.webhookList))
	h.Handle("GET /settings/webhooks/new", c.page(c.webhookNew))
	h.Handle("POST /settings/webhooks", c.page(c.webhookCreate))
	h.Handle("GET /settings/webhooks/{id}", c.page(c.webhookDetail))
	h.Handle("POST /settings/webhooks/{id}", c.page(c.webhookUpdate))
	h.Handle("GET /settings/webhooks/{id}/edit", c.page(c.webhookEdit))
	h.Handle("POST /settings/webhooks/{id}/test", c.page(c.webhookTest))
	h.Handle("POST /settings/webhooks/{id}/rotate-secret", c.page(c.webhookRotate))
	h.Handle("POST /settings/webhooks/{id}/retry/{delivery}", c.page(c.webhookRetry))
	h.Handle("POST /settings/webhooks/{id}/delete", c.page(c.webhookDelete))
	// operations forms: monitors, discovery profiles, automations
	h.Handle("GET /monitors/new", c.page(c.monitorNew))
	h.Handle("POST /monitors", c.page(c.monitorCreate))
	h.Handle("GET /monitors/{id}/edit", c.page(c.monitorEdit))
	h.Handle("POST /monitors/{id}", c.page(c.monitorUpdate))
	h.Handle("GET /discovery/profiles/new", c.page(c.discoveryProfileNew))
	h.Handle("POST /discovery/profiles", c.page(c.discoveryProfileCreate))
	h.Handle("GET /discovery/profiles/{id}/edit", c.page(c.discoveryProfileEdit))
	h.Handle("POST /discovery/profiles/{id}", c.page(c.discoveryProfileUpdate))
	h.Handle("POST /discovery/profiles/{id}/delete", c.page(c.discoveryProfileDelete))
	h.Handle("GET /automations/new", c.page(c.automationNew))
	h.Handle("POST /automations", c.page(c.automationCreate))
	h.Handle("GET /automations/{id}/edit", c.page(c.automationEdit))
	h.Handle("POST /automations/{id}", c.page(c.automationUpdate))
	h.Handle("POST /automations/{id}/delete", c.page(c.automationDelete))
}

// allow applies the rules of an API operation to the signed-in user.
func (c *Console) allow(ctx context.Context, operation string) error {
	return c.HTTP.Allow(ctx, operation)
}
