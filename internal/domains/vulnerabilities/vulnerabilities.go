// Package vulnerabilities is the fleet's fix-first queue of CVEs: advisories (from the
// Debian changelogs of pending security upgrades, read once per package version by one
// agent, and from OSV or Debian Security Tracker JSON an operator imports) correlated with
// the packages installed on devices by Debian's (or RPM's) version ordering into findings,
// which move open → accepted | mitigated → open, and become patched when the installed
// version reaches the fixed one.
package vulnerabilities

import (
	"strings"
	"time"

	"gale/internal/domains/patches"
)

// Finding statuses.
const (
	StatusOpen      = "open"
	StatusAccepted  = "accepted"
	StatusMitigated = "mitigated"
	StatusPatched   = "patched"
)

// Severities, and their rank (higher is worse).
const (
	SeverityCritical = "critical"
	SeverityHigh     = "high"
	SeverityMedium   = "medium"
	SeverityLow      = "low"
	SeverityUnknown  = "unknown"
)

var severityRank = map[string]int{SeverityCritical: 4, SeverityHigh: 3, SeverityMedium: 2, SeverityLow: 1, SeverityUnknown: 0}

// Advisory sources.
const (
	SourceChangelog = "debian_changelog"
	SourceOSV       = "osv"
	SourceTracker   = "debian_tracker"
)

// Error codes.
const (
	CodeNoPatch            = "NO_PATCH_AVAILABLE"
	CodeTicketsUnavailable = "TICKETS_UNAVAILABLE"
	CodeStatusConflict     = "FINDING_STATUS_CONFLICT"
)

// Limits.
const (
	MaxBulk        = 200
	MaxSelectors   = 200
	maxNote        = 2000
	expiringWithin = 7 * 24 * time.Hour
	// deviceChunk is how many devices one correlation transaction takes.
	deviceChunk = 200
)

// urgencySeverity maps a Debian urgency to a severity, until an import says more.
func urgencySeverity(u string) string {
	switch strings.ToLower(u) {
	case "emergency", "critical":
		return SeverityCritical
	case "high":
		return SeverityHigh
	case "medium":
		return SeverityMedium
	case "low", "unimportant":
		return SeverityLow
	}
	return SeverityUnknown
}

// cvssSeverity is the CVSS v3 qualitative rating of a score.
func cvssSeverity(score float64) string {
	switch {
	case score >= 9:
		return SeverityCritical
	case score >= 7:
		return SeverityHigh
	case score >= 4:
		return SeverityMedium
	case score > 0:
		return SeverityLow
	}
	return SeverityUnknown
}

// GroupKey is the remediation unit of a package: the kernel's packages are one unit of the
// operating system, every other package its own.
func GroupKey(pkg string) string {
	if strings.HasPrefix(pkg, "linux-image-") || strings.HasPrefix(pkg, "linux-modules-") || pkg == "kernel" || pkg == "kernel-core" {
		return "os:linux-kernel"
	}
	return "pkg:" + pkg
}

// groupName is the display name of a group key.
func groupName(key string) string {
	if key == "os:linux-kernel" {
		return "Linux kernel"
	}
	return strings.TrimPrefix(key, "pkg:")
}

