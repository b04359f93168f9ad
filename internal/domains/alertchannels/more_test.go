package alertchannels_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/alertchannels"
	"gale/internal/platform/clock"
	"gale/internal/testkit/apptest"
)

// TestThrottle: past maxPerHour, notifications are logged throttled and not sent; removing
// the throttle lets them through again.
func TestThrottle(t *testing.T) {
	x := newEnv(t)
	rcv := newReceiver(t)
	ch := x.channel(x.ten.Partner, map[string]any{"name": "s", "type": "slack", "config": map[string]any{"webhookUrl": rcv.URL},
		"throttle": map[string]any{"maxPerHour": 1}})
	dev := x.enroll(x.ten, "web-01")
	x.cpuRule(x.ten.Partner, 50, map[string]any{"cooldownMinutes": 0})
	x.beat(dev, 90)
	x.pump()
	x.beat(dev, 10) // the resolution is sent despite the throttle
	x.pump()
	x.beat(dev, 90) // a second alert within the hour: throttled
	x.pump()
	if n := len(rcv.requests()); n != 2 {
		t.Fatalf("sent %d, want the trigger and the resolution", n)
	}
	ds := x.deliveries(x.ten.Partner, ch)
	if len(ds) != 3 || ds[0].Status != "throttled" || ds[0].Attempts != 0 {
		t.Fatalf("deliveries %+v", ds)
	}
	x.Must(200, x.ten.Partner, "PATCH", api+"/alerts/channels/"+ch, map[string]any{"throttle": map[string]any{"maxPerHour": 0}})
	x.beat(dev, 10)
	x.pump() // the throttled alert's resolution is not sent: its channel never heard of it
	x.beat(dev, 90)
	x.pump()
	if n := len(rcv.requests()); n != 3 {
		t.Fatalf("sent %d after removing the throttle, want 3", n)
	}
}

// TestDisabledChannelAndTest: a disabled channel gets nothing from routing, but the test
// route still sends through it; a failed test is dead at once.
func TestDisabledChannelAndTest(t *testing.T) {
	x := newEnv(t)
	rcv := newReceiver(t, 500)
	ch := x.channel(x.ten.Partner, map[string]any{"name": "t", "type": "teams", "enabled": false, "config": map[string]any{"webhookUrl": rcv.URL}})
	var d delivery
	x.Must(200, x.ten.Partner, "POST", api+"/alerts/channels/"+ch+"/test", nil).JSON(t, &d)
	if d.Status != "dead" || d.Attempts != 1 || d.Error == nil || *d.ResponseStatus != 500 || len(rcv.requests()) != 1 {
		t.Fatalf("test delivery %+v", d)
	}
	if decode(t, rcv.requests()[0].Body)["title"] != "[TEST] Gale notification channel test" {
		t.Fatalf("test card %s", rcv.requests()[0].Body)
	}
	dev := x.enroll(x.ten, "web-01")
	x.cpuRule(x.ten.Partner, 50, nil)
	x.beat(dev, 90)
	x.pump()
	if len(rcv.requests()) != 1 {
		t.Fatal("a disabled channel was notified")
	}
}

