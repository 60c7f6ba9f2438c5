package threads_test

import (
	"fmt"
	"testing"

	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/app/apptest"
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

