package projections

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/eventstoretest"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// probe is a configurable test projection: it records every applied event in a table, fails on
// events whose data contains "poison" until healed, emits one effect per event, and can run a hook.
type probe struct {
	version int
	healed  atomic.Bool
	// hook runs after the batch's output was written and before Apply returns.
	hook    func(b *Batch)
	newFx   atomic.Int64
	applied atomic.Int64
}

func (p *probe) Name() string     { return "probe" }
func (p *probe) Version() int     { return max(p.version, 1) }
func (p *probe) Tables() []string { return []string{"probe_seen"} }
func (p *probe) Setup(ctx context.Context, db *sqldb.DB, g Generation) error {
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+g.Table("probe_seen")+` (id TEXT PRIMARY KEY, stream TEXT NOT NULL, n BIGINT NOT NULL)`)
	return err
}
func (p *probe) Apply(ctx context.Context, b *Batch) error {
	for _, e := range b.Events {
		if strings.Contains(string(e.Data), "poison") && !p.healed.Load() {
			return fmt.Errorf("cannot handle %s", e.ID)
		}
		// n counts applications: it is not idempotent on purpose, to show rolled-back output.
		if err := b.Exec(ctx, `INSERT INTO `+b.Gen.Table("probe_seen")+` (id, stream, n) VALUES (?, ?, 1)
			ON CONFLICT (id) DO UPDATE SET n = `+b.Gen.Table("probe_seen")+`.n + 1`, e.ID, e.StreamID); err != nil {
			return err
		}
		fresh, err := b.EmitAll(ctx, "probe", []Effect{{Key: fmt.Sprintf("%s/%d", e.StreamID, e.Revision), Kind: "test", Tenant: "t", Payload: "{}"}})
		if err != nil {
			return err
		}
		if fresh[0] {
			p.newFx.Add(1)
		}
		p.applied.Add(1)
	}
	if p.hook != nil {
		p.hook(b)
	}
	return nil
}

type bundle struct {
	db    *sqldb.DB
	store eventstore.Store
}

func newBundle(t *testing.T, db *sqldb.DB) *bundle {
	t.Helper()
	_, s := eventstoretest.SQLite(t)
	return &bundle{db: db, store: s}
}

