package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"gale/internal/domains/discovery"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// discoveryLab is a real agent and the caller that drives discovery.
type discoveryLab struct {
	node   *apptest.Env
	admin  apptest.Caller
	agent  *streamAgent
	orgID  string
	siteID string
}

func (l *discoveryLab) profile(t *testing.T, name string, body map[string]any) discovery.DiscoveryProfile {
	t.Helper()
	body["siteId"], body["name"], body["agentDeviceId"] = l.siteID, name, l.agent.deviceID
	var p discovery.DiscoveryProfile
	l.node.Must(201, l.admin, "POST", "/api/v1/discovery/profiles", body).JSON(t, &p)
	return p
}

func (l *discoveryLab) scan(t *testing.T, profileID string) discovery.DiscoveryJob {
	t.Helper()
	var j discovery.DiscoveryJob
	l.node.Must(202, l.admin, "POST", "/api/v1/discovery/scan", map[string]any{"profileId": profileID}).JSON(t, &j)
	return j
}

func (l *discoveryLab) job(t *testing.T, id string) discovery.DiscoveryJob {
	t.Helper()
	var j discovery.DiscoveryJob
	l.node.Must(200, l.admin, "GET", "/api/v1/discovery/jobs/"+id, nil).JSON(t, &j)
	return j
}

// finished waits for a job to end and returns it.
func (l *discoveryLab) finished(t *testing.T, id string) discovery.DiscoveryJob {
	t.Helper()
	var j discovery.DiscoveryJob
	waitFor(t, 90*time.Second, "discovery job "+id+" to end", func() bool {
		j = l.job(t, id)
		return j.Status != discovery.JobScheduled && j.Status != discovery.JobRunning
	})
	return j
}

func (l *discoveryLab) assets(t *testing.T) map[string]discovery.DiscoveryAsset {
	t.Helper()
	var list struct{ Data []discovery.DiscoveryAsset }
	l.node.Must(200, l.admin, "GET", "/api/v1/discovery/assets?limit=500&orgId="+l.orgID, nil).JSON(t, &list)
	out := map[string]discovery.DiscoveryAsset{}
	for _, x := range list.Data {
		out[x.IP] = x
	}
	return out
}

