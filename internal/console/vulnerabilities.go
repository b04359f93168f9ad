package console

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gale/internal/domains/vulnerabilities"
	"gale/internal/platform/access"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
)

// vulnPageSize is the page of the vulnerability lists.
const vulnPageSize = 50

// findingActions are the actions on a finding and the API operations whose rules they follow.
var findingActions = map[string]string{"accept-risk": "accept-vulnerability-risk", "mitigate": "mitigate-vulnerability",
	"reopen": "reopen-vulnerability"}

// vulnSeverities are the severities the lists filter by, worst first.
var vulnSeverities = []string{vulnerabilities.SeverityCritical, vulnerabilities.SeverityHigh, vulnerabilities.SeverityMedium,
	vulnerabilities.SeverityLow, vulnerabilities.SeverityUnknown}

// findingStatuses are the statuses the lists filter by.
var findingStatuses = []string{vulnerabilities.StatusOpen, vulnerabilities.StatusAccepted, vulnerabilities.StatusMitigated,
	vulnerabilities.StatusPatched}

// vulnListPage is the fleet's CVEs, worst first.
type vulnListPage struct {
	CVEs                     []cveRow
	Stats                    *vulnerabilities.VulnStats
	Severity, Status, Search string
	Severities, Statuses     []string
	Next                     string
	query                    url.Values
}

// Link is the list's address with one filter changed (and the first page).
func (p vulnListPage) Link(key, value string) string {
	q := url.Values{}
	for k, v := range p.query {
		q[k] = v
	}
	q.Del("cursor")
	if value == "" {
		q.Del(key)
	} else {
		q.Set(key, value)
	}
	if len(q) == 0 {
		return "/vulnerabilities"
	}
	return "/vulnerabilities?" + q.Encode()
}

func (c *Console) vulnerabilityList(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "list-vulnerabilities"); err != nil {
		return err
	}
	in := r.URL.Query()
	pg := vulnListPage{Severity: in.Get("severity"), Status: in.Get("status"), Search: strings.TrimSpace(in.Get("q")),
		Severities: vulnSeverities, Statuses: findingStatuses, query: url.Values{}}
	if pg.Severity != "" && !slices.Contains(vulnSeverities, pg.Severity) {
		return apperr.Invalid("severity", "critical, high, medium, low or unknown")
	}
	if pg.Status == "" {
		pg.Status = vulnerabilities.StatusOpen
	}
	if !slices.Contains(findingStatuses, pg.Status) {
		return apperr.Invalid("status", "open, accepted, mitigated or patched")
	}
	if utf8.RuneCountInString(pg.Search) > 200 {
		return apperr.Invalid("q", "search for at most 200 characters")
	}
	for k, v := range map[string]string{"severity": pg.Severity, "status": in.Get("status"), "q": pg.Search} {
		if v != "" {
			pg.query.Set(k, v)
		}
	}
	org := c.currentOrg(r)
	list, next, _, err := c.Vulnerabilities.List(ctx, vulnerabilities.ListFilter{OrgID: org, Severity: pg.Severity, Status: pg.Status,
		Search: pg.Search}, store.Page{Limit: vulnPageSize, Cursor: in.Get("cursor")})
	if err != nil {
		return err
	}
	for _, v := range list {
		pg.CVEs = append(pg.CVEs, cveRow{VulnCVE: v, CVSS: score(v.CVSSScore)})
	}
	pg.Next = nextPage(r, next)
	if c.HTTP.Permits(ctx, "get-vulnerability-stats") {
		st, err := c.Vulnerabilities.Stats(ctx, org)
		if err != nil {
			return err
		}
		pg.Stats = &st
	}
	return c.render(w, r, http.StatusOK, "vulnerabilities", "", view{Title: "Vulnerabilities", Section: "vulnerabilities", Data: pg})
}

// cveRow is a CVE with its scores written out.
type cveRow struct {
	vulnerabilities.VulnCVE
	CVSS, EPSS string
}

// score writes a CVSS score; "" for none.
func score(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v, 'f', 1, 64)
}

// percent writes a probability (EPSS) as a percentage; "" for none.
func percent(v *float64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatFloat(*v*100, 'f', 1, 64) + "%"
}

// vulnPage is the data of vulnerability.html: a CVE's page or a device's findings, one of the
// two set.
type vulnPage struct {
	CVE    *cvePage
	Device *deviceFindingsPage
}