func (tb *bundle) append(t *testing.T, stream string, data ...string) eventstore.AppendResult {
	t.Helper()
	evs := make([]eventstore.EventData, len(data))
	for i, d := range data {
		evs[i] = eventstore.EventData{ID: eventstore.DeterministicID(stream+d, i), Type: "T", Data: []byte(`"` + d + `"`), Metadata: []byte(`{}`)}
	}
	r, err := tb.store.Append(t.Context(), stream, eventstore.Any(), evs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// run starts r until the test ends (or stop is called) and returns the stop function.
func run(t *testing.T, r *Runner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func waitHead(t *testing.T, r *Runner, s eventstore.Store) {
	t.Helper()
	head, err := s.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := r.WaitFor(ctx, head); err != nil {
		t.Fatalf("runner did not reach %v: %v (%+v)", head, err, r.Status())
	}
}

// seen returns stream/data pairs applied in the active generation, with their application counts.
func (tb *bundle) seen(t *testing.T) map[string]int {
	t.Helper()
	rows, err := tb.db.QueryContext(t.Context(), `SELECT id, n FROM probe_seen`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func id(stream, data string) string { return eventstore.DeterministicID(stream+data, 0) }

// TestPoisonEventParksOnlyItsStream: a handler error parks its stream, later events of that stream
// wait behind it, other streams keep flowing; retry after a fix applies the held events in order,
// and skip passes over the poison event.
func TestPoisonEventParksOnlyItsStream(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := newBundle(t, db)
		p := &probe{}
		r := &Runner{Store: tb.store, DB: db, Projection: p, RetryDelay: time.Millisecond}
		if err := r.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		tb.append(t, "inquiry-a", "a0")
		tb.append(t, "inquiry-a", "poison-a1")
		tb.append(t, "inquiry-b", "b0")
		tb.append(t, "inquiry-a", "a2")
		tb.append(t, "inquiry-c", "poison-c0")
		tb.append(t, "inquiry-c", "c1")
		tb.append(t, "inquiry-b", "b1")
		run(t, r)
		waitHead(t, r, tb.store)
		got := tb.seen(t)
		for _, want := range []string{id("inquiry-a", "a0"), id("inquiry-b", "b0"), id("inquiry-b", "b1")} {
			if got[want] != 1 {
				t.Errorf("event %s applied %d times, want 1", want, got[want])
			}
		}
		for _, held := range []string{id("inquiry-a", "poison-a1"), id("inquiry-a", "a2"), id("inquiry-c", "c1")} {
			if got[held] != 0 {
				t.Errorf("held event %s was applied", held)
			}
		}
		parked, err := ListParked(t.Context(), db, p, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(parked) != 2 || parked[0].Revision+parked[1].Revision != 1 {
			t.Fatalf("parked = %+v, want inquiry-a at 1 and inquiry-c at 0", parked)
		}
		if st := r.Status(); st.Parked != 2 {
			t.Fatalf("status parked = %d", st.Parked)
		}
		// Other streams keep flowing.
		tb.append(t, "inquiry-b", "b2")
		tb.append(t, "inquiry-a", "a3") // waits behind the parked a1
		waitHead(t, r, tb.store)
		if g := tb.seen(t); g[id("inquiry-b", "b2")] != 1 || g[id("inquiry-a", "a3")] != 0 {
			t.Fatalf("after parking: %v", g)
		}
		// A retry before the fix fails again and keeps the stream parked.
		still, err := Retry(t.Context(), db, tb.store, p, "inquiry-a", false, time.Now())
		if err != nil || still == nil || still.Revision != 1 {
			t.Fatalf("retry before fix = %+v, %v", still, err)
		}
		// Skip passes over c's poison event and applies what waited behind it.
		if still, err := Retry(t.Context(), db, tb.store, p, "inquiry-c", true, time.Now()); err != nil || still != nil {
			t.Fatalf("skip = %+v, %v", still, err)
		}
		p.healed.Store(true)
		if still, err := Retry(t.Context(), db, tb.store, p, "inquiry-a", false, time.Now()); err != nil || still != nil {
			t.Fatalf("retry after fix = %+v, %v", still, err)
		}
		if _, err := Retry(t.Context(), db, tb.store, p, "inquiry-a", false, time.Now()); !errors.Is(err, ErrNotParked) {
			t.Fatalf("retry of an unparked stream: %v", err)
		}
		tb.append(t, "inquiry-a", "a4")
		waitHead(t, r, tb.store)
		got = tb.seen(t)
		for _, want := range []string{"poison-a1", "a2", "a3", "a4"} {
			if got[id("inquiry-a", want)] != 1 {
				t.Errorf("a's %s applied %d times, want 1", want, got[id("inquiry-a", want)])
			}
		}
		if got[id("inquiry-c", "poison-c0")] != 0 || got[id("inquiry-c", "c1")] != 1 {
			t.Errorf("skip: poison applied %d, c1 applied %d", got[id("inquiry-c", "poison-c0")], got[id("inquiry-c", "c1")])
		}
		if parked, _ := ListParked(t.Context(), db, p, ""); len(parked) != 0 {
			t.Fatalf("still parked: %+v", parked)
		}
	})
}

// TestCrashBetweenOutputAndCheckpoint: the runner dies after writing a batch's output and before
// committing its checkpoint; a restart replays the batch and every event counts exactly once.
func TestCrashBetweenOutputAndCheckpoint(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := newBundle(t, db)
		for i := range 20 {
			tb.append(t, fmt.Sprintf("inquiry-%d", i%4), fmt.Sprint("e", i))
		}
		var crashes atomic.Int32
		ctx, die := context.WithCancel(context.Background())
		p := &probe{}
		p.hook = func(*Batch) {
			if crashes.Add(1) == 1 {
				die() // the process dies here: output written, checkpoint not committed
			}
		}
		r := &Runner{Store: tb.store, DB: db, Projection: p}
		if err := r.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := r.Run(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("crashed runner returned %v", err)
		}
		if cp, _ := Checkpoint(t.Context(), db, checkpointName(p, 1)); cp != eventstore.Start {
			t.Fatalf("checkpoint moved to %v despite the crash", cp)
		}
		if got := tb.seen(t); len(got) != 0 {
			t.Fatalf("output of the crashed batch survived: %v", got)
		}
		restarted := &Runner{Store: tb.store, DB: db, Projection: p}
		run(t, restarted)
		waitHead(t, restarted, tb.store)
		got := tb.seen(t)
		if len(got) != 20 {
			t.Fatalf("%d events applied, want 20", len(got))
		}
		for k, n := range got {
			if n != 1 {
				t.Errorf("event %s counted %d times", k, n)
			}
		}
	})
}

// TestRebuildEmitsNoEffectTwice: a rebuild replays every event but emits no effect whose key was
// already emitted; a dry run reports exactly the effects that are missing and writes nothing.
func TestRebuildEmitsNoEffectTwice(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := newBundle(t, db)
		for i := range 30 {
			tb.append(t, fmt.Sprintf("inquiry-%d", i%5), fmt.Sprint("e", i))
		}
		p := &probe{}
		r := &Runner{Store: tb.store, DB: db, Projection: p}
		if err := r.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		stop := run(t, r)
		waitHead(t, r, tb.store)
		stop()
		if p.newFx.Load() != 30 {
			t.Fatalf("live run emitted %d effects, want 30", p.newFx.Load())
		}
		p.newFx.Store(0)
		res, err := Rebuild(t.Context(), tb.store, db, p, RebuildOptions{})
		if err != nil || !res.Switched || res.Processed != 30 {
			t.Fatalf("rebuild = %+v, %v", res, err)
		}
		if p.newFx.Load() != 0 {
			t.Fatalf("rebuild emitted %d effects again", p.newFx.Load())
		}
		if db.Dialect == sqldb.Postgres { // the new generation serves with the planner's statistics
			var stats int
			if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM pg_stats WHERE schemaname = current_schema() AND tablename = $1`,
				Generation(2).Table("probe_seen")).Scan(&stats); err != nil || stats == 0 {
				t.Fatalf("rebuilt generation's table has %d column statistics (%v), want them gathered", stats, err)
			}
		}
		var n int
		if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM effect_intents`).Scan(&n); err != nil || n != 30 {
			t.Fatalf("effect_intents has %d rows (%v), want 30", n, err)
		}
		// Two effects are lost (say, an operator purged them): a dry run names exactly those.
		if _, err := db.ExecContext(t.Context(), db.Rebind(`DELETE FROM effect_intents WHERE key IN (?, ?)`), "inquiry-1/0", "inquiry-2/3"); err != nil {
			t.Fatal(err)
		}
		dry, err := Rebuild(t.Context(), tb.store, db, p, RebuildOptions{DryRun: true})
		if err != nil || dry.Switched {
			t.Fatalf("dry run = %+v, %v", dry, err)
		}
		var keys []string
		for _, e := range dry.Effects {
			keys = append(keys, e.Key)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"inquiry-1/0", "inquiry-2/3"}) {
			t.Fatalf("dry run would emit %v", keys)
		}
		if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM effect_intents`).Scan(&n); err != nil || n != 28 {
			t.Fatalf("dry run wrote effects: %d rows", n)
		}
		st, err := ReadState(t.Context(), db, "probe")
		if err != nil || st.ActiveGen != res.Generation || st.BuildingGen != 0 {
			t.Fatalf("dry run changed the state: %+v %v", st, err)
		}
	})
}

// TestRebuildResumesAndVersionGate: a projection whose code version moved is not served until
// rebuilt; an interrupted rebuild resumes its generation; live runners follow the switch.
func TestRebuildResumesAndVersionGate(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := newBundle(t, db)
		for i := range 40 {
			tb.append(t, fmt.Sprintf("inquiry-%d", i%8), fmt.Sprint("e", i))
		}
		v1 := &probe{version: 1}
		live := &Runner{Store: tb.store, DB: db, Projection: v1, LeaseTTL: 300 * time.Millisecond}
		if err := live.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		stop := run(t, live)
		waitHead(t, live, tb.store)
		stop()

		v2 := &probe{version: 2}
		gated := &Runner{Store: tb.store, DB: db, Projection: v2, LeaseTTL: 300 * time.Millisecond}
		run(t, gated)
		waitState(t, gated, StateRebuildRequired)

		// Interrupt the first rebuild after its first batch.
		ctx, interrupt := context.WithCancel(t.Context())
		v2.hook = func(b *Batch) {
			if b.Replaying {
				interrupt()
			}
		}
		if _, err := Rebuild(ctx, tb.store, db, v2, RebuildOptions{}); err == nil {
			t.Fatal("interrupted rebuild reported success")
		}
		v2.hook = nil
		res, err := Rebuild(t.Context(), tb.store, db, v2, RebuildOptions{KeepOld: true})
		if err != nil || !res.Resumed || !res.Switched || res.DroppedOld || res.Generation != 2 {
			t.Fatalf("resumed rebuild = %+v, %v", res, err)
		}
		waitState(t, gated, StateRunning)
		tb.append(t, "inquiry-x", "after")
		waitHead(t, gated, tb.store)
		if got := tb.seen(t); len(got) != 41 {
			t.Fatalf("generation 2 has %d events, want 41", len(got))
		}
		// The old generation was kept.
		var n int
		if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM probe_seen_g1`).Scan(&n); err != nil || n != 40 {
			t.Fatalf("kept generation 1 has %d rows (%v)", n, err)
		}
	})
}

