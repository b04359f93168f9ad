package alerts_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/platform/access"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

var allStatuses = []string{"active", "acknowledged", "suppressed", "resolved", "dismissed"}

// allowed is §3: acknowledge only from active; resolve and suppress from the open statuses;
// dismiss from every status but dismissed.
var allowed = map[string]map[string]string{
	"acknowledge": {"active": "acknowledged"},
	"resolve":     {"active": "resolved", "acknowledged": "resolved", "suppressed": "resolved"},
	"suppress":    {"active": "suppressed", "acknowledged": "suppressed", "suppressed": "suppressed"},
	"dismiss":     {"active": "dismissed", "acknowledged": "dismissed", "suppressed": "dismissed", "resolved": "dismissed"},
}

var eventOf = map[string]string{"acknowledge": "alert.acknowledged", "resolve": "alert.resolved", "suppress": "alert.suppressed",
	"dismiss": "alert.dismissed"}

func TestEveryTransitionFromEveryStatus(t *testing.T) {
	x := newEnv(t)
	for action, from := range allowed {
		for _, status := range allStatuses {
			t.Run(action+" from "+status, func(t *testing.T) {
				id := x.insertAlert(x.ten, x.dev.DeviceID, status, "high")
				r := x.Do(x.ten.Org, "POST", api+"/alerts/"+id+"/"+action, nil)
				var now alertRow
				x.Must(200, x.ten.Org, "GET", api+"/alerts/"+id, nil).JSON(t, &now)
				next, ok := from[status]
				if !ok {
					if r.Status != 409 || r.ErrorCode() != "CONFLICT" || now.Status != status {
						t.Fatalf("= %d %s, status %s; want 409 CONFLICT and %s unchanged", r.Status, r.Body, now.Status, status)
					}
					if x.events(eventOf[action], id) != 0 {
						t.Fatal("an event for a refused transition")
					}
					return
				}
				var got alertRow
				if r.Status != 200 {
					t.Fatalf("= %d %s, want 200", r.Status, r.Body)
				}
				r.JSON(t, &got)
				if got.Status != next || now.Status != next {
					t.Fatalf("status = %s (stored %s), want %s", got.Status, now.Status, next)
				}
				if x.events(eventOf[action], id) != 1 {
					t.Fatalf("no %s event", eventOf[action])
				}
				var audits int
				if err := x.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM audit_logs WHERE resource_id = $1 AND action = $2`, id,
					"alert."+action).Scan(&audits); err != nil || audits != 1 {
					t.Fatalf("audit entries = %d, %v", audits, err)
				}
			})
		}
	}
}

func TestTransitionFields(t *testing.T) {
	x := newEnv(t)
	id := x.insertAlert(x.ten, x.dev.DeviceID, "active", "high")
	var a alertRow
	x.Must(200, x.ten.Org, "POST", api+"/alerts/"+id+"/acknowledge", nil).JSON(t, &a)
	if a.AcknowledgedBy == nil {
		t.Fatalf("acknowledged = %+v", a)
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	var s struct {
		SuppressedUntil *time.Time `json:"suppressedUntil"`
	}
	x.Must(200, x.ten.Org, "POST", api+"/alerts/"+id+"/suppress", map[string]any{"until": until}).JSON(t, &s)
	if s.SuppressedUntil == nil || !s.SuppressedUntil.Equal(until) {
		t.Fatalf("suppressedUntil = %v, want %v", s.SuppressedUntil, until)
	}
	if r := x.Do(x.ten.Org, "POST", api+"/alerts/"+id+"/suppress", map[string]any{"until": time.Now().Add(-time.Hour)}); r.Status != 400 {
		t.Fatalf("suppress until the past = %d", r.Status)
	}
	x.Must(200, x.ten.Org, "POST", api+"/alerts/"+id+"/resolve", map[string]any{"note": "disk cleaned"}).JSON(t, &a)
	if a.ResolutionNote == nil || *a.ResolutionNote != "disk cleaned" || a.ResolvedBy == nil || a.ResolvedAt == nil {
		t.Fatalf("resolved = %+v", a)
	}
	x.Must(200, x.ten.Org, "POST", api+"/alerts/"+id+"/dismiss", nil).JSON(t, &a)
	if a.DismissedBy == nil || a.DismissedAt == nil {
		t.Fatalf("dismissed = %+v", a)
	}
	// Viewers read alerts but cannot act on them.
	_, viewer := x.CreateUser("viewer@gale.test", access.LevelOrganization, x.ten.PartnerID, x.ten.OrgID, access.RoleOrgViewer)
	other := x.insertAlert(x.ten, x.dev.DeviceID, "active", "high")
	x.Must(200, viewer, "GET", api+"/alerts/"+other, nil)
	for _, action := range []string{"acknowledge", "resolve", "suppress", "dismiss"} {
		x.Must(403, viewer, "POST", api+"/alerts/"+other+"/"+action, nil)
	}
}

// TestConcurrentTransitions races 20 callers (each its own API key) on each transition:
// exactly one wins, the others get 409, and the alert names the winner.
func TestConcurrentTransitions(t *testing.T) {
	x := newEnv(t)
	type racer struct {
		id     string
		caller apptest.Caller
	}
	racers := make([]racer, 20)
	for i := range racers {
		racers[i].id, racers[i].caller = x.apiKey(x.ten.Partner, fmt.Sprintf("racer %d", i), "alerts:*")
	}
	for _, action := range []string{"acknowledge", "resolve", "suppress", "dismiss"} {
		t.Run(action, func(t *testing.T) {
			start := "active"
			if action == "dismiss" {
				start = "resolved"
			}
			id := x.insertAlert(x.ten, x.dev.DeviceID, start, "high")
			codes := make([]int, len(racers))
			var wg sync.WaitGroup
			for i, r := range racers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					codes[i] = x.Do(r.caller, "POST", api+"/alerts/"+id+"/"+action, nil).Status
				}()
			}
			wg.Wait()
			winner, wins, conflicts := -1, 0, 0
			for i, c := range codes {
				switch c {
				case 200:
					wins++
					winner = i
				case 409:
					conflicts++
				}
			}
			if action == "suppress" {
				// §3 lets suppress leave every open status, suppressed included (a second
				// suppression renews the first), so every caller succeeds and each is recorded;
				// the race that has losers is suppress against resolve (TestSuppressRaceAgainstResolve).
				if wins != len(racers) || x.events("alert.suppressed", id) != len(racers) {
					t.Fatalf("suppress codes = %v", codes)
				}
				return
			}
			if wins != 1 || conflicts != len(racers)-1 {
				t.Fatalf("codes = %v, want one 200 and %d 409", codes, len(racers)-1)
			}
			var a alertRow
			x.Must(200, x.ten.Org, "GET", api+"/alerts/"+id, nil).JSON(t, &a)
			by := map[string]*string{"acknowledge": a.AcknowledgedBy, "resolve": a.ResolvedBy, "dismiss": a.DismissedBy}[action]
			if by == nil || *by != racers[winner].id {
				t.Fatalf("%s by %v, want the winner %s", action, by, racers[winner].id)
			}
			if x.events(eventOf[action], id) != 1 {
				t.Fatalf("%d %s events, want 1", x.events(eventOf[action], id), eventOf[action])
			}
		})
	}
	// A technician racing the auto-resolve evaluation: exactly one of them moves the alert.
	ruleID := x.rule(x.ten.Partner, cpuRule("High CPU", 90, nil))
	x.beat(x.dev, 95, 0)
	open := x.alerts(x.ten.Org, "?ruleId="+ruleID)
	if len(open) != 1 {
		t.Fatalf("open alerts = %+v", open)
	}
	x.exec(`DELETE FROM device_metrics WHERE device_id = $1`, x.dev.DeviceID)
	x.exec(`INSERT INTO device_metrics (device_id, recorded_at, cpu_percent, ram_percent, disk_percent, sample) VALUES ($1, $2, 5, 0, 0, '{}')`,
		x.dev.DeviceID, store.Now())
	var wg sync.WaitGroup
	var ack int
	var evalErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		ack = x.Do(racers[0].caller, "POST", api+"/alerts/"+open[0].ID+"/acknowledge", nil).Status
	}()
	go func() { defer wg.Done(); evalErr = x.evaluate(x.dev.DeviceID) }()
	wg.Wait()
	var a alertRow
	x.Must(200, x.ten.Org, "GET", api+"/alerts/"+open[0].ID, nil).JSON(t, &a)
	if evalErr != nil || a.Status != "resolved" || (ack != 200 && ack != 409) {
		t.Fatalf("race with auto-resolve: ack %d, eval %v, status %s", ack, evalErr, a.Status)
	}
	if ack == 409 && x.events("alert.acknowledged", a.ID) != 0 {
		t.Fatal("a losing acknowledge recorded an event")
	}
}

func TestSuppressRaceAgainstResolve(t *testing.T) {
	x := newEnv(t)
	// Half suppress, half resolve: exactly one resolve wins; suppressions after it get 409.
	id := x.insertAlert(x.ten, x.dev.DeviceID, "active", "high")
	codes := map[string][]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		action := "resolve"
		if i%2 == 0 {
			action = "suppress"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := x.Do(x.ten.Org, "POST", api+"/alerts/"+id+"/"+action, nil).Status
			mu.Lock()
			codes[action] = append(codes[action], c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	resolved := 0
	for _, c := range codes["resolve"] {
		if c == 200 {
			resolved++
		} else if c != 409 {
			t.Fatalf("resolve codes %v", codes["resolve"])
		}
	}
	for _, c := range codes["suppress"] {
		if c != 200 && c != 409 {
			t.Fatalf("suppress codes %v", codes["suppress"])
		}
	}
	if resolved != 1 {
		t.Fatalf("%d resolves won, want 1 (%v)", resolved, codes)
	}
}

func TestBulk(t *testing.T) {
	x := newEnv(t)
	other := x.NewTenant(x.admin, "Beta")
	active := x.insertAlert(x.ten, x.dev.DeviceID, "active", "high")
	resolved := x.insertAlert(x.ten, x.dev.DeviceID, "resolved", "high")
	foreign := x.insertAlert(other, "", "active", "high")
	missing := store.NewID()
	var out struct {
		Results []struct {
			AlertID string         `json:"alertId"`
			Status  string         `json:"status"`
			Alert   map[string]any `json:"alert"`
			Error   string         `json:"error"`
		} `json:"results"`
	}
	x.Must(200, x.ten.Org, "POST", api+"/alerts/bulk", map[string]any{"action": "acknowledge",
		"alertIds": []string{active, resolved, foreign, missing, "not-a-uuid"}}).JSON(t, &out)
	want := []string{"ok", "conflict", "not_found", "not_found", "not_found"}
	if len(out.Results) != len(want) {
		t.Fatalf("results = %+v", out.Results)
	}
	for i, r := range out.Results {
		if r.Status != want[i] {
			t.Fatalf("result %d = %+v, want %s", i, r, want[i])
		}
	}
	if out.Results[0].Alert["status"] != "acknowledged" || out.Results[1].Error == "" {
		t.Fatalf("results = %+v", out.Results)
	}
	var f alertRow
	x.Must(200, other.Org, "GET", api+"/alerts/"+foreign, nil).JSON(t, &f)
	if f.Status != "active" {
		t.Fatal("bulk touched another tenant's alert")
	}
	x.Must(200, x.ten.Org, "POST", api+"/alerts/bulk", map[string]any{"action": "dismiss", "alertIds": []string{active, resolved}}).JSON(t, &out)
	if out.Results[0].Status != "ok" || out.Results[1].Status != "ok" {
		t.Fatalf("bulk dismiss = %+v", out.Results)
	}
	ids := make([]string, 101)
	for i := range ids {
		ids[i] = store.NewID()
	}
	for _, body := range []map[string]any{
		{"action": "resolve", "alertIds": ids},
		{"action": "resolve", "alertIds": []string{}},
		{"action": "close", "alertIds": []string{active}},
	} {
		if r := x.Do(x.ten.Org, "POST", api+"/alerts/bulk", body); r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" {
			t.Fatalf("bulk %v = %d %s", body["action"], r.Status, r.Body)
		}
	}
	_, viewer := x.CreateUser("viewer@gale.test", access.LevelOrganization, x.ten.PartnerID, x.ten.OrgID, access.RoleOrgViewer)
	if r := x.Do(viewer, "POST", api+"/alerts/bulk", map[string]any{"action": "resolve", "alertIds": []string{active}}); r.Status != 403 {
		t.Fatalf("viewer bulk = %d", r.Status)
	}
}

func TestListFiltersPagingAndSummary(t *testing.T) {
	x := newEnv(t)
	other := x.NewTenant(x.admin, "Beta")
	second := x.enroll(x.ten, "web-02")
	ids := map[string]string{}
	for _, s := range []struct{ status, severity, device string }{
		{"active", "critical", x.dev.DeviceID}, {"active", "high", x.dev.DeviceID}, {"acknowledged", "high", second.DeviceID},
		{"suppressed", "low", second.DeviceID}, {"resolved", "critical", x.dev.DeviceID}, {"dismissed", "info", x.dev.DeviceID},
	} {
		ids[s.status+"/"+s.severity] = x.insertAlert(x.ten, s.device, s.status, s.severity)
	}
	x.insertAlert(other, "", "active", "critical")
	if got := x.alerts(x.ten.Org, ""); len(got) != 5 {
		t.Fatalf("default list = %d alerts, want 5 (dismissed hidden)", len(got))
	}
	for q, n := range map[string]int{
		"?status=dismissed": 1, "?status=active,acknowledged": 3, "?severity=critical": 2, "?severity=critical&status=active": 1,
		"?deviceId=" + second.DeviceID: 2, "?orgId=" + x.ten.OrgID: 5, "?status=active,dismissed": 3,
	} {
		if got := x.alerts(x.ten.Org, q); len(got) != n {
			t.Fatalf("%s = %d alerts, want %d", q, len(got), n)
		}
	}
	if r := x.Do(x.ten.Org, "GET", api+"/alerts?status=open", nil); r.Status != 400 {
		t.Fatalf("unknown status = %d", r.Status)
	}
	// Newest first, two per page.
	var seen []string
	cursor := ""
	for page := 0; page < 5; page++ {
		var l alertList
		x.Must(200, x.ten.Org, "GET", api+"/alerts?limit=2&cursor="+cursor, nil).JSON(t, &l)
		for _, a := range l.Data {
			seen = append(seen, a.ID)
		}
		if !l.Pagination.HasMore {
			break
		}
		cursor = l.Pagination.Cursor
	}
	if len(seen) != 5 || seen[0] != ids["resolved/critical"] || seen[4] != ids["active/critical"] {
		t.Fatalf("pages = %v", seen)
	}
	var sum struct {
		Total      int            `json:"total"`
		ByStatus   map[string]int `json:"byStatus"`
		BySeverity map[string]int `json:"bySeverity"`
	}
	x.Must(200, x.ten.Partner, "GET", api+"/alerts/summary", nil).JSON(t, &sum)
	if sum.Total != 4 || sum.ByStatus["active"] != 2 || sum.ByStatus["acknowledged"] != 1 || sum.ByStatus["suppressed"] != 1 ||
		sum.BySeverity["critical"] != 1 || sum.BySeverity["high"] != 2 || sum.BySeverity["low"] != 1 || sum.BySeverity["info"] != 0 {
		t.Fatalf("summary = %+v", sum)
	}
	x.Must(200, other.Org, "GET", api+"/alerts/summary", nil).JSON(t, &sum)
	if sum.Total != 1 {
		t.Fatalf("other tenant's summary = %+v", sum)
	}
}

func TestAlertTenancy(t *testing.T) {
	x := newEnv(t)
	other := x.NewTenant(x.admin, "Beta")
	id := x.insertAlert(x.ten, x.dev.DeviceID, "active", "high")
	org2 := x.CreateOrg(x.ten.Partner, "", "Second")
	_, org2Admin := x.CreateUser("org2@gale.test", access.LevelOrganization, x.ten.PartnerID, org2, "")
	for name, c := range map[string]apptest.Caller{"other partner": other.Partner, "other org": other.Org, "sibling org": org2Admin} {
		x.Must(404, c, "GET", api+"/alerts/"+id, nil)
		for _, action := range []string{"acknowledge", "resolve", "suppress", "dismiss"} {
			if r := x.Do(c, "POST", api+"/alerts/"+id+"/"+action, nil); r.Status != 404 {
				t.Fatalf("%s %s = %d", name, action, r.Status)
			}
		}
		if got := x.alerts(c, "?status="+strings.Join(allStatuses, ",")); len(got) != 0 {
			t.Fatalf("%s lists %+v", name, got)
		}
		if got := x.alerts(c, "?deviceId="+x.dev.DeviceID); len(got) != 0 {
			t.Fatalf("%s lists by device %+v", name, got)
		}
	}
	var a alertRow
	x.Must(200, x.ten.Org, "GET", api+"/alerts/"+id, nil).JSON(t, &a)
	if a.Status != "active" {
		t.Fatalf("status after foreign attempts = %s", a.Status)
	}
	x.Must(200, x.admin, "GET", api+"/alerts/"+id, nil)
}
