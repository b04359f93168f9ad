package remote_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/agenthub"
	"gale/internal/platform/clock"
	"gale/internal/platform/config"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

// fileAgent answers every call as an agent without file streams would answer a file
// download (content) and an upload (the entry): the transfers take the calls.
const fileAgent = `{"name":"a.txt","path":"/tmp/a.txt","type":"file","sizeBytes":5,"mode":"-rw-r--r--",
	"content":"aGVsbG8=","sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}`

func octetStream(c apptest.Caller) apptest.Caller {
	c.Header = http.Header{"Content-Type": {"application/octet-stream"}}
	return c
}

// chunked sends body without a Content-Length, as application/octet-stream.
func chunked(e *apptest.Env, c apptest.Caller, path string, body []byte) *apptest.Response {
	e.T.Helper()
	req, err := http.NewRequest(http.MethodPut, e.Server.URL+path, io.MultiReader(bytes.NewReader(body)))
	if err != nil {
		e.T.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/octet-stream")
	res, err := e.Server.Client().Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return &apptest.Response{Status: res.StatusCode, Header: res.Header, Body: raw}
}

type auditList struct {
	Data []struct {
		Result  string         `json:"result"`
		Details map[string]any `json:"details"`
	} `json:"data"`
}

func TestFileTransferSession(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := onlineDevice(e, ten, fileAgent)
	x := create(e, ten.Org, dev, "file_transfer")
	files := api + "/remote/sessions/" + x.ID + "/files?path=/tmp/a.txt"

	r := e.Must(200, ten.Org, "GET", files, nil)
	if string(r.Body) != "hello" || r.Header.Get("Content-Type") != "application/octet-stream" ||
		r.Header.Get("Content-Length") != "5" || r.Header.Get("Content-Disposition") != `attachment; filename="a.txt"` ||
		r.Header.Get("X-Checksum-Sha256") == "" {
		t.Fatalf("download = %q %v", r.Body, r.Header)
	}
	var s session
	e.Must(200, ten.Org, "GET", api+"/remote/sessions/"+x.ID, nil).JSON(t, &s)
	if s.Status != "active" || s.StartedAt == nil {
		t.Fatalf("session after its first transfer = %+v", s)
	}

	var entry struct {
		Path      string `json:"path"`
		SizeBytes int64  `json:"sizeBytes"`
	}
	e.Must(200, octetStream(ten.Org), "PUT", files+"&overwrite=true&mode=0644", []byte("hello")).JSON(t, &entry)
	if entry.Path != "/tmp/a.txt" || entry.SizeBytes != 5 {
		t.Fatalf("upload answer = %+v", entry)
	}
	entry.Path = ""
	e.Must(200, ten.Org, "PUT", files, map[string]any{"content": "aGVsbG8="}).JSON(t, &entry)
	if entry.Path != "/tmp/a.txt" {
		t.Fatalf("JSON upload answer = %+v", entry)
	}
	if r := e.Do(ten.Org, "PUT", files, nil); r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" {
		t.Fatalf("upload without a body = %d %s", r.Status, r.Body)
	}
	if r := e.Do(ten.Org, "GET", api+"/remote/sessions/"+x.ID+"/files", nil); r.Status != 400 {
		t.Fatalf("download without path = %d %s", r.Status, r.Body)
	}

	// Each transfer is audited with its session, direction, path and size.
	var log auditList
	e.Must(200, e.Admin(), "GET", api+"/audit/logs?action=device.system_tool&resourceId="+dev, nil).JSON(t, &log)
	directions := map[string]int{}
	for _, l := range log.Data {
		args, _ := l.Details["args"].(map[string]any)
		if args["remoteSessionId"] != x.ID || args["path"] != "/tmp/a.txt" || args["sizeBytes"] != float64(5) || l.Result != "success" {
			t.Fatalf("audit entry = %+v", l)
		}
		directions[args["direction"].(string)]++
	}
	if len(log.Data) != 3 || directions["download"] != 1 || directions["upload"] != 2 {
		t.Fatalf("audit entries = %+v", log.Data)
	}

	// Other session types are refused; an ended session is 409.
	term := create(e, ten.Org, dev, "terminal")
	if r := e.Do(ten.Org, "GET", api+"/remote/sessions/"+term.ID+"/files?path=/tmp/a.txt", nil); r.Status != 400 || r.ErrorCode() != "SESSION_TYPE_MISMATCH" {
		t.Fatalf("download through a terminal session = %d %s", r.Status, r.Body)
	}
	if r := e.Do(octetStream(ten.Org), "PUT", api+"/remote/sessions/"+term.ID+"/files?path=/tmp/a.txt", []byte("x")); r.Status != 400 || r.ErrorCode() != "SESSION_TYPE_MISMATCH" {
		t.Fatalf("upload through a terminal session = %d %s", r.Status, r.Body)
	}
	e.Must(200, ten.Org, "POST", api+"/remote/sessions/"+x.ID+"/end", nil)
	if r := e.Do(ten.Org, "GET", files, nil); r.Status != 409 || r.ErrorCode() != "SESSION_ENDED" {
		t.Fatalf("download through an ended session = %d %s", r.Status, r.Body)
	}
	if r := e.Do(octetStream(ten.Org), "PUT", files, []byte("x")); r.Status != 409 || r.ErrorCode() != "SESSION_ENDED" {
		t.Fatalf("upload through an ended session = %d %s", r.Status, r.Body)
	}
}

