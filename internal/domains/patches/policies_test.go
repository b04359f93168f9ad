package patches_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/maintenance"
	"gale/internal/domains/patches"
	"gale/internal/platform/clock"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

type policyFixture struct {
	fixture
	clk *clock.Fake
	pol *patches.Policies
}

// newPolicyFixture runs the server on a fake clock that starts at the real time, as scans
// record when a device first saw a patch on the real clock.
func newPolicyFixture(t *testing.T) policyFixture {
	clk := clock.NewFake(time.Now())
	e := apptest.New(t, apptest.WithClock(clk))
	admin := e.Admin()
	f := fixture{e: e, a: e.NewTenant(admin, "Alpha"), b: e.NewTenant(admin, "Bravo"), s: app.Service[*patches.Service](e.App),
		dev: app.Service[*devices.Service](e.App)}
	return policyFixture{fixture: f, clk: clk, pol: app.Service[*patches.Policies](e.App)}
}

func (f policyFixture) createPolicy(c apptest.Caller, body map[string]any) patches.PatchPolicy {
	f.e.T.Helper()
	var x patches.PatchPolicy
	f.e.Must(http.StatusCreated, c, "POST", api+"/patch-policies", body).JSON(f.e.T, &x)
	return x
}

func (f policyFixture) getPolicy(c apptest.Caller, id string) patches.PatchPolicy {
	f.e.T.Helper()
	var x patches.PatchPolicy
	f.e.Must(http.StatusOK, c, "GET", api+"/patch-policies/"+id, nil).JSON(f.e.T, &x)
	return x
}

func (f policyFixture) run() {
	f.e.T.Helper()
	if err := f.pol.Run(context.Background()); err != nil {
		f.e.T.Fatal(err)
	}
}

// runDue moves the clock past the policy's next run and runs the policies.
func (f policyFixture) runDue(c apptest.Caller, id string) patches.PatchPolicy {
	f.e.T.Helper()
	x := f.getPolicy(c, id)
	if x.NextRunAt == nil {
		f.e.T.Fatalf("policy %s has no next run", id)
	}
	if d := x.NextRunAt.Sub(f.clk.Now()); d > 0 {
		f.clk.Advance(d + time.Second)
	}
	f.run()
	return f.getPolicy(c, id)
}

func (f policyFixture) group(ten apptest.Tenant, name string, deviceIDs ...string) string {
	f.e.T.Helper()
	g := f.e.Must(http.StatusCreated, ten.Partner, "POST", api+"/groups", map[string]any{"orgId": ten.OrgID, "name": name, "type": "static"}).Map(f.e.T)
	id := g["id"].(string)
	if len(deviceIDs) == 0 {
		return id
	}
	if r := f.e.Do(ten.Partner, "POST", api+"/groups/"+id+"/devices", map[string]any{"deviceIds": deviceIDs}); r.Status >= 300 {
		f.e.T.Fatalf("add group devices: %d %s", r.Status, r.Body)
	}
	return id
}

// installJobs lists the partner's install jobs, newest first, with their devices.
func (f policyFixture) installJobs(c apptest.Caller) []patches.PatchJobDetail {
	f.e.T.Helper()
	var list struct{ Data []patches.PatchJob }
	f.e.Must(200, c, "GET", api+"/patches/jobs?kind=install&limit=100", nil).JSON(f.e.T, &list)
	out := make([]patches.PatchJobDetail, len(list.Data))
	for i, j := range list.Data {
		out[i] = f.job(c, j.ID)
	}
	return out
}

func deviceIDsOf(j patches.PatchJobDetail) []string {
	var out []string
	for _, d := range j.Devices {
		out = append(out, d.DeviceID)
	}
	slices.Sort(out)
	return out
}

