package devices_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"gale/internal/app"
	"gale/internal/domains/devices"
	"gale/internal/platform/apperr"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// A domain's command kind is validated, documented, bounded and sees its results, with no
// change to devices.
func TestRegisteredCommandKind(t *testing.T) {
	e := apptest.New(t)
	dev := app.Service[*devices.Service](e.App)
	var results []string
	failResult := false
	dev.RegisterCommandKind(devices.CommandKind{Name: "collect_logs", DefaultTimeout: 60, MaxTimeout: 600,
		OS: []string{agentproto.OSWindows}, PayloadDoc: "{lines}.",
		Validate: func(raw json.RawMessage, _ string) (any, error) {
			var p struct {
				Lines int `json:"lines"`
			}
			if err := json.Unmarshal(raw, &p); err != nil || p.Lines < 1 {
				return nil, apperr.Invalid("payload.lines", "lines must be at least 1")
			}
			return p, nil
		},
		OnResult: func(ctx context.Context, tx *sql.Tx, deviceID string, r agentproto.CommandResult) error {
			if failResult {
				return errors.New("cannot store")
			}
			results = append(results, deviceID+":"+string(r.Result))
			return nil
		}})
	dev.DocumentCommandKinds(e.App.HTTP.API.OpenAPI())
	defer func() {
		if recover() == nil {
			t.Error("a kind registered twice did not panic")
		}
	}()

	ten := e.NewTenant(e.Admin(), "Alpha")
	key, secret := newKey(e, ten.Partner, ten.OrgID, 2)
	linux := enroll(e, key, secret, "web-01")
	winBody := enrollBody(key, secret, "win-01")
	winBody.OSType = agentproto.OSWindows
	var win agentproto.EnrollResponse
	e.Must(201, apptest.Anonymous, "POST", api+"/agents/enroll", winBody).JSON(t, &win)
	agent := func(d agentproto.EnrollResponse) apptest.Caller { return apptest.Caller{Token: d.AuthToken} }

	send := func(d agentproto.EnrollResponse, body map[string]any) *apptest.Response {
		return e.Do(ten.Org, "POST", api+"/devices/"+d.DeviceID+"/commands", body)
	}
	if r := send(linux, map[string]any{"type": "collect_logs", "payload": map[string]any{"lines": 5}}); r.Status != 400 || r.ErrorCode() != agentproto.ErrNotSupported {
		t.Errorf("Windows kind on Linux = %d %s, want 400 %s", r.Status, r.Body, agentproto.ErrNotSupported)
	}
	if r := send(win, map[string]any{"type": "collect_logs", "payload": map[string]any{"lines": 0}}); r.Status != 400 {
		t.Errorf("bad payload = %d %s, want 400", r.Status, r.Body)
	}
	if r := send(win, map[string]any{"type": "collect_logs", "payload": map[string]any{"lines": 5}, "timeoutSeconds": 601}); r.Status != 400 {
		t.Errorf("timeout over the kind's maximum = %d %s, want 400", r.Status, r.Body)
	}
	if r := send(win, map[string]any{"type": "collect_log"}); r.Status != 400 {
		t.Errorf("unknown kind = %d %s, want 400", r.Status, r.Body)
	}
	var cmd devices.DeviceCommand
	send(win, map[string]any{"type": "collect_logs", "payload": map[string]any{"lines": 5}}).JSON(t, &cmd)
	if cmd.Status != devices.CommandQueued || cmd.TimeoutSeconds != 60 || string(cmd.Payload) != `{"lines":5}` {
		t.Fatalf("command %+v", cmd)
	}
	resultPath := api + "/agents/" + win.DeviceID + "/commands/" + cmd.ID + "/result"
	failResult = true
	if r := e.Do(agent(win), "POST", resultPath, agentproto.CommandResult{Status: "completed", Result: json.RawMessage(`{"n":5}`)}); r.Status != 500 {
		t.Errorf("result whose handler fails = %d, want 500", r.Status)
	}
	var status string
	if err := e.App.DB.SQL.QueryRow(`SELECT status FROM device_commands WHERE id = $1`, cmd.ID).Scan(&status); err != nil || status != devices.CommandQueued {
		t.Fatalf("after a failed result handler the command is %s (%v), want it still queued", status, err)
	}
	failResult = false
	e.Must(204, agent(win), "POST", resultPath, agentproto.CommandResult{Status: "completed", Result: json.RawMessage(`{"n":5}`)})
	if len(results) != 1 || results[0] != win.DeviceID+`:{"n":5}` {
		t.Fatalf("OnResult saw %v", results)
	}
	var doc map[string]any
	e.Must(200, apptest.Anonymous, "GET", "/api/v1/openapi.json", nil).JSON(t, &doc)
	enum := doc["components"].(map[string]any)["schemas"].(map[string]any)["CommandInput"].(map[string]any)["properties"].(map[string]any)["type"].(map[string]any)["enum"]
	var kinds []string
	for _, k := range enum.([]any) {
		kinds = append(kinds, k.(string))
	}
	for _, want := range []string{"collect_logs", "reboot", "refresh_inventory", "run_script", "shutdown"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("documented kinds %v lack %s", kinds, want)
		}
	}
	if !slices.IsSorted(kinds) {
		t.Errorf("documented kinds %v are not in name order", kinds)
	}
	dev.RegisterCommandKind(devices.CommandKind{Name: "collect_logs", DefaultTimeout: 60})
}
