package alerts_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/alerts"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
)

// raiseFrom raises an alert of a source's condition in its own transaction.
func (x *env) raiseFrom(src alerts.Source, in alerts.SourceAlert) bool {
	x.T.Helper()
	var opened bool
	if err := x.App.DB.Write(context.Background(), func(tx *sql.Tx) (err error) {
		_, opened, err = app.Service[*alerts.Service](x.App).RaiseFrom(context.Background(), tx, src, in)
		return err
	}); err != nil {
		x.T.Fatalf("raise: %v", err)
	}
	return opened
}

func (x *env) resolveFrom(src alerts.Source, condition string) {
	x.T.Helper()
	if err := x.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
		return app.Service[*alerts.Service](x.App).ResolveFrom(context.Background(), tx, src, condition, "recovered")
	}); err != nil {
		x.T.Fatalf("resolve: %v", err)
	}
}

func TestSourceAlertsOpenOncePerConditionAndCoolDown(t *testing.T) {
	x := newEnv(t)
	src := alerts.Source{Type: alerts.SourceMonitor, ID: store.NewID(), PartnerID: x.ten.PartnerID, OrgID: x.ten.OrgID}
	offline := alerts.SourceAlert{Key: "offline", Severity: "critical", Title: "Website down", Message: "no answer",
		Cooldown: time.Hour}
	if !x.raiseFrom(src, offline) {
		t.Fatal("the first alert of the condition did not open")
	}
	if x.raiseFrom(src, offline) {
		t.Fatal("a second alert opened while the first is open")
	}
	slow := alerts.SourceAlert{Key: "slow", Severity: "low", Title: "Website slow"}
	if !x.raiseFrom(src, slow) {
		t.Fatal("another condition of the source did not open its own alert")
	}
	list := x.alerts(x.ten.Partner, "?sourceType=monitor&sourceId="+src.ID)
	if len(list) != 2 {
		t.Fatalf("listed %d alerts of the source, want 2", len(list))
	}
	var row struct {
		SourceType string  `json:"sourceType"`
		SourceID   string  `json:"sourceId"`
		DeviceID   *string `json:"deviceId"`
	}
	x.Must(200, x.ten.Partner, "GET", api+"/alerts/"+list[0].ID, nil).JSON(t, &row)
	if row.SourceType != "monitor" || row.SourceID != src.ID || row.DeviceID != nil {
		t.Fatalf("alert names %+v", row)
	}
	if n := len(x.alerts(x.ten.Partner, "?sourceType=device")); n != 0 {
		t.Fatalf("device alerts listed %d monitor alerts", n)
	}
	if n := len(x.alerts(x.ten.Partner, "?sourceType=monitor&sourceId="+store.NewID())); n != 0 {
		t.Fatalf("another source lists %d alerts", n)
	}

	x.resolveFrom(src, "offline")
	if got := x.alerts(x.ten.Partner, "?status=active&sourceId="+src.ID); len(got) != 1 || got[0].Title != "Website slow" {
		t.Fatalf("after resolving one condition, open: %+v", got)
	}
	if x.raiseFrom(src, offline) {
		t.Fatal("the condition opened again within its cooldown")
	}
	x.resolveFrom(src, "")
	if got := x.alerts(x.ten.Partner, "?status=active,acknowledged,suppressed&sourceId="+src.ID); len(got) != 0 {
		t.Fatalf("resolving the whole source left %d open", len(got))
	}
	if got := x.events("alert.triggered", list[0].ID) + x.events("alert.triggered", list[1].ID); got != 2 {
		t.Fatalf("alert.triggered recorded %d times, want 2", got)
	}

	other := x.NewTenant(x.admin, "Beta")
	x.Must(404, other.Partner, "GET", api+"/alerts/"+list[0].ID, nil)
	if n := len(x.alerts(other.Partner, "?sourceType=monitor")); n != 0 {
		t.Fatalf("another tenant sees %d monitor alerts", n)
	}
}

// A script's mapped failure on a device that a maintenance window suppressing alerts covers
// opens no alert and records no alert.triggered; the first failure after the window opens it.
// The same failure on a device outside the window alerts at once.
func TestAWindowHoldsScriptAlertsBack(t *testing.T) {
	x := newEnv(t)
	other := x.enroll(x.ten, "web-02")
	scriptID := store.NewID()
	fail := func(dev string) {
		x.T.Helper()
		if err := x.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
			_, err := events.Record(context.Background(), tx, events.Event{Type: "script.failed", PartnerID: x.ten.PartnerID, OrgID: x.ten.OrgID,
				ResourceType: "script_execution", ResourceID: store.NewID()}, map[string]any{"executionId": store.NewID(), "scriptId": scriptID,
				"scriptName": "Backup check", "deviceId": dev, "exitCode": 3, "severity": "high", "error": "the backup is old"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := x.App.Events.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	triggered := func() int {
		var n int
		if err := x.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM events WHERE type = 'alert.triggered' AND org_id = $1`, x.ten.OrgID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	occ := x.StartMaintenance(x.ten.Org, x.ten.OrgID, map[string]any{"type": "devices", "ids": []string{x.dev.DeviceID}})
	fail(x.dev.DeviceID)
	fail(other.DeviceID)
	if got := x.alerts(x.ten.Partner, "?deviceId="+x.dev.DeviceID); len(got) != 0 {
		t.Fatalf("a held device opened %+v", got)
	}
	if got := x.alerts(x.ten.Partner, "?deviceId="+other.DeviceID); len(got) != 1 || got[0].Title != "Script Backup check failed" {
		t.Fatalf("a device outside the window: %+v", got)
	}
	if n := triggered(); n != 1 {
		t.Fatalf("%d alert.triggered events, want the free device's one", n)
	}
	x.EndMaintenance(x.ten.Org, occ)
	fail(x.dev.DeviceID)
	if got := x.alerts(x.ten.Partner, "?deviceId="+x.dev.DeviceID); len(got) != 1 || got[0].Status != "active" {
		t.Fatalf("after the window: %+v", got)
	}
}