func sorted(ids ...string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// installPayload reads the patch_install command of a device in a job.
func (f policyFixture) installPayload(c apptest.Caller, j patches.PatchJobDetail, deviceID string) agentproto.PatchInstall {
	f.e.T.Helper()
	for _, d := range j.Devices {
		if d.DeviceID == deviceID && d.CommandID != nil {
			var dc devices.DeviceCommand
			f.e.Must(200, c, "GET", api+"/devices/"+deviceID+"/commands/"+*d.CommandID, nil).JSON(f.e.T, &dc)
			var p agentproto.PatchInstall
			if err := json.Unmarshal(dc.Payload, &p); err != nil {
				f.e.T.Fatal(err)
			}
			return p
		}
	}
	f.e.T.Fatalf("no command for %s in job %+v", deviceID, j)
	return agentproto.PatchInstall{}
}

var nightly = map[string]any{"frequency": "daily", "time": "03:00"}

var orgTargets = map[string]any{"type": "organization"}

func TestPatchPolicyCreateReadChangeDelete(t *testing.T) {
	f := newPolicyFixture(t)
	c := f.a.Partner
	x := f.createPolicy(c, map[string]any{"orgId": f.a.OrgID, "name": " Servers ", "description": "line one\nline two",
		"autoApprove":  map[string]any{"categories": []string{"security"}, "severities": []string{"critical", "important"}},
		"deferralDays": 3, "deadlineDays": 14, "rebootBehavior": "never",
		"schedule": map[string]any{"frequency": "weekly", "time": "22:30", "daysOfWeek": []int{6, 2}, "timezone": "Europe/Berlin"},
		"targets":  orgTargets})
	if x.OrgID == nil || *x.OrgID != f.a.OrgID || x.PartnerID != f.a.PartnerID || x.Name != "Servers" || x.Description != "line one\nline two" ||
		!x.Enabled || x.DeferralDays != 3 || x.DeadlineDays == nil || *x.DeadlineDays != 14 || x.RebootBehavior != "never" ||
		x.Schedule == nil || x.Schedule.Timezone != "Europe/Berlin" || !slices.Equal(x.Schedule.DaysOfWeek, []int{2, 6}) ||
		x.MaintenanceWindowID != nil || x.Targets.Type != "organization" || len(x.Rings) != 0 || x.LastRunAt != nil || x.CreatedBy == nil {
		t.Fatalf("created %+v", x)
	}
	want, _ := x.Schedule.Next(f.clk.Now())
	if x.NextRunAt == nil || !x.NextRunAt.Equal(want) {
		t.Fatalf("next run %v, want %v", x.NextRunAt, want)
	}
	if got := f.getPolicy(f.a.Org, x.ID); got.Name != "Servers" {
		t.Fatalf("the organization's caller reads %+v", got)
	}
	// Names are unique in their scope, whatever the case; another scope may repeat one.
	r := f.e.Do(c, "POST", api+"/patch-policies", map[string]any{"orgId": f.a.OrgID, "name": "SERVERS", "schedule": nightly, "targets": orgTargets})
	if r.Status != 409 || r.ErrorCode() != patches.CodePolicyNameTaken {
		t.Fatalf("the same name again = %d %s", r.Status, r.Body)
	}
	wide := f.createPolicy(c, map[string]any{"name": "Servers", "schedule": nightly, "targets": orgTargets})
	if wide.OrgID != nil || wide.RebootBehavior != "if_required" || wide.Schedule.Timezone != "UTC" || len(wide.AutoApprove.Categories) != 0 {
		t.Fatalf("partner-wide %+v", wide)
	}
	sys := f.createPolicy(f.e.Admin(), map[string]any{"partnerId": f.b.PartnerID, "name": "Servers", "schedule": nightly, "targets": orgTargets})
	if sys.OrgID != nil || sys.PartnerID != f.b.PartnerID {
		t.Fatalf("a system caller's partner-wide policy %+v", sys)
	}
	if r := f.e.Do(f.e.Admin(), "POST", api+"/patch-policies", map[string]any{"name": "No partner", "schedule": nightly, "targets": orgTargets}); r.Status != 400 {
		t.Fatalf("a system caller naming no partner = %d %s", r.Status, r.Body)
	}
	own := f.createPolicy(f.a.Org, map[string]any{"name": "Desktops", "schedule": nightly, "targets": orgTargets})
	if own.OrgID == nil || *own.OrgID != f.a.OrgID {
		t.Fatalf("an organization caller's policy %+v", own)
	}
	// A partner-wide policy is for callers reaching the whole partner.
	f.e.Must(404, f.a.Org, "GET", api+"/patch-policies/"+wide.ID, nil)
	var list struct{ Data []patches.PatchPolicy }
	f.e.Must(200, f.a.Org, "GET", api+"/patch-policies", nil).JSON(t, &list)
	if len(list.Data) != 2 {
		t.Fatalf("the organization's caller lists %+v", list.Data)
	}
	f.e.Must(200, c, "GET", api+"/patch-policies", nil).JSON(t, &list)
	if len(list.Data) != 3 || list.Data[0].ID != own.ID {
		t.Fatalf("the partner's caller lists %+v", list.Data)
	}
	f.e.Must(200, c, "GET", api+"/patch-policies?orgId="+f.a.OrgID+"&enabled=true", nil).JSON(t, &list)
	if len(list.Data) != 2 {
		t.Fatalf("the organization's policies %+v", list.Data)
	}

	// PATCH: absent fields stay; a new schedule moves the next run; -1 removes the deadline;
	// disabling clears the next run; a rename onto a taken name is 409.
	var changed patches.PatchPolicy
	f.e.Must(200, c, "PATCH", api+"/patch-policies/"+x.ID, map[string]any{"schedule": nightly, "deadlineDays": -1}).JSON(t, &changed)
	want, _ = patches.PatchPolicySchedule{Frequency: "daily", Time: "03:00", Timezone: "UTC"}.Next(f.clk.Now())
	if changed.Name != "Servers" || changed.DeadlineDays != nil || changed.DeferralDays != 3 || changed.NextRunAt == nil ||
		!changed.NextRunAt.Equal(want) || len(changed.AutoApprove.Categories) != 1 {
		t.Fatalf("changed %+v (next run want %v)", changed, want)
	}
	f.e.Must(200, c, "PATCH", api+"/patch-policies/"+x.ID, map[string]any{"enabled": false}).JSON(t, &changed)
	if changed.Enabled || changed.NextRunAt != nil {
		t.Fatalf("disabled %+v", changed)
	}
	if r := f.e.Do(c, "PATCH", api+"/patch-policies/"+x.ID, map[string]any{"name": "desktops"}); r.Status != 409 || r.ErrorCode() != patches.CodePolicyNameTaken {
		t.Fatalf("rename onto a taken name = %d %s", r.Status, r.Body)
	}
	if r := f.e.Do(c, "PATCH", api+"/patch-policies/"+x.ID, map[string]any{"deferralDays": 400}); r.Status != 400 {
		t.Fatalf("PATCH with a bad deferral = %d %s", r.Status, r.Body)
	}
	f.e.Must(204, c, "DELETE", api+"/patch-policies/"+x.ID, nil)
	f.e.Must(404, c, "GET", api+"/patch-policies/"+x.ID, nil)
	f.e.Must(404, c, "DELETE", api+"/patch-policies/"+x.ID, nil)
}

func TestPatchPolicyValidation(t *testing.T) {
	f := newPolicyFixture(t)
	otherGroup := f.group(f.b, "Theirs")
	otherDevice := f.device(f.b, "theirs", "linux")
	base := func(over map[string]any) map[string]any {
		b := map[string]any{"orgId": f.a.OrgID, "name": "P", "schedule": nightly, "targets": orgTargets}
		for k, v := range over {
			if v == nil {
				delete(b, k)
			} else {
				b[k] = v
			}
		}
		return b
	}
	ring := func(delay int, groups ...string) map[string]any {
		return map[string]any{"name": "r" + string(rune('a'+delay)), "groupIds": groups, "delayDays": delay}
	}
	mine := f.group(f.a, "Mine")
	for name, body := range map[string]map[string]any{
		"no name":              base(map[string]any{"name": "  "}),
		"no schedule":          base(map[string]any{"schedule": nil}),
		"schedule and window":  base(map[string]any{"maintenanceWindowId": "0194b9f5-0000-7000-8000-000000000000"}),
		"unknown window":       base(map[string]any{"schedule": nil, "maintenanceWindowId": "0194b9f5-0000-7000-8000-000000000000"}),
		"window, partner-wide": base(map[string]any{"orgId": nil, "schedule": nil, "maintenanceWindowId": "0194b9f5-0000-7000-8000-000000000000"}),
		"bad frequency":        base(map[string]any{"schedule": map[string]any{"frequency": "hourly", "time": "03:00"}}),
		"bad time":             base(map[string]any{"schedule": map[string]any{"frequency": "daily", "time": "24:00"}}),
		"bad zone":             base(map[string]any{"schedule": map[string]any{"frequency": "daily", "time": "03:00", "timezone": "Mars/Olympus"}}),
		"weekly without days":  base(map[string]any{"schedule": map[string]any{"frequency": "weekly", "time": "03:00"}}),
		"bad weekday":          base(map[string]any{"schedule": map[string]any{"frequency": "weekly", "time": "03:00", "daysOfWeek": []int{7}}}),
		"day 29":               base(map[string]any{"schedule": map[string]any{"frequency": "monthly", "time": "03:00", "dayOfMonth": 29}}),
		"daily with a day":     base(map[string]any{"schedule": map[string]any{"frequency": "daily", "time": "03:00", "dayOfMonth": 1}}),
		"bad category":         base(map[string]any{"autoApprove": map[string]any{"categories": []string{"cosmetic"}, "severities": []string{}}}),
		"bad severity":         base(map[string]any{"autoApprove": map[string]any{"categories": []string{}, "severities": []string{"dire"}}}),
		"deferral too long":    base(map[string]any{"deferralDays": 366}),
		"negative deadline":    base(map[string]any{"deadlineDays": -1}),
		"bad reboot":           base(map[string]any{"rebootBehavior": "sometimes"}),
		"bad target type":      base(map[string]any{"targets": map[string]any{"type": "planet"}}),
		"sites without ids":    base(map[string]any{"targets": map[string]any{"type": "sites"}}),
		"another org":          base(map[string]any{"targets": map[string]any{"type": "organization", "ids": []string{f.b.OrgID}}}),
		"their group":          base(map[string]any{"targets": map[string]any{"type": "groups", "ids": []string{otherGroup}}}),
		"their device":         base(map[string]any{"targets": map[string]any{"type": "devices", "ids": []string{otherDevice}}}),
		"ring of their group":  base(map[string]any{"rings": []any{ring(0, otherGroup)}}),
		"ring without groups":  base(map[string]any{"rings": []any{ring(0)}}),
		"rings out of order":   base(map[string]any{"rings": []any{ring(5, mine), ring(2, mine)}}),
		"ring delay too long":  base(map[string]any{"rings": []any{ring(91, mine)}}),
		"eleven rings":         base(map[string]any{"rings": []any{ring(0, mine), ring(1, mine), ring(2, mine), ring(3, mine), ring(4, mine), ring(5, mine), ring(6, mine), ring(7, mine), ring(8, mine), ring(9, mine), ring(10, mine)}}),
		"another org's policy": base(map[string]any{"orgId": f.b.OrgID}),
	} {
		if r := f.e.Do(f.a.Partner, "POST", api+"/patch-policies", body); r.Status != 400 {
			t.Errorf("%s: %d %s, want 400", name, r.Status, r.Body)
		}
	}
	// The same rings in order, of the organization's group, are fine.
	f.createPolicy(f.a.Partner, base(map[string]any{"rings": []any{ring(0, mine), ring(2, mine)},
		"targets": map[string]any{"type": "groups", "ids": []string{mine}}}))
	// An organization's caller may not make a partner-wide policy of another organization.
	if r := f.e.Do(f.a.Org, "POST", api+"/patch-policies", base(map[string]any{"orgId": f.b.OrgID})); r.Status != 400 {
		t.Errorf("organization caller naming another organization: %d %s", r.Status, r.Body)
	}
}

func TestPatchPolicyOfAnotherTenantIsNotFound(t *testing.T) {
	f := newPolicyFixture(t)
	x := f.createPolicy(f.a.Partner, map[string]any{"orgId": f.a.OrgID, "name": "Ours", "schedule": nightly, "targets": orgTargets})
	wide := f.createPolicy(f.a.Partner, map[string]any{"name": "Ours wide", "schedule": nightly, "targets": orgTargets})
	for _, c := range []apptest.Caller{f.b.Partner, f.b.Org} {
		for _, id := range []string{x.ID, wide.ID} {
			for _, rt := range []struct {
				method string
				body   any
			}{{"GET", nil}, {"PATCH", map[string]any{"name": "Theirs"}}, {"DELETE", nil}} {
				if r := f.e.Do(c, rt.method, api+"/patch-policies/"+id, rt.body); r.Status != 404 {
					t.Errorf("%s %s as the other tenant = %d %s", rt.method, id, r.Status, r.Body)
				}
			}
		}
		var list struct{ Data []patches.PatchPolicy }
		f.e.Must(200, c, "GET", api+"/patch-policies", nil).JSON(t, &list)
		if len(list.Data) != 0 {
			t.Errorf("the other tenant lists %+v", list.Data)
		}
	}
	if got := f.getPolicy(f.a.Partner, x.ID); got.Name != "Ours" {
		t.Fatalf("the other tenant changed the policy: %+v", got)
	}
}

func TestPatchPolicyScheduleNext(t *testing.T) {
	ny := "America/New_York"
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name  string
		sched patches.PatchPolicySchedule
		from  string
		want  string
	}{
		{"daily, later today", patches.PatchPolicySchedule{Frequency: "daily", Time: "03:00", Timezone: "UTC"}, "2026-11-25T01:00:00Z", "2026-11-25T03:00:00Z"},
		{"daily, at the time: tomorrow", patches.PatchPolicySchedule{Frequency: "daily", Time: "03:00", Timezone: "UTC"}, "2026-11-25T03:00:00Z", "2026-11-26T03:00:00Z"},
		{"daily in New York, winter", patches.PatchPolicySchedule{Frequency: "daily", Time: "03:00", Timezone: ny}, "2026-01-10T12:00:00Z", "2026-01-11T08:00:00Z"},
		{"daily in New York, summer", patches.PatchPolicySchedule{Frequency: "daily", Time: "03:00", Timezone: ny}, "2026-07-10T12:00:00Z", "2026-07-11T07:00:00Z"},
		{"across spring forward", patches.PatchPolicySchedule{Frequency: "daily", Time: "01:30", Timezone: ny}, "2026-03-07T07:00:00Z", "2026-03-08T06:30:00Z"},
		{"after spring forward", patches.PatchPolicySchedule{Frequency: "daily", Time: "01:30", Timezone: ny}, "2026-03-08T07:00:00Z", "2026-03-09T05:30:00Z"},
		{"a skipped time runs once the clock moved on", patches.PatchPolicySchedule{Frequency: "daily", Time: "02:30", Timezone: ny}, "2026-03-08T05:00:00Z", "2026-03-08T07:30:00Z"},
		{"a repeated time runs at its first instance", patches.PatchPolicySchedule{Frequency: "daily", Time: "01:30", Timezone: ny}, "2026-11-01T04:00:00Z", "2026-11-01T05:30:00Z"},
		{"and not again an hour later", patches.PatchPolicySchedule{Frequency: "daily", Time: "01:30", Timezone: ny}, "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"},
		{"weekly, next Saturday", patches.PatchPolicySchedule{Frequency: "weekly", Time: "22:00", DaysOfWeek: []int{6}, Timezone: "UTC"}, "2026-11-25T12:00:00Z", "2026-11-28T22:00:00Z"},
		{"weekly, Sunday or Wednesday", patches.PatchPolicySchedule{Frequency: "weekly", Time: "22:00", DaysOfWeek: []int{0, 3}, Timezone: "UTC"}, "2026-11-25T23:00:00Z", "2026-11-29T22:00:00Z"},
		{"weekly in Berlin, the local day", patches.PatchPolicySchedule{Frequency: "weekly", Time: "00:30", DaysOfWeek: []int{4}, Timezone: "Europe/Berlin"}, "2026-11-25T12:00:00Z", "2026-11-25T23:30:00Z"},
		{"monthly on the 15th", patches.PatchPolicySchedule{Frequency: "monthly", Time: "04:00", DayOfMonth: 15, Timezone: "UTC"}, "2026-11-25T12:00:00Z", "2026-12-15T04:00:00Z"},
		{"last day of February", patches.PatchPolicySchedule{Frequency: "monthly", Time: "04:00", DayOfMonth: -1, Timezone: "UTC"}, "2026-02-01T00:00:00Z", "2026-02-28T04:00:00Z"},
		{"last day in a leap year", patches.PatchPolicySchedule{Frequency: "monthly", Time: "04:00", DayOfMonth: -1, Timezone: "UTC"}, "2028-02-10T00:00:00Z", "2028-02-29T04:00:00Z"},
		{"last day, then the next month's", patches.PatchPolicySchedule{Frequency: "monthly", Time: "04:00", DayOfMonth: -1, Timezone: "UTC"}, "2026-02-28T04:00:00Z", "2026-03-31T04:00:00Z"},
		{"last day across a year", patches.PatchPolicySchedule{Frequency: "monthly", Time: "23:00", DayOfMonth: -1, Timezone: ny}, "2026-12-31T12:00:00Z", "2027-01-01T04:00:00Z"},
	} {
		got, err := c.sched.Next(at(c.from))
		if err != nil || !got.Equal(at(c.want)) {
			t.Errorf("%s: Next(%s) = %v (%v), want %s", c.name, c.from, got, err, c.want)
		}
	}
}

