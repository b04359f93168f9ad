// Package bench measures Gale's hot paths through the real HTTP stack on the configured
// backend (SQLite, or PostgreSQL with TEST_DATABASE_URL). Run with `make bench`; the figures
// are recorded in docs/benchmarks.md.
package bench

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gale/internal/domains/alerts"

	"gale/internal/app"
	"gale/internal/domains/auth"
	"gale/internal/platform/access"
	"gale/internal/platform/config"
	"gale/internal/platform/store"
	"gale/internal/testkit/apptest"
	"gale/internal/testkit/seed"
)

// seedOrganizations inserts n organizations under a new partner in one transaction and
// returns a Partner Admin of it.
func seedOrganizations(b *testing.B, e *apptest.Env, n int) apptest.Caller {
	b.Helper()
	admin := e.Admin()
	partnerID := e.CreatePartner(admin, "Bench MSP")
	now := store.Now()
	err := e.App.DB.Write(b.Context(), func(tx *sql.Tx) error {
		for i := 0; i < n; i++ {
			if _, err := tx.Exec(`INSERT INTO organizations (id, partner_id, name, slug, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $5)`, store.NewID(), partnerID, fmt.Sprintf("Customer %05d", i),
				fmt.Sprintf("bench-customer-%05d", i), now); err != nil {
				return err
			}
		}
		_, err := tx.Exec(`UPDATE partners SET org_count = $1 WHERE id = $2`, n, partnerID)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	settle(b, e)
	_, partnerAdmin := e.CreateUser("bench@gale.test", access.LevelPartner, partnerID, "", "")
	return partnerAdmin
}

// BenchmarkListOrganizations is an authenticated GET /orgs/organizations?limit=100 with
// 10,000 organizations, from 16 concurrent clients over loopback HTTP. It reports requests
// per second and the p50 and p99 latency.
func BenchmarkListOrganizations(b *testing.B) {
	app.TuneRuntime() // as gale serve does
	e := apptest.New(b)
	caller := seedOrganizations(b, e, 10_000)
	apptest.MeasureGets(b, e.Server.URL+"/api/v1/orgs/organizations?limit=100", caller, 16)
}

// BenchmarkRequestFloor is what this machine gives the cheapest requests at 16 concurrent
// clients, the concurrency of BenchmarkListOrganizations: Health is GET /health (no
// credential, no database), OneOrganization an authenticated list of one organization, and
// Static36KiB a bare net/http handler answering a fixed 36 KiB body (the size of a page of 100
// organizations) with no framework, credential or database at all.
func BenchmarkRequestFloor(b *testing.B) {
	app.TuneRuntime()
	e := apptest.New(b)
	caller := seedOrganizations(b, e, 10)
	body := bytes.Repeat([]byte(" "), 36<<10)
	static := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	b.Cleanup(static.Close)
	for _, bc := range []struct{ name, url string }{
		{"Health", e.Server.URL + "/health"},
		{"OneOrganization", e.Server.URL + "/api/v1/orgs/organizations?limit=1"},
		{"Static36KiB", static.URL},
	} {
		b.Run(bc.name, func(b *testing.B) { apptest.MeasureGets(b, bc.url, caller, 16) })
	}
}

// seedDevices inserts n enrolled devices spread over 100 organizations (one site each) of a
// new partner and returns a Partner Admin of it.
func seedDevices(b *testing.B, e *apptest.Env, n int) apptest.Caller {
	b.Helper()
	partnerID := e.CreatePartner(e.Admin(), "Bench MSP")
	if err := seed.Devices(b.Context(), e.App.DB, partnerID, n, "online"); err != nil {
		b.Fatal(err)
	}
	settle(b, e)
	_, partnerAdmin := e.CreateUser("bench@gale.test", access.LevelPartner, partnerID, "", "")
	return partnerAdmin
}

// settle brings a freshly seeded database to its steady state before measuring.
func settle(b *testing.B, e *apptest.Env) {
	if err := seed.Settle(b.Context(), e.App.DB); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkListDevices is an authenticated GET /devices?limit=50 (first page, by hostname)
// over 100,000 devices of one partner, from 32 concurrent clients. The NextPage variant
// follows a cursor (the page after the first 500 devices); LastSeen sorts by last contact.
// Uncached asks a second node that keeps no list rows cached (LIST_CACHE_ROWS=0), so every
// row of every page is read in full, as when every row changed since the last read;
// Heartbeats is FirstPage while each device of that page changes once a second, as a
// heartbeat changes it.
func BenchmarkListDevices(b *testing.B) {
	app.TuneRuntime()
	e := apptest.New(b)
	caller := seedDevices(b, e, 100_000)
	base := "/api/v1/devices?limit=50"
	var mid, first struct {
		Devices []struct {
			ID string `json:"id"`
		} `json:"devices"`
		NextCursor string `json:"nextCursor"`
	}
	e.Must(200, caller, "GET", "/api/v1/devices?limit=500", nil).JSON(b, &mid)
	e.Must(200, caller, "GET", base, nil).JSON(b, &first)
	uncached := e.SecondNode(func(c *config.Config) { c.ListCacheRows = 0 })
	for _, bc := range []struct {
		name, url string
		churn     bool
	}{
		{"FirstPage", e.Server.URL + base, false},
		{"NextPage", e.Server.URL + base + "&cursor=" + url.QueryEscape(mid.NextCursor), false},
		{"LastSeen", e.Server.URL + base + "&sort=lastSeen&sortDir=desc", false},
		{"Uncached", uncached.Server.URL + base, false},
		{"Heartbeats", e.Server.URL + base, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.churn {
				ids := make([]string, len(first.Devices))
				for i, d := range first.Devices {
					ids[i] = d.ID
				}
				stop := heartbeats(b, e, ids, time.Second)
				defer stop()
			}
			apptest.MeasureGets(b, bc.url, caller, 32)
		})
	}
}

// heartbeats changes each device of ids once per period, spread evenly, as their agents'
// heartbeats would (last contact, uptime and metrics), until stop is called.
func heartbeats(b *testing.B, e *apptest.Env, ids []string, period time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(period / time.Duration(len(ids)))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			_, err := e.App.DB.SQL.Exec(`UPDATE devices SET last_seen_at = $1, uptime_seconds = $2,
				metrics = $3 WHERE id = $4`, store.Now(), i, fmt.Sprintf(`{"cpuPercent":%d.5,"ramPercent":40}`, i%100), ids[i%len(ids)])
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// BenchmarkPartnerExportDevices is a full traversal of GET /partner-api/devices at
// limit=500 over 100,000 devices of one partner, with a service-principal key, following the
// cursor page by page as a warehouse sync would (200 requests). ByID is the full export;
// UpdatedSince orders by change time (every device changed after the given time). It reports
// seconds per traversal.
func BenchmarkPartnerExportDevices(b *testing.B) {
	app.TuneRuntime()
	e := apptest.New(b)
	const devices = 100_000
	partnerAdmin := seedDevices(b, e, devices)
	var principal struct {
		ID string `json:"id"`
	}
	e.Must(http.StatusCreated, partnerAdmin, "POST", "/api/v1/partner-service-principals",
		map[string]any{"name": "Warehouse", "scopes": []string{"devices:read"}}).JSON(b, &principal)
	var key struct {
		Key string `json:"key"`
	}
	e.Must(http.StatusCreated, partnerAdmin, "POST", "/api/v1/partner-service-principals/"+principal.ID+"/keys",
		map[string]any{"name": "nightly"}).JSON(b, &key)
	client := &http.Client{}
	traverse := func(query string) int {
		rows, cursor := 0, ""
		for {
			target := e.Server.URL + "/api/v1/partner-api/devices?limit=500" + query
			if cursor != "" {
				target += "&cursor=" + url.QueryEscape(cursor)
			}
			req, _ := http.NewRequest("GET", target, nil)
			req.Header.Set("X-API-Key", key.Key)
			res, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var page struct {
				Data       []json.RawMessage `json:"data"`
				Pagination struct {
					HasMore bool   `json:"hasMore"`
					Cursor  string `json:"cursor"`
				} `json:"pagination"`
			}
			err = json.NewDecoder(res.Body).Decode(&page)
			res.Body.Close()
			if err != nil || res.StatusCode != http.StatusOK {
				b.Fatalf("status %d: %v", res.StatusCode, err)
			}
			rows += len(page.Data)
			if !page.Pagination.HasMore {
				return rows
			}
			cursor = page.Pagination.Cursor
		}
	}
	for _, bc := range []struct{ name, query string }{
		{"ByID", ""},
		{"UpdatedSince", "&updatedSince=2020-01-01T00:00:00Z"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			start := time.Now()
			for range b.N {
				if n := traverse(bc.query); n != devices {
					b.Fatalf("traversal read %d devices, want %d", n, devices)
				}
			}
			b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "s/traversal")
		})
	}
}

// BenchmarkPasswordVerify is the cost of one sign-in's password check with the production
// argon2id parameters (64 MiB, 3 passes, 4 lanes).
func BenchmarkPasswordVerify(b *testing.B) {
	params := auth.Argon2Params{MemoryKiB: 64 * 1024, Iterations: 3, Parallelism: 4}
	hash := auth.HashPassword("Bench-Passw0rd", params)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !auth.VerifyPassword("Bench-Passw0rd", hash) {
			b.Fatal("verify failed")
		}
	}
}

