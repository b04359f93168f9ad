package automations_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/automations"
	"gale/internal/domains/devices"
	"gale/internal/domains/scripts"
	"gale/internal/domains/webhooks"
	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

type fixture struct {
	e *apptest.Env
	a apptest.Tenant
	b apptest.Tenant
}

func newFixture(t *testing.T, opts ...apptest.Option) fixture {
	e := apptest.New(t, opts...)
	admin := e.Admin()
	return fixture{e: e, a: e.NewTenant(admin, "Alpha"), b: e.NewTenant(admin, "Bravo")}
}

func (f fixture) device(ten apptest.Tenant, host, os string, tags ...string) string {
	return f.e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: host, OSType: os,
		OSName: os, Tags: tags})
}

func (f fixture) script(ten apptest.Tenant) string {
	f.e.T.Helper()
	var sc scripts.Script
	f.e.Must(201, ten.Partner, "POST", api+"/scripts", map[string]any{"name": "Hello", "orgId": ten.OrgID, "osTypes": []string{"linux"},
		"language": "sh", "content": "echo hello"}).JSON(f.e.T, &sc)
	return sc.ID
}

func (f fixture) create(c apptest.Caller, body map[string]any) automations.Automation {
	f.e.T.Helper()
	var x automations.Automation
	f.e.Must(201, c, "POST", api+"/automations", body).JSON(f.e.T, &x)
	return x
}

func (f fixture) run(c apptest.Caller, id string) automations.AutomationRun {
	f.e.T.Helper()
	var r automations.AutomationRun
	f.e.Must(200, c, "GET", api+"/automations/runs/"+id, nil).JSON(f.e.T, &r)
	return r
}

func (f fixture) service() *automations.Service { return app.Service[*automations.Service](f.e.App) }

// settle moves the runs on (as the runner does every second) until the run is no longer running.
func (f fixture) settle(c apptest.Caller, id string) automations.AutomationRun {
	f.e.T.Helper()
	var r automations.AutomationRun
	apptest.Eventually(f.e.T, 20*time.Second, func() bool {
		if err := f.service().AdvanceAll(context.Background()); err != nil {
			f.e.T.Fatal(err)
		}
		r = f.run(c, id)
		return r.Status != automations.RunRunning
	})
	return r
}

// finish records an agent's result of a step's command.
func (f fixture) finish(ten apptest.Tenant, st automations.AutomationRunStep, exit int, stdout string) {
	f.e.T.Helper()
	dev := app.Service[*devices.Service](f.e.App)
	status := agentproto.ResultCompleted
	if exit != 0 {
		status = agentproto.ResultFailed
	}
	if err := dev.RecordResult(context.Background(), devices.Agent{DeviceID: *st.DeviceID, PartnerID: ten.PartnerID, OrgID: ten.OrgID,
		Role: "agent"}, agentproto.CommandResult{CommandID: *st.CommandID, Status: status, ExitCode: &exit, Stdout: stdout}); err != nil {
		f.e.T.Fatal(err)
	}
}

func alertAction(title string) map[string]any {
	return map[string]any{"type": "create_alert", "severity": "low", "title": title, "message": "raised by an automation"}
}

func manual(name string, targets map[string]any, actions ...map[string]any) map[string]any {
	return map[string]any{"name": name, "trigger": map[string]any{"type": "manual"}, "targets": targets, "actions": actions}
}

