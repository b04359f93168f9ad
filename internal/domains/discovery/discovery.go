// Package discovery finds what is on an organization's networks: a profile names a site's
// subnets and how to probe them; a scan is a network_scan command an online agent of the site
// carries out; its result becomes assets (one per organization and IP address), typed from
// what was seen and linked to managed devices by MAC or IP address. Assets can have SNMP and
// monitors turned on, and the topology puts them on their subnets and gateways.
package discovery

import (
	"time"
)

// Schedule types.
const (
	ScheduleManual   = "manual"
	ScheduleCron     = "cron"
	ScheduleInterval = "interval"
)

// Job statuses: a job is scheduled while its command waits for the agent, running once the
// agent has it, and ends completed, failed or cancelled.
const (
	JobScheduled = "scheduled"
	JobRunning   = "running"
	JobCompleted = "completed"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
)

// What started a job.
const (
	TriggerManual   = "manual"
	TriggerSchedule = "schedule"
)

// Asset statuses.
const (
	AssetNew     = "new"
	AssetLinked  = "linked"
	AssetIgnored = "ignored"
)

// How an asset got its link.
const (
	linkAuto   = "auto"
	linkManual = "manual"
)

// Asset types.
const (
	TypeWorkstation = "workstation"
	TypeServer      = "server"
	TypeRouter      = "router"
	TypeSwitch      = "switch"
	TypeFirewall    = "firewall"
	TypePrinter     = "printer"
	TypeAccessPoint = "access_point"
	TypeNAS         = "nas"
	TypePhone       = "phone"
	TypeCamera      = "camera"
	TypeIoT         = "iot"
	TypeUnknown     = "unknown"
)

// Error codes.
const (
	CodeScanActive        = "SCAN_ALREADY_ACTIVE"
	CodeJobNotRunning     = "JOB_NOT_RUNNING"
	CodeMonitoringOn      = "MONITORING_ALREADY_ENABLED"
	CodeMonitoringEnabled = "MONITORING_ENABLED"
	CodeMonitoringNotOn   = "MONITORING_NOT_ENABLED"
	CodeSubnetTooLarge    = "SUBNET_TOO_LARGE"
)

// Limits.
const (
	// MaxAddresses is how many addresses a profile covers; MaxDeepAddresses with deepScan.
	MaxAddresses     = 1024
	MaxDeepAddresses = 65536
	MaxSubnets       = 32
	MaxExcludes      = 256
	MaxPorts         = 1024
	// DefaultConcurrency and the bounds of concurrency; DefaultTimeoutMs and the bounds of
	// timeoutMs (each probe).
	DefaultConcurrency = 64
	MaxConcurrency     = 256
	DefaultTimeoutMs   = 1000
	MinTimeoutMs       = 100
	MaxTimeoutMs       = 10000
	// MinIntervalMinutes is the shortest interval schedule.
	MinIntervalMinutes = 15
	MaxIntervalMinutes = 44640
	// MaxTopologyAssets bounds the assets one topology shows.
	MaxTopologyAssets = 5000
	// scanTimeout bounds a scan command, in seconds.
	scanTimeout = 3600
)

// DefaultMethods are a profile's methods when it names none.
var DefaultMethods = []string{"ping", "arp", "port_scan", "dns"}

// DefaultPorts are the ports of a port scan when a profile names none.
var DefaultPorts = []int{21, 22, 23, 25, 53, 80, 110, 135, 139, 143, 443, 445, 515, 554, 631, 1883, 3306, 3389, 5060, 5432,
	5900, 8080, 8443, 9100}

// DiscoverySchedule is when a profile scans by itself: never (manual), on a five-field cron
// expression or every intervalMinutes, read in the site's time zone.
type DiscoverySchedule struct {
	Type            string `json:"type" enum:"manual,cron,interval"`
	Cron            string `json:"cron,omitempty" maxLength:"100" doc:"cron: five fields (minute hour day-of-month month day-of-week), in the site's time zone."`
	IntervalMinutes int    `json:"intervalMinutes,omitempty" doc:"interval: minutes between scans, 15 to 44640."`
}

// DiscoverySNMPCredentials is how a scan asks SNMP agents who they are. Stored encrypted;
// never returned.
type DiscoverySNMPCredentials struct {
	Version      string `json:"version" enum:"v1,v2c,v3"`
	Port         int    `json:"port,omitempty" doc:"Default 161."`
	Community    string `json:"community,omitempty" maxLength:"255" doc:"v1 and v2c."`
	Username     string `json:"username,omitempty" maxLength:"255" doc:"v3."`
	AuthProtocol string `json:"authProtocol,omitempty" enum:"MD5,SHA,SHA-256" doc:"v3 authNoPriv and authPriv."`
	AuthPassword string `json:"authPassword,omitempty" maxLength:"255"`
	PrivProtocol string `json:"privProtocol,omitempty" enum:"DES,AES,AES-256" doc:"v3 authPriv."`
	PrivPassword string `json:"privPassword,omitempty" maxLength:"255"`
}

