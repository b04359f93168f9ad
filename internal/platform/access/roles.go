package access

// BuiltInRole is a role every tenant of its level can use; it cannot be edited or deleted.
type BuiltInRole struct {
	ID          string
	Scope       Level
	Name        string
	Description string
	Permissions Permissions
}

// Fixed IDs of the built-in roles, so configuration and tests can name them.
const (
	RoleSystemAdmin          = "00000000-0000-7000-8000-000000000001"
	RolePartnerAdmin         = "00000000-0000-7000-8000-000000000101"
	RolePartnerTechnician    = "00000000-0000-7000-8000-000000000102"
	RolePartnerViewer        = "00000000-0000-7000-8000-000000000103"
	RolePartnerBilling       = "00000000-0000-7000-8000-000000000104"
	RolePartnerBillingViewer = "00000000-0000-7000-8000-000000000105"
	RoleSecurityApprover     = "00000000-0000-7000-8000-000000000106"
	RoleOrgAdmin             = "00000000-0000-7000-8000-000000000201"
	RoleOrgTechnician        = "00000000-0000-7000-8000-000000000202"
	RoleOrgViewer            = "00000000-0000-7000-8000-000000000203"
)

var technicianGrants = Permissions{
	"organizations:read", "sites:read", "users:read", "roles:read",
	"devices:*", "enrollment-keys:*", "inventory:read", "scripts:*", "automations:*", "alerts:*",
	"notifications:read", "patches:*", "software:*", "configuration:read", "maintenance:*",
	"security:*", "vulnerabilities:read", "vulnerabilities:write", "incidents:*", "pam:read",
	"monitors:*", "discovery:*", "snmp:*", "remote:access", "reports:read", "reports:export",
	"analytics:read", "tickets:read", "tickets:write", "custom-fields:read", "filters:*", "ai:use",
}

// orgAdminGrants is everything an organization may do for itself.
var orgAdminGrants = func() Permissions {
	var out Permissions
	for _, p := range catalog {
		if !p.PartnerOnly {
			out = append(out, p.Name)
		}
	}
	return out
}()

var builtInRoles = []BuiltInRole{
	{RoleSystemAdmin, LevelSystem, "System Administrator", "Operates the whole Gale server.", Permissions{FullAdmin}},
	{RolePartnerAdmin, LevelPartner, "Partner Admin", "Full control of the partner and all its organizations.", Permissions{FullAdmin}},
	{RolePartnerTechnician, LevelPartner, "Partner Technician", "Works on devices, scripts, alerts and patches across organizations.", technicianGrants},
	{RolePartnerViewer, LevelPartner, "Partner Viewer", "Reads everything, changes nothing.", Permissions{"*:read"}},
	{RolePartnerBilling, LevelPartner, "Partner Billing", "Manages catalog, quotes, invoices and contracts.",
		Permissions{"organizations:read", "sites:read", "devices:read", "catalog:*", "quotes:*", "invoices:*", "contracts:*", "billing:*", "psa:read", "reports:read", "reports:export"}},
	{RolePartnerBillingViewer, LevelPartner, "Partner Billing Viewer", "Reads billing data.",
		Permissions{"organizations:read", "sites:read", "devices:read", "catalog:read", "quotes:read", "invoices:read", "contracts:read", "billing:read"}},
	{RoleSecurityApprover, LevelPartner, "Security Approver", "Approves privileged access and accepts vulnerability risk.",
		Permissions{"organizations:read", "sites:read", "devices:read", "security:read", "vulnerabilities:*", "incidents:read", "pam:*", "audit:read"}},
	{RoleOrgAdmin, LevelOrganization, "Organization Admin", "Full control of one organization.", orgAdminGrants},
	{RoleOrgTechnician, LevelOrganization, "Organization Technician", "Works on the organization's devices.", technicianGrants},
	{RoleOrgViewer, LevelOrganization, "Organization Viewer", "Reads the organization's data.", Permissions{"*:read"}},
}

// BuiltInRoles returns the built-in roles.
func BuiltInRoles() []BuiltInRole { return builtInRoles }

// BuiltInRoleByID returns the built-in role with the given ID.
func BuiltInRoleByID(id string) (BuiltInRole, bool) {
	for _, r := range builtInRoles {
		if r.ID == id {
			return r, true
		}
	}
	return BuiltInRole{}, false
}