func TestAutomationsCRUDValidationAndTenancy(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "web-1", "linux")
	scriptID := f.script(f.a)
	otherScript := f.script(f.b)
	c := f.a.Partner
	x := f.create(c, map[string]any{"name": "Nightly", "orgId": f.a.OrgID, "description": "clean up",
		"trigger":    map[string]any{"type": "schedule", "cron": "0 3 * * *", "timezone": "Europe/Paris"},
		"conditions": []map[string]any{{"field": "osType", "operator": "eq", "value": "linux"}},
		"targets":    map[string]any{"type": "devices", "ids": []string{dev}},
		"actions":    []map[string]any{{"type": "run_script", "scriptId": scriptID, "parameters": map[string]any{}}}})
	if x.OrgID == nil || *x.OrgID != f.a.OrgID || !x.Enabled || x.OnFailure != "stop" || x.NextRunAt == nil || x.Trigger.Timezone != "Europe/Paris" {
		t.Fatalf("created %+v", x)
	}
	if h := x.NextRunAt.In(time.FixedZone("", 0)).Minute(); h != 0 {
		t.Fatalf("next run %v is not on the hour", x.NextRunAt)
	}
	var got automations.Automation
	f.e.Must(200, f.a.Org, "GET", api+"/automations/"+x.ID, nil).JSON(t, &got)
	if got.Name != "Nightly" || len(got.Actions) != 1 || got.Targets == nil || got.Targets.IDs[0] != dev {
		t.Fatalf("read back %+v", got)
	}
	f.e.Must(200, c, "PATCH", api+"/automations/"+x.ID, map[string]any{"name": "Nightly clean", "enabled": false}).JSON(t, &got)
	if got.Name != "Nightly clean" || got.Enabled || got.NextRunAt != nil || got.Description != "clean up" {
		t.Fatalf("patched %+v", got)
	}
	var list struct{ Data []automations.Automation }
	f.e.Must(200, c, "GET", api+"/automations?triggerType=schedule", nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != x.ID {
		t.Fatalf("list %+v", list.Data)
	}

	for name, tc := range map[string]struct {
		body  map[string]any
		field string
	}{
		"bad cron":          {map[string]any{"name": "x", "trigger": map[string]any{"type": "schedule", "cron": "0 3 * *"}, "actions": []any{alertAction("a")}, "targets": map[string]any{"type": "organization"}}, "trigger.cron"},
		"bad time zone":     {map[string]any{"name": "x", "trigger": map[string]any{"type": "schedule", "cron": "0 3 * * *", "timezone": "Mars/Olympus"}, "actions": []any{alertAction("a")}, "targets": map[string]any{"type": "organization"}}, "trigger.cron"},
		"unknown event":     {map[string]any{"name": "x", "trigger": map[string]any{"type": "event", "eventType": "device.exploded"}, "actions": []any{alertAction("a")}}, "trigger.eventType"},
		"bad filter key":    {map[string]any{"name": "x", "trigger": map[string]any{"type": "event", "eventType": "device.offline", "filter": map[string]any{"color": "red"}}, "actions": []any{alertAction("a")}}, "trigger.filter.color"},
		"no targets":        {manual("x", nil, alertAction("a")), "targets"},
		"no script":         {manual("x", map[string]any{"type": "organization"}, map[string]any{"type": "run_script"}), "actions[0].scriptId"},
		"foreign script":    {manual("x", map[string]any{"type": "organization"}, map[string]any{"type": "run_script", "scriptId": otherScript}), "actions[0].scriptId"},
		"alert no title":    {manual("x", map[string]any{"type": "organization"}, map[string]any{"type": "create_alert", "severity": "low"}), "actions[0].title"},
		"notify no channel": {manual("x", map[string]any{"type": "organization"}, map[string]any{"type": "notify", "message": "hi"}), "actions[0].channelIds"},
		"bad condition":     {map[string]any{"name": "x", "trigger": map[string]any{"type": "manual"}, "targets": map[string]any{"type": "organization"}, "actions": []any{alertAction("a")}, "conditions": []any{map[string]any{"field": "osType", "operator": "in", "value": "linux"}}}, "conditions[0].values"},
		"notify on failure": {map[string]any{"name": "x", "trigger": map[string]any{"type": "manual"}, "targets": map[string]any{"type": "organization"}, "actions": []any{alertAction("a")}, "onFailure": "notify"}, "notifyChannelIds"},
		"no group ids":      {manual("x", map[string]any{"type": "groups"}, alertAction("a")), "targets.ids"},
	} {
		r := f.e.Do(f.a.Org, "POST", api+"/automations", tc.body)
		if r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" || !bytes.Contains(r.Body, []byte(`"field":"`+tc.field+`"`)) {
			t.Errorf("%s: %d %s, want 400 on %s", name, r.Status, r.Body, tc.field)
		}
	}

	// Names are unique in their scope, whatever their case; another scope may repeat one.
	dupe := manual("NIGHTLY CLEAN", map[string]any{"type": "organization"}, alertAction("a"))
	dupe["orgId"] = f.a.OrgID
	if r := f.e.Do(c, "POST", api+"/automations", dupe); r.Status != 409 || r.ErrorCode() != "AUTOMATION_NAME_TAKEN" {
		t.Fatalf("same name = %d %s, want 409 AUTOMATION_NAME_TAKEN", r.Status, r.Body)
	}
	delete(dupe, "orgId")
	renamed := f.create(c, dupe)
	if r := f.e.Do(c, "PATCH", api+"/automations/"+renamed.ID, map[string]any{"name": "Wide"}); r.Status != 200 {
		t.Fatalf("rename to a free name = %d %s", r.Status, r.Body)
	}

	// Another tenant sees nothing of it: every route answers as for a missing automation.
	other := f.b.Partner
	for _, rt := range []struct{ method, path string }{{"GET", "/automations/" + x.ID}, {"PATCH", "/automations/" + x.ID},
		{"DELETE", "/automations/" + x.ID}, {"POST", "/automations/" + x.ID + "/run"}, {"POST", "/automations/" + x.ID + "/trigger"},
		{"GET", "/automations/" + x.ID + "/runs"}} {
		var body any
		if rt.method != "GET" && rt.method != "DELETE" {
			body = map[string]any{}
		}
		if r := f.e.Do(other, rt.method, api+rt.path, body); r.Status != 404 {
			t.Errorf("%s %s by another tenant = %d %s, want 404", rt.method, rt.path, r.Status, r.Body)
		}
	}
	f.e.Must(200, other, "GET", api+"/automations", nil).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("another tenant lists %+v", list.Data)
	}
	f.e.Must(201, f.b.Partner, "POST", api+"/automations", manual("Nightly clean", map[string]any{"type": "organization"}, alertAction("a")))
	// A partner-wide automation is not visible to the organization's own callers.
	if r := f.e.Do(c, "POST", api+"/automations", manual("wide", map[string]any{"type": "organization"}, alertAction("w"))); r.Status != 409 {
		t.Fatalf("a partner-wide name taken = %d %s, want 409", r.Status, r.Body)
	}
	wide := renamed
	if wide.OrgID != nil {
		t.Fatalf("a partner caller without orgId makes a partner-wide automation: %+v", wide)
	}
	f.e.Must(404, f.a.Org, "GET", api+"/automations/"+wide.ID, nil)
	f.e.Must(204, c, "DELETE", api+"/automations/"+x.ID, nil)
	f.e.Must(404, c, "GET", api+"/automations/"+x.ID, nil)
}

