package threads_test

import (
	"fmt"
	"log/slog"
	"os"
	"testing"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/slacktest"
)

// BenchmarkIntentBatch: the thread intent subscriber of a tenant with a destination applies a
// batch of 64 new inquiries (Postgres; TEST_DATABASE_URL): each iteration starts the runner,
// which applies the batch and stops at the log's head. Its transaction holds the log's visible
// end from its first write to its commit (TestIntentBatchStatementsDoNotGrowWithInquiries).
func BenchmarkIntentBatch(b *testing.B) {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		b.Skip("TEST_DATABASE_URL is not set")
	}
	e := slacktest.New(b, app.Config{DatabaseURL: pgtest.URL(b), Logger: slog.New(slog.DiscardHandler)},
		slacktest.Options{Fake: fakeslack.Options{Channels: []string{channel}}, Destination: channel, Clearance: "personal"})
	a, ten := e.App, e.Tenant
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
