// Package patches keeps the patches a partner's devices are offered and what became of
// them: scans carried to Linux agents by patch_scan commands, the partner's approvals,
// installs and rollbacks carried by patch_install commands, per-device state with a summary
// per device for compliance, and compliance reports built in the background.
package patches

import (
	"time"

	"gale/internal/domains/devices"
)

// Sources of patches.
const (
	SourceOSVendorA  = "os_vendor_a"
	SourceOSVendorB  = "os_vendor_b"
	SourceLinux      = "linux"
	SourceThirdParty = "third_party"
	SourceCustom     = "custom"
)

// Sources lists every source in the API's order.
var Sources = []string{SourceOSVendorA, SourceOSVendorB, SourceLinux, SourceThirdParty, SourceCustom}

// Severities and categories.
const (
	SeverityCritical  = "critical"
	SeverityImportant = "important"
	SeverityModerate  = "moderate"
	SeverityLow       = "low"
	SeverityUnknown   = "unknown"

	CategorySecurity = "security"
	CategoryBugfix   = "bugfix"
	CategoryFeature  = "feature"
	CategoryOther    = "other"
)

// States of a patch on a device. Missing is for sources that report a required patch that
// is absent; Linux scans report offered updates, which are pending.
const (
	DeviceStatePending   = "pending"
	DeviceStateInstalled = "installed"
	DeviceStateFailed    = "failed"
	DeviceStateSkipped   = "skipped"
	DeviceStateMissing   = "missing"
)

// Approval states. Pending is the absence of a decision (or a deferral that has passed).
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDeclined = "declined"
	ApprovalDeferred = "deferred"
)

// Job kinds and statuses.
const (
	JobScan     = "scan"
	JobInstall  = "install"
	JobRollback = "rollback"

	JobRunning   = "running"
	JobCompleted = "completed"
	JobFailed    = "failed"
)

// States of a job's work on one device.
const (
	JobDeviceWaiting   = "waiting"
	JobDeviceQueued    = "queued"
	JobDeviceCompleted = "completed"
	JobDeviceFailed    = "failed"
	// JobDeviceRunning is shown, never stored: queued work whose command the agent holds.
	JobDeviceRunning = "running"
)

// Report formats and statuses.
const (
	FormatCSV = "csv"
	FormatPDF = "pdf"

	ReportQueued    = "queued"
	ReportRunning   = "running"
	ReportCompleted = "completed"
	ReportFailed    = "failed"
)

// EventJobCompleted is recorded when a job's last device finishes.
const EventJobCompleted = "patch.job_completed"

// Limits.
const (
	MaxScanDevices    = 10000
	MaxInstallDevices = 500
	MaxBulkApprove    = 500
	// bulkChunk is how many devices one SendBulkIn call takes (its limit).
	bulkChunk = 500
	// rowsPerStatement and maxParams bound the rows and placeholders of one multi-row
	// statement.
	rowsPerStatement = 500
	maxParams        = 400
)

// Patch is the API view of a patch.
type Patch struct {
	ID             string            `json:"id" format:"uuid"`
	PartnerID      string            `json:"partnerId" format:"uuid"`
	Source         string            `json:"source" enum:"os_vendor_a,os_vendor_b,linux,third_party,custom"`
	ExternalID     string            `json:"externalId" doc:"The source's identifier; Linux: <manager>:<name>:<arch>:<version>."`
	PackageID      string            `json:"packageId" doc:"The package the patch updates (Linux: the package name)."`
	Title          string            `json:"title"`
	Version        string            `json:"version" doc:"The version the patch installs."`
	Vendor         *string           `json:"vendor,omitempty" doc:"Third-party patches."`
	CVEIDs         []string          `json:"cveIds,omitempty" doc:"Third-party patches: CVE identifiers from enrichment."`
	Severity       string            `json:"severity" enum:"critical,important,moderate,low,unknown"`
	Category       string            `json:"category" enum:"security,bugfix,feature,other"`
	RequiresReboot bool              `json:"requiresReboot"`
	Description    string            `json:"description"`
	PatchApproval  string            `json:"approvalStatus" enum:"pending,approved,declined,deferred" doc:"The partner-wide decision (with orgId in a list: the one that applies to that organization)."`
	DeviceCounts   *PatchStateCounts `json:"deviceCounts,omitempty" doc:"GET /patches/{id}: devices in scope by state."`
	CreatedAt      time.Time         `json:"createdAt"`
	UpdatedAt      time.Time         `json:"updatedAt"`
}

