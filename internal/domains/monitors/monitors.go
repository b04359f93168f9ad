// Package monitors watches hosts and services from the agents: ping, TCP port, HTTP(S), DNS
// and a service on one device. The server schedules each enabled monitor's check once per
// interval on an online agent of its site (else of its organization), stores the results,
// keeps the monitor's status and raises the alerts of its rules.
package monitors

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/wire/agentproto"
)

// Limits of a monitor.
const (
	MinInterval, MaxInterval, DefaultInterval = 10, 86400, 60
	MinTimeout, MaxTimeout, DefaultTimeout    = 1, 300, 5
	MaxAlertRules                             = 10
	DefaultCooldownMinutes                    = 15
	maxName                                   = 200
	maxTarget                                 = 2048
	maxResultsPage                            = 1000
)

// Alert rule conditions.
const (
	ConditionOffline             = "offline"
	ConditionDegraded            = "degraded"
	ConditionResponseTimeGT      = "response_time_gt"
	ConditionConsecutiveFailures = "consecutive_failures_gt"
)

// EventStatusChanged is recorded when a monitor's status changes.
const EventStatusChanged = "monitor.status_changed"

var (
	types      = []string{agentproto.MonitorICMPPing, agentproto.MonitorTCPPort, agentproto.MonitorHTTPCheck, agentproto.MonitorDNSCheck, agentproto.MonitorServiceCheck}
	statuses   = []string{agentproto.MonitorOnline, agentproto.MonitorOffline, agentproto.MonitorDegraded, agentproto.MonitorUnknown}
	conditions = []string{ConditionOffline, ConditionDegraded, ConditionResponseTimeGT, ConditionConsecutiveFailures}
	severities = []string{"critical", "high", "medium", "low", "info"}
	methods    = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
	records    = []string{"A", "AAAA", "MX", "CNAME", "TXT", "NS"}
)

// Monitor is a check of a target, run by the organization's agents every interval.
type Monitor struct {
	ID                  string                   `json:"id" format:"uuid"`
	PartnerID           string                   `json:"partnerId" format:"uuid"`
	OrgID               string                   `json:"orgId" format:"uuid"`
	SiteID              *string                  `json:"siteId" doc:"The site whose agents run the check; null: any agent of the organization."`
	Name                string                   `json:"name"`
	Type                string                   `json:"type" enum:"icmp_ping,tcp_port,http_check,dns_check,service_check"`
	Target              string                   `json:"target" doc:"Host name or IP (icmp_ping, tcp_port), URL (http_check), DNS name (dns_check), systemd unit or process name (service_check)."`
	Config              agentproto.MonitorConfig `json:"config"`
	IntervalSeconds     int                      `json:"intervalSeconds"`
	TimeoutSeconds      int                      `json:"timeoutSeconds"`
	Enabled             bool                     `json:"enabled"`
	AlertRules          []MonitorAlertRule       `json:"alertRules"`
	Status              string                   `json:"status" enum:"online,offline,degraded,unknown"`
	LastCheckAt         *time.Time               `json:"lastCheckAt"`
	LastResponseMs      *float64                 `json:"lastResponseMs"`
	LastError           *string                  `json:"lastError"`
	ConsecutiveFailures int                      `json:"consecutiveFailures" doc:"Offline results in a row."`
	NextCheckAt         *time.Time               `json:"nextCheckAt" doc:"When the next scheduled check is due; null while disabled."`
	CreatedBy           *string                  `json:"createdBy"`
	CreatedAt           time.Time                `json:"createdAt"`
	UpdatedAt           time.Time                `json:"updatedAt"`
}

// MonitorAlertRule raises an alert of its severity while its condition holds, one open alert
// per (monitor, rule), resolved on recovery; after one resolves, none opens again for
// cooldownMinutes.
type MonitorAlertRule struct {
	ID              string   `json:"id,omitempty" doc:"Stable ID of the rule: send it back when editing the list so the rule keeps its open alert; new rules get one."`
	Condition       string   `json:"condition" enum:"offline,degraded,response_time_gt,consecutive_failures_gt"`
	Threshold       *float64 `json:"threshold,omitempty" doc:"response_time_gt: milliseconds; consecutive_failures_gt: a count. Required for these two."`
	Severity        string   `json:"severity" enum:"critical,high,medium,low,info"`
	CooldownMinutes *int     `json:"cooldownMinutes,omitempty" doc:"0 to 1440; default 15."`
}

