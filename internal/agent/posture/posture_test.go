package posture

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"gale/internal/wire/agentproto"
)

func TestDetectFindsProductsByPackageUnitAndPath(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"opt/NinjaRMMAgent", "opt/screenconnect-0a1b2c"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var asked []string
	got := Detect(context.Background(), Sources{
		Root:     root,
		Packages: map[string]string{"clamav-daemon": "1.0.7+dfsg-1~deb12u1", "openssh-server": "1:9.2p1-2", "restic": "0.14.0-1", "bash": "5.2"},
		UnitStates: func(_ context.Context, units []string) map[string]string {
			asked = units
			return map[string]string{"clamav-daemon": "active", "sshd": "active", "ninjarmm-agent": "failed"}
		},
	})
	want := map[string]agentproto.ManagementProduct{
		"ninjaone":       {Product: "ninjaone", Name: "NinjaOne", Category: "rmm", Status: "installed", Evidence: "path /opt/NinjaRMMAgent, unit ninjarmm-agent failed"},
		"openssh-server": {Product: "openssh-server", Name: "OpenSSH server", Category: "remote_access", Status: "active", Version: "1:9.2p1-2", Evidence: "package openssh-server, unit sshd active"},
		"screenconnect":  {Product: "screenconnect", Name: "ConnectWise ScreenConnect", Category: "remote_access", Status: "installed", Evidence: "path /opt/screenconnect-0a1b2c"},
		"clamav":         {Product: "clamav", Name: "ClamAV", Category: "endpoint_security", Status: "active", Version: "1.0.7+dfsg-1~deb12u1", Evidence: "package clamav-daemon, unit clamav-daemon active"},
		"restic":         {Product: "restic", Name: "restic", Category: "backup", Status: "installed", Version: "0.14.0-1", Evidence: "package restic"},
	}
	if len(got) != len(want) {
		t.Fatalf("found %+v", got)
	}
	for _, p := range got {
		if p != want[p.Product] {
			t.Errorf("%s = %+v, want %+v", p.Product, p, want[p.Product])
		}
	}
	if len(asked) < 20 {
		t.Fatalf("units asked in one call: %v", asked)
	}
	if none := Detect(context.Background(), Sources{Root: root + "/nothing", UnitStates: func(context.Context, []string) map[string]string { return nil }}); none == nil || len(none) != 0 {
		t.Fatalf("nothing found = %#v, want an empty list", none)
	}
}
