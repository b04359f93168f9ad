package console_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"gale/internal/platform/access"
	"gale/internal/testkit/apptest"
)

// orgViewer signs in a reader of the first tenant's organization, who may see but not change.
func (o opsEnv) orgViewer(t *testing.T) *visitor {
	t.Helper()
	o.e.CreateUser("acme-viewer@gale.test", access.LevelOrganization, o.mine.PartnerID, o.mine.OrgID, access.RoleOrgViewer)
	v := newVisitor(t, o.e)
	v.signIn("acme-viewer@gale.test", apptest.UserPassword)
	return v
}

// withFields is a copy of form with some fields set (an empty value removes the field).
func withFields(form url.Values, change map[string]string) url.Values {
	out := url.Values{}
	for k, vals := range form {
		out[k] = append([]string(nil), vals...)
	}
	for k, v := range change {
		if v == "" {
			out.Del(k)
		} else {
			out.Set(k, v)
		}
	}
	return out
}

// createdID is the ID a create's redirect names, after prefix.
func createdID(t *testing.T, p page, prefix string) string {
	t.Helper()
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, prefix) {
		t.Fatalf("create: %d to %q\n%s", p.status, p.location, p.body)
	}
	return strings.TrimPrefix(p.location, prefix)
}

// apiCount is how many items a list of the API holds for c.
func apiCount(t *testing.T, e *apptest.Env, c apptest.Caller, path string) int {
	t.Helper()
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	e.Must(http.StatusOK, c, "GET", path, nil).JSON(t, &list)
	return len(list.Data)
}

type formMonitor struct {
	Name     string  `json:"name"`
	Type     string  `json:"type"`
	Target   string  `json:"target"`
	SiteID   *string `json:"siteId"`
	Enabled  bool    `json:"enabled"`
	Interval int     `json:"intervalSeconds"`
	Timeout  int     `json:"timeoutSeconds"`
	Config   struct {
		Port           int    `json:"port"`
		Method         string `json:"method"`
		ExpectedStatus []int  `json:"expectedStatus"`
		DeviceID       string `json:"deviceId"`
		Degraded       int    `json:"degradedResponseMs"`
	} `json:"config"`
	Rules []struct {
		ID        string   `json:"id"`
		Condition string   `json:"condition"`
		Threshold *float64 `json:"threshold"`
		Severity  string   `json:"severity"`
	} `json:"alertRules"`
}