// TestEscalationOneWinnerAcrossNodes: two nodes running the escalation job at once send a
// due step once.
func TestEscalationOneWinnerAcrossNodes(t *testing.T) {
	clk := clock.NewFake(time.Now())
	x := newEnv(t, apptest.WithClock(clk))
	first, _ := x.slackChannel("first")
	second, r2 := x.slackChannel("second")
	x.Must(201, x.ten.Partner, "POST", api+"/alerts/policies", map[string]any{"name": "esc", "steps": []any{
		map[string]any{"delayMinutes": 0, "channelIds": []string{first}},
		map[string]any{"delayMinutes": 5, "channelIds": []string{second}}}})
	dev := x.enroll(x.ten, "web-01")
	x.cpuRule(x.ten.Partner, 50, nil)
	x.beat(dev, 90)
	x.pump()
	other := x.SecondNode()
	clk.Advance(6 * time.Minute) // both nodes run on clk
	var wg sync.WaitGroup
	for _, e := range []*env{x, {Env: other}} {
		wg.Go(func() {
			if err := app.Service[*alertchannels.Service](e.App).Escalate(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	x.pump()
	if _, err := app.Service[*alertchannels.Service](other.App).RunDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(r2.requests()); n != 1 {
		t.Fatalf("step 1 sent %d times", n)
	}
}

func TestPolicyValidation(t *testing.T) {
	x := newEnv(t)
	ch, _ := x.slackChannel("a")
	step := func(d int) map[string]any { return map[string]any{"delayMinutes": d, "channelIds": []string{ch}} }
	for _, body := range []map[string]any{
		{"name": "no steps", "steps": []any{}},
		{"name": "decreasing", "steps": []any{step(10), step(5)}},
		{"name": "bad severity", "match": map[string]any{"severities": []string{"urgent"}}, "steps": []any{step(0)}},
		{"name": "bad zone", "timeWindow": map[string]any{"start": "09:00", "end": "17:00", "timezone": "Mars/Base"}, "steps": []any{step(0)}},
		{"name": "bad day", "timeWindow": map[string]any{"start": "09:00", "end": "17:00", "days": []string{"someday"}}, "steps": []any{step(0)}},
		{"name": "unknown channel", "steps": []any{map[string]any{"delayMinutes": 0, "channelIds": []string{"01a208e7-67af-719d-979d-fa26fde47aec"}}}},
	} {
		if r := x.Do(x.ten.Partner, "POST", api+"/alerts/policies", body); r.Status != 400 && r.Status != 422 {
			t.Errorf("%v: %d %s", body["name"], r.Status, r.Body)
		}
	}
	var p struct {
		ID         string         `json:"id"`
		Priority   int            `json:"priority"`
		TimeWindow map[string]any `json:"timeWindow"`
	}
	x.Must(201, x.ten.Partner, "POST", api+"/alerts/policies", map[string]any{"name": "ok", "steps": []any{step(0)},
		"timeWindow": map[string]any{"start": "22:00", "end": "06:00"}}).JSON(t, &p)
	if p.Priority != 100 || p.TimeWindow["timezone"] != "UTC" {
		t.Fatalf("policy %+v", p)
	}
	x.Must(200, x.ten.Partner, "PATCH", api+"/alerts/policies/"+p.ID, map[string]any{"timeWindow": map[string]any{}, "priority": 5}).JSON(t, &p)
	if p.Priority != 5 || p.TimeWindow != nil {
		t.Fatalf("patched %+v", p)
	}
	x.Must(204, x.ten.Partner, "DELETE", api+"/alerts/policies/"+p.ID, nil)
	x.Must(404, x.ten.Partner, "GET", api+"/alerts/policies/"+p.ID, nil)
}

// TestWebhookSecretsKeptOnChange: header values and the bearer token are masked in answers;
// a change that sends them back masked keeps them, and the receiver gets the originals.
func TestWebhookSecretsKeptOnChange(t *testing.T) {
	x := newEnv(t)
	rcv := newReceiver(t)
	var ch struct {
		ID     string         `json:"id"`
		Config map[string]any `json:"config"`
	}
	x.Must(201, x.ten.Partner, "POST", api+"/alerts/channels", map[string]any{"name": "hook", "type": "webhook", "config": map[string]any{
		"url": rcv.URL + "/a", "authType": "bearer", "token": "bearer-token-secret-9876", "headers": map[string]string{"X-Api-Key": "key-123456"}}}).JSON(t, &ch)
	if ch.Config["token"] != "****9876" || ch.Config["headers"].(map[string]any)["X-Api-Key"] != "****" {
		t.Fatalf("config %v", ch.Config)
	}
	ch.Config["url"] = rcv.URL + "/b"
	x.Must(200, x.ten.Partner, "PATCH", api+"/alerts/channels/"+ch.ID, map[string]any{"config": ch.Config})
	var d delivery
	x.Must(200, x.ten.Partner, "POST", api+"/alerts/channels/"+ch.ID+"/test", nil).JSON(t, &d)
	got := rcv.requests()
	if d.Status != "succeeded" || len(got) != 1 || got[0].Path != "/b" || got[0].Header.Get("Authorization") != "Bearer bearer-token-secret-9876" ||
		got[0].Header.Get("X-Api-Key") != "key-123456" {
		t.Fatalf("delivery %+v, requests %+v", d, got)
	}
}

// TestDeletedChannelLeavesRulesAndPolicies: deleting a channel removes it from the rules and
// policy steps naming it, so a rule left without channels falls back to policies again.
func TestDeletedChannelLeavesRulesAndPolicies(t *testing.T) {
	x := newEnv(t)
	gone, _ := x.slackChannel("gone")
	stays, rs := x.slackChannel("stays")
	rule := x.cpuRule(x.ten.Partner, 50, map[string]any{"channelIds": []string{gone}})
	var pol struct {
		ID    string `json:"id"`
		Steps []struct {
			ChannelIDs []string `json:"channelIds"`
		} `json:"steps"`
	}
	x.Must(201, x.ten.Partner, "POST", api+"/alerts/policies", map[string]any{"name": "p",
		"steps": []any{map[string]any{"delayMinutes": 0, "channelIds": []string{gone, stays}}}}).JSON(t, &pol)
	x.Must(204, x.ten.Partner, "DELETE", api+"/alerts/channels/"+gone, nil)
	var r struct {
		ChannelIDs []string `json:"channelIds"`
	}
	x.Must(200, x.ten.Partner, "GET", api+"/alerts/rules/"+rule, nil).JSON(t, &r)
	x.Must(200, x.ten.Partner, "GET", api+"/alerts/policies/"+pol.ID, nil).JSON(t, &pol)
	if len(r.ChannelIDs) != 0 || len(pol.Steps[0].ChannelIDs) != 1 || pol.Steps[0].ChannelIDs[0] != stays {
		t.Fatalf("rule channels %v, policy steps %+v", r.ChannelIDs, pol.Steps)
	}
	dev := x.enroll(x.ten, "web-01")
	x.beat(dev, 90)
	x.pump()
	if len(rs.requests()) != 1 {
		t.Fatalf("the policy's remaining channel got %d", len(rs.requests()))
	}
}
