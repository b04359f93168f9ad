package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/apptest"
	"gale/internal/policies"
)

// A policy enforced on a real agent: the device fails a configuration check, the
// remediation script fixes the file, the device is evaluated again and complies, all moved on
// by the node's follow-up worker as in production.
func TestPolicyIsEnforcedOnARealAgent(t *testing.T) {
	r := newScriptRunner(t)
	svc := app.Service[*policies.Service](r.node.App)
	svc.StartWorker(context.Background())
	t.Cleanup(svc.StopWorker)
	conf := filepath.Join(t.TempDir(), "app.conf")
	sc := r.script("Enable the app", `printf '# managed\nenabled = yes\n' > '`+conf+`'`, nil)
	var p policies.Policy
	r.node.Must(201, r.admin, "POST", "/api/v1/policies", map[string]any{"name": "App enabled", "orgId": r.orgID,
		"enforcement": "enforce", "remediationScriptId": sc.ID,
		"rules": []map[string]any{
			{"type": "config_check", "path": conf, "key": "enabled", "operator": "eq", "expected": "yes"},
			{"type": "disk_space_minimum", "mountPoint": filepath.Dir(conf), "minFreePercent": 0.001}},
		"targets": map[string]any{"type": "devices", "ids": []string{r.agent.deviceID}}}).JSON(t, &p)
	row := func() policies.PolicyDeviceCompliance {
		var l struct {
			Data []policies.PolicyDeviceCompliance
		}
		r.node.Must(200, r.admin, "GET", "/api/v1/policies/"+p.ID+"/compliance", nil).JSON(t, &l)
		if len(l.Data) != 1 {
			t.Fatalf("rows %+v", l.Data)
		}
		return l.Data[0]
	}
	var x policies.PolicyDeviceCompliance
	apptest.Eventually(t, 20*time.Second, func() bool {
		x = row()
		return x.RemediationExecutionID != nil && x.State == policies.StateCompliant && x.AlertID == nil
	})
	if len(x.Results) != 2 || !x.Results[0].Passed || x.Results[0].Actual != "yes" || !x.Results[1].Passed || x.RemediatedAt == nil {
		t.Fatalf("row %+v", x)
	}
	if ex := r.get(*x.RemediationExecutionID); ex.Status != "completed" {
		t.Fatalf("remediation %+v", ex)
	}
}