// VulnFinding is a CVE of a package installed on a device.
type VulnFinding struct {
	ID               string     `json:"id" format:"uuid"`
	PartnerID        string     `json:"partnerId" format:"uuid"`
	OrgID            string     `json:"orgId" format:"uuid"`
	DeviceID         string     `json:"deviceId" format:"uuid"`
	CVEID            string     `json:"cveId"`
	Package          string     `json:"package"`
	GroupKey         string     `json:"groupKey" doc:"The remediation unit: pkg:<package>, or os:linux-kernel for the kernel's packages."`
	InstalledVersion string     `json:"installedVersion"`
	FixedVersion     string     `json:"fixedVersion" doc:"The first version without the CVE; empty when no fix is known."`
	Severity         string     `json:"severity" enum:"critical,high,medium,low,unknown"`
	CVSSScore        *float64   `json:"cvssScore"`
	KnownExploited   bool       `json:"knownExploited"`
	EPSSScore        *float64   `json:"epssScore"`
	Status           string     `json:"status" enum:"open,accepted,mitigated,patched"`
	PatchReady       bool       `json:"patchReady" doc:"A pending patch of the device reaches fixedVersion."`
	PatchID          *string    `json:"patchId" doc:"That patch."`
	FirstSeen        time.Time  `json:"firstSeen"`
	LastSeen         time.Time  `json:"lastSeen"`
	AcceptedUntil    *time.Time `json:"acceptedUntil" doc:"accepted: when the acceptance ends and the finding reopens by itself; null: no end."`
	Note             string     `json:"note"`
	DecidedBy        *string    `json:"decidedBy" doc:"Who accepted, mitigated or reopened it last."`
	DecidedAt        *time.Time `json:"decidedAt"`
	PatchedAt        *time.Time `json:"patchedAt"`
}

// VulnCVE is a row of the by-CVE view: a CVE with its open findings in scope.
type VulnCVE struct {
	CVEID           string    `json:"cveId"`
	Severity        string    `json:"severity" enum:"critical,high,medium,low,unknown"`
	CVSSScore       *float64  `json:"cvssScore"`
	KnownExploited  bool      `json:"knownExploited"`
	EPSSScore       *float64  `json:"epssScore"`
	Summary         string    `json:"summary"`
	AffectedDevices int       `json:"affectedDevices"`
	OpenFindings    int       `json:"openFindings"`
	PatchReady      int       `json:"patchReady" doc:"Open findings with a pending patch that fixes them."`
	Packages        []string  `json:"packages"`
	FirstSeen       time.Time `json:"firstSeen"`
}

// VulnSoftwareGroup is a row of the by-software view: the open findings of one remediation
// unit.
type VulnSoftwareGroup struct {
	GroupKey       string `json:"groupKey"`
	Name           string `json:"name"`
	FixedVersion   string `json:"fixedVersion" doc:"The highest fixed version the group's findings need (Debian or RPM ordering)."`
	Devices        int    `json:"devices"`
	Findings       int    `json:"findings"`
	Critical       int    `json:"critical" doc:"Findings of critical severity."`
	KnownExploited int    `json:"knownExploited" doc:"Findings of known-exploited CVEs."`
	PatchReady     int    `json:"patchReady" doc:"Devices with a pending patch that fixes their findings of the group."`
	RiskScore      int    `json:"riskScore" doc:"Sum over findings of rank² (critical 16, high 9, medium 4, low 1) plus 25 per known-exploited one; the order of the list."`
}

// VulnGroupDevice is a device of a group with its findings there.
type VulnGroupDevice struct {
	DeviceID         string        `json:"deviceId" format:"uuid"`
	OrgID            string        `json:"orgId" format:"uuid"`
	InstalledVersion string        `json:"installedVersion"`
	PatchReady       bool          `json:"patchReady"`
	Findings         []VulnFinding `json:"findings"`
}

// VulnSoftwareDetail is one group with its devices.
type VulnSoftwareDetail struct {
	Group   VulnSoftwareGroup `json:"group"`
	Devices []VulnGroupDevice `json:"devices" doc:"At most 500 devices, by ID."`
}

// VulnStats are the headline counts of the findings in scope.
type VulnStats struct {
	CriticalOpen           int `json:"criticalOpen" doc:"Open findings of critical severity."`
	KnownExploitedExposure int `json:"knownExploitedExposure" doc:"Open findings of known-exploited CVEs."`
	KnownExploitedDevices  int `json:"knownExploitedDevices" doc:"Devices with an open finding of a known-exploited CVE."`
	PatchReady             int `json:"patchReady" doc:"Open findings a pending patch fixes."`
	AcceptedExpiringSoon   int `json:"acceptedExpiringSoon" doc:"Accepted findings whose acceptance ends within 7 days."`
	Open                   int `json:"open"`
	Accepted               int `json:"accepted"`
	Mitigated              int `json:"mitigated"`
	Patched                int `json:"patched"`
	AffectedDevices        int `json:"affectedDevices" doc:"Devices with an open finding."`
}

