package snmp

import (
	"fmt"
	"strings"
)

// OID types of templates and the catalog: what a value is and how it is shown.
const (
	TypeGauge     = "gauge"
	TypeCounter   = "counter"
	TypeInteger   = "integer"
	TypeString    = "string"
	TypeTimeticks = "timeticks"
	TypeOID       = "oid"
	TypeIP        = "ip"
)

var oidTypes = []string{TypeGauge, TypeCounter, TypeInteger, TypeString, TypeTimeticks, TypeOID, TypeIP}

// SNMPCatalogOID is an OID of the built-in catalog: a scalar (instance .0 included) or, when
// Column, a table column whose instances follow it (ifInOctets.3).
type SNMPCatalogOID struct {
	OID    string `json:"oid"`
	Name   string `json:"name"`
	Label  string `json:"label"`
	Unit   string `json:"unit"`
	Type   string `json:"type" enum:"gauge,counter,integer,string,timeticks,oid,ip"`
	MIB    string `json:"mib"`
	Column bool   `json:"column" doc:"A table column: poll it with an instance suffix, such as .1 for the first row."`
}

func scalar(mib, oid, name, label, unit, typ string) SNMPCatalogOID {
	return SNMPCatalogOID{OID: oid, Name: name, Label: label, Unit: unit, Type: typ, MIB: mib}
}

func column(mib, oid, name, label, unit, typ string) SNMPCatalogOID {
	return SNMPCatalogOID{OID: oid, Name: name, Label: label, Unit: unit, Type: typ, MIB: mib, Column: true}
}

