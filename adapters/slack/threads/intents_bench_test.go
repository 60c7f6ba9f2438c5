package threads_test

import (
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/internal/pgtest"
)

// BenchmarkIntentBatch: the thread intent subscriber of a tenant with a destination applies a
// batch of 64 new inquiries (Postgres; TEST_DATABASE_URL): each iteration starts the runner,
// which applies the batch and stops at the log's head. Its transaction holds the log's visible
// end from its first write to its commit (TestIntentBatchStatementsDoNotGrowWithInquiries).
func BenchmarkIntentBatch(b *testing.B) {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		b.Skip("TEST_DATABASE_URL is not set")
	}
	clk := apptest.NewClock(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	a := apptest.Open(b, app.Config{DatabaseURL: pgtest.URL(b), Now: clk.Now, Logger: slog.New(slog.DiscardHandler)})
	fake := fakeslack.NewTestServer(b, fakeslack.Options{Channels: []string{channel}})
	ten, _, _ := apptest.TenantWithOperator(b, a, "acme")
	apptest.InstallSlack(b, a, ten, fake, channel)
	n := 0
	for b.Loop() {
		b.StopTimer()
		for range 64 {
			apptest.Intake(b, a, ten, fmt.Sprint("k", n))
			n++
		}
		b.StartTimer()
		apptest.SubscriberRoundTrips(b, a, threads.IntentsName)
	}
}
