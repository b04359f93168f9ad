package packaging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"gale/internal/platform/store/storetest"
	"gale/internal/testkit/proctest"
)

// A server installed from its package serves the agent one-liner at once: the test installs
// the server's .deb in one throwaway root, starts gale.service's command as the unit would,
// creates an organization and an enrollment key through the API, and runs the one-liner in
// a second root, whose agent enrolls and reports.
func TestServerPackageServesTheAgentOneLiner(t *testing.T) {
	needTools(t, "dpkg", "curl", "sudo")
	needRoots(t)
	d := build(t, v1)

	server := newRoot(t, d.dir)
	server.run("dpkg --install " + d.deb("gale"))
	addr := proctest.FreeAddr(t)
	base := "http://" + addr
	// What an operator sets in gale.env; heartbeats come faster than in production so the
	// test waits less.
	settings := []string{"PUBLIC_URL=" + base, "LISTEN_ADDR=" + addr, "BOOTSTRAP_ADMIN_EMAIL=admin@example.com",
		"BOOTSTRAP_ADMIN_PASSWORD=Change-Me-123", "AGENT_HEARTBEAT_INTERVAL_SECONDS=5"}
	if storetest.Backend() == "postgres" {
		settings = append(settings, "DATABASE_URL="+storetest.URL(t))
	}
	server.run("printf '%s\\n' " + quoteAll(settings) + " >>/etc/gale/gale.env")

	logs := &proctest.Output{}
	gale := server.start(server.readUnit("/lib/systemd/system/gale.service"), logs)
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	}()
	api := &client{t: t, base: base + "/api/v1"}
	waitFor(t, 60*time.Second, "the server to be ready", func() bool {
		select {
		case err := <-gale.exited:
			gale.exited <- err
			t.Fatalf("the server exited: %v", err)
		default:
		}
		res, err := http.Get(base + "/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	for _, want := range []string{`"msg":"agent builds registered","version":"` + v1 + `"`, `"msg":"agent version promoted","version":"` + v1 + `"`,
		`"database":"` + storetest.Backend() + `","version":"` + v1 + `"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the server log lacks %s", want)
		}
	}
	if strings.Contains(logs.String(), "PUBLIC_URL is not set") {
		t.Error("the server warns about PUBLIC_URL, which gale.env sets")
	}
	if ps := server.run("ps -o user= -p " + gale.pid); strings.TrimSpace(ps) != "gale" {
		t.Errorf("gale serve runs as %q, want gale", ps)
	}

	var session struct {
		AccessToken string `json:"accessToken"`
	}
	api.must(http.StatusOK, "POST", "/auth/login", map[string]string{"email": "admin@example.com", "password": "Change-Me-123"}, &session)
	api.token = session.AccessToken
	var partner, org struct {
		ID string `json:"id"`
	}
	api.must(http.StatusCreated, "POST", "/orgs/partners", map[string]any{"name": "Packaged MSP"}, &partner)
	api.must(http.StatusCreated, "POST", "/orgs/organizations", map[string]any{"name": "Packaged Customer", "partnerId": partner.ID}, &org)
	var key struct {
		Key              string `json:"key"`
		EnrollmentSecret string `json:"enrollmentSecret"`
	}
	api.must(http.StatusCreated, "POST", "/enrollment-keys", map[string]any{"orgId": org.ID, "name": "packaged",
		"issueEnrollmentSecret": true}, &key)

	// The one-liner of docs/operations.md, run as on an endpoint.
	endpoint := newRoot(t)
	defer func() {
		if t.Failed() {
			// Where the init script of the agent's service sends its output.
			t.Logf("agent log:\n%s", endpoint.run("cat /var/log/gale-agent.log /var/log/gale-agent.err 2>/dev/null || true"))
		}
	}()
	oneLiner := fmt.Sprintf("curl -fsSL %s/api/v1/agents/install.sh | sudo sh -s -- --key %s --secret %s", base, key.Key, key.EnrollmentSecret)
	out, err := endpoint.try(oneLiner)
	t.Logf("%s\n%s", oneLiner, out)
	if err != nil {
		t.Fatalf("the one-liner failed: %v", err)
	}
	if !strings.Contains(out, "gale-agent is installed, enrolled and running") {
		t.Fatal("the one-liner did not end with the agent running")
	}

	var list struct {
		Devices []struct {
			ID string `json:"id"`
		} `json:"devices"`
	}
	var dev struct {
		Status       string          `json:"status"`
		AgentVersion string          `json:"agentVersion"`
		Hostname     string          `json:"hostname"`
		Inventory    json.RawMessage `json:"inventory"`
	}
	waitFor(t, 90*time.Second, "the endpoint to report (online, with its inventory)", func() bool {
		api.must(http.StatusOK, "GET", "/devices?orgId="+org.ID, nil, &list)
		if len(list.Devices) != 1 {
			return false
		}
		api.must(http.StatusOK, "GET", "/devices/"+list.Devices[0].ID, nil, &dev)
		return dev.Status == "online" && len(dev.Inventory) > 0 && string(dev.Inventory) != "null"
	})
	hostname, _ := os.Hostname()
	if dev.AgentVersion != v1 || dev.Hostname != hostname {
		t.Errorf("device = %+v, want agent %s on %s", dev, v1, hostname)
	}

	// The service stops on SIGTERM, as systemctl stop sends it.
	server.run("kill -TERM " + gale.pid)
	select {
	case err := <-gale.exited:
		gale.exited <- err
		if err != nil {
			t.Errorf("gale serve ended with %v after SIGTERM", err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("gale serve did not stop within 45s of SIGTERM")
	}
	if !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Errorf("no orderly stop in the server log")
	}
}

func quoteAll(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = shellQuote(s)
	}
	return strings.Join(quoted, " ")
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// client calls the server's API.
type client struct {
	t     *testing.T
	base  string
	token string
}

func (c *client) must(status int, method, path string, body, out any) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != status {
		c.t.Fatalf("%s %s = %d, want %d: %s", method, path, res.StatusCode, status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}
