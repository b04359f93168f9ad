// Package notify sends alert notifications through channels (email, Slack, Teams, generic
// webhook, PagerDuty, SMS). A channel belongs to a partner (it may be used for every
// organization's alerts) or to one organization. The "notify" events consumer routes every
// alert.triggered event, in the event's consumption transaction, to the rule's channels, else
// to the first matching escalation policy (step 0 now, later steps through the alerts-escalate
// job), else to every enabled channel of the tenant, writing one delivery row per channel;
// a worker on every node claims due deliveries with a conditional update and sends them with
// retries and backoff. A resolved alert is announced to the channels that were notified
// (PagerDuty: a resolve with the same dedup_key); acknowledge and resolve cancel pending
// escalation steps.
package alertchannels

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gale/internal/domains/webhooks"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/platform/secrets"
	"gale/internal/platform/senders"
	"gale/internal/platform/store"

	"net/http"

	galemail "gale/internal/platform/mail"
)

// Channel types.
const (
	TypeEmail     = "email"
	TypeSlack     = "slack"
	TypeTeams     = "teams"
	TypeWebhook   = "webhook"
	TypePagerDuty = "pagerduty"
	TypeSMS       = "sms"
)

var channelTypes = []string{TypeEmail, TypeSlack, TypeTeams, TypeWebhook, TypePagerDuty, TypeSMS}

// Delivery statuses: as webhooks, plus throttled (not sent: the channel's throttle was
// reached).
const (
	StatusPending   = senders.Pending
	StatusSending   = senders.Sending
	StatusRetrying  = senders.Retrying
	StatusSucceeded = "succeeded"
	StatusDead      = "dead"
	StatusThrottled = "throttled"
)

// MaxAttempts is how many times a delivery is tried; the wait between attempts is
// webhooks.Backoff.
const MaxAttempts = 5

// DefaultPagerDutyURL is where PagerDuty events go unless the channel names another base URL.
const DefaultPagerDutyURL = "https://events.pagerduty.com"

// DefaultTwilioURL is the SMS provider's API unless the channel names another base URL.
const DefaultTwilioURL = "https://api.twilio.com"

// Deps is what the notification service is built from.
type Deps struct {
	DB     *store.DB
	Logger *slog.Logger
	// Box seals channel secrets.
	Box *secrets.Box
	// Mailer sends email channels; nil: mail is not configured.
	Mailer galemail.Sender
	// Clock is the time of time windows, throttles, escalations and deliveries; nil: the
	// system clock.
	Clock clock.Clock
}

// Options are the notification settings of the server configuration.
type Options struct {
	// AllowPrivateTargets is WEBHOOK_ALLOW_PRIVATE_TARGETS: channels may reach loopback,
	// private and link-local addresses.
	AllowPrivateTargets bool
	// PublicURL makes the alert links of messages.
	PublicURL string
	// Workers is how many deliveries a node sends at once; 0 means 2.
	Workers int
}

// Service manages channels and policies and sends notifications.
type Service struct {
	db     *store.DB
	logger *slog.Logger
	box    *secrets.Box
	mailer galemail.Sender
	opts   Options
	client *http.Client
	// senders send the due deliveries.
	senders *senders.Pool
	clock   clock.Clock
}

// New returns the notification service.
func New(d Deps, opts Options) *Service {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	s := &Service{db: d.DB, logger: d.Logger, box: d.Box, mailer: d.Mailer, opts: opts,
		client: webhooks.NewClient(opts.AllowPrivateTargets), clock: clock.Or(d.Clock)}
	s.senders = senders.New("notification deliveries", d.Logger, opts.Workers, time.Second, s.RunDue)
	return s
}

// now is the time of time windows, throttles, escalations and deliveries.
func (s *Service) now() time.Time { return s.clock.Now() }

// SMSProvider is a Twilio-compatible API account.
type SMSProvider struct {
	AccountSID string `json:"accountSid"`
	AuthToken  string `json:"authToken,omitempty" doc:"Secret: masked in answers."`
	From       string `json:"from"`
	BaseURL    string `json:"baseUrl,omitempty" doc:"Default https://api.twilio.com."`
}

