package devices_test

import (
	"testing"

	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// A watchdog that gave up on its main agent says why; the device shows it until the watchdog
// reports anything else.
func TestWatchdogThatGaveUpSaysWhy(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 1)
	dev := enroll(e, key, secret, "web-01")
	watchdog := apptest.Caller{Token: dev.WatchdogAuthToken}
	beat := func(hb agentproto.Heartbeat) (status, reason any) {
		t.Helper()
		e.Must(200, watchdog, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat", hb)
		d := e.Must(200, ten.Org, "GET", api+"/devices/"+dev.DeviceID, nil).Map(t)
		return d["watchdogStatus"], d["watchdogReason"]
	}
	why := "the agent failed at start 5 times in a row; last: exit status 1: configuration unreadable"
	if st, r := beat(agentproto.Heartbeat{WatchdogState: "gave_up", WatchdogReason: why + "\x1b[31m"}); st != "gave_up" || r != why+"[31m" {
		t.Fatalf("after giving up: status %v, reason %q", st, r)
	}
	if st, r := beat(agentproto.Heartbeat{WatchdogState: "connected", WatchdogReason: "stale"}); st != "connected" || r != nil {
		t.Fatalf("after recovering: status %v, reason %v", st, r)
	}
}