// run and trigger start runs: steps per action and device that end with the device's work, a
// run that ends completed, failed or partial; conditions apply to trigger only.
func TestRunAndTriggerProduceRunsWithSteps(t *testing.T) {
	f := newFixture(t)
	web := f.device(f.a, "web-1", "linux", "web")
	db := f.device(f.a, "db-1", "linux")
	win := f.device(f.a, "desk-1", "windows", "web")
	scriptID := f.script(f.a)
	c := f.a.Org
	x := f.create(c, map[string]any{"name": "Hello everywhere", "trigger": map[string]any{"type": "manual"}, "onFailure": "continue",
		"targets":    map[string]any{"type": "organization"},
		"conditions": []map[string]any{{"field": "tag", "operator": "eq", "value": "web"}},
		"actions":    []map[string]any{{"type": "run_script", "scriptId": scriptID}, alertAction("said hello")}})

	var r automations.AutomationRun
	f.e.Must(202, c, "POST", api+"/automations/"+x.ID+"/run", nil).JSON(t, &r)
	if r.Status != automations.RunRunning || r.TriggeredBy != "run" || r.DeviceCount != 3 || len(r.Steps) != 3 {
		t.Fatalf("started run %+v", r)
	}
	byDevice := map[string]automations.AutomationRunStep{}
	for _, st := range r.Steps {
		byDevice[*st.DeviceID] = st
	}
	if byDevice[win].Status != automations.StepSkipped || byDevice[web].Status != automations.StepRunning || byDevice[web].ExecutionID == nil {
		t.Fatalf("steps %+v", r.Steps)
	}
	var runs struct{ Data []automations.AutomationRun }
	f.e.Must(200, c, "GET", api+"/automations/"+x.ID+"/runs", nil).JSON(t, &runs)
	if len(runs.Data) != 1 || runs.Data[0].ID != r.ID {
		t.Fatalf("runs %+v", runs.Data)
	}
	// Delete while running: 409.
	if resp := f.e.Do(f.a.Partner, "DELETE", api+"/automations/"+x.ID, nil); resp.Status != 409 || resp.ErrorCode() != "AUTOMATION_RUNNING" {
		t.Fatalf("delete while running = %d %s", resp.Status, resp.Body)
	}
	f.finish(f.a, byDevice[web], 0, "hello\n")
	f.finish(f.a, byDevice[db], 1, "")
	done := f.settle(c, r.ID)
	if done.Status != automations.RunPartial || done.CompletedAt == nil || len(done.Steps) != 6 {
		t.Fatalf("finished run %+v", done)
	}
	for _, st := range done.Steps {
		switch {
		case st.ActionIndex == 0 && *st.DeviceID == web:
			if st.Status != automations.StepCompleted || st.Output == nil || *st.Output != "hello" || st.ExitCode == nil || *st.ExitCode != 0 {
				t.Errorf("web step %+v", st)
			}
		case st.ActionIndex == 0 && *st.DeviceID == db:
			if st.Status != automations.StepFailed || st.ExitCode == nil || *st.ExitCode != 1 {
				t.Errorf("db step %+v", st)
			}
		case st.ActionIndex == 1:
			if st.Status != automations.StepCompleted || st.AlertID == nil {
				t.Errorf("alert step %+v", st)
			}
		}
	}

	// trigger: the conditions keep the tagged devices (the Windows one is then skipped).
	f.e.Must(202, c, "POST", api+"/automations/"+x.ID+"/trigger", map[string]any{"payload": map[string]any{"reason": "test"}}).JSON(t, &r)
	if r.TriggeredBy != "trigger" || r.DeviceCount != 2 || len(r.Steps) != 2 || r.Payload["reason"] != "test" {
		t.Fatalf("triggered run %+v", r)
	}
	for _, st := range r.Steps {
		if *st.DeviceID == web {
			f.finish(f.a, st, 0, "hi")
		}
	}
	if done = f.settle(c, r.ID); done.Status != automations.RunCompleted || len(done.Steps) != 4 {
		t.Fatalf("triggered run finished %+v", done)
	}

	// onFailure stop: a failed step ends the run before the next action; all failed is failed.
	f.e.Must(200, c, "PATCH", api+"/automations/"+x.ID, map[string]any{"onFailure": "stop", "conditions": []any{},
		"targets": map[string]any{"type": "devices", "ids": []string{db}}})
	f.e.Must(202, c, "POST", api+"/automations/"+x.ID+"/run", nil).JSON(t, &r)
	f.finish(f.a, r.Steps[0], 2, "")
	if done = f.settle(c, r.ID); done.Status != automations.RunFailed || len(done.Steps) != 1 {
		t.Fatalf("stopped run %+v", done)
	}

	// Disabled: 400 for both.
	f.e.Must(200, c, "PATCH", api+"/automations/"+x.ID, map[string]any{"enabled": false})
	for _, op := range []string{"run", "trigger"} {
		if resp := f.e.Do(c, "POST", api+"/automations/"+x.ID+"/"+op, nil); resp.Status != 400 || resp.ErrorCode() != "AUTOMATION_DISABLED" {
			t.Fatalf("%s of a disabled automation = %d %s", op, resp.Status, resp.Body)
		}
	}
	f.e.Must(404, f.b.Partner, "GET", api+"/automations/runs/"+r.ID, nil)
	f.e.Must(204, f.a.Partner, "DELETE", api+"/automations/"+x.ID, nil)
}

