// Package discovery is the agent's network_scan command: it probes the addresses of the
// subnets it is given (ICMP or TCP liveness, a TCP connect scan of the ports), reads the
// neighbour (ARP) table for their MAC addresses, asks SNMP agents for their system group and
// the resolver for their names, and reports what answered with the agent's own routes. The
// neighbour table and routes are read on Linux; liveness, ports, SNMP and names everywhere.
package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gale/internal/agent/capability"
	"gale/internal/agent/netcheck"
	"gale/internal/agent/snmp"
	"gale/internal/wire/agentproto"
)

// Limits of a scan.
const (
	// MaxAddresses is the most addresses one scan probes.
	MaxAddresses = 65536
	// maxResultBytes keeps the encoded result within what the server takes of a result.
	maxResultBytes = 7 << 20
	// portWorkers is how many ports of one address are probed at once.
	portWorkers = 16
	// maxPorts is the most ports one scan probes per address.
	maxPorts = 1024
)

// The SNMP system group: sysDescr, sysObjectID, sysName.
const (
	oidSysDescr    = "1.3.6.1.2.1.1.1.0"
	oidSysObjectID = "1.3.6.1.2.1.1.2.0"
	oidSysName     = "1.3.6.1.2.1.1.5.0"
)

// Register adds the network_scan command.
func Register(reg *capability.Registry) {
	reg.Command(agentproto.CommandNetworkScan, func(ctx context.Context, c agentproto.Command) agentproto.CommandResult {
		var p agentproto.NetworkScan
		if err := json.Unmarshal(c.Payload, &p); err != nil {
			return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: "network_scan: the payload could not be read: " + err.Error()}
		}
		var progress Progress
		done := make(chan struct{})
		go reportProgress(ctx, c.ID, &progress, done)
		res, err := ScanWithProgress(ctx, p, &progress)
		close(done)
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return agentproto.CommandResult{Status: agentproto.ResultTimedOut, Error: err.Error()}
		case errors.Is(err, context.Canceled):
			return agentproto.CommandResult{Status: agentproto.ResultCancelled, Error: err.Error()}
		case err != nil:
			return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: err.Error()}
		}
		raw, err := json.Marshal(res)
		if err != nil {
			return agentproto.CommandResult{Status: agentproto.ResultFailed, Error: err.Error()}
		}
		return agentproto.CommandResult{Status: agentproto.ResultCompleted, Result: raw}
	})
}

// Targets are the addresses of subnets without excludes, in order: a subnet's network and
// broadcast addresses are left out but for a /31 or /32. More than limit addresses is an error.
func Targets(subnets, excludes []string, limit int) ([]netip.Addr, error) {
	var out []netip.Addr
	var skip []netip.Prefix
	for _, e := range excludes {
		p, err := prefix(e)
		if err != nil {
			return nil, err
		}
		skip = append(skip, p)
	}
	seen := map[netip.Addr]bool{}
	for _, s := range subnets {
		p, err := prefix(s)
		if err != nil {
			return nil, err
		}
		first, last := p.Addr(), lastAddr(p)
		if p.Bits() < 31 {
			first, last = first.Next(), last.Prev()
		}
		for a := first; a.IsValid() && a.Compare(last) <= 0; a = a.Next() {
			if seen[a] || slices.ContainsFunc(skip, func(x netip.Prefix) bool { return x.Contains(a) }) {
				continue
			}
			if len(out) == limit {
				return nil, fmt.Errorf("the subnets hold more than %d addresses", limit)
			}
			seen[a] = true
			out = append(out, a)
		}
	}
	return out, nil
}

func prefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 address", s)
		}
		return netip.PrefixFrom(a, 32), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 CIDR", s)
	}
	return p.Masked(), nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	n := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	n |= 1<<(32-p.Bits()) - 1
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// scanner holds what one scan needs.
type scanner struct {
	p       agentproto.NetworkScan
	timeout time.Duration
	methods map[string]bool
	ports   []int
}

