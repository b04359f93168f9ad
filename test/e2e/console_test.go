package e2e

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"gale/internal/testkit/proctest"

	"github.com/chromedp/chromedp"
	"github.com/pquerna/otp/totp"
)

// TestConsole drives the web console in a real browser against a real server and agent:
// sign-in with MFA, a device that appears and goes offline without a reload, an alert
// acknowledged from the inbox, a form without its CSRF token, signing out in another tab, and
// a technician of one organization who cannot see another's device. Each main page is checked
// with axe-core and photographed in both themes.
func TestConsole(t *testing.T) {
	t.Parallel()
	s := startServer(t, "AGENT_HEARTBEAT_INTERVAL_SECONDS=5", "DEVICE_OFFLINE_AFTER_SECONDS=15")
	acme := s.newTenant("Acme", 5)
	other := s.newTenant("Other", 5)
	s.must(201, "POST", "/alerts/rules", map[string]any{"partnerId": acme.PartnerID, "name": "memory in use", "severity": "high",
		"titleTemplate": "Memory {{value}}% on {{hostname}}", "cooldownMinutes": 0,
		"conditions": map[string]any{"type": "threshold", "metric": "ramPercent", "operator": "gt", "value": 1, "durationMinutes": 0}}, nil)

	s.must(201, "POST", "/scripts", map[string]any{"orgId": acme.OrgID, "name": "Say hello", "osTypes": []string{"linux"},
		"language": "bash", "content": "echo first-line\nsleep 3\necho second-line >&2\nexit 3"}, nil)
	// Something on the operations pages.
	start := time.Now().UTC().Add(24 * time.Hour).Truncate(time.Hour)
	var window, monitor, webhook struct {
		ID string `json:"id"`
	}
	s.must(201, "POST", "/maintenance/windows", map[string]any{"orgId": acme.OrgID, "name": "Patch night", "timezone": "UTC",
		"startTime": start.Format("2006-01-02T15:04:05"), "endTime": start.Add(2 * time.Hour).Format("2006-01-02T15:04:05"),
		"recurrence": "weekly", "targets": map[string]any{"type": "all"}}, &window)
	s.must(201, "POST", "/monitors", map[string]any{"orgId": acme.OrgID, "name": "Gateway", "type": "icmp_ping", "target": "127.0.0.1"}, &monitor)
	s.must(201, "POST", "/webhooks", map[string]any{"partnerId": acme.PartnerID, "name": "Ticketing", "url": "https://tickets.example.test/hook",
		"events": []string{"alert.triggered"}}, &webhook)

	// A technician of the other organization only.
	create := exec.Command(galeBinary(t), "user", "create", "--email", "tech@other.example", "--level", "organization",
		"--partner-id", other.PartnerID, "--org-id", other.OrgID, "--password", "Tech-Passw0rd")
	create.Env = s.env
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("create the technician: %v\n%s", err, out)
	}

	// The administrator turns MFA on.
	var setup struct {
		Secret string `json:"secret"`
	}
	s.must(200, "POST", "/auth/mfa/setup", map[string]string{"currentPassword": "Change-Me-123"}, &setup)
	code, _ := totp.GenerateCode(setup.Secret, time.Now())
	s.must(200, "POST", "/auth/mfa/enable", map[string]string{"code": code, "currentPassword": "Change-Me-123"}, nil)

	b := newBrowser(t)
	b.navigate(s.base + "/devices")
	if loc := b.location(); !strings.Contains(loc, "/signin?next=%2Fdevices") {
		t.Fatalf("a signed-out visit to /devices went to %s, not to the sign-in page", loc)
	}
	b.shoot("signin")
	// The code of the next period: the one that enabled MFA cannot be used again.
	b.signIn(s.base, "admin@example.com", "Change-Me-123", func() string {
		c, _ := totp.GenerateCode(setup.Secret, time.Now().Add(30*time.Second))
		return c
	})
	if loc := b.location(); !strings.HasSuffix(loc, "/devices") {
		t.Fatalf("after signing in the browser is at %s, not back at /devices", loc)
	}
	b.waitText(10*time.Second, "the empty list", "#device-table", "No devices yet")

	// The agent enrolls while the list is open: its row appears without a reload.
	b.run(5*time.Second, "mark the page", eval(`window.galeMarker = 1`))
	cfgPath := filepath.Join(t.TempDir(), "agent.json")
	enroll := exec.Command(agentBinary(t), "enroll", acme.Key, "--server", s.base, "--enrollment-secret", acme.EnrollmentSecret,
		"--quiet", "--config", cfgPath)
	if out, err := enroll.CombinedOutput(); err != nil {
		t.Fatalf("enroll: %v: %s", err, out)
	}
	agentLogs := &proctest.Output{}
	agent := exec.Command(agentBinary(t), "run", "--config", cfgPath)
	agent.Stdout, agent.Stderr = agentLogs, agentLogs
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = agent.Process.Signal(syscall.SIGTERM)
			_, _ = agent.Process.Wait()
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("agent log:\n%s", agentLogs.String())
		}
	})
	hostname, _ := os.Hostname()
	b.waitText(60*time.Second, "the enrolled device in the list", "#device-table tbody", hostname)
	b.waitText(60*time.Second, "the device online", "#device-table tbody", "online")
	if get(b, 5*time.Second, "read the mark", chromedp.Evaluate[int](`window.galeMarker || 0`)) != 1 {
		t.Fatal("the page was reloaded to show the device")
	}
	b.shoot("devices")
	deviceURL := b.attr(`#device-table tbody a`, "href")
	deviceID := strings.TrimPrefix(deviceURL, "/devices/")
	b.navigate(s.base + deviceURL)
	b.waitText(10*time.Second, "the device page", "h1", hostname)

	// A script's output streams into the page while it runs.
	scriptID := b.attr(`#run-script option:nth-child(2)`, "value")
	b.run(10*time.Second, "run the script",
		chromedp.SetValue(chromedp.CSS(`#run-script`), scriptID),
		chromedp.Click(chromedp.CSS(`#run-script + button`)))
	b.waitText(30*time.Second, "the script's first line", "#run-output [data-output]", "first-line")
	if got := get(b, 5*time.Second, "read the output", chromedp.Evaluate[string](textOf("#run-output"))); strings.Contains(got, "second-line") ||
		!strings.Contains(got, "running") {
		t.Fatalf("the first line did not arrive while the script ran: %q", got)
	}
	b.waitText(30*time.Second, "the script's end", "#run-output [data-run-status]", "failed (exit 3)")
	b.waitText(5*time.Second, "the script's stderr", "#run-output .out-stderr", "second-line")
	b.shoot("device")
	for name, path := range map[string]string{"scripts": "/scripts", "script": "/scripts/" + scriptID, "script-edit": "/scripts/" + scriptID + "/edit",
		"start": "/start", "account": "/account", "audit": "/audit", "settings": "/settings", "users": "/users",
		"home": "/", "patches": "/patches", "patch-jobs": "/patches/jobs", "patch-policies": "/patches/policies", "security": "/security",
		"vulnerabilities": "/vulnerabilities", "automations": "/automations", "monitors": "/monitors", "maintenance": "/maintenance",
		"maintenance-new": "/maintenance/new", "monitor-new": "/monitors/new?orgId=" + acme.OrgID,
		"automation-new": "/automations/new?orgId=" + acme.OrgID, "discovery-profile-new": "/discovery/profiles/new?orgId=" + acme.OrgID,
		"discovery": "/discovery", "discovery-assets": "/discovery/assets", "roles": "/roles",
		"channels": "/settings/channels", "webhooks": "/settings/webhooks", "api-key-new": "/settings/api-keys/new",
		"user-invite": "/users/invite", "device-patches": deviceURL + "/patches", "device-security": deviceURL + "/security",
		"device-vulnerabilities": deviceURL + "/vulnerabilities", "services": deviceURL + "/services", "logs": deviceURL + "/logs",
		"maintenance-window": "/maintenance/" + window.ID, "monitor": "/monitors/" + monitor.ID, "monitor-edit": "/monitors/" + monitor.ID + "/edit",
		"webhook": "/settings/webhooks/" + webhook.ID, "webhook-edit": "/settings/webhooks/" + webhook.ID + "/edit", "role-new": "/roles/new"} {
		b.navigate(s.base + path)
		b.waitText(10*time.Second, "the "+name+" page", "h1", "")
		b.shoot(name)
	}
	// The automation form shows the fields of the trigger and of the action chosen, and the next
	// step once one has an action.
	b.navigate(s.base + "/automations/new?orgId=" + acme.OrgID)
	shown := func(sel string) bool {
		return get(b, 5*time.Second, "see "+sel, chromedp.Evaluate[bool](`document.querySelector('`+sel+`').offsetParent !== null`))
	}
	if shown("#trigger-cron") || shown("#action-0-script") || shown("#action-1-type") {
		t.Fatal("the automation form shows fields of choices not made")
	}
	b.run(5*time.Second, "choose a schedule and a script", chromedp.SetValue(chromedp.CSS(`#trigger-type`), "schedule"),
		chromedp.SetValue(chromedp.CSS(`#action-0-type`), "run_script"))
	if !shown("#trigger-cron") || !shown("#action-0-script") || !shown("#action-1-type") || shown("#action-0-title") {
		t.Fatal("the automation form does not follow its choices")
	}
	// The agent's metrics draw the device's chart.
	waitFor(t, 60*time.Second, "the metrics chart", func() bool {
		b.navigate(s.base + deviceURL)
		return get(b, 5*time.Second, "find the chart", chromedp.Evaluate[bool](`!!document.querySelector('.chart .uplot canvas')`))
	})
	// A process of the device, ended from its processes page.
	victim := exec.Command("sleep", "31337")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- victim.Wait() }()
	t.Cleanup(func() { _ = victim.Process.Kill() })
	b.navigate(s.base + deviceURL + "/processes")
	pidRow := fmt.Sprintf("#pid-%d", victim.Process.Pid)
	b.waitText(30*time.Second, "the process listed", pidRow, "sleep")
	b.shoot("processes")
	b.run(10*time.Second, "end the process", eval(`window.confirm = () => true`),
		chromedp.Click(chromedp.CSS(pidRow+` button`)))
	b.waitText(30*time.Second, "the process ended", pidRow, "ended")
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the process is still running after End")
	}

	b.navigate(s.base + deviceURL + "/software")
	b.waitText(10*time.Second, "the software list", "main", "Installed software")
	b.shoot("software")

	// A file goes up to the device from its files page and comes back down.
	folder, local := t.TempDir(), filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(local, []byte("gale file transfer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.navigate(s.base + deviceURL + "/files?path=" + url.QueryEscape(folder))
	b.waitText(30*time.Second, "the empty folder", "#file-list", "..")
	b.run(10*time.Second, "upload a file", chromedp.SetUploadFiles(chromedp.CSS(`#upload-file`), []string{local}),
		chromedp.Click(chromedp.CSS(`form[action$="/files/upload"] button[type=submit]`)))
	b.waitText(30*time.Second, "the uploaded file listed", "#file-list", "notes.txt")
	if got, err := os.ReadFile(filepath.Join(folder, "notes.txt")); err != nil || string(got) != "gale file transfer\n" {
		t.Fatalf("the uploaded file on the device: %q %v", got, err)
	}
	b.shoot("files")
	download := get(b, 30*time.Second, "download the file", chromedp.Evaluate[string](
		`fetch(document.querySelector('#file-list a[aria-label="Download notes.txt"]').href).then(r => r.text())`, chromedp.EvalAwaitPromise))
	if download != "gale file transfer\n" {
		t.Fatalf("the downloaded file: %q", download)
	}
	b.navigate(s.base + deviceURL)

	// The terminal: a command echoes, and the shell follows the window's size.
	b.run(10*time.Second, "open the terminal", chromedp.Click(chromedp.CSS(`form[action$="/terminal"] button`)))
	b.waitText(30*time.Second, "the terminal connected", "#terminal-status", "connected")
	typeIn := func(line string) {
		b.run(10*time.Second, "type "+line, chromedp.Focus(chromedp.CSS(`.xterm-helper-textarea`)), typeLine(line))
	}
	typeIn("echo hi-from-$((40+2))")
	b.waitText(15*time.Second, "the echo", "#terminal .xterm-rows", "hi-from-42")
	typeIn("stty size | sed 's/ /x/'")
	size := func() string {
		rows := get(b, 5*time.Second, "read the terminal", chromedp.Evaluate[string](textOf("#terminal .xterm-rows")))
		m := regexp.MustCompile(`(\d+)x(\d+)`).FindAllString(rows, -1)
		if len(m) == 0 {
			return ""
		}
		return m[len(m)-1]
	}
	b.waitText(15*time.Second, "the first size", "#terminal .xterm-rows", "x")
	before := ""
	waitFor(t, 10*time.Second, "stty size", func() bool { before = size(); return before != "" })
	b.shoot("terminal")
	b.run(10*time.Second, "resize the window", chromedp.EmulateViewport(900, 560))
	time.Sleep(500 * time.Millisecond)
	typeIn("clear; stty size | sed 's/ /x/'")
	after := ""
	waitFor(t, 15*time.Second, "stty size after the resize", func() bool { after = size(); return after != "" && after != before })
	b.run(10*time.Second, "restore the window", chromedp.EmulateViewport(1366, 900))

	// The alert of the rule reaches the inbox; it is acknowledged there.
	b.navigate(s.base + "/alerts")
	b.waitText(60*time.Second, "the alert in the inbox", "#alert-table tbody", "Memory")
	b.shoot("alerts")
	alertRow := b.attr(`#alert-table tbody tr`, "id")
	alertID := strings.TrimPrefix(alertRow, "alert-")
	b.run(10*time.Second, "acknowledge", chromedp.Click(chromedp.CSS(`#`+alertRow+` button[hx-post$="/acknowledge"]`)))
	b.waitText(10*time.Second, "the acknowledged row", "#"+alertRow, "acknowledged")
	var alert struct {
		Status string `json:"status"`
	}
	s.must(200, "GET", "/alerts/"+alertID, nil, &alert)
	if alert.Status != "acknowledged" {
		t.Fatalf("after acknowledging in the inbox the alert is %s", alert.Status)
	}

	// A form sent without its CSRF token is refused and changes nothing.
	b.navigate(s.base + "/alerts/" + alertID)
	b.shoot("alert")
	b.run(10*time.Second, "send the form without its token",
		eval(`document.querySelector('form[action$="/resolve"] input[name=csrf]').remove()`),
		chromedp.Click(chromedp.CSS(`form[action$="/resolve"] button[type=submit]`)))
	b.waitText(10*time.Second, "the refusal", "main", "security token")
	s.must(200, "GET", "/alerts/"+alertID, nil, &alert)
	if alert.Status != "acknowledged" {
		t.Fatalf("a form without its CSRF token changed the alert to %s", alert.Status)
	}

	// The agent stops: the open list shows the device offline without a reload.
	b.navigate(s.base + "/devices")
	b.run(5*time.Second, "mark the page", eval(`window.galeMarker = 2`))
	stop()
	b.waitText(90*time.Second, "the device offline", "#device-table tbody", "offline")
	if get(b, 5*time.Second, "read the mark", chromedp.Evaluate[int](`window.galeMarker || 0`)) != 2 {
		t.Fatal("the page was reloaded to show the device offline")
	}
	b.navigate(s.base + "/")
	b.waitText(10*time.Second, "the home page", "#home-live", "Recently offline")
	b.shoot("home")

	// Signing out in one tab ends the session of the other.
	other2 := b.tab()
	other2.navigate(s.base + "/alerts")
	other2.waitText(10*time.Second, "the second tab", "h1", "Alerts")
	b.run(10*time.Second, "sign out", chromedp.Click(chromedp.CSS(`form[action="/signout"] button`)))
	b.waitText(10*time.Second, "the signed-out page", "main", "You signed out")
	other2.navigate(s.base + "/devices")
	if loc := other2.location(); !strings.Contains(loc, "/signin") {
		t.Fatalf("after signing out in another tab, /devices opened at %s", loc)
	}

	// The technician of the other organization sees no device, and the device's address is
	// the same 404 as a missing one.
	tech := newBrowser(t)
	tech.navigate(s.base + "/")
	tech.signIn(s.base, "tech@other.example", "Tech-Passw0rd", nil)
	tech.navigate(s.base + "/devices")
	tech.waitText(10*time.Second, "the technician's list", "#device-table", "No devices yet")
	tech.navigate(s.base + "/devices/" + deviceID)
	tech.waitText(10*time.Second, "the 404 page", "main", "Not found")
	if got, missing := tech.status(s.base, "/devices/"+deviceID), tech.status(s.base, "/devices/00000000-0000-4000-8000-000000000000"); got != 404 || missing != 404 {
		t.Fatalf("another organization's device answers %d, a missing one %d; want 404 for both", got, missing)
	}
}