// catalog is the built-in catalog: MIB-2 system, interfaces (and the 64-bit ifXTable), IP,
// TCP, UDP, SNMP, host resources, printer, bridge and net-snmp's UCD load, memory and CPU.
var catalog = []SNMPCatalogOID{
	scalar("SNMPv2-MIB", "1.3.6.1.2.1.1.1.0", "sysDescr", "System description", "", TypeString),
	scalar("SNMPv2-MIB", "1.3.6.1.2.1.1.2.0", "sysObjectID", "System object ID", "", TypeOID),
	scalar("SNMPv2-MIB", "1.3.6.1.2.1.1.3.0", "sysUpTime", "Uptime", "ticks", TypeTimeticks),
	scalar("SNMPv2-MIB", "1.3.6.1.2.1.1.4.0", "sysContact", "Contact", "", TypeString),
	scalar("SNMPv2-MIB", "1.3.6.1.2.1.1.5.0", "sysName", "Name", "", TypeString),
	scalar("SNMPv2-MIB", "1.3.6.1.2.1.1.6.0", "sysLocation", "Location", "", TypeString),
	scalar("SNMPv2-MIB", "1.3.6.1.2.1.1.7.0", "sysServices", "Services", "", TypeInteger),
	scalar("IF-MIB", "1.3.6.1.2.1.2.1.0", "ifNumber", "Interfaces", "", TypeInteger),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.1", "ifIndex", "Interface index", "", TypeInteger),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.2", "ifDescr", "Interface description", "", TypeString),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.3", "ifType", "Interface type", "", TypeInteger),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.4", "ifMtu", "Interface MTU", "bytes", TypeInteger),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.5", "ifSpeed", "Interface speed", "bit/s", TypeGauge),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.6", "ifPhysAddress", "Interface MAC address", "", TypeString),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.7", "ifAdminStatus", "Interface admin status (1 up, 2 down, 3 testing)", "", TypeInteger),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.8", "ifOperStatus", "Interface status (1 up, 2 down)", "", TypeInteger),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.9", "ifLastChange", "Interface last change", "ticks", TypeTimeticks),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.10", "ifInOctets", "Interface in", "bytes", TypeCounter),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.11", "ifInUcastPkts", "Interface unicast packets in", "packets", TypeCounter),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.13", "ifInDiscards", "Interface discards in", "packets", TypeCounter),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.14", "ifInErrors", "Interface errors in", "packets", TypeCounter),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.16", "ifOutOctets", "Interface out", "bytes", TypeCounter),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.17", "ifOutUcastPkts", "Interface unicast packets out", "packets", TypeCounter),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.19", "ifOutDiscards", "Interface discards out", "packets", TypeCounter),
	column("IF-MIB", "1.3.6.1.2.1.2.2.1.20", "ifOutErrors", "Interface errors out", "packets", TypeCounter),
	column("IF-MIB", "1.3.6.1.2.1.31.1.1.1.1", "ifName", "Interface name", "", TypeString),
	column("IF-MIB", "1.3.6.1.2.1.31.1.1.1.6", "ifHCInOctets", "Interface in (64-bit)", "bytes", TypeCounter),
	column("IF-MIB", "1.3.6.1.2.1.31.1.1.1.10", "ifHCOutOctets", "Interface out (64-bit)", "bytes", TypeCounter),
	column("IF-MIB", "1.3.6.1.2.1.31.1.1.1.15", "ifHighSpeed", "Interface speed", "Mbit/s", TypeGauge),
	column("IF-MIB", "1.3.6.1.2.1.31.1.1.1.18", "ifAlias", "Interface alias", "", TypeString),
	scalar("IP-MIB", "1.3.6.1.2.1.4.1.0", "ipForwarding", "IP forwarding (1 yes, 2 no)", "", TypeInteger),
	scalar("IP-MIB", "1.3.6.1.2.1.4.3.0", "ipInReceives", "IP datagrams received", "datagrams", TypeCounter),
	scalar("IP-MIB", "1.3.6.1.2.1.4.10.0", "ipOutRequests", "IP datagrams sent", "datagrams", TypeCounter),
	scalar("TCP-MIB", "1.3.6.1.2.1.6.9.0", "tcpCurrEstab", "TCP connections established", "connections", TypeGauge),
	scalar("TCP-MIB", "1.3.6.1.2.1.6.15.0", "tcpOutRsts", "TCP resets sent", "segments", TypeCounter),
	scalar("UDP-MIB", "1.3.6.1.2.1.7.1.0", "udpInDatagrams", "UDP datagrams received", "datagrams", TypeCounter),
	scalar("SNMPv2-MIB", "1.3.6.1.2.1.11.1.0", "snmpInPkts", "SNMP packets received", "packets", TypeCounter),
	scalar("BRIDGE-MIB", "1.3.6.1.2.1.17.1.2.0", "dot1dBaseNumPorts", "Bridge ports", "", TypeInteger),
	column("BRIDGE-MIB", "1.3.6.1.2.1.17.2.15.1.3", "dot1dStpPortState", "STP port state", "", TypeInteger),
	scalar("HOST-RESOURCES-MIB", "1.3.6.1.2.1.25.1.1.0", "hrSystemUptime", "Host uptime", "ticks", TypeTimeticks),
	scalar("HOST-RESOURCES-MIB", "1.3.6.1.2.1.25.1.5.0", "hrSystemNumUsers", "Users logged in", "users", TypeGauge),
	scalar("HOST-RESOURCES-MIB", "1.3.6.1.2.1.25.1.6.0", "hrSystemProcesses", "Processes", "processes", TypeGauge),
	scalar("HOST-RESOURCES-MIB", "1.3.6.1.2.1.25.2.2.0", "hrMemorySize", "Memory size", "KB", TypeInteger),
	column("HOST-RESOURCES-MIB", "1.3.6.1.2.1.25.2.3.1.3", "hrStorageDescr", "Storage description", "", TypeString),
	column("HOST-RESOURCES-MIB", "1.3.6.1.2.1.25.2.3.1.4", "hrStorageAllocationUnits", "Storage allocation unit", "bytes", TypeInteger),
	column("HOST-RESOURCES-MIB", "1.3.6.1.2.1.25.2.3.1.5", "hrStorageSize", "Storage size", "units", TypeInteger),
	column("HOST-RESOURCES-MIB", "1.3.6.1.2.1.25.2.3.1.6", "hrStorageUsed", "Storage used", "units", TypeInteger),
	column("HOST-RESOURCES-MIB", "1.3.6.1.2.1.25.3.2.1.5", "hrDeviceStatus", "Device status (2 running, 3 warning, 5 down)", "", TypeInteger),
	column("HOST-RESOURCES-MIB", "1.3.6.1.2.1.25.3.3.1.2", "hrProcessorLoad", "Processor load", "%", TypeGauge),
	column("HOST-RESOURCES-MIB", "1.3.6.1.2.1.25.3.5.1.1", "hrPrinterStatus", "Printer status (3 idle, 4 printing, 5 warmup)", "", TypeInteger),
	column("Printer-MIB", "1.3.6.1.2.1.43.5.1.1.17", "prtGeneralSerialNumber", "Printer serial number", "", TypeString),
	column("Printer-MIB", "1.3.6.1.2.1.43.10.2.1.4", "prtMarkerLifeCount", "Pages printed", "pages", TypeCounter),
	column("Printer-MIB", "1.3.6.1.2.1.43.11.1.1.6", "prtMarkerSuppliesDescription", "Supply", "", TypeString),
	column("Printer-MIB", "1.3.6.1.2.1.43.11.1.1.8", "prtMarkerSuppliesMaxCapacity", "Supply capacity", "", TypeInteger),
	column("Printer-MIB", "1.3.6.1.2.1.43.11.1.1.9", "prtMarkerSuppliesLevel", "Supply level", "", TypeInteger),
	column("UCD-SNMP-MIB", "1.3.6.1.4.1.2021.10.1.3", "laLoad", "Load average (1, 5, 15 minutes)", "", TypeString),
	scalar("UCD-SNMP-MIB", "1.3.6.1.4.1.2021.4.5.0", "memTotalReal", "Memory total", "KB", TypeInteger),
	scalar("UCD-SNMP-MIB", "1.3.6.1.4.1.2021.4.6.0", "memAvailReal", "Memory available", "KB", TypeInteger),
	scalar("UCD-SNMP-MIB", "1.3.6.1.4.1.2021.11.11.0", "ssCpuIdle", "CPU idle", "%", TypeGauge),
}

