// Package fixturegen makes the upgrade fixtures beside it. It is written against the code of
// commit 036ee91 (its package paths and API): copy it into internal/fixturegen/ of a checkout
// of that commit and run it as README.md says. Under testdata, Go leaves it alone here.
package fixturegen

import (
	"fmt"
	"os"
	"testing"

	"gale/internal/agentproto"
	"gale/internal/apptest"
	"gale/internal/config"
)

const api = "/api/v1"

func must(e *apptest.Env, want int, c apptest.Caller, method, path string, body any) map[string]any {
	e.T.Helper()
	r := e.Do(c, method, path, body)
	if r.Status != want {
		e.T.Fatalf("%s %s = %d %s", method, path, r.Status, r.Body)
	}
	if len(r.Body) == 0 {
		return nil
	}
	return r.Map(e.T)
}

func beat(e *apptest.Env, dev agentproto.EnrollResponse, cpu float64) {
	e.T.Helper()
	must(e, 200, apptest.Caller{Token: dev.AuthToken}, "POST", api+"/agents/"+dev.DeviceID+"/heartbeat",
		agentproto.Heartbeat{AgentVersion: "1.0.0", Metrics: &agentproto.Metrics{CPUPercent: cpu, RAMPercent: 40, DiskPercent: 55}})
}

// TestMakeFixture fills the database FIXTURE_DATABASE_URL names (empty, migrated by the server
// as it starts) through the API, as clients and agents would: two partners with an
// organization each, sites, users, four devices (three enrolled agents, one inserted offline
// with tags), an alert rule and the alert a heartbeat raised, acknowledged, a custom field and
// its value, a static group, a script and its run, an automation and its run (which raised
// three alerts), a maintenance window and its occurrences, a notification channel, a webhook
// and an API key. The audit log, events and enrollment keys come with them.
func TestMakeFixture(t *testing.T) {
	url := os.Getenv("FIXTURE_DATABASE_URL")
	if url == "" {
		t.Skip("FIXTURE_DATABASE_URL not set")
	}
	e := apptest.New(t, func(c *config.Config) { c.DatabaseURL = url })
	admin := e.Admin()
	ten := e.NewTenant(admin, "Fixture")
	other := e.NewTenant(admin, "Other")
	site := must(e, 201, ten.Partner, "POST", api+"/orgs/sites", map[string]any{"orgId": ten.OrgID, "name": "Branch Office"})
	fmt.Println("partner", ten.PartnerID, "org", ten.OrgID, "site", ten.SiteID, "branch", site["id"], "other org", other.OrgID)

	rule := must(e, 201, ten.Partner, "POST", api+"/alerts/rules", map[string]any{"name": "High CPU", "severity": "high",
		"titleTemplate": "CPU {{value}}% > {{threshold}}% on {{hostname}}",
		"conditions":    map[string]any{"type": "threshold", "metric": "cpuPercent", "operator": "gt", "value": 90}})
	web := e.EnrollAgent(ten, "web-01")
	db := e.EnrollAgent(ten, "db-01")
	otherDev := e.EnrollAgent(other, "other-01")
	beat(e, web, 20)
	beat(e, db, 97)
	beat(e, otherDev, 10)
	laptop := e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: site["id"].(string),
		Hostname: "laptop-07", Status: "offline", Tags: []string{"laptop", "finance"}})
	fmt.Println("rule", rule["id"], "devices", web.DeviceID, db.DeviceID, laptop, otherDev.DeviceID)

	alerts := must(e, 200, ten.Org, "GET", api+"/alerts", nil)
	list := alerts["data"].([]any)
	if len(list) != 1 {
		t.Fatalf("alerts: %v", alerts)
	}
	alertID := list[0].(map[string]any)["id"].(string)
	must(e, 200, ten.Org, "POST", api+"/alerts/"+alertID+"/acknowledge", map[string]any{})
	fmt.Println("alert", alertID)

	must(e, 201, ten.Partner, "POST", api+"/custom-fields", map[string]any{"key": "tier", "name": "Tier", "type": "text"})
	must(e, 200, ten.Partner, "PATCH", api+"/devices/"+web.DeviceID+"/custom-fields", map[string]any{"values": map[string]any{"tier": "gold"}})
	group := must(e, 201, ten.Partner, "POST", api+"/groups", map[string]any{"orgId": ten.OrgID, "name": "Web", "type": "static"})
	must(e, 200, ten.Partner, "POST", api+"/groups/"+group["id"].(string)+"/devices", map[string]any{"deviceIds": []string{web.DeviceID}})

	script := must(e, 201, ten.Partner, "POST", api+"/scripts", map[string]any{"name": "Disk usage", "orgId": ten.OrgID,
		"osTypes": []string{"linux"}, "language": "sh", "content": "df -h",
		"parameters": []map[string]any{{"name": "LEVEL", "type": "string", "defaultValue": "info"}}})
	must(e, 202, ten.Partner, "POST", api+"/scripts/"+script["id"].(string)+"/execute", map[string]any{"deviceIds": []string{web.DeviceID}})

	auto := must(e, 201, ten.Partner, "POST", api+"/automations", map[string]any{"name": "Nightly check", "trigger": map[string]any{"type": "manual"},
		"targets": map[string]any{"type": "organization"}, "orgId": ten.OrgID,
		"actions": []map[string]any{{"type": "create_alert", "severity": "low", "title": "check", "message": "raised by an automation"}}})
	run := must(e, 202, ten.Partner, "POST", api+"/automations/"+auto["id"].(string)+"/run", map[string]any{})
	fmt.Println("script", script["id"], "automation", auto["id"], "run", run["id"], run["status"])

	must(e, 201, ten.Org, "POST", api+"/maintenance/windows", map[string]any{"name": "Nightly", "startTime": "2026-12-01T02:00:00",
		"endTime": "2026-12-01T04:00:00", "timezone": "Europe/Berlin", "recurrence": "daily", "targets": map[string]any{"type": "all"},
		"suppressPatches": true})
	ch := must(e, 201, ten.Partner, "POST", api+"/alerts/channels", map[string]any{"name": "Ops", "type": "slack", "orgId": ten.OrgID,
		"config": map[string]any{"webhookUrl": "https://hooks.slack.com/services/T0/B0/x"}})
	fmt.Println("channel", ch["id"])
	must(e, 201, ten.Partner, "POST", api+"/webhooks", map[string]any{"name": "Ops", "url": "https://hooks.example.com/gale",
		"events": []string{"device.*", "alert.triggered"}})
	must(e, 201, ten.Partner, "POST", api+"/api-keys", map[string]any{"name": "Reporting", "permissions": []string{"devices:read"}})
}