func TestOpsFormsMonitors(t *testing.T) {
	o := newOpsEnv(t)
	e, v := o.e, o.v
	dev := e.InsertDevice(apptest.DeviceRow{PartnerID: o.mine.PartnerID, OrgID: o.mine.OrgID, SiteID: o.mine.SiteID, Hostname: "ws-a"})
	theirDev := e.InsertDevice(apptest.DeviceRow{PartnerID: o.them.PartnerID, OrgID: o.them.OrgID, SiteID: o.them.SiteID, Hostname: "ws-x"})
	var branch, theirs idOnly
	e.Must(http.StatusCreated, e.Admin(), "POST", "/api/v1/orgs/sites", map[string]any{"orgId": o.mine.OrgID, "name": "Branch"}).JSON(t, &branch)
	e.Must(http.StatusCreated, o.them.Org, "POST", "/api/v1/monitors", map[string]any{"name": "Their monitor", "type": "icmp_ping",
		"target": "127.0.0.1"}).JSON(t, &theirs)
	get := func(c apptest.Caller, id string) formMonitor {
		var m formMonitor
		e.Must(http.StatusOK, c, "GET", "/api/v1/monitors/"+id, nil).JSON(t, &m)
		return m
	}

	must(t, v.get("/monitors"), http.StatusOK, `href="/monitors/new"`)
	form := v.get("/monitors/new")
	must(t, form, http.StatusOK, "<h1>New monitor</h1>", `action="/monitors"`, `name="orgId" value="`+o.mine.OrgID+`"`, `name="config.port"`,
		`<option value="`+branch.ID+`">An agent of the site Branch</option>`, `<option value="`+dev+`">ws-a</option>`,
		`name="alertRules[0].condition"`, `<option value="offline" selected>Offline</option>`)
	lacks(t, form, theirDev)

	// Create a TCP check, run from the branch, with two alert rules; a blank row is left out.
	tcp := url.Values{"orgId": {o.mine.OrgID}, "name": {"Mail server"}, "type": {"tcp_port"}, "target": {"mail.example.test"},
		"config.port": {"25"}, "intervalSeconds": {"120"}, "timeoutSeconds": {"10"}, "siteId": {branch.ID}, "enabled": {"true"},
		"config.degradedResponseMs": {"800"}, "config.method": {"GET"}, "config.recordType": {"A"}, "config.serviceKind": {"systemd"},
		"alertRules[0].condition": {"offline"}, "alertRules[0].severity": {"critical"},
		"alertRules[1].condition": {""}, "alertRules[1].severity": {"high"},
		"alertRules[2].condition": {"response_time_gt"}, "alertRules[2].threshold": {"500"}, "alertRules[2].severity": {"low"}}
	id := createdID(t, o.post("/monitors", tcp), "/monitors/")
	m := get(o.mine.Org, id)
	if m.Name != "Mail server" || m.Type != "tcp_port" || m.Target != "mail.example.test" || m.Config.Port != 25 || m.Interval != 120 ||
		m.Timeout != 10 || m.SiteID == nil || *m.SiteID != branch.ID || !m.Enabled || m.Config.Degraded != 800 || len(m.Rules) != 2 ||
		m.Rules[0].Condition != "offline" || m.Rules[0].Severity != "critical" || m.Rules[1].Condition != "response_time_gt" ||
		m.Rules[1].Threshold == nil || *m.Rules[1].Threshold != 500 {
		t.Fatalf("the monitor created in the console: %+v", m)
	}
	must(t, v.get("/monitors/"+id), http.StatusOK, `href="/monitors/`+id+`/edit"`, "mail.example.test:25")

	// The editor shows it as it stands, rule IDs included, and saves every field.
	edit := v.get("/monitors/" + id + "/edit")
	must(t, edit, http.StatusOK, "<h1>Edit Mail server</h1>", `action="/monitors/`+id+`"`, `value="Mail server"`, `value="25"`,
		`name="alertRules[0].id" value="`+m.Rules[0].ID+`"`, `<option value="`+branch.ID+`" selected>`)
	lacks(t, edit, `name="orgId"`)
	web := url.Values{"name": {"Mail web"}, "type": {"http_check"}, "target": {"https://mail.example.test/"}, "siteId": {""},
		"config.method": {"HEAD"}, "config.expectedStatus": {"200, 204"}, "intervalSeconds": {"60"}, "timeoutSeconds": {"5"},
		"alertRules[0].id": {m.Rules[0].ID}, "alertRules[0].condition": {"offline"}, "alertRules[0].severity": {"high"}}
	p := o.post("/monitors/"+id, web)
	if p.status != http.StatusSeeOther || p.location != "/monitors/"+id {
		t.Fatalf("save: %d to %q\n%s", p.status, p.location, p.body)
	}
	m = get(o.mine.Org, id)
	if m.Name != "Mail web" || m.Type != "http_check" || m.Config.Method != "HEAD" || len(m.Config.ExpectedStatus) != 2 ||
		m.Config.ExpectedStatus[1] != 204 || m.SiteID != nil || m.Enabled || len(m.Rules) != 1 || m.Rules[0].Severity != "high" ||
		m.Config.Port != 0 {
		t.Fatalf("the monitor after the edit: %+v", m)
	}
	// A service check names a device of the organization.
	svc := createdID(t, o.post("/monitors", url.Values{"orgId": {o.mine.OrgID}, "name": {"Web server"}, "type": {"service_check"},
		"target": {"nginx"}, "config.serviceKind": {"systemd"}, "config.deviceId": {dev}, "enabled": {"true"}}), "/monitors/")
	if m := get(o.mine.Org, svc); m.Config.DeviceID != dev || len(m.Rules) != 0 {
		t.Fatalf("the service check: %+v", m)
	}

	// Refused input is shown again with the API's message; foreign IDs are refused.
	before := apiCount(t, e, o.mine.Org, "/api/v1/monitors")
	bad := func(change map[string]string, says string) {
		t.Helper()
		must(t, o.post("/monitors", withFields(tcp, change)), http.StatusBadRequest, says, `action="/monitors"`, "Not saved")
	}
	bad(map[string]string{"name": " "}, "name is required")
	bad(map[string]string{"target": "not a host!"}, "host name or an IP address")
	bad(map[string]string{"type": "http_check", "target": "mail.example.test"}, "http:// or https:// URL")
	bad(map[string]string{"config.port": "smtp"}, "a port from 1 to 65535")
	bad(map[string]string{"config.port": "0"}, "port is required")
	bad(map[string]string{"intervalSeconds": "5"}, "intervalSeconds must be from 10 to 86400")
	bad(map[string]string{"alertRules[2].threshold": ""}, "threshold (milliseconds")
	bad(map[string]string{"siteId": o.them.SiteID}, "no such site in the organization")
	bad(map[string]string{"orgId": o.them.OrgID}, "no such organization")
	bad(map[string]string{"type": "service_check", "target": "nginx", "config.deviceId": theirDev}, "no such device in the organization")
	must(t, o.post("/monitors", withFields(tcp, map[string]string{"name": ""})), http.StatusBadRequest, `value="mail.example.test"`,
		`<option value="`+branch.ID+`" selected>`, `<option selected>critical</option>`)
	must(t, o.post("/monitors/"+id, withFields(web, map[string]string{"target": "ftp://x"})), http.StatusBadRequest,
		`action="/monitors/`+id+`"`, "http:// or https:// URL", `value="Mail web"`)
	if n := apiCount(t, e, o.mine.Org, "/api/v1/monitors"); n != before {
		t.Fatalf("refused forms made monitors: %d, were %d", n, before)
	}
	if apiCount(t, e, o.them.Org, "/api/v1/monitors") != 1 {
		t.Fatal("a refused form made a monitor in another organization")
	}

	// A partner user chooses the organization first.
	partner := newVisitor(t, e)
	partner.signIn("acme-partner@gale.test", apptest.UserPassword)
	must(t, partner.get("/monitors/new"), http.StatusOK, `action="/monitors/new"`, `<select id="orgId" name="orgId" required>`, "Acme Customer")
	must(t, partner.get("/monitors/new?orgId="+o.mine.OrgID), http.StatusOK, `name="orgId" value="`+o.mine.OrgID+`"`, "ws-a",
		"another organization")
	must(t, partner.post("/monitors", withFields(tcp, map[string]string{"csrf": partner.csrf, "orgId": o.them.OrgID, "siteId": ""})),
		http.StatusBadRequest, "no such organization")

	// Another organization's monitor answers as a missing one, and stays as it was.
	sameAsMissing(t, "a monitor's editor", v.get("/monitors/"+theirs.ID+"/edit"), v.get("/monitors/"+missingID+"/edit"))
	sameAsMissing(t, "a monitor's save", o.post("/monitors/"+theirs.ID, web), o.post("/monitors/"+missingID, web))
	if m := get(o.them.Org, theirs.ID); m.Name != "Their monitor" || m.Type != "icmp_ping" {
		t.Fatalf("another organization's monitor changed: %+v", m)
	}

	// Without the token nothing changes.
	must(t, v.post("/monitors/"+id, withFields(web, map[string]string{"name": "No token", "csrf": ""})), http.StatusForbidden, "security token")
	must(t, v.post("/monitors", withFields(tcp, map[string]string{"csrf": ""})), http.StatusForbidden, "security token")
	if m := get(o.mine.Org, id); m.Name != "Mail web" || apiCount(t, e, o.mine.Org, "/api/v1/monitors") != before {
		t.Fatalf("a request without a token changed the monitors: %+v", m)
	}

	// A reader may not create or change monitors.
	r := o.orgViewer(t)
	lacks(t, r.get("/monitors"), `href="/monitors/new"`)
	lacks(t, r.get("/monitors/"+id), `href="/monitors/`+id+`/edit"`)
	must(t, r.get("/monitors/new"), http.StatusForbidden)
	must(t, r.get("/monitors/"+id+"/edit"), http.StatusForbidden)
	must(t, r.post("/monitors", withFields(tcp, map[string]string{"csrf": r.csrf})), http.StatusForbidden)
	must(t, r.post("/monitors/"+id, withFields(web, map[string]string{"csrf": r.csrf, "name": "Reader"})), http.StatusForbidden)
	if m := get(o.mine.Org, id); m.Name != "Mail web" {
		t.Fatalf("a reader renamed the monitor to %q", m.Name)
	}
}

