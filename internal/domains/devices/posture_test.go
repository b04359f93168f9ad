package devices_test

import (
	"testing"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// Inventories carry the management products; the summary counts them per organization with
// the devices never or long not reported, the device list names them, and another tenant sees
// none of it.
func TestManagementPosture(t *testing.T) {
	e := apptest.New(t)
	admin := e.Admin()
	ten, other := e.NewTenant(admin, "Alpha"), e.NewTenant(admin, "Bravo")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 3)
	web, db, silent := enroll(e, key, secret, "web-01"), enroll(e, key, secret, "db-01"), enroll(e, key, secret, "old-01")
	okey, osecret := newKey(e, other.Partner, other.OrgID, 1)
	foreign := enroll(e, okey, osecret, "theirs")
	report := func(d agentproto.EnrollResponse, posture []agentproto.ManagementProduct) {
		t.Helper()
		inv := agentproto.Inventory{CollectedAt: time.Now().UTC(), Software: []agentproto.Software{},
			Users: []agentproto.LoggedInUser{}, Posture: posture}
		e.Must(204, apptest.Caller{Token: d.AuthToken}, "POST", api+"/agents/"+d.DeviceID+"/inventory", inv)
	}
	clam := agentproto.ManagementProduct{Product: "clamav", Name: "ClamAV", Category: "endpoint_security", Status: "active",
		Version: "1.0.7", Evidence: "package clamav-daemon, unit clamav-daemon active"}
	ssh := agentproto.ManagementProduct{Product: "openssh-server", Name: "OpenSSH server", Category: "remote_access", Status: "installed",
		Evidence: "package openssh-server"}
	report(web, []agentproto.ManagementProduct{clam, ssh})
	stopped := clam
	stopped.Status = "installed"
	report(db, []agentproto.ManagementProduct{stopped, {Product: "bogus\x01", Name: "x", Category: "rmm", Status: "weird", Evidence: "path /x"}})
	report(silent, nil) // an agent that does not detect products
	report(foreign, []agentproto.ManagementProduct{clam})
	// An inventory without posture leaves the last report.
	report(web, nil)

	var sum struct {
		Data devices.PostureSummary `json:"data"`
	}
	e.Must(200, ten.Org, "GET", api+"/devices/management-posture/summary", nil).JSON(t, &sum)
	if len(sum.Data.Orgs) != 1 || sum.Data.StalenessDays != 7 {
		t.Fatalf("summary %+v", sum.Data)
	}
	o := sum.Data.Orgs[0]
	want := []devices.PostureProduct{{Product: "bogus", Name: "x", Category: "rmm", Status: "installed", DeviceCount: 1},
		{Product: "clamav", Name: "ClamAV", Category: "endpoint_security", Status: "active", DeviceCount: 1},
		{Product: "clamav", Name: "ClamAV", Category: "endpoint_security", Status: "installed", DeviceCount: 1},
		{Product: "openssh-server", Name: "OpenSSH server", Category: "remote_access", Status: "installed", DeviceCount: 1}}
	if o.OrgID != ten.OrgID || o.Devices != 3 || o.NeverScanned != 1 || o.Stale != 0 || len(o.Products) != len(want) {
		t.Fatalf("organization %+v", o)
	}
	for i := range want {
		if o.Products[i] != want[i] {
			t.Errorf("product %d = %+v, want %+v", i, o.Products[i], want[i])
		}
	}
	if sum.Data.Totals != (devices.PostureCounts{Devices: 3, NeverScanned: 1}) {
		t.Fatalf("totals %+v", sum.Data.Totals)
	}

	// A report older than the staleness limit is stale.
	if _, err := e.App.DB.SQL.Exec(`UPDATE devices SET posture_at = $1 WHERE id = $2`, time.Now().Add(-3*24*time.Hour), db.DeviceID); err != nil {
		t.Fatal(err)
	}
	e.Must(200, ten.Org, "GET", api+"/devices/management-posture/summary?stalenessDays=2&orgId="+ten.OrgID, nil).JSON(t, &sum)
	if sum.Data.Totals.Stale != 1 || sum.Data.Orgs[0].Stale != 1 {
		t.Fatalf("after 3 days, with 2 allowed: %+v", sum.Data)
	}
	e.Must(200, ten.Org, "GET", api+"/devices/management-posture/summary?stalenessDays=4", nil).JSON(t, &sum)
	if sum.Data.Totals.Stale != 0 {
		t.Fatalf("after 3 days, with 4 allowed: %+v", sum.Data.Totals)
	}
	for _, q := range []string{"stalenessDays=0", "stalenessDays=366", "orgId=nope"} {
		if r := e.Do(ten.Org, "GET", api+"/devices/management-posture/summary?"+q, nil); r.Status != 400 {
			t.Errorf("summary?%s = %d %s", q, r.Status, r.Body)
		}
	}

	var list struct {
		Data struct {
			Devices []devices.PostureDevice `json:"devices"`
		} `json:"data"`
	}
	e.Must(200, ten.Org, "GET", api+"/devices/management-posture/devices?product=clamav", nil).JSON(t, &list)
	if len(list.Data.Devices) != 2 || list.Data.Devices[0].Hostname != "db-01" || list.Data.Devices[1].Hostname != "web-01" ||
		list.Data.Devices[1].Version != "1.0.7" || list.Data.Devices[1].OrgID != ten.OrgID {
		t.Fatalf("devices with clamav %+v", list.Data.Devices)
	}
	e.Must(200, ten.Org, "GET", api+"/devices/management-posture/devices?product=clamav&status=active&limit=1", nil).JSON(t, &list)
	if len(list.Data.Devices) != 1 || list.Data.Devices[0].DeviceID != web.DeviceID {
		t.Fatalf("active clamav %+v", list.Data.Devices)
	}
	for _, q := range []string{"", "product=clamav&limit=501", "product=clamav&status=gone"} {
		if r := e.Do(ten.Org, "GET", api+"/devices/management-posture/devices?"+q, nil); r.Status != 400 {
			t.Errorf("devices?%s = %d %s", q, r.Status, r.Body)
		}
	}

	// Another tenant counts and lists only its own device.
	e.Must(200, other.Org, "GET", api+"/devices/management-posture/summary", nil).JSON(t, &sum)
	if len(sum.Data.Orgs) != 1 || sum.Data.Orgs[0].OrgID != other.OrgID || sum.Data.Totals.Devices != 1 {
		t.Fatalf("another tenant's summary %+v", sum.Data)
	}
	e.Must(200, other.Org, "GET", api+"/devices/management-posture/summary?orgId="+ten.OrgID, nil).JSON(t, &sum)
	if len(sum.Data.Orgs) != 0 || sum.Data.Totals.Devices != 0 {
		t.Fatalf("another tenant asking for this organization %+v", sum.Data)
	}
	e.Must(200, other.Org, "GET", api+"/devices/management-posture/devices?product=clamav", nil).JSON(t, &list)
	if len(list.Data.Devices) != 1 || list.Data.Devices[0].DeviceID != foreign.DeviceID {
		t.Fatalf("another tenant's clamav devices %+v", list.Data.Devices)
	}
}
