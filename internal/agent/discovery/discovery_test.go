package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/agent/capability"
	"gale/internal/agent/snmp/snmpdtest"
	"gale/internal/wire/agentproto"
)

func listen(t *testing.T, addr string) int {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// A scan of a loopback range finds every address (each refuses or accepts connections) and
// the ports listening on each.
func TestScanLoopbackRange(t *testing.T) {
	web := listen(t, "127.0.0.2:0")
	db := listen(t, "127.0.0.3:0")
	both := listen(t, "127.0.0.3:0")
	closed := listen(t, "127.0.0.4:0")
	res, err := Scan(context.Background(), agentproto.NetworkScan{Subnets: []string{"127.0.0.0/29"}, Excludes: []string{"127.0.0.5"},
		Methods: []string{agentproto.ScanPing, agentproto.ScanPortScan, agentproto.ScanARP}, Ports: []int{web, db, both, 9},
		TimeoutMs: 500, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	if res.HostsTotal != 5 || res.HostsScanned != 5 {
		t.Errorf("total %d scanned %d, want 5 (127.0.0.1-6 without .5)", res.HostsTotal, res.HostsScanned)
	}
	got := map[string]string{}
	for _, h := range res.Hosts {
		got[h.IP] = fmt.Sprint(h.OpenPorts)
	}
	want := map[string]string{"127.0.0.1": "[]", "127.0.0.2": fmt.Sprint([]int{web}), "127.0.0.3": fmt.Sprint(sorted(db, both)),
		"127.0.0.4": "[]", "127.0.0.6": "[]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("hosts = %v, want %v (port %d of .4 is another address's)", got, want, closed)
	}
	if len(res.Routes) == 0 {
		t.Errorf("no routes: %v", res.Errors)
	}
}

func sorted(a, b int) []int {
	if a > b {
		return []int{b, a}
	}
	return []int{a, b}
}

// A scan ends when its context does, saying how far it got.
func TestScanStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ports := make([]int, 200)
	for i := range ports {
		ports[i] = 1000 + i
	}
	// 192.0.2.0/24 (TEST-NET-1) does not answer: every connect waits for its timeout.
	_, err := Scan(ctx, agentproto.NetworkScan{Subnets: []string{"192.0.2.0/28"}, Methods: []string{agentproto.ScanPortScan}, Ports: ports,
		TimeoutMs: 2000, Concurrency: 1})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "of 14 addresses") {
		t.Errorf("err = %v, want the deadline after part of 14 addresses", err)
	}
}

func TestTargets(t *testing.T) {
	cases := []struct {
		subnets, excludes []string
		want              string
	}{
		{[]string{"10.0.0.0/30"}, nil, "[10.0.0.1 10.0.0.2]"},
		{[]string{"10.0.0.0/31", "10.0.0.9"}, nil, "[10.0.0.0 10.0.0.1 10.0.0.9]"},
		{[]string{"10.0.0.0/29"}, []string{"10.0.0.2/31", "10.0.0.6"}, "[10.0.0.1 10.0.0.4 10.0.0.5]"},
		{[]string{"10.0.0.5/30"}, nil, "[10.0.0.5 10.0.0.6]"},
	}
	for _, c := range cases {
		got, err := Targets(c.subnets, c.excludes, 100)
		if err != nil || fmt.Sprint(got) != c.want {
			t.Errorf("Targets(%v, %v) = %v, %v; want %s", c.subnets, c.excludes, got, err, c.want)
		}
	}
	if _, err := Targets([]string{"10.0.0.0/24"}, nil, 100); err == nil {
		t.Error("254 addresses passed a limit of 100")
	}
	if _, err := Targets([]string{"fd00::/120"}, nil, 100); err == nil {
		t.Error("an IPv6 subnet passed")
	}
}

func TestNeighbourAndRouteTables(t *testing.T) {
	arp := `IP address       HW type     Flags       HW address            Mask     Device
192.168.1.1      0x1         0x2         00:11:22:AA:BB:CC     *        eth0
192.168.1.7      0x1         0x0         00:00:00:00:00:00     *        eth0
`
	got := map[netip.Addr]string{}
	parseARP(arp, got)
	parseNeigh([]byte(`[{"dst":"192.168.1.9","dev":"eth0","lladdr":"02:fc:00:00:00:05","state":["STALE"]},
		{"dst":"192.168.1.10","dev":"eth0","state":["FAILED"]},{"dst":"fd00::1","lladdr":"02:fc:00:00:00:06","state":["REACHABLE"]}]`), got)
	if fmt.Sprint(got) != "map[192.168.1.1:00:11:22:aa:bb:cc 192.168.1.9:02:fc:00:00:00:05]" {
		t.Errorf("neighbours = %v", got)
	}
	routes := parseRoutes(`Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	00000000	0101A8C0	0003	0	0	100	00000000	0	0	0
eth0	0001A8C0	00000000	0001	0	0	100	00FFFFFF	0	0	0
eth1	0000000A	00000000	0000	0	0	100	000000FF	0	0	0
`)
	if fmt.Sprint(routes) != "[{0.0.0.0/0 192.168.1.1 eth0} {192.168.1.0/24  eth0}]" {
		t.Errorf("routes = %v", routes)
	}
}

// An SNMP host that keeps LLDP-MIB's remote systems table (a real snmpd serving the table)
// reports its neighbours: the local port by its description, a MAC chassis ID written as a
// MAC address, another chassis ID as sent, and the IPv4 management address.
func TestLLDPNeighboursOfAnSNMPHost(t *testing.T) {
	const rem, man, loc = "1.0.8802.1.1.2.1.4.1.1", "1.0.8802.1.1.2.1.4.2.1.3", "1.0.8802.1.1.2.1.3.7.1.4"
	d := snmpdtest.Start(t,
		snmpdtest.Entry{OID: rem + ".4.0.3.1", Type: "integer", Value: "4"},
		snmpdtest.Entry{OID: rem + ".5.0.3.1", Type: "octet", Value: "00 1a 2b 3c 4d 5e"},
		snmpdtest.Entry{OID: rem + ".7.0.3.1", Type: "string", Value: "Gi0/1"},
		snmpdtest.Entry{OID: rem + ".8.0.3.1", Type: "string", Value: "uplink to access"},
		snmpdtest.Entry{OID: rem + ".9.0.3.1", Type: "string", Value: "core-sw1"},
		snmpdtest.Entry{OID: rem + ".4.0.7.2", Type: "integer", Value: "7"},
		snmpdtest.Entry{OID: rem + ".5.0.7.2", Type: "string", Value: "ap-7f"},
		snmpdtest.Entry{OID: rem + ".9.0.7.2", Type: "string", Value: "lobby-ap"},
		snmpdtest.Entry{OID: man + ".0.3.1.1.4.192.168.10.1", Type: "integer", Value: "2"},
		snmpdtest.Entry{OID: loc + ".3", Type: "string", Value: "Gi1/0/3"},
		snmpdtest.Entry{OID: loc + ".7", Type: "string", Value: "Gi1/0/7"})
	target := d.V2c()
	res, err := Scan(context.Background(), agentproto.NetworkScan{Subnets: []string{"127.0.0.1/32"},
		Methods: []string{agentproto.ScanPing, agentproto.ScanSNMP}, SNMP: &target, TimeoutMs: 2000, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hosts) != 1 || res.Hosts[0].SysName == "" {
		t.Fatalf("hosts = %+v, want 127.0.0.1 with its SNMP system group", res.Hosts)
	}
	want := []agentproto.ScannedNeighbor{
		{LocalPort: "Gi1/0/3", ChassisID: "00:1a:2b:3c:4d:5e", ChassisIDType: "mac", PortID: "Gi0/1", PortDesc: "uplink to access",
			SysName: "core-sw1", Address: "192.168.10.1"},
		{LocalPort: "Gi1/0/7", ChassisID: "ap-7f", ChassisIDType: "local", SysName: "lobby-ap"},
	}
	if got := res.Hosts[0].Neighbors; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("neighbours = %+v\nwant %+v", got, want)
	}
}

// A running scan reports its progress as lines of live output, each at the offset the last
// one ended, and only when it moved.
func TestScanReportsProgress(t *testing.T) {
	var mu sync.Mutex
	var got []agentproto.CommandOutput
	ctx := capability.WithOutput(context.Background(), func(o agentproto.CommandOutput) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, o)
	})
	var p Progress
	p.Total.Store(254)
	p.Scanned.Store(40)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() { reportProgress(ctx, "cmd-1", &p, done); close(finished) }()
	await := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			mu.Lock()
			have := len(got)
			mu.Unlock()
			if have >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d progress lines after 10 s, want %d", have, n)
			}
		}
	}
	await(1)
	p.Scanned.Store(120)
	await(2)
	close(done)
	<-finished
	first := "scanned 40 of 254\n"
	want := []agentproto.CommandOutput{{CommandID: "cmd-1", Stdout: []byte(first)},
		{CommandID: "cmd-1", StdoutOffset: int64(len(first)), Stdout: []byte("scanned 120 of 254\n")}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("progress output %+v, want %+v", got, want)
	}
}
