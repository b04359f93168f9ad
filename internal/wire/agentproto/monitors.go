package agentproto

import "time"

// Monitor checks an agent runs on the server's behalf.
const (
	// CommandMonitorChecks runs a batch of due checks (payload MonitorChecks, result
	// MonitorChecksResult): one command per agent per scheduling round.
	CommandMonitorChecks = "monitor_checks"
	// CallMonitorCheck runs one check now and answers its result (args MonitorCheck, result
	// MonitorCheckResult).
	CallMonitorCheck = "monitor_check"
)

// Types of monitor check.
const (
	MonitorICMPPing     = "icmp_ping"
	MonitorTCPPort      = "tcp_port"
	MonitorHTTPCheck    = "http_check"
	MonitorDNSCheck     = "dns_check"
	MonitorServiceCheck = "service_check"
)

// Outcomes of a check. A check never answers unknown: that is the server's word for a
// monitor no agent could check.
const (
	MonitorOnline   = "online"
	MonitorOffline  = "offline"
	MonitorDegraded = "degraded"
	MonitorUnknown  = "unknown"
)

// Ways a service_check finds its service.
const (
	ServiceBySystemd = "systemd"
	ServiceByProcess = "process"
)

// MonitorConfig is the configuration of a check; each type reads its own fields and
// ignores the others.
type MonitorConfig struct {
	// Count and Size: echo requests of a ping and their payload bytes (icmp_ping).
	Count int `json:"count,omitempty" doc:"icmp_ping: echo requests per check, 1 to 10 (default 3)."`
	Size  int `json:"size,omitempty" doc:"icmp_ping: payload bytes of each request, 0 to 1472 (default 56)."`
	// Port and ExpectedBanner (tcp_port): what to connect to and, when set, a text the
	// service's first bytes must contain.
	Port           int    `json:"port,omitempty" doc:"tcp_port: the port (required, 1 to 65535)."`
	ExpectedBanner string `json:"expectedBanner,omitempty" maxLength:"200" multiline:"true" doc:"tcp_port: text the first bytes the service sends must contain."`
	// HTTP (http_check).
	Method                string            `json:"method,omitempty" doc:"http_check: GET (default), HEAD, POST, PUT, PATCH, DELETE or OPTIONS."`
	ExpectedStatus        []int             `json:"expectedStatus,omitempty" maxItems:"20" doc:"http_check: accepted status codes; default any status below 400."`
	ExpectedBody          string            `json:"expectedBody,omitempty" maxLength:"500" multiline:"true" doc:"http_check: text the body (its first MiB) must contain."`
	Headers               map[string]string `json:"headers,omitempty" doc:"http_check: request headers, at most 20."`
	FollowRedirects       *bool             `json:"followRedirects,omitempty" doc:"http_check: follow up to 10 redirects (default true)."`
	VerifyTLS             *bool             `json:"verifyTls,omitempty" doc:"http_check: refuse an invalid certificate (default true)."`
	CertExpiryWarningDays *int              `json:"certExpiryWarningDays,omitempty" doc:"http_check over https: degraded when the certificate expires within this many days, 0 to 365 (default 14; 0 turns it off)."`
	// DNS (dns_check): the target is the name to resolve.
	RecordType    string `json:"recordType,omitempty" doc:"dns_check: A (default), AAAA, MX, CNAME, TXT or NS."`
	ExpectedValue string `json:"expectedValue,omitempty" maxLength:"500" doc:"dns_check: a value one answer must equal (TXT: contain); any case, trailing dot ignored."`
	Nameserver    string `json:"nameserver,omitempty" maxLength:"260" doc:"dns_check: host[:port] of the server to ask; default the agent's resolver."`
	// Service (service_check): the target is the unit or process name.
	ServiceKind string `json:"serviceKind,omitempty" doc:"service_check: systemd (default: systemctl is-active <unit>) or process (a running process of that name)."`
	DeviceID    string `json:"deviceId,omitempty" doc:"service_check: the device (of the monitor's organization) the service runs on; required."`
	// DegradedResponseMs makes a check that answered slower than this degraded (tcp_port,
	// http_check, dns_check, icmp_ping's average).
	DegradedResponseMs int `json:"degradedResponseMs,omitempty" doc:"A check that answers slower than this (ms) is degraded; 0 turns it off."`
}

// MonitorCheck is one check to run.
type MonitorCheck struct {
	MonitorID      string        `json:"monitorId,omitempty"`
	Type           string        `json:"type"`
	Target         string        `json:"target"`
	Config         MonitorConfig `json:"config"`
	TimeoutSeconds int           `json:"timeoutSeconds"`
}

// MonitorCheckResult is the outcome of a check: online, offline or degraded, the time the
// answer took (none when there was no answer), why it failed or is degraded, and what was
// observed (Details: per type, e.g. sent/received for a ping, statusCode and certDaysLeft for
// HTTP, answers for DNS).
type MonitorCheckResult struct {
	MonitorID  string         `json:"monitorId,omitempty"`
	Status     string         `json:"status"`
	ResponseMs *float64       `json:"responseMs,omitempty"`
	Error      string         `json:"error,omitempty"`
	Details    map[string]any `json:"details,omitempty"`
	CheckedAt  time.Time      `json:"checkedAt"`
}

// MonitorChecks is the payload of monitor_checks.
type MonitorChecks struct {
	Checks []MonitorCheck `json:"checks"`
}

// MonitorChecksResult is the Result of a completed monitor_checks: one result per check, in
// any order.
type MonitorChecksResult struct {
	Results []MonitorCheckResult `json:"results"`
}
