package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/eventstoretest"
	"github.com/casebook/casebook/internal/sqldb"
)

// heldWriter is a store with one group writer, held busy by an append that waits for a row the
// test inserted and has not committed: appends made meanwhile queue and go out as one batch once
// release is called.
type heldWriter struct {
	s       *Store
	queued  chan struct{}
	taken   chan int
	release func()
	held    chan error
}

// holdWriter first creates the streams named in existing, one event each, with appends of their own.
func holdWriter(t *testing.T, existing ...string) *heldWriter {
	t.Helper()
	pool := gapPool(t)
	h := &heldWriter{s: gapStore(t, pool, Options{}), queued: make(chan struct{}, 64), taken: make(chan int, 64), held: make(chan error, 1)}
	for _, st := range existing {
		if _, err := h.s.Append(t.Context(), st, eventstore.NoStream(), eventstoretest.Events(st, 1)); err != nil {
			t.Fatal(err)
		}
	}
	h.s.group.max = 1
	h.s.group.queued = func() { h.queued <- struct{}{} }
	h.s.group.taken = func(n int) { h.taken <- n }
	tx := blockStream(t, pool, "held")
	go func() {
		_, err := h.s.Append(context.Background(), "held", eventstore.NoStream(), eventstoretest.Events("held", 1))
		h.held <- err
	}()
	<-h.queued
	if n := <-h.taken; n != 1 {
		t.Fatalf("the held append went out with %d others", n-1)
	}
	h.release = func() {
		if err := tx.Rollback(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := <-h.held; err != nil {
			t.Fatalf("held append: %v", err)
		}
	}
	return h
}

// blockStream inserts revision 0 of stream in a transaction it leaves open (rolled back at the
// test's end): an append to stream waits for that transaction.
func blockStream(t *testing.T, pool *pgxpool.Pool, stream string) pgx.Tx {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	ev := eventstoretest.Events("blocker", 1)[0]
	if _, err := tx.Exec(t.Context(), `INSERT INTO events (stream, revision, id, type, data, metadata, recorded_at)
		VALUES ($1, 0, $2, $3, $4, $5, now())`, stream, ev.ID, ev.Type, ev.Data, ev.Metadata); err != nil {
		t.Fatal(err)
	}
	return tx
}

// lockEvents takes the events table's EXCLUSIVE lock in a transaction it leaves open (rolled back
// at the test's end): appends wait for it, reads do not. The lock, unlike a row write, gives the
// transaction no id, and the appends waiting for it take none before they get it, so other tests'
// log heads (pg_snapshot_xmin over the whole cluster) are not held back meanwhile.
func lockEvents(t *testing.T, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(t.Context(), `LOCK TABLE events IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return tx
}

type appendReq struct {
	stream   string
	expected eventstore.ExpectedRevision
	ctx      context.Context // context.Background() when nil
	events   int             // 2 when 0
	opts     []eventstore.AppendOption
}

// queue makes the appends, each queued behind the held writer before the next is made (so they
// queue in reqs' order), releases the writer, and returns each append's error once the batch has
// gone out.
func (h *heldWriter) queue(t *testing.T, reqs []appendReq) []error {
	t.Helper()
	_, errs := h.queueResults(t, reqs)
	return errs
}

// queueResults is queue, with each append's result too.
func (h *heldWriter) queueResults(t *testing.T, reqs []appendReq) ([]eventstore.AppendResult, []error) {
	t.Helper()
	type outcome struct {
		res eventstore.AppendResult
		err error
	}
	done := make([]chan outcome, len(reqs))
	for i, r := range reqs {
		done[i] = make(chan outcome, 1)
		ctx := r.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		n := r.events
		if n == 0 {
			n = 2
		}
		go func() {
			res, err := h.s.Append(ctx, r.stream, r.expected, eventstoretest.Events(fmt.Sprint(r.stream, "-", i), n), r.opts...)
			done[i] <- outcome{res, err}
		}()
		<-h.queued
	}
	h.release()
	if n := <-h.taken; n != len(reqs) {
		t.Fatalf("batch of %d appends, want all %d queued", n, len(reqs))
	}
	res := make([]eventstore.AppendResult, len(reqs))
	errs := make([]error, len(reqs))
	for i := range done {
		o := <-done[i]
		res[i], errs[i] = o.res, o.err
	}
	return res, errs
}

// dbStrings returns the one text column of query's rows, in order.
func dbStrings(t *testing.T, s *Store, query string) []string {
	t.Helper()
	rows, err := s.pool.Query(t.Context(), query)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// xids returns how many transactions wrote each stream's events.
func xids(t *testing.T, s *Store, streams ...string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, st := range streams {
		var n int
		if err := s.pool.QueryRow(t.Context(), `SELECT count(DISTINCT xid) FROM events WHERE stream = $1`, st).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[st] = n
	}
	return out
}

// Appends queued together commit in one transaction, each with its own revisions, and each
// caller hears of it only after that commit.
func TestGroupedAppendsShareOneTransaction(t *testing.T) {
	t.Parallel()
	h := holdWriter(t)
	var reqs []appendReq
	for i := range 5 {
		reqs = append(reqs, appendReq{stream: fmt.Sprint("g-", 4-i), expected: eventstore.NoStream()})
	}
	logged, log := sqldb.WithStatementLog(context.Background())
	reqs[2].ctx = logged
	for i, err := range h.queue(t, reqs) {
		if err != nil {
			t.Errorf("append %d: %v", i, err)
		}
	}
	var n int
	if err := h.s.pool.QueryRow(t.Context(), `SELECT count(DISTINCT xid) FROM events WHERE stream LIKE 'g-%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("the batch's events were written by %d transactions, want 1", n)
	}
	// Queued from g-4 down to g-0, sent in stream order: the order in which every batch takes locks.
	order := dbStrings(t, h.s, `SELECT stream FROM events WHERE stream LIKE 'g-%' ORDER BY seq`)
	if want := []string{"g-0", "g-0", "g-1", "g-1", "g-2", "g-2", "g-3", "g-3", "g-4", "g-4"}; !slices.Equal(order, want) {
		t.Errorf("events in the order %v, want the streams' order %v", order, want)
	}
	for _, r := range reqs {
		evs, err := h.s.ReadStream(t.Context(), r.stream, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 2 || evs[0].Revision != 0 || evs[1].Revision != 1 {
			t.Errorf("%s: %d events, want revisions 0 and 1", r.stream, len(evs))
		}
	}
	if got := log.Statements(); len(got) != 1 || !strings.Contains(got[0], "INSERT INTO events") {
		t.Errorf("statement log of one grouped append = %q, want the one statement that carried it", got)
	}
	want := sqldb.GroupStats{Commits: 2, Calls: 6, Largest: 5}
	got := h.s.GroupStats()
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(sqldb.GroupStats{}, "Took")); diff != "" {
		t.Errorf("GroupStats (-want +got):\n%s", diff)
	}
	if timed := sum(got.Took.Counts); timed != 2 {
		t.Errorf("batches timed = %d, want both", timed)
	}
}

// TestGroupMergesAppendsOfNewStreams: next to each other in a batch's order, appends that create
// their streams with the same companions share statements, in parts of 2^k appends; an append of
// another shape goes on its own. Each append still gets its own result, and the batch is still one
// transaction in the batch's order.
func TestGroupMergesAppendsOfNewStreams(t *testing.T) {
	t.Parallel()
	h := holdWriter(t, "old")
	if _, err := h.s.pool.Exec(t.Context(), `CREATE TABLE merged_notes (stream text, note text, n bigint)`); err != nil {
		t.Fatal(err)
	}
	logs := make([]*sqldb.StatementLog, 8)
	logged := func(r appendReq, i int, claim string) appendReq {
		ctx, log := sqldb.WithStatementLog(context.Background())
		logs[i] = log
		r.ctx = ctx
		if claim != "" {
			// A second companion, so that the statement numbers its values across two lists.
			opt, _ := h.s.Claim(claim)
			r.opts = []eventstore.AppendOption{opt, eventstore.WithCompanions(&eventstore.Companion{Handle: h.s.pool, Table: "merged_notes",
				Columns: []string{"stream", "note", "n"},
				Values:  func(stream string) []any { return []any{stream, "note of " + claim, int64(i)} }})}
		}
		return r
	}
	// Sent in the order m-2, m-3, m-1, m-4 (by claim), then m-5, m-6, m-7 and old (by stream): a
	// statement for the four claiming appends (of 1, 3, 2 and 2 events), one for m-5 and m-6, and
	// one each for m-7 and old.
	reqs := []appendReq{
		logged(appendReq{stream: "m-1", expected: eventstore.NoStream()}, 0, "k3"),
		logged(appendReq{stream: "m-5", expected: eventstore.NoStream()}, 1, ""),
		logged(appendReq{stream: "m-2", expected: eventstore.NoStream(), events: 1}, 2, "k1"),
		logged(appendReq{stream: "old", expected: eventstore.Exact(0)}, 3, ""),
		logged(appendReq{stream: "m-7", expected: eventstore.NoStream()}, 4, ""),
		logged(appendReq{stream: "m-3", expected: eventstore.NoStream(), events: 3}, 5, "k2"),
		logged(appendReq{stream: "m-6", expected: eventstore.NoStream()}, 6, ""),
		logged(appendReq{stream: "m-4", expected: eventstore.NoStream()}, 7, "k4"),
	}
	res, errs := h.queueResults(t, reqs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %s: %v", reqs[i].stream, err)
		}
	}
	sent := make([]string, len(reqs))
	for i, log := range logs {
		got := log.Statements()
		if len(got) != 1 {
			t.Fatalf("append %s logged %d statements, want 1", reqs[i].stream, len(got))
		}
		sent[i] = got[0]
	}
	const merged = "unnest($1::text[], $2::bigint[]"
	for i, text := range sent {
		alone := i == 3 || i == 4
		if strings.Contains(text, merged) == alone {
			t.Errorf("append %s sent a statement of its own: %v, want %v:\n%s", reqs[i].stream, !alone, alone, text)
		}
	}
	if sent[0] != sent[2] || sent[0] != sent[5] || sent[0] != sent[7] || sent[1] != sent[6] || sent[0] == sent[1] {
		t.Errorf("statements sent:\n%s", strings.Join(sent, "\n---\n"))
	}
	if !strings.Contains(sent[0], "VALUES ($8, $9), ($10, $11), ($12, $13), ($14, $15))") ||
		!strings.Contains(sent[0], "VALUES ($16, $17, $18), ($19, $20, $21), ($22, $23, $24), ($25, $26, $27))") {
		t.Errorf("the claiming appends' statement does not insert their 4 claims and 4 notes in a list each:\n%s", sent[0])
	}
	notes := dbStrings(t, h.s, `SELECT stream || ' ' || note || ' ' || n FROM merged_notes ORDER BY stream`)
	if want := []string{"m-1 note of k3 0", "m-2 note of k1 2", "m-3 note of k2 5", "m-4 note of k4 7"}; !slices.Equal(notes, want) {
		t.Errorf("notes %q, want %q", notes, want)
	}
	const ours = `stream LIKE 'm-%' OR (stream = 'old' AND revision > 0)`
	order := dbStrings(t, h.s, `SELECT stream FROM events WHERE `+ours+` ORDER BY seq`)
	want := []string{"m-2", "m-3", "m-3", "m-3", "m-1", "m-1", "m-4", "m-4", "m-5", "m-5", "m-6", "m-6", "m-7", "m-7", "old", "old"}
	if !slices.Equal(order, want) {
		t.Errorf("events in the order %v, want the batch's order %v", order, want)
	}
	var n int
	if err := h.s.pool.QueryRow(t.Context(), `SELECT count(DISTINCT xid) FROM events WHERE `+ours).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("the batch's events were written by %d transactions, want 1", n)
	}
	for i, r := range reqs {
		evs, err := h.s.ReadStream(t.Context(), r.stream, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for k, e := range evs {
			if e.Revision != uint64(k) {
				t.Errorf("%s: event %d has revision %d", r.stream, k, e.Revision)
			}
		}
		last := evs[len(evs)-1]
		want := eventstore.AppendResult{NextRevision: last.Revision, Position: last.Position}
		if diff := cmp.Diff(want, res[i]); diff != "" {
			t.Errorf("append %s: result (-its last event +returned):\n%s", r.stream, diff)
		}
	}
	for name, want := range map[string]string{"k1": "m-2", "k2": "m-3", "k3": "m-1", "k4": "m-4"} {
		if got, err := h.s.Claimed(t.Context(), name); err != nil || got != want {
			t.Errorf("%s claimed by %q (%v), want %s", name, got, err, want)
		}
	}
}

