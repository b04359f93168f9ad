package alerts_test

import (
	"encoding/json"
	"strings"
	"testing"

	"gale/internal/platform/access"
	"gale/internal/testkit/apptest"
)

func TestRuleCRUDAndDefaults(t *testing.T) {
	x := newEnv(t)
	id := x.rule(x.ten.Partner, map[string]any{"name": "High CPU", "severity": "critical",
		"conditions": map[string]any{"logic": "and", "conditions": []any{
			map[string]any{"type": "threshold", "metric": "cpuPercent", "operator": "gte", "value": 90, "durationMinutes": 10},
			map[string]any{"logic": "or", "conditions": []any{
				map[string]any{"type": "offline", "durationMinutes": 5},
				map[string]any{"type": "command_failed", "commandTypes": []string{"script"}},
			}},
		}}})
	var r struct {
		OrgID           *string         `json:"orgId"`
		Enabled         bool            `json:"enabled"`
		AutoResolve     bool            `json:"autoResolve"`
		CooldownMinutes int             `json:"cooldownMinutes"`
		TitleTemplate   string          `json:"titleTemplate"`
		Targets         map[string]any  `json:"targets"`
		Conditions      json.RawMessage `json:"conditions"`
		Name            string          `json:"name"`
	}
	x.Must(200, x.ten.Org, "GET", api+"/alerts/rules/"+id, nil).JSON(t, &r)
	if r.OrgID != nil || !r.Enabled || !r.AutoResolve || r.CooldownMinutes != 5 || r.Targets["type"] != "all" ||
		!strings.Contains(r.TitleTemplate, "{{hostname}}") {
		t.Fatalf("defaults = %+v", r)
	}
	// The command_failed window defaults to 60 minutes.
	if !strings.Contains(string(r.Conditions), `"commandTypes":["script"],`) && !strings.Contains(string(r.Conditions), `"durationMinutes":60`) {
		t.Fatalf("conditions = %s", r.Conditions)
	}
	x.Must(200, x.ten.Partner, "PATCH", api+"/alerts/rules/"+id, map[string]any{"name": "Very high CPU", "enabled": false,
		"cooldownMinutes": 15, "targets": map[string]any{"type": "org", "ids": []string{x.ten.OrgID}}}).JSON(t, &r)
	if r.Name != "Very high CPU" || r.Enabled || r.CooldownMinutes != 15 || r.Targets["type"] != "org" {
		t.Fatalf("after patch = %+v", r)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	x.Must(200, x.ten.Org, "GET", api+"/alerts/rules", nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != id {
		t.Fatalf("list = %+v", list)
	}
	// An organization admin may not change a partner-wide rule, but creates rules of its own.
	if r := x.Do(x.ten.Org, "PATCH", api+"/alerts/rules/"+id, map[string]any{"name": "x"}); r.Status != 403 {
		t.Fatalf("org admin patching a partner rule = %d %s", r.Status, r.Body)
	}
	own := x.rule(x.ten.Org, cpuRule("Org CPU", 80, nil))
	x.Must(200, x.ten.Org, "GET", api+"/alerts/rules/"+own, nil).JSON(t, &r)
	if r.OrgID == nil || *r.OrgID != x.ten.OrgID {
		t.Fatalf("org rule placed at %v", r.OrgID)
	}
	x.Must(204, x.ten.Partner, "DELETE", api+"/alerts/rules/"+id, nil)
	x.Must(404, x.ten.Partner, "GET", api+"/alerts/rules/"+id, nil)
	// Audit entries of each change.
	var n int
	if err := x.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE resource_id = $1 AND action LIKE 'alert_rule.%'`, id).Scan(&n); err != nil || n != 3 {
		t.Fatalf("audit entries of the rule = %d, %v", n, err)
	}
}

func TestRuleValidation(t *testing.T) {
	x := newEnv(t)
	other := x.NewTenant(x.admin, "Beta")
	otherDev := x.InsertDevice(apptest.DeviceRow{PartnerID: other.PartnerID, OrgID: other.OrgID, SiteID: other.SiteID, Hostname: "b"})
	deep := map[string]any{"logic": "and", "conditions": []any{map[string]any{"logic": "or", "conditions": []any{
		map[string]any{"logic": "and", "conditions": []any{map[string]any{"logic": "or", "conditions": []any{
			map[string]any{"type": "offline", "durationMinutes": 5}}}}}}}}}
	cases := []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"no name", map[string]any{"severity": "high", "conditions": map[string]any{"type": "offline", "durationMinutes": 5}}, "name"},
		{"bad severity", cpuRule("x", 90, map[string]any{"severity": "urgent"}), "severity"},
		{"no conditions", map[string]any{"name": "x", "severity": "high"}, "conditions"},
		{"no severity", map[string]any{"name": "x", "conditions": map[string]any{"type": "offline", "durationMinutes": 5}}, "severity"},
		{"unknown template", cpuRule("x", 90, map[string]any{"templateId": "00000000-0000-7000-8000-000000000399"}), "templateId"},
		{"null conditions", map[string]any{"name": "x", "severity": "high", "conditions": nil}, "conditions"},
		{"unknown metric", cpuRule("x", 90, map[string]any{"conditions": map[string]any{"type": "threshold", "metric": "gpu", "operator": "gt", "value": 1}}), "conditions.metric"},
		{"bad operator", cpuRule("x", 90, map[string]any{"conditions": map[string]any{"type": "threshold", "metric": "cpuPercent", "operator": ">", "value": 1}}), "conditions.operator"},
		{"no value", cpuRule("x", 90, map[string]any{"conditions": map[string]any{"type": "threshold", "metric": "cpuPercent", "operator": "gt"}}), "conditions.value"},
		{"duration too long", cpuRule("x", 90, map[string]any{"conditions": map[string]any{"type": "threshold", "metric": "cpuPercent", "operator": "gt", "value": 1, "durationMinutes": 1441}}), "conditions.durationMinutes"},
		{"window longer than the metrics history", cpuRule("x", 90, map[string]any{"conditions": map[string]any{"type": "threshold", "metric": "cpuPercent", "operator": "gt", "value": 1, "durationMinutes": 361}}), "conditions.durationMinutes"},
		{"offline without duration", cpuRule("x", 90, map[string]any{"conditions": map[string]any{"type": "offline"}}), "conditions.durationMinutes"},
		{"field of another type", cpuRule("x", 90, map[string]any{"conditions": map[string]any{"type": "offline", "durationMinutes": 5, "metric": "cpuPercent"}}), "conditions"},
		{"unknown field", cpuRule("x", 90, map[string]any{"conditions": map[string]any{"type": "offline", "durationMinutes": 5, "foo": 1}}), "conditions"},
		{"unknown type", cpuRule("x", 90, map[string]any{"conditions": map[string]any{"type": "service_stopped"}}), "conditions.type"},
		{"bad logic", cpuRule("x", 90, map[string]any{"conditions": map[string]any{"logic": "xor", "conditions": []any{map[string]any{"type": "offline", "durationMinutes": 1}}}}), "conditions.logic"},
		{"empty group", cpuRule("x", 90, map[string]any{"conditions": map[string]any{"logic": "and", "conditions": []any{}}}), "conditions.conditions"},
		{"too deep", cpuRule("x", 90, map[string]any{"conditions": deep}), "conditions.conditions[0].conditions[0].conditions[0]"},
		{"bad target type", cpuRule("x", 90, map[string]any{"targets": map[string]any{"type": "tag", "ids": []string{}}}), "targets.type"},
		{"all with ids", cpuRule("x", 90, map[string]any{"targets": map[string]any{"type": "all", "ids": []string{x.dev.DeviceID}}}), "targets.ids"},
		{"device without ids", cpuRule("x", 90, map[string]any{"targets": map[string]any{"type": "device", "ids": []string{}}}), "targets.ids"},
		{"device of another tenant", cpuRule("x", 90, map[string]any{"targets": map[string]any{"type": "device", "ids": []string{otherDev}}}), "targets.ids[0]"},
		{"cooldown negative", cpuRule("x", 90, map[string]any{"cooldownMinutes": -1}), "cooldownMinutes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := x.Do(x.ten.Partner, "POST", api+"/alerts/rules", c.body)
			if r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" {
				t.Fatalf("= %d %s, want 400 VALIDATION_ERROR", r.Status, r.Body)
			}
			var env struct {
				Error struct {
					Details []struct {
						Field string `json:"field"`
					} `json:"details"`
				} `json:"error"`
			}
			r.JSON(t, &env)
			found := false
			for _, d := range env.Error.Details {
				found = found || d.Field == c.field
			}
			if !found {
				t.Fatalf("details %s do not name %s", r.Body, c.field)
			}
		})
	}
	// Several problems come back together.
	r := x.Do(x.ten.Partner, "POST", api+"/alerts/rules", map[string]any{"name": "", "severity": "x",
		"conditions": map[string]any{"type": "threshold"}})
	if r.Status != 400 || strings.Count(string(r.Body), `"field"`) < 4 {
		t.Fatalf("several problems = %d %s", r.Status, r.Body)
	}
}

func TestRuleTenancy(t *testing.T) {
	x := newEnv(t)
	other := x.NewTenant(x.admin, "Beta")
	id := x.rule(x.ten.Partner, cpuRule("CPU", 90, nil))
	orgRule := x.rule(x.ten.Org, cpuRule("Org CPU", 90, nil))
	for _, c := range []apptest.Caller{other.Partner, other.Org} {
		for _, rid := range []string{id, orgRule} {
			x.Must(404, c, "GET", api+"/alerts/rules/"+rid, nil)
			x.Must(404, c, "PATCH", api+"/alerts/rules/"+rid, map[string]any{"name": "x"})
			x.Must(404, c, "POST", api+"/alerts/rules/"+rid+"/test", nil)
			x.Must(404, c, "DELETE", api+"/alerts/rules/"+rid, nil)
		}
		var list struct {
			Data []any `json:"data"`
		}
		x.Must(200, c, "GET", api+"/alerts/rules", nil).JSON(t, &list)
		if len(list.Data) != 0 {
			t.Fatalf("another tenant lists %d rules", len(list.Data))
		}
	}
	// A second organization of the same partner does not see the first one's rule.
	org2 := x.CreateOrg(x.ten.Partner, "", "Second")
	_, org2Admin := x.CreateUser("org2@gale.test", access.LevelOrganization, x.ten.PartnerID, org2, "")
	x.Must(404, org2Admin, "GET", api+"/alerts/rules/"+orgRule, nil)
	x.Must(200, org2Admin, "GET", api+"/alerts/rules/"+id, nil)
	// Org viewers read but do not write.
	_, viewer := x.CreateUser("viewer@gale.test", access.LevelOrganization, x.ten.PartnerID, x.ten.OrgID, access.RoleOrgViewer)
	x.Must(200, viewer, "GET", api+"/alerts/rules/"+orgRule, nil)
	x.Must(403, viewer, "POST", api+"/alerts/rules", cpuRule("v", 1, nil))
}
