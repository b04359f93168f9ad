// Package pam is privileged access management: elevation rules, signer groups, the
// organization's default verdict, and the elevation requests that agents report when a local
// user asks to run a command as root (gale-agent elevate). Rules decide a request at once
// (auto_approve, auto_deny, ignore) or leave it pending for a technician (require_approval);
// an approval is active until it expires or is revoked.
package pam

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"gale/internal/platform/apperr"
)

// Verdicts of a rule and of the organization's default.
const (
	VerdictAutoApprove     = "auto_approve"
	VerdictAutoDeny        = "auto_deny"
	VerdictRequireApproval = "require_approval"
	VerdictIgnore          = "ignore"
)

// Request statuses. Ignored requests are recorded (for the audit trail and previews) but
// never pending; expired covers both an approval past its end and a pending request no
// technician answered within PendingTTL.
const (
	StatusPending  = "pending"
	StatusApproved = "approved"
	StatusDenied   = "denied"
	StatusIgnored  = "ignored"
	StatusRevoked  = "revoked"
	StatusExpired  = "expired"
)

// How a request was decided.
const (
	ViaRule       = "rule"
	ViaDefault    = "default"
	ViaTechnician = "technician"
	ViaTimeout    = "timeout"
)

// Error codes of the PAM routes.
const (
	CodeNotPending        = "PAM_REQUEST_NOT_PENDING"
	CodeNotActive         = "PAM_REQUEST_NOT_ACTIVE"
	CodeSelfApproval      = "PAM_SELF_APPROVAL"
	CodeSignerGroupInUse  = "PAM_SIGNER_GROUP_IN_USE"
	EventRequested        = "pam.elevation_requested"
	EventDecided          = "pam.elevation_decided"
	EventRevoked          = "pam.elevation_revoked"
	EventExpired          = "pam.elevation_expired"
	defaultPriority       = 100
	defaultApproval       = 60
	maxApprovalMinutes    = 10080
	maxPriority           = 100000
	maxBulkRules          = 100
	maxGroupEntries       = 100
	previewWindow         = 30 * 24 * time.Hour
	previewScan           = 1000
	previewMax            = 100
	maxShortField         = 200
	maxLongField          = 2048
	maxReason             = 1000
	PendingTTL            = 10 * time.Minute
	ExpireEvery           = 15 * time.Second
	defaultDefaultVerdict = VerdictRequireApproval
)

var verdicts = []string{VerdictAutoApprove, VerdictAutoDeny, VerdictRequireApproval, VerdictIgnore}

// PAMTimeWindow limits a rule to a daily time range, on some weekdays, in a time zone.
type PAMTimeWindow struct {
	Start    string `json:"start" doc:"HH:MM (24-hour) the window opens." example:"08:00"`
	End      string `json:"end" doc:"HH:MM the window closes (exclusive); before start: the window spans midnight." example:"18:00"`
	Days     []int  `json:"days,omitempty" maxItems:"7" doc:"Weekdays (0 = Sunday ... 6) on which the window opens; absent or empty: every day."`
	Timezone string `json:"timezone,omitempty" maxLength:"64" doc:"IANA time zone of start and end; default UTC."`
}

// PAMRule decides elevation requests of an organization's devices.
type PAMRule struct {
	ID                    string         `json:"id" format:"uuid"`
	PartnerID             string         `json:"partnerId" format:"uuid"`
	OrgID                 string         `json:"orgId" format:"uuid"`
	SiteID                *string        `json:"siteId" doc:"Only requests of devices of this site; null: every site."`
	Name                  string         `json:"name"`
	Priority              int            `json:"priority" doc:"Lower first; ties by createdAt, then id."`
	Verdict               string         `json:"verdict" enum:"auto_approve,auto_deny,require_approval,ignore"`
	ApprovalMinutes       int            `json:"approvalMinutes" doc:"How long an approval lasts: auto_approve's, and a technician's that names no durationMinutes."`
	Enabled               bool           `json:"enabled"`
	MatchSigner           *string        `json:"matchSigner"`
	MatchSignerThumbprint *string        `json:"matchSignerThumbprint"`
	MatchSignerGroupID    *string        `json:"matchSignerGroupId"`
	MatchHash             *string        `json:"matchHash"`
	MatchPathGlob         *string        `json:"matchPathGlob"`
	MatchParentImage      *string        `json:"matchParentImage"`
	MatchCommandLine      *string        `json:"matchCommandLine"`
	MatchUser             *string        `json:"matchUser"`
	MatchAdGroup          *string        `json:"matchAdGroup"`
	TimeWindow            *PAMTimeWindow `json:"timeWindow"`
	CreatedBy             *string        `json:"createdBy"`
	CreatedAt             time.Time      `json:"createdAt"`
	UpdatedAt             time.Time      `json:"updatedAt"`
}