func waitState(t *testing.T, r *Runner, want State) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for r.Status().State != want {
		if time.Now().After(deadline) {
			t.Fatalf("runner state = %s, want %s", r.Status().State, want)
		}
		r.mu.Lock()
		ch := r.progress
		r.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// preparing is a probe that prepares its batches ahead of their transactions.
type preparing struct {
	*probe
	prepared, unprepared atomic.Int64
}

func (p *preparing) Prepare(evs []eventstore.RecordedEvent) (any, error) { return len(evs), nil }

func (p *preparing) Apply(ctx context.Context, b *Batch) error {
	if n, ok := b.Prepared.(int); ok && n == len(b.Events) {
		p.prepared.Add(1)
	} else {
		p.unprepared.Add(1)
	}
	return p.probe.Apply(ctx, b)
}

// TestPreparedBatchReachesApply: what Prepare made of a batch is handed to Apply with that batch,
// so the work done ahead of the transaction is not done again inside it.
func TestPreparedBatchReachesApply(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := newBundle(t, db)
		for i := range 20 {
			tb.append(t, fmt.Sprintf("s-%d", i), "a", "b")
		}
		p := &preparing{probe: &probe{}}
		r := &Runner{Store: tb.store, DB: tb.db, Projection: p, Owner: "test"}
		if err := r.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		run(t, r)
		waitHead(t, r, tb.store)
		if p.prepared.Load() == 0 || p.unprepared.Load() != 0 {
			t.Fatalf("Apply got %d prepared and %d unprepared batches; want every batch prepared", p.prepared.Load(), p.unprepared.Load())
		}
		if got := p.applied.Load(); got != 40 {
			t.Fatalf("applied %d events, want 40", got)
		}
	})
}

