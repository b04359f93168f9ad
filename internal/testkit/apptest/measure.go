package apptest

import (
	"io"
	"net/http"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"
)

// MeasureGets runs b.N GETs of target from concurrent clients over loopback HTTP and reports
// requests per second, the p50 and p99 latency, and the process's CPU time per request.
func MeasureGets(b *testing.B, target string, caller Caller, clients int) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients * 2}}
	get := func() time.Duration {
		req, _ := http.NewRequest("GET", target, nil)
		caller.apply(req)
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
	// Warm up as the measurement runs, every client at once, so that the HTTP connections and
	// the database pool are all open before timing starts.
	var warm sync.WaitGroup
	for c := 0; c < clients; c++ {
		warm.Go(func() {
			for i := 0; i < 10; i++ {
				get()
			}
		})
	}
	warm.Wait()
	var mu sync.Mutex
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start, cpu := time.Now(), processCPU()
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

// processCPU is the CPU time this process has used: client and server together, so a change
// that makes the server cheaper shows here even when the latencies are noisy.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