// cvePage is a CVE with its findings in scope.
type cvePage struct {
	CVE      cveRow
	Findings []findingRow
	// Status filters the findings ("" for every status but patched).
	Status   string
	Statuses []string
	Next     string
	// CanRemediate offers to install the patches that fix the CVE's findings.
	CanRemediate bool
	// Outcome is the answer of a remediation just asked for.
	Outcome *vulnerabilities.VulnRemediation
}

// deviceFindingsPage is a device's findings.
type deviceFindingsPage struct {
	DeviceID, Device string
	Findings         []findingRow
	Status           string
	Statuses         []string
	Next             string
}

// findingRow is a finding with the actions offered on it; Back is where its forms return.
type findingRow struct {
	Finding vulnerabilities.VulnFinding
	// OnCVE rows name their device (DeviceName "" for one out of reach); the others their CVE.
	OnCVE                    bool
	DeviceName               string
	Accept, Mitigate, Reopen bool
	Back                     string
	// MinUntil is the first day an acceptance may last through (today).
	MinUntil string
	CVSS     string
	// CSRF is the session's token, for the row's forms.
	CSRF string
}

// findingRows makes the rows of findings, with the actions the user may take on each.
func (c *Console) findingRows(ctx context.Context, list []vulnerabilities.VulnFinding, onCVE bool, back string) ([]findingRow, error) {
	canAccept, canMitigate, canReopen := c.HTTP.Permits(ctx, "accept-vulnerability-risk"), c.HTTP.Permits(ctx, "mitigate-vulnerability"),
		c.HTTP.Permits(ctx, "reopen-vulnerability")
	var names map[string]string
	if onCVE {
		ids := make([]string, len(list))
		for i, f := range list {
			ids[i] = f.DeviceID
		}
		names = c.deviceNames(ctx, ids)
	}
	today := c.clock.Now().UTC().Format(time.DateOnly)
	token := c.csrfToken(access.PrincipalFrom(ctx))
	rows := make([]findingRow, len(list))
	for i, f := range list {
		open, decided := f.Status == vulnerabilities.StatusOpen, f.Status == vulnerabilities.StatusAccepted || f.Status == vulnerabilities.StatusMitigated
		rows[i] = findingRow{Finding: f, OnCVE: onCVE, DeviceName: names[f.DeviceID], Accept: canAccept && open, Mitigate: canMitigate && open,
			Reopen: canReopen && decided, Back: back, MinUntil: today, CVSS: score(f.CVSSScore), CSRF: token}
	}
	return rows, nil
}

// findingStatusFilter reads the status filter of a findings list: "" for every status but
// patched.
func findingStatusFilter(r *http.Request) (string, error) {
	status := r.URL.Query().Get("status")
	if status != "" && !slices.Contains(findingStatuses, status) {
		return "", apperr.Invalid("status", "open, accepted, mitigated or patched")
	}
	return status, nil
}

// vulnerabilityDetail is a CVE's page: what it is and the devices it affects in scope.
func (c *Console) vulnerabilityDetail(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "list-vulnerability-devices"); err != nil {
		return err
	}
	pg, err := c.cvePage(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.render(w, r, http.StatusOK, "vulnerability", "", view{Title: pg.CVE.CVEID, Section: "vulnerabilities", Data: vulnPage{CVE: pg}})
}

func (c *Console) cvePage(r *http.Request, cve string) (*cvePage, error) {
	ctx := r.Context()
	status, err := findingStatusFilter(r)
	if err != nil {
		return nil, err
	}
	v, err := c.Vulnerabilities.CVE(ctx, cve)
	if err != nil {
		return nil, err
	}
	pg := &cvePage{CVE: cveRow{VulnCVE: v, CVSS: score(v.CVSSScore), EPSS: percent(v.EPSSScore)}, Status: status, Statuses: findingStatuses, CanRemediate: c.HTTP.Permits(ctx, "remediate-vulnerabilities")}
	cursor := ""
	if r.Method == http.MethodGet {
		cursor = r.URL.Query().Get("cursor")
	}
	list, next, _, err := c.Vulnerabilities.CVEDevices(ctx, v.CVEID, status, store.Page{Limit: vulnPageSize, Cursor: cursor})
	if err != nil {
		return nil, err
	}
	self := "/vulnerabilities/" + url.PathEscape(v.CVEID)
	if status != "" {
		self += "?status=" + status
	}
	if pg.Findings, err = c.findingRows(ctx, list, true, self); err != nil {
		return nil, err
	}
	if next != "" {
		pg.Next = "/vulnerabilities/" + url.PathEscape(v.CVEID) + "?" + url.Values{"status": {status}, "cursor": {next}}.Encode()
	}
	return pg, nil
}

