package snmp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"gale/internal/agent/capability"
	"gale/internal/agent/snmp"
	"gale/internal/agent/snmp/snmpdtest"
	"gale/internal/wire/agentproto"
)

// moving reports whether a value changes between two reads (counters, time).
func moving(v agentproto.SNMPValue) bool {
	return strings.HasPrefix(v.Type, "counter") || v.Type == "timeticks"
}

func compareWithWalk(t *testing.T, d *snmpdtest.Daemon, target agentproto.SNMPTarget, args []string) {
	t.Helper()
	for _, root := range []string{"1.3.6.1.2.1.1", "1.3.6.1.2.1.2.2.1"} {
		want := d.Walk(t, args, root)
		if len(want) == 0 {
			t.Fatalf("snmpwalk %s returned nothing", root)
		}
		oids := make([]string, 0, len(want))
		for oid := range want {
			oids = append(oids, oid)
		}
		got, err := snmp.Get(context.Background(), target, oids)
		if err != nil {
			t.Fatalf("Get(%s) = %v", root, err)
		}
		if len(got) != len(want) {
			t.Fatalf("Get(%s) returned %d values, snmpwalk %d", root, len(got), len(want))
		}
		for _, v := range got {
			if moving(v) {
				if v.Number == nil {
					t.Errorf("%s (%s) has no number", v.OID, v.Type)
				}
				continue
			}
			if g := snmpdtest.Format(v); g != want[v.OID] {
				t.Errorf("%s (%s) = %q, snmpwalk says %q", v.OID, v.Type, g, want[v.OID])
			}
		}
	}
}

func TestGetV2cEqualsSnmpwalk(t *testing.T) {
	d := snmpdtest.Start(t)
	compareWithWalk(t, d, d.V2c(), d.V2cArgs())
}

func TestGetV3AuthPrivEqualsSnmpwalk(t *testing.T) {
	d := snmpdtest.Start(t)
	compareWithWalk(t, d, d.V3(), d.V3Args())
}

// SHA-256 authentication with AES-256 privacy (net-snmp's key extension) reads what
// snmpwalk reads.
func TestGetV3SHA256AES256EqualsSnmpwalk(t *testing.T) {
	d := snmpdtest.Start(t)
	compareWithWalk(t, d, d.V3SHA256(), d.V3SHA256Args())
}

func TestGetLeavesOutMissingAndChunks(t *testing.T) {
	d := snmpdtest.Start(t)
	d.SetValue(t, 42)
	oids := []string{snmpdtest.PassOID}
	for i := range 120 {
		oids = append(oids, fmt.Sprintf("1.3.6.1.4.1.99999.%d.0", i))
	}
	oids = append(oids, "1.3.6.1.2.1.1.5.0")
	for _, version := range []string{agentproto.SNMPv1, agentproto.SNMPv2c} {
		target := d.V2c()
		target.Version = version
		got, err := snmp.Get(context.Background(), target, oids)
		if err != nil {
			t.Fatalf("%s: Get = %v", version, err)
		}
		if len(got) != 2 || got[0].OID != snmpdtest.PassOID || *got[0].Number != 42 || got[0].Type != "integer" ||
			got[1].OID != "1.3.6.1.2.1.1.5.0" || got[1].Text == nil {
			t.Fatalf("%s: Get = %+v, want the pass value 42 and sysName", version, got)
		}
	}
}

func TestErrorsTellTimeoutFromAuthentication(t *testing.T) {
	d := snmpdtest.Start(t)
	wrongCommunity := d.V2c()
	wrongCommunity.Community, wrongCommunity.TimeoutMs, wrongCommunity.Retries = "nope", 300, 0
	_, err := snmp.Get(context.Background(), wrongCommunity, []string{"1.3.6.1.2.1.1.5.0"})
	if !errors.Is(err, snmp.ErrTimeout) || snmp.Kind(err) != agentproto.SNMPErrTimeout {
		t.Fatalf("wrong community: err = %v, want ErrTimeout", err)
	}
	cases := map[string]func(*agentproto.SNMPv3Auth){
		"unknown user":        func(a *agentproto.SNMPv3Auth) { a.Username = "nobody" },
		"wrong auth password": func(a *agentproto.SNMPv3Auth) { a.AuthPassword = "wrongpassword" },
		"wrong auth protocol": func(a *agentproto.SNMPv3Auth) { a.AuthProtocol = "MD5" },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			target := d.V3()
			target.TimeoutMs, target.Retries = 1000, 0
			change(target.V3)
			_, err := snmp.Get(context.Background(), target, []string{"1.3.6.1.2.1.1.5.0"})
			if !errors.Is(err, snmp.ErrAuth) || snmp.Kind(err) != agentproto.SNMPErrAuth {
				t.Fatalf("err = %v, want ErrAuth", err)
			}
		})
	}
}