// BenchmarkAlertSweep is one run of the periodic alert sweep (EvaluateAll) over 10,000 live
// devices of a partner with 10 rules, in the steady state (nothing opens or resolves). It
// reports seconds per sweep.
func BenchmarkAlertSweep(b *testing.B) {
	app.TuneRuntime()
	e := apptest.New(b)
	admin := seedDevices(b, e, 10_000)
	for i := 0; i < 10; i++ {
		cond := map[string]any{"type": "threshold", "metric": "cpuPercent", "operator": "gt", "value": 99,
			"durationMinutes": []int{0, 5, 15}[i%3]}
		if i%5 == 4 {
			cond = map[string]any{"type": "offline", "durationMinutes": 10 + i}
		}
		e.Must(201, admin, "POST", "/api/v1/alerts/rules", map[string]any{"name": fmt.Sprintf("rule %d", i),
			"severity": "low", "conditions": cond})
	}
	ctx := b.Context()
	if err := app.Service[*alerts.Service](e.App).EvaluateAll(ctx); err != nil { // warm the caches
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if err := app.Service[*alerts.Service](e.App).EvaluateAll(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "s/sweep")
}

// BenchmarkExecuteScript is POST /scripts/{id}/execute of a partner-wide script on 500
// devices: 500 executions and their run_script commands in one transaction, over loopback
// HTTP, one request at a time. It reports the p50 and p99 latency of a request.
func BenchmarkExecuteScript(b *testing.B) {
	app.TuneRuntime()
	e := apptest.New(b)
	caller := seedDevices(b, e, 500)
	var devices struct {
		Devices []struct {
			ID string `json:"id"`
		} `json:"devices"`
	}
	e.Must(200, caller, "GET", "/api/v1/devices?limit=500", nil).JSON(b, &devices)
	ids := make([]string, len(devices.Devices))
	for i, d := range devices.Devices {
		ids[i] = d.ID
	}
	var sc struct {
		ID string `json:"id"`
	}
	e.Must(201, caller, "POST", "/api/v1/scripts", map[string]any{"name": "Bench", "osTypes": []string{"linux"}, "language": "sh",
		"content": "uptime", "parameters": []map[string]any{{"name": "LEVEL", "type": "string", "defaultValue": "info"}}}).JSON(b, &sc)
	body := map[string]any{"deviceIds": ids}
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		r := e.Do(caller, "POST", "/api/v1/scripts/"+sc.ID+"/execute", body)
		latencies = append(latencies, time.Since(start))
		if r.Status != 202 {
			b.Fatalf("execute = %d %s", r.Status, r.Body)
		}
	}
	b.StopTimer()
	reportLatencies(b, latencies)
}

