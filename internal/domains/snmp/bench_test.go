package snmp_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"gale/internal/app"
	"gale/internal/domains/snmp"
	"gale/internal/platform/clock"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
	"gale/internal/wire/agentproto"
)

// benchDevices inserts n enabled v2c devices of the tenant and returns their IDs.
func benchDevices(b *testing.B, e *apptest.Env, ten apptest.Tenant, n int) []string {
	ids := make([]string, n)
	err := e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
		for i := range ids {
			ids[i] = store.NewID()
			if _, err := tx.Exec(`INSERT INTO snmp_devices (id, partner_id, org_id, site_id, name, ip_address, port, version, credentials,
				template_id, interval_seconds, enabled, status, next_poll_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 161,
				'v2c', 'x', $7, 300, TRUE, 'online', $8, $8, $8)`, ids[i], ten.PartnerID, ten.OrgID, ten.SiteID, fmt.Sprintf("dev%04d", i),
				fmt.Sprintf("10.%d.%d.%d", i/65536, (i/256)%256, i%256), snmp.TemplateSwitch, start); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return ids
}

// pollResult is one device's answer of 50 OIDs: 20 64-bit counters, 10 32-bit counters, 15
// integers and gauges, 5 strings.
func pollResult(id string, round int) agentproto.SNMPTargetResult {
	r := agentproto.SNMPTargetResult{ID: id, Values: make([]agentproto.SNMPValue, 0, 50)}
	for i := range 50 {
		oid := fmt.Sprintf("1.3.6.1.2.1.99.%d.%d", i/10, i)
		switch {
		case i < 20:
			r.Values = append(r.Values, value(oid, "counter64", float64(round*300_000+i)))
		case i < 30:
			r.Values = append(r.Values, value(oid, "counter32", float64(round*3_000+i)))
		case i < 45:
			r.Values = append(r.Values, value(oid, "gauge32", float64((round+i)%100)))
		default:
			r.Values = append(r.Values, agentproto.SNMPValue{OID: oid, Type: "octet_string", Text: text(fmt.Sprintf("port %d", i))})
		}
	}
	return r
}

// BenchmarkSNMPIngest stores polls as the dispatcher does: "device" one device's result of 50
// OIDs (with two thresholds evaluated), "fleet" a round of 500 devices × 50 OIDs in the
// batches of 100 one agent call carries. A round must take well under the 300 s interval.
func BenchmarkSNMPIngest(b *testing.B) {
	b.Run("device", func(b *testing.B) {
		e := apptest.New(b, apptest.WithClock(clock.NewFake(start)))
		ten := e.NewTenant(e.Admin(), "Bench")
		svc := app.Service[*snmp.Service](e.App)
		id := benchDevices(b, e, ten, 1)[0]
		for _, oid := range []string{"1.3.6.1.2.1.99.2.25", "1.3.6.1.2.1.99.3.35"} {
			e.Must(http.StatusCreated, ten.Org, "POST", api+"/snmp/thresholds", map[string]any{"deviceId": id, "oid": oid, "operator": "gt",
				"value": 1e12, "severity": "high"})
		}
		round := 0
		for b.Loop() {
			round++
			if err := svc.Ingest(context.Background(), start.Add(time.Duration(round)*300*time.Second), "", []agentproto.SNMPTargetResult{pollResult(id, round)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fleet", func(b *testing.B) {
		const devices, batch = 500, 100
		e := apptest.New(b, apptest.WithClock(clock.NewFake(start)))
		ten := e.NewTenant(e.Admin(), "Bench")
		svc := app.Service[*snmp.Service](e.App)
		ids := benchDevices(b, e, ten, devices)
		round := 0
		var took time.Duration
		for b.Loop() {
			round++
			at := start.Add(time.Duration(round) * 300 * time.Second)
			t0 := time.Now()
			for i := 0; i < devices; i += batch {
				results := make([]agentproto.SNMPTargetResult, 0, batch)
				for _, id := range ids[i : i+batch] {
					results = append(results, pollResult(id, round))
				}
				if err := svc.Ingest(context.Background(), at, "", results); err != nil {
					b.Fatal(err)
				}
			}
			took += time.Since(t0)
		}
		perRound := took.Seconds() / float64(b.N)
		b.ReportMetric(perRound, "s/round")
		b.ReportMetric(devices*50/perRound, "values/s")
		b.ReportMetric(300/perRound, "x-headroom")
	})
}

// BenchmarkSNMPHistory asks GET /snmp/metrics/{id}/history for 7 days of 20 OIDs (5-minute
// polls stored through Ingest: 40,320 samples, 10 of the OIDs counters) in 1-hour buckets,
// and reports the p99.
func BenchmarkSNMPHistory(b *testing.B) {
	e := apptest.New(b, apptest.WithClock(clock.NewFake(start)))
	ten := e.NewTenant(e.Admin(), "Bench")
	svc := app.Service[*snmp.Service](e.App)
	id := benchDevices(b, e, ten, 1)[0]
	const polls = 7 * 24 * 12
	from := start.Add(-7 * 24 * time.Hour)
	var oids []string
	for i := range 20 {
		oids = append(oids, fmt.Sprintf("1.3.6.1.2.1.99.1.%d", i))
	}
	for j := range polls {
		r := agentproto.SNMPTargetResult{ID: id}
		for k, oid := range oids {
			if k < 10 {
				r.Values = append(r.Values, value(oid, "counter64", float64(j*300*(k+1))))
			} else {
				r.Values = append(r.Values, value(oid, "gauge32", float64(j%100)))
			}
		}
		if err := svc.Ingest(context.Background(), from.Add(time.Duration(j)*5*time.Minute), "", []agentproto.SNMPTargetResult{r}); err != nil {
			b.Fatal(err)
		}
	}
	path := api + "/snmp/metrics/" + id + "/history?bucket=1h&from=" + from.Format(time.RFC3339) + "&to=" + start.Format(time.RFC3339) +
		"&oid=" + strings.Join(oids, ",")
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		r := e.Do(ten.Org, "GET", path, nil)
		lat = append(lat, time.Since(t0))
		if r.Status != http.StatusOK {
			b.Fatalf("history = %d %s", r.Status, r.Body)
		}
	}
	var h snmp.SNMPHistory
	e.Must(http.StatusOK, ten.Org, "GET", path, nil).JSON(b, &h)
	if len(h.Series) != 20 || len(h.Series[0].Points) != 168 || h.Series[19].Points[0].Count != 12 || !h.Series[0].Rate ||
		h.Series[0].Points[5].Avg != 1 {
		b.Fatalf("history has %d series, %d points: %+v", len(h.Series), len(h.Series[0].Points), h.Series[0].Points[:6])
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
