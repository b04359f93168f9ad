package webhooks_test

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"gale/internal/app"

	"gale/internal/domains/webhooks"
	"gale/internal/platform/events"
	"gale/internal/testkit/apptest"
)

// BenchmarkDeliveries measures how fast one node's senders (4, as in production) deliver
// queued deliveries to a local receiver answering 204: claim, signed POST over loopback, and
// the recorded outcome with its attempt row. Queuing (the events consumer) is timed apart
// and reported as queued/s.
func BenchmarkDeliveries(b *testing.B) {
	e := apptest.New(b)
	admin := e.Admin()
	ten := e.NewTenant(admin, "Bench")
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer rcv.Close()
	e.Must(http.StatusCreated, ten.Partner, "POST", hooks, map[string]any{"name": "bench", "url": rcv.URL, "events": []string{"bench.*"}})
	ctx := context.Background()
	err := e.App.DB.Write(ctx, func(tx *sql.Tx) error {
		for i := range b.N {
			if _, err := events.Record(ctx, tx, events.Event{Type: "bench.event", PartnerID: ten.PartnerID, OrgID: ten.OrgID},
				map[string]any{"i": i, "hostname": "srv-0001", "status": "offline"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := e.App.Events.RunOnce(ctx); err != nil {
		b.Fatal(err)
	}
	queued := time.Since(start)
	b.ResetTimer()
	var wg sync.WaitGroup
	var mu sync.Mutex
	sent := 0
	for range 4 {
		wg.Go(func() {
			n, err := app.Service[*webhooks.Service](e.App).RunDue(ctx)
			if err != nil {
				b.Error(err)
			}
			mu.Lock()
			sent += n
			mu.Unlock()
		})
	}
	wg.Wait()
	b.StopTimer()
	if sent != b.N {
		b.Fatalf("sent %d deliveries, want %d", sent, b.N)
	}
	var ok int
	if err := e.App.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_deliveries WHERE status = $1`, webhooks.StatusSucceeded).Scan(&ok); err != nil || ok != b.N {
		b.Fatalf("%d succeeded (%v), want %d", ok, err, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
	b.ReportMetric(float64(b.N)/queued.Seconds(), "queued/s")
}
