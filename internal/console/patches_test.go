package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/domains/patches"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// patchWorld is a tenant with a scanned Linux device, and another tenant with a scanned
// device of its own.
type patchWorld struct {
	e             *apptest.Env
	ten, other    apptest.Tenant
	dev, foreign  string
	ids           map[string]string // the tenant's patches by package name
	foreignPatch  string
	foreignJob    string
	foreignPolicy string
	scanJob       string
}

// scanned scans a device through the API and records its agent's answer: the updates its
// package manager offers.
func scanned(t *testing.T, e *apptest.Env, ten apptest.Tenant, dev string, ups ...agentproto.PackageUpdate) string {
	t.Helper()
	var js patches.PatchJobStart
	e.Must(http.StatusAccepted, ten.Org, "POST", "/api/v1/patches/scan", map[string]any{"deviceIds": []string{dev}}).JSON(t, &js)
	var jd patches.PatchJobDetail
	e.Must(http.StatusOK, ten.Org, "GET", "/api/v1/patches/jobs/"+js.ID, nil).JSON(t, &jd)
	if len(jd.Devices) != 1 || jd.Devices[0].CommandID == nil {
		t.Fatalf("the scan job has no command: %+v", jd)
	}
	raw, _ := json.Marshal(agentproto.PatchScanResult{Manager: agentproto.ManagerApt, ScannedAt: time.Now(), Updates: ups, Installed: 300})
	err := app.Service[*devices.Service](e.App).RecordResult(context.Background(), devices.Agent{DeviceID: dev, PartnerID: ten.PartnerID,
		OrgID: ten.OrgID, Role: "agent"}, agentproto.CommandResult{CommandID: *jd.Devices[0].CommandID, Status: agentproto.ResultCompleted, Result: raw})
	if err != nil {
		t.Fatal(err)
	}
	return js.ID
}

func update(name, from, to string, security bool) agentproto.PackageUpdate {
	return agentproto.PackageUpdate{Name: name, Architecture: "amd64", InstalledVersion: from, AvailableVersion: to, Security: security}
}

func newPatchWorld(t *testing.T) patchWorld {
	e := apptest.New(t)
	admin := e.Admin()
	w := patchWorld{e: e, ten: e.NewTenant(admin, "Acme"), other: e.NewTenant(admin, "Other"), ids: map[string]string{}}
	w.dev = e.InsertDevice(apptest.DeviceRow{PartnerID: w.ten.PartnerID, OrgID: w.ten.OrgID, SiteID: w.ten.SiteID, Hostname: "ws-a"})
	w.foreign = e.InsertDevice(apptest.DeviceRow{PartnerID: w.other.PartnerID, OrgID: w.other.OrgID, SiteID: w.other.SiteID, Hostname: "ws-x"})
	w.scanJob = scanned(t, e, w.ten, w.dev, update("openssl", "3.0.1", "3.0.2", true), update("curl", "7.1", "7.2", false),
		update("bash", "5.1", "5.2", false), update("vim", "9.0", "9.1", false), update("zlib", "1.2", "1.3", true))
	w.foreignJob = scanned(t, e, w.other, w.foreign, update("theirpkg", "1", "2", true))
	var list struct{ Data []patches.Patch }
	e.Must(http.StatusOK, w.ten.Org, "GET", "/api/v1/patches", nil).JSON(t, &list)
	for _, p := range list.Data {
		w.ids[p.PackageID] = p.ID
	}
	if len(w.ids) != 5 {
		t.Fatalf("the tenant has patches %v", w.ids)
	}
	e.Must(http.StatusOK, w.other.Org, "GET", "/api/v1/patches", nil).JSON(t, &list)
	w.foreignPatch = list.Data[0].ID
	var pol struct {
		ID string `json:"id"`
	}
	e.Must(http.StatusCreated, w.other.Org, "POST", "/api/v1/patch-policies", map[string]any{"name": "Theirs",
		"schedule": map[string]any{"frequency": "daily", "time": "03:00"}, "targets": map[string]any{"type": "organization"}}).JSON(t, &pol)
	w.foreignPolicy = pol.ID
	return w
}

