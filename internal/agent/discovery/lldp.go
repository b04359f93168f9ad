package discovery

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gale/internal/agent/snmp"
	"gale/internal/wire/agentproto"
)

// LLDP-MIB (IEEE 802.1AB): the remote systems table, their management addresses, and the
// descriptions of the local ports they are seen on.
const (
	oidLLDPRemote     = "1.0.8802.1.1.2.1.4.1.1"
	oidLLDPManAddr    = "1.0.8802.1.1.2.1.4.2.1.3"
	oidLLDPLocPortDsc = "1.0.8802.1.1.2.1.3.7.1.4"
)

// Columns of lldpRemTable.
const (
	lldpChassisIDSubtype = 4
	lldpChassisID        = 5
	lldpPortID           = 7
	lldpPortDesc         = 8
	lldpSysName          = 9
)

// maxNeighborValues bounds the values a walk of one host's LLDP tables takes (about 60
// neighbours a table).
const maxNeighborValues = 600

// chassisSubtypes name lldpRemChassisIdSubtype's values (LldpChassisIdSubtype).
var chassisSubtypes = map[int]string{1: "chassis_component", 2: "interface_alias", 3: "port_component", 4: "mac",
	5: "network_address", 6: "interface_name", 7: "local"}

// neighbors walks the LLDP tables of an SNMP host; a host without them (most hosts) has none.
func neighbors(ctx context.Context, t agentproto.SNMPTarget) []agentproto.ScannedNeighbor {
	remote, _, err := snmp.Walk(ctx, t, oidLLDPRemote, maxNeighborValues)
	if err != nil || len(remote) == 0 {
		return nil
	}
	byKey := map[string]*agentproto.ScannedNeighbor{}
	subtype := map[string]int{}
	for _, v := range remote {
		col, key, ok := splitIndex(v.OID, oidLLDPRemote)
		if !ok {
			continue
		}
		n := byKey[key]
		if n == nil {
			n = &agentproto.ScannedNeighbor{}
			byKey[key] = n
		}
		switch col {
		case lldpChassisIDSubtype:
			if v.Number != nil {
				subtype[key] = int(*v.Number)
			}
		case lldpChassisID:
			n.ChassisID = text(v)
		case lldpPortID:
			n.PortID = text(v)
		case lldpPortDesc:
			n.PortDesc = text(v)
		case lldpSysName:
			n.SysName = text(v)
		}
	}
	if addrs, _, err := snmp.Walk(ctx, t, oidLLDPManAddr, maxNeighborValues); err == nil {
		for _, v := range addrs {
			if key, addr, ok := manAddress(v.OID); ok {
				if n := byKey[key]; n != nil && n.Address == "" {
					n.Address = addr
				}
			}
		}
	}
	ports := map[string]string{}
	if descs, _, err := snmp.Walk(ctx, t, oidLLDPLocPortDsc, maxNeighborValues); err == nil {
		for _, v := range descs {
			ports[strings.TrimPrefix(strings.TrimPrefix(v.OID, "."), oidLLDPLocPortDsc+".")] = text(v)
		}
	}
	out := make([]agentproto.ScannedNeighbor, 0, len(byKey))
	for key, n := range byKey {
		if n.ChassisID == "" {
			continue
		}
		n.ChassisIDType = chassisSubtypes[subtype[key]]
		if n.ChassisIDType == "" {
			n.ChassisIDType = "unknown"
		}
		if n.ChassisIDType == "mac" {
			n.ChassisID = macText(n.ChassisID)
		}
		localPort := strings.Split(key, ".")[1]
		n.LocalPort = localPort
		if d := ports[localPort]; d != "" {
			n.LocalPort = d
		}
		out = append(out, *n)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].LocalPort != out[j].LocalPort {
			return out[i].LocalPort < out[j].LocalPort
		}
		return out[i].ChassisID < out[j].ChassisID
	})
	return out
}

// splitIndex splits oid below table's entry into its column and the row's index
// (timeMark.localPortNum.remIndex).
func splitIndex(oid, table string) (col int, index string, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimPrefix(oid, "."), table+".")
	if !found {
		return 0, "", false
	}
	c, index, found := strings.Cut(rest, ".")
	if !found || strings.Count(index, ".") != 2 {
		return 0, "", false
	}
	col, err := strconv.Atoi(c)
	return col, index, err == nil
}

// manAddress reads a row of lldpRemManAddrTable from its OID: the remote system's index and
// its IPv4 management address (index timeMark.localPortNum.remIndex.1.4.a.b.c.d).
func manAddress(oid string) (key, addr string, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimPrefix(oid, "."), oidLLDPManAddr+".")
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 9 || parts[3] != "1" || parts[4] != "4" {
		return "", "", false
	}
	var b [4]byte
	for i, p := range parts[5:] {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 255 {
			return "", "", false
		}
		b[i] = byte(n)
	}
	return strings.Join(parts[:3], "."), netip.AddrFrom4(b).String(), true
}

func text(v agentproto.SNMPValue) string {
	switch {
	case v.Text != nil:
		return *v.Text
	case v.Number != nil:
		return fmt.Sprint(*v.Number)
	}
	return ""
}

var hexOctets = regexp.MustCompile(`^[0-9A-F]{2}( [0-9A-F]{2}){5}$`)

// macText writes a MAC address chassis ID as aa:bb:cc:dd:ee:ff. The SNMP client gives six
// octets as hex ("00 1A 2B ...") unless they happen to be printable.
func macText(s string) string {
	var b []byte
	switch {
	case hexOctets.MatchString(s):
		b, _ = hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	case len(s) == 6:
		b = []byte(s)
	default:
		return s
	}
	parts := make([]string, len(b))
	for i, x := range b {
		parts[i] = fmt.Sprintf("%02x", x)
	}
	return strings.Join(parts, ":")
}
