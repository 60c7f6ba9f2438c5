package sqldb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// MaxGroup bounds how many Group calls share one transaction.
const MaxGroup = 1024

// group is the queue of Group calls on one handle and the counters of its commits.
type group struct {
	mu      sync.Mutex
	queue   []*groupCall
	running bool

	GroupCounters
}

// GroupCounters counts the work of a group commit queue (Group's, or an event store's own); the
// zero value is ready to use.
type GroupCounters struct {
	commits, calls, largest, abandoned, retried, timedOut atomic.Uint64
	took                                                  [len(BatchBuckets) + 1]atomic.Uint64
	tookNanos                                             atomic.Int64
}

// BatchBuckets are the upper bounds, in seconds, of the histogram of how long batches took
// (GroupStats.Took): from a millisecond, a healthy batch, to Postgres's 15 s time limit, so that
// a batch waiting on another transaction's lock shows.
var BatchBuckets = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15}

// Committed counts a transaction (committed or attempted) that held n calls and took took, from
// the batch's start (before waiting for a connection or the writer gate) to its end.
func (c *GroupCounters) Committed(n int, took time.Duration) {
	c.commits.Add(1)
	c.calls.Add(uint64(n))
	for l := c.largest.Load(); uint64(n) > l && !c.largest.CompareAndSwap(l, uint64(n)); l = c.largest.Load() {
	}
	i := 0
	for i < len(BatchBuckets) && took.Seconds() > BatchBuckets[i] {
		i++
	}
	c.took[i].Add(1)
	c.tookNanos.Add(int64(took))
}

// TimedOut counts a batch that passed its time limit, leaving its calls' outcome unknown.
func (c *GroupCounters) TimedOut() { c.timedOut.Add(1) }

// Abandoned counts a call whose context ended while it was still queued.
func (c *GroupCounters) Abandoned() { c.abandoned.Add(1) }

// Retried counts a batch run again because a call in it failed.
func (c *GroupCounters) Retried() { c.retried.Add(1) }

// Stats returns the counters, with waiting calls queued now.
func (c *GroupCounters) Stats(waiting int) GroupStats {
	st := GroupStats{Commits: c.commits.Load(), Calls: c.calls.Load(), Largest: c.largest.Load(),
		Abandoned: c.abandoned.Load(), Retried: c.retried.Load(), TimedOut: c.timedOut.Load(), Waiting: waiting,
		Took: BatchTimes{Counts: make([]uint64, len(c.took)), Sum: time.Duration(c.tookNanos.Load())}}
	for i := range c.took {
		st.Took.Counts[i] = c.took[i].Load()
	}
	return st
}

type groupCall struct {
	ctx  context.Context
	fn   func(context.Context, *Tx) error
	done chan error
}

// GroupStats counts Group's work on a handle since it was opened.
type GroupStats struct {
	Commits   uint64 `json:"commits"`   // transactions committed (or attempted) for Group calls
	Calls     uint64 `json:"calls"`     // calls that ran in them
	Largest   uint64 `json:"largest"`   // the most calls one transaction held
	Abandoned uint64 `json:"abandoned"` // calls whose context ended while they were still queued
	Retried   uint64 `json:"retried"`   // batches run again with savepoints because a call failed
	TimedOut  uint64 `json:"timed_out"` // batches past their time limit (Postgres appends): outcome unknown
	Waiting   int    `json:"waiting"`   // calls queued now, not yet taken by a transaction
	// Took is how long the batches took, from their start to their end.
	Took BatchTimes `json:"took"`
}

// BatchTimes is a histogram of how long batches took.
type BatchTimes struct {
	// Counts[i] batches took more than BatchBuckets[i-1] seconds and at most BatchBuckets[i];
	// the last count took longer than every bucket.
	Counts []uint64      `json:"counts"`
	Sum    time.Duration `json:"sum_ns"`
}

// Add returns the histogram of both t's and u's batches.
func (t BatchTimes) Add(u BatchTimes) BatchTimes {
	out := BatchTimes{Counts: make([]uint64, max(len(t.Counts), len(u.Counts))), Sum: t.Sum + u.Sum}
	for i := range out.Counts {
		if i < len(t.Counts) {
			out.Counts[i] += t.Counts[i]
		}
		if i < len(u.Counts) {
			out.Counts[i] += u.Counts[i]
		}
	}
	return out
}

