package devices_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// TestAgentStringsAreStoredCleaned: a heartbeat or an inventory whose strings hold NUL,
// escape sequences or a megabyte is recorded, cleaned and capped, on either database.
func TestAgentStringsAreStoredCleaned(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	dev := enroll(e, key, secret, "web-01")
	agent := apptest.Caller{Token: dev.AuthToken}
	stored := func(column string) string {
		t.Helper()
		var v string
		if err := e.App.DB.SQL.QueryRow(`SELECT `+column+` FROM devices WHERE id = $1`, dev.DeviceID).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	e.Must(200, agent, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat",
		`{"agentVersion":"1.2.3\u0000\u0000","lastUser":"ro\u0000ot\u001b[31m\u0085","uptimeSeconds":5,"pendingReboot":false}`)
	if v, u := stored("agent_version"), stored("last_user"); v != "1.2.3" || u != "root[31m" {
		t.Fatalf("stored agentVersion %q, lastUser %q; want 1.2.3 and root[31m", v, u)
	}

	huge := strings.Repeat("é", 500_000) // a megabyte
	e.Must(200, agent, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "1", LastUser: huge})
	if u := stored("last_user"); len(u) != 256 || u != huge[:256] {
		t.Fatalf("stored a lastUser of %d bytes, want the first 256", len(u))
	}

	inv := agentproto.Inventory{CollectedAt: time.Now().UTC(), Hostname: "web-01\x00.example",
		OS:       agentproto.OSInfo{Type: "linux", Name: "Debian\x00", Version: "12"},
		Software: []agentproto.Software{{Name: "curl\x00", Version: "7\x1b", Source: "dpkg"}},
		Users:    []agentproto.LoggedInUser{{Username: "ad\x00min"}}, Errors: []string{"disks:\x00 denied"}}
	e.Must(204, agent, "POST", api+"/agents/"+dev.DeviceID+"/inventory", inv)
	if h, os := stored("hostname"), stored("os_name"); h != "web-01.example" || os != "Debian" {
		t.Fatalf("stored hostname %q, os name %q", h, os)
	}
	var name, version, users string
	if err := e.App.DB.SQL.QueryRow(`SELECT name, version FROM device_software WHERE device_id = $1`, dev.DeviceID).Scan(&name, &version); err != nil {
		t.Fatal(err)
	}
	if err := e.App.DB.SQL.QueryRow(`SELECT users FROM device_inventory WHERE device_id = $1`, dev.DeviceID).Scan(&users); err != nil {
		t.Fatal(err)
	}
	var u []agentproto.LoggedInUser
	if err := json.Unmarshal([]byte(users), &u); err != nil || name != "curl" || version != "7" || len(u) != 1 || u[0].Username != "admin" {
		t.Fatalf("stored software %q %q, users %s", name, version, users)
	}

	var cmd struct{ ID string }
	e.Must(201, ten.Org, "POST", api+"/devices/"+dev.DeviceID+"/commands", map[string]any{"type": "reboot"}).JSON(t, &cmd)
	e.Must(204, agent, "POST", api+"/agents/"+dev.DeviceID+"/commands/"+cmd.ID+"/result",
		`{"commandId":"`+cmd.ID+`","status":"completed","durationMs":1,"stdout":"a\u0000b\nc","error":"x\u0000","result":{"k\u0000":"v\u0000"}}`)
	var stdout, result string
	if err := e.App.DB.SQL.QueryRow(`SELECT stdout, result FROM device_commands WHERE id = $1`, cmd.ID).Scan(&stdout, &result); err != nil {
		t.Fatal(err)
	}
	var res map[string]string
	if err := json.Unmarshal([]byte(result), &res); err != nil || stdout != "ab\nc" || res["k"] != "v" {
		t.Fatalf("stored stdout %q, result %s", stdout, result)
	}
}