type formProfile struct {
	Name     string   `json:"name"`
	SiteID   string   `json:"siteId"`
	Subnets  []string `json:"subnets"`
	Excludes []string `json:"excludeIps"`
	Methods  []string `json:"methods"`
	Ports    []int    `json:"ports"`
	DeepScan bool     `json:"deepScan"`
	SNMP     *struct {
		Version string `json:"version"`
	} `json:"snmp"`
	Schedule struct {
		Type            string `json:"type"`
		Cron            string `json:"cron"`
		IntervalMinutes int    `json:"intervalMinutes"`
	} `json:"schedule"`
	NextRunAt *string `json:"nextRunAt"`
}

func TestOpsFormsDiscovery(t *testing.T) {
	o := newOpsEnv(t)
	e, v := o.e, o.v
	var theirs idOnly
	e.Must(http.StatusCreated, o.them.Org, "POST", "/api/v1/discovery/profiles", map[string]any{"siteId": o.them.SiteID, "name": "Their LAN",
		"subnets": []string{"192.168.1.0/24"}}).JSON(t, &theirs)
	get := func(c apptest.Caller, id string) formProfile {
		var p formProfile
		e.Must(http.StatusOK, c, "GET", "/api/v1/discovery/profiles/"+id, nil).JSON(t, &p)
		return p
	}

	must(t, v.get("/discovery"), http.StatusOK, "No discovery profiles yet", `href="/discovery/profiles/new"`)
	must(t, v.get("/discovery/profiles/new"), http.StatusOK, "<h1>New discovery profile</h1>", `action="/discovery/profiles"`,
		`<option value="`+o.mine.SiteID+`">`, `name="subnets"`, `value="port_scan" checked`, `value="snmp">`, "22, 23, 25")

	form := url.Values{"siteId": {o.mine.SiteID}, "name": {"Office"}, "subnets": {"10.0.0.0/24\n10.0.1.0/25"}, "excludeIps": {"10.0.0.1"},
		"methods": {"ping", "port_scan", "snmp"}, "ports": {"22, 443"}, "schedule.type": {"interval"}, "schedule.intervalMinutes": {"60"},
		"snmp.version": {"v2c"}, "snmp.community": {"public"}}
	id := createdID(t, o.post("/discovery/profiles", form), "/discovery/profiles/")
	p := get(o.mine.Org, id)
	if p.Name != "Office" || p.SiteID != o.mine.SiteID || len(p.Subnets) != 2 || p.Subnets[1] != "10.0.1.0/25" || len(p.Excludes) != 1 ||
		len(p.Methods) != 3 || len(p.Ports) != 2 || p.Ports[1] != 443 || p.Schedule.Type != "interval" || p.Schedule.IntervalMinutes != 60 ||
		p.SNMP == nil || p.SNMP.Version != "v2c" || p.NextRunAt == nil {
		t.Fatalf("the profile created in the console: %+v", p)
	}
	next := *p.NextRunAt
	page := v.get("/discovery/profiles/" + id)
	must(t, page, http.StatusOK, `href="/discovery/profiles/`+id+`/edit"`, `hx-confirm="Delete Office`)

	edit := v.get("/discovery/profiles/" + id + "/edit")
	must(t, edit, http.StatusOK, "<h1>Edit Office</h1>", `action="/discovery/profiles/`+id+`"`, `value="Office"`, "10.0.0.0/24\n10.0.1.0/25",
		`<option value="keep" selected>Keep the stored ones</option>`, "22, 443", `<option value="interval" selected>`)
	lacks(t, edit, "public")
	// A change of the name keeps the schedule's next run and the SNMP credentials.
	change := withFields(form, map[string]string{"name": "Office LAN", "subnets": "10.0.0.0/24", "snmp.version": "keep", "snmp.community": "",
		"ports": "", "siteId": ""})
	change["methods"] = []string{"ping", "arp", "snmp"}
	p2 := o.post("/discovery/profiles/"+id, change)
	if p2.status != http.StatusSeeOther || p2.location != "/discovery/profiles/"+id {
		t.Fatalf("save: %d to %q\n%s", p2.status, p2.location, p2.body)
	}
	p = get(o.mine.Org, id)
	if p.Name != "Office LAN" || len(p.Subnets) != 1 || len(p.Methods) != 3 || p.Methods[1] != "arp" || len(p.Ports) < 10 ||
		p.SNMP == nil || p.NextRunAt == nil || *p.NextRunAt != next || p.SiteID != o.mine.SiteID {
		t.Fatalf("the profile after the edit: %+v", p)
	}
	// No SNMP: the snmp method cannot stay, then the credentials are removed.
	noSNMP := withFields(change, map[string]string{"snmp.version": "none", "schedule.type": "cron", "schedule.cron": "0 2 * * *"})
	noSNMP.Set("snmp.version", "")
	must(t, o.post("/discovery/profiles/"+id, noSNMP), http.StatusBadRequest, "the snmp method needs SNMP credentials", `value="Office LAN"`)
	noSNMP["methods"] = []string{"ping"}
	must(t, o.post("/discovery/profiles/"+id, noSNMP), http.StatusSeeOther)
	if p = get(o.mine.Org, id); p.SNMP != nil || p.Schedule.Type != "cron" || p.Schedule.Cron != "0 2 * * *" || len(p.Methods) != 1 {
		t.Fatalf("the profile without SNMP: %+v", p)
	}

	// Refused input.
	bad := func(change map[string]string, says string) {
		t.Helper()
		must(t, o.post("/discovery/profiles", withFields(form, change)), http.StatusBadRequest, says, `action="/discovery/profiles"`, "Not saved")
	}
	bad(map[string]string{"name": "  "}, "a name has 1 to 255 characters")
	bad(map[string]string{"subnets": "10.0.0.0/24\nnot-a-network"}, "is not an IPv4 address or CIDR")
	bad(map[string]string{"subnets": "10.0.0.0/16"}, "SUBNET_TOO_LARGE")
	bad(map[string]string{"ports": "ssh"}, "port numbers separated by commas")
	bad(map[string]string{"schedule.type": "cron", "schedule.cron": "every night"}, "schedule.cron")
	bad(map[string]string{"schedule.intervalMinutes": "5"}, "from 15 to 44640 minutes")
	bad(map[string]string{"siteId": o.them.SiteID}, "no such site")
	if n := apiCount(t, e, o.mine.Org, "/api/v1/discovery/profiles"); n != 1 {
		t.Fatalf("%d profiles after refused forms", n)
	}
	must(t, o.post("/discovery/profiles/"+id, withFields(change, map[string]string{"subnets": "bad"})), http.StatusBadRequest,
		`action="/discovery/profiles/`+id+`"`, "bad")

	// A partner user chooses the organization first, then one of its sites.
	partner := newVisitor(t, e)
	partner.signIn("acme-partner@gale.test", apptest.UserPassword)
	must(t, partner.get("/discovery/profiles/new"), http.StatusOK, `action="/discovery/profiles/new"`, `<select id="orgId" name="orgId" required>`)
	must(t, partner.get("/discovery/profiles/new?orgId="+o.mine.OrgID), http.StatusOK, `<option value="`+o.mine.SiteID+`">`)

	// Another organization's profile answers as a missing one, and stays.
	sameAsMissing(t, "a profile's editor", v.get("/discovery/profiles/"+theirs.ID+"/edit"), v.get("/discovery/profiles/"+missingID+"/edit"))
	sameAsMissing(t, "a profile's save", o.post("/discovery/profiles/"+theirs.ID, change), o.post("/discovery/profiles/"+missingID, change))
	sameAsMissing(t, "a profile's deletion", o.post("/discovery/profiles/"+theirs.ID+"/delete", nil),
		o.post("/discovery/profiles/"+missingID+"/delete", nil))
	if p := get(o.them.Org, theirs.ID); p.Name != "Their LAN" {
		t.Fatalf("another organization's profile changed: %+v", p)
	}

	// Without the token nothing changes; a reader may not change profiles.
	must(t, v.post("/discovery/profiles/"+id+"/delete", url.Values{}), http.StatusForbidden, "security token")
	must(t, v.post("/discovery/profiles", withFields(form, map[string]string{"csrf": ""})), http.StatusForbidden, "security token")
	r := o.orgViewer(t)
	lacks(t, r.get("/discovery"), `href="/discovery/profiles/new"`)
	reader := r.get("/discovery/profiles/" + id)
	lacks(t, reader, `href="/discovery/profiles/`+id+`/edit"`)
	lacks(t, reader, `/delete"`)
	must(t, r.get("/discovery/profiles/new"), http.StatusForbidden)
	must(t, r.get("/discovery/profiles/"+id+"/edit"), http.StatusForbidden)
	must(t, r.post("/discovery/profiles", withFields(form, map[string]string{"csrf": r.csrf})), http.StatusForbidden)
	must(t, r.post("/discovery/profiles/"+id, withFields(change, map[string]string{"csrf": r.csrf})), http.StatusForbidden)
	must(t, r.post("/discovery/profiles/"+id+"/delete", url.Values{"csrf": {r.csrf}}), http.StatusForbidden)
	if apiCount(t, e, o.mine.Org, "/api/v1/discovery/profiles") != 1 {
		t.Fatal("the profile went away")
	}

	// Delete, from htmx after its confirmation.
	del := o.hx("/discovery/profiles/"+id+"/delete", nil)
	if del.status != http.StatusNoContent || del.header.Get("HX-Redirect") != "/discovery" {
		t.Fatalf("delete: %d %v\n%s", del.status, del.header, del.body)
	}
	e.Must(http.StatusNotFound, o.mine.Org, "GET", "/api/v1/discovery/profiles/"+id, nil)
}

