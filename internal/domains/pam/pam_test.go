package pam_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/pam"
	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

var start = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC) // a Wednesday

var (
	hashA = strings.Repeat("ab", 32)
	thumb = strings.Repeat("C0", 32)
)

type fixture struct {
	e        *apptest.Env
	clk      *clock.Fake
	a, b     apptest.Tenant
	devA     string
	devB     string
	admin    apptest.Caller
	localSeq int
}

func newFixture(t *testing.T) *fixture {
	clk := clock.NewFake(start)
	e := apptest.New(t, apptest.WithClock(clk))
	admin := e.Admin()
	f := &fixture{e: e, clk: clk, admin: admin, a: e.NewTenant(admin, "Alpha"), b: e.NewTenant(admin, "Bravo")}
	f.devA = e.InsertDevice(apptest.DeviceRow{PartnerID: f.a.PartnerID, OrgID: f.a.OrgID, SiteID: f.a.SiteID, Hostname: "a1"})
	f.devB = e.InsertDevice(apptest.DeviceRow{PartnerID: f.b.PartnerID, OrgID: f.b.OrgID, SiteID: f.b.SiteID, Hostname: "b1"})
	return f
}

func (f *fixture) svc() *pam.Service { return app.Service[*pam.Service](f.e.App) }

func (f *fixture) rule(c apptest.Caller, body map[string]any) pam.PAMRule {
	f.e.T.Helper()
	var r pam.PAMRule
	f.e.Must(http.StatusCreated, c, "POST", api+"/pam/rules", body).JSON(f.e.T, &r)
	return r
}

// report has the device's agent report a request and returns the stored request.
func (f *fixture) report(dev string, ten apptest.Tenant, in agentproto.ElevationRequest) pam.PAMElevationRequest {
	f.e.T.Helper()
	f.localSeq++
	if in.LocalID == "" {
		in.LocalID = store.NewID()
	}
	if in.User == "" {
		in.User = "alice"
	}
	if in.Path == "" {
		in.Path = "/usr/bin/id"
	}
	if in.SHA256 == "" {
		in.SHA256 = hashA
	}
	if in.CommandLine == "" {
		in.CommandLine = in.Path
	}
	raw, _ := json.Marshal(in)
	if err := f.svc().HandleReport(context.Background(), devices.Agent{DeviceID: dev, PartnerID: ten.PartnerID, OrgID: ten.OrgID}, raw); err != nil {
		f.e.T.Fatal(err)
	}
	var id string
	if err := f.e.App.DB.SQL.QueryRow(`SELECT id FROM pam_requests WHERE local_id = $1`, in.LocalID).Scan(&id); err != nil {
		f.e.T.Fatalf("the report was not stored: %v", err)
	}
	var r pam.PAMElevationRequest
	var out struct{ Data []pam.PAMElevationRequest }
	f.e.Must(http.StatusOK, f.admin, "GET", api+"/pam/elevation-requests?deviceId="+dev+"&limit=500", nil).JSON(f.e.T, &out)
	for _, x := range out.Data {
		if x.ID == id {
			r = x
		}
	}
	if r.ID == "" {
		f.e.T.Fatal("the request is not listed")
	}
	return r
}

// decisions returns the decisions queued for the request's device, oldest first.
func (f *fixture) decisions(requestID string) []string {
	f.e.T.Helper()
	rows, err := f.e.App.DB.SQL.Query(`SELECT payload FROM device_commands WHERE type = $1 ORDER BY created_at, id`, agentproto.CommandElevationDecision)
	if err != nil {
		f.e.T.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			f.e.T.Fatal(err)
		}
		var d agentproto.ElevationDecision
		_ = json.Unmarshal([]byte(raw), &d)
		if d.RequestID == requestID {
			out = append(out, d.Decision)
		}
	}
	return out
}

func TestRuleValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	org := f.a.Org
	bad := func(body map[string]any, field string) {
		t.Helper()
		res := f.e.Must(http.StatusBadRequest, org, "POST", api+"/pam/rules", body)
		if res.ErrorCode() != "VALIDATION_ERROR" || !strings.Contains(string(res.Body), field) {
			t.Errorf("POST %v = %s, want VALIDATION_ERROR naming %s", body, string(res.Body), field)
		}
	}
	var g pam.PAMSignerGroup
	f.e.Must(http.StatusCreated, org, "POST", api+"/pam/signer-groups", map[string]any{"name": "Vendors", "signers": []string{"Contoso*"},
		"thumbprints": []string{thumb}}).JSON(t, &g)
	if g.Thumbprints[0] != strings.ToLower(thumb) {
		t.Errorf("group thumbprint stored as %q", g.Thumbprints[0])
	}
	bad(map[string]any{"verdict": "auto_approve"}, "matchSigner")
	bad(map[string]any{"verdict": "auto_approve", "name": "only a name", "priority": 3}, "at least one match field")
	bad(map[string]any{"matchSignerGroupId": g.ID, "matchSigner": "Contoso"}, "matchSignerGroupId")
	bad(map[string]any{"matchSignerGroupId": g.ID, "matchSignerThumbprint": thumb}, "matchSignerGroupId")
	bad(map[string]any{"matchSignerThumbprint": strings.Repeat("a", 63)}, "matchSignerThumbprint")
	bad(map[string]any{"matchSignerThumbprint": strings.Repeat("g", 64)}, "matchSignerThumbprint")
	bad(map[string]any{"matchHash": strings.Repeat("a", 65)}, "matchHash")
	bad(map[string]any{"matchHash": "xyz"}, "matchHash")
	bad(map[string]any{"matchUser": "bob", "verdict": "allow"}, "verdict")
	bad(map[string]any{"matchUser": "bob", "approvalMinutes": 0}, "approvalMinutes")
	bad(map[string]any{"matchUser": "bob", "approvalMinutes": 10081}, "approvalMinutes")
	bad(map[string]any{"matchUser": "bob", "priority": -1}, "priority")
	bad(map[string]any{"matchUser": "bob", "timeWindow": map[string]any{"start": "25:00", "end": "18:00"}}, "timeWindow.start")
	bad(map[string]any{"matchUser": "bob", "timeWindow": map[string]any{"start": "08:00", "end": "18:00", "days": []int{7}}}, "timeWindow.days")
	bad(map[string]any{"matchUser": "bob", "timeWindow": map[string]any{"start": "08:00", "end": "18:00", "timezone": "Mars/Base"}}, "timezone")
	bad(map[string]any{"matchSignerGroupId": store.NewID()}, "matchSignerGroupId")
	bad(map[string]any{"matchUser": "bob", "siteId": f.b.SiteID}, "siteId")

	// Another organization's signer group is no group of this one.
	var gb pam.PAMSignerGroup
	f.e.Must(http.StatusCreated, f.b.Org, "POST", api+"/pam/signer-groups", map[string]any{"name": "B"}).JSON(t, &gb)
	bad(map[string]any{"matchSignerGroupId": gb.ID}, "matchSignerGroupId")

	r := f.rule(org, map[string]any{"matchSignerThumbprint": thumb, "verdict": "auto_approve"})
	if *r.MatchSignerThumbprint != strings.ToLower(thumb) || r.Priority != 100 || r.ApprovalMinutes != 60 || !r.Enabled || r.OrgID != f.a.OrgID {
		t.Errorf("created rule = %+v", r)
	}
	withGroup := f.rule(org, map[string]any{"matchSignerGroupId": g.ID, "matchHash": strings.ToUpper(hashA)})
	if *withGroup.MatchHash != hashA {
		t.Errorf("hash stored as %q", *withGroup.MatchHash)
	}

	// PATCH: at least one match field with a value, and the resulting rule follows every rule.
	patchBad := func(id string, body map[string]any, field string) {
		t.Helper()
		res := f.e.Must(http.StatusBadRequest, org, "PATCH", api+"/pam/rules/"+id, body)
		if !strings.Contains(string(res.Body), field) {
			t.Errorf("PATCH %v = %s, want naming %s", body, string(res.Body), field)
		}
	}
	patchBad(r.ID, map[string]any{"priority": 5}, "match field")
	patchBad(r.ID, map[string]any{"matchSignerThumbprint": ""}, "match field")
	patchBad(r.ID, map[string]any{"matchSignerGroupId": g.ID}, "matchSignerGroupId")
	patchBad(withGroup.ID, map[string]any{"matchSigner": "Contoso"}, "matchSignerGroupId")
	patchBad(r.ID, map[string]any{"matchHash": "00"}, "matchHash")
	var changed pam.PAMRule
	f.e.Must(http.StatusOK, org, "PATCH", api+"/pam/rules/"+r.ID, map[string]any{"matchSignerThumbprint": "", "matchSignerGroupId": g.ID,
		"priority": 5}).JSON(t, &changed)
	if changed.MatchSignerThumbprint != nil || *changed.MatchSignerGroupID != g.ID || changed.Priority != 5 {
		t.Errorf("patched rule = %+v", changed)
	}

	// A signer group in use cannot go; once unused it can.
	if res := f.e.Must(http.StatusConflict, org, "DELETE", api+"/pam/signer-groups/"+g.ID, nil); res.ErrorCode() != pam.CodeSignerGroupInUse {
		t.Errorf("delete a group in use = %s", string(res.Body))
	}
	f.e.Must(http.StatusNoContent, org, "DELETE", api+"/pam/rules/"+r.ID, nil)
	f.e.Must(http.StatusNoContent, org, "DELETE", api+"/pam/rules/"+withGroup.ID, nil)
	f.e.Must(http.StatusNoContent, org, "DELETE", api+"/pam/signer-groups/"+g.ID, nil)
	f.e.Must(http.StatusNotFound, org, "DELETE", api+"/pam/signer-groups/"+g.ID, nil)
}