// decision is the decision on a patch that applies to the tenant's organization, read
// through the API.
func (w patchWorld) decision(t *testing.T, ten apptest.Tenant, id string) string {
	t.Helper()
	var p patches.Patch
	var list struct{ Data []patches.Patch }
	w.e.Must(http.StatusOK, ten.Org, "GET", "/api/v1/patches?orgId="+ten.OrgID, nil).JSON(t, &list)
	for _, x := range list.Data {
		if x.ID == id {
			p = x
		}
	}
	if p.ID == "" {
		t.Fatalf("patch %s is not listed for the organization", id)
	}
	return p.PatchApproval
}

// The device's patches, the fleet's list with its compliance card, a patch's page, the jobs:
// decisions taken in the console are the API's, installs and scans start jobs.
func TestPatchPages(t *testing.T) {
	w := newPatchWorld(t)
	v := newVisitor(t, w.e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)

	must(t, v.get("/"), http.StatusOK, `href="/patches"`, `<span class="tile-label">Patch compliance</span><span class="tile-value">0%</span>`,
		"1 device needs patches")
	must(t, v.get("/devices/"+w.dev), http.StatusOK, `href="/devices/`+w.dev+`/patches"`, "5 pending (2 critical or security)")
	list := v.get("/patches")
	must(t, list, http.StatusOK, "<h1>Patches</h1>", "Compliance", "0%", "openssl 3.0.2", `name="ids" value="`+w.ids["curl"]+`"`,
		"Approve selected", "your organization")
	if strings.Contains(list.body, "theirpkg") {
		t.Fatal("the list shows another partner's patch")
	}
	page := v.get("/devices/" + w.dev + "/patches")
	must(t, page, http.StatusOK, "<h1>Patches</h1>", "openssl 3.0.2", "Scan now", "Install approved",
		`action="/devices/`+w.dev+`/patches/`+w.ids["openssl"]+`/approve"`)

	// Approve and decline from the device's page: the API sees the decisions.
	must(t, v.post("/devices/"+w.dev+"/patches/"+w.ids["openssl"]+"/approve", url.Values{"csrf": {v.csrf}, "show": {"pending"}}),
		http.StatusSeeOther)
	must(t, v.post("/devices/"+w.dev+"/patches/"+w.ids["vim"]+"/decline", url.Values{"csrf": {v.csrf}}), http.StatusSeeOther)
	if got := w.decision(t, w.ten, w.ids["openssl"]); got != patches.ApprovalApproved {
		t.Fatalf("openssl is %s after approving it", got)
	}
	if got := w.decision(t, w.ten, w.ids["vim"]); got != patches.ApprovalDeclined {
		t.Fatalf("vim is %s after declining it", got)
	}
	// A decision is not reversed: the API's 409.
	must(t, v.post("/devices/"+w.dev+"/patches/"+w.ids["vim"]+"/approve", url.Values{"csrf": {v.csrf}}), http.StatusConflict,
		"already declined")
	must(t, v.post("/devices/"+w.dev+"/patches/"+w.ids["vim"]+"/wipe", url.Values{"csrf": {v.csrf}}), http.StatusNotFound)

	// The patch's page: which devices need it, and a deferral.
	must(t, v.get("/patches/"+w.ids["curl"]), http.StatusOK, "<h1>curl 7.2</h1>", "ws-a", `action="/patches/`+w.ids["curl"]+`/defer"`)
	must(t, v.get("/patches/"+w.ids["openssl"]+"?show=installed"), http.StatusOK, "No device to show")
	must(t, v.get("/patches/"+w.ids["curl"]+"?show=elsewhere"), http.StatusBadRequest)
	must(t, v.post("/patches/"+w.ids["curl"]+"/defer", url.Values{"csrf": {v.csrf}, "until": {"next week"}}), http.StatusBadRequest,
		"until is a date")
	must(t, v.post("/patches/"+w.ids["curl"]+"/defer", url.Values{"csrf": {v.csrf}, "until": {"2001-01-01"}}), http.StatusBadRequest,
		"future")
	later := time.Now().UTC().AddDate(0, 0, 10).Format(time.DateOnly)
	must(t, v.post("/patches/"+w.ids["curl"]+"/defer", url.Values{"csrf": {v.csrf}, "until": {later}}), http.StatusSeeOther)
	if got := w.decision(t, w.ten, w.ids["curl"]); got != patches.ApprovalDeferred {
		t.Fatalf("curl is %s after deferring it", got)
	}
	must(t, v.get("/patches/"+w.ids["curl"]), http.StatusOK, "until "+later)
	must(t, v.post("/patches/"+w.ids["curl"]+"/decline", url.Values{"csrf": {v.csrf}, "note": {"not now"}}), http.StatusSeeOther)
	if got := w.decision(t, w.ten, w.ids["curl"]); got != patches.ApprovalDeclined {
		t.Fatalf("curl is %s after declining it", got)
	}

	// Bulk decisions, each reported.
	hx := map[string]string{"X-CSRF-Token": v.csrf, "HX-Request": "true"}
	bulk := v.do(http.MethodPost, "/patches/bulk", url.Values{"action": {"approve"}, "ids": {w.ids["bash"], w.ids["vim"], w.foreignPatch}}, hx)
	must(t, bulk, http.StatusOK, "1 patch approved; 1 had another decision already; 1 not found")
	if bulk.header.Get("HX-Trigger") != "live" {
		t.Fatalf("the list is not told to refresh: %v", bulk.header)
	}
	must(t, v.do(http.MethodPost, "/patches/bulk", url.Values{"action": {"decline"}, "ids": {w.ids["zlib"]}}, hx), http.StatusOK,
		"1 patch declined")
	for pkg, want := range map[string]string{"bash": patches.ApprovalApproved, "zlib": patches.ApprovalDeclined} {
		if got := w.decision(t, w.ten, w.ids[pkg]); got != want {
			t.Fatalf("%s is %s after the bulk action, want %s", pkg, got, want)
		}
	}
	if got := w.decision(t, w.other, w.foreignPatch); got != patches.ApprovalPending {
		t.Fatalf("another partner's patch is %s after a bulk approval naming it", got)
	}
	must(t, v.do(http.MethodPost, "/patches/bulk", url.Values{"action": {"approve"}}, hx), http.StatusBadRequest, "select the patches first")
	must(t, v.do(http.MethodPost, "/patches/bulk", url.Values{"action": {"defer"}, "ids": {w.ids["bash"]}}, hx), http.StatusBadRequest)
	many := make([]string, 101)
	for i := range many {
		many[i] = w.ids["bash"]
	}
	must(t, v.do(http.MethodPost, "/patches/bulk", url.Values{"action": {"approve"}, "ids": many}, hx), http.StatusBadRequest, "at most 100")

	// Filters.
	approved := v.get("/patches?status=approved")
	must(t, approved, http.StatusOK, "openssl 3.0.2", "bash 5.2")
	if strings.Contains(approved.body, "vim 9.1") {
		t.Fatal("the approved filter lists a declined patch")
	}
	must(t, v.get("/patches?severity=important&q=zlib"), http.StatusOK, "zlib 1.3")
	must(t, v.get("/patches?q=nothing-like-it"), http.StatusOK, "No patch matches this filter")
	must(t, v.get("/patches?severity=severe"), http.StatusBadRequest)
	must(t, v.get("/patches?status=maybe"), http.StatusBadRequest)
	must(t, v.get("/patches?source=elsewhere"), http.StatusBadRequest)
	must(t, v.get("/patches?q="+strings.Repeat("x", 201)), http.StatusBadRequest)
	must(t, v.get("/devices/"+w.dev+"/patches?show=maybe"), http.StatusBadRequest)
	must(t, v.get("/devices/"+w.dev+"/patches?show=pending"), http.StatusOK, "openssl 3.0.2")

	// Install the approved patches of the device: an install job of openssl and bash.
	inst := v.post("/devices/"+w.dev+"/patches/install", url.Values{"csrf": {v.csrf}})
	if inst.status != http.StatusSeeOther || !strings.HasPrefix(inst.location, "/devices/"+w.dev+"/patches?job=") {
		t.Fatalf("install: %d to %q\n%s", inst.status, inst.location, inst.body)
	}
	jobID := strings.TrimPrefix(inst.location, "/devices/"+w.dev+"/patches?job=")
	var job patches.PatchJobDetail
	w.e.Must(http.StatusOK, w.ten.Org, "GET", "/api/v1/patches/jobs/"+jobID, nil).JSON(t, &job)
	if job.Kind != patches.JobInstall || len(job.Devices) != 1 || len(job.Devices[0].Packages) != 2 {
		t.Fatalf("the install job: %+v", job)
	}
	must(t, v.get(inst.location), http.StatusOK, `id="patch-job"`, "Install", "running", `hx-trigger="every 4s"`)
	must(t, v.get("/patches/jobs/"+jobID), http.StatusOK, "1 queued")
	if _, err := app.Service[*devices.Service](w.e.App).TakeQueued(context.Background(), w.dev); err != nil {
		t.Fatal(err)
	}
	must(t, v.get("/patches/jobs/"+jobID), http.StatusOK, "1 running on their agents")

	// Scan now: a scan job, its panel following it.
	scan := v.post("/devices/"+w.dev+"/patches/scan", url.Values{"csrf": {v.csrf}, "source": {"linux"}})
	if scan.status != http.StatusSeeOther || !strings.Contains(scan.location, "?job=") {
		t.Fatalf("scan: %d to %q\n%s", scan.status, scan.location, scan.body)
	}
	panel := v.do(http.MethodGet, scan.location, nil, map[string]string{"HX-Request": "true", "HX-Target": "patch-job"})
	must(t, panel, http.StatusOK, `id="patch-job"`, "Scan", "running", "On this device:")
	if strings.Contains(panel.body, "<h1>") {
		t.Fatal("the job panel's refresh answers the whole page")
	}
	must(t, v.post("/devices/"+w.dev+"/patches/scan", url.Values{"csrf": {v.csrf}, "source": {"os_vendor_a"}}), http.StatusBadRequest)

	// Nothing approved waits any more (the install is under way, but its patches are still
	// pending): a device without approved patches says what to do.
	other := w.e.InsertDevice(apptest.DeviceRow{PartnerID: w.ten.PartnerID, OrgID: w.ten.OrgID, SiteID: w.ten.SiteID, Hostname: "ws-b"})
	must(t, v.post("/devices/"+other+"/patches/install", url.Values{"csrf": {v.csrf}}), http.StatusBadRequest, "approve the ones to install first")
	must(t, v.get("/devices/"+other+"/patches"), http.StatusOK, "has not been scanned yet")
	must(t, v.get("/devices/"+other), http.StatusOK, "Not scanned yet")

	// The jobs.
	jobs := v.get("/patches/jobs")
	must(t, jobs, http.StatusOK, "<h1>Patch jobs</h1>", `href="/patches/jobs/`+jobID+`"`, `href="/patches/jobs/`+w.scanJob+`"`, "<progress")
	must(t, v.get("/patches/jobs?kind=install"), http.StatusOK, `href="/patches/jobs/`+jobID+`"`)
	must(t, v.get("/patches/jobs?kind=reboot"), http.StatusBadRequest)
	must(t, v.get("/patches/jobs/"+jobID), http.StatusOK, "Install job", "<code>openssl 3.0.2</code>", `<a href="/devices/`+w.dev+`/patches">ws-a</a>`)
	must(t, v.get("/patches/jobs/"+w.scanJob), http.StatusOK, "Scan job", "1 of 1 devices done")
}

