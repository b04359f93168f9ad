package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gale/internal/domains/scripts"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

// scriptRunner is a real agent on an in-process node, with a caller that runs scripts on it.
type scriptRunner struct {
	t     *testing.T
	node  *apptest.Env
	admin apptest.Caller
	agent *streamAgent
	orgID string
}

func newScriptRunner(t *testing.T) *scriptRunner {
	node := apptest.New(t)
	r := &scriptRunner{t: t, node: node, admin: node.Admin(), agent: startStreamAgent(t, node)}
	var dev struct {
		OrgID string `json:"orgId"`
	}
	node.Must(200, r.admin, "GET", "/api/v1/devices/"+r.agent.deviceID, nil).JSON(t, &dev)
	r.orgID = dev.OrgID
	return r
}

func (r *scriptRunner) script(name, content string, extra map[string]any) scripts.Script {
	r.t.Helper()
	body := map[string]any{"name": name, "orgId": r.orgID, "osTypes": []string{"linux"}, "language": "sh", "content": content}
	for k, v := range extra {
		body[k] = v
	}
	var sc scripts.Script
	r.node.Must(201, r.admin, "POST", "/api/v1/scripts", body).JSON(r.t, &sc)
	return sc
}

func (r *scriptRunner) run(scriptID string, params map[string]any) scripts.ScriptExecution {
	r.t.Helper()
	var res scripts.ScriptRunResult
	r.node.Must(202, r.admin, "POST", "/api/v1/scripts/"+scriptID+"/execute",
		map[string]any{"deviceIds": []string{r.agent.deviceID}, "parameters": params}).JSON(r.t, &res)
	if len(res.Executions) != 1 {
		r.t.Fatalf("execute: %+v", res)
	}
	return res.Executions[0]
}

func (r *scriptRunner) get(id string) scripts.ScriptExecution {
	r.t.Helper()
	var x scripts.ScriptExecution
	r.node.Must(200, r.admin, "GET", "/api/v1/scripts/executions/"+id, nil).JSON(r.t, &x)
	return x
}

func (r *scriptRunner) waitFor(id string, within time.Duration, ok func(scripts.ScriptExecution) bool) scripts.ScriptExecution {
	r.t.Helper()
	var x scripts.ScriptExecution
	apptest.Eventually(r.t, within, func() bool {
		x = r.get(id)
		return ok(x)
	})
	return x
}

func ended(x scripts.ScriptExecution) bool {
	switch x.Status {
	case scripts.StatusCompleted, scripts.StatusFailed, scripts.StatusTimeout, scripts.StatusCancelled:
		return true
	}
	return false
}

