// Package snmp is the agent's SNMP client: it asks SNMP agents on the agent's network for
// values, on the server's behalf (the snmp_poll command, the snmp_get and snmp_test calls),
// with SNMP v1, v2c (community) or v3 (user-based security, MD5/SHA/SHA-256 authentication,
// DES/AES/AES-256 privacy).
package snmp

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gosnmp/gosnmp"

	"gale/internal/wire/agentproto"
)

// chunk is how many OIDs one GET asks for.
const chunk = 50

// Defaults of a target that names no timeout or retries.
const (
	defaultTimeout = 2 * time.Second
	defaultRetries = 1
)

// Errors of a request, to tell an agent that does not answer from one that refuses.
var (
	// ErrTimeout: no answer in time. A v1 or v2c agent answers a community it does not
	// accept with silence, so a wrong community ends here too.
	ErrTimeout = errors.New("no answer from the SNMP agent in time")
	// ErrAuth: a v3 agent refused the user, its passwords or its security level.
	ErrAuth = errors.New("the SNMP agent refused the credentials")
)

// Get asks one SNMP agent for the values of oids (GETs in chunks of up to 50); a value the
// agent lacks is left out.
func Get(ctx context.Context, t agentproto.SNMPTarget, oids []string) ([]agentproto.SNMPValue, error) {
	g, err := connect(ctx, t)
	if err != nil {
		return nil, err
	}
	defer g.Conn.Close()
	out := make([]agentproto.SNMPValue, 0, len(oids))
	for start := 0; start < len(oids); start += chunk {
		vals, err := getChunk(g, oids[start:min(start+chunk, len(oids))])
		if err != nil {
			return nil, err
		}
		out = append(out, vals...)
	}
	return out, nil
}

// errWalkFull stops a walk that reached its bound.
var errWalkFull = errors.New("walk bound reached")

// Walk asks one SNMP agent for the values under root (GETBULK with v2c and v3, GETNEXT with
// v1), at most max of them; full says the walk stopped at max.
func Walk(ctx context.Context, t agentproto.SNMPTarget, root string, max int) (vals []agentproto.SNMPValue, full bool, err error) {
	g, err := connect(ctx, t)
	if err != nil {
		return nil, false, err
	}
	defer g.Conn.Close()
	collect := func(pdu gosnmp.SnmpPDU) error {
		if len(vals) >= max {
			return errWalkFull
		}
		if v, ok := Value(pdu); ok {
			vals = append(vals, v)
		}
		return nil
	}
	root = "." + strings.TrimPrefix(root, ".")
	if g.Version == gosnmp.Version1 {
		err = g.Walk(root, collect)
	} else {
		err = g.BulkWalk(root, collect)
	}
	if errors.Is(err, errWalkFull) {
		return vals, true, nil
	}
	if err != nil {
		return nil, false, classify(err)
	}
	return vals, false, nil
}

// connect prepares a client for t; its connection is closed by the caller.
func connect(ctx context.Context, t agentproto.SNMPTarget) (*gosnmp.GoSNMP, error) {
	port := t.Port
	if port == 0 {
		port = 161
	}
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("port %d is out of range", t.Port)
	}
	g := &gosnmp.GoSNMP{
		Target:    t.Host,
		Port:      uint16(port),
		Context:   ctx,
		Timeout:   defaultTimeout,
		Retries:   defaultRetries,
		MaxOids:   chunk,
		Community: t.Community,
	}
	if t.TimeoutMs > 0 {
		g.Timeout = time.Duration(t.TimeoutMs) * time.Millisecond
	}
	if t.Retries > 0 {
		g.Retries = t.Retries
	}
	switch t.Version {
	case agentproto.SNMPv1:
		g.Version = gosnmp.Version1
	case agentproto.SNMPv2c, "":
		g.Version = gosnmp.Version2c
	case agentproto.SNMPv3:
		if t.V3 == nil {
			return nil, errors.New("a v3 target needs a user")
		}
		sp, flags, err := usm(*t.V3)
		if err != nil {
			return nil, err
		}
		g.Version, g.SecurityModel, g.MsgFlags, g.SecurityParameters = gosnmp.Version3, gosnmp.UserSecurityModel, flags, sp
	default:
		return nil, fmt.Errorf("unknown SNMP version %q", t.Version)
	}
	if err := g.Connect(); err != nil {
		return nil, fmt.Errorf("connect to %s: %w", t.Host, err)
	}
	return g, nil
}

