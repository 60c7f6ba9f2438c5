package sqlite_test

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/eventstoretest"
	"github.com/casebook/casebook/eventstore/sqlite"
	"github.com/casebook/casebook/internal/sqldb"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	eventstoretest.Exercise(t, func(t *testing.T) eventstore.Store {
		_, s := eventstoretest.SQLite(t)
		return s
	}, eventstoretest.Features{SubscribeBatch: sqlite.SubscribeBatch, Count: eventstoretest.CountExact, Claims: true})
}

// TestNewStreamAppendReadsNothingFirst: an append that creates its stream runs its inserts only
// (the (stream, revision) key is its check); when the stream exists it fails with ErrConcurrency,
// stores nothing, and reports the stream's last revision.
func TestNewStreamAppendReadsNothingFirst(t *testing.T) {
	t.Parallel()
	db, s := eventstoretest.SQLite(t)
	before := db.Statements()
	if _, err := s.Append(t.Context(), "s-1", eventstore.NoStream(), eventstoretest.Events("a", 2)); err != nil {
		t.Fatal(err)
	}
	if n := db.Statements() - before; n != 2 {
		t.Fatalf("a new stream's append of 2 events ran %d statements, want its 2 inserts", n)
	}
	_, err := s.Append(t.Context(), "s-1", eventstore.NoStream(), eventstoretest.Events("b", 1))
	var ae *eventstore.AppendError
	if !errors.As(err, &ae) || !errors.Is(err, eventstore.ErrConcurrency) || ae.Actual != 1 {
		t.Fatalf("no-stream append to an existing stream: %v, want a conflict reporting revision 1", err)
	}
	if evs, err := s.ReadStream(t.Context(), "s-1", 0, 0); err != nil || len(evs) != 2 {
		t.Fatalf("stream holds %d events (%v), want 2", len(evs), err)
	}
}

// TestClaimsMigrationClaimsEarlierInquiries: see eventstoretest.EarlierStreamsClaimed.
func TestClaimsMigrationClaimsEarlierInquiries(t *testing.T) {
	t.Parallel()
	db, s := eventstoretest.SQLite(t)
	eventstoretest.EarlierStreamsClaimed(t, s, func(q string) error {
		_, err := db.ExecContext(t.Context(), q)
		return err
	}, func() eventstore.Store {
		s, err := sqlite.New(t.Context(), db, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestAppendsQueuedTogetherCommitOnce: appends that queue while the writer is busy commit in one
// transaction; the one whose expected revision is stale fails alone, with ErrConcurrency, and the
// others (including a later one on the same stream that expects the first one's revision) land.
func TestAppendsQueuedTogetherCommitOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, s := eventstoretest.SQLite(t)
	if _, err := s.Append(ctx, "old", eventstore.NoStream(), eventstoretest.Events("old", 1)); err != nil {
		t.Fatal(err)
	}
	// Hold the file's writer: the appends below queue behind it.
	hold, held := make(chan struct{}), make(chan error, 1)
	entered := make(chan struct{})
	go func() {
		held <- sqldb.InTx(ctx, db, func(*sql.Tx) error { close(entered); <-hold; return nil })
	}()
	<-entered
	type call struct {
		stream string
		exp    eventstore.ExpectedRevision
		stale  bool
	}
	calls := []call{
		{stream: "a", exp: eventstore.NoStream()},
		{stream: "old", exp: eventstore.NoStream(), stale: true}, // "old" has an event
		{stream: "b", exp: eventstore.NoStream()},
		{stream: "a", exp: eventstore.Exact(0)}, // sees the first call's event in the same transaction
		{stream: "old", exp: eventstore.Exact(0)},
	}
	results := make([]chan error, len(calls))
	for i, c := range calls {
		results[i] = make(chan error, 1)
		go func() {
			_, err := s.Append(ctx, c.stream, c.exp, eventstoretest.Events(fmt.Sprint("c", i), 1))
			results[i] <- err
		}()
		deadline := time.Now().Add(10 * time.Second)
		for db.GroupStats().Waiting != i+1 { // bounded poll: queue order is call order
			if time.Now().After(deadline) {
				t.Fatalf("append %d never queued", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	before := db.GroupStats()
	close(hold)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for i, c := range calls {
		err := <-results[i]
		if c.stale && !errors.Is(err, eventstore.ErrConcurrency) {
			t.Errorf("stale append %d = %v, want ErrConcurrency", i, err)
		}
		if !c.stale && err != nil {
			t.Errorf("append %d = %v, want nil", i, err)
		}
	}
	after := db.GroupStats()
	if after.Commits-before.Commits != 1 || after.Largest != uint64(len(calls)) {
		t.Fatalf("%d queued appends took %d commits (largest batch %d), want one", len(calls), after.Commits-before.Commits, after.Largest)
	}
	for stream, want := range map[string]int{"a": 2, "b": 1, "old": 2} {
		evs, err := s.ReadStream(ctx, stream, 0, 0)
		if err != nil || len(evs) != want {
			t.Errorf("stream %s holds %d events (%v), want %d", stream, len(evs), err, want)
		}
	}
}

// TestCountAfterReadsTheSequence: CountAfter is the sequence's distance to the head, one probe of
// the primary key, not a count of rows (which scanned the backlog every StatsInterval while a
// subscriber was behind). Casebook never deletes an event; the row deleted here behind the
// store's back only shows which of the two CountAfter reads.
func TestCountAfterReadsTheSequence(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, s := eventstoretest.SQLite(t)
	res, err := s.Append(ctx, "s", eventstore.NoStream(), eventstoretest.Events("e", 5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM events WHERE seq = ?`, res.Position.Commit-2); err != nil {
		t.Fatal(err)
	}
	for after, want := range map[uint64]uint64{0: 5, 1: 4, res.Position.Commit: 0, res.Position.Commit + 3: 0} {
		n, err := s.CountAfter(ctx, eventstore.Position{Commit: after, Prepare: after})
		if err != nil || n != want {
			t.Errorf("CountAfter(%d) = %d, %v; want %d (the sequence distance)", after, n, err, want)
		}
	}
}

// TestPanicInAppendReachesItsCaller: a panic while an append's transaction runs (here a
// companion's Values) is raised in that append's caller, not on the group commit's writer
// goroutine (which would end the process); the append stores nothing and the next append commits.
func TestPanicInAppendReachesItsCaller(t *testing.T) {
	t.Parallel()
	db, s := eventstoretest.SQLite(t)
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE side (stream TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	companion := eventstore.WithCompanions(&eventstore.Companion{Handle: db.CompanionHandle(), Table: "side", Columns: []string{"stream"},
		Values: func(stream string) []any { panic("cannot derive a row for " + stream) }})
	recovered := func() (v any) {
		defer func() { v = recover() }()
		_, _ = s.Append(t.Context(), "s-bad", eventstore.NoStream(), eventstoretest.Events("a", 1), companion)
		return nil
	}()
	if recovered != "cannot derive a row for s-bad" {
		t.Fatalf("the append's caller recovered %v, want the companion's panic", recovered)
	}
	if _, err := s.Append(t.Context(), "s-good", eventstore.NoStream(), eventstoretest.Events("b", 1)); err != nil {
		t.Fatalf("the next append: %v", err)
	}
	if evs, err := s.ReadStream(t.Context(), "s-bad", 0, 0); err != nil || len(evs) != 0 {
		t.Fatalf("the panicking append stored %d events (%v), want none", len(evs), err)
	}
}