// A session of another tenant, like a missing one, is 404 to both transfers.
func TestFileTransferTenancy(t *testing.T) {
	e := apptest.New(t)
	a := e.NewTenant(e.Admin(), "Alpha")
	b := e.NewTenant(e.Admin(), "Beta")
	x := create(e, a.Org, onlineDevice(e, a, fileAgent), "file_transfer")
	for _, id := range []string{x.ID, store.NewID()} {
		path := api + "/remote/sessions/" + id + "/files?path=/tmp/a.txt"
		for _, caller := range []apptest.Caller{b.Org, b.Partner} {
			if r := e.Do(caller, "GET", path, nil); r.Status != 404 || r.ErrorCode() != "NOT_FOUND" {
				t.Fatalf("download by another tenant = %d %s", r.Status, r.Body)
			}
			if r := e.Do(octetStream(caller), "PUT", path, []byte("x")); r.Status != 404 || r.ErrorCode() != "NOT_FOUND" {
				t.Fatalf("upload by another tenant = %d %s", r.Status, r.Body)
			}
		}
	}
	var s session
	e.Must(200, a.Org, "GET", api+"/remote/sessions/"+x.ID, nil).JSON(t, &s)
	if s.Status != "pending" {
		t.Fatalf("refused transfers changed the session: %+v", s)
	}
}

// Files larger than REMOTE_FILE_TRANSFER_MAX_BYTES are refused with 413 either way.
func TestFileTransferSizeCap(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.RemoteFileTransferMaxBytes = 4 })
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := onlineDevice(e, ten, fileAgent)
	x := create(e, ten.Org, dev, "file_transfer")
	files := api + "/remote/sessions/" + x.ID + "/files?path=/tmp/a.txt"

	if r := e.Do(ten.Org, "GET", files, nil); r.Status != 413 || r.ErrorCode() != "PAYLOAD_TOO_LARGE" {
		t.Fatalf("download of 5 bytes over a cap of 4 = %d %s", r.Status, r.Body)
	}
	if r := e.Do(octetStream(ten.Org), "PUT", files, []byte("hello")); r.Status != 413 || r.ErrorCode() != "PAYLOAD_TOO_LARGE" {
		t.Fatalf("upload declaring 5 bytes over a cap of 4 = %d %s", r.Status, r.Body)
	}
	if r := chunked(e, ten.Org, files, []byte("hello")); r.Status != 413 || r.ErrorCode() != "PAYLOAD_TOO_LARGE" {
		t.Fatalf("chunked upload of 5 bytes over a cap of 4 = %d %s", r.Status, r.Body)
	}
	if r := e.Do(ten.Org, "PUT", files, map[string]any{"content": "aGVsbG8="}); r.Status != 413 || r.ErrorCode() != "PAYLOAD_TOO_LARGE" {
		t.Fatalf("JSON upload of 5 bytes over a cap of 4 = %d %s", r.Status, r.Body)
	}
	var entry struct {
		Path string `json:"path"`
	}
	e.Must(200, octetStream(ten.Org), "PUT", files, []byte("hell")).JSON(t, &entry)
	if entry.Path != "/tmp/a.txt" {
		t.Fatalf("upload at the cap = %+v", entry)
	}
	// Only the upload at the cap reached the agent; the refused download is audited as failed.
	var log auditList
	e.Must(200, e.Admin(), "GET", api+"/audit/logs?action=device.system_tool&resourceId="+dev, nil).JSON(t, &log)
	results := map[string]string{}
	for _, l := range log.Data {
		args, _ := l.Details["args"].(map[string]any)
		results[args["direction"].(string)] += l.Result + " "
	}
	if len(log.Data) != 2 || results["download"] != "failure " || results["upload"] != "success " {
		t.Fatalf("audit entries = %+v", log.Data)
	}
}