func TestDecisionsOrderAndConfig(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	org := f.a.Org
	// Same priority: the older rule first; lower priority first.
	deny := f.rule(org, map[string]any{"name": "deny rm", "matchPathGlob": "/USR/BIN/R?", "verdict": "auto_deny", "priority": 10})
	f.clk.Advance(time.Second)
	approveIDs := f.rule(org, map[string]any{"name": "id", "matchPathGlob": "*/id", "verdict": "auto_approve", "approvalMinutes": 5, "priority": 20})
	f.clk.Advance(time.Second)
	f.rule(org, map[string]any{"name": "shadowed", "matchPathGlob": "/usr/bin/*", "verdict": "auto_deny", "priority": 20})
	ignore := f.rule(org, map[string]any{"name": "noise", "matchCommandLine": "--version", "verdict": "ignore", "priority": 1})
	ask := f.rule(org, map[string]any{"name": "admins", "matchAdGroup": "Wheel", "matchUser": "b*", "verdict": "require_approval", "priority": 30})
	office := f.rule(org, map[string]any{"name": "office hours", "matchParentImage": "/usr/bin/bash", "verdict": "auto_approve", "priority": 40,
		"timeWindow": map[string]any{"start": "08:00", "end": "18:00", "days": []int{1, 2, 3, 4, 5}}})

	var list struct{ Data []pam.PAMRule }
	f.e.Must(http.StatusOK, org, "GET", api+"/pam/rules", nil).JSON(t, &list)
	var names []string
	for _, r := range list.Data {
		names = append(names, r.Name)
	}
	if got := strings.Join(names, ","); got != "noise,deny rm,id,shadowed,admins,office hours" {
		t.Errorf("rule order = %s", got)
	}

	r := f.report(f.devA, f.a, agentproto.ElevationRequest{Path: "/usr/bin/id"})
	if r.Status != pam.StatusApproved || !r.Active || r.DecidedVia != pam.ViaRule || *r.RuleID != approveIDs.ID || r.ExpiresAt == nil ||
		!r.ExpiresAt.Equal(r.DecidedAt.Add(5*time.Minute)) || r.SiteID == nil || *r.SiteID != f.a.SiteID {
		t.Errorf("auto_approve = %+v", r)
	}
	if d := f.decisions(r.ID); len(d) != 1 || d[0] != agentproto.ElevationApproved {
		t.Errorf("decisions sent = %v", d)
	}
	if r := f.report(f.devA, f.a, agentproto.ElevationRequest{Path: "/usr/bin/rm"}); r.Status != pam.StatusDenied || *r.RuleID != deny.ID {
		t.Errorf("auto_deny = %+v", r)
	}
	if r := f.report(f.devA, f.a, agentproto.ElevationRequest{Path: "/usr/bin/rm", CommandLine: "/usr/bin/rm --VERSION"}); r.Status != pam.StatusIgnored ||
		*r.RuleID != ignore.ID {
		t.Errorf("ignore = %+v", r)
	}
	p := f.report(f.devA, f.a, agentproto.ElevationRequest{Path: "/opt/x", User: "Bob", Groups: []string{"users", "wheel"}})
	if p.Status != pam.StatusPending || *p.RuleID != ask.ID || p.DecidedAt != nil {
		t.Errorf("require_approval = %+v", p)
	}
	if d := f.decisions(p.ID); len(d) != 1 || d[0] != agentproto.ElevationPending {
		t.Errorf("decisions sent = %v", d)
	}
	// The time window: Wednesday 10:00 is inside, 19:00 is not.
	if r := f.report(f.devA, f.a, agentproto.ElevationRequest{Path: "/opt/y", ParentImage: "/usr/bin/bash"}); *r.RuleID != office.ID {
		t.Errorf("in the window = %+v", r)
	}
	f.clk.Advance(9 * time.Hour)
	u := f.report(f.devA, f.a, agentproto.ElevationRequest{Path: "/opt/y", ParentImage: "/usr/bin/bash"})
	if u.RuleID != nil || u.Status != pam.StatusPending || u.DecidedVia != pam.ViaDefault {
		t.Errorf("outside the window, unmatched = %+v", u)
	}

	// The organization's default verdict decides unmatched requests.
	var cfg pam.PAMConfig
	f.e.Must(http.StatusOK, org, "GET", api+"/pam/config", nil).JSON(t, &cfg)
	if cfg.DefaultVerdict != pam.VerdictRequireApproval || cfg.OrgID != f.a.OrgID {
		t.Errorf("config = %+v", cfg)
	}
	f.e.Must(http.StatusBadRequest, org, "PUT", api+"/pam/config", map[string]any{"defaultVerdict": "maybe"})
	f.e.Must(http.StatusBadRequest, f.a.Partner, "GET", api+"/pam/config", nil)
	f.e.Must(http.StatusOK, f.a.Partner, "PUT", api+"/pam/config", map[string]any{"orgId": f.a.OrgID, "defaultVerdict": "auto_deny"}).JSON(t, &cfg)
	if cfg.DefaultVerdict != pam.VerdictAutoDeny {
		t.Errorf("config = %+v", cfg)
	}
	if r := f.report(f.devA, f.a, agentproto.ElevationRequest{Path: "/opt/z"}); r.Status != pam.StatusDenied || r.DecidedVia != pam.ViaDefault {
		t.Errorf("default auto_deny = %+v", r)
	}
	// Disabling a rule takes it out of decisions.
	f.e.Must(http.StatusOK, org, "PATCH", api+"/pam/rules/"+deny.ID, map[string]any{"matchPathGlob": "/usr/bin/r?", "enabled": false})
	if r := f.report(f.devA, f.a, agentproto.ElevationRequest{Path: "/usr/bin/rm"}); r.RuleID == nil || *r.RuleID == deny.ID {
		t.Errorf("a disabled rule decided: %+v", r)
	}

	// Preview: the draft matches recent requests with the same matcher.
	var pv pam.PAMPreview
	f.e.Must(http.StatusOK, org, "POST", api+"/pam/rules/preview", map[string]any{"matchPathGlob": "/opt/*"}).JSON(t, &pv)
	if pv.Matched != 4 || len(pv.Requests) != 4 || pv.Scanned < 8 {
		t.Errorf("preview = matched %d of %d", pv.Matched, pv.Scanned)
	}
	f.e.Must(http.StatusBadRequest, org, "POST", api+"/pam/rules/preview", map[string]any{"verdict": "auto_deny"})
	f.e.Must(http.StatusOK, f.b.Org, "POST", api+"/pam/rules/preview", map[string]any{"matchPathGlob": "*"}).JSON(t, &pv)
	if pv.Scanned != 0 {
		t.Errorf("another organization's preview saw %d requests", pv.Scanned)
	}

	// Bulk: all or nothing.
	f.e.Must(http.StatusBadRequest, org, "PATCH", api+"/pam/rules", map[string]any{"rules": []map[string]any{
		{"id": ignore.ID, "matchCommandLine": "--version", "priority": 50}, {"id": ask.ID, "matchHash": "zz"}}})
	var bulk struct{ Data []pam.PAMRule }
	f.e.Must(http.StatusOK, org, "PATCH", api+"/pam/rules", map[string]any{"rules": []map[string]any{
		{"id": ignore.ID, "matchCommandLine": "--version", "priority": 50}, {"id": ask.ID, "matchUser": "b*", "priority": 0}}}).JSON(t, &bulk)
	if len(bulk.Data) != 2 || bulk.Data[0].Priority != 50 || bulk.Data[1].Priority != 0 {
		t.Errorf("bulk = %+v", bulk.Data)
	}
	f.e.Must(http.StatusNotFound, f.b.Org, "PATCH", api+"/pam/rules", map[string]any{"rules": []map[string]any{
		{"id": ignore.ID, "matchCommandLine": "x"}}})
	if res := f.e.Must(http.StatusBadRequest, org, "PATCH", api+"/pam/rules", map[string]any{"rules": []map[string]any{
		{"id": ignore.ID, "matchCommandLine": "x"}, {"id": ignore.ID, "matchCommandLine": "y"}}}); !strings.Contains(string(res.Body), "rules[1]") {
		t.Errorf("duplicate bulk item = %s", string(res.Body))
	}
}

