package discovery

import (
	"slices"
	"strings"
)

// keywordTypes type a host by words of its SNMP sysDescr or sysObjectID, in this order.
var keywordTypes = []struct {
	typ   string
	words []string
}{
	{TypeFirewall, []string{"firewall", "fortigate", "fortios", "pfsense", "opnsense", "sonicwall", "palo alto", "pan-os", "adaptive security appliance"}},
	{TypePrinter, []string{"printer", "laserjet", "jetdirect", "officejet", "imagerunner", "bizhub"}},
	{TypeAccessPoint, []string{"access point", "unifi ap", "aironet", "wireless ap"}},
	{TypeNAS, []string{"synology", "diskstation", "qnap", "readynas", "truenas", "freenas"}},
	{TypeCamera, []string{"camera", "hikvision", "axis", "dahua", "ip cam"}},
	{TypePhone, []string{"voip", "phone", "polycom", "yealink", "grandstream"}},
	{TypeSwitch, []string{"switch", "catalyst", "procurve", "aruba os-cx", "edgeswitch", "powerconnect"}},
	{TypeRouter, []string{"router", "routeros", "mikrotik", "ios xe", "ios xr", "junos", "edgeos", "vyos", "cisco ios"}},
	{TypeServer, []string{"windows server", "server", "linux", "freebsd", "vmware esxi"}},
	{TypeWorkstation, []string{"windows 10", "windows 11", "macos", "darwin"}},
}

// serverPorts are services that make a host with remote access a server.
var serverPorts = []int{25, 53, 88, 389, 636, 1433, 3306, 5432, 1521, 27017, 6379, 2049, 111}

// iotPorts are what a small embedded device opens: nothing else open makes it IoT.
var iotPorts = []int{22, 23, 80, 443, 1883, 8883, 8080, 5683}

// inferType is an asset's type from what a scan saw, by the first rule that applies:
//  1. SNMP sysDescr or sysObjectID words (keywordTypes);
//  2. ports: 9100, 515 or 631 printer; 554 camera; 5060 or 5061 phone; 5000 or 5001 with 445
//     or 139 NAS;
//  3. 3389, 445 or 135 (Windows-style hosts): server with a server service (serverPorts) or
//     a hostname hinting at one (srv, server, dc), else workstation;
//  4. the gateway of a network the scanning agent sits on: router;
//  5. MQTT (1883, 8883) or CoAP (5683), or only remote login and web ports open
//     (iotPorts) with a web port among them: IoT;
//  6. 22 open: server;
//  7. else unknown.
func inferType(ports []int, sysDescr, sysObjectID, hostname string, gateway bool) string {
	text := strings.ToLower(sysDescr + " " + sysObjectID)
	if strings.TrimSpace(text) != "" {
		for _, k := range keywordTypes {
			for _, w := range k.words {
				if strings.Contains(text, w) {
					return k.typ
				}
			}
		}
	}
	has := func(ps ...int) bool {
		for _, p := range ps {
			if slices.Contains(ports, p) {
				return true
			}
		}
		return false
	}
	host := strings.ToLower(hostname)
	switch {
	case has(9100, 515, 631):
		return TypePrinter
	case has(554):
		return TypeCamera
	case has(5060, 5061):
		return TypePhone
	case has(5000, 5001) && has(445, 139):
		return TypeNAS
	case has(3389, 445, 135):
		if has(serverPorts...) || strings.Contains(host, "srv") || strings.Contains(host, "server") || strings.HasPrefix(host, "dc") {
			return TypeServer
		}
		return TypeWorkstation
	case gateway:
		return TypeRouter
	case has(1883, 8883, 5683):
		return TypeIoT
	case len(ports) > 0 && has(80, 443, 8080) && onlyFrom(ports, iotPorts):
		return TypeIoT
	case has(22):
		return TypeServer
	}
	return TypeUnknown
}

func onlyFrom(ports, allowed []int) bool {
	for _, p := range ports {
		if !slices.Contains(allowed, p) {
			return false
		}
	}
	return true
}