// catalogByOID indexes catalog by OID.
var catalogByOID = func() map[string]SNMPCatalogOID {
	m := make(map[string]SNMPCatalogOID, len(catalog))
	for _, c := range catalog {
		m[c.OID] = c
	}
	return m
}()

// lookupCatalog names an instance OID from the catalog: a scalar, or a column with the
// instance appended to its name (ifInOctets.3).
func lookupCatalog(oid string) (SNMPTemplateOID, bool) {
	if c, ok := catalogByOID[oid]; ok && !c.Column {
		return SNMPTemplateOID{OID: oid, Name: c.Name, Label: c.Label, Unit: c.Unit, Type: c.Type}, true
	}
	for i := strings.LastIndexByte(oid, '.'); i > 0; i = strings.LastIndexByte(oid[:i], '.') {
		if c, ok := catalogByOID[oid[:i]]; ok && c.Column {
			inst := oid[i+1:]
			return SNMPTemplateOID{OID: oid, Name: c.Name + "." + inst, Label: c.Label + " " + inst, Unit: c.Unit, Type: c.Type}, true
		}
	}
	return SNMPTemplateOID{}, false
}

// Built-in template IDs: fixed, so devices and clients can name them.
const (
	TemplateGenericHost = "00000000-0000-7000-8000-000000000001"
	TemplateInterfaces  = "00000000-0000-7000-8000-000000000002"
	TemplateSwitch      = "00000000-0000-7000-8000-000000000003"
	TemplatePrinter     = "00000000-0000-7000-8000-000000000004"
)

