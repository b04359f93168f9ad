package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gale/internal/domains/incidents"
	"gale/internal/domains/security"
	"gale/internal/platform/jobs"
	"gale/internal/testkit/apptest"
)

// hostAdmins reads the host's administrators as the agent should: uid 0 and the members of
// sudo, wheel and admin that have an account.
func hostAdmins(t *testing.T) []string {
	t.Helper()
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	accounts := map[string]bool{}
	var out []string
	for line := range strings.Lines(string(passwd)) {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) < 7 {
			continue
		}
		accounts[f[0]] = true
		if f[2] == "0" {
			out = append(out, f[0])
		}
	}
	group, _ := os.ReadFile("/etc/group")
	for line := range strings.Lines(string(group)) {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) < 4 || !slices.Contains([]string{"sudo", "wheel", "admin"}, f[0]) || f[3] == "" {
			continue
		}
		for _, m := range strings.Split(f[3], ",") {
			if accounts[m] && !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestSecurityOnARealAgent has a real agent report the host's security and act on an EICAR
// file: the status carries the host's firewall, encryption, password ageing and
// administrators; a custom scan finds the file; quarantine, restore and remove move it, and
// the threat's status follows each confirmation of the agent.
func TestSecurityOnARealAgent(t *testing.T) {
	node := apptest.New(t)
	// The jobs deliver the threat's event to the incident feed.
	if err := node.App.StartJobs(context.Background(), jobs.Options{}); err != nil {
		t.Fatal(err)
	}
	agent := startAgentWith(t, node, nil)
	admin := node.Admin()
	dir := t.TempDir()
	file := filepath.Join(dir, "eicar.com")
	if err := os.WriteFile(file, []byte(`X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*`), 0o644); err != nil {
		t.Fatal(err)
	}
	var x security.SecurityScanRun
	node.Must(http.StatusAccepted, admin, "POST", "/api/v1/security/scan/"+agent.deviceID, map[string]any{"scanType": "custom",
		"paths": []string{dir}}).JSON(t, &x)

	t.Run("status is the host's", func(t *testing.T) {
		var st security.SecurityStatusDetail
		waitFor(t, 60*time.Second, "security status", func() bool {
			node.Must(http.StatusOK, admin, "GET", "/api/v1/security/status/"+agent.deviceID, nil).JSON(t, &st)
			return st.State != security.StatePending
		})
		// Firewall: what nft lists (or ufw's own configuration) decides.
		ufw, _ := os.ReadFile("/etc/ufw/ufw.conf")
		if _, err := exec.LookPath("nft"); err != nil && !strings.Contains(string(ufw), "ENABLED=yes") {
			if st.FirewallEnabled {
				t.Fatalf("firewall enabled on a host without nft or ufw: %+v", st.Details.Firewall)
			}
		} else if out, err := exec.Command("nft", "list", "ruleset").Output(); err == nil && strings.TrimSpace(string(out)) == "" &&
			!strings.Contains(string(ufw), "ENABLED=yes") && st.FirewallEnabled {
			t.Fatalf("firewall enabled with an empty ruleset: %+v", st.Details.Firewall)
		}
		if st.Details.Firewall.Backend == "" {
			t.Fatal("no firewall backend reported")
		}
		// Encryption: a crypt device in lsblk's tree or none.
		out, err := exec.Command("lsblk", "-J", "-o", "NAME,TYPE,FSTYPE,MOUNTPOINT").Output()
		if err == nil && !strings.Contains(string(out), `"crypt"`) && !strings.Contains(string(out), "crypto_LUKS") &&
			(st.EncryptionStatus == "encrypted" || st.EncryptionStatus == "partial") {
			t.Fatalf("encryption %s on a host without LUKS", st.EncryptionStatus)
		}
		// Password ageing from login.defs.
		defs, _ := os.ReadFile("/etc/login.defs")
		maxDays := 0
		for line := range strings.Lines(string(defs)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "PASS_MAX_DAYS" {
				maxDays, _ = strconv.Atoi(f[1])
			}
		}
		if st.Details.PasswordPolicy.MaxDays != maxDays || st.PasswordPolicySummary == "" {
			t.Fatalf("password policy = %+v, login.defs says PASS_MAX_DAYS %d", st.Details.PasswordPolicy, maxDays)
		}
		var got []string
		for _, a := range st.Details.Administrators {
			got = append(got, a.Name)
		}
		slices.Sort(got)
		if want := hostAdmins(t); !slices.Equal(got, want) {
			t.Fatalf("administrators = %v, the host has %v", got, want)
		}
	})

	threat := func() security.SecurityThreat {
		var out struct{ Data []security.SecurityThreat }
		node.Must(http.StatusOK, admin, "GET", "/api/v1/security/threats/"+agent.deviceID, nil).JSON(t, &out)
		if len(out.Data) != 1 {
			return security.SecurityThreat{}
		}
		return out.Data[0]
	}
	act := func(id, action, want string) security.SecurityThreat {
		t.Helper()
		var a security.SecurityThreatAction
		node.Must(http.StatusAccepted, admin, "POST", "/api/v1/security/threats/"+id+"/"+action, nil).JSON(t, &a)
		if a.Threat.Status == want {
			t.Fatalf("%s: the status moved before the agent confirmed", action)
		}
		waitFor(t, 30*time.Second, action+" confirmed", func() bool { th := threat(); return th.Status == want && th.PendingAction == nil })
		return threat()
	}

	t.Run("eicar is found, quarantined, restored and removed", func(t *testing.T) {
		waitFor(t, 60*time.Second, "scan completed", func() bool { return threat().ID != "" })
		th := threat()
		if th.Name != "EICAR-Test-File" || th.FilePath != file || th.Status != security.ThreatActive {
			t.Fatalf("threat = %+v", th)
		}
		// The threat opens a tracked incident in the incident feed.
		waitFor(t, 30*time.Second, "the threat's incident", func() bool {
			var feed incidents.IncidentFeedPage
			node.Must(http.StatusOK, admin, "GET", "/api/v1/incidents/feed?kind=tracked", nil).JSON(t, &feed)
			for _, r := range feed.Data {
				if r.SourceID == th.ID && r.DeviceID == agent.deviceID && r.Source == "native" && strings.Contains(r.Title, "EICAR") {
					return true
				}
			}
			return false
		})
		var scans struct{ Data []security.SecurityScanRun }
		node.Must(http.StatusOK, admin, "GET", "/api/v1/security/scans/"+agent.deviceID, nil).JSON(t, &scans)
		if len(scans.Data) != 1 || scans.Data[0].Status != security.ScanCompleted || scans.Data[0].ThreatsFound != 1 {
			t.Fatalf("scans = %+v", scans.Data)
		}

		th = act(th.ID, "quarantine", security.ThreatQuarantined)
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Fatalf("the file is still at its path after quarantine (%v)", err)
		}
		info, err := os.Stat(filepath.Dir(th.Location))
		if err != nil || info.Mode().Perm() != 0o700 {
			t.Fatalf("quarantine directory %s: %v %v", filepath.Dir(th.Location), info, err)
		}
		if _, err := os.Stat(th.Location); err != nil {
			t.Fatalf("quarantined file: %v", err)
		}

		act(th.ID, "restore", security.ThreatActive)
		if _, err := os.Stat(file); err != nil {
			t.Fatalf("the file is not back after restore: %v", err)
		}

		act(th.ID, "remove", security.ThreatRemoved)
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Fatalf("the file remains after remove (%v)", err)
		}
	})
}