// An append the server refuses fails alone: the batch runs again with every append in its own
// transaction, and the others land.
func TestGroupRefusalFailsOnlyItsOwnAppend(t *testing.T) {
	t.Parallel()
	h := holdWriter(t, "dup", "stale")
	errs := h.queue(t, []appendReq{
		{stream: "g-0", expected: eventstore.NoStream()},
		{stream: "dup", expected: eventstore.NoStream()}, // refused by the server (unique revision): aborts the batch
		{stream: "g-1", expected: eventstore.NoStream()},
		{stream: "stale", expected: eventstore.Exact(5)}, // inserts nothing
		{stream: "g-2", expected: eventstore.Any()},
	})
	for i, want := range []error{nil, eventstore.ErrConcurrency, nil, eventstore.ErrConcurrency, nil} {
		if !errors.Is(errs[i], want) || (want == nil && errs[i] != nil) {
			t.Errorf("append %d: err = %v, want %v", i, errs[i], want)
		}
	}
	for st, want := range map[string]int{"g-0": 2, "g-1": 2, "g-2": 2, "dup": 1, "stale": 1} {
		evs, err := h.s.ReadStream(t.Context(), st, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != want {
			t.Errorf("%s: %d events, want %d", st, len(evs), want)
		}
	}
	if st := h.s.GroupStats(); st.Retried != 1 {
		t.Errorf("GroupStats = %+v, want the batch retried once", st)
	}
}

// claimer returns a function giving the options under which an append claims name.
func (h *heldWriter) claimer() func(name string) []eventstore.AppendOption {
	return func(name string) []eventstore.AppendOption {
		opt, _ := h.s.Claim(name)
		return []eventstore.AppendOption{opt}
	}
}

// TestGroupOrdersClaimingAppendsByTheirClaims: a batch sends claiming appends in the order of the
// names they claim, not of their (new, uncontended) streams, so two batches claiming the same
// names take their locks in one order.
func TestGroupOrdersClaimingAppendsByTheirClaims(t *testing.T) {
	t.Parallel()
	h := holdWriter(t)
	claim := h.claimer()
	errs := h.queue(t, []appendReq{
		{stream: "c-1", expected: eventstore.NoStream(), opts: claim("n3")},
		{stream: "c-2", expected: eventstore.NoStream(), opts: claim("n1")},
		{stream: "c-3", expected: eventstore.NoStream(), opts: claim("n2")},
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	got := dbStrings(t, h.s, `SELECT stream FROM events WHERE stream LIKE 'c-%' ORDER BY seq`)
	if want := []string{"c-2", "c-2", "c-3", "c-3", "c-1", "c-1"}; !slices.Equal(got, want) {
		t.Fatalf("the batch wrote %v, want the claims' order %v", got, want)
	}
	if xs := xids(t, h.s, "c-1", "c-2", "c-3"); xs["c-1"] != 1 || xs["c-2"] != 1 || xs["c-3"] != 1 {
		t.Fatalf("transactions per stream: %v", xs)
	}
}

// TestGroupSecondClaimFailsOnlyItsOwnAppend: two appends of one batch claiming one name: the
// batch runs again append by append, the first claims the name, the second is refused with
// ErrClaimed and stores nothing, and the others land.
func TestGroupSecondClaimFailsOnlyItsOwnAppend(t *testing.T) {
	t.Parallel()
	h := holdWriter(t)
	claim := h.claimer()
	errs := h.queue(t, []appendReq{
		{stream: "d-1", expected: eventstore.NoStream(), opts: claim("n1")},
		{stream: "d-2", expected: eventstore.NoStream(), opts: claim("n1")},
		{stream: "d-3", expected: eventstore.NoStream(), opts: claim("n2")},
	})
	for i, want := range []error{nil, eventstore.ErrClaimed, nil} {
		if !errors.Is(errs[i], want) || (want == nil && errs[i] != nil) {
			t.Errorf("append %d: err = %v, want %v", i, errs[i], want)
		}
	}
	got := dbStrings(t, h.s, `SELECT stream FROM events WHERE stream LIKE 'd-%' ORDER BY seq`)
	if want := []string{"d-1", "d-1", "d-3", "d-3"}; !slices.Equal(got, want) {
		t.Fatalf("the batch wrote %v, want %v", got, want)
	}
	if claimed, err := h.s.Claimed(t.Context(), "n1"); err != nil || claimed != "d-1" {
		t.Fatalf("n1 claimed by %q (%v), want d-1", claimed, err)
	}
	if st := h.s.GroupStats(); st.Retried != 1 {
		t.Errorf("GroupStats = %+v, want the batch retried once", st)
	}
}

// An append whose caller gives up while it is queued is never sent.
func TestGroupAbandonedAppendIsNotSent(t *testing.T) {
	t.Parallel()
	h := holdWriter(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := h.s.Append(ctx, "gone", eventstore.NoStream(), eventstoretest.Events("gone", 1))
		done <- err
	}()
	<-h.queued
	cancel()
	// The writer stays held: an append still queued after its cancellation would never answer, so
	// a bound turns that into a failure instead of a hang.
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("abandoned append: err = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled append is still waiting for its batch: it was not withdrawn from the queue")
	}
	errs := h.queue(t, []appendReq{{stream: "kept", expected: eventstore.NoStream()}})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got := xids(t, h.s, "gone", "kept"); got["gone"] != 0 || got["kept"] != 1 {
		t.Errorf("transactions per stream = %v, want none for the abandoned append", got)
	}
	if st := h.s.GroupStats(); st.Abandoned != 1 || st.Calls != 2 {
		t.Errorf("GroupStats = %+v, want 1 abandoned and 2 calls", st)
	}
}

// TestRefusedIsTheServersErrorOnly: only a statement's refusal (severity ERROR, in any server
// locale) sends a batch's appends again one by one; an ended session or a network error does not.
func TestRefusedIsTheServersErrorOnly(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "23505"}, true},
		{fmt.Errorf("append: %w", &pgconn.PgError{Severity: "FEHLER", SeverityUnlocalized: "ERROR"}), true},
		{&pgconn.PgError{Severity: "ERROR"}, true}, // servers before 9.6 send no unlocalized severity
		{&pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"}, false},
		{&pgconn.PgError{Severity: "PANIC", SeverityUnlocalized: "PANIC"}, false},
		{errors.New("read tcp: connection reset by peer"), false},
	} {
		if got := refused(c.err); got != c.want {
			t.Errorf("refused(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// A batch that gets no answer within BatchTimeout fails every append still in it, as an unknown
// outcome, and frees its writer: the next batch goes out (and fails the same way), and once the
// lock they waited for is released an append commits.
func TestGroupBatchHasATimeLimit(t *testing.T) {
	t.Parallel()
	pool := gapPool(t)
	s := gapStore(t, pool, Options{BatchTimeout: 200 * time.Millisecond})
	// The writer reports each batch it takes on taken and sends it once told to on proceed.
	queued, taken, proceed := make(chan struct{}, 8), make(chan int), make(chan struct{})
	s.group.max = 1
	s.group.queued = func() { queued <- struct{}{} }
	s.group.taken = func(n int) { taken <- n; <-proceed }
	locked := lockEvents(t, pool)
	errs := make(chan error, 4)
	add := func(i int, stream string) {
		go func() {
			_, err := s.Append(context.Background(), stream, eventstore.NoStream(), eventstoretest.Events(fmt.Sprint(stream, "-", i), 1))
			errs <- err
		}()
		<-queued
	}
	batch := func(what string, want int) {
		t.Helper()
		select {
		case n := <-taken:
			if n != want {
				t.Fatalf("%s of %d appends, want %d", what, n, want)
			}
			proceed <- struct{}{}
		case <-time.After(30 * time.Second):
			t.Fatalf("still waiting after 30 s for %s: a batch waiting on a lock has no time limit", what)
		}
	}
	add(0, "t-0")
	batch("the first batch", 1)
	add(1, "t-1")
	add(2, "t-2")
	add(3, "t-3")
	batch("the second batch", 3)
	for range 4 {
		var err error
		select {
		case err = <-errs:
		case <-time.After(30 * time.Second):
			t.Fatal("an append of a batch waiting on a lock still has no answer after 30 s")
		}
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "outcome unknown") || errors.Is(err, eventstore.ErrConcurrency) {
			t.Errorf("append of a batch past its time limit: err = %v, want an unknown outcome (context.DeadlineExceeded)", err)
		}
	}
	// Both batches waited for the lock until their limit: they took longer than 0.1 s.
	st := s.GroupStats()
	slow := uint64(0)
	for i, n := range st.Took.Counts {
		if i > 0 && sqldb.BatchBuckets[i-1] >= 0.1 {
			slow += n
		}
	}
	if st.TimedOut != 2 || slow != 2 {
		t.Errorf("GroupStats = %+v, want 2 batches timed out, both in the buckets above 0.1 s", st)
	}
	go func() {
		for range taken {
			proceed <- struct{}{}
		}
	}()
	defer close(taken)
	if err := locked.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(t.Context(), "free", eventstore.NoStream(), eventstoretest.Events("free", 1)); err != nil {
		t.Fatalf("append after two timed-out batches: %v", err)
	}
}

func sum(counts []uint64) uint64 {
	var n uint64
	for _, c := range counts {
		n += c
	}
	return n
}

// A batch whose session ends before it commits has an unknown outcome: every append of it fails
// with that error, none is sent again, and none is in the log.
func TestGroupLostSessionIsNotResent(t *testing.T) {
	t.Parallel()
	pool := gapPool(t)
	s := gapStore(t, pool, Options{})
	ctx := t.Context()
	queued := make(chan struct{}, 8)
	s.group.max = 0 // no writer starts until the test starts one below
	s.group.queued = func() { queued <- struct{}{} }
	blocker := lockEvents(t, pool)
	var blockerPID int
	if err := blocker.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&blockerPID); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3)
	for i, st := range []string{"g-a", "g-h", "g-b"} {
		go func() {
			_, err := s.Append(context.Background(), st, eventstore.NoStream(), eventstoretest.Events(fmt.Sprint(st, "-", i), 1))
			errs <- err
		}()
		<-queued
	}
	s.group.mu.Lock()
	s.group.max, s.group.writers = 1, 1
	s.group.mu.Unlock()
	go s.writeGroups()
	// The batch waits for the events table's lock; end its session there.
	var pid int
	deadline := time.Now().Add(30 * time.Second)
	for pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, blockerPID).Scan(&pid) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the batch never waited for the blocker's lock")
		}
		time.Sleep(10 * time.Millisecond) // polling the server's state, not synchronising goroutines
	}
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		var err error
		select {
		case err = <-errs:
		case <-time.After(30 * time.Second):
			t.Fatal("an append of a batch whose session ended still has no answer after 30 s")
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "57P01" {
			t.Errorf("append of a batch whose session ended: err = %v, want the session's end (57P01)", err)
		}
	}
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := xids(t, s, "g-a", "g-h", "g-b"); got["g-a"]+got["g-h"]+got["g-b"] != 0 {
		t.Errorf("transactions per stream = %v, want none: the batch was rolled back and not sent again", got)
	}
	if st := s.GroupStats(); st.Retried != 0 || st.Commits != 1 || st.Calls != 3 {
		t.Errorf("GroupStats = %+v, want one batch of 3, not retried", st)
	}
}

// BenchmarkMergedStatement: the statement of n intake-shaped appends (three companions, 15 values
// each), text and arguments.
func BenchmarkMergedStatement(b *testing.B) {
	cs := []*eventstore.Companion{
		{Table: "stream_claims", Columns: []string{"name", "stream"}},
		{Table: "inquiry_keys", Columns: []string{"tenant_id", "inquiry_id", "wrapped", "kek_id", "created_at"}},
		{Table: "command_audit", Columns: []string{"request_id", "tenant_id", "actor", "command", "inquiry_id", "outcome", "code", "at"}},
	}
	for _, n := range []int{2, 8, 32} {
		run := make([]*insertCall, n)
		for i := range run {
			vals := make([]any, 15)
			for j := range vals {
				vals[j] = "v"
			}
			run[i] = &insertCall{query: "shape", merge: &newStream{stream: fmt.Sprint("s", i), at: time.Now(),
				ids: []string{"id"}, types: []string{"t"}, data: [][]byte{{1}}, meta: [][]byte{{2}}, companions: cs, values: vals}}
		}
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				mergedStatement(run)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/append")
		})
	}
}
