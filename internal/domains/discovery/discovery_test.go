package discovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/discovery"
	"gale/internal/domains/monitors"
	"gale/internal/domains/snmp"
	"gale/internal/platform/access"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

type fixture struct {
	e   *apptest.Env
	a   apptest.Tenant
	b   apptest.Tenant
	s   *discovery.Service
	dev *devices.Service
}

func newFixture(t *testing.T, opts ...apptest.Option) fixture {
	e := apptest.New(t, opts...)
	admin := e.Admin()
	return fixture{e: e, a: e.NewTenant(admin, "Alpha"), b: e.NewTenant(admin, "Bravo"), s: app.Service[*discovery.Service](e.App),
		dev: app.Service[*devices.Service](e.App)}
}

func (f fixture) device(ten apptest.Tenant, host, status string) string {
	return f.e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: host, Status: status})
}

// managed is a device of ten whose inventory reports mac and ip.
func (f fixture) managed(ten apptest.Tenant, host, mac, ip string) string {
	f.e.T.Helper()
	id := f.device(ten, host, "offline")
	inv := agentproto.Inventory{Hostname: host, Network: []agentproto.NetworkInterface{{Name: "eth0", MACAddress: mac, Addresses: []string{ip + "/24"},
		Up: true}}}
	if err := f.dev.StoreInventory(context.Background(), agentOf(ten, id), inv); err != nil {
		f.e.T.Fatalf("store inventory: %v", err)
	}
	return id
}

func agentOf(ten apptest.Tenant, deviceID string) devices.Agent {
	return devices.Agent{DeviceID: deviceID, PartnerID: ten.PartnerID, OrgID: ten.OrgID, Role: "agent"}
}

func (f fixture) profile(c apptest.Caller, body map[string]any) discovery.DiscoveryProfile {
	f.e.T.Helper()
	var p discovery.DiscoveryProfile
	f.e.Must(201, c, "POST", api+"/discovery/profiles", body).JSON(f.e.T, &p)
	return p
}

func (f fixture) scan(c apptest.Caller, profileID string) discovery.DiscoveryJob {
	f.e.T.Helper()
	var j discovery.DiscoveryJob
	f.e.Must(202, c, "POST", api+"/discovery/scan", map[string]any{"profileId": profileID}).JSON(f.e.T, &j)
	return j
}

func (f fixture) job(c apptest.Caller, id string) discovery.DiscoveryJob {
	f.e.T.Helper()
	var j discovery.DiscoveryJob
	f.e.Must(200, c, "GET", api+"/discovery/jobs/"+id, nil).JSON(f.e.T, &j)
	return j
}

// running makes the agent take its queued commands and the job follow them.
func (f fixture) running(agentID string) {
	f.e.T.Helper()
	if _, err := f.dev.TakeQueued(context.Background(), agentID); err != nil {
		f.e.T.Fatal(err)
	}
	if err := f.s.Tick(context.Background()); err != nil {
		f.e.T.Fatal(err)
	}
}

func (f fixture) result(ten apptest.Tenant, j discovery.DiscoveryJob, status string, res agentproto.NetworkScanResult) {
	f.e.T.Helper()
	raw, _ := json.Marshal(res)
	if err := f.dev.RecordResult(context.Background(), agentOf(ten, j.AgentDeviceID), agentproto.CommandResult{CommandID: *j.CommandID,
		Status: status, Result: raw, Error: map[bool]string{true: "", false: "probe failed"}[status == agentproto.ResultCompleted]}); err != nil {
		f.e.T.Fatalf("record result: %v", err)
	}
}

func (f fixture) assets(c apptest.Caller, query string) []discovery.DiscoveryAsset {
	f.e.T.Helper()
	var list struct{ Data []discovery.DiscoveryAsset }
	f.e.Must(200, c, "GET", api+"/discovery/assets"+query, nil).JSON(f.e.T, &list)
	return list.Data
}

func byIP(list []discovery.DiscoveryAsset) map[string]discovery.DiscoveryAsset {
	out := map[string]discovery.DiscoveryAsset{}
	for _, x := range list {
		out[x.IP] = x
	}
	return out
}

func wantCode(t *testing.T, r *apptest.Response, status int, code string) {
	t.Helper()
	if r.Status != status || (code != "" && r.ErrorCode() != code) {
		t.Fatalf("status %d code %q, want %d %s: %s", r.Status, r.ErrorCode(), status, code, r.Body)
	}
}

