package devices_test

import (
	"context"
	"encoding/json"
	"testing"

	"gale/internal/access"
	"gale/internal/agentproto"
	"gale/internal/apptest"
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

	// A completed command is final; a sent script is already running.
	inv := send(map[string]any{"type": "refresh_inventory"})
	heartbeat()
	result(inv.ID, agentproto.ResultCompleted)
	if r := cancel(inv.ID); r.Status != 409 || r.ErrorCode() != "CONFLICT" {
		t.Fatalf("cancel of a completed command = %d %s, want 409 CONFLICT", r.Status, r.Body)
	}
	running := send(map[string]any{"type": "run_script", "payload": map[string]any{"language": "bash", "script": "sleep 60"}})
	heartbeat()
	if r := cancel(running.ID); r.Status != 409 || r.ErrorCode() != "NOT_CANCELLABLE" {
		t.Fatalf("cancel of a sent script = %d %s, want 409 NOT_CANCELLABLE", r.Status, r.Body)
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

	// A sent reboot: its timeout counts its delay; cancelled, the agent gets a cancel_command.
	reboot := send(map[string]any{"type": "reboot", "payload": map[string]any{"delaySeconds": 3600}})
	if reboot.TimeoutSeconds != 3600+600 {
		t.Errorf("reboot timeout = %d, want the delay plus 600", reboot.TimeoutSeconds)
	}
	if cmds := heartbeat(); len(cmds) != 1 || cmds[0].ID != reboot.ID {
		t.Fatalf("heartbeat delivered %+v, want the reboot", cmds)
	}
	e.Must(200, ten.Org, "POST", path+"/"+reboot.ID+"/cancel", nil).JSON(t, &got)
	if got.Status != "cancelled" {
		t.Fatalf("cancelled reboot = %+v", got)
	}
	cmds := heartbeat()
	if len(cmds) != 1 || cmds[0].Type != agentproto.CommandCancel {
		t.Fatalf("heartbeat after the cancel delivered %+v, want a cancel_command", cmds)
	}
	var cc agentproto.CancelCommand
	if err := json.Unmarshal(cmds[0].Payload, &cc); err != nil || cc.CommandID != reboot.ID {
		t.Fatalf("cancel_command payload = %s", cmds[0].Payload)
	}
	if r := cancel(cmds[0].ID); r.Status != 409 || r.ErrorCode() != "NOT_CANCELLABLE" {
		t.Errorf("cancel of a cancellation = %d %s, want 409", r.Status, r.Body)
	}
	result(cmds[0].ID, agentproto.ResultCompleted)
	result(reboot.ID, agentproto.ResultCompleted) // a late report changes nothing
	if c := get(reboot.ID); c.Status != "cancelled" {
		t.Errorf("reboot after a late report = %+v, want cancelled", c)
	}
	if c := get(cmds[0].ID); c.Status != "completed" {
		t.Errorf("cancel_command = %+v, want completed", c)
	}

	var audited int
	if err := e.App.DB.SQL.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM audit_logs WHERE action = 'device.command.cancel'
		AND resource_id = $1`, dev.DeviceID).Scan(&audited); err != nil || audited != 2 {
		t.Errorf("cancel audit entries = %d (%v), want 2", audited, err)
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
