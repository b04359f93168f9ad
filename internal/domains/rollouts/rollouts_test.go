package rollouts_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/rollouts"
	"gale/internal/domains/scripts"
	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

var scriptSeq atomic.Int32

type fixture struct {
	e   *apptest.Env
	a   apptest.Tenant
	b   apptest.Tenant
	clk *clock.Fake
}

func newFixture(t *testing.T) fixture {
	clk := clock.NewFake(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	e := apptest.New(t, apptest.WithClock(clk))
	admin := e.Admin()
	return fixture{e: e, a: e.NewTenant(admin, "Alpha"), b: e.NewTenant(admin, "Bravo"), clk: clk}
}

func (f fixture) devices(ten apptest.Tenant, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = f.e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID,
			Hostname: fmt.Sprintf("host-%02d", i), OSType: "linux", OSName: "linux"})
	}
	return out
}

func (f fixture) script(ten apptest.Tenant) string {
	f.e.T.Helper()
	var sc scripts.Script
	f.e.Must(201, ten.Partner, "POST", api+"/scripts", map[string]any{"name": "Hello " + strconv.Itoa(int(scriptSeq.Add(1))), "orgId": ten.OrgID, "osTypes": []string{"linux"},
		"language": "sh", "content": "echo hello"}).JSON(f.e.T, &sc)
	return sc.ID
}

func (f fixture) service() *rollouts.Service { return app.Service[*rollouts.Service](f.e.App) }

func body(ten apptest.Tenant, scriptID string, targets map[string]any, more map[string]any) map[string]any {
	b := map[string]any{"name": "Roll", "orgId": ten.OrgID, "payload": map[string]any{"type": "script", "scriptId": scriptID},
		"targets": targets}
	for k, v := range more {
		b[k] = v
	}
	return b
}

func devicesTarget(ids []string) map[string]any { return map[string]any{"type": "devices", "ids": ids} }

func (f fixture) create(c apptest.Caller, b map[string]any) rollouts.Deployment {
	f.e.T.Helper()
	var x rollouts.Deployment
	f.e.Must(201, c, "POST", api+"/deployments", b).JSON(f.e.T, &x)
	return x
}

func (f fixture) post(c apptest.Caller, id, action string) rollouts.Deployment {
	f.e.T.Helper()
	var x rollouts.Deployment
	f.e.Must(200, c, "POST", api+"/deployments/"+id+"/"+action, nil).JSON(f.e.T, &x)
	return x
}

func (f fixture) get(id string) rollouts.Deployment {
	f.e.T.Helper()
	var x rollouts.Deployment
	f.e.Must(200, f.a.Partner, "GET", api+"/deployments/"+id, nil).JSON(f.e.T, &x)
	return x
}

// rows lists a deployment's devices (of one batch when batch > 0) by device ID.
func (f fixture) rows(id string, batch int) map[string]rollouts.DeploymentDevice {
	f.e.T.Helper()
	var list struct{ Data []rollouts.DeploymentDevice }
	f.e.Must(200, f.a.Partner, "GET", fmt.Sprintf("%s/deployments/%s/devices?batch=%d&limit=500", api, id, batch), nil).JSON(f.e.T, &list)
	out := map[string]rollouts.DeploymentDevice{}
	for _, d := range list.Data {
		out[d.DeviceID] = d
	}
	return out
}

func (f fixture) advance() {
	f.e.T.Helper()
	if err := f.service().AdvanceAll(context.Background()); err != nil {
		f.e.T.Fatal(err)
	}
}

// finish records an agent's result of a deployment device's command.
func (f fixture) finish(d rollouts.DeploymentDevice, ok bool) {
	f.e.T.Helper()
	if d.CommandID == nil {
		f.e.T.Fatalf("device %s has no command (%s)", d.DeviceID, d.Status)
	}
	status, exit := agentproto.ResultCompleted, 0
	if !ok {
		status, exit = agentproto.ResultFailed, 3
	}
	err := app.Service[*devices.Service](f.e.App).RecordResult(context.Background(), devices.Agent{DeviceID: d.DeviceID,
		PartnerID: f.a.PartnerID, OrgID: f.a.OrgID, Role: "agent"}, agentproto.CommandResult{CommandID: *d.CommandID, Status: status, ExitCode: &exit})
	if err != nil {
		f.e.T.Fatal(err)
	}
}