// BenchmarkImportBundle is POST /scripts/bundle/import of a 200-script bundle (4 KiB of
// content each) into an organization that has none of them.
func BenchmarkImportBundle(b *testing.B) {
	app.TuneRuntime()
	e := apptest.New(b)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Bench")
	scripts := make([]map[string]any, 200)
	for i := range scripts {
		scripts[i] = map[string]any{"name": fmt.Sprintf("Script %03d", i), "osTypes": []string{"linux"}, "language": "bash",
			"content": strings.Repeat(fmt.Sprintf("echo line %d\n", i), 4096/12), "tags": []string{"bench", fmt.Sprintf("t%d", i%10)},
			"category": fmt.Sprintf("Category %d", i%5), "parameters": []map[string]any{{"name": "P", "type": "number", "defaultValue": 1}}}
	}
	bundle := map[string]any{"bundleVersion": 1, "scripts": scripts}
	orgs := make([]string, b.N)
	for i := range orgs {
		orgs[i] = e.CreateOrg(admin, ten.PartnerID, fmt.Sprintf("Target %d", i))
	}
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		r := e.Do(ten.Partner, "POST", "/api/v1/scripts/bundle/import", map[string]any{"bundle": bundle, "orgId": orgs[i]})
		latencies = append(latencies, time.Since(start))
		if r.Status != 200 || !strings.Contains(string(r.Body), `"imported":200`) {
			b.Fatalf("import = %d %s", r.Status, r.Body)
		}
	}
	b.StopTimer()
	reportLatencies(b, latencies)
}

