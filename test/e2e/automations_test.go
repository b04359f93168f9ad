package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/automations"
	"gale/internal/testkit/apptest"
)

// A run of a run_script automation on a real agent completes with the script's output in
// its step, moved on by the node's runner as in production.
func TestAutomationRunsAScriptOnARealAgent(t *testing.T) {
	r := newScriptRunner(t)
	svc := app.Service[*automations.Service](r.node.App)
	svc.StartRunner(context.Background())
	t.Cleanup(svc.StopRunner)
	sc := r.script("Greeting", `echo "hello from $WHO"`, map[string]any{"parameters": []map[string]any{{"name": "WHO", "type": "string"}}})
	var x automations.Automation
	r.node.Must(201, r.admin, "POST", "/api/v1/automations", map[string]any{"name": "Greet", "orgId": r.orgID,
		"trigger": map[string]any{"type": "manual"}, "targets": map[string]any{"type": "devices", "ids": []string{r.agent.deviceID}},
		"actions": []map[string]any{{"type": "run_script", "scriptId": sc.ID, "parameters": map[string]any{"WHO": "automation"}}}}).JSON(t, &x)
	var run automations.AutomationRun
	r.node.Must(202, r.admin, "POST", "/api/v1/automations/"+x.ID+"/run", nil).JSON(t, &run)
	// The script is quick: by the answer, the runner may have finished the run already.
	if (run.Status != automations.RunRunning && run.Status != automations.RunCompleted) || len(run.Steps) != 1 ||
		run.Steps[0].ExecutionID == nil {
		t.Fatalf("started %+v", run)
	}
	apptest.Eventually(t, 60*time.Second, func() bool {
		r.node.Must(200, r.admin, "GET", "/api/v1/automations/runs/"+run.ID, nil).JSON(t, &run)
		return run.Status != automations.RunRunning
	})
	st := run.Steps[0]
	if run.Status != automations.RunCompleted || st.Status != automations.StepCompleted || st.Output == nil ||
		strings.TrimSpace(*st.Output) != "hello from automation" || st.ExitCode == nil || *st.ExitCode != 0 {
		t.Fatalf("finished run %+v step %+v", run, st)
	}
	if x := r.get(*st.ExecutionID); x.Status != "completed" || x.TriggeredBy == nil || *x.TriggeredBy != "automation:"+run.AutomationID {
		t.Fatalf("the execution %+v", x)
	}
}
