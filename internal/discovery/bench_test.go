package discovery_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gale/internal/apptest"
	"gale/internal/store"
)

// seedAssets writes n assets of the tenant's organization, in 10.x.y.z order.
func seedAssets(b *testing.B, e *apptest.Env, ten apptest.Tenant, n int) {
	now := store.Now()
	err := e.App.DB.Write(context.Background(), func(tx *sql.Tx) error {
		for first := 0; first < n; first += 500 {
			var a store.Args
			at := a.Add(now)
			rows := make([]string, 0, 500)
			for i := first; i < min(first+500, n); i++ {
				ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
				key := fmt.Sprintf("0a%02x%02x%02x", i>>16&255, i>>8&255, i&255)
				rows = append(rows, "("+strings.Join([]string{a.Add(store.NewID()), a.Add(ten.PartnerID), a.Add(ten.OrgID), a.Add(ten.SiteID),
					a.Add(ip), a.Add(key), a.Add(fmt.Sprintf("02:00:00:%02x:%02x:%02x", i>>16&255, i>>8&255, i&255)),
					a.Add(fmt.Sprintf("host-%05d", i)), a.Add([]string{"server", "workstation", "printer", "unknown"}[i%4]),
					a.Add("[22,80,443]"), a.Add("new"), at, at, at}, ", ")+")")
			}
			if _, err := tx.Exec(`INSERT INTO discovery_assets (id, partner_id, org_id, site_id, ip, ip_key, mac, hostname, asset_type,
				open_ports, status, first_seen_at, last_seen_at, updated_at) VALUES `+strings.Join(rows, ", "), a.Values()...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if e.App.DB.Dialect == store.Postgres {
		if _, err := e.App.DB.SQL.Exec(`VACUUM ANALYZE discovery_assets`); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiscoveryAssetList is an authenticated GET /discovery/assets?limit=100 over 10,000
// assets of one organization, from 16 concurrent clients, as its partner's admin: the first
// page, a page deep into the cursor, and a search by part of a hostname.
func BenchmarkDiscoveryAssetList(b *testing.B) {
	e := apptest.New(b)
	ten := e.NewTenant(e.Admin(), "Bench")
	seedAssets(b, e, ten, 10_000)
	base := e.Server.URL + "/api/v1/discovery/assets?limit=100"
	cursor := ""
	for range 50 {
		var page struct {
			Pagination struct{ Cursor string }
		}
		e.Must(200, ten.Partner, "GET", "/api/v1/discovery/assets?limit=100&cursor="+url.QueryEscape(cursor), nil).JSON(b, &page)
		cursor = page.Pagination.Cursor
	}
	for _, bc := range []struct{ name, url string }{
		{"FirstPage", base},
		{"DeepPage", base + "&cursor=" + url.QueryEscape(cursor)},
		{"Search", base + "&search=host-07"},
		{"Type", base + "&type=printer"},
	} {
		b.Run(bc.name, func(b *testing.B) { measureGets(b, bc.url, ten.Partner, 16) })
	}
}

// measureGets runs b.N GETs of target from concurrent clients and reports requests per
// second, the p50 and p99 latency and the CPU time per request.
func measureGets(b *testing.B, target string, caller apptest.Caller, clients int) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients * 2}}
	get := func() time.Duration {
		req, _ := http.NewRequest("GET", target, nil)
		req.Header.Set("Authorization", "Bearer "+caller.Token)
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			b.Fatalf("status %d", res.StatusCode)
		}
		return time.Since(start)
	}
	var warm sync.WaitGroup
	for range clients {
		warm.Go(func() {
			for range 5 {
				get()
			}
		})
	}
	warm.Wait()
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	var mu sync.Mutex
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start, cpu := time.Now(), processCPU()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			var local []time.Duration
			for range work {
				local = append(local, get())
			}
			mu.Lock()
			latencies = append(latencies, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), processCPU()-cpu
	b.StopTimer()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) float64 {
		return float64(latencies[int(float64(len(latencies)-1)*p)].Microseconds()) / 1000
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
}

// processCPU is the CPU time this process (client and server) has used: a figure that other
// work on the machine does not inflate the way it does latencies.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
