package scripts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/scripts"
	"gale/internal/platform/access"
	"gale/internal/platform/config"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

type fixture struct {
	e *apptest.Env
	a apptest.Tenant
	b apptest.Tenant
}

func newFixture(t *testing.T) fixture {
	e := apptest.New(t)
	admin := e.Admin()
	return fixture{e: e, a: e.NewTenant(admin, "Alpha"), b: e.NewTenant(admin, "Bravo")}
}

func (f fixture) device(ten apptest.Tenant, host, os string) string {
	return f.e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: host, OSType: os,
		OSName: os})
}

func (f fixture) create(c apptest.Caller, body map[string]any) scripts.Script {
	f.e.T.Helper()
	var sc scripts.Script
	f.e.Must(201, c, "POST", api+"/scripts", body).JSON(f.e.T, &sc)
	return sc
}

func shScript(name string, extra map[string]any) map[string]any {
	body := map[string]any{"name": name, "osTypes": []string{"linux"}, "language": "sh", "content": "echo hello"}
	for k, v := range extra {
		body[k] = v
	}
	return body
}

func TestScriptsAreVersionedOnEverySaveThatChangesThem(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	sc := f.create(c, shScript("Disk check", map[string]any{"tags": []string{"disk", "Disk", "ops"}, "versionNote": "first"}))
	if sc.Version != 1 || sc.OrgID != nil || sc.TimeoutSeconds != 300 || sc.RunAs != "system" || len(sc.Tags) != 2 {
		t.Fatalf("created %+v", sc)
	}
	if r := f.e.Do(c, "POST", api+"/scripts", shScript("disk CHECK", nil)); r.Status != 409 || r.ErrorCode() != "SCRIPT_NAME_TAKEN" {
		t.Fatalf("same name = %d %s, want 409 SCRIPT_NAME_TAKEN", r.Status, r.Body)
	}
	// Same name in an organization is another scope.
	f.create(c, shScript("Disk check", map[string]any{"orgId": f.a.OrgID}))

	var up scripts.Script
	f.e.Must(200, c, "PUT", api+"/scripts/"+sc.ID, shScript("Disk check", map[string]any{"content": "df -h", "versionNote": "use df"})).JSON(t, &up)
	if up.Version != 2 || up.Content != "df -h" || len(up.Tags) != 0 {
		t.Fatalf("after a content change: %+v", up)
	}
	f.e.Must(200, c, "PUT", api+"/scripts/"+sc.ID, shScript("Disk usage", map[string]any{"content": "df -h", "description": "renamed"})).JSON(t, &up)
	if up.Version != 3 || up.Name != "Disk usage" {
		t.Fatalf("a rename is a new version too (the name is part of the definition): %+v", up)
	}
	f.e.Must(200, c, "PUT", api+"/scripts/"+sc.ID, shScript("Disk usage", map[string]any{"content": "df -h", "description": "only this"})).JSON(t, &up)
	if up.Version != 3 || up.Description != "only this" {
		t.Fatalf("a description change makes no version: %+v", up)
	}
	var v scripts.ScriptVersion
	f.e.Must(201, c, "POST", api+"/script-library/scripts/"+sc.ID+"/versions", map[string]any{"content": "df -hT", "note": "types"}).JSON(t, &v)
	if v.Version != 4 || v.Content != "df -hT" || v.Note != "types" {
		t.Fatalf("saved version %+v", v)
	}
	var versions struct{ Data []scripts.ScriptVersion }
	f.e.Must(200, c, "GET", api+"/script-library/scripts/"+sc.ID+"/versions", nil).JSON(t, &versions)
	if len(versions.Data) != 4 || versions.Data[0].Version != 4 || versions.Data[3].Content != "echo hello" || versions.Data[3].Note != "first" {
		t.Fatalf("versions %+v", versions.Data)
	}
	f.e.Must(200, c, "POST", api+"/script-library/scripts/"+sc.ID+"/rollback/"+versions.Data[3].ID, nil).JSON(t, &up)
	if up.Version != 5 || up.Content != "echo hello" || up.Name != "Disk usage" {
		t.Fatalf("rolled back: %+v", up)
	}
	if r := f.e.Do(c, "POST", api+"/script-library/scripts/"+sc.ID+"/rollback/"+sc.ID, nil); r.Status != 404 {
		t.Fatalf("rollback to a version of nothing = %d", r.Status)
	}
	if r := f.e.Do(c, "PUT", api+"/scripts/"+sc.ID, shScript("x", map[string]any{"orgId": f.a.OrgID})); r.Status != 400 {
		t.Fatalf("moving a script to an organization = %d, want 400", r.Status)
	}
	f.e.Must(204, c, "DELETE", api+"/scripts/"+sc.ID, nil)
	f.e.Must(404, c, "GET", api+"/scripts/"+sc.ID, nil)
	f.create(c, shScript("Disk usage", nil)) // the name is free again
}

func TestScriptValidation(t *testing.T) {
	f := newFixture(t)
	for name, tc := range map[string]struct {
		body  map[string]any
		field string
	}{
		"cmd on linux":       {shScript("a", map[string]any{"language": "cmd"}), "language"},
		"sh on windows":      {shScript("a", map[string]any{"osTypes": []string{"windows"}}), "language"},
		"unknown os":         {shScript("a", map[string]any{"osTypes": []string{"beos"}}), "osTypes"},
		"blank content":      {shScript("a", map[string]any{"content": "  \n"}), "content"},
		"too large":          {shScript("a", map[string]any{"content": strings.Repeat("x", 256<<10+1)}), "content"},
		"timeout":            {shScript("a", map[string]any{"timeoutSeconds": 3601}), "timeoutSeconds"},
		"param name":         {shScript("a", map[string]any{"parameters": []map[string]any{{"name": "1X", "type": "string"}}}), "parameters[0].name"},
		"reserved param":     {shScript("a", map[string]any{"parameters": []map[string]any{{"name": "LD_PRELOAD", "type": "string"}}}), "parameters[0].name"},
		"duplicate param":    {shScript("a", map[string]any{"parameters": []map[string]any{{"name": "A", "type": "string"}, {"name": "a", "type": "number"}}}), "parameters[1].name"},
		"select no options":  {shScript("a", map[string]any{"parameters": []map[string]any{{"name": "A", "type": "select"}}}), "parameters[0].options"},
		"bad default":        {shScript("a", map[string]any{"parameters": []map[string]any{{"name": "N", "type": "number", "defaultValue": "ten"}}}), "parameters[0].defaultValue"},
		"mapping all null":   {shScript("a", map[string]any{"exitCodeSeverityMapping": map[string]any{"default": nil, "0": nil}}), "exitCodeSeverityMapping"},
		"mapping bad key":    {shScript("a", map[string]any{"exitCodeSeverityMapping": map[string]any{"one": "low"}}), "exitCodeSeverityMapping"},
		"mapping bad sev":    {shScript("a", map[string]any{"exitCodeSeverityMapping": map[string]any{"1": "urgent"}}), "exitCodeSeverityMapping"},
		"too many params":    {shScript("a", map[string]any{"parameters": manyParams(65)}), "parameters"},
		"unknown category":   {shScript("a", map[string]any{"categoryId": "0194b9f5-0000-7000-8000-000000000000"}), "categoryId"},
		"escape in content":  {shScript("a", map[string]any{"content": "printf '\x1b[31m'"}), "content"},
		"line break in name": {shScript("a\nb", nil), "name"},
	} {
		r := f.e.Do(f.a.Partner, "POST", api+"/scripts", tc.body)
		if r.Status != 400 || !strings.Contains(string(r.Body), `"`+tc.field+`"`) {
			t.Errorf("%s: %d %s, want 400 naming %s", name, r.Status, r.Body, tc.field)
		}
	}
	var list struct{ Data []scripts.Script }
	f.e.Must(200, f.a.Partner, "GET", api+"/scripts", nil).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("refused scripts were written: %+v", list.Data)
	}
	// Content and descriptions hold lines and tabs, as scripts do.
	sc := f.create(f.a.Partner, shScript("Lines", map[string]any{"content": "echo a\r\n\techo b\n", "description": "one\ntwo"}))
	if sc.Content != "echo a\r\n\techo b\n" {
		t.Fatalf("content %q", sc.Content)
	}
}

