package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/pgtest"
)

// BenchmarkVisibilityWithSlack: on Postgres (TEST_DATABASE_URL), a served Casebook receives b.N
// intakes offered at 250 a second (open loop, after a second's warm-up not counted), for a tenant without Slack and for one with a
// thread destination and an active List on a fake Slack (whose rate limits hold most posts back,
// as Slack's would at this rate). It reports, from each intake's acknowledgement to the query
// model having applied its event (Runner.WaitFor on the intake's position), the median and the
// 99th percentile in milliseconds. The Slack subscribers' batches run beside the query model's,
// and on Postgres a batch holds back every reader's view of the log from its first write to its
// commit.
//
//	go test -run '^$' -bench VisibilityWithSlack -benchtime 2000x ./app
func BenchmarkVisibilityWithSlack(b *testing.B) {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		b.Skip("TEST_DATABASE_URL is not set")
	}
	b.Run("slack=off", func(b *testing.B) { visibility(b, false) })
	b.Run("slack=on", func(b *testing.B) { visibility(b, true) })
}

func visibility(b *testing.B, slack bool) {
	const interval = 4 * time.Millisecond
	ctx := b.Context()
	a := apptest.Open(b, app.Config{DatabaseURL: pgtest.URL(b), Logger: slog.New(slog.DiscardHandler)})
	ten, _, _ := apptest.TenantWithOperator(b, a, "acme")
	if slack {
		const channel = "C0OPS000001"
		fake := fakeslack.NewTestServer(b, fakeslack.Options{Channels: []string{channel}, Clock: fakeslack.SystemClock()})
		apptest.InstallSlack(b, a, ten, fake, channel)
		li, err := fake.CreateList("Inquiries", apptest.BoardColumns()...)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := a.Lists.Store.Activate(ctx, lists.ActivateRequest{Tenant: ten, List: li.ID, Clearance: "internal"}); err != nil {
			b.Fatal(err)
		}
	}
	_, stop := apptest.Serve(b, a)
	defer stop()
	var mu sync.Mutex
	var delays []time.Duration
	var wg sync.WaitGroup
	i := 0
	start := time.Now()
	offer := func(record bool) {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d) // pacing the offered load, not synchronisation
		}
		key := fmt.Sprint("vis-", i)
		i++
		wg.Go(func() {
			res, err := a.Commands.Intake(ctx, commands.Intake{Tenant: ten, Source: domain.SourcePublicForm, IdempotencyKey: key,
				Requester: domain.Requester{Name: "Ada Lovelace", Email: "ada@example.com"}, Subject: "Invoice twice",
				Message: "Invoice 42 charges me twice.", Category: "billing"})
			if err != nil {
				b.Error(err)
				return
			}
			acked := time.Now()
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if err := a.QueryModel().WaitFor(wctx, res.Position); err != nil {
				b.Error(err)
				return
			}
			if record {
				mu.Lock()
				delays = append(delays, time.Since(acked))
				mu.Unlock()
			}
		})
	}
	// A second's warm-up, not counted: a process's first second runs slower (casebook bench's
	// visibility warm-up).
	for range int(time.Second / interval) {
		offer(false)
	}
	for b.Loop() {
		offer(true)
	}
	wg.Wait()
	if len(delays) == 0 {
		return
	}
	slices.Sort(delays)
	at := func(p float64) float64 {
		return float64(delays[int(p*float64(len(delays)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}
