package incidents_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/domains/incidents"
	"gale/internal/platform/apperr"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
)

// fakeA speaks edr_a's API: GET /api/v1/detections?since=&cursor=&limit= with a bearer
// token; it pages two detections at a time whatever the limit.
type fakeA struct {
	mu         sync.Mutex
	token      string
	detections []map[string]any
	// fail, when set, is the status every request answers; raw, when set, the body.
	fail   int
	raw    string
	sinces []string
}

func (p *fakeA) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.Method != http.MethodGet || r.URL.Path != "/api/v1/detections" {
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusTeapot)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+p.token {
		http.Error(w, `{"error":"bad token"}`, http.StatusUnauthorized)
		return
	}
	if p.fail != 0 {
		http.Error(w, "provider down", p.fail)
		return
	}
	if p.raw != "" {
		_, _ = w.Write([]byte(p.raw))
		return
	}
	since := r.URL.Query().Get("since")
	p.sinces = append(p.sinces, since)
	var match []map[string]any
	for _, d := range p.detections {
		if since == "" || d["updated_at"].(string) >= since {
			match = append(match, d)
		}
	}
	from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	to := min(from+2, len(match))
	next := ""
	if to < len(match) {
		next = strconv.Itoa(to)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"detections": match[from:to], "next_cursor": next})
}

// fakeB speaks edr_b's API: POST /alerts/search with X-Api-Key, body {modifiedAfter, offset,
// limit}; it pages two alerts at a time whatever the limit.
type fakeB struct {
	mu     sync.Mutex
	key    string
	alerts []map[string]any
}

func (p *fakeB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/alerts/search" || r.Header.Get("X-Api-Key") != p.key {
		http.Error(w, "refused", http.StatusForbidden)
		return
	}
	var q struct {
		ModifiedAfter string `json:"modifiedAfter"`
		Offset, Limit int
	}
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	var match []map[string]any
	for _, x := range p.alerts {
		if q.ModifiedAfter == "" || x["modifiedTime"].(string) > q.ModifiedAfter {
			match = append(match, x)
		}
	}
	from := min(q.Offset, len(match))
	to := min(from+2, len(match))
	_ = json.NewEncoder(w).Encode(map[string]any{"total": len(match), "alerts": match[from:to]})
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func (f fixture) connector(t *testing.T, c apptest.Caller, body map[string]any) incidents.IncidentEDRConnector {
	t.Helper()
	var out incidents.IncidentEDRConnector
	r := f.must(t, http.StatusCreated, c, "POST", api+"/incidents/edr-connectors", body)
	if strings.Contains(string(r.Body), body["apiKey"].(string)) || strings.Contains(string(r.Body), `"apiKey"`) {
		t.Fatalf("the API key is returned: %s", r.Body)
	}
	r.JSON(t, &out)
	return out
}

func (f fixture) getConnector(t *testing.T, id string) incidents.IncidentEDRConnector {
	t.Helper()
	var out incidents.IncidentEDRConnector
	f.must(t, http.StatusOK, f.a.Partner, "GET", api+"/incidents/edr-connectors/"+id, nil).JSON(t, &out)
	return out
}