func manyParams(n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = map[string]any{"name": fmt.Sprintf("P%d", i), "type": "string"}
	}
	return out
}

// Another tenant's scripts, categories, tags and executions are missing to a caller; an
// organization caller reads its partner's partner-wide scripts but cannot change them.
func TestScriptsTenancy(t *testing.T) {
	f := newFixture(t)
	sc := f.create(f.a.Partner, shScript("Alpha only", map[string]any{"orgId": f.a.OrgID}))
	wide := f.create(f.a.Partner, shScript("Alpha wide", nil))
	var cat scripts.ScriptCategory
	f.e.Must(201, f.a.Partner, "POST", api+"/script-library/categories", map[string]any{"name": "Ops", "orgId": f.a.OrgID}).JSON(t, &cat)
	var tag scripts.ScriptTag
	f.e.Must(201, f.a.Partner, "POST", api+"/script-library/tags", map[string]any{"name": "ops", "orgId": f.a.OrgID}).JSON(t, &tag)
	dev := f.device(f.a, "alpha-01", "linux")
	var run scripts.ScriptRunResult
	f.e.Must(202, f.a.Partner, "POST", api+"/scripts/"+sc.ID+"/execute", map[string]any{"deviceIds": []string{dev}}).JSON(t, &run)
	x := run.Executions[0].ID

	for _, c := range []apptest.Caller{f.b.Partner, f.b.Org} {
		for _, r := range []struct{ method, path string }{
			{"GET", "/scripts/" + sc.ID}, {"PUT", "/scripts/" + sc.ID}, {"DELETE", "/scripts/" + sc.ID},
			{"POST", "/scripts/" + sc.ID + "/execute"}, {"GET", "/scripts/" + sc.ID + "/executions"},
			{"GET", "/scripts/" + wide.ID}, {"DELETE", "/scripts/" + wide.ID},
			{"GET", "/script-library/scripts/" + sc.ID + "/versions"}, {"POST", "/script-library/scripts/" + sc.ID + "/versions"},
			{"GET", "/script-library/scripts/" + sc.ID + "/usage-stats"}, {"GET", "/scripts/bundle/export?ids=" + sc.ID},
			{"GET", "/script-library/categories/" + cat.ID}, {"PATCH", "/script-library/categories/" + cat.ID},
			{"DELETE", "/script-library/categories/" + cat.ID}, {"DELETE", "/script-library/tags/" + tag.ID},
			{"GET", "/scripts/executions/" + x}, {"POST", "/scripts/executions/" + x + "/cancel"},
		} {
			var body any
			switch {
			case r.method == "PUT":
				body = shScript("Taken over", nil)
			case strings.HasSuffix(r.path, "/execute"):
				body = map[string]any{"deviceIds": []string{dev}}
			case strings.HasSuffix(r.path, "/versions") && r.method == "POST":
				body = map[string]any{"note": "mine now"}
			case r.method == "PATCH":
				body = map[string]any{"name": "Mine"}
			}
			if resp := f.e.Do(c, r.method, api+r.path, body); resp.Status != 404 {
				t.Errorf("%s %s by another tenant = %d %s, want 404", r.method, r.path, resp.Status, resp.Body)
			}
		}
		var list struct{ Data []scripts.Script }
		f.e.Must(200, c, "GET", api+"/scripts", nil).JSON(t, &list)
		if len(list.Data) != 0 {
			t.Errorf("another tenant lists %d scripts", len(list.Data))
		}
	}
	// Bravo's script cannot run on Alpha's device: it is not found.
	bravo := f.create(f.b.Partner, shScript("Bravo", nil))
	f.e.Must(202, f.b.Partner, "POST", api+"/scripts/"+bravo.ID+"/execute", map[string]any{"deviceIds": []string{dev}}).JSON(t, &run)
	if len(run.Executions) != 0 || len(run.Failed) != 1 || run.Failed[0].Code != "NOT_FOUND" {
		t.Fatalf("foreign device: %+v", run)
	}
	// An organization caller reads the partner-wide script but may not change it.
	f.e.Must(200, f.a.Org, "GET", api+"/scripts/"+wide.ID, nil)
	if r := f.e.Do(f.a.Org, "PUT", api+"/scripts/"+wide.ID, shScript("Alpha wide", map[string]any{"content": "id"})); r.Status != 403 {
		t.Fatalf("org caller changing a partner-wide script = %d, want 403", r.Status)
	}
	// An organization's script does not run on another organization's device of the partner.
	other := f.e.CreateOrg(f.e.Admin(), f.a.PartnerID, "Alpha Second")
	var sites struct{ Data []struct{ ID string } }
	f.e.Must(200, f.a.Partner, "GET", api+"/orgs/sites?orgId="+other, nil).JSON(t, &sites)
	dev2 := f.e.InsertDevice(apptest.DeviceRow{PartnerID: f.a.PartnerID, OrgID: other, SiteID: sites.Data[0].ID, Hostname: "second-01"})
	f.e.Must(202, f.a.Partner, "POST", api+"/scripts/"+sc.ID+"/execute", map[string]any{"deviceIds": []string{dev2}}).JSON(t, &run)
	if len(run.Executions) != 0 || len(run.Failed) != 1 {
		t.Fatalf("an organization's script ran in another organization: %+v", run)
	}
	f.e.Must(202, f.a.Partner, "POST", api+"/scripts/"+wide.ID+"/execute", map[string]any{"deviceIds": []string{dev2}}).JSON(t, &run)
	if len(run.Executions) != 1 {
		t.Fatalf("a partner-wide script runs in every organization of the partner: %+v", run)
	}
}

