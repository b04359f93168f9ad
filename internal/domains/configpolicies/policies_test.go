package configpolicies_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/configpolicies"
	"gale/internal/domains/devices"
	"gale/internal/domains/scripts"
	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

type fixture struct {
	e     *apptest.Env
	a, b  apptest.Tenant
	clock *clock.Fake
}

func newFixture(t *testing.T) fixture {
	clk := clock.NewFake(time.Now().UTC().Truncate(time.Second))
	e := apptest.New(t, apptest.WithClock(clk))
	admin := e.Admin()
	return fixture{e: e, a: e.NewTenant(admin, "Alpha"), b: e.NewTenant(admin, "Bravo"), clock: clk}
}

func (f fixture) service() *configpolicies.Service {
	return app.Service[*configpolicies.Service](f.e.App)
}

func (f fixture) device(ten apptest.Tenant, host string) string {
	return f.e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: host})
}

func (f fixture) script(ten apptest.Tenant, name string) string {
	f.e.T.Helper()
	var sc scripts.Script
	f.e.Must(201, ten.Partner, "POST", api+"/scripts", map[string]any{"name": name, "orgId": ten.OrgID, "osTypes": []string{"linux"},
		"language": "sh", "content": "apt-get install -y curl"}).JSON(f.e.T, &sc)
	return sc.ID
}

func (f fixture) create(c apptest.Caller, body map[string]any) configpolicies.Policy {
	f.e.T.Helper()
	var p configpolicies.Policy
	f.e.Must(201, c, "POST", api+"/policies", body).JSON(f.e.T, &p)
	return p
}

func (f fixture) get(c apptest.Caller, id string) configpolicies.Policy {
	f.e.T.Helper()
	var p configpolicies.Policy
	f.e.Must(200, c, "GET", api+"/policies/"+id, nil).JSON(f.e.T, &p)
	return p
}

func curlPolicy(name string, ten apptest.Tenant, enforcement string, devs ...string) map[string]any {
	return map[string]any{"name": name, "orgId": ten.OrgID, "enforcement": enforcement,
		"rules":   []map[string]any{{"type": "required_software", "name": "curl", "minVersion": "7.0"}},
		"targets": map[string]any{"type": "devices", "ids": devs}}
}

// commands lists a device's commands of a type, newest first.
func (f fixture) commands(ten apptest.Tenant, dev, typ string) []devices.DeviceCommand {
	f.e.T.Helper()
	var l struct{ Data []devices.DeviceCommand }
	f.e.Must(200, ten.Partner, "GET", api+"/devices/"+dev+"/commands?limit=100", nil).JSON(f.e.T, &l)
	var out []devices.DeviceCommand
	for _, c := range l.Data {
		if c.Type == typ {
			out = append(out, c)
		}
	}
	return out
}

// outstanding is the device's one queued command of the type (of the policy, when named).
func (f fixture) outstanding(ten apptest.Tenant, dev, typ string, policyID ...string) devices.DeviceCommand {
	f.e.T.Helper()
	var open []devices.DeviceCommand
	for _, c := range f.commands(ten, dev, typ) {
		var p agentproto.PolicyEvaluate
		if len(policyID) > 0 && (json.Unmarshal(c.Payload, &p) != nil || p.PolicyID != policyID[0]) {
			continue
		}
		if c.Status == devices.CommandQueued || c.Status == devices.CommandSent {
			open = append(open, c)
		}
	}
	if len(open) != 1 {
		f.e.T.Fatalf("%d outstanding %s commands on %s, want 1", len(open), typ, dev)
	}
	return open[0]
}

// report records the agent's result of a command.
func (f fixture) report(ten apptest.Tenant, dev string, r agentproto.CommandResult) {
	f.e.T.Helper()
	if err := app.Service[*devices.Service](f.e.App).RecordResult(context.Background(), devices.Agent{DeviceID: dev, PartnerID: ten.PartnerID,
		OrgID: ten.OrgID, Role: "agent"}, r); err != nil {
		f.e.T.Fatal(err)
	}
}

// evaluated answers the device's outstanding evaluation with one result per rule.
func (f fixture) evaluated(ten apptest.Tenant, dev string, passed ...bool) {
	f.e.T.Helper()
	f.evaluatedFor(ten, dev, "", passed...)
}

// evaluatedFor answers the device's outstanding evaluation of a policy.
func (f fixture) evaluatedFor(ten apptest.Tenant, dev, policyID string, passed ...bool) {
	f.e.T.Helper()
	var c devices.DeviceCommand
	if policyID == "" {
		c = f.outstanding(ten, dev, agentproto.CommandPolicyEvaluate)
	} else {
		c = f.outstanding(ten, dev, agentproto.CommandPolicyEvaluate, policyID)
	}
	var p agentproto.PolicyEvaluate
	if err := json.Unmarshal(c.Payload, &p); err != nil || len(p.Rules) != len(passed) {
		f.e.T.Fatalf("payload %s: %v", c.Payload, err)
	}
	var res agentproto.PolicyEvaluateResult
	for i, ok := range passed {
		res.Results = append(res.Results, agentproto.PolicyRuleResult{Rule: i, Type: p.Rules[i].Type, Passed: ok, Actual: "x", Message: "checked"})
	}
	b, _ := json.Marshal(res)
	f.report(ten, dev, agentproto.CommandResult{CommandID: c.ID, Status: agentproto.ResultCompleted, Result: b})
}

func (f fixture) compliance(c apptest.Caller, id, query string) []configpolicies.PolicyDeviceCompliance {
	f.e.T.Helper()
	var l struct {
		Data []configpolicies.PolicyDeviceCompliance
	}
	f.e.Must(200, c, "GET", api+"/policies/"+id+"/compliance"+query, nil).JSON(f.e.T, &l)
	return l.Data
}

