package devices_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"gale/internal/platform/access"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

type commandView struct {
	ID             string `json:"id"`
	Type           string `json:"type"`
	Status         string `json:"status"`
	TimeoutSeconds int    `json:"timeoutSeconds"`
}

func TestCancelCommands(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Alpha")
	other := e.NewTenant(admin, "Beta")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 2)
	dev := enroll(e, key, secret, "web-01")
	sibling := enroll(e, key, secret, "web-02")
	agent := apptest.Caller{Token: dev.AuthToken}
	path := api + "/devices/" + dev.DeviceID + "/commands"
	send := func(body map[string]any) commandView {
		var c commandView
		e.Must(201, ten.Org, "POST", path, body).JSON(t, &c)
		return c
	}
	cancel := func(id string) *apptest.Response { return e.Do(ten.Org, "POST", path+"/"+id+"/cancel", nil) }
	heartbeat := func() []agentproto.Command {
		var out agentproto.HeartbeatResponse
		e.Must(200, agent, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "1.0.0"}).JSON(t, &out)
		return out.Commands
	}
	result := func(id, status string) {
		e.Must(204, agent, "POST", api+"/agents/"+dev.DeviceID+"/commands/"+id+"/result", agentproto.CommandResult{Status: status})
	}
	get := func(id string) commandView {
		var c commandView
		e.Must(200, ten.Org, "GET", path+"/"+id, nil).JSON(t, &c)
		return c
	}

	// A queued command of any kind is cancelled and never goes out; a second cancel is 409.
	script := send(map[string]any{"type": "run_script", "payload": map[string]any{"language": "bash", "script": "ls"}})
	var got commandView
	e.Must(200, ten.Org, "POST", path+"/"+script.ID+"/cancel", nil).JSON(t, &got)
	if got.Status != "cancelled" || get(script.ID).Status != "cancelled" {
		t.Fatalf("cancelled queued command = %+v", got)
	}
	if r := cancel(script.ID); r.Status != 409 || r.ErrorCode() != "CONFLICT" {
		t.Fatalf("second cancel = %d %s, want 409 CONFLICT", r.Status, r.Body)
	}
	if cmds := heartbeat(); len(cmds) != 0 {
		t.Fatalf("a cancelled command went out: %+v", cmds)
	}

	// A completed command is final; a sent inventory refresh cannot be cancelled (CancelRefused).
	inv := send(map[string]any{"type": "refresh_inventory"})
	heartbeat()
	if r := cancel(inv.ID); r.Status != 409 || r.ErrorCode() != "NOT_CANCELLABLE" {
		t.Fatalf("cancel of a sent inventory refresh = %d %s, want 409 NOT_CANCELLABLE", r.Status, r.Body)
	}
	result(inv.ID, agentproto.ResultCompleted)
	if r := cancel(inv.ID); r.Status != 409 || r.ErrorCode() != "CONFLICT" {
		t.Fatalf("cancel of a completed command = %d %s, want 409 CONFLICT", r.Status, r.Body)
	}

	// A sent script ends cancelled at once (CancelStops), the agent is told to stop it, and the
	// result it reports afterwards changes nothing.
	running := send(map[string]any{"type": "run_script", "payload": map[string]any{"language": "bash", "script": "sleep 60"}})
	heartbeat()
	e.Must(200, ten.Org, "POST", path+"/"+running.ID+"/cancel", nil).JSON(t, &got)
	if got.Status != "cancelled" || get(running.ID).Status != "cancelled" {
		t.Fatalf("cancelled sent script = %+v", got)
	}
	stop := heartbeat()
	var cc agentproto.CancelCommand
	if len(stop) != 1 || stop[0].Type != agentproto.CommandCancel || json.Unmarshal(stop[0].Payload, &cc) != nil || cc.CommandID != running.ID {
		t.Fatalf("heartbeat after cancelling a script delivered %+v, want its cancel_command", stop)
	}
	result(running.ID, agentproto.ResultCompleted)
	result(stop[0].ID, agentproto.ResultCompleted)
	if c := get(running.ID); c.Status != "cancelled" {
		t.Errorf("cancelled script after its late result = %+v", c)
	}
	// A command the agent itself reports cancelled (it refused it) ends cancelled.
	refused := send(map[string]any{"type": "run_script", "payload": map[string]any{"language": "bash", "script": "ls"}})
	heartbeat()
	result(refused.ID, agentproto.ResultCancelled)
	if c := get(refused.ID); c.Status != "cancelled" {
		t.Errorf("a command reported cancelled = %+v", c)
	}

	// Another tenant's caller, another device's path and a viewer.
	if r := e.Do(other.Org, "POST", path+"/"+running.ID+"/cancel", nil); r.Status != 404 || r.ErrorCode() != "NOT_FOUND" {
		t.Errorf("another tenant's cancel = %d %s, want 404", r.Status, r.Body)
	}
	if r := e.Do(ten.Org, "POST", api+"/devices/"+sibling.DeviceID+"/commands/"+running.ID+"/cancel", nil); r.Status != 404 || r.ErrorCode() != "NOT_FOUND" {
		t.Errorf("cancel through another device = %d %s, want 404", r.Status, r.Body)
	}
	_, viewer := e.CreateUser("viewer@alpha.test", access.LevelOrganization, ten.PartnerID, ten.OrgID, access.RoleOrgViewer)
	if r := e.Do(viewer, "POST", path+"/"+running.ID+"/cancel", nil); r.Status != 403 {
		t.Errorf("a viewer's cancel = %d, want 403", r.Status)
	}

	// A sent reboot: its timeout counts its delay. Cancelled, it stays sent while the agent
	// gets a cancel_command (CancelConfirmed); the agent's confirmation ends it cancelled.
	reboot := send(map[string]any{"type": "reboot", "payload": map[string]any{"delaySeconds": 3600}})
	if reboot.TimeoutSeconds != 3600+600 {
		t.Errorf("reboot timeout = %d, want the delay plus 600", reboot.TimeoutSeconds)
	}
	if cmds := heartbeat(); len(cmds) != 1 || cmds[0].ID != reboot.ID {
		t.Fatalf("heartbeat delivered %+v, want the reboot", cmds)
	}
	e.Must(200, ten.Org, "POST", path+"/"+reboot.ID+"/cancel", nil).JSON(t, &got)
	if got.Status != "sent" || get(reboot.ID).Status != "sent" {
		t.Fatalf("reboot whose cancellation awaits the agent = %+v, want still sent", got)
	}
	cmds := heartbeat()
	if len(cmds) != 1 || cmds[0].Type != agentproto.CommandCancel {
		t.Fatalf("heartbeat after the cancel delivered %+v, want a cancel_command", cmds)
	}
	if err := json.Unmarshal(cmds[0].Payload, &cc); err != nil || cc.CommandID != reboot.ID {
		t.Fatalf("cancel_command payload = %s", cmds[0].Payload)
	}
	if r := cancel(cmds[0].ID); r.Status != 409 || r.ErrorCode() != "NOT_CANCELLABLE" {
		t.Errorf("cancel of a cancellation = %d %s, want 409", r.Status, r.Body)
	}
	result(cmds[0].ID, agentproto.ResultCompleted)
	if c := get(reboot.ID); c.Status != "cancelled" {
		t.Errorf("reboot after the agent confirmed its cancellation = %+v, want cancelled", c)
	}
	result(reboot.ID, agentproto.ResultCompleted) // a late report changes nothing
	if c := get(reboot.ID); c.Status != "cancelled" {
		t.Errorf("reboot after a late report = %+v, want cancelled", c)
	}
	if c := get(cmds[0].ID); c.Status != "completed" {
		t.Errorf("cancel_command = %+v, want completed", c)
	}

	// Too late: the agent answers the cancel_command failed, and the shutdown ends as what
	// really happened.
	shutdown := send(map[string]any{"type": "shutdown"})
	heartbeat()
	e.Must(200, ten.Org, "POST", path+"/"+shutdown.ID+"/cancel", nil)
	cmds = heartbeat()
	if len(cmds) != 1 || cmds[0].Type != agentproto.CommandCancel {
		t.Fatalf("heartbeat delivered %+v, want a cancel_command", cmds)
	}
	e.Must(204, agent, "POST", api+"/agents/"+dev.DeviceID+"/commands/"+cmds[0].ID+"/result",
		agentproto.CommandResult{Status: agentproto.ResultFailed, Error: "too late: the system took the order"})
	if c := get(shutdown.ID); c.Status != "sent" {
		t.Errorf("shutdown whose cancellation came too late = %+v, want still sent", c)
	}
	result(shutdown.ID, agentproto.ResultCompleted)
	if c := get(shutdown.ID); c.Status != "completed" {
		t.Errorf("shutdown = %+v, want completed", c)
	}

	var audited int
	if err := e.App.DB.SQL.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM audit_logs WHERE action = 'device.command.cancel'
		AND resource_id = $1`, dev.DeviceID).Scan(&audited); err != nil || audited != 4 {
		t.Errorf("cancel audit entries = %d (%v), want 4", audited, err)
	}
}

func TestCancellingASentRebootReachesTheLiveAgent(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	dev := enroll(e, key, secret, "web-01")
	a := connect(t, e, dev.AuthToken)
	path := api + "/devices/" + dev.DeviceID + "/commands"
	var reboot commandView
	e.Must(201, ten.Org, "POST", path, map[string]any{"type": "reboot", "payload": map[string]any{"delaySeconds": 300}}).JSON(t, &reboot)
	var got agentproto.Command
	if err := json.Unmarshal(a.next(agentproto.TypeCommand).Payload, &got); err != nil || got.ID != reboot.ID {
		t.Fatalf("pushed %+v, want the reboot", got)
	}
	e.Must(200, ten.Org, "POST", path+"/"+reboot.ID+"/cancel", nil)
	if err := json.Unmarshal(a.next(agentproto.TypeCommand).Payload, &got); err != nil || got.Type != agentproto.CommandCancel {
		t.Fatalf("pushed %+v, want a cancel_command", got)
	}
	var cc agentproto.CancelCommand
	if err := json.Unmarshal(got.Payload, &cc); err != nil || cc.CommandID != reboot.ID {
		t.Fatalf("cancel_command payload = %s", got.Payload)
	}
}

// A cancellation racing the command's result: exactly one wins. The cancellation that loses
// is a 409 CONFLICT and the command is completed; the result that loses is ignored and the
// command stays cancelled.
func TestACancellationRacingTheResultHasOneWinner(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	dev := enroll(e, key, secret, "web-01")
	agent := apptest.Caller{Token: dev.AuthToken}
	path := api + "/devices/" + dev.DeviceID + "/commands"
	outcomes := map[string]int{}
	for range 12 {
		var c commandView
		e.Must(201, ten.Org, "POST", path, map[string]any{"type": "run_script", "payload": map[string]any{"language": "bash", "script": "ls"}}).JSON(t, &c)
		var hb agentproto.HeartbeatResponse
		e.Must(200, agent, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "1.0.0"}).JSON(t, &hb)
		var wg sync.WaitGroup
		var cancelled, reported *apptest.Response
		wg.Add(2)
		go func() {
			defer wg.Done()
			cancelled = e.Do(ten.Org, "POST", path+"/"+c.ID+"/cancel", nil)
		}()
		go func() {
			defer wg.Done()
			reported = e.Do(agent, "POST", api+"/agents/"+dev.DeviceID+"/commands/"+c.ID+"/result",
				agentproto.CommandResult{Status: agentproto.ResultCompleted})
		}()
		wg.Wait()
		if reported.Status != 204 {
			t.Fatalf("result = %d %s", reported.Status, reported.Body)
		}
		var final commandView
		e.Must(200, ten.Org, "GET", path+"/"+c.ID, nil).JSON(t, &final)
		switch {
		case cancelled.Status == 200 && final.Status == "cancelled":
		case cancelled.Status == 409 && cancelled.ErrorCode() == "CONFLICT" && final.Status == "completed":
		default:
			t.Fatalf("cancel = %d %s, command = %s: not exactly one winner", cancelled.Status, cancelled.Body, final.Status)
		}
		outcomes[final.Status]++
		// Deliver the cancel_command a winning cancellation queued, so the next script is sent.
		e.Must(200, agent, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "1.0.0"})
	}
	t.Logf("outcomes: %v", outcomes)
}