func fromCatalog(oids ...string) []SNMPTemplateOID {
	out := make([]SNMPTemplateOID, 0, len(oids))
	for _, o := range oids {
		t, ok := lookupCatalog(o)
		if !ok {
			panic("snmp: built-in template OID outside the catalog: " + o)
		}
		out = append(out, t)
	}
	return out
}

func instances(columns []string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		for _, c := range columns {
			out = append(out, fmt.Sprintf("%s.%d", c, i))
		}
	}
	return out
}

func withPrefix(prefix string, oids ...string) []string {
	for i := range oids {
		oids[i] = prefix + oids[i]
	}
	return oids
}

// builtIns are the read-only templates every organization may use.
var builtIns = []SNMPTemplate{
	{ID: TemplateGenericHost, Name: "Generic host", BuiltIn: true,
		Description: "Uptime, name, users, processes, memory, load and CPU of a server or workstation (MIB-2, host resources, net-snmp).",
		OIDs: fromCatalog("1.3.6.1.2.1.1.3.0", "1.3.6.1.2.1.1.5.0", "1.3.6.1.2.1.1.1.0", "1.3.6.1.2.1.25.1.5.0",
			"1.3.6.1.2.1.25.1.6.0", "1.3.6.1.2.1.25.2.2.0", "1.3.6.1.4.1.2021.10.1.3.1", "1.3.6.1.4.1.2021.10.1.3.2",
			"1.3.6.1.4.1.2021.10.1.3.3", "1.3.6.1.4.1.2021.4.5.0", "1.3.6.1.4.1.2021.4.6.0", "1.3.6.1.4.1.2021.11.11.0",
			"1.3.6.1.2.1.6.9.0")},
	{ID: TemplateInterfaces, Name: "Interface counters", BuiltIn: true,
		Description: "Traffic (64-bit counters, as rates), errors and status of interfaces 1 to 4.",
		OIDs: fromCatalog(append([]string{"1.3.6.1.2.1.2.1.0"}, instances([]string{"1.3.6.1.2.1.31.1.1.1.6", "1.3.6.1.2.1.31.1.1.1.10",
			"1.3.6.1.2.1.2.2.1.14", "1.3.6.1.2.1.2.2.1.20", "1.3.6.1.2.1.2.2.1.8"}, 1, 4)...)...)},
	{ID: TemplateSwitch, Name: "Switch", BuiltIn: true,
		Description: "Uptime, bridge ports, and status and traffic of ports 1 to 8.",
		OIDs: fromCatalog(append([]string{"1.3.6.1.2.1.1.3.0", "1.3.6.1.2.1.2.1.0", "1.3.6.1.2.1.17.1.2.0"},
			instances([]string{"1.3.6.1.2.1.2.2.1.8", "1.3.6.1.2.1.31.1.1.1.6", "1.3.6.1.2.1.31.1.1.1.10"}, 1, 8)...)...)},
	{ID: TemplatePrinter, Name: "Printer", BuiltIn: true,
		Description: "Status, page count and the levels of supplies 1 to 4 (Printer-MIB, host resources).",
		OIDs: fromCatalog(append([]string{"1.3.6.1.2.1.1.3.0", "1.3.6.1.2.1.1.5.0", "1.3.6.1.2.1.25.3.2.1.5.1",
			"1.3.6.1.2.1.25.3.5.1.1.1", "1.3.6.1.2.1.43.10.2.1.4.1.1"},
			instances(withPrefix("1.3.6.1.2.1.43.11.1.1.", "6.1", "8.1", "9.1"), 1, 4)...)...)},
}

// builtIn returns the built-in template of id.
func builtIn(id string) (SNMPTemplate, bool) {
	for _, t := range builtIns {
		if t.ID == id {
			return t, true
		}
	}
	return SNMPTemplate{}, false
}
