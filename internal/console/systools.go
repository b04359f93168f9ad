package console

import (
	"cmp"
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gale/internal/domains/devices"
	"gale/internal/domains/systemtools"
	"gale/internal/platform/apperr"
	"gale/internal/platform/httpapi"
	"gale/internal/wire/agentproto"
)

// toolTabs is the tab row of a device's system-tool pages.
type toolTabs struct {
	DeviceID, Current string
	// Files tells whether the user may browse the device's files.
	Files bool
}

func (c *Console) toolTabs(ctx context.Context, deviceID, current string) toolTabs {
	return toolTabs{DeviceID: deviceID, Current: current, Files: c.HTTP.Permits(ctx, "list-or-read-device-files")}
}

// toolPage is what every system-tool page shows around its tool: the device, the tabs, and
// the device's answer when it was an error.
type toolPage struct {
	DeviceID, Device string
	Tabs             toolTabs
	Error            *toolError
}

// toolError is the API's answer to a tool's request that failed (the agent is not connected,
// did not answer, refused), shown in the page, which keeps its tabs and breadcrumbs.
type toolError struct {
	Heading, Message string
	Details          []apperr.Detail
	// Code is the API's error code (AGENT_OFFLINE, VALIDATION_ERROR...).
	Code string
}

func (c *Console) toolPage(ctx context.Context, d devices.Device, tab string) toolPage {
	return toolPage{DeviceID: d.ID, Device: d.Name(), Tabs: c.toolTabs(ctx, d.ID, tab)}
}

// toolFailure is err as a page shows it in place of its tool, with the status to answer; ok
// is false for an error that is no answer of the device's (the page fails as a whole then).
func toolFailure(err error) (te *toolError, status int, ok bool) {
	ae, isApp := apperr.As(err)
	if !isApp {
		return nil, 0, false
	}
	switch ae.Kind {
	case apperr.KindInternal, apperr.KindUnauthenticated, apperr.KindForbidden, apperr.KindRateLimited:
		return nil, 0, false
	}
	te = &toolError{Message: ae.Message, Details: ae.Details, Code: ae.Code}
	switch ae.Kind {
	case apperr.KindUnavailable:
		te.Heading = "The device's agent is not connected"
	case apperr.KindTimeout:
		te.Heading = "The device did not answer in time"
	case apperr.KindUpstream:
		te.Heading = "It failed on the device"
	case apperr.KindNotFound:
		te.Heading = "Not found on the device"
	default:
		te.Heading = "The device refused"
	}
	return te, httpapi.StatusOf(ae), true
}

// renderTool renders a tool page, or, when err (the tool's request) failed with the
// device's answer, the page with that answer in place of the tool.
func (c *Console) renderTool(w http.ResponseWriter, r *http.Request, page, fragment, title string, tp *toolPage, data any, err error) error {
	status := http.StatusOK
	if err != nil {
		var ok bool
		if tp.Error, status, ok = toolFailure(err); !ok {
			return err
		}
	}
	return c.render(w, r, status, page, fragment, view{Title: title + " · " + tp.Device, Section: "devices", Data: data})
}

// maxRunes refuses a field longer than n characters.
func maxRunes(field, value string, n int) error {
	if utf8.RuneCountInString(value) > n {
		return apperr.Invalid(field, "at most "+strconv.Itoa(n)+" characters")
	}
	return nil
}

// Services

// servicesPage is a device's services as its agent reports them now.
type servicesPage struct {
	toolPage
	Services []serviceRow
	// Search keeps the services whose name, display name or description holds it; Status
	// those in this state.
	Search, Status string
	// Total is how many services the device has, before the filter.
	Total int
}

// serviceStatuses are the states the page filters on.
var serviceStatuses = []string{"running", "stopped", "failed"}

// serviceRow is a row of the services page, and the answer to an action on it.
type serviceRow struct {
	agentproto.Service
	DeviceID string
	// Can tells which actions the user may take.
	Can map[string]bool
}

// Action is the address of an action on the service.
func (s serviceRow) Action(verb string) string {
	return "/devices/" + s.DeviceID + "/services/" + url.PathEscape(s.Name) + "/" + verb
}

// Badge is the class of the service's status badge.
func (s serviceRow) Badge() string {
	switch s.Status {
	case "running":
		return "status-online"
	case "failed":
		return "status-offline"
	case "starting", "stopping":
		return "status-pending"
	}
	return ""
}

