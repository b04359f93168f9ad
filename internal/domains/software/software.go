// Package software keeps a tenant's software catalog (packages and their installable
// versions: files at an https address or uploaded to blob storage), deploys a version to
// devices (one software_install command per device, held back by maintenance windows when
// asked), and shows what the devices' inventories report as installed, with uninstalls
// carried by software_uninstall commands.
package software

import (
	"slices"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/wire/agentproto"
)

// Operating systems of the catalog.
const (
	OSWindows = agentproto.OSWindows
	OSMacOS   = agentproto.OSMacOS
	OSLinux   = agentproto.OSLinux
)

// Deployment statuses: pending while every device waits (held, or before its maintenance
// window), running once commands went out, then one of the final states.
const (
	DeploymentPending   = "pending"
	DeploymentRunning   = "running"
	DeploymentCompleted = "completed"
	DeploymentFailed    = "failed"
	DeploymentPartial   = "partial"
	DeploymentCancelled = "cancelled"
)

// Statuses of one device of a deployment. waiting: held, no command yet; queued: its command
// waits on the server for the agent; running: the agent has the command; then the final
// states.
const (
	DeviceWaiting   = "waiting"
	DeviceQueued    = "queued"
	DeviceRunning   = "running"
	DeviceInstalled = "installed"
	DeviceFailed    = "failed"
	DeviceSkipped   = "skipped"
	DeviceCancelled = "cancelled"
)

// Schedule modes of a deployment.
const (
	ScheduleNow               = "now"
	ScheduleMaintenanceWindow = "maintenance_window"
)

// EventDeploymentCompleted is recorded once when a deployment reaches its final status
// (completed, partial or failed; a cancelled one too).
const EventDeploymentCompleted = "software.deployment_completed"

// Limits.
const (
	// MaxUploadBytes is the largest file an upload takes.
	MaxUploadBytes = 2 << 30
	// MaxDeploymentDevices bounds the devices one deployment's targets may hold.
	MaxDeploymentDevices = 5000
	// installTimeout is how long an agent may take to download and install a file.
	installTimeout   = 1800
	uninstallTimeout = 900
)

// SoftwareCatalogItem is a package of the catalog.
type SoftwareCatalogItem struct {
	ID            string           `json:"id" format:"uuid"`
	PartnerID     string           `json:"partnerId" format:"uuid"`
	OrgID         *string          `json:"orgId" doc:"The organization the item belongs to; null: every organization of the partner."`
	Name          string           `json:"name"`
	PackageName   string           `json:"packageName" doc:"The package name the installer installs (e.g. the Debian package's)."`
	Vendor        string           `json:"vendor"`
	Description   string           `json:"description"`
	Category      string           `json:"category"`
	SupportedOS   []string         `json:"supportedOs"`
	LatestVersion *SoftwareVersion `json:"latestVersion" doc:"The newest version added; null when it has none."`
	CreatedBy     *string          `json:"createdBy"`
	CreatedAt     time.Time        `json:"createdAt"`
	UpdatedAt     time.Time        `json:"updatedAt"`
}

// SoftwareCatalogInput is the body of a catalog item's creation.
type SoftwareCatalogInput struct {
	OrgID       string   `json:"orgId,omitempty" format:"uuid" doc:"The organization the item belongs to; omitted by a partner caller: partner-wide."`
	PartnerID   string   `json:"partnerId,omitempty" format:"uuid" doc:"System callers: the partner of a partner-wide item."`
	Name        string   `json:"name" minLength:"1" maxLength:"255"`
	PackageName string   `json:"packageName" minLength:"1" maxLength:"255"`
	Vendor      string   `json:"vendor,omitempty" maxLength:"255"`
	Description string   `json:"description,omitempty" maxLength:"4000" multiline:"true"`
	Category    string   `json:"category,omitempty" maxLength:"100"`
	SupportedOS []string `json:"supportedOs" minItems:"1" maxItems:"3" uniqueItems:"true" enum:"windows,macos,linux"`
}

// SoftwareCatalogPatch changes a catalog item; absent fields stay.
type SoftwareCatalogPatch struct {
	Name        *string  `json:"name,omitempty" minLength:"1" maxLength:"255"`
	PackageName *string  `json:"packageName,omitempty" minLength:"1" maxLength:"255"`
	Vendor      *string  `json:"vendor,omitempty" maxLength:"255"`
	Description *string  `json:"description,omitempty" maxLength:"4000" multiline:"true"`
	Category    *string  `json:"category,omitempty" maxLength:"100"`
	SupportedOS []string `json:"supportedOs,omitempty" minItems:"1" maxItems:"3" uniqueItems:"true" enum:"windows,macos,linux"`
}

// SoftwareVersion is an installable version of a catalog item.
type SoftwareVersion struct {
	ID           string    `json:"id" format:"uuid"`
	CatalogID    string    `json:"catalogId" format:"uuid"`
	Version      string    `json:"version"`
	DownloadURL  *string   `json:"downloadUrl" doc:"The https address of the file; null for an uploaded file."`
	Uploaded     bool      `json:"uploaded" doc:"The file was uploaded and is served to agents by the server."`
	SHA256       string    `json:"sha256"`
	SizeBytes    *int64    `json:"sizeBytes"`
	FileType     string    `json:"fileType" enum:"deb,rpm,msi,exe,pkg,dmg"`
	SilentArgs   string    `json:"silentArgs"`
	SupportedOS  []string  `json:"supportedOs"`
	ReleaseNotes string    `json:"releaseNotes"`
	CreatedBy    *string   `json:"createdBy"`
	CreatedAt    time.Time `json:"createdAt"`
}

