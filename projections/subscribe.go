package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
)

// pending is a batch read (and prepared) ahead of its transaction.
type pending struct {
	evs      []eventstore.RecordedEvent
	prepared any
	applied  chan struct{}  // closed once committed (see update), when the subscription waits for it
	waited   *time.Duration // set before applied closes: how long the transaction waited for the writer lane
}

// hold waits for r.Hold, when set.
func (r *Runner) hold(ctx context.Context) error {
	if r.Hold == nil {
		return nil
	}
	return r.Hold(ctx)
}

// subscribe applies the log from gen's checkpoint. While behind (large batches, rebuilds), reading
// and preparing the next batch overlaps with the previous batch's transaction: the subscription
// hands batches to an applier through a one-slot queue, and the applier's first error ends both.
func (r *Runner) subscribe(ctx context.Context, l *lease, gen Generation) error {
	name := checkpointName(r.Projection, gen)
	from, err := Checkpoint(ctx, r.DB, name)
	if err != nil {
		return fmt.Errorf("read checkpoint: %w", err)
	}
	if err := r.update(ctx, from, 0, -1, nil); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	queue := make(chan pending, 1)
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		for p := range queue {
			err := r.hold(ctx)
			if err == nil {
				err = r.applyBatch(ctx, l, gen, name, p)
			}
			if err != nil {
				cancel(err)
				for range queue { // drain so the subscription never blocks
				}
				return
			}
		}
	}()
	prep, _ := r.Projection.(Preparer)
	base := r.batchWindow()
	window := base
	err = source(r.Store, r.Projection).Subscribe(ctx, from, func(ctx context.Context, evs []eventstore.RecordedEvent) error {
		read := time.Now()
		windowed := base > 0 && len(evs) < windowedBelow
		p := pending{evs: evs}
		if windowed {
			p.applied, p.waited = make(chan struct{}), new(time.Duration)
		}
		if prep != nil {
			if v, perr := prepareSafely(prep, evs); perr == nil {
				p.prepared = v // on failure (or a panic) Apply prepares again, and the failing stream parks
			}
		}
		select {
		case queue <- p:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if !windowed {
			return nil
		}
		if rest := window - time.Since(read); rest > 0 {
			// Let the next batch gather what arrives meanwhile (pacing, not synchronisation).
			if err := r.pause(ctx, rest); err != nil {
				return context.Cause(ctx)
			}
		}
		// Nor before this batch committed: while it waits for the writer lane, what arrives
		// joins the next batch instead of queueing as batches of their own.
		select {
		case <-p.applied:
			r.mu.Lock()
			window = nextWindow(window, base, *p.waited)
			r.status.Window = window
			r.mu.Unlock()
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	close(queue)
	<-applied
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// Adaptive windows. While the SQLite writer lane is contended (a batch's transaction waited at least
// laneContended for the writer gate), each subscriber transaction costs the appends a turn of the
// lane, and a larger batch costs fewer pages per event (a page shared by several rows is written
// once): the window doubles after such a batch, up to maxWindowGrowth times the projection's own,
// and halves back towards it after a batch that found the lane (nearly) free. The growth is
// bounded because a larger batch also holds the lane longer in one turn, and an append waiting
// behind it waits that long: four times (200 ms for the 50 ms subscribers) raised intake p99 by
// about 5 ms for a few percent of throughput. Postgres has no writer gate, so there the window
// stays the projection's.
const (
	laneContended   = 2 * time.Millisecond
	maxWindowGrowth = 2
)

// nextWindow is the batch window after a batch whose transaction waited waited for the writer
// lane, cur the window before it and base the projection's.
func nextWindow(cur, base, waited time.Duration) time.Duration {
	if waited >= laneContended {
		return min(2*cur, maxWindowGrowth*base)
	}
	return max(cur/2, base)
}

// batchWindow is the projection's batch window; a generation being built reads on at once.
func (r *Runner) batchWindow() time.Duration {
	if r.Build != 0 {
		return 0
	}
	if w, ok := r.Projection.(Windowed); ok {
		return max(w.BatchWindow(), 0)
	}
	return DefaultBatchWindow
}

// applyBatch commits one batch's output and checkpoint in one transaction. The batch is applied in
// one call without a savepoint; only if that fails is the transaction rolled back and the batch
// applied again event by event, parking the streams that fail (see applyEach).
func (r *Runner) applyBatch(ctx context.Context, l *lease, gen Generation, name string, p pending) error {
	last := p.evs[len(p.evs)-1].Position
	at := r.Now()
	renew := l.renewal(at)
	if _, ok := r.Projection.(ReadAwaited); ok && r.Build == 0 {
		ctx = sqldb.WithLanePriority(ctx)
	}
	parked, err := r.applyTx(ctx, l, gen, name, p, renew, nil)
	if failed := (*batchFailure)(nil); errors.As(err, &failed) {
		if hp := (*handlerPanic)(nil); errors.As(failed, &hp) {
			r.Logger.Error("projection handler panicked; applying the batch event by event to park the failing stream",
				"projection", r.Projection.Name(), "panic", fmt.Sprint(hp.value), "stack", string(hp.stack))
		}
		parked, err = r.applyTx(ctx, l, gen, name, p, renew, failed)
	}
	if errors.Is(err, ErrLeaseLost) || errors.Is(err, errGenerationChanged) {
		return err
	}
	if err != nil {
		return fmt.Errorf("apply batch ending at %v: %w", last, err)
	}
	if renew != 0 {
		l.renewedAt(at)
	}
	return r.update(ctx, last, uint64(len(p.evs)), parked, p.applied)
}

// applyTx is applyBatch's transaction: all events at once, or (after failed) one by one. It
// returns the number of parked streams after it.
func (r *Runner) applyTx(ctx context.Context, l *lease, gen Generation, name string, p pending, renew int64, failed *batchFailure) (int, error) {
	parked := 0
	var tx *sqldb.Tx
	defer func() {
		if tx != nil && tx.Pages() > 0 {
			r.mu.Lock()
			r.status.Pages += tx.Pages()
			r.mu.Unlock()
		}
	}()
	err := sqldb.InConnTx(ctx, r.DB, func(stx *sqldb.Tx) error {
		tx = stx
		if p.waited != nil && failed == nil {
			*p.waited = stx.Waited()
		}
		projection := r.Projection.Name()
		if r.Build != 0 {
			projection = "" // a generation being built is not the active one
		}
		// Asynchronous commit (Postgres; SQLite's subscribers write through a synchronous=NORMAL
		// handle for the same reason): a batch's output and checkpoint commit atomically and in
		// order, so a crash loses at most the last batches, output and checkpoint together, and
		// they replay from the log. A batch writes only such replayable rows: projection tables,
		// desired versions, effect intents and effect jobs (River, unique by their arguments). What
		// records an outside action (the Slack attempt ledger's claim before a call, a job's fetch)
		// is written by the effect workers in their own transactions, committed synchronously; such
		// a commit flushes the WAL up to its own record, so it makes every batch committed before
		// it durable too. The commit then does not wait for the WAL flush, so the batch's transaction id, which
		// holds back the events appended after it from every reader, is released sooner.
		st, err := beginBatch(ctx, r.DB, stx, name, l.owner, projection, renew, true)
		if err != nil {
			return err
		}
		if !st.owned {
			return ErrLeaseLost
		}
		if r.Build == 0 && st.gen != gen {
			return errGenerationChanged
		}
		b := &Batch{Tx: stx.Tx, DB: r.DB, Gen: gen, Events: p.evs, Replaying: r.Build != 0, Now: r.Now(), Prepared: p.prepared, effects: r.effects, conn: stx}
		apply := unparked(p.evs, st.parked)
		parked = len(st.parked)
		if failed == nil {
			err = applyAll(ctx, r.Projection, b, apply)
		} else {
			var n int
			n, err = applyEach(ctx, r.Projection, b, name, apply, failed.err, r.Now())
			parked += n
		}
		if err != nil {
			return err
		}
		// The checkpoint goes with COMMIT (one round trip on Postgres; see sqldb.Tx.ExecAtCommit).
		if err := saveCheckpointAtCommit(ctx, r.DB, stx, name, p.evs[len(p.evs)-1].Position, r.Now()); err != nil {
			return err
		}
		if r.committing != nil {
			return r.committing(ctx, stx)
		}
		return nil
	})
	if failed == nil && errors.Is(err, sqldb.ErrAtCommit) {
		err = &batchFailure{err: err} // an output Apply queued was refused: apply event by event
	}
	return parked, err
}