func TestPatchPolicyApprovesDefersAndInstalls(t *testing.T) {
	f := newPolicyFixture(t)
	c := f.a.Partner
	web := f.device(f.a, "web-01", "linux")
	f.device(f.a, "never-scanned", "linux")
	ids := f.seedPatches(f.a, web, upd("openssl", "3.0.1-1", "3.0.2-1", true), upd("curl", "7.1-1", "7.2-1", false), upd("vim", "9.0", "9.1", false))
	f.e.Must(200, c, "POST", api+"/patches/"+ids["curl"]+"/approve", nil)
	x := f.createPolicy(c, map[string]any{"orgId": f.a.OrgID, "name": "Nightly", "deferralDays": 2, "schedule": nightly, "targets": orgTargets,
		"autoApprove": map[string]any{"categories": []string{"security"}, "severities": []string{"critical", "important", "moderate", "low", "unknown"}}})

	// Not due yet: nothing happens.
	f.run()
	if got := f.getPolicy(c, x.ID); got.LastRunAt != nil {
		t.Fatalf("ran before its time: %+v", got)
	}
	// The first run approves openssl (security) but installs nothing: every patch is newer
	// than the two days of deferral.
	x = f.runDue(c, x.ID)
	if x.LastRunAt == nil || x.LastApproved != 1 || len(x.LastJobIDs) != 0 || x.NextRunAt == nil || !x.NextRunAt.After(f.clk.Now()) {
		t.Fatalf("after the first run: %+v", x)
	}
	var approvals struct{ Data []patches.PatchApproval }
	f.e.Must(200, c, "GET", api+"/patches/approvals?patchId="+ids["openssl"], nil).JSON(t, &approvals)
	if len(approvals.Data) != 1 || approvals.Data[0].Status != patches.ApprovalApproved || approvals.Data[0].OrgID == nil ||
		*approvals.Data[0].OrgID != f.a.OrgID || approvals.Data[0].DecidedBy == nil || *approvals.Data[0].DecidedBy != "policy Nightly" {
		t.Fatalf("the policy's approval %+v", approvals.Data)
	}
	if p := f.patch(c, ids["vim"]); p.PatchApproval != patches.ApprovalPending {
		t.Fatalf("vim (a feature) was decided: %s", p.PatchApproval)
	}
	if jobs := f.installJobs(c); len(jobs) != 0 {
		t.Fatalf("jobs within the deferral: %+v", jobs)
	}
	// A day later, still deferred.
	x = f.runDue(c, x.ID)
	if len(x.LastJobIDs) != 0 {
		t.Fatalf("installed on day one: %+v", x)
	}
	// Past two days: one job installs the approved patches, the newest versions, not vim.
	x = f.runDue(c, x.ID)
	if len(x.LastJobIDs) != 1 {
		t.Fatalf("after the deferral: %+v", x)
	}
	jobs := f.installJobs(c)
	if len(jobs) != 1 || jobs[0].ID != x.LastJobIDs[0] || !slices.Equal(deviceIDsOf(jobs[0]), []string{web}) || jobs[0].OrgID == nil ||
		jobs[0].CreatedBy == nil || *jobs[0].CreatedBy != "policy Nightly" {
		t.Fatalf("install jobs %+v", jobs)
	}
	payload := f.installPayload(c, jobs[0], web)
	if !slices.Equal(payload.Packages, []agentproto.PackageVersion{{Name: "curl", Version: "7.2-1"}, {Name: "openssl", Version: "3.0.2-1"}}) {
		t.Fatalf("install payload %+v", payload)
	}
	// The next run leaves the device alone while its install is under way.
	x = f.runDue(c, x.ID)
	if len(x.LastJobIDs) != 0 || len(f.installJobs(c)) != 1 {
		t.Fatalf("a second install while one is queued: %+v", x)
	}
}

