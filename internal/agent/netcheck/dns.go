package netcheck

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"gale/internal/wire/agentproto"
)

// maxAnswers bounds the answers a DNS check reports.
const maxAnswers = 20

func dnsCheck(ctx context.Context, c agentproto.MonitorCheck) agentproto.MonitorCheckResult {
	cfg := c.Config
	res := net.DefaultResolver
	if cfg.Nameserver != "" {
		addr := nameserverAddr(cfg.Nameserver)
		res = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}}
	}
	name := c.Target
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	rtype := strings.ToUpper(cfg.RecordType)
	if rtype == "" {
		rtype = "A"
	}
	start := time.Now()
	answers, err := lookup(ctx, res, rtype, name)
	took := time.Since(start)
	if err != nil {
		return failed("%s lookup of %s: %v", rtype, c.Target, err)
	}
	if len(answers) == 0 {
		return failed("no %s record for %s", rtype, c.Target)
	}
	details := map[string]any{"recordType": rtype, "answers": answers[:min(len(answers), maxAnswers)]}
	r := agentproto.MonitorCheckResult{Status: agentproto.MonitorOnline, ResponseMs: ms(took), Details: details}
	if cfg.ExpectedValue != "" && !matches(rtype, answers, cfg.ExpectedValue) {
		r.Status, r.Error = agentproto.MonitorOffline, fmt.Sprintf("no %s answer matches %q", rtype, cfg.ExpectedValue)
	}
	return r
}

// nameserverAddr is host[:port] with port 53 when none is given.
func nameserverAddr(ns string) string {
	if _, _, err := net.SplitHostPort(ns); err == nil {
		return ns
	}
	return net.JoinHostPort(strings.Trim(ns, "[]"), "53")
}

func lookup(ctx context.Context, res *net.Resolver, rtype, name string) ([]string, error) {
	var out []string
	switch rtype {
	case "A", "AAAA":
		network := "ip4"
		if rtype == "AAAA" {
			network = "ip6"
		}
		ips, err := res.LookupIP(ctx, network, name)
		for _, ip := range ips {
			out = append(out, ip.String())
		}
		return out, err
	case "MX":
		mxs, err := res.LookupMX(ctx, name)
		for _, mx := range mxs {
			out = append(out, strconv.Itoa(int(mx.Pref))+" "+mx.Host)
		}
		return out, err
	case "CNAME":
		cname, err := res.LookupCNAME(ctx, name)
		if err == nil && !strings.EqualFold(cname, name) {
			out = append(out, cname)
		}
		return out, err
	case "TXT":
		return res.LookupTXT(ctx, name)
	case "NS":
		nss, err := res.LookupNS(ctx, name)
		for _, ns := range nss {
			out = append(out, ns.Host)
		}
		return out, err
	}
	return nil, fmt.Errorf("unknown record type %s", rtype)
}

// matches reports whether an answer is the expected value: equal in any case with trailing
// dots ignored (an MX answer by its host or "pref host"), or for TXT containing it.
func matches(rtype string, answers []string, want string) bool {
	norm := func(s string) string { return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".") }
	w := norm(want)
	for _, a := range answers {
		switch {
		case rtype == "TXT" && strings.Contains(a, want):
			return true
		case norm(a) == w:
			return true
		case rtype == "MX" && norm(a[strings.IndexByte(a, ' ')+1:]) == w:
			return true
		}
	}
	return false
}
