package incidents_test

import (
	"context"
	"database/sql"
	"net/http"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/alerts"
	"gale/internal/domains/incidents"
	"gale/internal/platform/apperr"
	"gale/internal/platform/events"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

func TestConsumerOpensIncidents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dev := f.e.InsertDevice(apptest.DeviceRow{PartnerID: f.a.PartnerID, OrgID: f.a.OrgID, SiteID: f.a.SiteID, Hostname: "db-01"})
	al := app.Service[*alerts.Service](f.e.App)
	raise := func(sev, key string) alerts.Alert {
		var x alerts.Alert
		err := f.e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
			var err error
			x, _, err = al.RaiseFrom(context.Background(), tx, alerts.Source{Type: alerts.SourceMonitor, ID: store.NewID(), PartnerID: f.a.PartnerID,
				OrgID: f.a.OrgID, DeviceID: dev}, alerts.SourceAlert{Key: key, Severity: sev, Title: "Disk " + sev})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	record := func(typ, partner, org, resource string, data any) {
		err := f.e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
			_, err := events.Record(context.Background(), tx, events.Event{Type: typ, PartnerID: partner, OrgID: org, ResourceType: "threat",
				ResourceID: resource}, data)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	crit := raise("critical", "c")
	raise("high", "h")
	f.runEvents(t)
	got := f.feed(t, f.a.Partner, "kind=tracked")
	if len(got.Data) != 1 {
		t.Fatalf("incidents after a critical and a high alert: %+v", got.Data)
	}
	inc := got.Data[0]
	if inc.SourceID != crit.ID || inc.Severity != "p1" || inc.DeviceID != dev || inc.Status != "open" || inc.Title != "Critical alert: Disk critical" ||
		!inc.DetectedAt.Equal(crit.TriggeredAt) {
		t.Fatalf("incident of the critical alert = %+v (alert %+v)", inc, crit)
	}
	// The same alert.triggered event again (a redelivery) opens nothing more.
	record("alert.triggered", f.a.PartnerID, f.a.OrgID, crit.ID, crit)
	f.runEvents(t)
	if got := f.feed(t, f.a.Partner, "kind=tracked"); got.Pagination.Total != 1 {
		t.Fatalf("a redelivered alert event opened another incident: %+v", got.Data)
	}

	// Threats: severity critical p1, high p2, medium p3, low p4; once per threat ID.
	threats := map[string]string{"critical": "p1", "high": "p2", "medium": "p3", "low": "p4"}
	ids := map[string]string{}
	for sev := range threats {
		id := store.NewID()
		ids[sev] = id
		th := map[string]any{"id": id, "deviceId": dev, "name": "Trojan." + sev, "severity": sev, "filePath": "/tmp/x", "detectedAt": start}
		record("threat.detected", f.a.PartnerID, f.a.OrgID, id, th)
		record("threat.detected", f.a.PartnerID, f.a.OrgID, id, th)
	}
	// A threat of a device only (no organization on the event) is placed by its device.
	orphan := store.NewID()
	record("threat.detected", "", "", orphan, map[string]any{"deviceId": dev, "name": "Worm", "severity": "high"})
	// Unreadable ones open nothing and do not block the rest.
	record("threat.detected", f.a.PartnerID, f.a.OrgID, store.NewID(), map[string]any{"severity": "catastrophic"})
	record("threat.detected", f.a.PartnerID, f.a.OrgID, "", "not an object")
	f.runEvents(t)
	got = f.feed(t, f.a.Partner, "kind=tracked&limit=100")
	if got.Pagination.Total != 6 {
		t.Fatalf("incidents after threats = %d, want 6: %+v", got.Pagination.Total, got.Data)
	}
	bySource := map[string]incidents.IncidentFeedRow{}
	for _, r := range got.Data {
		bySource[r.SourceID] = r
	}
	for sev, p := range threats {
		r, ok := bySource[ids[sev]]
		if !ok || r.Severity != p || r.DeviceID != dev || r.Title != "Threat detected: Trojan."+sev || !r.DetectedAt.Equal(start) {
			t.Fatalf("threat %s: %+v", sev, r)
		}
	}
	if r, ok := bySource[orphan]; !ok || r.Severity != "p2" || r.OrgID != f.a.OrgID {
		t.Fatalf("threat placed by its device: %+v", r)
	}
	var full incidents.Incident
	f.must(t, http.StatusOK, f.a.Partner, "GET", api+"/incidents/"+bySource[ids["low"]].ID, nil).JSON(t, &full)
	if full.Origin != incidents.OriginThreat || full.OriginRef == nil || *full.OriginRef != ids["low"] || full.Description != "File: /tmp/x" {
		t.Fatalf("threat incident = %+v", full)
	}
	if got := f.feed(t, f.b.Partner, ""); got.Pagination.Total != 0 {
		t.Fatalf("Bravo sees Alpha's incidents: %+v", got.Data)
	}
}

func TestIncidentLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.a
	var inc incidents.Incident
	f.must(t, http.StatusCreated, a.Partner, "POST", api+"/incidents", map[string]any{"orgId": a.OrgID, "title": "Ransom note",
		"severity": "p2"}).JSON(t, &inc)
	if inc.Status != "open" || inc.Severity != "p2" || inc.Kind != "tracked" || inc.Source != "native" || inc.SourceID != inc.ID ||
		inc.Origin != "manual" || inc.DetectedAt.Before(start) {
		t.Fatalf("created = %+v", inc)
	}
	f.mustCode(t, http.StatusBadRequest, apperr.CodeValidation, a.Partner, "POST", api+"/incidents", map[string]any{"orgId": a.OrgID,
		"title": "x", "severity": "p5"})
	f.mustCode(t, http.StatusBadRequest, apperr.CodeValidation, a.Partner, "POST", api+"/incidents", map[string]any{"orgId": f.b.OrgID,
		"title": "x", "severity": "p1"})
	path := api + "/incidents/" + inc.ID

	t.Run("transitions", func(t *testing.T) {
		step := func(to string, want int) {
			t.Helper()
			r := f.must(t, want, a.Partner, "PATCH", path, map[string]any{"status": to})
			if want == http.StatusConflict && r.ErrorCode() != incidents.CodeStatusConflict {
				t.Fatalf("PATCH %s: %s", to, r.Body)
			}
		}
		step("investigating", http.StatusOK)
		step("investigating", http.StatusConflict) // already
		step("open", http.StatusConflict)          // not allowed
		step("contained", http.StatusOK)
		step("resolved", http.StatusOK)
		var x incidents.Incident
		f.must(t, http.StatusOK, a.Partner, "GET", path, nil).JSON(t, &x)
		if x.Status != "resolved" || x.ResolvedAt == nil {
			t.Fatalf("resolved = %+v", x)
		}
		step("open", http.StatusOK) // reopen
		f.must(t, http.StatusOK, a.Partner, "GET", path, nil).JSON(t, &x)
		if x.Status != "open" || x.ResolvedAt != nil {
			t.Fatalf("reopened = %+v", x)
		}
		step("closed", http.StatusOK)
		step("open", http.StatusConflict) // closed is terminal
		f.mustCode(t, http.StatusBadRequest, apperr.CodeValidation, a.Partner, "PATCH", path, map[string]any{"status": "gone"})
		f.must(t, http.StatusOK, a.Partner, "PATCH", path, map[string]any{"severity": "p1", "title": "Ransomware"}).JSON(t, &x)
		if x.Severity != "p1" || x.Title != "Ransomware" {
			t.Fatalf("patched = %+v", x)
		}
	})
	t.Run("status race: one 200, the rest 409", func(t *testing.T) {
		var x incidents.Incident
		f.must(t, http.StatusCreated, a.Partner, "POST", api+"/incidents", map[string]any{"orgId": a.OrgID, "title": "Race",
			"severity": "p3"}).JSON(t, &x)
		counts := f.concurrently(8, a.Partner, "PATCH", api+"/incidents/"+x.ID, map[string]any{"status": "investigating"})
		if counts[http.StatusOK] != 1 || counts[http.StatusConflict] != 7 {
			t.Fatalf("statuses = %v", counts)
		}
	})
	t.Run("tenancy", func(t *testing.T) {
		for _, c := range []apptest.Caller{f.b.Partner, f.b.Org} {
			f.mustCode(t, http.StatusNotFound, apperr.CodeNotFound, c, "GET", path, nil)
			f.mustCode(t, http.StatusNotFound, apperr.CodeNotFound, c, "PATCH", path, map[string]any{"status": "investigating"})
		}
		f.mustCode(t, http.StatusNotFound, apperr.CodeNotFound, a.Partner, "GET", api+"/incidents/"+store.NewID(), nil)
		f.must(t, http.StatusOK, a.Org, "GET", path, nil)
	})
}

func TestPromote(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.a
	ids := f.insert(t,
		row{tenant: a, kind: incidents.KindFinding, severity: 2, detected: start.Add(-time.Hour), title: "Mimikatz", edrStatus: "in_progress"},
		row{tenant: a, kind: incidents.KindFinding, severity: 3, detected: start},
		row{tenant: a, severity: 2, detected: start.Add(-2 * time.Hour)},
	)
	finding := ids[0]
	// A finding is no tracked incident, and the reverse.
	f.mustCode(t, http.StatusNotFound, apperr.CodeNotFound, a.Partner, "GET", api+"/incidents/"+finding, nil)
	f.mustCode(t, http.StatusNotFound, apperr.CodeNotFound, a.Partner, "GET", api+"/incidents/findings/"+ids[2], nil)
	f.mustCode(t, http.StatusNotFound, apperr.CodeNotFound, a.Partner, "POST", api+"/incidents/findings/"+ids[2]+"/promote", nil)
	// Tenancy: Bravo cannot see or promote it.
	for _, c := range []apptest.Caller{f.b.Partner, f.b.Org} {
		f.mustCode(t, http.StatusNotFound, apperr.CodeNotFound, c, "GET", api+"/incidents/findings/"+finding, nil)
		f.mustCode(t, http.StatusNotFound, apperr.CodeNotFound, c, "POST", api+"/incidents/findings/"+finding+"/promote", nil)
	}
	// A caller with incidents but not devices:read may not touch findings.
	noDevices := f.roleUser(t, a, "IncidentsOnly", "incidents:read", "incidents:write", "alerts:read")
	f.mustCode(t, http.StatusForbidden, apperr.CodeForbidden, noDevices, "POST", api+"/incidents/findings/"+finding+"/promote", nil)
	f.mustCode(t, http.StatusForbidden, apperr.CodeForbidden, noDevices, "GET", api+"/incidents/findings/"+finding, nil)

	link := "https://console.edr-a.example/d/1"
	if _, err := f.e.App.DB.SQL.Exec(`UPDATE incidents SET link_out = $1 WHERE id = $2`, link, finding); err != nil {
		t.Fatal(err)
	}
	before := f.feed(t, a.Partner, "")
	var inc incidents.Incident
	f.must(t, http.StatusCreated, a.Partner, "POST", api+"/incidents/findings/"+finding+"/promote", nil).JSON(t, &inc)
	if inc.Kind != "tracked" || inc.Source != "native" || inc.TrackedIncidentID == nil || *inc.TrackedIncidentID != inc.ID ||
		inc.EDRStatus == nil || *inc.EDRStatus != "in_progress" || inc.LinkOut == nil || *inc.LinkOut != link || inc.Severity != "p2" ||
		inc.Title != "Mimikatz" || inc.SourceID != "src-"+finding || !inc.DetectedAt.Equal(start.Add(-time.Hour)) || inc.Origin != "finding" ||
		inc.Status != "open" {
		t.Fatalf("promoted = %+v", inc)
	}
	after := f.feed(t, a.Partner, "")
	if after.Pagination.Total != before.Pagination.Total {
		t.Fatalf("feed total %d → %d: a promoted finding appears once", before.Pagination.Total, after.Pagination.Total)
	}
	seen := 0
	for _, r := range after.Data {
		if r.ID == finding {
			t.Fatalf("the promoted finding is still in the feed")
		}
		if r.SourceID == "src-"+finding {
			seen++
			if r.ID != inc.ID || r.Kind != "tracked" || r.TrackedIncidentID == nil || *r.TrackedIncidentID != inc.ID {
				t.Fatalf("feed row of the promotion = %+v", r)
			}
		}
	}
	if seen != 1 || after.Data[0].ID != inc.ID {
		t.Fatalf("promotion appears %d times; feed %+v", seen, after.Data)
	}
	var fnd incidents.Incident
	f.must(t, http.StatusOK, a.Partner, "GET", api+"/incidents/findings/"+finding, nil).JSON(t, &fnd)
	if fnd.Status != incidents.FindingPromoted || fnd.TrackedIncidentID == nil || *fnd.TrackedIncidentID != inc.ID {
		t.Fatalf("finding after promotion = %+v", fnd)
	}
	f.mustCode(t, http.StatusConflict, incidents.CodeAlreadyPromoted, a.Partner, "POST", api+"/incidents/findings/"+finding+"/promote", nil)
	// The alerts:read-only caller sees the promotion (it is a tracked incident) but no finding.
	alertsOnly := f.roleUser(t, a, "AlertsOnly", "alerts:read")
	got := f.feed(t, alertsOnly, "")
	if got.Pagination.Total != 2 || got.Data[0].ID != inc.ID {
		t.Fatalf("alerts:read only after promotion: %+v", got)
	}

	t.Run("promote race: one 201, the rest 409", func(t *testing.T) {
		counts := f.concurrently(8, a.Partner, "POST", api+"/incidents/findings/"+ids[1]+"/promote", nil)
		if counts[http.StatusCreated] != 1 || counts[http.StatusConflict] != 7 {
			t.Fatalf("statuses = %v", counts)
		}
	})
}
