// Package agentproto holds the wire messages shared by the Gale server and gale-agent: the
// enrollment exchange, the WebSocket envelope and its message kinds, heartbeats, commands,
// inventory and the system-tool calls. Field names are camelCase JSON, like the REST API.
//
// The server accepts agents of the same protocol Version or older; fields are only ever
// added, so an older agent simply leaves new ones out.
package agentproto

import (
	"encoding/json"
	"time"
)

// Version is the agent protocol version. It rises only when a message changes meaning.
const Version = 1

// Paths of the agent endpoints, relative to the API root (/api/v1).
const (
	// PathPrefix begins the path of every endpoint agents call.
	PathPrefix    = "/agents/"
	PathEnroll    = "/agents/enroll"
	PathWebSocket = "/agents/ws"
	// PathHeartbeat is the HTTP fallback of the WebSocket heartbeat; {agentId} is the device ID.
	PathHeartbeat = "/agents/{agentId}/heartbeat"
	// PathInventory takes an Inventory document over HTTP (it can be large).
	PathInventory = "/agents/{agentId}/inventory"
	// PathCommandResult takes a CommandResult over HTTP, the one way agents report results:
	// the answer confirms the result was recorded, so the agent keeps it until then.
	PathCommandResult = "/agents/{agentId}/commands/{commandId}/result"
)

// ErrDeviceDecommissioned is the error code of the answer (403) to an agent whose token is
// valid but whose device was decommissioned. The answer's details carry the field
// DetailDeviceID with the device's ID, which only the server knows goes with the token, so a
// proxy or captive portal answering in the server's place cannot stop an agent.
const (
	ErrDeviceDecommissioned = "DEVICE_DECOMMISSIONED"
	DetailDeviceID          = "deviceId"
)

// HeaderEnrollmentSecret may carry the enrollment secret instead of the body.
const HeaderEnrollmentSecret = "X-Enrollment-Secret"

// HeaderStreams is sent by an agent with its WebSocket upgrade when it speaks streams (package
// streams) over the socket's binary messages; its value is StreamsVersion. The JSON Messages
// ride on text messages either way. An agent that does not send it (an older one) gets no
// binary message, and the server refuses to open streams to it.
const HeaderStreams = "X-Gale-Streams"

// StreamsVersion is the version of the streams framing an agent speaks.
const StreamsVersion = "1"

// OS types, as agents report them and as the API shows them.
const (
	OSLinux   = "linux"
	OSWindows = "windows"
	OSMacOS   = "macos"
)

// OSTypes are every OS type.
var OSTypes = []string{OSLinux, OSWindows, OSMacOS}

// EnrollRequest is the body of POST /agents/enroll.
type EnrollRequest struct {
	EnrollmentKey    string `json:"enrollmentKey"`
	EnrollmentSecret string `json:"enrollmentSecret,omitempty"`
	// SiteID asks for a site of the key's organization; a key pinned to a site ignores it.
	SiteID       string    `json:"siteId,omitempty"`
	Hostname     string    `json:"hostname"`
	OSType       string    `json:"osType"`
	OSVersion    string    `json:"osVersion"`
	Architecture string    `json:"architecture"`
	AgentVersion string    `json:"agentVersion"`
	Hardware     *Hardware `json:"hardwareInfo,omitempty"`
}

// EnrollResponse answers a successful enrollment (201).
type EnrollResponse struct {
	AgentID  string `json:"agentId"`
	DeviceID string `json:"deviceId"`
	// AuthToken authenticates the main agent; WatchdogAuthToken the watchdog. Each is shown
	// once and stored by the server only as a hash.
	AuthToken         string `json:"authToken"`
	WatchdogAuthToken string `json:"watchdogAuthToken"`
	OrgID             string `json:"orgId"`
	SiteID            string `json:"siteId"`
	Config            Config `json:"config"`
}

// Config is what the server tells an agent about how to behave.
type Config struct {
	HeartbeatIntervalSeconds         int `json:"heartbeatIntervalSeconds"`
	MetricsCollectionIntervalSeconds int `json:"metricsCollectionIntervalSeconds"`
	InventoryIntervalMinutes         int `json:"inventoryIntervalMinutes"`
}