// Patch policies: created, changed, turned off and deleted in the console, as the API sees
// them; refused input shown in the editor.
func TestPatchPolicyPages(t *testing.T) {
	w := newPatchWorld(t)
	var group struct {
		ID string `json:"id"`
	}
	w.e.Must(http.StatusCreated, w.ten.Org, "POST", "/api/v1/groups", map[string]any{"orgId": w.ten.OrgID, "name": "Servers",
		"type": "static"}).JSON(t, &group)
	v := newVisitor(t, w.e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)
	must(t, v.get("/patches/policies"), http.StatusOK, "No patch policy yet", `href="/patches/policies/new"`)
	must(t, v.get("/patches/policies/new"), http.StatusOK, `name="schedule.frequency"`, "Servers")

	form := url.Values{"csrf": {v.csrf}, "name": {"Weekly security"}, "enabled": {"true"}, "autoApprove.categories": {"security"},
		"autoApprove.severities": {"critical", "important"}, "deferralDays": {"2"}, "deadlineDays": {""}, "rebootBehavior": {"if_required"},
		"schedule.frequency": {"weekly"}, "schedule.time": {"25:00"}, "schedule.timezone": {"UTC"}, "schedule.daysOfWeek": {"6"},
		"targets.type": {"groups"}, "targets.ids": {group.ID}}
	refused := v.post("/patches/policies", form)
	must(t, refused, http.StatusBadRequest, "Not saved", "HH:MM", `value="Weekly security"`)
	form.Set("deferralDays", "two")
	must(t, v.post("/patches/policies", form), http.StatusBadRequest, "deferralDays is a whole number")
	form.Set("deferralDays", "2")
	form.Set("schedule.time", "02:30")
	created := v.post("/patches/policies", form)
	if created.status != http.StatusSeeOther || !strings.HasPrefix(created.location, "/patches/policies/") {
		t.Fatalf("create: %d to %q\n%s", created.status, created.location, created.body)
	}
	id := strings.TrimPrefix(created.location, "/patches/policies/")
	must(t, v.get(created.location), http.StatusOK, "<h1>Weekly security</h1>", "Weekly on Saturday at 02:30 UTC", "Servers",
		"security patches of severity critical, important")
	must(t, v.get("/patches/policies"), http.StatusOK, `href="/patches/policies/`+id+`"`, "Weekly on Saturday")
	if strings.Contains(v.get("/patches/policies").body, "Theirs") {
		t.Fatal("the policies list shows another partner's policy")
	}
	var pol patches.PatchPolicy
	w.e.Must(http.StatusOK, w.ten.Org, "GET", "/api/v1/patch-policies/"+id, nil).JSON(t, &pol)
	if pol.DeferralDays != 2 || pol.Targets.Type != "groups" || len(pol.Targets.IDs) != 1 || pol.Schedule == nil || pol.Schedule.Time != "02:30" {
		t.Fatalf("the policy created: %+v", pol)
	}

	must(t, v.get("/patches/policies/"+id+"/edit"), http.StatusOK, `value="Weekly security"`, `value="02:30"`)
	form.Set("name", "Monthly everything")
	form.Set("schedule.frequency", "monthly")
	form.Set("schedule.dayOfMonth", "-1")
	form.Set("deadlineDays", "14")
	form.Set("targets.type", "organization")
	must(t, v.post("/patches/policies/"+id, form), http.StatusSeeOther)
	w.e.Must(http.StatusOK, w.ten.Org, "GET", "/api/v1/patch-policies/"+id, nil).JSON(t, &pol)
	if pol.Name != "Monthly everything" || pol.Schedule.Frequency != "monthly" || pol.Schedule.DayOfMonth != -1 ||
		pol.DeadlineDays == nil || *pol.DeadlineDays != 14 || pol.Targets.Type != "organization" {
		t.Fatalf("the policy changed: %+v", pol)
	}
	form.Set("targets.type", "sites")
	must(t, v.post("/patches/policies/"+id, form), http.StatusBadRequest)

	must(t, v.post("/patches/policies/"+id+"/disable", url.Values{"csrf": {v.csrf}}), http.StatusSeeOther)
	w.e.Must(http.StatusOK, w.ten.Org, "GET", "/api/v1/patch-policies/"+id, nil).JSON(t, &pol)
	if pol.Enabled {
		t.Fatal("the policy is still enabled after disabling it")
	}
	must(t, v.get("/patches/policies/"+id), http.StatusOK, ">Enable</button>")
	must(t, v.post("/patches/policies/"+id+"/pause", url.Values{"csrf": {v.csrf}}), http.StatusNotFound)
	must(t, v.post("/patches/policies/"+id+"/delete", url.Values{"csrf": {v.csrf}}), http.StatusSeeOther)
	w.e.Must(http.StatusNotFound, w.ten.Org, "GET", "/api/v1/patch-policies/"+id, nil)
}