// MonitorInput creates a monitor.
type MonitorInput struct {
	OrgID           string                    `json:"orgId,omitempty" format:"uuid" doc:"Required unless the caller is of one organization."`
	SiteID          string                    `json:"siteId,omitempty" format:"uuid"`
	Name            string                    `json:"name" maxLength:"200"`
	Type            string                    `json:"type"`
	Target          string                    `json:"target" maxLength:"2048"`
	Config          *agentproto.MonitorConfig `json:"config,omitempty"`
	IntervalSeconds *int                      `json:"intervalSeconds,omitempty" doc:"10 to 86400; default 60."`
	TimeoutSeconds  *int                      `json:"timeoutSeconds,omitempty" doc:"1 to 300; default 5."`
	Enabled         *bool                     `json:"enabled,omitempty" doc:"Default true."`
	AlertRules      []MonitorAlertRule        `json:"alertRules,omitempty" maxItems:"10"`
}

// MonitorUpdate changes the fields sent (PATCH).
type MonitorUpdate struct {
	SiteID          *string                   `json:"siteId,omitempty" doc:"A site of the organization; empty string: any agent of the organization."`
	Name            *string                   `json:"name,omitempty" maxLength:"200"`
	Type            *string                   `json:"type,omitempty"`
	Target          *string                   `json:"target,omitempty" maxLength:"2048"`
	Config          *agentproto.MonitorConfig `json:"config,omitempty" doc:"Replaces the whole configuration."`
	IntervalSeconds *int                      `json:"intervalSeconds,omitempty"`
	TimeoutSeconds  *int                      `json:"timeoutSeconds,omitempty"`
	Enabled         *bool                     `json:"enabled,omitempty"`
	AlertRules      *[]MonitorAlertRule       `json:"alertRules,omitempty" maxItems:"10" doc:"Replaces every rule; rules sent with their id keep their open alerts, rules left out have theirs resolved."`
}

// MonitorResult is a stored check result.
type MonitorResult struct {
	ID         string         `json:"id,omitempty" format:"uuid" doc:"Absent from a test's result, which is not stored."`
	MonitorID  string         `json:"monitorId" format:"uuid"`
	CheckedAt  time.Time      `json:"checkedAt"`
	Status     string         `json:"status" enum:"online,offline,degraded,unknown"`
	ResponseMs *float64       `json:"responseMs"`
	Error      string         `json:"error"`
	Details    map[string]any `json:"details"`
}

// checker gathers field errors.
type checker struct{ details []apperr.Detail }