// DiscoverySNMPSummary says which SNMP credentials a profile holds, without their secrets.
type DiscoverySNMPSummary struct {
	Version  string `json:"version"`
	Port     int    `json:"port"`
	Username string `json:"username,omitempty"`
}

// DiscoveryProfile is what a site's agent scans, and when.
type DiscoveryProfile struct {
	ID          string                `json:"id" format:"uuid"`
	PartnerID   string                `json:"partnerId" format:"uuid"`
	OrgID       string                `json:"orgId" format:"uuid"`
	SiteID      string                `json:"siteId" format:"uuid"`
	Name        string                `json:"name"`
	Subnets     []string              `json:"subnets"`
	ExcludeIPs  []string              `json:"excludeIps"`
	Methods     []string              `json:"methods"`
	Ports       []int                 `json:"ports"`
	DeepScan    bool                  `json:"deepScan"`
	SNMP        *DiscoverySNMPSummary `json:"snmp" doc:"The SNMP credentials' version and user; secrets are never returned."`
	Schedule    DiscoverySchedule     `json:"schedule"`
	TimeoutMs   int                   `json:"timeoutMs"`
	Concurrency int                   `json:"concurrency"`
	// AgentDeviceID names the agent that scans; nil: any online agent of the site.
	AgentDeviceID *string    `json:"agentDeviceId" format:"uuid"`
	Addresses     int        `json:"addresses" doc:"How many addresses the subnets cover."`
	NextRunAt     *time.Time `json:"nextRunAt"`
	LastRunAt     *time.Time `json:"lastRunAt"`
	CreatedBy     *string    `json:"createdBy"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
}

// DiscoveryProfileInput is the body of a profile's create.
type DiscoveryProfileInput struct {
	SiteID      string                    `json:"siteId" format:"uuid"`
	Name        string                    `json:"name" minLength:"1" maxLength:"255"`
	Subnets     []string                  `json:"subnets" maxItems:"32" doc:"IPv4 CIDRs (or single addresses); 1 to 32, at most 1,024 addresses in all (65,536 with deepScan)."`
	ExcludeIPs  []string                  `json:"excludeIps,omitempty" maxItems:"256" doc:"IPv4 addresses or CIDRs left out."`
	Methods     []string                  `json:"methods,omitempty" maxItems:"5" doc:"ping, arp, port_scan, snmp, dns; default ping, arp, port_scan, dns."`
	Ports       []int                     `json:"ports,omitempty" maxItems:"1024" doc:"TCP ports of the port scan, 1 to 1,024 of them; a default list when omitted."`
	SNMP        *DiscoverySNMPCredentials `json:"snmp,omitempty" doc:"Required by the snmp method."`
	DeepScan    bool                      `json:"deepScan,omitempty" doc:"Allows up to 65,536 addresses."`
	Schedule    *DiscoverySchedule        `json:"schedule,omitempty" doc:"Default manual."`
	TimeoutMs   *int                      `json:"timeoutMs,omitempty" doc:"Each probe's timeout, 100 to 10,000; default 1,000."`
	Concurrency *int                      `json:"concurrency,omitempty" doc:"Addresses probed at once, 1 to 256; default 64."`
	// AgentDeviceID names the agent that scans; empty: any online agent of the site.
	AgentDeviceID string `json:"agentDeviceId,omitempty" format:"uuid" doc:"An agent of the site that scans; any online one when omitted."`
}

// DiscoveryProfileUpdate is the body of a PATCH: absent fields stay. The site stays.
type DiscoveryProfileUpdate struct {
	Name       *string                   `json:"name,omitempty" minLength:"1" maxLength:"255"`
	Subnets    []string                  `json:"subnets,omitempty" maxItems:"32"`
	ExcludeIPs []string                  `json:"excludeIps,omitempty" maxItems:"256"`
	Methods    []string                  `json:"methods,omitempty" maxItems:"5"`
	Ports      []int                     `json:"ports,omitempty" maxItems:"1024"`
	SNMP       *DiscoverySNMPCredentials `json:"snmp,omitempty"`
	// ClearSNMP removes the stored SNMP credentials.
	ClearSNMP   bool               `json:"clearSnmp,omitempty" doc:"Removes the SNMP credentials (the snmp method then cannot stay)."`
	DeepScan    *bool              `json:"deepScan,omitempty"`
	Schedule    *DiscoverySchedule `json:"schedule,omitempty"`
	TimeoutMs   *int               `json:"timeoutMs,omitempty"`
	Concurrency *int               `json:"concurrency,omitempty"`
	// AgentDeviceID: a device ID, or "" for any online agent of the site.
	AgentDeviceID *string `json:"agentDeviceId,omitempty" doc:"An agent of the site, or empty for any online one."`
}

// DiscoveryJob is one scan of a profile.
type DiscoveryJob struct {
	ID            string     `json:"id" format:"uuid"`
	PartnerID     string     `json:"partnerId" format:"uuid"`
	OrgID         string     `json:"orgId" format:"uuid"`
	SiteID        string     `json:"siteId" format:"uuid"`
	ProfileID     string     `json:"profileId" format:"uuid"`
	AgentDeviceID string     `json:"agentDeviceId" format:"uuid"`
	CommandID     *string    `json:"commandId" format:"uuid"`
	Status        string     `json:"status" enum:"scheduled,running,completed,failed,cancelled"`
	Trigger       string     `json:"trigger" enum:"manual,schedule"`
	HostsTotal    int        `json:"hostsTotal"`
	HostsScanned  int        `json:"hostsScanned"`
	HostsFound    int        `json:"hostsFound"`
	NewAssets     int        `json:"newAssets"`
	Error         *string    `json:"error" multiline:"true"`
	CreatedBy     *string    `json:"createdBy"`
	CreatedAt     time.Time  `json:"createdAt"`
	StartedAt     *time.Time `json:"startedAt"`
	CompletedAt   *time.Time `json:"completedAt"`
}

// DiscoveryScanRequest starts a scan of a profile.
type DiscoveryScanRequest struct {
	ProfileID     string `json:"profileId" format:"uuid"`
	AgentDeviceID string `json:"agentDeviceId,omitempty" format:"uuid" doc:"An agent of the profile's site; the profile's, or any online one, when omitted."`
}

// DiscoveryAsset is one address discovery found in an organization.
type DiscoveryAsset struct {
	ID          string `json:"id" format:"uuid"`
	PartnerID   string `json:"partnerId" format:"uuid"`
	OrgID       string `json:"orgId" format:"uuid"`
	SiteID      string `json:"siteId" format:"uuid"`
	IP          string `json:"ip"`
	MAC         string `json:"mac"`
	Hostname    string `json:"hostname"`
	Type        string `json:"type" enum:"workstation,server,router,switch,firewall,printer,access_point,nas,phone,camera,iot,unknown"`
	OpenPorts   []int  `json:"openPorts"`
	SysName     string `json:"sysName"`
	SysDescr    string `json:"sysDescr" multiline:"true"`
	SysObjectID string `json:"sysObjectId"`
	// Neighbors are the systems the asset sees on its ports through LLDP, as its last SNMP
	// answer listed them.
	Neighbors   []DiscoveryNeighbor `json:"neighbors"`
	Status      string              `json:"status" enum:"new,linked,ignored"`
	LinkSource  *string             `json:"linkSource" enum:"auto,manual" doc:"How the link was made: by MAC or IP address (auto), or by hand."`
	LinkedID    *string             `json:"linkedDeviceId" format:"uuid"`
	IgnoreNote  *string             `json:"ignoreReason" multiline:"true"`
	Monitoring  bool                `json:"monitoringEnabled"`
	LastJobID   *string             `json:"lastJobId" format:"uuid"`
	FirstSeenAt time.Time           `json:"firstSeenAt"`
	LastSeenAt  time.Time           `json:"lastSeenAt"`
	UpdatedAt   time.Time           `json:"updatedAt"`
}

// DiscoveryNeighbor is a system an asset sees on one of its ports through LLDP.
type DiscoveryNeighbor struct {
	LocalPort     string `json:"localPort" doc:"The asset's port: its description, else its number."`
	ChassisID     string `json:"chassisId" doc:"The neighbour's identity: a MAC address (aa:bb:...) when chassisIdType is mac."`
	ChassisIDType string `json:"chassisIdType" enum:"chassis_component,interface_alias,port_component,mac,network_address,interface_name,local,unknown"`
	PortID        string `json:"portId"`
	PortDesc      string `json:"portDesc"`
	SysName       string `json:"sysName"`
	Address       string `json:"address" doc:"The neighbour's IPv4 management address, when it advertises one."`
}

// DiscoveryLinkRequest links an asset to a managed device of its organization.
type DiscoveryLinkRequest struct {
	DeviceID string `json:"deviceId" format:"uuid"`
}

// DiscoveryIgnoreRequest ignores an asset.
type DiscoveryIgnoreRequest struct {
	Reason string `json:"reason" minLength:"1" maxLength:"1000" multiline:"true"`
}
