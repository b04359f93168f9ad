// Package archtest holds the tests of the architecture's rules that no single package can
// check: a domain's tables are queried only by that domain (others call its service or use
// the SQL fragments it exports), the agent binary carries no server code, and nothing but the
// binaries and the test harness imports the wiring package.
package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// owners maps every table the migrations create to the package (directory under the module
// root) that owns it: the only one whose SQL names it.
var owners = map[string]string{
	"partners":      "internal/tenancy",
	"organizations": "internal/tenancy",
	"sites":         "internal/tenancy",

	"users":               "internal/identity",
	"roles":               "internal/identity",
	"user_org_access":     "internal/identity",
	"access_reviews":      "internal/identity",
	"access_review_items": "internal/identity",

	"refresh_tokens":     "internal/auth",
	"user_tokens":        "internal/auth",
	"mfa_recovery_codes": "internal/auth",

	"api_keys":    "internal/apikeys",
	"rate_limits": "internal/ratelimit",
	"audit_logs":  "internal/audit",

	"enrollment_keys": "internal/enrollment",

	"devices":          "internal/devices",
	"device_tags":      "internal/devices",
	"device_inventory": "internal/devices",
	"device_software":  "internal/devices",
	"device_metrics":   "internal/devices",
	"device_commands":  "internal/devices",
	"agent_calls":      "internal/devices",

	"device_groups":        "internal/groups",
	"device_group_members": "internal/groups",
	"device_group_log":     "internal/groups",

	"custom_fields":        "internal/customfields",
	"device_custom_values": "internal/customfields",

	"agent_versions": "internal/agentdist",
	"agent_releases": "internal/agentdist",

	"service_principals":      "internal/partnerapi",
	"service_principal_keys":  "internal/partnerapi",
	"partner_api_idempotency": "internal/partnerapi",

	"events":                "internal/events",
	"event_consumptions":    "internal/events",
	"event_consumer_leases": "internal/events",

	"alert_rules":     "internal/alerts",
	"alerts":          "internal/alerts",
	"alert_templates": "internal/alerts",

	"webhooks":                  "internal/webhooks",
	"webhook_deliveries":        "internal/webhooks",
	"webhook_delivery_attempts": "internal/webhooks",

	"notification_channels":   "internal/notify",
	"alert_policies":          "internal/notify",
	"alert_escalations":       "internal/notify",
	"notification_deliveries": "internal/notify",

	"notifications": "internal/notifications",
	"push_tokens":   "internal/notifications",
	"push_messages": "internal/notifications",

	"blobs":       "internal/blob",
	"blob_chunks": "internal/blob",

	"nodes":             "internal/nodes",
	"agent_connections": "internal/nodes",

	"tickets": "internal/tickets",

	"device_posture": "internal/devices",

	"vuln_cves":              "internal/vulnerabilities",
	"vuln_advisories":        "internal/vulnerabilities",
	"vuln_changelog_fetches": "internal/vulnerabilities",
	"vuln_findings":          "internal/vulnerabilities",
	"vuln_device_marks":      "internal/vulnerabilities",
	"vuln_group_keys":        "internal/vulnerabilities",
	"vuln_group_stats":       "internal/vulnerabilities",

	"monitors":        "internal/monitors",
	"monitor_results": "internal/monitors",

	"pam_signer_groups": "internal/pam",
	"pam_rules":         "internal/pam",
	"pam_config":        "internal/pam",
	"pam_requests":      "internal/pam",

	"snmp_devices":       "internal/snmp",
	"snmp_templates":     "internal/snmp",
	"snmp_template_oids": "internal/snmp",
	"snmp_metrics":       "internal/snmp",
	"snmp_rollups":       "internal/snmp",
	"snmp_latest":        "internal/snmp",
	"snmp_thresholds":    "internal/snmp",
	"snmp_polls":         "internal/snmp",

	"maintenance_windows":     "internal/maintenance",
	"maintenance_occurrences": "internal/maintenance",

	"patches":                "internal/patches",
	"patch_approvals":        "internal/patches",
	"patch_devices":          "internal/patches",
	"patch_device_summaries": "internal/patches",
	"patch_jobs":             "internal/patches",
	"patch_job_devices":      "internal/patches",
	"patch_reports":          "internal/patches",
	"patch_policies":         "internal/patches",

	"policies":          "internal/policies",
	"policy_targets":    "internal/policies",
	"policy_compliance": "internal/policies",

	"rollouts":        "internal/rollouts",
	"rollout_devices": "internal/rollouts",

	"software_catalog":            "internal/software",
	"software_versions":           "internal/software",
	"software_deployments":        "internal/software",
	"software_deployment_devices": "internal/software",

	"tunnels": "internal/tunnels",

	"discovery_profiles": "internal/discovery",
	"discovery_jobs":     "internal/discovery",
	"discovery_assets":   "internal/discovery",
	"discovery_routes":   "internal/discovery",

	"third_party_packages": "internal/thirdparty",
	"third_party_versions": "internal/thirdparty",
	"third_party_tests":    "internal/thirdparty",

	"remote_sessions": "internal/remote",

	"automations":                   "internal/automations",
	"automation_runs":               "internal/automations",
	"automation_run_steps":          "internal/automations",
	"automation_webhook_signatures": "internal/automations",

	"scripts":           "internal/scripts",
	"script_versions":   "internal/scripts",
	"script_categories": "internal/scripts",
	"script_tags":       "internal/scripts",
	"script_tag_links":  "internal/scripts",
	"script_executions": "internal/scripts",

	"security_device_status":         "internal/security",
	"security_threats":               "internal/security",
	"security_scans":                 "internal/security",
	"security_policies":              "internal/security",
	"security_snapshots":             "internal/security",
	"security_recommendation_states": "internal/security",

	"incidents":               "internal/incidents",
	"incident_edr_connectors": "internal/incidents",
	"incident_feed_counts":    "internal/incidents",
}