func TestRequestTransitions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	org := f.a.Org
	respond := func(want int, c apptest.Caller, id string, body map[string]any) pam.PAMElevationRequest {
		t.Helper()
		var r pam.PAMElevationRequest
		res := f.e.Must(want, c, "POST", api+"/pam/elevation-requests/"+id+"/respond", body)
		if want == http.StatusOK {
			res.JSON(t, &r)
		}
		return r
	}
	p := f.report(f.devA, f.a, agentproto.ElevationRequest{})
	f.e.Must(http.StatusBadRequest, org, "POST", api+"/pam/elevation-requests/"+p.ID+"/respond", map[string]any{"decision": "maybe"})
	f.e.Must(http.StatusBadRequest, org, "POST", api+"/pam/elevation-requests/"+p.ID+"/respond", map[string]any{"decision": "approve",
		"durationMinutes": 0})
	a := respond(http.StatusOK, org, p.ID, map[string]any{"decision": "approve", "durationMinutes": 30, "reason": "patching"})
	if a.Status != pam.StatusApproved || !a.Active || a.DecidedVia != pam.ViaTechnician || a.DecidedBy == nil ||
		*a.DecidedBy != "alpha-org@gale.test" || !a.ExpiresAt.Equal(a.DecidedAt.Add(30*time.Minute)) || a.Reason != "patching" {
		t.Errorf("approved = %+v", a)
	}
	if res := f.e.Must(http.StatusConflict, org, "POST", api+"/pam/elevation-requests/"+p.ID+"/respond",
		map[string]any{"decision": "deny"}); res.ErrorCode() != pam.CodeNotPending {
		t.Errorf("respond twice = %s", string(res.Body))
	}
	var active struct{ Data []pam.PAMElevationRequest }
	f.e.Must(http.StatusOK, org, "GET", api+"/pam/active", nil).JSON(t, &active)
	if len(active.Data) != 1 || active.Data[0].ID != p.ID {
		t.Errorf("active = %+v", active.Data)
	}
	rv := f.e.Must(http.StatusOK, org, "POST", api+"/pam/elevation-requests/"+p.ID+"/revoke", map[string]any{"reason": "done"})
	var revoked pam.PAMElevationRequest
	rv.JSON(t, &revoked)
	if revoked.Status != pam.StatusRevoked || revoked.Active {
		t.Errorf("revoked = %+v", revoked)
	}
	if res := f.e.Must(http.StatusConflict, org, "POST", api+"/pam/elevation-requests/"+p.ID+"/revoke", nil); res.ErrorCode() != pam.CodeNotActive {
		t.Errorf("revoke twice = %s", string(res.Body))
	}
	if d := f.decisions(p.ID); strings.Join(d, ",") != "pending,approved,revoked" {
		t.Errorf("decisions sent = %v", d)
	}
	f.e.Must(http.StatusOK, org, "GET", api+"/pam/active", nil).JSON(t, &active)
	if len(active.Data) != 0 {
		t.Errorf("active after revoke = %+v", active.Data)
	}

	// Deny; then neither respond nor revoke.
	d := f.report(f.devA, f.a, agentproto.ElevationRequest{})
	if x := respond(http.StatusOK, org, d.ID, map[string]any{"decision": "deny"}); x.Status != pam.StatusDenied || x.ExpiresAt != nil {
		t.Errorf("denied = %+v", x)
	}
	f.e.Must(http.StatusConflict, org, "POST", api+"/pam/elevation-requests/"+d.ID+"/revoke", nil)
	f.e.Must(http.StatusConflict, org, "POST", api+"/pam/elevation-requests/"+d.ID+"/respond", map[string]any{"decision": "approve"})

	// Self-approval: the requester (the user name is the caller's email local part) may not approve.
	self := f.report(f.devA, f.a, agentproto.ElevationRequest{User: "Alpha-Org"})
	if res := f.e.Must(http.StatusForbidden, org, "POST", api+"/pam/elevation-requests/"+self.ID+"/respond",
		map[string]any{"decision": "approve"}); res.ErrorCode() != pam.CodeSelfApproval {
		t.Errorf("self-approval = %s", string(res.Body))
	}
	respond(http.StatusOK, f.a.Partner, self.ID, map[string]any{"decision": "approve"})

	// Expiry: the approval ends; revoke is then a 409. A request left pending times out.
	e := f.report(f.devA, f.a, agentproto.ElevationRequest{})
	respond(http.StatusOK, org, e.ID, map[string]any{"decision": "approve", "durationMinutes": 1})
	stale := f.report(f.devA, f.a, agentproto.ElevationRequest{})
	f.clk.Advance(pam.PendingTTL)
	if err := f.svc().Expire(context.Background()); err != nil {
		t.Fatal(err)
	}
	var x pam.PAMElevationRequest
	for _, id := range []string{e.ID, stale.ID} {
		var l struct{ Data []pam.PAMElevationRequest }
		f.e.Must(http.StatusOK, org, "GET", api+"/pam/elevation-requests?status=expired", nil).JSON(t, &l)
		found := false
		for _, r := range l.Data {
			if r.ID == id {
				found, x = true, r
			}
		}
		if !found {
			t.Errorf("request %s did not expire", id)
		}
	}
	if x.DecidedVia != pam.ViaTimeout && x.ID == stale.ID {
		t.Errorf("timed out = %+v", x)
	}
	f.e.Must(http.StatusConflict, org, "POST", api+"/pam/elevation-requests/"+e.ID+"/revoke", nil)
	f.e.Must(http.StatusConflict, org, "POST", api+"/pam/elevation-requests/"+stale.ID+"/respond", map[string]any{"decision": "approve"})
	if d := f.decisions(e.ID); strings.Join(d, ",") != "pending,approved,expired" {
		t.Errorf("decisions of the expired approval = %v", d)
	}
}

