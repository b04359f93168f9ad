package alertchannels_test

import (
	"context"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/alertchannels"
	"gale/internal/platform/clock"
	"gale/internal/testkit/apptest"
)

// slackChannel makes a Slack channel posting to its own receiver.
func (x *env) slackChannel(name string) (string, *receiver) {
	rcv := newReceiver(x.T)
	return x.channel(x.ten.Partner, map[string]any{"name": name, "type": "slack", "config": map[string]any{"webhookUrl": rcv.URL}}), rcv
}

// TestRoutingPrecedence: the rule's channels win over policies; the first matching policy
// by priority wins over the rest; with neither, every enabled channel of the tenant.
func TestRoutingPrecedence(t *testing.T) {
	x := newEnv(t)
	a, ra := x.slackChannel("a")
	b, rb := x.slackChannel("b")
	c, rc := x.slackChannel("c")
	disabled, rd := x.slackChannel("disabled")
	x.Must(200, x.ten.Partner, "PATCH", api+"/alerts/channels/"+disabled, map[string]any{"enabled": false})
	dev := x.enroll(x.ten, "web-01")

	// No rule channels, no policy: all enabled channels.
	rule := x.cpuRule(x.ten.Partner, 50, nil)
	x.beat(dev, 90)
	x.pump()
	if len(ra.requests()) != 1 || len(rb.requests()) != 1 || len(rc.requests()) != 1 || len(rd.requests()) != 0 {
		t.Fatalf("fallback: %d %d %d %d", len(ra.requests()), len(rb.requests()), len(rc.requests()), len(rd.requests()))
	}
	x.beat(dev, 10) // resolves; the resolution goes to a, b, c
	x.pump()

	// Policies: the lower priority number wins; one not matching the severity is skipped.
	x.Must(201, x.ten.Partner, "POST", api+"/alerts/policies", map[string]any{"name": "critical only", "priority": 1,
		"match": map[string]any{"severities": []string{"critical"}}, "steps": []any{map[string]any{"delayMinutes": 0, "channelIds": []string{a}}}})
	x.Must(201, x.ten.Partner, "POST", api+"/alerts/policies", map[string]any{"name": "second", "priority": 20,
		"steps": []any{map[string]any{"delayMinutes": 0, "channelIds": []string{c}}}})
	x.Must(201, x.ten.Partner, "POST", api+"/alerts/policies", map[string]any{"name": "first", "priority": 10,
		"match": map[string]any{"severities": []string{"high"}, "orgIds": []string{x.ten.OrgID}},
		"steps": []any{map[string]any{"delayMinutes": 0, "channelIds": []string{b}}}})
	x.Must(200, x.ten.Partner, "PATCH", api+"/alerts/rules/"+rule, map[string]any{"cooldownMinutes": 0})
	x.beat(dev, 91)
	x.pump()
	if len(ra.requests()) != 2 || len(rb.requests()) != 3 || len(rc.requests()) != 2 {
		t.Fatalf("policy: %d %d %d", len(ra.requests()), len(rb.requests()), len(rc.requests()))
	}
	x.beat(dev, 10)
	x.pump() // the resolution goes to b only, the channel that was notified
	if len(ra.requests()) != 2 || len(rb.requests()) != 4 || len(rc.requests()) != 2 {
		t.Fatalf("policy resolution: %d %d %d", len(ra.requests()), len(rb.requests()), len(rc.requests()))
	}

	// The rule's own channels win over every policy.
	x.Must(200, x.ten.Partner, "PATCH", api+"/alerts/rules/"+rule, map[string]any{"channelIds": []string{c}})
	x.beat(dev, 92)
	x.pump()
	if len(ra.requests()) != 2 || len(rb.requests()) != 4 || len(rc.requests()) != 3 {
		t.Fatalf("rule channels: %d %d %d", len(ra.requests()), len(rb.requests()), len(rc.requests()))
	}
	var got struct {
		ChannelIDs []string `json:"channelIds"`
	}
	x.Must(200, x.ten.Partner, "GET", api+"/alerts/rules/"+rule, nil).JSON(t, &got)
	if len(got.ChannelIDs) != 1 || got.ChannelIDs[0] != c {
		t.Fatalf("rule channelIds %v", got.ChannelIDs)
	}
	// A rule cannot name another tenant's channel.
	other := x.NewTenant(x.admin, "Beta")
	foreign := x.channel(other.Partner, map[string]any{"name": "x", "type": "email", "config": map[string]any{"recipients": []string{"x@example.com"}}})
	x.Must(400, x.ten.Partner, "PATCH", api+"/alerts/rules/"+rule, map[string]any{"channelIds": []string{foreign}})
}

type alertRow struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func (x *env) openAlert() alertRow {
	x.T.Helper()
	var out struct {
		Data []alertRow `json:"data"`
	}
	x.Must(200, x.ten.Partner, "GET", api+"/alerts?status=active", nil).JSON(x.T, &out)
	if len(out.Data) != 1 {
		x.T.Fatalf("active alerts: %+v", out.Data)
	}
	return out.Data[0]
}

