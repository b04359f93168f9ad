package devices_test

import (
	"context"
	"testing"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// A device is found by its primary MAC (without regard to case) or IP address, within its own
// organization only, and not once decommissioned.
func TestFindByAddress(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten, other := e.NewTenant(admin, "Alpha"), e.NewTenant(admin, "Beta")
	s := app.Service[*devices.Service](e.App)
	ctx := context.Background()
	withAddress := func(tn apptest.Tenant, host, mac, ip string) string {
		id := e.InsertDevice(apptest.DeviceRow{PartnerID: tn.PartnerID, OrgID: tn.OrgID, SiteID: tn.SiteID, Hostname: host})
		inv := agentproto.Inventory{Hostname: host, Network: []agentproto.NetworkInterface{{Name: "eth0", MACAddress: mac,
			Addresses: []string{ip + "/24"}, Up: true}}}
		if err := s.StoreInventory(ctx, devices.Agent{DeviceID: id, PartnerID: tn.PartnerID, OrgID: tn.OrgID, Role: "agent"}, inv); err != nil {
			t.Fatalf("store inventory: %v", err)
		}
		return id
	}
	web := withAddress(ten, "web", "AA:BB:CC:00:00:01", "10.0.0.5")
	db := withAddress(ten, "db", "aa:bb:cc:00:00:02", "10.0.0.6")
	foreign := withAddress(other, "foreign", "aa:bb:cc:00:00:03", "10.0.0.7")
	gone := withAddress(ten, "gone", "aa:bb:cc:00:00:04", "10.0.0.8")
	if _, err := e.App.DB.SQL.Exec(`UPDATE devices SET decommissioned_at = updated_at WHERE id = $1`, gone); err != nil {
		t.Fatal(err)
	}

	got, err := devices.FindByAddress(ctx, e.App.DB, ten.OrgID, []string{"aa:bb:cc:00:00:01", "aa:bb:cc:00:00:03", "aa:bb:cc:00:00:04", ""},
		[]string{"10.0.0.6", "10.0.0.7", "10.0.0.8", ""})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.ByMAC) != 1 || got.ByMAC["aa:bb:cc:00:00:01"] != web {
		t.Errorf("by MAC = %v, want only aa:bb:cc:00:00:01 -> %s", got.ByMAC, web)
	}
	if len(got.ByIP) != 1 || got.ByIP["10.0.0.6"] != db {
		t.Errorf("by IP = %v, want only 10.0.0.6 -> %s", got.ByIP, db)
	}
	got, err = devices.FindByAddress(ctx, e.App.DB, other.OrgID, []string{"aa:bb:cc:00:00:03"}, nil)
	if err != nil || got.ByMAC["aa:bb:cc:00:00:03"] != foreign {
		t.Errorf("the other organization's lookup = %v, %v; want its own device %s", got, err, foreign)
	}
}
