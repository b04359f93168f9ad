// Package snmp is the SNMP domain: SNMP devices of an organization polled through an online
// agent of their site, templates of the OIDs to poll (built-in and custom), the metrics the
// polls store (latest values, history in buckets, counters as rates), thresholds that raise
// and resolve alerts, and the dispatcher that claims due devices and asks the agents.
package snmp

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"gale/internal/platform/apperr"
	"gale/internal/wire/agentproto"
)

// Device statuses.
const (
	StatusUnknown = "unknown"
	StatusOnline  = "online"
	StatusOffline = "offline"
)

// Limits and defaults.
const (
	DefaultPort     = 161
	DefaultInterval = 300
	MinInterval     = 30
	MaxInterval     = 86400
	// OfflineAfter failed polls in a row mark a device offline.
	OfflineAfter = 3
	// MaxBackoff caps the wait after failures (unless the interval is longer).
	MaxBackoff = time.Hour
	// MaxTemplateOIDs bounds the OIDs of a template.
	MaxTemplateOIDs = 200
	// MaxValidateOIDs bounds the OIDs of one validation request.
	MaxValidateOIDs = 500
	// MaxThresholdsPerDevice bounds a device's thresholds.
	MaxThresholdsPerDevice = 100
)

// Error codes beyond the standard ones.
const (
	CodeBuiltInTemplate = "BUILT_IN_TEMPLATE"
	CodeTemplateInUse   = "TEMPLATE_IN_USE"
	CodeDeviceExists    = "SNMP_DEVICE_EXISTS"
	CodeSNMPTimeout     = "SNMP_TIMEOUT"
	CodeSNMPAuth        = "SNMP_AUTH_FAILED"
	CodeSNMPFailed      = "SNMP_FAILED"
)

// SNMPDevice is an SNMP device as the API shows it: never its community or passwords.
type SNMPDevice struct {
	ID                  string     `json:"id"`
	PartnerID           string     `json:"partnerId"`
	OrgID               string     `json:"orgId"`
	SiteID              string     `json:"siteId"`
	ProbeDeviceID       *string    `json:"probeDeviceId" doc:"The agent that polls; null: an online agent of the site."`
	Name                string     `json:"name"`
	IPAddress           string     `json:"ipAddress"`
	Port                int        `json:"port"`
	Version             string     `json:"version" enum:"v1,v2c,v3"`
	HasCredentials      bool       `json:"hasCredentials"`
	Username            *string    `json:"username" doc:"v3: the user."`
	AuthProtocol        *string    `json:"authProtocol" doc:"v3: MD5, SHA or SHA-256; null without authentication."`
	PrivProtocol        *string    `json:"privProtocol" doc:"v3: DES, AES or AES-256; null without privacy."`
	TemplateID          string     `json:"templateId"`
	IntervalSeconds     int        `json:"intervalSeconds"`
	Enabled             bool       `json:"enabled"`
	Status              string     `json:"status" enum:"unknown,online,offline"`
	ConsecutiveFailures int        `json:"consecutiveFailures"`
	LastPollAt          *time.Time `json:"lastPollAt"`
	LastSuccessAt       *time.Time `json:"lastSuccessAt"`
	LastError           *string    `json:"lastError"`
	NextPollAt          time.Time  `json:"nextPollAt"`
	CreatedBy           *string    `json:"createdBy"`
	CreatedAt           time.Time  `json:"createdAt"`
	UpdatedAt           time.Time  `json:"updatedAt"`
}

// SNMPCredentials are how a device is asked: the community (v1, v2c) or the v3 user with its
// protocols and passwords. They are stored encrypted and never returned.
type SNMPCredentials struct {
	Community    string `json:"community,omitempty" maxLength:"255" doc:"v1 and v2c."`
	Username     string `json:"username,omitempty" maxLength:"255" doc:"v3."`
	AuthProtocol string `json:"authProtocol,omitempty" enum:"MD5,SHA,SHA-256" doc:"v3: absent for noAuthNoPriv."`
	AuthPassword string `json:"authPassword,omitempty" maxLength:"255" doc:"v3 with authProtocol: at least 8 characters."`
	PrivProtocol string `json:"privProtocol,omitempty" enum:"DES,AES,AES-256" doc:"v3 with authProtocol: absent for authNoPriv."`
	PrivPassword string `json:"privPassword,omitempty" maxLength:"255" doc:"v3 with privProtocol: at least 8 characters."`
}

// SNMPDeviceInput creates an SNMP device.
type SNMPDeviceInput struct {
	OrgID           string          `json:"orgId,omitempty" format:"uuid" doc:"The organization; an organization caller's own when omitted."`
	SiteID          string          `json:"siteId" format:"uuid" doc:"The site whose online agents poll the device."`
	ProbeDeviceID   string          `json:"probeDeviceId,omitempty" format:"uuid" doc:"One agent of the site to poll through, instead of any online one."`
	Name            string          `json:"name" minLength:"1" maxLength:"200"`
	IPAddress       string          `json:"ipAddress" maxLength:"64" doc:"An IPv4 or IPv6 address."`
	Port            int             `json:"port,omitempty" minimum:"1" maximum:"65535" doc:"Default 161 when omitted."`
	Version         string          `json:"version" enum:"v1,v2c,v3"`
	Credentials     SNMPCredentials `json:"credentials"`
	TemplateID      string          `json:"templateId" format:"uuid" doc:"A built-in template or a template of the organization."`
	IntervalSeconds int             `json:"intervalSeconds,omitempty" minimum:"30" maximum:"86400" doc:"Default 300 when omitted."`
	Enabled         *bool           `json:"enabled,omitempty" doc:"Default true."`
}