// run_command sends a device command per device; notify queues a message on the channels, and
// onFailure notify tells the automation's channels of a run that failed.
func TestCommandAndNotifyActions(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "cmd-1", "linux")
	var ch struct {
		ID string `json:"id"`
	}
	f.e.Must(201, f.a.Partner, "POST", api+"/alerts/channels", map[string]any{"name": "Ops", "type": "slack", "orgId": f.a.OrgID,
		"config": map[string]any{"webhookUrl": "https://hooks.slack.com/services/T0/B0/x"}}).JSON(t, &ch)
	c := f.a.Org
	if r := f.e.Do(c, "POST", api+"/automations", manual("x", map[string]any{"type": "devices", "ids": []string{dev}},
		map[string]any{"type": "run_command", "command": map[string]any{"type": "format_disk"}})); r.Status != 400 ||
		!bytes.Contains(r.Body, []byte("actions[0].command.type")) {
		t.Fatalf("an unknown command kind = %d %s", r.Status, r.Body)
	}
	body := manual("Inventory", map[string]any{"type": "devices", "ids": []string{dev}},
		map[string]any{"type": "run_command", "command": map[string]any{"type": "refresh_inventory"}},
		map[string]any{"type": "notify", "channelIds": []string{ch.ID}, "subject": "Inventory", "message": "inventory refreshed"})
	body["onFailure"], body["notifyChannelIds"] = "notify", []string{ch.ID}
	x := f.create(c, body)
	deliveries := func() []map[string]any {
		var out struct{ Data []map[string]any }
		f.e.Must(200, f.a.Partner, "GET", api+"/alerts/channels/"+ch.ID+"/deliveries", nil).JSON(t, &out)
		return out.Data
	}
	var r automations.AutomationRun
	f.e.Must(202, c, "POST", api+"/automations/"+x.ID+"/run", nil).JSON(t, &r)
	if len(r.Steps) != 1 || r.Steps[0].CommandID == nil || r.Steps[0].ExecutionID != nil {
		t.Fatalf("command run %+v", r)
	}
	f.finish(f.a, r.Steps[0], 0, "")
	done := f.settle(c, r.ID)
	if done.Status != automations.RunCompleted || len(done.Steps) != 2 || done.Steps[1].Status != automations.StepCompleted {
		t.Fatalf("finished %+v", done)
	}
	if d := deliveries(); len(d) != 1 || d[0]["eventType"] != "automation.notify" {
		t.Fatalf("deliveries after the run %+v", d)
	}
	f.e.Must(202, c, "POST", api+"/automations/"+x.ID+"/run", nil).JSON(t, &r)
	f.finish(f.a, r.Steps[0], 1, "")
	if done = f.settle(c, r.ID); done.Status != automations.RunFailed || len(done.Steps) != 1 {
		t.Fatalf("failed run %+v", done)
	}
	if d := deliveries(); len(d) != 2 {
		t.Fatalf("the failure was not announced: %+v", d)
	}
}

// An action that cannot start (a required script parameter missing) is one failed step that
// says why, and the run fails.
func TestAnActionThatCannotStartFailsTheRun(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "p-1", "linux")
	var sc scripts.Script
	f.e.Must(201, f.a.Org, "POST", api+"/scripts", map[string]any{"name": "Needs", "osTypes": []string{"linux"}, "language": "sh",
		"content": "echo $PATH_TO", "parameters": []map[string]any{{"name": "PATH_TO", "type": "string", "required": true}}}).JSON(t, &sc)
	x := f.create(f.a.Org, manual("Missing", map[string]any{"type": "devices", "ids": []string{dev}},
		map[string]any{"type": "run_script", "scriptId": sc.ID}))
	var r automations.AutomationRun
	f.e.Must(202, f.a.Org, "POST", api+"/automations/"+x.ID+"/run", nil).JSON(t, &r)
	done := f.settle(f.a.Org, r.ID)
	if done.Status != automations.RunFailed || len(done.Steps) != 1 || done.Steps[0].Error == nil ||
		!strings.Contains(*done.Steps[0].Error, "parameters.PATH_TO") {
		t.Fatalf("run %+v steps %+v", done, done.Steps)
	}
}

// A run starting while the automation is deleted: one of them wins, never both.
func TestDeleteRacingARunHasOneWinner(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "race-1", "linux")
	scriptID := f.script(f.a)
	for i := range 6 {
		x := f.create(f.a.Org, manual(fmt.Sprintf("Race %d", i), map[string]any{"type": "devices", "ids": []string{dev}},
			map[string]any{"type": "run_script", "scriptId": scriptID}))
		var run, del int
		var wg sync.WaitGroup
		wg.Go(func() { run = f.e.Do(f.a.Org, "POST", api+"/automations/"+x.ID+"/run", nil).Status })
		wg.Go(func() { del = f.e.Do(f.a.Partner, "DELETE", api+"/automations/"+x.ID, nil).Status })
		wg.Wait()
		if !(run == 202 && del == 409) && !(run == 404 && del == 204) {
			t.Fatalf("run %d, delete %d: want 202 and 409, or 404 and 204", run, del)
		}
	}
}

// holdBack is a maintenance window over some devices.
type holdBack map[string]bool

func (h holdBack) HeldFromAutomations(_ context.Context, deviceIDs []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, id := range deviceIDs {
		out[id] = h[id]
	}
	return out, nil
}

