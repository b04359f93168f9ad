package inventory

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Route flags of /proc/net/route and /proc/net/ipv6_route (linux/route.h).
const (
	routeUp      = 0x1
	routeGateway = 0x2
)

// linkDetails reads each interface's state and speed from /sys/class/net under root.
func linkDetails(root string) map[string]link {
	dir := filepath.Join(root, "sys/class/net")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	links := map[string]link{}
	for _, e := range entries {
		l := link{operState: readTrimmed(dir, e.Name(), "operstate")}
		// Reading speed fails while the link is down; virtual links answer -1 (unknown).
		if speed, err := strconv.Atoi(readTrimmed(dir, e.Name(), "speed")); err == nil && speed > 0 {
			l.speedMbps = speed
		}
		links[e.Name()] = l
	}
	return links
}

// defaultGateways maps each interface to the next hops of the default routes through it,
// IPv4 first. A system without IPv6 has no ipv6_route, which is no failure.
func defaultGateways(root string) (map[string][]string, error) {
	gateways := map[string][]string{}
	add := func(iface, gateway string) {
		if !slices.Contains(gateways[iface], gateway) {
			gateways[iface] = append(gateways[iface], gateway)
		}
	}
	v4, err := os.ReadFile(filepath.Join(root, "proc/net/route"))
	if err != nil {
		return nil, err
	}
	for _, r := range parseRoutes(string(v4)) {
		add(r.iface, r.gateway)
	}
	v6, err := os.ReadFile(filepath.Join(root, "proc/net/ipv6_route"))
	if errors.Is(err, os.ErrNotExist) {
		return gateways, nil
	}
	if err != nil {
		return gateways, err
	}
	for _, r := range parseIPv6Routes(string(v6)) {
		add(r.iface, r.gateway)
	}
	return gateways, nil
}

type defaultRoute struct{ iface, gateway string }

// parseRoutes picks the default routes out of /proc/net/route: destination and mask 0, up,
// through a gateway. Addresses are hexadecimal in the kernel's memory order, which is little
// endian on the platforms the agent ships for.
func parseRoutes(content string) []defaultRoute {
	var routes []defaultRoute
	for line := range strings.Lines(content) {
		f := strings.Fields(line)
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...; the header fails below.
		if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil || flags&(routeUp|routeGateway) != routeUp|routeGateway {
			continue
		}
		raw, err := strconv.ParseUint(f[2], 16, 32)
		if err != nil {
			continue
		}
		var addr [4]byte
		binary.LittleEndian.PutUint32(addr[:], uint32(raw))
		routes = append(routes, defaultRoute{iface: f[0], gateway: netip.AddrFrom4(addr).String()})
	}
	return routes
}

// parseIPv6Routes picks the default routes out of /proc/net/ipv6_route: destination ::/0, up,
// through a gateway. The addresses are plain hexadecimal, in network order.
func parseIPv6Routes(content string) []defaultRoute {
	var routes []defaultRoute
	for line := range strings.Lines(content) {
		// dest dest_len src src_len next_hop metric refcnt use flags iface
		f := strings.Fields(line)
		if len(f) < 10 || strings.Trim(f[0], "0") != "" || f[1] != "00" {
			continue
		}
		flags, err := strconv.ParseUint(f[8], 16, 32)
		if err != nil || flags&(routeUp|routeGateway) != routeUp|routeGateway {
			continue
		}
		raw, err := hex.DecodeString(f[4])
		if err != nil || len(raw) != 16 {
			continue
		}
		routes = append(routes, defaultRoute{iface: f[9], gateway: netip.AddrFrom16([16]byte(raw)).String()})
	}
	return routes
}

// systemdStubResolver is the local address systemd-resolved answers on; the name servers it
// forwards to are listed in its own copy of resolv.conf.
const systemdStubResolver = "127.0.0.53"

// resolverServers lists the name servers of resolv.conf under root. Behind systemd-resolved's
// stub it reports the servers the stub forwards to, which are the ones that matter.
func resolverServers(root string) ([]string, error) {
	content, err := os.ReadFile(filepath.Join(root, "etc/resolv.conf"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	servers := parseResolvConf(string(content))
	if slices.Equal(servers, []string{systemdStubResolver}) {
		if upstream, err := os.ReadFile(filepath.Join(root, "run/systemd/resolve/resolv.conf")); err == nil {
			if forwarded := parseResolvConf(string(upstream)); len(forwarded) > 0 {
				return forwarded, nil
			}
		}
	}
	return servers, nil
}

// parseResolvConf returns the nameserver lines of a resolv.conf, in order.
func parseResolvConf(content string) []string {
	var servers []string
	for line := range strings.Lines(content) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" && !slices.Contains(servers, f[1]) {
			servers = append(servers, f[1])
		}
	}
	return servers
}