// PatchStateCounts counts devices by the state of a patch on them.
type PatchStateCounts struct {
	Pending   int `json:"pending"`
	Installed int `json:"installed"`
	Failed    int `json:"failed"`
	Skipped   int `json:"skipped"`
	Missing   int `json:"missing"`
}

// PatchSourceCount is a source with the number of patches it offered the partner.
type PatchSourceCount struct {
	Source string `json:"source" enum:"os_vendor_a,os_vendor_b,linux,third_party,custom"`
	Count  int    `json:"count"`
}

// PatchApproval is a decision on a patch.
type PatchApproval struct {
	ID            string     `json:"id" format:"uuid"`
	PatchID       string     `json:"patchId" format:"uuid"`
	PatchTitle    string     `json:"patchTitle"`
	OrgID         *string    `json:"orgId" doc:"null: the partner's decision for all its organizations."`
	Status        string     `json:"status" enum:"approved,declined,deferred"`
	Note          string     `json:"note"`
	DeferredUntil *time.Time `json:"deferredUntil"`
	DecidedBy     *string    `json:"decidedBy"`
	UpdatedAt     time.Time  `json:"updatedAt"`
}

// PatchDecision is the body of approve and decline.
type PatchDecision struct {
	Note  string `json:"note,omitempty" maxLength:"1000" multiline:"true"`
	OrgID string `json:"orgId,omitempty" format:"uuid" doc:"Decide for this organization only; omitted: for every organization of the partner."`
}

// PatchDeferral is the body of defer.
type PatchDeferral struct {
	Until time.Time `json:"until" doc:"A future date-time; the patch is pending again from then."`
	Note  string    `json:"note,omitempty" maxLength:"1000" multiline:"true"`
	OrgID string    `json:"orgId,omitempty" format:"uuid"`
}

// PatchBulkApproval is the body of bulk-approve.
type PatchBulkApproval struct {
	PatchIDs []string `json:"patchIds" minItems:"1" maxItems:"500"`
	Note     string   `json:"note,omitempty" maxLength:"1000" multiline:"true"`
	OrgID    string   `json:"orgId,omitempty" format:"uuid"`
}

// PatchBulkApprovalItem is the outcome for one patch of a bulk approval.
type PatchBulkApprovalItem struct {
	PatchID string  `json:"patchId"`
	Status  string  `json:"status" enum:"approved,error"`
	Code    *string `json:"code,omitempty" doc:"NOT_FOUND or APPROVAL_CONFLICT."`
	Message *string `json:"message,omitempty"`
}

// PatchJobTotals counts a job's devices by state.
type PatchJobTotals struct {
	Devices   int `json:"devices"`
	Waiting   int `json:"waiting"`
	Queued    int `json:"queued" doc:"Devices whose command waits for their agent to take it."`
	Running   int `json:"running" doc:"Devices whose agent took the command and has not answered yet."`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Skipped   int `json:"skipped" doc:"Devices refused when the job started (listed in its start answer)."`
}

// PatchJob is a scan, install or rollback over devices.
type PatchJob struct {
	ID          string         `json:"id" format:"uuid"`
	Kind        string         `json:"kind" enum:"scan,install,rollback"`
	Status      string         `json:"status" enum:"running,completed,failed"`
	PatchID     *string        `json:"patchId,omitempty" doc:"The patch a rollback takes back."`
	OrgID       *string        `json:"orgId"`
	Totals      PatchJobTotals `json:"totals"`
	CreatedBy   *string        `json:"createdBy"`
	CreatedAt   time.Time      `json:"createdAt"`
	CompletedAt *time.Time     `json:"completedAt"`
	// Commands are the commands an InstallIn recorded, for the caller to hand to devices'
	// Dispatch once its transaction has committed.
	Commands []devices.DeviceCommand `json:"-"`
}

// PatchJobDevice is a job's work on one device.
type PatchJobDevice struct {
	DeviceID  string                `json:"deviceId" format:"uuid"`
	OrgID     string                `json:"orgId" format:"uuid"`
	CommandID *string               `json:"commandId"`
	Status    string                `json:"status" enum:"waiting,queued,running,completed,failed" doc:"running: the agent took the command."`
	Packages  []PatchPackageVersion `json:"packages,omitempty"`
	Error     *string               `json:"error"`
	UpdatedAt time.Time             `json:"updatedAt"`
}

