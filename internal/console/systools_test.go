package console_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/platform/access"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// callAgent is a device's agent on its live channel, answering each call with the answer set
// for its method (JSON, or a *agentproto.CallError) and keeping the calls it got.
type callAgent struct {
	mu      sync.Mutex
	answers map[string]any
	calls   []agentproto.Call
}

func (a *callAgent) answer(method string, v any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answers[method] = v
}

// got returns the calls of method the agent got so far.
func (a *callAgent) got(method string) []agentproto.Call {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []agentproto.Call
	for _, c := range a.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// liveAgent connects the enrolled device's agent (its token) over the live channel.
func liveAgent(t *testing.T, e *apptest.Env, token string, answers map[string]any) *callAgent {
	t.Helper()
	a := &callAgent{answers: answers}
	ws := e.AnswerCalls(token, func(call agentproto.Call) (json.RawMessage, *agentproto.CallError) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.calls = append(a.calls, call)
		switch v := a.answers[call.Method].(type) {
		case string:
			return json.RawMessage(v), nil
		case *agentproto.CallError:
			return nil, v
		}
		return nil, &agentproto.CallError{Code: agentproto.ErrUnknownMethod, Message: "no answer for " + call.Method}
	})
	ws.SetReadLimit(64 << 20) // uploads come in one call
	return a
}

// toolsEnv is a tenant with a connected device, another organization's device, and the
// tenant's administrator signed in.
type toolsEnv struct {
	e                     *apptest.Env
	ten                   apptest.Tenant
	dev, foreign, offline string
	agent                 *callAgent
	v                     *visitor
	hx                    map[string]string
}

func newToolsEnv(t *testing.T, answers map[string]any) *toolsEnv {
	e := apptest.New(t)
	admin := e.Admin()
	te := &toolsEnv{e: e, ten: e.NewTenant(admin, "Acme")}
	other := e.NewTenant(admin, "Other")
	enrolled := e.EnrollAgent(te.ten, "web-01")
	te.dev = enrolled.DeviceID
	te.agent = liveAgent(t, e, enrolled.AuthToken, answers)
	te.foreign = e.InsertDevice(apptest.DeviceRow{PartnerID: other.PartnerID, OrgID: other.OrgID, SiteID: other.SiteID, Hostname: "ws-x"})
	// Online by its heartbeats, without the live channel the tools need.
	te.offline = e.InsertDevice(apptest.DeviceRow{PartnerID: te.ten.PartnerID, OrgID: te.ten.OrgID, SiteID: te.ten.SiteID, Hostname: "ws-quiet"})
	te.v = newVisitor(t, e)
	te.v.signIn("acme-org@gale.test", apptest.UserPassword)
	te.hx = map[string]string{"X-CSRF-Token": te.v.csrf, "HX-Request": "true"}
	return te
}

// same wants another organization's device answered exactly as a missing one.
func (te *toolsEnv) same(t *testing.T, what string, get func(device string) page) {
	t.Helper()
	foreign, missing := get(te.foreign), get(missingID)
	if foreign.status != http.StatusNotFound || foreign.status != missing.status || strip(foreign.body) != strip(missing.body) {
		t.Fatalf("%s: another organization's device answers %d, a missing one %d\n%s", what, foreign.status, missing.status, foreign.body)
	}
}

// auditedMethods counts the system-tool actions the audit log holds for the device.
func (te *toolsEnv) auditedMethods(t *testing.T) map[string]int {
	var log struct {
		Data []struct {
			Details struct {
				Method string `json:"method"`
			} `json:"details"`
		} `json:"data"`
	}
	te.e.Must(http.StatusOK, te.e.Admin(), "GET", "/api/v1/audit/logs?action=device.system_tool&resourceId="+te.dev, nil).JSON(t, &log)
	out := map[string]int{}
	for _, l := range log.Data {
		out[l.Details.Method]++
	}
	return out
}

