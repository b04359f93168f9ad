package agentproto

import "time"

// Command types of device security: the status the agent collects, threat scans, and the
// actions on a threat found.
const (
	CommandSecurityStatus = "security_status"
	CommandSecurityScan   = "security_scan"
	CommandThreatAction   = "threat_action"
)

// SecurityStatus is the Result of security_status: what protects the machine, as the agent
// reads it from the system.
type SecurityStatus struct {
	CollectedAt      time.Time        `json:"collectedAt"`
	Firewall         FirewallState    `json:"firewall"`
	Encryption       EncryptionState  `json:"encryption"`
	PasswordPolicy   PasswordPolicy   `json:"passwordPolicy"`
	Administrators   []AdminAccount   `json:"administrators"`
	ListeningPorts   []ListeningPort  `json:"listeningPorts"`
	Antivirus        AntivirusState   `json:"antivirus"`
	AutomaticUpdates AutomaticUpdates `json:"automaticUpdates"`
}

// Firewall backends.
const (
	FirewallNftables  = "nftables"
	FirewallUFW       = "ufw"
	FirewallFirewalld = "firewalld"
	FirewallNone      = "none"
)

// FirewallState is the machine's packet filter: which one manages it, whether it filters,
// how many rules it holds and the policy of inbound traffic ("drop", "accept", "reject", or ""
// when no input chain says).
type FirewallState struct {
	Backend     string `json:"backend"`
	Enabled     bool   `json:"enabled"`
	Rules       int    `json:"rules"`
	InputPolicy string `json:"inputPolicy,omitempty"`
	Detail      string `json:"detail,omitempty"`
}

// Encryption statuses of the machine's mounted volumes.
const (
	EncryptionFull    = "encrypted"
	EncryptionPartial = "partial"
	EncryptionNone    = "unencrypted"
	EncryptionUnknown = "unknown"
)

// EncryptionState is the encryption of the mounted volumes (and swap): encrypted when every
// one sits on an encrypted device (LUKS), partial when some do.
type EncryptionState struct {
	Status  string            `json:"status"`
	Volumes []EncryptedVolume `json:"volumes"`
}

// EncryptedVolume is one mounted volume and whether an encrypted device holds it.
type EncryptedVolume struct {
	Device     string `json:"device"`
	Mountpoint string `json:"mountpoint"`
	Encrypted  bool   `json:"encrypted"`
}

// PasswordPolicy is what the system asks of local passwords: ageing from login.defs, length
// and character classes from pwquality (0: not set). Summary says it in a line.
type PasswordPolicy struct {
	MaxDays    int    `json:"maxDays"`
	MinDays    int    `json:"minDays"`
	WarnDays   int    `json:"warnDays"`
	MinLength  int    `json:"minLength"`
	MinClasses int    `json:"minClasses"`
	Summary    string `json:"summary"`
}

// AdminAccount is an account with administrator rights: uid 0, or a member of sudo, wheel or
// admin. Via names how; Locked is an account whose password cannot be used to sign in;
// LastLogin is its last sign-in the system recorded (lastlog), nil when it never signed in or
// the system keeps no record.
type AdminAccount struct {
	Name      string     `json:"name"`
	UID       int        `json:"uid"`
	Via       string     `json:"via"`
	Shell     string     `json:"shell"`
	Locked    bool       `json:"locked"`
	LastLogin *time.Time `json:"lastLogin,omitempty"`
}

// ListeningPort is a socket waiting for connections (TCP) or datagrams (UDP). Exposed is one
// bound beyond the loopback.
type ListeningPort struct {
	Protocol string `json:"protocol"`
	Address  string `json:"address"`
	Port     int    `json:"port"`
	Exposed  bool   `json:"exposed"`
}

// AntivirusState is the antivirus found (ClamAV on Linux): whether it is installed, its
// scanning daemon runs, on-access scanning protects in real time, and when its signatures
// were last updated.
type AntivirusState struct {
	Provider            string     `json:"provider,omitempty"`
	Installed           bool       `json:"installed"`
	DaemonRunning       bool       `json:"daemonRunning"`
	RealTimeProtection  bool       `json:"realTimeProtection"`
	SignaturesUpdatedAt *time.Time `json:"signaturesUpdatedAt,omitempty"`
}

// AutomaticUpdates says whether the system installs updates by itself, and with what
// (unattended-upgrades, dnf-automatic).
type AutomaticUpdates struct {
	Enabled   bool   `json:"enabled"`
	Mechanism string `json:"mechanism,omitempty"`
}

// Scan types of security_scan.
const (
	ScanQuick  = "quick"
	ScanFull   = "full"
	ScanCustom = "custom"
)

// SecurityScan is the payload of security_scan: quick (home directories, temporary
// directories), full (the whole file system but /proc, /sys, /dev) or custom (Paths).
type SecurityScan struct {
	ScanType string   `json:"scanType"`
	Paths    []string `json:"paths,omitempty"`
}

// TypeSecurityScanProgress is the agent's report, over its live channel, of how far a running
// security_scan has got (payload SecurityScanProgress), about once a second. It is best
// effort: reports are not kept while offline, as the result carries the final count.
const TypeSecurityScanProgress = "security_scan_progress"

// SecurityScanProgress is how many files a running scan has looked at so far.
type SecurityScanProgress struct {
	CommandID    string `json:"commandId"`
	FilesScanned int    `json:"filesScanned"`
}

// SecurityScanResult is the Result of security_scan.
type SecurityScanResult struct {
	Engine       string        `json:"engine"`
	FilesScanned int           `json:"filesScanned"`
	Threats      []FoundThreat `json:"threats"`
	// Truncated is set when the scan stopped at its bound of files or threats.
	Truncated bool `json:"truncated,omitempty"`
}

// FoundThreat is a file a scan flagged.
type FoundThreat struct {
	Name     string `json:"name"`
	Category string `json:"category"`
	Severity string `json:"severity"`
	FilePath string `json:"filePath"`
	SHA256   string `json:"sha256"`
	Size     int64  `json:"size"`
}

// Threat actions.
const (
	ThreatQuarantine = "quarantine"
	ThreatRestore    = "restore"
	ThreatRemove     = "remove"
)

// ThreatAction is the payload of threat_action: quarantine moves the file at FilePath into the
// agent's quarantine (SHA256 must still be its checksum), restore puts a quarantined file back
// where it was, remove deletes it (from the quarantine, or at FilePath when it is not
// quarantined).
type ThreatAction struct {
	Action   string `json:"action"`
	FilePath string `json:"filePath"`
	SHA256   string `json:"sha256"`
}

// ThreatActionResult is the Result of threat_action: where the file is now ("" once removed).
type ThreatActionResult struct {
	Action   string `json:"action"`
	FilePath string `json:"filePath"`
	Location string `json:"location"`
}
