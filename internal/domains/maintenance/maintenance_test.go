package maintenance_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/maintenance"
	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/testkit/apptest"
)

const api = "/api/v1"

// start is the fake clock's time at the beginning of each test: Wednesday 25 November 2026,
// 10:00 UTC (11:00 in Berlin).
var start = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

type fixture struct {
	e   *apptest.Env
	clk *clock.Fake
	a   apptest.Tenant
	b   apptest.Tenant
}

func newFixture(t *testing.T) fixture {
	clk := clock.NewFake(start)
	e := apptest.New(t, apptest.WithClock(clk))
	admin := e.Admin()
	return fixture{e: e, clk: clk, a: e.NewTenant(admin, "Alpha"), b: e.NewTenant(admin, "Bravo")}
}

func (f fixture) service() *maintenance.Service { return app.Service[*maintenance.Service](f.e.App) }

func (f fixture) device(ten apptest.Tenant, host string) string {
	return f.e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: host})
}

func (f fixture) create(c apptest.Caller, body map[string]any) maintenance.MaintenanceWindow {
	f.e.T.Helper()
	var w maintenance.MaintenanceWindow
	f.e.Must(http.StatusCreated, c, "POST", api+"/maintenance/windows", body).JSON(f.e.T, &w)
	return w
}

func (f fixture) occurrences(c apptest.Caller, query string) []maintenance.MaintenanceOccurrence {
	f.e.T.Helper()
	var out struct {
		Data []maintenance.MaintenanceOccurrence
	}
	f.e.Must(http.StatusOK, c, "GET", api+"/maintenance/occurrences?limit=500&"+query, nil).JSON(f.e.T, &out)
	return out.Data
}

func (f fixture) occurrence(c apptest.Caller, id string) maintenance.MaintenanceOccurrence {
	f.e.T.Helper()
	var o maintenance.MaintenanceOccurrence
	f.e.Must(http.StatusOK, c, "GET", api+"/maintenance/occurrences/"+id, nil).JSON(f.e.T, &o)
	return o
}

func (f fixture) tick() {
	f.e.T.Helper()
	if err := f.service().Tick(context.Background()); err != nil {
		f.e.T.Fatal(err)
	}
}