// SoftwareVersionInput adds a version whose file is at an https address.
type SoftwareVersionInput struct {
	Version      string   `json:"version" minLength:"1" maxLength:"100"`
	DownloadURL  string   `json:"downloadUrl" minLength:"1" maxLength:"2048" doc:"An https address."`
	SHA256       string   `json:"sha256" pattern:"^[0-9a-fA-F]{64}$" doc:"The file's SHA-256 in hex; the agent refuses a file that does not match."`
	SizeBytes    int64    `json:"sizeBytes,omitempty" minimum:"0"`
	FileType     string   `json:"fileType" enum:"deb,rpm,msi,exe,pkg,dmg"`
	SilentArgs   string   `json:"silentArgs,omitempty" maxLength:"1000"`
	SupportedOS  []string `json:"supportedOs,omitempty" maxItems:"3" uniqueItems:"true" enum:"windows,macos,linux" doc:"Default: the system of the file type."`
	ReleaseNotes string   `json:"releaseNotes,omitempty" maxLength:"20000" multiline:"true"`
}

// SoftwareDeployment is a deployment of a version to devices.
type SoftwareDeployment struct {
	ID           string                     `json:"id" format:"uuid"`
	PartnerID    string                     `json:"partnerId" format:"uuid"`
	OrgID        string                     `json:"orgId" format:"uuid"`
	Name         string                     `json:"name"`
	CatalogID    string                     `json:"catalogId" format:"uuid"`
	VersionID    string                     `json:"versionId" format:"uuid"`
	SoftwareName string                     `json:"softwareName"`
	Version      string                     `json:"version"`
	Targets      devices.Targets            `json:"targets"`
	Schedule     SoftwareDeploymentSchedule `json:"schedule"`
	Status       string                     `json:"status" enum:"pending,running,completed,failed,partial,cancelled"`
	Counts       map[string]int             `json:"counts" doc:"Devices per status (waiting, queued, running, installed, failed, skipped, cancelled)."`
	CreatedBy    *string                    `json:"createdBy"`
	CreatedAt    time.Time                  `json:"createdAt"`
	UpdatedAt    time.Time                  `json:"updatedAt"`
	CompletedAt  *time.Time                 `json:"completedAt"`
}

// SoftwareDeploymentSchedule says when the devices get their commands.
type SoftwareDeploymentSchedule struct {
	Mode     string `json:"mode" enum:"now,maintenance_window"`
	WindowID string `json:"windowId,omitempty" format:"uuid" doc:"maintenance_window: the window whose active occurrence releases the devices."`
}

// SoftwareDeploymentInput creates a deployment.
type SoftwareDeploymentInput struct {
	Name      string                      `json:"name,omitempty" maxLength:"255" doc:"Default: the software's name and version."`
	VersionID string                      `json:"versionId" format:"uuid"`
	OrgID     string                      `json:"orgId,omitempty" format:"uuid" doc:"The organization whose devices get the version; an organization caller's own when omitted."`
	Targets   devices.Targets             `json:"targets"`
	Schedule  *SoftwareDeploymentSchedule `json:"schedule,omitempty" doc:"Default: now."`
}

// SoftwareDeploymentResult is one device of a deployment.
type SoftwareDeploymentResult struct {
	ID               string     `json:"id" format:"uuid"`
	DeploymentID     string     `json:"deploymentId" format:"uuid"`
	DeviceID         string     `json:"deviceId" format:"uuid"`
	Status           string     `json:"status" enum:"waiting,queued,running,installed,failed,skipped,cancelled"`
	CommandID        *string    `json:"commandId" doc:"The software_install command (GET /devices/{id}/commands/{commandId})."`
	Reason           *string    `json:"reason" doc:"Why it was skipped, or the agent's error of a failure."`
	InstalledVersion *string    `json:"installedVersion"`
	PreviousVersion  *string    `json:"previousVersion"`
	CreatedAt        time.Time  `json:"createdAt"`
	UpdatedAt        time.Time  `json:"updatedAt"`
	CompletedAt      *time.Time `json:"completedAt" doc:"When its command ended."`
}

// SoftwareInstalledPackage is a package a device's last inventory reported.
type SoftwareInstalledPackage struct {
	SoftwareID   string `json:"softwareId" doc:"Stable across inventories while the package (its source, name and architecture) stays installed."`
	Name         string `json:"name"`
	Version      string `json:"version"`
	Publisher    string `json:"publisher"`
	Architecture string `json:"architecture"`
	InstallDate  string `json:"installDate"`
	SizeBytes    int64  `json:"sizeBytes"`
	Source       string `json:"source"`
	Protected    bool   `json:"protected" doc:"The system needs it: an uninstall is refused."`
}

// protected reports whether name is a package the system needs.
func protected(name string) bool { return slices.Contains(agentproto.ProtectedPackages, name) }
