package systemtools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"gale/internal/app"
	"gale/internal/domains/agenthub"
	"gale/internal/platform/config"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

// liveAgent opens the agent's live channel and answers every call with result.
func liveAgent(t *testing.T, e *apptest.Env, token string, result json.RawMessage) *websocket.Conn {
	t.Helper()
	return e.AnswerCalls(token, func(agentproto.Call) (json.RawMessage, *agentproto.CallError) { return result, nil })
}

// offlineAtOnce asks for the device's processes and wants 503 AGENT_OFFLINE well before the
// 15 s a call would wait for an answer.
func offlineAtOnce(t *testing.T, e *apptest.Env, c apptest.Caller, deviceID string) {
	t.Helper()
	started := time.Now()
	r := e.Do(c, "GET", api+"/system-tools/devices/"+deviceID+"/processes", nil)
	if r.Status != 503 || r.ErrorCode() != "AGENT_OFFLINE" || !strings.Contains(string(r.Body), "live connection") {
		t.Fatalf("processes without a live channel = %d %s", r.Status, r.Body)
	}
	if took := time.Since(started); took > 3*time.Second {
		t.Fatalf("the refusal took %s", took)
	}
}

func TestAnOnlineDeviceWithoutALiveChannelIsOfflineAtOnce(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := e.EnrollAgent(ten, "web-01")
	e.Must(200, apptest.Bearer(dev.AuthToken), "POST", api+"/agents/"+dev.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "1.0.0"})
	offlineAtOnce(t, e, ten.Org, dev.DeviceID)
	if r := e.Do(ten.Org, "POST", api+"/system-tools/devices/"+dev.DeviceID+"/processes/42/kill", nil); r.Status != 503 || r.ErrorCode() != "AGENT_OFFLINE" {
		t.Fatalf("kill without a live channel = %d %s", r.Status, r.Body)
	}

	ws := liveAgent(t, e, dev.AuthToken, json.RawMessage(`[{"pid":7,"name":"x"}]`))
	if r := e.Do(ten.Org, "GET", api+"/system-tools/devices/"+dev.DeviceID+"/processes", nil); r.Status != 200 || !strings.Contains(string(r.Body), `"pid":7`) {
		t.Fatalf("processes over the live channel = %d %s", r.Status, r.Body)
	}
	ws.Close(websocket.StatusNormalClosure, "")
	// The server notices the closed socket a moment later (asked of the hub: a request sent
	// before then would wait for the agent's answer).
	waitNoLiveChannel(t, e, dev.DeviceID)
	offlineAtOnce(t, e, ten.Org, dev.DeviceID)
}

// A node that does not hold the agent's channel finds the node that does, and tells a device
// without one apart at once.
func TestAnotherNodeKnowsWhetherTheAgentHasALiveChannel(t *testing.T) {
	e := apptest.New(t)
	if e.App.DB.Dialect != "postgres" {
		t.Skip("several nodes share a PostgreSQL database; SQLite runs one node")
	}
	other := e.SecondNode()
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := e.EnrollAgent(ten, "web-01")
	offlineAtOnce(t, other, ten.Org, dev.DeviceID)

	ws := liveAgent(t, e, dev.AuthToken, json.RawMessage(`[{"pid":7,"name":"x"}]`))
	if r := other.Do(ten.Org, "GET", api+"/system-tools/devices/"+dev.DeviceID+"/processes", nil); r.Status != 200 || !strings.Contains(string(r.Body), `"pid":7`) {
		t.Fatalf("processes through another node = %d %s", r.Status, r.Body)
	}
	ws.Close(websocket.StatusNormalClosure, "")
	waitNoLiveChannel(t, other, dev.DeviceID)
	offlineAtOnce(t, other, ten.Org, dev.DeviceID)
}

// A request made right after the agent started, before its live channel is up, waits for the
// channel and succeeds once it connects.
func TestACallWaitsForTheLiveChannelOfAnAgentOpeningIt(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.AgentChannelWait = 30 * time.Second })
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := e.EnrollAgent(ten, "web-01")
	e.ReportOpeningChannel(dev)
	done := make(chan *apptest.Response, 1)
	go func() { done <- e.Do(ten.Org, "GET", api+"/system-tools/devices/"+dev.DeviceID+"/processes", nil) }()
	e.WaitChannelWaits(1)
	liveAgent(t, e, dev.AuthToken, json.RawMessage(`[{"pid":7,"name":"x"}]`))
	if r := <-done; r.Status != 200 || !strings.Contains(string(r.Body), `"pid":7`) {
		t.Fatalf("processes asked while the channel was connecting = %d %s", r.Status, r.Body)
	}
	e.WaitChannelWaits(0)
}