func (f fixture) row(c apptest.Caller, id, dev string) configpolicies.PolicyDeviceCompliance {
	f.e.T.Helper()
	for _, r := range f.compliance(c, id, "") {
		if r.DeviceID == dev {
			return r
		}
	}
	f.e.T.Fatalf("no compliance row of %s", dev)
	return configpolicies.PolicyDeviceCompliance{}
}

func (f fixture) followUps() {
	f.e.T.Helper()
	if err := f.service().RunFollowUps(context.Background()); err != nil {
		f.e.T.Fatal(err)
	}
}

func (f fixture) eventCount(typ, policyID string) int {
	f.e.T.Helper()
	var n int
	if err := f.e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM events WHERE type = $1 AND resource_id = $2`, typ, policyID).Scan(&n); err != nil {
		f.e.T.Fatal(err)
	}
	return n
}

func wantCode(t *testing.T, r *apptest.Response, status int, code string) {
	t.Helper()
	if r.Status != status || (code != "" && r.ErrorCode() != code) {
		t.Fatalf("status %d %s, want %d %s", r.Status, r.Body, status, code)
	}
}

// wantFields checks a 400 names exactly these fields among its details.
func wantFields(t *testing.T, r *apptest.Response, fields ...string) {
	t.Helper()
	if r.Status != http.StatusBadRequest {
		t.Fatalf("status %d %s, want 400", r.Status, r.Body)
	}
	var body struct {
		Error struct {
			Details []struct{ Field string }
		}
	}
	_ = json.Unmarshal(r.Body, &body)
	got := map[string]bool{}
	for _, d := range body.Error.Details {
		got[d.Field] = true
	}
	for _, f := range fields {
		if !got[f] && !got["body."+f] {
			t.Errorf("details %s do not name %s", r.Body, f)
		}
	}
}

func TestPolicyCRUDAndValidation(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "web-1")
	sc := f.script(f.a, "Install curl")
	c := f.a.Partner
	p := f.create(c, map[string]any{"name": "Baseline", "orgId": f.a.OrgID, "description": "line one\nline two",
		"rules": []map[string]any{
			{"type": "required_software", "name": "curl", "minVersion": "7.88.1-10"},
			{"type": "prohibited_software", "name": "telnet"},
			{"type": "disk_space_minimum", "minFreeGb": 5},
			{"type": "os_version", "minVersion": "12"},
			{"type": "config_check", "path": "/etc/ssh/sshd_config", "key": "PermitRootLogin", "operator": "eq", "expected": "no"},
			{"type": "service_running", "name": "ssh.service"}},
		"remediationScriptId": sc, "targets": map[string]any{"type": "devices", "ids": []string{dev}}})
	if p.Status != "active" || p.Enforcement != "monitor" || p.CheckIntervalMinutes != 60 || len(p.Rules) != 6 || p.Rules[2].MountPoint != "/" ||
		p.OrgID == nil || *p.OrgID != f.a.OrgID || p.RemediationScriptID == nil || len(p.Targets.IDs) != 1 || p.Description != "line one\nline two" ||
		p.LastEvaluatedAt == nil || p.NextEvaluationAt == nil {
		t.Fatalf("created %+v", p)
	}
	if got := f.get(c, p.ID); got.Name != "Baseline" || got.Targets.Type != "devices" || got.Targets.IDs[0] != dev {
		t.Fatalf("got %+v", got)
	}
	// The name is unique in the scope, whatever the case.
	wantCode(t, f.e.Do(c, "POST", api+"/policies", curlPolicy("baseline", f.a, "warn", dev)), 409, "POLICY_NAME_TAKEN")
	other := f.create(c, curlPolicy("Curl", f.a, "warn", dev))
	wantCode(t, f.e.Do(c, "PATCH", api+"/policies/"+other.ID, map[string]any{"name": "BASELINE"}), 409, "POLICY_NAME_TAKEN")
	// Another tenant may use the name.
	f.create(f.b.Partner, curlPolicy("Baseline", f.b, "warn", f.device(f.b, "b-1")))

	// Lists filter by status, enforcement, words and organization.
	list := func(q string) []configpolicies.Policy {
		var l struct{ Data []configpolicies.Policy }
		f.e.Must(200, c, "GET", api+"/policies"+q, nil).JSON(t, &l)
		return l.Data
	}
	if l := list(""); len(l) != 2 || l[0].ID != other.ID {
		t.Fatalf("list %+v", l)
	}
	if l := list("?enforcement=warn"); len(l) != 1 || l[0].ID != other.ID {
		t.Fatalf("warn %+v", l)
	}
	if l := list("?q=LINE+TWO"); len(l) != 1 || l[0].ID != p.ID {
		t.Fatalf("q %+v", l)
	}
	if l := list("?orgId=" + f.b.OrgID); len(l) != 0 {
		t.Fatalf("other org %+v", l)
	}
	f.e.Must(200, c, "POST", api+"/policies/"+other.ID+"/deactivate", nil)
	if l := list("?status=inactive"); len(l) != 1 || l[0].ID != other.ID {
		t.Fatalf("inactive %+v", l)
	}
	if l := list("?enabled=true"); len(l) != 1 || l[0].ID != p.ID {
		t.Fatalf("enabled %+v", l)
	}

	// PUT replaces every field: absent ones take their defaults.
	var put configpolicies.Policy
	f.e.Must(200, c, "PUT", api+"/policies/"+p.ID, map[string]any{"name": "Baseline v2", "checkIntervalMinutes": 30,
		"rules": []map[string]any{{"type": "service_running", "name": "cron"}}, "targets": map[string]any{"type": "organization"}}).JSON(t, &put)
	if put.Name != "Baseline v2" || put.Description != "" || put.RemediationScriptID != nil || put.CheckIntervalMinutes != 30 ||
		len(put.Rules) != 1 || put.Targets.Type != "organization" || len(put.Targets.IDs) != 0 || put.Enforcement != "monitor" {
		t.Fatalf("put %+v", put)
	}
	wantFields(t, f.e.Do(c, "PUT", api+"/policies/"+p.ID, map[string]any{"orgId": f.b.OrgID, "name": "x",
		"rules": []map[string]any{{"type": "service_running", "name": "cron"}}, "targets": map[string]any{"type": "organization"}}), "orgId")
	// PATCH changes what it names.
	var patched configpolicies.Policy
	f.e.Must(200, c, "PATCH", api+"/policies/"+p.ID, map[string]any{"enforcement": "enforce", "remediationScriptId": sc}).JSON(t, &patched)
	if patched.Enforcement != "enforce" || patched.RemediationScriptID == nil || patched.Name != "Baseline v2" || patched.CheckIntervalMinutes != 30 {
		t.Fatalf("patched %+v", patched)
	}
	f.e.Must(200, c, "PATCH", api+"/policies/"+p.ID, map[string]any{"remediationScriptId": ""}).JSON(t, &patched)
	if patched.RemediationScriptID != nil {
		t.Fatalf("script kept %+v", patched)
	}

	// Validation: field paths for each rule.
	bad := func(rule map[string]any, fields ...string) {
		t.Helper()
		body := curlPolicy("Bad", f.a, "monitor", dev)
		body["rules"] = []map[string]any{{"type": "service_running", "name": "ok"}, rule}
		wantFields(t, f.e.Do(c, "POST", api+"/policies", body), fields...)
	}
	bad(map[string]any{"type": "config_check", "path": "etc/x", "key": "a", "operator": "present"}, "rules[1].path")
	bad(map[string]any{"type": "config_check", "path": "/etc/../x", "key": "a", "operator": "present"}, "rules[1].path")
	bad(map[string]any{"type": "config_check", "path": "/etc/x", "key": "a b", "operator": "eq"}, "rules[1].key", "rules[1].expected")
	bad(map[string]any{"type": "config_check", "path": "/etc/x", "key": "a", "operator": "absent", "expected": "y"}, "rules[1].expected")
	bad(map[string]any{"type": "required_software", "name": "curl; rm", "path": "/x"}, "rules[1].name", "rules[1].path")
	bad(map[string]any{"type": "prohibited_software", "name": "telnet", "minVersion": "1"}, "rules[1].minVersion")
	bad(map[string]any{"type": "disk_space_minimum", "minFreeGb": 1, "minFreePercent": 5}, "rules[1].minFreeGb")
	bad(map[string]any{"type": "disk_space_minimum"}, "rules[1].minFreeGb")
	bad(map[string]any{"type": "disk_space_minimum", "minFreePercent": 101}, "rules[1].minFreePercent")
	bad(map[string]any{"type": "disk_space_minimum", "mountPoint": "data", "minFreeGb": 1}, "rules[1].mountPoint")
	bad(map[string]any{"type": "os_version", "minVersion": "twelve"}, "rules[1].minVersion")
	bad(map[string]any{"type": "service_running", "name": "--all"}, "rules[1].name")
	bad(map[string]any{"type": "service_running", "name": "a b"}, "rules[1].name")
	bad(map[string]any{"type": "unknown"}, "rules[1].type")
	body := curlPolicy("Bad", f.a, "monitor", dev)
	body["checkIntervalMinutes"] = 14
	wantFields(t, f.e.Do(c, "POST", api+"/policies", body), "checkIntervalMinutes")
	body["checkIntervalMinutes"] = 10081
	wantFields(t, f.e.Do(c, "POST", api+"/policies", body), "checkIntervalMinutes")
	body = curlPolicy("Bad", f.a, "monitor")
	wantFields(t, f.e.Do(c, "POST", api+"/policies", body), "targets.ids")
	body["targets"] = map[string]any{"type": "organization", "ids": []string{f.b.OrgID}}
	wantFields(t, f.e.Do(c, "POST", api+"/policies", body), "targets.ids")
	body["targets"] = map[string]any{"type": "devices", "ids": []string{dev, dev}}
	wantFields(t, f.e.Do(c, "POST", api+"/policies", body), "targets.ids[1]")
	body = curlPolicy("Bad", f.a, "monitor", dev)
	body["rules"] = []map[string]any{}
	if r := f.e.Do(c, "POST", api+"/policies", body); r.Status != 400 {
		t.Fatalf("no rules: %d %s", r.Status, r.Body)
	}
	rules := make([]map[string]any, 51)
	for i := range rules {
		rules[i] = map[string]any{"type": "service_running", "name": fmt.Sprintf("s%d", i)}
	}
	body["rules"] = rules
	if r := f.e.Do(c, "POST", api+"/policies", body); r.Status != 400 {
		t.Fatalf("51 rules: %d %s", r.Status, r.Body)
	}
	// The remediation script must be within the policy's reach: another tenant's is not.
	body = curlPolicy("Bad", f.a, "enforce", dev)
	body["remediationScriptId"] = f.script(f.b, "Theirs")
	wantFields(t, f.e.Do(c, "POST", api+"/policies", body), "remediationScriptId")
	// A partner-wide policy needs a partner-wide script.
	body = curlPolicy("Wide", f.a, "enforce", dev)
	delete(body, "orgId")
	body["remediationScriptId"] = sc
	wantFields(t, f.e.Do(c, "POST", api+"/policies", body), "remediationScriptId")
	delete(body, "remediationScriptId")
	if wide := f.create(c, body); wide.OrgID != nil {
		t.Fatalf("wide %+v", wide)
	}

	f.e.Must(204, c, "DELETE", api+"/policies/"+p.ID, nil)
	wantCode(t, f.e.Do(c, "GET", api+"/policies/"+p.ID, nil), 404, "NOT_FOUND")
	wantCode(t, f.e.Do(c, "DELETE", api+"/policies/"+p.ID, nil), 404, "NOT_FOUND")
}

func TestPolicyTenancy(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "web-1")
	p := f.create(f.a.Partner, curlPolicy("Curl", f.a, "warn", dev))
	wide := map[string]any{"name": "Wide", "rules": []map[string]any{{"type": "service_running", "name": "cron"}},
		"targets": map[string]any{"type": "organization"}}
	pw := f.create(f.a.Partner, wide)
	routes := func(id string) [][3]any {
		return [][3]any{
			{"GET", "/policies/" + id, nil},
			{"PUT", "/policies/" + id, curlPolicy("X", f.a, "warn", dev)},
			{"PATCH", "/policies/" + id, map[string]any{"name": "X"}},
			{"DELETE", "/policies/" + id, nil},
			{"POST", "/policies/" + id + "/activate", nil},
			{"POST", "/policies/" + id + "/deactivate", nil},
			{"POST", "/policies/" + id + "/evaluate", nil},
			{"POST", "/policies/" + id + "/remediate", nil},
			{"GET", "/policies/" + id + "/compliance", nil},
		}
	}
	for _, caller := range []apptest.Caller{f.b.Partner, f.b.Org} {
		for _, r := range append(routes(p.ID), [3]any{"GET", "/policies/compliance/device/" + dev, nil}) {
			wantCode(t, f.e.Do(caller, r[0].(string), api+r[1].(string), r[2]), 404, "NOT_FOUND")
		}
		for _, path := range []string{"/policies", "/policies/compliance/summary"} {
			var l struct{ Data []map[string]any }
			f.e.Must(200, caller, "GET", api+path, nil).JSON(t, &l)
			if len(l.Data) != 0 {
				t.Fatalf("%s lists %v", path, l.Data)
			}
		}
		var st configpolicies.PolicyComplianceStats
		f.e.Must(200, caller, "GET", api+"/policies/compliance/stats", nil).JSON(t, &st)
		if st.Policies.Total != 0 || st.Devices.Total != 0 {
			t.Fatalf("stats %+v", st)
		}
	}
	// A partner-wide policy is the partner's: an organization's caller does not reach it,
	// though it sees its devices' compliance with it.
	for _, r := range routes(pw.ID) {
		wantCode(t, f.e.Do(f.a.Org, r[0].(string), api+r[1].(string), r[2]), 404, "NOT_FOUND")
	}
	var rep configpolicies.PolicyDeviceReport
	f.e.Must(200, f.a.Org, "GET", api+"/policies/compliance/device/"+dev, nil).JSON(t, &rep)
	if len(rep.Policies) != 2 || rep.State != configpolicies.StatePending {
		t.Fatalf("report %+v", rep)
	}
	// Another tenant's device in the targets matches nothing.
	other := f.device(f.b, "b-1")
	mixed := f.create(f.a.Partner, curlPolicy("Mixed", f.a, "monitor", dev, other))
	if rows := f.compliance(f.a.Partner, mixed.ID, ""); len(rows) != 1 || rows[0].DeviceID != dev {
		t.Fatalf("rows %+v", rows)
	}
	if cmds := f.commands(f.b, other, agentproto.CommandPolicyEvaluate); len(cmds) != 0 {
		t.Fatalf("another tenant's device got %d evaluations", len(cmds))
	}
}

func TestActivateAndDeactivateHaveOneWinner(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "web-1")
	p := f.create(f.a.Partner, curlPolicy("Curl", f.a, "monitor", dev))
	c := f.a.Partner
	wantCode(t, f.e.Do(c, "POST", api+"/policies/"+p.ID+"/activate", nil), 409, "POLICY_ALREADY_ACTIVE")
	var x configpolicies.Policy
	f.e.Must(200, c, "POST", api+"/policies/"+p.ID+"/deactivate", nil).JSON(t, &x)
	if x.Status != "inactive" || x.NextEvaluationAt != nil {
		t.Fatalf("deactivated %+v", x)
	}
	wantCode(t, f.e.Do(c, "POST", api+"/policies/"+p.ID+"/deactivate", nil), 409, "POLICY_ALREADY_INACTIVE")
	wantCode(t, f.e.Do(c, "POST", api+"/policies/"+p.ID+"/evaluate", nil), 409, "POLICY_INACTIVE")
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = f.e.Do(c, "POST", api+"/policies/"+p.ID+"/activate", nil).Status
		}()
	}
	wg.Wait()
	won := 0
	for _, s := range statuses {
		switch s {
		case 200:
			won++
		case 409:
		default:
			t.Fatalf("status %d", s)
		}
	}
	if won != 1 {
		t.Fatalf("%d activations won, want 1", won)
	}
	if got := f.get(c, p.ID); got.Status != "active" || got.NextEvaluationAt == nil {
		t.Fatalf("policy %+v", got)
	}
}

// TestRequiredSoftwareIsEnforced is the whole enforcement loop: a required_software policy
// goes non-compliant, its remediation runs, the device is evaluated again and goes compliant.
func TestRequiredSoftwareIsEnforced(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "web-1")
	sc := f.script(f.a, "Install curl")
	c := f.a.Partner
	body := curlPolicy("Curl", f.a, "enforce", dev)
	body["remediationScriptId"] = sc
	p := f.create(c, body)

	// Creating an active policy queues its evaluation: the device is pending meanwhile.
	if r := f.row(c, p.ID, dev); r.State != configpolicies.StatePending || !r.EvaluationPending {
		t.Fatalf("row %+v", r)
	}
	eval := f.outstanding(f.a, dev, agentproto.CommandPolicyEvaluate)
	var payload agentproto.PolicyEvaluate
	if err := json.Unmarshal(eval.Payload, &payload); err != nil || payload.PolicyID != p.ID || payload.Rules[0].Name != "curl" ||
		payload.Rules[0].MinVersion != "7.0" {
		t.Fatalf("payload %s", eval.Payload)
	}
	f.evaluated(f.a, dev, false)
	r := f.row(c, p.ID, dev)
	if r.State != configpolicies.StateNonCompliant || r.EvaluationPending || len(r.Results) != 1 || r.Results[0].Passed || r.EvaluatedAt == nil {
		t.Fatalf("row %+v", r)
	}
	if n := f.eventCount(configpolicies.EventNonCompliant, p.ID); n != 1 {
		t.Fatalf("%d non_compliant events", n)
	}
	// Enforcement: the remediation runs, and an alert opens.
	f.followUps()
	r = f.row(c, p.ID, dev)
	if r.RemediationExecutionID == nil {
		t.Fatalf("no remediation %+v", r)
	}
	var x scripts.ScriptExecution
	f.e.Must(200, c, "GET", api+"/scripts/executions/"+*r.RemediationExecutionID, nil).JSON(t, &x)
	if x.ScriptID != sc || x.DeviceID != dev || x.Status != scripts.StatusPending {
		t.Fatalf("execution %+v", x)
	}
	f.followUps()
	r = f.row(c, p.ID, dev)
	if r.AlertID == nil {
		t.Fatalf("no alert %+v", r)
	}
	var alert map[string]any
	f.e.Must(200, c, "GET", api+"/alerts/"+*r.AlertID, nil).JSON(t, &alert)
	if alert["status"] != "active" || alert["deviceId"] != dev || alert["severity"] != "high" {
		t.Fatalf("alert %v", alert)
	}
	// A second failing evaluation changes nothing: no second remediation or alert.
	f.followUps()
	if cmds := f.commands(f.a, dev, agentproto.CommandRunScript); len(cmds) != 1 {
		t.Fatalf("%d remediations", len(cmds))
	}
	// The remediation ends: the device is evaluated again at once.
	exit := 0
	f.report(f.a, dev, agentproto.CommandResult{CommandID: x.CommandID, Status: agentproto.ResultCompleted, ExitCode: &exit})
	f.followUps()
	if r = f.row(c, p.ID, dev); !r.EvaluationPending || r.RemediatedAt == nil {
		t.Fatalf("not re-evaluated %+v", r)
	}
	f.evaluated(f.a, dev, true)
	if r = f.row(c, p.ID, dev); r.State != configpolicies.StateCompliant {
		t.Fatalf("row %+v", r)
	}
	if n := f.eventCount(configpolicies.EventCompliant, p.ID); n != 1 {
		t.Fatalf("%d compliant events", n)
	}
	// Compliant again: the alert is resolved.
	f.followUps()
	f.e.Must(200, c, "GET", api+"/alerts/"+alert["id"].(string), nil).JSON(t, &alert)
	if alert["status"] != "resolved" {
		t.Fatalf("alert %v", alert)
	}
	if r = f.row(c, p.ID, dev); r.AlertID != nil {
		t.Fatalf("alert kept %+v", r)
	}
	var sum struct {
		Data []configpolicies.PolicyComplianceSummary
	}
	f.e.Must(200, c, "GET", api+"/policies/compliance/summary", nil).JSON(t, &sum)
	if len(sum.Data) != 1 || sum.Data[0].Compliant != 1 || sum.Data[0].Total != 1 || sum.Data[0].CompliancePercent == nil ||
		*sum.Data[0].CompliancePercent != 100 {
		t.Fatalf("summary %+v", sum.Data)
	}
}

func TestWarnRaisesAnAlertAndMonitorNone(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "web-1")
	c := f.a.Partner
	warn := f.create(c, curlPolicy("Warn", f.a, "warn", dev))
	monitor := f.create(c, curlPolicy("Monitor", f.a, "monitor", dev))
	for _, p := range []configpolicies.Policy{warn, monitor} {
		f.evaluatedFor(f.a, dev, p.ID, false)
	}
	f.followUps()
	f.followUps()
	w, m := f.row(c, warn.ID, dev), f.row(c, monitor.ID, dev)
	if w.State != configpolicies.StateNonCompliant || w.AlertID == nil || w.RemediationExecutionID != nil {
		t.Fatalf("warn %+v", w)
	}
	if m.State != configpolicies.StateNonCompliant || m.AlertID != nil {
		t.Fatalf("monitor %+v", m)
	}
	var alert map[string]any
	f.e.Must(200, c, "GET", api+"/alerts/"+*w.AlertID, nil).JSON(t, &alert)
	if alert["severity"] != "medium" || alert["status"] != "active" {
		t.Fatalf("alert %v", alert)
	}
	var rep configpolicies.PolicyDeviceReport
	f.e.Must(200, c, "GET", api+"/policies/compliance/device/"+dev, nil).JSON(t, &rep)
	if rep.State != configpolicies.StateNonCompliant || len(rep.Policies) != 2 {
		t.Fatalf("report %+v", rep)
	}
	var st configpolicies.PolicyComplianceStats
	f.e.Must(200, c, "GET", api+"/policies/compliance/stats", nil).JSON(t, &st)
	if st.Devices.NonCompliant != 1 || st.Devices.Total != 1 || st.Rows.NonCompliant != 2 || st.Policies.NonCompliant != 2 || st.Policies.Active != 2 {
		t.Fatalf("stats %+v", st)
	}
	// Dismissed by a technician, the alert is not reopened by later failing evaluations.
	f.e.Must(200, c, "POST", api+"/alerts/"+*w.AlertID+"/dismiss", nil)
	f.e.Must(202, c, "POST", api+"/policies/"+warn.ID+"/evaluate", nil)
	f.evaluatedFor(f.a, dev, warn.ID, false)
	f.followUps()
	if got := f.row(c, warn.ID, dev); got.AlertID == nil || *got.AlertID != *w.AlertID {
		t.Fatalf("row %+v", got)
	}
}

// A maintenance window that suppresses alerts holds a policy's alert back from a device it
// covers: the device is non-compliant without an alert, also at later evaluations during the
// window, while a device outside it alerts at once. The first evaluation after the window
// that finds it still non-compliant raises the alert.
func TestAWindowHoldsPolicyAlertsBack(t *testing.T) {
	f := newFixture(t)
	held, free := f.device(f.a, "web-1"), f.device(f.a, "web-2")
	c := f.a.Partner
	warn := f.create(c, curlPolicy("Warn", f.a, "warn", held, free))
	occ := f.e.StartMaintenance(f.a.Org, f.a.OrgID, map[string]any{"type": "devices", "ids": []string{held}})
	alertsOf := func(dev string) int {
		var l struct{ Data []map[string]any }
		f.e.Must(200, c, "GET", api+"/alerts?deviceId="+dev, nil).JSON(t, &l)
		return len(l.Data)
	}
	f.evaluatedFor(f.a, held, warn.ID, false)
	f.evaluatedFor(f.a, free, warn.ID, false)
	f.followUps()
	f.followUps()
	if r := f.row(c, warn.ID, held); r.State != configpolicies.StateNonCompliant || r.AlertID != nil || alertsOf(held) != 0 {
		t.Fatalf("held %+v, %d alerts", r, alertsOf(held))
	}
	if r := f.row(c, warn.ID, free); r.AlertID == nil || alertsOf(free) != 1 {
		t.Fatalf("free %+v, %d alerts", r, alertsOf(free))
	}
	f.e.Must(202, c, "POST", api+"/policies/"+warn.ID+"/evaluate", nil)
	f.evaluatedFor(f.a, held, warn.ID, false)
	f.followUps()
	if r := f.row(c, warn.ID, held); r.AlertID != nil || alertsOf(held) != 0 {
		t.Fatalf("held at a second evaluation %+v", r)
	}
	f.e.EndMaintenance(f.a.Org, occ)
	f.e.Must(202, c, "POST", api+"/policies/"+warn.ID+"/evaluate", nil)
	f.evaluatedFor(f.a, held, warn.ID, false)
	f.followUps()
	r := f.row(c, warn.ID, held)
	if r.AlertID == nil || alertsOf(held) != 1 {
		t.Fatalf("after the window %+v, %d alerts", r, alertsOf(held))
	}
	var alert map[string]any
	f.e.Must(200, c, "GET", api+"/alerts/"+*r.AlertID, nil).JSON(t, &alert)
	if alert["status"] != "active" || alert["deviceId"] != held {
		t.Fatalf("alert %v", alert)
	}
}

func TestFailedEvaluationsAreErrors(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "web-1")
	c := f.a.Partner
	p := f.create(c, curlPolicy("Curl", f.a, "warn", dev))
	cmd := f.outstanding(f.a, dev, agentproto.CommandPolicyEvaluate)
	f.report(f.a, dev, agentproto.CommandResult{CommandID: cmd.ID, Status: agentproto.ResultFailed, Error: "dpkg-query: not found"})
	r := f.row(c, p.ID, dev)
	if r.State != configpolicies.StateError || r.Error == nil || *r.Error != "dpkg-query: not found" {
		t.Fatalf("row %+v", r)
	}
	// A result that does not answer every rule is an error too.
	f.e.Must(202, c, "POST", api+"/policies/"+p.ID+"/evaluate", nil)
	cmd = f.outstanding(f.a, dev, agentproto.CommandPolicyEvaluate)
	f.report(f.a, dev, agentproto.CommandResult{CommandID: cmd.ID, Status: agentproto.ResultCompleted, Result: []byte(`{"results":[]}`)})
	if r = f.row(c, p.ID, dev); r.State != configpolicies.StateError {
		t.Fatalf("row %+v", r)
	}
	// Errors raise no alert.
	f.followUps()
	if r = f.row(c, p.ID, dev); r.AlertID != nil {
		t.Fatalf("row %+v", r)
	}
	if rows := f.compliance(c, p.ID, "?state=error"); len(rows) != 1 {
		t.Fatalf("filtered %+v", rows)
	}
	if rows := f.compliance(c, p.ID, "?state=compliant"); len(rows) != 0 {
		t.Fatalf("filtered %+v", rows)
	}
}

func TestEvaluateAndRemediateRoutes(t *testing.T) {
	f := newFixture(t)
	linux := f.device(f.a, "web-1")
	win := f.e.InsertDevice(apptest.DeviceRow{PartnerID: f.a.PartnerID, OrgID: f.a.OrgID, SiteID: f.a.SiteID, Hostname: "win-1",
		OSType: "windows", OSName: "Windows 11"})
	c := f.a.Partner
	p := f.create(c, map[string]any{"name": "Org", "orgId": f.a.OrgID, "rules": []map[string]any{{"type": "os_version", "minVersion": "12"}},
		"targets": map[string]any{"type": "organization", "ids": []string{f.a.OrgID}}})
	// Another OS cannot evaluate: its state says why.
	if r := f.row(c, p.ID, win); r.State != configpolicies.StateError || r.Error == nil {
		t.Fatalf("windows %+v", r)
	}
	var ev configpolicies.PolicyEvaluation
	f.e.Must(202, c, "POST", api+"/policies/"+p.ID+"/evaluate", nil).JSON(t, &ev)
	if ev.Devices != 2 || ev.Queued != 0 || ev.AlreadyPending != 1 || len(ev.Skipped) != 1 || ev.Skipped[0].DeviceID != win {
		t.Fatalf("evaluation %+v", ev)
	}
	f.evaluated(f.a, linux, false)
	f.e.Must(202, c, "POST", api+"/policies/"+p.ID+"/evaluate", nil).JSON(t, &ev)
	if ev.Queued != 1 || ev.AlreadyPending != 0 {
		t.Fatalf("evaluation %+v", ev)
	}
	wantCode(t, f.e.Do(c, "POST", api+"/policies/"+p.ID+"/remediate", nil), 400, "NO_REMEDIATION")
	sc := f.script(f.a, "Fix")
	f.e.Must(200, c, "PATCH", api+"/policies/"+p.ID, map[string]any{"remediationScriptId": sc})
	// Remediation runs a script: a caller without scripts:execute may not.
	var role struct{ ID string }
	f.e.Must(201, c, "POST", api+"/roles", map[string]any{"name": "policy editor", "scope": "partner",
		"permissions": []string{"configuration:read", "configuration:write", "devices:read"}}).JSON(t, &role)
	_, editor := f.e.CreateUser("editor@gale.test", access.LevelPartner, f.a.PartnerID, "", role.ID)
	wantCode(t, f.e.Do(editor, "POST", api+"/policies/"+p.ID+"/remediate", nil), 403, "")
	var rem configpolicies.PolicyRemediation
	f.e.Must(202, c, "POST", api+"/policies/"+p.ID+"/remediate", nil).JSON(t, &rem)
	if rem.Devices != 1 || len(rem.ExecutionIDs) != 1 {
		t.Fatalf("remediation %+v", rem)
	}
	if r := f.row(c, p.ID, linux); r.RemediationExecutionID == nil || *r.RemediationExecutionID != rem.ExecutionIDs[0] {
		t.Fatalf("row %+v", r)
	}
	for action, want := range map[string]int{"policy.create": 1, "policy.evaluate": 2, "policy.remediate": 1} {
		var n int
		if err := f.e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE action = $1 AND resource_id = $2`, action, p.ID).Scan(&n); err != nil || n != want {
			t.Errorf("%s audited %d times (%v), want %d", action, n, err, want)
		}
	}
}

