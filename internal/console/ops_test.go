package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/discovery"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// opsEnv is an installation with two tenants, signed in to the console as the first one's
// organization technician.
type opsEnv struct {
	e          *apptest.Env
	mine, them apptest.Tenant
	v          *visitor
}

func newOpsEnv(t *testing.T) opsEnv {
	e := apptest.New(t)
	admin := e.Admin()
	o := opsEnv{e: e, mine: e.NewTenant(admin, "Acme"), them: e.NewTenant(admin, "Other")}
	o.v = newVisitor(t, e)
	o.v.signIn("acme-org@gale.test", apptest.UserPassword)
	return o
}

// post sends a form with the session's CSRF token.
func (o opsEnv) post(path string, form url.Values) page {
	o.v.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", o.v.csrf)
	return o.v.post(path, form)
}

// hx sends a form as htmx does: the token in a header.
func (o opsEnv) hx(path string, form url.Values) page {
	o.v.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	return o.v.do(http.MethodPost, path, form, map[string]string{"X-CSRF-Token": o.v.csrf, "HX-Request": "true"})
}

func lacks(t *testing.T, p page, s string) {
	t.Helper()
	if strings.Contains(p.body, s) {
		t.Fatalf("the page shows %q:\n%s", s, p.body)
	}
}

type idOnly struct {
	ID string `json:"id"`
}

func TestOpsNavigation(t *testing.T) {
	o := newOpsEnv(t)
	must(t, o.v.get("/"), http.StatusOK, `href="/automations"`, `href="/monitors"`, `href="/maintenance"`, `href="/discovery"`)
	must(t, o.v.get("/monitors"), http.StatusOK, `<a href="/monitors" aria-current="page">Monitors</a>`)
	// A system user reaches every organization: the form asks which one the window is for.
	admin := newVisitor(t, o.e)
	admin.signIn(apptest.AdminEmail, apptest.AdminPassword)
	for _, path := range []string{"/automations", "/monitors", "/maintenance", "/discovery", "/discovery/assets"} {
		must(t, admin.get(path), http.StatusOK, "<h1>")
	}
	must(t, admin.get("/maintenance/new"), http.StatusOK, `<select id="orgId" name="orgId" required>`, "Acme Customer", "Other Customer")
	must(t, admin.post("/scope", url.Values{"csrf": {admin.csrf}, "org": {o.mine.OrgID}, "next": {"/maintenance/new"}}), http.StatusSeeOther)
	narrowed := admin.get("/maintenance/new")
	must(t, narrowed, http.StatusOK, `<input type="hidden" name="orgId" value="`+o.mine.OrgID+`">`)
	lacks(t, narrowed, `id="orgId"`)
}