// deviceVulnerabilities is a device's findings, worst first.
func (c *Console) deviceVulnerabilities(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "list-vulnerabilities"); err != nil {
		return err
	}
	d, err := c.Devices.Get(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	status, err := findingStatusFilter(r)
	if err != nil {
		return err
	}
	pg := &deviceFindingsPage{DeviceID: d.ID, Device: d.Name(), Status: status, Statuses: findingStatuses}
	list, next, _, err := c.Vulnerabilities.DeviceFindings(ctx, d.ID, status, store.Page{Limit: vulnPageSize, Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		return err
	}
	self := "/devices/" + d.ID + "/vulnerabilities"
	if status != "" {
		self += "?status=" + status
	}
	if pg.Findings, err = c.findingRows(ctx, list, false, self); err != nil {
		return err
	}
	pg.Next = nextPage(r, next)
	return c.render(w, r, http.StatusOK, "vulnerability", "", view{Title: "Vulnerabilities · " + pg.Device, Section: "devices",
		Data: vulnPage{Device: pg}})
}

// findingAct accepts the risk of a finding, records its mitigation or reopens it, as POST
// /vulnerabilities/{id}/{action} of the API, then goes back to the page of the form.
func (c *Console) findingAct(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	action := r.PathValue("action")
	op, ok := findingActions[action]
	if !ok {
		return apperr.Invalid("action", "accept the risk of a finding, record its mitigation or reopen it")
	}
	if err := c.allow(ctx, op); err != nil {
		return err
	}
	id, note := r.PathValue("id"), strings.TrimSpace(r.PostFormValue("note"))
	var f vulnerabilities.VulnFinding
	var err error
	switch action {
	case "accept-risk":
		in := vulnerabilities.VulnAcceptRisk{Note: note}
		if day := strings.TrimSpace(r.PostFormValue("acceptedUntil")); day != "" {
			t, perr := time.Parse(time.DateOnly, day)
			if perr != nil {
				return apperr.Invalid("acceptedUntil", "a day as YYYY-MM-DD")
			}
			// The acceptance lasts through the day chosen (UTC).
			end := t.AddDate(0, 0, 1)
			in.AcceptedUntil = &end
		}
		f, err = c.Vulnerabilities.AcceptRisk(ctx, id, in)
	case "mitigate":
		f, err = c.Vulnerabilities.Mitigate(ctx, id, vulnerabilities.VulnMitigate{Note: note})
	default:
		f, err = c.Vulnerabilities.Reopen(ctx, id)
	}
	if err != nil {
		return err
	}
	back := "/vulnerabilities/" + url.PathEscape(f.CVEID)
	if next := r.PostFormValue("next"); next != "" {
		back = safeNext(next)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
	return nil
}

// remediateCVE schedules, as POST /vulnerabilities/remediate, the pending patches that fix a
// CVE's findings on the devices it affects, and shows the CVE's page with the job.
func (c *Console) remediateCVE(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := c.allow(ctx, "remediate-vulnerabilities"); err != nil {
		return err
	}
	cve := strings.TrimSpace(r.PostFormValue("cveId"))
	if cve == "" {
		return apperr.Invalid("cveId", "name the CVE whose findings to remediate")
	}
	// The CVE must have findings in scope: another organization's is not found.
	if _, err := c.Vulnerabilities.CVE(ctx, cve); err != nil {
		return err
	}
	out, err := c.Vulnerabilities.Remediate(ctx, vulnerabilities.VulnRemediate{CVEIDs: []string{strings.ToUpper(cve)},
		Approve: r.PostFormValue("approve") != ""})
	if err != nil {
		return err
	}
	pg, err := c.cvePage(r, cve)
	if err != nil {
		return err
	}
	pg.Outcome = &out
	return c.render(w, r, http.StatusAccepted, "vulnerability", "", view{Title: pg.CVE.CVEID, Section: "vulnerabilities",
		Data: vulnPage{CVE: pg}})
}