// Config is a channel's configuration; which fields apply depends on the type. Secret
// fields are stored sealed and answered masked (****last4); sending a masked value back in
// a change keeps the stored secret.
type ChannelConfig struct {
	Recipients   []string          `json:"recipients,omitempty" doc:"email: 1 to 50 addresses."`
	WebhookURL   string            `json:"webhookUrl,omitempty" doc:"slack, teams: the incoming webhook URL. Secret."`
	URL          string            `json:"url,omitempty" doc:"webhook: the target URL."`
	Method       string            `json:"method,omitempty" doc:"webhook: POST (default) or PUT."`
	Headers      map[string]string `json:"headers,omitempty" doc:"webhook: extra headers; values are secret."`
	AuthType     string            `json:"authType,omitempty" doc:"webhook: none (default), bearer (token), basic (username, password) or hmac (secret: X-Gale-Signature as outbound webhooks)."`
	Token        string            `json:"token,omitempty" doc:"webhook bearer token. Secret."`
	Username     string            `json:"username,omitempty"`
	Password     string            `json:"password,omitempty" doc:"Secret."`
	Secret       string            `json:"secret,omitempty" doc:"webhook hmac signing secret. Secret."`
	RoutingKey   string            `json:"routingKey,omitempty" doc:"pagerduty: the Events API v2 integration key. Secret."`
	BaseURL      string            `json:"baseUrl,omitempty" doc:"pagerduty: default https://events.pagerduty.com."`
	PhoneNumbers []string          `json:"phoneNumbers,omitempty" doc:"sms: 1 to 20 numbers in E.164 (+15551234567)."`
	Provider     *SMSProvider      `json:"provider,omitempty" doc:"sms: the Twilio-compatible account."`
}

// Throttle caps how many notifications a channel sends per hour; the rest are logged as
// throttled.
type ChannelThrottle struct {
	MaxPerHour int `json:"maxPerHour" minimum:"0" maximum:"10000" doc:"1 to 10000; 0 (in a change) removes the throttle."`
}

// Channel is the API view of a notification channel.
type NotificationChannel struct {
	ID        string           `json:"id" format:"uuid"`
	PartnerID string           `json:"partnerId" format:"uuid"`
	OrgID     *string          `json:"orgId" doc:"null: usable for every organization of the partner."`
	Name      string           `json:"name"`
	Type      string           `json:"type" enum:"email,slack,teams,webhook,pagerduty,sms"`
	Config    ChannelConfig    `json:"config" doc:"Secrets masked."`
	Enabled   bool             `json:"enabled"`
	Throttle  *ChannelThrottle `json:"throttle"`
	CreatedAt time.Time        `json:"createdAt"`
	UpdatedAt time.Time        `json:"updatedAt"`
}

// NewChannel is the body of a create.
type NewChannel struct {
	PartnerID string           `json:"partnerId,omitempty" format:"uuid" doc:"System callers creating a partner-wide channel name the partner."`
	OrgID     string           `json:"orgId,omitempty" format:"uuid" doc:"The organization the channel belongs to; organization callers: their own (the default)."`
	Name      string           `json:"name" maxLength:"200"`
	Type      string           `json:"type" enum:"email,slack,teams,webhook,pagerduty,sms"`
	Config    ChannelConfig    `json:"config"`
	Enabled   *bool            `json:"enabled,omitempty" doc:"Default true."`
	Throttle  *ChannelThrottle `json:"throttle,omitempty"`
}

// ChannelUpdate holds the writable fields; absent fields stay. config, when given, replaces
// the whole configuration except secrets left out or sent back masked.
type ChannelUpdate struct {
	Name     *string          `json:"name,omitempty" maxLength:"200"`
	Config   *ChannelConfig   `json:"config,omitempty"`
	Enabled  *bool            `json:"enabled,omitempty"`
	Throttle *ChannelThrottle `json:"throttle,omitempty" doc:"{maxPerHour: n}; maxPerHour 0 removes the throttle."`
}

func mask(s string) string {
	if s == "" {
		return ""
	}
	if len(s) <= 8 {
		return "****"
	}
	return "****" + s[len(s)-4:]
}

func masked(s string) bool { return strings.HasPrefix(s, "****") }