func TestOpsAutomations(t *testing.T) {
	o := newOpsEnv(t)
	e, v := o.e, o.v
	dev := e.InsertDevice(apptest.DeviceRow{PartnerID: o.mine.PartnerID, OrgID: o.mine.OrgID, SiteID: o.mine.SiteID, Hostname: "ws-a"})
	theirDev := e.InsertDevice(apptest.DeviceRow{PartnerID: o.them.PartnerID, OrgID: o.them.OrgID, SiteID: o.them.SiteID, Hostname: "ws-x"})
	body := func(name, device string) map[string]any {
		return map[string]any{"name": name, "trigger": map[string]any{"type": "manual"}, "targets": map[string]any{"type": "devices",
			"ids": []string{device}}, "actions": []map[string]any{{"type": "create_alert", "severity": "low", "title": "Disk check"}}}
	}
	var mine, theirs idOnly
	e.Must(http.StatusCreated, o.mine.Org, "POST", "/api/v1/automations", body("Raise a test alert", dev)).JSON(t, &mine)
	e.Must(http.StatusCreated, o.them.Org, "POST", "/api/v1/automations", body("Their automation", theirDev)).JSON(t, &theirs)
	e.Must(http.StatusCreated, o.mine.Org, "POST", "/api/v1/automations", map[string]any{"name": "Nightly",
		"trigger": map[string]any{"type": "schedule", "cron": "0 3 * * *"}, "targets": map[string]any{"type": "devices", "ids": []string{dev}},
		"actions": []map[string]any{{"type": "create_alert", "severity": "info", "title": "Night"}}})
	var theirRun idOnly
	e.Must(http.StatusAccepted, o.them.Org, "POST", "/api/v1/automations/"+theirs.ID+"/run", nil).JSON(t, &theirRun)

	list := v.get("/automations")
	must(t, list, http.StatusOK, "Raise a test alert", `href="/automations/`+mine.ID+`"`, "Manual only", "Schedule 0 3 * * * (UTC)", "never")
	lacks(t, list, "Their automation")
	must(t, v.get("/automations?trigger=schedule"), http.StatusOK, "Nightly")
	lacks(t, v.get("/automations?trigger=schedule"), "Raise a test alert")
	must(t, v.get("/automations?trigger=sometimes"), http.StatusBadRequest)
	must(t, v.get("/automations?enabled=maybe"), http.StatusBadRequest)
	must(t, v.get("/automations?enabled=false"), http.StatusOK, "No automation matches this filter")
	must(t, v.get("/automations/"+mine.ID), http.StatusOK, "<h1>Raise a test alert</h1>", "Raise a low alert: Disk check", "1 device",
		`action="/automations/`+mine.ID+`/run"`, "It has not run yet.")

	// Run now starts a run and shows it.
	p := o.post("/automations/"+mine.ID+"/run", nil)
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/automations/runs/") {
		t.Fatalf("run now: %d to %q\n%s", p.status, p.location, p.body)
	}
	runID := strings.TrimPrefix(p.location, "/automations/runs/")
	var runs struct {
		Data []struct {
			ID          string `json:"id"`
			TriggeredBy string `json:"triggeredBy"`
		} `json:"data"`
	}
	e.Must(http.StatusOK, o.mine.Org, "GET", "/api/v1/automations/"+mine.ID+"/runs", nil).JSON(t, &runs)
	if len(runs.Data) != 1 || runs.Data[0].ID != runID || runs.Data[0].TriggeredBy != "run" {
		t.Fatalf("runs after run now: %+v", runs.Data)
	}
	must(t, v.get(p.location), http.StatusOK, "Run of Raise a test alert", `id="run-progress"`)
	progress := v.do(http.MethodGet, p.location, nil, map[string]string{"HX-Request": "true", "HX-Target": "run-progress"})
	must(t, progress, http.StatusOK, `<div id="run-progress"`)
	lacks(t, progress, "<html")
	must(t, v.get("/automations"), http.StatusOK, `href="/automations/runs/`+runID+`"`)
	must(t, v.get("/automations/"+mine.ID), http.StatusOK, `href="/automations/runs/`+runID+`"`)
	// From htmx (the confirmed form), the answer sends the page to the run.
	hx := o.hx("/automations/"+mine.ID+"/run", nil)
	if hx.status != http.StatusNoContent || !strings.HasPrefix(hx.header.Get("HX-Redirect"), "/automations/runs/") {
		t.Fatalf("run now from htmx: %d %v", hx.status, hx.header)
	}

	// Disable, then enable.
	enabled := func() bool {
		var x struct {
			Enabled bool `json:"enabled"`
		}
		e.Must(http.StatusOK, o.mine.Org, "GET", "/api/v1/automations/"+mine.ID, nil).JSON(t, &x)
		return x.Enabled
	}
	must(t, o.post("/automations/"+mine.ID+"/disable", nil), http.StatusSeeOther)
	if enabled() {
		t.Fatal("the automation is enabled after disabling it")
	}
	off := v.get("/automations/" + mine.ID)
	must(t, off, http.StatusOK, `action="/automations/`+mine.ID+`/enable"`, "enable it to run it")
	lacks(t, off, `action="/automations/`+mine.ID+`/run"`)
	must(t, o.post("/automations/"+mine.ID+"/run", nil), http.StatusBadRequest, "disabled")
	must(t, v.get("/automations?enabled=false"), http.StatusOK, "Raise a test alert")
	must(t, o.post("/automations/"+mine.ID+"/enable", nil), http.StatusSeeOther)
	if !enabled() {
		t.Fatal("the automation is disabled after enabling it")
	}

	// Another organization's automation and run are not found, and stay as they were.
	sameAsMissing(t, "an automation's page", v.get("/automations/"+theirs.ID), v.get("/automations/"+missingID))
	sameAsMissing(t, "a run's page", v.get("/automations/runs/"+theirRun.ID), v.get("/automations/runs/"+missingID))
	for _, action := range []string{"run", "enable", "disable"} {
		sameAsMissing(t, action, o.post("/automations/"+theirs.ID+"/"+action, nil), o.post("/automations/"+missingID+"/"+action, nil))
	}
	var their struct {
		Enabled bool `json:"enabled"`
	}
	e.Must(http.StatusOK, o.them.Org, "GET", "/api/v1/automations/"+theirs.ID, nil).JSON(t, &their)
	e.Must(http.StatusOK, o.them.Org, "GET", "/api/v1/automations/"+theirs.ID+"/runs", nil).JSON(t, &runs)
	if !their.Enabled || len(runs.Data) != 1 {
		t.Fatalf("another organization's automation changed: enabled %v, %d runs", their.Enabled, len(runs.Data))
	}
}