var authProtocols = map[string]gosnmp.SnmpV3AuthProtocol{"MD5": gosnmp.MD5, "SHA": gosnmp.SHA, "SHA-256": gosnmp.SHA256}

var privProtocols = map[string]gosnmp.SnmpV3PrivProtocol{"DES": gosnmp.DES, "AES": gosnmp.AES, "AES-256": gosnmp.AES256}

func usm(a agentproto.SNMPv3Auth) (*gosnmp.UsmSecurityParameters, gosnmp.SnmpV3MsgFlags, error) {
	sp := &gosnmp.UsmSecurityParameters{UserName: a.Username, AuthenticationProtocol: gosnmp.NoAuth, PrivacyProtocol: gosnmp.NoPriv}
	flags := gosnmp.NoAuthNoPriv
	if a.AuthProtocol != "" {
		p, ok := authProtocols[a.AuthProtocol]
		if !ok {
			return nil, 0, fmt.Errorf("unknown authentication protocol %q", a.AuthProtocol)
		}
		sp.AuthenticationProtocol, sp.AuthenticationPassphrase, flags = p, a.AuthPassword, gosnmp.AuthNoPriv
	}
	if a.PrivProtocol != "" {
		if a.AuthProtocol == "" {
			return nil, 0, errors.New("privacy needs an authentication protocol")
		}
		p, ok := privProtocols[a.PrivProtocol]
		if !ok {
			return nil, 0, fmt.Errorf("unknown privacy protocol %q", a.PrivProtocol)
		}
		sp.PrivacyProtocol, sp.PrivacyPassphrase, flags = p, a.PrivPassword, gosnmp.AuthPriv
	}
	return sp, flags, nil
}

// getChunk GETs oids. A v1 agent answers a GET naming an OID it lacks with noSuchName for
// the whole request: that OID is dropped and the rest asked again.
func getChunk(g *gosnmp.GoSNMP, oids []string) ([]agentproto.SNMPValue, error) {
	ask := make([]string, len(oids))
	for i, o := range oids {
		ask[i] = "." + strings.TrimPrefix(o, ".")
	}
	for len(ask) > 0 {
		pkt, err := g.Get(ask)
		if err != nil {
			return nil, classify(err)
		}
		if pkt.Error == gosnmp.NoSuchName && int(pkt.ErrorIndex) >= 1 && int(pkt.ErrorIndex) <= len(ask) {
			ask = append(ask[:pkt.ErrorIndex-1], ask[pkt.ErrorIndex:]...)
			continue
		}
		if pkt.Error != gosnmp.NoError {
			return nil, fmt.Errorf("the SNMP agent answered %s", pkt.Error)
		}
		out := make([]agentproto.SNMPValue, 0, len(pkt.Variables))
		for _, v := range pkt.Variables {
			if val, ok := Value(v); ok {
				out = append(out, val)
			}
		}
		return out, nil
	}
	return nil, nil
}

