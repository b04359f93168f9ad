package access

// Perm names a permission of the catalog. Routes and checks use these constants, so a
// misspelt name does not compile; Known (and the router, at start-up) refuses a Perm that the
// catalog lacks.
type Perm string

// The catalog's permissions, one constant each, grouped by resource.
const (
	PartnersRead  Perm = "partners:read"
	PartnersWrite Perm = "partners:write"

	OrganizationsRead   Perm = "organizations:read"
	OrganizationsWrite  Perm = "organizations:write"
	OrganizationsDelete Perm = "organizations:delete"

	SitesRead   Perm = "sites:read"
	SitesWrite  Perm = "sites:write"
	SitesDelete Perm = "sites:delete"

	UsersRead   Perm = "users:read"
	UsersWrite  Perm = "users:write"
	UsersDelete Perm = "users:delete"
	UsersInvite Perm = "users:invite"

	RolesRead   Perm = "roles:read"
	RolesWrite  Perm = "roles:write"
	RolesDelete Perm = "roles:delete"

	AccessReviewsRead  Perm = "access-reviews:read"
	AccessReviewsWrite Perm = "access-reviews:write"

	APIKeysRead   Perm = "api-keys:read"
	APIKeysWrite  Perm = "api-keys:write"
	APIKeysDelete Perm = "api-keys:delete"

	ServicePrincipalsRead  Perm = "service-principals:read"
	ServicePrincipalsWrite Perm = "service-principals:write"

	AuditRead   Perm = "audit:read"
	AuditExport Perm = "audit:export"

	DevicesRead    Perm = "devices:read"
	DevicesWrite   Perm = "devices:write"
	DevicesDelete  Perm = "devices:delete"
	DevicesExecute Perm = "devices:execute"

	EnrollmentKeysRead   Perm = "enrollment-keys:read"
	EnrollmentKeysWrite  Perm = "enrollment-keys:write"
	EnrollmentKeysDelete Perm = "enrollment-keys:delete"

	InventoryRead Perm = "inventory:read"

	ScriptsRead    Perm = "scripts:read"
	ScriptsWrite   Perm = "scripts:write"
	ScriptsDelete  Perm = "scripts:delete"
	ScriptsExecute Perm = "scripts:execute"

	AutomationsRead    Perm = "automations:read"
	AutomationsWrite   Perm = "automations:write"
	AutomationsDelete  Perm = "automations:delete"
	AutomationsExecute Perm = "automations:execute"

	AlertsRead        Perm = "alerts:read"
	AlertsWrite       Perm = "alerts:write"
	AlertsAcknowledge Perm = "alerts:acknowledge"

	NotificationsRead  Perm = "notifications:read"
	NotificationsWrite Perm = "notifications:write"

	WebhooksRead  Perm = "webhooks:read"
	WebhooksWrite Perm = "webhooks:write"

	PatchesRead    Perm = "patches:read"
	PatchesApprove Perm = "patches:approve"
	PatchesExecute Perm = "patches:execute"

	SoftwareRead    Perm = "software:read"
	SoftwareWrite   Perm = "software:write"
	SoftwareDelete  Perm = "software:delete"
	SoftwareExecute Perm = "software:execute"

	ConfigurationRead  Perm = "configuration:read"
	ConfigurationWrite Perm = "configuration:write"

	BackupConfigurationRead Perm = "backup-configuration:read"

	MaintenanceRead  Perm = "maintenance:read"
	MaintenanceWrite Perm = "maintenance:write"

	SecurityRead  Perm = "security:read"
	SecurityWrite Perm = "security:write"

	VulnerabilitiesRead       Perm = "vulnerabilities:read"
	VulnerabilitiesWrite      Perm = "vulnerabilities:write"
	VulnerabilitiesAcceptRisk Perm = "vulnerabilities:accept_risk"

	IncidentsRead  Perm = "incidents:read"
	IncidentsWrite Perm = "incidents:write"

	PAMRead    Perm = "pam:read"
	PAMWrite   Perm = "pam:write"
	PAMApprove Perm = "pam:approve"

	MonitorsRead   Perm = "monitors:read"
	MonitorsWrite  Perm = "monitors:write"
	MonitorsDelete Perm = "monitors:delete"

	DiscoveryRead  Perm = "discovery:read"
	DiscoveryWrite Perm = "discovery:write"

	SNMPRead  Perm = "snmp:read"
	SNMPWrite Perm = "snmp:write"

	RemoteAccess Perm = "remote:access"

	ReportsRead   Perm = "reports:read"
	ReportsWrite  Perm = "reports:write"
	ReportsDelete Perm = "reports:delete"
	ReportsExport Perm = "reports:export"

	AnalyticsRead  Perm = "analytics:read"
	AnalyticsWrite Perm = "analytics:write"

	TicketsRead   Perm = "tickets:read"
	TicketsWrite  Perm = "tickets:write"
	TicketsManage Perm = "tickets:manage"

	CatalogRead  Perm = "catalog:read"
	CatalogWrite Perm = "catalog:write"

	QuotesRead  Perm = "quotes:read"
	QuotesWrite Perm = "quotes:write"

	InvoicesRead  Perm = "invoices:read"
	InvoicesWrite Perm = "invoices:write"

	ContractsRead  Perm = "contracts:read"
	ContractsWrite Perm = "contracts:write"

	BillingRead   Perm = "billing:read"
	BillingManage Perm = "billing:manage"

	PSARead  Perm = "psa:read"
	PSAWrite Perm = "psa:write"

	ImportsRead  Perm = "imports:read"
	ImportsWrite Perm = "imports:write"

	SSOAdmin Perm = "sso:admin"

	AIUse     Perm = "ai:use"
	AIApprove Perm = "ai:approve"

	PluginsRead  Perm = "plugins:read"
	PluginsWrite Perm = "plugins:write"

	CustomFieldsRead  Perm = "custom-fields:read"
	CustomFieldsWrite Perm = "custom-fields:write"

	FiltersRead  Perm = "filters:read"
	FiltersWrite Perm = "filters:write"

	PortalManage Perm = "portal:manage"
)