// Scan probes the payload's addresses, concurrency at a time, and returns the hosts that
// answered. It ends early, with the context's error, when ctx ends.
func Scan(ctx context.Context, p agentproto.NetworkScan) (agentproto.NetworkScanResult, error) {
	return ScanWithProgress(ctx, p, &Progress{})
}

// Progress is how far a scan is: addresses probed of those to probe.
type Progress struct {
	Scanned, Total atomic.Int64
}

// progressEvery is how often a running scan reports its progress.
const progressEvery = 2 * time.Second

// reportProgress sends the scan's progress as lines of its live output ("scanned N of M"),
// whenever it moved, until done.
func reportProgress(ctx context.Context, commandID string, p *Progress, done <-chan struct{}) {
	sink := capability.OutputFrom(ctx)
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	var offset, last int64 = 0, -1
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, total := p.Scanned.Load(), p.Total.Load()
		if n == last || total == 0 {
			continue
		}
		last = n
		line := fmt.Appendf(nil, "scanned %d of %d\n", n, total)
		sink(agentproto.CommandOutput{CommandID: commandID, StdoutOffset: offset, Stdout: line})
		offset += int64(len(line))
	}
}

// ScanWithProgress is Scan, keeping progress up to date as addresses are probed.
func ScanWithProgress(ctx context.Context, p agentproto.NetworkScan, progress *Progress) (agentproto.NetworkScanResult, error) {
	targets, err := Targets(p.Subnets, p.Excludes, MaxAddresses)
	if err != nil {
		return agentproto.NetworkScanResult{}, err
	}
	progress.Total.Store(int64(len(targets)))
	s := scanner{p: p, timeout: time.Duration(p.TimeoutMs) * time.Millisecond, methods: map[string]bool{}}
	if s.timeout <= 0 {
		s.timeout = time.Second
	}
	for _, m := range p.Methods {
		s.methods[m] = true
	}
	if s.methods[agentproto.ScanPortScan] || !s.methods[agentproto.ScanPing] {
		s.ports = p.Ports[:min(len(p.Ports), maxPorts)]
	}
	res := agentproto.NetworkScanResult{HostsTotal: len(targets), Hosts: []agentproto.ScannedHost{}}
	hosts := make([]*agentproto.ScannedHost, len(targets))
	scanned := &progress.Scanned
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(max(p.Concurrency, 1), len(targets)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if h := s.probe(ctx, targets[i]); h != nil {
					hosts[i] = h
				}
				if ctx.Err() == nil {
					scanned.Add(1)
				}
			}
		}()
	}
feed:
	for i := range targets {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	res.HostsScanned = int(scanned.Load())
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("the scan stopped after %d of %d addresses: %w", res.HostsScanned, res.HostsTotal, err)
	}
	if s.methods[agentproto.ScanARP] {
		neigh, err := Neighbours(ctx)
		if err != nil {
			res.Errors = append(res.Errors, "neighbour table: "+err.Error())
		}
		for i, a := range targets {
			mac, ok := neigh[a]
			switch {
			case !ok:
			case hosts[i] != nil:
				hosts[i].MAC = mac
			default:
				hosts[i] = &agentproto.ScannedHost{IP: a.String(), MAC: mac, Via: "arp"}
			}
		}
	}
	found := make([]*agentproto.ScannedHost, 0, len(hosts))
	for _, h := range hosts {
		if h != nil {
			found = append(found, h)
		}
	}
	s.identify(ctx, found)
	if routes, err := Routes(); err != nil {
		res.Errors = append(res.Errors, "routes: "+err.Error())
	} else {
		res.Routes = routes
	}
	size := 1024
	for _, h := range found {
		b, _ := json.Marshal(h)
		if size += len(b) + 1; size > maxResultBytes {
			res.Truncated = true
			res.Errors = append(res.Errors, fmt.Sprintf("the result was cut at %d of %d hosts found", len(res.Hosts), len(found)))
			break
		}
		res.Hosts = append(res.Hosts, *h)
	}
	return res, ctx.Err()
}

