package alertchannels

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// outcome is the result of one attempt.
type outcome struct {
	status *int
	err    string
}

// do makes one HTTP request through the guarded client; any 2xx succeeds, a redirect is a
// failure.
func (s *Service) do(ctx context.Context, method, target, contentType string, body []byte, prepare func(*http.Request)) outcome {
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return outcome{err: "build request: " + err.Error()}
	}
	if prepare != nil {
		prepare(req)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "Gale-Notify/1")
	res, err := s.client.Do(req)
	if err != nil {
		return outcome{err: err.Error()}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 1000))
	status := res.StatusCode
	out := outcome{status: &status}
	if status < 200 || status >= 300 {
		out.err = fmt.Sprintf("the receiver answered %d: %s", status, strings.ToValidUTF8(string(raw), "?"))
	}
	return out
}

// deliver sends n through a channel of the given type and configuration.
func (s *Service) deliver(ctx context.Context, typ string, cfg ChannelConfig, n Notification) outcome {
	if err := n.decode(); err != nil {
		return outcome{err: "the stored alert does not decode: " + err.Error()}
	}
	var body []byte
	var err error
	switch typ {
	case TypeEmail:
		return s.sendEmail(ctx, cfg, n)
	case TypeSMS:
		return s.sendSMS(ctx, cfg, n)
	case TypeWebhook:
		return s.sendWebhook(ctx, cfg, n)
	case TypeSlack:
		body, err = slackBody(n)
	case TypeTeams:
		body, err = teamsBody(n)
	case TypePagerDuty:
		body, err = pagerDutyBody(cfg.RoutingKey, n)
		if err == nil {
			base := cfg.BaseURL
			if base == "" {
				base = DefaultPagerDutyURL
			}
			return s.do(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/v2/enqueue", "application/json", body, nil)
		}
	default:
		return outcome{err: "unknown channel type " + typ}
	}
	if err != nil {
		return outcome{err: err.Error()}
	}
	return s.do(ctx, http.MethodPost, cfg.WebhookURL, "application/json", body, nil)
}
