package projections

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/eventstoretest"
	"github.com/casebook/casebook/internal/sqldb"
)

// countProjection counts events into a table.
type countProjection struct{}

func (countProjection) Name() string     { return "count" }
func (countProjection) Version() int     { return 1 }
func (countProjection) Tables() []string { return []string{"counted"} }
func (countProjection) Setup(ctx context.Context, db *sqldb.DB, g Generation) error {
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+g.Table("counted")+` (id TEXT PRIMARY KEY)`)
	return err
}
func (countProjection) Apply(ctx context.Context, b *Batch) error {
	for _, e := range b.Events {
		if err := b.Exec(ctx, `INSERT INTO `+b.Gen.Table("counted")+` (id) VALUES (?) ON CONFLICT DO NOTHING`, e.ID); err != nil {
			return err
		}
	}
	return nil
}

func setupLease(t *testing.T) (*sqldb.DB, eventstore.Store) {
	t.Helper()
	return eventstoretest.SQLite(t)
}

func newRunner(db *sqldb.DB, s eventstore.Store, owner string) *Runner {
	return &Runner{Store: s, DB: db, Projection: countProjection{}, Owner: owner, LeaseTTL: 300 * time.Millisecond, RetryDelay: 10 * time.Millisecond}
}

// TestLeaseOneOwnerAndHandover: two replicas, one owner; when it stops the other takes over and
// continues from the shared checkpoint.
func TestLeaseOneOwnerAndHandover(t *testing.T) {
	t.Parallel()
	db, s := setupLease(t)
	a, b := newRunner(db, s, "a"), newRunner(db, s, "b")
	if err := a.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	r1, err := s.Append(t.Context(), "s-1", eventstore.NoStream(), eventstoretest.Events("x", 3))
	if err != nil {
		t.Fatal(err)
	}
	actx, stopA := context.WithCancel(t.Context())
	aDone := make(chan struct{})
	go func() { defer close(aDone); _ = a.Run(actx) }()
	wctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := a.WaitFor(wctx, r1.Position); err != nil {
		t.Fatal(err)
	}
	bctx, stopB := context.WithCancel(t.Context())
	defer stopB()
	bDone := make(chan struct{})
	go func() { defer close(bDone); _ = b.Run(bctx) }()
	// b follows a's checkpoint without owning the lease.
	if err := b.WaitFor(wctx, r1.Position); err != nil {
		t.Fatal(err)
	}
	if !a.Status().Owner || b.Status().Owner {
		t.Fatalf("owners: a=%v b=%v", a.Status().Owner, b.Status().Owner)
	}
	stopA()
	<-aDone
	r2, err := s.Append(t.Context(), "s-2", eventstore.NoStream(), eventstoretest.Events("y", 2))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(wctx, r2.Position); err != nil {
		t.Fatalf("b did not take over: %v (%+v)", err, b.Status())
	}
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM counted`).Scan(&n); err != nil || n != 5 {
		t.Fatalf("counted %d (%v), want 5", n, err)
	}
	stopB()
	<-bDone
}

// TestLeaseFencesFormerOwner: once another replica holds the lease, the former owner's batch
// commits nothing.
func TestLeaseFencesFormerOwner(t *testing.T) {
	t.Parallel()
	db, s := setupLease(t)
	a := newRunner(db, s, "a")
	if err := a.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.init()
	l := &lease{db: db, name: checkpointName(a.Projection, 1), owner: "a", ttl: time.Minute, now: time.Now}
	if ok, err := l.acquire(t.Context()); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	// Another replica takes over (as after a's lease expired while it was paused).
	if _, err := db.ExecContext(t.Context(), `UPDATE projection_leases SET owner = 'b'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(t.Context(), "s-1", eventstore.NoStream(), eventstoretest.Events("x", 1)); err != nil {
		t.Fatal(err)
	}
	err := a.subscribe(t.Context(), l, 1)
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("subscribe = %v, want ErrLeaseLost", err)
	}
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM counted`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("fenced owner wrote %d rows (%v)", n, err)
	}
	if cp, _ := Checkpoint(t.Context(), db, checkpointName(a.Projection, 1)); cp != eventstore.Start {
		t.Fatalf("fenced owner moved the checkpoint to %v", cp)
	}
}