// TestARealAgentsScanShowsItsProgress has a real agent scan /usr with the built-in signatures:
// while the scan runs, its record shows how many files the agent has looked at, and the result
// counts at least as many.
func TestARealAgentsScanShowsItsProgress(t *testing.T) {
	if _, err := exec.LookPath("clamscan"); err == nil {
		t.Skip("ClamAV is installed: scans use it, which reports no progress")
	}
	node := apptest.New(t)
	agent := startAgentWith(t, node, nil)
	admin := node.Admin()
	// /usr five times over: a scan of seconds even on a fast machine, as progress comes once a
	// second.
	node.Must(http.StatusAccepted, admin, "POST", "/api/v1/security/scan/"+agent.deviceID, map[string]any{"scanType": "custom",
		"paths": []string{"/usr", "/usr", "/usr", "/usr", "/usr"}})
	scan := func() security.SecurityScanRun {
		var out struct{ Data []security.SecurityScanRun }
		node.Must(http.StatusOK, admin, "GET", "/api/v1/security/scans/"+agent.deviceID, nil).JSON(t, &out)
		if len(out.Data) != 1 {
			t.Fatalf("scans = %+v", out.Data)
		}
		return out.Data[0]
	}
	var seen int
	waitFor(t, 60*time.Second, "progress of the running scan", func() bool {
		x := scan()
		if x.Status == security.ScanCompleted {
			t.Fatalf("the scan ended before it showed any progress: %+v", x)
		}
		seen = x.FilesScanned
		return x.Status == security.ScanRunning && seen > 0
	})
	waitFor(t, 5*time.Minute, "the scan's result", func() bool { return scan().Status == security.ScanCompleted })
	if x := scan(); x.FilesScanned < seen || x.Engine != "builtin" {
		t.Fatalf("scan once ended = %+v, it had looked at %d files while it ran", x, seen)
	}
}
