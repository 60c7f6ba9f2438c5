package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/internal/ratelimit"
)

// BenchmarkIntakeWork measures the work an embedded intake costs end to end, which on a shared
// machine is steadier than its wall time: b.N public intakes over loopback HTTP, then every
// subscriber applying them. It reports the process's CPU time per intake (user + system, from
// getrusage, covering the server, the subscribers and the load generator) and the write
// transactions per intake of the durable handle (appends, audit) and of the subscribers'.
// closed-16 sends from 16 clients as fast as they are answered; paced-200/s offers 200 intakes a
// second (below the machine's capacity, where batches stay small unless subscribers gather them).
//
//	go test -run '^$' -bench BenchmarkIntakeWork -benchtime 2000x ./app
func BenchmarkIntakeWork(b *testing.B) {
	b.Run("closed-16", func(b *testing.B) { intakeWork(b, 0) })
	b.Run("paced-200/s", func(b *testing.B) { intakeWork(b, 5*time.Millisecond) })
}

// intakeWork runs b.N intakes from 16 clients, each sent when due every interval (open loop) or,
// when interval is 0, as soon as a client is free.
func intakeWork(b *testing.B, interval time.Duration) {
	const clients = 16
	ctx := b.Context()
	off := ratelimit.Rate{Off: true}
	a, err := app.Open(ctx, app.Config{DataDir: b.TempDir(), Logger: slog.New(slog.DiscardHandler),
		Public: httpapi.PublicConfig{ClientRate: off, TenantRate: off}})
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
		req.Header.Set("Idempotency-Key", fmt.Sprint("work-", i))
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
	if err := post(-1); err != nil {
		b.Fatal(err)
	}
	caughtUp := func() {
		head, err := a.Store.Head(ctx)
		if err != nil {
			b.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		for _, r := range a.Runners {
			if err := r.WaitFor(wctx, head); err != nil {
				b.Fatalf("%s did not catch up: %v", r.Status().Name, err)
			}
		}
	}
	caughtUp()
	before, cpu0 := a.StorageStats(), cpuTime()
	b.ResetTimer()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
					time.Sleep(d) // pacing the offered load, not synchronisation
				}
				if err := post(i); err != nil {
					failed.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	caughtUp()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	after, cpu := a.StorageStats(), cpuTime()-cpu0
	n := float64(b.N)
	b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/intake")
	b.ReportMetric(float64(after.Gate["durable"].Entered-before.Gate["durable"].Entered)/n, "durable-tx/intake")
	b.ReportMetric(float64(after.Gate["replayable"].Entered-before.Gate["replayable"].Entered)/n, "subscriber-tx/intake")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