func TestRaces(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const n = 6
	approvers := []apptest.Caller{f.a.Org, f.a.Partner, f.admin}
	p := f.report(f.devA, f.a, agentproto.ElevationRequest{User: "carol"})
	codes := fire(n, func(i int) int {
		return f.e.Do(approvers[i%len(approvers)], "POST", api+"/pam/elevation-requests/"+p.ID+"/respond",
			map[string]any{"decision": []string{"approve", "deny"}[i%2]}).Status
	})
	if codes[http.StatusOK] != 1 || codes[http.StatusConflict] != n-1 {
		t.Errorf("concurrent responses = %v, want one 200 and %d 409", codes, n-1)
	}
	if d := f.decisions(p.ID); len(d) != 2 {
		t.Errorf("decisions sent = %v, want pending and one answer", d)
	}

	// Revoke racing the expiry job: exactly one final state, one removal sent.
	for round, advance := range []time.Duration{59 * time.Minute, time.Hour} {
		r := f.report(f.devA, f.a, agentproto.ElevationRequest{User: "dave"})
		f.e.Must(http.StatusOK, f.a.Org, "POST", api+"/pam/elevation-requests/"+r.ID+"/respond", map[string]any{"decision": "approve"})
		f.clk.Advance(advance)
		codes := fire(n, func(i int) int {
			if i == 0 {
				if err := f.svc().Expire(context.Background()); err != nil {
					t.Error(err)
				}
				return 0
			}
			return f.e.Do(f.a.Org, "POST", api+"/pam/elevation-requests/"+r.ID+"/revoke", nil).Status
		})
		got, err := f.svc().GetRequest(adminCtx(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		d := f.decisions(r.ID)
		last := d[len(d)-1]
		switch {
		case round == 0 && (codes[http.StatusOK] != 1 || got.Status != pam.StatusRevoked || last != agentproto.ElevationRevoked):
			t.Errorf("revoke before expiry: %v, %s", codes, got.Status)
		case round == 1 && (codes[http.StatusOK] != 0 || got.Status != pam.StatusExpired || last != agentproto.ElevationExpired):
			t.Errorf("revoke after expiry: %v, %s", codes, got.Status)
		}
		if len(d) != 3 {
			t.Errorf("decisions sent = %v, want exactly one removal", d)
		}
		f.clk.Set(f.clk.Now().Add(time.Minute))
	}
}

func fire(n int, fn func(i int) int) map[int]int {
	var mu sync.Mutex
	var wg sync.WaitGroup
	codes := map[int]int{}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := fn(i)
			mu.Lock()
			codes[c]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return codes
}

func TestTenancy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.rule(f.a.Org, map[string]any{"matchUser": "x"})
	var g pam.PAMSignerGroup
	f.e.Must(http.StatusCreated, f.a.Org, "POST", api+"/pam/signer-groups", map[string]any{"name": "G"}).JSON(t, &g)
	req := f.report(f.devA, f.a, agentproto.ElevationRequest{})
	for _, c := range []apptest.Caller{f.b.Org, f.b.Partner} {
		f.e.Must(http.StatusNotFound, c, "PATCH", api+"/pam/rules/"+r.ID, map[string]any{"matchUser": "y"})
		f.e.Must(http.StatusNotFound, c, "DELETE", api+"/pam/rules/"+r.ID, nil)
		f.e.Must(http.StatusNotFound, c, "PATCH", api+"/pam/signer-groups/"+g.ID, map[string]any{"name": "H"})
		f.e.Must(http.StatusNotFound, c, "DELETE", api+"/pam/signer-groups/"+g.ID, nil)
		f.e.Must(http.StatusNotFound, c, "POST", api+"/pam/elevation-requests/"+req.ID+"/respond", map[string]any{"decision": "approve"})
		f.e.Must(http.StatusNotFound, c, "POST", api+"/pam/elevation-requests/"+req.ID+"/revoke", nil)
		f.e.Must(http.StatusNotFound, c, "GET", api+"/pam/config?orgId="+f.a.OrgID, nil)
		f.e.Must(http.StatusNotFound, c, "PUT", api+"/pam/config", map[string]any{"orgId": f.a.OrgID, "defaultVerdict": "auto_deny"})
		f.e.Must(http.StatusBadRequest, c, "POST", api+"/pam/rules", map[string]any{"orgId": f.a.OrgID, "matchUser": "x"})
		for _, path := range []string{"/pam/rules", "/pam/signer-groups", "/pam/elevation-requests", "/pam/active"} {
			var l struct{ Data []map[string]any }
			f.e.Must(http.StatusOK, c, "GET", api+path, nil).JSON(t, &l)
			if len(l.Data) != 0 {
				t.Errorf("%s shows another tenant's rows: %v", path, l.Data)
			}
		}
	}
	f.e.Must(http.StatusNotFound, f.a.Org, "PATCH", api+"/pam/rules/"+store.NewID(), map[string]any{"matchUser": "y"})
}

func adminCtx() context.Context {
	return access.WithPrincipal(context.Background(), &access.Principal{Kind: access.ActorSystem, Scope: access.SystemScope()})
}

func TestCacheAcrossNodes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other := f.e.SecondNode()
	s2 := app.Service[*pam.Service](other.App)
	subj := pam.Subject{User: "eve", Path: "/usr/bin/id", SHA256: hashA, At: start}
	if v, err := s2.Decide(context.Background(), f.a.OrgID, subj); err != nil || v.Verdict != pam.VerdictRequireApproval {
		t.Fatalf("before any rule: %+v %v", v, err)
	}
	r := f.rule(f.a.Org, map[string]any{"matchHash": hashA, "verdict": "auto_approve"})
	if v, _ := s2.Decide(context.Background(), f.a.OrgID, subj); v.RuleID != r.ID {
		t.Fatalf("the second node missed a new rule: %+v", v)
	}
	f.e.Must(http.StatusOK, f.a.Org, "PATCH", api+"/pam/rules/"+r.ID, map[string]any{"matchHash": hashA, "verdict": "auto_deny"})
	if v, _ := s2.Decide(context.Background(), f.a.OrgID, subj); v.Verdict != pam.VerdictAutoDeny {
		t.Fatalf("the second node missed a change: %+v", v)
	}
	var g pam.PAMSignerGroup
	f.e.Must(http.StatusCreated, f.a.Org, "POST", api+"/pam/signer-groups", map[string]any{"name": "G", "signers": []string{"acme*"}}).JSON(t, &g)
	gr := f.rule(f.a.Org, map[string]any{"matchSignerGroupId": g.ID, "verdict": "ignore", "priority": 1})
	signed := subj
	signed.Signer = "ACME Corp"
	if v, _ := s2.Decide(context.Background(), f.a.OrgID, signed); v.RuleID != gr.ID {
		t.Fatalf("signer group rule: %+v", v)
	}
	f.e.Must(http.StatusOK, f.a.Org, "PATCH", api+"/pam/signer-groups/"+g.ID, map[string]any{"signers": []string{"other"},
		"thumbprints": []string{thumb}})
	if v, _ := s2.Decide(context.Background(), f.a.OrgID, signed); v.RuleID == gr.ID {
		t.Fatalf("the second node missed a signer group change: %+v", v)
	}
	signed.Thumbprint = strings.ToLower(thumb)
	if v, _ := s2.Decide(context.Background(), f.a.OrgID, signed); v.RuleID != gr.ID {
		t.Fatalf("thumbprint in group: %+v", v)
	}
}

