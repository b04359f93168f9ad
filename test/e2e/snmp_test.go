package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"gale/internal/agent/snmp/snmpdtest"
	"gale/internal/app"
	"gale/internal/domains/alerts"
	"gale/internal/domains/snmp"
	"gale/internal/testkit/apptest"
)

// TestSNMPOnARealAgent polls a real snmpd (its own configuration on a loopback port) through a
// real agent: v2c and v3 authPriv (SHA/AES) values equal snmpwalk's, a threshold on a value
// the test changes (a pass script) opens and resolves its alert, and a wrong community fails,
// backs off and ends offline with an alert.
func TestSNMPOnARealAgent(t *testing.T) {
	daemon := snmpdtest.Start(t)
	node := apptest.New(t)
	agent := startAgentWith(t, node, nil)
	admin := node.Admin()
	var probe struct {
		OrgID  string `json:"orgId"`
		SiteID string `json:"siteId"`
	}
	node.Must(http.StatusOK, admin, "GET", "/api/v1/devices/"+agent.deviceID, nil).JSON(t, &probe)

	// The template: the system group's scalars, the first interface's row, the pass value.
	oids := []map[string]any{{"oid": snmpdtest.PassOID, "name": "testValue", "type": "integer"}}
	for i := 1; i <= 7; i++ {
		oids = append(oids, map[string]any{"oid": fmt.Sprintf("1.3.6.1.2.1.1.%d.0", i), "name": fmt.Sprintf("sys%d", i), "type": "string"})
	}
	for oid := range daemon.Walk(t, daemon.V2cArgs(), "1.3.6.1.2.1.2.2.1") {
		if strings.HasSuffix(oid, ".1") && strings.Count(oid, ".") == 10 {
			oids = append(oids, map[string]any{"oid": oid, "name": oid, "type": "gauge"})
		}
	}
	var tpl snmp.SNMPTemplate
	node.Must(http.StatusCreated, admin, "POST", "/api/v1/snmp/templates", map[string]any{"orgId": probe.OrgID, "name": "Test agent",
		"oids": oids}).JSON(t, &tpl)
	create := func(host string, body map[string]any) snmp.SNMPDevice {
		t.Helper()
		body["orgId"], body["siteId"], body["name"], body["ipAddress"], body["port"], body["templateId"] =
			probe.OrgID, probe.SiteID, "snmpd at "+host, host, daemon.Port, tpl.ID
		var d snmp.SNMPDevice
		node.Must(http.StatusCreated, admin, "POST", "/api/v1/snmp/devices", body).JSON(t, &d)
		return d
	}
	v2 := create(snmpdtest.Hosts[0], map[string]any{"version": "v2c", "credentials": map[string]any{"community": snmpdtest.Community}})
	v3 := create(snmpdtest.Hosts[1], map[string]any{"version": "v3", "credentials": map[string]any{"username": snmpdtest.User,
		"authProtocol": "SHA", "authPassword": snmpdtest.AuthPass, "privProtocol": "AES", "privPassword": snmpdtest.PrivPass}})
	wrong := create(snmpdtest.Hosts[2], map[string]any{"version": "v2c", "credentials": map[string]any{"community": "not-the-community"}})

	// One round of the dispatcher polls all three through the agent.
	daemon.SetValue(t, 10)
	if err := app.Service[*snmp.Service](node.App).Dispatch(context.Background()); err != nil {
		t.Fatal(err)
	}
	device := func(id string) snmp.SNMPDevice {
		var d snmp.SNMPDevice
		node.Must(http.StatusOK, admin, "GET", "/api/v1/snmp/devices/"+id, nil).JSON(t, &d)
		return d
	}
	for _, d := range []snmp.SNMPDevice{v2, v3} {
		if got := device(d.ID); got.Status != snmp.StatusOnline {
			t.Fatalf("%s after the dispatch: %+v", d.Name, got)
		}
	}
	first := device(wrong.ID)
	if first.ConsecutiveFailures != 1 || first.Status != snmp.StatusUnknown || first.LastError == nil || !strings.Contains(*first.LastError, "timeout") ||
		!first.NextPollAt.Equal(first.LastPollAt.Add(snmp.Backoff(300e9, 1))) {
		t.Fatalf("wrong community after the dispatch: %+v", first)
	}

	// The values equal snmpwalk's (counters and time move between the two reads).
	for _, c := range []struct {
		d    snmp.SNMPDevice
		args []string
	}{{v2, daemon.V2cArgs()}, {v3, daemon.V3Args()}} {
		var latest snmp.SNMPLatest
		node.Must(http.StatusOK, admin, "GET", "/api/v1/snmp/metrics/"+c.d.ID, nil).JSON(t, &latest)
		want := daemon.Walk(t, c.args, "1.3.6.1.2.1.1")
		for oid, v := range daemon.Walk(t, c.args, "1.3.6.1.2.1.2.2.1") {
			want[oid] = v
		}
		compared := 0
		for _, v := range latest.Values {
			if strings.HasPrefix(v.Type, "counter") || v.Type == "timeticks" || v.OID == snmpdtest.PassOID {
				continue
			}
			got := ""
			if v.Value != nil {
				got = strings.TrimSuffix(fmt.Sprintf("%f", *v.Value), ".000000")
			} else if v.Text != nil {
				got = *v.Text
			}
			if got != want[v.OID] {
				t.Errorf("%s %s (%s) = %q, snmpwalk -On says %q", c.d.Version, v.OID, v.Type, got, want[v.OID])
			}
			compared++
		}
		if compared < 10 {
			t.Fatalf("%s: only %d values compared: %+v", c.d.Version, compared, latest.Values)
		}
	}

	// A threshold on the pass value opens its alert as the value rises and resolves it as it falls.
	var th snmp.SNMPThreshold
	node.Must(http.StatusCreated, admin, "POST", "/api/v1/snmp/thresholds", map[string]any{"deviceId": v3.ID, "oid": snmpdtest.PassOID,
		"operator": "gt", "value": 50, "severity": "high"}).JSON(t, &th)
	thresholdAlerts := func(status string) int {
		var list struct{ Data []alerts.Alert }
		node.Must(http.StatusOK, admin, "GET", "/api/v1/alerts?sourceType=snmp_device&sourceId="+v3.ID+"&status="+status, nil).JSON(t, &list)
		return len(list.Data)
	}
	poll := func(id string) *apptest.Response {
		return node.Do(admin, "POST", "/api/v1/snmp/devices/"+id+"/poll", nil)
	}
	if r := poll(v3.ID); r.Status != http.StatusOK || thresholdAlerts("active") != 0 {
		t.Fatalf("poll at 10 = %d %s", r.Status, r.Body)
	}
	daemon.SetValue(t, 99)
	var out snmp.SNMPPollOutcome
	poll(v3.ID).JSON(t, &out)
	var seen bool
	for _, v := range out.Values {
		seen = seen || (v.OID == snmpdtest.PassOID && v.Value != nil && *v.Value == 99)
	}
	if !seen || thresholdAlerts("active") != 1 {
		var ths []snmp.SNMPThreshold
		node.Must(http.StatusOK, admin, "GET", "/api/v1/snmp/thresholds/"+v3.ID, nil).JSON(t, &ths)
		all := node.Must(http.StatusOK, admin, "GET", "/api/v1/alerts?sourceType=snmp_device&sourceId="+v3.ID, nil)
		t.Fatalf("poll at 99: seen %v, alerts %d, thresholds %+v, %s", seen, thresholdAlerts("active"), ths, all.Body)
	}
	daemon.SetValue(t, 5)
	if r := poll(v3.ID); r.Status != http.StatusOK || thresholdAlerts("active") != 0 || thresholdAlerts("resolved") != 1 {
		t.Fatalf("poll at 5 = %d, active %d, resolved %d", r.Status, thresholdAlerts("active"), thresholdAlerts("resolved"))
	}

	// The test route names the failure; the wrong community fails twice more and is offline.
	var sys snmp.SNMPTestResult
	node.Must(http.StatusOK, admin, "POST", "/api/v1/snmp/devices/"+v3.ID+"/test", nil).JSON(t, &sys)
	if sys.SysLocation == nil || *sys.SysLocation != "Gale test lab" || sys.SysDescr == nil {
		t.Fatalf("test = %+v", sys)
	}
	if r := node.Do(admin, "POST", "/api/v1/snmp/devices/"+v3.ID+"/test", map[string]any{"credentials": map[string]any{"username": snmpdtest.User,
		"authProtocol": "SHA", "authPassword": "wrong-password", "privProtocol": "AES", "privPassword": snmpdtest.PrivPass}}); r.Status != 502 ||
		r.ErrorCode() != snmp.CodeSNMPAuth {
		t.Fatalf("test with a wrong password = %d %s", r.Status, r.Body)
	}
	for i := 2; i <= 3; i++ {
		if r := poll(wrong.ID); r.Status != 504 || r.ErrorCode() != snmp.CodeSNMPTimeout {
			t.Fatalf("poll %d with a wrong community = %d %s", i, r.Status, r.Body)
		}
	}
	last := device(wrong.ID)
	if last.Status != snmp.StatusOffline || last.ConsecutiveFailures != 3 || !last.NextPollAt.Equal(last.LastPollAt.Add(snmp.Backoff(300e9, 3))) {
		t.Fatalf("wrong community after three failures: %+v", last)
	}
	var offline struct{ Data []alerts.Alert }
	node.Must(http.StatusOK, admin, "GET", "/api/v1/alerts?sourceType=snmp_device&sourceId="+wrong.ID, nil).JSON(t, &offline)
	if len(offline.Data) != 1 || !strings.Contains(offline.Data[0].Title, "offline") {
		t.Fatalf("offline alerts = %+v", offline.Data)
	}
}
