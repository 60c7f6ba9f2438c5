package postgres

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/eventstoretest"
	"github.com/casebook/casebook/internal/pgtest"
)

// wait bounds every asynchronous wait in these tests.
const wait = 10 * time.Second

func gapPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func gapStore(t *testing.T, pool *pgxpool.Pool, opts Options) *Store {
	t.Helper()
	s, err := New(t.Context(), pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// lateTx is transaction A of the race: it inserts an event the way Append does (the column defaults
// assign xid and seq) and stays open until commit is called.
type lateTx struct {
	tx  pgx.Tx
	pos eventstore.Position
	id  string
}

func beginLate(t *testing.T, pool *pgxpool.Pool, channel string) *lateTx {
	t.Helper()
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	ev := eventstoretest.Events("late", 1)[0]
	var seq int64
	l := &lateTx{tx: tx, id: ev.ID}
	if err := tx.QueryRow(ctx, `INSERT INTO events (stream, revision, id, type, data, metadata, recorded_at)
		VALUES ('s-a', 0, $1, $2, $3, $4, now()) RETURNING xid, seq`, ev.ID, ev.Type, ev.Data, ev.Metadata).
		Scan(&l.pos.Commit, &seq); err != nil {
		t.Fatal(err)
	}
	l.pos.Prepare = uint64(seq)
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, channel); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *lateTx) commit(t *testing.T) {
	t.Helper()
	if err := l.tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// naiveRead is the seq-only reader this package exists to avoid: the seqs after a seq checkpoint.
func naiveRead(t *testing.T, pool *pgxpool.Pool, after uint64) []uint64 {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT seq FROM events WHERE seq > $1 ORDER BY seq`, int64(after))
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, len(seqs))
	for i, s := range seqs {
		out[i] = uint64(s)
	}
	return out
}

func ids(evs []eventstore.RecordedEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// TestReadAllDoesNotSkipLateCommit reproduces the skip a seq-only reader suffers: transaction A takes
// a seq and stays open, B takes a later seq and commits. A seq checkpoint past B then never sees A.
// ReadAll holds B back until A commits and then returns A before B.
func TestReadAllDoesNotSkipLateCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := gapPool(t)
	s := gapStore(t, pool, Options{})
	snapshot := gapStore(t, pool, Options{SettleTimeout: -1}) // reads without waiting

	r0, err := s.Append(ctx, "s-0", eventstore.NoStream(), eventstoretest.Events("e0", 1))
	if err != nil {
		t.Fatal(err)
	}
	checkpoint := r0.Position // a reader has read up to E0

	a := beginLate(t, pool, s.channel)
	evB := eventstoretest.Events("b", 1)
	rB, err := s.Append(ctx, "s-b", eventstore.NoStream(), evB)
	if err != nil {
		t.Fatal(err)
	}
	if a.pos.Prepare >= rB.Position.Prepare || !a.pos.Less(rB.Position) {
		t.Fatalf("A at %v should precede B at %v in both seq and position", a.pos, rB.Position)
	}

	// While A is open, the naive reader returns B and moves its checkpoint past A's seq.
	naive := naiveRead(t, pool, checkpoint.Prepare)
	if !slices.Equal(naive, []uint64{rB.Position.Prepare}) {
		t.Fatalf("naive read while A is open = %v, want only B's seq %d", naive, rB.Position.Prepare)
	}
	naiveCheckpoint := naive[0]

	// The store does not return B past A, and Head does not move past A either.
	got, err := snapshot.ReadAll(ctx, checkpoint, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("ReadAll while A is open returned %v, want nothing", ids(got))
	}
	if h, err := snapshot.Head(ctx); err != nil || !h.Less(a.pos) {
		t.Fatalf("Head while A is open = %v (%v), want before A at %v", h, err, a.pos)
	}

	a.commit(t)

	// The naive reader has skipped A for good.
	if naive := naiveRead(t, pool, naiveCheckpoint); len(naive) != 0 {
		t.Fatalf("naive read after A commits = %v; expected it to have skipped A", naive)
	}
	// The store returns A then B after the reader's checkpoint, and the whole log in order.
	got, err = s.ReadAll(ctx, checkpoint, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{a.id, evB[0].ID}; !slices.Equal(ids(got), want) {
		t.Fatalf("ReadAll after A commits = %v, want %v", ids(got), want)
	}
	all, err := s.ReadAll(ctx, eventstore.Start, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{eventstoretest.Events("e0", 1)[0].ID, a.id, evB[0].ID}; !slices.Equal(ids(all), want) {
		t.Fatalf("ReadAll from start = %v, want %v", ids(all), want)
	}
	if h, err := s.Head(ctx); err != nil || h != rB.Position {
		t.Fatalf("Head after A commits = %v (%v), want B at %v", h, err, rB.Position)
	}
}

// TestSubscribeDoesNotSkipLateCommit starts a subscription while A is open and B committed. Its first
// delivery is read while A is open, so it must stop before B; the next ones carry A then B.
func TestSubscribeDoesNotSkipLateCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := gapPool(t)
	s := gapStore(t, pool, Options{PollInterval: time.Hour}) // only notifications and held polling wake it

	ev0 := eventstoretest.Events("e0", 1)
	if _, err := s.Append(ctx, "s-0", eventstore.NoStream(), ev0); err != nil {
		t.Fatal(err)
	}
	a := beginLate(t, pool, s.channel)
	evB := eventstoretest.Events("b", 1)
	if _, err := s.Append(ctx, "s-b", eventstore.NoStream(), evB); err != nil {
		t.Fatal(err)
	}

	batches := make(chan []eventstore.RecordedEvent, 16)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- s.Subscribe(sctx, eventstore.Start, func(_ context.Context, evs []eventstore.RecordedEvent) error {
			batches <- evs
			return nil
		})
	}()
	next := func() []eventstore.RecordedEvent {
		t.Helper()
		select {
		case b := <-batches:
			return b
		case <-time.After(wait):
			t.Fatal("no delivery")
			return nil
		}
	}
	first := next() // read while A is still open
	if !slices.Equal(ids(first), []string{ev0[0].ID}) {
		t.Fatalf("first delivery while A is open = %v, want only E0", ids(first))
	}
	a.commit(t)
	var rest []eventstore.RecordedEvent
	for len(rest) < 2 {
		rest = append(rest, next()...)
	}
	if want := []string{a.id, evB[0].ID}; !slices.Equal(ids(rest), want) {
		t.Fatalf("deliveries after A commits = %v, want %v", ids(rest), want)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Subscribe returned %v, want context.Canceled", err)
	}
}

// TestCommittedHeadIsTheLastCommit: while A (earlier xid) is open and B has committed behind it,
// CommittedHead answers B's position at once, where Head waits for A (here it may not, and
// answers the last event before A). A subscriber reaches B's position only after A's event, once
// A commits: waiting for it waits for everything committed when it was read.
func TestCommittedHeadIsTheLastCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := gapPool(t)
	s := gapStore(t, pool, Options{SettleTimeout: -1})
	if h, err := s.CommittedHead(ctx); err != nil || h != eventstore.Start {
		t.Fatalf("committed head of an empty log = %v, %v", h, err)
	}
	r0, err := s.Append(ctx, "s-0", eventstore.NoStream(), eventstoretest.Events("e0", 1))
	if err != nil {
		t.Fatal(err)
	}
	a := beginLate(t, pool, s.channel)
	rB, err := s.Append(ctx, "s-b", eventstore.NoStream(), eventstoretest.Events("b", 2))
	if err != nil {
		t.Fatal(err)
	}
	// While A is open the head stops at E0. The horizon is cluster-wide, so another test's
	// transaction in flight may hold it lower for a moment: wait (bounded) until it reaches E0, and
	// fail if it ever passes A.
	deadline := time.Now().Add(wait)
	for {
		h, err := s.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h == r0.Position {
			break
		}
		if r0.Position.Less(h) || time.Now().After(deadline) {
			t.Fatalf("head while A is open = %v; want E0 at %v", h, r0.Position)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Millisecond): // polling the horizon
		}
	}
	h, err := s.CommittedHead(ctx)
	if err != nil || h != rB.Position {
		t.Fatalf("committed head while A is open = %v, %v; want B's last event at %v", h, err, rB.Position)
	}
	if !a.pos.Less(h) {
		t.Fatalf("A at %v should precede the committed head %v", a.pos, h)
	}
	subCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var seen []string
	errDone := errors.New("reached")
	done := make(chan error, 1)
	go func() {
		done <- s.Subscribe(subCtx, r0.Position, func(_ context.Context, evs []eventstore.RecordedEvent) error {
			for _, e := range evs {
				seen = append(seen, e.ID)
				if !e.Position.Less(h) {
					return errDone
				}
			}
			return nil
		})
	}()
	a.commit(t)
	if err := <-done; !errors.Is(err, errDone) {
		t.Fatalf("subscribe: %v", err)
	}
	if len(seen) != 3 || seen[0] != a.id {
		t.Fatalf("subscriber saw %v before reaching the committed head; want A's event %s first, then B's two", seen, a.id)
	}
}