func TestScheduleQueuesOncePerInterval(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "web-1")
	body := curlPolicy("Curl", f.a, "monitor", dev)
	body["checkIntervalMinutes"] = 15
	p := f.create(f.a.Partner, body)
	count := func() int { return len(f.commands(f.a, dev, agentproto.CommandPolicyEvaluate)) }
	run := func() {
		t.Helper()
		if err := f.service().RunSchedule(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if count() != 1 {
		t.Fatalf("%d evaluations after create", count())
	}
	run()
	if count() != 1 {
		t.Fatalf("%d evaluations, want 1: not due yet", count())
	}
	f.evaluated(f.a, dev, true)
	f.clock.Advance(14 * time.Minute)
	run()
	if count() != 1 {
		t.Fatalf("%d evaluations before the interval", count())
	}
	f.clock.Advance(time.Minute)
	// Two nodes run the schedule at once: one queues.
	second := app.Service[*configpolicies.Service](f.e.SecondNode().App)
	var wg sync.WaitGroup
	for _, s := range []*configpolicies.Service{f.service(), second} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.RunSchedule(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if count() != 2 {
		t.Fatalf("%d evaluations after the interval, want 2", count())
	}
	// A device whose evaluation is still outstanding gets no second one.
	f.clock.Advance(16 * time.Minute)
	run()
	if count() != 2 {
		t.Fatalf("%d evaluations, want 2: one is outstanding", count())
	}
	if got := f.get(f.a.Partner, p.ID); got.LastEvaluatedAt == nil || f.clock.Now().Sub(*got.LastEvaluatedAt) > 5*time.Second {
		t.Fatalf("lastEvaluatedAt %v, want %v", got.LastEvaluatedAt, f.clock.Now())
	}
	// An inactive policy is not scheduled.
	f.e.Must(200, f.a.Partner, "POST", api+"/policies/"+p.ID+"/deactivate", nil)
	f.evaluated(f.a, dev, true)
	f.clock.Advance(time.Hour)
	run()
	if count() != 2 {
		t.Fatalf("%d evaluations of an inactive policy", count())
	}
}

func TestDevicesLeavingTheTargetsLeaveTheCompliance(t *testing.T) {
	f := newFixture(t)
	one, two := f.device(f.a, "one"), f.device(f.a, "two")
	c := f.a.Partner
	p := f.create(c, curlPolicy("Curl", f.a, "monitor", one, two))
	if rows := f.compliance(c, p.ID, ""); len(rows) != 2 {
		t.Fatalf("rows %+v", rows)
	}
	f.e.Must(200, c, "PATCH", api+"/policies/"+p.ID, map[string]any{"targets": map[string]any{"type": "devices", "ids": []string{two}}})
	if rows := f.compliance(c, p.ID, ""); len(rows) != 1 || rows[0].DeviceID != two {
		t.Fatalf("rows %+v", rows)
	}
}

func TestPartnerAPIExportsPoliciesAndAssignments(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "web-1")
	p := f.create(f.a.Partner, curlPolicy("Curl", f.a, "warn", dev))
	wide := f.create(f.a.Partner, map[string]any{"name": "Wide", "rules": []map[string]any{{"type": "service_running", "name": "cron"}},
		"targets": map[string]any{"type": "organization"}})
	f.create(f.b.Partner, curlPolicy("Theirs", f.b, "warn", f.device(f.b, "b")))
	id := f.e.Must(201, f.a.Partner, "POST", api+"/partner-service-principals", map[string]any{"name": "export",
		"scopes": []string{"configuration:read"}}).Map(t)["id"].(string)
	key := f.e.Must(201, f.a.Partner, "POST", api+"/partner-service-principals/"+id+"/keys", map[string]any{"name": "k"}).Map(t)["key"].(string)
	var pol struct{ Data []configpolicies.Policy }
	f.e.Must(200, apptest.Key(key), "GET", api+"/partner-api/configuration-policies", nil).JSON(t, &pol)
	if len(pol.Data) != 2 || pol.Data[0].ID != p.ID || pol.Data[1].ID != wide.ID || len(pol.Data[0].Rules) != 1 || pol.Data[0].Targets.IDs[0] != dev {
		t.Fatalf("policies %+v", pol.Data)
	}
	var as struct {
		Data []configpolicies.PolicyAssignment
	}
	f.e.Must(200, apptest.Key(key), "GET", api+"/partner-api/configuration-assignments", nil).JSON(t, &as)
	if len(as.Data) != 2 || as.Data[0].PolicyID != p.ID || as.Data[0].TargetType != "devices" || as.Data[0].TargetID == nil ||
		*as.Data[0].TargetID != dev || as.Data[1].PolicyID != wide.ID || as.Data[1].TargetID != nil || as.Data[1].OrgID != nil {
		t.Fatalf("assignments %+v", as.Data)
	}
}

func TestLostEvaluationsEndInError(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "web-1")
	body := curlPolicy("Curl", f.a, "monitor", dev)
	body["checkIntervalMinutes"] = 15
	p := f.create(f.a.Partner, body)
	first := f.outstanding(f.a, dev, agentproto.CommandPolicyEvaluate)
	// Within the command's lifetime the evaluation is waited for.
	f.clock.Advance(time.Hour)
	if err := f.service().RunSchedule(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := f.row(f.a.Partner, p.ID, dev); r.State != configpolicies.StatePending || !r.EvaluationPending {
		t.Fatalf("row %+v", r)
	}
	// Past it, the device is in error and evaluated anew.
	f.clock.Advance(15 * time.Minute)
	if err := f.service().RunSchedule(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := f.row(f.a.Partner, p.ID, dev)
	if r.State != configpolicies.StateError || r.Error == nil || !r.EvaluationPending {
		t.Fatalf("row %+v", r)
	}
	// A late answer of the lost evaluation changes nothing; the new one counts.
	f.report(f.a, dev, agentproto.CommandResult{CommandID: first.ID, Status: agentproto.ResultCompleted,
		Result: []byte(`{"results":[{"rule":0,"type":"required_software","passed":true}]}`)})
	if r = f.row(f.a.Partner, p.ID, dev); r.State != configpolicies.StateError {
		t.Fatalf("row %+v", r)
	}
	f.evaluatedFor(f.a, dev, p.ID, true)
	if r = f.row(f.a.Partner, p.ID, dev); r.State != configpolicies.StateCompliant || r.Error != nil {
		t.Fatalf("row %+v", r)
	}
}

func TestPolicyEvaluateCommandsAreValidated(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "web-1")
	send := func(payload any) *apptest.Response {
		return f.e.Do(f.a.Partner, "POST", api+"/devices/"+dev+"/commands", map[string]any{"type": agentproto.CommandPolicyEvaluate,
			"payload": payload})
	}
	wantFields(t, send(map[string]any{"policyId": "x", "rules": []map[string]any{{"type": "config_check", "path": "relative", "key": "a",
		"operator": "present"}}}), "payload.rules[0].path")
	if r := send(map[string]any{"policyId": "x", "rules": []map[string]any{}}); r.Status != 400 {
		t.Fatalf("no rules: %d %s", r.Status, r.Body)
	}
	if r := send(map[string]any{"rules": []map[string]any{{"type": "os_version", "minVersion": "12"}}, "extra": 1}); r.Status != 400 {
		t.Fatalf("unknown field: %d %s", r.Status, r.Body)
	}
	if r := send(map[string]any{"policyId": "x", "rules": []map[string]any{{"type": "os_version", "minVersion": "12"}}}); r.Status/100 != 2 {
		t.Fatalf("valid: %d %s", r.Status, r.Body)
	}
}

func TestAnInactivePolicyEnforcesNothing(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "web-1")
	c := f.a.Partner
	body := curlPolicy("Curl", f.a, "enforce", dev)
	body["remediationScriptId"] = f.script(f.a, "Fix")
	p := f.create(c, body)
	f.e.Must(200, c, "POST", api+"/policies/"+p.ID+"/deactivate", nil)
	// The evaluation sent before still reports, and is recorded.
	f.evaluated(f.a, dev, false)
	f.followUps()
	r := f.row(c, p.ID, dev)
	if r.State != configpolicies.StateNonCompliant || r.AlertID != nil || r.RemediationExecutionID != nil {
		t.Fatalf("row %+v", r)
	}
	if cmds := f.commands(f.a, dev, agentproto.CommandRunScript); len(cmds) != 0 {
		t.Fatalf("%d remediations", len(cmds))
	}
}