const matchDoc = "Match fields: at least one is required. Text matches ignore case; globs take * (any run of characters, / included) and ? (one character)."

// PAMRuleInput creates a rule (and is the draft of a preview).
type PAMRuleInput struct {
	OrgID                 string         `json:"orgId,omitempty" format:"uuid" doc:"Required unless the caller is of one organization."`
	SiteID                string         `json:"siteId,omitempty" format:"uuid"`
	Name                  string         `json:"name,omitempty" maxLength:"200"`
	Priority              *int           `json:"priority,omitempty" doc:"0 to 100000; default 100."`
	Verdict               string         `json:"verdict,omitempty" doc:"auto_approve, auto_deny, require_approval (default) or ignore."`
	ApprovalMinutes       *int           `json:"approvalMinutes,omitempty" doc:"1 to 10080; default 60."`
	Enabled               *bool          `json:"enabled,omitempty" doc:"Default true."`
	MatchSigner           *string        `json:"matchSigner,omitempty" maxLength:"200" doc:"Code-signer name (glob); not with matchSignerGroupId."`
	MatchSignerThumbprint *string        `json:"matchSignerThumbprint,omitempty" doc:"Signer certificate SHA-256: 64 hex characters, stored lower-case; not with matchSignerGroupId."`
	MatchSignerGroupID    *string        `json:"matchSignerGroupId,omitempty" doc:"A signer group of the organization; not with matchSigner or matchSignerThumbprint."`
	MatchHash             *string        `json:"matchHash,omitempty" doc:"File SHA-256: 64 hex characters."`
	MatchPathGlob         *string        `json:"matchPathGlob,omitempty" maxLength:"2048" doc:"Executable path glob."`
	MatchParentImage      *string        `json:"matchParentImage,omitempty" maxLength:"2048" doc:"Parent process image path (glob)."`
	MatchCommandLine      *string        `json:"matchCommandLine,omitempty" maxLength:"2048" doc:"Command-line substring, or a glob of the whole line when it holds * or ?."`
	MatchUser             *string        `json:"matchUser,omitempty" maxLength:"200" doc:"Subject user name (glob)."`
	MatchAdGroup          *string        `json:"matchAdGroup,omitempty" maxLength:"200" doc:"A directory (on Linux: Unix) group of the subject."`
	TimeWindow            *PAMTimeWindow `json:"timeWindow,omitempty"`
}

// PAMRuleUpdate changes the fields sent (PATCH). Like a creation it must carry at least one
// match field with a value; an empty string clears a field (siteId, a match field).
type PAMRuleUpdate struct {
	SiteID                *string        `json:"siteId,omitempty" doc:"Empty string: every site."`
	Name                  *string        `json:"name,omitempty" maxLength:"200"`
	Priority              *int           `json:"priority,omitempty"`
	Verdict               *string        `json:"verdict,omitempty"`
	ApprovalMinutes       *int           `json:"approvalMinutes,omitempty"`
	Enabled               *bool          `json:"enabled,omitempty"`
	MatchSigner           *string        `json:"matchSigner,omitempty" maxLength:"200"`
	MatchSignerThumbprint *string        `json:"matchSignerThumbprint,omitempty"`
	MatchSignerGroupID    *string        `json:"matchSignerGroupId,omitempty" doc:"Empty string clears it."`
	MatchHash             *string        `json:"matchHash,omitempty"`
	MatchPathGlob         *string        `json:"matchPathGlob,omitempty" maxLength:"2048"`
	MatchParentImage      *string        `json:"matchParentImage,omitempty" maxLength:"2048"`
	MatchCommandLine      *string        `json:"matchCommandLine,omitempty" maxLength:"2048"`
	MatchUser             *string        `json:"matchUser,omitempty" maxLength:"200"`
	MatchAdGroup          *string        `json:"matchAdGroup,omitempty" maxLength:"200"`
	TimeWindow            *PAMTimeWindow `json:"timeWindow,omitempty" doc:"Replaces the window; one with empty start and end removes it."`
}

// PAMRuleBulkItem is one rule of a bulk update: its ID and the fields to change.
type PAMRuleBulkItem struct {
	ID string `json:"id" format:"uuid"`
	PAMRuleUpdate
}

