package httpapi_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
)

// BenchmarkIntakeLoopback measures the public intake end to end: a real server (app.Serve, with its
// subscribers running) on a 127.0.0.1:0 listener, 16 concurrent keep-alive clients, embedded SQLite
// with synchronous=FULL, and the audit row of each intake. Both public rate limits are off: one
// loopback address would otherwise measure the limiter. It reports requests/s and p50/p99 latency.
//
//	go test -run '^$' -bench BenchmarkIntakeLoopback -benchtime 2000x ./adapters/httpapi
func BenchmarkIntakeLoopback(b *testing.B) {
	const clients = 16
	ctx := b.Context()
	a, err := app.Open(ctx, app.Config{DataDir: b.TempDir(), Logger: slog.New(slog.DiscardHandler), Public: unlimited})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	if _, _, _, err := a.Tenancy.CreateTenant(ctx, "acme"); err != nil {
		b.Fatal(err)
	}
	base, stop := apptest.Serve(b, a)
	defer stop()
	url := base + "/v1/public/acme/inquiries"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	post := func(i int) error {
		body := fmt.Sprintf(`{"name":"Bench %d","email":"bench%d@example.com","subject":"Load","message":"Loopback load test %d"}`, i, i, i)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprint("bench-", i))
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, res.Body)
		if res.StatusCode != http.StatusAccepted {
			return fmt.Errorf("status %d", res.StatusCode)
		}
		return nil
	}
	if err := post(-1); err != nil { // the server listens and the first connection is up
		b.Fatal(err)
	}
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if err := post(i); err != nil {
					failed.CompareAndSwap(nil, err.Error())
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if msg := failed.Load(); msg != nil {
		b.Fatalf("intake failed: %v", msg)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
