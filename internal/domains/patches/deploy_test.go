package patches_test

import (
	"context"
	"encoding/json"
	"testing"

	"gale/internal/app"
	"gale/internal/domains/rollouts"
	"gale/internal/wire/agentproto"
)

// A rollout of patches installs, on each device, the approved ones it has pending; a device
// with none is skipped.
func TestRolloutOfPatches(t *testing.T) {
	f := newFixture(t)
	c := f.a.Partner
	web, idle := f.device(f.a, "web-01", "linux"), f.device(f.a, "idle-01", "linux")
	ids := f.seedPatches(f.a, web, upd("openssl", "3.0.1-1", "3.0.2-1", true))
	f.e.Must(200, c, "POST", api+"/patches/"+ids["openssl"]+"/approve", map[string]any{})
	if r := f.e.Do(c, "POST", api+"/deployments", map[string]any{"name": "Bad", "orgId": f.a.OrgID,
		"payload": map[string]any{"type": "patch", "patchIds": []string{}}, "targets": map[string]any{"type": "organization"}}); r.Status != 400 {
		t.Fatalf("a patch rollout without patches = %d %s", r.Status, r.Body)
	}
	var x rollouts.Deployment
	f.e.Must(201, c, "POST", api+"/deployments", map[string]any{"name": "OpenSSL", "orgId": f.a.OrgID,
		"payload": map[string]any{"type": "patch", "patchIds": []string{ids["openssl"]}},
		"targets": map[string]any{"type": "devices", "ids": []string{web, idle}}}).JSON(t, &x)
	f.e.Must(200, c, "POST", api+"/deployments/"+x.ID+"/initialize", nil)
	f.e.Must(200, c, "POST", api+"/deployments/"+x.ID+"/start", nil)
	var devs struct{ Data []rollouts.DeploymentDevice }
	f.e.Must(200, c, "GET", api+"/deployments/"+x.ID+"/devices", nil).JSON(t, &devs)
	byID := map[string]rollouts.DeploymentDevice{}
	for _, d := range devs.Data {
		byID[d.DeviceID] = d
	}
	if byID[idle].Status != "skipped" || byID[web].Status != "queued" || byID[web].CommandID == nil {
		t.Fatalf("rollout devices %+v", devs.Data)
	}
	var cmd struct {
		Payload json.RawMessage `json:"payload"`
	}
	f.e.Must(200, c, "GET", api+"/devices/"+web+"/commands/"+*byID[web].CommandID, nil).JSON(t, &cmd)
	var p agentproto.PatchInstall
	if err := json.Unmarshal(cmd.Payload, &p); err != nil || len(p.Packages) != 1 || p.Packages[0] != (agentproto.PackageVersion{Name: "openssl", Version: "3.0.2-1"}) {
		t.Fatalf("install payload %s", cmd.Payload)
	}
	f.result(f.a, web, *byID[web].CommandID, agentproto.ResultCompleted, agentproto.PatchInstallResult{Manager: "apt",
		Packages: []agentproto.PackageOutcome{{Name: "openssl", Version: "3.0.2-1", PreviousVersion: "3.0.1-1", Status: agentproto.PackageInstalled}}})
	if err := app.Service[*rollouts.Service](f.e.App).AdvanceAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.e.Must(200, c, "GET", api+"/deployments/"+x.ID, nil).JSON(t, &x)
	if x.Status != "completed" {
		t.Fatalf("rollout after the install %+v", x)
	}
}