// GroupStats reports db's group commits.
func (db *DB) GroupStats() GroupStats {
	g := db.groupOf()
	g.mu.Lock()
	waiting := len(g.queue)
	g.mu.Unlock()
	return g.Stats(waiting)
}

func (db *DB) groupOf() *group {
	db.groupOnce.Do(func() {
		if db.group == nil {
			db.group = &group{}
		}
	})
	return db.group
}

// Group runs fn in a write transaction that it shares with the other Group calls waiting on db
// (group commit): one writer takes every call queued when it holds the write transaction (at most
// MaxGroup), runs each fn in arrival order, commits once, and only then answers each caller. Concurrent callers thus pay one commit (one fsync on SQLite with
// synchronous=FULL) per batch, and each is answered only once its writes are durable.
//
// fn's error rolls back fn's own writes alone and is returned to its caller; the other calls in
// the transaction are unaffected (the batch is run again with a savepoint around each call, so fn
// may run twice and must not keep effects of a run whose transaction did not commit). A failed commit is returned to every caller of the batch. fn runs
// on the writer's goroutine with ctx's values but without its cancellation (ending one caller must
// not abort the others' transaction); it must not start another transaction on the same file. When
// ctx ends while the call is still queued, Group returns ctx.Err() and fn never runs; once taken,
// the call's outcome is awaited. A panic in fn fails fn's call like an error, and is raised again
// in Group's caller once the batch has ended.
func Group(ctx context.Context, db *DB, fn func(context.Context, *Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g := db.groupOf()
	me := &groupCall{ctx: context.WithoutCancel(ctx), fn: fn, done: make(chan error, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, me)
	if !g.running {
		g.running = true
		go g.run(db)
	}
	g.mu.Unlock()
	var err error
	select {
	case err = <-me.done:
	case <-ctx.Done():
		if Withdraw(&g.mu, &g.queue, me) {
			g.Abandoned()
			return ctx.Err()
		}
		err = <-me.done // taken: its transaction is under way
	}
	if p := (*callPanic)(nil); errors.As(err, &p) {
		panic(p.value) // fn's panic, on its caller's goroutine, after its writes were rolled back
	}
	return err
}

// callPanic carries a Group call's panic from the writer's goroutine to the caller's.
type callPanic struct{ value any }

func (p *callPanic) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// call runs c.fn, turning a panic into a *callPanic: the writer goroutine serves every caller and
// must outlive one call's bug.
func (c *groupCall) call(tx *Tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &callPanic{value: v}
		}
	}()
	return c.fn(c.ctx, tx)
}

// Withdraw removes item from *queue, which mu guards, if it is still there, and reports whether it
// was: how a caller that gives up on a queued call learns that the call will never run.
func Withdraw[T comparable](mu *sync.Mutex, queue *[]T, item T) bool {
	mu.Lock()
	defer mu.Unlock()
	i := slices.Index(*queue, item)
	if i < 0 {
		return false
	}
	*queue = slices.Delete(*queue, i, i+1)
	return true
}

// take removes up to MaxGroup queued calls.
func (g *group) take() []*groupCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := min(len(g.queue), MaxGroup)
	batch := slices.Clone(g.queue[:n])
	g.queue = slices.Delete(g.queue, 0, n)
	return batch
}

// run writes batches until the queue is empty, then ends.
func (g *group) run(db *DB) {
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.write(db)
	}
}

