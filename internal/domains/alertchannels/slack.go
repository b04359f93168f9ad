package alertchannels

import "encoding/json"

// slackBody is a Slack incoming-webhook message: text (the notification fallback) and
// blocks (header, severity/status/device fields, message, a button to the alert).
func slackBody(n Notification) ([]byte, error) {
	text := func(typ, s string) map[string]any { return map[string]any{"type": typ, "text": s} }
	blocks := []any{
		map[string]any{"type": "header", "text": text("plain_text", truncate(n.headline(), 150))},
		map[string]any{"type": "section", "fields": []any{
			text("mrkdwn", "*Severity*\n"+n.view.Severity),
			text("mrkdwn", "*Status*\n"+n.statusWord()),
			text("mrkdwn", "*Device*\n"+n.device()),
			text("mrkdwn", "*Triggered*\n"+n.view.TriggeredAt.UTC().Format("2006-01-02 15:04:05 UTC")),
		}},
	}
	if n.view.Message != "" {
		blocks = append(blocks, map[string]any{"type": "section", "text": text("mrkdwn", truncate(n.view.Message, 3000))})
	}
	blocks = append(blocks, map[string]any{"type": "actions", "elements": []any{
		map[string]any{"type": "button", "text": text("plain_text", "View alert"), "url": n.Link},
	}})
	return json.Marshal(map[string]any{"text": n.headline() + " - " + n.Link, "blocks": blocks})
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
