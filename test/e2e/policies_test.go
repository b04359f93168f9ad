package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/configpolicies"
	"gale/internal/testkit/apptest"
	"gale/internal/testkit/aptfixture"
)

// A policy enforced on a real agent: the device fails a configuration check, the
// remediation script fixes the file, the device is evaluated again and complies, all moved on
// by the node's follow-up worker as in production.
func TestPolicyIsEnforcedOnARealAgent(t *testing.T) {
	r := newScriptRunner(t)
	svc := app.Service[*configpolicies.Service](r.node.App)
	svc.StartWorker(context.Background())
	t.Cleanup(svc.StopWorker)
	conf := filepath.Join(t.TempDir(), "app.conf")
	sc := r.script("Enable the app", `printf '# managed\nenabled = yes\n' > '`+conf+`'`, nil)
	var p configpolicies.Policy
	r.node.Must(201, r.admin, "POST", "/api/v1/policies", map[string]any{"name": "App enabled", "orgId": r.orgID,
		"enforcement": "enforce", "remediationScriptId": sc.ID,
		"rules": []map[string]any{
			{"type": "config_check", "path": conf, "key": "enabled", "operator": "eq", "expected": "yes"},
			{"type": "disk_space_minimum", "mountPoint": filepath.Dir(conf), "minFreePercent": 0.001}},
		"targets": map[string]any{"type": "devices", "ids": []string{r.agent.deviceID}}}).JSON(t, &p)
	row := func() configpolicies.PolicyDeviceCompliance {
		var l struct {
			Data []configpolicies.PolicyDeviceCompliance
		}
		r.node.Must(200, r.admin, "GET", "/api/v1/policies/"+p.ID+"/compliance", nil).JSON(t, &l)
		if len(l.Data) != 1 {
			t.Fatalf("rows %+v", l.Data)
		}
		return l.Data[0]
	}
	var x configpolicies.PolicyDeviceCompliance
	apptest.Eventually(t, 20*time.Second, func() bool {
		x = row()
		return x.RemediationExecutionID != nil && x.State == configpolicies.StateCompliant && x.AlertID == nil
	})
	if len(x.Results) != 2 || !x.Results[0].Passed || x.Results[0].Actual != "yes" || !x.Results[1].Passed || x.RemediatedAt == nil {
		t.Fatalf("row %+v", x)
	}
	if ex := r.get(*x.RemediationExecutionID); ex.Status != "completed" {
		t.Fatalf("remediation %+v", ex)
	}
}

// A required_software policy on a real agent managing a package root: the package is missing,
// the device goes non-compliant, the remediation script installs it into the root, and the
// device is evaluated again and complies.
func TestRequiredSoftwarePolicyOnARealAgent(t *testing.T) {
	l := newPatchLab(t)
	svc := app.Service[*configpolicies.Service](l.node.App)
	svc.StartWorker(context.Background())
	t.Cleanup(svc.StopWorker)
	deb := aptfixture.BuildDeb(t, l.debs, aptfixture.Deb{Name: "galetest-agent-helper", Version: "3.1-1"})
	var sc struct {
		ID string `json:"id"`
	}
	l.node.Must(201, l.admin, "POST", "/api/v1/scripts", map[string]any{"name": "Install the helper", "orgId": l.orgID,
		"osTypes": []string{"linux"}, "language": "sh",
		"content": "dpkg --root='" + l.root + "' --log='" + filepath.Join(l.root, "var/log/dpkg.log") + "' -i '" + deb + "'"}).JSON(t, &sc)
	var p configpolicies.Policy
	l.node.Must(201, l.admin, "POST", "/api/v1/policies", map[string]any{"name": "Helper installed", "orgId": l.orgID,
		"enforcement": "enforce", "remediationScriptId": sc.ID,
		"rules":   []map[string]any{{"type": "required_software", "name": "galetest-agent-helper", "minVersion": "3.0"}},
		"targets": map[string]any{"type": "devices", "ids": []string{l.device}}}).JSON(t, &p)
	var seen []string
	var x configpolicies.PolicyDeviceCompliance
	apptest.Eventually(t, 60*time.Second, func() bool {
		var list struct {
			Data []configpolicies.PolicyDeviceCompliance
		}
		l.node.Must(200, l.admin, "GET", "/api/v1/policies/"+p.ID+"/compliance", nil).JSON(t, &list)
		if len(list.Data) != 1 {
			return false
		}
		x = list.Data[0]
		if len(seen) == 0 || seen[len(seen)-1] != x.State {
			seen = append(seen, x.State)
		}
		return x.State == configpolicies.StateCompliant
	})
	if !slices.Contains(seen, configpolicies.StateNonCompliant) || x.RemediationExecutionID == nil || l.version("galetest-agent-helper") != "3.1-1" {
		t.Fatalf("states %v, row %+v, installed %q", seen, x, l.version("galetest-agent-helper"))
	}
	if len(x.Results) != 1 || x.Results[0].Actual != "3.1-1" {
		t.Fatalf("rule results %+v", x.Results)
	}
}
