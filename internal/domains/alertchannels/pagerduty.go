package alertchannels

import "encoding/json"

// pagerDutySeverity maps Gale's severities onto the Events API v2 ones.
var pagerDutySeverity = map[string]string{"critical": "critical", "high": "error", "medium": "warning", "low": "info", "info": "info"}

// pagerDutyBody is an Events API v2 event: trigger with dedup_key = the alert ID, or resolve
// with the same key.
func pagerDutyBody(routingKey string, n Notification) ([]byte, error) {
	if n.Action == ActionResolve {
		return json.Marshal(map[string]any{"routing_key": routingKey, "event_action": "resolve", "dedup_key": n.view.ID})
	}
	sev := pagerDutySeverity[n.view.Severity]
	if sev == "" {
		sev = "info"
	}
	source := n.device()
	if source == "-" {
		source = "gale"
	}
	return json.Marshal(map[string]any{
		"routing_key":  routingKey,
		"event_action": "trigger",
		"dedup_key":    n.view.ID,
		"payload": map[string]any{
			"summary":   truncate(n.headline(), 1024),
			"source":    source,
			"severity":  sev,
			"timestamp": n.view.TriggeredAt.UTC().Format("2006-01-02T15:04:05.000Z"),
			"component": "gale-alerts",
			"custom_details": map[string]any{"alertId": n.view.ID, "orgId": n.view.OrgID, "deviceId": n.view.DeviceID,
				"message": n.view.Message, "step": n.Step},
		},
		"client":     "Gale",
		"client_url": n.Link,
		"links":      []any{map[string]string{"href": n.Link, "text": "View alert in Gale"}},
	})
}
