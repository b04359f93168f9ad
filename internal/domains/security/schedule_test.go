package security_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/security"
	"gale/internal/platform/clock"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// A policy's daily scan starts once its time of day (UTC) has come, once a day even with two
// nodes, on the online Linux devices it applies to: its organization's, or for a partner's
// default those of organizations without their own. A policy saved after its time today
// first scans tomorrow.
func TestScheduledScans(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC))
	e := apptest.New(t, apptest.WithClock(clk))
	admin := e.Admin()
	a, b := e.NewTenant(admin, "Alpha"), e.NewTenant(admin, "Bravo")
	f := fixture{e: e, a: a, b: b, s: app.Service[*security.Service](e.App)}
	other := app.Service[*security.Service](e.SecondNode(apptest.WithClock(clk)).App)
	aOn, aAlso := f.device(a, "a-1"), f.device(a, "a-2")
	aOff := e.InsertDevice(apptest.DeviceRow{PartnerID: a.PartnerID, OrgID: a.OrgID, SiteID: a.SiteID, Hostname: "a-off", Status: "offline"})
	aWin := e.InsertDevice(apptest.DeviceRow{PartnerID: a.PartnerID, OrgID: a.OrgID, SiteID: a.SiteID, Hostname: "a-win", OSType: "windows"})
	bOn := f.device(b, "b-1")
	schedule := func(at string) map[string]any { return map[string]any{"scanType": "quick", "dailyTime": at} }
	var alpha security.SecurityPolicy
	e.Must(201, a.Org, "POST", api+"/security/policies", map[string]any{"name": "Alpha", "scanSchedule": schedule("02:30")}).JSON(t, &alpha)
	e.Must(201, b.Partner, "POST", api+"/security/policies", map[string]any{"name": "Bravo default", "scanSchedule": schedule("02:30")})
	scans := func(deviceID string) int {
		return f.count(`SELECT COUNT(*) FROM security_scans WHERE device_id = $1 AND created_by = 'schedule'`, deviceID)
	}
	run := func() {
		t.Helper()
		var wg sync.WaitGroup
		for _, s := range []*security.Service{f.s, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.RunScheduledScans(context.Background()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	run()
	if n := f.count(`SELECT COUNT(*) FROM security_scans`); n != 0 {
		t.Fatalf("%d scans before 02:30", n)
	}
	clk.Set(time.Date(2026, 11, 26, 2, 31, 0, 0, time.UTC))
	run()
	run()
	for id, want := range map[string]int{aOn: 1, aAlso: 1, aOff: 0, aWin: 0, bOn: 1} {
		if got := scans(id); got != want {
			t.Errorf("device %s: %d scheduled scans, want %d", id, got, want)
		}
	}
	if got := len(f.pending(aOn, agentproto.CommandSecurityScan)); got != 1 {
		t.Errorf("a-1 has %d scan commands, want 1", got)
	}
	// A node that found the policy due after another claimed its day starts nothing.
	if err := f.s.ScanForPolicy(context.Background(), alpha.ID, "2026-11-26"); err != nil {
		t.Fatal(err)
	}
	if got := scans(aOn); got != 1 {
		t.Errorf("a-1 has %d scheduled scans after a late second claim, want 1", got)
	}
	clk.Set(time.Date(2026, 11, 27, 2, 29, 0, 0, time.UTC))
	run()
	clk.Set(time.Date(2026, 11, 27, 2, 30, 0, 0, time.UTC))
	run()
	if got := scans(aOn); got != 2 {
		t.Errorf("a-1 has %d scheduled scans after the second day, want 2", got)
	}

	c := e.NewTenant(admin, "Charlie")
	cOn := f.device(c, "c-1")
	e.Must(201, c.Org, "POST", api+"/security/policies", map[string]any{"name": "Late", "scanSchedule": schedule("01:00")})
	run()
	if got := scans(cOn); got != 0 {
		t.Errorf("a policy saved after its time scanned %d times that day", got)
	}
	clk.Set(time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC))
	run()
	if got := scans(cOn); got != 1 {
		t.Errorf("the late policy scanned %d times the next day, want 1", got)
	}
}