type formAutomation struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Enabled     bool   `json:"enabled"`
	Trigger     struct {
		Type      string            `json:"type"`
		Cron      string            `json:"cron"`
		Timezone  string            `json:"timezone"`
		EventType string            `json:"eventType"`
		Filter    map[string]string `json:"filter"`
	} `json:"trigger"`
	Targets *struct {
		Type string   `json:"type"`
		IDs  []string `json:"ids"`
	} `json:"targets"`
	Actions []struct {
		Type       string         `json:"type"`
		ScriptID   string         `json:"scriptId"`
		Parameters map[string]any `json:"parameters"`
		Severity   string         `json:"severity"`
		Title      string         `json:"title"`
		Command    *struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		} `json:"command"`
	} `json:"actions"`
	OnFailure string `json:"onFailure"`
}

func TestOpsFormsAutomations(t *testing.T) {
	o := newOpsEnv(t)
	e, v := o.e, o.v
	dev := e.InsertDevice(apptest.DeviceRow{PartnerID: o.mine.PartnerID, OrgID: o.mine.OrgID, SiteID: o.mine.SiteID, Hostname: "ws-a"})
	theirDev := e.InsertDevice(apptest.DeviceRow{PartnerID: o.them.PartnerID, OrgID: o.them.OrgID, SiteID: o.them.SiteID, Hostname: "ws-x"})
	var script, theirScript, theirs idOnly
	body := map[string]any{"name": "Clean up", "osTypes": []string{"linux"}, "language": "sh", "content": "echo hello"}
	e.Must(http.StatusCreated, o.mine.Org, "POST", "/api/v1/scripts", body).JSON(t, &script)
	body["name"] = "Their script"
	e.Must(http.StatusCreated, o.them.Org, "POST", "/api/v1/scripts", body).JSON(t, &theirScript)
	e.Must(http.StatusCreated, o.them.Org, "POST", "/api/v1/automations", map[string]any{"name": "Their automation",
		"trigger": map[string]any{"type": "manual"}, "targets": map[string]any{"type": "organization"},
		"actions": []map[string]any{{"type": "create_alert", "severity": "low", "title": "Hello"}}}).JSON(t, &theirs)
	get := func(c apptest.Caller, id string) formAutomation {
		var x formAutomation
		e.Must(http.StatusOK, c, "GET", "/api/v1/automations/"+id, nil).JSON(t, &x)
		return x
	}

	list := v.get("/automations")
	must(t, list, http.StatusOK, "No automations yet", `href="/automations/new"`, "New automation")
	lacks(t, list, "created through the API")
	form := v.get("/automations/new")
	must(t, form, http.StatusOK, "<h1>New automation</h1>", `action="/automations"`, `<option value="`+script.ID+`">Clean up</option>`,
		`name="deviceIds" value="`+dev+`"`, "<option>device.offline</option>", `name="actions[4].type"`, `value="none"`)
	lacks(t, form, theirScript.ID)
	lacks(t, form, theirDev)

	// Create: a schedule, one device, three actions in order (a blank row between is left out).
	nightly := url.Values{"orgId": {o.mine.OrgID}, "name": {"Nightly clean-up"}, "description": {"Frees disk space"}, "enabled": {"true"},
		"trigger.type": {"schedule"}, "trigger.cron": {"0 3 * * *"}, "trigger.timezone": {"Europe/Berlin"}, "trigger.eventType": {"device.offline"},
		"targets.type": {"devices"}, "deviceIds": {dev}, "onFailure": {"continue"},
		"actions[0].type": {"run_script"}, "actions[0].scriptId": {script.ID}, "actions[0].parameters": {"TARGET_DIR=/tmp\r\nDRY_RUN = true"},
		"actions[0].severity": {"medium"}, "actions[1].type": {""}, "actions[1].title": {"ignored"},
		"actions[2].type": {"create_alert"}, "actions[2].severity": {"high"}, "actions[2].title": {"Clean-up ran"},
		"actions[3].type": {"reboot"}, "actions[3].scriptId": {script.ID}}
	id := createdID(t, o.post("/automations", nightly), "/automations/")
	x := get(o.mine.Org, id)
	if x.Name != "Nightly clean-up" || x.Description != "Frees disk space" || !x.Enabled || x.Trigger.Type != "schedule" ||
		x.Trigger.Cron != "0 3 * * *" || x.Trigger.Timezone != "Europe/Berlin" || x.Trigger.EventType != "" || x.Targets == nil ||
		x.Targets.Type != "devices" || len(x.Targets.IDs) != 1 || x.Targets.IDs[0] != dev || x.OnFailure != "continue" || len(x.Actions) != 3 ||
		x.Actions[0].Type != "run_script" || x.Actions[0].ScriptID != script.ID || x.Actions[0].Parameters["TARGET_DIR"] != "/tmp" ||
		x.Actions[0].Parameters["DRY_RUN"] != "true" || x.Actions[1].Type != "create_alert" || x.Actions[1].Severity != "high" ||
		x.Actions[1].Title != "Clean-up ran" || x.Actions[2].Type != "run_command" || x.Actions[2].Command == nil || x.Actions[2].Command.Type != "reboot" {
		t.Fatalf("the automation created in the console: %+v", x)
	}
	detail := v.get("/automations/" + id)
	must(t, detail, http.StatusOK, `href="/automations/`+id+`/edit"`, `hx-confirm="Delete Nightly clean-up`, "Schedule 0 3 * * * (Europe/Berlin)")

	// The editor shows it as it stands and saves the whole of it.
	edit := v.get("/automations/" + id + "/edit")
	must(t, edit, http.StatusOK, "<h1>Edit Nightly clean-up</h1>", `action="/automations/`+id+`"`, `value="Nightly clean-up"`,
		`value="0 3 * * *"`, `<option value="`+script.ID+`" selected>Clean up</option>`, "DRY_RUN=true\nTARGET_DIR=/tmp",
		`name="deviceIds" value="`+dev+`" checked`, `<option value="reboot" selected>`, `<option value="continue" selected>`)
	lacks(t, edit, `value="none"`)
	onEvent := url.Values{"name": {"Offline alert"}, "trigger.type": {"event"}, "trigger.eventType": {"device.offline"},
		"trigger.filter": {"severity=critical"}, "trigger.cron": {"0 3 * * *"}, "targets.type": {"organization"}, "deviceIds": {dev},
		"onFailure": {"stop"}, "actions[0].type": {"create_alert"}, "actions[0].severity": {"critical"}, "actions[0].title": {"Went offline"}}
	p := o.post("/automations/"+id, onEvent)
	if p.status != http.StatusSeeOther || p.location != "/automations/"+id {
		t.Fatalf("save: %d to %q\n%s", p.status, p.location, p.body)
	}
	x = get(o.mine.Org, id)
	if x.Name != "Offline alert" || x.Description != "" || x.Enabled || x.Trigger.Type != "event" || x.Trigger.EventType != "device.offline" ||
		x.Trigger.Filter["severity"] != "critical" || x.Trigger.Cron != "" || x.Targets == nil || x.Targets.Type != "organization" ||
		len(x.Targets.IDs) != 0 || len(x.Actions) != 1 || x.Actions[0].Title != "Went offline" || x.OnFailure != "stop" {
		t.Fatalf("the automation after the edit: %+v", x)
	}

	// An action the form cannot show is kept as it is.
	var delayed idOnly
	e.Must(http.StatusCreated, o.mine.Org, "POST", "/api/v1/automations", map[string]any{"name": "Delayed reboot",
		"trigger": map[string]any{"type": "manual"}, "targets": map[string]any{"type": "devices", "ids": []string{dev}},
		"actions": []map[string]any{{"type": "run_command", "command": map[string]any{"type": "reboot", "payload": map[string]any{"delaySeconds": 60}}}}}).JSON(t, &delayed)
	must(t, v.get("/automations/"+delayed.ID+"/edit"), http.StatusOK, `<option value="keep" selected>Keep: Send the device command reboot</option>`,
		`name="actions[0].keep" value="0"`)
	must(t, o.post("/automations/"+delayed.ID, url.Values{"name": {"Reboot in a minute"}, "trigger.type": {"manual"}, "targets.type": {"devices"},
		"deviceIds": {dev}, "onFailure": {"stop"}, "enabled": {"true"}, "actions[0].type": {"keep"}, "actions[0].keep": {"0"},
		"actions[1].type": {"create_alert"}, "actions[1].severity": {"info"}, "actions[1].title": {"Rebooting"}}), http.StatusSeeOther)
	if x := get(o.mine.Org, delayed.ID); x.Name != "Reboot in a minute" || len(x.Actions) != 2 || x.Actions[0].Command == nil ||
		!strings.Contains(string(x.Actions[0].Command.Payload), `"delaySeconds":60`) || x.Actions[1].Title != "Rebooting" {
		t.Fatalf("the automation with a kept action: %+v", x)
	}

	// Refused input is shown again with the API's message; foreign IDs are refused.
	before := apiCount(t, e, o.mine.Org, "/api/v1/automations")
	bad := func(change map[string]string, says string) {
		t.Helper()
		must(t, o.post("/automations", withFields(nightly, change)), http.StatusBadRequest, says, `action="/automations"`, "Not saved",
			`value="Frees disk space"`)
	}
	bad(map[string]string{"name": " "}, "name is 1 to 255 characters")
	bad(map[string]string{"trigger.cron": "61 3 * * *"}, "trigger.cron")
	bad(map[string]string{"trigger.timezone": "Mars/Olympus"}, "trigger.cron")
	bad(map[string]string{"trigger.type": "event", "trigger.eventType": "device.exploded"}, "eventType must be one of")
	bad(map[string]string{"deviceIds": theirDev}, "no such device within reach")
	bad(map[string]string{"targets.type": "sites", "deviceIds": ""}, "name 1 to 500 sites")
	bad(map[string]string{"actions[0].scriptId": theirScript.ID}, "no such script within the automation")
	bad(map[string]string{"actions[0].parameters": "just text"}, "one name=value a line")
	bad(map[string]string{"actions[2].title": ""}, "title is required")
	bad(map[string]string{"actions[0].type": "", "actions[2].type": "", "actions[3].type": ""}, "1 to 20 actions")
	bad(map[string]string{"orgId": o.them.OrgID}, "no such organization")
	bad(map[string]string{"targets.type": ""}, "choose the devices it acts on")
	must(t, o.post("/automations/"+id, withFields(onEvent, map[string]string{"trigger.eventType": ""})), http.StatusBadRequest,
		`action="/automations/`+id+`"`, "eventType must be one of", `value="Offline alert"`)
	must(t, o.post("/automations/"+id, withFields(onEvent, map[string]string{"targets.type": "none"})), http.StatusBadRequest,
		"targets cannot be removed")
	if n := apiCount(t, e, o.mine.Org, "/api/v1/automations"); n != before {
		t.Fatalf("refused forms made automations: %d, were %d", n, before)
	}
	if x := get(o.mine.Org, id); x.Name != "Offline alert" || x.Trigger.EventType != "device.offline" {
		t.Fatalf("a refused edit changed the automation: %+v", x)
	}

	// A partner user chooses the organization first.
	partner := newVisitor(t, e)
	partner.signIn("acme-partner@gale.test", apptest.UserPassword)
	must(t, partner.get("/automations/new"), http.StatusOK, `action="/automations/new"`, `<select id="orgId" name="orgId" required>`)
	must(t, partner.get("/automations/new?orgId="+o.mine.OrgID), http.StatusOK, `name="orgId" value="`+o.mine.OrgID+`"`, `value="`+dev+`"`)

	// Another organization's automation answers as a missing one, and stays.
	sameAsMissing(t, "an automation's editor", v.get("/automations/"+theirs.ID+"/edit"), v.get("/automations/"+missingID+"/edit"))
	sameAsMissing(t, "an automation's save", o.post("/automations/"+theirs.ID, onEvent), o.post("/automations/"+missingID, onEvent))
	sameAsMissing(t, "an automation's deletion", o.post("/automations/"+theirs.ID+"/delete", nil), o.post("/automations/"+missingID+"/delete", nil))
	if x := get(o.them.Org, theirs.ID); x.Name != "Their automation" || !x.Enabled {
		t.Fatalf("another organization's automation changed: %+v", x)
	}

	// Without the token nothing changes; a reader may not change automations.
	must(t, v.post("/automations/"+id+"/delete", url.Values{}), http.StatusForbidden, "security token")
	must(t, v.post("/automations/"+id, withFields(onEvent, map[string]string{"name": "No token", "csrf": ""})), http.StatusForbidden)
	if x := get(o.mine.Org, id); x.Name != "Offline alert" {
		t.Fatalf("a request without a token renamed the automation to %q", x.Name)
	}
	r := o.orgViewer(t)
	lacks(t, r.get("/automations"), `href="/automations/new"`)
	reader := r.get("/automations/" + id)
	lacks(t, reader, `href="/automations/`+id+`/edit"`)
	lacks(t, reader, `/delete"`)
	must(t, r.get("/automations/new"), http.StatusForbidden)
	must(t, r.get("/automations/"+id+"/edit"), http.StatusForbidden)
	must(t, r.post("/automations", withFields(nightly, map[string]string{"csrf": r.csrf})), http.StatusForbidden)
	must(t, r.post("/automations/"+id, withFields(onEvent, map[string]string{"csrf": r.csrf})), http.StatusForbidden)
	must(t, r.post("/automations/"+id+"/delete", url.Values{"csrf": {r.csrf}}), http.StatusForbidden)

	// Delete, from htmx after its confirmation.
	del := o.hx("/automations/"+id+"/delete", nil)
	if del.status != http.StatusNoContent || del.header.Get("HX-Redirect") != "/automations" {
		t.Fatalf("delete: %d %v\n%s", del.status, del.header, del.body)
	}
	e.Must(http.StatusNotFound, o.mine.Org, "GET", "/api/v1/automations/"+id, nil)
}
