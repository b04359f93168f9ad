package seed_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gale/internal/platform/access"
	"gale/internal/testkit/agentsim"
	"gale/internal/testkit/apptest"
	"gale/internal/testkit/seed"
)

func TestSeededDevicesAreListedByTheirPartner(t *testing.T) {
	e := apptest.New(t)
	partnerID, err := seed.Partner(t.Context(), e.App.DB, "Seeded MSP")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1234
	if err := seed.Devices(t.Context(), e.App.DB, partnerID, n, "offline"); err != nil {
		t.Fatal(err)
	}
	if err := seed.Settle(t.Context(), e.App.DB); err != nil {
		t.Fatal(err)
	}
	_, partner := e.CreateUser("seeded@gale.test", access.LevelPartner, partnerID, "", "")
	var devices struct {
		Total   int `json:"total"`
		Devices []struct {
			Hostname string `json:"hostname"`
			Status   string `json:"status"`
		} `json:"devices"`
	}
	e.Must(200, partner, "GET", "/api/v1/devices?limit=2&includeTotal=true", nil).JSON(t, &devices)
	if devices.Total != n || len(devices.Devices) != 2 || devices.Devices[0].Hostname != "host-000000" ||
		devices.Devices[0].Status != "offline" {
		t.Fatalf("devices %+v: want %d offline devices from host-000000 on", devices, n)
	}
	var orgs struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	e.Must(200, partner, "GET", "/api/v1/orgs/organizations?limit=200", nil).JSON(t, &orgs)
	if len(orgs.Data) != seed.Orgs {
		t.Fatalf("%d organizations, want %d", len(orgs.Data), seed.Orgs)
	}
	// Another partner's fleet in the same database stays apart.
	other, err := seed.Partner(t.Context(), e.App.DB, "Other MSP")
	if err != nil {
		t.Fatal(err)
	}
	if err := seed.Devices(t.Context(), e.App.DB, other, 10, "online"); err != nil {
		t.Fatal(err)
	}
	e.Must(200, partner, "GET", "/api/v1/devices?limit=1&includeTotal=true", nil).JSON(t, &devices)
	if devices.Total != n {
		t.Fatalf("%d devices after another partner's were seeded, want %d", devices.Total, n)
	}
}

func TestSeededAgentsConnectAndHeartbeat(t *testing.T) {
	e := apptest.New(t)
	partnerID, err := seed.Partner(t.Context(), e.App.DB, "Seeded MSP")
	if err != nil {
		t.Fatal(err)
	}
	if err := seed.Devices(t.Context(), e.App.DB, partnerID, 20, "offline"); err != nil {
		t.Fatal(err)
	}
	agents, err := seed.Agents(t.Context(), e.App.DB, partnerID, 3)
	if err != nil {
		t.Fatal(err)
	}
	creds := make([]agentsim.Creds, len(agents))
	for i, a := range agents {
		creds[i] = agentsim.Creds{DeviceID: a.DeviceID, Token: a.Token}
	}
	state := filepath.Join(t.TempDir(), "state.json")
	raw, _ := json.Marshal(creds)
	if err := os.WriteFile(state, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := agentsim.Run(t.Context(), agentsim.Options{Server: e.Server.URL, Agents: 3, StateFile: state,
		Heartbeat: 200 * time.Millisecond, Duration: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Connected != 3 || rep.ConnectFailures != 0 || rep.Heartbeats.Acked == 0 || rep.Heartbeats.Unacked != 0 {
		t.Fatalf("report %+v: want the 3 seeded agents connected, their heartbeats acknowledged", rep)
	}
	_, partner := e.CreateUser("seeded@gale.test", access.LevelPartner, partnerID, "", "")
	var online struct {
		Total int `json:"total"`
	}
	e.Must(200, partner, "GET", "/api/v1/devices?limit=1&includeTotal=true&status=online", nil).JSON(t, &online)
	if online.Total != 3 {
		t.Fatalf("%d devices online, want the 3 seeded agents'", online.Total)
	}
}