// processesWith lists the PIDs whose command line holds marker.
func processesWith(marker string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(marker)) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// A script's output shows while it runs; the exit code decides its end with the script's
// mapping; parameters reach the environment.
func TestScriptExecutionsOnARealAgent(t *testing.T) {
	r := newScriptRunner(t)
	// The second line waits until the test has seen the first (at most 60 s).
	proceed := filepath.Join(t.TempDir(), "proceed")
	sc := r.script("Two lines", fmt.Sprintf("echo a; for i in $(seq 600); do [ -e %s ] && break; sleep 0.1; done; echo b", proceed), nil)
	x := r.run(sc.ID, nil)
	running := r.waitFor(x.ID, 30*time.Second, func(x scripts.ScriptExecution) bool {
		return ended(x) || (x.Status == scripts.StatusRunning && x.Stdout != nil && *x.Stdout == "a\n")
	})
	if running.Status != scripts.StatusRunning {
		t.Fatalf("never seen running with its first line: %+v", running)
	}
	if err := os.WriteFile(proceed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := r.waitFor(x.ID, 30*time.Second, ended)
	if done.Status != scripts.StatusCompleted || *done.Stdout != "a\nb\n" || *done.ExitCode != 0 {
		t.Fatalf("completed: %+v", done)
	}

	three := r.script("Exit three", "echo failing; exit 3", map[string]any{"exitCodeSeverityMapping": map[string]any{"3": "high"}})
	done = r.waitFor(r.run(three.ID, nil).ID, 30*time.Second, ended)
	if done.Status != scripts.StatusFailed || *done.ExitCode != 3 || done.Severity == nil || *done.Severity != "high" {
		t.Fatalf("exit 3: %+v", done)
	}

	param := r.script("Greets", `printf '%s|%s' "$WHO" "$TIMES"`, map[string]any{"parameters": []map[string]any{
		{"name": "WHO", "type": "string", "required": true}, {"name": "TIMES", "type": "number", "defaultValue": 2}}})
	done = r.waitFor(r.run(param.ID, map[string]any{"WHO": "it's me; $(id)"}).ID, 30*time.Second, ended)
	if done.Status != scripts.StatusCompleted || *done.Stdout != "it's me; $(id)|2" {
		t.Fatalf("parameters: %+v", done)
	}

	// As the console user: a machine where nobody is logged in at the console says so.
	asUser := r.script("Who", "id -un", map[string]any{"runAs": "user"})
	done = r.waitFor(r.run(asUser.ID, nil).ID, 30*time.Second, ended)
	noUser := done.Status == scripts.StatusFailed && done.Error != nil && strings.Contains(*done.Error, "no user is logged in")
	if done.RunAs != "user" || !noUser && (done.Status != scripts.StatusCompleted || *done.Stdout == "root\n") {
		t.Fatalf("run as the console user: %+v (error %q)", done, store.Deref(done.Error))
	}
}

// A script past its timeout ends as timeout, and a cancelled one is stopped: in both cases
// nothing it started is left running.
func TestScriptTimeoutAndCancelLeaveNoProcess(t *testing.T) {
	r := newScriptRunner(t)
	marker := fmt.Sprintf("30.%d", time.Now().UnixNano()%1000000)
	slow := r.script("Slow", "sleep "+marker+" & sleep "+marker, map[string]any{"timeoutSeconds": 2})
	done := r.waitFor(r.run(slow.ID, nil).ID, 60*time.Second, ended)
	if done.Status != scripts.StatusTimeout {
		t.Fatalf("timeout: %+v", done)
	}
	apptest.Eventually(t, 10*time.Second, func() bool { return len(processesWith(marker)) == 0 })

	marker2 := fmt.Sprintf("40.%d", time.Now().UnixNano()%1000000)
	long := r.script("Long", "echo started; sleep "+marker2+" & sleep "+marker2, nil)
	x := r.run(long.ID, nil)
	r.waitFor(x.ID, 30*time.Second, func(x scripts.ScriptExecution) bool { return x.Status == scripts.StatusRunning })
	apptest.Eventually(t, 10*time.Second, func() bool { return len(processesWith(marker2)) == 2 })
	var cancelled scripts.ScriptExecution
	r.node.Must(200, r.admin, "POST", "/api/v1/scripts/executions/"+x.ID+"/cancel", nil).JSON(t, &cancelled)
	if cancelled.Status != scripts.StatusCancelled {
		t.Fatalf("cancel: %+v", cancelled)
	}
	apptest.Eventually(t, 15*time.Second, func() bool { return len(processesWith(marker2)) == 0 })
	if r := r.node.Do(r.admin, "POST", "/api/v1/scripts/executions/"+x.ID+"/cancel", nil); r.Status != 409 {
		t.Fatalf("cancel again = %d, want 409", r.Status)
	}
}

// A bundle exported by one partner imports into another (as a renamed copy and as a new
// version) and runs there.
func TestBundleImportedIntoAnotherPartnerRuns(t *testing.T) {
	r := newScriptRunner(t)
	source := r.node.NewTenant(r.admin, "Source")
	var sc scripts.Script
	r.node.Must(201, source.Partner, "POST", "/api/v1/scripts", map[string]any{"name": "Hostname", "osTypes": []string{"linux"},
		"language": "sh", "content": "echo from-bundle"}).JSON(t, &sc)
	var bundle map[string]any
	r.node.Must(200, source.Partner, "GET", "/api/v1/scripts/bundle/export?ids="+sc.ID, nil).JSON(t, &bundle)
	r.script("Hostname", "echo local", nil)
	req := map[string]any{"bundle": bundle, "orgId": r.orgID, "mode": "rename"}
	var res scripts.BundleImportResult
	r.node.Must(200, r.admin, "POST", "/api/v1/scripts/bundle/import", req).JSON(t, &res)
	req["mode"] = "new-version"
	r.node.Must(200, r.admin, "POST", "/api/v1/scripts/bundle/import", req).JSON(t, &res)
	if res.Versioned != 1 {
		t.Fatalf("new-version: %+v", res)
	}
	var list struct{ Data []scripts.Script }
	r.node.Must(200, r.admin, "GET", "/api/v1/scripts?orgId="+r.orgID+"&search=hostname", nil).JSON(t, &list)
	if len(list.Data) != 2 || list.Data[1].Name != "Hostname (2)" || list.Data[0].Version != 2 {
		t.Fatalf("imported: %+v", list.Data)
	}
	for _, s := range list.Data {
		done := r.waitFor(r.run(s.ID, nil).ID, 30*time.Second, ended)
		if done.Status != scripts.StatusCompleted || strings.TrimSpace(*done.Stdout) != "from-bundle" {
			t.Fatalf("%s ran: %+v", s.Name, done)
		}
	}
}