func TestProfiles(t *testing.T) {
	f := newFixture(t)
	c := f.a.Org
	p := f.profile(c, map[string]any{"siteId": f.a.SiteID, "name": "Office", "subnets": []string{"192.168.10.7/24", "10.0.0.5"},
		"excludeIps": []string{"192.168.10.1"}, "methods": []string{"ping", "snmp", "ping"},
		"snmp": map[string]any{"version": "v2c", "community": "s3cret-community"}, "schedule": map[string]any{"type": "interval", "intervalMinutes": 60}})
	if strings.Join(p.Subnets, ",") != "192.168.10.0/24,10.0.0.5/32" || p.Addresses != 257 || strings.Join(p.Methods, ",") != "ping,snmp" {
		t.Errorf("profile = %+v: want masked subnets, 257 addresses, methods without repeats", p)
	}
	if p.TimeoutMs != 1000 || p.Concurrency != 64 || len(p.Ports) != len(discovery.DefaultPorts) || p.NextRunAt == nil {
		t.Errorf("defaults = timeout %d concurrency %d ports %d next %v", p.TimeoutMs, p.Concurrency, len(p.Ports), p.NextRunAt)
	}
	if p.SNMP == nil || p.SNMP.Version != "v2c" || p.SNMP.Port != 161 {
		t.Errorf("snmp summary = %+v", p.SNMP)
	}
	got := f.e.Must(200, c, "GET", api+"/discovery/profiles/"+p.ID, nil)
	if strings.Contains(string(got.Body), "s3cret") {
		t.Errorf("the community came back: %s", got.Body)
	}
	list := f.e.Must(200, f.a.Partner, "GET", api+"/discovery/profiles", nil)
	if strings.Contains(string(list.Body), "s3cret") || !strings.Contains(string(list.Body), p.ID) {
		t.Errorf("list = %s", list.Body)
	}
	var q discovery.DiscoveryProfile
	f.e.Must(200, c, "PATCH", api+"/discovery/profiles/"+p.ID, map[string]any{"name": "Office LAN", "ports": []int{80, 22, 80},
		"schedule": map[string]any{"type": "manual"}}).JSON(t, &q)
	if q.Name != "Office LAN" || fmt.Sprint(q.Ports) != "[22 80]" || q.NextRunAt != nil || q.SNMP == nil {
		t.Errorf("patched = %+v", q)
	}
	wantCode(t, f.e.Do(c, "PATCH", api+"/discovery/profiles/"+p.ID, map[string]any{"clearSnmp": true}), 400, "VALIDATION_ERROR")
	wantCode(t, f.e.Do(c, "POST", api+"/discovery/profiles", map[string]any{"siteId": f.a.SiteID, "name": "office lan",
		"subnets": []string{"10.1.0.0/24"}}), 409, "NAME_TAKEN")

	bad := map[string]map[string]any{
		"ipv6":             {"subnets": []string{"fd00::/120"}},
		"not a cidr":       {"subnets": []string{"10.0.0.0/33"}},
		"no subnets":       {"subnets": []string{}},
		"too large":        {"subnets": []string{"10.0.0.0/21"}},
		"too large deep":   {"subnets": []string{"10.0.0.0/15"}, "deepScan": true},
		"overlap":          {"subnets": []string{"10.0.0.0/24", "10.0.0.128/25"}},
		"bad exclude":      {"subnets": []string{"10.0.0.0/24"}, "excludeIps": []string{"nope"}},
		"port zero":        {"subnets": []string{"10.0.0.0/24"}, "ports": []int{0}},
		"port too high":    {"subnets": []string{"10.0.0.0/24"}, "ports": []int{65536}},
		"no ports":         {"subnets": []string{"10.0.0.0/24"}, "ports": []int{}},
		"method":           {"subnets": []string{"10.0.0.0/24"}, "methods": []string{"telepathy"}},
		"snmp without":     {"subnets": []string{"10.0.0.0/24"}, "methods": []string{"snmp"}},
		"community":        {"subnets": []string{"10.0.0.0/24"}, "snmp": map[string]any{"version": "v2c"}},
		"v3 short pass":    {"subnets": []string{"10.0.0.0/24"}, "snmp": map[string]any{"version": "v3", "username": "u", "authProtocol": "SHA", "authPassword": "short"}},
		"interval short":   {"subnets": []string{"10.0.0.0/24"}, "schedule": map[string]any{"type": "interval", "intervalMinutes": 5}},
		"cron fields":      {"subnets": []string{"10.0.0.0/24"}, "schedule": map[string]any{"type": "cron", "cron": "* * *"}},
		"cron value":       {"subnets": []string{"10.0.0.0/24"}, "schedule": map[string]any{"type": "cron", "cron": "99 * * * *"}},
		"concurrency":      {"subnets": []string{"10.0.0.0/24"}, "concurrency": 0},
		"concurrency high": {"subnets": []string{"10.0.0.0/24"}, "concurrency": 257},
		"timeout":          {"subnets": []string{"10.0.0.0/24"}, "timeoutMs": 50},
		"other site":       {"subnets": []string{"10.0.0.0/24"}, "siteId": f.b.SiteID},
		"agent elsewhere":  {"subnets": []string{"10.0.0.0/24"}, "agentDeviceId": f.device(f.b, "b-probe", "online")},
	}
	for name, body := range bad {
		if _, ok := body["siteId"]; !ok {
			body["siteId"] = f.a.SiteID
		}
		body["name"] = "bad " + name
		r := f.e.Do(c, "POST", api+"/discovery/profiles", body)
		if r.Status != 400 {
			t.Errorf("%s: status %d, want 400: %s", name, r.Status, r.Body)
		}
	}
	deep := f.profile(c, map[string]any{"siteId": f.a.SiteID, "name": "Campus", "subnets": []string{"10.20.0.0/16"}, "deepScan": true,
		"schedule": map[string]any{"type": "cron", "cron": "0 3 * * 1"}})
	if deep.Addresses != 65536 || deep.NextRunAt == nil {
		t.Errorf("deep profile = %+v", deep)
	}
	wantCode(t, f.e.Do(c, "PATCH", api+"/discovery/profiles/"+deep.ID, map[string]any{"deepScan": false}), 400, "VALIDATION_ERROR")

	// Another tenant's profile is missing to the caller.
	for _, r := range []*apptest.Response{
		f.e.Do(f.b.Org, "GET", api+"/discovery/profiles/"+p.ID, nil),
		f.e.Do(f.b.Partner, "PATCH", api+"/discovery/profiles/"+p.ID, map[string]any{"name": "x"}),
		f.e.Do(f.b.Org, "DELETE", api+"/discovery/profiles/"+p.ID, nil),
		f.e.Do(f.b.Org, "POST", api+"/discovery/scan", map[string]any{"profileId": p.ID}),
	} {
		wantCode(t, r, 404, "NOT_FOUND")
	}
	var other struct{ Data []discovery.DiscoveryProfile }
	f.e.Must(200, f.b.Partner, "GET", api+"/discovery/profiles", nil).JSON(t, &other)
	if len(other.Data) != 0 {
		t.Errorf("another tenant lists %d profiles", len(other.Data))
	}
	f.e.Must(204, c, "DELETE", api+"/discovery/profiles/"+p.ID, nil)
	wantCode(t, f.e.Do(c, "GET", api+"/discovery/profiles/"+p.ID, nil), 404, "NOT_FOUND")
}

