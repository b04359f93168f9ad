package access

import (
	"slices"
	"sort"
	"strings"
)

// FullAdmin is the grant of every permission. Only built-in roles hold it.
const FullAdmin = "*:*"

// Permission is one entry of the catalog.
type Permission struct {
	Name        string `json:"name"`
	Resource    string `json:"resource"`
	Action      string `json:"action"`
	Description string `json:"description"`
	// PartnerOnly permissions act above a single organization and cannot be granted by an
	// organization-scope role.
	PartnerOnly bool `json:"partnerOnly"`
}

type resourceActions struct {
	resource    string
	label       string
	actions     []string
	partnerOnly bool
}

// The catalog covers every permission the API names and the ones the rest of the product
// needs; routes refer to permissions only by these names.
var catalogSpec = []resourceActions{
	{"partners", "partner settings", []string{"read", "write"}, true},
	{"organizations", "organizations", []string{"read", "write", "delete"}, false},
	{"sites", "sites", []string{"read", "write", "delete"}, false},
	{"users", "users", []string{"read", "write", "delete", "invite"}, false},
	{"roles", "roles", []string{"read", "write", "delete"}, false},
	{"access-reviews", "access reviews", []string{"read", "write"}, false},
	{"api-keys", "API keys", []string{"read", "write", "delete"}, false},
	{"service-principals", "partner API service principals", []string{"read", "write"}, true},
	{"audit", "the audit log", []string{"read", "export"}, false},
	{"devices", "devices", []string{"read", "write", "delete", "execute"}, false},
	{"enrollment-keys", "enrollment keys", []string{"read", "write", "delete"}, false},
	{"inventory", "device inventory", []string{"read"}, false},
	{"scripts", "scripts", []string{"read", "write", "delete", "execute"}, false},
	{"automations", "automations", []string{"read", "write", "delete", "execute"}, false},
	{"alerts", "alerts", []string{"read", "write", "acknowledge"}, false},
	{"notifications", "notification channels and policies", []string{"read", "write"}, false},
	{"webhooks", "outbound webhooks", []string{"read", "write"}, false},
	{"patches", "patches", []string{"read", "approve", "execute"}, false},
	{"software", "software catalog and deployments", []string{"read", "write", "delete", "execute"}, false},
	{"configuration", "configuration policies and rollouts", []string{"read", "write"}, false},
	{"backup-configuration", "backup configurations", []string{"read"}, false},
	{"maintenance", "maintenance windows", []string{"read", "write"}, false},
	{"security", "security status and threats", []string{"read", "write"}, false},
	{"vulnerabilities", "vulnerability findings", []string{"read", "write", "accept_risk"}, false},
	{"incidents", "incidents", []string{"read", "write"}, false},
	{"pam", "privileged access management", []string{"read", "write", "approve"}, false},
	{"monitors", "monitors", []string{"read", "write", "delete"}, false},
	{"discovery", "network discovery", []string{"read", "write"}, false},
	{"snmp", "SNMP devices", []string{"read", "write"}, false},
	{"remote", "remote sessions and tunnels", []string{"access"}, false},
	{"reports", "reports", []string{"read", "write", "delete", "export"}, false},
	{"analytics", "analytics and dashboards", []string{"read", "write"}, false},
	{"tickets", "tickets", []string{"read", "write", "manage"}, false},
	{"catalog", "the billing catalog", []string{"read", "write"}, false},
	{"quotes", "quotes", []string{"read", "write"}, false},
	{"invoices", "invoices", []string{"read", "write"}, false},
	{"contracts", "contracts", []string{"read", "write"}, false},
	{"billing", "billing settings", []string{"read", "manage"}, true},
	{"psa", "PSA connections", []string{"read", "write"}, true},
	{"imports", "bulk imports", []string{"read", "write"}, false},
	{"sso", "single sign-on", []string{"admin"}, true},
	{"ai", "the AI assistant", []string{"use", "approve"}, false},
	{"plugins", "plugins", []string{"read", "write"}, false},
	{"custom-fields", "custom fields", []string{"read", "write"}, false},
	{"filters", "saved filters", []string{"read", "write"}, false},
	{"portal", "the client portal", []string{"manage"}, false},
}

var actionVerbs = map[string]string{
	"read": "View", "write": "Create and change", "delete": "Delete", "execute": "Run commands on",
	"invite": "Invite", "export": "Export", "acknowledge": "Acknowledge", "approve": "Approve",
	"accept_risk": "Accept the risk of", "access": "Open", "manage": "Manage", "admin": "Administer",
	"use": "Use",
}

var catalog = func() []Permission {
	var out []Permission
	for _, r := range catalogSpec {
		for _, a := range r.actions {
			out = append(out, Permission{
				Name: r.resource + ":" + a, Resource: r.resource, Action: a,
				Description: actionVerbs[a] + " " + r.label, PartnerOnly: r.partnerOnly,
			})
		}
	}
	return out
}()

// Catalog returns every permission, in a stable order.
func Catalog() []Permission { return slices.Clone(catalog) }

// LookupPermission returns the catalog entry of name.
func LookupPermission(name string) (Permission, bool) {
	for _, p := range catalog {
		if p.Name == name {
			return p, true
		}
	}
	return Permission{}, false
}

// Known reports whether p is in the catalog.
func Known(p Perm) bool {
	_, ok := LookupPermission(string(p))
	return ok
}

// ValidGrant reports whether g is a catalog permission or a wildcard over catalog entries
// ("devices:*", "*:read", "*:*").
func ValidGrant(g string) bool {
	res, act, ok := strings.Cut(g, ":")
	if !ok || res == "" || act == "" {
		return false
	}
	for _, p := range catalog {
		if (res == "*" || res == p.Resource) && (act == "*" || act == p.Action) {
			return true
		}
	}
	return false
}

// Permissions is a set of grants, possibly with wildcards.
type Permissions []string

// Has reports whether the grants include perm ("resource:action").
func (ps Permissions) Has(perm string) bool {
	res, act, _ := strings.Cut(perm, ":")
	for _, g := range ps {
		gr, ga, _ := strings.Cut(g, ":")
		if (gr == "*" || gr == res) && (ga == "*" || ga == act) {
			return true
		}
	}
	return false
}

// Covers reports whether every grant of other is held by ps (so a holder of ps may hand
// other on). A wildcard in other must be held as a wildcard at least as broad.
func (ps Permissions) Covers(other Permissions) bool {
	for _, g := range other {
		if ps.Has(g) {
			continue
		}
		// g is a wildcard not held literally: every catalog entry it expands to must be held.
		for _, p := range (Permissions{g}).Expand() {
			if !ps.Has(p) {
				return false
			}
		}
	}
	return true
}

// Expand lists the catalog permissions the grants amount to, sorted.
func (ps Permissions) Expand() []string {
	var out []string
	for _, p := range catalog {
		if ps.Has(p.Name) {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Intersect returns the catalog permissions held by both sets.
func (ps Permissions) Intersect(other Permissions) Permissions {
	var out Permissions
	for _, p := range ps.Expand() {
		if other.Has(p) {
			out = append(out, p)
		}
	}
	return out
}
