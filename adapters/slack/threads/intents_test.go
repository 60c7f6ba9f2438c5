package threads_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestIntentBatchStatementsDoNotGrowWithInquiries: for a tenant with a destination, the thread
// intent subscriber records a batch's effect keys and queues their jobs in a fixed number of
// statements, so a batch of 64 new inquiries takes as many as a batch of 8. On Postgres its first
// write comes 4 round trips before the end of its commit (the effect keys, River's jobs, River's
// notification, then the desired versions and the checkpoint with the COMMIT): a batch holds a
// transaction id, and with it the log's visible end for every reader, from its first write to its
// commit. River's statements are counted on Postgres only (apptest.SubscriberRoundTrips).
func TestIntentBatchStatementsDoNotGrowWithInquiries(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		batch := func(from, n int) [][]string {
			for i := range n {
				b.intake(t, fmt.Sprint("k", from+i))
			}
			return apptest.SubscriberBatch(t, b.app, threads.IntentsName)
		}
		batch(0, 1) // River reads the server's version once per client
		small, large := batch(1, 8), batch(9, 64)
		t.Logf("a batch's statements: %d for 8 inquiries, %d for 64; round trips from the first write to the commit: %d and %d",
			apptest.CountStatements(small), apptest.CountStatements(large), apptest.HeldFor(small), apptest.HeldFor(large))
		if apptest.CountStatements(large) != apptest.CountStatements(small) {
			t.Fatalf("a batch of 64 inquiries took %d statements, one of 8 took %d: want the same\n8: %v\n64: %v",
				apptest.CountStatements(large), apptest.CountStatements(small), small, large)
		}
		if h := apptest.HeldFor(large); b.app.DB.Dialect == sqldb.Postgres && h != 4 {
			t.Fatalf("the batch's first write came %d round trips before the end of its commit: want 4\n%v", h, large)
		}
		if jobs := len(b.jobs(t)); jobs != 73 {
			t.Fatalf("%d thread jobs, want one per inquiry (73)", jobs)
		}
	})
}

// TestThreadMappingWritesGoWithTheCommit: the thread events a batch folds into the mapping (here
// the postings of 3, then 9 threads) are written with the batch's commit, so on Postgres the
// batch takes two round trips and its transaction id in the last, whatever their number, and
// the mapping names every posted root.
func TestThreadMappingWritesGoWithTheCommit(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		posted := func(from, n int) [][]string {
			for i := range n {
				b.intake(t, fmt.Sprint("k", from+i))
			}
			apptest.SubscriberRoundTrips(t, b.app, threads.IntentsName) // the jobs
			noErrors(t, b.work(t))                                      // the postings
			return apptest.SubscriberBatch(t, b.app, threads.IntentsName)
		}
		small, large := posted(0, 3), posted(3, 9)
		t.Logf("folding 3 postings: %d round trips, 9: %d", len(small), len(large))
		if b.app.DB.Dialect == sqldb.Postgres {
			// Two round trips: the BEGIN with the batch's bookkeeping, then its writes with the COMMIT.
			if len(large) != 2 || len(small) != 2 || apptest.HeldFor(large) != 1 {
				t.Fatalf("folding 9 postings took %d round trips (3: %d), the last %d after the first write: want 2, and 1\n%v",
					len(large), len(small), apptest.HeldFor(large), large)
			}
		}
		var unmapped int
		if err := b.app.DB.QueryRowContext(t.Context(), `SELECT count(*) FROM slack_threads WHERE root_ts = ''`).Scan(&unmapped); err != nil {
			t.Fatal(err)
		}
		if unmapped != 0 || len(b.roots()) != 12 {
			t.Fatalf("%d of the mappings name no root, %d roots posted: want 0 and 12", unmapped, len(b.roots()))
		}
	})
}

// TestErasureInTheBatchOfItsPosting: an inquiry whose thread posting and erasure the subscriber
// folds in one batch, after the tenant's destination was deactivated, still gets its deletion
// job: the batch knows the root its own posting mapped, whose write goes with the commit.
func TestErasureInTheBatchOfItsPosting(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		id := b.intake(t, "k1")
		apptest.SubscriberRoundTrips(t, b.app, threads.IntentsName)
		noErrors(t, b.work(t)) // SlackThreadPosted, not folded yet
		if _, err := b.app.DB.ExecContext(t.Context(), `UPDATE slack_destinations SET active = 0`); err != nil {
			t.Fatal(err)
		}
		if _, err := b.app.Commands.Erase(t.Context(), commands.Erase{Target: commands.Target{Tenant: b.tenant, InquiryID: id, Actor: b.admin}}); err != nil {
			t.Fatal(err)
		}
		apptest.SubscriberBatch(t, b.app, threads.IntentsName)
		jobs := b.jobs(t)
		if len(jobs) != 2 {
			t.Fatalf("%d thread jobs, want the posting's and the erasure's", len(jobs))
		}
		for range 3 {
			b.clock.Advance(2 * time.Minute) // past the in-flight guard
			for _, j := range b.jobs(t) {
				_ = b.workJob(t.Context(), t, j)
			}
			apptest.SubscriberRoundTrips(t, b.app, threads.IntentsName)
		}
		for _, m := range b.roots() {
			if m.Subtype != "tombstone" {
				t.Fatalf("a message of the erased inquiry is left in Slack: %s %q", m.TS, m.Text)
			}
		}
	})
}
