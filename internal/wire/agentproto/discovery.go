package agentproto

// CommandNetworkScan is the command of a network discovery scan: the agent probes the
// addresses of its subnets and reports what answered.
const CommandNetworkScan = "network_scan"

// Discovery methods of a network scan.
const (
	ScanPing     = "ping"
	ScanARP      = "arp"
	ScanPortScan = "port_scan"
	ScanSNMP     = "snmp"
	ScanDNS      = "dns"
)

// NetworkScan is the payload of a network_scan command.
type NetworkScan struct {
	// Subnets are IPv4 CIDRs; Excludes are addresses or CIDRs left out of them.
	Subnets  []string `json:"subnets"`
	Excludes []string `json:"excludes,omitempty"`
	// Methods are the ScanPing, ScanARP, ... to use.
	Methods []string `json:"methods"`
	// Ports are the TCP ports of a port scan (and of liveness when ping is not asked for).
	Ports []int `json:"ports,omitempty"`
	// SNMP holds the credentials of the SNMP identification (Host empty: each address
	// answering is asked); nil without ScanSNMP.
	SNMP *SNMPTarget `json:"snmp,omitempty"`
	// TimeoutMs bounds each probe; Concurrency is how many addresses are probed at once.
	TimeoutMs   int `json:"timeoutMs"`
	Concurrency int `json:"concurrency"`
}

// NetworkScanResult is what a network scan found.
type NetworkScanResult struct {
	// HostsTotal is the number of addresses to probe; HostsScanned those probed before the
	// scan ended.
	HostsTotal   int `json:"hostsTotal"`
	HostsScanned int `json:"hostsScanned"`
	// Hosts are the addresses that answered, in address order.
	Hosts []ScannedHost `json:"hosts"`
	// Routes are the agent's own IPv4 routes: the networks it sits on and their gateways.
	Routes []ScanRoute `json:"routes,omitempty"`
	// Truncated says hosts were left out to keep the result within its limits.
	Truncated bool `json:"truncated,omitempty"`
	// Errors lists what failed along the way (a method unavailable on the system).
	Errors []string `json:"errors,omitempty"`
}

// ScannedHost is one address that answered a scan.
type ScannedHost struct {
	IP string `json:"ip"`
	// MAC is from the agent's neighbour (ARP) table; empty when not on a local link.
	MAC       string `json:"mac,omitempty"`
	Hostname  string `json:"hostname,omitempty"`
	OpenPorts []int  `json:"openPorts,omitempty"`
	// RTTMs is the round trip of the liveness probe; Via how the host was seen (icmp, tcp, arp).
	RTTMs float64 `json:"rttMs,omitempty"`
	Via   string  `json:"via,omitempty"`
	// SysName, SysDescr and SysObjectID are the SNMP system group, when the host answered.
	SysName     string `json:"sysName,omitempty"`
	SysDescr    string `json:"sysDescr,omitempty"`
	SysObjectID string `json:"sysObjectId,omitempty"`
	// Neighbors are the host's LLDP neighbours (LLDP-MIB's remote systems), when it answered
	// SNMP and keeps that table (switches, routers, access points).
	Neighbors []ScannedNeighbor `json:"neighbors,omitempty"`
}

// ScannedNeighbor is a system an SNMP host sees on one of its ports through LLDP.
type ScannedNeighbor struct {
	// LocalPort is the host's port the neighbour is on (its description, else its number).
	LocalPort string `json:"localPort"`
	// ChassisID identifies the neighbour: a MAC address (aa:bb:...) when ChassisIDType is mac,
	// else as the neighbour sent it.
	ChassisID     string `json:"chassisId"`
	ChassisIDType string `json:"chassisIdType"`
	PortID        string `json:"portId,omitempty"`
	PortDesc      string `json:"portDesc,omitempty"`
	SysName       string `json:"sysName,omitempty"`
	// Address is the neighbour's IPv4 management address, when it advertises one.
	Address string `json:"address,omitempty"`
}

// ScanRoute is one IPv4 route of the scanning agent: Gateway empty for a directly
// attached network.
type ScanRoute struct {
	Subnet    string `json:"subnet"`
	Gateway   string `json:"gateway,omitempty"`
	Interface string `json:"interface,omitempty"`
}