func TestPatchPolicyRingsAndDeadline(t *testing.T) {
	f := newPolicyFixture(t)
	c := f.a.Partner
	canary, broad, rest := f.device(f.a, "canary", "linux"), f.device(f.a, "broad", "linux"), f.device(f.a, "rest", "linux")
	var patchID string
	for _, d := range []string{canary, broad, rest} {
		patchID = f.seedPatches(f.a, d, upd("openssl", "1", "2", true))["openssl"]
	}
	f.e.Must(200, c, "POST", api+"/patches/"+patchID+"/approve", nil)
	g1, g2 := f.group(f.a, "Canaries", canary), f.group(f.a, "Broad", broad)
	x := f.createPolicy(c, map[string]any{"orgId": f.a.OrgID, "name": "Rings", "schedule": nightly, "targets": orgTargets,
		"rings": []any{map[string]any{"name": "canary", "groupIds": []string{g1}, "delayDays": 0},
			map[string]any{"name": "broad", "groupIds": []string{g2}, "delayDays": 3}}})
	x = f.runDue(c, x.ID)
	jobs := f.installJobs(c)
	if len(x.LastJobIDs) != 1 || len(jobs) != 1 || !slices.Equal(deviceIDsOf(jobs[0]), []string{canary}) {
		t.Fatalf("the first ring's run: %+v %+v", x, jobs)
	}
	// Days one and two: the second ring (and the devices of no ring, the implicit last one) wait.
	for range 2 {
		if x = f.runDue(c, x.ID); len(x.LastJobIDs) != 0 {
			t.Fatalf("the second ring went early: %+v", x)
		}
	}
	x = f.runDue(c, x.ID)
	jobs = f.installJobs(c)
	if len(x.LastJobIDs) != 1 || len(jobs) != 2 || !slices.Equal(deviceIDsOf(jobs[0]), sorted(broad, rest)) {
		t.Fatalf("the second ring's run: %+v %+v", x, jobs)
	}

}