// TestEscalation: step 0 fires at trigger, step 1 after its delay while the alert is still
// active; acknowledging cancels the pending steps.
func TestEscalation(t *testing.T) {
	clk := clock.NewFake(time.Now())
	x := newEnv(t, apptest.WithClock(clk))
	first, r1 := x.slackChannel("first")
	second, r2 := x.slackChannel("second")
	third, r3 := x.slackChannel("third")
	x.Must(201, x.ten.Partner, "POST", api+"/alerts/policies", map[string]any{"name": "escalate", "steps": []any{
		map[string]any{"delayMinutes": 0, "channelIds": []string{first}},
		map[string]any{"delayMinutes": 10, "channelIds": []string{second}},
		map[string]any{"delayMinutes": 30, "channelIds": []string{third}}}})
	dev := x.enroll(x.ten, "web-01")
	x.cpuRule(x.ten.Partner, 50, nil)
	x.beat(dev, 90)
	x.pump()
	if len(r1.requests()) != 1 || len(r2.requests()) != 0 {
		t.Fatalf("at trigger: %d %d", len(r1.requests()), len(r2.requests()))
	}
	ctx := context.Background()
	start := time.Now()
	escalate := func(after time.Duration) {
		clk.Set(start.Add(after))
		if err := app.Service[*alertchannels.Service](x.App).Escalate(ctx); err != nil {
			t.Fatal(err)
		}
		x.pump()
	}
	escalate(5 * time.Minute) // nothing due yet
	if len(r2.requests()) != 0 {
		t.Fatal("step 1 fired before its delay")
	}
	escalate(11 * time.Minute)
	if len(r2.requests()) != 1 || len(r3.requests()) != 0 {
		t.Fatalf("after 11 min: %d %d", len(r2.requests()), len(r3.requests()))
	}
	escalate(12 * time.Minute) // fired once only
	if len(r2.requests()) != 1 {
		t.Fatal("step 1 fired twice")
	}
	ds := x.deliveries(x.ten.Partner, second)
	if len(ds) != 1 || ds[0].Step != 1 || ds[0].Status != "succeeded" {
		t.Fatalf("step 1 delivery %+v", ds)
	}
	al := x.openAlert()
	x.Must(200, x.ten.Partner, "POST", api+"/alerts/"+al.ID+"/acknowledge", map[string]any{})
	x.pump()
	escalate(31 * time.Minute)
	if len(r3.requests()) != 0 {
		t.Fatal("step 2 fired after acknowledge")
	}
	var status string
	if err := x.App.DB.QueryRowContext(ctx, `SELECT status FROM alert_escalations WHERE step = 2`).Scan(&status); err != nil || status != "cancelled" {
		t.Fatalf("step 2 is %q (%v)", status, err)
	}
}

// TestTimeWindow: a policy outside its window does not match; the next one routes.
func TestTimeWindow(t *testing.T) {
	clk := clock.NewFake(time.Now())
	x := newEnv(t, apptest.WithClock(clk))
	office, ro := x.slackChannel("office")
	night, rn := x.slackChannel("night")
	x.Must(201, x.ten.Partner, "POST", api+"/alerts/policies", map[string]any{"name": "office hours", "priority": 1,
		"timeWindow": map[string]any{"days": []string{"mon", "tue", "wed", "thu", "fri"}, "start": "09:00", "end": "17:00", "timezone": "Europe/Berlin"},
		"steps":      []any{map[string]any{"delayMinutes": 0, "channelIds": []string{office}}}})
	x.Must(201, x.ten.Partner, "POST", api+"/alerts/policies", map[string]any{"name": "otherwise", "priority": 2,
		"steps": []any{map[string]any{"delayMinutes": 0, "channelIds": []string{night}}}})
	x.Must(400, x.ten.Partner, "POST", api+"/alerts/policies", map[string]any{"name": "bad", "timeWindow": map[string]any{"start": "25:00", "end": "17:00"},
		"steps": []any{map[string]any{"delayMinutes": 0, "channelIds": []string{night}}}})
	dev := x.enroll(x.ten, "web-01")
	rule := x.cpuRule(x.ten.Partner, 50, map[string]any{"cooldownMinutes": 0})
	_ = rule
	// Saturday 10:00 in Berlin: outside the window.
	clk.Set(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	x.beat(dev, 90)
	x.pump()
	if len(ro.requests()) != 0 || len(rn.requests()) != 1 {
		t.Fatalf("saturday: office %d night %d", len(ro.requests()), len(rn.requests()))
	}
	x.beat(dev, 10)
	x.pump()
	// Monday 10:00 in Berlin: inside.
	clk.Set(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC))
	x.beat(dev, 90)
	x.pump()
	if len(ro.requests()) != 1 || len(rn.requests()) != 2 {
		t.Fatalf("monday: office %d night %d", len(ro.requests()), len(rn.requests()))
	}
}