func (f fixture) eventCount(typ, id string) int {
	f.e.T.Helper()
	var n int
	if err := f.e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM events WHERE type = $1 AND resource_id = $2`, typ, id).Scan(&n); err != nil {
		f.e.T.Fatal(err)
	}
	return n
}

func (f fixture) commandStatus(deviceID, commandID string) string {
	f.e.T.Helper()
	var c devices.DeviceCommand
	f.e.Must(200, f.a.Partner, "GET", api+"/devices/"+deviceID+"/commands/"+commandID, nil).JSON(f.e.T, &c)
	return c.Status
}

func wantCode(t *testing.T, r *apptest.Response, status int, code string) {
	t.Helper()
	if r.Status != status || r.ErrorCode() != code {
		t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, status, code)
	}
}

func TestDeploymentsRoutesValidationAndTenancy(t *testing.T) {
	f := newFixture(t)
	devs := f.devices(f.a, 3)
	scriptID, otherScript := f.script(f.a), f.script(f.b)
	c := f.a.Partner
	x := f.create(c, body(f.a, scriptID, devicesTarget(devs), map[string]any{"description": "first line\nsecond line"}))
	if x.Status != rollouts.StatusDraft || x.OrgID != f.a.OrgID || x.Strategy.Mode != "immediate" || x.Retry.MaxAttempts != 1 ||
		x.Retry.BackoffMinutes != 5 || !x.RespectMaintenanceWindows || x.Totals.Devices != 0 || !bytes.Contains(x.Payload, []byte(scriptID)) {
		t.Fatalf("created %+v", x)
	}
	var got rollouts.Deployment
	f.e.Must(200, f.a.Org, "GET", api+"/deployments/"+x.ID, nil).JSON(t, &got)
	if got.Name != "Roll" || got.Description != "first line\nsecond line" {
		t.Fatalf("read back %+v", got)
	}
	f.e.Must(200, c, "PATCH", api+"/deployments/"+x.ID, map[string]any{"name": "Roll out", "strategy": map[string]any{"mode": "staggered",
		"batchSize": 2, "delayMinutes": 0}, "respectMaintenanceWindows": false}).JSON(t, &got)
	if got.Name != "Roll out" || got.Strategy.BatchSize != 2 || got.RespectMaintenanceWindows || got.Description != x.Description {
		t.Fatalf("patched %+v", got)
	}
	var list struct{ Data []rollouts.Deployment }
	f.e.Must(200, c, "GET", api+"/deployments?status=draft", nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != x.ID {
		t.Fatalf("list %+v", list.Data)
	}

	for name, tc := range map[string]struct {
		body  map[string]any
		field string
	}{
		"no orgId":          {map[string]any{"name": "x", "payload": map[string]any{"type": "script", "scriptId": scriptID}, "targets": devicesTarget(devs)}, "orgId"},
		"unknown payload":   {body(f.a, scriptID, devicesTarget(devs), map[string]any{"payload": map[string]any{"type": "firmware"}}), "payload.type"},
		"foreign script":    {body(f.a, otherScript, devicesTarget(devs), nil), "payload.scriptId"},
		"extra field":       {body(f.a, scriptID, devicesTarget(devs), map[string]any{"payload": map[string]any{"type": "script", "scriptId": scriptID, "color": "red"}}), "payload"},
		"bad runAs":         {body(f.a, scriptID, devicesTarget(devs), map[string]any{"payload": map[string]any{"type": "script", "scriptId": scriptID, "runAs": "root"}}), "payload.runAs"},
		"no batch size":     {body(f.a, scriptID, devicesTarget(devs), map[string]any{"strategy": map[string]any{"mode": "staggered"}}), "strategy.batchSize"},
		"batch too big":     {body(f.a, scriptID, devicesTarget(devs), map[string]any{"strategy": map[string]any{"mode": "staggered", "batchSize": 1001}}), "strategy.batchSize"},
		"percent over 100":  {body(f.a, scriptID, devicesTarget(devs), map[string]any{"strategy": map[string]any{"mode": "immediate", "pauseOnFailurePercent": 101}}), "strategy.pauseOnFailurePercent"},
		"too many attempts": {body(f.a, scriptID, devicesTarget(devs), map[string]any{"retry": map[string]any{"maxAttempts": 6, "backoffMinutes": 1}}), "retry.maxAttempts"},
		"no group ids":      {body(f.a, scriptID, map[string]any{"type": "groups"}, nil), "targets.ids"},
		"other org":         {body(f.a, scriptID, map[string]any{"type": "organization", "ids": []string{f.b.OrgID}}, nil), "targets.ids"},
	} {
		r := f.e.Do(c, "POST", api+"/deployments", tc.body)
		if r.Status != 400 || !bytes.Contains(r.Body, []byte(`"field":"`+tc.field+`"`)) {
			t.Errorf("%s: %d %s, want 400 on %s", name, r.Status, r.Body, tc.field)
		}
	}
	// An organization out of reach is refused like a missing one.
	if r := f.e.Do(c, "POST", api+"/deployments", body(f.b, scriptID, devicesTarget(devs), nil)); r.Status != 400 {
		t.Fatalf("another tenant's organization = %d %s", r.Status, r.Body)
	}

	// Another tenant, and another organization of the same partner, see nothing of it: every
	// route answers as for a missing deployment.
	other := f.b.Partner
	sibling := f.e.CreateOrg(f.e.Admin(), f.a.PartnerID, "Alpha Sibling")
	_, siblingAdmin := f.e.CreateUser("sibling@gale.test", access.LevelOrganization, f.a.PartnerID, sibling, "")
	for _, caller := range []apptest.Caller{other, siblingAdmin} {
		for _, rt := range []struct{ method, path string }{{"GET", ""}, {"PATCH", ""}, {"DELETE", ""}, {"POST", "/initialize"},
			{"POST", "/start"}, {"POST", "/pause"}, {"POST", "/resume"}, {"POST", "/cancel"}, {"GET", "/devices"},
			{"POST", "/devices/" + devs[0] + "/retry"}} {
			var b any
			if rt.method == "PATCH" {
				b = map[string]any{"name": "mine"}
			}
			if r := f.e.Do(caller, rt.method, api+"/deployments/"+x.ID+rt.path, b); r.Status != 404 {
				t.Errorf("%s %s by another tenant = %d %s, want 404", rt.method, rt.path, r.Status, r.Body)
			}
		}
	}
	f.e.Must(200, other, "GET", api+"/deployments", nil).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("another tenant lists %+v", list.Data)
	}

	// The state machine: only the transitions of the current state.
	for _, action := range []string{"start", "pause", "resume"} {
		wantCode(t, f.e.Do(c, "POST", api+"/deployments/"+x.ID+"/"+action, nil), 409, rollouts.CodeStateConflict)
	}
	x = f.post(c, x.ID, "initialize")
	if x.Status != rollouts.StatusPending || x.Totals.Devices != 3 || x.Totals.Pending != 3 || x.BatchCount != 2 {
		t.Fatalf("initialized %+v", x)
	}
	wantCode(t, f.e.Do(c, "PATCH", api+"/deployments/"+x.ID, map[string]any{"name": "late"}), 409, rollouts.CodeNotDraft)
	wantCode(t, f.e.Do(c, "POST", api+"/deployments/"+x.ID+"/initialize", nil), 409, rollouts.CodeStateConflict)
	wantCode(t, f.e.Do(c, "DELETE", api+"/deployments/"+x.ID, nil), 409, rollouts.CodeStateConflict)
	x = f.post(c, x.ID, "start")
	if x.Status != rollouts.StatusRunning || x.CurrentBatch != 1 || x.Totals.Queued != 2 || x.Totals.Pending != 1 || x.StartedAt == nil ||
		f.eventCount(rollouts.EventStarted, x.ID) != 1 {
		t.Fatalf("started %+v", x)
	}
	wantCode(t, f.e.Do(c, "POST", api+"/deployments/"+x.ID+"/start", nil), 409, rollouts.CodeStateConflict)
	wantCode(t, f.e.Do(c, "POST", api+"/deployments/"+x.ID+"/resume", nil), 409, rollouts.CodeStateConflict)
	wantCode(t, f.e.Do(c, "DELETE", api+"/deployments/"+x.ID, nil), 409, rollouts.CodeStateConflict)
	batch1 := f.rows(x.ID, 1)
	var queued rollouts.DeploymentDevice
	for _, d := range batch1 {
		queued = d
	}
	wantCode(t, f.e.Do(c, "POST", api+"/deployments/"+x.ID+"/devices/"+queued.DeviceID+"/retry", nil), 409, rollouts.CodeDeviceNotFail)
	f.e.Must(404, c, "POST", api+"/deployments/"+x.ID+"/devices/"+f.devices(f.a, 1)[0]+"/retry", nil)
	x = f.post(c, x.ID, "pause")
	if x.Status != rollouts.StatusPaused || x.PauseReason == nil || f.eventCount(rollouts.EventPaused, x.ID) != 1 {
		t.Fatalf("paused %+v", x)
	}
	wantCode(t, f.e.Do(c, "POST", api+"/deployments/"+x.ID+"/pause", nil), 409, rollouts.CodeStateConflict)

	// Cancelling cancels the commands still queued and the devices not sent yet; a command
	// the agent already has runs to its end.
	var sent, unsent rollouts.DeploymentDevice
	for _, d := range batch1 {
		sent, unsent = unsent, d
	}
	if _, err := app.Service[*devices.Service](f.e.App).TakeQueued(context.Background(), sent.DeviceID); err != nil {
		t.Fatal(err)
	}
	x = f.post(c, x.ID, "cancel")
	if x.Status != rollouts.StatusCancelled || x.Totals.Cancelled != 2 || x.CompletedAt == nil || f.eventCount(rollouts.EventCancelled, x.ID) != 1 {
		t.Fatalf("cancelled %+v", x)
	}
	if st := f.commandStatus(unsent.DeviceID, *unsent.CommandID); st != devices.CommandCancelled {
		t.Fatalf("queued command of a cancelled deployment is %s", st)
	}
	if st := f.commandStatus(sent.DeviceID, *sent.CommandID); st != devices.CommandSent {
		t.Fatalf("sent command of a cancelled deployment is %s", st)
	}
	f.advance()
	if d := f.rows(x.ID, 1)[sent.DeviceID]; d.Status != rollouts.DeviceRunning {
		t.Fatalf("device whose command the agent has %+v", d)
	}
	f.finish(sent, true)
	if x = f.get(x.ID); x.Status != rollouts.StatusCancelled || x.Totals.Succeeded != 1 || x.Totals.Cancelled != 2 {
		t.Fatalf("after the sent command ended %+v", x)
	}
	wantCode(t, f.e.Do(c, "POST", api+"/deployments/"+x.ID+"/cancel", nil), 409, rollouts.CodeStateConflict)
	f.e.Must(204, c, "DELETE", api+"/deployments/"+x.ID, nil)
	f.e.Must(404, c, "GET", api+"/deployments/"+x.ID, nil)

	// Targets that name no device cannot be initialized; a draft can be deleted.
	empty := f.create(c, body(f.a, scriptID, map[string]any{"type": "sites", "ids": []string{f.b.SiteID}}, nil))
	wantCode(t, f.e.Do(c, "POST", api+"/deployments/"+empty.ID+"/initialize", nil), 422, rollouts.CodeNoDevices)
	f.e.Must(204, c, "DELETE", api+"/deployments/"+empty.ID, nil)

	// Delivering a script needs scripts:execute besides configuration:write.
	var role struct {
		ID string `json:"id"`
	}
	f.e.Must(201, f.e.Admin(), "POST", api+"/roles", map[string]any{"name": "Config only", "scope": "partner", "partnerId": f.a.PartnerID,
		"permissions": []string{"configuration:read", "configuration:write", "scripts:read", "devices:read"}}).JSON(t, &role)
	_, cfgOnly := f.e.CreateUser("config@gale.test", access.LevelPartner, f.a.PartnerID, "", role.ID)
	y := f.create(cfgOnly, body(f.a, scriptID, map[string]any{"type": "organization"}, nil))
	y = f.post(cfgOnly, y.ID, "initialize")
	if y.Totals.Devices != 4 {
		t.Fatalf("organization target resolved %d devices, want 4", y.Totals.Devices)
	}
	if r := f.e.Do(cfgOnly, "POST", api+"/deployments/"+y.ID+"/start", nil); r.Status != 403 {
		t.Fatalf("start without scripts:execute = %d %s", r.Status, r.Body)
	}
	f.post(c, y.ID, "start")
}

func TestConcurrentStartHasOneWinner(t *testing.T) {
	f := newFixture(t)
	x := f.create(f.a.Partner, body(f.a, f.script(f.a), devicesTarget(f.devices(f.a, 2)), nil))
	f.post(f.a.Partner, x.ID, "initialize")
	const n = 20
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := f.e.Do(f.a.Partner, "POST", api+"/deployments/"+x.ID+"/start", nil)
			if r.Status == 409 && r.ErrorCode() != rollouts.CodeStateConflict {
				t.Errorf("409 with %s", r.Body)
			}
			statuses <- r.Status
		}()
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[200] != 1 || count[409] != n-1 {
		t.Fatalf("statuses %v, want one 200 and %d 409", count, n-1)
	}
	if x = f.get(x.ID); x.Totals.Queued != 2 || f.eventCount(rollouts.EventStarted, x.ID) != 1 {
		t.Fatalf("after the race %+v", x)
	}
}

func TestStaggeredRolloutPausesOnFailuresAndResumes(t *testing.T) {
	f := newFixture(t)
	devs := f.devices(f.a, 10)
	c := f.a.Partner
	x := f.create(c, body(f.a, f.script(f.a), map[string]any{"type": "organization"}, map[string]any{
		"strategy": map[string]any{"mode": "staggered", "batchSize": 3, "delayMinutes": 10, "pauseOnFailures": 2}}))
	x = f.post(c, x.ID, "initialize")
	if x.BatchCount != 4 || x.Totals.Devices != len(devs) {
		t.Fatalf("initialized %+v", x)
	}
	x = f.post(c, x.ID, "start")
	batch1 := f.rows(x.ID, 1)
	if len(batch1) != 3 || x.Totals.Queued != 3 || x.Totals.Pending != 7 {
		t.Fatalf("batch 1 %+v, totals %+v", batch1, x.Totals)
	}
	var failed []string
	for _, d := range batch1 {
		ok := len(failed) == 2
		if !ok {
			failed = append(failed, d.DeviceID)
		}
		f.finish(d, ok)
	}
	f.advance()
	x = f.get(x.ID)
	if x.Status != rollouts.StatusPaused || x.PauseReason == nil || !strings.Contains(*x.PauseReason, "2 of 3 devices of batch 1 failed") ||
		x.Totals.Failed != 2 || x.Totals.Succeeded != 1 || f.eventCount(rollouts.EventPaused, x.ID) != 1 {
		t.Fatalf("after batch 1 %+v", x)
	}
	if got := f.rows(x.ID, 1)[failed[0]]; got.Error == nil || !strings.Contains(*got.Error, "exit code 3") || got.Attempts != 1 {
		t.Fatalf("failed device %+v", got)
	}
	f.advance()
	if x = f.get(x.ID); x.Status != rollouts.StatusPaused || x.Totals.Pending != 7 {
		t.Fatalf("a paused deployment moved on: %+v", x)
	}

	// Resuming sends batch 2 at once: batch 1 is not counted again.
	x = f.post(c, x.ID, "resume")
	batch2 := f.rows(x.ID, 2)
	if x.Status != rollouts.StatusRunning || x.CurrentBatch != 2 || x.PauseReason != nil {
		t.Fatalf("resumed %+v", x)
	}
	for _, d := range batch2 {
		if d.Status != rollouts.DeviceQueued || d.CommandID == nil {
			t.Fatalf("batch 2 device %+v", d)
		}
	}
	// A failed device of batch 1 is retried by hand, with a new command.
	var retried rollouts.DeploymentDevice
	f.e.Must(200, c, "POST", api+"/deployments/"+x.ID+"/devices/"+failed[0]+"/retry", nil).JSON(t, &retried)
	if retried.Status != rollouts.DeviceQueued || retried.Attempts != 2 || *retried.CommandID == *batch1[failed[0]].CommandID {
		t.Fatalf("retried %+v", retried)
	}
	f.finish(retried, true)
	for _, d := range batch2 {
		f.finish(d, true)
	}
	f.advance()
	// Batch 3 waits for the delay.
	if x = f.get(x.ID); x.CurrentBatch != 2 || x.NextBatchAt == nil || x.NextBatchAt.Sub(f.clk.Now()) < 9*time.Minute {
		t.Fatalf("after batch 2 %+v", x)
	}
	f.clk.Advance(10 * time.Minute)
	f.advance()
	x = f.get(x.ID)
	batch3 := f.rows(x.ID, 3)
	if x.CurrentBatch != 3 || len(batch3) != 3 {
		t.Fatalf("batch 3 %+v %+v", x, batch3)
	}
	for _, d := range batch3 {
		f.finish(d, true)
	}
	f.advance()
	f.clk.Advance(10 * time.Minute)
	f.advance()
	batch4 := f.rows(x.ID, 4)
	if len(batch4) != 1 {
		t.Fatalf("batch 4 %+v", batch4)
	}
	for _, d := range batch4 {
		f.finish(d, true)
	}
	f.advance()
	// One device of batch 1 failed for good: the deployment failed.
	x = f.get(x.ID)
	if x.Status != rollouts.StatusFailed || x.Totals.Failed != 1 || x.Totals.Succeeded != 9 || x.CompletedAt == nil ||
		f.eventCount(rollouts.EventFailed, x.ID) != 1 {
		t.Fatalf("ended %+v", x)
	}
	// Retrying its failed device runs it again; once the device succeeded it completed.
	f.e.Must(200, c, "POST", api+"/deployments/"+x.ID+"/devices/"+failed[1]+"/retry", nil).JSON(t, &retried)
	if x = f.get(x.ID); x.Status != rollouts.StatusRunning || x.CompletedAt != nil {
		t.Fatalf("a failed deployment retrying a device %+v", x)
	}
	f.finish(retried, true)
	f.advance()
	if x = f.get(x.ID); x.Status != rollouts.StatusCompleted || x.Totals.Succeeded != 10 || f.eventCount(rollouts.EventCompleted, x.ID) != 1 {
		t.Fatalf("after the retry %+v", x)
	}
	wantCode(t, f.e.Do(c, "POST", api+"/deployments/"+x.ID+"/devices/"+failed[1]+"/retry", nil), 409, rollouts.CodeDeviceNotFail)
}

func TestFailedDevicesAreRetriedAfterBackoff(t *testing.T) {
	f := newFixture(t)
	devs := f.devices(f.a, 2)
	c := f.a.Partner
	x := f.create(c, body(f.a, f.script(f.a), devicesTarget(devs), map[string]any{"retry": map[string]any{"maxAttempts": 2, "backoffMinutes": 5}}))
	f.post(c, x.ID, "initialize")
	f.post(c, x.ID, "start")
	first := f.rows(x.ID, 0)
	f.finish(first[devs[0]], false)
	f.finish(first[devs[1]], true)
	f.advance()
	f.clk.Advance(4 * time.Minute)
	f.advance()
	if d := f.rows(x.ID, 0)[devs[0]]; d.Status != rollouts.DeviceFailed || d.Attempts != 1 {
		t.Fatalf("retried before the backoff: %+v", d)
	}
	if x = f.get(x.ID); x.Status != rollouts.StatusRunning {
		t.Fatalf("ended with a retry left: %+v", x)
	}
	f.clk.Advance(time.Minute)
	f.advance()
	again := f.rows(x.ID, 0)[devs[0]]
	if again.Status != rollouts.DeviceQueued || again.Attempts != 2 || *again.CommandID == *first[devs[0]].CommandID {
		t.Fatalf("after the backoff %+v", again)
	}
	f.finish(again, false)
	f.clk.Advance(time.Hour)
	f.advance()
	if x = f.get(x.ID); x.Status != rollouts.StatusFailed || x.Totals.Failed != 1 || x.Totals.Succeeded != 1 {
		t.Fatalf("after the last attempt %+v", x)
	}
	if d := f.rows(x.ID, 0)[devs[0]]; d.Attempts != 2 {
		t.Fatalf("attempted %d times", d.Attempts)
	}
}

func TestTimedOutCommandFailsItsDevice(t *testing.T) {
	f := newFixture(t)
	devs := f.devices(f.a, 1)
	x := f.create(f.a.Partner, body(f.a, f.script(f.a), devicesTarget(devs), nil))
	f.post(f.a.Partner, x.ID, "initialize")
	f.post(f.a.Partner, x.ID, "start")
	d := f.rows(x.ID, 0)[devs[0]]
	// The command ends without a result (as the sweep times it out): the runner sees it.
	if _, err := f.e.App.DB.SQL.Exec(`UPDATE device_commands SET status = $1 WHERE id = $2`, devices.CommandTimedOut, *d.CommandID); err != nil {
		t.Fatal(err)
	}
	f.advance()
	if x = f.get(x.ID); x.Status != rollouts.StatusFailed {
		t.Fatalf("after a time-out %+v", x)
	}
	if d = f.rows(x.ID, 0)[devs[0]]; d.Status != rollouts.DeviceFailed || d.Error == nil || *d.Error != devices.CommandTimedOut {
		t.Fatalf("timed-out device %+v", d)
	}
}

func TestMaintenanceHoldKeepsDevicesWaiting(t *testing.T) {
	f := newFixture(t)
	devs := f.devices(f.a, 2)
	c := f.a.Partner
	var mu sync.Mutex
	holding := map[string]bool{devs[0]: true}
	f.service().SetHold(func(ctx context.Context, tx *sql.Tx, _ string, ids []string) (map[string]bool, error) {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]bool{}
		for _, id := range ids {
			out[id] = holding[id]
		}
		return out, nil
	})
	x := f.create(c, body(f.a, f.script(f.a), devicesTarget(devs), nil))
	f.post(c, x.ID, "initialize")
	x = f.post(c, x.ID, "start")
	rows := f.rows(x.ID, 0)
	if rows[devs[0]].Status != rollouts.DeviceWaiting || rows[devs[0]].CommandID != nil || rows[devs[1]].Status != rollouts.DeviceQueued {
		t.Fatalf("held devices %+v", rows)
	}
	f.finish(rows[devs[1]], true)
	f.advance()
	if x = f.get(x.ID); x.Status != rollouts.StatusRunning || x.Totals.Waiting != 1 {
		t.Fatalf("while held %+v", x)
	}
	mu.Lock()
	holding = map[string]bool{}
	mu.Unlock()
	f.advance()
	released := f.rows(x.ID, 0)[devs[0]]
	if released.Status != rollouts.DeviceQueued || released.CommandID == nil || released.Attempts != 1 {
		t.Fatalf("released %+v", released)
	}
	f.finish(released, true)
	f.advance()
	if x = f.get(x.ID); x.Status != rollouts.StatusCompleted {
		t.Fatalf("after the window %+v", x)
	}

	// A deployment that ignores maintenance windows sends to held devices at once.
	mu.Lock()
	holding = map[string]bool{devs[0]: true}
	mu.Unlock()
	y := f.create(c, body(f.a, f.script(f.a), devicesTarget(devs), map[string]any{"respectMaintenanceWindows": false}))
	f.post(c, y.ID, "initialize")
	if y = f.post(c, y.ID, "start"); y.Totals.Queued != 2 {
		t.Fatalf("ignoring windows %+v", y.Totals)
	}
}

func TestFailurePercentPausesTheLastBatch(t *testing.T) {
	f := newFixture(t)
	devs := f.devices(f.a, 4)
	c := f.a.Partner
	x := f.create(c, body(f.a, f.script(f.a), devicesTarget(devs), map[string]any{"strategy": map[string]any{"mode": "immediate",
		"pauseOnFailurePercent": 50}}))
	f.post(c, x.ID, "initialize")
	f.post(c, x.ID, "start")
	rows := f.rows(x.ID, 0)
	f.finish(rows[devs[0]], false)
	f.finish(rows[devs[1]], true)
	f.finish(rows[devs[2]], true)
	f.advance()
	if x = f.get(x.ID); x.Status != rollouts.StatusRunning {
		t.Fatalf("settled before its last device ended: %+v", x)
	}
	f.finish(rows[devs[3]], false)
	f.advance()
	if x = f.get(x.ID); x.Status != rollouts.StatusPaused || x.PauseReason == nil || !strings.Contains(*x.PauseReason, "2 of 4") {
		t.Fatalf("2 of 4 failed with a 50%% threshold: %+v", x)
	}
	// Resumed after its only batch, it ends: failed, as devices failed.
	if x = f.post(c, x.ID, "resume"); x.Status != rollouts.StatusFailed || f.eventCount(rollouts.EventFailed, x.ID) != 1 {
		t.Fatalf("resumed after the last batch %+v", x)
	}
	wantCode(t, f.e.Do(c, "POST", api+"/deployments/"+x.ID+"/pause", nil), 409, rollouts.CodeStateConflict)
	f.e.Must(204, c, "DELETE", api+"/deployments/"+x.ID, nil)
}

func TestUndeliverablePayloadFailsTheBatch(t *testing.T) {
	f := newFixture(t)
	devs := f.devices(f.a, 2)
	c := f.a.Partner
	scriptID := f.script(f.a)
	x := f.create(c, body(f.a, scriptID, devicesTarget(devs), map[string]any{"strategy": map[string]any{"mode": "staggered", "batchSize": 1}}))
	f.post(c, x.ID, "initialize")
	f.post(c, x.ID, "start")
	for _, d := range f.rows(x.ID, 1) {
		f.finish(d, true)
	}
	// The script is deleted before the second batch goes out: its device fails, with why.
	f.e.Must(204, c, "DELETE", api+"/scripts/"+scriptID, nil)
	f.advance()
	x = f.get(x.ID)
	if x.Status != rollouts.StatusFailed || x.Totals.Failed != 1 || x.Totals.Succeeded != 1 {
		t.Fatalf("after the script went %+v", x)
	}
	for _, d := range f.rows(x.ID, 2) {
		if d.Status != rollouts.DeviceFailed || d.Attempts != 1 || d.CommandID != nil || d.Error == nil || !strings.Contains(*d.Error, "NOT_FOUND") {
			t.Fatalf("device of the undeliverable batch %+v", d)
		}
	}
}