// The rule list pages in decision order: by cursor (the last row's priority, creation time and
// ID), and by legacy page number with the total.
func TestRuleListPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	org := f.a.Org
	for i, prio := range []int{30, 10, 20, 10, 10} {
		if i == 3 {
			f.clk.Advance(time.Second)
		}
		f.rule(org, map[string]any{"name": fmt.Sprintf("r%d", i), "matchPathGlob": "/usr/bin/x", "verdict": "auto_deny", "priority": prio})
	}
	type page struct {
		Data       []pam.PAMRule
		Pagination struct {
			HasMore bool   `json:"hasMore"`
			Cursor  string `json:"cursor"`
			Total   *int   `json:"total"`
		} `json:"pagination"`
	}
	var whole page
	f.e.Must(http.StatusOK, org, "GET", api+"/pam/rules", nil).JSON(t, &whole)
	var want []string
	for _, r := range whole.Data {
		want = append(want, r.ID)
	}
	if len(want) != 5 || whole.Data[0].Priority != 10 || whole.Data[4].Name != "r0" || whole.Data[3].Name != "r2" {
		t.Fatalf("rule order = %+v", whole.Data)
	}
	var got []string
	cursor := ""
	for range 4 {
		var p page
		f.e.Must(http.StatusOK, org, "GET", api+"/pam/rules?limit=2&cursor="+cursor, nil).JSON(t, &p)
		for _, r := range p.Data {
			got = append(got, r.ID)
		}
		if cursor = p.Pagination.Cursor; cursor == "" {
			break
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("paged by cursor: %v, want %v", got, want)
	}
	var second page
	f.e.Must(http.StatusOK, org, "GET", api+"/pam/rules?limit=2&page=2", nil).JSON(t, &second)
	if len(second.Data) != 2 || second.Data[0].ID != want[2] || second.Data[1].ID != want[3] ||
		second.Pagination.Total == nil || *second.Pagination.Total != 5 {
		t.Errorf("page 2 = %+v, total %v; want rules 3 and 4 of 5", second.Data, second.Pagination.Total)
	}
	f.e.Must(http.StatusBadRequest, org, "GET", api+"/pam/rules?cursor=nonsense", nil)
}