// Shows tells whether the row offers the action: start unless running, stop unless
// stopped, restart always.
func (s serviceRow) Shows(verb string) bool {
	if !s.Can[verb] {
		return false
	}
	switch verb {
	case "start":
		return s.Status != "running"
	case "stop":
		return s.Status != "stopped"
	}
	return true
}

func (c *Console) serviceActions(ctx context.Context) map[string]bool {
	can := map[string]bool{}
	for _, verb := range systemtools.ServiceVerbs {
		can[verb] = c.HTTP.Permits(ctx, verb+"-device-service")
	}
	return can
}

func (c *Console) services(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "list-device-services"); err != nil {
		return err
	}
	in := r.URL.Query()
	search, status := strings.TrimSpace(in.Get("q")), in.Get("status")
	if err := maxRunes("q", search, 200); err != nil {
		return err
	}
	if status != "" && !slices.Contains(serviceStatuses, status) {
		return apperr.Invalid("status", "running, stopped or failed")
	}
	d, err := c.Devices.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := servicesPage{toolPage: c.toolPage(r.Context(), d, "services"), Search: search, Status: status}
	list, err := c.SystemTools.Services(r.Context(), d.ID)
	slices.SortStableFunc(list, func(a, b agentproto.Service) int {
		return cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name))
	})
	pg.Total = len(list)
	can := c.serviceActions(r.Context())
	needle := strings.ToLower(search)
	for _, s := range list {
		if status != "" && s.Status != status {
			continue
		}
		if strings.Contains(strings.ToLower(s.Name), needle) || strings.Contains(strings.ToLower(s.DisplayName), needle) ||
			strings.Contains(strings.ToLower(s.Description), needle) {
			pg.Services = append(pg.Services, serviceRow{Service: s, DeviceID: d.ID, Can: can})
		}
	}
	return c.renderTool(w, r, "services", "", "Services", &pg.toolPage, &pg, err)
}

// serviceAction starts, stops or restarts a service and answers its row in the new state.
func (c *Console) serviceAction(w http.ResponseWriter, r *http.Request) error {
	verb, name := r.PathValue("action"), r.PathValue("name")
	if !slices.Contains(systemtools.ServiceVerbs, verb) {
		return apperr.Invalid("action", "start, stop or restart")
	}
	if err := c.allow(r.Context(), verb+"-device-service"); err != nil {
		return err
	}
	if name == "" || httpapi.HasControl(name, false) || !utf8.ValidString(name) {
		return apperr.Invalid("name", "a service's name, without control characters")
	}
	if err := maxRunes("name", name, 256); err != nil {
		return err
	}
	s, err := c.SystemTools.ServiceAction(r.Context(), r.PathValue("id"), name, verb)
	if err != nil {
		return err
	}
	if s.Name == "" {
		s.Name = name
	}
	row := serviceRow{Service: s, DeviceID: r.PathValue("id"), Can: c.serviceActions(r.Context())}
	if r.Header.Get("HX-Request") == "" {
		http.Redirect(w, r, "/devices/"+row.DeviceID+"/services?q="+url.QueryEscape(name), http.StatusSeeOther)
		return nil
	}
	return c.render(w, r, http.StatusOK, "services", "service-done", view{Data: row})
}

// Logs

// logLevels are the levels a log's entries are filtered on, worst first.
var logLevels = []string{"critical", "error", "warning", "info", "debug"}

// logLimits are the page sizes the form offers (the API takes 1 to 1000).
var logLimits = []int{50, 100, 200, 500, 1000}

// logsPage is a device's log entries, newest first, filtered as the API filters them.
type logsPage struct {
	toolPage
	Logs   []agentproto.EventLog
	Query  logQuery
	Events []logEntry
	// Next pages on; First goes back to the newest entries.
	Next, First string
	Levels      []string
	Limits      []int
}

// logQuery is the logs page's filter as the form sends it.
type logQuery struct {
	Log, Level, Contains, Since, Until string
	Limit                              int
	Cursor                             string
}

// Filtered tells whether the query narrows the log.
func (q logQuery) Filtered() bool {
	return q.Level != "" || q.Contains != "" || q.Since != "" || q.Until != ""
}

// logEntry is an entry of the page.
type logEntry struct {
	agentproto.Event
	Badge string
}