func scanResult(hosts ...agentproto.ScannedHost) agentproto.NetworkScanResult {
	return agentproto.NetworkScanResult{HostsTotal: 254, HostsScanned: 254, Hosts: hosts,
		Routes: []agentproto.ScanRoute{{Subnet: "192.168.1.0/24", Interface: "eth0"}, {Subnet: "0.0.0.0/0", Gateway: "192.168.1.1", Interface: "eth0"}}}
}

func TestScanJobs(t *testing.T) {
	f := newFixture(t)
	c := f.a.Org
	p := f.profile(c, map[string]any{"siteId": f.a.SiteID, "name": "LAN", "subnets": []string{"192.168.1.0/24"}})
	off := f.device(f.a, "sleepy", "offline")
	wantCode(t, f.e.Do(c, "POST", api+"/discovery/scan", map[string]any{"profileId": p.ID}), 409, devices.CodeNoProbeAgent)
	wantCode(t, f.e.Do(c, "POST", api+"/discovery/scan", map[string]any{"profileId": p.ID, "agentDeviceId": off}), 409, devices.CodeNoProbeAgent)
	probe := f.device(f.a, "probe", "online")
	j := f.scan(c, p.ID)
	if j.Status != discovery.JobScheduled || j.AgentDeviceID != probe || j.CommandID == nil || j.HostsTotal != 256 || j.Trigger != "manual" {
		t.Fatalf("job = %+v", j)
	}
	wantCode(t, f.e.Do(c, "POST", api+"/discovery/scan", map[string]any{"profileId": p.ID}), 409, discovery.CodeScanActive)
	wantCode(t, f.e.Do(c, "POST", api+"/discovery/jobs/"+j.ID+"/cancel", nil), 409, discovery.CodeJobNotRunning)
	wantCode(t, f.e.Do(c, "DELETE", api+"/discovery/profiles/"+p.ID, nil), 409, discovery.CodeScanActive)
	f.running(probe)
	if got := f.job(c, j.ID); got.Status != discovery.JobRunning || got.StartedAt == nil {
		t.Fatalf("after the agent took it: %+v", got)
	}
	wantCode(t, f.e.Do(f.b.Org, "GET", api+"/discovery/jobs/"+j.ID, nil), 404, "NOT_FOUND")
	wantCode(t, f.e.Do(f.b.Partner, "POST", api+"/discovery/jobs/"+j.ID+"/cancel", nil), 404, "NOT_FOUND")

	f.result(f.a, j, agentproto.ResultCompleted, scanResult(
		agentproto.ScannedHost{IP: "192.168.1.1", MAC: "00:11:22:33:44:01", OpenPorts: []int{53, 80}},
		agentproto.ScannedHost{IP: "192.168.1.20", MAC: "00:11:22:33:44:20", Hostname: "printer.lan", OpenPorts: []int{80, 9100}},
		agentproto.ScannedHost{IP: "192.168.1.30", OpenPorts: []int{22, 3306}},
		agentproto.ScannedHost{IP: "192.168.1.40", SysDescr: "Cisco IOS Software, Catalyst 2960 switch", SysObjectID: "1.3.6.1.4.1.9.1.716"},
		agentproto.ScannedHost{IP: "192.168.1.9", OpenPorts: []int{135, 445, 3389}},
	))
	done := f.job(c, j.ID)
	if done.Status != discovery.JobCompleted || done.HostsFound != 5 || done.NewAssets != 5 || done.HostsScanned != 254 || done.CompletedAt == nil {
		t.Fatalf("completed job = %+v", done)
	}
	wantCode(t, f.e.Do(c, "POST", api+"/discovery/jobs/"+j.ID+"/cancel", nil), 409, discovery.CodeJobNotRunning)
	list := f.assets(c, "")
	var ips []string
	for _, x := range list {
		ips = append(ips, x.IP+"="+x.Type)
	}
	if want := "192.168.1.1=router 192.168.1.9=workstation 192.168.1.20=printer 192.168.1.30=server 192.168.1.40=switch"; strings.Join(ips, " ") != want {
		t.Errorf("assets = %s, want %s (by address, typed)", strings.Join(ips, " "), want)
	}
	if len(f.assets(f.b.Partner, "")) != 0 {
		t.Error("another tenant sees the assets")
	}
	if got := f.assets(c, "?type=printer&search=PRINTER"); len(got) != 1 || got[0].Hostname != "printer.lan" {
		t.Errorf("filtered = %+v", got)
	}
	if got := f.assets(c, "?search=44:2"); len(got) != 1 || got[0].IP != "192.168.1.20" {
		t.Errorf("by MAC = %+v", got)
	}
	var page struct {
		Data       []discovery.DiscoveryAsset
		Pagination struct {
			HasMore bool
			Cursor  string
		}
	}
	f.e.Must(200, c, "GET", api+"/discovery/assets?limit=2", nil).JSON(t, &page)
	if len(page.Data) != 2 || !page.Pagination.HasMore {
		t.Fatalf("first page = %+v", page)
	}
	f.e.Must(200, c, "GET", api+"/discovery/assets?limit=2&cursor="+page.Pagination.Cursor, nil).JSON(t, &page)
	if len(page.Data) != 2 || page.Data[0].IP != "192.168.1.20" {
		t.Errorf("second page = %+v", page.Data)
	}
	var jobs struct{ Data []discovery.DiscoveryJob }
	f.e.Must(200, c, "GET", api+"/discovery/jobs?status=completed&profileId="+p.ID, nil).JSON(t, &jobs)
	if len(jobs.Data) != 1 {
		t.Errorf("jobs = %+v", jobs.Data)
	}

	// A second scan refreshes the assets: one new, the others seen again.
	j2 := f.scan(c, p.ID)
	f.running(probe)
	f.result(f.a, j2, agentproto.ResultCompleted, scanResult(agentproto.ScannedHost{IP: "192.168.1.20", OpenPorts: []int{631}},
		agentproto.ScannedHost{IP: "192.168.1.50"}))
	if got := f.job(c, j2.ID); got.NewAssets != 1 || got.HostsFound != 2 {
		t.Errorf("second job = %+v", got)
	}
	printer := byIP(f.assets(c, ""))["192.168.1.20"]
	if printer.MAC != "00:11:22:33:44:20" || printer.Hostname != "printer.lan" || fmt.Sprint(printer.OpenPorts) != "[631]" ||
		printer.LastJobID == nil || *printer.LastJobID != j2.ID || !printer.LastSeenAt.After(printer.FirstSeenAt) {
		t.Errorf("refreshed asset = %+v", printer)
	}

	// A failing scan fails its job, with the agent's error.
	j3 := f.scan(c, p.ID)
	f.running(probe)
	f.result(f.a, j3, agentproto.ResultFailed, agentproto.NetworkScanResult{})
	if got := f.job(c, j3.ID); got.Status != discovery.JobFailed || got.Error == nil || *got.Error != "probe failed" {
		t.Errorf("failed job = %+v", got)
	}
	// A job whose command is cancelled on the device fails at the next tick.
	j4 := f.scan(c, p.ID)
	f.e.Must(200, c, "POST", api+"/devices/"+probe+"/commands/"+*j4.CommandID+"/cancel", nil)
	if err := f.s.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.job(c, j4.ID); got.Status != discovery.JobFailed {
		t.Errorf("job of a cancelled command = %+v", got)
	}
}

