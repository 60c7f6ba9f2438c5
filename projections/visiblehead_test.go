package projections

import (
	"context"
	"testing"
	"time"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/postgres"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestBatchDoesNotWaitForOtherTransactions: on Postgres a batch's status update reads the end of
// the log as it is readable now. It does not wait, as Head does, for the transactions in front of
// the last commit: under load those are mostly the other subscribers' batches, and every
// subscriber waiting for all the others after each batch serialized them.
func TestBatchDoesNotWaitForOtherTransactions(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // a hang guard, not a measure
	defer cancel()
	db, err := sqldb.OpenPostgres(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	// Head would wait for the open transaction below for as long as it stays open.
	store, err := postgres.New(ctx, db.PgxPool(), postgres.Options{SettleTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	r, l := ownedRunner(ctx, t, store, db, countProjection{})
	appendOne := func(stream string) {
		t.Helper()
		if _, err := store.Append(ctx, stream, eventstore.Any(), []eventstore.EventData{{ID: eventstore.DeterministicID(stream, 0),
			Type: "T", Data: []byte(`"x"`), Metadata: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	appendOne("s-1")
	evs, err := store.ReadAll(ctx, eventstore.Start, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("read %d events, %v", len(evs), err)
	}
	// Another transaction with an id, still open, then a commit behind it: the log's last event is
	// held until that transaction ends.
	other, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback() }()
	if _, err := other.ExecContext(ctx, `SELECT txid_current()`); err != nil {
		t.Fatal(err)
	}
	appendOne("s-2")
	if err := r.applyBatch(ctx, l, 1, l.name, pending{evs: evs}); err != nil {
		t.Fatalf("batch while another transaction is open: %v", err)
	}
	if err := r.WaitFor(ctx, evs[0].Position); err != nil { // a consistent read it releases
		t.Fatalf("WaitFor: %v", err)
	}
	st := r.Status()
	if st.Position != evs[0].Position || !st.CaughtUp {
		t.Fatalf("status %+v: want at %v and caught up with what is readable", st, evs[0].Position)
	}
}

// ownedRunner sets up a runner of p on store that holds generation 1's lease.
func ownedRunner(ctx context.Context, t *testing.T, store eventstore.Store, db *sqldb.DB, p Projection) (*Runner, *lease) {
	t.Helper()
	r := &Runner{Store: store, DB: db, Projection: p, Owner: "a", LeaseTTL: 30 * time.Second}
	if err := r.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	r.gen = 1
	l := &lease{db: db, name: checkpointName(r.Projection, 1), owner: "a", ttl: r.LeaseTTL, now: time.Now}
	if ok, err := l.acquire(ctx); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	return r, l
}

// gatedHead is a store whose VisibleHead, the read a batch's status update makes, waits until
// the test releases it.
type gatedHead struct {
	eventstore.Store
	entered, release chan struct{}
}

func (g gatedHead) VisibleHead(ctx context.Context) (eventstore.Position, error) {
	select {
	case g.entered <- struct{}{}:
	case <-ctx.Done():
		return eventstore.Position{}, ctx.Err()
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return eventstore.Position{}, ctx.Err()
	}
	return g.Store.VisibleHead(ctx)
}

// TestWaitersWakeBeforeTheHeadRead: a read waiting for a batch's position (read-your-writes,
// consistent=true) is answered once the batch has committed, and the subscription may read its
// next batch then, not after the head read that dates the status's lag, a round trip on Postgres.
// The head, lag and caught-up flag follow that read.
func TestWaitersWakeBeforeTheHeadRead(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a hang guard, not a measure
		defer cancel()
		tb := newBundle(t, db)
		store := gatedHead{Store: tb.store, entered: make(chan struct{}), release: make(chan struct{})}
		r, l := ownedRunner(ctx, t, store, db, &probe{})
		r.setOwner(true)
		at := tb.append(t, "s-1", "poison-a").Position // parks s-1
		evs, err := tb.store.ReadAll(ctx, eventstore.Start, 0)
		if err != nil || len(evs) != 1 {
			t.Fatalf("read %d events, %v", len(evs), err)
		}
		applied := make(chan error, 1)
		p := pending{evs: evs, applied: make(chan struct{}), waited: new(time.Duration)}
		go func() { applied <- r.applyBatch(ctx, l, 1, l.name, p) }()
		select {
		case <-store.entered:
		case err := <-applied:
			t.Fatalf("the batch ended (%v) without reading the head", err)
		}
		if err := r.WaitFor(ctx, at); err != nil {
			t.Fatalf("WaitFor while the head read is pending: %v", err)
		}
		select {
		case <-p.applied: // the subscription may read on
		case <-ctx.Done():
			t.Fatal("the batch was not marked applied while the head read was pending")
		}
		if st := r.Status(); st.Position != at || st.Parked != 1 || st.CaughtUp {
			t.Fatalf("status before the head read %+v: want at %v with s-1 parked, not yet known to be caught up", st, at)
		}
		close(store.release)
		if err := <-applied; err != nil {
			t.Fatal(err)
		}
		if st := r.Status(); st.Head != at || !st.CaughtUp || st.LagEvents != 0 {
			t.Fatalf("status after the head read %+v: want head %v, caught up", st, at)
		}
	})
}
