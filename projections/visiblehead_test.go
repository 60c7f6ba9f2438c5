package projections

import (
	"context"
	"testing"
	"time"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/postgres"
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
	r := &Runner{Store: store, DB: db, Projection: countProjection{}, Owner: "a", LeaseTTL: 30 * time.Second}
	if err := r.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	r.gen = 1
	l := &lease{db: db, name: checkpointName(r.Projection, 1), owner: "a", ttl: r.LeaseTTL, now: time.Now}
	if ok, err := l.acquire(ctx); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
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