var levelBadges = map[string]string{"critical": "sev-critical", "error": "sev-high", "warning": "sev-medium", "info": "sev-info"}

// formTime reads a moment of the form: a datetime-local value in UTC, or RFC 3339.
func formTime(field, v string) (time.Time, string, error) {
	if v == "" {
		return time.Time{}, "", nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			t = t.UTC()
			shown := t.Format("2006-01-02T15:04:05")
			if t.Second() == 0 {
				shown = t.Format("2006-01-02T15:04")
			}
			return t, shown, nil
		}
	}
	return time.Time{}, "", apperr.Invalid(field, "a date and time such as 2025-01-31T13:45 (UTC)")
}

func (c *Console) logs(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "list-device-event-logs"); err != nil {
		return err
	}
	if err := c.allow(r.Context(), "list-device-events"); err != nil {
		return err
	}
	in := r.URL.Query()
	q := logQuery{Log: in.Get("log"), Level: in.Get("level"), Contains: strings.TrimSpace(in.Get("contains")), Limit: 100,
		Cursor: in.Get("cursor")}
	if q.Level != "" && !slices.Contains(logLevels, q.Level) {
		return apperr.Invalid("level", "critical, error, warning, info or debug")
	}
	if v := in.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return apperr.Invalid("limit", "a whole number of at least 1")
		}
		q.Limit = min(n, 1000)
	}
	since, shownSince, err := formTime("since", in.Get("since"))
	if err != nil {
		return err
	}
	until, shownUntil, err := formTime("until", in.Get("until"))
	if err != nil {
		return err
	}
	q.Since, q.Until = shownSince, shownUntil
	for _, f := range []struct {
		field, value string
		max          int
	}{{"log", q.Log, 256}, {"contains", q.Contains, 256}, {"cursor", q.Cursor, 1024}} {
		if err := maxRunes(f.field, f.value, f.max); err != nil {
			return err
		}
	}
	d, err := c.Devices.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	pg := logsPage{toolPage: c.toolPage(r.Context(), d, "logs"), Query: q, Levels: logLevels, Limits: logLimits}
	if !slices.Contains(pg.Limits, q.Limit) {
		pg.Limits = append(slices.Clone(pg.Limits), q.Limit)
		slices.Sort(pg.Limits)
	}
	pg.Logs, err = c.SystemTools.EventLogs(r.Context(), d.ID)
	if err == nil && len(pg.Logs) > 0 {
		if pg.Query.Log == "" {
			pg.Query.Log = pg.Logs[0].Name
		}
		var p agentproto.EventPage
		p, err = c.SystemTools.Events(r.Context(), d.ID, agentproto.EventQuery{Name: pg.Query.Log, Limit: q.Limit, Since: since,
			Until: until, Level: q.Level, Cursor: q.Cursor, Contains: q.Contains})
		for _, e := range p.Events {
			pg.Events = append(pg.Events, logEntry{Event: e, Badge: levelBadges[e.Level]})
		}
		pg.Next = nextPage(r, p.NextCursor)
		if q.Cursor != "" {
			v := r.URL.Query()
			v.Del("cursor")
			pg.First = r.URL.Path + "?" + v.Encode()
		}
	}
	return c.renderTool(w, r, "logs", "", "Logs", &pg.toolPage, &pg, err)
}

// Files

// filesPage is a directory of a device.
type filesPage struct {
	toolPage
	// Path is the directory; Crumbs lead to it from the root, Parent is the one above.
	Path    string
	Crumbs  []crumb
	Parent  string
	Entries []agentproto.FileEntry
	// Self is the page's address, which the list fetches again after an upload.
	Self                   string
	CanDownload, CanUpload bool
	MaxUpload              string
	// Uploaded is the file an upload (without htmx) just wrote here, found in the list.
	Uploaded *agentproto.FileEntry
	// NotDirectory tells the path names something else than a directory (a file to download).
	NotDirectory bool
}

// crumb is a step of a path: its name and the path up to it; Current marks the last.
type crumb struct {
	Name, Path string
	Current    bool
}