// A job cancelled while running keeps its state, its command is cancelled, and a result
// arriving later writes nothing.
func TestCancelDropsLateResults(t *testing.T) {
	f := newFixture(t)
	c := f.a.Org
	p := f.profile(c, map[string]any{"siteId": f.a.SiteID, "name": "LAN", "subnets": []string{"192.168.1.0/24"}})
	probe := f.device(f.a, "probe", "online")
	j := f.scan(c, p.ID)
	f.running(probe)
	var cancelled discovery.DiscoveryJob
	f.e.Must(200, c, "POST", api+"/discovery/jobs/"+j.ID+"/cancel", nil).JSON(t, &cancelled)
	if cancelled.Status != discovery.JobCancelled || cancelled.CompletedAt == nil {
		t.Fatalf("cancelled = %+v", cancelled)
	}
	cmd, err := f.dev.GetCommand(context.Background(), probe, *j.CommandID)
	if err == nil && cmd.Status != devices.CommandCancelled {
		t.Errorf("command = %s, want cancelled", cmd.Status)
	}
	f.result(f.a, j, agentproto.ResultCompleted, scanResult(agentproto.ScannedHost{IP: "192.168.1.20"}))
	if got := f.job(c, j.ID); got.Status != discovery.JobCancelled || got.HostsFound != 0 {
		t.Errorf("after a late result: %+v", got)
	}
	if n := len(f.assets(c, "")); n != 0 {
		t.Errorf("%d assets from a cancelled job", n)
	}
	wantCode(t, f.e.Do(c, "POST", api+"/discovery/jobs/"+j.ID+"/cancel", nil), 409, discovery.CodeJobNotRunning)
}

// Cancel racing the result: one of them wins, and the job's final state says which; a
// cancelled job has no assets.
func TestCancelRacingIngest(t *testing.T) {
	f := newFixture(t)
	c := f.a.Org
	probe := f.device(f.a, "probe", "online")
	for i := range 12 {
		p := f.profile(c, map[string]any{"siteId": f.a.SiteID, "name": fmt.Sprintf("LAN %d", i), "subnets": []string{fmt.Sprintf("10.%d.0.0/24", i)}})
		j := f.scan(c, p.ID)
		f.running(probe)
		ip := fmt.Sprintf("10.%d.0.7", i)
		raw, _ := json.Marshal(agentproto.NetworkScanResult{HostsTotal: 254, HostsScanned: 254, Hosts: []agentproto.ScannedHost{{IP: ip}}})
		var wg sync.WaitGroup
		var cancel *apptest.Response
		var resultErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			cancel = f.e.Do(c, "POST", api+"/discovery/jobs/"+j.ID+"/cancel", nil)
		}()
		go func() {
			defer wg.Done()
			resultErr = f.dev.RecordResult(context.Background(), agentOf(f.a, probe), agentproto.CommandResult{CommandID: *j.CommandID,
				Status: agentproto.ResultCompleted, Result: raw})
		}()
		wg.Wait()
		if resultErr != nil {
			t.Fatal(resultErr)
		}
		got := f.job(c, j.ID)
		_, found := byIP(f.assets(c, "?search="+ip))[ip]
		switch {
		case cancel.Status == 200 && got.Status == discovery.JobCancelled && !found:
		case cancel.Status == 409 && got.Status == discovery.JobCompleted && found:
		default:
			t.Fatalf("round %d: cancel %d, job %s, asset found %v", i, cancel.Status, got.Status, found)
		}
	}
}

