package alertchannels

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"gale/internal/domains/webhooks"
)

// webhookBody is the generic webhook's JSON: the outbound-webhook envelope {id, type,
// timestamp, orgId, data} with the alert as data, plus the action.
func webhookBody(n Notification) ([]byte, error) {
	return json.Marshal(map[string]any{"id": n.EventID, "type": n.EventType, "timestamp": n.Timestamp.UTC(), "orgId": n.view.OrgID,
		"action": n.Action, "data": n.Alert})
}

// sendWebhook sends the envelope with the channel's method, headers and authentication; an
// hmac channel signs it as outbound webhooks do (X-Gale-Timestamp, X-Gale-Signature).
func (s *Service) sendWebhook(ctx context.Context, cfg ChannelConfig, n Notification) outcome {
	body, err := webhookBody(n)
	if err != nil {
		return outcome{err: err.Error()}
	}
	return s.do(ctx, cfg.Method, cfg.URL, "application/json", body, func(r *http.Request) {
		for k, v := range cfg.Headers {
			r.Header.Set(k, v)
		}
		r.Header.Set("X-Gale-Event", n.EventID)
		r.Header.Set("X-Gale-Event-Type", n.EventType)
		switch cfg.AuthType {
		case "bearer":
			r.Header.Set("Authorization", "Bearer "+cfg.Token)
		case "basic":
			r.SetBasicAuth(cfg.Username, cfg.Password)
		case "hmac":
			ts := strconv.FormatInt(s.now().UnixMilli(), 10)
			r.Header.Set("X-Gale-Timestamp", ts)
			r.Header.Set("X-Gale-Signature", webhooks.Sign(cfg.Secret, ts, body))
		}
	})
}