// pathCrumbs are the steps of an absolute path, from its root; Windows paths split at both
// separators and start at their drive (C:\) or at \\ for a network path.
func pathCrumbs(p string, windows bool) []crumb {
	seps, sep, root := "/", "/", ""
	if windows {
		seps, sep = `/\`, `\`
		switch {
		case len(p) >= 2 && p[1] == ':':
			root, p = p[:2]+`\`, p[2:]
		case strings.HasPrefix(p, `\\`):
			root, p = `\\`, p[2:]
		case strings.HasPrefix(p, `\`) || strings.HasPrefix(p, "/"):
			root = `\`
		}
	} else if strings.HasPrefix(p, "/") {
		root = "/"
	}
	var out []crumb
	if root != "" {
		out = append(out, crumb{Name: root, Path: root})
	}
	cur := root
	for _, seg := range strings.FieldsFunc(p, func(r rune) bool { return strings.ContainsRune(seps, r) }) {
		if cur == "" || strings.HasSuffix(cur, sep) {
			cur += seg
		} else {
			cur += sep + seg
		}
		out = append(out, crumb{Name: seg, Path: cur})
	}
	if len(out) > 0 {
		out[len(out)-1].Current = true
	}
	return out
}

func filesAddress(deviceID, path string) string {
	return "/devices/" + deviceID + "/files?path=" + url.QueryEscape(path)
}

// rootOf is the directory the files page opens at.
func rootOf(d devices.Device) string {
	if d.OSType == agentproto.OSWindows {
		return `C:\`
	}
	return "/"
}

func (c *Console) files(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "list-or-read-device-files"); err != nil {
		return err
	}
	path := r.URL.Query().Get("path")
	if err := maxRunes("path", path, 4096); err != nil {
		return err
	}
	d, err := c.Devices.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if path == "" {
		path = rootOf(d)
	}
	pg := filesPage{toolPage: c.toolPage(r.Context(), d, "files"), Path: path, Crumbs: pathCrumbs(path, d.OSType == agentproto.OSWindows),
		Self: filesAddress(d.ID, path), CanDownload: c.HTTP.Permits(r.Context(), "download-device-file"),
		CanUpload: c.HTTP.Permits(r.Context(), "upload-device-file"), MaxUpload: humanBytes(systemtools.MaxStreamedUploadBytes)}
	if n := len(pg.Crumbs); n > 1 {
		pg.Parent = pg.Crumbs[n-2].Path
	}
	pg.Entries, err = c.SystemTools.ListDir(r.Context(), d.ID, path)
	slices.SortStableFunc(pg.Entries, func(a, b agentproto.FileEntry) int {
		if ad, bd := a.Type == "directory", b.Type == "directory"; ad != bd {
			if ad {
				return -1
			}
			return 1
		}
		return cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name))
	})
	if err != nil {
		pg.NotDirectory = apperr.IsCode(err, apperr.CodeValidation)
	}
	if up := r.URL.Query().Get("uploaded"); up != "" {
		if i := slices.IndexFunc(pg.Entries, func(e agentproto.FileEntry) bool { return e.Name == up }); i >= 0 {
			pg.Uploaded = &pg.Entries[i]
		}
	}
	return c.renderTool(w, r, "files", targeted(r, "file-list"), "Files", &pg.toolPage, &pg, err)
}

// downloadFile streams a file of the device to the browser as an attachment.
func (c *Console) downloadFile(w http.ResponseWriter, r *http.Request) error {
	// A download reads the device's file and is audited: a HEAD (which the router hands to GET
	// routes) must not set one off.
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "download with GET", http.StatusMethodNotAllowed)
		return nil
	}
	if err := c.allow(r.Context(), "download-device-file"); err != nil {
		return err
	}
	path := r.URL.Query().Get("path")
	if path == "" {
		return apperr.Invalid("path", "the absolute path of the file to download")
	}
	if err := maxRunes("path", path, 4096); err != nil {
		return err
	}
	out, err := c.SystemTools.Download(r.Context(), r.PathValue("id"), path, systemtools.TransferOptions{})
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	out.ServeHTTP(w, r)
	return nil
}

// uploadDone is the answer to an upload sent by htmx.
type uploadDone struct {
	Entry agentproto.FileEntry
}

// uploadFile writes the file of a multipart form into the directory the form names, streamed
// to the device's agent as it arrives.
func (c *Console) uploadFile(w http.ResponseWriter, r *http.Request) error {
	if err := c.allow(r.Context(), "upload-device-file"); err != nil {
		return err
	}
	dir := r.PostFormValue("dir")
	overwrite := r.PostFormValue("overwrite")
	if overwrite != "" && overwrite != "true" && overwrite != "on" {
		return apperr.Invalid("overwrite", "true, or left out")
	}
	d, err := c.Devices.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	file, _ := r.Context().Value(uploadKey{}).(*multipart.Part)
	if file == nil {
		return apperr.Invalid("file", "choose a file to upload")
	}
	if dir == "" {
		return apperr.Invalid("dir", "the directory to upload into")
	}
	name := file.FileName()
	name = name[strings.LastIndexAny(name, `/\`)+1:]
	if name == "" || name == "." || name == ".." || httpapi.HasControl(name, false) || !utf8.ValidString(name) {
		return apperr.Invalid("file", "a file name without control characters")
	}
	sep := "/"
	if d.OSType == agentproto.OSWindows {
		sep = `\`
	}
	path := dir
	if !strings.HasSuffix(path, "/") && !strings.HasSuffix(path, `\`) {
		path += sep
	}
	path += name
	if err := maxRunes("dir", path, 4096); err != nil {
		return err
	}
	body := &cappedReader{r: file, left: systemtools.MaxStreamedUploadBytes, probe: true,
		err: &apperr.Error{Kind: apperr.KindTooLarge, Code: apperr.CodeTooLarge,
			Message: "the file is larger than the limit of " + humanBytes(systemtools.MaxStreamedUploadBytes)}}
	e, err := c.SystemTools.Upload(r.Context(), d.ID, path, httpapi.RawBody{Reader: body, Size: -1},
		systemtools.TransferOptions{Overwrite: overwrite != ""})
	if err != nil {
		return err
	}
	if e.Path == "" {
		e.Path, e.Name = path, name
	}
	if r.Header.Get("HX-Request") == "" {
		http.Redirect(w, r, filesAddress(d.ID, dir)+"&uploaded="+url.QueryEscape(name), http.StatusSeeOther)
		return nil
	}
	// The directory's list fetches itself again.
	w.Header().Set("HX-Trigger", "files-changed")
	return c.render(w, r, http.StatusOK, "files", "upload-done", view{Data: uploadDone{Entry: e}})
}

// uploadKey holds, in a request's context, the file part of its multipart form.
type uploadKey struct{}

// uploadForm lets a page take a multipart form that ends with a file (an upload): it reads
// the form's text fields, which come first, into the request's form, under the bound of
// maxFormBytes of any form, and keeps the file part, unread, in the context for the handler.
// page then reads the form as usual: readForm finds it parsed and applies its text policy,
// and the CSRF check sees the csrf field, so no byte of the file goes anywhere before the
// session and its token are checked. Nothing after the file part is read. Other requests
// pass as they are.
func (c *Console) uploadForm(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if r.Method != http.MethodPost || err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
			next.ServeHTTP(w, r)
			return
		}
		fields := &cappedReader{r: r.Body, left: maxFormBytes + 64<<10,
			err: &apperr.Error{Kind: apperr.KindTooLarge, Code: apperr.CodeTooLarge, Message: "the form is larger than 1 MiB"}}
		mr := multipart.NewReader(fields, params["boundary"])
		form := url.Values{}
		var file *multipart.Part
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			var b []byte
			if err == nil && part.FormName() == "file" {
				if part.FileName() != "" {
					// The file's own bound applies from here.
					file, fields.err = part, nil
				}
				break
			}
			if err == nil {
				b, err = io.ReadAll(part)
			}
			if err != nil {
				if _, ok := apperr.As(err); !ok {
					err = apperr.Invalid("form", "the form could not be read: "+err.Error())
				}
				c.secureHeaders(w)
				c.fail(w, r, err)
				return
			}
			form.Add(part.FormName(), string(b))
		}
		r = r.WithContext(context.WithValue(r.Context(), uploadKey{}, file))
		// The multipart reader holds what is left of the body.
		r.PostForm, r.Form, r.Body = form, nil, http.NoBody
		next.ServeHTTP(w, r)
	})
}

// cappedReader fails with err past left bytes: at once, or, with probe, only when a byte
// remains past them (a body of exactly the limit passes).
type cappedReader struct {
	r     io.Reader
	left  int64
	probe bool
	err   error
}

func (b *cappedReader) Read(p []byte) (int, error) {
	if b.err == nil {
		return b.r.Read(p)
	}
	if b.left <= 0 {
		if !b.probe {
			return 0, b.err
		}
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			return 0, b.err
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