// A partner-wide automation acts in every organization of the partner; maintenance windows
// hold devices back; its runs are not the organization callers' to see.
func TestPartnerWideRunsAndMaintenanceWindows(t *testing.T) {
	f := newFixture(t)
	second := f.e.CreateOrg(f.e.Admin(), f.a.PartnerID, "Alpha Second")
	var sites struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	f.e.Must(200, f.a.Partner, "GET", api+"/orgs/sites?orgId="+second, nil).JSON(t, &sites)
	one := f.device(f.a, "one", "linux")
	two := f.e.InsertDevice(apptest.DeviceRow{PartnerID: f.a.PartnerID, OrgID: second, SiteID: sites.Data[0].ID, Hostname: "two"})
	held := f.device(f.a, "held", "linux")
	f.device(f.b, "foreign", "linux")
	f.service().SetMaintenance(holdBack{held: true})
	x := f.create(f.a.Partner, manual("Everywhere", map[string]any{"type": "organization"}, alertAction("hello")))
	var r automations.AutomationRun
	f.e.Must(202, f.a.Partner, "POST", api+"/automations/"+x.ID+"/run", nil).JSON(t, &r)
	done := f.settle(f.a.Partner, r.ID)
	got := map[string]bool{}
	for _, st := range done.Steps {
		got[*st.DeviceID] = st.Status == automations.StepCompleted
	}
	if done.Status != automations.RunCompleted || len(got) != 2 || !got[one] || !got[two] {
		t.Fatalf("partner-wide run %+v steps %+v", done, done.Steps)
	}
	f.e.Must(404, f.a.Org, "GET", api+"/automations/runs/"+r.ID, nil)
	f.e.Must(404, f.a.Org, "POST", api+"/automations/"+x.ID+"/run", nil)

	// A run whose every target is held back fails, saying why.
	f.service().SetMaintenance(holdBack{held: true, one: true, two: true})
	f.e.Must(202, f.a.Partner, "POST", api+"/automations/"+x.ID+"/run", nil).JSON(t, &r)
	if done := f.settle(f.a.Partner, r.ID); done.Status != automations.RunFailed || done.Error == nil || !strings.Contains(*done.Error, "maintenance window") {
		t.Fatalf("a run held back everywhere %+v", done)
	}
}

// An alert an automation's create_alert action asks for is raised on a device that a
// maintenance window suppressing alerts (and not automations) covers: the window's
// suppressAutomations is what holds automations back.
func TestAWindowSuppressingAlertsLetsAnAutomationsAlertThrough(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "held", "linux")
	f.e.StartMaintenance(f.a.Org, f.a.OrgID, map[string]any{"type": "devices", "ids": []string{dev}})
	x := f.create(f.a.Org, manual("Say so", map[string]any{"type": "devices", "ids": []string{dev}}, alertAction("asked for")))
	var r automations.AutomationRun
	f.e.Must(202, f.a.Org, "POST", api+"/automations/"+x.ID+"/run", nil).JSON(t, &r)
	done := f.settle(f.a.Org, r.ID)
	if done.Status != automations.RunCompleted || len(done.Steps) != 1 || done.Steps[0].AlertID == nil {
		t.Fatalf("run %+v steps %+v", done, done.Steps)
	}
	var alert struct {
		Status   string `json:"status"`
		DeviceID string `json:"deviceId"`
	}
	f.e.Must(200, f.a.Org, "GET", api+"/alerts/"+*done.Steps[0].AlertID, nil).JSON(t, &alert)
	if alert.Status != "active" || alert.DeviceID != dev {
		t.Fatalf("alert %+v", alert)
	}
}

// scheduleAutomation makes a schedule automation raising an alert on a device at 03:00 Paris time.
func scheduleAutomation(f fixture) automations.Automation {
	dev := f.device(f.a, "sched-1", "linux")
	return f.create(f.a.Org, map[string]any{"name": "At three",
		"trigger": map[string]any{"type": "schedule", "cron": "0 3 * * *", "timezone": "Europe/Paris"},
		"targets": map[string]any{"type": "devices", "ids": []string{dev}}, "actions": []any{alertAction("three o'clock")}})
}

func runsOf(t *testing.T, f fixture, id string) []automations.AutomationRun {
	var runs struct{ Data []automations.AutomationRun }
	f.e.Must(200, f.a.Org, "GET", api+"/automations/"+id+"/runs", nil).JSON(t, &runs)
	return runs.Data
}

func TestScheduleFiresOnceWithinAMinuteOfItsTime(t *testing.T) {
	// 03:00 in Paris on 25 November is 02:00 UTC.
	clk := clock.NewFake(time.Date(2026, 11, 25, 1, 59, 0, 0, time.UTC))
	f := newFixture(t, apptest.WithClock(clk))
	x := scheduleAutomation(f)
	if want := time.Date(2026, 11, 25, 2, 0, 0, 0, time.UTC); x.NextRunAt == nil || !x.NextRunAt.Equal(want) {
		t.Fatalf("next run %v, want %v", x.NextRunAt, want)
	}
	svc, ctx := f.service(), context.Background()
	if err := svc.RunSchedules(ctx); err != nil || len(runsOf(t, f, x.ID)) != 0 {
		t.Fatalf("before its time: %v, runs %v", err, runsOf(t, f, x.ID))
	}
	clk.Advance(90 * time.Second)
	for range 3 {
		if err := svc.RunSchedules(ctx); err != nil {
			t.Fatal(err)
		}
	}
	runs := runsOf(t, f, x.ID)
	if len(runs) != 1 || runs[0].TriggeredBy != "schedule" || runs[0].ScheduledFor == nil || !runs[0].ScheduledFor.Equal(*x.NextRunAt) {
		t.Fatalf("runs after 03:00 %+v", runs)
	}
	if r := f.settle(f.a.Org, runs[0].ID); r.Status != automations.RunCompleted || len(r.Steps) != 1 || r.Steps[0].AlertID == nil {
		t.Fatalf("scheduled run %+v", r)
	}
	var got automations.Automation
	f.e.Must(200, f.a.Org, "GET", api+"/automations/"+x.ID, nil).JSON(t, &got)
	if want := time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC); got.NextRunAt == nil || !got.NextRunAt.Equal(want) || got.LastRunAt == nil {
		t.Fatalf("after the run: next %v last %v", got.NextRunAt, got.LastRunAt)
	}
	// Nodes down for a day and a half: the missed occurrence is older than the window, skipped.
	clk.Advance(36 * time.Hour)
	if err := svc.RunSchedules(ctx); err != nil || len(runsOf(t, f, x.ID)) != 1 {
		t.Fatalf("a stale occurrence fired: %v %+v", err, runsOf(t, f, x.ID))
	}
	f.e.Must(200, f.a.Org, "GET", api+"/automations/"+x.ID, nil).JSON(t, &got)
	if want := time.Date(2026, 11, 27, 2, 0, 0, 0, time.UTC); got.NextRunAt == nil || !got.NextRunAt.Equal(want) {
		t.Fatalf("next after the skip %v", got.NextRunAt)
	}
	// A late occurrence within the window still fires, once.
	clk.Advance(12*time.Hour + 3*time.Minute)
	if err := svc.RunSchedules(ctx); err != nil || len(runsOf(t, f, x.ID)) != 2 {
		t.Fatalf("a late occurrence within the window: %v %+v", err, runsOf(t, f, x.ID))
	}
}