func TestAssetLinks(t *testing.T) {
	f := newFixture(t)
	c := f.a.Org
	p := f.profile(c, map[string]any{"siteId": f.a.SiteID, "name": "LAN", "subnets": []string{"192.168.1.0/24"}})
	probe := f.device(f.a, "probe", "online")
	byMAC := f.managed(f.a, "laptop", "AA:BB:CC:DD:EE:01", "10.9.9.9")
	byAddr := f.managed(f.a, "desktop", "aa:bb:cc:dd:ee:02", "192.168.1.12")
	foreign := f.managed(f.b, "foreign", "aa:bb:cc:dd:ee:03", "192.168.1.13")
	hosts := []agentproto.ScannedHost{{IP: "192.168.1.11", MAC: "aa:bb:cc:dd:ee:01"}, {IP: "192.168.1.12"}, {IP: "192.168.1.13", MAC: "aa:bb:cc:dd:ee:03"},
		{IP: "192.168.1.14"}, {IP: "192.168.1.15"}}
	run := func() {
		j := f.scan(c, p.ID)
		f.running(probe)
		f.result(f.a, j, agentproto.ResultCompleted, agentproto.NetworkScanResult{HostsTotal: 254, HostsScanned: 254, Hosts: hosts})
	}
	run()
	got := byIP(f.assets(c, ""))
	check := func(ip, status string, linked *string) {
		t.Helper()
		x := got[ip]
		if x.Status != status || (linked == nil) != (x.LinkedID == nil) || (linked != nil && *x.LinkedID != *linked) {
			t.Errorf("%s: status %s linked %v, want %s %v", ip, x.Status, x.LinkedID, status, linked)
		}
	}
	check("192.168.1.11", discovery.AssetLinked, &byMAC)
	check("192.168.1.12", discovery.AssetLinked, &byAddr)
	check("192.168.1.13", discovery.AssetNew, nil)
	if got["192.168.1.11"].LinkSource == nil || *got["192.168.1.11"].LinkSource != "auto" {
		t.Errorf("link source = %v", got["192.168.1.11"].LinkSource)
	}

	// Manual link, ignore: kept by later scans, which would link them otherwise.
	x14, x15 := got["192.168.1.14"], got["192.168.1.15"]
	wantCode(t, f.e.Do(c, "POST", api+"/discovery/assets/"+x14.ID+"/link", map[string]any{"deviceId": foreign}), 400, "VALIDATION_ERROR")
	var linked discovery.DiscoveryAsset
	f.e.Must(200, c, "POST", api+"/discovery/assets/"+x14.ID+"/link", map[string]any{"deviceId": byMAC}).JSON(t, &linked)
	if linked.Status != discovery.AssetLinked || *linked.LinkSource != "manual" {
		t.Errorf("linked = %+v", linked)
	}
	wantCode(t, f.e.Do(c, "POST", api+"/discovery/assets/"+x15.ID+"/ignore", map[string]any{"reason": " "}), 400, "VALIDATION_ERROR")
	f.e.Must(200, c, "POST", api+"/discovery/assets/"+x15.ID+"/ignore", map[string]any{"reason": "guest Wi-Fi"})
	f.e.Must(200, c, "POST", api+"/discovery/assets/"+got["192.168.1.12"].ID+"/ignore", map[string]any{"reason": "known"})
	hosts = []agentproto.ScannedHost{{IP: "192.168.1.12"}, {IP: "192.168.1.14", MAC: "aa:bb:cc:dd:ee:02"}, {IP: "192.168.1.15", MAC: "aa:bb:cc:dd:ee:01"}}
	run()
	got = byIP(f.assets(c, ""))
	check("192.168.1.12", discovery.AssetIgnored, nil)
	check("192.168.1.14", discovery.AssetLinked, &byMAC)
	check("192.168.1.15", discovery.AssetIgnored, nil)
	if got["192.168.1.15"].IgnoreNote == nil || *got["192.168.1.15"].IgnoreNote != "guest Wi-Fi" {
		t.Errorf("ignore reason = %v", got["192.168.1.15"].IgnoreNote)
	}
	if n := len(f.assets(c, "?status=ignored")); n != 2 {
		t.Errorf("%d ignored, want 2", n)
	}

	for _, r := range []*apptest.Response{
		f.e.Do(f.b.Org, "POST", api+"/discovery/assets/"+x14.ID+"/link", map[string]any{"deviceId": foreign}),
		f.e.Do(f.b.Org, "POST", api+"/discovery/assets/"+x14.ID+"/ignore", map[string]any{"reason": "x"}),
		f.e.Do(f.b.Partner, "DELETE", api+"/discovery/assets/"+x14.ID, nil),
	} {
		wantCode(t, r, 404, "NOT_FOUND")
	}
	f.e.Must(204, c, "DELETE", api+"/discovery/assets/"+x14.ID, nil)
	wantCode(t, f.e.Do(c, "DELETE", api+"/discovery/assets/"+x14.ID, nil), 404, "NOT_FOUND")
}

