package patches_test

import (
	"encoding/json"
	"testing"

	"gale/internal/domains/patches"
	"gale/internal/wire/agentproto"
)

// After a successful install, a job reboots its device as its reboot behaviour says: never,
// when the system reports a reboot pending, or always; a failed install reboots nothing.
func TestInstallJobsRebootAsTheirBehaviourSays(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	ctx := partnerCtx(f.a)
	for _, tc := range []struct {
		behaviour, status string
		pending, reboot   bool
	}{
		{patches.RebootNever, agentproto.ResultCompleted, true, false},
		{patches.RebootIfRequired, agentproto.ResultCompleted, false, false},
		{patches.RebootIfRequired, agentproto.ResultCompleted, true, true},
		{patches.RebootAlways, agentproto.ResultCompleted, false, true},
		{patches.RebootAlways, agentproto.ResultFailed, false, false},
	} {
		dev := f.device(f.a, "web-"+tc.behaviour+tc.status, "linux")
		ids := f.seedPatches(f.a, dev, upd("openssl", "3.0.1-1", "3.0.2-1", true))
		f.e.Must(200, c, "POST", api+"/patches/"+ids["openssl"]+"/approve", nil)
		job, err := f.s.Install(ctx, []string{dev}, []string{ids["openssl"]}, patches.InstallOptions{RebootBehavior: tc.behaviour})
		if err != nil || len(job.Commands) != 1 {
			t.Fatalf("%+v: install %+v %v", tc, job, err)
		}
		f.result(f.a, dev, job.Commands[0].ID, tc.status, agentproto.PatchInstallResult{Manager: "apt", RebootRequired: tc.pending,
			Packages: []agentproto.PackageOutcome{{Name: "openssl", Version: "3.0.2-1", PreviousVersion: "3.0.1-1", Status: agentproto.PackageInstalled}}})
		var payload string
		n := 0
		rows, err := f.e.App.DB.SQL.Query(`SELECT payload FROM device_commands WHERE device_id = $1 AND type = 'reboot'`, dev)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			if err := rows.Scan(&payload); err != nil {
				t.Fatal(err)
			}
			n++
		}
		rows.Close()
		var delay agentproto.PowerDelay
		_ = json.Unmarshal([]byte(payload), &delay)
		if (n == 1) != tc.reboot || n > 1 || (tc.reboot && delay.DelaySeconds != patches.RebootDelaySeconds) {
			t.Errorf("%+v: %d reboot commands (payload %s)", tc, n, payload)
		}
	}
}

// The reboot a job queues in the install result's transaction reaches a connected agent as
// soon as the result is recorded, not at the agent's next heartbeat.
func TestRebootAfterPatchesReachesTheConnectedAgentAtOnce(t *testing.T) {
	f := newFixture(t)
	enrolled := f.e.EnrollAgent(f.a, "web-reboot")
	dev := enrolled.DeviceID
	ws, ctx := f.e.DialAgent(enrolled.AuthToken)
	ids := f.seedPatches(f.a, dev, upd("openssl", "3.0.1-1", "3.0.2-1", true))
	f.e.Must(200, f.a.Partner, "POST", api+"/patches/"+ids["openssl"]+"/approve", nil)
	job, err := f.s.Install(partnerCtx(f.a), []string{dev}, []string{ids["openssl"]}, patches.InstallOptions{RebootBehavior: patches.RebootAlways})
	if err != nil || len(job.Commands) != 1 {
		t.Fatalf("install %+v %v", job, err)
	}
	f.result(f.a, dev, job.Commands[0].ID, agentproto.ResultCompleted, agentproto.PatchInstallResult{Manager: "apt",
		Packages: []agentproto.PackageOutcome{{Name: "openssl", Version: "3.0.2-1", PreviousVersion: "3.0.1-1", Status: agentproto.PackageInstalled}}})
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("no reboot command reached the agent: %v", err)
		}
		var m agentproto.Message
		var c agentproto.Command
		if json.Unmarshal(data, &m) != nil || m.Type != agentproto.TypeCommand || json.Unmarshal(m.Payload, &c) != nil {
			continue
		}
		if c.Type == agentproto.CommandReboot {
			return
		}
	}
}
