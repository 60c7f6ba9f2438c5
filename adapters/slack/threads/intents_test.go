package threads_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestIntentBatchStatementsDoNotGrowWithInquiries: for a tenant with a destination, the thread
// intent subscriber records a batch's effect keys and queues their jobs in a fixed number of
// statements, so a batch of 64 new inquiries takes as many as a batch of 8. On Postgres its first
// write comes at most 6 statements before its COMMIT (the effect keys, River's jobs and its
// notification, then the desired versions and the checkpoint with the COMMIT): a batch holds a
// transaction id, and with it the log's visible end for every reader, from its first write to its
// commit. River's statements are counted on Postgres only (apptest.SubscriberStatements).
func TestIntentBatchStatementsDoNotGrowWithInquiries(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		batch := func(from, n int) []string {
			for i := range n {
				b.intake(t, fmt.Sprint("k", from+i))
			}
			return batchOf(t, apptest.SubscriberStatements(t, b.app, threads.IntentsName))
		}
		batch(0, 1) // River reads the server's version once per client
		small, large := batch(1, 8), batch(9, 64)
		t.Logf("a batch's statements: %d for 8 inquiries, %d for 64; from the first write to the commit: %d and %d",
			len(small), len(large), heldFor(small), heldFor(large))
		if len(large) != len(small) {
			t.Fatalf("a batch of 64 inquiries took %d statements, one of 8 took %d: want the same\n8: %s\n64: %s",
				len(large), len(small), strings.Join(small, "\n"), strings.Join(large, "\n"))
		}
		if h := heldFor(large); b.app.DB.Dialect == sqldb.Postgres && h > 6 {
			t.Fatalf("the batch's first write came %d statements before its commit: want at most 6\n%s", h, strings.Join(large, "\n"))
		}
		if jobs := len(b.jobs(t)); jobs != 73 {
			t.Fatalf("%d thread jobs, want one per inquiry (73)", jobs)
		}
	})
}

// batchOf returns the statements of the one subscriber batch in a runner's log, from its BEGIN to
// its COMMIT (SQLite logs neither: there, the statements after the batch's bookkeeping).
func batchOf(t *testing.T, log []string) []string {
	t.Helper()
	var batches [][]string
	for i, q := range log {
		if !strings.Contains(q, "projection_batch_begin") && !strings.Contains(q, "json_group_array(stream) FROM projection_parked") {
			continue
		}
		start, end := i, len(log)
		if i > 0 && strings.EqualFold(log[i-1], "begin") {
			start = i - 1
		}
		for j := i + 1; j < len(log); j++ {
			if strings.EqualFold(log[j], "commit") {
				end = j + 1
				break
			}
			if strings.HasPrefix(log[j], "INSERT INTO projection_checkpoints") && !strings.EqualFold(log[start], "begin") {
				end = j + 1 // SQLite: the checkpoint is the batch's last statement
				break
			}
		}
		batches = append(batches, log[start:end])
	}
	if len(batches) != 1 {
		t.Fatalf("%d subscriber batches, want 1:\n%s", len(batches), strings.Join(log, "\n"))
	}
	return batches[0]
}

// heldFor counts a batch's statements from its first write to its commit, both included (0 when
// it wrote nothing before committing).
func heldFor(batch []string) int {
	for i, q := range batch {
		u := strings.ToUpper(q)
		if strings.HasPrefix(u, "INSERT") || strings.HasPrefix(u, "UPDATE") || strings.HasPrefix(u, "DELETE") || strings.HasPrefix(u, "WITH") {
			return len(batch) - i
		}
	}
	return 0
}
