package discovery

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gale/internal/platform/apperr"
	"gale/internal/platform/clock"
	"gale/internal/wire/agentproto"
)

// checker collects validation failures.
type checker struct{ details []apperr.Detail }

func (c *checker) fail(field, format string, args ...any) {
	c.details = append(c.details, apperr.Detail{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) err() error {
	if len(c.details) == 0 {
		return nil
	}
	return apperr.InvalidFields(c.details)
}

// definition is what a profile scans, as stored.
type definition struct {
	Subnets     []string
	Excludes    []string
	Methods     []string
	Ports       []int
	SNMP        *DiscoverySNMPCredentials
	DeepScan    bool
	Schedule    DiscoverySchedule
	TimeoutMs   int
	Concurrency int
}

// parsePrefix reads an IPv4 CIDR or a single address (a /32), masked to its network.
func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return p, fmt.Errorf("%q is not a CIDR such as 192.168.1.0/24", s)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return p, fmt.Errorf("%q is not an IPv4 address or CIDR", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if !p.Addr().Is4() {
		return p, fmt.Errorf("%q is IPv6: only IPv4 networks are scanned", s)
	}
	return p.Masked(), nil
}

// prefixSize is how many addresses a prefix holds.
func prefixSize(p netip.Prefix) int { return 1 << (32 - p.Bits()) }

// addressCount is how many addresses the subnets cover; subnets do not overlap.
func addressCount(subnets []string) int {
	n := 0
	for _, s := range subnets {
		if p, err := netip.ParsePrefix(s); err == nil {
			n += prefixSize(p)
		}
	}
	return n
}

// checkName applies the rule of a profile's name (1 to 255 characters) to every caller.
func checkName(name string) error {
	if name == "" || utf8.RuneCountInString(name) > 255 {
		return apperr.Invalid("name", "a name has 1 to 255 characters")
	}
	return nil
}

var methodNames = []string{agentproto.ScanPing, agentproto.ScanARP, agentproto.ScanPortScan, agentproto.ScanSNMP, agentproto.ScanDNS}

// check validates and normalizes d: subnets and excludes masked, methods and ports without
// repeats, defaults filled in. c collects the failures.
func (d *definition) check(c *checker) {
	d.checkSubnets(c)
	if len(d.Excludes) > MaxExcludes {
		c.fail("excludeIps", "at most %d excludes", MaxExcludes)
	}
	for i, s := range d.Excludes {
		p, err := parsePrefix(s)
		if err != nil {
			c.fail(fmt.Sprintf("excludeIps[%d]", i), "%s", err.Error())
			continue
		}
		d.Excludes[i] = p.String()
	}
	if len(d.Methods) == 0 {
		d.Methods = slices.Clone(DefaultMethods)
	}
	seen := map[string]bool{}
	methods := d.Methods[:0]
	for i, m := range d.Methods {
		switch {
		case !slices.Contains(methodNames, m):
			c.fail(fmt.Sprintf("methods[%d]", i), "a method is one of %s", strings.Join(methodNames, ", "))
		case !seen[m]:
			seen[m] = true
			methods = append(methods, m)
		}
	}
	d.Methods = methods
	if seen[agentproto.ScanSNMP] && d.SNMP == nil {
		c.fail("snmp", "the snmp method needs SNMP credentials")
	}
	if d.SNMP != nil {
		checkSNMP(c, d.SNMP)
	}
	d.checkPorts(c)
	d.checkSchedule(c)
	if d.TimeoutMs < MinTimeoutMs || d.TimeoutMs > MaxTimeoutMs {
		c.fail("timeoutMs", "from %d to %d", MinTimeoutMs, MaxTimeoutMs)
	}
	if d.Concurrency < 1 || d.Concurrency > MaxConcurrency {
		c.fail("concurrency", "from 1 to %d", MaxConcurrency)
	}
}

func (d *definition) checkSubnets(c *checker) {
	switch {
	case len(d.Subnets) == 0:
		c.fail("subnets", "name at least one subnet")
		return
	case len(d.Subnets) > MaxSubnets:
		c.fail("subnets", "at most %d subnets", MaxSubnets)
		return
	}
	var prefixes []netip.Prefix
	total := 0
	for i, s := range d.Subnets {
		p, err := parsePrefix(s)
		if err != nil {
			c.fail(fmt.Sprintf("subnets[%d]", i), "%s", err.Error())
			continue
		}
		for j, q := range prefixes {
			if q.Overlaps(p) {
				c.fail(fmt.Sprintf("subnets[%d]", i), "%s overlaps subnets[%d] (%s)", p, j, q)
			}
		}
		prefixes = append(prefixes, p)
		d.Subnets[i] = p.String()
		total += prefixSize(p)
	}
	switch {
	case !d.DeepScan && total > MaxAddresses:
		c.fail("subnets", "%s: the subnets cover %d addresses, more than %d (a /22); set deepScan for up to %d (a /16)",
			CodeSubnetTooLarge, total, MaxAddresses, MaxDeepAddresses)
	case total > MaxDeepAddresses:
		c.fail("subnets", "%s: the subnets cover %d addresses, more than %d (a /16) even with deepScan", CodeSubnetTooLarge, total,
			MaxDeepAddresses)
	}
}

func (d *definition) checkPorts(c *checker) {
	if d.Ports == nil {
		d.Ports = slices.Clone(DefaultPorts)
	}
	if len(d.Ports) == 0 || len(d.Ports) > MaxPorts {
		c.fail("ports", "name 1 to %d ports", MaxPorts)
		return
	}
	seen := map[int]bool{}
	ports := d.Ports[:0]
	for i, p := range d.Ports {
		switch {
		case p < 1 || p > 65535:
			c.fail(fmt.Sprintf("ports[%d]", i), "a port is from 1 to 65535")
		case !seen[p]:
			seen[p] = true
			ports = append(ports, p)
		}
	}
	slices.Sort(ports)
	d.Ports = ports
}

func (d *definition) checkSchedule(c *checker) {
	s := &d.Schedule
	switch s.Type {
	case ScheduleManual:
		if s.Cron != "" || s.IntervalMinutes != 0 {
			c.fail("schedule", "a manual schedule takes no cron or intervalMinutes")
		}
	case ScheduleCron:
		if s.IntervalMinutes != 0 {
			c.fail("schedule.intervalMinutes", "a cron schedule takes no intervalMinutes")
		}
		if _, err := clock.ParseCron(s.Cron, ""); err != nil {
			c.fail("schedule.cron", "%s", err.Error())
		}
	case ScheduleInterval:
		if s.Cron != "" {
			c.fail("schedule.cron", "an interval schedule takes no cron")
		}
		if s.IntervalMinutes < MinIntervalMinutes || s.IntervalMinutes > MaxIntervalMinutes {
			c.fail("schedule.intervalMinutes", "from %d to %d minutes", MinIntervalMinutes, MaxIntervalMinutes)
		}
	default:
		c.fail("schedule.type", "manual, cron or interval")
	}
}

// nextRun is the schedule's first run after now in the zone tz; nil for a manual schedule.
func (s DiscoverySchedule) nextRun(now time.Time, tz string) (*time.Time, error) {
	var next time.Time
	switch s.Type {
	case ScheduleInterval:
		next = now.Add(time.Duration(s.IntervalMinutes) * time.Minute)
	case ScheduleCron:
		loc, err := time.LoadLocation(tz)
		if err != nil || tz == "" || tz == "Local" {
			loc = time.UTC
		}
		sched, err := clock.ParseCron(s.Cron, loc.String())
		if err != nil {
			return nil, apperr.Invalid("schedule.cron", err.Error())
		}
		next = sched.Next(now)
	default:
		return nil, nil
	}
	next = next.UTC().Truncate(time.Microsecond)
	return &next, nil
}

var (
	authProtocols = []string{"MD5", "SHA", "SHA-256"}
	privProtocols = []string{"DES", "AES", "AES-256"}
)

func checkSNMP(c *checker, s *DiscoverySNMPCredentials) {
	if s.Port == 0 {
		s.Port = 161
	}
	if s.Port < 1 || s.Port > 65535 {
		c.fail("snmp.port", "a port is from 1 to 65535")
	}
	switch s.Version {
	case agentproto.SNMPv1, agentproto.SNMPv2c:
		if s.Community == "" {
			c.fail("snmp.community", "%s needs a community", s.Version)
		}
		if s.Username != "" || s.AuthProtocol != "" || s.PrivProtocol != "" {
			c.fail("snmp", "%s takes a community, not a v3 user", s.Version)
		}
	case agentproto.SNMPv3:
		if s.Username == "" {
			c.fail("snmp.username", "v3 needs a username")
		}
		if s.Community != "" {
			c.fail("snmp.community", "v3 takes a user, not a community")
		}
		if s.AuthProtocol != "" && (!slices.Contains(authProtocols, s.AuthProtocol) || len(s.AuthPassword) < 8) {
			c.fail("snmp.authPassword", "authProtocol is one of %s, with an authPassword of at least 8 characters",
				strings.Join(authProtocols, ", "))
		}
		if s.PrivProtocol != "" {
			if s.AuthProtocol == "" {
				c.fail("snmp.privProtocol", "privacy needs authentication (authProtocol) too")
			}
			if !slices.Contains(privProtocols, s.PrivProtocol) || len(s.PrivPassword) < 8 {
				c.fail("snmp.privPassword", "privProtocol is one of %s, with a privPassword of at least 8 characters",
					strings.Join(privProtocols, ", "))
			}
		}
	default:
		c.fail("snmp.version", "v1, v2c or v3")
	}
}

// target is the credentials as the agent takes them.
func (s *DiscoverySNMPCredentials) target(timeoutMs int) *agentproto.SNMPTarget {
	if s == nil {
		return nil
	}
	t := &agentproto.SNMPTarget{Port: s.Port, Version: s.Version, Community: s.Community, TimeoutMs: timeoutMs, Retries: 1}
	if s.Version == agentproto.SNMPv3 {
		t.V3 = &agentproto.SNMPv3Auth{Username: s.Username, AuthProtocol: s.AuthProtocol, AuthPassword: s.AuthPassword,
			PrivProtocol: s.PrivProtocol, PrivPassword: s.PrivPassword}
	}
	return t
}
