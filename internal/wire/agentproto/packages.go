package agentproto

import "time"

// Command types of package management: patch scans and installs, software deployment.
const (
	// CommandPatchScan lists the updates the system's package manager offers (payload
	// PatchScan, result PatchScanResult).
	CommandPatchScan = "patch_scan"
	// CommandPatchInstall installs given versions of installed packages (payload PatchInstall,
	// result PatchInstallResult); with Rollback it goes back to an older version.
	CommandPatchInstall = "patch_install"
	// CommandSoftwareInstall downloads a package file, verifies its SHA-256 and installs it
	// (payload SoftwareInstall, result SoftwareInstallResult).
	CommandSoftwareInstall = "software_install"
	// CommandSoftwareUninstall removes an installed package (payload SoftwareUninstall, result
	// SoftwareUninstallResult).
	CommandSoftwareUninstall = "software_uninstall"
)

// Package managers an agent drives.
const (
	ManagerApt = "apt"
	ManagerDnf = "dnf"
)

// Outcomes of one package in an install, rollback or uninstall.
const (
	PackageInstalled = "installed"
	PackageRemoved   = "removed"
	PackageFailed    = "failed"
	// PackageSkipped: nothing to do (the version is already installed, or no longer offered).
	PackageSkipped = "skipped"
)

// PatchScan is the payload of patch_scan.
type PatchScan struct {
	// Refresh updates the package lists first (apt-get update, dnf makecache); without it
	// the scan reads the lists the system already has, and writes nothing.
	Refresh bool `json:"refresh,omitempty"`
}

// PatchScanResult is the Result of a completed patch_scan: what the package manager offers
// for the installed packages. A system without a supported package manager fails the
// command with a clear error instead.
type PatchScanResult struct {
	Manager   string          `json:"manager"`
	ScannedAt time.Time       `json:"scannedAt"`
	Updates   []PackageUpdate `json:"updates"`
	// Installed counts the packages installed, so compliance knows the base.
	Installed int `json:"installed"`
	// RebootRequired is true when the system says a reboot is pending
	// (/var/run/reboot-required on Debian, needs-restarting -r on RPM systems).
	RebootRequired bool `json:"rebootRequired"`
	// RebootPackages are the packages that asked for the reboot, when the system says.
	RebootPackages []string `json:"rebootPackages,omitempty"`
}

// PackageUpdate is one installed package with a newer version available.
type PackageUpdate struct {
	Name             string `json:"name"`
	Architecture     string `json:"architecture,omitempty"`
	InstalledVersion string `json:"installedVersion"`
	AvailableVersion string `json:"availableVersion"`
	// Origin is where the newer version comes from: the archive suite on Debian
	// ("bookworm-security"), the repository on RPM systems ("updates").
	Origin string `json:"origin,omitempty"`
	// Security is true when the newer version comes from a security archive or advisory.
	Security bool   `json:"security"`
	Summary  string `json:"summary,omitempty"`
	// RequiresReboot is the agent's judgement from the package (a kernel, the C library,
	// systemd).
	RequiresReboot bool `json:"requiresReboot"`
}

// PackageVersion names a package and one of its versions.
type PackageVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// PatchInstall is the payload of patch_install: install exactly these versions of installed
// packages (1 to 500), nothing else upgraded. Without Rollback a version older than the
// installed one is refused for its package; with Rollback only older versions are taken.
type PatchInstall struct {
	Packages []PackageVersion `json:"packages"`
	// Installers are third-party updates installed from a downloaded file (checksum
	// verified) rather than from the package manager's repositories; each is reported in
	// the result's Packages under its Name. Never with Rollback.
	Installers []SoftwareInstall `json:"installers,omitempty"`
	Rollback   bool              `json:"rollback,omitempty"`
}

// PatchInstallResult is the Result of patch_install; the command fails when any package
// failed, and the result is still there.
type PatchInstallResult struct {
	Manager        string           `json:"manager"`
	Packages       []PackageOutcome `json:"packages"`
	RebootRequired bool             `json:"rebootRequired"`
}

// PackageOutcome is what happened to one package.
type PackageOutcome struct {
	Name string `json:"name"`
	// Version is the version asked for; PreviousVersion the one installed before, "" when
	// none was.
	Version         string `json:"version"`
	PreviousVersion string `json:"previousVersion,omitempty"`
	Status          string `json:"status"`
	Error           string `json:"error,omitempty"`
}

// Package file types of software_install.
const (
	FileDeb = "deb"
	FileRPM = "rpm"
	FileMSI = "msi"
	FileExe = "exe"
	FilePkg = "pkg"
	FileDmg = "dmg"
)

// FileTypeOS is the system each package file type installs on.
var FileTypeOS = map[string]string{FileDeb: OSLinux, FileRPM: OSLinux, FileMSI: OSWindows, FileExe: OSWindows, FilePkg: OSMacOS,
	FileDmg: OSMacOS}

// SoftwareInstall is the payload of software_install.
type SoftwareInstall struct {
	// URL is where the agent downloads the file: an https (or http) address, or a path on the
	// server (starting with /api/v1/agents/) that the agent fetches with its own credentials.
	URL       string `json:"url"`
	SHA256    string `json:"sha256"`
	SizeBytes int64  `json:"sizeBytes,omitempty"`
	FileType  string `json:"fileType"`
	// Name and Version are what the catalog expects the package to install.
	Name       string `json:"name"`
	Version    string `json:"version"`
	SilentArgs string `json:"silentArgs,omitempty"`
}

// SoftwareInstallResult is the Result of software_install.
type SoftwareInstallResult struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// PreviousVersion is what was installed before, "" when nothing was.
	PreviousVersion string `json:"previousVersion,omitempty"`
	SHA256          string `json:"sha256"`
}

// SoftwareUninstall is the payload of software_uninstall: remove the named package. The
// agent refuses packages the system needs (see ProtectedPackages) whatever the server asks.
type SoftwareUninstall struct {
	Name string `json:"name"`
	// Version, when set, must be the installed version, so a stale request removes nothing.
	Version string `json:"version,omitempty"`
}

// SoftwareUninstallResult is the Result of software_uninstall.
type SoftwareUninstallResult struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Status  string `json:"status"`
}

// ProtectedPackages are packages neither the server nor the agent lets an uninstall remove:
// without them the system or its management breaks.
var ProtectedPackages = []string{"libc6", "glibc", "systemd", "dpkg", "apt", "rpm", "dnf", "openssl", "libssl3", "bash", "coreutils", "gale-agent"}