type stringPreparer struct{ calls *int }

func (p stringPreparer) Prepare(evs []eventstore.RecordedEvent) (any, error) {
	*p.calls++
	return fmt.Sprint(len(evs)), nil
}

// TestPreparedOf: the batch's prepared value is used as it is; without one the batch is prepared
// now; a value of another type is an error, not a panic.
func TestPreparedOf(t *testing.T) {
	t.Parallel()
	calls := 0
	p := stringPreparer{&calls}
	if v, err := PreparedOf[string](&Batch{Prepared: "kept"}, p); v != "kept" || err != nil || calls != 0 {
		t.Fatalf("prepared batch: %q, %v, %d calls", v, err, calls)
	}
	if v, err := PreparedOf[string](&Batch{Events: make([]eventstore.RecordedEvent, 3)}, p); v != "3" || err != nil || calls != 1 {
		t.Fatalf("unprepared batch: %q, %v, %d calls", v, err, calls)
	}
	if _, err := PreparedOf[int](&Batch{}, p); err == nil {
		t.Fatal("a Prepare result of another type was accepted")
	}
}

// TestHoldIsWaitedBeforeEachBatch: while Hold blocks, a batch that was read is not applied;
// once it returns, the runner applies the batch and reaches the head.
func TestHoldIsWaitedBeforeEachBatch(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := newBundle(t, db)
		p := &probe{}
		holding, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		r := &Runner{Store: tb.store, DB: tb.db, Projection: p, Owner: "test", Hold: func(ctx context.Context) error {
			once.Do(func() { close(holding) })
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}}
		if err := r.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		tb.append(t, "s-1", "a", "b")
		run(t, r)
		select {
		case <-holding:
		case <-time.After(20 * time.Second):
			t.Fatalf("Hold was not called; applied %d events", p.applied.Load())
		}
		if got := tb.seen(t); len(got) != 0 || p.applied.Load() != 0 {
			t.Fatalf("applied while held: %v (%d events)", got, p.applied.Load())
		}
		close(release)
		waitHead(t, r, tb.store)
		if got := p.applied.Load(); got != 2 {
			t.Fatalf("applied %d events after the hold ended, want 2", got)
		}
	})
}

