package alerts_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/alerts"
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