func TestPatchPolicyDeadlineOverridesDeferralAndRings(t *testing.T) {
	f := newPolicyFixture(t)
	c := f.a.Partner
	late := f.device(f.a, "late", "linux")
	ids := f.seedPatches(f.a, late, upd("openssl", "1", "2", true))
	f.e.Must(200, c, "POST", api+"/patches/"+ids["openssl"]+"/approve", nil)
	g := f.group(f.a, "Slow", late)
	y := f.createPolicy(c, map[string]any{"orgId": f.a.OrgID, "name": "Deadline", "deferralDays": 30, "deadlineDays": 1, "schedule": nightly,
		"targets": map[string]any{"type": "devices", "ids": []string{late}},
		"rings":   []any{map[string]any{"name": "slow", "groupIds": []string{g}, "delayDays": 60}}})
	// The first run comes within a day of the scan, the second a day or more after it.
	if y = f.runDue(c, y.ID); len(y.LastJobIDs) != 0 {
		t.Fatalf("installed before the deadline: %+v", y)
	}
	if y = f.runDue(c, y.ID); len(y.LastJobIDs) != 1 {
		t.Fatalf("not installed at the deadline: %+v", y)
	}
	if got := deviceIDsOf(f.job(c, y.LastJobIDs[0])); !slices.Equal(got, []string{late}) {
		t.Fatalf("the deadline's job: %v", got)
	}
}

