package alertchannels_test

import (
	"testing"

	"gale/internal/platform/config"
	"gale/internal/testkit/apptest"
)

// TestChannelTargetsInNumericFormsAreRefused: a loopback address spelt the ways inet_aton
// reads it is as private as 127.0.0.1.
func TestChannelTargetsInNumericFormsAreRefused(t *testing.T) {
	x := newEnv(t, apptest.Option(func(c *config.Config) { c.WebhookAllowPrivateTargets = false }))
	for _, host := range []string{"127.0.0.1", "127.1", "0x7f000001", "2130706433", "017700000001"} {
		r := x.Do(x.ten.Partner, "POST", api+"/alerts/channels", map[string]any{"name": "hook", "type": "webhook",
			"config": map[string]any{"url": "http://" + host + "/in"}})
		if r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" {
			t.Errorf("webhook channel to %s = %d %s, want 400", host, r.Status, r.Body)
		}
	}
}