func TestScheduleRunsOnceWithTwoNodes(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 25, 1, 59, 0, 0, time.UTC))
	f := newFixture(t, apptest.WithClock(clk))
	if f.e.App.DB.Dialect != store.Postgres {
		t.Skip("two nodes share a database on PostgreSQL only")
	}
	second := f.e.SecondNode()
	x := scheduleAutomation(f)
	clk.Advance(90 * time.Second)
	nodes := []*automations.Service{f.service(), app.Service[*automations.Service](second.App)}
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			if err := nodes[i%2].RunSchedules(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if runs := runsOf(t, f, x.ID); len(runs) != 1 {
		t.Fatalf("one occurrence, two nodes: %d runs", len(runs))
	}
}

// dispatch hands the recorded events to their consumers, as the event loop does every second.
func (f fixture) dispatch() {
	f.e.T.Helper()
	if err := f.e.App.Events.RunOnce(context.Background()); err != nil {
		f.e.T.Fatal(err)
	}
}

func TestDeviceOfflineEventTriggersAnAutomation(t *testing.T) {
	f := newFixture(t)
	x := f.create(f.a.Org, map[string]any{"name": "Offline alert",
		"trigger": map[string]any{"type": "event", "eventType": "device.offline", "filter": map[string]any{"orgId": f.a.OrgID}},
		"actions": []any{alertAction("went offline")}})
	// Raising alerts on alert.triggered would feed itself: its own alerts never fire it again.
	loop := f.create(f.a.Org, map[string]any{"name": "Alert on alert",
		"trigger": map[string]any{"type": "event", "eventType": "alert.triggered"}, "actions": []any{alertAction("again")}})
	stale := f.e.InsertDevice(apptest.DeviceRow{PartnerID: f.a.PartnerID, OrgID: f.a.OrgID, SiteID: f.a.SiteID, Hostname: "quiet",
		LastSeen: time.Now().Add(-time.Hour)})
	f.e.InsertDevice(apptest.DeviceRow{PartnerID: f.b.PartnerID, OrgID: f.b.OrgID, SiteID: f.b.SiteID, Hostname: "elsewhere",
		LastSeen: time.Now().Add(-time.Hour)})
	if err := app.Service[*devices.Service](f.e.App).Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.dispatch()
	runs := runsOf(t, f, x.ID)
	if len(runs) != 1 {
		t.Fatalf("runs after device.offline: %+v", runs)
	}
	r := f.settle(f.a.Org, runs[0].ID)
	if r.Status != automations.RunCompleted || r.TriggeredBy != "event" || r.TriggerEventID == nil || len(r.Steps) != 1 ||
		*r.Steps[0].DeviceID != stale || r.Steps[0].AlertID == nil {
		t.Fatalf("event run %+v", r)
	}
	// The offline alert fires the loop automation once; the alert that run raises does not fire it again.
	f.dispatch()
	l := runsOf(t, f, loop.ID)
	if len(l) != 1 {
		t.Fatalf("loop automation runs %+v", l)
	}
	if r := f.settle(f.a.Org, l[0].ID); r.Status != automations.RunCompleted || len(r.Steps) != 1 {
		t.Fatalf("loop run %+v", r)
	}
	f.dispatch()
	if l := runsOf(t, f, loop.ID); len(l) != 1 {
		t.Fatalf("the loop automation ran %d times", len(l))
	}
	if runs := runsOf(t, f, x.ID); len(runs) != 1 {
		t.Fatalf("the offline automation ran %d times (another tenant's device went offline too)", len(runs))
	}
	// Triggered by hand, an event automation takes only a payload its filter lets through.
	if r := f.e.Do(f.a.Org, "POST", api+"/automations/"+x.ID+"/trigger", map[string]any{"payload": map[string]any{"orgId": f.b.OrgID}}); r.Status != 422 ||
		r.ErrorCode() != "TRIGGER_FILTER_MISMATCH" {
		t.Fatalf("trigger with a payload outside the filter = %d %s, want 422 TRIGGER_FILTER_MISMATCH", r.Status, r.Body)
	}
	f.e.Must(202, f.a.Org, "POST", api+"/automations/"+x.ID+"/trigger", map[string]any{"payload": map[string]any{"orgId": f.a.OrgID,
		"deviceId": stale}})
}