// reportLatencies reports the p50 and p99 of sequential requests, in milliseconds.
func reportLatencies(b *testing.B, latencies []time.Duration) {
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) float64 {
		return float64(latencies[int(float64(len(latencies)-1)*p)].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// BenchmarkConsolePages renders the web console's pages server-side over 100,000 devices of
// one partner (100 organizations), signed in as the partner's administrator, from 8
// concurrent clients: the device list (first page, the next page, a search, and the
// fragment a live change fetches) and the home page.
func BenchmarkConsolePages(b *testing.B) {
	app.TuneRuntime()
	e := apptest.New(b)
	seedDevices(b, e, 100_000)
	// The planner's statistics, as the server's periodic cleanup keeps them.
	if err := e.App.DB.Optimize(context.Background()); err != nil {
		b.Fatal(err)
	}
	form := url.Values{"email": {"bench@gale.test"}, "password": {apptest.UserPassword}, "next": {"/"}}
	req, _ := http.NewRequest(http.MethodPost, e.Server.URL+"/signin", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.Server.URL)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	res.Body.Close()
	var session string
	for _, c := range res.Cookies() {
		if c.Name == "gale_session" {
			session = c.Value
		}
	}
	if session == "" {
		b.Fatalf("sign-in answered %d without a session", res.StatusCode)
	}
	page := func(extra ...string) apptest.Caller {
		h := http.Header{"Cookie": {"gale_session=" + session}, "Accept-Encoding": {"gzip"}}
		for i := 0; i+1 < len(extra); i += 2 {
			h.Set(extra[i], extra[i+1])
		}
		return apptest.Caller{Header: h}
	}
	body := e.Do(apptest.Caller{Header: http.Header{"Cookie": {"gale_session=" + session}}}, "GET", "/devices", nil).Body
	next := regexp.MustCompile(`href="(/devices\?cursor=[^"]+)"`).FindSubmatch(body)
	if next == nil {
		b.Fatalf("the device list has no next page:\n%s", body)
	}
	nextURL := strings.ReplaceAll(string(next[1]), "&amp;", "&")
	for _, bc := range []struct {
		name, path string
		caller     apptest.Caller
	}{
		{"DevicesFirstPage", "/devices", page()},
		{"DevicesNextPage", nextURL, page()},
		{"DevicesSearch", "/devices?q=host-0999", page()},
		{"DevicesLiveRefresh", "/devices", page("HX-Request", "true", "HX-Target", "device-table", "X-Gale-Live", "1")},
		{"Home", "/", page()},
	} {
		b.Run(bc.name, func(b *testing.B) { apptest.MeasureGets(b, e.Server.URL+bc.path, bc.caller, 8) })
	}
}