func TestServicesPage(t *testing.T) {
	te := newToolsEnv(t, map[string]any{
		agentproto.MethodServiceList: `[{"name":"nginx.service","displayName":"Web server","description":"A high performance web server",
			"status":"running","startType":"automatic"},{"name":"cron.service","displayName":"Regular background programs","status":"stopped","startType":"manual"}]`,
		agentproto.MethodServiceRestart: `{"name":"nginx.service","displayName":"Web server","status":"running","startType":"automatic","pid":4242,"subState":"running"}`,
	})
	v, dev := te.v, te.dev

	must(t, v.get("/devices/"+dev), http.StatusOK, `href="/devices/`+dev+`/services"`, `href="/devices/`+dev+`/logs"`, `href="/devices/`+dev+`/files"`)
	p := v.get("/devices/" + dev + "/services")
	must(t, p, http.StatusOK, "<h1>Services</h1>", "nginx.service", "A high performance web server", "Regular background programs",
		"automatic", `hx-post="/devices/`+dev+`/services/nginx.service/restart"`, `hx-post="/devices/`+dev+`/services/cron.service/start"`,
		`aria-current="page">Services</a>`, `href="/devices/`+dev+`/processes"`, `href="/devices/`+dev+`/files"`)
	if strings.Contains(p.body, `/services/nginx.service/start"`) || strings.Contains(p.body, `/services/cron.service/stop"`) {
		t.Fatal("the page offers to start a running service or to stop a stopped one")
	}
	if q := v.get("/devices/" + dev + "/services?q=background"); !strings.Contains(q.body, "cron.service") || strings.Contains(q.body, "nginx.service") {
		t.Fatalf("the search keeps the wrong services:\n%s", q.body)
	}
	if q := v.get("/devices/" + dev + "/services?status=running"); !strings.Contains(q.body, "nginx.service") || strings.Contains(q.body, "cron.service") {
		t.Fatalf("the status filter keeps the wrong services:\n%s", q.body)
	}
	must(t, v.get("/devices/"+dev+"/services?q=nothing-like-it"), http.StatusOK, "No service matches this search")
	must(t, v.get("/devices/"+dev+"/services?status=sleeping"), http.StatusBadRequest)

	// Restarting answers the row in its new state, and the agent got the call, audited.
	row := v.do(http.MethodPost, "/devices/"+dev+"/services/nginx.service/restart", url.Values{}, te.hx)
	must(t, row, http.StatusOK, `<tr id="service-nginx.service">`, "running", `/services/nginx.service/stop"`)
	if strings.Contains(row.body, "<html") {
		t.Fatal("the action answers a whole page, not the row")
	}
	calls := te.agent.got(agentproto.MethodServiceRestart)
	if len(calls) != 1 || string(calls[0].Args) != `{"name":"nginx.service"}` {
		t.Fatalf("the agent got %+v", calls)
	}
	if n := te.auditedMethods(t)[agentproto.MethodServiceRestart]; n != 1 {
		t.Fatalf("the restart is audited %d times", n)
	}

	must(t, v.do(http.MethodPost, "/devices/"+dev+"/services/nginx.service/reload", url.Values{}, te.hx), http.StatusBadRequest)
	// Without the token nothing reaches the agent.
	must(t, v.post("/devices/"+dev+"/services/nginx.service/stop", url.Values{}), http.StatusForbidden, "security token")
	if calls := te.agent.got(agentproto.MethodServiceStop); len(calls) != 0 {
		t.Fatalf("a request without a CSRF token reached the agent: %+v", calls)
	}

	te.same(t, "services", func(d string) page { return v.get("/devices/" + d + "/services") })
	te.same(t, "a service action", func(d string) page {
		return v.do(http.MethodPost, "/devices/"+d+"/services/nginx.service/restart", url.Values{"csrf": {v.csrf}}, nil)
	})

	// A device without the live channel: the page says so, keeping its tabs.
	offline := v.get("/devices/" + te.offline + "/services")
	must(t, offline, http.StatusServiceUnavailable, "<h1>Services</h1>", "live connection", `href="/devices/`+te.offline+`/logs"`)

	// A viewer reads the services, without the buttons, and may not act.
	_, _ = te.e.CreateUser("acme-viewer@gale.test", access.LevelOrganization, te.ten.PartnerID, te.ten.OrgID, access.RoleOrgViewer)
	viewer := newVisitor(t, te.e)
	viewer.signIn("acme-viewer@gale.test", apptest.UserPassword)
	vp := viewer.get("/devices/" + dev + "/services")
	must(t, vp, http.StatusOK, "nginx.service")
	if strings.Contains(vp.body, "hx-post") || strings.Contains(vp.body, `/files"`) {
		t.Fatalf("a viewer is offered actions or files:\n%s", vp.body)
	}
	must(t, viewer.do(http.MethodPost, "/devices/"+dev+"/services/nginx.service/restart", url.Values{},
		map[string]string{"X-CSRF-Token": viewer.csrf, "HX-Request": "true"}), http.StatusForbidden)
	if n := len(te.agent.got(agentproto.MethodServiceRestart)); n != 1 {
		t.Fatalf("the agent got %d restarts", n)
	}
}

