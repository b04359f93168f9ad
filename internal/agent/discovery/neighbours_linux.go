package discovery

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"gale/internal/wire/agentproto"
)

// Route flags of /proc/net/route (linux/route.h).
const (
	routeUp      = 0x1
	routeGateway = 0x2
)

// Neighbours returns the IPv4 neighbour table: MAC address (lower case) by address. It reads
// `ip -j neigh` where ip is installed, and /proc/net/arp besides; incomplete and failed
// entries are left out.
func Neighbours(ctx context.Context) (map[netip.Addr]string, error) {
	out := map[netip.Addr]string{}
	raw, procErr := os.ReadFile("/proc/net/arp")
	if procErr == nil {
		parseARP(string(raw), out)
	}
	if path, err := exec.LookPath("ip"); err == nil {
		if b, err := exec.CommandContext(ctx, path, "-4", "-j", "neigh", "show").Output(); err == nil {
			parseNeigh(b, out)
			return out, nil
		}
	}
	return out, procErr
}

// parseARP reads /proc/net/arp: IP address, HW type, flags, HW address, mask, device.
func parseARP(content string, into map[netip.Addr]string) {
	for line := range strings.Lines(content) {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		a, err := netip.ParseAddr(f[0])
		flags, ferr := strconv.ParseUint(strings.TrimPrefix(f[2], "0x"), 16, 32)
		// ATF_COM (0x2): the entry is complete.
		if err != nil || ferr != nil || flags&0x2 == 0 {
			continue
		}
		if mac, ok := hardware(f[3]); ok {
			into[a] = mac
		}
	}
}

// parseNeigh reads the JSON of `ip -j neigh`.
func parseNeigh(b []byte, into map[netip.Addr]string) {
	var entries []struct {
		Dst    string   `json:"dst"`
		LLAddr string   `json:"lladdr"`
		State  []string `json:"state"`
	}
	if json.Unmarshal(b, &entries) != nil {
		return
	}
	for _, e := range entries {
		a, err := netip.ParseAddr(e.Dst)
		if err != nil || !a.Is4() {
			continue
		}
		failed := false
		for _, s := range e.State {
			failed = failed || s == "FAILED" || s == "INCOMPLETE"
		}
		if mac, ok := hardware(e.LLAddr); ok && !failed {
			into[a] = mac
		}
	}
}

func hardware(s string) (string, bool) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 || hw.String() == "00:00:00:00:00:00" {
		return "", false
	}
	return hw.String(), true
}

// Routes returns the IPv4 routes of /proc/net/route that are up.
func Routes() ([]agentproto.ScanRoute, error) {
	raw, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return nil, err
	}
	return parseRoutes(string(raw)), nil
}

// parseRoutes reads /proc/net/route. Addresses are hexadecimal in the kernel's memory order,
// little endian on the platforms the agent ships for.
func parseRoutes(content string) []agentproto.ScanRoute {
	var out []agentproto.ScanRoute
	addr := func(h string) (netip.Addr, bool) {
		v, err := strconv.ParseUint(h, 16, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(v))
		return netip.AddrFrom4(b), true
	}
	for line := range strings.Lines(content) {
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...; the header fails below.
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		dst, ok1 := addr(f[1])
		gw, ok2 := addr(f[2])
		mask, ok3 := addr(f[7])
		if err != nil || !ok1 || !ok2 || !ok3 || flags&routeUp == 0 {
			continue
		}
		m := mask.As4()
		bits, _ := net.IPv4Mask(m[0], m[1], m[2], m[3]).Size()
		r := agentproto.ScanRoute{Subnet: netip.PrefixFrom(dst, bits).Masked().String(), Interface: f[0]}
		if flags&routeGateway != 0 {
			r.Gateway = gw.String()
		}
		out = append(out, r)
	}
	return out
}
