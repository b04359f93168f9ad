package alerts_test

import (
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/alerts"

	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

func TestTemplates(t *testing.T) {
	x := newEnv(t)
	other := x.NewTenant(x.admin, "Beta")
	var builtIn struct {
		Data []struct {
			ID         string         `json:"id"`
			Name       string         `json:"name"`
			BuiltIn    bool           `json:"builtIn"`
			Conditions map[string]any `json:"conditions"`
		} `json:"data"`
	}
	x.Must(200, x.ten.Org, "GET", api+"/alert-templates/templates/built-in", nil).JSON(t, &builtIn)
	if len(builtIn.Data) < 5 || !builtIn.Data[0].BuiltIn || builtIn.Data[0].Name != "High CPU" {
		t.Fatalf("built-in = %+v", builtIn)
	}
	highCPU := builtIn.Data[0].ID
	x.Must(403, x.ten.Partner, "PATCH", api+"/alert-templates/templates/"+highCPU, map[string]any{"name": "x"})
	x.Must(403, x.ten.Partner, "DELETE", api+"/alert-templates/templates/"+highCPU, nil)

	// A rule from a built-in template takes its fields; the body overrides them.
	var r struct {
		Name          string         `json:"name"`
		Severity      string         `json:"severity"`
		TitleTemplate string         `json:"titleTemplate"`
		Conditions    map[string]any `json:"conditions"`
	}
	x.Must(201, x.ten.Partner, "POST", api+"/alerts/rules", map[string]any{"templateId": highCPU, "severity": "critical"}).JSON(t, &r)
	if r.Name != "High CPU" || r.Severity != "critical" || r.TitleTemplate != "High CPU on {{hostname}}" || r.Conditions["metric"] != "cpuPercent" {
		t.Fatalf("rule from template = %+v", r)
	}

	// Custom templates: create, list, change, use, delete; scoped like rules.
	var tpl struct {
		ID       string `json:"id"`
		Severity string `json:"severity"`
	}
	x.Must(201, x.ten.Org, "POST", api+"/alert-templates/templates", map[string]any{"name": "Disk 80", "severity": "medium",
		"conditions": map[string]any{"type": "threshold", "metric": "diskPercent", "operator": "gte", "value": 80}}).JSON(t, &tpl)
	if r := x.Do(x.ten.Org, "POST", api+"/alert-templates/templates", map[string]any{"name": "bad", "severity": "medium",
		"conditions": map[string]any{"type": "threshold", "metric": "disk"}}); r.Status != 400 {
		t.Fatalf("invalid template = %d", r.Status)
	}
	x.Must(200, x.ten.Org, "PATCH", api+"/alert-templates/templates/"+tpl.ID, map[string]any{"severity": "low"}).JSON(t, &tpl)
	if tpl.Severity != "low" {
		t.Fatalf("patched template = %+v", tpl)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	x.Must(200, x.ten.Partner, "GET", api+"/alert-templates/templates", nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != tpl.ID {
		t.Fatalf("templates = %+v", list)
	}
	x.Must(200, other.Partner, "GET", api+"/alert-templates/templates", nil).JSON(t, &list)
	if len(list.Data) != 0 {
		t.Fatalf("another tenant lists %+v", list)
	}
	x.Must(404, other.Partner, "PATCH", api+"/alert-templates/templates/"+tpl.ID, map[string]any{"name": "x"})
	x.Must(404, other.Partner, "DELETE", api+"/alert-templates/templates/"+tpl.ID, nil)
	if r := x.Do(other.Partner, "POST", api+"/alerts/rules", map[string]any{"templateId": tpl.ID}); r.Status != 400 {
		t.Fatalf("another tenant's template in a rule = %d", r.Status)
	}
	x.Must(201, x.ten.Org, "POST", api+"/alerts/rules", map[string]any{"templateId": tpl.ID}).JSON(t, &r)
	if r.Name != "Disk 80" || r.Severity != "low" {
		t.Fatalf("rule from a custom template = %+v", r)
	}
	x.Must(204, x.ten.Org, "DELETE", api+"/alert-templates/templates/"+tpl.ID, nil)
	x.Must(404, x.ten.Org, "PATCH", api+"/alert-templates/templates/"+tpl.ID, map[string]any{"name": "x"})
}

func TestCorrelationGroupsASiteOutage(t *testing.T) {
	x := newEnv(t)
	other := x.NewTenant(x.admin, "Beta")
	ruleID := x.rule(x.ten.Partner, map[string]any{"name": "Offline", "severity": "high",
		"conditions": map[string]any{"type": "offline", "durationMinutes": 5}})
	var devs []string
	for i := 0; i < 4; i++ {
		devs = append(devs, x.InsertDevice(apptest.DeviceRow{PartnerID: x.ten.PartnerID, OrgID: x.ten.OrgID, SiteID: x.ten.SiteID,
			Hostname: "pc", Status: "offline", LastSeen: time.Now().Add(-10 * time.Minute)}))
	}
	// A lone device whose alert is two hours older than the wave.
	lone := x.InsertDevice(apptest.DeviceRow{PartnerID: x.ten.PartnerID, OrgID: x.ten.OrgID, SiteID: x.ten.SiteID,
		Hostname: "old", Status: "offline", LastSeen: time.Now().Add(-3 * time.Hour)})
	if err := app.Service[*alerts.Service](x.App).EvaluateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	var loneAlert string
	if err := x.App.DB.SQL.QueryRow(`SELECT id FROM alerts WHERE device_id = $1`, lone).Scan(&loneAlert); err != nil {
		t.Fatal(err)
	}
	x.exec(`UPDATE alerts SET triggered_at = $1 WHERE id = $2`, store.Now().Add(-2*time.Hour), loneAlert)
	var groups struct {
		Data []struct {
			RuleID      string   `json:"ruleId"`
			SiteID      string   `json:"siteId"`
			AlertIDs    []string `json:"alertIds"`
			DeviceCount int      `json:"deviceCount"`
			Severity    string   `json:"severity"`
		} `json:"data"`
	}
	x.Must(200, x.ten.Org, "GET", api+"/alert-templates/correlations/groups", nil).JSON(t, &groups)
	if len(groups.Data) != 1 || groups.Data[0].DeviceCount != 4 || groups.Data[0].RuleID != ruleID || groups.Data[0].SiteID != x.ten.SiteID ||
		groups.Data[0].Severity != "high" {
		t.Fatalf("groups = %+v", groups)
	}
	var res struct {
		AnalyzedAlerts int `json:"analyzedAlerts"`
		Groups         []struct {
			AlertIDs []string `json:"alertIds"`
		} `json:"groups"`
	}
	x.Must(200, x.ten.Partner, "POST", api+"/alert-templates/correlations/analyze", map[string]any{"windowMinutes": 180, "minAlerts": 5}).JSON(t, &res)
	if res.AnalyzedAlerts != 5 || len(res.Groups) != 1 || len(res.Groups[0].AlertIDs) != 5 {
		t.Fatalf("analyze with a 3-hour window = %+v", res)
	}
	var of struct {
		Group *struct {
			DeviceCount int `json:"deviceCount"`
		} `json:"group"`
	}
	x.Must(200, x.ten.Org, "GET", api+"/alert-templates/correlations?alertId="+groups.Data[0].AlertIDs[0], nil).JSON(t, &of)
	if of.Group == nil || of.Group.DeviceCount != 4 {
		t.Fatalf("correlation of an alert = %+v", of)
	}
	x.Must(200, x.ten.Org, "GET", api+"/alert-templates/correlations?alertId="+loneAlert, nil).JSON(t, &of)
	if of.Group != nil {
		t.Fatalf("the lone alert has a group: %+v", of)
	}
	x.Must(404, other.Org, "GET", api+"/alert-templates/correlations?alertId="+loneAlert, nil)
	x.Must(200, other.Org, "GET", api+"/alert-templates/correlations/groups", nil).JSON(t, &groups)
	if len(groups.Data) != 0 {
		t.Fatalf("another tenant sees groups %+v", groups)
	}
	_ = devs
}