func (c *checker) fail(field, format string, args ...any) {
	c.details = append(c.details, apperr.Detail{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) err() error {
	if len(c.details) == 0 {
		return nil
	}
	return apperr.InvalidFields(c.details)
}

// spec is a monitor's definition, validated and normalized.
type spec struct {
	SiteID, Name, Type, Target string
	Config                     agentproto.MonitorConfig
	Interval, Timeout          int
	Enabled                    bool
	Rules                      []MonitorAlertRule
	// knownRules are the IDs of the monitor's rules before an update: the only IDs a rule
	// may be sent with.
	knownRules map[string]bool
}

var (
	hostLabel   = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$`)
	serviceName = regexp.MustCompile(`^[A-Za-z0-9:_.@+\\-]{1,255}$`)
	headerName  = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")
)

// validHost reports whether s is an IP address or a DNS host name.
func validHost(s string) bool {
	if net.ParseIP(s) != nil {
		return true
	}
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !hostLabel.MatchString(l) {
			return false
		}
	}
	return true
}

// validate checks a definition field by field and normalizes it: the config keeps the
// fields of its type only, with their defaults.
func (sp *spec) validate(c *checker) {
	sp.Name = strings.TrimSpace(sp.Name)
	if sp.Name == "" || len([]rune(sp.Name)) > maxName {
		c.fail("name", "name is required, at most 200 characters")
	}
	if sp.SiteID != "" && !store.ValidID(sp.SiteID) {
		c.fail("siteId", "no such site in the organization")
	}
	if !slices.Contains(types, sp.Type) {
		c.fail("type", "type must be one of %s", strings.Join(types, ", "))
	}
	if sp.Interval < MinInterval || sp.Interval > MaxInterval {
		c.fail("intervalSeconds", "intervalSeconds must be from 10 to 86400")
	}
	if sp.Timeout < MinTimeout || sp.Timeout > MaxTimeout {
		c.fail("timeoutSeconds", "timeoutSeconds must be from 1 to 300")
	}
	sp.Target = strings.TrimSpace(sp.Target)
	if sp.Target == "" || len(sp.Target) > maxTarget {
		c.fail("target", "target is required, at most 2048 characters")
	} else {
		sp.checkTarget(c)
	}
	sp.Config = normalizeConfig(sp.Type, sp.Config, c)
	sp.Rules = checkRules(sp.Rules, sp.knownRules, c)
}

func (sp *spec) checkTarget(c *checker) {
	switch sp.Type {
	case agentproto.MonitorICMPPing, agentproto.MonitorTCPPort:
		if !validHost(sp.Target) {
			c.fail("target", "target must be a host name or an IP address")
		}
	case agentproto.MonitorHTTPCheck:
		u, err := url.Parse(sp.Target)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || !validHost(u.Hostname()) {
			c.fail("target", "target must be an http:// or https:// URL with a host")
		}
	case agentproto.MonitorDNSCheck:
		if net.ParseIP(sp.Target) != nil || !validHost(sp.Target) {
			c.fail("target", "target must be a DNS name")
		}
	case agentproto.MonitorServiceCheck:
		if !serviceName.MatchString(sp.Target) || strings.HasPrefix(sp.Target, "-") {
			c.fail("target", "target must be a systemd unit or process name (letters, digits and :_.@+-)")
		}
	}
}

// normalizeConfig keeps the fields of typ's config, checked, with their defaults.
func normalizeConfig(typ string, in agentproto.MonitorConfig, c *checker) agentproto.MonitorConfig {
	out := agentproto.MonitorConfig{DegradedResponseMs: in.DegradedResponseMs}
	if in.DegradedResponseMs < 0 || in.DegradedResponseMs > 300000 {
		c.fail("config.degradedResponseMs", "degradedResponseMs must be from 0 (off) to 300000")
	}
	switch typ {
	case agentproto.MonitorICMPPing:
		out.Count, out.Size = in.Count, in.Size
		if out.Count == 0 {
			out.Count = 3
		}
		if out.Size == 0 {
			out.Size = 56
		}
		if out.Count < 1 || out.Count > 10 {
			c.fail("config.count", "count must be from 1 to 10")
		}
		if out.Size < 0 || out.Size > 1472 {
			c.fail("config.size", "size must be from 0 to 1472 bytes")
		}
	case agentproto.MonitorTCPPort:
		out.Port, out.ExpectedBanner = in.Port, in.ExpectedBanner
		if out.Port < 1 || out.Port > 65535 {
			c.fail("config.port", "port is required, from 1 to 65535")
		}
		if len(out.ExpectedBanner) > 200 {
			c.fail("config.expectedBanner", "at most 200 bytes")
		}
	case agentproto.MonitorHTTPCheck:
		checkHTTP(in, &out, c)
	case agentproto.MonitorDNSCheck:
		out.RecordType, out.ExpectedValue, out.Nameserver = strings.ToUpper(in.RecordType), in.ExpectedValue, in.Nameserver
		if out.RecordType == "" {
			out.RecordType = "A"
		}
		if !slices.Contains(records, out.RecordType) {
			c.fail("config.recordType", "recordType must be one of %s", strings.Join(records, ", "))
		}
		if len(out.ExpectedValue) > 500 {
			c.fail("config.expectedValue", "at most 500 characters")
		}
		if out.Nameserver != "" && !validNameserver(out.Nameserver) {
			c.fail("config.nameserver", "nameserver must be host or host:port")
		}
	case agentproto.MonitorServiceCheck:
		out.ServiceKind, out.DeviceID = in.ServiceKind, in.DeviceID
		if out.ServiceKind == "" {
			out.ServiceKind = agentproto.ServiceBySystemd
		}
		if out.ServiceKind != agentproto.ServiceBySystemd && out.ServiceKind != agentproto.ServiceByProcess {
			c.fail("config.serviceKind", "serviceKind must be systemd or process")
		}
		if !store.ValidID(out.DeviceID) {
			c.fail("config.deviceId", "deviceId is required: the device of the organization the service runs on")
		}
	}
	return out
}

func checkHTTP(in agentproto.MonitorConfig, out *agentproto.MonitorConfig, c *checker) {
	out.Method = strings.ToUpper(in.Method)
	if out.Method == "" {
		out.Method = "GET"
	}
	if !slices.Contains(methods, out.Method) {
		c.fail("config.method", "method must be one of %s", strings.Join(methods, ", "))
	}
	out.ExpectedStatus, out.ExpectedBody, out.Headers = in.ExpectedStatus, in.ExpectedBody, in.Headers
	if len(out.ExpectedStatus) > 20 {
		c.fail("config.expectedStatus", "at most 20 status codes")
	}
	for i, st := range out.ExpectedStatus {
		if st < 100 || st > 599 {
			c.fail("config.expectedStatus["+strconv.Itoa(i)+"]", "a status code is from 100 to 599")
		}
	}
	if len(out.ExpectedBody) > 500 {
		c.fail("config.expectedBody", "at most 500 characters")
	}
	if len(out.Headers) > 20 {
		c.fail("config.headers", "at most 20 headers")
	}
	for k, v := range out.Headers {
		if !headerName.MatchString(k) {
			c.fail("config.headers", "%q is not a header name", k)
		}
		if len(v) > 1000 || strings.ContainsAny(v, "\r\n") {
			c.fail("config.headers", "the value of %s must be one line of at most 1000 characters", k)
		}
	}
	t := true
	out.FollowRedirects, out.VerifyTLS = in.FollowRedirects, in.VerifyTLS
	if out.FollowRedirects == nil {
		out.FollowRedirects = &t
	}
	if out.VerifyTLS == nil {
		out.VerifyTLS = &t
	}
	days := 14
	if in.CertExpiryWarningDays != nil {
		days = *in.CertExpiryWarningDays
	}
	if days < 0 || days > 365 {
		c.fail("config.certExpiryWarningDays", "certExpiryWarningDays must be from 0 (off) to 365")
	}
	out.CertExpiryWarningDays = &days
}

func validNameserver(ns string) bool {
	host, port, err := net.SplitHostPort(ns)
	if err != nil {
		return validHost(strings.Trim(ns, "[]"))
	}
	p, err := strconv.Atoi(port)
	return err == nil && p >= 1 && p <= 65535 && validHost(host)
}

// checkRules validates alert rules and gives new ones an ID; a rule sent with an ID must be
// one of known.
func checkRules(rules []MonitorAlertRule, known map[string]bool, c *checker) []MonitorAlertRule {
	if len(rules) > MaxAlertRules {
		c.fail("alertRules", "at most 10 alert rules")
		return rules
	}
	out := make([]MonitorAlertRule, 0, len(rules))
	seen := map[string]bool{}
	for i, r := range rules {
		f := func(name string) string { return fmt.Sprintf("alertRules[%d].%s", i, name) }
		if r.ID == "" {
			r.ID = store.NewID()
		} else if !known[r.ID] || seen[r.ID] {
			c.fail(f("id"), "id must be the id of one of the monitor's rules, once")
		}
		seen[r.ID] = true
		if !slices.Contains(conditions, r.Condition) {
			c.fail(f("condition"), "condition must be one of %s", strings.Join(conditions, ", "))
		}
		if !slices.Contains(severities, r.Severity) {
			c.fail(f("severity"), "severity must be one of %s", strings.Join(severities, ", "))
		}
		switch r.Condition {
		case ConditionResponseTimeGT:
			if r.Threshold == nil || *r.Threshold <= 0 || *r.Threshold > 300000 {
				c.fail(f("threshold"), "threshold (milliseconds, above 0, at most 300000) is required")
			}
		case ConditionConsecutiveFailures:
			if r.Threshold == nil || *r.Threshold < 0 || *r.Threshold > 10000 || *r.Threshold != float64(int(*r.Threshold)) {
				c.fail(f("threshold"), "threshold (a whole count from 0 to 10000) is required")
			}
		default:
			r.Threshold = nil
		}
		if r.CooldownMinutes == nil {
			d := DefaultCooldownMinutes
			r.CooldownMinutes = &d
		} else if *r.CooldownMinutes < 0 || *r.CooldownMinutes > 1440 {
			c.fail(f("cooldownMinutes"), "cooldownMinutes must be from 0 to 1440")
		}
		out = append(out, r)
	}
	return out
}
