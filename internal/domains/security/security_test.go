package security_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/security"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

type fixture struct {
	e   *apptest.Env
	a   apptest.Tenant
	b   apptest.Tenant
	s   *security.Service
	dev *devices.Service
}

func newFixture(t *testing.T) fixture {
	e := apptest.New(t)
	admin := e.Admin()
	return fixture{e: e, a: e.NewTenant(admin, "Alpha"), b: e.NewTenant(admin, "Bravo"), s: app.Service[*security.Service](e.App),
		dev: app.Service[*devices.Service](e.App)}
}

func (f fixture) device(ten apptest.Tenant, host string) string {
	return f.e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: host, OSVersion: "12"})
}

func agentOf(ten apptest.Tenant, deviceID string) devices.Agent {
	return devices.Agent{DeviceID: deviceID, PartnerID: ten.PartnerID, OrgID: ten.OrgID, Role: "agent"}
}

// pending returns the pending commands of a kind for a device.
func (f fixture) pending(deviceID, kind string) []string {
	f.e.T.Helper()
	rows, err := f.e.App.DB.SQL.Query(`SELECT id FROM device_commands WHERE device_id = $1 AND type = $2 AND status IN ('queued', 'sent')
		ORDER BY created_at, id`, deviceID, kind)
	if err != nil {
		f.e.T.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			f.e.T.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

func (f fixture) result(ten apptest.Tenant, deviceID, commandID, status string, result any) {
	f.e.T.Helper()
	raw, _ := json.Marshal(result)
	if err := f.dev.RecordResult(context.Background(), agentOf(ten, deviceID), agentproto.CommandResult{CommandID: commandID, Status: status,
		Result: raw}); err != nil {
		f.e.T.Fatalf("record result: %v", err)
	}
}

func (f fixture) count(query string, args ...any) int {
	f.e.T.Helper()
	var n int
	if err := f.e.App.DB.SQL.QueryRow(query, args...).Scan(&n); err != nil {
		f.e.T.Fatal(err)
	}
	return n
}

// healthy is a status that meets the built-in policy in full.
func healthy() agentproto.SecurityStatus {
	sig := time.Now().UTC()
	return agentproto.SecurityStatus{CollectedAt: time.Now().UTC(),
		Firewall:         agentproto.FirewallState{Backend: agentproto.FirewallNftables, Enabled: true, Rules: 12, InputPolicy: "drop"},
		Encryption:       agentproto.EncryptionState{Status: agentproto.EncryptionFull, Volumes: []agentproto.EncryptedVolume{{Device: "root", Mountpoint: "/", Encrypted: true}}},
		PasswordPolicy:   agentproto.PasswordPolicy{MaxDays: 90, MinLength: 12, MinClasses: 3, Summary: "passwords expire after 90 days"},
		Administrators:   []agentproto.AdminAccount{{Name: "root", UID: 0, Via: "uid0", Shell: "/bin/bash"}, {Name: "alice", UID: 1000, Via: "sudo", Shell: "/bin/bash"}},
		ListeningPorts:   []agentproto.ListeningPort{{Protocol: "tcp", Address: "0.0.0.0", Port: 22, Exposed: true}},
		Antivirus:        agentproto.AntivirusState{Provider: "clamav", Installed: true, DaemonRunning: true, RealTimeProtection: true, SignaturesUpdatedAt: &sig},
		AutomaticUpdates: agentproto.AutomaticUpdates{Enabled: true, Mechanism: "unattended-upgrades"}}
}

// report asks a device for its status (via a scan) and answers the status command with st;
// it returns the scan's command.
func (f fixture) report(ten apptest.Tenant, deviceID string, st agentproto.SecurityStatus) string {
	f.e.T.Helper()
	var x security.SecurityScanRun
	f.e.Must(http.StatusAccepted, ten.Partner, "POST", api+"/security/scan/"+deviceID, map[string]any{"scanType": "quick"}).JSON(f.e.T, &x)
	for _, c := range f.pending(deviceID, agentproto.CommandSecurityStatus) {
		f.result(ten, deviceID, c, agentproto.ResultCompleted, st)
	}
	return x.CommandID
}

func (f fixture) status(c apptest.Caller, deviceID string) security.SecurityStatusDetail {
	f.e.T.Helper()
	var st security.SecurityStatusDetail
	f.e.Must(http.StatusOK, c, "GET", api+"/security/status/"+deviceID, nil).JSON(f.e.T, &st)
	return st
}

func (f fixture) threat(c apptest.Caller, deviceID string) security.SecurityThreat {
	f.e.T.Helper()
	var out struct{ Data []security.SecurityThreat }
	f.e.Must(http.StatusOK, c, "GET", api+"/security/threats/"+deviceID, nil).JSON(f.e.T, &out)
	if len(out.Data) != 1 {
		f.e.T.Fatalf("threats of %s = %d, want 1", deviceID, len(out.Data))
	}
	return out.Data[0]
}

const eicarSum = "275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f"

func TestSecurity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.a
	dev := f.device(a, "web-1")
	scanCmd := f.report(a, dev, healthy())

	t.Run("status is stored and judged", func(t *testing.T) {
		st := f.status(a.Partner, dev)
		if st.State != security.StateProtected || !st.FirewallEnabled || st.EncryptionStatus != "encrypted" || st.Provider != "clamav" ||
			!st.RealTimeProtection || st.Hostname != "web-1" || st.Details.Firewall.Rules != 12 {
			t.Fatalf("status = %+v", st)
		}
		if st.Score == nil || *st.Score != 100 || st.RiskBand == nil || *st.RiskBand != "low" {
			t.Fatalf("score = %v %v, want 100 low", st.Score, st.RiskBand)
		}
		var list struct {
			Data []security.SecurityDeviceStatus
		}
		f.e.Must(http.StatusOK, a.Org, "GET", api+"/security/status?state=protected&orgId="+a.OrgID, nil).JSON(t, &list)
		if len(list.Data) != 1 || list.Data[0].DeviceID != dev {
			t.Fatalf("list = %+v", list.Data)
		}
		f.e.Must(http.StatusOK, a.Org, "GET", api+"/security/status?state=at_risk", nil).JSON(t, &list)
		if len(list.Data) != 0 {
			t.Fatalf("at_risk list = %+v", list.Data)
		}
		f.e.Must(http.StatusOK, f.b.Partner, "GET", api+"/security/status", nil).JSON(t, &list)
		if len(list.Data) != 0 {
			t.Fatalf("another tenant lists %+v", list.Data)
		}
		f.e.Must(http.StatusBadRequest, a.Org, "GET", api+"/security/status?state=bogus", nil)
	})

	t.Run("score weighting", func(t *testing.T) {
		d2 := f.device(a, "web-2")
		st := healthy()
		st.Firewall = agentproto.FirewallState{Backend: agentproto.FirewallNone}
		f.report(a, d2, st)
		var p security.SecurityPosture
		f.e.Must(http.StatusOK, a.Partner, "GET", api+"/security/posture/"+d2, nil).JSON(t, &p)
		if p.Score != 85 || p.RiskBand != "medium" {
			t.Fatalf("score without firewall = %d %s, want 85 medium", p.Score, p.RiskBand)
		}
		for _, fa := range p.Factors {
			if fa.Factor == security.FactorFirewall && (fa.Weight != 15 || fa.Points != 0) {
				t.Fatalf("firewall factor = %+v", fa)
			}
		}
		if p.State != security.StateAtRisk || len(p.PolicyFailures) != 1 {
			t.Fatalf("posture = %+v, want at_risk by the built-in policy", p)
		}
		// Encryption partial: 7 of 15.
		st.Encryption.Status = agentproto.EncryptionPartial
		f.report(a, d2, st)
		f.e.Must(http.StatusOK, a.Partner, "GET", api+"/security/posture/"+d2, nil).JSON(t, &p)
		if p.Score != 77 {
			t.Fatalf("score with partial encryption = %d, want 77", p.Score)
		}
		var b security.SecurityScoreBreakdown
		f.e.Must(http.StatusOK, a.Partner, "GET", api+"/security/score-breakdown?orgId="+a.OrgID, nil).JSON(t, &b)
		total := 0
		for _, fa := range b.Factors {
			total += fa.Weight
			if fa.Factor == security.FactorFirewall && fa.Points != 7.5 {
				t.Fatalf("fleet firewall points = %v, want 7.5", fa.Points)
			}
		}
		if total != 100 || b.Devices != 2 || b.Score != 89 {
			t.Fatalf("breakdown = %+v", b)
		}
		var d security.SecurityDashboard
		f.e.Must(http.StatusOK, a.Partner, "GET", api+"/security/dashboard", nil).JSON(t, &d)
		if d.TotalDevices != 2 || d.ByState["protected"] != 1 || d.ByState["at_risk"] != 1 || d.FirewallEnabled != 1 || d.Score != 89 {
			t.Fatalf("dashboard = %+v", d)
		}
	})

	t.Run("threat lifecycle follows the agent", func(t *testing.T) {
		var evBefore = f.count(`SELECT COUNT(*) FROM events WHERE type = 'threat.detected'`)
		found := agentproto.SecurityScanResult{Engine: "builtin", FilesScanned: 3, Threats: []agentproto.FoundThreat{{Name: "EICAR-Test-File",
			Category: "test", Severity: "low", FilePath: "/tmp/eicar.com", SHA256: eicarSum, Size: 68}}}
		f.result(a, dev, scanCmd, agentproto.ResultCompleted, found)
		if n := f.count(`SELECT COUNT(*) FROM events WHERE type = 'threat.detected'`); n != evBefore+1 {
			t.Fatalf("threat.detected events = %d, want %d", n, evBefore+1)
		}
		th := f.threat(a.Org, dev)
		if th.Status != security.ThreatActive || th.Name != "EICAR-Test-File" || th.Severity != "low" || th.PendingAction != nil {
			t.Fatalf("threat = %+v", th)
		}
		if st := f.status(a.Org, dev); st.State != security.StateUnprotected || st.ThreatCount != 1 || st.LastScan == nil {
			t.Fatalf("status with a threat = %+v", st)
		}
		var scans struct{ Data []security.SecurityScanRun }
		f.e.Must(http.StatusOK, a.Org, "GET", api+"/security/scans/"+dev, nil).JSON(t, &scans)
		if len(scans.Data) != 1 || scans.Data[0].Status != security.ScanCompleted || scans.Data[0].ThreatsFound != 1 || scans.Data[0].Engine != "builtin" {
			t.Fatalf("scans = %+v", scans.Data)
		}
		// The same file found again is the same threat, no new event.
		again := f.report(a, dev, healthy())
		f.result(a, dev, again, agentproto.ResultCompleted, found)
		if n := f.count(`SELECT COUNT(*) FROM events WHERE type = 'threat.detected'`); n != evBefore+1 {
			t.Fatalf("a threat found again made an event")
		}
		f.e.Must(http.StatusConflict, a.Org, "POST", api+"/security/threats/"+th.ID+"/restore", nil)

		// Racing quarantines: exactly one is accepted.
		const n = 6
		var wg sync.WaitGroup
		codes := make(chan int, n)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes <- f.e.Do(a.Org, "POST", api+"/security/threats/"+th.ID+"/quarantine", nil).Status
			}()
		}
		wg.Wait()
		close(codes)
		got := map[int]int{}
		for c := range codes {
			got[c]++
		}
		if got[http.StatusAccepted] != 1 || got[http.StatusConflict] != n-1 {
			t.Fatalf("racing quarantines = %v", got)
		}
		r := f.e.Must(http.StatusConflict, a.Org, "POST", api+"/security/threats/"+th.ID+"/remove", nil)
		if r.ErrorCode() != security.CodeActionPending {
			t.Fatalf("second action = %s", r.ErrorCode())
		}
		th = f.threat(a.Org, dev)
		if th.Status != security.ThreatActive || th.PendingAction == nil || *th.PendingAction != "quarantine" {
			t.Fatalf("threat before the agent answers = %+v", th)
		}
		cmds := f.pending(dev, agentproto.CommandThreatAction)
		if len(cmds) != 1 {
			t.Fatalf("threat_action commands = %d", len(cmds))
		}
		f.result(a, dev, cmds[0], agentproto.ResultCompleted, agentproto.ThreatActionResult{Action: "quarantine", FilePath: "/tmp/eicar.com",
			Location: "/var/lib/gale-agent/quarantine/x"})
		th = f.threat(a.Org, dev)
		if th.Status != security.ThreatQuarantined || th.PendingAction != nil || th.Location != "/var/lib/gale-agent/quarantine/x" {
			t.Fatalf("threat after the agent's answer = %+v", th)
		}
		if st := f.status(a.Org, dev); st.ThreatCount != 0 || st.State != security.StateProtected {
			t.Fatalf("status after quarantine = %+v", st)
		}
		// A failed restore keeps the status and tells why.
		var act security.SecurityThreatAction
		f.e.Must(http.StatusAccepted, a.Org, "POST", api+"/security/threats/"+th.ID+"/restore", nil).JSON(t, &act)
		if act.Threat.Status != security.ThreatQuarantined || act.CommandID == "" {
			t.Fatalf("restore answer = %+v", act)
		}
		f.result(a, dev, act.CommandID, agentproto.ResultFailed, nil)
		th = f.threat(a.Org, dev)
		if th.Status != security.ThreatQuarantined || th.PendingAction != nil || th.LastActionError == nil {
			t.Fatalf("threat after a failed restore = %+v", th)
		}
		f.e.Must(http.StatusAccepted, a.Org, "POST", api+"/security/threats/"+th.ID+"/restore", nil).JSON(t, &act)
		f.result(a, dev, act.CommandID, agentproto.ResultCompleted, agentproto.ThreatActionResult{Action: "restore", Location: "/tmp/eicar.com"})
		if th = f.threat(a.Org, dev); th.Status != security.ThreatActive {
			t.Fatalf("restored threat = %+v", th)
		}
		f.e.Must(http.StatusAccepted, a.Org, "POST", api+"/security/threats/"+th.ID+"/remove", nil).JSON(t, &act)
		f.result(a, dev, act.CommandID, agentproto.ResultCompleted, agentproto.ThreatActionResult{Action: "remove"})
		if th = f.threat(a.Org, dev); th.Status != security.ThreatRemoved || th.Location != "" {
			t.Fatalf("removed threat = %+v", th)
		}
		r = f.e.Must(http.StatusConflict, a.Org, "POST", api+"/security/threats/"+th.ID+"/quarantine", nil)
		if r.ErrorCode() != security.CodeThreatState {
			t.Fatalf("quarantine of a removed threat = %s", r.ErrorCode())
		}
		for _, typ := range []string{"threat.quarantined", "threat.restored", "threat.removed"} {
			if n := f.count(`SELECT COUNT(*) FROM events WHERE type = $1 AND resource_id = $2`, typ, th.ID); n != 1 {
				t.Fatalf("%s events = %d", typ, n)
			}
		}
		var list struct{ Data []security.SecurityThreat }
		f.e.Must(http.StatusOK, a.Partner, "GET", api+"/security/threats?status=removed&severity=low", nil).JSON(t, &list)
		if len(list.Data) != 1 {
			t.Fatalf("filtered threats = %+v", list.Data)
		}
	})

	t.Run("scan validation", func(t *testing.T) {
		f.e.Must(http.StatusBadRequest, a.Org, "POST", api+"/security/scan/"+dev, map[string]any{"scanType": "custom"})
		f.e.Must(http.StatusBadRequest, a.Org, "POST", api+"/security/scan/"+dev, map[string]any{"scanType": "custom", "paths": []string{"relative"}})
		f.e.Must(http.StatusBadRequest, a.Org, "POST", api+"/security/scan/"+dev, map[string]any{"scanType": "quick", "paths": []string{"/tmp"}})
		f.e.Must(http.StatusBadRequest, a.Org, "POST", api+"/security/scan/"+dev, map[string]any{"scanType": "deep"})
		f.e.Must(http.StatusAccepted, a.Org, "POST", api+"/security/scan/"+dev, map[string]any{"scanType": "custom", "paths": []string{"/srv"}})
	})

	t.Run("policies judge the state", func(t *testing.T) {
		var p security.SecurityPolicy
		f.e.Must(http.StatusCreated, a.Partner, "POST", api+"/security/policies", map[string]any{"orgId": a.OrgID, "name": "Strict",
			"requireFirewall": true, "requireEncryption": true, "requireAntivirus": true, "minPasswordLength": 14, "maxAdministrators": 2,
			"scanSchedule": map[string]any{"scanType": "quick", "dailyTime": "02:30"}}).JSON(t, &p)
		if st := f.status(a.Org, dev); st.State != security.StateAtRisk {
			t.Fatalf("state under a 14-character policy = %s", st.State)
		}
		f.e.Must(http.StatusConflict, a.Partner, "POST", api+"/security/policies", map[string]any{"orgId": a.OrgID, "name": "Again"})
		f.e.Must(http.StatusBadRequest, a.Partner, "POST", api+"/security/policies", map[string]any{"orgId": a.OrgID, "name": "Bad",
			"scanSchedule": map[string]any{"scanType": "quick", "dailyTime": "25:00"}})
		f.e.Must(http.StatusOK, a.Org, "PUT", api+"/security/policies/"+p.ID, map[string]any{"name": "Relaxed", "minPasswordLength": 8}).JSON(t, &p)
		if p.Name != "Relaxed" || p.RequireFirewall || p.ScanSchedule != nil {
			t.Fatalf("replaced policy = %+v", p)
		}
		if st := f.status(a.Org, dev); st.State != security.StateProtected {
			t.Fatalf("state under the relaxed policy = %s", st.State)
		}
		var def security.SecurityPolicy
		f.e.Must(http.StatusCreated, a.Partner, "POST", api+"/security/policies", map[string]any{"name": "Partner default"}).JSON(t, &def)
		if def.OrgID != nil {
			t.Fatalf("default = %+v", def)
		}
		var list struct{ Data []security.SecurityPolicy }
		f.e.Must(http.StatusOK, a.Org, "GET", api+"/security/policies", nil).JSON(t, &list)
		if len(list.Data) != 2 {
			t.Fatalf("policies seen by the org = %d", len(list.Data))
		}
		f.e.Must(http.StatusForbidden, a.Org, "PUT", api+"/security/policies/"+def.ID, map[string]any{"name": "Mine"})
		f.e.Must(http.StatusNotFound, f.b.Partner, "PUT", api+"/security/policies/"+p.ID, map[string]any{"name": "Theirs"})
		f.e.Must(http.StatusOK, f.b.Partner, "GET", api+"/security/policies", nil).JSON(t, &list)
		if len(list.Data) != 0 {
			t.Fatalf("another tenant lists policies %+v", list.Data)
		}
	})

	t.Run("views", func(t *testing.T) {
		for _, path := range []string{"/security/firewall?enabled=true", "/security/encryption?status=encrypted", "/security/password-policy",
			"/security/admin-audit", "/security/posture", "/security/trends?days=7"} {
			r := f.e.Must(http.StatusOK, a.Partner, "GET", api+path, nil).Map(t)
			if path != "/security/trends?days=7" && len(r["data"].([]any)) == 0 {
				t.Fatalf("%s is empty", path)
			}
		}
		f.e.Must(http.StatusBadRequest, a.Partner, "GET", api+"/security/trends?days=366", nil)
		st := healthy()
		st.Administrators = append(st.Administrators, agentproto.AdminAccount{Name: "toor", UID: 0, Via: "uid0", Shell: "/bin/sh"},
			agentproto.AdminAccount{Name: "ubuntu", UID: 1001, Via: "sudo", Shell: "/bin/bash"},
			agentproto.AdminAccount{Name: "oldops", UID: 1002, Via: "wheel", Shell: "/bin/bash", Locked: true},
			agentproto.AdminAccount{Name: "away", UID: 1003, Via: "sudo", Shell: "/bin/bash", LastLogin: new(time.Now().Add(-100 * 24 * time.Hour))},
			agentproto.AdminAccount{Name: "recent", UID: 1004, Via: "sudo", Shell: "/bin/bash", LastLogin: new(time.Now().Add(-10 * 24 * time.Hour))})
		st.PasswordPolicy = agentproto.PasswordPolicy{Summary: "passwords never expire, no length rule"}
		d3 := f.device(a, "db-1")
		f.report(a, d3, st)
		var audit struct {
			Data []security.SecurityAdminAuditRow
		}
		f.e.Must(http.StatusOK, a.Partner, "GET", api+"/security/admin-audit?limit=500", nil).JSON(t, &audit)
		kinds, stale := map[string]bool{}, map[string]bool{}
		for _, r := range audit.Data {
			if r.DeviceID == d3 {
				for _, fi := range r.Findings {
					kinds[fi.Kind] = true
					if fi.Kind == "stale_account" {
						stale[fi.Account] = true
					}
				}
			}
		}
		if !stale["oldops"] || !stale["away"] || stale["recent"] || len(stale) != 2 {
			t.Fatalf("stale accounts %v, want oldops (locked) and away (100 days without signing in)", stale)
		}
		for _, k := range []string{"extra_root", "default_account", "stale_account", "weak_policy"} {
			if !kinds[k] {
				t.Fatalf("admin audit findings %v lack %s", kinds, k)
			}
		}
	})

	t.Run("trends keep one snapshot per organization per day", func(t *testing.T) {
		for range 3 {
			if err := f.s.Snapshot(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if n := f.count(`SELECT COUNT(*) FROM security_snapshots WHERE org_id = $1`, a.OrgID); n != 1 {
			t.Fatalf("snapshots = %d, want 1", n)
		}
		var tr struct {
			Days   int
			Points []security.SecurityTrendPoint
		}
		f.e.Must(http.StatusOK, a.Org, "GET", api+"/security/trends", nil).JSON(t, &tr)
		if tr.Days != 30 || len(tr.Points) != 1 || tr.Points[0].Devices != 3 || tr.Points[0].Day != time.Now().UTC().Format(time.DateOnly) {
			t.Fatalf("trends = %+v", tr)
		}
		f.e.Must(http.StatusOK, f.b.Org, "GET", api+"/security/trends", nil).JSON(t, &tr)
		if len(tr.Points) != 0 {
			t.Fatalf("another tenant's trends = %+v", tr)
		}
	})

	t.Run("recommendations", func(t *testing.T) {
		var recs struct {
			Data []security.SecurityRecommendation
		}
		f.e.Must(http.StatusOK, a.Org, "GET", api+"/security/recommendations", nil).JSON(t, &recs)
		var fw *security.SecurityRecommendation
		for i, r := range recs.Data {
			if r.Key == "firewall-disabled" {
				v := recs.Data[i]
				fw = &v
			}
		}
		if fw == nil || fw.Devices != 1 || fw.Status != "open" || len(fw.Steps) == 0 || fw.ID != "firewall-disabled:"+a.OrgID {
			t.Fatalf("recommendations = %+v", recs.Data)
		}
		var r security.SecurityRecommendation
		f.e.Must(http.StatusOK, a.Org, "POST", api+"/security/recommendations/"+fw.ID+"/complete", nil).JSON(t, &r)
		if r.Status != "completed" || r.StatusBy == nil {
			t.Fatalf("completed = %+v", r)
		}
		if code := f.e.Must(http.StatusConflict, a.Org, "POST", api+"/security/recommendations/"+fw.ID+"/complete", nil).ErrorCode(); code != "RECOMMENDATION_UNCHANGED" {
			t.Fatalf("complete twice = %s", code)
		}
		f.e.Must(http.StatusNotFound, f.b.Org, "POST", api+"/security/recommendations/"+fw.ID+"/dismiss", nil)
		f.e.Must(http.StatusNotFound, a.Org, "POST", api+"/security/recommendations/bogus:"+a.OrgID+"/dismiss", nil)
		f.e.Must(http.StatusOK, a.Org, "POST", api+"/security/recommendations/"+fw.ID+"/dismiss", nil)
		f.e.Must(http.StatusConflict, a.Org, "POST", api+"/security/recommendations/"+fw.ID+"/dismiss", nil)
		f.e.Must(http.StatusOK, a.Org, "GET", api+"/security/recommendations", nil).JSON(t, &recs)
		for _, r := range recs.Data {
			if r.ID == fw.ID {
				t.Fatalf("a dismissed recommendation is listed: %+v", r)
			}
		}
		f.e.Must(http.StatusOK, a.Org, "GET", api+"/security/recommendations?includeDismissed=true", nil).JSON(t, &recs)
		seen := false
		for _, r := range recs.Data {
			seen = seen || (r.ID == fw.ID && r.Status == "dismissed")
		}
		if !seen {
			t.Fatal("includeDismissed does not list it")
		}
		// Per organization: Bravo's own advice is untouched by Alpha's choices.
		bd := f.device(f.b, "b-1")
		st := healthy()
		st.Firewall = agentproto.FirewallState{Backend: agentproto.FirewallNone}
		f.report(f.b, bd, st)
		f.e.Must(http.StatusOK, f.b.Org, "GET", api+"/security/recommendations", nil).JSON(t, &recs)
		if len(recs.Data) != 1 || recs.Data[0].Status != "open" || recs.Data[0].OrgID != f.b.OrgID {
			t.Fatalf("bravo's recommendations = %+v", recs.Data)
		}
	})

	t.Run("another tenant gets 404 on every resource", func(t *testing.T) {
		th := f.threat(a.Org, dev)
		other := f.b.Partner
		for _, c := range []struct{ method, path string }{
			{"GET", "/security/status/" + dev}, {"GET", "/security/threats/" + dev}, {"GET", "/security/scans/" + dev},
			{"GET", "/security/posture/" + dev}, {"POST", "/security/threats/" + th.ID + "/quarantine"},
			{"POST", "/security/threats/" + th.ID + "/remove"}, {"POST", "/security/threats/" + th.ID + "/restore"},
		} {
			f.e.Must(http.StatusNotFound, other, c.method, api+c.path, nil)
		}
		f.e.Must(http.StatusNotFound, other, "POST", api+"/security/scan/"+dev, map[string]any{"scanType": "quick"})
		f.e.Must(http.StatusNotFound, a.Org, "GET", api+"/security/status/00000000-0000-7000-8000-000000000000", nil)
		var d security.SecurityDashboard
		f.e.Must(http.StatusOK, other, "GET", api+"/security/dashboard", nil).JSON(t, &d)
		if d.TotalDevices != 1 || d.ActiveThreats != 0 {
			t.Fatalf("bravo's dashboard = %+v", d)
		}
	})

	t.Run("offline follows the device", func(t *testing.T) {
		quiet := f.e.InsertDevice(apptest.DeviceRow{PartnerID: a.PartnerID, OrgID: a.OrgID, SiteID: a.SiteID, Hostname: "quiet",
			LastSeen: time.Now().Add(-time.Hour)})
		f.report(a, quiet, healthy())
		if st := f.status(a.Org, quiet); st.State != security.StateProtected {
			t.Fatalf("state = %s", st.State)
		}
		if err := f.dev.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := f.status(a.Org, quiet); st.State != security.StateOffline {
			t.Fatalf("state of an offline device = %s", st.State)
		}
	})
}

// A device whose agent has not reported its security status yet answers 200 pending, with when
// the status job asks for it; once asked, requestedAt is set; the agent's answer makes it a
// judged status with the time of the next collection. A device that cannot be asked (offline,
// not Linux) is pending without a time; a decommissioned one, or one of another tenant, is 404.
func TestStatusIsPendingUntilTheFirstCollection(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.a
	dev := f.device(a, "web-1")
	const interval = 6 * time.Hour
	within := func(got *time.Time, from, to time.Time) bool {
		return got != nil && !got.Before(from.Add(-time.Second)) && !got.After(to.Add(time.Second))
	}

	before := time.Now()
	st := f.status(a.Org, dev)
	if st.State != security.StatePending || st.DeviceID != dev || st.Hostname != "web-1" || st.CollectedAt != nil || st.Score != nil ||
		st.RiskBand != nil || st.Details != nil || st.RequestedAt != nil ||
		!within(st.NextCollectionAt, before, time.Now().Add(security.RefreshEvery)) {
		t.Fatalf("status before any collection = %+v", st)
	}
	var raw map[string]any
	f.e.Must(http.StatusOK, a.Org, "GET", api+"/security/status/"+dev, nil).JSON(t, &raw)
	for _, k := range []string{"collectedAt", "score", "riskBand", "details", "requestedAt"} {
		if v, ok := raw[k]; !ok || v != nil {
			t.Errorf("pending status: %s = %v, want null", k, v)
		}
	}

	if err := f.s.RefreshStatuses(context.Background()); err != nil {
		t.Fatal(err)
	}
	st = f.status(a.Org, dev)
	if st.State != security.StatePending || st.RequestedAt == nil || st.RequestedAt.Before(before.Add(-time.Second)) ||
		!within(st.NextCollectionAt, st.RequestedAt.Add(interval), st.RequestedAt.Add(interval+security.RefreshEvery)) {
		t.Fatalf("status asked for, not answered yet = %+v", st)
	}

	for _, c := range f.pending(dev, agentproto.CommandSecurityStatus) {
		f.result(a, dev, c, agentproto.ResultCompleted, healthy())
	}
	st = f.status(a.Org, dev)
	if st.State != security.StateProtected || st.CollectedAt == nil || st.Score == nil || st.RiskBand == nil || st.Details == nil ||
		!within(st.NextCollectionAt, st.CollectedAt.Add(interval), st.CollectedAt.Add(interval+security.RefreshEvery)) {
		t.Fatalf("status once collected = %+v", st)
	}

	for _, d := range []apptest.DeviceRow{{Hostname: "asleep", Status: "offline"}, {Hostname: "win-1", OSType: "windows", OSName: "Windows"}} {
		d.PartnerID, d.OrgID, d.SiteID = a.PartnerID, a.OrgID, a.SiteID
		id := f.e.InsertDevice(d)
		if st := f.status(a.Org, id); st.State != security.StatePending || st.NextCollectionAt != nil {
			t.Fatalf("status of %s, which cannot be asked = %+v", d.Hostname, st)
		}
	}
	f.e.Must(http.StatusNotFound, f.b.Partner, "GET", api+"/security/status/"+dev, nil)
	gone := f.device(a, "gone-1")
	f.e.Must(http.StatusNoContent, a.Partner, "DELETE", api+"/devices/"+gone, nil)
	f.e.Must(http.StatusNotFound, a.Partner, "GET", api+"/security/status/"+gone, nil)
}

// While a scan runs, its record shows how many files the agent has looked at, as the agent
// reports over its live channel; the count only grows, only the scan's own device moves it, and
// the result's count is final.
func TestARunningScanShowsItsProgress(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dev := f.e.EnrollAgent(f.a, "scan-1")
	ws, ctx := f.e.DialAgent(dev.AuthToken)
	other := f.e.EnrollAgent(f.b, "scan-2")
	otherWS, otherCtx := f.e.DialAgent(other.AuthToken)
	var x security.SecurityScanRun
	f.e.Must(http.StatusAccepted, f.a.Partner, "POST", api+"/security/scan/"+dev.DeviceID, map[string]any{"scanType": "full"}).JSON(t, &x)
	scan := func() security.SecurityScanRun {
		var out struct{ Data []security.SecurityScanRun }
		f.e.Must(http.StatusOK, f.a.Org, "GET", api+"/security/scans/"+dev.DeviceID, nil).JSON(t, &out)
		if len(out.Data) != 1 {
			t.Fatalf("scans = %+v", out.Data)
		}
		return out.Data[0]
	}
	progress := func(files int) agentproto.Message {
		raw, _ := json.Marshal(agentproto.SecurityScanProgress{CommandID: x.CommandID, FilesScanned: files})
		return agentproto.Message{Type: agentproto.TypeSecurityScanProgress, Payload: raw}
	}
	// Another tenant's agent naming the scan's command changes nothing.
	sendSynced(t, otherCtx, otherWS, progress(1000))
	sendSynced(t, ctx, ws, progress(42), progress(10))
	if got := scan(); got.Status != security.ScanRunning || got.FilesScanned != 42 {
		t.Fatalf("scan while the agent reports progress = %+v", got)
	}
	f.result(f.a, dev.DeviceID, x.CommandID, agentproto.ResultCompleted, agentproto.SecurityScanResult{Engine: "builtin", FilesScanned: 50,
		Threats: []agentproto.FoundThreat{}})
	sendSynced(t, ctx, ws, progress(60))
	if got := scan(); got.Status != security.ScanCompleted || got.FilesScanned != 50 {
		t.Fatalf("scan once the agent answered = %+v", got)
	}
}

// sendSynced sends msgs on an agent's live channel, then a heartbeat, and waits for its
// acknowledgement: the server handles an agent's messages in order, so they were handled.
func sendSynced(t *testing.T, ctx context.Context, ws *websocket.Conn, msgs ...agentproto.Message) {
	t.Helper()
	hb, _ := json.Marshal(agentproto.Heartbeat{AgentVersion: "1.0.0"})
	for _, m := range append(msgs, agentproto.Message{ID: "sync", Type: agentproto.TypeHeartbeat, Payload: hb}) {
		raw, _ := json.Marshal(m)
		if err := ws.Write(ctx, websocket.MessageText, raw); err != nil {
			t.Fatal(err)
		}
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var m agentproto.Message
		if json.Unmarshal(data, &m) == nil && m.Type == agentproto.TypeHeartbeatAck && m.ID == "sync" {
			return
		}
	}
}
