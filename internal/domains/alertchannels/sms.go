package alertchannels

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// smsBody is the text of an SMS: the headline and the link, within one long message.
func smsBody(n Notification) string {
	return truncate(n.headline()+" "+n.Link, 640)
}

// sendSMS posts one message per number to a Twilio-compatible API:
// POST {baseUrl}/2010-04-01/Accounts/{sid}/Messages.json, form To, From, Body, basic auth
// sid:authToken. It stops at the first failure (the retry sends to every number again).
func (s *Service) sendSMS(ctx context.Context, cfg ChannelConfig, n Notification) outcome {
	p := cfg.Provider
	base := p.BaseURL
	if base == "" {
		base = DefaultTwilioURL
	}
	target := strings.TrimRight(base, "/") + "/2010-04-01/Accounts/" + url.PathEscape(p.AccountSID) + "/Messages.json"
	var out outcome
	for _, to := range cfg.PhoneNumbers {
		form := url.Values{"To": {to}, "From": {p.From}, "Body": {smsBody(n)}}
		out = s.do(ctx, http.MethodPost, target, "application/x-www-form-urlencoded", []byte(form.Encode()),
			func(r *http.Request) { r.SetBasicAuth(p.AccountSID, p.AuthToken) })
		if out.err != "" {
			return out
		}
	}
	return out
}