func TestLogsPage(t *testing.T) {
	te := newToolsEnv(t, map[string]any{
		agentproto.MethodEventLogList: `[{"name":"system","displayName":"System"},{"name":"ssh.service"}]`,
		agentproto.MethodEventLogEvents: `{"events":[{"recordId":"s=1","time":"2025-01-02T03:04:05Z","level":"error","source":"sshd","pid":77,
			"message":"Failed password for root"}],"nextCursor":"s=1"}`,
	})
	v, dev := te.v, te.dev

	p := v.get("/devices/" + dev + "/logs?log=ssh.service&level=error&contains=failed&since=2025-01-01T00:00&until=2025-01-03T12:30:15&limit=50")
	must(t, p, http.StatusOK, "<h1>Logs</h1>", "Failed password for root", "2025-01-02 03:04:05", "sshd", `<option value="ssh.service" selected>`,
		`<option value="error" selected>`, `value="2025-01-01T00:00"`, `value="2025-01-03T12:30:15"`, `<option value="50" selected>`,
		"Older entries", "cursor=s%3D1")
	calls := te.agent.got(agentproto.MethodEventLogEvents)
	if len(calls) != 1 {
		t.Fatalf("the agent got %d event queries", len(calls))
	}
	var q agentproto.EventQuery
	if err := json.Unmarshal(calls[0].Args, &q); err != nil {
		t.Fatal(err)
	}
	if q.Name != "ssh.service" || q.Level != "error" || q.Contains != "failed" || q.Limit != 50 ||
		!q.Since.Equal(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) || !q.Until.Equal(time.Date(2025, 1, 3, 12, 30, 15, 0, time.UTC)) {
		t.Fatalf("the agent was asked %+v", q)
	}
	// Without a log named, the first one; a limit above the API's is the API's.
	must(t, v.get("/devices/"+dev+"/logs?limit=5000"), http.StatusOK, `<option value="system" selected>`)
	if calls := te.agent.got(agentproto.MethodEventLogEvents); !strings.Contains(string(calls[1].Args), `"limit":1000`) {
		t.Fatalf("the agent was asked %s", calls[1].Args)
	}

	te.agent.answer(agentproto.MethodEventLogEvents, `{"events":[]}`)
	must(t, v.get("/devices/"+dev+"/logs?log=system&level=critical"), http.StatusOK, "No entry of this log matches these filters")
	must(t, v.get("/devices/"+dev+"/logs?log=system"), http.StatusOK, "This log has no entry")
	te.agent.answer(agentproto.MethodEventLogList, `[]`)
	must(t, v.get("/devices/"+dev+"/logs"), http.StatusOK, "The agent reports no log on this device")

	for _, bad := range []string{"level=loud", "since=yesterday", "until=2025-13-01T00:00", "limit=0", "limit=many"} {
		must(t, v.get("/devices/"+dev+"/logs?"+bad), http.StatusBadRequest)
	}
	te.same(t, "logs", func(d string) page { return v.get("/devices/" + d + "/logs") })
	must(t, v.get("/devices/"+te.offline+"/logs"), http.StatusServiceUnavailable, "<h1>Logs</h1>", "live connection")
}