// maskConfig hides every secret of c.
func maskConfig(c ChannelConfig) ChannelConfig {
	c.WebhookURL, c.Token, c.Password, c.Secret, c.RoutingKey = mask(c.WebhookURL), mask(c.Token), mask(c.Password),
		mask(c.Secret), mask(c.RoutingKey)
	if c.Headers != nil {
		h := make(map[string]string, len(c.Headers))
		for k := range c.Headers {
			h[k] = "****"
		}
		c.Headers = h
	}
	if c.Provider != nil {
		p := *c.Provider
		p.AuthToken = mask(p.AuthToken)
		c.Provider = &p
	}
	c.Recipients, c.PhoneNumbers = slices.Clone(c.Recipients), slices.Clone(c.PhoneNumbers)
	return c
}

// keepSecrets fills the secrets of next that are empty or masked from prev.
func keepSecrets(next *ChannelConfig, prev ChannelConfig) {
	keep := func(n *string, p string) {
		if *n == "" || masked(*n) {
			*n = p
		}
	}
	keep(&next.WebhookURL, prev.WebhookURL)
	keep(&next.Token, prev.Token)
	keep(&next.Password, prev.Password)
	keep(&next.Secret, prev.Secret)
	keep(&next.RoutingKey, prev.RoutingKey)
	for k, v := range next.Headers {
		if masked(v) {
			next.Headers[k] = prev.Headers[k]
		}
	}
	if next.Provider != nil && prev.Provider != nil {
		keep(&next.Provider.AuthToken, prev.Provider.AuthToken)
	}
}

var e164 = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

// validConfig checks c for type t and normalizes it; targets are checked against the SSRF
// guard.
func (s *Service) validConfig(ctx context.Context, t string, c ChannelConfig) (ChannelConfig, error) {
	out := ChannelConfig{}
	httpTarget := func(field, raw string, required bool) (string, error) {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			if required {
				return "", apperr.Invalid(field, "required for a "+t+" channel")
			}
			return "", nil
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" || len(raw) > 2048 {
			return "", apperr.Invalid(field, "use an absolute https:// (or http://) URL of at most 2048 characters")
		}
		if u.User != nil {
			return "", apperr.Invalid(field, "credentials in the URL are not accepted")
		}
		if err := webhooks.CheckTarget(ctx, field, u, s.opts.AllowPrivateTargets); err != nil {
			return "", err
		}
		return u.String(), nil
	}
	var err error
	switch t {
	case TypeEmail:
		if len(c.Recipients) == 0 || len(c.Recipients) > 50 {
			return out, apperr.Invalid("config.recipients", "1 to 50 email addresses")
		}
		for _, r := range c.Recipients {
			a, err := mail.ParseAddress(strings.TrimSpace(r))
			if err != nil || a.Name != "" {
				return out, apperr.Invalid("config.recipients", "'"+r+"' is not an email address")
			}
			if !slices.Contains(out.Recipients, a.Address) {
				out.Recipients = append(out.Recipients, a.Address)
			}
		}
	case TypeSlack, TypeTeams:
		if out.WebhookURL, err = httpTarget("config.webhookUrl", c.WebhookURL, true); err != nil {
			return out, err
		}
	case TypeWebhook:
		if out.URL, err = httpTarget("config.url", c.URL, true); err != nil {
			return out, err
		}
		out.Method = strings.ToUpper(strings.TrimSpace(c.Method))
		if out.Method == "" {
			out.Method = http.MethodPost
		}
		if out.Method != http.MethodPost && out.Method != http.MethodPut {
			return out, apperr.Invalid("config.method", "POST or PUT")
		}
		if len(c.Headers) > 20 {
			return out, apperr.Invalid("config.headers", "at most 20 headers")
		}
		for k, v := range c.Headers {
			if k == "" || strings.ContainsAny(k, " :\r\n") || strings.ContainsAny(v, "\r\n\x00") || len(v) > 1024 {
				return out, apperr.Invalid("config.headers", "'"+k+"' is not a header of one line")
			}
			if out.Headers == nil {
				out.Headers = map[string]string{}
			}
			out.Headers[http.CanonicalHeaderKey(k)] = v
		}
		out.AuthType = c.AuthType
		if out.AuthType == "" {
			out.AuthType = "none"
		}
		switch out.AuthType {
		case "none":
		case "bearer":
			if c.Token == "" {
				return out, apperr.Invalid("config.token", "a bearer webhook needs a token")
			}
			out.Token = c.Token
		case "basic":
			if c.Username == "" || c.Password == "" {
				return out, apperr.Invalid("config.username", "a basic-auth webhook needs username and password")
			}
			out.Username, out.Password = c.Username, c.Password
		case "hmac":
			if len(c.Secret) < 16 {
				return out, apperr.Invalid("config.secret", "an hmac webhook needs a secret of at least 16 characters")
			}
			out.Secret = c.Secret
		default:
			return out, apperr.Invalid("config.authType", "none, bearer, basic or hmac")
		}
	case TypePagerDuty:
		if k := strings.TrimSpace(c.RoutingKey); k == "" || len(k) > 100 {
			return out, apperr.Invalid("config.routingKey", "the integration's routing key (32 characters) is required")
		}
		out.RoutingKey = strings.TrimSpace(c.RoutingKey)
		if out.BaseURL, err = httpTarget("config.baseUrl", c.BaseURL, false); err != nil {
			return out, err
		}
	case TypeSMS:
		if len(c.PhoneNumbers) == 0 || len(c.PhoneNumbers) > 20 {
			return out, apperr.Invalid("config.phoneNumbers", "1 to 20 numbers")
		}
		for _, n := range c.PhoneNumbers {
			if !e164.MatchString(n) {
				return out, apperr.Invalid("config.phoneNumbers", "'"+n+"' is not an E.164 number (+15551234567)")
			}
		}
		out.PhoneNumbers = slices.Clone(c.PhoneNumbers)
		p := c.Provider
		if p == nil || p.AccountSID == "" || p.AuthToken == "" || p.From == "" {
			return out, apperr.Invalid("config.provider", "accountSid, authToken and from are required")
		}
		if strings.ContainsAny(p.AccountSID, "/?#% ") {
			return out, apperr.Invalid("config.provider.accountSid", "not an account SID")
		}
		base, err := httpTarget("config.provider.baseUrl", p.BaseURL, false)
		if err != nil {
			return out, err
		}
		out.Provider = &SMSProvider{AccountSID: p.AccountSID, AuthToken: p.AuthToken, From: p.From, BaseURL: base}
	default:
		return out, apperr.Invalid("type", "one of email, slack, teams, webhook, pagerduty, sms")
	}
	return out, nil
}