// VulnAcceptRisk is the body of accept-risk.
type VulnAcceptRisk struct {
	AcceptedUntil *time.Time `json:"acceptedUntil,omitempty" doc:"When the acceptance ends (a future time); the finding then reopens by itself. Absent: no end."`
	Note          string     `json:"note,omitempty" maxLength:"2000" multiline:"true"`
}

// VulnMitigate is the body of mitigate.
type VulnMitigate struct {
	Note string `json:"note,omitempty" maxLength:"2000" multiline:"true" doc:"The mitigation in place."`
}

// VulnBulkAcceptRisk is the body of bulk accept-risk.
type VulnBulkAcceptRisk struct {
	IDs           []string   `json:"ids" minItems:"1" maxItems:"200" doc:"Finding IDs."`
	AcceptedUntil *time.Time `json:"acceptedUntil,omitempty"`
	Note          string     `json:"note,omitempty" maxLength:"2000" multiline:"true"`
}

// VulnBulkMitigate is the body of bulk mitigate.
type VulnBulkMitigate struct {
	IDs  []string `json:"ids" minItems:"1" maxItems:"200" doc:"Finding IDs."`
	Note string   `json:"note,omitempty" maxLength:"2000" multiline:"true"`
}

// VulnBulkSkip is a finding a bulk action left as it was.
type VulnBulkSkip struct {
	ID     string `json:"id"`
	Reason string `json:"reason" doc:"NOT_FOUND (missing or out of scope) or FINDING_STATUS_CONFLICT (not open)."`
}

// VulnBulkResult is the answer of a bulk action.
type VulnBulkResult struct {
	Succeeded []string       `json:"succeeded" doc:"The findings moved."`
	Skipped   []VulnBulkSkip `json:"skipped"`
}

// VulnRemediate is the body of remediate: findings chosen by ID, CVE or group (1 to 200
// selectors in all), optionally only on some devices.
type VulnRemediate struct {
	FindingIDs []string `json:"findingIds,omitempty" maxItems:"200"`
	CVEIDs     []string `json:"cveIds,omitempty" maxItems:"200"`
	GroupKeys  []string `json:"groupKeys,omitempty" maxItems:"200"`
	DeviceIDs  []string `json:"deviceIds,omitempty" maxItems:"500" doc:"Only these devices; absent: every affected device in scope (at most 500)."`
	Approve    bool     `json:"approve,omitempty" doc:"Approve, for each device's organization, the fixing patches still pending a decision (a declined patch stays declined and its devices are skipped)."`
}

// VulnRemediateSkip is a device remediation left out, and why.
type VulnRemediateSkip struct {
	DeviceID string `json:"deviceId"`
	Reason   string `json:"reason"`
}

// VulnRemediation is the answer of remediate: the patch install job.
type VulnRemediation struct {
	Job      patches.PatchJob    `json:"job"`
	PatchIDs []string            `json:"patchIds"`
	Skipped  []VulnRemediateSkip `json:"skipped"`
}

// VulnTicketRequest is the body of POST /vulnerabilities/tickets.
type VulnTicketRequest struct {
	FindingIDs []string `json:"findingIds" minItems:"1" maxItems:"200"`
	Title      string   `json:"title,omitempty" maxLength:"200"`
	Note       string   `json:"note,omitempty" maxLength:"2000" multiline:"true"`
}

// VulnImportResult counts what an advisory import stored.
type VulnImportResult struct {
	Format     string `json:"format" enum:"osv,debian_tracker"`
	Advisories int    `json:"advisories"`
	CVEs       int    `json:"cves"`
	Packages   int    `json:"packages"`
	Devices    int    `json:"devicesCorrelated" doc:"Devices with an imported package, correlated again."`
}