// crossDomainSQL lists the packages that still name another domain's table in their SQL, and
// why. Each entry is a debt to pay by moving the query into the owner (a service call, or an
// exported fragment); the test fails when an entry is no longer needed, so the list only
// shrinks.
var crossDomainSQL = map[string]map[string]string{
	// Test support: seeds fixtures straight into the tables.
	"internal/apptest": {
		"partners":    "fixture seeding",
		"devices":     "fixture seeding",
		"device_tags": "fixture seeding",
	},
	// Creating an organization grants an organization-limited creator access to it in the same
	// transaction; identity imports tenancy, so tenancy cannot call identity.
	"internal/tenancy": {
		"user_org_access": "grant of a new organization to its limited creator",
	},
	// Credentials live in users' rows: sign-in, password and MFA changes read and write them.
	"internal/auth": {
		"users": "credentials are columns of users",
		"roles": "permissions of the signed-in user",
	},
	// identity revokes sessions and keys of users it disables or deletes.
	"internal/identity": {
		"refresh_tokens": "sessions of disabled or deleted users",
		"user_tokens":    "tokens of disabled or deleted users",
		"api_keys":       "keys of disabled or deleted users",
	},
	// audit imports nothing of identity (identity records audit entries).
	"internal/audit": {
		"users": "active users of the access report",
	},
	// Rule targets and evaluation read devices, groups and metrics; channels are checked
	// against notify's.
	"internal/alerts": {
		"devices":               "targets and evaluation",
		"device_group_members":  "group targets",
		"device_metrics":        "metric conditions",
		"device_commands":       "remediation commands",
		"notification_channels": "channels of a rule",
	},
	// Compliance and its reports add up the live devices in scope with their summaries in one
	// statement (100,000 devices answer in a fraction of a second).
	"internal/patches": {
		"devices": "compliance and reports over the live devices in scope",
	},
	// Routing reads the alert, its rule and its device's groups.
	"internal/notify": {
		"devices":              "alert routing",
		"device_group_members": "alert routing",
		"alerts":               "alert routing and escalation",
		"alert_rules":          "alert routing",
		"events":               "resolve announcements",
	},
	// The mobile views join devices and count their open alerts.
	"internal/mobile": {
		"devices": "device list for phones",
		"alerts":  "open alert counts",
	},
	// Dynamic groups evaluate devices and their tags.
	"internal/groups": {
		"devices":     "membership evaluation",
		"device_tags": "membership evaluation",
	},
	"internal/customfields": {
		"devices": "values belong to devices",
	},
	"internal/devices": {
		"enrollment_keys":      "enrollment claims a key",
		"custom_fields":        "device detail",
		"device_custom_values": "device detail",
		"device_group_members": "device filters and detail",
	},
	"internal/search": {
		"devices":     "device search",
		"device_tags": "tag search",
	},
}