func validName(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || utf8.RuneCountInString(s) > 200 {
		return "", apperr.Invalid("name", "name must be 1 to 200 characters")
	}
	return s, nil
}

// chRow is a channel as stored, with its full configuration.
type chRow struct {
	NotificationChannel
	full ChannelConfig
}

const channelColumns = `c.id, c.partner_id, c.org_id, c.name, c.type, c.sealed, c.enabled, c.throttle, c.created_at, c.updated_at`

func (s *Service) scanChannel(sc store.Scanner) (chRow, error) {
	var r chRow
	var org, throttle sql.NullString
	var sealed string
	if err := sc.Scan(&r.ID, &r.PartnerID, &org, &r.Name, &r.Type, &sealed, &r.Enabled, &throttle, &r.CreatedAt, &r.UpdatedAt); err != nil {
		return r, err
	}
	r.OrgID = store.StringPtr(org)
	raw, err := s.box.Open(sealed)
	if err != nil {
		return r, errors.New("a channel's configuration does not open with this server's APP_ENCRYPTION_KEY")
	}
	if err := json.Unmarshal([]byte(raw), &r.full); err != nil {
		return r, err
	}
	r.Config = maskConfig(r.full)
	if throttle.Valid && throttle.String != "" {
		var t ChannelThrottle
		if json.Unmarshal([]byte(throttle.String), &t) == nil && t.MaxPerHour > 0 {
			r.Throttle = &t
		}
	}
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, nil
}

func filter(scope access.Scope, a *store.Args, alias string) string {
	return scope.OrgFilter(a, alias+".org_id", alias+".partner_id")
}

// errPartnerWide refuses a partner-wide channel or policy to a caller that does not reach
// every organization of its partner.
var errPartnerWide = apperr.Forbidden("a partner-wide channel or policy serves every organization's alerts; " +
	"callers limited to some organizations create one for an organization (orgId)")
