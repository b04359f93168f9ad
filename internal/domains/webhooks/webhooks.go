// Package webhooks sends Gale's domain events to subscribers' HTTPS endpoints. A
// subscription belongs to a partner (it receives the events of every organization of the
// partner) or to one organization. The "webhooks" events consumer writes one delivery row per
// matching subscription in the event's own consumption transaction; a worker on every node
// claims due deliveries with a conditional update (one winner), POSTs the signed envelope,
// and records each attempt, retrying with exponential backoff until the delivery succeeds or
// is dead.
package webhooks

import (
	"database/sql"
	"encoding/json"
	"net/textproto"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/senders"
	"gale/internal/platform/store"
)

// Delivery statuses. pending waits for its first attempt, sending is claimed by a node,
// retrying failed and waits for its next attempt, succeeded got a 2xx, dead used up its
// attempts (retryable by hand).
const (
	StatusPending   = senders.Pending
	StatusSending   = senders.Sending
	StatusRetrying  = senders.Retrying
	StatusSucceeded = "succeeded"
	StatusDead      = "dead"
)

// Delivery rules (REFERENCE.md "Outbound webhooks").
const (
	// MaxAttempts is how many times a delivery is tried before it is dead.
	MaxAttempts = 5
	// BaseBackoff doubles after every failed attempt, up to MaxBackoff.
	BaseBackoff = time.Second
	MaxBackoff  = 300 * time.Second
	// RequestTimeout bounds one attempt, connection to last byte.
	RequestTimeout = 30 * time.Second
	// BodyLogChars is how much of a response body the log keeps.
	BodyLogChars = 1000
	// TestEventType is the type of the event POST /webhooks/{id}/test sends.
	TestEventType = "webhook.test"
	// SecretPrefix starts every signing secret.
	SecretPrefix = "whsec_"
)

// Limits of a subscription.
const (
	maxNameLen   = 200
	maxURLLen    = 2048
	maxEvents    = 50
	maxHeaders   = 20
	maxHeaderLen = 1024
)

// Backoff is the wait after the n-th failed attempt (n from 1): 1 s × 2^(n-1), at most 300 s.
func Backoff(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	d := BaseBackoff
	for i := 1; i < n; i++ {
		d *= 2
		if d >= MaxBackoff {
			return MaxBackoff
		}
	}
	return d
}

// Webhook is the API view of a subscription. The secret is shown once, on create and on
// rotate-secret; otherwise only its masked form.
type Webhook struct {
	ID        string   `json:"id" format:"uuid"`
	PartnerID string   `json:"partnerId" format:"uuid"`
	OrgID     *string  `json:"orgId" doc:"The organization whose events it receives; null: every organization of the partner."`
	Name      string   `json:"name"`
	URL       string   `json:"url"`
	Events    []string `json:"events" doc:"Event types: exact (device.offline), a prefix wildcard (alert.*) or * for all."`
	// Headers maps each extra header to a masked value: the values are stored encrypted and
	// never shown again.
	Headers      map[string]string `json:"headers"`
	Enabled      bool              `json:"enabled"`
	SecretMasked string            `json:"secretMasked" doc:"The signing secret's prefix and last characters."`
	Secret       string            `json:"secret,omitempty" doc:"The signing secret (whsec_...), only in the answer of create and rotate-secret."`
	CreatedAt    time.Time         `json:"createdAt"`
	UpdatedAt    time.Time         `json:"updatedAt"`
}

// NewWebhook is the body of a create.
type NewWebhook struct {
	PartnerID string            `json:"partnerId,omitempty" format:"uuid" doc:"System callers creating a partner-wide subscription name the partner."`
	OrgID     string            `json:"orgId,omitempty" format:"uuid" doc:"Receive only this organization's events. Organization callers: their own (the default)."`
	Name      string            `json:"name" maxLength:"200"`
	URL       string            `json:"url" maxLength:"2048" doc:"https or http; private, loopback and link-local targets are refused unless the operator allows them."`
	Events    []string          `json:"events" maxItems:"50" doc:"At least one: an event type, a prefix like alert.* or *."`
	Headers   map[string]string `json:"headers,omitempty" doc:"Extra request headers (at most 20), e.g. an Authorization a receiver expects. Stored encrypted."`
	Enabled   *bool             `json:"enabled,omitempty" doc:"Default true."`
}

