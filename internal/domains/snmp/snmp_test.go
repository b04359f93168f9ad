package snmp_test

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/agent/capability"
	agentsnmp "gale/internal/agent/snmp"
	"gale/internal/app"
	"gale/internal/domains/alerts"
	"gale/internal/domains/snmp"
	"gale/internal/platform/access"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

const api = "/api/v1"

var start = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

type fixture struct {
	e   *apptest.Env
	clk *clock.Fake
	a   apptest.Tenant
	b   apptest.Tenant
}

func newFixture(t *testing.T) fixture {
	clk := clock.NewFake(start)
	e := apptest.New(t, apptest.WithClock(clk))
	admin := e.Admin()
	return fixture{e: e, clk: clk, a: e.NewTenant(admin, "Alpha"), b: e.NewTenant(admin, "Bravo")}
}

func (f fixture) service() *snmp.Service { return app.Service[*snmp.Service](f.e.App) }

func v2c(ten apptest.Tenant, ip string) map[string]any {
	return map[string]any{"siteId": ten.SiteID, "name": "Switch " + ip, "ipAddress": ip, "version": "v2c",
		"credentials": map[string]any{"community": "s3cret-community"}, "templateId": snmp.TemplateInterfaces}
}

func v3(ten apptest.Tenant, ip string) map[string]any {
	return map[string]any{"siteId": ten.SiteID, "name": "Router " + ip, "ipAddress": ip, "version": "v3",
		"credentials": map[string]any{"username": "ops", "authProtocol": "SHA", "authPassword": "auth-pass-123",
			"privProtocol": "AES", "privPassword": "priv-pass-456"}, "templateId": snmp.TemplateGenericHost}
}

func (f fixture) create(c apptest.Caller, body map[string]any) snmp.SNMPDevice {
	f.e.T.Helper()
	var d snmp.SNMPDevice
	f.e.Must(http.StatusCreated, c, "POST", api+"/snmp/devices", body).JSON(f.e.T, &d)
	return d
}

// secrets are the credentials the fixtures send; no response may carry them.
var secretWords = []string{"s3cret-community", "auth-pass-123", "priv-pass-456", "community\"", "authPassword", "privPassword"}

func noSecrets(t *testing.T, r *apptest.Response) {
	t.Helper()
	for _, w := range secretWords {
		if strings.Contains(string(r.Body), w) {
			t.Fatalf("a response carries %q: %s", w, r.Body)
		}
	}
}

func num(f float64) *float64 { return &f }

func text(s string) *string { return &s }

func value(oid, typ string, n float64) agentproto.SNMPValue {
	return agentproto.SNMPValue{OID: oid, Type: typ, Number: num(n)}
}

func (f fixture) ingest(at time.Time, results ...agentproto.SNMPTargetResult) {
	f.e.T.Helper()
	f.ingestBy(at, "", results...)
}

// ingestBy stores results of a poll by the agent of device probe.
func (f fixture) ingestBy(at time.Time, probe string, results ...agentproto.SNMPTargetResult) {
	f.e.T.Helper()
	if err := f.service().Ingest(context.Background(), at, probe, results); err != nil {
		f.e.T.Fatal(err)
	}
}

func (f fixture) latest(c apptest.Caller, id string) snmp.SNMPLatest {
	f.e.T.Helper()
	var l snmp.SNMPLatest
	f.e.Must(200, c, "GET", api+"/snmp/metrics/"+id, nil).JSON(f.e.T, &l)
	return l
}

func (f fixture) device(c apptest.Caller, id string) snmp.SNMPDevice {
	f.e.T.Helper()
	var d snmp.SNMPDevice
	f.e.Must(200, c, "GET", api+"/snmp/devices/"+id, nil).JSON(f.e.T, &d)
	return d
}

// sourceAlerts lists the alerts of an SNMP device, every status.
func (f fixture) sourceAlerts(id string) []alerts.Alert {
	f.e.T.Helper()
	ctx := access.WithPrincipal(context.Background(), &access.Principal{Scope: access.SystemScope()})
	list, _, _, err := app.Service[*alerts.Service](f.e.App).List(ctx, alerts.ListFilter{SourceType: alerts.SourceSNMPDevice, SourceID: id,
		Statuses: []string{alerts.StatusActive, alerts.StatusResolved}}, store.Page{Limit: 100})
	if err != nil {
		f.e.T.Fatal(err)
	}
	return list
}

