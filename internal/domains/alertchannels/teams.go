package alertchannels

import "encoding/json"

// teamsBody is a Microsoft Teams incoming-webhook MessageCard: title, severity color,
// facts and an OpenUri action to the alert.
func teamsBody(n Notification) ([]byte, error) {
	section := map[string]any{
		"activityTitle": n.view.Title,
		"facts": []any{
			map[string]string{"name": "Severity", "value": n.view.Severity},
			map[string]string{"name": "Status", "value": n.statusWord()},
			map[string]string{"name": "Device", "value": n.device()},
			map[string]string{"name": "Triggered", "value": n.view.TriggeredAt.UTC().Format("2006-01-02 15:04:05 UTC")},
		},
		"markdown": true,
	}
	if n.view.Message != "" {
		section["text"] = n.view.Message
	}
	return json.Marshal(map[string]any{
		"@type":      "MessageCard",
		"@context":   "https://schema.org/extensions",
		"themeColor": n.color(),
		"summary":    n.headline(),
		"title":      n.headline(),
		"sections":   []any{section},
		"potentialAction": []any{map[string]any{"@type": "OpenUri", "name": "View alert",
			"targets": []any{map[string]string{"os": "default", "uri": n.Link}}}},
	})
}
