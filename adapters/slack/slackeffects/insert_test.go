package slackeffects_test

import (
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestInsertManyTxQueuesEachJobOnce: jobs of the same kind and arguments are one job, whether
// they come in one call (the first kept) or in two.
func TestInsertManyTxQueuesEachJobOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, nil, func(t *testing.T, b *bundle) {
		a := threads.SyncArgs{Tenant: b.tenant, Inquiry: "i1", Version: 1}
		c := threads.SyncArgs{Tenant: b.tenant, Inquiry: "i2", Version: 1}
		insert := func(jobs ...slackeffects.Queued) {
			t.Helper()
			if err := sqldb.InConnTx(t.Context(), b.app.DB, func(tx *sqldb.Tx) error {
				return b.app.Effects.InsertManyTx(t.Context(), tx.Tx, jobs)
			}); err != nil {
				t.Fatal(err)
			}
		}
		insert(slackeffects.Queued{Args: a}, slackeffects.Queued{Args: a, At: time.Now().Add(time.Hour)}, slackeffects.Queued{Args: c})
		insert(slackeffects.Queued{Args: a})
		jobs := apptest.Jobs(t, b.app.Effects.Client(), threadKind)
		if len(jobs) != 2 {
			t.Fatalf("%d jobs, want 2", len(jobs))
		}
		for _, j := range jobs {
			if j.ScheduledAt.After(time.Now().Add(time.Minute)) {
				t.Fatalf("job %d is scheduled at %v: the later duplicate was kept", j.ID, j.ScheduledAt)
			}
		}
	})
}