func TestARowFollowsItsDeviceToAnotherOrganization(t *testing.T) {
	f := newFixture(t)
	dev := f.device(f.a, "web-1")
	c := f.a.Partner
	p := f.create(c, map[string]any{"name": "Wide", "rules": []map[string]any{{"type": "service_running", "name": "cron"}},
		"targets": map[string]any{"type": "organization"}})
	second := f.e.CreateOrg(f.e.Admin(), f.a.PartnerID, "Alpha Second")
	f.e.Must(200, c, "POST", api+"/devices/"+dev+"/move-org", map[string]any{"orgId": second})
	f.e.Must(202, c, "POST", api+"/policies/"+p.ID+"/evaluate", nil)
	if r := f.row(c, p.ID, dev); r.OrgID != second {
		t.Fatalf("row %+v, want org %s", r, second)
	}
	var rep configpolicies.PolicyDeviceReport
	f.e.Must(200, c, "GET", api+"/policies/compliance/device/"+dev, nil).JSON(t, &rep)
	if len(rep.Policies) != 1 || rep.Policies[0].OrgID != second {
		t.Fatalf("report %+v", rep)
	}
	// The first organization's own caller no longer sees it.
	wantCode(t, f.e.Do(f.a.Org, "GET", api+"/policies/compliance/device/"+dev, nil), 404, "NOT_FOUND")
}