// TestWaitForReadsStateOnceReached: an owner waiting for a position it has not applied reads
// nothing from the store while it waits; once its batch reaches the position it reads the active
// generation once, to confirm the position counts, and answers.
func TestWaitForReadsStateOnceReached(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := newBundle(t, db)
		var held atomic.Bool
		holding, release := make(chan struct{}, 1), make(chan struct{})
		r := &Runner{Store: tb.store, DB: tb.db, Projection: &probe{}, Owner: "test", Hold: func(ctx context.Context) error {
			if !held.Load() {
				return nil
			}
			holding <- struct{}{}
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}}
		waiting := make(chan struct{}, 1)
		r.waiting = func() {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
		if err := r.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		tb.append(t, "s-1", "a")
		run(t, r)
		waitHead(t, r, tb.store)
		held.Store(true)
		b := tb.append(t, "s-2", "b")
		select {
		case <-holding:
		case <-time.After(20 * time.Second):
			t.Fatal("the batch of b was not held")
		}
		for len(waiting) > 0 { // waitHead's wake-ups
			<-waiting
		}
		ctx, log := sqldb.WithStatementLog(t.Context())
		done := make(chan error, 1)
		go func() { done <- r.WaitFor(ctx, b.Position) }()
		select {
		case <-waiting:
		case err := <-done:
			t.Fatalf("WaitFor answered %v before b was applied", err)
		}
		if stmts := log.Statements(); len(stmts) != 0 {
			t.Fatalf("waiting for the runner's own batch read the store: %q", stmts)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if stmts := log.Statements(); len(stmts) != 1 || !strings.Contains(stmts[0], "projection_state") {
			t.Fatalf("after the batch WaitFor sent %q, want one read of the active generation", stmts)
		}
	})
}