// PAMSignerGroup is a reusable list of code signers (names and certificate thumbprints).
type PAMSignerGroup struct {
	ID          string    `json:"id" format:"uuid"`
	PartnerID   string    `json:"partnerId" format:"uuid"`
	OrgID       string    `json:"orgId" format:"uuid"`
	Name        string    `json:"name"`
	Signers     []string  `json:"signers" doc:"Signer names (globs, any case)."`
	Thumbprints []string  `json:"thumbprints" doc:"Certificate SHA-256 thumbprints, lower-case."`
	RuleCount   int       `json:"ruleCount" doc:"Rules that reference the group; a group in use cannot be deleted."`
	CreatedBy   *string   `json:"createdBy"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// PAMSignerGroupInput creates a signer group.
type PAMSignerGroupInput struct {
	OrgID       string   `json:"orgId,omitempty" format:"uuid" doc:"Required unless the caller is of one organization."`
	Name        string   `json:"name" minLength:"1" maxLength:"200"`
	Signers     []string `json:"signers,omitempty" maxItems:"100"`
	Thumbprints []string `json:"thumbprints,omitempty" maxItems:"100" doc:"64 hex characters each, stored lower-case."`
}

// PAMSignerGroupUpdate changes the fields sent; lists are replaced whole.
type PAMSignerGroupUpdate struct {
	Name        *string   `json:"name,omitempty" minLength:"1" maxLength:"200"`
	Signers     *[]string `json:"signers,omitempty" maxItems:"100"`
	Thumbprints *[]string `json:"thumbprints,omitempty" maxItems:"100"`
}

// PAMConfig is an organization's PAM settings.
type PAMConfig struct {
	OrgID          string     `json:"orgId" format:"uuid"`
	DefaultVerdict string     `json:"defaultVerdict" enum:"auto_approve,auto_deny,require_approval,ignore" doc:"The verdict of a request no rule matches; require_approval until set."`
	UpdatedAt      *time.Time `json:"updatedAt" doc:"null while the organization has the defaults."`
}

// PAMElevationRequest is a request to run a command as root on a device.
type PAMElevationRequest struct {
	ID               string     `json:"id" format:"uuid"`
	PartnerID        string     `json:"partnerId" format:"uuid"`
	OrgID            string     `json:"orgId" format:"uuid"`
	SiteID           *string    `json:"siteId"`
	DeviceID         string     `json:"deviceId" format:"uuid"`
	User             string     `json:"user" doc:"The requesting user's name on the device (from the socket's peer credentials)."`
	UID              int        `json:"uid"`
	Groups           []string   `json:"groups"`
	Path             string     `json:"path" doc:"The executable, resolved by the agent."`
	SHA256           string     `json:"sha256"`
	Signer           string     `json:"signer"`
	SignerThumbprint string     `json:"signerThumbprint"`
	ParentImage      string     `json:"parentImage"`
	CommandLine      string     `json:"commandLine"`
	Grant            bool       `json:"grant" doc:"A time-limited sudoers entry was asked for, rather than one run."`
	Status           string     `json:"status" enum:"pending,approved,denied,ignored,revoked,expired"`
	Active           bool       `json:"active" doc:"Approved and not expired."`
	DecidedVia       string     `json:"decidedVia" enum:"rule,default,technician,timeout" doc:"rule or default (the organization's verdict) for automatic decisions; technician; timeout when nobody answered."`
	RuleID           *string    `json:"ruleId" doc:"The rule that matched; null when none did."`
	DecidedBy        *string    `json:"decidedBy"`
	DecidedAt        *time.Time `json:"decidedAt"`
	Reason           string     `json:"reason"`
	DurationMinutes  int        `json:"durationMinutes" doc:"How long an approval lasts."`
	ExpiresAt        *time.Time `json:"expiresAt"`
	RequestedAt      time.Time  `json:"requestedAt"`
}

// PAMRespondInput approves or denies a pending request.
type PAMRespondInput struct {
	Decision        string  `json:"decision" enum:"approve,deny"`
	Reason          *string `json:"reason,omitempty" maxLength:"1000"`
	DurationMinutes *int    `json:"durationMinutes,omitempty" minimum:"1" maximum:"10080" doc:"approve: how long the elevation lasts; default the rule's approvalMinutes (60 without a rule)."`
}

// PAMPreview lists the recent requests a draft rule would match.
type PAMPreview struct {
	Scanned  int                   `json:"scanned" doc:"Requests of the last 30 days looked at (at most 1000, newest first)."`
	Matched  int                   `json:"matched" doc:"How many of them the draft matches."`
	Requests []PAMElevationRequest `json:"requests" doc:"The matched ones, newest first, at most 100."`
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

var hex64 = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// ruleSpec is a rule's settable fields, empty strings for unset ones.
type ruleSpec struct {
	SiteID, Name, Verdict               string
	Priority, ApprovalMinutes           int
	Enabled                             bool
	Signer, Thumbprint, GroupID, Hash   string
	PathGlob, Parent, CmdLine, User, AD string
	Window                              *PAMTimeWindow
}

func (sp *ruleSpec) hasMatch() bool {
	return sp.Signer != "" || sp.Thumbprint != "" || sp.GroupID != "" || sp.Hash != "" || sp.PathGlob != "" || sp.Parent != "" ||
		sp.CmdLine != "" || sp.User != "" || sp.AD != ""
}

// validate checks and normalizes the spec (prefix names fields of a bulk item).
func (sp *ruleSpec) validate(c *checker, prefix string) {
	f := func(n string) string { return prefix + n }
	if !sp.hasMatch() {
		c.fail(f("matchSigner"), "at least one match field (matchSigner, matchSignerThumbprint, matchSignerGroupId, matchHash, matchPathGlob, "+
			"matchParentImage, matchCommandLine, matchUser, matchAdGroup) is required")
	}
	if sp.GroupID != "" && (sp.Signer != "" || sp.Thumbprint != "") {
		c.fail(f("matchSignerGroupId"), "matchSignerGroupId cannot be combined with matchSigner or matchSignerThumbprint")
	}
	if sp.Thumbprint != "" {
		if !hex64.MatchString(sp.Thumbprint) {
			c.fail(f("matchSignerThumbprint"), "a SHA-256 thumbprint is exactly 64 hexadecimal characters")
		}
		sp.Thumbprint = strings.ToLower(sp.Thumbprint)
	}
	if sp.Hash != "" {
		if !hex64.MatchString(sp.Hash) {
			c.fail(f("matchHash"), "a SHA-256 hash is exactly 64 hexadecimal characters")
		}
		sp.Hash = strings.ToLower(sp.Hash)
	}
	if sp.GroupID != "" && !validUUID(sp.GroupID) {
		c.fail(f("matchSignerGroupId"), "not a signer group ID")
	}
	if sp.SiteID != "" && !validUUID(sp.SiteID) {
		c.fail(f("siteId"), "not a site ID")
	}
	for _, x := range []struct {
		name, v string
		max     int
	}{{"name", sp.Name, maxShortField}, {"matchSigner", sp.Signer, maxShortField}, {"matchUser", sp.User, maxShortField},
		{"matchAdGroup", sp.AD, maxShortField}, {"matchPathGlob", sp.PathGlob, maxLongField}, {"matchParentImage", sp.Parent, maxLongField},
		{"matchCommandLine", sp.CmdLine, maxLongField}} {
		if len(x.v) > x.max {
			c.fail(f(x.name), "at most %d characters", x.max)
		}
	}
	if !contains(verdicts, sp.Verdict) {
		c.fail(f("verdict"), "verdict must be auto_approve, auto_deny, require_approval or ignore")
	}
	if sp.Priority < 0 || sp.Priority > maxPriority {
		c.fail(f("priority"), "priority must be 0 to %d", maxPriority)
	}
	if sp.ApprovalMinutes < 1 || sp.ApprovalMinutes > maxApprovalMinutes {
		c.fail(f("approvalMinutes"), "approvalMinutes must be 1 to %d", maxApprovalMinutes)
	}
	if w := sp.Window; w != nil {
		if w.Start == "" && w.End == "" {
			sp.Window = nil
			return
		}
		if _, ok := parseClock(w.Start); !ok {
			c.fail(f("timeWindow.start"), "HH:MM, 00:00 to 23:59")
		}
		if _, ok := parseClock(w.End); !ok {
			c.fail(f("timeWindow.end"), "HH:MM, 00:00 to 23:59")
		}
		if w.Start == w.End && w.Start != "" {
			c.fail(f("timeWindow.end"), "the window is empty: end equals start")
		}
		seen := map[int]bool{}
		for _, d := range w.Days {
			if d < 0 || d > 6 || seen[d] {
				c.fail(f("timeWindow.days"), "distinct weekdays from 0 (Sunday) to 6")
				break
			}
			seen[d] = true
		}
		if w.Timezone != "" {
			if _, err := time.LoadLocation(w.Timezone); err != nil {
				c.fail(f("timeWindow.timezone"), "not an IANA time zone")
			}
		}
	}
}

func contains(l []string, v string) bool {
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
				return false
			}
		}
	}
	return true
}

// parseClock reads HH:MM into minutes of the day.
func parseClock(s string) (int, bool) {
	if len(s) != 5 || s[2] != ':' {
		return 0, false
	}
	h, m := int(s[0]-'0')*10+int(s[1]-'0'), int(s[3]-'0')*10+int(s[4]-'0')
	for _, b := range []byte{s[0], s[1], s[3], s[4]} {
		if b < '0' || b > '9' {
			return 0, false
		}
	}
	if h > 23 || m > 59 {
		return 0, false
	}
	return h*60 + m, true
}