// eventCount counts the events of a type about an occurrence.
func (f fixture) eventCount(typ, occurrenceID string) int {
	f.e.T.Helper()
	var n int
	if err := f.e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM events WHERE type = $1 AND resource_id = $2`, typ, occurrenceID).Scan(&n); err != nil {
		f.e.T.Fatal(err)
	}
	return n
}

// nightly is a daily window from 02:00 to 04:00 Berlin time, from tomorrow.
func nightly(name string, targets map[string]any) map[string]any {
	return map[string]any{"name": name, "startTime": "2026-11-26T02:00:00", "endTime": "2026-11-26T04:00:00",
		"timezone": "Europe/Berlin", "recurrence": "daily", "targets": targets}
}

var all = map[string]any{"type": "all"}

func TestWindowCreateReadChange(t *testing.T) {
	f := newFixture(t)
	w := f.create(f.a.Org, map[string]any{"name": " Nightly ", "description": "line one\nline two", "startTime": "2026-11-26T02:00:00+09:00",
		"endTime": "2026-11-26T04:00:00", "timezone": "Europe/Berlin", "recurrence": "daily", "targets": all, "suppressPatches": true})
	if w.OrgID != f.a.OrgID || w.PartnerID != f.a.PartnerID || w.Name != "Nightly" || w.StartTime != "2026-11-26T02:00:00" ||
		w.Status != maintenance.WindowActive || !w.SuppressAlerts || !w.SuppressPatches || w.SuppressAutomations || w.SuppressScripts ||
		w.Targets.Type != "all" || len(w.Targets.IDs) != 0 || w.CreatedBy == nil {
		t.Fatalf("created %+v", w)
	}
	occ := f.occurrences(f.a.Org, "windowId="+w.ID)
	// From tomorrow, through the 90 days ahead and the day of slack.
	if len(occ) != 91 {
		t.Fatalf("%d occurrences written, want 91", len(occ))
	}
	for i, o := range occ {
		want := time.Date(2026, 11, 26+i, 1, 0, 0, 0, time.UTC)
		if !o.StartsAt.Equal(want) || o.EndsAt.Sub(o.StartsAt) != 2*time.Hour || o.Status != maintenance.Scheduled {
			t.Fatalf("occurrence %d: %+v, want from %s", i, o, want)
		}
	}
	var got maintenance.MaintenanceWindow
	f.e.Must(200, f.a.Partner, "GET", api+"/maintenance/windows/"+w.ID, nil).JSON(t, &got)
	if got.ID != w.ID || got.Description != "line one\nline two" {
		t.Fatalf("get %+v", got)
	}
	var list struct {
		Data []maintenance.MaintenanceWindow
	}
	f.e.Must(200, f.a.Partner, "GET", api+"/maintenance/windows?status=active", nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != w.ID {
		t.Fatalf("list %+v", list.Data)
	}
	f.e.Must(200, f.a.Partner, "GET", api+"/maintenance/windows?status=cancelled", nil).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("cancelled list %+v", list.Data)
	}
	var windowOcc struct {
		Data []maintenance.MaintenanceOccurrence
	}
	f.e.Must(200, f.a.Org, "GET", api+"/maintenance/windows/"+w.ID+"/occurrences?limit=2", nil).JSON(t, &windowOcc)
	if len(windowOcc.Data) != 2 || windowOcc.Data[0].ID != occ[0].ID {
		t.Fatalf("window occurrences %+v", windowOcc.Data)
	}
	if got := f.occurrences(f.a.Org, "from=2026-12-01T00:00:00Z&to=2026-12-03T00:00:00Z"); len(got) != 2 || got[0].ID != occ[5].ID {
		t.Fatalf("occurrences of 1 and 2 December %+v", got)
	}

	// The first occurrence is under way. A change of the end keeps the scheduled occurrences'
	// IDs (their starts stay) and moves their ends; the active one stays as it was.
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+occ[0].ID+"/start", nil)
	var changed maintenance.MaintenanceWindow
	f.e.Must(200, f.a.Org, "PATCH", api+"/maintenance/windows/"+w.ID, map[string]any{"endTime": "2026-11-26T05:00:00",
		"suppressPatches": false}).JSON(t, &changed)
	if changed.EndTime != "2026-11-26T05:00:00" || changed.SuppressPatches || !changed.SuppressAlerts || changed.Name != "Nightly" {
		t.Fatalf("changed %+v", changed)
	}
	after := f.occurrences(f.a.Org, "windowId="+w.ID)
	if len(after) != 91 || after[0].ID != occ[0].ID || after[0].Status != maintenance.Active || !after[0].EndsAt.Equal(occ[0].EndsAt) {
		t.Fatalf("the active occurrence changed: %+v", after[0])
	}
	for i := 1; i < len(after); i++ {
		if after[i].ID != occ[i].ID || !after[i].StartsAt.Equal(occ[i].StartsAt) || after[i].EndsAt.Sub(after[i].StartsAt) != 3*time.Hour {
			t.Fatalf("occurrence %d after a change of the end: %+v, was %+v", i, after[i], occ[i])
		}
	}
	// A change of the start moves the scheduled ones an hour later; the night under way keeps
	// its occurrence, the new one overlapping it is left out.
	f.e.Must(200, f.a.Org, "PATCH", api+"/maintenance/windows/"+w.ID, map[string]any{"startTime": "2026-11-26T03:00:00",
		"endTime": "2026-11-26T06:00:00"}).JSON(t, &changed)
	after = f.occurrences(f.a.Org, "windowId="+w.ID)
	if len(after) != 91 || after[0].ID != occ[0].ID || after[0].Status != maintenance.Active {
		t.Fatalf("after moving the start: %d occurrences, first %+v", len(after), after[0])
	}
	if !after[1].StartsAt.Equal(time.Date(2026, 11, 27, 2, 0, 0, 0, time.UTC)) || after[1].Status != maintenance.Scheduled {
		t.Fatalf("after moving the start, second %+v", after[1])
	}
	// A change to weekly drops the daily occurrences: Thursdays from 3 December to 18 February
	// (26 November is the night under way).
	f.e.Must(200, f.a.Org, "PATCH", api+"/maintenance/windows/"+w.ID, map[string]any{"recurrence": "weekly"})
	if after := f.occurrences(f.a.Org, "windowId="+w.ID+"&status=scheduled"); len(after) != 12 ||
		!after[0].StartsAt.Equal(time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)) {
		t.Fatalf("weekly: %d scheduled occurrences, want 12 from 3 December", len(after))
	}
}

func TestTransitionsAndTheirConflicts(t *testing.T) {
	f := newFixture(t)
	w := f.create(f.a.Org, nightly("Nightly", all))
	occ := f.occurrences(f.a.Org, "windowId="+w.ID)
	first, second := occ[0], occ[1]

	f.e.Must(409, f.a.Org, "POST", api+"/maintenance/occurrences/"+first.ID+"/end", nil)
	var o maintenance.MaintenanceOccurrence
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+first.ID+"/start", nil).JSON(t, &o)
	if o.Status != maintenance.Active || o.StartedAt == nil || !near(*o.StartedAt, start) || o.StartedBy == nil || o.EndedAt != nil {
		t.Fatalf("started %+v", o)
	}
	if r := f.e.Do(f.a.Org, "POST", api+"/maintenance/occurrences/"+first.ID+"/start", nil); r.Status != 409 ||
		r.ErrorCode() != maintenance.CodeOccurrenceNotPlanned {
		t.Fatalf("second start %d %s", r.Status, r.Body)
	}
	var active struct {
		Data []maintenance.MaintenanceActive
	}
	f.e.Must(200, f.a.Partner, "GET", api+"/maintenance/active", nil).JSON(t, &active)
	if len(active.Data) != 1 || active.Data[0].Window.ID != w.ID || active.Data[0].Occurrence.ID != first.ID {
		t.Fatalf("active %+v", active.Data)
	}
	if r := f.e.Do(f.a.Org, "DELETE", api+"/maintenance/windows/"+w.ID, nil); r.Status != 409 || r.ErrorCode() != maintenance.CodeWindowActive {
		t.Fatalf("delete while active %d %s", r.Status, r.Body)
	}

	f.clk.Advance(time.Minute)
	f.e.Must(200, f.a.Partner, "POST", api+"/maintenance/occurrences/"+first.ID+"/end", nil).JSON(t, &o)
	if o.Status != maintenance.Completed || o.EndedAt == nil || !near(*o.EndedAt, start.Add(time.Minute)) || o.EndedBy == nil {
		t.Fatalf("ended %+v", o)
	}
	if r := f.e.Do(f.a.Org, "POST", api+"/maintenance/occurrences/"+first.ID+"/end", nil); r.Status != 409 ||
		r.ErrorCode() != maintenance.CodeOccurrenceNotActive {
		t.Fatalf("second end %d %s", r.Status, r.Body)
	}
	f.e.Must(409, f.a.Org, "POST", api+"/maintenance/occurrences/"+first.ID+"/start", nil)
	if f.eventCount(maintenance.EventStarted, first.ID) != 1 || f.eventCount(maintenance.EventEnded, first.ID) != 1 {
		t.Fatal("a manual start and end each record one event")
	}
	// The job, at the occurrence's own time, does not start the ended occurrence again.
	f.clk.Set(first.StartsAt.Add(30 * time.Minute))
	f.tick()
	if got := f.occurrence(f.a.Org, first.ID); got.Status != maintenance.Completed || got.EndedBy == nil {
		t.Fatalf("the job reactivated an ended occurrence: %+v", got)
	}
	f.e.Must(200, f.a.Partner, "GET", api+"/maintenance/active", nil).JSON(t, &active)
	if len(active.Data) != 0 {
		t.Fatalf("active after the end %+v", active.Data)
	}

	var cancelled maintenance.MaintenanceWindow
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/windows/"+w.ID+"/cancel", nil).JSON(t, &cancelled)
	if cancelled.Status != maintenance.WindowCancelled || cancelled.CancelledAt == nil || cancelled.CancelledBy == nil {
		t.Fatalf("cancelled %+v", cancelled)
	}
	if got := f.occurrence(f.a.Org, second.ID); got.Status != maintenance.Cancelled {
		t.Fatalf("a scheduled occurrence of a cancelled window: %+v", got)
	}
	if got := f.occurrence(f.a.Org, first.ID); got.Status != maintenance.Completed {
		t.Fatalf("a completed occurrence of a cancelled window: %+v", got)
	}
	for _, r := range []*apptest.Response{
		f.e.Do(f.a.Org, "POST", api+"/maintenance/windows/"+w.ID+"/cancel", nil),
		f.e.Do(f.a.Org, "PATCH", api+"/maintenance/windows/"+w.ID, map[string]any{"name": "Again"}),
	} {
		if r.Status != 409 || r.ErrorCode() != maintenance.CodeWindowCancelled {
			t.Fatalf("on a cancelled window: %d %s", r.Status, r.Body)
		}
	}
	f.e.Must(409, f.a.Org, "POST", api+"/maintenance/occurrences/"+second.ID+"/start", nil)
	// No occurrence is written for a cancelled window any more.
	f.clk.Advance(10 * 24 * time.Hour)
	f.tick()
	if got := f.occurrences(f.a.Org, "windowId="+w.ID+"&status=scheduled"); len(got) != 0 {
		t.Fatalf("scheduled occurrences of a cancelled window: %d", len(got))
	}
	f.e.Must(204, f.a.Org, "DELETE", api+"/maintenance/windows/"+w.ID, nil)
	f.e.Must(404, f.a.Org, "GET", api+"/maintenance/windows/"+w.ID, nil)
	f.e.Must(404, f.a.Org, "GET", api+"/maintenance/occurrences/"+first.ID, nil)
}

func TestTheJobMovesOccurrencesOnTheClock(t *testing.T) {
	f := newFixture(t)
	// 11:05 to 11:35 Berlin time today, once.
	once := f.create(f.a.Org, map[string]any{"name": "Reboot", "startTime": "2026-11-25T11:05:00", "endTime": "2026-11-25T11:35:00",
		"timezone": "Europe/Berlin", "recurrence": "once", "targets": all})
	occ := f.occurrences(f.a.Org, "windowId="+once.ID)
	if len(occ) != 1 || !occ[0].StartsAt.Equal(start.Add(5*time.Minute)) {
		t.Fatalf("once: %+v", occ)
	}
	id := occ[0].ID
	f.tick()
	if got := f.occurrence(f.a.Org, id); got.Status != maintenance.Scheduled {
		t.Fatalf("before its start: %+v", got)
	}
	f.clk.Advance(6 * time.Minute)
	f.tick()
	f.tick()
	got := f.occurrence(f.a.Org, id)
	if got.Status != maintenance.Active || got.StartedAt == nil || got.StartedBy != nil {
		t.Fatalf("after its start: %+v", got)
	}
	if f.eventCount(maintenance.EventStarted, id) != 1 {
		t.Fatal("the job's start records one event")
	}
	f.clk.Advance(30 * time.Minute)
	f.tick()
	if got := f.occurrence(f.a.Org, id); got.Status != maintenance.Completed || got.EndedAt == nil || got.EndedBy != nil {
		t.Fatalf("after its end: %+v", got)
	}
	if f.eventCount(maintenance.EventEnded, id) != 1 {
		t.Fatal("the job's end records one event")
	}

	// An occurrence whose whole time passed between two runs of the job is closed, never active.
	missed := f.create(f.a.Org, map[string]any{"name": "Short", "startTime": "2026-11-25T12:00:00", "endTime": "2026-11-25T12:10:00",
		"timezone": "Europe/Berlin", "recurrence": "once", "targets": all})
	mid := f.occurrences(f.a.Org, "windowId="+missed.ID)[0].ID
	f.clk.Advance(time.Hour)
	f.tick()
	if got := f.occurrence(f.a.Org, mid); got.Status != maintenance.Completed || got.StartedAt != nil {
		t.Fatalf("a missed occurrence: %+v", got)
	}
	if f.eventCount(maintenance.EventStarted, mid)+f.eventCount(maintenance.EventEnded, mid) != 0 {
		t.Fatal("a missed occurrence records no event")
	}

	// The job keeps a daily window written 90 days ahead as the clock moves.
	daily := f.create(f.a.Org, nightly("Nightly", all))
	last := func() time.Time {
		occ := f.occurrences(f.a.Org, "windowId="+daily.ID+"&status=scheduled&from=2027-01-01T00:00:00Z")
		return occ[len(occ)-1].StartsAt
	}
	before := last()
	f.clk.Advance(3 * 24 * time.Hour)
	f.tick()
	if after := last(); !after.Equal(before.Add(3 * 24 * time.Hour)) {
		t.Fatalf("last occurrence %s after three days, was %s", after, before)
	}
	// The three nights that passed were closed: no run of the job saw them in their time.
	if got := f.occurrences(f.a.Org, "windowId="+daily.ID+"&status=completed"); len(got) != 3 {
		t.Fatalf("%d completed nights, want 3", len(got))
	}

	// A year after their end, completed occurrences are purged; scheduled ones stay.
	f.clk.Advance(370 * 24 * time.Hour)
	f.tick()
	n, err := f.service().Purge(context.Background())
	if err != nil || n < 3 {
		t.Fatalf("purged %d: %v", n, err)
	}
	f.e.Must(404, f.a.Org, "GET", api+"/maintenance/occurrences/"+id, nil)
	if got := f.occurrences(f.a.Org, "windowId="+daily.ID+"&status=scheduled"); len(got) != 91 {
		t.Fatalf("%d scheduled nights after the purge, want 91", len(got))
	}
}

func TestConcurrentStartsHaveOneWinner(t *testing.T) {
	f := newFixture(t)
	w := f.create(f.a.Org, nightly("Nightly", all))
	occ := f.occurrences(f.a.Org, "windowId="+w.ID)
	for i := range 5 {
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for j := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[j] = f.e.Do(f.a.Org, "POST", api+"/maintenance/occurrences/"+occ[i].ID+"/start", nil).Status
			}()
		}
		wg.Wait()
		if !(codes[0] == 200 && codes[1] == 409) && !(codes[0] == 409 && codes[1] == 200) {
			t.Fatalf("round %d: %v, want one 200 and one 409", i, codes)
		}
		if n := f.eventCount(maintenance.EventStarted, occ[i].ID); n != 1 {
			t.Fatalf("round %d: %d start events", i, n)
		}
	}
}

func TestHeldForEachTargetType(t *testing.T) {
	f := newFixture(t)
	var site struct {
		ID string `json:"id"`
	}
	f.e.Must(201, f.a.Partner, "POST", api+"/orgs/sites", map[string]any{"orgId": f.a.OrgID, "name": "Branch"}).JSON(t, &site)
	plain := f.device(f.a, "plain")
	branch := f.e.InsertDevice(apptest.DeviceRow{PartnerID: f.a.PartnerID, OrgID: f.a.OrgID, SiteID: site.ID, Hostname: "branch"})
	grouped := f.device(f.a, "grouped")
	named := f.device(f.a, "named")
	foreign := f.device(f.b, "foreign")
	var group struct {
		ID string `json:"id"`
	}
	f.e.Must(201, f.a.Org, "POST", api+"/groups", map[string]any{"name": "Servers", "type": "static"}).JSON(t, &group)
	f.e.Must(200, f.a.Org, "POST", api+"/groups/"+group.ID+"/devices", map[string]any{"deviceIds": []string{grouped}})

	only := func(what string) map[string]any {
		body := map[string]any{"suppressAlerts": false}
		body["suppress"+what] = true
		return body
	}
	windows := []map[string]any{
		merge(nightly("All", all), only("Alerts")),
		merge(nightly("Branch", map[string]any{"type": "sites", "ids": []string{site.ID}}), only("Patches")),
		merge(nightly("Servers", map[string]any{"type": "groups", "ids": []string{group.ID}}), only("Scripts")),
		merge(nightly("Named", map[string]any{"type": "devices", "ids": []string{named}}), only("Automations")),
	}
	ids := []string{plain, branch, grouped, named, foreign, "not-an-id", "00000000-0000-7000-8000-000000000000"}
	svc, ctx := f.service(), context.Background()
	check := func(what maintenance.Suppression, want ...string) {
		t.Helper()
		held, err := svc.Held(ctx, f.e.App.DB, what, ids)
		if err != nil {
			t.Fatal(err)
		}
		if len(held) != len(ids) {
			t.Fatalf("%s: %d answers for %d devices", what, len(held), len(ids))
		}
		for _, id := range ids {
			wanted := false
			for _, w := range want {
				wanted = wanted || w == id
			}
			if held[id] != wanted {
				t.Fatalf("%s: device %s held %v, want %v", what, id, held[id], wanted)
			}
		}
	}
	var first []string
	for _, body := range windows {
		w := f.create(f.a.Org, body)
		first = append(first, f.occurrences(f.a.Org, "windowId="+w.ID)[0].ID)
	}
	// Scheduled occurrences hold nothing.
	check(maintenance.Alerts)
	check(maintenance.Patches)
	if held, err := svc.HeldSubject(ctx, f.e.App.DB, maintenance.Alerts, maintenance.Subject{OrgID: f.a.OrgID, SiteID: site.ID}); err != nil || held {
		t.Fatalf("a scheduled window holds a subject: %v %v", held, err)
	}
	for _, id := range first {
		f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+id+"/start", nil)
	}
	check(maintenance.Alerts, plain, branch, grouped, named)
	check(maintenance.Patches, branch)
	check(maintenance.Scripts, grouped)
	check(maintenance.Automations, named)
	if held, err := svc.HeldFromAutomations(ctx, []string{named, plain}); err != nil || !held[named] || held[plain] {
		t.Fatalf("held from automations %v %v", held, err)
	}
	// A subject (a monitor, an SNMP device) is held by a window over its whole organization or
	// its site, or over one of its devices.
	subject := func(what maintenance.Suppression, sub maintenance.Subject, want bool) {
		t.Helper()
		if held, err := svc.HeldSubject(ctx, f.e.App.DB, what, sub); err != nil || held != want {
			t.Fatalf("%s: %+v held %v (%v), want %v", what, sub, held, err, want)
		}
	}
	subject(maintenance.Alerts, maintenance.Subject{OrgID: f.a.OrgID}, true)
	subject(maintenance.Alerts, maintenance.Subject{OrgID: f.b.OrgID, SiteID: f.b.SiteID, DeviceIDs: []string{foreign}}, false)
	subject(maintenance.Patches, maintenance.Subject{OrgID: f.a.OrgID, SiteID: site.ID}, true)
	subject(maintenance.Patches, maintenance.Subject{OrgID: f.a.OrgID, SiteID: f.a.SiteID}, false)
	subject(maintenance.Patches, maintenance.Subject{OrgID: f.a.OrgID, DeviceIDs: []string{plain, branch}}, true)
	subject(maintenance.Patches, maintenance.Subject{OrgID: f.b.OrgID, SiteID: site.ID}, false)
	subject(maintenance.Scripts, maintenance.Subject{OrgID: f.a.OrgID, SiteID: f.a.SiteID}, false)
	subject(maintenance.Scripts, maintenance.Subject{OrgID: f.a.OrgID, SiteID: f.a.SiteID, DeviceIDs: []string{grouped}}, true)
	subject(maintenance.Automations, maintenance.Subject{OrgID: f.a.OrgID, SiteID: f.a.SiteID, DeviceIDs: []string{plain, "not-an-id"}}, false)
	subject(maintenance.Automations, maintenance.Subject{OrgID: f.a.OrgID, DeviceIDs: []string{named}}, true)
	if _, err := svc.Held(ctx, f.e.App.DB, "naps", ids); err == nil {
		t.Fatal("an unknown suppression is an error")
	}
	// Ended, the window holds nothing.
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+first[1]+"/end", nil)
	check(maintenance.Patches)
}

// A window in effect that suppresses scripts holds executions back from its devices: a
// device in it is skipped, an execution on its devices alone is refused (409), and another
// tenant's device in a window looks like any unknown device.
func TestAWindowHoldsScriptsBack(t *testing.T) {
	f := newFixture(t)
	held, free := f.device(f.a, "held"), f.device(f.a, "free")
	foreign := f.device(f.b, "foreign")
	for _, ten := range []apptest.Tenant{f.a, f.b} {
		targets := map[string]any{"type": "devices", "ids": []string{held}}
		if ten.OrgID == f.b.OrgID {
			targets["ids"] = []string{foreign}
		}
		w := f.create(ten.Org, merge(nightly("Quiet", targets), map[string]any{"suppressScripts": true}))
		f.e.Must(200, ten.Org, "POST", api+"/maintenance/occurrences/"+f.occurrences(ten.Org, "windowId="+w.ID)[0].ID+"/start", nil)
	}
	var sc struct {
		ID string `json:"id"`
	}
	f.e.Must(201, f.a.Org, "POST", api+"/scripts", map[string]any{"name": "Hello", "osTypes": []string{"linux"}, "language": "sh",
		"content": "echo hi"}).JSON(t, &sc)
	run := func(ids ...string) *apptest.Response {
		return f.e.Do(f.a.Org, "POST", api+"/scripts/"+sc.ID+"/execute", map[string]any{"deviceIds": ids})
	}
	if r := run(held); r.Status != 409 || r.ErrorCode() != "MAINTENANCE_WINDOW" {
		t.Fatalf("an execution on a held device alone = %d %s", r.Status, r.Body)
	}
	var res struct {
		Executions []struct{ DeviceID string }       `json:"executions"`
		Skipped    []struct{ DeviceID, Code string } `json:"skipped"`
		Failed     []struct{ DeviceID, Code string } `json:"failed"`
	}
	r := run(held, free, foreign)
	if r.Status != 202 {
		t.Fatalf("an execution on held and free devices = %d %s", r.Status, r.Body)
	}
	r.JSON(t, &res)
	if len(res.Executions) != 1 || res.Executions[0].DeviceID != free || len(res.Skipped) != 1 || res.Skipped[0].DeviceID != held ||
		res.Skipped[0].Code != "MAINTENANCE_WINDOW" || len(res.Failed) != 1 || res.Failed[0].DeviceID != foreign {
		t.Fatalf("outcome %+v", res)
	}
}

// near reports whether t is within a few seconds after want: the fake clock runs on from where
// it was set.
func near(t, want time.Time) bool { return !t.Before(want) && t.Sub(want) < 5*time.Second }

func merge(a, b map[string]any) map[string]any {
	for k, v := range b {
		a[k] = v
	}
	return a
}

func TestNextOccurrence(t *testing.T) {
	f := newFixture(t)
	w := f.create(f.a.Org, nightly("Nightly", all))
	occ := f.occurrences(f.a.Org, "windowId="+w.ID)
	svc, ctx := f.service(), context.Background()
	next, err := svc.NextOccurrence(ctx, f.a.OrgID, w.ID, "")
	if err != nil || next == nil || next.ID != occ[0].ID {
		t.Fatalf("next %+v %v", next, err)
	}
	if active, err := svc.WindowActive(ctx, w.ID); err != nil || active {
		t.Fatalf("window active before a start %v %v", active, err)
	}
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+occ[1].ID+"/start", nil)
	if next, err = svc.NextOccurrence(ctx, f.a.OrgID, w.ID, ""); err != nil || next == nil || next.ID != occ[0].ID {
		t.Fatalf("next with a later one active %+v %v", next, err)
	}
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+occ[0].ID+"/start", nil)
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+occ[0].ID+"/end", nil)
	if next, err = svc.NextOccurrence(ctx, f.a.OrgID, w.ID, ""); err != nil || next == nil || next.ID != occ[1].ID || next.Status != maintenance.Active {
		t.Fatalf("next while one is active %+v %v", next, err)
	}
	if next, err = svc.NextOccurrence(ctx, f.a.OrgID, w.ID, occ[1].ID); err != nil || next == nil || next.ID != occ[2].ID {
		t.Fatalf("next passing over the active one %+v %v", next, err)
	}
	if active, err := svc.WindowActive(ctx, w.ID); err != nil || !active {
		t.Fatalf("window active %v %v", active, err)
	}
	if _, err := svc.WindowActive(ctx, f.a.OrgID); err == nil {
		t.Fatal("WindowActive of no window is an error")
	}
	if _, err := svc.NextOccurrence(ctx, f.b.OrgID, w.ID, ""); err == nil {
		t.Fatal("another organization's window is not found")
	}
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/windows/"+w.ID+"/cancel", nil)
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+occ[1].ID+"/end", nil)
	if next, err = svc.NextOccurrence(ctx, f.a.OrgID, w.ID, ""); err != nil || next != nil {
		t.Fatalf("next of a cancelled window %+v %v", next, err)
	}
}

func TestAnotherTenantGetsNotFound(t *testing.T) {
	f := newFixture(t)
	w := f.create(f.a.Org, nightly("Nightly", all))
	occ := f.occurrences(f.a.Org, "windowId="+w.ID)
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+occ[1].ID+"/start", nil)
	for _, c := range []apptest.Caller{f.b.Org, f.b.Partner} {
		for _, r := range []struct{ method, path string }{
			{"GET", "/maintenance/windows/" + w.ID},
			{"PATCH", "/maintenance/windows/" + w.ID},
			{"DELETE", "/maintenance/windows/" + w.ID},
			{"POST", "/maintenance/windows/" + w.ID + "/cancel"},
			{"GET", "/maintenance/windows/" + w.ID + "/occurrences"},
			{"GET", "/maintenance/occurrences/" + occ[0].ID},
			{"POST", "/maintenance/occurrences/" + occ[0].ID + "/start"},
			{"POST", "/maintenance/occurrences/" + occ[1].ID + "/end"},
		} {
			var body any
			if r.method == "PATCH" {
				body = map[string]any{"name": "Taken"}
			}
			if got := f.e.Do(c, r.method, api+r.path, body); got.Status != 404 {
				t.Fatalf("%s %s by another tenant = %d %s, want 404", r.method, r.path, got.Status, got.Body)
			}
		}
		for _, path := range []string{"/maintenance/windows", "/maintenance/occurrences", "/maintenance/active",
			"/maintenance/occurrences?windowId=" + w.ID} {
			var list struct{ Data []any }
			f.e.Must(200, c, "GET", api+path, nil).JSON(t, &list)
			if len(list.Data) != 0 {
				t.Fatalf("GET %s by another tenant lists %d rows", path, len(list.Data))
			}
		}
	}
	// Nothing changed.
	if got := f.occurrence(f.a.Org, occ[1].ID); got.Status != maintenance.Active {
		t.Fatalf("after the other tenant's calls %+v", got)
	}
}

func TestValidation(t *testing.T) {
	f := newFixture(t)
	var bSite struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	f.e.Must(200, f.b.Partner, "GET", api+"/orgs/sites?orgId="+f.b.OrgID, nil).JSON(t, &bSite)
	var bGroup struct {
		ID string `json:"id"`
	}
	f.e.Must(201, f.b.Org, "POST", api+"/groups", map[string]any{"name": "Theirs", "type": "static"}).JSON(t, &bGroup)
	bDevice := f.device(f.b, "theirs")
	aDevice := f.device(f.a, "ours")
	tests := []struct {
		name  string
		edit  map[string]any
		field string
	}{
		{"bad timezone", map[string]any{"timezone": "Europe/Atlantis"}, "timezone"},
		{"end before start", map[string]any{"endTime": "2026-11-26T01:00:00"}, "endTime"},
		{"bad RRULE", map[string]any{"recurrence": "custom", "rrule": "FREQ=WEEKLY;BYDAY=XX"}, "rrule"},
		{"another tenant's site", map[string]any{"targets": map[string]any{"type": "sites", "ids": []string{bSite.Data[0].ID}}}, "targets.ids[0]"},
		{"another tenant's group", map[string]any{"targets": map[string]any{"type": "groups", "ids": []string{bGroup.ID}}}, "targets.ids[0]"},
		{"another tenant's device", map[string]any{"targets": map[string]any{"type": "devices", "ids": []string{aDevice, bDevice}}}, "targets.ids[1]"},
		{"a device given as a site", map[string]any{"targets": map[string]any{"type": "sites", "ids": []string{aDevice}}}, "targets.ids[0]"},
		{"another tenant's organization", map[string]any{"orgId": f.b.OrgID}, "orgId"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := f.e.Do(f.a.Partner, "POST", api+"/maintenance/windows", merge(merge(nightly("Bad", all), map[string]any{"orgId": f.a.OrgID}), tc.edit))
			var env struct {
				Error struct {
					Code    string `json:"code"`
					Details []struct {
						Field string `json:"field"`
					} `json:"details"`
				} `json:"error"`
			}
			r.JSON(t, &env)
			if r.Status != 400 || env.Error.Code != "VALIDATION_ERROR" {
				t.Fatalf("%d %s, want 400", r.Status, r.Body)
			}
			for _, d := range env.Error.Details {
				if d.Field == tc.field {
					return
				}
			}
			t.Fatalf("details %s, want one about %s", r.Body, tc.field)
		})
	}
	// A window whose every occurrence is over is refused.
	for _, body := range []map[string]any{
		{"name": "Past", "startTime": "2026-11-24T02:00:00", "endTime": "2026-11-24T04:00:00", "timezone": "UTC", "recurrence": "once", "targets": all},
		{"name": "Ended", "startTime": "2026-11-01T02:00:00", "endTime": "2026-11-01T04:00:00", "timezone": "UTC", "recurrence": "daily",
			"recurrenceEnd": "2026-11-20T00:00:00Z", "targets": all},
	} {
		if r := f.e.Do(f.a.Org, "POST", api+"/maintenance/windows", body); r.Status != 400 {
			t.Fatalf("%s: %d %s, want 400", body["name"], r.Status, r.Body)
		}
	}
	// One begun in the past is written from its occurrence under way.
	begun := f.create(f.a.Org, map[string]any{"name": "Begun", "startTime": "2026-11-01T08:00:00", "endTime": "2026-11-01T12:00:00",
		"timezone": "UTC", "recurrence": "daily", "targets": all})
	if occ := f.occurrences(f.a.Org, "windowId="+begun.ID); len(occ) == 0 || !occ[0].StartsAt.Equal(time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("a window begun in the past: %+v", occ)
	}
	// A partner caller names the organization.
	if r := f.e.Do(f.a.Partner, "POST", api+"/maintenance/windows", nightly("No org", all)); r.Status != 400 {
		t.Fatalf("without orgId %d %s", r.Status, r.Body)
	}
	// A change is validated as a create is.
	w := f.create(f.a.Org, nightly("Fine", all))
	for _, body := range []map[string]any{{"timezone": "Nowhere/Land"}, {"endTime": "2026-11-25T00:00:00"},
		{"targets": map[string]any{"type": "devices", "ids": []string{bDevice}}}} {
		if r := f.e.Do(f.a.Org, "PATCH", api+"/maintenance/windows/"+w.ID, body); r.Status != 400 {
			t.Fatalf("PATCH %v = %d %s, want 400", body, r.Status, r.Body)
		}
	}
	if got := f.occurrences(f.a.Org, "windowId="+w.ID); len(got) != 91 {
		t.Fatalf("a refused change touched the occurrences: %d", len(got))
	}
}

func TestPermissions(t *testing.T) {
	f := newFixture(t)
	w := f.create(f.a.Org, nightly("Nightly", all))
	_, c := f.e.CreateUser("reader@gale.test", access.LevelOrganization, f.a.PartnerID, f.a.OrgID, readerRole(t, f))
	f.e.Must(200, c, "GET", api+"/maintenance/windows/"+w.ID, nil)
	f.e.Must(403, c, "POST", api+"/maintenance/windows/"+w.ID+"/cancel", nil)
	f.e.Must(403, c, "POST", api+"/maintenance/windows", nightly("Mine", all))
}

// readerRole makes a role of organization a that may read maintenance windows only.
func readerRole(t *testing.T, f fixture) string {
	var role struct {
		ID string `json:"id"`
	}
	f.e.Must(201, f.a.Partner, "POST", api+"/roles", map[string]any{"name": "Maintenance reader", "scope": "organization",
		"orgId": f.a.OrgID, "permissions": []string{"maintenance:read"}}).JSON(t, &role)
	return role.ID
}

// NextOccurrences gives each window of the caller's scope its occurrence under way, else its
// next one; a window with neither, and another tenant's, are left out.
func TestNextOccurrences(t *testing.T) {
	f := newFixture(t)
	w := f.create(f.a.Org, nightly("Nightly", all))
	once := f.create(f.a.Org, map[string]any{"name": "Once", "startTime": "2026-11-26T02:00:00", "endTime": "2026-11-26T04:00:00",
		"timezone": "UTC", "recurrence": "once", "targets": all})
	theirs := f.create(f.b.Org, nightly("Theirs", all))
	occ := f.occurrences(f.a.Org, "windowId="+w.ID)
	ctx := access.WithPrincipal(context.Background(), &access.Principal{Kind: access.ActorUser,
		Scope: access.Scope{Level: access.LevelOrganization, PartnerID: f.a.PartnerID, OrgID: f.a.OrgID}})
	next := func() map[string]maintenance.MaintenanceOccurrence {
		t.Helper()
		got, err := f.service().NextOccurrences(ctx, []string{w.ID, once.ID, theirs.ID, "not-an-id"})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got[theirs.ID]; ok {
			t.Fatal("another tenant's window has a next occurrence")
		}
		return got
	}
	if got := next(); got[w.ID].ID != occ[0].ID || got[w.ID].Status != maintenance.Scheduled || got[once.ID].WindowID != once.ID {
		t.Fatalf("next occurrences %+v", got)
	}
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+occ[1].ID+"/start", nil)
	if got := next(); got[w.ID].ID != occ[0].ID {
		t.Fatalf("with a later one active, the first scheduled comes first: %+v", got[w.ID])
	}
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+occ[0].ID+"/start", nil)
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+occ[0].ID+"/end", nil)
	if got := next(); got[w.ID].ID != occ[1].ID || got[w.ID].Status != maintenance.Active {
		t.Fatalf("the occurrence under way: %+v", got[w.ID])
	}
	onceOcc := f.occurrences(f.a.Org, "windowId="+once.ID)[0]
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+onceOcc.ID+"/start", nil)
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+onceOcc.ID+"/end", nil)
	if _, ok := next()[once.ID]; ok {
		t.Fatal("a window that is over has a next occurrence")
	}
}