// Every patch page and action naming another organization's device, patch, job or policy
// answers as for a missing one, and changes nothing.
func TestPatchForeignIDsAreNotFound(t *testing.T) {
	w := newPatchWorld(t)
	v := newVisitor(t, w.e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)
	const missing = "00000000-0000-4000-8000-000000000000"
	same := func(what string, foreignPage, missingPage page) {
		t.Helper()
		if foreignPage.status != http.StatusNotFound || foreignPage.status != missingPage.status ||
			strip(foreignPage.body) != strip(missingPage.body) {
			t.Fatalf("%s: another organization's answers %d, a missing one %d\n%s", what, foreignPage.status, missingPage.status,
				foreignPage.body)
		}
	}
	form := func() url.Values { return url.Values{"csrf": {v.csrf}} }
	mine := w.ids["openssl"]
	same("a device's patches", v.get("/devices/"+w.foreign+"/patches"), v.get("/devices/"+missing+"/patches"))
	same("a scan", v.post("/devices/"+w.foreign+"/patches/scan", form()), v.post("/devices/"+missing+"/patches/scan", form()))
	same("an install", v.post("/devices/"+w.foreign+"/patches/install", form()), v.post("/devices/"+missing+"/patches/install", form()))
	same("a decision on the device", v.post("/devices/"+w.foreign+"/patches/"+mine+"/approve", form()),
		v.post("/devices/"+missing+"/patches/"+mine+"/approve", form()))
	same("a decision on the patch", v.post("/devices/"+w.dev+"/patches/"+w.foreignPatch+"/decline", form()),
		v.post("/devices/"+w.dev+"/patches/"+missing+"/decline", form()))
	same("a patch's page", v.get("/patches/"+w.foreignPatch), v.get("/patches/"+missing))
	for _, action := range []string{"approve", "decline"} {
		same(action, v.post("/patches/"+w.foreignPatch+"/"+action, form()), v.post("/patches/"+missing+"/"+action, form()))
	}
	later := url.Values{"csrf": {v.csrf}, "until": {time.Now().UTC().AddDate(0, 0, 3).Format(time.DateOnly)}}
	same("defer", v.post("/patches/"+w.foreignPatch+"/defer", later), v.post("/patches/"+missing+"/defer", later))
	same("a job's page", v.get("/patches/jobs/"+w.foreignJob), v.get("/patches/jobs/"+missing))
	same("a job on the device's page", v.get("/devices/"+w.dev+"/patches?job="+w.foreignJob), v.get("/devices/"+w.dev+"/patches?job="+missing))
	same("a policy's page", v.get("/patches/policies/"+w.foreignPolicy), v.get("/patches/policies/"+missing))
	same("a policy's editor", v.get("/patches/policies/"+w.foreignPolicy+"/edit"), v.get("/patches/policies/"+missing+"/edit"))
	edit := url.Values{"csrf": {v.csrf}, "name": {"Mine now"}, "schedule.frequency": {"daily"}, "schedule.time": {"01:00"},
		"targets.type": {"organization"}}
	same("a policy's change", v.post("/patches/policies/"+w.foreignPolicy, edit), v.post("/patches/policies/"+missing, edit))
	for _, action := range []string{"disable", "delete"} {
		same("a policy's "+action, v.post("/patches/policies/"+w.foreignPolicy+"/"+action, form()),
			v.post("/patches/policies/"+missing+"/"+action, form()))
	}

	if got := w.decision(t, w.other, w.foreignPatch); got != patches.ApprovalPending {
		t.Fatalf("another partner's patch is %s", got)
	}
	var pol patches.PatchPolicy
	w.e.Must(http.StatusOK, w.other.Org, "GET", "/api/v1/patch-policies/"+w.foreignPolicy, nil).JSON(t, &pol)
	if pol.Name != "Theirs" || !pol.Enabled {
		t.Fatalf("another partner's policy changed: %+v", pol)
	}
	var jobs struct{ Data []patches.PatchJob }
	w.e.Must(http.StatusOK, w.other.Org, "GET", "/api/v1/patches/jobs", nil).JSON(t, &jobs)
	if len(jobs.Data) != 1 {
		t.Fatalf("another organization's device got %d patch jobs, want its own scan only", len(jobs.Data))
	}
	if p := v.get("/patches/jobs"); strings.Contains(p.body, w.foreignJob) {
		t.Fatal("the jobs list shows another organization's job")
	}
}