// DeviceInput is SNMPDeviceInput, by the name other domains create devices with (CreateIn).
type DeviceInput = SNMPDeviceInput

// SNMPDeviceUpdate changes a device (PATCH): absent fields stay. Credentials replace the stored
// ones as a whole; changing version needs credentials that fit it.
type SNMPDeviceUpdate struct {
	SiteID          *string          `json:"siteId,omitempty" format:"uuid"`
	ProbeDeviceID   *string          `json:"probeDeviceId,omitempty" doc:"An agent of the site; empty string: any online agent of the site."`
	Name            *string          `json:"name,omitempty" minLength:"1" maxLength:"200"`
	IPAddress       *string          `json:"ipAddress,omitempty" maxLength:"64"`
	Port            *int             `json:"port,omitempty" minimum:"1" maximum:"65535"`
	Version         *string          `json:"version,omitempty" enum:"v1,v2c,v3"`
	Credentials     *SNMPCredentials `json:"credentials,omitempty"`
	TemplateID      *string          `json:"templateId,omitempty" format:"uuid"`
	IntervalSeconds *int             `json:"intervalSeconds,omitempty" minimum:"30" maximum:"86400"`
	Enabled         *bool            `json:"enabled,omitempty"`
}

// checker collects validation failures.
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

var (
	authProtocols = []string{"MD5", "SHA", "SHA-256"}
	privProtocols = []string{"DES", "AES", "AES-256"}
)

func oneOf(v string, allowed []string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

// checkAddress validates an IP address and returns its canonical form.
func checkAddress(c *checker, field, s string) string {
	ip := net.ParseIP(strings.TrimSpace(s))
	if ip == nil {
		c.fail(field, "an IPv4 or IPv6 address, such as 192.0.2.10")
		return s
	}
	if ip.IsUnspecified() || ip.IsMulticast() {
		c.fail(field, "not an unspecified or multicast address")
	}
	return ip.String()
}

// checkCredentials validates credentials for version.
func checkCredentials(c *checker, version string, cr *SNMPCredentials) {
	v3Fields := cr.Username != "" || cr.AuthProtocol != "" || cr.AuthPassword != "" || cr.PrivProtocol != "" || cr.PrivPassword != ""
	switch version {
	case agentproto.SNMPv1, agentproto.SNMPv2c:
		if cr.Community == "" {
			c.fail("credentials.community", "%s needs a community", version)
		}
		if v3Fields {
			c.fail("credentials", "%s takes a community only; username, protocols and passwords are for v3", version)
		}
	case agentproto.SNMPv3:
		if cr.Community != "" {
			c.fail("credentials.community", "v3 takes a user, not a community")
		}
		if strings.TrimSpace(cr.Username) == "" || len(cr.Username) > 32 {
			c.fail("credentials.username", "v3 needs a username of 1 to 32 characters")
		}
		if cr.AuthProtocol == "" {
			if cr.AuthPassword != "" || cr.PrivProtocol != "" || cr.PrivPassword != "" {
				c.fail("credentials.authProtocol", "a password or privacy needs an authentication protocol (MD5, SHA or SHA-256)")
			}
		} else {
			if !oneOf(cr.AuthProtocol, authProtocols) {
				c.fail("credentials.authProtocol", "MD5, SHA or SHA-256")
			}
			if len(cr.AuthPassword) < 8 {
				c.fail("credentials.authPassword", "at least 8 characters")
			}
		}
		if cr.PrivProtocol == "" {
			if cr.PrivPassword != "" {
				c.fail("credentials.privProtocol", "a privacy password needs a privacy protocol (DES, AES or AES-256)")
			}
		} else {
			if !oneOf(cr.PrivProtocol, privProtocols) {
				c.fail("credentials.privProtocol", "DES, AES or AES-256")
			}
			if len(cr.PrivPassword) < 8 {
				c.fail("credentials.privPassword", "at least 8 characters")
			}
		}
	default:
		c.fail("version", "v1, v2c or v3")
	}
}

// validOID reports whether s is a numeric dotted OID (a leading dot allowed): at least two
// arcs, the first 0, 1 or 2, each a 32-bit number, at most 128 arcs. It returns the OID
// without the leading dot, or why it is not one.
func validOID(s string) (string, string) {
	oid := strings.TrimPrefix(strings.TrimSpace(s), ".")
	if oid == "" {
		return oid, "empty"
	}
	arcs := strings.Split(oid, ".")
	if len(arcs) < 2 || len(arcs) > 128 {
		return oid, "an OID has 2 to 128 numeric arcs, such as 1.3.6.1.2.1.1.3.0"
	}
	for i, a := range arcs {
		n, err := strconv.ParseUint(a, 10, 32)
		if err != nil || (len(a) > 1 && a[0] == '0') {
			return oid, fmt.Sprintf("arc %d (%q) is not a number: OIDs are numeric dotted, such as 1.3.6.1.2.1.1.3.0", i+1, a)
		}
		if i == 0 && n > 2 {
			return oid, "the first arc is 0, 1 or 2"
		}
	}
	return oid, ""
}

// Backoff is how long after its failures-th failure in a row a device is polled again: the
// interval doubled per failure (2, 4, 8, ... times), at most an hour, never less than the
// interval.
func Backoff(interval time.Duration, failures int) time.Duration {
	limit := max(interval, MaxBackoff)
	d := interval
	for i := 0; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
