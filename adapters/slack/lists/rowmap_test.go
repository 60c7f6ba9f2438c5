package lists_test

import (
	"fmt"
	"testing"

	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestRowMapWritesGoWithTheCommit: the List row events a listrowmap batch folds (here the rows
// created for 2, then 8 inquiries) are written with the batch's commit, so on Postgres the batch
// takes its transaction id in its last round trip whatever their number; the map holds every row;
// the sync jobs of 8 inquiries are queued by a listintents batch in as many statements as 2 (powers
// of two: on SQLite a batch's rows go in statements of such sizes).
func TestRowMapWritesGoWithTheCommit(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		b.activate(t)
		created := func(from, n int) (intents, rowmap [][]string) {
			for i := range n {
				b.intake(t, fmt.Sprint("k", from+i))
			}
			intents = apptest.SubscriberBatch(t, b.app, lists.IntentsName)
			noErrors(t, b.work(t)) // the rows, and their ListRowCreated events
			return intents, apptest.SubscriberBatch(t, b.app, lists.RowMapName)
		}
		// The first runs: River reads the server's version once per client, and the row map's
		// first reads cover the activation's probe.
		b.intake(t, "k0")
		apptest.SubscriberRoundTrips(t, b.app, lists.IntentsName)
		noErrors(t, b.work(t))
		apptest.SubscriberRoundTrips(t, b.app, lists.RowMapName)
		smallIntents, small := created(1, 2)
		largeIntents, large := created(3, 8)
		t.Logf("listintents: %d statements for 2 inquiries, %d for 8; listrowmap: %d round trips for 2 rows, %d for 8",
			apptest.CountStatements(smallIntents), apptest.CountStatements(largeIntents), len(small), len(large))
		if apptest.CountStatements(largeIntents) != apptest.CountStatements(smallIntents) {
			t.Fatalf("listintents took %d statements for 8 inquiries, %d for 2: want the same\n%v", apptest.CountStatements(largeIntents),
				apptest.CountStatements(smallIntents), largeIntents)
		}
		if b.app.DB.Dialect == sqldb.Postgres && (len(large) != len(small) || apptest.HeldFor(large) != 1) {
			t.Fatalf("folding 8 rows took %d round trips (2: %d), the last %d after the first write: want as many, and 1\n%v",
				len(large), len(small), apptest.HeldFor(large), large)
		}
		rows, err := lists.Rows(t.Context(), b.app.DB, b.tenant)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 11 || len(b.rows()) != 11 {
			t.Fatalf("%d mappings, %d rows in the List: want 11 of each", len(rows), len(b.rows()))
		}
	})
}