func TestPatchPolicyRunsOncePerWindowOccurrence(t *testing.T) {
	f := newPolicyFixture(t)
	c := f.a.Partner
	web := f.device(f.a, "web-01", "linux")
	ids := f.seedPatches(f.a, web, upd("openssl", "1", "2", true))
	f.e.Must(200, c, "POST", api+"/patches/"+ids["openssl"]+"/approve", nil)
	tomorrow := f.clk.Now().Add(24 * time.Hour).Format("2006-01-02")
	var w maintenance.MaintenanceWindow
	f.e.Must(201, f.a.Org, "POST", api+"/maintenance/windows", map[string]any{"name": "Patch night", "startTime": tomorrow + "T02:00:00",
		"endTime": tomorrow + "T04:00:00", "timezone": "UTC", "recurrence": "daily", "targets": map[string]any{"type": "all"},
		"suppressAlerts": false}).JSON(t, &w)
	x := f.createPolicy(f.a.Org, map[string]any{"name": "In the window", "maintenanceWindowId": w.ID, "targets": orgTargets})
	firstStart, _ := time.Parse(time.RFC3339, tomorrow+"T02:00:00Z")
	if x.NextRunAt == nil || !x.NextRunAt.Equal(firstStart) || x.MaintenanceWindowID == nil {
		t.Fatalf("window-based policy %+v, want its next run at %s", x, firstStart)
	}
	// A schedule replaces the window, and the window the schedule.
	var changed patches.PatchPolicy
	f.e.Must(200, f.a.Org, "PATCH", api+"/patch-policies/"+x.ID, map[string]any{"schedule": nightly}).JSON(t, &changed)
	if changed.MaintenanceWindowID != nil || changed.Schedule == nil || changed.NextRunAt == nil {
		t.Fatalf("to a schedule: %+v", changed)
	}
	f.e.Must(200, f.a.Org, "PATCH", api+"/patch-policies/"+x.ID, map[string]any{"maintenanceWindowId": w.ID}).JSON(t, &changed)
	if changed.MaintenanceWindowID == nil || changed.Schedule != nil || changed.NextRunAt == nil || !changed.NextRunAt.Equal(firstStart) {
		t.Fatalf("back to the window: %+v", changed)
	}
	if r := f.e.Do(f.a.Org, "PATCH", api+"/patch-policies/"+x.ID, map[string]any{"maintenanceWindowId": w.ID, "schedule": nightly}); r.Status != 400 {
		t.Fatalf("both = %d %s", r.Status, r.Body)
	}
	f.run()
	if got := f.getPolicy(c, x.ID); got.LastRunAt != nil {
		t.Fatalf("ran outside the window: %+v", got)
	}
	var occ struct {
		Data []maintenance.MaintenanceOccurrence
	}
	f.e.Must(200, f.a.Org, "GET", api+"/maintenance/windows/"+w.ID+"/occurrences?limit=2", nil).JSON(t, &occ)
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+occ.Data[0].ID+"/start", nil)
	f.run()
	f.run()
	x = f.getPolicy(c, x.ID)
	jobs := f.installJobs(c)
	if x.LastRunAt == nil || len(x.LastJobIDs) != 1 || len(jobs) != 1 {
		t.Fatalf("in the first occurrence: %+v, %d jobs", x, len(jobs))
	}
	if x.NextRunAt == nil || !x.NextRunAt.Equal(occ.Data[1].StartsAt) {
		t.Fatalf("after its run in the first occurrence, the next run is %v, want the second's start %s", x.NextRunAt, occ.Data[1].StartsAt)
	}
	// The install fails; the next occurrence tries again, once.
	cmd := *jobs[0].Devices[0].CommandID
	f.result(f.a, web, cmd, agentproto.ResultFailed, agentproto.PatchInstallResult{Manager: "apt",
		Packages: []agentproto.PackageOutcome{{Name: "openssl", Version: "2", Status: agentproto.PackageFailed, Error: "dpkg lock"}}})
	f.run()
	if got := f.installJobs(c); len(got) != 1 {
		t.Fatalf("a second job in the same occurrence: %d", len(got))
	}
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+occ.Data[0].ID+"/end", nil)
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+occ.Data[1].ID+"/start", nil)
	f.run()
	f.run()
	if got := f.installJobs(c); len(got) != 2 {
		t.Fatalf("jobs after the second occurrence: %d, want 2", len(got))
	}
}