// Runs record automation.started and automation.completed, so automations chain: one fires
// when another completed.
func TestRunEventsChainAutomations(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "chain-1", "linux")
	first := f.create(f.a.Org, manual("First", map[string]any{"type": "devices", "ids": []string{dev}}, alertAction("first")))
	then := f.create(f.a.Org, map[string]any{"name": "Then",
		"trigger": map[string]any{"type": "event", "eventType": "automation.completed", "filter": map[string]any{"automationId": first.ID}},
		"actions": []any{alertAction("then")}, "targets": map[string]any{"type": "devices", "ids": []string{dev}}})
	started := f.create(f.a.Org, map[string]any{"name": "On start",
		"trigger": map[string]any{"type": "event", "eventType": "automation.started", "filter": map[string]any{"automationId": first.ID}},
		"actions": []any{alertAction("started")}, "targets": map[string]any{"type": "devices", "ids": []string{dev}}})
	var r automations.AutomationRun
	f.e.Must(202, f.a.Org, "POST", api+"/automations/"+first.ID+"/run", nil).JSON(t, &r)
	if done := f.settle(f.a.Org, r.ID); done.Status != automations.RunCompleted {
		t.Fatalf("first run %+v", done)
	}
	f.dispatch()
	for _, id := range []string{then.ID, started.ID} {
		runs := runsOf(t, f, id)
		if len(runs) != 1 || runs[0].TriggeredBy != "event" || runs[0].Payload["resourceId"] != r.ID {
			t.Fatalf("chained runs of %s: %+v", id, runs)
		}
	}
}

func signedCall(t *testing.T, f fixture, id, secret string, at time.Time, body []byte, signature string) *http.Response {
	ts := strconv.FormatInt(at.UnixMilli(), 10)
	if signature == "" {
		signature = webhooks.Sign(secret, ts, body)
	}
	req, _ := http.NewRequest("POST", f.e.Server.URL+api+"/automations/"+id+"/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gale-Timestamp", ts)
	req.Header.Set("X-Gale-Signature", signature)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func TestWebhookTriggerIsSignedAndReplayProtected(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "hooked", "linux")
	x := f.create(f.a.Org, map[string]any{"name": "Hook", "trigger": map[string]any{"type": "webhook"},
		"targets": map[string]any{"type": "devices", "ids": []string{dev}}, "actions": []any{alertAction("called")}})
	if x.Trigger.Secret == "" || x.Trigger.WebhookURL == "" || x.Trigger.SecretHint != x.Trigger.Secret[len(x.Trigger.Secret)-4:] {
		t.Fatalf("webhook trigger %+v", x.Trigger)
	}
	var again automations.Automation
	f.e.Must(200, f.a.Org, "GET", api+"/automations/"+x.ID, nil).JSON(t, &again)
	if again.Trigger.Secret != "" {
		t.Fatal("the secret is shown again")
	}
	body := []byte(`{"source":"monitor"}`)
	now := time.Now()
	if res := signedCall(t, f, x.ID, "wrong-secret", now, body, ""); res.StatusCode != 401 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("bad signature = %d %s", res.StatusCode, b)
	}
	if res := signedCall(t, f, x.ID, x.Trigger.Secret, now.Add(-6*time.Minute), body, ""); res.StatusCode != 401 {
		t.Fatalf("stale timestamp = %d", res.StatusCode)
	}
	if res := signedCall(t, f, store.NewID(), x.Trigger.Secret, now, body, ""); res.StatusCode != 401 {
		t.Fatalf("no such automation = %d", res.StatusCode)
	}
	res := signedCall(t, f, x.ID, x.Trigger.Secret, now, body, "")
	var r automations.AutomationRun
	if err := json.NewDecoder(res.Body).Decode(&r); res.StatusCode != 202 || err != nil || r.TriggeredBy != "webhook" || r.Payload["source"] != "monitor" {
		t.Fatalf("good call = %d %v %+v", res.StatusCode, err, r)
	}
	if res := signedCall(t, f, x.ID, x.Trigger.Secret, now, body, ""); res.StatusCode != 409 {
		t.Fatalf("replayed call = %d", res.StatusCode)
	}
	if done := f.settle(f.a.Org, r.ID); done.Status != automations.RunCompleted || len(done.Steps) != 1 {
		t.Fatalf("webhook run %+v", done)
	}
	f.e.Must(200, f.a.Org, "PATCH", api+"/automations/"+x.ID, map[string]any{"enabled": false})
	if res := signedCall(t, f, x.ID, x.Trigger.Secret, now.Add(time.Second), body, ""); res.StatusCode != 400 {
		t.Fatalf("disabled = %d", res.StatusCode)
	}
	var rotated automations.Automation
	f.e.Must(200, f.a.Org, "PATCH", api+"/automations/"+x.ID, map[string]any{"enabled": true, "rotateSecret": true}).JSON(t, &rotated)
	if rotated.Trigger.Secret == "" || rotated.Trigger.Secret == x.Trigger.Secret {
		t.Fatalf("rotated %+v", rotated.Trigger)
	}
	if res := signedCall(t, f, x.ID, x.Trigger.Secret, now.Add(2*time.Second), body, ""); res.StatusCode != 401 {
		t.Fatalf("the old secret after rotation = %d", res.StatusCode)
	}
	// The body is a JSON object: anything else is refused once the signature is checked.
	if res := signedCall(t, f, x.ID, rotated.Trigger.Secret, now.Add(3*time.Second), []byte(`[1]`), ""); res.StatusCode != 400 {
		t.Fatalf("a signed array = %d", res.StatusCode)
	}
	if res := signedCall(t, f, x.ID, rotated.Trigger.Secret, now.Add(4*time.Second), []byte(`{}`), ""); res.StatusCode != 202 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("a signed empty object = %d %s", res.StatusCode, b)
	}
	if n, err := f.service().PurgeSignatures(context.Background()); err != nil || n != 0 {
		t.Fatalf("purge of fresh signatures = %d %v", n, err)
	}
}