// Message is the envelope of every WebSocket text message, in both directions.
type Message struct {
	// ID correlates a call with its result; empty for one-way messages.
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Message types from the server to the agent.
const (
	// TypeWelcome is the first frame after the upgrade; payload Welcome.
	TypeWelcome = "welcome"
	// TypeCommand delivers a Command.
	TypeCommand = "command"
	// TypeCall asks a system-tool Call; the agent answers TypeCallResult with the same ID.
	TypeCall = "call"
	// TypeConfig carries a new Config.
	TypeConfig = "config"
	// TypeStop tells the agent its device was decommissioned: stop working and exit. Only
	// this message, on the authenticated socket, and an ErrDeviceDecommissioned answer naming
	// the agent's device make an agent stop; any other refusal is retried.
	TypeStop = "stop"
	// TypeHeartbeatAck confirms a heartbeat was recorded; it carries the heartbeat's ID.
	TypeHeartbeatAck = "heartbeat_ack"
)

// Message types from the agent to the server.
const (
	TypeHeartbeat  = "heartbeat"
	TypeCallResult = "call_result"
	// TypeCommandOutput carries CommandOutput: what a running command printed so far.
	TypeCommandOutput = "command_output"
)

// CommandOutput is a piece of a running command's output, sent over the live channel while
// the command runs, so its output can be watched. It is best effort: pieces are not kept
// while offline, as the final CommandResult carries the whole (capped) output. Offsets count
// the bytes of that stream sent before this piece, so a receiver appends each piece once and
// in order.
type CommandOutput struct {
	CommandID    string `json:"commandId"`
	StdoutOffset int64  `json:"stdoutOffset"`
	Stdout       []byte `json:"stdout,omitempty"`
	StderrOffset int64  `json:"stderrOffset"`
	Stderr       []byte `json:"stderr,omitempty"`
}

// Welcome is the server's first frame on a socket.
type Welcome struct {
	DeviceID string `json:"deviceId"`
	Config   Config `json:"config"`
}

// Agent roles: the main agent and its watchdog authenticate with different tokens.
const (
	RoleAgent    = "agent"
	RoleWatchdog = "watchdog"
)

// Heartbeat is sent every Config.HeartbeatIntervalSeconds, over the socket or over HTTP.
type Heartbeat struct {
	AgentVersion  string   `json:"agentVersion"`
	Metrics       *Metrics `json:"metrics,omitempty"`
	UptimeSeconds int64    `json:"uptimeSeconds"`
	LastUser      string   `json:"lastUser,omitempty"`
	PendingReboot bool     `json:"pendingReboot"`
	// MainAgentAlive is reported by the watchdog: whether the main agent answers it.
	MainAgentAlive *bool `json:"mainAgentAlive,omitempty"`
	// WatchdogState is reported by the watchdog: "connected" while it merely watches,
	// "failover" while it is restarting or standing in for the main agent, "gave_up" once the
	// main agent failed at start so often that the watchdog stopped restarting it.
	WatchdogState string `json:"watchdogState,omitempty"`
	// WatchdogReason says why the watchdog gave up (the main agent's last exit and error).
	WatchdogReason string `json:"watchdogReason,omitempty"`
	// SampledAt is when Metrics were taken, set on a heartbeat delivered late (kept by the
	// agent while the server was unreachable); absent means now. The server files the sample
	// in the metrics history at that time, and refuses one from the future or older than the
	// history keeps.
	SampledAt *time.Time `json:"sampledAt,omitempty"`
	// LiveChannel is the state of the main agent's live channel when it sent the heartbeat:
	// LiveChannelUp, LiveChannelConnecting or LiveChannelDown. Absent: an agent that keeps no
	// live channel, or too old to say.
	LiveChannel string `json:"liveChannel,omitempty"`
}

// States of the agent's live channel, as its heartbeats report them.
const (
	// LiveChannelUp: the channel is open (the heartbeat travels on it).
	LiveChannelUp = "up"
	// LiveChannelConnecting: the agent is opening the channel, having just started or lost
	// it; it expects it up within seconds.
	LiveChannelConnecting = "connecting"
	// LiveChannelDown: opening the channel has failed for a while (or the server refuses the
	// agent's token there); the agent reports over HTTP and keeps trying, ever less often.
	LiveChannelDown = "down"
)

// Metrics is one sample of the machine's health.
type Metrics struct {
	CPUPercent   float64 `json:"cpuPercent"`
	RAMPercent   float64 `json:"ramPercent"`
	RAMUsedMB    int64   `json:"ramUsedMb"`
	RAMTotalMB   int64   `json:"ramTotalMb"`
	DiskPercent  float64 `json:"diskPercent"`
	DiskUsedGB   float64 `json:"diskUsedGb"`
	DiskTotalGB  float64 `json:"diskTotalGb"`
	ProcessCount int     `json:"processCount"`
	Load1        float64 `json:"load1,omitempty"`
}

// HeartbeatResponse answers an HTTP heartbeat: pending commands (which become "sent"),
// a changed configuration, or the order to stop.
type HeartbeatResponse struct {
	Commands []Command `json:"commands"`
	Config   *Config   `json:"config,omitempty"`
	Stop     bool      `json:"stop,omitempty"`
}

// Command types an agent carries out.
const (
	CommandRefreshInventory = "refresh_inventory"
	CommandRunScript        = "run_script"
	CommandReboot           = "reboot"
	CommandShutdown         = "shutdown"
	// CommandCancel cancels another command (payload CancelCommand): a running one is stopped
	// (it then reports ResultCancelled), a scheduled reboot or shutdown withdrawn, one not
	// received yet refused when it arrives. It is completed when the command will not run on,
	// failed when it is too late (it ended, or the system already took the order).
	CommandCancel = "cancel_command"
)

// Command is work for the agent; it answers with a CommandResult.
type Command struct {
	ID             string          `json:"id"`
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	TimeoutSeconds int             `json:"timeoutSeconds"`
}

// Script languages of run_script.
const (
	LanguageBash       = "bash"
	LanguageSh         = "sh"
	LanguagePython     = "python"
	LanguagePowerShell = "powershell"
	LanguageCmd        = "cmd"
)

// ScriptLanguages are the languages run_script runs on each OS: the server sends no other.
// PowerShell and cmd are Windows's; bash and python run there too where installed.
var ScriptLanguages = map[string][]string{
	OSLinux:   {LanguageBash, LanguageSh, LanguagePython},
	OSMacOS:   {LanguageBash, LanguageSh, LanguagePython},
	OSWindows: {LanguagePowerShell, LanguageCmd, LanguagePython, LanguageBash},
}

// RunScript is the payload of a run_script command.
type RunScript struct {
	Language string            `json:"language"`
	Script   string            `json:"script"`
	Args     []string          `json:"args,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	// MaxOutputBytes caps each of stdout and stderr; the rest is dropped and Truncated set.
	MaxOutputBytes int `json:"maxOutputBytes"`
	// RunAs is whom the script runs as: RunAsSystem (the agent's own account, the default),
	// RunAsElevated (the same on an agent running as root or a service) or RunAsUser (the user
	// logged in at the console; the command fails when there is none).
	RunAs string `json:"runAs,omitempty"`
}

// Whom run_script runs a script as.
const (
	RunAsSystem   = "system"
	RunAsElevated = "elevated"
	RunAsUser     = "user"
)

// PowerDelay is the payload of reboot and shutdown: seconds to wait first (default 0). The
// agent keeps the scheduled command on disk, so it survives an agent restart, and reports it
// completed once the machine has booted again (a shutdown: once the system took the order),
// failed when the system refused it.
type PowerDelay struct {
	DelaySeconds int `json:"delaySeconds,omitempty"`
}

// CancelCommand is the payload of cancel_command: the command to withdraw.
type CancelCommand struct {
	CommandID string `json:"commandId"`
}

// Command result statuses reported by the agent.
const (
	ResultCompleted = "completed"
	ResultFailed    = "failed"
	ResultTimedOut  = "timed_out"
	// ResultCancelled: the agent stopped the command, or refused it, because the server
	// cancelled it (cancel_command).
	ResultCancelled = "cancelled"
)

// CommandResult is the outcome of a Command.
type CommandResult struct {
	CommandID  string          `json:"commandId"`
	Status     string          `json:"status"`
	ExitCode   *int            `json:"exitCode,omitempty"`
	Stdout     string          `json:"stdout,omitempty"`
	Stderr     string          `json:"stderr,omitempty"`
	Truncated  bool            `json:"truncated,omitempty"`
	DurationMs int64           `json:"durationMs"`
	Error      string          `json:"error,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	// StdoutEncoding and StderrEncoding are OutputBase64 when the stream held bytes that are
	// not text (a NUL, invalid UTF-8): the stream's field then carries them in standard base64,
	// so output is kept exactly as the script wrote it.
	StdoutEncoding string `json:"stdoutEncoding,omitempty"`
	StderrEncoding string `json:"stderrEncoding,omitempty"`
}

// OutputBase64 is the encoding of a command's output stream that is not text.
const OutputBase64 = "base64"

// Inventory is the full picture of a machine, replaced as a whole on every collection.
type Inventory struct {
	CollectedAt time.Time          `json:"collectedAt"`
	Hostname    string             `json:"hostname"`
	OS          OSInfo             `json:"os"`
	Hardware    Hardware           `json:"hardware"`
	Disks       []Disk             `json:"disks"`
	Network     []NetworkInterface `json:"network"`
	Software    []Software         `json:"software"`
	Users       []LoggedInUser     `json:"users"`
	// LastLogons are the most recent logons the system recorded, newest first, whether or
	// not the session is still open (Linux: wtmp).
	LastLogons []LoggedInUser `json:"lastLogons,omitempty"`
	// Errors name the collectors that failed, so the rest still arrives.
	Errors []string `json:"errors,omitempty"`
	// Posture lists the management products found on the machine (other RMMs, remote access,
	// endpoint security, backup, patch management). An agent that looked sends a list, empty
	// when it found none; nil means the agent does not detect them on its system.
	Posture []ManagementProduct `json:"posture"`
}

// Categories of management products.
const (
	CategoryRMM              = "rmm"
	CategoryRemoteAccess     = "remote_access"
	CategoryEndpointSecurity = "endpoint_security"
	CategoryBackup           = "backup"
	CategoryPatchManagement  = "patch_management"
	ProductActive            = "active"
	ProductInstalled         = "installed"
)

// ManagementProduct is a management product found on a machine: Product is its stable key
// ("clamav"), Status active (its service runs) or installed (present, its service not
// running), Evidence what showed it (packages, units, paths).
type ManagementProduct struct {
	Product  string `json:"product"`
	Name     string `json:"name"`
	Category string `json:"category"`
	Status   string `json:"status"`
	Version  string `json:"version,omitempty"`
	Evidence string `json:"evidence"`
}

// OSInfo describes the operating system.
type OSInfo struct {
	Type          string    `json:"type"`
	Name          string    `json:"name"`
	Version       string    `json:"version"`
	Build         string    `json:"build,omitempty"`
	KernelVersion string    `json:"kernelVersion,omitempty"`
	Architecture  string    `json:"architecture"`
	BootTime      time.Time `json:"bootTime"`
	UptimeSeconds int64     `json:"uptimeSeconds"`
	Timezone      string    `json:"timezone,omitempty"`
	// PrettyName is the release as the OS names it for people ("Debian GNU/Linux 12 (bookworm)").
	PrettyName string `json:"prettyName,omitempty"`
	Codename   string `json:"codename,omitempty"`
	// PointRelease is the update level under Version where the OS tracks one ("12.5" on Debian).
	PointRelease string `json:"pointRelease,omitempty"`
	// DNSServers are the name servers the system resolver asks.
	DNSServers []string `json:"dnsServers,omitempty"`
}

// Hardware describes the machine; fields the platform does not expose stay empty.
type Hardware struct {
	Manufacturer string `json:"manufacturer,omitempty"`
	Model        string `json:"model,omitempty"`
	SerialNumber string `json:"serialNumber,omitempty"`
	BIOSVersion  string `json:"biosVersion,omitempty"`
	CPUModel     string `json:"cpuModel,omitempty"`
	CPUCores     int    `json:"cpuCores,omitempty"`
	CPUThreads   int    `json:"cpuThreads,omitempty"`
	CPUMhz       int    `json:"cpuMhz,omitempty"`
	MemoryBytes  uint64 `json:"memoryBytes,omitempty"`
	// Virtualization names the hypervisor or container technology, in systemd-detect-virt's
	// terms ("kvm", "vmware", "microsoft", "docker", "lxc"); empty on bare metal.
	Virtualization string `json:"virtualization,omitempty"`
	// VirtualizationType is "vm", "container" or "none"; empty when the platform does not tell.
	VirtualizationType string `json:"virtualizationType,omitempty"`
	CPUVendor          string `json:"cpuVendor,omitempty"`
	CPUSockets         int    `json:"cpuSockets,omitempty"`
	SwapBytes          uint64 `json:"swapBytes,omitempty"`
	BoardVendor        string `json:"boardVendor,omitempty"`
	BoardName          string `json:"boardName,omitempty"`
	BoardSerial        string `json:"boardSerial,omitempty"`
	// ChassisType is the SMBIOS chassis type by name ("Desktop", "Notebook", "Rack Mount Chassis").
	ChassisType   string         `json:"chassisType,omitempty"`
	SystemUUID    string         `json:"systemUuid,omitempty"`
	PhysicalDisks []PhysicalDisk `json:"physicalDisks,omitempty"`
}

// PhysicalDisk is one storage device, whatever file systems it holds.
type PhysicalDisk struct {
	// Name is the kernel's name of the device ("sda", "nvme0n1").
	Name       string `json:"name"`
	Model      string `json:"model,omitempty"`
	Serial     string `json:"serial,omitempty"`
	SizeBytes  uint64 `json:"sizeBytes"`
	Rotational bool   `json:"rotational"`
	Removable  bool   `json:"removable"`
}

// Disk is one mounted file system.
type Disk struct {
	Device      string  `json:"device"`
	Mountpoint  string  `json:"mountpoint"`
	FSType      string  `json:"fsType"`
	TotalBytes  uint64  `json:"totalBytes"`
	UsedBytes   uint64  `json:"usedBytes"`
	FreeBytes   uint64  `json:"freeBytes"`
	UsedPercent float64 `json:"usedPercent"`
}

// NetworkInterface is one network adapter and its addresses (CIDR notation).
type NetworkInterface struct {
	Name       string   `json:"name"`
	MACAddress string   `json:"macAddress,omitempty"`
	Addresses  []string `json:"addresses"`
	MTU        int      `json:"mtu,omitempty"`
	Up         bool     `json:"up"`
	Loopback   bool     `json:"loopback,omitempty"`
	// OperState is the link state the kernel reports ("up", "down", "dormant", "unknown").
	OperState string `json:"operState,omitempty"`
	// SpeedMbps is the negotiated link speed; absent when the link is down or does not say.
	SpeedMbps int `json:"speedMbps,omitempty"`
	// Gateways are the default routes' next hops through this interface (IPv4 and IPv6).
	Gateways []string `json:"gateways,omitempty"`
}

// Software is one installed package.
type Software struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	Publisher    string `json:"publisher,omitempty"`
	Architecture string `json:"architecture,omitempty"`
	InstallDate  string `json:"installDate,omitempty"`
	SizeBytes    int64  `json:"sizeBytes,omitempty"`
	// Source is the package system: dpkg, rpm, snap, flatpak, msi, registry, app, brew.
	Source string `json:"source"`
}

// LoggedInUser is one interactive session, current (Inventory.Users) or past (LastLogons).
type LoggedInUser struct {
	Username  string    `json:"username"`
	Terminal  string    `json:"terminal,omitempty"`
	Host      string    `json:"host,omitempty"`
	StartedAt time.Time `json:"startedAt"`
}
