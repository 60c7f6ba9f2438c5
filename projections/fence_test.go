package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// hookProjection is countProjection with a hook run inside each batch's transaction before and
// after its output is written.
type hookProjection struct {
	countProjection
	before, after func(ctx context.Context, b *Batch) error
}

func (p hookProjection) Apply(ctx context.Context, b *Batch) error {
	if p.before != nil {
		if err := p.before(ctx, b); err != nil {
			return err
		}
	}
	if err := p.countProjection.Apply(ctx, b); err != nil {
		return err
	}
	if p.after != nil {
		return p.after(ctx, b)
	}
	return nil
}

func openPostgres(t *testing.T) *sqldb.DB {
	t.Helper()
	db, err := sqldb.OpenPostgres(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// batchXid reads the batch transaction's id, or "" when it has none yet.
func batchXid(ctx context.Context, b *Batch) (string, error) {
	var xid sql.NullString
	err := b.Tx.QueryRowContext(ctx, `SELECT pg_current_xact_id_if_assigned()::text`).Scan(&xid)
	return xid.String, err
}

// TestBatchTakesNoTransactionIDBeforeItsOutput: on Postgres a subscriber batch's bookkeeping
// (checkpoint lock, lease check, generation, parked streams) assigns its transaction no id, so
// the events appended while it applies are not held from readers until it commits (see
// eventstore/postgres): it gets one only with its first output write. A live batch commits
// asynchronously (synchronous_commit off: see applyTx), so that id is released sooner.
func TestBatchTakesNoTransactionIDBeforeItsOutput(t *testing.T) {
	t.Parallel()
	var before, after, syncCommit string
	p := hookProjection{
		before: func(ctx context.Context, b *Batch) error {
			if err := b.Tx.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&syncCommit); err != nil {
				return err
			}
			var err error
			before, err = batchXid(ctx, b)
			return err
		},
		after: func(ctx context.Context, b *Batch) (err error) {
			after, err = batchXid(ctx, b)
			return err
		},
	}
	rig := newBatchRigOf(t, openPostgres(t), p)
	for i := range 2 { // the first batch creates the checkpoint row
		rig.now = rig.now.Add(time.Second) // new streams; the lease renewal is not due
		if err := rig.batch(t, 3); err != nil {
			t.Fatal(err)
		}
		if before != "" || after == "" {
			t.Fatalf("batch %d: transaction id %q before its output, %q after; want none, then one", i, before, after)
		}
		if syncCommit != "off" {
			t.Fatalf("batch %d: synchronous_commit = %s, want off", i, syncCommit)
		}
	}
}

// awaitLockWait returns once another session waits for the advisory lock (class, schema.name)
// that this test's batch holds. It fails when done is signalled first or ctx ends.
func awaitLockWait(ctx context.Context, db *sqldb.DB, class int, name string, done <-chan error) error {
	for {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND classid = $1::oid AND objid = hashtext(current_schema() || '.' || $2)::oid AND objsubid = 2`, class, name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		select {
		case err := <-done:
			if err == nil {
				return errors.New("returned while the batch was still open")
			}
			return fmt.Errorf("failed while the batch was still open: %w", err)
		case <-ctx.Done():
			return errors.New("nobody waited for the batch's lock")
		case <-time.After(time.Millisecond): // polling pg_locks
		}
	}
}

// contendOnce returns a projection whose first batch, before it applies, starts contend on its own
// goroutine and goes on only once contend waits for the advisory lock (class, name()): contend then
// runs against an open batch. done receives contend's result.
func contendOnce(ctx context.Context, db *sqldb.DB, class int, name func() string, contend func() error) (hookProjection, <-chan error) {
	done := make(chan error, 1)
	took := false
	return hookProjection{before: func(context.Context, *Batch) error {
		if took {
			return nil
		}
		took = true
		go func() { done <- contend() }()
		return awaitLockWait(ctx, db, class, name(), done)
	}}, done
}

// TestLeaseTakeoverWaitsForRunningBatch: on Postgres another replica taking over an expired lease
// waits for the batch that is running (it commits), and the former owner's next batch commits
// nothing; the batch holds no row lock for this (TestBatchTakesNoTransactionIDBeforeItsOutput).
func TestLeaseTakeoverWaitsForRunningBatch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a hang guard, not a measure
	defer cancel()
	db := openPostgres(t)
	var rig *batchRig
	p, done := contendOnce(ctx, db, 734511, func() string { return rig.l.name }, func() error {
		later := rig.now.Add(time.Hour) // a's lease has expired for b
		b2 := &lease{db: db, name: rig.l.name, owner: "b", ttl: rig.l.ttl, now: func() time.Time { return later }}
		ok, err := b2.acquire(ctx)
		if err == nil && !ok {
			err = errors.New("b did not get the lease")
		}
		return err
	})
	rig = newBatchRigOf(t, db, p)
	if err := rig.batch(t, 2); err != nil {
		t.Fatalf("a's running batch: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cp, err := Checkpoint(ctx, db, rig.l.name)
	if err != nil {
		t.Fatal(err)
	}
	rig.now = rig.now.Add(time.Second)
	if err := rig.batch(t, 1); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("a's batch after the takeover = %v, want ErrLeaseLost", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM counted`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("counted %d (%v), want the running batch's 2", n, err)
	}
	if got, _ := Checkpoint(ctx, db, rig.l.name); got != cp {
		t.Fatalf("fenced batch moved the checkpoint from %v to %v", cp, got)
	}
}

// TestGenerationSwitchWaitsForRunningBatch: on Postgres a switch of the active generation waits
// for the live generation's running batch, and that generation's next batch stops.
func TestGenerationSwitchWaitsForRunningBatch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a hang guard, not a measure
	defer cancel()
	db := openPostgres(t)
	var rig *batchRig
	p, done := contendOnce(ctx, db, 734512, func() string { return "count" }, func() error {
		err := sqldb.InTx(ctx, db, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `UPDATE projection_state SET building_gen = 2, building_version = 1 WHERE name = 'count'`); err != nil {
				return err
			}
			return nil
		})
		if err == nil {
			err = switchTo(ctx, db, countProjection{}, 2, rig.now)
		}
		return err
	})
	rig = newBatchRigOf(t, db, p)
	if err := countProjection.Setup(countProjection{}, ctx, db, 2); err != nil {
		t.Fatal(err)
	}
	if err := rig.batch(t, 2); err != nil {
		t.Fatalf("the running batch: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rig.now = rig.now.Add(time.Second)
	if err := rig.batch(t, 1); !errors.Is(err, errGenerationChanged) {
		t.Fatalf("generation 1's batch after the switch = %v, want errGenerationChanged", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM counted_g1`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("generation 1 counted %d (%v), want the running batch's 2", n, err)
	}
}