// An agent that said it is opening its channel but does not within the wait is 503
// AGENT_OFFLINE saying so; one that said its channel is down, or something else, is refused
// at once.
func TestAChannelThatDoesNotComeUpIsConnectingAfterTheWait(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.AgentChannelWait = 300 * time.Millisecond })
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := e.EnrollAgent(ten, "web-01")
	e.ReportOpeningChannel(dev)
	r := e.Do(ten.Org, "GET", api+"/system-tools/devices/"+dev.DeviceID+"/processes", nil)
	if r.Status != 503 || r.ErrorCode() != "AGENT_OFFLINE" || !strings.Contains(string(r.Body), "connecting its live channel") ||
		!strings.Contains(string(r.Body), "retry in a few seconds") {
		t.Fatalf("processes of an agent that never opens its channel = %d %s", r.Status, r.Body)
	}
	e.Must(200, apptest.Bearer(dev.AuthToken), "POST", api+"/agents/"+dev.DeviceID+"/heartbeat",
		agentproto.Heartbeat{AgentVersion: "1.0.0", LiveChannel: agentproto.LiveChannelDown})
	offlineAtOnce(t, e, ten.Org, dev.DeviceID)
	e.Must(200, apptest.Bearer(dev.AuthToken), "POST", api+"/agents/"+dev.DeviceID+"/heartbeat",
		agentproto.Heartbeat{AgentVersion: "1.0.0", LiveChannel: "soon"})
	offlineAtOnce(t, e, ten.Org, dev.DeviceID)
}

// A request on one node waits for a channel the agent opens on another, and its call goes
// through that node.
func TestACallWaitsForALiveChannelOpenedOnAnotherNode(t *testing.T) {
	e := apptest.New(t, func(c *config.Config) { c.AgentChannelWait = 30 * time.Second })
	if e.App.DB.Dialect != "postgres" {
		t.Skip("several nodes share a PostgreSQL database; SQLite runs one node")
	}
	other := e.SecondNode()
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := e.EnrollAgent(ten, "web-01")
	e.ReportOpeningChannel(dev)
	done := make(chan *apptest.Response, 1)
	go func() { done <- other.Do(ten.Org, "GET", api+"/system-tools/devices/"+dev.DeviceID+"/processes", nil) }()
	other.WaitChannelWaits(1)
	liveAgent(t, e, dev.AuthToken, json.RawMessage(`[{"pid":7,"name":"x"}]`))
	if r := <-done; r.Status != 200 || !strings.Contains(string(r.Body), `"pid":7`) {
		t.Fatalf("processes asked on another node while the channel was connecting = %d %s", r.Status, r.Body)
	}
}

// waitNoLiveChannel waits until the node no longer sees a live channel to the device.
func waitNoLiveChannel(t *testing.T, e *apptest.Env, deviceID string) {
	t.Helper()
	hub := app.Service[*agenthub.Hub](e.App)
	apptest.Eventually(t, 5*time.Second, func() bool {
		live, err := hub.LiveChannel(context.Background(), deviceID)
		return err == nil && !live
	})
}

// An agent without file streams gets downloads and uploads (raw or JSON) as calls; each is
// audited with its path and size.
func TestFileTransfersThroughCalls(t *testing.T) {
	e := apptest.New(t)
	ten := e.NewTenant(e.Admin(), "Alpha")
	dev := e.EnrollAgent(ten, "web-01")
	liveAgent(t, e, dev.AuthToken, json.RawMessage(`{"name":"a.txt","path":"/tmp/a.txt","type":"file","sizeBytes":5,
		"content":"aGVsbG8=","sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}`))
	files := api + "/system-tools/devices/" + dev.DeviceID + "/files"

	r := e.Must(200, ten.Org, "GET", files+"/download?path=/tmp/a.txt", nil)
	if string(r.Body) != "hello" || r.Header.Get("Content-Length") != "5" || r.Header.Get("Content-Disposition") != `attachment; filename="a.txt"` ||
		r.Header.Get("X-Checksum-Sha256") != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" {
		t.Fatalf("download = %q %v", r.Body, r.Header)
	}
	raw := ten.Org
	raw.Header = map[string][]string{"Content-Type": {"application/octet-stream"}}
	if r := e.Must(200, raw, "POST", files+"/upload?path=/tmp/a.txt", []byte("hello")); !strings.Contains(string(r.Body), `"path":"/tmp/a.txt"`) {
		t.Fatalf("raw upload = %s", r.Body)
	}
	if r := e.Must(200, ten.Org, "POST", files+"/upload", map[string]any{"path": "/tmp/a.txt", "content": "aGVsbG8="}); !strings.Contains(string(r.Body), `"path":"/tmp/a.txt"`) {
		t.Fatalf("JSON upload = %s", r.Body)
	}
	if r := e.Do(ten.Org, "POST", files+"/upload", nil); r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" {
		t.Fatalf("upload without a body = %d %s", r.Status, r.Body)
	}

	var log struct {
		Data []struct {
			Details struct {
				Method string         `json:"method"`
				Args   map[string]any `json:"args"`
			} `json:"details"`
		} `json:"data"`
	}
	e.Must(200, e.Admin(), "GET", api+"/audit/logs?action=device.system_tool&resourceId="+dev.DeviceID, nil).JSON(t, &log)
	methods := map[string]int{}
	for _, l := range log.Data {
		if l.Details.Args["path"] != "/tmp/a.txt" || l.Details.Args["sizeBytes"] != float64(5) {
			t.Fatalf("audit entry = %+v", l)
		}
		methods[l.Details.Method]++
	}
	if methods[agentproto.MethodFileDownload] != 1 || methods[agentproto.MethodFileUpload] != 2 {
		t.Fatalf("audit entries = %+v", log.Data)
	}
}