// upload posts a multipart form as a browser does: the fields in order, then the file.
func (v *visitor) upload(path string, fields [][2]string, fileName string, content []byte, header map[string]string) page {
	v.t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	for _, f := range fields {
		_ = w.WriteField(f[0], f[1])
	}
	if fileName != "-" {
		fw, _ := w.CreateFormFile("file", fileName)
		_, _ = fw.Write(content)
	}
	_ = w.Close()
	req, err := http.NewRequest(http.MethodPost, v.e.Server.URL+path, &body)
	if err != nil {
		v.t.Fatal(err)
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	for k, val := range header {
		req.Header.Set(k, val)
	}
	res, err := v.c.Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return page{status: res.StatusCode, location: res.Header.Get("Location"), body: string(b), header: res.Header}
}

func TestFilesPage(t *testing.T) {
	te := newToolsEnv(t, map[string]any{
		agentproto.MethodFileList: `[{"name":"b.txt","path":"/srv/www/b.txt","type":"file","sizeBytes":2048,"mode":"-rw-r--r--",
			"modifiedAt":"2025-01-02T03:04:05Z","owner":"www-data"},{"name":"Zeta","path":"/srv/www/Zeta","type":"directory","mode":"drwxr-xr-x"},
			{"name":"alpha","path":"/srv/www/alpha","type":"directory","mode":"drwxr-xr-x"}]`,
		agentproto.MethodFileDownload: `{"path":"/srv/www/b.txt","sizeBytes":5,"encoding":"base64","content":"aGVsbG8=",
			"sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}`,
		agentproto.MethodFileUpload: `{"name":"up.txt","path":"/srv/www/up.txt","type":"file","sizeBytes":11,"mode":"-rw-r--r--"}`,
	})
	v, dev := te.v, te.dev
	files := "/devices/" + dev + "/files"

	p := v.get(files + "?path=/srv/www")
	must(t, p, http.StatusOK, "<h1>Files</h1>", `href="/devices/`+dev+`/files?path=%2f"`, `href="/devices/`+dev+`/files?path=%2fsrv"`,
		`<strong aria-current="location">www</strong>`, "2.0 KiB", "www-data", "2025-01-02 03:04 UTC",
		`href="/devices/`+dev+`/files/download?path=%2fsrv%2fwww%2fb.txt"`, `name="dir" value="/srv/www"`, `enctype="multipart/form-data"`)
	if a, z, b := strings.Index(p.body, ">alpha/<"), strings.Index(p.body, ">Zeta/<"), strings.Index(p.body, ">b.txt<"); a < 0 || !(a < z && z < b) {
		t.Fatalf("the folders do not come first, by name: alpha %d, Zeta %d, b.txt %d", a, z, b)
	}
	if calls := te.agent.got(agentproto.MethodFileList); len(calls) != 1 || string(calls[0].Args) != `{"path":"/srv/www"}` {
		t.Fatalf("the agent got %+v", calls)
	}
	// Without a path, the root.
	must(t, v.get(files), http.StatusOK)
	if calls := te.agent.got(agentproto.MethodFileList); string(calls[1].Args) != `{"path":"/"}` {
		t.Fatalf("the agent was asked for %s", calls[1].Args)
	}

	// Download: the agent's bytes, as an attachment.
	d := v.get(files + "/download?path=/srv/www/b.txt")
	if d.status != http.StatusOK || d.body != "hello" || d.header.Get("Content-Disposition") != `attachment; filename="b.txt"` ||
		d.header.Get("Content-Type") != "application/octet-stream" || d.header.Get("Content-Length") != "5" ||
		d.header.Get("X-Checksum-Sha256") != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" {
		t.Fatalf("download: %d %q %v", d.status, d.body, d.header)
	}
	must(t, v.get(files+"/download"), http.StatusBadRequest)
	downloads := len(te.agent.got(agentproto.MethodFileDownload))
	if p := v.do(http.MethodHead, files+"/download?path=/srv/www/b.txt", nil, nil); p.status != http.StatusMethodNotAllowed ||
		len(te.agent.got(agentproto.MethodFileDownload)) != downloads {
		t.Fatalf("a HEAD of a download answered %d and reached the agent", p.status)
	}

	// Upload without htmx: the file reaches the agent, then back to the folder, which says so.
	form := [][2]string{{"csrf", v.csrf}, {"dir", "/srv/www"}}
	up := v.upload(files+"/upload", form, "up.txt", []byte("hello world"), nil)
	if up.status != http.StatusSeeOther || up.location != files+"?path=%2Fsrv%2Fwww&uploaded=up.txt" {
		t.Fatalf("upload: %d to %q\n%s", up.status, up.location, up.body)
	}
	if p := v.get(up.location); strings.Contains(p.body, "Uploaded") {
		t.Fatal("the folder says a file it does not hold was uploaded")
	}
	te.agent.answer(agentproto.MethodFileList, `[{"name":"up.txt","path":"/srv/www/up.txt","type":"file","sizeBytes":11}]`)
	must(t, v.get(up.location), http.StatusOK, "Uploaded <strong>up.txt</strong> (11 B)")
	wantUpload := func(n int, content []byte, overwrite bool) {
		t.Helper()
		calls := te.agent.got(agentproto.MethodFileUpload)
		if len(calls) != n {
			t.Fatalf("the agent got %d uploads, want %d", len(calls), n)
		}
		var a agentproto.FileUploadArgs
		if err := json.Unmarshal(calls[n-1].Args, &a); err != nil {
			t.Fatal(err)
		}
		got, _ := base64.StdEncoding.DecodeString(a.Content)
		if a.Path != "/srv/www/up.txt" || !bytes.Equal(got, content) || a.Overwrite != overwrite {
			t.Fatalf("the agent got an upload of %s (%d bytes, overwrite %v)", a.Path, len(got), a.Overwrite)
		}
	}
	wantUpload(1, []byte("hello world"), false)
	// With htmx, larger than any form (1 MiB), replacing: the result, and the list refreshes.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<17)
	hx := v.upload(files+"/upload", append(form, [2]string{"overwrite", "true"}), `C:\fakepath\up.txt`, big, map[string]string{"HX-Request": "true"})
	must(t, hx, http.StatusOK, "Uploaded <strong>up.txt</strong>", "<code>/srv/www/up.txt</code>")
	if hx.header.Get("HX-Trigger") != "files-changed" {
		t.Fatalf("the upload's answer does not refresh the list: %v", hx.header)
	}
	wantUpload(2, big, true)
	if n := te.auditedMethods(t)[agentproto.MethodFileUpload]; n != 2 {
		t.Fatalf("%d uploads audited", n)
	}

	// No file (none sent, or the empty part of a form whose file was not chosen): 400.
	must(t, v.upload(files+"/upload", form, "-", nil, nil), http.StatusBadRequest, "choose a file")
	must(t, v.upload(files+"/upload", form, "", nil, nil), http.StatusBadRequest, "choose a file")
	// Without the token nothing reaches the agent.
	must(t, v.upload(files+"/upload", form[1:], "up.txt", []byte("x"), nil), http.StatusForbidden, "security token")
	wantUpload(2, big, true)

	// A path that is no directory: the agent's refusal, with the file to download.
	te.agent.answer(agentproto.MethodFileList, &agentproto.CallError{Code: agentproto.ErrInvalid, Message: "/srv/www/b.txt is not a directory"})
	must(t, v.get(files+"?path=/srv/www/b.txt"), http.StatusBadRequest, "is not a directory",
		`href="/devices/`+dev+`/files/download?path=%2fsrv%2fwww%2fb.txt"`, `href="/devices/`+dev+`/files?path=%2fsrv%2fwww"`)

	te.same(t, "files", func(d string) page { return v.get("/devices/" + d + "/files?path=/srv") })
	te.same(t, "download", func(d string) page { return v.get("/devices/" + d + "/files/download?path=/srv/www/b.txt") })
	te.same(t, "upload", func(d string) page {
		return v.upload("/devices/"+d+"/files/upload", form, "up.txt", []byte("x"), nil)
	})
	wantUpload(2, big, true)
	must(t, v.get("/devices/"+te.offline+"/files"), http.StatusServiceUnavailable, "<h1>Files</h1>", "live connection")
	must(t, v.get("/devices/"+te.offline+"/files/download?path=/etc/hosts"), http.StatusServiceUnavailable, "live connection")

	// A Windows path's steps start at its drive, even when the device cannot answer.
	win := te.e.InsertDevice(apptest.DeviceRow{PartnerID: te.ten.PartnerID, OrgID: te.ten.OrgID, SiteID: te.ten.SiteID, Hostname: "ws-win",
		OSType: "windows", OSName: "Windows 11"})
	must(t, v.get("/devices/"+win+"/files?path="+url.QueryEscape(`C:\Users\Public`)), http.StatusServiceUnavailable,
		`href="/devices/`+win+`/files?path=C%3a%5c">C:\</a>`, `href="/devices/`+win+`/files?path=C%3a%5cUsers">Users</a>`,
		`<strong aria-current="location">Public</strong>`)
	must(t, v.get("/devices/"+win+"/files"), http.StatusServiceUnavailable, `<strong aria-current="location">C:\</strong>`)
}
