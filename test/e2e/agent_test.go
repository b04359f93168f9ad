package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"gale/internal/testkit/proctest"
)

// server is a running gale process.
type server struct {
	t     *testing.T
	base  string
	token string
	logs  *proctest.Output
	// env is the gale process's environment, for gale commands on the same database.
	env []string
}

// startServer runs gale serve with a bootstrap administrator and signs in.
func startServer(t *testing.T, extraEnv ...string) *server {
	t.Helper()
	addr := proctest.FreeAddr(t)
	cmd := exec.Command(galeBinary(t), "serve")
	cmd.Env = galeEnv(t, append([]string{"LISTEN_ADDR=" + addr, "PUBLIC_URL=http://" + addr,
		"BOOTSTRAP_ADMIN_EMAIL=admin@example.com", "BOOTSTRAP_ADMIN_PASSWORD=Change-Me-123"}, extraEnv...)...)
	s := &server{t: t, base: "http://" + addr, logs: &proctest.Output{}, env: cmd.Env}
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_, _ = cmd.Process.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", s.logs.String())
		}
	})
	waitFor(t, 60*time.Second, "server ready", func() bool {
		res, err := http.Get(s.base + "/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	var session struct {
		AccessToken string `json:"accessToken"`
	}
	s.must(200, "POST", "/auth/login", map[string]string{"email": "admin@example.com", "password": "Change-Me-123"}, &session)
	s.token = session.AccessToken
	return s
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// do calls the API as the administrator and returns the status and body.
func (s *server) do(method, path string, body any) (int, []byte) {
	s.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+"/api/v1"+path, r)
	req.Header.Set("Content-Type", "application/json")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// e2eTenant is a partner with one organization and an enrollment key for it.
type e2eTenant struct {
	PartnerID, OrgID string
	Key              string `json:"key"`
	EnrollmentSecret string `json:"enrollmentSecret"`
}

// newTenant creates a partner and an organization named after name, and an enrollment key
// (with a secret) good for maxUsage enrollments (0: the server's default).
func (s *server) newTenant(name string, maxUsage int) e2eTenant {
	s.t.Helper()
	var partner, org struct {
		ID string `json:"id"`
	}
	s.must(201, "POST", "/orgs/partners", map[string]any{"name": name + " MSP"}, &partner)
	s.must(201, "POST", "/orgs/organizations", map[string]any{"name": name + " Customer", "partnerId": partner.ID}, &org)
	body := map[string]any{"orgId": org.ID, "name": strings.ToLower(name), "issueEnrollmentSecret": true}
	if maxUsage > 0 {
		body["maxUsage"] = maxUsage
	}
	ten := e2eTenant{PartnerID: partner.ID, OrgID: org.ID}
	s.must(201, "POST", "/enrollment-keys", body, &ten)
	return ten
}

func (s *server) must(status int, method, path string, body, out any) {
	s.t.Helper()
	got, b := s.do(method, path, body)
	if got != status {
		s.t.Fatalf("%s %s = %d, want %d: %s", method, path, got, status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

type e2eDevice struct {
	ID             string  `json:"id"`
	Hostname       string  `json:"hostname"`
	Status         string  `json:"status"`
	OSType         string  `json:"osType"`
	OSName         string  `json:"osName"`
	AgentVersion   string  `json:"agentVersion"`
	InventoryAt    *string `json:"inventoryAt"`
	WatchdogStatus *string `json:"watchdogStatus"`
	CPUCores       int     `json:"cpuCores"`
	MemoryBytes    int64   `json:"memoryBytes"`
	Inventory      *struct {
		OS struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"os"`
		Disks         []struct{ Mountpoint string } `json:"disks"`
		Network       []struct{ Name string }       `json:"network"`
		SoftwareCount int                           `json:"softwareCount"`
	} `json:"inventory"`
}

type e2eCommand struct {
	ID       string  `json:"id"`
	Status   string  `json:"status"`
	ExitCode *int    `json:"exitCode"`
	Stdout   *string `json:"stdout"`
	Stderr   *string `json:"stderr"`
}

func (s *server) waitCommand(deviceID, id string) e2eCommand {
	s.t.Helper()
	var c e2eCommand
	waitFor(s.t, 60*time.Second, "command "+id+" to finish", func() bool {
		s.must(200, "GET", "/devices/"+deviceID+"/commands/"+id, nil, &c)
		return c.Status != "queued" && c.Status != "sent"
	})
	return c
}

// TestRealAgent enrolls a real gale-agent process into a real server and drives it through
// the API: inventory, a script, system tools, the pending-refresh rule, the watchdog and
// decommissioning.
func TestRealAgent(t *testing.T) {
	t.Parallel()
	s := startServer(t, "AGENT_HEARTBEAT_INTERVAL_SECONDS=5")
	ten := s.newTenant("E2E", 5)

	cfgPath := filepath.Join(t.TempDir(), "agent", "agent.json")
	enroll := exec.Command(agentBinary(t), "enroll", ten.Key, "--server", s.base, "--enrollment-secret", ten.EnrollmentSecret,
		"--quiet", "--config", cfgPath)
	if out, err := enroll.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("enroll: %v: %q", err, out)
	}
	st, err := os.Stat(cfgPath)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	before, _ := os.ReadFile(cfgPath)
	again := exec.Command(agentBinary(t), "enroll", ten.Key, "--server", s.base, "--enrollment-secret", ten.EnrollmentSecret,
		"--quiet", "--config", cfgPath)
	if out, err := again.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("second enroll is not a silent no-op: %v: %q", err, out)
	}
	after, _ := os.ReadFile(cfgPath)
	if !bytes.Equal(before, after) {
		t.Fatal("a second enroll rewrote the configuration")
	}
	var cfg struct {
		DeviceID  string `json:"deviceId"`
		AuthToken string `json:"authToken"`
	}
	_ = json.Unmarshal(after, &cfg)

	agentLogs := &proctest.Output{}
	run := exec.Command(agentBinary(t), "run", "--config", cfgPath)
	run.Env = append(os.Environ(), "GALE_AGENT_UNRESPONSIVE_SECONDS=10")
	run.Stdout, run.Stderr = agentLogs, agentLogs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = run.Process.Signal(syscall.SIGTERM)
		_, _ = run.Process.Wait()
		if t.Failed() {
			t.Logf("agent log:\n%s", agentLogs.String())
		}
	})

	hostname, _ := os.Hostname()
	var dev e2eDevice
	waitFor(t, 60*time.Second, "the device with its inventory", func() bool {
		s.must(200, "GET", "/devices/"+cfg.DeviceID, nil, &dev)
		return dev.Status == "online" && dev.Inventory != nil
	})
	if dev.Hostname != hostname || dev.OSType != "linux" || dev.AgentVersion != "9.9.9-e2e" || dev.CPUCores == 0 || dev.MemoryBytes == 0 {
		t.Fatalf("device = %+v; want this machine (%s, linux, 9.9.9-e2e)", dev, hostname)
	}
	if dev.Inventory.OS.Type != "linux" || dev.Inventory.OS.Name == "" || len(dev.Inventory.Disks) == 0 || len(dev.Inventory.Network) == 0 {
		t.Fatalf("inventory = %+v", dev.Inventory)
	}
	if _, err := exec.LookPath("dpkg-query"); err == nil && dev.Inventory.SoftwareCount == 0 {
		t.Fatal("no installed software reported on a dpkg system")
	}
	var list struct {
		Devices []e2eDevice `json:"devices"`
	}
	s.must(200, "GET", "/devices?orgId="+ten.OrgID, nil, &list)
	if len(list.Devices) != 1 || list.Devices[0].ID != cfg.DeviceID {
		t.Fatalf("device list = %+v", list.Devices)
	}

	var cmd e2eCommand
	s.must(201, "POST", "/devices/"+cfg.DeviceID+"/commands", map[string]any{"type": "run_script",
		"payload": map[string]any{"language": "bash", "script": "echo hello-$((6*7)); echo oops >&2; exit 3"}}, &cmd)
	cmd = s.waitCommand(cfg.DeviceID, cmd.ID)
	if cmd.Status != "failed" || cmd.ExitCode == nil || *cmd.ExitCode != 3 || cmd.Stdout == nil || strings.TrimSpace(*cmd.Stdout) != "hello-42" ||
		cmd.Stderr == nil || strings.TrimSpace(*cmd.Stderr) != "oops" {
		t.Fatalf("script result = %+v", cmd)
	}
	s.must(201, "POST", "/devices/"+cfg.DeviceID+"/commands", map[string]any{"type": "run_script",
		"payload": map[string]any{"language": "sh", "script": "uname -s"}}, &cmd)
	if cmd = s.waitCommand(cfg.DeviceID, cmd.ID); cmd.Status != "completed" || strings.TrimSpace(*cmd.Stdout) != "Linux" {
		t.Fatalf("second script = %+v", cmd)
	}

	var procs struct {
		Data []struct {
			PID         int    `json:"pid"`
			Name        string `json:"name"`
			CommandLine string `json:"commandLine"`
		} `json:"data"`
	}
	s.must(200, "GET", "/system-tools/devices/"+cfg.DeviceID+"/processes", nil, &procs)
	mainPID := 0
	for _, p := range procs.Data {
		if strings.Contains(p.CommandLine, "--no-watchdog") && strings.Contains(p.CommandLine, cfgPath) {
			mainPID = p.PID
		}
	}
	if len(procs.Data) < 3 || mainPID == 0 {
		t.Fatalf("the process list (%d processes) does not show the main agent", len(procs.Data))
	}

	var first e2eCommand
	s.must(201, "POST", "/devices/"+cfg.DeviceID+"/commands", map[string]any{"type": "refresh_inventory"}, &first)
	code, body := s.do("POST", "/devices/"+cfg.DeviceID+"/commands", map[string]any{"type": "refresh_inventory"})
	if code != 409 || !strings.Contains(string(body), `"ALREADY_PENDING"`) {
		t.Fatalf("second refresh_inventory = %d %s; want 409 ALREADY_PENDING", code, body)
	}
	if c := s.waitCommand(cfg.DeviceID, first.ID); c.Status != "completed" {
		t.Fatalf("refresh_inventory = %+v", c)
	}

	// A hung main agent (stopped with SIGSTOP) is killed and restarted by the watchdog.
	if err := syscall.Kill(mainPID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the watchdog to restart the hung agent", func() bool {
		// While the agent is stopped, calls time out (504); that is expected here.
		code, body := s.do("GET", "/system-tools/devices/"+cfg.DeviceID+"/processes", nil)
		if code != 200 || json.Unmarshal(body, &procs) != nil {
			return false
		}
		for _, p := range procs.Data {
			if strings.Contains(p.CommandLine, "--no-watchdog") && strings.Contains(p.CommandLine, cfgPath) && p.PID != mainPID {
				return true
			}
		}
		return false
	})
	waitFor(t, 30*time.Second, "the watchdog's status on the device", func() bool {
		s.must(200, "GET", "/devices/"+cfg.DeviceID, nil, &dev)
		return dev.WatchdogStatus != nil
	})

	s.must(204, "DELETE", "/devices/"+cfg.DeviceID, nil, nil)
	waitFor(t, 30*time.Second, "the agent to record its decommissioning", func() bool {
		b, _ := os.ReadFile(cfgPath)
		return bytes.Contains(b, []byte(`"decommissioned": true`))
	})
	req, _ := http.NewRequest("POST", s.base+"/api/v1/agents/"+cfg.DeviceID+"/heartbeat", strings.NewReader(`{"agentVersion":"x","uptimeSeconds":1,"pendingReboot":false}`))
	req.Header.Set("Authorization", "Bearer "+cfg.AuthToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	// The token still authenticates, for the answer that tells the agent its device is retired.
	if err != nil || res.StatusCode != 403 {
		t.Fatalf("heartbeat with a decommissioned device's token = %v %v; want 403 DEVICE_DECOMMISSIONED", res.StatusCode, err)
	}
	s.must(200, "GET", "/devices?orgId="+ten.OrgID, nil, &list)
	if len(list.Devices) != 0 {
		t.Fatalf("a decommissioned device is still listed: %+v", list.Devices)
	}
	s.must(200, "GET", "/devices?includeDecommissioned=true&orgId="+ten.OrgID, nil, &list)
	if len(list.Devices) != 1 || list.Devices[0].Status != "decommissioned" {
		t.Fatalf("includeDecommissioned list = %+v", list.Devices)
	}
}

// TestInstallScriptWithTheRealAgent publishes the built agent with the gale command, then
// runs the server's install.sh as an operator would (without the system service, which needs
// root): it downloads the promoted binary, verifies its checksum, installs and enrolls it.
func TestInstallScriptWithTheRealAgent(t *testing.T) {
	s := startServer(t)
	gale := func(args ...string) {
		t.Helper()
		cmd := exec.Command(galeBinary(t), args...)
		cmd.Env = s.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gale %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	gale("agent-release", "register", "--version", "9.9.9-e2e", "--os", "linux", "--arch", runtime.GOARCH, "--file", agentBinary(t))
	gale("agent-release", "promote", "9.9.9-e2e")

	ten := s.newTenant("Install", 0)

	res, err := http.Get(s.base + "/api/v1/agents/install.sh")
	if err != nil {
		t.Fatal(err)
	}
	script, _ := io.ReadAll(res.Body)
	res.Body.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.json")
	install := exec.Command("sh", "-s", "--", "--key", ten.Key, "--secret", ten.EnrollmentSecret, "--prefix", filepath.Join(dir, "bin"),
		"--config", cfg, "--no-service")
	install.Stdin = bytes.NewReader(script)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(dir, "bin", "gale-agent"), "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "9.9.9-e2e") {
		t.Fatalf("installed agent version: %v: %s", err, out)
	}
	var list struct {
		Devices []e2eDevice `json:"devices"`
	}
	s.must(200, "GET", "/devices?orgId="+ten.OrgID, nil, &list)
	host, _ := os.Hostname()
	if len(list.Devices) != 1 || list.Devices[0].Hostname != host {
		t.Fatalf("devices after install.sh: %+v, want this machine (%s)", list.Devices, host)
	}
	if _, err := os.Stat(cfg); err != nil {
		t.Fatalf("the agent's configuration: %v", err)
	}
}