// probe tells whether a answers: an ICMP (or TCP) ping, or any port answering, open or
// refused. It returns the host with its open ports, or nil.
func (s *scanner) probe(ctx context.Context, a netip.Addr) *agentproto.ScannedHost {
	if ctx.Err() != nil {
		return nil
	}
	h := &agentproto.ScannedHost{IP: a.String()}
	alive := false
	if s.methods[agentproto.ScanPing] {
		if r, err := netcheck.Ping(ctx, h.IP, 1, 0, s.timeout); err == nil && r.Received > 0 {
			alive, h.Via = true, r.Method
			if len(r.RTTs) > 0 {
				h.RTTMs = float64(r.RTTs[0].Microseconds()) / 1000
			}
		}
	}
	if len(s.ports) > 0 {
		open, answered := s.connectScan(ctx, a)
		if answered && !alive {
			alive, h.Via = true, "tcp"
		}
		if s.methods[agentproto.ScanPortScan] {
			h.OpenPorts = open
		}
	}
	if !alive {
		return nil
	}
	return h
}

// connectScan tries a TCP connection to each port: open ports are returned in order;
// answered says the host answered at all (a port open or refusing).
func (s *scanner) connectScan(ctx context.Context, a netip.Addr) (open []int, answered bool) {
	ports := make(chan int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	dialer := net.Dialer{Timeout: s.timeout}
	for range min(portWorkers, len(s.ports)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for port := range ports {
				conn, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), strconv.Itoa(port)))
				mu.Lock()
				switch {
				case err == nil:
					conn.Close()
					open, answered = append(open, port), true
				case errors.Is(err, syscall.ECONNREFUSED):
					answered = true
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, p := range s.ports {
		select {
		case ports <- p:
		case <-ctx.Done():
			break feed
		}
	}
	close(ports)
	wg.Wait()
	sort.Ints(open)
	return open, answered
}

// identify asks each host for its name (reverse DNS), SNMP system group and LLDP neighbours, as
// the methods say.
func (s *scanner) identify(ctx context.Context, hosts []*agentproto.ScannedHost) {
	if !s.methods[agentproto.ScanDNS] && (!s.methods[agentproto.ScanSNMP] || s.p.SNMP == nil) {
		return
	}
	work := make(chan *agentproto.ScannedHost)
	var wg sync.WaitGroup
	for range min(max(s.p.Concurrency, 1), len(hosts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for h := range work {
				if s.methods[agentproto.ScanDNS] {
					h.Hostname = reverseName(ctx, h.IP, s.timeout)
				}
				if s.methods[agentproto.ScanSNMP] && s.p.SNMP != nil {
					s.sysGroup(ctx, h)
				}
			}
		}()
	}
	for _, h := range hosts {
		if ctx.Err() != nil {
			break
		}
		work <- h
	}
	close(work)
	wg.Wait()
}

func reverseName(ctx context.Context, ip string, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	names, err := net.DefaultResolver.LookupAddr(ctx, ip)
	if err != nil || len(names) == 0 {
		return ""
	}
	return strings.TrimSuffix(names[0], ".")
}

func (s *scanner) sysGroup(ctx context.Context, h *agentproto.ScannedHost) {
	t := *s.p.SNMP
	t.Host = h.IP
	if t.TimeoutMs == 0 {
		t.TimeoutMs = int(s.timeout / time.Millisecond)
	}
	vals, err := snmp.Get(ctx, t, []string{oidSysDescr, oidSysObjectID, oidSysName})
	if err != nil || len(vals) == 0 {
		return
	}
	h.Neighbors = neighbors(ctx, t)
	for _, v := range vals {
		if v.Text == nil {
			continue
		}
		switch strings.TrimPrefix(v.OID, ".") {
		case oidSysDescr:
			h.SysDescr = *v.Text
		case oidSysObjectID:
			h.SysObjectID = strings.TrimPrefix(*v.Text, ".")
		case oidSysName:
			h.SysName = *v.Text
		}
	}
}