func TestEDRConnectors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.a
	web := f.e.InsertDevice(apptest.DeviceRow{PartnerID: a.PartnerID, OrgID: a.OrgID, SiteID: a.SiteID, Hostname: "web-01"})
	mail := f.e.InsertDevice(apptest.DeviceRow{PartnerID: a.PartnerID, OrgID: a.OrgID, SiteID: a.SiteID, Hostname: "mail"})
	// Bravo's device of the same name is never matched to Alpha's findings.
	f.e.InsertDevice(apptest.DeviceRow{PartnerID: f.b.PartnerID, OrgID: f.b.OrgID, SiteID: f.b.SiteID, Hostname: "laptop-7"})
	if _, err := f.e.App.DB.SQL.Exec(`UPDATE devices SET mac_address = 'aa:bb:cc:dd:ee:01' WHERE id = $1`, mail); err != nil {
		t.Fatal(err)
	}
	t0 := start.Add(-time.Hour)
	pa := &fakeA{token: "tok-a", detections: []map[string]any{
		{"id": "A-1", "hostname": "WEB-01.corp.example", "title": "Credential dumping", "severity": "critical", "status": "new",
			"detected_at": ts(t0), "updated_at": ts(t0), "console_url": "https://edr-a.example/d/A-1"},
		{"id": "A-2", "hostname": "laptop-7", "title": "Suspicious PowerShell", "severity": "high", "status": "in_progress",
			"detected_at": ts(t0.Add(time.Minute)), "updated_at": ts(t0.Add(time.Minute)), "console_url": "javascript:alert(1)"},
		{"id": "A-3", "hostname": "web-01", "title": "Port scan", "severity": "informational", "status": "new",
			"detected_at": ts(t0.Add(2 * time.Minute)), "updated_at": ts(t0.Add(2 * time.Minute))},
		{"id": "A-4", "hostname": "web-01", "title": "Adware", "severity": "medium", "status": "new",
			"detected_at": ts(t0.Add(3 * time.Minute)), "updated_at": ts(t0.Add(3 * time.Minute))},
		{"id": "A-5", "hostname": "web-01", "title": "Odd login", "severity": "low", "status": "new",
			"detected_at": ts(t0.Add(4 * time.Minute)), "updated_at": ts(t0.Add(4 * time.Minute))},
	}}
	pb := &fakeB{key: "key-b", alerts: []map[string]any{
		{"alertId": "B-10", "deviceName": "unknown-host", "macAddress": "AA-BB-CC-DD-EE-01", "name": "Ransomware behaviour", "severity": 10,
			"state": "open", "createdTime": ts(t0), "modifiedTime": ts(t0), "consoleLink": "https://edr-b.example/a/B-10"},
		{"alertId": "B-7", "deviceName": "WEB-01", "name": "Lateral movement", "severity": 7, "state": "open", "createdTime": ts(t0),
			"modifiedTime": ts(t0)},
		{"alertId": "B-5", "deviceName": "nowhere", "name": "PUP", "severity": 5, "state": "open", "createdTime": ts(t0), "modifiedTime": ts(t0)},
		{"alertId": "B-2", "deviceName": "mail", "name": "Tracking cookie", "severity": 2, "state": "closed", "createdTime": ts(t0),
			"modifiedTime": ts(t0)},
		{"alertId": "B-x", "name": "bad severity", "severity": "high", "createdTime": ts(t0), "modifiedTime": ts(t0)},
		{"alertId": "B-11", "name": "out of range", "severity": 11, "createdTime": ts(t0), "modifiedTime": ts(t0)},
	}}
	srvA, srvB := httptest.NewServer(pa), httptest.NewServer(pb)
	t.Cleanup(srvA.Close)
	t.Cleanup(srvB.Close)

	ca := f.connector(t, a.Partner, map[string]any{"orgId": a.OrgID, "name": "EDR A", "provider": "edr_a", "baseUrl": srvA.URL + "/",
		"apiKey": "tok-a", "pollIntervalSeconds": 120})
	cb := f.connector(t, a.Partner, map[string]any{"orgId": a.OrgID, "name": "EDR B", "provider": "edr_b", "baseUrl": srvB.URL,
		"apiKey": "key-b"})
	if !ca.APIKeySet || ca.PollIntervalSeconds != 120 || cb.PollIntervalSeconds != 300 || !ca.Enabled || ca.BaseURL != srvA.URL ||
		ca.NextPollAt == nil || ca.LastPolledAt != nil {
		t.Fatalf("connectors = %+v %+v", ca, cb)
	}
	var sealed string
	if err := f.e.App.DB.SQL.QueryRow(`SELECT api_key FROM incident_edr_connectors WHERE id = $1`, ca.ID).Scan(&sealed); err != nil ||
		sealed == "tok-a" || strings.Contains(sealed, "tok-a") {
		t.Fatalf("the key is stored as %q (%v)", sealed, err)
	}

	t.Run("validation", func(t *testing.T) {
		base := func(mod map[string]any) map[string]any {
			b := map[string]any{"orgId": a.OrgID, "name": "x", "provider": "edr_a", "baseUrl": srvA.URL, "apiKey": "k"}
			for k, v := range mod {
				if v == nil {
					delete(b, k)
				} else {
					b[k] = v
				}
			}
			return b
		}
		for _, mod := range []map[string]any{{"provider": "edr_c"}, {"baseUrl": "ftp://x"}, {"baseUrl": "not a url"}, {"apiKey": nil},
			{"apiKey": ""}, {"pollIntervalSeconds": 10}, {"pollIntervalSeconds": 90000}, {"orgId": f.b.OrgID}, {"name": ""}, {"apiKeyx": "y"}} {
			f.mustCode(t, http.StatusBadRequest, apperr.CodeValidation, a.Partner, "POST", api+"/incidents/edr-connectors", base(mod))
		}
		f.mustCode(t, http.StatusBadRequest, apperr.CodeValidation, a.Partner, "PATCH", api+"/incidents/edr-connectors/"+ca.ID,
			map[string]any{"pollIntervalSeconds": 5})
	})

	t.Run("test route", func(t *testing.T) {
		var res incidents.IncidentEDRConnectorTest
		f.must(t, http.StatusOK, a.Partner, "POST", api+"/incidents/edr-connectors/"+ca.ID+"/test", nil).JSON(t, &res)
		if !res.OK {
			t.Fatalf("test edr_a = %+v", res)
		}
		f.must(t, http.StatusOK, a.Partner, "POST", api+"/incidents/edr-connectors/"+cb.ID+"/test", nil).JSON(t, &res)
		if !res.OK {
			t.Fatalf("test edr_b = %+v", res)
		}
	})

	t.Run("poll maps findings and severities", func(t *testing.T) {
		f.poll(t)
		got := f.feed(t, a.Partner, "kind=finding&limit=100")
		rows := map[string]incidents.IncidentFeedRow{}
		for _, r := range got.Data {
			rows[r.SourceID] = r
		}
		type want struct{ source, sev, device, edr, link string }
		for id, w := range map[string]want{
			"A-1":  {"edr_a", "p1", web, "new", "https://edr-a.example/d/A-1"},
			"A-2":  {"edr_a", "p2", "", "in_progress", ""},
			"A-3":  {"edr_a", "p4", web, "new", ""},
			"A-4":  {"edr_a", "p3", web, "new", ""},
			"A-5":  {"edr_a", "p4", web, "new", ""},
			"B-10": {"edr_b", "p1", mail, "open", "https://edr-b.example/a/B-10"},
			"B-7":  {"edr_b", "p2", web, "open", ""},
			"B-5":  {"edr_b", "p3", "", "open", ""},
			"B-2":  {"edr_b", "p4", mail, "closed", ""},
		} {
			r, ok := rows[id]
			if !ok || r.Source != w.source || r.Severity != w.sev || r.DeviceID != w.device || r.EDRStatus == nil || *r.EDRStatus != w.edr ||
				(w.link == "") != (r.LinkOut == nil) || (r.LinkOut != nil && *r.LinkOut != w.link) || r.Kind != "finding" || r.Status != "new" {
				t.Errorf("finding %s = %+v, want %+v", id, r, w)
			}
		}
		if len(got.Data) != 9 || got.Pagination.Total != 9 {
			t.Fatalf("findings = %d, want 9 (malformed ones skipped)", len(got.Data))
		}
		if got.Data[0].Severity != "p1" || got.Data[len(got.Data)-1].Severity != "p4" {
			t.Fatalf("feed order: %+v", got.Data)
		}
		ca2, cb2 := f.getConnector(t, ca.ID), f.getConnector(t, cb.ID)
		if ca2.LastError != nil || ca2.LastSuccessAt == nil || ca2.FindingsSeen != 5 || ca2.ConsecutiveFailures != 0 ||
			!ca2.NextPollAt.Equal(ca2.LastPolledAt.Add(120*time.Second)) {
			t.Fatalf("edr_a connector after poll = %+v", ca2)
		}
		if cb2.LastError == nil || !strings.Contains(*cb2.LastError, "2 malformed") || cb2.FindingsSeen != 4 {
			t.Fatalf("edr_b connector after poll = %+v", cb2)
		}
		// Not due again until its interval passed: nothing is asked.
		n := len(pa.sinces)
		f.poll(t)
		if len(pa.sinces) != n {
			t.Fatalf("polled before the interval passed")
		}
		if got := f.feed(t, f.b.Partner, ""); got.Pagination.Total != 0 {
			t.Fatalf("Bravo sees Alpha's findings")
		}
	})

	t.Run("status updates and promotion carry over", func(t *testing.T) {
		rows := f.feed(t, a.Partner, "source=edr_a&limit=100").Data
		var a1 string
		for _, r := range rows {
			if r.SourceID == "A-1" {
				a1 = r.ID
			}
		}
		var inc incidents.Incident
		f.must(t, http.StatusCreated, a.Partner, "POST", api+"/incidents/findings/"+a1+"/promote", nil).JSON(t, &inc)
		pa.mu.Lock()
		pa.detections[0]["status"] = "resolved"
		pa.detections[0]["updated_at"] = ts(start)
		pa.detections[1]["status"] = "false_positive"
		pa.detections[1]["updated_at"] = ts(start)
		pa.mu.Unlock()
		f.clk.Advance(121 * time.Second)
		f.poll(t)
		pa.mu.Lock()
		last := pa.sinces[len(pa.sinces)-1]
		pa.mu.Unlock()
		if last != ts(t0.Add(4*time.Minute)) {
			t.Fatalf("edr_a polled since %q, want the newest change seen", last)
		}
		var x incidents.Incident
		f.must(t, http.StatusOK, a.Partner, "GET", api+"/incidents/"+inc.ID, nil).JSON(t, &x)
		if x.EDRStatus == nil || *x.EDRStatus != "resolved" {
			t.Fatalf("promoted incident's edrStatus = %v", x.EDRStatus)
		}
		got := f.feed(t, a.Partner, "source=edr_a&limit=100")
		for _, r := range got.Data {
			if r.SourceID == "A-1" {
				t.Fatalf("the promoted finding came back to the feed")
			}
			if r.SourceID == "A-2" && *r.EDRStatus != "false_positive" {
				t.Fatalf("A-2 edrStatus = %v", *r.EDRStatus)
			}
		}
		if got.Pagination.Total != 4 {
			t.Fatalf("edr_a findings = %d, want 4", got.Pagination.Total)
		}
	})

	t.Run("errors are recorded with backoff", func(t *testing.T) {
		pa.mu.Lock()
		pa.fail = http.StatusInternalServerError
		pa.mu.Unlock()
		f.clk.Advance(121 * time.Second)
		f.poll(t)
		c := f.getConnector(t, ca.ID)
		if c.LastError == nil || !strings.Contains(*c.LastError, "HTTP 500") || c.ConsecutiveFailures != 1 ||
			!c.NextPollAt.Equal(c.LastPolledAt.Add(120*time.Second)) {
			t.Fatalf("after a failure = %+v", c)
		}
		f.clk.Advance(121 * time.Second)
		f.poll(t)
		c = f.getConnector(t, ca.ID)
		if c.ConsecutiveFailures != 2 || !c.NextPollAt.Equal(c.LastPolledAt.Add(240*time.Second)) {
			t.Fatalf("after two failures = %+v", c)
		}
		pa.mu.Lock()
		pa.fail, pa.raw = 0, `{"detections": [ {"id": `
		pa.mu.Unlock()
		f.clk.Advance(241 * time.Second)
		f.poll(t)
		c = f.getConnector(t, ca.ID)
		if c.LastError == nil || !strings.Contains(*c.LastError, "not the expected JSON") || c.ConsecutiveFailures != 3 {
			t.Fatalf("after a bad payload = %+v", c)
		}
		pa.mu.Lock()
		pa.raw = `{"detections": [42, "x", {"id": 7}, {"id": "A-9", "severity": "bogus"}], "next_cursor": ""}`
		pa.mu.Unlock()
		f.clk.Advance(time.Hour)
		f.poll(t)
		c = f.getConnector(t, ca.ID)
		if c.ConsecutiveFailures != 0 || c.LastError == nil || !strings.Contains(*c.LastError, "4 malformed") {
			t.Fatalf("after malformed items = %+v", c)
		}
		pa.mu.Lock()
		pa.raw = ""
		pa.mu.Unlock()
		// A wrong key: 401 recorded; the test route says so without storing.
		f.must(t, http.StatusOK, a.Partner, "PATCH", api+"/incidents/edr-connectors/"+ca.ID, map[string]any{"apiKey": "wrong"})
		var res incidents.IncidentEDRConnectorTest
		f.must(t, http.StatusOK, a.Partner, "POST", api+"/incidents/edr-connectors/"+ca.ID+"/test", nil).JSON(t, &res)
		if res.OK || !strings.Contains(res.Message, "HTTP 401") {
			t.Fatalf("test with a wrong key = %+v", res)
		}
		f.poll(t) // due at once after a key change
		c = f.getConnector(t, ca.ID)
		if c.LastError == nil || !strings.Contains(*c.LastError, "HTTP 401") || c.ConsecutiveFailures != 1 {
			t.Fatalf("after a wrong key = %+v", c)
		}
		// A provider that cannot be reached.
		dead := httptest.NewServer(http.NotFoundHandler())
		dead.Close()
		f.must(t, http.StatusOK, a.Partner, "PATCH", api+"/incidents/edr-connectors/"+cb.ID, map[string]any{"baseUrl": dead.URL})
		f.poll(t)
		if c := f.getConnector(t, cb.ID); c.LastError == nil || !strings.Contains(*c.LastError, "could not be reached") {
			t.Fatalf("unreachable provider = %+v", c)
		}
	})

	t.Run("list, disable, tenancy, delete", func(t *testing.T) {
		var list struct {
			Data []incidents.IncidentEDRConnector
		}
		f.must(t, http.StatusOK, a.Partner, "GET", api+"/incidents/edr-connectors", nil).JSON(t, &list)
		if len(list.Data) != 2 {
			t.Fatalf("list = %+v", list.Data)
		}
		f.must(t, http.StatusOK, f.b.Partner, "GET", api+"/incidents/edr-connectors", nil).JSON(t, &list)
		if len(list.Data) != 0 {
			t.Fatalf("Bravo lists Alpha's connectors: %+v", list.Data)
		}
		for _, c := range []apptest.Caller{f.b.Partner, f.b.Org} {
			p := api + "/incidents/edr-connectors/" + ca.ID
			f.mustCode(t, http.StatusNotFound, apperr.CodeNotFound, c, "GET", p, nil)
			f.mustCode(t, http.StatusNotFound, apperr.CodeNotFound, c, "PATCH", p, map[string]any{"enabled": false})
			f.mustCode(t, http.StatusNotFound, apperr.CodeNotFound, c, "POST", p+"/test", nil)
			f.mustCode(t, http.StatusNotFound, apperr.CodeNotFound, c, "DELETE", p, nil)
		}
		f.mustCode(t, http.StatusNotFound, apperr.CodeNotFound, a.Partner, "GET", api+"/incidents/edr-connectors/"+store.NewID(), nil)
		var off incidents.IncidentEDRConnector
		f.must(t, http.StatusOK, a.Partner, "PATCH", api+"/incidents/edr-connectors/"+cb.ID, map[string]any{"enabled": false}).JSON(t, &off)
		if off.Enabled || off.NextPollAt != nil {
			t.Fatalf("disabled = %+v", off)
		}
		f.must(t, http.StatusNoContent, a.Partner, "DELETE", api+"/incidents/edr-connectors/"+ca.ID, nil)
		f.mustCode(t, http.StatusNotFound, apperr.CodeNotFound, a.Partner, "GET", api+"/incidents/edr-connectors/"+ca.ID, nil)
		// Its findings went; the promoted one's incident stayed.
		if got := f.feed(t, a.Partner, "source=edr_a"); got.Pagination.Total != 0 {
			t.Fatalf("edr_a findings after delete = %d", got.Pagination.Total)
		}
		if got := f.feed(t, a.Partner, "kind=tracked"); got.Pagination.Total != 1 {
			t.Fatalf("tracked after delete = %d", got.Pagination.Total)
		}
	})
}
