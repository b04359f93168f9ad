// Package tunnels serves tunnels: an HTTP reverse proxy, under /api/v1/tunnel-http/{id}/, to
// a web interface on a device's network (a printer, a switch, the device's own admin page),
// reached through the device's agent over a stream. A browser is let in by a single-use
// ticket that turns into a signed cookie scoped to the tunnel's path; the proxy accepts
// nothing else, and checks on every request that the tunnel is open and its user may still
// reach the device.
package tunnels

import (
	"net/netip"
	"strings"
	"time"

	"gale/internal/platform/apperr"
	"gale/internal/wire/agentproto"
)

// Tunnel is a tunnel as the API shows it.
type Tunnel struct {
	ID         string `json:"id" format:"uuid"`
	DeviceID   string `json:"deviceId" format:"uuid"`
	PartnerID  string `json:"partnerId" format:"uuid"`
	OrgID      string `json:"orgId" format:"uuid"`
	TargetHost string `json:"targetHost"`
	TargetPort int    `json:"targetPort"`
	Scheme     string `json:"scheme" enum:"http,https"`
	// InsecureTLS skips the verification of an https target's certificate.
	InsecureTLS bool       `json:"insecureTls"`
	Status      string     `json:"status" enum:"open,closed,expired"`
	CreatedBy   *string    `json:"createdBy"`
	CreatedAt   time.Time  `json:"createdAt"`
	ExpiresAt   time.Time  `json:"expiresAt"`
	ClosedAt    *time.Time `json:"closedAt"`
	ClosedBy    *string    `json:"closedBy"`
}

// The statuses of a tunnel.
const (
	StatusOpen    = "open"
	StatusClosed  = "closed"
	StatusExpired = "expired"
)

// NewTunnel is the body of POST /tunnels.
type NewTunnel struct {
	DeviceID   string `json:"deviceId" format:"uuid"`
	TargetHost string `json:"targetHost" maxLength:"253" doc:"Host name or IP address, as the device resolves and reaches it."`
	TargetPort int    `json:"targetPort" minimum:"1" maximum:"65535"`
	Scheme     string `json:"scheme" enum:"http,https"`
	// InsecureTLS is for device web interfaces with self-signed certificates.
	InsecureTLS bool `json:"insecureTls,omitempty" doc:"Accept any certificate of an https target (self-signed device interfaces). Default false: the certificate must verify for targetHost."`
	TTLMinutes  int  `json:"ttlMinutes,omitempty" minimum:"1" maximum:"10080" doc:"Lifetime; default 480 (8 hours), at most 10080 (7 days)."`
}

// Ticket is the answer of POST /tunnels/{id}/http-ticket.
type Ticket struct {
	Ticket    string    `json:"ticket"`
	ExpiresAt time.Time `json:"expiresAt"`
	// URL opens the tunnel in a browser: the proxy's root with the ticket.
	URL string `json:"url"`
}

// Limits and defaults of tunnels.
const (
	DefaultTTL = 8 * time.Hour
	MaxTTL     = 7 * 24 * time.Hour
	// TicketTTL is the lifetime of an http-ticket (the spec's five minutes).
	TicketTTL = 5 * time.Minute
	// CookieTTL is the longest life of the proxy's cookie; it never outlives its tunnel.
	CookieTTL = 8 * time.Hour
)

// Error codes of tunnels.
const (
	// CodeDeviceLocal refuses a tunnel to a loopback or link-local address of its device.
	CodeDeviceLocal = "TUNNEL_TARGET_DEVICE_LOCAL"
	// CodeClosed answers a tunnel that is closed or expired.
	CodeClosed = "TUNNEL_CLOSED"
	// CodeAgentOffline answers a request whose device's agent is not connected.
	CodeAgentOffline = "AGENT_OFFLINE"
	// CodeTargetForbidden: the agent refused the target, which resolved to a device-local address.
	CodeTargetForbidden = "TUNNEL_TARGET_FORBIDDEN"
	// CodeTargetUnreachable: the agent could not connect to the target.
	CodeTargetUnreachable = "TUNNEL_TARGET_UNREACHABLE"
	// CodeUpstream: the target's answer broke off or was not HTTP.
	CodeUpstream = "TUNNEL_UPSTREAM_ERROR"
	// CodeTimeout: the target did not answer in time.
	CodeTimeout = "TUNNEL_TIMEOUT"
	// CodeTooLarge: the target's answer is larger than the cap.
	CodeTooLarge = "TUNNEL_RESPONSE_TOO_LARGE"
	// CodeUnsupported: the device's agent cannot open tunnels.
	CodeUnsupported = "AGENT_TUNNELS_UNSUPPORTED"
)

// validate checks a new tunnel's fields and returns its normalized target host.
func validate(in NewTunnel, allowDeviceLocal bool) (string, error) {
	var details []apperr.Detail
	host := strings.TrimSpace(in.TargetHost)
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if !validHost(host) {
		details = append(details, apperr.Detail{Field: "targetHost", Message: "a host name or an IP address, without scheme, port or path"})
	}
	if in.TargetPort < 1 || in.TargetPort > 65535 {
		details = append(details, apperr.Detail{Field: "targetPort", Message: "a port from 1 to 65535"})
	}
	if in.Scheme != "http" && in.Scheme != "https" {
		details = append(details, apperr.Detail{Field: "scheme", Message: "http or https"})
	}
	if in.InsecureTLS && in.Scheme != "https" {
		details = append(details, apperr.Detail{Field: "insecureTls", Message: "only an https tunnel has a certificate to accept"})
	}
	if in.TTLMinutes < 0 || time.Duration(in.TTLMinutes)*time.Minute > MaxTTL {
		details = append(details, apperr.Detail{Field: "ttlMinutes", Message: "from 1 to 10080 minutes"})
	}
	if len(details) > 0 {
		return "", apperr.InvalidFields(details)
	}
	if agentproto.IsDeviceLocalName(host) && !allowDeviceLocal {
		return "", apperr.BadRequest(CodeDeviceLocal, host+" is a loopback or link-local address of the device itself; "+
			"such tunnels are refused unless the operator sets TUNNEL_ALLOW_DEVICE_LOCAL=true")
	}
	return strings.ToLower(host), nil
}

// validHost accepts an IP address or a DNS name (letters, digits, hyphens, underscores and
// dots, labels of at most 63 characters).
func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
