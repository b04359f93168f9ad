package agentproto

import (
	"net/netip"
	"strings"
)

// Tunnels ride streams (internal/wire/streams), one TCP connection a stream.
//
// StreamTunnelDial, args TunnelDialArgs: the agent resolves host, checks every address it
// resolves to against the device-local rule (IsDeviceLocal) unless allowDeviceLocal is set,
// and dials one of the checked addresses (never the name again, so a second answer of the
// resolver cannot swap the address). It then speaks first with a header: one line of JSON
// ended by "\n", TunnelDialHeader. A header with "error" refuses the connection (codes
// ErrTargetForbidden, ErrTargetUnreachable, ErrInvalid); the agent then half-closes and waits
// for the server's FIN or RESET. Without an error, the bytes after the header are the target's
// and the server's bytes go to the target; each side's FIN half-closes that direction of the
// TCP connection, and a RESET closes it.
const StreamTunnelDial = "tunnel.dial"

// TunnelDialArgs are the args of StreamTunnelDial.
type TunnelDialArgs struct {
	Host string `json:"host"`
	Port int    `json:"port"`
	// AllowDeviceLocal lets the agent dial loopback and link-local addresses: the server sets
	// it only when the tunnel names such an address itself and the operator allowed it.
	AllowDeviceLocal bool `json:"allowDeviceLocal,omitempty"`
}

// TunnelDialHeader is the agent's header line of a tunnel stream.
type TunnelDialHeader struct {
	Error *CallError `json:"error,omitempty"`
	// Address is the IP and port the agent connected to.
	Address string `json:"address,omitempty"`
}

// Errors of a tunnel stream's header.
const (
	// ErrTargetForbidden: the target is, or resolves to, an address of the device itself
	// (loopback, link-local, unspecified) and the tunnel was not allowed to reach it.
	ErrTargetForbidden = "TARGET_FORBIDDEN"
	// ErrTargetUnreachable: the name did not resolve, or no address accepted the connection.
	ErrTargetUnreachable = "TARGET_UNREACHABLE"
)

// IsDeviceLocal reports whether a tunnel to ip would reach the device itself or its link
// rather than a machine of its network: loopback (127.0.0.0/8, ::1), link-local
// (169.254.0.0/16, fe80::/10, and their multicast) and the unspecified address, which dials
// the device itself. IPv4 addresses mapped into IPv6 count as the IPv4 address.
func IsDeviceLocal(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsUnspecified()
}

// IsDeviceLocalName reports whether host names the device itself before any lookup: an IP
// address for which IsDeviceLocal holds, "localhost" or a name under .localhost (RFC 6761),
// in any case and with or without the final dot.
func IsDeviceLocalName(host string) bool {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return IsDeviceLocal(ip)
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	return name == "localhost" || strings.HasSuffix(name, ".localhost")
}
