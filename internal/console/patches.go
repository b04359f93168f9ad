package console

import (
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"gale/internal/domains/patches"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// patchPageSize is the page of the patch lists.
const patchPageSize = 50

// maxBulkPatches is how many patches one bulk action of the console takes.
const maxBulkPatches = 100

// patchOrg is the organization whose decisions the patch pages show and take: an
// organization user's own, else the one the switcher chose; "" for the partner's decisions,
// which apply to every organization without one of its own.
func (c *Console) patchOrg(r *http.Request) string {
	if s := access.PrincipalFrom(r.Context()).Scope; s.Level == access.LevelOrganization {
		return s.OrgID
	}
	return c.currentOrg(r)
}

// Choices of the patch list's filters, as the API's list-patches takes them.
var (
	patchApprovals  = []string{patches.ApprovalPending, patches.ApprovalApproved, patches.ApprovalDeclined, patches.ApprovalDeferred}
	patchSeverities = []string{patches.SeverityCritical, patches.SeverityImportant, patches.SeverityModerate, patches.SeverityLow,
		patches.SeverityUnknown}
	patchCategories = []string{patches.CategorySecurity, patches.CategoryBugfix, patches.CategoryFeature, patches.CategoryOther}
)

// patchListPage is the fleet's patches awaiting (or past) a decision.
type patchListPage struct {
	Patches                                    []patches.Patch
	Status, Severity, Source, Category, Search string
	Next, Self                                 string
	// Org is the organization the decisions are taken for ("" the partner's).
	Org       string
	CanDecide bool
	// Compliance is the patch state of the devices in view; nil when the user may not read it.
	Compliance                                 *patches.PatchCompliance
	Approvals, Severities, Sources, Categories []string
}

// oneOf checks a filter's value: empty, or one of the choices.
func oneOf(field, value string, choices []string) error {
	if value != "" && !slices.Contains(choices, value) {
		return apperr.Invalid(field, field+" is one of "+strings.Join(choices, ", "))
	}
	return nil
}

func (c *Console) patchList(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "list-patches"); err != nil {
		return err
	}
	in := r.URL.Query()
	pg := patchListPage{Status: in.Get("status"), Severity: in.Get("severity"), Source: in.Get("source"), Category: in.Get("category"),
		Search: strings.TrimSpace(in.Get("q")), Self: r.URL.RequestURI(), Org: c.patchOrg(r),
		CanDecide: c.HTTP.Permits(ctx, "approve-patch") && c.HTTP.Permits(ctx, "decline-patch"),
		Approvals: patchApprovals, Severities: patchSeverities, Sources: patches.Sources, Categories: patchCategories}
	for _, f := range []struct {
		field, value string
		choices      []string
	}{{"status", pg.Status, patchApprovals}, {"severity", pg.Severity, patchSeverities}, {"source", pg.Source, patches.Sources},
		{"category", pg.Category, patchCategories}} {
		if err := oneOf(f.field, f.value, f.choices); err != nil {
			return err
		}
	}
	if utf8.RuneCountInString(pg.Search) > 200 {
		return apperr.Invalid("q", "search for at most 200 characters")
	}
	list, next, _, err := c.Patches.ListPatches(ctx, patches.PatchFilter{Source: pg.Source, Severity: pg.Severity, Category: pg.Category,
		Status: pg.Status, Search: pg.Search, OrgID: pg.Org}, store.Page{Limit: patchPageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	pg.Patches, pg.Next = list, nextPage(r, next)
	if targeted(r, "patch-table") == "" && c.HTTP.Permits(ctx, "get-patch-compliance") {
		site := ""
		if pg.Org == c.currentOrg(r) {
			site = c.currentSite(r)
		}
		comp, err := c.Patches.Compliance(ctx, pg.Org, site)
		if err != nil {
			return err
		}
		pg.Compliance = &comp
	}
	return c.render(w, r, http.StatusOK, "patches", targeted(r, "patch-table"), view{Title: "Patches", Section: "patches", Data: pg})
}

// patchBulkOutcome is the notice of a bulk decision.
type patchBulkOutcome struct {
	Action                string
	Done, Changed, Absent int
}

// patchBulk approves (as the API's bulk-approve does) or declines (each as the API's decline)
// the selected patches, for the organization in view or the partner; the list then refreshes
// itself.
func (c *Console) patchBulk(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := r.ParseForm(); err != nil {
		return apperr.Invalid("form", "the form could not be read")
	}
	action := r.PostForm.Get("action")
	op, ok := map[string]string{"approve": "bulk-approve-patches", "decline": "decline-patch"}[action]
	if !ok {
		return apperr.Invalid("action", "approve or decline the selected patches")
	}
	if err := c.allow(ctx, op); err != nil {
		return err
	}
	ids := r.PostForm["ids"]
	if len(ids) == 0 {
		return apperr.Invalid("ids", "select the patches first")
	}
	if len(ids) > maxBulkPatches {
		return apperr.Invalid("ids", "select at most 100 patches at a time")
	}
	org := c.patchOrg(r)
	out := patchBulkOutcome{Action: action}
	count := func(err error) error {
		ae, ok := apperr.As(err)
		switch {
		case err == nil:
			out.Done++
		case ok && ae.Kind == apperr.KindConflict:
			out.Changed++
		case ok && ae.Kind == apperr.KindNotFound:
			out.Absent++
		default:
			return err
		}
		return nil
	}
	if action == "approve" {
		res, err := c.Patches.BulkApprove(ctx, patches.PatchBulkApproval{PatchIDs: ids, OrgID: org})
		if err != nil {
			return err
		}
		for _, it := range res {
			switch {
			case it.Status == patches.ApprovalApproved:
				out.Done++
			case it.Code != nil && *it.Code == apperr.CodeNotFound:
				out.Absent++
			default:
				out.Changed++
			}
		}
	} else {
		for _, id := range ids {
			_, err := c.Patches.Decide(ctx, id, patches.ApprovalDeclined, "", org, nil)
			if err := count(err); err != nil {
				return err
			}
		}
	}
	toNotice(w)
	return c.render(w, r, http.StatusOK, "patches", "patch-bulk-outcome", view{Data: out})
}

// patchDeviceTabs are the device lists of a patch's page: the devices that need it (it is
// pending, missing or failed there) by default.
var patchDeviceTabs = map[string][]string{
	"":          {patches.DeviceStatePending, patches.DeviceStateMissing, patches.DeviceStateFailed},
	"installed": {patches.DeviceStateInstalled},
	"all":       nil,
}

// patchPage is a patch: what it is, the decisions on it, and the devices in view it was
// offered to.
type patchPage struct {
	Patch     patches.Patch
	Decisions []patches.PatchApproval
	Devices   []patches.PatchDevice
	Show      string
	Next      string
	Org       string
	CanDecide bool
	// Tomorrow is the earliest day a deferral may name.
	Tomorrow string
}

func (c *Console) patchDetail(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "get-patch"); err != nil {
		return err
	}
	in := r.URL.Query()
	pg := patchPage{Show: in.Get("show"), Org: c.patchOrg(r), CanDecide: c.HTTP.Permits(ctx, "approve-patch"),
		Tomorrow: c.clock.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)}
	states, ok := patchDeviceTabs[pg.Show]
	if !ok {
		return apperr.Invalid("show", "show the devices that need the patch, installed, or all")
	}
	p, err := c.Patches.GetPatchIn(ctx, r.PathValue("id"), pg.Org)
	if err != nil {
		return err
	}
	pg.Patch = p
	if c.HTTP.Permits(ctx, "list-patch-approvals") {
		if pg.Decisions, _, _, err = c.Patches.ListApprovals(ctx, patches.ApprovalFilter{PatchID: p.ID}, store.Page{Limit: patchPageSize}); err != nil {
			return err
		}
	}
	list, next, _, err := c.Patches.PatchDevices(ctx, p.ID, states, store.Page{Limit: patchPageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	pg.Devices, pg.Next = list, nextPage(r, next)
	return c.render(w, r, http.StatusOK, "patch", "", view{Title: p.Title, Section: "patches", Data: pg})
}

// patchDecisions are a patch's decisions and the API operations whose rules they follow.
var patchDecisions = map[string]struct{ op, status string }{
	"approve": {"approve-patch", patches.ApprovalApproved},
	"decline": {"decline-patch", patches.ApprovalDeclined},
	"defer":   {"defer-patch", patches.ApprovalDeferred},
}

// patchDecide approves, declines or defers a patch for the organization in view (or the
// partner), then shows its page again.
func (c *Console) patchDecide(w http.ResponseWriter, r *http.Request) error {
	d, ok := patchDecisions[r.PathValue("action")]
	if !ok {
		return apperr.NotFound("page")
	}
	if err := c.allow(r.Context(), d.op); err != nil {
		return err
	}
	var until *time.Time
	if d.status == patches.ApprovalDeferred {
		day, err := time.Parse(time.DateOnly, r.PostFormValue("until"))
		if err != nil {
			return apperr.Invalid("until", "until is a date, such as 2030-01-31")
		}
		until = &day
	}
	note := strings.TrimSpace(r.PostFormValue("note"))
	if utf8.RuneCountInString(note) > 1000 {
		return apperr.Invalid("note", "a note of at most 1000 characters")
	}
	ap, err := c.Patches.Decide(r.Context(), r.PathValue("id"), d.status, note, c.patchOrg(r), until)
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/patches/"+ap.PatchID, http.StatusSeeOther)
	return nil
}

// devicePatchTabs are the lists of a device's patches page.
var devicePatchTabs = map[string][]string{
	"":          nil,
	"pending":   {patches.DeviceStatePending, patches.DeviceStateMissing},
	"failed":    {patches.DeviceStateFailed},
	"installed": {patches.DeviceStateInstalled},
}

// devicePatchesPage is a device's patches, what its last scan said, and the job it was sent
// from this page, followed until it ends.
type devicePatchesPage struct {
	DeviceID, Device, OrgID string
	Linux                   bool
	Summary                 patches.PatchDeviceSummary
	Patches                 []patches.DevicePatch
	Show, Next              string
	// Job is the scan or install the page started (?job=); JobDevice is this device's work in it.
	Job       *patches.PatchJobDetail
	JobDevice *patches.PatchJobDevice
	// JobURL is the address the job's panel fetches itself from while the job runs.
	JobURL                         string
	CanScan, CanDecide, CanInstall bool
}

func (c *Console) devicePatches(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "list-patches"); err != nil {
		return err
	}
	in := r.URL.Query()
	states, ok := devicePatchTabs[in.Get("show")]
	if !ok {
		return apperr.Invalid("show", "show all, pending, failed or installed patches")
	}
	d, err := c.Devices.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := devicePatchesPage{DeviceID: d.ID, Device: d.Name(), OrgID: d.OrgID, Linux: d.OSType == "linux", Show: in.Get("show"),
		CanScan: c.HTTP.Permits(ctx, "scan-patches"), CanInstall: c.HTTP.Permits(ctx, installOperation),
		CanDecide: c.HTTP.Permits(ctx, "approve-patch") && c.HTTP.Permits(ctx, "decline-patch"), JobURL: r.URL.RequestURI()}
	if job := in.Get("job"); job != "" {
		if err := c.allow(ctx, "get-patch-job"); err != nil {
			return err
		}
		j, err := c.Patches.GetJob(ctx, job)
		if err != nil {
			return err
		}
		pg.Job = &j
		for i := range j.Devices {
			if j.Devices[i].DeviceID == d.ID {
				pg.JobDevice = &j.Devices[i]
			}
		}
	}
	if fragment := targeted(r, "patch-job"); fragment != "" {
		return c.render(w, r, http.StatusOK, "device-patches", fragment, view{Data: pg})
	}
	if pg.Summary, err = c.Patches.DeviceSummary(ctx, d.ID); err != nil {
		return err
	}
	list, next, _, err := c.Patches.DevicePatches(ctx, d.ID, patches.DevicePatchFilter{States: states},
		store.Page{Limit: patchPageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	pg.Patches, pg.Next = list, nextPage(r, next)
	return c.render(w, r, http.StatusOK, "device-patches", "", view{Title: "Patches · " + pg.Device, Section: "devices", Data: pg})
}

// devicePatchScan starts a scan of the device (its agent's package manager, or its reported
// software against the third-party catalog) and shows the job on the device's patches page.
func (c *Console) devicePatchScan(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "scan-patches"); err != nil {
		return err
	}
	source := r.PostFormValue("source")
	if err := oneOf("source", source, []string{patches.SourceLinux, patches.SourceThirdParty}); err != nil {
		return err
	}
	d, err := c.Devices.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	js, err := c.Patches.Scan(ctx, patches.PatchScanRequest{DeviceIDs: []string{d.ID}, Source: source})
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/devices/"+d.ID+"/patches?job="+js.ID, http.StatusSeeOther)
	return nil
}

// installOperation is the API operation whose rules an install from the console follows. The
// API installs through rollouts, policies and remediation, and has no route of its own that
// installs on chosen devices; a rollback is the operation that puts packages on chosen
// devices through a patch job (patches:execute), as an install does.
const installOperation = "rollback-patch"

// devicePatchInstall installs on the device the approved patches that wait there (pending or
// failed), in a patch job as every install is, and shows the job.
func (c *Console) devicePatchInstall(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, installOperation); err != nil {
		return err
	}
	d, err := c.Devices.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	open, _, _, err := c.Patches.DevicePatches(ctx, d.ID, patches.DevicePatchFilter{States: []string{patches.DeviceStatePending,
		patches.DeviceStateFailed}}, store.Page{Limit: patches.MaxBulkApprove})
	if err != nil {
		return err
	}
	var ids []string
	for _, p := range open {
		if p.PatchApproval == patches.ApprovalApproved {
			ids = append(ids, p.ID)
		}
	}
	if len(ids) == 0 {
		return apperr.Invalid("patches", "no approved patch waits on this device: approve the ones to install first")
	}
	job, err := c.Patches.Install(ctx, []string{d.ID}, ids, patches.InstallOptions{})
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/devices/"+d.ID+"/patches?job="+job.ID, http.StatusSeeOther)
	return nil
}

// devicePatchDecide approves or declines a patch for the device's organization, then shows
// the device's patches again.
func (c *Console) devicePatchDecide(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	action := r.PathValue("action")
	if action != "approve" && action != "decline" {
		return apperr.NotFound("page")
	}
	d := patchDecisions[action]
	if err := c.allow(ctx, d.op); err != nil {
		return err
	}
	dev, err := c.Devices.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	if _, err := c.Patches.Decide(ctx, r.PathValue("patch"), d.status, "", dev.OrgID, nil); err != nil {
		return err
	}
	back := "/devices/" + dev.ID + "/patches"
	if show := r.PostFormValue("show"); show != "" {
		if _, ok := devicePatchTabs[show]; ok {
			back += "?show=" + show
		}
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
	return nil
}

// devicePatchFact is the Patches line of a device's overview.
type devicePatchFact struct {
	Summary patches.PatchDeviceSummary
}

// devicePatchFact reads the device's patch summary when the user may read patches; nil else.
func (c *Console) devicePatchFact(r *http.Request, deviceID string) (*devicePatchFact, error) {
	if !c.HTTP.Permits(r.Context(), "list-patches") {
		return nil, nil
	}
	s, err := c.Patches.DeviceSummary(r.Context(), deviceID)
	if err != nil {
		return nil, err
	}
	return &devicePatchFact{Summary: s}, nil
}

// patchJobRow is a job of the list, its progress made ready.
type patchJobRow struct {
	patches.PatchJob
	// Done counts the devices whose work ended (completed or failed).
	Done int
}

func jobRow(j patches.PatchJob) patchJobRow {
	return patchJobRow{PatchJob: j, Done: j.Totals.Completed + j.Totals.Failed}
}

// patchJobsPage is the list of recent scans, installs and rollbacks.
type patchJobsPage struct {
	Jobs         []patchJobRow
	Kind, Status string
	Next         string
}

func (c *Console) patchJobs(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "list-patch-jobs"); err != nil {
		return err
	}
	in := r.URL.Query()
	pg := patchJobsPage{Kind: in.Get("kind"), Status: in.Get("status")}
	if err := oneOf("kind", pg.Kind, []string{patches.JobScan, patches.JobInstall, patches.JobRollback}); err != nil {
		return err
	}
	if err := oneOf("status", pg.Status, []string{patches.JobRunning, patches.JobCompleted, patches.JobFailed}); err != nil {
		return err
	}
	list, next, _, err := c.Patches.ListJobs(r.Context(), patches.JobFilter{Kind: pg.Kind, Status: pg.Status},
		store.Page{Limit: patchPageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	for _, j := range list {
		pg.Jobs = append(pg.Jobs, jobRow(j))
	}
	pg.Next = nextPage(r, next)
	return c.render(w, r, http.StatusOK, "patch-jobs", "", view{Title: "Patch jobs", Section: "patches", Data: pg})
}

// patchJobPage is one job with its devices.
type patchJobPage struct {
	Job     patches.PatchJobDetail
	Done    int
	Running bool
	// Names are the job's devices' names by ID.
	Names map[string]string
}

func (c *Console) patchJob(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "get-patch-job"); err != nil {
		return err
	}
	j, err := c.Patches.GetJob(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := patchJobPage{Job: j, Done: j.Totals.Completed + j.Totals.Failed, Running: j.Status == patches.JobRunning}
	if targeted(r, "job-progress") == "" {
		ids := make([]string, len(j.Devices))
		for i, d := range j.Devices {
			ids[i] = d.DeviceID
		}
		pg.Names = c.deviceNames(r.Context(), ids)
	}
	return c.render(w, r, http.StatusOK, "patch-job", targeted(r, "job-progress"), view{Title: "Patch job", Section: "patches", Data: pg})
}