func TestTopology(t *testing.T) {
	f := newFixture(t)
	c := f.a.Org
	p := f.profile(c, map[string]any{"siteId": f.a.SiteID, "name": "LAN", "subnets": []string{"192.168.1.0/24", "10.5.0.0/24"}})
	probe := f.device(f.a, "probe", "online")
	j := f.scan(c, p.ID)
	f.running(probe)
	f.result(f.a, j, agentproto.ResultCompleted, scanResult(agentproto.ScannedHost{IP: "192.168.1.1", OpenPorts: []int{53}},
		agentproto.ScannedHost{IP: "192.168.1.20"}, agentproto.ScannedHost{IP: "10.5.0.3"}))
	var topo discovery.DiscoveryTopology
	f.e.Must(200, c, "GET", api+"/discovery/topology", nil).JSON(t, &topo)
	kinds := map[string]int{}
	for _, n := range topo.Nodes {
		kinds[n.Kind]++
	}
	if kinds["subnet"] != 2 || kinds["asset"] != 3 || kinds["gateway"] != 0 {
		t.Errorf("nodes = %v (%+v)", kinds, topo.Nodes)
	}
	var gw, x1 discovery.DiscoveryAsset
	for _, x := range f.assets(c, "") {
		switch x.IP {
		case "192.168.1.1":
			gw = x
		case "10.5.0.3":
			x1 = x
		}
	}
	edges := map[string]bool{}
	for _, e := range topo.Edges {
		edges[e.From+">"+e.To+">"+e.Kind] = true
	}
	for _, want := range []string{"asset:" + x1.ID + ">subnet:10.5.0.0/24>member", "asset:" + gw.ID + ">subnet:192.168.1.0/24>member",
		"subnet:192.168.1.0/24>asset:" + gw.ID + ">gateway"} {
		if !edges[want] {
			t.Errorf("no edge %s in %v", want, edges)
		}
	}
	f.e.Must(200, f.a.Partner, "GET", api+"/discovery/topology?siteId="+f.a.SiteID, nil).JSON(t, &topo)
	if len(topo.Nodes) != 5 {
		t.Errorf("site topology has %d nodes", len(topo.Nodes))
	}
	wantCode(t, f.e.Do(f.a.Partner, "GET", api+"/discovery/topology", nil), 400, "VALIDATION_ERROR")
	wantCode(t, f.e.Do(f.b.Partner, "GET", api+"/discovery/topology?orgId="+f.a.OrgID, nil), 404, "NOT_FOUND")
	wantCode(t, f.e.Do(f.b.Partner, "GET", api+"/discovery/topology?siteId="+f.a.SiteID, nil), 404, "NOT_FOUND")
}

