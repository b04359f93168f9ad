package devices_test

import (
	"testing"

	"gale/internal/domains/devices"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// A script's output that is not text is stored and shown exactly (base64, said so); text with
// a NUL from an older agent is stored without the NUL rather than lost. Both databases.
func TestCommandOutputThatIsNotText(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	dev := enroll(e, key, secret, "web-01")
	agent := apptest.Caller{Token: dev.AuthToken}
	send := func() devices.DeviceCommand {
		var c devices.DeviceCommand
		e.Must(201, ten.Org, "POST", api+"/devices/"+dev.DeviceID+"/commands",
			map[string]any{"type": "run_script", "payload": map[string]any{"language": "sh", "script": "printf 'a\\000b'"}}).JSON(t, &c)
		return c
	}
	read := func(id string) devices.DeviceCommand {
		var c devices.DeviceCommand
		e.Must(200, ten.Org, "GET", api+"/devices/"+dev.DeviceID+"/commands/"+id, nil).JSON(t, &c)
		return c
	}
	c := send()
	e.Must(204, agent, "POST", api+"/agents/"+dev.DeviceID+"/commands/"+c.ID+"/result", agentproto.CommandResult{
		Status: "completed", Stdout: "YQBi", StdoutEncoding: agentproto.OutputBase64, Stderr: "fine"})
	if got := read(c.ID); got.Stdout == nil || *got.Stdout != "YQBi" || got.StdoutEncoding != "base64" ||
		got.Stderr == nil || *got.Stderr != "fine" || got.StderrEncoding != "" {
		t.Fatalf("binary output stored as %+v", got)
	}
	c = send()
	e.Must(204, agent, "POST", api+"/agents/"+dev.DeviceID+"/commands/"+c.ID+"/result", agentproto.CommandResult{
		Status: "completed", Stdout: "a\x00b"})
	if got := read(c.ID); got.Stdout == nil || *got.Stdout != "ab" || got.StdoutEncoding != "" {
		t.Fatalf("an older agent's NUL text stored as %+v", got)
	}
}