// PatchPackageVersion is a package and the version a job installs.
type PatchPackageVersion struct {
	PatchID string `json:"patchId" format:"uuid"`
	Name    string `json:"name"`
	Version string `json:"version"`
	// Installer is set on third-party patches: they install from the catalog's installer, not
	// from the package manager's repositories.
	Installer *PatchInstaller `json:"installer,omitempty"`
}

// PatchInstaller is the catalog installer of a third-party patch.
type PatchInstaller struct {
	URL      string `json:"url"`
	SHA256   string `json:"sha256"`
	FileType string `json:"fileType" enum:"deb,rpm,msi,exe,pkg,dmg"`
}

// PatchJobDetail is a job with its devices.
type PatchJobDetail struct {
	PatchJob
	Devices []PatchJobDevice `json:"devices"`
}

// PatchSkippedDevice is a device a job did not take, and why.
type PatchSkippedDevice struct {
	DeviceID string `json:"deviceId"`
	Code     string `json:"code"`
	Reason   string `json:"reason"`
}

// PatchJobStart is the answer to a request that starts a job.
type PatchJobStart struct {
	PatchJob
	Skipped []PatchSkippedDevice `json:"skipped"`
}

// PatchScanRequest is the body of POST /patches/scan.
type PatchScanRequest struct {
	DeviceIDs []string `json:"deviceIds" minItems:"1" maxItems:"10000"`
	Source    string   `json:"source,omitempty" enum:"os_vendor_a,os_vendor_b,linux,third_party,custom" doc:"linux (default): the agents ask their package managers. third_party: the devices' last reported software against the third-party catalog, on the server (the job is done at once). Others: 400."`
	Refresh   bool     `json:"refresh,omitempty" doc:"Update the package lists first (apt-get update, dnf makecache)."`
}

// PatchRollbackRequest is the body of POST /patches/{id}/rollback.
type PatchRollbackRequest struct {
	DeviceIDs []string `json:"deviceIds" minItems:"1" maxItems:"500"`
}

// InstallOptions tune an install job.
type InstallOptions struct {
	// TimeoutSeconds of each command; 0: the kind's default.
	TimeoutSeconds int
	// IgnoreHold sends the commands whatever maintenance windows say: the caller (a rollout)
	// decided about them already.
	IgnoreHold bool
	// RebootBehavior is what follows a device's successful install: RebootNever (""),
	// RebootIfRequired (when the system says a reboot is pending) or RebootAlways; the reboot
	// is a reboot command with RebootDelaySeconds of notice.
	RebootBehavior string
}

// RebootDelaySeconds is the notice a reboot after patches gives the device's users.
const RebootDelaySeconds = 300

// PatchCompliance is the patch state of the devices in scope.
type PatchCompliance struct {
	CompliancePercent     float64 `json:"compliancePercent" doc:"installed / (installed + pending) * 100; 100 when both are 0."`
	Installed             int     `json:"installed"`
	Pending               int     `json:"pending"`
	Failed                int     `json:"failed"`
	CriticalPending       int     `json:"criticalPending" doc:"Pending patches of severity critical or category security."`
	DevicesNeedingPatches int     `json:"devicesNeedingPatches"`
	DevicesScanned        int     `json:"devicesScanned"`
	DevicesNeverScanned   int     `json:"devicesNeverScanned"`
	RebootRequired        int     `json:"rebootRequired" doc:"Devices whose last scan said a reboot is pending."`
}

// PatchReport is a compliance report.
type PatchReport struct {
	ID          string     `json:"id" format:"uuid"`
	OrgID       *string    `json:"orgId"`
	Format      string     `json:"format" enum:"csv,pdf"`
	Status      string     `json:"status" enum:"queued,running,completed,failed"`
	Progress    int        `json:"progress" doc:"Device rows written so far."`
	SizeBytes   *int64     `json:"sizeBytes"`
	Error       *string    `json:"error"`
	CreatedBy   *string    `json:"createdBy"`
	CreatedAt   time.Time  `json:"createdAt"`
	StartedAt   *time.Time `json:"startedAt"`
	CompletedAt *time.Time `json:"completedAt"`
}

// PatchReportRequest is the body of POST /patches/compliance/report.
type PatchReportRequest struct {
	Format string `json:"format" enum:"csv,pdf"`
	OrgID  string `json:"orgId,omitempty" format:"uuid" doc:"Only this organization's devices; omitted: every device in the caller's scope."`
}
