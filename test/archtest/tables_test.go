package archtest

import (
	"go/ast"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// owners maps every table the migrations create to the package (directory under the module
// root) that owns it: the only one whose SQL names it.
var owners = map[string]string{
	"partners":      "internal/domains/tenancy",
	"organizations": "internal/domains/tenancy",
	"sites":         "internal/domains/tenancy",

	"users":               "internal/domains/identity",
	"roles":               "internal/domains/identity",
	"user_org_access":     "internal/domains/identity",
	"access_reviews":      "internal/domains/identity",
	"access_review_items": "internal/domains/identity",

	"refresh_tokens":     "internal/domains/auth",
	"user_tokens":        "internal/domains/auth",
	"mfa_recovery_codes": "internal/domains/auth",

	"api_keys":    "internal/domains/apikeys",
	"rate_limits": "internal/platform/ratelimit",
	"audit_logs":  "internal/domains/audit",

	"enrollment_keys": "internal/domains/enrollment",

	"devices":          "internal/domains/devices",
	"device_tags":      "internal/domains/devices",
	"device_inventory": "internal/domains/devices",
	"device_software":  "internal/domains/devices",
	"device_metrics":   "internal/domains/devices",
	"device_commands":  "internal/domains/devices",
	"agent_calls":      "internal/domains/devices",

	"device_groups":        "internal/domains/groups",
	"device_group_members": "internal/domains/groups",
	"device_group_log":     "internal/domains/groups",

	"custom_fields":        "internal/domains/customfields",
	"device_custom_values": "internal/domains/customfields",

	"agent_versions": "internal/domains/agentdist",
	"agent_releases": "internal/domains/agentdist",

	"service_principals":      "internal/domains/partnerapi",
	"service_principal_keys":  "internal/domains/partnerapi",
	"partner_api_idempotency": "internal/domains/partnerapi",

	"events":                "internal/platform/events",
	"event_consumptions":    "internal/platform/events",
	"event_consumer_leases": "internal/platform/events",

	"alert_rules":     "internal/domains/alerts",
	"alerts":          "internal/domains/alerts",
	"alert_templates": "internal/domains/alerts",

	"webhooks":                  "internal/domains/webhooks",
	"webhook_deliveries":        "internal/domains/webhooks",
	"webhook_delivery_attempts": "internal/domains/webhooks",

	"notification_channels":   "internal/domains/alertchannels",
	"alert_policies":          "internal/domains/alertchannels",
	"alert_escalations":       "internal/domains/alertchannels",
	"notification_deliveries": "internal/domains/alertchannels",

	"notifications": "internal/domains/notifications",
	"push_tokens":   "internal/domains/notifications",
	"push_messages": "internal/domains/notifications",

	"blobs":       "internal/platform/blob",
	"blob_chunks": "internal/platform/blob",

	"nodes":             "internal/platform/nodes",
	"agent_connections": "internal/platform/nodes",

	"tickets": "internal/domains/authtickets",

	"device_posture": "internal/domains/devices",

	"vuln_cves":              "internal/domains/vulnerabilities",
	"vuln_advisories":        "internal/domains/vulnerabilities",
	"vuln_changelog_fetches": "internal/domains/vulnerabilities",
	"vuln_findings":          "internal/domains/vulnerabilities",
	"vuln_device_marks":      "internal/domains/vulnerabilities",
	"vuln_group_keys":        "internal/domains/vulnerabilities",
	"vuln_group_stats":       "internal/domains/vulnerabilities",

	"monitors":        "internal/domains/monitors",
	"monitor_results": "internal/domains/monitors",

	"pam_signer_groups": "internal/domains/pam",
	"pam_rules":         "internal/domains/pam",
	"pam_config":        "internal/domains/pam",
	"pam_requests":      "internal/domains/pam",

	"snmp_devices":       "internal/domains/snmp",
	"snmp_templates":     "internal/domains/snmp",
	"snmp_template_oids": "internal/domains/snmp",
	"snmp_metrics":       "internal/domains/snmp",
	"snmp_rollups":       "internal/domains/snmp",
	"snmp_latest":        "internal/domains/snmp",
	"snmp_thresholds":    "internal/domains/snmp",
	"snmp_polls":         "internal/domains/snmp",

	"maintenance_windows":     "internal/domains/maintenance",
	"maintenance_occurrences": "internal/domains/maintenance",

	"patches":                "internal/domains/patches",
	"patch_approvals":        "internal/domains/patches",
	"patch_devices":          "internal/domains/patches",
	"patch_device_summaries": "internal/domains/patches",
	"patch_jobs":             "internal/domains/patches",
	"patch_job_devices":      "internal/domains/patches",
	"patch_reports":          "internal/domains/patches",
	"patch_policies":         "internal/domains/patches",

	"policies":          "internal/domains/configpolicies",
	"policy_targets":    "internal/domains/configpolicies",
	"policy_compliance": "internal/domains/configpolicies",

	"rollouts":        "internal/domains/rollouts",
	"rollout_devices": "internal/domains/rollouts",

	"software_catalog":            "internal/domains/software",
	"software_versions":           "internal/domains/software",
	"software_deployments":        "internal/domains/software",
	"software_deployment_devices": "internal/domains/software",

	"tunnels": "internal/domains/tunnels",

	"discovery_profiles": "internal/domains/discovery",
	"discovery_jobs":     "internal/domains/discovery",
	"discovery_assets":   "internal/domains/discovery",
	"discovery_routes":   "internal/domains/discovery",

	"third_party_packages": "internal/domains/thirdparty",
	"third_party_versions": "internal/domains/thirdparty",
	"third_party_tests":    "internal/domains/thirdparty",

	"remote_sessions": "internal/domains/remote",

	"automations":                   "internal/domains/automations",
	"automation_runs":               "internal/domains/automations",
	"automation_run_steps":          "internal/domains/automations",
	"automation_webhook_signatures": "internal/domains/automations",

	"scripts":           "internal/domains/scripts",
	"script_versions":   "internal/domains/scripts",
	"script_categories": "internal/domains/scripts",
	"script_tags":       "internal/domains/scripts",
	"script_tag_links":  "internal/domains/scripts",
	"script_executions": "internal/domains/scripts",

	"security_device_status":         "internal/domains/security",
	"security_threats":               "internal/domains/security",
	"security_scans":                 "internal/domains/security",
	"security_policies":              "internal/domains/security",
	"security_snapshots":             "internal/domains/security",
	"security_recommendation_states": "internal/domains/security",

	"incidents":               "internal/domains/incidents",
	"incident_edr_connectors": "internal/domains/incidents",
	"incident_feed_counts":    "internal/domains/incidents",
}

// crossDomainSQL lists the packages that still name another domain's table in their SQL, and
// why. Each entry is a debt to pay by moving the query into the owner (a service call, or an
// exported fragment); the test fails when an entry is no longer needed, so the list only
// shrinks.
var crossDomainSQL = map[string]map[string]string{
	// Test support: seeds fixtures straight into the tables.
	"internal/testkit/apptest": {
		"partners":    "fixture seeding",
		"devices":     "fixture seeding",
		"device_tags": "fixture seeding",
	},
	// Test support: a large fleet written straight into the tables for benchmarks and load scripts.
	"internal/testkit/seed": {
		"partners":      "fleet seeding",
		"organizations": "fleet seeding",
		"sites":         "fleet seeding",
		"devices":       "fleet seeding",
	},
	// Creating an organization grants an organization-limited creator access to it in the same
	// transaction; identity imports tenancy, so tenancy cannot call identity.
	"internal/domains/tenancy": {
		"user_org_access": "grant of a new organization to its limited creator",
	},
	// Credentials live in users' rows: sign-in, password and MFA changes read and write them.
	"internal/domains/auth": {
		"users": "credentials are columns of users",
		"roles": "permissions of the signed-in user",
	},
	// identity revokes sessions and keys of users it disables or deletes.
	"internal/domains/identity": {
		"refresh_tokens": "sessions of disabled or deleted users",
		"user_tokens":    "tokens of disabled or deleted users",
		"api_keys":       "keys of disabled or deleted users",
	},
	// audit imports nothing of identity (identity records audit entries).
	"internal/domains/audit": {
		"users": "active users of the access report",
	},
	// Dynamic groups evaluate devices and their tags.
	"internal/domains/groups": {
		"devices":     "membership evaluation",
		"device_tags": "membership evaluation",
	},
}

// sqlTable finds the tables a piece of SQL names after FROM, JOIN, INTO, UPDATE or TABLE.
var sqlTable = regexp.MustCompile(`\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+([a-z_][a-z0-9_]*)`)

func TestEveryTableHasAnOwner(t *testing.T) {
	root := moduleRoot(t)
	create := regexp.MustCompile(`(?i)CREATE TABLE (?:IF NOT EXISTS )?([a-z_][a-z0-9_]*)`)
	files, err := filepath.Glob(filepath.Join(root, "internal", "platform", "store", "migrations", "*", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations found (%v)", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range create.FindAllStringSubmatch(string(b), -1) {
			if _, ok := owners[m[1]]; !ok {
				t.Errorf("%s creates table %s, which has no owner in archtest's owners map", filepath.Base(f), m[1])
			}
		}
	}
}

// crossDomainQueries returns, per package directory, the tables of other packages its SQL
// names, with one place each names it.
func crossDomainQueries(t *testing.T) map[string]map[string]string {
	t.Helper()
	found := map[string]map[string]string{}
	fset, files := sourceFiles(t)
	for _, f := range files {
		pkg := f.pkg
		ast.Inspect(f.ast, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, m := range sqlTable.FindAllStringSubmatch(s, -1) {
				owner, known := owners[m[1]]
				if !known || owner == pkg {
					continue
				}
				if found[pkg] == nil {
					found[pkg] = map[string]string{}
				}
				if _, seen := found[pkg][m[1]]; !seen {
					found[pkg][m[1]] = fset.Position(lit.Pos()).String()
				}
			}
			return true
		})
	}
	return found
}

func TestSQLStaysWithItsDomain(t *testing.T) {
	found := crossDomainQueries(t)
	for _, pkg := range slices.Sorted(maps.Keys(found)) {
		for _, table := range slices.Sorted(maps.Keys(found[pkg])) {
			if _, excepted := crossDomainSQL[pkg][table]; !excepted {
				t.Errorf("%s: SQL of %s names table %s of %s; call its service or a fragment it exports",
					found[pkg][table], pkg, table, owners[table])
			}
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(crossDomainSQL)) {
		for _, table := range slices.Sorted(maps.Keys(crossDomainSQL[pkg])) {
			if _, still := found[pkg][table]; !still {
				t.Errorf("crossDomainSQL excepts %s naming %s, which it no longer does: remove the entry", pkg, table)
			}
		}
	}
}