// Two nodes running the periodic job at once start a due profile's scan once, and move its
// next run on.
func TestScheduledScansClaimOnce(t *testing.T) {
	f := newFixture(t)
	c := f.a.Org
	f.device(f.a, "probe", "online")
	p := f.profile(c, map[string]any{"siteId": f.a.SiteID, "name": "LAN", "subnets": []string{"192.168.1.0/24"},
		"schedule": map[string]any{"type": "interval", "intervalMinutes": 15}})
	idle := f.profile(f.b.Org, map[string]any{"siteId": f.b.SiteID, "name": "No agent", "subnets": []string{"192.168.1.0/24"},
		"schedule": map[string]any{"type": "interval", "intervalMinutes": 15}})
	if _, err := f.e.App.DB.SQL.Exec(`UPDATE discovery_profiles SET next_run_at = $1`, p.CreatedAt.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	other := app.Service[*discovery.Service](f.e.SecondNode().App)
	var wg sync.WaitGroup
	for _, s := range []*discovery.Service{f.s, other, f.s, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Tick(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var jobs struct{ Data []discovery.DiscoveryJob }
	f.e.Must(200, c, "GET", api+"/discovery/jobs", nil).JSON(t, &jobs)
	if len(jobs.Data) != 1 || jobs.Data[0].Trigger != discovery.TriggerSchedule || jobs.Data[0].ProfileID != p.ID {
		t.Fatalf("jobs = %+v, want one scheduled job", jobs.Data)
	}
	for _, x := range []struct {
		c  apptest.Caller
		id string
	}{{c, p.ID}, {f.b.Org, idle.ID}} {
		var after discovery.DiscoveryProfile
		f.e.Must(200, x.c, "GET", api+"/discovery/profiles/"+x.id, nil).JSON(t, &after)
		if after.NextRunAt == nil || !after.NextRunAt.After(time.Now().Add(14*time.Minute)) {
			t.Errorf("profile %s: next run %v, want about 15 minutes ahead", after.Name, after.NextRunAt)
		}
	}
	if err := f.s.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.e.Must(200, c, "GET", api+"/discovery/jobs", nil).JSON(t, &jobs)
	if len(jobs.Data) != 1 {
		t.Errorf("%d jobs after another tick", len(jobs.Data))
	}
}

func TestAssetMonitoring(t *testing.T) {
	f := newFixture(t)
	c := f.a.Org
	p := f.profile(c, map[string]any{"siteId": f.a.SiteID, "name": "LAN", "subnets": []string{"192.168.1.0/24"}})
	probe := f.device(f.a, "probe", "online")
	j := f.scan(c, p.ID)
	f.running(probe)
	f.result(f.a, j, agentproto.ResultCompleted, scanResult(agentproto.ScannedHost{IP: "192.168.1.10", OpenPorts: []int{22, 443}},
		agentproto.ScannedHost{IP: "192.168.1.11", OpenPorts: []int{80}}))
	assets := byIP(f.assets(c, ""))
	x, race := assets["192.168.1.10"], assets["192.168.1.11"]
	path := api + "/discovery/assets/" + x.ID
	wantCode(t, f.e.Do(c, "POST", path+"/enable-monitoring", map[string]any{}), 400, "VALIDATION_ERROR")
	wantCode(t, f.e.Do(c, "POST", path+"/enable-monitoring", map[string]any{"monitors": []map[string]any{{"type": "dns_check"}}}), 400, "")
	wantCode(t, f.e.Do(c, "POST", path+"/enable-monitoring", map[string]any{"snmp": map[string]any{"templateId": snmp.TemplateGenericHost,
		"version": "v2c", "credentials": map[string]any{}}}), 400, "VALIDATION_ERROR")
	// A caller who may scan but not make SNMP devices or monitors gets 403, and nothing is on.
	var role struct {
		ID string `json:"id"`
	}
	f.e.Must(201, f.a.Partner, "POST", api+"/roles", map[string]any{"name": "Scanner", "scope": "organization", "orgId": f.a.OrgID,
		"permissions": []string{"discovery:read", "discovery:write", "monitors:write"}}).JSON(t, &role)
	_, scanner := f.e.CreateUser("scanner@alpha.example", access.LevelOrganization, f.a.PartnerID, f.a.OrgID, role.ID)
	snmpBody := map[string]any{"templateId": snmp.TemplateGenericHost, "version": "v2c", "credentials": map[string]any{"community": "public"}}
	wantCode(t, f.e.Do(scanner, "POST", path+"/enable-monitoring", map[string]any{"snmp": snmpBody}), 403, "")
	wantCode(t, f.e.Do(scanner, "GET", path+"/monitoring", nil), 200, "")
	var on discovery.DiscoveryMonitoring
	f.e.Must(201, c, "POST", path+"/enable-monitoring", map[string]any{
		"snmp":     map[string]any{"templateId": snmp.TemplateGenericHost, "version": "v2c", "credentials": map[string]any{"community": "public"}},
		"monitors": []map[string]any{{"type": "icmp_ping"}, {"type": "tcp_port"}}}).JSON(t, &on)
	if !on.Enabled || on.SNMPDeviceID == nil || len(on.Monitors) != 2 {
		t.Fatalf("monitoring = %+v", on)
	}
	mon := app.Service[*monitors.Service](f.e.App)
	sn := app.Service[*snmp.Service](f.e.App)
	actx := access.WithPrincipal(context.Background(), &access.Principal{Scope: access.SystemScope()})
	tcp, err := mon.Get(actx, on.Monitors[1].ID)
	if err != nil || tcp.Target != x.IP || tcp.Config.Port != 22 || !tcp.Enabled {
		t.Errorf("tcp monitor = %+v, %v: want port 22 (the first open one) of %s", tcp, err, x.IP)
	}
	if d, err := sn.GetDevice(actx, *on.SNMPDeviceID); err != nil || d.IPAddress != x.IP || !d.Enabled || d.SiteID != f.a.SiteID {
		t.Errorf("snmp device = %+v, %v", d, err)
	}
	wantCode(t, f.e.Do(c, "POST", path+"/enable-monitoring", map[string]any{"monitors": []map[string]any{{"type": "icmp_ping"}}}), 409,
		discovery.CodeMonitoringOn)
	wantCode(t, f.e.Do(c, "DELETE", path, nil), 409, discovery.CodeMonitoringEnabled)
	for _, r := range []*apptest.Response{
		f.e.Do(f.b.Org, "GET", path+"/monitoring", nil),
		f.e.Do(f.b.Org, "PATCH", path+"/monitoring", map[string]any{"enabled": false}),
		f.e.Do(f.b.Partner, "POST", path+"/enable-monitoring", map[string]any{"monitors": []map[string]any{{"type": "icmp_ping"}}}),
		f.e.Do(f.b.Partner, "POST", path+"/disable-monitoring", nil),
	} {
		wantCode(t, r, 404, "NOT_FOUND")
	}

	var changed discovery.DiscoveryMonitoring
	f.e.Must(200, c, "PATCH", path+"/monitoring", map[string]any{"removeMonitorTypes": []string{"tcp_port"},
		"addMonitors": []map[string]any{{"type": "http_check"}}}).JSON(t, &changed)
	if len(changed.Monitors) != 2 || changed.Monitors[1].Type != "http_check" {
		t.Errorf("changed = %+v", changed)
	}
	if m, _ := mon.Get(actx, on.Monitors[1].ID); m.Enabled {
		t.Error("the removed tcp_port monitor is still enabled")
	}
	if m, _ := mon.Get(actx, changed.Monitors[1].ID); m.Target != "https://192.168.1.10:443/" {
		t.Errorf("http check target = %q", m.Target)
	}
	var off discovery.DiscoveryMonitoring
	f.e.Must(200, c, "POST", path+"/disable-monitoring", nil).JSON(t, &off)
	if off.Enabled {
		t.Errorf("off = %+v", off)
	}
	if d, _ := sn.GetDevice(actx, *on.SNMPDeviceID); d.Enabled {
		t.Error("the SNMP device is still enabled")
	}
	if m, _ := mon.Get(actx, on.Monitors[0].ID); m.Enabled {
		t.Error("the ping monitor is still enabled")
	}
	wantCode(t, f.e.Do(c, "POST", path+"/disable-monitoring", nil), 404, discovery.CodeMonitoringNotOn)
	var got discovery.DiscoveryMonitoring
	f.e.Must(200, c, "GET", path+"/monitoring", nil).JSON(t, &got)
	if got.Enabled || len(got.Monitors) != 2 {
		t.Errorf("got = %+v", got)
	}
	// Turned on again: what it had comes back, and it is on once only.
	f.e.Must(201, c, "POST", path+"/enable-monitoring", map[string]any{"monitors": []map[string]any{}, "snmp": map[string]any{
		"templateId": snmp.TemplateGenericHost, "version": "v2c", "credentials": map[string]any{"community": "public"}}}).JSON(t, &got)
	if !got.Enabled || *got.SNMPDeviceID != *on.SNMPDeviceID || len(got.Monitors) != 2 {
		t.Errorf("on again = %+v", got)
	}
	if m, _ := mon.Get(actx, on.Monitors[0].ID); !m.Enabled {
		t.Error("the ping monitor did not come back on")
	}
	wantCode(t, f.e.Do(c, "PATCH", api+"/discovery/assets/"+race.ID+"/monitoring", map[string]any{"enabled": true}), 404,
		discovery.CodeMonitoringNotOn)

	// Twenty concurrent calls: one turns it on, nineteen are told it is on already, and one
	// monitor exists.
	statuses := make([]int, 20)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = f.e.Do(c, "POST", api+"/discovery/assets/"+race.ID+"/enable-monitoring",
				map[string]any{"monitors": []map[string]any{{"type": "icmp_ping"}}}).Status
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count[201] != 1 || count[409] != 19 {
		t.Errorf("statuses = %v, want one 201 and nineteen 409", count)
	}
	var list struct{ Data []monitors.Monitor }
	f.e.Must(200, c, "GET", api+"/monitors?limit=500", nil).JSON(t, &list)
	n := 0
	for _, m := range list.Data {
		if m.Target == race.IP {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d monitors of %s, want 1", n, race.IP)
	}
}

// An SNMP asset's LLDP neighbours join it in the topology: to the asset with the neighbour's
// management address, MAC address or name, else to a neighbour node; two systems that see
// each other make one edge, from the lower address. A later scan that did not ask SNMP keeps the neighbours, and an
// SNMP answer without any clears them.
func TestTopologyLinksLLDPNeighbours(t *testing.T) {
	f := newFixture(t)
	c := f.a.Org
	p := f.profile(c, map[string]any{"siteId": f.a.SiteID, "name": "LAN", "subnets": []string{"192.168.1.0/24"}})
	probe := f.device(f.a, "probe", "online")
	sw := agentproto.ScannedHost{IP: "192.168.1.2", SysName: "core-sw1", SysObjectID: "1.3.6.1.4.1.9.1.1", Neighbors: []agentproto.ScannedNeighbor{
		{LocalPort: "Gi1/0/1", ChassisID: "rtr-chassis", ChassisIDType: "local", PortID: "eth0", Address: "192.168.1.1"},
		{LocalPort: "Gi1/0/5", ChassisID: "00:1a:2b:3c:4d:5e", ChassisIDType: "mac", PortDesc: "NIC"},
		{LocalPort: "Gi1/0/7", ChassisID: "ap-7f", ChassisIDType: "local", SysName: "lobby-ap"},
	}}
	router := agentproto.ScannedHost{IP: "192.168.1.1", SysName: "edge-rtr", Neighbors: []agentproto.ScannedNeighbor{
		{LocalPort: "eth0", ChassisID: "sw-chassis", ChassisIDType: "local", PortID: "Gi1/0/1", SysName: "CORE-SW1"}}}
	pc := agentproto.ScannedHost{IP: "192.168.1.20", MAC: "00:1A:2B:3C:4D:5E"}
	scan := func(hosts ...agentproto.ScannedHost) {
		j := f.scan(c, p.ID)
		f.running(probe)
		f.result(f.a, j, agentproto.ResultCompleted, scanResult(hosts...))
	}
	scan(sw, router, pc)
	ids := map[string]string{}
	for _, x := range f.assets(c, "") {
		ids[x.IP] = "asset:" + x.ID
		if x.IP == "192.168.1.2" && (len(x.Neighbors) != 3 || x.Neighbors[0].Address != "192.168.1.1") {
			t.Errorf("switch neighbours = %+v", x.Neighbors)
		}
	}
	lldp := func() map[string]bool {
		var topo discovery.DiscoveryTopology
		f.e.Must(200, c, "GET", api+"/discovery/topology", nil).JSON(t, &topo)
		out := map[string]bool{}
		for _, e := range topo.Edges {
			if e.Kind == "lldp" {
				out[e.From+" "+e.FromPort+" > "+e.To+" "+e.ToPort] = true
			}
		}
		for _, n := range topo.Nodes {
			if n.Kind == "neighbor" {
				out["node "+n.ID+" "+n.Label] = true
			}
		}
		return out
	}
	want := map[string]bool{
		ids["192.168.1.1"] + " eth0 > " + ids["192.168.1.2"] + " Gi1/0/1": true,
		ids["192.168.1.2"] + " Gi1/0/5 > " + ids["192.168.1.20"] + " NIC": true,
		ids["192.168.1.2"] + " Gi1/0/7 > neighbor:ap-7f ":                 true,
		"node neighbor:ap-7f lobby-ap":                                    true,
	}
	if got := lldp(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("lldp edges = %v\nwant %v", got, want)
	}
	scan(agentproto.ScannedHost{IP: "192.168.1.2", OpenPorts: []int{22}})
	if got := lldp(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after a scan without SNMP, lldp edges = %v", got)
	}
	scan(agentproto.ScannedHost{IP: "192.168.1.2", SysName: "core-sw1"}, agentproto.ScannedHost{IP: "192.168.1.1", SysName: "edge-rtr"})
	if got := lldp(); len(got) != 0 {
		t.Errorf("after SNMP answers without neighbours, lldp edges = %v", got)
	}
}

// A running job shows how far its agent got: the last "scanned N of M" line of the scan's
// live output; another tenant's caller sees nothing of it.
func TestRunningJobShowsItsProgress(t *testing.T) {
	f := newFixture(t)
	c := f.a.Org
	p := f.profile(c, map[string]any{"siteId": f.a.SiteID, "name": "LAN", "subnets": []string{"192.168.1.0/24"}})
	probe := f.device(f.a, "probe", "online")
	j := f.scan(c, p.ID)
	f.running(probe)
	if got := f.job(c, j.ID); got.Status != discovery.JobRunning || got.HostsScanned != 0 {
		t.Fatalf("running job before any progress: %+v", got)
	}
	line := "scanned 40 of 254\nscanned 120 of 254\n"
	if err := f.dev.RecordOutput(context.Background(), agentOf(f.a, probe), agentproto.CommandOutput{CommandID: *j.CommandID,
		Stdout: []byte(line)}); err != nil {
		t.Fatal(err)
	}
	if got := f.job(c, j.ID); got.HostsScanned != 120 || got.HostsTotal != 254 {
		t.Fatalf("progress: %+v", got)
	}
	wantCode(t, f.e.Do(f.b.Partner, "GET", api+"/discovery/jobs/"+j.ID, nil), 404, "NOT_FOUND")
	f.result(f.a, j, agentproto.ResultCompleted, scanResult(agentproto.ScannedHost{IP: "192.168.1.1"}))
	if got := f.job(c, j.ID); got.Status != discovery.JobCompleted || got.HostsScanned != 254 {
		t.Fatalf("completed job: %+v", got)
	}
}
