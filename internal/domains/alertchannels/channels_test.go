package alertchannels_test

import (
	"context"
	"strings"
	"testing"

	"gale/internal/platform/config"
	"gale/internal/testkit/apptest"
)

func TestChannelCRUDMasksSecrets(t *testing.T) {
	x := newEnv(t)
	p := x.ten.Partner
	var ch map[string]any
	x.Must(201, p, "POST", api+"/alerts/channels", map[string]any{"name": "PD", "type": "pagerduty",
		"config": map[string]any{"routingKey": "R0UTINGKEY0123456789abcdefWXYZ"}, "throttle": map[string]any{"maxPerHour": 10}}).JSON(t, &ch)
	id := ch["id"].(string)
	cfg := ch["config"].(map[string]any)
	if cfg["routingKey"] != "****WXYZ" || ch["enabled"] != true || ch["orgId"] != nil {
		t.Fatalf("created %v", ch)
	}
	// The key is never answered in clear, neither in the list.
	raw := x.Must(200, p, "GET", api+"/alerts/channels", nil)
	if strings.Contains(string(raw.Body), "R0UTINGKEY") {
		t.Fatalf("list leaks the secret: %s", raw.Body)
	}
	// Sending the masked value back keeps the secret; renaming works.
	x.Must(200, p, "PATCH", api+"/alerts/channels/"+id, map[string]any{"name": "PagerDuty", "config": map[string]any{"routingKey": "****WXYZ"}}).JSON(t, &ch)
	if ch["name"] != "PagerDuty" || ch["config"].(map[string]any)["routingKey"] != "****WXYZ" {
		t.Fatalf("updated %v", ch)
	}
	var stored string
	if err := x.App.DB.QueryRowContext(context.Background(), `SELECT sealed FROM notification_channels WHERE id = $1`, id).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stored, "R0UTINGKEY") {
		t.Fatal("the configuration is stored in clear")
	}
	x.Must(204, p, "DELETE", api+"/alerts/channels/"+id, nil)
	x.Must(404, p, "GET", api+"/alerts/channels/"+id, nil)
}

func TestChannelValidation(t *testing.T) {
	x := newEnv(t)
	p := x.ten.Partner
	for _, body := range []map[string]any{
		{"name": "e", "type": "email", "config": map[string]any{}},
		{"name": "e", "type": "email", "config": map[string]any{"recipients": []string{"not an address"}}},
		{"name": "s", "type": "slack", "config": map[string]any{"webhookUrl": "ftp://x"}},
		{"name": "w", "type": "webhook", "config": map[string]any{"url": "https://example.com", "method": "GET"}},
		{"name": "w", "type": "webhook", "config": map[string]any{"url": "https://example.com", "authType": "hmac", "secret": "short"}},
		{"name": "p", "type": "pagerduty", "config": map[string]any{}},
		{"name": "m", "type": "sms", "config": map[string]any{"phoneNumbers": []string{"555"}, "provider": map[string]any{"accountSid": "AC1", "authToken": "t", "from": "+15550000000"}}},
		{"name": "m", "type": "sms", "config": map[string]any{"phoneNumbers": []string{"+15551234567"}}},
		{"name": "", "type": "email", "config": map[string]any{"recipients": []string{"a@example.com"}}},
	} {
		if r := x.Do(p, "POST", api+"/alerts/channels", body); r.Status != 400 && r.Status != 422 {
			t.Errorf("%v: %d %s", body, r.Status, r.Body)
		}
	}
}

func TestChannelRefusesPrivateTargets(t *testing.T) {
	x := newEnv(t, func(c *config.Config) { c.WebhookAllowPrivateTargets = false })
	r := x.Do(x.ten.Partner, "POST", api+"/alerts/channels", map[string]any{"name": "s", "type": "slack",
		"config": map[string]any{"webhookUrl": "http://127.0.0.1:9/hook"}})
	if r.Status != 400 {
		t.Fatalf("private slack target: %d %s", r.Status, r.Body)
	}
}

func TestChannelTenancy(t *testing.T) {
	x := newEnv(t)
	other := x.NewTenant(x.admin, "Beta")
	id := x.channel(x.ten.Partner, map[string]any{"name": "mail", "type": "email", "config": map[string]any{"recipients": []string{"ops@example.com"}}})
	orgCh := x.channel(x.ten.Org, map[string]any{"name": "org mail", "type": "email", "config": map[string]any{"recipients": []string{"o@example.com"}}})
	for _, c := range []apptest.Caller{other.Partner, other.Org} {
		x.Must(404, c, "GET", api+"/alerts/channels/"+id, nil)
		x.Must(404, c, "PATCH", api+"/alerts/channels/"+id, map[string]any{"name": "x"})
		x.Must(404, c, "DELETE", api+"/alerts/channels/"+id, nil)
		x.Must(404, c, "POST", api+"/alerts/channels/"+id+"/test", nil)
		x.Must(404, c, "GET", api+"/alerts/channels/"+id+"/deliveries", nil)
		x.Must(404, c, "GET", api+"/alerts/channels/"+orgCh, nil)
	}
	// An organization admin sees its own channel, not the partner-wide one.
	x.Must(404, x.ten.Org, "GET", api+"/alerts/channels/"+id, nil)
	x.Must(200, x.ten.Org, "GET", api+"/alerts/channels/"+orgCh, nil)
	// A policy cannot name another tenant's channel.
	otherCh := x.channel(other.Partner, map[string]any{"name": "m", "type": "email", "config": map[string]any{"recipients": []string{"b@example.com"}}})
	if r := x.Do(x.ten.Partner, "POST", api+"/alerts/policies", map[string]any{"name": "p",
		"steps": []any{map[string]any{"delayMinutes": 0, "channelIds": []string{otherCh}}}}); r.Status != 400 {
		t.Fatalf("foreign channel in a policy: %d %s", r.Status, r.Body)
	}
	pol := x.Must(201, x.ten.Partner, "POST", api+"/alerts/policies", map[string]any{"name": "p",
		"steps": []any{map[string]any{"delayMinutes": 0, "channelIds": []string{id}}}}).Map(t)["id"].(string)
	x.Must(404, other.Partner, "GET", api+"/alerts/policies/"+pol, nil)
	x.Must(404, other.Partner, "PATCH", api+"/alerts/policies/"+pol, map[string]any{"name": "x"})
	x.Must(404, other.Partner, "DELETE", api+"/alerts/policies/"+pol, nil)
}
