package alertchannels_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"gale/internal/domains/webhooks"
	"gale/internal/platform/config"
	"gale/internal/platform/mail/mailtest"
)

// TestSlackTriggerAndResolve: an alert reaches a Slack channel (all enabled channels of the
// tenant, nothing else routing it) as {text, blocks}; its resolution follows.
func TestSlackTriggerAndResolve(t *testing.T) {
	x := newEnv(t)
	rcv := newReceiver(t)
	ch := x.channel(x.ten.Partner, map[string]any{"name": "slack", "type": "slack", "config": map[string]any{"webhookUrl": rcv.URL + "/services/T/B/X"}})
	dev := x.enroll(x.ten, "web-01")
	x.cpuRule(x.ten.Partner, 50, nil)
	x.beat(dev, 90)
	x.pump()
	got := rcv.requests()
	if len(got) != 1 || got[0].Path != "/services/T/B/X" || got[0].Header.Get("Content-Type") != "application/json" {
		t.Fatalf("slack requests: %+v", got)
	}
	m := decode(t, got[0].Body)
	if !strings.Contains(m["text"].(string), "[HIGH] CPU high on web-01") {
		t.Fatalf("text %q", m["text"])
	}
	blocks := m["blocks"].([]any)
	header := blocks[0].(map[string]any)
	if header["type"] != "header" || header["text"].(map[string]any)["text"] != "[HIGH] CPU high on web-01" {
		t.Fatalf("header block %v", header)
	}
	fields := blocks[1].(map[string]any)["fields"].([]any)
	if fields[0].(map[string]any)["text"] != "*Severity*\nhigh" || fields[2].(map[string]any)["text"] != "*Device*\nweb-01" {
		t.Fatalf("fields %v", fields)
	}
	last := blocks[len(blocks)-1].(map[string]any)
	button := last["elements"].([]any)[0].(map[string]any)
	if last["type"] != "actions" || !strings.Contains(button["url"].(string), "/alerts/") {
		t.Fatalf("actions block %v", last)
	}
	ds := x.deliveries(x.ten.Partner, ch)
	if len(ds) != 1 || ds[0].Status != "succeeded" || ds[0].Action != "trigger" || *ds[0].ResponseStatus != 200 {
		t.Fatalf("deliveries %+v", ds)
	}
	// The condition clears: the alert resolves itself and Slack hears of it.
	x.beat(dev, 10)
	x.pump()
	got = rcv.requests()
	if len(got) != 2 || !strings.HasPrefix(decode(t, got[1].Body)["text"].(string), "[RESOLVED] CPU high on web-01") {
		t.Fatalf("resolution: %d requests, last %s", len(got), got[len(got)-1].Body)
	}
}

func TestTeamsCard(t *testing.T) {
	x := newEnv(t)
	rcv := newReceiver(t)
	x.channel(x.ten.Partner, map[string]any{"name": "teams", "type": "teams", "config": map[string]any{"webhookUrl": rcv.URL + "/webhookb2/x"}})
	dev := x.enroll(x.ten, "db-01")
	x.cpuRule(x.ten.Partner, 50, map[string]any{"severity": "critical"})
	x.beat(dev, 99)
	x.pump()
	got := rcv.requests()
	if len(got) != 1 {
		t.Fatalf("teams requests: %d", len(got))
	}
	m := decode(t, got[0].Body)
	if m["@type"] != "MessageCard" || m["@context"] != "https://schema.org/extensions" || m["themeColor"] != "D70000" ||
		m["title"] != "[CRITICAL] CPU high on db-01" {
		t.Fatalf("card %v", m)
	}
	facts := m["sections"].([]any)[0].(map[string]any)["facts"].([]any)
	if f := facts[2].(map[string]any); f["name"] != "Device" || f["value"] != "db-01" {
		t.Fatalf("facts %v", facts)
	}
	action := m["potentialAction"].([]any)[0].(map[string]any)
	if action["@type"] != "OpenUri" || !strings.Contains(action["targets"].([]any)[0].(map[string]any)["uri"].(string), "/alerts/") {
		t.Fatalf("action %v", action)
	}
}

// TestPagerDutyTriggerAndResolve: Events API v2 trigger then resolve, both with the alert ID
// as dedup_key, posted to {baseUrl}/v2/enqueue.
func TestPagerDutyTriggerAndResolve(t *testing.T) {
	x := newEnv(t)
	rcv := newReceiver(t, 202)
	x.channel(x.ten.Partner, map[string]any{"name": "pd", "type": "pagerduty",
		"config": map[string]any{"routingKey": "routingkey0123456789abcdef012345", "baseUrl": rcv.URL}})
	dev := x.enroll(x.ten, "web-01")
	x.cpuRule(x.ten.Partner, 50, nil)
	x.beat(dev, 90)
	x.pump()
	x.beat(dev, 10)
	x.pump()
	got := rcv.requests()
	if len(got) != 2 || got[0].Path != "/v2/enqueue" || got[1].Path != "/v2/enqueue" {
		t.Fatalf("pagerduty requests: %+v", got)
	}
	trig, res := decode(t, got[0].Body), decode(t, got[1].Body)
	if trig["event_action"] != "trigger" || trig["routing_key"] != "routingkey0123456789abcdef012345" || trig["dedup_key"] == "" {
		t.Fatalf("trigger %v", trig)
	}
	p := trig["payload"].(map[string]any)
	if p["severity"] != "error" || p["source"] != "web-01" || !strings.Contains(p["summary"].(string), "CPU high") {
		t.Fatalf("trigger payload %v", p)
	}
	if res["event_action"] != "resolve" || res["dedup_key"] != trig["dedup_key"] || len(res) != 3 {
		t.Fatalf("resolve %v (trigger dedup %v)", res, trig["dedup_key"])
	}
}