// A device whose agent dropped its connection is 503 AGENT_OFFLINE, as in the system tools.
func TestFileTransferAgentOffline(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	r := e.EnrollAgent(ten, "web-02")
	ws, _ := e.DialAgent(r.AuthToken)
	x := create(e, ten.Org, r.DeviceID, "file_transfer")
	ws.CloseNow()
	files := api + "/remote/sessions/" + x.ID + "/files?path=/tmp/a.txt"
	hub := app.Service[*agenthub.Hub](e.App)
	apptest.Eventually(t, 10*time.Second, func() bool {
		live, err := hub.LiveChannel(t.Context(), r.DeviceID)
		return err == nil && !live
	})
	if r := e.Do(ten.Org, "GET", files, nil); r.Status != 503 || r.ErrorCode() != "AGENT_OFFLINE" {
		t.Fatalf("download from an offline device = %d %s", r.Status, r.Body)
	}
	if r := e.Do(octetStream(ten.Org), "PUT", files, []byte("x")); r.Status != 503 || r.ErrorCode() != "AGENT_OFFLINE" {
		t.Fatalf("upload to an offline device = %d %s", r.Status, r.Body)
	}
}

// An active file transfer session is kept by its transfers; 30 minutes without one disconnect
// it, so it stops counting against the caps.
func TestIdleFileTransferSessionIsDisconnected(t *testing.T) {
	clk := clock.NewFake(time.Now())
	e := apptest.New(t, apptest.WithClock(clk))
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := onlineDevice(e, ten, fileAgent)
	x := create(e, ten.Org, dev, "file_transfer")
	files := api + "/remote/sessions/" + x.ID + "/files?path=/tmp/a.txt"
	e.Must(200, ten.Org, "GET", files, nil)
	var stale struct {
		Expired int64 `json:"expired"`
	}
	clk.Advance(20 * time.Minute)
	e.Must(200, ten.Org, "GET", files, nil)
	clk.Advance(20 * time.Minute)
	if e.Must(200, ten.Org, "DELETE", api+"/remote/sessions/stale", nil).JSON(t, &stale); stale.Expired != 0 {
		t.Fatalf("a session with a transfer 20 minutes ago was expired")
	}
	clk.Advance(11 * time.Minute)
	if e.Must(200, ten.Org, "DELETE", api+"/remote/sessions/stale", nil).JSON(t, &stale); stale.Expired != 1 {
		t.Fatalf("idle for 31 minutes: %d expired, want 1", stale.Expired)
	}
	var got session
	e.Must(200, ten.Org, "GET", api+"/remote/sessions/"+x.ID, nil).JSON(t, &got)
	if got.Status != "disconnected" || got.EndReason == nil || *got.EndReason != "idle: no transfer for 30 minutes" {
		t.Fatalf("idle session = %+v", got)
	}
	if r := e.Do(ten.Org, "GET", files, nil); r.Status != 409 {
		t.Fatalf("a transfer through the disconnected session = %d, want 409", r.Status)
	}
}