// write runs one batch: the calls are taken only once the transaction has begun (and, on SQLite,
// holds the writer gate), so everything that queued meanwhile joins it. The calls first run one
// after the other without savepoints; if one fails, that transaction is rolled back and the batch
// runs again with a savepoint around each call, so only the failed ones lose their writes.
func (g *group) write(db *DB) {
	start := time.Now()
	var batch []*groupCall
	var errs []error
	run := func(tx *Tx, savepoints bool) error {
		errs = make([]error, len(batch))
		for i, c := range batch {
			if !savepoints {
				if errs[i] = c.call(tx); errs[i] != nil {
					return errRetryWithSavepoints
				}
				continue
			}
			if _, err := tx.ExecContext(c.ctx, "SAVEPOINT casebook_group"); err != nil {
				return fmt.Errorf("group commit: savepoint: %w", err)
			}
			if errs[i] = c.call(tx); errs[i] != nil {
				if _, err := tx.ExecContext(c.ctx, "ROLLBACK TO SAVEPOINT casebook_group"); err != nil {
					return fmt.Errorf("group commit: roll back to savepoint: %w", err)
				}
			}
			if _, err := tx.ExecContext(c.ctx, "RELEASE SAVEPOINT casebook_group"); err != nil {
				return fmt.Errorf("group commit: release savepoint: %w", err)
			}
		}
		return nil
	}
	err := InConnTx(context.Background(), db, func(tx *Tx) error {
		batch = g.take()
		return run(tx, false)
	})
	if errors.Is(err, errRetryWithSavepoints) {
		if len(batch) == 1 {
			err = errs[0] // alone, the transaction was its savepoint
		} else {
			g.Retried()
			err = InConnTx(context.Background(), db, func(tx *Tx) error { return run(tx, true) })
		}
	}
	if batch == nil { // the transaction never began: fail what is queued now, with its error
		batch = g.take()
		errs = make([]error, len(batch))
	}
	if len(batch) == 0 {
		return
	}
	g.Committed(len(batch), time.Since(start))
	for i, c := range batch {
		switch {
		case len(batch) == 1 && errs[0] != nil:
			c.done <- errs[0]
		case err != nil && errs[i] == nil:
			c.done <- err
		case err != nil:
			c.done <- errors.Join(errs[i], err)
		default:
			c.done <- errs[i]
		}
	}
}

// errRetryWithSavepoints rolls back a batch in which a call failed, to run it again with savepoints.
var errRetryWithSavepoints = errors.New("group commit: a call failed; retrying the batch with savepoints")

// GateStats counts how a handle's write transactions entered the SQLite writer gate.
type GateStats struct {
	Entered   uint64        `json:"entered"`   // write transactions begun
	Contended uint64        `json:"contended"` // of those, how many found the gate taken and waited
	Waited    time.Duration `json:"waited_ns"` // the total time they waited
	Held      time.Duration `json:"held_ns"`   // the total time they held the gate (the writer lane's use)
	// Pages is how many pages the handle's write transactions wrote to the write-ahead log (one
	// frame each; every page a transaction changes is written whole at its commit).
	Pages uint64 `json:"pages"`
	// Writebacks is how many of its commits were followed by starting the write-ahead log's
	// writeback (replayable handles on Linux, see walWriteback).
	Writebacks uint64 `json:"wal_writebacks,omitempty"`
}

// GateStats reports db's waits for the writer gate (zero on Postgres, which has no gate).
func (db *DB) GateStats() GateStats {
	return GateStats{Entered: db.gateEntered.Load(), Contended: db.gateContended.Load(), Waited: time.Duration(db.gateWaited.Load()),
		Held: time.Duration(db.gateHeld.Load()), Pages: db.pagesWritten.Load(), Writebacks: db.writebacks.Load()}
}

// enterGate takes the file's writer gate, counting whether it had to wait and for how long.
func (db *DB) enterGate(ctx context.Context) (release func(), waited time.Duration, err error) {
	if db.writers == nil {
		return func() {}, 0, nil
	}
	db.gateEntered.Add(1)
	t0 := time.Now()
	contended, err := db.writers.enter(ctx, db.replayable, db.replayable && HasLanePriority(ctx))
	if contended {
		waited = time.Since(t0)
		db.gateContended.Add(1)
		db.gateWaited.Add(int64(waited))
	}
	if err != nil {
		return nil, waited, err
	}
	t1 := time.Now()
	return func() {
		db.gateHeld.Add(int64(time.Since(t1)))
		db.writers.leave()
	}, waited, nil
}

type lanePriorityKey struct{}

// WithLanePriority marks the write transactions begun with ctx on a replayable handle as urgent: in
// the SQLite writer lane they go before other replayable writers (see gate). It is for the
// subscribers that reads wait for (consistent=true); it has no effect on durable handles or on
// Postgres.
func WithLanePriority(ctx context.Context) context.Context {
	return context.WithValue(ctx, lanePriorityKey{}, true)
}

// HasLanePriority reports whether ctx carries WithLanePriority.
func HasLanePriority(ctx context.Context) bool { return ctx.Value(lanePriorityKey{}) != nil }

// CompanionHandle names db's database to an event store that writes rows of other tables in its
// appends (eventstore.Companion.Handle): the pgx pool on Postgres, db itself on SQLite.
func (db *DB) CompanionHandle() any {
	if db.pool != nil {
		return db.pool
	}
	return db
}