// LastRuns gives each automation of the caller's scope that ran its latest run; one that
// never ran, and another tenant's, are left out.
func TestLastRuns(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "web-1", "linux")
	theirDev := f.device(f.b, "web-9", "linux")
	x := f.create(f.a.Org, manual("Twice", map[string]any{"type": "devices", "ids": []string{dev}}, alertAction("One")))
	idle := f.create(f.a.Org, manual("Idle", map[string]any{"type": "devices", "ids": []string{dev}}, alertAction("Two")))
	theirs := f.create(f.b.Org, manual("Theirs", map[string]any{"type": "devices", "ids": []string{theirDev}}, alertAction("Three")))
	var first, second, their automations.AutomationRun
	f.e.Must(202, f.a.Org, "POST", api+"/automations/"+x.ID+"/run", nil).JSON(t, &first)
	f.e.Must(202, f.a.Org, "POST", api+"/automations/"+x.ID+"/run", nil).JSON(t, &second)
	f.e.Must(202, f.b.Org, "POST", api+"/automations/"+theirs.ID+"/run", nil).JSON(t, &their)
	ctx := access.WithPrincipal(context.Background(), &access.Principal{Kind: access.ActorUser,
		Scope: access.Scope{Level: access.LevelOrganization, PartnerID: f.a.PartnerID, OrgID: f.a.OrgID}})
	got, err := f.service().LastRuns(ctx, []string{x.ID, idle.ID, theirs.ID, "not-an-id"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[x.ID].ID != second.ID || got[x.ID].AutomationID != x.ID || len(got[x.ID].Steps) != 0 {
		t.Fatalf("last runs %+v, want the second run of %s only", got, x.ID)
	}
}

// The partner API exports the partner's automations, partner-wide ones too, as GET
// /automations shows them (never a webhook's secret): in ID order, paged by cursor, and with
// updatedSince only those changed since, in order of change.
func TestPartnerAPIExportsAutomations(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	wide := f.create(c, map[string]any{"name": "Nightly", "trigger": map[string]any{"type": "schedule", "cron": "0 3 * * *"},
		"targets": map[string]any{"type": "organization"}, "actions": []any{alertAction("nightly")}})
	hook := f.create(c, map[string]any{"name": "Hook", "orgId": f.a.OrgID, "trigger": map[string]any{"type": "webhook"},
		"targets": map[string]any{"type": "organization"}, "actions": []any{alertAction("called")}})
	gone := f.create(c, manual("Gone", map[string]any{"type": "organization"}, alertAction("x")))
	f.e.Must(204, c, "DELETE", api+"/automations/"+gone.ID, nil)
	f.create(f.b.Partner, manual("Bravo's", map[string]any{"type": "organization"}, alertAction("x")))
	id := f.e.Must(201, c, "POST", api+"/partner-service-principals", map[string]any{"name": "export",
		"scopes": []string{"configuration:read"}}).Map(t)["id"].(string)
	key := apptest.Key(f.e.Must(201, c, "POST", api+"/partner-service-principals/"+id+"/keys", map[string]any{"name": "k"}).Map(t)["key"].(string))

	type page struct {
		Data       []automations.Automation
		Pagination struct {
			HasMore bool
			Cursor  string
		}
	}
	var first, second page
	f.e.Must(200, key, "GET", api+"/partner-api/automations?limit=1", nil).JSON(t, &first)
	if len(first.Data) != 1 || first.Data[0].ID != wide.ID || first.Data[0].OrgID != nil || first.Data[0].Trigger.Cron != "0 3 * * *" ||
		!first.Pagination.HasMore {
		t.Fatalf("first page %+v", first)
	}
	r := f.e.Must(200, key, "GET", api+"/partner-api/automations?limit=1&cursor="+first.Pagination.Cursor, nil)
	r.JSON(t, &second)
	if len(second.Data) != 1 || second.Data[0].ID != hook.ID || second.Data[0].Trigger.WebhookURL == "" || second.Pagination.HasMore {
		t.Fatalf("second page %+v", second)
	}
	if strings.Contains(string(r.Body), hook.Trigger.Secret) {
		t.Fatal("the export shows a webhook's secret")
	}
	var up automations.Automation
	f.e.Must(200, c, "PATCH", api+"/automations/"+wide.ID, map[string]any{"description": "at three"}).JSON(t, &up)
	var changed page
	f.e.Must(200, key, "GET", api+"/partner-api/automations?updatedSince="+url.QueryEscape(up.UpdatedAt.Format(time.RFC3339Nano)), nil).JSON(t, &changed)
	if len(changed.Data) != 1 || changed.Data[0].ID != wide.ID || changed.Data[0].Description != "at three" {
		t.Fatalf("changed since the edit: %+v", changed.Data)
	}
	f.e.Must(200, key, "GET", api+"/partner-api/automations?updatedSince=2020-01-01T00:00:00Z", nil).JSON(t, &changed)
	if len(changed.Data) != 2 || changed.Data[0].ID != hook.ID || changed.Data[1].ID != wide.ID {
		t.Fatalf("changed since 2020, in order of change: %+v", changed.Data)
	}
}