// A UDP port with no SNMP agent answers with ICMP port unreachable, which the socket reports
// as "connection refused": the device does not answer SNMP there, a timeout like silence.
func TestNoAgentOnThePortIsATimeout(t *testing.T) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := conn.LocalAddr().(*net.UDPAddr).Port
	conn.Close()
	target := agentproto.SNMPTarget{Host: "127.0.0.1", Port: port, Version: agentproto.SNMPv2c, Community: "public", TimeoutMs: 500}
	_, err = snmp.Get(context.Background(), target, []string{"1.3.6.1.2.1.1.5.0"})
	if !errors.Is(err, snmp.ErrTimeout) || snmp.Kind(err) != agentproto.SNMPErrTimeout {
		t.Fatalf("no agent on the port: err = %v (kind %s), want ErrTimeout", err, snmp.Kind(err))
	}
}

func TestPollReportsPerTarget(t *testing.T) {
	d := snmpdtest.Start(t)
	d.SetValue(t, 7)
	bad := d.V2c()
	bad.Community, bad.TimeoutMs, bad.Retries = "nope", 300, 0
	reg := capability.New()
	snmp.Register(reg)
	payload, _ := json.Marshal(agentproto.SNMPPoll{Targets: []agentproto.SNMPPollTarget{
		{ID: "good", Target: d.V3(), OIDs: []string{snmpdtest.PassOID}},
		{ID: "bad", Target: bad, OIDs: []string{snmpdtest.PassOID}},
	}})
	res := reg.Answer(context.Background(), agentproto.Call{ID: "1", Method: agentproto.CallSNMPPoll, Args: payload})
	if res.Error != nil {
		t.Fatalf("snmp_poll = %+v", res.Error)
	}
	var out agentproto.SNMPPollResult
	if err := json.Unmarshal(res.Result, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 2 || out.Results[0].ID != "good" || len(out.Results[0].Values) != 1 || *out.Results[0].Values[0].Number != 7 ||
		out.Results[1].ID != "bad" || out.Results[1].Error == nil || out.Results[1].Error.Kind != agentproto.SNMPErrTimeout {
		t.Fatalf("snmp_poll result = %+v", out)
	}
}

func TestCallSNMPTestAnswersSystemGroup(t *testing.T) {
	d := snmpdtest.Start(t)
	reg := capability.New()
	snmp.Register(reg)
	args, _ := json.Marshal(agentproto.SNMPGet{Target: d.V2c()})
	res := reg.Answer(context.Background(), agentproto.Call{ID: "1", Method: agentproto.CallSNMPTest, Args: args})
	var out agentproto.SNMPGetResult
	if res.Error != nil || json.Unmarshal(res.Result, &out) != nil || out.Error != nil || len(out.Values) != 6 {
		t.Fatalf("snmp_test = %+v (%s)", res, res.Result)
	}
	if out.Values[5].OID != "1.3.6.1.2.1.1.6.0" || *out.Values[5].Text != "Gale test lab" {
		t.Fatalf("sysLocation = %+v", out.Values[5])
	}
}

func TestOctetText(t *testing.T) {
	for in, want := range map[string]string{"printer 1": "printer 1", "\x00\x1a\x2b": "00 1A 2B", "": ""} {
		if got := snmp.OctetText([]byte(in)); got != want {
			t.Errorf("OctetText(%q) = %q, want %q", in, got, want)
		}
	}
}