func listenOn(t *testing.T, addr string) int {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// A real agent scans a loopback range (hosts and open ports found), learns the MAC address
// of a peer in a network namespace and links it to the managed device with that address, and
// a scan cancelled while it runs writes nothing. Profiles name the real agent: the managed
// device simulated over HTTP is online too, and more recently heard from.
func TestDiscoveryOnARealAgent(t *testing.T) {
	node := apptest.New(t)
	l := &discoveryLab{node: node, admin: node.Admin(), agent: startAgentWith(t, node, nil)}
	var dev struct {
		OrgID  string `json:"orgId"`
		SiteID string `json:"siteId"`
	}
	node.Must(200, l.admin, "GET", "/api/v1/devices/"+l.agent.deviceID, nil).JSON(t, &dev)
	l.orgID, l.siteID = dev.OrgID, dev.SiteID

	t.Run("loopback", func(t *testing.T) {
		web, ssh := listenOn(t, "127.0.0.2:0"), listenOn(t, "127.0.0.3:0")
		p := l.profile(t, "Loopback", map[string]any{"subnets": []string{"127.0.0.0/29"}, "methods": []string{"ping", "port_scan", "dns"},
			"ports": []int{web, ssh}, "timeoutMs": 500})
		j := l.finished(t, l.scan(t, p.ID).ID)
		if j.Status != discovery.JobCompleted || j.HostsTotal != 6 || j.HostsScanned != 6 || j.HostsFound != 6 {
			t.Fatalf("job = %+v, want completed with 6 hosts of 127.0.0.1-6", j)
		}
		got := l.assets(t)
		if x := got["127.0.0.2"]; !slices.Equal(x.OpenPorts, []int{web}) || x.LastJobID == nil || *x.LastJobID != j.ID {
			t.Errorf("127.0.0.2 = %+v, want port %d open", x, web)
		}
		if x := got["127.0.0.3"]; !slices.Equal(x.OpenPorts, []int{ssh}) {
			t.Errorf("127.0.0.3 = %+v, want port %d open", x, ssh)
		}
		if x := got["127.0.0.6"]; x.ID == "" || len(x.OpenPorts) != 0 {
			t.Errorf("127.0.0.6 = %+v, want found with no port open", x)
		}
	})

	t.Run("namespace", func(t *testing.T) {
		mac, peer := vethPeer(t)
		managed := node.EnrollAgent(apptest.Tenant{OrgID: l.orgID, Partner: l.admin}, "peer-box")
		node.Must(204, apptest.Caller{Token: managed.AuthToken}, "POST", "/api/v1/agents/"+managed.DeviceID+"/inventory",
			agentproto.Inventory{Hostname: "peer-box", Network: []agentproto.NetworkInterface{{Name: "eth0", MACAddress: mac,
				Addresses: []string{peer + "/30"}, Up: true}}})
		p := l.profile(t, "Namespace", map[string]any{"subnets": []string{peer}, "methods": []string{"ping", "arp"}, "timeoutMs": 1000})
		j := l.finished(t, l.scan(t, p.ID).ID)
		if j.Status != discovery.JobCompleted || j.HostsFound != 1 {
			t.Fatalf("job = %+v", j)
		}
		x := l.assets(t)[peer]
		if x.MAC != mac || x.Status != discovery.AssetLinked || x.LinkedID == nil || *x.LinkedID != managed.DeviceID {
			t.Errorf("asset = %+v, want MAC %s linked to %s", x, mac, managed.DeviceID)
		}
		var topo discovery.DiscoveryTopology
		node.Must(200, l.admin, "GET", "/api/v1/discovery/topology?siteId="+l.siteID, nil).JSON(t, &topo)
		if !slices.ContainsFunc(topo.Edges, func(e discovery.DiscoveryTopologyEdge) bool {
			return e.From == "asset:"+x.ID && strings.HasPrefix(e.To, "subnet:")
		}) {
			t.Errorf("the peer sits on no subnet: %+v", topo.Edges)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		ports := make([]int, 1024)
		for i := range ports {
			ports[i] = 20000 + i
		}
		p := l.profile(t, "Slow", map[string]any{"subnets": []string{"127.0.4.0/22"}, "methods": []string{"ping", "port_scan"}, "ports": ports,
			"concurrency": 1, "timeoutMs": 100})
		j := l.scan(t, p.ID)
		if j.Status != discovery.JobRunning {
			t.Fatalf("job = %+v, want running: the agent holds a live channel", j)
		}
		var cancelled discovery.DiscoveryJob
		node.Must(200, l.admin, "POST", "/api/v1/discovery/jobs/"+j.ID+"/cancel", nil).JSON(t, &cancelled)
		var cmd struct {
			Status string `json:"status"`
		}
		waitFor(t, 30*time.Second, "the scan's command to end", func() bool {
			node.Must(200, l.admin, "GET", "/api/v1/devices/"+l.agent.deviceID+"/commands/"+*j.CommandID, nil).JSON(t, &cmd)
			return cmd.Status != "queued" && cmd.Status != "sent"
		})
		if got := l.job(t, j.ID); got.Status != discovery.JobCancelled || got.HostsFound != 0 {
			t.Errorf("job = %+v, want cancelled with nothing found", got)
		}
		for ip, x := range l.assets(t) {
			if strings.HasPrefix(ip, "127.0.4.") || strings.HasPrefix(ip, "127.0.5.") || (x.LastJobID != nil && *x.LastJobID == j.ID) {
				t.Errorf("asset %s from the cancelled scan", ip)
			}
		}
	})
}

// vethPeer makes a network namespace joined to this one by a veth pair, removed when the test
// ends, and returns the MAC and address of its end. It skips the test where namespaces
// cannot be made.
func vethPeer(t *testing.T) (mac, peer string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if err := exec.Command("ip", "netns", "list").Run(); err != nil {
		t.Skipf("ip netns is not available: %v", err)
	}
	n := os.Getpid() % 200
	ns, host, inner := fmt.Sprintf("galedisc%d", n), fmt.Sprintf("gdh%d", n), fmt.Sprintf("gdp%d", n)
	local, peer := fmt.Sprintf("10.213.%d.1/30", n), fmt.Sprintf("10.213.%d.2", n)
	run := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	_ = run("netns", "delete", ns)
	_ = run("link", "delete", host)
	if err := run("netns", "add", ns); err != nil {
		t.Skipf("cannot make a network namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = run("link", "delete", host)
		_ = run("netns", "delete", ns)
	})
	for _, args := range [][]string{
		{"link", "add", host, "type", "veth", "peer", "name", inner},
		{"link", "set", inner, "netns", ns},
		{"addr", "add", local, "dev", host},
		{"link", "set", host, "up"},
		{"-n", ns, "addr", "add", peer + "/30", "dev", inner},
		{"-n", ns, "link", "set", inner, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	} {
		if err := run(args...); err != nil {
			t.Skipf("cannot join the namespace: %v", err)
		}
	}
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/sys/class/net/"+inner+"/address").Output()
	if err != nil {
		t.Fatalf("read the peer's MAC address: %v", err)
	}
	return strings.TrimSpace(string(out)), peer
}
