package netcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPingLoopback(t *testing.T) {
	res, err := Ping(context.Background(), "127.0.0.1", 3, 56, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 3 || res.Received != 3 || len(res.RTTs) != 3 {
		t.Fatalf("loopback ping: %+v", res)
	}
	if res.Method != PingICMP && res.Method != PingTCP {
		t.Fatalf("method %q", res.Method)
	}
}

func TestPingConcurrentPingsKeepTheirOwnReplies(t *testing.T) {
	errs := make(chan error, 8)
	results := make(chan PingResult, 8)
	for range 8 {
		go func() {
			res, err := Ping(context.Background(), "127.0.0.1", 2, 16, 2*time.Second)
			errs <- err
			results <- res
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if res := <-results; res.Received != 2 || res.Sent != 2 {
			t.Fatalf("concurrent ping: %+v", res)
		}
	}
}

func TestPingUnansweredIsNoError(t *testing.T) {
	// 203.0.113.0/24 is reserved for documentation: nothing answers.
	res, err := Ping(context.Background(), "203.0.113.7", 1, 8, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 1 || res.Received != 0 {
		t.Fatalf("unanswered ping: %+v", res)
	}
}

func TestPingUnresolvableHost(t *testing.T) {
	if _, err := Ping(context.Background(), "no-such-host.invalid", 1, 8, time.Second); err == nil {
		t.Fatal("an unresolvable host pinged")
	}
}

func TestTCPPingCountsRefusedAsAnswer(t *testing.T) {
	// Loopback: 443/80/22 are refused or accepted; either is an answer.
	res := tcpPing(context.Background(), net.ParseIP("127.0.0.1"), 2, time.Second)
	if res.Method != PingTCP || res.Sent != 2 || res.Received != 2 {
		t.Fatalf("tcp probe: %+v", res)
	}
}

// Where the system allows neither unprivileged ICMP sockets (ping_group_range leaves the user
// out) nor raw ones (no CAP_NET_RAW), a ping probes with TCP and says so. The test runs itself
// again as nobody inside a network namespace whose ping sockets are off.
func TestPingFallsBackToTCPWithoutICMPSockets(t *testing.T) {
	if os.Getenv("GALE_PING_CHILD") != "" {
		res, err := Ping(context.Background(), "127.0.0.1", 2, 16, time.Second)
		if err != nil {
			res.Note = "error: " + err.Error()
		}
		out, _ := json.Marshal(res)
		fmt.Println(string(out))
		return
	}
	for _, tool := range []string{"ip", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian packages iproute2, util-linux)", tool)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	ns := fmt.Sprintf("galetest-ping-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	for _, args := range [][]string{{"ip", "link", "set", "lo", "up"}, {"sysctl", "-qw", "net.ipv4.ping_group_range=1 0"}} {
		if out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", args, err, out)
		}
	}
	// The test binary, where nobody may run it.
	dir, err := os.MkdirTemp("", "galetest-ping-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "netcheck.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin,
		"-test.run=^TestPingFallsBackToTCPWithoutICMPSockets$")
	cmd.Env = append(os.Environ(), "GALE_PING_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var res PingResult
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "{") {
			if err := json.Unmarshal([]byte(line), &res); err != nil {
				t.Fatal(err)
			}
		}
	}
	if res.Method != PingTCP || !strings.Contains(res.Note, "ICMP sockets are not allowed") || res.Sent != 2 || res.Received != 2 {
		t.Fatalf("ping without ICMP sockets: %+v\n%s", res, out)
	}
}
