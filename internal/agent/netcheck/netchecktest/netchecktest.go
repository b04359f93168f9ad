// Package netchecktest serves what network checks are tested against: a DNS server with
// fixed records and a TCP listener that greets with a banner, on the loopback.
package netchecktest

import (
	"net"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// Record is an answer the DNS server gives: Type A, AAAA, MX, CNAME, TXT or NS; Value an
// address, "pref host" for MX, a name, or the text.
type Record struct {
	Name, Type, Value string
}

// DNS serves records over UDP on the loopback until the test ends and returns its address
// (host:port). A name it does not know gets NXDOMAIN.
func DNS(t testing.TB, records []Record) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out, err := answer(buf[:n], records); err == nil {
				_, _ = pc.WriteTo(out, addr)
			}
		}
	}()
	return pc.LocalAddr().String()
}

var types = map[string]dnsmessage.Type{"A": dnsmessage.TypeA, "AAAA": dnsmessage.TypeAAAA, "MX": dnsmessage.TypeMX,
	"CNAME": dnsmessage.TypeCNAME, "TXT": dnsmessage.TypeTXT, "NS": dnsmessage.TypeNS}

func answer(query []byte, records []Record) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	known := false
	var rrs []dnsmessage.Resource
	for _, r := range records {
		if !strings.EqualFold(strings.TrimSuffix(r.Name, "."), name) {
			continue
		}
		known = true
		if types[r.Type] != q.Type {
			continue
		}
		rr := dnsmessage.Resource{Header: dnsmessage.ResourceHeader{Name: q.Name, Type: q.Type, Class: dnsmessage.ClassINET, TTL: 60}}
		switch r.Type {
		case "A":
			var a [4]byte
			copy(a[:], net.ParseIP(r.Value).To4())
			rr.Body = &dnsmessage.AResource{A: a}
		case "AAAA":
			var a [16]byte
			copy(a[:], net.ParseIP(r.Value).To16())
			rr.Body = &dnsmessage.AAAAResource{AAAA: a}
		case "MX":
			pref, host, _ := strings.Cut(r.Value, " ")
			var n uint16
			for _, c := range pref {
				n = n*10 + uint16(c-'0')
			}
			rr.Body = &dnsmessage.MXResource{Pref: n, MX: dnsmessage.MustNewName(fqdn(host))}
		case "CNAME":
			rr.Body = &dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(fqdn(r.Value))}
		case "TXT":
			rr.Body = &dnsmessage.TXTResource{TXT: []string{r.Value}}
		case "NS":
			rr.Body = &dnsmessage.NSResource{NS: dnsmessage.MustNewName(fqdn(r.Value))}
		}
		rrs = append(rrs, rr)
	}
	rcode := dnsmessage.RCodeSuccess
	if !known {
		rcode = dnsmessage.RCodeNameError
	}
	msg := dnsmessage.Message{Header: dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired,
		RecursionAvailable: true, RCode: rcode}, Questions: []dnsmessage.Question{q}, Answers: rrs}
	return msg.Pack()
}

func fqdn(s string) string {
	if strings.HasSuffix(s, ".") {
		return s
	}
	return s + "."
}

// BannerServer accepts TCP connections on addr ("127.0.0.1:0" for any free port) until
// closed, greeting each with banner, and returns its listener (Addr for the port; Close stops
// it: the target goes down).
func BannerServer(t testing.TB, addr, banner string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(banner))
			_ = c.Close()
		}
	}()
	return ln
}