// classify wraps err in ErrTimeout or ErrAuth when it is one.
func classify(err error) error {
	switch {
	case errors.Is(err, gosnmp.ErrUnknownUsername):
		return fmt.Errorf("%w: unknown user", ErrAuth)
	case errors.Is(err, gosnmp.ErrWrongDigest), strings.Contains(err.Error(), "not authentic"):
		return fmt.Errorf("%w: wrong authentication password or protocol", ErrAuth)
	case errors.Is(err, gosnmp.ErrDecryption):
		return fmt.Errorf("%w: wrong privacy password or protocol", ErrAuth)
	case errors.Is(err, gosnmp.ErrUnknownSecurityLevel):
		return fmt.Errorf("%w: the user does not allow this security level", ErrAuth)
	case errors.Is(err, gosnmp.ErrMaxRetriesExceeded), errors.Is(err, context.DeadlineExceeded), strings.Contains(err.Error(), "timeout"):
		return fmt.Errorf("%w (%v)", ErrTimeout, err)
	case errors.Is(err, syscall.ECONNREFUSED):
		// ICMP port unreachable: nothing listens on the port, so the device does not answer
		// SNMP there, as when it stays silent.
		return fmt.Errorf("%w (nothing listens on the port: %v)", ErrTimeout, err)
	}
	return err
}

// Kind names the SNMPError kind of an error of Get.
func Kind(err error) string {
	switch {
	case errors.Is(err, ErrTimeout):
		return agentproto.SNMPErrTimeout
	case errors.Is(err, ErrAuth):
		return agentproto.SNMPErrAuth
	}
	return agentproto.SNMPErrFailed
}

// Value turns a variable into its wire form; false for the exceptions (noSuchObject,
// noSuchInstance, endOfMibView) and NULL.
func Value(v gosnmp.SnmpPDU) (agentproto.SNMPValue, bool) {
	out := agentproto.SNMPValue{OID: strings.TrimPrefix(v.Name, ".")}
	num := func(f float64) { out.Number = &f }
	text := func(s string) { out.Text = &s }
	switch v.Type {
	case gosnmp.Integer:
		out.Type = "integer"
		num(float64(gosnmp.ToBigInt(v.Value).Int64()))
	case gosnmp.Counter32, gosnmp.Gauge32, gosnmp.TimeTicks, gosnmp.Uinteger32, gosnmp.Counter64:
		out.Type = map[gosnmp.Asn1BER]string{gosnmp.Counter32: "counter32", gosnmp.Gauge32: "gauge32",
			gosnmp.TimeTicks: "timeticks", gosnmp.Uinteger32: "uinteger32", gosnmp.Counter64: "counter64"}[v.Type]
		f, _ := new(big.Float).SetInt(gosnmp.ToBigInt(v.Value)).Float64()
		num(f)
	case gosnmp.OpaqueFloat:
		out.Type = "opaque_float"
		if f, ok := v.Value.(float32); ok {
			num(float64(f))
		}
	case gosnmp.OpaqueDouble:
		out.Type = "opaque_double"
		if f, ok := v.Value.(float64); ok {
			num(f)
		}
	case gosnmp.OctetString:
		out.Type = "octet_string"
		b, _ := v.Value.([]byte)
		text(OctetText(b))
	case gosnmp.ObjectIdentifier:
		out.Type = "oid"
		s, _ := v.Value.(string)
		text(strings.TrimPrefix(s, "."))
	case gosnmp.IPAddress:
		out.Type = "ip_address"
		s, _ := v.Value.(string)
		text(s)
	case gosnmp.Boolean:
		out.Type = "boolean"
		num(float64(gosnmp.ToBigInt(v.Value).Int64()))
	case gosnmp.NoSuchObject, gosnmp.NoSuchInstance, gosnmp.EndOfMibView, gosnmp.Null:
		return out, false
	default:
		out.Type = strings.ToLower(v.Type.String())
		if b, ok := v.Value.([]byte); ok {
			text(OctetText(b))
		} else {
			text(fmt.Sprint(v.Value))
		}
	}
	return out, true
}

// OctetText is an octet string as text: itself when it is printable UTF-8, otherwise its
// bytes in hex separated by spaces ("00 1A 2B"), as net-snmp prints a Hex-STRING.
func OctetText(b []byte) string {
	if utf8.Valid(b) && strings.IndexFunc(string(b), func(r rune) bool { return !unicode.IsPrint(r) && !unicode.IsSpace(r) }) < 0 {
		return string(b)
	}
	h := strings.ToUpper(hex.EncodeToString(b))
	var sb strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(h[i : i+2])
	}
	return sb.String()
}