// agentOf is a device's agent as the server knows it, for recording what it reports.
func agentOf(f fixture, ten apptest.Tenant, deviceID string) devices.Agent {
	return devices.Agent{DeviceID: deviceID, PartnerID: ten.PartnerID, OrgID: ten.OrgID, Role: "agent"}
}

func (f fixture) execution(c apptest.Caller, id string) scripts.ScriptExecution {
	f.e.T.Helper()
	var x scripts.ScriptExecution
	f.e.Must(200, c, "GET", api+"/scripts/executions/"+id, nil).JSON(f.e.T, &x)
	return x
}

func TestExecutionsFollowTheirCommandsAndTheExitCodeMapping(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dev := app.Service[*devices.Service](f.e.App)
	linux, linux2, windows := f.device(f.a, "web-01", "linux"), f.device(f.a, "web-02", "linux"), f.device(f.a, "win-01", "windows")
	sc := f.create(f.a.Partner, shScript("Check", map[string]any{
		"parameters": []map[string]any{{"name": "TARGET", "type": "string", "required": true},
			{"name": "LEVEL", "type": "select", "options": []string{"low", "high"}, "defaultValue": "low"},
			{"name": "COUNT", "type": "number"}},
		"exitCodeSeverityMapping": map[string]any{"3": "critical", "4": nil}}))
	path := api + "/scripts/" + sc.ID + "/execute"
	for body, field := range map[string]string{
		`{"deviceIds":["` + linux + `"]}`:                                            "parameters.TARGET",
		`{"deviceIds":["` + linux + `"],"parameters":{"TARGET":"x","NOPE":1}}`:       "parameters.NOPE",
		`{"deviceIds":["` + linux + `"],"parameters":{"TARGET":"x","LEVEL":"mid"}}`:  "parameters.LEVEL",
		`{"deviceIds":["` + linux + `"],"parameters":{"TARGET":"x","COUNT":"many"}}`: "parameters.COUNT",
	} {
		var m map[string]any
		_ = json.Unmarshal([]byte(body), &m)
		if r := f.e.Do(f.a.Partner, "POST", path, m); r.Status != 400 || !strings.Contains(string(r.Body), field) {
			t.Errorf("%s = %d %s, want 400 naming %s", body, r.Status, r.Body, field)
		}
	}
	var run scripts.ScriptRunResult
	f.e.Must(202, f.a.Partner, "POST", path, map[string]any{"deviceIds": []string{linux, linux2, windows},
		"parameters": map[string]any{"TARGET": "/var", "COUNT": 3}}).JSON(t, &run)
	if len(run.Executions) != 2 || len(run.Skipped) != 1 || run.Skipped[0].DeviceID != windows || run.Skipped[0].Code != agentproto.ErrNotSupported {
		t.Fatalf("execute: %+v", run)
	}
	x := run.Executions[0]
	if x.Status != scripts.StatusPending || x.Parameters["TARGET"] != "/var" || x.Parameters["LEVEL"] != "low" || x.Parameters["COUNT"] != "3" ||
		x.BatchID != run.BatchID || x.ScriptVersion != 1 {
		t.Fatalf("execution %+v", x)
	}
	// The command carries the script and its parameters as environment variables.
	cmds, err := dev.TakeQueued(ctx, x.DeviceID)
	if err != nil || len(cmds) != 1 {
		t.Fatalf("queued %v %v", cmds, err)
	}
	var payload agentproto.RunScript
	_ = json.Unmarshal(cmds[0].Payload, &payload)
	if payload.Script != "echo hello" || payload.Env["TARGET"] != "/var" || payload.Env["LEVEL"] != "low" || cmds[0].TimeoutSeconds != 300 {
		t.Fatalf("command %+v payload %+v", cmds[0], payload)
	}
	if got := f.execution(f.a.Org, x.ID); got.Status != scripts.StatusQueued {
		t.Fatalf("sent, not started: %s", got.Status)
	}
	agent := agentOf(f, f.a, x.DeviceID)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(dev.RecordOutput(ctx, agent, agentproto.CommandOutput{CommandID: x.CommandID}))
	must(dev.RecordOutput(ctx, agent, agentproto.CommandOutput{CommandID: x.CommandID, Stdout: []byte("a\n")}))
	must(dev.RecordOutput(ctx, agent, agentproto.CommandOutput{CommandID: x.CommandID, Stdout: []byte("a\n")}))                   // again: ignored
	must(dev.RecordOutput(ctx, agent, agentproto.CommandOutput{CommandID: x.CommandID, StdoutOffset: 5, Stdout: []byte("lost")})) // a gap: ignored
	got := f.execution(f.a.Partner, x.ID)
	if got.Status != scripts.StatusRunning || got.Stdout == nil || *got.Stdout != "a\n" || got.StartedAt == nil {
		t.Fatalf("running: %+v", got)
	}
	three := 3
	must(dev.RecordResult(ctx, agent, agentproto.CommandResult{CommandID: x.CommandID, Status: agentproto.ResultFailed, ExitCode: &three,
		Stdout: "a\nb\n", Error: "the script exited with code 3"}))
	got = f.execution(f.a.Partner, x.ID)
	if got.Status != scripts.StatusFailed || got.Severity == nil || *got.Severity != "critical" || *got.Stdout != "a\nb\n" || *got.ExitCode != 3 {
		t.Fatalf("exit 3: %+v", got)
	}
	// Exit 4 is mapped to null: a success.
	y := run.Executions[1]
	four := 4
	must(dev.RecordResult(ctx, agentOf(f, f.a, y.DeviceID), agentproto.CommandResult{CommandID: y.CommandID, Status: agentproto.ResultFailed, ExitCode: &four}))
	if got := f.execution(f.a.Partner, y.ID); got.Status != scripts.StatusCompleted || got.Severity != nil {
		t.Fatalf("exit 4 mapped to null: %+v", got)
	}
	for status, want := range map[string]int{"failed": 1, "completed": 1, "running": 0, "pending": 0} {
		var list struct{ Data []scripts.ScriptExecution }
		f.e.Must(200, f.a.Partner, "GET", api+"/scripts/"+sc.ID+"/executions?status="+status, nil).JSON(t, &list)
		if len(list.Data) != want {
			t.Errorf("status=%s lists %d, want %d", status, len(list.Data), want)
		}
	}
	var usage scripts.ScriptUsage
	f.e.Must(200, f.a.Partner, "GET", api+"/script-library/scripts/"+sc.ID+"/usage-stats", nil).JSON(t, &usage)
	if usage.TotalExecutions != 2 || usage.ByStatus["failed"] != 1 || usage.ByStatus["completed"] != 1 || usage.Devices != 2 ||
		usage.SuccessRate == nil || *usage.SuccessRate != 0.5 || usage.LastExecutedAt == nil {
		t.Fatalf("usage %+v", usage)
	}
	var events int
	if err := f.e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM events WHERE type IN ('script.failed', 'script.completed') AND resource_id IN ($1, $2)`,
		x.ID, y.ID).Scan(&events); err != nil || events != 2 {
		t.Fatalf("script events %d %v, want 2", events, err)
	}
}

func TestCancelEndsAnExecutionOnceAndDeleteWaitsForIt(t *testing.T) {
	f := newFixture(t)
	sc := f.create(f.a.Partner, shScript("Long", nil))
	dev := f.device(f.a, "web-01", "linux")
	var run scripts.ScriptRunResult
	f.e.Must(202, f.a.Partner, "POST", api+"/scripts/"+sc.ID+"/execute", map[string]any{"deviceIds": []string{dev}}).JSON(t, &run)
	x := run.Executions[0]
	if r := f.e.Do(f.a.Partner, "DELETE", api+"/scripts/"+sc.ID, nil); r.Status != 409 || r.ErrorCode() != "SCRIPT_RUNNING" {
		t.Fatalf("delete with a pending execution = %d %s, want 409 SCRIPT_RUNNING", r.Status, r.Body)
	}
	var got scripts.ScriptExecution
	f.e.Must(200, f.a.Partner, "POST", api+"/scripts/executions/"+x.ID+"/cancel", nil).JSON(t, &got)
	if got.Status != scripts.StatusCancelled {
		t.Fatalf("cancelled: %+v", got)
	}
	if r := f.e.Do(f.a.Partner, "POST", api+"/scripts/executions/"+x.ID+"/cancel", nil); r.Status != 409 || r.ErrorCode() != "EXECUTION_ENDED" {
		t.Fatalf("second cancel = %d %s, want 409 EXECUTION_ENDED", r.Status, r.Body)
	}
	f.e.Must(204, f.a.Partner, "DELETE", api+"/scripts/"+sc.ID, nil)
	f.e.Must(200, f.a.Partner, "GET", api+"/scripts/executions/"+x.ID, nil) // history outlives the script
	f.e.Must(200, f.a.Partner, "GET", api+"/scripts/"+sc.ID+"/executions", nil)
}

func TestLibraryAndTemplates(t *testing.T) {
	f := newFixture(t)
	var lib struct{ Data []scripts.LibraryScript }
	f.e.Must(200, f.a.Org, "GET", api+"/scripts/system-library", nil).JSON(t, &lib)
	if len(lib.Data) < 10 {
		t.Fatalf("system library has %d scripts", len(lib.Data))
	}
	var sc scripts.Script
	f.e.Must(201, f.a.Org, "POST", api+"/scripts/import/linux-restart-service", map[string]any{}).JSON(t, &sc)
	if sc.OrgID == nil || *sc.OrgID != f.a.OrgID || sc.Source == nil || *sc.Source != "library:linux-restart-service" ||
		len(sc.Parameters) != 1 || !sc.Parameters[0].Required {
		t.Fatalf("imported %+v", sc)
	}
	if r := f.e.Do(f.a.Org, "POST", api+"/scripts/import/linux-restart-service", map[string]any{}); r.Status != 409 {
		t.Fatalf("importing twice under one name = %d, want 409", r.Status)
	}
	f.e.Must(201, f.a.Org, "POST", api+"/scripts/import/linux-restart-service", map[string]any{"name": "Restart nginx"})
	f.e.Must(404, f.a.Org, "POST", api+"/scripts/import/no-such-script", map[string]any{})
	var tpl struct{ Data []scripts.LibraryScript }
	f.e.Must(200, f.a.Org, "GET", api+"/script-library/templates", nil).JSON(t, &tpl)
	if len(tpl.Data) < 5 {
		t.Fatalf("templates: %d", len(tpl.Data))
	}
	f.e.Must(201, f.a.Partner, "POST", api+"/script-library/from-template/health-check", map[string]any{"name": "Root fs"}).JSON(t, &sc)
	if sc.OrgID != nil || sc.ExitCodeSeverityMapping["2"] == nil || *sc.ExitCodeSeverityMapping["2"] != "critical" || *sc.Source != "template:health-check" {
		t.Fatalf("from template %+v", sc)
	}
	f.e.Must(404, f.a.Partner, "POST", api+"/script-library/from-template/nope", map[string]any{})
}

func TestCategoriesNestAndTagsAreShared(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	var root, child scripts.ScriptCategory
	f.e.Must(201, c, "POST", api+"/script-library/categories", map[string]any{"name": "Maintenance", "color": "#336699"}).JSON(t, &root)
	f.e.Must(201, c, "POST", api+"/script-library/categories", map[string]any{"name": "Disks", "parentId": root.ID}).JSON(t, &child)
	if r := f.e.Do(c, "POST", api+"/script-library/categories", map[string]any{"name": "maintenance"}); r.Status != 409 {
		t.Fatalf("duplicate category = %d", r.Status)
	}
	if r := f.e.Do(c, "POST", api+"/script-library/categories", map[string]any{"name": "X", "color": "blue"}); r.Status != 400 {
		t.Fatalf("bad colour = %d", r.Status)
	}
	if r := f.e.Do(c, "PATCH", api+"/script-library/categories/"+root.ID, map[string]any{"parentId": child.ID}); r.Status != 400 {
		t.Fatalf("a cycle = %d, want 400", r.Status)
	}
	parent := child.ID
	for i := 0; i < 3; i++ {
		var next scripts.ScriptCategory
		f.e.Must(201, c, "POST", api+"/script-library/categories", map[string]any{"name": fmt.Sprintf("L%d", i), "parentId": parent}).JSON(t, &next)
		parent = next.ID
	}
	if r := f.e.Do(c, "POST", api+"/script-library/categories", map[string]any{"name": "Too deep", "parentId": parent}); r.Status != 400 {
		t.Fatalf("sixth level = %d, want 400", r.Status)
	}
	sc := f.create(c, shScript("Trim", map[string]any{"categoryId": child.ID, "tags": []string{"disk"}}))
	if sc.Category == nil || *sc.Category != "Disks" {
		t.Fatalf("category %+v", sc)
	}
	var list struct{ Data []scripts.Script }
	f.e.Must(200, c, "GET", api+"/scripts?tag=DISK", nil).JSON(t, &list)
	if len(list.Data) != 1 {
		t.Fatalf("by tag: %d", len(list.Data))
	}
	if r := f.e.Do(c, "DELETE", api+"/script-library/categories/"+root.ID, nil); r.Status != 409 || r.ErrorCode() != "CATEGORY_HAS_CHILDREN" {
		t.Fatalf("delete with children = %d %s", r.Status, r.Body)
	}
	var tags struct{ Data []scripts.ScriptTag }
	f.e.Must(200, c, "GET", api+"/script-library/tags", nil).JSON(t, &tags)
	if len(tags.Data) != 1 || tags.Data[0].ScriptCount != 1 {
		t.Fatalf("tags %+v", tags.Data)
	}
	f.e.Must(204, c, "DELETE", api+"/script-library/tags/"+tags.Data[0].ID, nil)
	var after scripts.Script
	f.e.Must(200, c, "GET", api+"/scripts/"+sc.ID, nil).JSON(t, &after)
	if len(after.Tags) != 0 {
		t.Fatalf("tags after the tag's deletion: %v", after.Tags)
	}
	// The organization caller uses the partner's categories but cannot change them.
	f.create(f.a.Org, shScript("Org trim", map[string]any{"categoryId": child.ID}))
	if r := f.e.Do(f.a.Org, "PATCH", api+"/script-library/categories/"+child.ID, map[string]any{"name": "Mine"}); r.Status != 403 {
		t.Fatalf("org caller renaming a partner category = %d, want 403", r.Status)
	}
}

func TestBundlesMoveScriptsBetweenPartners(t *testing.T) {
	f := newFixture(t)
	one := f.create(f.a.Partner, shScript("Cleanup", map[string]any{"tags": []string{"maint"},
		"parameters": []map[string]any{{"name": "DAYS", "type": "number", "defaultValue": 7}}}))
	two := f.create(f.a.Partner, shScript("Report", map[string]any{"orgId": f.a.OrgID}))
	var bundle map[string]any
	f.e.Must(200, f.a.Partner, "GET", api+"/scripts/bundle/export?ids="+one.ID+","+two.ID, nil).JSON(t, &bundle)
	if bundle["bundleVersion"] != 1.0 || len(bundle["scripts"].([]any)) != 2 || strings.Contains(fmt.Sprint(bundle), f.a.OrgID) {
		t.Fatalf("bundle %v", bundle)
	}
	// Entries cannot say where they belong or what they are: such fields are dropped.
	entries := bundle["scripts"].([]any)
	entries[0].(map[string]any)["orgId"] = f.a.OrgID
	entries[0].(map[string]any)["isSystem"] = true
	bundle["scripts"] = append(entries, map[string]any{"name": "Bad", "osTypes": []string{"linux"}, "language": "cobol", "content": "x"})

	req := map[string]any{"bundle": bundle, "availability": "org", "orgId": f.b.OrgID}
	var preview scripts.BundlePreview
	f.e.Must(200, f.b.Partner, "POST", api+"/scripts/bundle/preview", req).JSON(t, &preview)
	if len(preview.Entries) != 3 || preview.Entries[0].Status != "new" || preview.Entries[2].Status != "invalid" || preview.Entries[2].Error == "" {
		t.Fatalf("preview %+v", preview)
	}
	var list struct{ Data []scripts.Script }
	f.e.Must(200, f.b.Partner, "GET", api+"/scripts", nil).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatal("preview wrote scripts")
	}
	var res scripts.BundleImportResult
	f.e.Must(200, f.b.Partner, "POST", api+"/scripts/bundle/import", req).JSON(t, &res)
	if res.Imported != 2 || len(res.Errors) != 1 || res.Errors[0].Index != 2 || len(res.SHA256) != 64 {
		t.Fatalf("import %+v", res)
	}
	f.e.Must(200, f.b.Partner, "GET", api+"/scripts?orgId="+f.b.OrgID, nil).JSON(t, &list)
	if len(list.Data) != 2 || list.Data[0].OrgID == nil || *list.Data[0].OrgID != f.b.OrgID || list.Data[0].Tags[0] != "maint" ||
		!strings.HasPrefix(*list.Data[0].Source, "bundle:") {
		t.Fatalf("imported scripts %+v", list.Data)
	}
	f.e.Must(200, f.b.Partner, "POST", api+"/scripts/bundle/preview", req).JSON(t, &preview)
	if preview.Entries[0].Status != "name-conflict" {
		t.Fatalf("second preview %+v", preview)
	}
	req["mode"] = "skip"
	f.e.Must(200, f.b.Partner, "POST", api+"/scripts/bundle/import", req).JSON(t, &res)
	if res.Skipped != 2 || res.Imported != 0 {
		t.Fatalf("skip %+v", res)
	}
	req["mode"] = "rename"
	f.e.Must(200, f.b.Partner, "POST", api+"/scripts/bundle/import", req).JSON(t, &res)
	if res.Renamed != 2 {
		t.Fatalf("rename %+v", res)
	}
	f.e.Must(200, f.b.Partner, "GET", api+"/scripts?search=cleanup", nil).JSON(t, &list)
	if len(list.Data) != 2 || list.Data[1].Name != "Cleanup (2)" {
		t.Fatalf("renamed %+v", list.Data)
	}
	req["mode"] = "new-version"
	f.e.Must(200, f.b.Partner, "POST", api+"/scripts/bundle/import", req).JSON(t, &res)
	if res.Versioned != 2 {
		t.Fatalf("new-version %+v", res)
	}
	f.e.Must(200, f.b.Partner, "GET", api+"/scripts?search=cleanup", nil).JSON(t, &list)
	if list.Data[0].Name != "Cleanup" || list.Data[0].Version != 2 {
		t.Fatalf("versioned %+v", list.Data[0])
	}
	var audits struct {
		Data []struct {
			Details map[string]any `json:"details"`
		}
	}
	f.e.Must(200, f.b.Partner, "GET", api+"/audit/logs?action=script.import", nil).JSON(t, &audits)
	withSum := 0
	for _, a := range audits.Data {
		if a.Details["bundleSha256"] == res.SHA256 {
			withSum++
		}
	}
	if withSum != 6 { // the same bundle imported, renamed and versioned, two scripts each time
		t.Fatalf("import audits with the bundle's SHA-256: %d of %d, want 6", withSum, len(audits.Data))
	}

	// Partner-wide availability needs every organization; organization callers import nothing.
	wide := map[string]any{"bundle": bundle, "availability": "partner"}
	f.e.Must(200, f.b.Partner, "POST", api+"/scripts/bundle/import", wide).JSON(t, &res)
	if res.Imported != 2 {
		t.Fatalf("partner-wide import %+v", res)
	}
	uid, _ := f.e.CreateUser("limited@gale.test", access.LevelPartner, f.b.PartnerID, "", "")
	if _, err := f.e.App.DB.SQL.Exec(`UPDATE users SET org_access = 'selected' WHERE id = $1`, uid); err != nil {
		t.Fatal(err)
	}
	if _, err := f.e.App.DB.SQL.Exec(`INSERT INTO user_org_access (user_id, org_id) VALUES ($1, $2)`, uid, f.b.OrgID); err != nil {
		t.Fatal(err)
	}
	limited := apptest.Bearer(f.e.Login("limited@gale.test", apptest.UserPassword))
	if r := f.e.Do(limited, "POST", api+"/scripts/bundle/import", wide); r.Status != 403 {
		t.Fatalf("org-limited partner admin, partner-wide = %d %s, want 403", r.Status, r.Body)
	}
	if r := f.e.Do(f.b.Org, "POST", api+"/scripts/bundle/import", req); r.Status != 403 {
		t.Fatalf("organization admin importing = %d, want 403", r.Status)
	}
	for _, bad := range []map[string]any{
		{"bundle": map[string]any{"bundleVersion": 2, "scripts": []any{}}, "orgId": f.b.OrgID},
		{"bundle": map[string]any{"bundleVersion": 1}, "orgId": f.b.OrgID},
		{"bundle": map[string]any{"bundleVersion": 1, "scripts": make([]any, 201)}, "orgId": f.b.OrgID},
		{"bundle": bundle, "orgId": f.b.OrgID, "mode": "merge"},
		{"bundle": bundle, "orgId": f.a.OrgID},
	} {
		if r := f.e.Do(f.b.Partner, "POST", api+"/scripts/bundle/import", bad); r.Status != 400 {
			t.Errorf("bad import %v = %d %s, want 400", bad["mode"], r.Status, r.Body)
		}
	}
}

// With ENABLE_2FA on, a bundle import needs a session that completed MFA.
func TestBundleImportNeedsMFA(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.Enable2FA = true })
	r := e.Do(e.Admin(), "POST", api+"/scripts/bundle/import", map[string]any{"bundle": map[string]any{"bundleVersion": 1, "scripts": []any{}}})
	if r.Status != 403 || !strings.Contains(string(r.Body), "MFA required") {
		t.Fatalf("import without MFA = %d %s, want 403 MFA required", r.Status, r.Body)
	}
}

// A cancel racing the agent's result has one winner on either database: the cancel (200, the
// execution cancelled, the late result ignored) or the result (the cancel 409, completed).
func TestCancelRacingTheResultHasOneWinner(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dev := app.Service[*devices.Service](f.e.App)
	sc := f.create(f.a.Partner, shScript("Race", nil))
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = f.device(f.a, fmt.Sprintf("race-%02d", i), "linux")
	}
	var run scripts.ScriptRunResult
	f.e.Must(202, f.a.Partner, "POST", api+"/scripts/"+sc.ID+"/execute", map[string]any{"deviceIds": ids}).JSON(t, &run)
	cancels, results := 0, 0
	for _, x := range run.Executions {
		if _, err := dev.TakeQueued(ctx, x.DeviceID); err != nil {
			t.Fatal(err)
		}
		zero := 0
		var status int
		var wg sync.WaitGroup
		wg.Go(func() { status = f.e.Do(f.a.Partner, "POST", api+"/scripts/executions/"+x.ID+"/cancel", nil).Status })
		wg.Go(func() {
			if err := dev.RecordResult(ctx, agentOf(f, f.a, x.DeviceID), agentproto.CommandResult{CommandID: x.CommandID,
				Status: agentproto.ResultCompleted, ExitCode: &zero, Stdout: "done"}); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		got := f.execution(f.a.Partner, x.ID)
		switch {
		case status == 200 && got.Status == scripts.StatusCancelled:
			cancels++
		case status == 409 && got.Status == scripts.StatusCompleted:
			results++
		default:
			t.Fatalf("cancel answered %d and the execution is %s", status, got.Status)
		}
	}
	t.Logf("%d cancels and %d results won", cancels, results)
}

// A failure whose exit code the script maps to a severity opens one alert of that severity on
// the device, however often it fails; the script's next success there resolves it. A failure
// the mapping does not name opens none.
func TestMappedFailuresOpenAndResolveOneAlert(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dev := app.Service[*devices.Service](f.e.App)
	host := f.device(f.a, "db-01", "linux")
	sc := f.create(f.a.Partner, shScript("Backup check", map[string]any{"exitCodeSeverityMapping": map[string]any{"3": "high"}}))
	finish := func(exit int) {
		t.Helper()
		var run scripts.ScriptRunResult
		f.e.Must(202, f.a.Partner, "POST", api+"/scripts/"+sc.ID+"/execute", map[string]any{"deviceIds": []string{host}}).JSON(t, &run)
		x := run.Executions[0]
		status := agentproto.ResultCompleted
		if exit != 0 {
			status = agentproto.ResultFailed
		}
		if err := dev.RecordResult(ctx, agentOf(f, f.a, host), agentproto.CommandResult{CommandID: x.CommandID, Status: status,
			ExitCode: &exit, Error: "backup is 3 days old"}); err != nil {
			t.Fatal(err)
		}
		if err := f.e.App.Events.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	type alert struct {
		Severity string `json:"severity"`
		Status   string `json:"status"`
		Title    string `json:"title"`
	}
	alertsOf := func() []alert {
		var list struct{ Data []alert }
		f.e.Must(200, f.a.Partner, "GET", api+"/alerts?deviceId="+host, nil).JSON(t, &list)
		return list.Data
	}
	finish(1)
	if got := alertsOf(); len(got) != 0 {
		t.Fatalf("an unmapped failure opened %+v", got)
	}
	finish(3)
	finish(3)
	got := alertsOf()
	if len(got) != 1 || got[0].Severity != "high" || got[0].Status != "active" || got[0].Title != "Script Backup check failed" {
		t.Fatalf("after two mapped failures: %+v", got)
	}
	finish(0)
	if got := alertsOf(); len(got) != 1 || got[0].Status != "resolved" {
		t.Fatalf("after a success: %+v", got)
	}
	finish(3)
	if got := alertsOf(); len(got) != 2 {
		t.Fatalf("a new failure after the resolution opens a new alert: %+v", got)
	}
	var other struct{ Data []alert }
	f.e.Must(200, f.b.Partner, "GET", api+"/alerts?deviceId="+host, nil).JSON(t, &other)
	if len(other.Data) != 0 {
		t.Fatalf("another tenant sees %d script alerts", len(other.Data))
	}
}

// The list filters by operating system on both databases (the column is JSON text on one
// and JSONB on the other).
func TestListFiltersByOperatingSystem(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	f.create(c, shScript("linux only", nil))
	f.create(c, map[string]any{"name": "windows only", "osTypes": []string{"windows"}, "language": "powershell", "content": "dir"})
	var list struct {
		Data []scripts.Script `json:"data"`
	}
	f.e.Must(200, c, "GET", api+"/scripts?osType=windows", nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].Name != "windows only" {
		t.Fatalf("osType=windows lists %+v", list.Data)
	}
	f.e.Must(200, c, "GET", api+"/scripts?osType=macos", nil).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("osType=macos lists %+v", list.Data)
	}
}

// A script runs only in a language its device's system has: PowerShell and cmd are Windows's.
// One saved before that rule, for a system that lacks its language, is refused at execute,
// naming the devices, rather than sent to agents that would only fail it.
func TestExecuteRefusesALanguageTheDevicesSystemLacks(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	for _, os := range []string{"linux", "macos"} {
		r := f.e.Do(c, "POST", api+"/scripts", map[string]any{"name": "ps on " + os, "osTypes": []string{os}, "language": "powershell",
			"content": "Get-Date"})
		if r.Status != 400 || !strings.Contains(string(r.Body), `"language"`) {
			t.Errorf("a PowerShell script for %s = %d %s, want 400 naming language", os, r.Status, r.Body)
		}
	}
	linux, windows, mac := f.device(f.a, "web-01", "linux"), f.device(f.a, "win-01", "windows"), f.device(f.a, "mac-01", "macos")
	foreign := f.device(f.b, "bravo-01", "linux")
	r := f.e.Do(c, "POST", api+"/devices/"+linux+"/commands", map[string]any{"type": "run_script",
		"payload": map[string]any{"language": "powershell", "script": "Get-Date"}})
	if r.Status != 400 {
		t.Errorf("a PowerShell command to a Linux device = %d %s, want 400", r.Status, r.Body)
	}

	sc := f.create(c, map[string]any{"name": "Inventory", "osTypes": []string{"windows"}, "language": "powershell", "content": "Get-Date"})
	if _, err := f.e.App.DB.SQL.Exec(`UPDATE scripts SET os_types = $1 WHERE id = $2`, `["linux","windows"]`, sc.ID); err != nil {
		t.Fatal(err)
	}
	path := api + "/scripts/" + sc.ID + "/execute"
	r = f.e.Do(c, "POST", path, map[string]any{"deviceIds": []string{windows, linux, mac, foreign}})
	body := string(r.Body)
	if r.Status != 400 || r.ErrorCode() != agentproto.ErrNotSupported || !strings.Contains(body, "powershell") ||
		!strings.Contains(body, "web-01") || !strings.Contains(body, linux) || strings.Contains(body, "mac-01") ||
		strings.Contains(body, "bravo-01") || strings.Contains(body, foreign) {
		t.Fatalf("execute on a Linux device = %d %s, want 400 %s naming web-01 only", r.Status, body, agentproto.ErrNotSupported)
	}
	var list struct{ Data []scripts.ScriptExecution }
	f.e.Must(200, c, "GET", api+"/scripts/"+sc.ID+"/executions", nil).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("a refused execute recorded %+v", list.Data)
	}
	if cmds, err := app.Service[*devices.Service](f.e.App).TakeQueued(context.Background(), windows); err != nil || len(cmds) != 0 {
		t.Fatalf("a refused execute queued %v %v", cmds, err)
	}
	// Without the Linux device it runs: the Mac is not among its systems (skipped), Bravo's
	// device is not found.
	var run scripts.ScriptRunResult
	f.e.Must(202, c, "POST", path, map[string]any{"deviceIds": []string{windows, mac, foreign}}).JSON(t, &run)
	if len(run.Executions) != 1 || run.Executions[0].DeviceID != windows || len(run.Skipped) != 1 || run.Skipped[0].DeviceID != mac ||
		len(run.Failed) != 1 || run.Failed[0].DeviceID != foreign {
		t.Fatalf("execute without the Linux device: %+v", run)
	}
	// The PowerShell template is for Windows.
	var tpl scripts.Script
	f.e.Must(201, c, "POST", api+"/script-library/from-template/powershell-basic", map[string]any{}).JSON(t, &tpl)
	if len(tpl.OSTypes) != 1 || tpl.OSTypes[0] != "windows" {
		t.Fatalf("PowerShell template for %v", tpl.OSTypes)
	}
}

// walk reads a list page by page with limit, and returns the IDs in the order read and the
// number of pages.
func walk(t *testing.T, e *apptest.Env, c apptest.Caller, path string, limit int) ([]string, int) {
	t.Helper()
	var ids []string
	cursor, pages := "", 0
	for {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		url := fmt.Sprintf("%s%slimit=%d", path, sep, limit)
		if cursor != "" {
			url += "&cursor=" + cursor
		}
		var page struct {
			Data       []struct{ ID string }
			Pagination *struct {
				HasMore bool
				Cursor  string
			}
		}
		e.Must(200, c, "GET", url, nil).JSON(t, &page)
		pages++
		if page.Pagination == nil || len(page.Data) > limit || (page.Pagination.HasMore != (page.Pagination.Cursor != "")) {
			t.Fatalf("%s: page %+v, want at most %d rows and a pagination", url, page, limit)
		}
		for _, r := range page.Data {
			ids = append(ids, r.ID)
		}
		if !page.Pagination.HasMore {
			return ids, pages
		}
		cursor = page.Pagination.Cursor
		if pages > 20 {
			t.Fatalf("%s: no end after %d pages", path, pages)
		}
	}
}

// Categories, tags and versions are paged like every list: limit is honoured, the cursor
// walks every row once in the list's order, and a cursor that is not one is 400.
func TestLibraryListsArePaged(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	names := []string{"delta", "Alpha", "charlie", "Ärger", "Bravo", "echo", "alpha 2"}
	for _, n := range names {
		f.e.Must(201, c, "POST", api+"/script-library/categories", map[string]any{"name": n})
		f.e.Must(201, c, "POST", api+"/script-library/tags", map[string]any{"name": n})
	}
	sc := f.create(c, shScript("Versioned", nil))
	for i := 2; i <= 5; i++ {
		f.e.Must(201, c, "POST", api+"/script-library/scripts/"+sc.ID+"/versions", map[string]any{"content": fmt.Sprintf("echo %d", i),
			"note": fmt.Sprintf("v%d", i)})
	}
	for path, want := range map[string]int{"/script-library/categories": len(names), "/script-library/tags": len(names),
		"/script-library/scripts/" + sc.ID + "/versions": 5} {
		var all struct{ Data []struct{ ID, Name string } }
		f.e.Must(200, c, "GET", api+path, nil).JSON(t, &all)
		if len(all.Data) != want {
			t.Fatalf("%s lists %d rows, want %d", path, len(all.Data), want)
		}
		for _, limit := range []int{1, 2, 3} {
			ids, pages := walk(t, f.e, c, api+path, limit)
			if wantPages := (want + limit - 1) / limit; pages != wantPages && pages != wantPages+1 {
				t.Errorf("%s limit %d: %d pages for %d rows", path, limit, pages, want)
			}
			if len(ids) != want {
				t.Fatalf("%s limit %d walks %v, want %d rows", path, limit, ids, want)
			}
			for i, id := range ids {
				if id != all.Data[i].ID {
					t.Fatalf("%s limit %d: row %d is %s, want %s (the order of the whole list)", path, limit, i, id, all.Data[i].ID)
				}
			}
		}
		for _, bad := range []string{"garbage", "eyJrIjoxfQ"} {
			if r := f.e.Do(c, "GET", api+path+"?cursor="+bad, nil); r.Status != 400 {
				t.Errorf("%s with cursor %s = %d %s, want 400", path, bad, r.Status, r.Body)
			}
		}
		if strings.HasSuffix(path, "/tags") {
			var got []string
			for _, r := range all.Data {
				if r.Name != "Ärger" { // where the database's collation puts it
					got = append(got, r.Name)
				}
			}
			if strings.Join(got, ",") != "Alpha,alpha 2,Bravo,charlie,delta,echo" {
				t.Errorf("tags by name, case aside: %v", got)
			}
		}
	}
	var versions struct{ Data []scripts.ScriptVersion }
	f.e.Must(200, c, "GET", api+"/script-library/scripts/"+sc.ID+"/versions?limit=2", nil).JSON(t, &versions)
	if len(versions.Data) != 2 || versions.Data[0].Version != 5 || versions.Data[1].Version != 4 {
		t.Fatalf("newest versions first: %+v", versions.Data)
	}
}

// partnerKey is the raw key of a new service principal of the tenant's partner with scopes.
func (f fixture) partnerKey(ten apptest.Tenant, scopes ...string) apptest.Caller {
	f.e.T.Helper()
	id := f.e.Must(201, ten.Partner, "POST", api+"/partner-service-principals", map[string]any{"name": "export " + strings.Join(scopes, " "),
		"scopes": scopes}).Map(f.e.T)["id"].(string)
	return apptest.Key(f.e.Must(201, ten.Partner, "POST", api+"/partner-service-principals/"+id+"/keys",
		map[string]any{"name": "k"}).Map(f.e.T)["key"].(string))
}

// The partner API exports the partner's live scripts, partner-wide ones too, as GET /scripts
// shows them: in ID order, paged by cursor, and with updatedSince only those changed since.
func TestPartnerAPIExportsScripts(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	var cat scripts.ScriptCategory
	f.e.Must(201, c, "POST", api+"/script-library/categories", map[string]any{"name": "Ops"}).JSON(t, &cat)
	wide := f.create(c, shScript("Everywhere", nil))
	one := f.create(c, shScript("Disk", map[string]any{"orgId": f.a.OrgID, "tags": []string{"disk"}, "categoryId": cat.ID}))
	gone := f.create(c, shScript("Gone", nil))
	f.e.Must(204, c, "DELETE", api+"/scripts/"+gone.ID, nil)
	f.create(f.b.Partner, shScript("Bravo's", nil))
	key := f.partnerKey(f.a, "scripts:read")

	type page struct {
		Data       []scripts.Script
		Pagination struct {
			HasMore bool
			Cursor  string
		}
	}
	var first, second page
	f.e.Must(200, key, "GET", api+"/partner-api/scripts?limit=1", nil).JSON(t, &first)
	if len(first.Data) != 1 || first.Data[0].ID != wide.ID || first.Data[0].OrgID != nil || !first.Pagination.HasMore {
		t.Fatalf("first page %+v", first)
	}
	f.e.Must(200, key, "GET", api+"/partner-api/scripts?limit=1&cursor="+first.Pagination.Cursor, nil).JSON(t, &second)
	if len(second.Data) != 1 || second.Data[0].ID != one.ID || second.Pagination.HasMore {
		t.Fatalf("second page %+v", second)
	}
	if got := second.Data[0]; got.Content != "echo hello" || len(got.Tags) != 1 || got.Tags[0] != "disk" || got.Category == nil ||
		*got.Category != "Ops" || got.OrgID == nil || *got.OrgID != f.a.OrgID {
		t.Fatalf("exported script %+v", got)
	}

	// With updatedSince, the rows changed since then, in order of change.
	var up scripts.Script
	f.e.Must(200, c, "PUT", api+"/scripts/"+wide.ID, shScript("Everywhere", map[string]any{"content": "uptime"})).JSON(t, &up)
	var changed page
	f.e.Must(200, key, "GET", api+"/partner-api/scripts?updatedSince="+url.QueryEscape(up.UpdatedAt.Format(time.RFC3339Nano)), nil).JSON(t, &changed)
	if len(changed.Data) != 1 || changed.Data[0].ID != wide.ID || changed.Data[0].Content != "uptime" {
		t.Fatalf("changed since the edit: %+v", changed.Data)
	}
	f.e.Must(200, key, "GET", api+"/partner-api/scripts?updatedSince=2020-01-01T00:00:00Z", nil).JSON(t, &changed)
	if len(changed.Data) != 2 || changed.Data[0].ID != one.ID || changed.Data[1].ID != wide.ID {
		t.Fatalf("changed since 2020, in order of change: %+v", changed.Data)
	}
	if r := f.e.Do(f.partnerKey(f.a, "configuration:read"), "GET", api+"/partner-api/scripts", nil); r.Status != 403 {
		t.Fatalf("export without scripts:read = %d %s", r.Status, r.Body)
	}
}