// ctxProbe is a probe that records whether each Apply's context asked for the writer lane's
// priority; awaitedProbe is one that reads wait for (ReadAwaited).
type ctxProbe struct {
	*probe
	urgent, plain atomic.Int64
}

func (c *ctxProbe) Apply(ctx context.Context, b *Batch) error {
	if sqldb.HasLanePriority(ctx) {
		c.urgent.Add(1)
	} else {
		c.plain.Add(1)
	}
	return c.probe.Apply(ctx, b)
}

type awaitedProbe struct{ *ctxProbe }

func (awaitedProbe) AwaitedByReads() {}

// TestReadAwaitedBatchesHaveLanePriority: a live runner applies the batches of a projection that
// reads wait for with the writer lane's priority, and those of any other projection without it.
func TestReadAwaitedBatchesHaveLanePriority(t *testing.T) {
	t.Parallel()
	for _, awaited := range []bool{true, false} {
		dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
			tb := newBundle(t, db)
			tb.append(t, "s-1", "a", "b")
			rec := &ctxProbe{probe: &probe{}}
			var p Projection = rec
			if awaited {
				p = awaitedProbe{rec}
			}
			r := &Runner{Store: tb.store, DB: tb.db, Projection: p, Owner: "test"}
			if err := r.Setup(t.Context()); err != nil {
				t.Fatal(err)
			}
			run(t, r)
			waitHead(t, r, tb.store)
			with, without := rec.urgent.Load(), rec.plain.Load()
			if with+without == 0 || (awaited && without != 0) || (!awaited && with != 0) {
				t.Fatalf("awaited %v: %d batches with priority, %d without", awaited, with, without)
			}
		})
	}
}

// queuer writes each event with Batch.ExecAtCommit into a table whose CHECK refuses data holding
// "poison", so on Postgres a poison event fails the batch only at its commit.
type queuer struct{}

func (queuer) Name() string     { return "queuer" }
func (queuer) Version() int     { return 1 }
func (queuer) Tables() []string { return []string{"queued_seen"} }
func (queuer) Setup(ctx context.Context, db *sqldb.DB, g Generation) error {
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+g.Table("queued_seen")+
		` (id TEXT PRIMARY KEY, stream TEXT NOT NULL, data TEXT NOT NULL CHECK (data NOT LIKE '%poison%'))`)
	return err
}
func (queuer) Apply(ctx context.Context, b *Batch) error {
	for _, e := range b.Events {
		if err := b.ExecAtCommit(ctx, `INSERT INTO `+b.Gen.Table("queued_seen")+` (id, stream, data) VALUES (?, ?, ?)
			ON CONFLICT (id) DO NOTHING`, e.ID, e.StreamID, string(e.Data)); err != nil {
			return err
		}
	}
	return nil
}

// TestQueuedOutputCommitsWithTheCheckpoint: output a projection queues with ExecAtCommit is written
// with the batch's checkpoint and commit, so on Postgres a batch takes no transaction id (which
// would hold back every reader of the log) before its commit; a queued write the database refuses
// parks its event's stream like an error in Apply, and the other streams' events are written.
func TestQueuedOutputCommitsWithTheCheckpoint(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := newBundle(t, db)
		r := &Runner{Store: tb.store, DB: db, Projection: queuer{}, RetryDelay: time.Millisecond, LeaseTTL: time.Hour}
		if err := r.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		var checking atomic.Bool
		var batches, early atomic.Int64
		checking.Store(db.Dialect == sqldb.Postgres)
		r.committing = func(ctx context.Context, tx *sqldb.Tx) error {
			if !checking.Load() {
				return nil
			}
			batches.Add(1)
			var none bool
			if err := tx.QueryRowContext(ctx, `SELECT pg_current_xact_id_if_assigned() IS NULL`).Scan(&none); err != nil {
				return err
			}
			if !none {
				early.Add(1)
			}
			return nil
		}
		tb.append(t, "inquiry-a", "a0")
		tb.append(t, "inquiry-b", "b0")
		run(t, r)
		waitHead(t, r, tb.store)
		tb.append(t, "inquiry-b", "b1")
		waitHead(t, r, tb.store)
		if checking.Swap(false) && (batches.Load() == 0 || early.Load() != 0) {
			t.Fatalf("%d of %d batches took a transaction id before their commit, want 0 of at least 1", early.Load(), batches.Load())
		}
		tb.append(t, "inquiry-a", "poison-a1")
		tb.append(t, "inquiry-b", "b2")
		tb.append(t, "inquiry-a", "a2")
		waitHead(t, r, tb.store)
		got := dbtest.Strings(t, db, `SELECT data FROM queued_seen ORDER BY data`)
		if want := []string{`"a0"`, `"b0"`, `"b1"`, `"b2"`}; !slices.Equal(got, want) {
			t.Errorf("written %v, want %v (a2 waits behind the parked poison-a1)", got, want)
		}
		parked, err := ListParked(t.Context(), db, queuer{}, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(parked) != 1 || parked[0].Stream != "inquiry-a" || parked[0].Revision != 1 {
			t.Fatalf("parked = %+v, want inquiry-a at revision 1", parked)
		}
	})
}