func TestPatchPolicyHeldByAWindowSuppressingPatches(t *testing.T) {
	f := newPolicyFixture(t)
	c := f.a.Partner
	web := f.device(f.a, "web-01", "linux")
	ids := f.seedPatches(f.a, web, upd("openssl", "1", "2", true))
	f.e.Must(200, c, "POST", api+"/patches/"+ids["openssl"]+"/approve", nil)
	tomorrow := f.clk.Now().Add(24 * time.Hour).Format("2006-01-02")
	var w maintenance.MaintenanceWindow
	f.e.Must(201, f.a.Org, "POST", api+"/maintenance/windows", map[string]any{"name": "Freeze", "startTime": tomorrow + "T00:00:00",
		"endTime": tomorrow + "T23:00:00", "timezone": "UTC", "recurrence": "once", "targets": map[string]any{"type": "all"},
		"suppressPatches": true}).JSON(t, &w)
	var occ struct {
		Data []maintenance.MaintenanceOccurrence
	}
	f.e.Must(200, f.a.Org, "GET", api+"/maintenance/windows/"+w.ID+"/occurrences", nil).JSON(t, &occ)
	f.e.Must(200, f.a.Org, "POST", api+"/maintenance/occurrences/"+occ.Data[0].ID+"/start", nil)
	x := f.createPolicy(c, map[string]any{"orgId": f.a.OrgID, "name": "Nightly", "schedule": nightly, "targets": orgTargets})
	x = f.runDue(c, x.ID)
	if len(x.LastJobIDs) != 1 {
		t.Fatalf("run %+v", x)
	}
	if j := f.job(c, x.LastJobIDs[0]); j.Totals.Waiting != 1 || j.Totals.Queued != 0 {
		t.Fatalf("the job is not held by the window: %+v", j.Totals)
	}
}