// TestSMSTwilioForm: the test route posts a form with To, From, Body and basic auth to the
// Twilio-compatible Messages.json of the account.
func TestSMSTwilioForm(t *testing.T) {
	x := newEnv(t)
	rcv := newReceiver(t, 201)
	id := x.channel(x.ten.Partner, map[string]any{"name": "sms", "type": "sms", "config": map[string]any{
		"phoneNumbers": []string{"+15551234567", "+15557654321"},
		"provider":     map[string]any{"accountSid": "AC123", "authToken": "tok-secret-1234", "from": "+15550000000", "baseUrl": rcv.URL}}})
	var d delivery
	x.Must(200, x.ten.Partner, "POST", api+"/alerts/channels/"+id+"/test", nil).JSON(t, &d)
	if d.Status != "succeeded" || d.Action != "test" {
		t.Fatalf("test delivery %+v", d)
	}
	got := rcv.requests()
	if len(got) != 2 {
		t.Fatalf("sms requests %d", len(got))
	}
	for i, want := range []string{"+15551234567", "+15557654321"} {
		r := got[i]
		if r.Method != "POST" || r.Path != "/2010-04-01/Accounts/AC123/Messages.json" ||
			r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
			t.Fatalf("sms request %+v", r)
		}
		user, pass, ok := (&httpRequest{r.Header}).basicAuth()
		if !ok || user != "AC123" || pass != "tok-secret-1234" {
			t.Fatalf("basic auth %q %q", user, pass)
		}
		form, _ := url.ParseQuery(string(r.Body))
		if form.Get("To") != want || form.Get("From") != "+15550000000" || !strings.Contains(form.Get("Body"), "[TEST]") {
			t.Fatalf("form %v", form)
		}
	}
}

// TestWebhookSignedEnvelope: the generic webhook carries the alert envelope, signed as
// outbound webhooks are when authType is hmac.
func TestWebhookSignedEnvelope(t *testing.T) {
	x := newEnv(t)
	rcv := newReceiver(t)
	secret := "channel-secret-0123456789"
	x.channel(x.ten.Partner, map[string]any{"name": "hook", "type": "webhook", "config": map[string]any{"url": rcv.URL + "/in",
		"method": "PUT", "authType": "hmac", "secret": secret, "headers": map[string]string{"X-Team": "ops"}}})
	dev := x.enroll(x.ten, "web-01")
	x.cpuRule(x.ten.Partner, 50, nil)
	x.beat(dev, 90)
	x.pump()
	got := rcv.requests()
	if len(got) != 1 || got[0].Method != "PUT" || got[0].Header.Get("X-Team") != "ops" {
		t.Fatalf("webhook requests %+v", got)
	}
	r := got[0]
	if want := webhooks.Sign(secret, r.Header.Get("X-Gale-Timestamp"), r.Body); r.Header.Get("X-Gale-Signature") != want {
		t.Fatalf("signature %q, want %q", r.Header.Get("X-Gale-Signature"), want)
	}
	m := decode(t, r.Body)
	data := m["data"].(map[string]any)
	if m["type"] != "alert.triggered" || m["action"] != "trigger" || data["title"] != "CPU high" || data["status"] != "active" ||
		m["orgId"] != x.ten.OrgID {
		t.Fatalf("envelope %v", m)
	}
}

func TestEmailThroughSMTP(t *testing.T) {
	smtp := mailtest.Start(t)
	x := newEnv(t, func(c *config.Config) { c.SMTPURL = smtp.URL() })
	x.channel(x.ten.Partner, map[string]any{"name": "mail", "type": "email", "config": map[string]any{"recipients": []string{"ops@example.com"}}})
	dev := x.enroll(x.ten, "web-01")
	x.cpuRule(x.ten.Partner, 50, nil)
	x.beat(dev, 90)
	x.pump()
	msgs := smtp.Messages()
	if len(msgs) != 1 || len(msgs[0].To) != 1 || msgs[0].To[0] != "ops@example.com" {
		t.Fatalf("mails %+v", msgs)
	}
	if !strings.Contains(msgs[0].Data, "Subject: [HIGH] CPU high on web-01") || !strings.Contains(msgs[0].Data, "Device: web-01") {
		t.Fatalf("mail %s", msgs[0].Data)
	}
}

// TestRetriesWithBackoff: a failing receiver leaves the delivery retrying with its error;
// once due again and answered 2xx it succeeds on the second attempt.
func TestRetriesWithBackoff(t *testing.T) {
	x := newEnv(t)
	rcv := newReceiver(t, 500, 200)
	ch := x.channel(x.ten.Partner, map[string]any{"name": "slack", "type": "slack", "config": map[string]any{"webhookUrl": rcv.URL}})
	dev := x.enroll(x.ten, "web-01")
	x.cpuRule(x.ten.Partner, 50, nil)
	x.beat(dev, 90)
	x.pump()
	ds := x.deliveries(x.ten.Partner, ch)
	if len(ds) != 1 || ds[0].Status != "retrying" || ds[0].Attempts != 1 || ds[0].Error == nil || *ds[0].ResponseStatus != 500 {
		t.Fatalf("after a 500: %+v", ds)
	}
	x.pump() // not due yet
	if len(rcv.requests()) != 1 {
		t.Fatal("retried before its backoff ran out")
	}
	if _, err := x.App.DB.ExecContext(t.Context(), `UPDATE notification_deliveries SET next_attempt_at = $1`, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	x.pump()
	ds = x.deliveries(x.ten.Partner, ch)
	if ds[0].Status != "succeeded" || ds[0].Attempts != 2 || len(rcv.requests()) != 2 {
		t.Fatalf("after the retry: %+v", ds)
	}
}