// panicking is probe whose Prepare and Apply panic on events whose data contains "panic": a bug
// in a handler for one tenant's data, like a calendar computation that cannot terminate.
type panicking struct{ *probe }

func (p panicking) Prepare(evs []eventstore.RecordedEvent) (any, error) {
	for _, e := range evs {
		if strings.Contains(string(e.Data), "panic") {
			panic("prepare cannot handle " + e.StreamID)
		}
	}
	return nil, nil
}

func (p panicking) Apply(ctx context.Context, b *Batch) error {
	for _, e := range b.Events {
		if strings.Contains(string(e.Data), "panic") {
			panic("apply cannot handle " + e.StreamID)
		}
	}
	return p.probe.Apply(ctx, b)
}

// TestPanickingHandlerParksOnlyItsStream: a panic in Prepare or Apply neither stops the subscriber
// nor fails the batch over and over: the batch rolls back, its events are applied one by one, the
// streams whose events panic are parked with a short message ("panic: …", no stack), and the other
// streams' events, in the same batch and after it, are applied. A batch of nothing but panicking
// events of several streams parks them too (a panic is the handler's fault, not the database's).
func TestPanickingHandlerParksOnlyItsStream(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := newBundle(t, db)
		p := panicking{&probe{}}
		r := &Runner{Store: tb.store, DB: db, Projection: p, RetryDelay: time.Millisecond}
		if err := r.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		tb.append(t, "inquiry-x1", "panic-x1")
		tb.append(t, "inquiry-x2", "panic-x2")
		run(t, r)
		waitHead(t, r, tb.store)
		tb.append(t, "inquiry-a", "a0")
		tb.append(t, "inquiry-x3", "panic-x3")
		tb.append(t, "inquiry-b", "b0")
		waitHead(t, r, tb.store)
		got := tb.seen(t)
		for _, want := range []string{id("inquiry-a", "a0"), id("inquiry-b", "b0")} {
			if got[want] != 1 {
				t.Errorf("event %s applied %d times, want 1", want, got[want])
			}
		}
		parked, err := ListParked(t.Context(), db, p, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(parked) != 3 {
			t.Fatalf("parked = %+v, want the three panicking streams", parked)
		}
		for _, pk := range parked {
			if !strings.HasPrefix(pk.Stream, "inquiry-x") || !strings.HasPrefix(pk.Error, "panic: ") ||
				!strings.HasSuffix(pk.Error, "cannot handle "+pk.Stream) || strings.Contains(pk.Error, "goroutine") {
				t.Errorf("parked %s with %q, want a short panic message naming it", pk.Stream, pk.Error)
			}
		}
		if st := r.Status(); st.Parked != 3 {
			t.Fatalf("status = %+v, want 3 parked", st)
		}
	})
}