// A decision without the session's CSRF token is refused and changes nothing.
func TestPatchDecisionNeedsCSRF(t *testing.T) {
	w := newPatchWorld(t)
	v := newVisitor(t, w.e)
	v.signIn("acme-org@gale.test", apptest.UserPassword)
	id := w.ids["openssl"]
	must(t, v.post("/patches/"+id+"/approve", url.Values{}), http.StatusForbidden, "security token")
	must(t, v.post("/devices/"+w.dev+"/patches/"+id+"/approve", url.Values{"csrf": {strings.Repeat("0", 64)}}), http.StatusForbidden)
	must(t, v.post("/devices/"+w.dev+"/patches/scan", url.Values{}), http.StatusForbidden)
	if got := w.decision(t, w.ten, id); got != patches.ApprovalPending {
		t.Fatalf("a request without a valid token changed the patch to %s", got)
	}
	m := regexp.MustCompile(`action="/patches/` + id + `/approve"`).FindString(v.get("/patches/" + id).body)
	if m == "" {
		t.Fatal("the patch's page offers no approval")
	}
	must(t, v.post("/patches/"+id+"/approve", url.Values{"csrf": {v.csrf}}), http.StatusSeeOther)
	if got := w.decision(t, w.ten, id); got != patches.ApprovalApproved {
		t.Fatalf("the patch is %s after approving it with the token", got)
	}
}