// sqlTable finds the tables a piece of SQL names after FROM, JOIN, INTO, UPDATE or TABLE.
var sqlTable = regexp.MustCompile(`\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+([a-z_][a-z0-9_]*)`)

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found from the test's directory: %v", err)
	}
	return root
}

func TestEveryTableHasAnOwner(t *testing.T) {
	root := moduleRoot(t)
	create := regexp.MustCompile(`(?i)CREATE TABLE (?:IF NOT EXISTS )?([a-z_][a-z0-9_]*)`)
	files, err := filepath.Glob(filepath.Join(root, "internal", "store", "migrations", "*", "*.sql"))
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
func crossDomainQueries(t *testing.T, root string) map[string]map[string]string {
	t.Helper()
	found := map[string]map[string]string{}
	fset := token.NewFileSet()
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			pkg := filepath.ToSlash(rel)
			ast.Inspect(f, func(n ast.Node) bool {
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
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return found
}

func TestSQLStaysWithItsDomain(t *testing.T) {
	root := moduleRoot(t)
	found := crossDomainQueries(t, root)
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

// goPackage is the part of `go list -json` these tests read.
type goPackage struct {
	ImportPath string
	Standard   bool
	Imports    []string
}

func goList(t *testing.T, root string, env []string, args ...string) []goPackage {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(goBin, append([]string{"list", "-e", "-json"}, args...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// agentPackages are the module's packages the agent binary may contain.
var agentPackages = []string{"gale/cmd/gale-agent", "gale/internal/agent", "gale/internal/agentproto", "gale/internal/pkgversion",
	"gale/internal/streams"}

// agentLibraries are the third-party modules the agent may use (gopsutil brings the OS
// helpers); server libraries (huma, pgx, River, SQLite, S3) must never appear.
var agentLibraries = []string{
	"github.com/coder/websocket",
	"github.com/kardianos/service",
	"github.com/spf13/cobra",
	"github.com/spf13/pflag",
	"github.com/inconshreveable/mousetrap",
	"github.com/shirou/gopsutil/v4",
	"github.com/tklauser/go-sysconf",
	"github.com/tklauser/numcpus",
	"github.com/ebitengine/purego",
	"github.com/go-ole/go-ole",
	"github.com/yusufpapurcu/wmi",
	"github.com/lufia/plan9stats",
	"github.com/power-devops/perfstat",
	"golang.org/x/sys",
	// The terminal's PTY, and the remote desktop's WebRTC peer with what it brings.
	"github.com/creack/pty",
	"github.com/pion",
	"github.com/wlynxg/anet",
	"github.com/google/uuid",
	"golang.org/x/crypto",
	"golang.org/x/net",
	"golang.org/x/time",
	// Debian's and RPM's version ordering, for patches.
	"github.com/knqyf263/go-deb-version",
	"github.com/knqyf263/go-rpm-version",
	// SNMP polling on the server's behalf.
	"github.com/gosnmp/gosnmp",
}

// within reports whether importPath is one of prefixes or below one.
func within(importPath string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return importPath == p || strings.HasPrefix(importPath, p+"/") })
}

func TestAgentImportsNoServerCode(t *testing.T) {
	root := moduleRoot(t)
	for _, goos := range []string{"linux", "windows", "darwin"} {
		for _, p := range goList(t, root, []string{"GOOS=" + goos}, "-deps", "./cmd/gale-agent") {
			if p.Standard || within(p.ImportPath, agentPackages) || within(p.ImportPath, agentLibraries) {
				continue
			}
			t.Errorf("gale-agent (%s) depends on %s; the agent carries no server code or libraries", goos, p.ImportPath)
		}
	}
}

func TestOnlyBinariesAndTheHarnessImportApp(t *testing.T) {
	root := moduleRoot(t)
	for _, p := range goList(t, root, nil, "./internal/...") {
		if p.ImportPath == "gale/internal/apptest" || p.ImportPath == "gale/internal/app" {
			continue
		}
		if slices.Contains(p.Imports, "gale/internal/app") {
			t.Errorf("%s imports gale/internal/app; only cmd/* and internal/apptest wire the application", p.ImportPath)
		}
	}
}
