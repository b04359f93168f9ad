package e2e

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"testing"
	"time"

	"gale/internal/domains/devices"
	"gale/internal/domains/patches"
	"gale/internal/domains/vulnerabilities"
	"gale/internal/testkit/apptest"
	"gale/internal/testkit/aptfixture"
	"gale/internal/wire/agentproto"
)

// TestVulnerabilitiesFromThisHostsSecurityUpgrades runs a real agent on this host: its real
// (read-only) apt scan finds the pending -security upgrades, the server asks that agent for
// the changelogs of the candidate versions (apt-get download from the configured mirror),
// and at least one CVE a changelog names becomes an open finding of the host's installed
// package, grouped by package, with the pending patch ready. It skips when apt offers no
// -security upgrade or the mirror cannot be reached.
func TestVulnerabilitiesFromThisHostsSecurityUpgrades(t *testing.T) {
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skip("apt-get is not installed: the host's security upgrades cannot be listed")
	}
	aptfixture.HostUnchanged(t)
	began := time.Now()
	node := apptest.New(t)
	admin := node.Admin()
	agent := startAgentWith(t, node, nil)

	var js patches.PatchJobStart
	node.Must(http.StatusAccepted, admin, "POST", "/api/v1/patches/scan", map[string]any{"deviceIds": []string{agent.deviceID}}).JSON(t, &js)
	var job patches.PatchJobDetail
	waitFor(t, 120*time.Second, "the patch scan", func() bool {
		node.Must(http.StatusOK, admin, "GET", "/api/v1/patches/jobs/"+js.ID, nil).JSON(t, &job)
		return job.Status != patches.JobRunning
	})
	if job.Status != patches.JobCompleted {
		t.Fatalf("patch scan job %+v", job)
	}
	var pend struct{ Data []patches.Patch }
	node.Must(http.StatusOK, admin, "GET", "/api/v1/patches?limit=500", nil).JSON(t, &pend)
	security := map[string]string{}
	for _, p := range pend.Data {
		if p.Category == patches.CategorySecurity {
			security[p.PackageID] = p.Version
		}
	}
	if len(security) == 0 {
		t.Skip("apt offers this host no -security upgrade: nothing to read a changelog of")
	}
	t.Logf("%d pending security upgrades (scan done after %s)", len(security), time.Since(began).Round(time.Millisecond))

	// The scan's hook asked the agent for the changelogs (a few packages a command); wait for
	// the first CVE, or for every command to end without one.
	var cmds []devices.DeviceCommand
	var cves []vulnerabilities.VulnCVE
	waitFor(t, 300*time.Second, "a CVE from the changelogs", func() bool {
		var l struct{ Data []vulnerabilities.VulnCVE }
		node.Must(http.StatusOK, admin, "GET", "/api/v1/vulnerabilities?limit=500", nil).JSON(t, &l)
		if cves = l.Data; len(cves) > 0 {
			return true
		}
		var cl struct{ Data []devices.DeviceCommand }
		node.Must(http.StatusOK, admin, "GET", "/api/v1/devices/"+agent.deviceID+"/commands?limit=500", nil).JSON(t, &cl)
		cmds = cmds[:0]
		for _, c := range cl.Data {
			if c.Type == agentproto.CommandPackageChangelog {
				cmds = append(cmds, c)
			}
		}
		return len(cmds) > 0 && !slices.ContainsFunc(cmds, func(c devices.DeviceCommand) bool {
			return c.Status == "pending" || c.Status == "sent" || c.Status == "running"
		})
	})
	if len(cves) == 0 {
		answered := 0
		for _, c := range cmds {
			var d devices.DeviceCommand
			node.Must(http.StatusOK, admin, "GET", "/api/v1/devices/"+agent.deviceID+"/commands/"+c.ID, nil).JSON(t, &d)
			var res agentproto.PackageChangelogResult
			_ = json.Unmarshal(d.Result, &res)
			for _, e := range res.Packages {
				if e.Error == "" {
					answered++
				} else {
					t.Logf("%s %s: %s", e.Name, e.Version, e.Error)
				}
			}
		}
		if answered == 0 {
			t.Skip("no changelog could be read: the mirror is unreachable from this host")
		}
		t.Fatalf("%d changelogs read, and no CVE found", answered)
	}
	// A real CVE of a real pending upgrade: open on this host, its package's patch ready.
	found := false
	for _, c := range cves {
		if found {
			break
		}
		var l struct{ Data []vulnerabilities.VulnFinding }
		node.Must(http.StatusOK, admin, "GET", "/api/v1/vulnerabilities/"+c.CVEID+"/devices", nil).JSON(t, &l)
		for _, f := range l.Data {
			if f.DeviceID == agent.deviceID && f.Status == "open" && security[f.Package] == f.FixedVersion && f.PatchReady &&
				f.GroupKey == "pkg:"+f.Package {
				t.Logf("after %s: found %s in %s %s (fixed in %s, severity %s)", time.Since(began).Round(time.Millisecond), f.CVEID, f.Package, f.InstalledVersion, f.FixedVersion, f.Severity)
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("no open finding of this host names a pending security upgrade: %+v", cves)
	}
	var groups struct {
		Data []vulnerabilities.VulnSoftwareGroup
	}
	node.Must(http.StatusOK, admin, "GET", "/api/v1/vulnerabilities/software", nil).JSON(t, &groups)
	if len(groups.Data) == 0 || groups.Data[0].PatchReady == 0 {
		t.Fatalf("by software %+v", groups.Data)
	}
}
