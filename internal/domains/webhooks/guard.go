package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gale/internal/platform/apperr"
)

// errBlockedTarget is the dial-time refusal of a private address.
var errBlockedTarget = errors.New("the target resolves to a private, loopback or link-local address, which webhooks may not reach " +
	"(the operator can allow it with WEBHOOK_ALLOW_PRIVATE_TARGETS=true)")

// nonPublic are ranges no webhook may reach besides those the netip predicates name:
// "this network" and carrier-grade NAT.
var nonPublic = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("100.64.0.0/10")}

// Blocked reports whether ip is loopback, private (RFC 1918), unique-local (fc00::/7),
// link-local, multicast or unspecified, also when written as an IPv4-mapped IPv6 address.
func Blocked(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// checkTarget refuses, at create and update, a URL whose host is or resolves to a blocked
// address. A name that does not resolve now is accepted: the dial-time guard checks every
// connection anyway, so a later DNS answer (rebinding included) cannot get around it.
func (s *Service) checkTarget(ctx context.Context, u *url.URL) error {
	if s.opts.AllowPrivateTargets {
		return nil
	}
	host := u.Hostname()
	refuse := apperr.Invalid("url", "the target "+host+" is a private, loopback or link-local address; webhooks reach public "+
		"addresses only unless the operator sets WEBHOOK_ALLOW_PRIVATE_TARGETS=true")
	if ip, ok := parseHostAddr(host); ok {
		if Blocked(ip) {
			return refuse
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if Blocked(a) {
			return refuse
		}
	}
	return nil
}

// parseHostAddr reads host as an IP address: an IPv6 or dotted-quad address, or any other
// IPv4 form that inet_aton accepts and so some resolvers and clients connect to (127.1,
// 0x7f000001, 2130706433, 017700000001, 0177.0.0.1).
func parseHostAddr(host string) (netip.Addr, bool) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip, true
	}
	parts := strings.Split(strings.TrimSuffix(host, "."), ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var addr uint64
	for i, p := range parts {
		n, ok := parseInetNumber(p)
		// Every part but the last is one byte; the last fills the bytes that remain.
		limit := uint64(0xff)
		if i == len(parts)-1 {
			limit = 1<<(8*(5-len(parts))) - 1
		}
		if !ok || n > limit {
			return netip.Addr{}, false
		}
		if i == len(parts)-1 {
			addr = addr<<(8*(5-len(parts))) | n
		} else {
			addr = addr<<8 | n
		}
	}
	return netip.AddrFrom4([4]byte{byte(addr >> 24), byte(addr >> 16), byte(addr >> 8), byte(addr)}), true
}

// parseInetNumber reads one part of an inet_aton address: hexadecimal after 0x, octal after
// a leading 0, decimal otherwise.
func parseInetNumber(s string) (uint64, bool) {
	base := 10
	switch {
	case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
		s, base = s[2:], 16
	case len(s) > 1 && s[0] == '0':
		s, base = s[1:], 8
	}
	if s == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(s, base, 64)
	return n, err == nil
}

// dialControl runs after name resolution, on the very address about to be connected to.
func dialControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("unexpected dial address %q", address)
	}
	if Blocked(ap.Addr()) {
		return errBlockedTarget
	}
	return nil
}

// newClient is the HTTP client of deliveries: no proxy from the environment (it would hide
// the target from the guard), the guard on every connection unless private targets are
// allowed, a 30 s budget per attempt, and redirects not followed (a 3xx is a failure).
func newClient(allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = dialControl
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: RequestTimeout,
	}
	return &http.Client{Transport: tr, Timeout: RequestTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// NewClient is the guarded HTTP client of outbound deliveries, for other senders that POST
// to user-given URLs (notification channels): no proxy, the dial-time guard unless
// allowPrivate, a 30 s budget, redirects not followed.
func NewClient(allowPrivate bool) *http.Client { return newClient(allowPrivate) }

// CheckTarget refuses (400 on field) a URL whose host is or resolves to a blocked address,
// unless allowPrivate. The dial-time guard of NewClient checks every connection anyway.
func CheckTarget(ctx context.Context, field string, u *url.URL, allowPrivate bool) error {
	s := &Service{opts: Options{AllowPrivateTargets: allowPrivate}}
	if err := s.checkTarget(ctx, u); err != nil {
		return apperr.Invalid(field, "the target "+u.Hostname()+" is a private, loopback or link-local address; only public "+
			"addresses are reached unless the operator sets WEBHOOK_ALLOW_PRIVATE_TARGETS=true")
	}
	return nil
}