func TestDevicesCreateReadChangeDeleteWithoutSecrets(t *testing.T) {
	f := newFixture(t)
	r := f.e.Must(201, f.a.Org, "POST", api+"/snmp/devices", v2c(f.a, "192.0.2.10"))
	noSecrets(t, r)
	var d snmp.SNMPDevice
	r.JSON(t, &d)
	if d.OrgID != f.a.OrgID || d.PartnerID != f.a.PartnerID || d.Port != 161 || d.IntervalSeconds != 300 || !d.Enabled ||
		d.Status != snmp.StatusUnknown || !d.HasCredentials || d.Username != nil || d.Version != "v2c" || d.CreatedBy == nil {
		t.Fatalf("created %+v", d)
	}
	r = f.e.Must(201, f.a.Partner, "POST", api+"/snmp/devices", mergeMap(v3(f.a, "2001:db8::1"), map[string]any{"orgId": f.a.OrgID,
		"port": 1161, "intervalSeconds": 60}))
	noSecrets(t, r)
	var d3 snmp.SNMPDevice
	r.JSON(t, &d3)
	if d3.Username == nil || *d3.Username != "ops" || *d3.AuthProtocol != "SHA" || *d3.PrivProtocol != "AES" || d3.Port != 1161 ||
		d3.IPAddress != "2001:db8::1" {
		t.Fatalf("created v3 %+v", d3)
	}
	for _, path := range []string{"/snmp/devices", "/snmp/devices/" + d.ID, "/snmp/devices/" + d3.ID, "/snmp/devices?search=router"} {
		noSecrets(t, f.e.Must(200, f.a.Partner, "GET", api+path, nil))
	}
	var list struct{ Data []snmp.SNMPDevice }
	f.e.Must(200, f.a.Org, "GET", api+"/snmp/devices?search=2001:db8", nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != d3.ID {
		t.Fatalf("search by address = %+v", list.Data)
	}
	f.e.Must(200, f.a.Org, "GET", api+"/snmp/devices?status=unknown&siteId="+f.a.SiteID+"&limit=1", nil).JSON(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != d3.ID {
		t.Fatalf("first page = %+v", list.Data)
	}
	if r := f.e.Do(f.a.Org, "POST", api+"/snmp/devices", v2c(f.a, "192.0.2.10")); r.Status != 409 || r.ErrorCode() != snmp.CodeDeviceExists {
		t.Fatalf("same address twice = %d %s", r.Status, r.Body)
	}
	r = f.e.Must(200, f.a.Org, "PATCH", api+"/snmp/devices/"+d.ID, map[string]any{"name": "Core switch", "version": "v3",
		"credentials": map[string]any{"username": "ops", "authProtocol": "SHA-256", "authPassword": "auth-pass-123"}})
	noSecrets(t, r)
	r.JSON(t, &d)
	if d.Name != "Core switch" || d.Version != "v3" || *d.Username != "ops" || *d.AuthProtocol != "SHA-256" || d.PrivProtocol != nil {
		t.Fatalf("changed %+v", d)
	}
	f.e.Must(200, f.a.Org, "PATCH", api+"/snmp/devices/"+d.ID, map[string]any{"enabled": false}).JSON(t, &d)
	if d.Enabled {
		t.Fatal("still enabled")
	}
	f.e.Must(204, f.a.Org, "DELETE", api+"/snmp/devices/"+d.ID, nil)
	f.e.Must(404, f.a.Org, "GET", api+"/snmp/devices/"+d.ID, nil)
}

func mergeMap(base, over map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

func TestDeviceValidation(t *testing.T) {
	f := newFixture(t)
	good := mergeMap(v2c(f.a, "192.0.2.20"), map[string]any{"orgId": f.a.OrgID})
	cases := map[string]map[string]any{
		"bad address":            {"ipAddress": "switch.example"},
		"multicast address":      {"ipAddress": "224.0.0.1"},
		"port out of range":      {"port": 70000},
		"port 0":                 {"port": 0},
		"interval too short":     {"intervalSeconds": 10},
		"interval 0":             {"intervalSeconds": 0},
		"unknown version":        {"version": "v4"},
		"v2c without community":  {"credentials": map[string]any{}},
		"v2c with a v3 user":     {"credentials": map[string]any{"community": "x", "username": "ops"}},
		"v3 without user":        mergeMap(v3(f.a, "192.0.2.20"), map[string]any{"credentials": map[string]any{"authProtocol": "SHA", "authPassword": "12345678"}}),
		"v3 with community":      mergeMap(v3(f.a, "192.0.2.20"), map[string]any{"credentials": map[string]any{"username": "ops", "community": "x"}}),
		"v3 short auth password": mergeMap(v3(f.a, "192.0.2.20"), map[string]any{"credentials": map[string]any{"username": "ops", "authProtocol": "SHA", "authPassword": "short"}}),
		"v3 privacy without auth": mergeMap(v3(f.a, "192.0.2.20"), map[string]any{"credentials": map[string]any{"username": "ops", "privProtocol": "AES",
			"privPassword": "12345678"}}),
		"v3 unknown protocol": mergeMap(v3(f.a, "192.0.2.20"), map[string]any{"credentials": map[string]any{"username": "ops", "authProtocol": "SHA-512",
			"authPassword": "12345678"}}),
		"unknown template":       {"templateId": store.NewID()},
		"another tenant's site":  {"siteId": f.b.SiteID},
		"probe of another site":  {"probeDeviceId": f.e.InsertDevice(apptest.DeviceRow{PartnerID: f.b.PartnerID, OrgID: f.b.OrgID, SiteID: f.b.SiteID, Hostname: "x"})},
		"missing name":           {"name": nil},
		"another tenant's orgId": {"orgId": f.b.OrgID},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			r := f.e.Do(f.a.Partner, "POST", api+"/snmp/devices", mergeMap(good, change))
			if r.Status != 400 || r.ErrorCode() != "VALIDATION_ERROR" {
				t.Fatalf("= %d %s", r.Status, r.Body)
			}
		})
	}
	d := f.create(f.a.Org, good)
	for name, body := range map[string]map[string]any{
		"version without credentials": {"version": "v3"},
		"credentials of another kind": {"credentials": map[string]any{"username": "ops"}},
		"interval":                    {"intervalSeconds": 5},
		"port 0":                      {"port": 0},
		"address":                     {"ipAddress": "300.1.1.1"},
	} {
		if r := f.e.Do(f.a.Org, "PATCH", api+"/snmp/devices/"+d.ID, body); r.Status != 400 {
			t.Errorf("PATCH %s = %d %s", name, r.Status, r.Body)
		}
	}
}

func TestTemplatesBuiltInReadOnlyAndInUse(t *testing.T) {
	f := newFixture(t)
	var list struct {
		Data       []snmp.SNMPTemplate
		Pagination struct{ HasMore bool }
	}
	f.e.Must(200, f.a.Org, "GET", api+"/snmp/templates", nil).JSON(t, &list)
	if len(list.Data) != 4 || !list.Data[0].BuiltIn || list.Data[0].ID != snmp.TemplateGenericHost {
		t.Fatalf("templates = %+v", list.Data)
	}
	for _, tpl := range list.Data {
		if len(tpl.OIDs) == 0 {
			t.Fatalf("built-in %s has no OIDs", tpl.Name)
		}
	}
	for _, m := range []string{"PATCH", "DELETE"} {
		if r := f.e.Do(f.a.Org, m, api+"/snmp/templates/"+snmp.TemplatePrinter, map[string]any{"name": "x"}); r.Status != 403 ||
			r.ErrorCode() != snmp.CodeBuiltInTemplate {
			t.Fatalf("%s built-in = %d %s", m, r.Status, r.Body)
		}
	}
	body := map[string]any{"name": "UPS", "oids": []map[string]any{
		{"oid": ".1.3.6.1.2.1.33.1.2.4.0", "name": "upsBatteryCharge", "label": "Battery", "unit": "%", "type": "gauge"},
		{"oid": "1.3.6.1.2.1.33.1.4.4.1.5.1", "name": "upsOutputLoad", "type": "gauge"}}}
	var tpl snmp.SNMPTemplate
	f.e.Must(201, f.a.Org, "POST", api+"/snmp/templates", body).JSON(t, &tpl)
	if tpl.BuiltIn || *tpl.OrgID != f.a.OrgID || len(tpl.OIDs) != 2 || tpl.OIDs[0].OID != "1.3.6.1.2.1.33.1.2.4.0" || tpl.OIDs[1].Label != "upsOutputLoad" {
		t.Fatalf("created %+v", tpl)
	}
	if r := f.e.Do(f.a.Org, "POST", api+"/snmp/templates", body); r.Status != 409 {
		t.Fatalf("same name twice = %d %s", r.Status, r.Body)
	}
	for name, oids := range map[string][]map[string]any{
		"not numeric":    {{"oid": "sysUpTime.0", "name": "a", "type": "gauge"}},
		"duplicate OID":  {{"oid": "1.3.6.1.1", "name": "a", "type": "gauge"}, {"oid": ".1.3.6.1.1", "name": "b", "type": "gauge"}},
		"duplicate name": {{"oid": "1.3.6.1.1", "name": "a", "type": "gauge"}, {"oid": "1.3.6.1.2", "name": "a", "type": "gauge"}},
		"bad first arc":  {{"oid": "3.1", "name": "a", "type": "gauge"}},
		"no OIDs":        {},
	} {
		if r := f.e.Do(f.a.Org, "POST", api+"/snmp/templates", map[string]any{"name": name, "oids": oids}); r.Status != 400 {
			t.Errorf("template with %s = %d %s", name, r.Status, r.Body)
		}
	}
	f.e.Must(200, f.a.Org, "PATCH", api+"/snmp/templates/"+tpl.ID, map[string]any{"description": "APC units",
		"oids": []map[string]any{{"oid": "1.3.6.1.2.1.33.1.2.4.0", "name": "charge", "type": "gauge"}}}).JSON(t, &tpl)
	if tpl.Description != "APC units" || len(tpl.OIDs) != 1 || tpl.OIDs[0].Name != "charge" {
		t.Fatalf("changed %+v", tpl)
	}
	d := f.create(f.a.Org, mergeMap(v2c(f.a, "192.0.2.30"), map[string]any{"templateId": tpl.ID}))
	if r := f.e.Do(f.b.Org, "POST", api+"/snmp/devices", mergeMap(v2c(f.b, "192.0.2.30"), map[string]any{"templateId": tpl.ID})); r.Status != 400 {
		t.Fatalf("another tenant's template = %d %s", r.Status, r.Body)
	}
	if r := f.e.Do(f.a.Org, "DELETE", api+"/snmp/templates/"+tpl.ID, nil); r.Status != 409 || r.ErrorCode() != snmp.CodeTemplateInUse {
		t.Fatalf("delete in use = %d %s", r.Status, r.Body)
	}
	f.e.Must(200, f.a.Org, "PATCH", api+"/snmp/devices/"+d.ID, map[string]any{"templateId": snmp.TemplateSwitch})
	f.e.Must(204, f.a.Org, "DELETE", api+"/snmp/templates/"+tpl.ID, nil)
	f.e.Must(404, f.a.Org, "GET", api+"/snmp/templates/"+tpl.ID, nil)
}

func TestBrowseAndValidateOIDs(t *testing.T) {
	f := newFixture(t)
	var found []snmp.SNMPBrowseOID
	f.e.Must(200, f.a.Org, "GET", api+"/snmp/oids/browse?query=sysuptime", nil).JSON(t, &found)
	if len(found) != 1 || found[0].OID != "1.3.6.1.2.1.1.3.0" || found[0].Source != "catalog" {
		t.Fatalf("browse sysuptime = %+v", found)
	}
	f.e.Must(200, f.a.Org, "GET", api+"/snmp/oids/browse?prefix=1.3.6.1.2.1.43", nil).JSON(t, &found)
	if len(found) < 4 || !strings.HasPrefix(found[0].OID, "1.3.6.1.2.1.43.") {
		t.Fatalf("browse printer = %+v", found)
	}
	f.e.Must(201, f.a.Org, "POST", api+"/snmp/templates", map[string]any{"name": "Custom", "oids": []map[string]any{
		{"oid": "1.3.6.1.4.1.9999.1.0", "name": "widgetTemp", "type": "gauge"}}})
	f.e.Must(200, f.a.Org, "GET", api+"/snmp/oids/browse?query=widget", nil).JSON(t, &found)
	if len(found) != 1 || found[0].Source != "template" || found[0].TemplateID == nil {
		t.Fatalf("browse custom = %+v", found)
	}
	f.e.Must(200, f.b.Org, "GET", api+"/snmp/oids/browse?query=widget", nil).JSON(t, &found)
	if len(found) != 0 {
		t.Fatalf("another tenant browses %+v", found)
	}
	var v snmp.SNMPValidation
	f.e.Must(200, f.a.Org, "POST", api+"/snmp/oids/validate", map[string]any{"oids": []string{".1.3.6.1.2.1.1.5.0", "1.3.6.1.2.1.1.5.0",
		"ifInOctets", "1.3.6.1.4.1.9999.1.0", "1.3.6.1.4.1.12345.7", "1.3.6.1.2.1.2.2.1.10", "1.3.6.1.2.1.2.2.1.10.3"}}).JSON(t, &v)
	r := v.Results
	if v.Valid || len(r) != 7 || !r[0].Valid || *r[0].Name != "sysName" || r[1].Valid || len(r[1].Errors) != 1 || r[2].Valid ||
		!r[3].Valid || *r[3].Name != "widgetTemp" || len(r[3].Warnings) != 0 || !r[4].Valid || len(r[4].Warnings) != 1 ||
		!r[5].Valid || len(r[5].Warnings) != 1 || *r[6].Name != "ifInOctets.3" || !slices.Equal(v.Duplicates, []string{"1.3.6.1.2.1.1.5.0"}) {
		t.Fatalf("validate = %+v", v)
	}
	if r := f.e.Do(f.a.Org, "POST", api+"/snmp/oids/validate", map[string]any{"oids": []string{}}); r.Status != 400 {
		t.Fatalf("no OIDs = %d", r.Status)
	}
}

const (
	inOctets  = "1.3.6.1.2.1.31.1.1.1.6.1"
	inErrors  = "1.3.6.1.2.1.2.2.1.14.1"
	operState = "1.3.6.1.2.1.2.2.1.8.1"
)

func TestIngestTurnsCountersIntoRates(t *testing.T) {
	f := newFixture(t)
	d := f.create(f.a.Org, v2c(f.a, "192.0.2.40"))
	t0 := start
	step := func(i int, octets, errs float64) {
		f.ingest(t0.Add(time.Duration(i)*time.Minute), agentproto.SNMPTargetResult{ID: d.ID, Values: []agentproto.SNMPValue{
			value(inOctets, "counter64", octets), value(inErrors, "counter32", errs), value(operState, "integer", 1),
			{OID: "1.3.6.1.2.1.1.5.0", Type: "octet_string", Text: text("sw1")}}})
	}
	rates := func() map[string]*float64 {
		out := map[string]*float64{}
		for _, v := range f.latest(f.a.Org, d.ID).Values {
			out[v.OID] = v.Rate
		}
		return out
	}
	step(0, 1000, 4294967000)
	if r := rates(); r[inOctets] != nil || r[inErrors] != nil {
		t.Fatalf("first poll has rates: %v", r)
	}
	step(1, 61000, 500) // 32-bit wrap: 796 in 60 s
	r := rates()
	if r[inOctets] == nil || *r[inOctets] != 1000 || r[inErrors] == nil || math.Abs(*r[inErrors]-796.0/60) > 1e-9 || r[operState] != nil {
		t.Fatalf("rates after a wrap = %v %v", deref(r[inOctets]), deref(r[inErrors]))
	}
	step(2, 10, 400) // reset of both: no rate
	if r := rates(); r[inOctets] != nil || r[inErrors] != nil {
		t.Fatalf("rates after a reset = %v %v", deref(r[inOctets]), deref(r[inErrors]))
	}
	l := f.latest(f.a.Org, d.ID)
	if len(l.Values) != 4 || l.Values[0].OID != "1.3.6.1.2.1.1.5.0" || *l.Values[0].Text != "sw1" || l.CollectedAt == nil {
		t.Fatalf("latest = %+v", l)
	}
	for _, v := range l.Values {
		if v.OID == inOctets && (v.Name != "ifHCInOctets.1" || v.Unit != "bytes") {
			t.Fatalf("named %+v", v)
		}
	}
	var one snmp.SNMPOIDMetrics
	f.e.Must(200, f.a.Org, "GET", api+"/snmp/metrics/"+d.ID+"/"+inOctets+"?limit=2", nil).JSON(t, &one)
	if one.Latest == nil || len(one.Samples) != 2 || one.Samples[0].Value != 10 || one.Samples[1].Rate == nil || *one.Samples[1].Rate != 1000 {
		t.Fatalf("one OID = %+v", one)
	}
}

func deref(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

func TestThresholdRaisesOneAlertAndResolves(t *testing.T) {
	f := newFixture(t)
	d := f.create(f.a.Org, v2c(f.a, "192.0.2.50"))
	var th snmp.SNMPThreshold
	f.e.Must(201, f.a.Org, "POST", api+"/snmp/thresholds", map[string]any{"deviceId": d.ID, "oid": operState, "operator": "gte",
		"value": 2, "severity": "critical"}).JSON(t, &th)
	for name, body := range map[string]map[string]any{
		"operator": {"deviceId": d.ID, "oid": operState, "operator": "ne", "value": 1, "severity": "high"},
		"oid":      {"deviceId": d.ID, "oid": "ifOperStatus", "operator": "gt", "value": 1, "severity": "high"},
		"severity": {"deviceId": d.ID, "oid": operState, "operator": "gt", "value": 1, "severity": "urgent"},
	} {
		if r := f.e.Do(f.a.Org, "POST", api+"/snmp/thresholds", body); r.Status != 400 {
			t.Errorf("threshold with bad %s = %d", name, r.Status)
		}
	}
	poll := func(i int, state float64) {
		f.ingest(start.Add(time.Duration(i)*time.Minute), agentproto.SNMPTargetResult{ID: d.ID, Values: []agentproto.SNMPValue{
			value(operState, "integer", state)}})
	}
	poll(0, 1)
	if len(f.sourceAlerts(d.ID)) != 0 {
		t.Fatal("an alert below the threshold")
	}
	poll(1, 2)
	poll(2, 2)
	as := f.sourceAlerts(d.ID)
	if len(as) != 1 || as[0].Status != alerts.StatusActive || as[0].Severity != "critical" || as[0].SourceType != alerts.SourceSNMPDevice {
		t.Fatalf("alerts while breached = %+v", as)
	}
	var ths []snmp.SNMPThreshold
	f.e.Must(200, f.a.Org, "GET", api+"/snmp/thresholds/"+d.ID, nil).JSON(t, &ths)
	if len(ths) != 1 || !ths[0].Breached {
		t.Fatalf("thresholds = %+v", ths)
	}
	var dash snmp.SNMPDashboard
	f.e.Must(200, f.a.Org, "GET", api+"/snmp/dashboard", nil).JSON(t, &dash)
	if dash.Devices.Total != 1 || dash.Devices.Online != 1 || dash.PollsLastHour.Total < 3 || len(dash.Alerting) != 1 ||
		dash.Alerting[0].ID != d.ID || len(dash.TopBreaching) != 1 || dash.TopBreaching[0].Name != "ifOperStatus.1" {
		t.Fatalf("dashboard = %+v", dash)
	}
	poll(3, 1)
	as = f.sourceAlerts(d.ID)
	if len(as) != 1 || as[0].Status != alerts.StatusResolved {
		t.Fatalf("alerts after return = %+v", as)
	}
	poll(4, 5)
	f.e.Must(204, f.a.Org, "DELETE", api+"/snmp/thresholds/"+th.ID, nil)
	for _, a := range f.sourceAlerts(d.ID) {
		if a.Status != alerts.StatusResolved {
			t.Fatalf("an alert open after the threshold's deletion: %+v", a)
		}
	}
}

func TestFailuresBackOffAndMarkOffline(t *testing.T) {
	interval := 300 * time.Second
	for failures, want := range map[int]time.Duration{1: 600 * time.Second, 2: 1200 * time.Second, 3: 2400 * time.Second, 4: time.Hour, 9: time.Hour} {
		if got := snmp.Backoff(interval, failures); got != want {
			t.Errorf("Backoff(300s, %d) = %s, want %s", failures, got, want)
		}
	}
	if got := snmp.Backoff(2*time.Hour, 3); got != 2*time.Hour {
		t.Errorf("Backoff(2h, 3) = %s", got)
	}
	f := newFixture(t)
	d := f.create(f.a.Org, v2c(f.a, "192.0.2.60"))
	fail := &agentproto.SNMPError{Kind: agentproto.SNMPErrTimeout, Message: "no answer"}
	at := start
	for i := 1; i <= 3; i++ {
		f.ingest(at, agentproto.SNMPTargetResult{ID: d.ID, Error: fail})
		got := f.device(f.a.Org, d.ID)
		wantStatus := snmp.StatusUnknown
		if i == 3 {
			wantStatus = snmp.StatusOffline
		}
		if got.ConsecutiveFailures != i || got.Status != wantStatus || !got.NextPollAt.Equal(at.Add(snmp.Backoff(interval, i))) ||
			got.LastError == nil || !strings.Contains(*got.LastError, "timeout") {
			t.Fatalf("after failure %d: %+v", i, got)
		}
		at = got.NextPollAt
	}
	as := f.sourceAlerts(d.ID)
	if len(as) != 1 || as[0].Status != alerts.StatusActive || !strings.Contains(as[0].Title, "offline") {
		t.Fatalf("alerts when offline = %+v", as)
	}
	f.ingest(at, agentproto.SNMPTargetResult{ID: d.ID, Error: fail})
	if len(f.sourceAlerts(d.ID)) != 1 {
		t.Fatal("a second offline alert")
	}
	f.ingest(at.Add(time.Hour), agentproto.SNMPTargetResult{ID: d.ID, Values: []agentproto.SNMPValue{value(operState, "integer", 1)}})
	got := f.device(f.a.Org, d.ID)
	if got.Status != snmp.StatusOnline || got.ConsecutiveFailures != 0 || got.LastError != nil || !got.NextPollAt.Equal(at.Add(time.Hour+interval)) {
		t.Fatalf("after success: %+v", got)
	}
	if as := f.sourceAlerts(d.ID); len(as) != 1 || as[0].Status != alerts.StatusResolved {
		t.Fatalf("alerts after success = %+v", as)
	}
}

func TestConcurrentDispatchesClaimEachDeviceOnce(t *testing.T) {
	f := newFixture(t)
	var ids []string
	for i := range 40 {
		ids = append(ids, f.create(f.a.Org, v2c(f.a, "192.0.2."+itoa(100+i))).ID)
	}
	disabled := f.create(f.a.Org, mergeMap(v2c(f.a, "192.0.2.99"), map[string]any{"enabled": false}))
	now := f.clk.Now().Add(time.Second)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := f.service().ClaimDue(context.Background(), now)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, id := range got {
				seen[id]++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(seen) != len(ids) || seen[disabled.ID] != 0 {
		t.Fatalf("claimed %d devices, want %d", len(seen), len(ids))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("device %s claimed %d times", id, n)
		}
	}
	if again, _ := f.service().ClaimDue(context.Background(), now); len(again) != 0 {
		t.Fatalf("claimed again within the lease: %d", len(again))
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestHistoryBuckets(t *testing.T) {
	f := newFixture(t)
	d := f.create(f.a.Org, v2c(f.a, "192.0.2.70"))
	// Every 5 minutes for 2 hours: the gauge-like state counts up 0..23; the counter grows 300
	// a step (1 per second).
	for i := 0; i < 24; i++ {
		f.ingest(start.Add(time.Duration(i)*5*time.Minute), agentproto.SNMPTargetResult{ID: d.ID, Values: []agentproto.SNMPValue{
			value(operState, "integer", float64(i)), value(inOctets, "counter64", float64(i*300))}})
	}
	var h snmp.SNMPHistory
	q := "?from=" + start.Format(time.RFC3339) + "&to=" + start.Add(2*time.Hour).Format(time.RFC3339)
	f.e.Must(200, f.a.Org, "GET", api+"/snmp/metrics/"+d.ID+"/history"+q+"&bucket=1h&oid="+operState+"&name=ifHCInOctets.1", nil).JSON(t, &h)
	if len(h.Series) != 2 || h.Bucket != "1h" {
		t.Fatalf("history = %+v", h)
	}
	state, octets := h.Series[0], h.Series[1]
	if len(state.Points) != 2 || state.Rate || state.Points[0].Count != 12 || state.Points[0].Avg != 5.5 || state.Points[0].Min != 0 ||
		state.Points[0].Max != 11 || !state.Points[1].Start.Equal(start.Add(time.Hour)) || state.Points[1].Avg != 17.5 {
		t.Fatalf("state series = %+v", state)
	}
	if !octets.Rate || octets.Unit != "bytes/s" || len(octets.Points) != 2 || octets.Points[0].Count != 11 || octets.Points[0].Avg != 1 ||
		octets.Points[1].Max != 1 {
		t.Fatalf("counter series = %+v", octets)
	}
	f.e.Must(200, f.a.Org, "GET", api+"/snmp/metrics/"+d.ID+"/history"+q+"&bucket=15m&oid="+operState, nil).JSON(t, &h)
	if len(h.Series[0].Points) != 8 || h.Series[0].Points[1].Avg != 4 || h.Series[0].Points[1].Count != 3 {
		t.Fatalf("15m buckets = %+v", h.Series[0].Points)
	}
	for name, query := range map[string]string{
		"bad bucket":        q + "&bucket=2h&oid=" + operState,
		"too many buckets":  "?from=" + start.Add(-30*24*time.Hour).Format(time.RFC3339) + "&to=" + start.Format(time.RFC3339) + "&bucket=5m&oid=" + operState,
		"from after to":     "?from=" + start.Format(time.RFC3339) + "&to=" + start.Add(-time.Hour).Format(time.RFC3339) + "&oid=" + operState,
		"no OID":            q,
		"unknown name":      q + "&name=nothing",
		"bad OID":           q + "&oid=abc",
		"more than 20 OIDs": q + "&oid=" + manyOIDs(21),
	} {
		if r := f.e.Do(f.a.Org, "GET", api+"/snmp/metrics/"+d.ID+"/history"+query, nil); r.Status != 400 {
			t.Errorf("history with %s = %d %s", name, r.Status, r.Body)
		}
	}
	f.clk.Set(start.Add(time.Duration(31*24) * time.Hour))
	if n, err := f.service().Purge(context.Background()); err != nil || n < 48 {
		t.Fatalf("purge = %d, %v", n, err)
	}
}

func manyOIDs(n int) string {
	oids := make([]string, n)
	for i := range oids {
		oids[i] = "1.3.6.1.4.1.99." + itoa(i)
	}
	return strings.Join(oids, ",")
}

func TestAnotherTenantGets404Everywhere(t *testing.T) {
	f := newFixture(t)
	d := f.create(f.a.Org, v2c(f.a, "192.0.2.80"))
	var tpl snmp.SNMPTemplate
	f.e.Must(201, f.a.Org, "POST", api+"/snmp/templates", map[string]any{"name": "Mine", "oids": []map[string]any{
		{"oid": "1.3.6.1.4.1.9999.1.0", "name": "x", "type": "gauge"}}}).JSON(t, &tpl)
	var th snmp.SNMPThreshold
	f.e.Must(201, f.a.Org, "POST", api+"/snmp/thresholds", map[string]any{"deviceId": d.ID, "oid": operState, "operator": "gt",
		"value": 1, "severity": "low"}).JSON(t, &th)
	for _, r := range []struct{ method, path string }{
		{"GET", "/snmp/devices/" + d.ID}, {"PATCH", "/snmp/devices/" + d.ID}, {"DELETE", "/snmp/devices/" + d.ID},
		{"POST", "/snmp/devices/" + d.ID + "/poll"}, {"POST", "/snmp/devices/" + d.ID + "/test"},
		{"GET", "/snmp/templates/" + tpl.ID}, {"PATCH", "/snmp/templates/" + tpl.ID}, {"DELETE", "/snmp/templates/" + tpl.ID},
		{"GET", "/snmp/metrics/" + d.ID}, {"GET", "/snmp/metrics/" + d.ID + "/history?oid=" + operState},
		{"GET", "/snmp/metrics/" + d.ID + "/" + operState}, {"GET", "/snmp/thresholds/" + d.ID},
		{"PATCH", "/snmp/thresholds/" + th.ID}, {"DELETE", "/snmp/thresholds/" + th.ID},
	} {
		for _, c := range []apptest.Caller{f.b.Org, f.b.Partner} {
			body := map[string]any{}
			if r.method == "PATCH" {
				body = map[string]any{"name": "taken"}
				if strings.Contains(r.path, "thresholds") {
					body = map[string]any{"value": 3}
				}
			}
			if resp := f.e.Do(c, r.method, api+r.path, body); resp.Status != 404 || resp.ErrorCode() != "NOT_FOUND" {
				t.Errorf("%s %s by another tenant = %d %s", r.method, r.path, resp.Status, resp.Body)
			}
		}
	}
	if r := f.e.Do(f.b.Org, "POST", api+"/snmp/thresholds", map[string]any{"deviceId": d.ID, "oid": operState, "operator": "gt",
		"value": 1, "severity": "low"}); r.Status != 404 {
		t.Errorf("threshold on another tenant's device = %d", r.Status)
	}
	var list struct{ Data []snmp.SNMPDevice }
	f.e.Must(200, f.b.Org, "GET", api+"/snmp/devices", nil).JSON(t, &list)
	var dash snmp.SNMPDashboard
	f.e.Must(200, f.b.Org, "GET", api+"/snmp/dashboard", nil).JSON(t, &dash)
	if len(list.Data) != 0 || dash.Devices.Total != 0 {
		t.Fatalf("another tenant sees %d devices, dashboard %+v", len(list.Data), dash.Devices)
	}
	f.e.Must(200, f.a.Org, "GET", api+"/snmp/devices/"+d.ID, nil)
}

// fakeAgent answers the agent calls of the SNMP domain over a live channel: snmp_poll and
// snmp_get with values (or an error) per target host, snmp_test with a system group.
type fakeAgent struct {
	mu      sync.Mutex
	answers map[string]agentproto.SNMPGetResult
	asked   []agentproto.SNMPTarget
}

func (a *fakeAgent) set(host string, r agentproto.SNMPGetResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answers[host] = r
}

func (a *fakeAgent) answer(t agentproto.SNMPTarget) agentproto.SNMPGetResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, t)
	return a.answers[t.Host]
}

func startFakeAgent(t *testing.T, f fixture) (*fakeAgent, string) {
	dev := f.e.EnrollAgent(f.a, "probe-01")
	f.e.Must(200, apptest.Bearer(dev.AuthToken), "POST", api+"/agents/"+dev.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "1.0.0"})
	a := &fakeAgent{answers: map[string]agentproto.SNMPGetResult{}}
	f.e.AnswerCalls(dev.AuthToken, func(c agentproto.Call) (json.RawMessage, *agentproto.CallError) {
		var out any
		switch c.Method {
		case agentproto.CallSNMPPoll:
			var p agentproto.SNMPPoll
			_ = json.Unmarshal(c.Args, &p)
			res := agentproto.SNMPPollResult{}
			for _, tg := range p.Targets {
				r := a.answer(tg.Target)
				res.Results = append(res.Results, agentproto.SNMPTargetResult{ID: tg.ID, Values: r.Values, Error: r.Error})
			}
			out = res
		case agentproto.CallSNMPGet, agentproto.CallSNMPTest:
			var g agentproto.SNMPGet
			_ = json.Unmarshal(c.Args, &g)
			out = a.answer(g.Target)
		}
		result, _ := json.Marshal(out)
		return result, nil
	})
	return a, dev.DeviceID
}

func TestDispatchPollAndTestThroughTheAgent(t *testing.T) {
	f := newFixture(t)
	lonely := f.create(f.a.Org, v2c(f.a, "192.0.2.1"))
	r := f.e.Do(f.a.Org, "POST", api+"/snmp/devices/"+lonely.ID+"/poll", nil)
	if r.Status != 409 || r.ErrorCode() != "NO_ONLINE_AGENT" {
		t.Fatalf("poll without an agent = %d %s", r.Status, r.Body)
	}
	before := f.clk.Now()
	if err := f.service().Dispatch(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := f.device(f.a.Org, lonely.ID); d.ConsecutiveFailures != 0 || d.LastError == nil || !strings.Contains(*d.LastError, "no agent") ||
		d.NextPollAt.Before(before.Add(time.Minute)) || d.NextPollAt.After(before.Add(2*time.Minute)) {
		t.Fatalf("dispatch without an agent: %+v", d)
	}
	agent, probe := startFakeAgent(t, f)
	good := f.create(f.a.Org, v3(f.a, "192.0.2.2"))
	bad := f.create(f.a.Org, v2c(f.a, "192.0.2.3"))
	agent.set("192.0.2.2", agentproto.SNMPGetResult{Values: []agentproto.SNMPValue{value("1.3.6.1.2.1.1.3.0", "timeticks", 4200),
		{OID: "1.3.6.1.2.1.1.5.0", Type: "octet_string", Text: text("router")}}})
	agent.set("192.0.2.3", agentproto.SNMPGetResult{Error: &agentproto.SNMPError{Kind: agentproto.SNMPErrTimeout, Message: "no answer"}})
	agent.set("192.0.2.1", agentproto.SNMPGetResult{Error: &agentproto.SNMPError{Kind: agentproto.SNMPErrAuth, Message: "unknown user"}})
	if err := f.service().Dispatch(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := f.device(f.a.Org, good.ID); d.Status != snmp.StatusOnline || d.LastSuccessAt == nil {
		t.Fatalf("good device after dispatch: %+v", d)
	}
	if d := f.device(f.a.Org, bad.ID); d.ConsecutiveFailures != 1 || d.Status != snmp.StatusUnknown {
		t.Fatalf("bad device after dispatch: %+v", d)
	}
	agent.mu.Lock()
	var sawV3 bool
	for _, tg := range agent.asked {
		if tg.Host == "192.0.2.2" && tg.V3 != nil && tg.V3.AuthPassword == "auth-pass-123" && tg.V3.PrivProtocol == "AES" {
			sawV3 = true
		}
	}
	agent.mu.Unlock()
	if !sawV3 {
		t.Fatal("the agent was not given the v3 credentials")
	}
	var out snmp.SNMPPollOutcome
	f.e.Must(200, f.a.Org, "POST", api+"/snmp/devices/"+good.ID+"/poll", nil).JSON(t, &out)
	if out.ProbeDeviceID != probe || len(out.Values) != 2 || out.Values[0].Name != "sysUpTime" || *out.Values[0].Value != 4200 {
		t.Fatalf("poll now = %+v", out)
	}
	if r := f.e.Do(f.a.Org, "POST", api+"/snmp/devices/"+bad.ID+"/poll", nil); r.Status != 504 || r.ErrorCode() != snmp.CodeSNMPTimeout ||
		!strings.Contains(string(r.Body), "timeout") {
		t.Fatalf("poll of a silent device = %d %s", r.Status, r.Body)
	}
	if d := f.device(f.a.Org, bad.ID); d.ConsecutiveFailures != 2 {
		t.Fatalf("a failed poll now does not count: %+v", d)
	}
	var test snmp.SNMPTestResult
	f.e.Must(200, f.a.Org, "POST", api+"/snmp/devices/"+good.ID+"/test", nil).JSON(t, &test)
	if test.SysName == nil || *test.SysName != "router" || test.SysUpTime == nil || test.SysDescr != nil {
		t.Fatalf("test = %+v", test)
	}
	r = f.e.Do(f.a.Org, "POST", api+"/snmp/devices/"+good.ID+"/test", map[string]any{"credentials": map[string]any{"username": "nobody"}})
	if r.Status != 200 {
		t.Fatalf("test with other credentials = %d %s", r.Status, r.Body)
	}
	agent.mu.Lock()
	last := agent.asked[len(agent.asked)-1]
	agent.mu.Unlock()
	if last.V3 == nil || last.V3.Username != "nobody" || last.V3.AuthProtocol != "" {
		t.Fatalf("test asked with %+v", last)
	}
	r = f.e.Do(f.a.Org, "POST", api+"/snmp/devices/"+good.ID+"/test", map[string]any{"version": "v2c", "credentials": map[string]any{"community": "x"}})
	if r.Status != 200 {
		t.Fatalf("test as v2c = %d %s", r.Status, r.Body)
	}
	agent.set("192.0.2.2", agentproto.SNMPGetResult{Error: &agentproto.SNMPError{Kind: agentproto.SNMPErrAuth, Message: "wrong digest"}})
	if r := f.e.Do(f.a.Org, "POST", api+"/snmp/devices/"+good.ID+"/test", nil); r.Status != 502 || r.ErrorCode() != snmp.CodeSNMPAuth {
		t.Fatalf("test refused = %d %s", r.Status, r.Body)
	}
	if r := f.e.Do(f.a.Org, "POST", api+"/snmp/devices/"+good.ID+"/test", map[string]any{"version": "v2c"}); r.Status != 400 {
		t.Fatalf("test with a version and no credentials = %d %s", r.Status, r.Body)
	}
	if d := f.device(f.a.Org, good.ID); d.ConsecutiveFailures != 0 {
		t.Fatalf("a test counted: %+v", d)
	}
}

func TestAnAgentWithoutItsLiveChannelIsNotAsked(t *testing.T) {
	f := newFixture(t)
	dev := f.e.EnrollAgent(f.a, "http-only")
	f.e.Must(200, apptest.Bearer(dev.AuthToken), "POST", api+"/agents/"+dev.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "1.0.0"})
	d := f.create(f.a.Org, v2c(f.a, "192.0.2.90"))
	for _, action := range []string{"poll", "test"} {
		if r := f.e.Do(f.a.Org, "POST", api+"/snmp/devices/"+d.ID+"/"+action, nil); r.Status != 503 || r.ErrorCode() != "AGENT_OFFLINE" {
			t.Fatalf("%s through an HTTP-only agent = %d %s", action, r.Status, r.Body)
		}
	}
	if err := f.service().Dispatch(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.device(f.a.Org, d.ID); got.ConsecutiveFailures != 0 || got.LastError == nil || !strings.Contains(*got.LastError, "live connection") {
		t.Fatalf("dispatch through an HTTP-only agent: %+v", got)
	}
}

// A maintenance window that suppresses alerts holds an SNMP device's alerts back when it
// targets the device's site, its whole organization or the agent that polls it: a breached
// threshold and a device gone offline open no alert and tell nobody, while the same devices
// of a tenant without a window alert at once. The first poll after the window that still sees
// the condition opens its alert.
func TestMaintenanceWindowsHoldSNMPAlertsBack(t *testing.T) {
	f := newFixture(t)
	type pair struct{ breached, down snmp.SNMPDevice }
	setup := func(ten apptest.Tenant) pair {
		p := pair{f.create(ten.Org, v2c(ten, "192.0.2.80")), f.create(ten.Org, v2c(ten, "192.0.2.81"))}
		f.e.Must(201, ten.Org, "POST", api+"/snmp/thresholds", map[string]any{"deviceId": p.breached.ID, "oid": operState,
			"operator": "gte", "value": 2, "severity": "critical"})
		return p
	}
	held, free := setup(f.a), setup(f.b)
	probe := f.e.InsertDevice(apptest.DeviceRow{PartnerID: f.a.PartnerID, OrgID: f.a.OrgID, SiteID: f.a.SiteID, Hostname: "probe"})
	fail := &agentproto.SNMPError{Kind: agentproto.SNMPErrTimeout, Message: "no answer"}
	at := start
	poll := func(p pair, by string, bad bool) {
		t.Helper()
		state := []agentproto.SNMPValue{value(operState, "integer", 1)}
		down := agentproto.SNMPTargetResult{ID: p.down.ID, Values: state}
		if bad {
			state = []agentproto.SNMPValue{value(operState, "integer", 2)}
			down = agentproto.SNMPTargetResult{ID: p.down.ID, Error: fail}
		}
		f.ingestBy(at, by, agentproto.SNMPTargetResult{ID: p.breached.ID, Values: state}, down)
		at = at.Add(time.Hour)
	}
	open := func(p pair) int {
		t.Helper()
		n := 0
		for _, a := range append(f.sourceAlerts(p.breached.ID), f.sourceAlerts(p.down.ID)...) {
			if a.Status == alerts.StatusActive {
				n++
			}
		}
		return n
	}
	triggered := func(ten apptest.Tenant) int {
		t.Helper()
		var n int
		if err := f.e.App.DB.SQL.QueryRow(`SELECT COUNT(*) FROM events WHERE type = 'alert.triggered' AND org_id = $1`, ten.OrgID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	windows := []map[string]any{{"type": "sites", "ids": []string{f.a.SiteID}}, {"type": "all"}, {"type": "devices", "ids": []string{probe}}}
	for round, targets := range windows {
		occ := f.e.StartMaintenance(f.a.Org, f.a.OrgID, targets)
		for range snmp.OfflineAfter {
			poll(held, probe, true)
			if round == 0 {
				poll(free, "", true)
			}
		}
		if got := f.device(f.a.Org, held.down.ID); got.Status != snmp.StatusOffline {
			t.Fatalf("window %v: the device that fails is %s", targets, got.Status)
		}
		if n := open(held); n != 0 || triggered(f.a) != 2*round {
			t.Fatalf("window %v: %d alerts open, %d alert.triggered events", targets, n, triggered(f.a))
		}
		if round == 0 && (open(free) != 2 || triggered(f.b) != 2) {
			t.Fatalf("without a window: %d alerts open, %d alert.triggered events, want 2", open(free), triggered(f.b))
		}
		f.e.EndMaintenance(f.a.Org, occ)
		poll(held, probe, true)
		if n := open(held); n != 2 || triggered(f.a) != 2*round+2 {
			t.Fatalf("after window %v: %d alerts open, %d alert.triggered events", targets, n, triggered(f.a))
		}
		poll(held, probe, false)
		if n := open(held); n != 0 {
			t.Fatalf("after the recovery: %d alerts open", n)
		}
	}
}

// A device with no SNMP agent on its port answers ICMP port unreachable, which the agent's
// socket reports as "connection refused": through the real agent capability, poll and test
// answer 504 SNMP_TIMEOUT, as for a device that stays silent.
func TestNoSNMPAgentOnThePortIsATimeout(t *testing.T) {
	f := newFixture(t)
	dev := f.e.EnrollAgent(f.a, "probe-01")
	f.e.Must(200, apptest.Bearer(dev.AuthToken), "POST", api+"/agents/"+dev.DeviceID+"/heartbeat", agentproto.Heartbeat{AgentVersion: "1.0.0"})
	reg := capability.New()
	agentsnmp.Register(reg)
	f.e.AnswerCalls(dev.AuthToken, func(c agentproto.Call) (json.RawMessage, *agentproto.CallError) {
		res := reg.Answer(context.Background(), c)
		return res.Result, res.Error
	})
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := conn.LocalAddr().(*net.UDPAddr).Port
	conn.Close()
	d := f.create(f.a.Org, mergeMap(v2c(f.a, "127.0.0.1"), map[string]any{"port": port}))
	for _, action := range []string{"poll", "test"} {
		r := f.e.Do(f.a.Org, "POST", api+"/snmp/devices/"+d.ID+"/"+action, nil)
		if r.Status != http.StatusGatewayTimeout || r.ErrorCode() != snmp.CodeSNMPTimeout {
			t.Errorf("%s with nothing on the port = %d %s, want 504 %s", action, r.Status, r.Body, snmp.CodeSNMPTimeout)
		}
	}
}