func TestPatchPolicyTwoNodesStartOneJobPerRun(t *testing.T) {
	f := newPolicyFixture(t)
	c := f.a.Partner
	second := app.Service[*patches.Policies](f.e.SecondNode().App)
	x := f.createPolicy(c, map[string]any{"orgId": f.a.OrgID, "name": "Nightly", "schedule": nightly, "targets": orgTargets})
	for round := range 4 {
		// A new device each round: those of earlier rounds have their installs under way.
		d := f.device(f.a, "web-"+string(rune('a'+round)), "linux")
		id := f.seedPatches(f.a, d, upd("pkg"+string(rune('a'+round)), "1", "2", false))
		for _, p := range id {
			f.e.Must(200, c, "POST", api+"/patches/"+p+"/approve", nil)
		}
		next := f.getPolicy(c, x.ID).NextRunAt
		f.clk.Advance(next.Sub(f.clk.Now()) + time.Second)
		var wg sync.WaitGroup
		for _, p := range []*patches.Policies{f.pol, second} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.Run(context.Background()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if got := f.installJobs(c); len(got) != round+1 {
			t.Fatalf("round %d: %d install jobs, want %d", round, len(got), round+1)
		}
		var runs int
		if err := f.e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE action = 'patch_policy.run' AND resource_id = $1`,
			x.ID).Scan(&runs); err != nil || runs != round+1 {
			t.Fatalf("round %d: %d runs (%v), want %d", round, runs, err, round+1)
		}
	}
}

func TestPartnerWidePatchPolicyDecidesForThePartner(t *testing.T) {
	f := newPolicyFixture(t)
	c := f.a.Partner
	web := f.device(f.a, "web-01", "linux")
	ids := f.seedPatches(f.a, web, upd("openssl", "1", "2", true), upd("vim", "1", "2", false))
	x := f.createPolicy(c, map[string]any{"name": "Everywhere", "schedule": nightly, "targets": orgTargets,
		"autoApprove": map[string]any{"categories": []string{"security"}, "severities": []string{"important"}}})
	x = f.runDue(c, x.ID)
	if x.LastApproved != 1 || len(x.LastJobIDs) != 1 {
		t.Fatalf("run %+v", x)
	}
	if p := f.patch(c, ids["openssl"]); p.PatchApproval != patches.ApprovalApproved {
		t.Fatalf("the partner-wide decision on openssl: %s", p.PatchApproval)
	}
	if p := f.patch(c, ids["vim"]); p.PatchApproval != patches.ApprovalPending {
		t.Fatalf("vim: %s", p.PatchApproval)
	}
	j := f.job(c, x.LastJobIDs[0])
	if j.OrgID != nil || !slices.Equal(deviceIDsOf(j), []string{web}) {
		t.Fatalf("the partner-wide job %+v", j)
	}
	if p := f.installPayload(c, j, web); !slices.Equal(p.Packages, []agentproto.PackageVersion{{Name: "openssl", Version: "2"}}) {
		t.Fatalf("payload %+v", p)
	}
}

func TestDeferralsEndOnTheServersClock(t *testing.T) {
	f := newPolicyFixture(t)
	c := f.a.Partner
	web := f.device(f.a, "web-01", "linux")
	ids := f.seedPatches(f.a, web, upd("a", "1", "2", false))
	f.e.Must(200, c, "POST", api+"/patches/"+ids["a"]+"/defer", map[string]any{"until": f.clk.Now().Add(2 * time.Hour)})
	if got := f.patch(c, ids["a"]).PatchApproval; got != patches.ApprovalDeferred {
		t.Fatalf("approval right after the deferral = %s", got)
	}
	f.clk.Advance(3 * time.Hour)
	if got := f.patch(c, ids["a"]).PatchApproval; got != patches.ApprovalPending {
		t.Fatalf("approval once the server's clock passed the deferral = %s", got)
	}
	if got := f.patchList(c, "?status=pending"); len(got) != 1 || got[0].ID != ids["a"] {
		t.Fatalf("pending patches once the deferral passed: %+v", got)
	}
	// An hour ahead of the real time lies in the past of the server's clock.
	if r := f.e.Do(c, "POST", api+"/patches/"+ids["a"]+"/defer", map[string]any{"until": time.Now().Add(time.Hour)}); r.Status != 400 {
		t.Fatalf("defer to before the server's now = %d %s", r.Status, r.Body)
	}
}
