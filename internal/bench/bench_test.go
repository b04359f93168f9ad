// Package bench measures Gale's hot paths through the real HTTP stack on the configured
// backend (SQLite, or PostgreSQL with TEST_DATABASE_URL). Run with `make bench`; the figures
// are recorded in docs/benchmarks.md.
package bench

import (
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"gale/internal/access"
	"gale/internal/app"
	"gale/internal/apptest"
	"gale/internal/auth"
	"gale/internal/store"
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
	// PostgreSQL's autovacuum would analyze the new rows soon; do it now. (On SQLite, statistics
	// make bound values re-plan every statement, so the server never creates them.)
	if e.App.DB.Dialect == store.Postgres {
		if _, err := e.App.DB.SQL.Exec(`ANALYZE`); err != nil {
			b.Fatal(err)
		}
	}
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
	url := e.Server.URL + "/api/v1/orgs/organizations?limit=100"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	get := func() time.Duration {
		req, _ := http.NewRequest("GET", url, nil)
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
	for i := 0; i < 50; i++ { // warm connections and caches
		get()
	}
	const clients = 16
	var mu sync.Mutex
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	work := make(chan struct{}, b.N)
	for i := 0; i < b.N; i++ {
		work <- struct{}{}
	}
	close(work)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, b.N/clients+1)
			for range work {
				local = append(local, get())
			}
			mu.Lock()
			latencies = append(latencies, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) float64 {
		return float64(latencies[int(float64(len(latencies)-1)*p)].Microseconds()) / 1000
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
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
