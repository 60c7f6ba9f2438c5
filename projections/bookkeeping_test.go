package projections

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// batchRig is a runner of countProjection that owns generation 1's lease, with a settable clock,
// whose batches the test applies itself (applyBatch).
type batchRig struct {
	tb  *bundle
	r   *Runner
	l   *lease
	now time.Time
}

func newBatchRig(t *testing.T, db *sqldb.DB) *batchRig {
	t.Helper()
	return newBatchRigOf(t, db, countProjection{})
}

// newBatchRigOf is newBatchRig with projection p (whose tables are countProjection's).
func newBatchRigOf(t *testing.T, db *sqldb.DB, p Projection) *batchRig {
	t.Helper()
	rig := &batchRig{tb: newBundle(t, db), now: time.Unix(1_800_000_000, 0)}
	clock := func() time.Time { return rig.now }
	rig.r = &Runner{Store: rig.tb.store, DB: db, Projection: p, Owner: "a", LeaseTTL: 30 * time.Second, Now: clock}
	if err := rig.r.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	rig.r.gen = 1
	rig.l = &lease{db: db, name: checkpointName(rig.r.Projection, 1), owner: "a", ttl: rig.r.LeaseTTL, now: clock}
	if ok, err := rig.l.acquire(t.Context()); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	return rig
}

// batch appends n events (one stream each) and applies every event after the checkpoint as one
// batch.
func (rig *batchRig) batch(t *testing.T, n int) error {
	t.Helper()
	return rig.r.applyBatch(t.Context(), rig.l, 1, rig.l.name, rig.next(t, n))
}

// next appends n events (one stream each) and returns every event after the checkpoint.
func (rig *batchRig) next(t *testing.T, n int) pending {
	t.Helper()
	from, err := Checkpoint(t.Context(), rig.r.DB, rig.l.name)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		rig.tb.append(t, fmt.Sprintf("s-%d-%d", rig.now.UnixNano(), i), "x")
	}
	evs, err := rig.tb.store.ReadAll(t.Context(), from, 0)
	if err != nil || len(evs) < n {
		t.Fatalf("read %d events (%v), want at least %d", len(evs), err, n)
	}
	return pending{evs: evs}
}

func (rig *batchRig) expires(t *testing.T) time.Time {
	t.Helper()
	var ns int64
	if err := rig.r.DB.QueryRowContext(t.Context(), rig.r.DB.Rebind(`SELECT expires_at FROM projection_leases WHERE name = ?`), rig.l.name).Scan(&ns); err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, ns)
}

// TestBatchBookkeepingIsOneStatement: on Postgres a batch's transaction sends, besides its output,
// one statement before it (checkpoint lock, lease, generation, parked streams) and the checkpoint
// after it: no savepoint and no statement per check.
func TestBatchBookkeepingIsOneStatement(t *testing.T) {
	t.Parallel()
	db, stmts := dbtest.CountingPostgres(t)
	rig := newBatchRig(t, db)
	if err := rig.batch(t, 2); err != nil { // creates the checkpoint row
		t.Fatal(err)
	}
	rig.now = rig.now.Add(time.Second)
	p := rig.next(t, 5)
	stmts.Reset()
	if err := rig.r.applyBatch(t.Context(), rig.l, 1, rig.l.name, p); err != nil {
		t.Fatal(err)
	}
	// begin, projection_batch_begin, 5 inserts, the checkpoint, commit; then update's parked
	// count is not needed (the batch knows it).
	if got, want := stmts.Total(""), 4+5; got != want || stmts.Total("SAVEPOINT") != 0 {
		t.Fatalf("%d statements (want %d, no savepoint): %v", got, want, stmts.Counts())
	}
}

// TestBatchRenewsLeaseOnlyWhenDue: a batch renews the lease only once TTL/3 has passed since the
// last renewal; whether it renews or only checks, a replica whose lease was taken over commits
// nothing.
func TestBatchRenewsLeaseOnlyWhenDue(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		rig := newBatchRig(t, db)
		acquired := rig.expires(t)
		rig.now = rig.now.Add(9 * time.Second) // less than TTL/3 after the acquire
		if err := rig.batch(t, 1); err != nil {
			t.Fatal(err)
		}
		if got := rig.expires(t); !got.Equal(acquired) {
			t.Fatalf("lease renewed to %v by a batch 9s after acquiring", got)
		}
		rig.now = rig.now.Add(2 * time.Second) // 11s: due
		if err := rig.batch(t, 1); err != nil {
			t.Fatal(err)
		}
		if got, want := rig.expires(t), rig.now.Add(rig.l.ttl); !got.Equal(want) {
			t.Fatalf("lease expires at %v after a due batch, want %v", got, want)
		}
		rig.now = rig.now.Add(time.Second)
		if err := rig.batch(t, 1); err != nil { // not due again
			t.Fatal(err)
		}
		counted := func() int {
			var n int
			if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM counted`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := counted(); n != 3 {
			t.Fatalf("counted %d, want 3", n)
		}
		// Another replica takes over; a's batches, checking or renewing, commit nothing.
		if _, err := db.ExecContext(t.Context(), `UPDATE projection_leases SET owner = 'b'`); err != nil {
			t.Fatal(err)
		}
		cp, err := Checkpoint(t.Context(), db, rig.l.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range []time.Duration{time.Second, time.Minute} {
			rig.now = rig.now.Add(step)
			if err := rig.batch(t, 1); !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("batch %v later = %v, want ErrLeaseLost", step, err)
			}
			if got, _ := Checkpoint(t.Context(), db, rig.l.name); got != cp || counted() != 3 {
				t.Fatalf("fenced batch moved the checkpoint to %v or wrote output", got)
			}
		}
	})
}