// WebhookUpdate holds the writable fields; absent fields stay as they are.
type WebhookUpdate struct {
	Name    *string           `json:"name,omitempty" maxLength:"200"`
	URL     *string           `json:"url,omitempty" maxLength:"2048"`
	Events  []string          `json:"events,omitempty" maxItems:"50"`
	Headers map[string]string `json:"headers,omitempty" doc:"Replaces every extra header; {} removes them."`
	Enabled *bool             `json:"enabled,omitempty"`
}

// Delivery is one event sent (or to be sent) to one subscription, with its attempts.
type Delivery struct {
	ID             string     `json:"id" format:"uuid"`
	WebhookID      string     `json:"webhookId" format:"uuid"`
	EventID        string     `json:"eventId"`
	EventType      string     `json:"eventType"`
	Status         string     `json:"status" enum:"pending,sending,retrying,succeeded,dead"`
	Attempts       int        `json:"attempts"`
	MaxAttempts    int        `json:"maxAttempts" doc:"Attempts allowed before the delivery is dead (a manual retry grants 5 more)."`
	NextAttemptAt  *time.Time `json:"nextAttemptAt" doc:"When the next attempt is due; null once succeeded or dead."`
	ResponseStatus *int       `json:"responseStatus" doc:"HTTP status of the last attempt; null when it got no answer."`
	ResponseBody   *string    `json:"responseBody" doc:"The first 1000 characters of the last answer's body."`
	DurationMs     *int64     `json:"durationMs" doc:"How long the last attempt took."`
	Error          *string    `json:"error" doc:"Why the last attempt failed."`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
	DeliveredAt    *time.Time `json:"deliveredAt"`
	Log            []Attempt  `json:"log" doc:"Every attempt, oldest first."`
}

// Attempt is one try of a delivery.
type Attempt struct {
	Attempt        int       `json:"attempt"`
	StartedAt      time.Time `json:"startedAt"`
	ResponseStatus *int      `json:"responseStatus"`
	ResponseBody   *string   `json:"responseBody"`
	DurationMs     int64     `json:"durationMs"`
	Error          *string   `json:"error"`
}

// Envelope is the JSON body of every delivery.
type Envelope struct {
	ID        string          `json:"id" doc:"The event's ID; the same on every attempt, so receivers can drop duplicates."`
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp" doc:"When the event occurred."`
	OrgID     *string         `json:"orgId"`
	Data      json.RawMessage `json:"data"`
}

var eventPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*(\.\*)?$`)

// validEvents checks and normalizes the event list: at least one, no duplicates.
func validEvents(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, apperr.Invalid("events", "name at least one event type, a prefix like alert.* or *")
	}
	if len(in) > maxEvents {
		return nil, apperr.Invalid("events", "at most 50 entries")
	}
	out := make([]string, 0, len(in))
	for _, e := range in {
		e = strings.TrimSpace(e)
		if e != "*" && (!eventPattern.MatchString(e) || len(e) > 200) {
			return nil, apperr.Invalid("events", "'"+e+"' is not an event type (device.offline), a prefix wildcard (alert.*) or *")
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// readPermission is the permission that shows the data of each event family (the part of the
// type before the first dot): a subscription hands its receiver that data, so whoever sets it
// up must be allowed to read it. A family missing here (webhook.test) needs nothing beyond
// webhooks:write; a domain that starts emitting events adds its family.
var readPermission = map[string]access.Perm{
	"device": access.DevicesRead,
	"alert":  access.AlertsRead,
	"audit":  access.AuditRead,
}

// missingPermission returns a permission the caller lacks to read what the patterns select,
// or "" when it holds them all.
func missingPermission(p *access.Principal, patterns []string) access.Perm {
	for _, pat := range patterns {
		family, _, _ := strings.Cut(pat, ".")
		for fam, perm := range readPermission {
			if (pat == "*" || family == fam) && !p.Can(perm) {
				return perm
			}
		}
	}
	return ""
}

// Matches reports whether an event type is selected by the subscription's patterns.
func Matches(patterns []string, typ string) bool {
	for _, p := range patterns {
		switch {
		case p == "*", p == typ:
			return true
		case strings.HasSuffix(p, ".*") && strings.HasPrefix(typ, strings.TrimSuffix(p, "*")):
			return true
		}
	}
	return false
}

func validName(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || utf8.RuneCountInString(s) > maxNameLen {
		return "", apperr.Invalid("name", "name must be 1 to 200 characters")
	}
	return s, nil
}

// parseTarget checks the shape of a target URL (the address check is the guard's).
func parseTarget(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	u, err := url.Parse(raw)
	switch {
	case len(raw) > maxURLLen:
		return nil, apperr.Invalid("url", "at most 2048 characters")
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "":
		return nil, apperr.Invalid("url", "use an absolute https:// (or http://) URL")
	case u.User != nil:
		return nil, apperr.Invalid("url", "credentials in the URL are not accepted; use headers")
	case u.Fragment != "":
		return nil, apperr.Invalid("url", "a fragment is never sent; remove it")
	}
	return u, nil
}

// reservedHeaders are set by the sender and cannot be overridden.
var reservedHeaders = []string{"Host", "Content-Type", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade",
	"Te", "Trailer", "Proxy-Authorization", "Keep-Alive"}

func validHeaders(in map[string]string) (map[string]string, error) {
	if len(in) > maxHeaders {
		return nil, apperr.Invalid("headers", "at most 20 headers")
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		name := textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(k))
		if name == "" || !validHeaderName(name) {
			return nil, apperr.Invalid("headers", "'"+k+"' is not a header name")
		}
		if slices.Contains(reservedHeaders, name) || strings.HasPrefix(name, "X-Gale-") {
			return nil, apperr.Invalid("headers", name+" is set by Gale and cannot be overridden")
		}
		if len(v) > maxHeaderLen || strings.ContainsAny(v, "\r\n\x00") {
			return nil, apperr.Invalid("headers", "the value of "+name+" must be one line of at most 1024 bytes")
		}
		out[name] = v
	}
	return out, nil
}

func validHeaderName(s string) bool {
	for _, r := range s {
		if !(r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			return false
		}
	}
	return true
}

func maskSecret(secret string) string {
	if len(secret) < len(SecretPrefix)+4 {
		return SecretPrefix + "****"
	}
	return SecretPrefix + "****" + secret[len(secret)-4:]
}

// row is a subscription as stored.
type row struct {
	Webhook
	events       string
	headerNames  string
	sealedHeader string
	sealedSecret string
	hint         string
}

const webhookColumns = `w.id, w.partner_id, w.org_id, w.name, w.url, w.events, w.header_names, w.headers, w.secret, w.secret_hint,
	w.enabled, w.created_at, w.updated_at`

func scanWebhook(sc store.Scanner) (row, error) {
	var r row
	var org sql.NullString
	err := sc.Scan(&r.ID, &r.PartnerID, &org, &r.Name, &r.URL, &r.events, &r.headerNames, &r.sealedHeader, &r.sealedSecret,
		&r.hint, &r.Enabled, &r.CreatedAt, &r.UpdatedAt)
	if err != nil {
		return r, err
	}
	r.OrgID = store.StringPtr(org)
	if r.Events, err = store.DecodeStrings(r.events); err != nil {
		return r, err
	}
	names, err := store.DecodeStrings(r.headerNames)
	if err != nil {
		return r, err
	}
	r.Headers = map[string]string{}
	for _, n := range names {
		r.Headers[n] = "****"
	}
	r.SecretMasked = SecretPrefix + "****" + r.hint
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, nil
}

// truncateBody keeps the first BodyLogChars characters of a response body, as valid UTF-8.
func truncateBody(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if utf8.RuneCountInString(s) <= BodyLogChars {
		return s
	}
	r := []rune(s)
	return string(r[:BodyLogChars])
}

func success(status int) bool { return status >= 200 && status < 300 }