func TestOpsMaintenance(t *testing.T) {
	o := newOpsEnv(t)
	e, v := o.e, o.v
	dev := e.InsertDevice(apptest.DeviceRow{PartnerID: o.mine.PartnerID, OrgID: o.mine.OrgID, SiteID: o.mine.SiteID, Hostname: "ws-a"})
	theirDev := e.InsertDevice(apptest.DeviceRow{PartnerID: o.them.PartnerID, OrgID: o.them.OrgID, SiteID: o.them.SiteID, Hostname: "ws-x"})
	const wall = "2006-01-02T15:04:05"
	// Tomorrow at 10:00: the window never crosses midnight, whose end the list would show with its date.
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(34 * time.Hour)
	window := func(name string) map[string]any {
		return map[string]any{"name": name, "startTime": start.Format(wall), "endTime": start.Add(2 * time.Hour).Format(wall),
			"timezone": "UTC", "recurrence": "once", "targets": map[string]any{"type": "all"}}
	}
	var mine, theirs idOnly
	e.Must(http.StatusCreated, o.mine.Org, "POST", "/api/v1/maintenance/windows", window("Patch night")).JSON(t, &mine)
	e.Must(http.StatusCreated, o.them.Org, "POST", "/api/v1/maintenance/windows", window("Their window")).JSON(t, &theirs)
	occurrence := func(c apptest.Caller, windowID string) (id, status string) {
		var list struct {
			Data []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"data"`
		}
		e.Must(http.StatusOK, c, "GET", "/api/v1/maintenance/windows/"+windowID+"/occurrences", nil).JSON(t, &list)
		if len(list.Data) == 0 {
			t.Fatalf("window %s has no occurrence", windowID)
		}
		return list.Data[0].ID, list.Data[0].Status
	}
	occ, _ := occurrence(o.mine.Org, mine.ID)
	theirOcc, _ := occurrence(o.them.Org, theirs.ID)

	list := v.get("/maintenance")
	must(t, list, http.StatusOK, "Patch night", `href="/maintenance/`+mine.ID+`"`, "upcoming", "every device of the organization",
		start.Format("2006-01-02 15:04")+" to "+start.Add(2*time.Hour).Format("15:04")+" (UTC)", "<td>alerts</td>")
	lacks(t, list, "Their window")
	must(t, v.get("/maintenance?status=cancelled"), http.StatusOK, "No cancelled window")
	must(t, v.get("/maintenance?status=over"), http.StatusBadRequest)
	detail := v.get("/maintenance/" + mine.ID)
	must(t, detail, http.StatusOK, "<h1>Patch night</h1>", `action="/maintenance/occurrences/`+occ+`/start"`, `hx-confirm="Delete Patch night`)

	// Start now, then a delete is refused while it is in effect, then end it.
	p := o.post("/maintenance/occurrences/"+occ+"/start", nil)
	if p.status != http.StatusSeeOther || p.location != "/maintenance/"+mine.ID {
		t.Fatalf("start now: %d to %q\n%s", p.status, p.location, p.body)
	}
	if _, st := occurrence(o.mine.Org, mine.ID); st != "active" {
		t.Fatalf("the occurrence is %s after starting it", st)
	}
	must(t, v.get("/maintenance"), http.StatusOK, "in effect")
	must(t, v.get("/maintenance/"+mine.ID), http.StatusOK, `action="/maintenance/occurrences/`+occ+`/end"`)
	refused := o.hx("/maintenance/"+mine.ID+"/delete", nil)
	must(t, refused, http.StatusConflict, "end it first")
	if refused.header.Get("HX-Retarget") != "#notice" {
		t.Fatalf("the refusal is not shown in the notice area: %v", refused.header)
	}
	must(t, o.post("/maintenance/occurrences/"+occ+"/start", nil), http.StatusConflict, "not scheduled")
	must(t, o.post("/maintenance/occurrences/"+occ+"/end", nil), http.StatusSeeOther)
	if _, st := occurrence(o.mine.Org, mine.ID); st != "completed" {
		t.Fatalf("the occurrence is %s after ending it", st)
	}
	must(t, v.get("/maintenance"), http.StatusOK, "ended")

	// The form: the devices of the organization to choose, then a window created from it.
	must(t, v.get("/maintenance/new"), http.StatusOK, `name="deviceIds" value="`+dev+`"`, "Every device of the organization",
		`name="durationMinutes"`)
	lacks(t, v.get("/maintenance/new"), theirDev)
	first := time.Now().UTC().Add(24 * time.Hour).Truncate(time.Minute)
	form := url.Values{"name": {"Weekly reboot"}, "startTime": {first.Format("2006-01-02T15:04")}, "durationMinutes": {"90"},
		"timezone": {"UTC"}, "recurrence": {"weekly"}, "targets.type": {"devices"}, "deviceIds": {dev}, "suppressAlerts": {"true"},
		"suppressScripts": {"true"}}
	created := o.post("/maintenance", form)
	if created.status != http.StatusSeeOther || !strings.HasPrefix(created.location, "/maintenance/") {
		t.Fatalf("create: %d to %q\n%s", created.status, created.location, created.body)
	}
	weekly := strings.TrimPrefix(created.location, "/maintenance/")
	var w struct {
		Name            string `json:"name"`
		StartTime       string `json:"startTime"`
		EndTime         string `json:"endTime"`
		Recurrence      string `json:"recurrence"`
		Status          string `json:"status"`
		SuppressAlerts  bool   `json:"suppressAlerts"`
		SuppressPatches bool   `json:"suppressPatches"`
		SuppressScripts bool   `json:"suppressScripts"`
		Targets         struct {
			Type string   `json:"type"`
			IDs  []string `json:"ids"`
		} `json:"targets"`
	}
	e.Must(http.StatusOK, o.mine.Org, "GET", "/api/v1/maintenance/windows/"+weekly, nil).JSON(t, &w)
	if w.Name != "Weekly reboot" || w.StartTime != first.Format(wall) || w.EndTime != first.Add(90*time.Minute).Format(wall) ||
		w.Recurrence != "weekly" || !w.SuppressAlerts || w.SuppressPatches || !w.SuppressScripts || w.Targets.Type != "devices" ||
		len(w.Targets.IDs) != 1 || w.Targets.IDs[0] != dev {
		t.Fatalf("the window created in the console: %+v", w)
	}
	must(t, v.get(created.location), http.StatusOK, "repeating weekly", "1 device: ws-a", "alerts, scripts")

	// Bad input is refused with the form shown again.
	bad := func(change map[string]string, status int, says string) {
		t.Helper()
		f := url.Values{}
		for k, vals := range form {
			f[k] = append([]string(nil), vals...)
		}
		for k, val := range change {
			f.Set(k, val)
		}
		must(t, o.post("/maintenance", f), status, says, `action="/maintenance"`, `value="Weekly reboot"`)
	}
	bad(map[string]string{"durationMinutes": "", "endTime": first.Add(-time.Hour).Format("2006-01-02T15:04")}, http.StatusBadRequest,
		"after startTime")
	bad(map[string]string{"startTime": "tomorrow"}, http.StatusBadRequest, "a date and time")
	bad(map[string]string{"durationMinutes": ""}, http.StatusBadRequest, "the end, or the duration")
	bad(map[string]string{"durationMinutes": "0"}, http.StatusBadRequest, "at least 1")
	bad(map[string]string{"timezone": "Mars/Olympus"}, http.StatusBadRequest, "IANA time zone")
	bad(map[string]string{"deviceIds": theirDev}, http.StatusBadRequest, "no such device within reach")
	bad(map[string]string{"targets.type": "devices", "deviceIds": ""}, http.StatusBadRequest, "targets")

	// Cancel, and a second cancel is the API's conflict.
	must(t, o.post("/maintenance/"+weekly+"/cancel", nil), http.StatusSeeOther)
	e.Must(http.StatusOK, o.mine.Org, "GET", "/api/v1/maintenance/windows/"+weekly, nil).JSON(t, &w)
	if w.Status != "cancelled" {
		t.Fatalf("the window is %s after cancelling it", w.Status)
	}
	must(t, v.get("/maintenance"), http.StatusOK, "cancelled")
	must(t, o.post("/maintenance/"+weekly+"/cancel", nil), http.StatusConflict, "cancelled already")

	// Delete, from htmx after its confirmation.
	del := o.hx("/maintenance/"+mine.ID+"/delete", nil)
	if del.status != http.StatusNoContent || del.header.Get("HX-Redirect") != "/maintenance" {
		t.Fatalf("delete: %d %v\n%s", del.status, del.header, del.body)
	}
	e.Must(http.StatusNotFound, o.mine.Org, "GET", "/api/v1/maintenance/windows/"+mine.ID, nil)

	// Another organization's window and occurrences are not found, and stay as they were.
	sameAsMissing(t, "a window's page", v.get("/maintenance/"+theirs.ID), v.get("/maintenance/"+missingID))
	for _, action := range []string{"cancel", "delete"} {
		sameAsMissing(t, action, o.post("/maintenance/"+theirs.ID+"/"+action, nil), o.post("/maintenance/"+missingID+"/"+action, nil))
	}
	for _, action := range []string{"start", "end"} {
		sameAsMissing(t, action, o.post("/maintenance/occurrences/"+theirOcc+"/"+action, nil),
			o.post("/maintenance/occurrences/"+missingID+"/"+action, nil))
	}
	if _, st := occurrence(o.them.Org, theirs.ID); st != "scheduled" {
		t.Fatalf("another organization's occurrence is %s", st)
	}
	e.Must(http.StatusOK, o.them.Org, "GET", "/api/v1/maintenance/windows/"+theirs.ID, nil).JSON(t, &w)
	if w.Status != "active" {
		t.Fatalf("another organization's window is %s", w.Status)
	}
}

// probe opens an agent's live channel and answers its monitor checks: offline when the
// target holds "down", online in 12.5 ms otherwise.
func probe(t *testing.T, e *apptest.Env, token string) {
	t.Helper()
	e.AnswerCalls(token, func(call agentproto.Call) (json.RawMessage, *agentproto.CallError) {
		var c agentproto.MonitorCheck
		_ = json.Unmarshal(call.Args, &c)
		ms := 12.5
		r := agentproto.MonitorCheckResult{MonitorID: c.MonitorID, Status: "online", ResponseMs: &ms}
		if strings.Contains(c.Target, "down") {
			r = agentproto.MonitorCheckResult{MonitorID: c.MonitorID, Status: "offline", Error: "no answer"}
		}
		result, _ := json.Marshal(r)
		return result, nil
	})
}

func TestOpsMonitors(t *testing.T) {
	o := newOpsEnv(t)
	e, v := o.e, o.v
	must(t, v.get("/monitors"), http.StatusOK, "No monitors yet", "POST /api/v1/monitors")
	agent := e.EnrollAgent(o.mine, "probe-a")
	probe(t, e, agent.AuthToken)
	var web, old, theirs idOnly
	e.Must(http.StatusCreated, o.mine.Org, "POST", "/api/v1/monitors", map[string]any{"name": "Web site", "type": "http_check",
		"target": "https://up.example.test/"}).JSON(t, &web)
	e.Must(http.StatusCreated, o.mine.Org, "POST", "/api/v1/monitors", map[string]any{"name": "Old server", "type": "icmp_ping",
		"target": "down.example.test"}).JSON(t, &old)
	e.Must(http.StatusCreated, o.them.Org, "POST", "/api/v1/monitors", map[string]any{"name": "Their monitor", "type": "icmp_ping",
		"target": "127.0.0.1"}).JSON(t, &theirs)
	type monitor struct {
		Enabled        bool     `json:"enabled"`
		Status         string   `json:"status"`
		LastResponseMs *float64 `json:"lastResponseMs"`
	}
	get := func(c apptest.Caller, id string) monitor {
		var m monitor
		e.Must(http.StatusOK, c, "GET", "/api/v1/monitors/"+id, nil).JSON(t, &m)
		return m
	}

	list := v.get("/monitors")
	must(t, list, http.StatusOK, "Web site", "Old server", `href="/monitors/`+web.ID+`"`, "<code>https://up.example.test/</code>", "HTTP(S)")
	lacks(t, list, "Their monitor")

	// Check now from htmx answers the page's status region with the stored result.
	checked := o.hx("/monitors/"+web.ID+"/check", nil)
	must(t, checked, http.StatusOK, `<div id="monitor-state">`, "12.5 ms", `badge status-online`)
	lacks(t, checked, "<html")
	if m := get(o.mine.Org, web.ID); m.Status != "online" || m.LastResponseMs == nil || *m.LastResponseMs != 12.5 {
		t.Fatalf("after check now: %+v", m)
	}
	must(t, o.post("/monitors/"+old.ID+"/check", nil), http.StatusSeeOther)
	if m := get(o.mine.Org, old.ID); m.Status != "offline" {
		t.Fatalf("after check now of a host that is down: %+v", m)
	}
	online := v.get("/monitors?status=online")
	must(t, online, http.StatusOK, "Web site", `<span class="count">1</span>`)
	lacks(t, online, "Old server")
	must(t, v.get("/monitors?status=offline"), http.StatusOK, "Old server", "no answer")
	must(t, v.get("/monitors?q=up.example"), http.StatusOK, "Web site")
	must(t, v.get("/monitors?status=sideways"), http.StatusBadRequest)
	must(t, v.get("/monitors/"+web.ID), http.StatusOK, "<h1>Web site</h1>", "Latest results", "12.5 ms", "Check now",
		`hx-confirm="Delete Web site`)

	// A request without the CSRF token changes nothing.
	must(t, v.post("/monitors/"+web.ID+"/disable", url.Values{}), http.StatusForbidden, "security token")
	if !get(o.mine.Org, web.ID).Enabled {
		t.Fatal("a request without a CSRF token paused the monitor")
	}
	// Pause and resume.
	must(t, o.post("/monitors/"+web.ID+"/disable", nil), http.StatusSeeOther)
	if get(o.mine.Org, web.ID).Enabled {
		t.Fatal("the monitor runs after pausing it")
	}
	must(t, v.get("/monitors/"+web.ID), http.StatusOK, "Resume", "paused")
	must(t, o.post("/monitors/"+web.ID+"/enable", nil), http.StatusSeeOther)
	if !get(o.mine.Org, web.ID).Enabled {
		t.Fatal("the monitor is paused after resuming it")
	}
	// Delete, from htmx after its confirmation.
	del := o.hx("/monitors/"+old.ID+"/delete", nil)
	if del.status != http.StatusNoContent || del.header.Get("HX-Redirect") != "/monitors" {
		t.Fatalf("delete: %d %v\n%s", del.status, del.header, del.body)
	}
	e.Must(http.StatusNotFound, o.mine.Org, "GET", "/api/v1/monitors/"+old.ID, nil)

	// Another organization's monitor is not found, and stays as it was.
	sameAsMissing(t, "a monitor's page", v.get("/monitors/"+theirs.ID), v.get("/monitors/"+missingID))
	for _, action := range []string{"check", "enable", "disable", "delete"} {
		sameAsMissing(t, action, o.post("/monitors/"+theirs.ID+"/"+action, nil), o.post("/monitors/"+missingID+"/"+action, nil))
	}
	if m := get(o.them.Org, theirs.ID); !m.Enabled {
		t.Fatal("another organization's monitor was paused")
	}
}

func TestOpsDiscovery(t *testing.T) {
	o := newOpsEnv(t)
	e, v := o.e, o.v
	devs := app.Service[*devices.Service](e.App)
	disc := app.Service[*discovery.Service](e.App)
	ctx := context.Background()
	must(t, v.get("/discovery"), http.StatusOK, "No discovery profiles yet")
	must(t, v.get("/discovery/assets"), http.StatusOK, "Nothing discovered yet")
	device := func(ten apptest.Tenant, host string) string {
		return e.InsertDevice(apptest.DeviceRow{PartnerID: ten.PartnerID, OrgID: ten.OrgID, SiteID: ten.SiteID, Hostname: host})
	}
	device(o.mine, "probe-a")
	device(o.them, "probe-x")
	nas := device(o.mine, "nas-01")
	theirDev := device(o.them, "ws-x")
	profile := func(c apptest.Caller, ten apptest.Tenant, name string) string {
		var p idOnly
		e.Must(http.StatusCreated, c, "POST", "/api/v1/discovery/profiles", map[string]any{"siteId": ten.SiteID, "name": name,
			"subnets": []string{"192.168.1.0/24"}}).JSON(t, &p)
		return p.ID
	}
	mine, theirs := profile(o.mine.Org, o.mine, "Office LAN"), profile(o.them.Org, o.them, "Their LAN")
	type job struct {
		ID        string  `json:"id"`
		Status    string  `json:"status"`
		CommandID *string `json:"commandId"`
		Agent     string  `json:"agentDeviceId"`
	}
	getJob := func(c apptest.Caller, id string) job {
		var j job
		e.Must(http.StatusOK, c, "GET", "/api/v1/discovery/jobs/"+id, nil).JSON(t, &j)
		return j
	}
	// running has the agent take its command and the job follow it.
	running := func(agent string) {
		if _, err := devs.TakeQueued(ctx, agent); err != nil {
			t.Fatal(err)
		}
		if err := disc.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	finish := func(ten apptest.Tenant, j job, hosts ...agentproto.ScannedHost) {
		raw, _ := json.Marshal(agentproto.NetworkScanResult{HostsTotal: 254, HostsScanned: 254, Hosts: hosts})
		if err := devs.RecordResult(ctx, devices.Agent{DeviceID: j.Agent, PartnerID: ten.PartnerID, OrgID: ten.OrgID, Role: "agent"},
			agentproto.CommandResult{CommandID: *j.CommandID, Status: agentproto.ResultCompleted, Result: raw}); err != nil {
			t.Fatal(err)
		}
	}

	overview := v.get("/discovery")
	must(t, overview, http.StatusOK, "Office LAN", "<code>192.168.1.0/24</code>", `action="/discovery/profiles/`+mine+`/scan"`)
	lacks(t, overview, "Their LAN")
	must(t, v.get("/discovery/profiles/"+mine), http.StatusOK, "<h1>Office LAN</h1>", "Not scanned yet", "Scan now")

	// Scan now: the job's page shows it waiting, then running, then what it found.
	p := o.post("/discovery/profiles/"+mine+"/scan", nil)
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/discovery/jobs/") {
		t.Fatalf("scan now: %d to %q\n%s", p.status, p.location, p.body)
	}
	j := getJob(o.mine.Org, strings.TrimPrefix(p.location, "/discovery/jobs/"))
	if j.Status != "scheduled" {
		t.Fatalf("the scan's job is %s", j.Status)
	}
	must(t, v.get(p.location), http.StatusOK, "Scan of Office LAN", "scheduled", `hx-trigger="every 3s"`)
	must(t, v.get("/discovery"), http.StatusOK, "Follow the scan")
	must(t, o.hx("/discovery/profiles/"+mine+"/scan", nil), http.StatusConflict, "notice-error")
	running(j.Agent)
	must(t, v.get(p.location), http.StatusOK, "scanning", `<progress max="100"`, `action="/discovery/jobs/`+j.ID+`/cancel"`)
	finish(o.mine, j, agentproto.ScannedHost{IP: "192.168.1.20", MAC: "00:11:22:33:44:20", Hostname: "printer.lan",
		OpenPorts: []int{80, 9100}}, agentproto.ScannedHost{IP: "192.168.1.30", OpenPorts: []int{22, 3306}})
	done := v.do(http.MethodGet, p.location, nil, map[string]string{"HX-Request": "true", "HX-Target": "job-progress"})
	must(t, done, http.StatusOK, `<div id="job-progress">`, "completed", "see the assets")
	lacks(t, done, "every 3s")

	// The assets, and what may be done with them.
	var theirAsset string
	{
		pj := profile(o.them.Org, o.them, "Their other LAN")
		var tj job
		e.Must(http.StatusAccepted, o.them.Org, "POST", "/api/v1/discovery/scan", map[string]any{"profileId": pj}).JSON(t, &tj)
		running(tj.Agent)
		finish(o.them, tj, agentproto.ScannedHost{IP: "192.168.1.99", Hostname: "their-host"})
		var list struct{ Data []idOnly }
		e.Must(http.StatusOK, o.them.Org, "GET", "/api/v1/discovery/assets", nil).JSON(t, &list)
		theirAsset = list.Data[0].ID
	}
	assets := v.get("/discovery/assets")
	must(t, assets, http.StatusOK, "<code>192.168.1.20</code>", "printer.lan", "<code>00:11:22:33:44:20</code>", "printer", "192.168.1.30")
	lacks(t, assets, "their-host")
	printers := v.get("/discovery/assets?type=printer")
	must(t, printers, http.StatusOK, "printer.lan")
	lacks(t, printers, "192.168.1.30")
	must(t, v.get("/discovery/assets?type=toaster"), http.StatusBadRequest)
	must(t, v.get("/discovery/assets?status=lost"), http.StatusBadRequest)
	var list struct {
		Data []struct {
			ID       string  `json:"id"`
			IP       string  `json:"ip"`
			Status   string  `json:"status"`
			LinkedID *string `json:"linkedDeviceId"`
		} `json:"data"`
	}
	asset := func(ip string) (id, status string, linked *string) {
		e.Must(http.StatusOK, o.mine.Org, "GET", "/api/v1/discovery/assets", nil).JSON(t, &list)
		for _, x := range list.Data {
			if x.IP == ip {
				return x.ID, x.Status, x.LinkedID
			}
		}
		return "", "", nil
	}
	printer, _, _ := asset("192.168.1.20")
	server, _, _ := asset("192.168.1.30")
	must(t, v.get("/discovery/assets/"+printer), http.StatusOK, "printer.lan (192.168.1.20)", "80, 9100", `<option value="`+nas+`">nas-01</option>`)

	must(t, o.post("/discovery/assets/"+printer+"/link", url.Values{"deviceId": {theirDev}}), http.StatusBadRequest,
		"no such device in the asset", `action="/discovery/assets/`+printer+`/link"`)
	must(t, o.post("/discovery/assets/"+printer+"/link", url.Values{"deviceId": {nas}}), http.StatusSeeOther)
	if _, st, linked := asset("192.168.1.20"); st != "linked" || linked == nil || *linked != nas {
		t.Fatalf("after linking: %s %v", st, linked)
	}
	must(t, v.get("/discovery/assets/"+printer), http.StatusOK, "linked by hand", "nas-01")
	must(t, v.get("/discovery/assets?status=linked"), http.StatusOK, "printer.lan")
	must(t, o.post("/discovery/assets/"+server+"/ignore", url.Values{"reason": {"  "}}), http.StatusBadRequest, "say why")
	must(t, o.post("/discovery/assets/"+server+"/ignore", url.Values{"reason": {"lab machine"}}), http.StatusSeeOther)
	if _, st, _ := asset("192.168.1.30"); st != "ignored" {
		t.Fatalf("after ignoring: %s", st)
	}
	must(t, v.get("/discovery/assets/"+server), http.StatusOK, "Ignored: lab machine")
	del := o.hx("/discovery/assets/"+server+"/delete", nil)
	if del.status != http.StatusNoContent || del.header.Get("HX-Redirect") != "/discovery/assets" {
		t.Fatalf("delete: %d %v\n%s", del.status, del.header, del.body)
	}
	if id, _, _ := asset("192.168.1.30"); id != "" {
		t.Fatal("the asset is still there after deleting it")
	}

	// Cancel a running scan.
	p = o.post("/discovery/profiles/"+mine+"/scan", nil)
	j = getJob(o.mine.Org, strings.TrimPrefix(p.location, "/discovery/jobs/"))
	must(t, o.post("/discovery/jobs/"+j.ID+"/cancel", nil), http.StatusConflict, "only a running job")
	running(j.Agent)
	must(t, o.post("/discovery/jobs/"+j.ID+"/cancel", nil), http.StatusSeeOther)
	if got := getJob(o.mine.Org, j.ID); got.Status != "cancelled" {
		t.Fatalf("the job is %s after cancelling it", got.Status)
	}

	// Another organization's profile, scan and asset are not found, and stay as they were.
	e.Must(http.StatusAccepted, o.them.Org, "POST", "/api/v1/discovery/scan", map[string]any{"profileId": theirs}).JSON(t, &j)
	running(j.Agent)
	sameAsMissing(t, "a profile's page", v.get("/discovery/profiles/"+theirs), v.get("/discovery/profiles/"+missingID))
	sameAsMissing(t, "scan now", o.post("/discovery/profiles/"+theirs+"/scan", nil), o.post("/discovery/profiles/"+missingID+"/scan", nil))
	sameAsMissing(t, "a scan's page", v.get("/discovery/jobs/"+j.ID), v.get("/discovery/jobs/"+missingID))
	sameAsMissing(t, "cancel", o.post("/discovery/jobs/"+j.ID+"/cancel", nil), o.post("/discovery/jobs/"+missingID+"/cancel", nil))
	sameAsMissing(t, "an asset's page", v.get("/discovery/assets/"+theirAsset), v.get("/discovery/assets/"+missingID))
	for action, form := range map[string]url.Values{"link": {"deviceId": {theirDev}}, "ignore": {"reason": {"mine now"}}, "delete": nil} {
		sameAsMissing(t, action, o.post("/discovery/assets/"+theirAsset+"/"+action, form),
			o.post("/discovery/assets/"+missingID+"/"+action, form))
	}
	if got := getJob(o.them.Org, j.ID); got.Status != "running" {
		t.Fatalf("another organization's scan is %s", got.Status)
	}
	var theirList struct {
		Data []struct {
			Status string `json:"status"`
		} `json:"data"`
	}
	e.Must(http.StatusOK, o.them.Org, "GET", "/api/v1/discovery/assets", nil).JSON(t, &theirList)
	if len(theirList.Data) != 1 || theirList.Data[0].Status != "new" {
		t.Fatalf("another organization's assets changed: %+v", theirList.Data)
	}
}
