package projections

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// windowed is the probe with a batch window of its own.
type windowed struct {
	*probe
	window time.Duration
}

func (w windowed) BatchWindow() time.Duration { return w.window }

// heldPause replaces a runner's batch-window wait: the first wait is held until release is
// closed, later ones return at once. Every requested duration is recorded.
type heldPause struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	waits   []time.Duration
}

func newHeldPause() *heldPause {
	return &heldPause{entered: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldPause) pause(ctx context.Context, d time.Duration) error {
	h.mu.Lock()
	h.waits = append(h.waits, d)
	first := len(h.waits) == 1
	h.mu.Unlock()
	if !first {
		return nil
	}
	close(h.entered)
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *heldPause) recorded() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.waits)
}

// batchSizes makes p record the size of every batch it applies.
func batchSizes(p *probe) func() []int {
	var mu sync.Mutex
	var sizes []int
	p.hook = func(b *Batch) {
		mu.Lock()
		sizes = append(sizes, len(b.Events))
		mu.Unlock()
	}
	return func() []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(sizes)
	}
}

// TestBatchWindowGathersAppends: an event after a quiet spell is applied at once; the appends made
// while the runner waits out its batch window are read and applied together in the next batch, not
// one transaction per append.
func TestBatchWindowGathersAppends(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := newBundle(t, db)
		p := &probe{}
		sizes := batchSizes(p)
		const window = 40 * time.Millisecond
		hp := newHeldPause()
		r := &Runner{Store: tb.store, DB: db, Projection: windowed{p, window}, pause: hp.pause}
		if err := r.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		run(t, r)
		tb.append(t, "inquiry-a", "first")
		select { // the first batch was read and handed on; the runner waits out its window
		case <-hp.entered:
		case <-time.After(20 * time.Second):
			t.Fatal("the runner never waited out a batch window")
		}
		waitHead(t, r, tb.store)
		for i := range 10 {
			tb.append(t, fmt.Sprintf("inquiry-%d", i), fmt.Sprint("e", i))
		}
		close(hp.release)
		waitHead(t, r, tb.store)
		if got := sizes(); !slices.Equal(got, []int{1, 10}) {
			t.Fatalf("batch sizes = %v, want [1 10]: the appends made during the window in one batch", got)
		}
		if w := hp.recorded(); len(w) == 0 || w[0] <= 0 || w[0] > window {
			t.Fatalf("window waits = %v, want the first in (0, %v]", w, window)
		}
		if got := tb.seen(t); len(got) != 11 {
			t.Fatalf("applied %d events, want 11", len(got))
		}
		// Status counts the transactions, and on SQLite the pages they wrote.
		if s := r.Status(); s.Batches != 2 || (db.Dialect == sqldb.SQLite) != (s.Pages > 0) {
			t.Fatalf("status counts %d batches and %d pages; want 2 batches, pages only on SQLite", s.Batches, s.Pages)
		}
	})
}

// TestBatchWindowSkippedWhenBehind: a runner that is behind (a delivery of windowedBelow events or
// more) or that builds a generation reads on without waiting, so catching up and rebuilds run at
// full speed; a projection may also choose no window.
func TestBatchWindowSkippedWhenBehind(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := newBundle(t, db)
		data := make([]string, windowedBelow)
		for i := range data {
			data[i] = fmt.Sprint("e", i)
		}
		tb.append(t, "inquiry-a", data...)
		for _, c := range []struct {
			name string
			r    func(hp *heldPause) *Runner
		}{
			{"behind", func(hp *heldPause) *Runner {
				return &Runner{Store: tb.store, DB: db, Projection: &probe{}, pause: hp.pause}
			}},
			{"no window", func(hp *heldPause) *Runner {
				return &Runner{Store: tb.store, DB: db, Projection: windowed{&probe{}, 0}, pause: hp.pause}
			}},
		} {
			hp := newHeldPause()
			r := c.r(hp)
			if err := r.Setup(t.Context()); err != nil {
				t.Fatal(err)
			}
			stop := run(t, r)
			waitHead(t, r, tb.store)
			if c.name == "no window" {
				tb.append(t, "inquiry-b", "one")
				waitHead(t, r, tb.store)
			}
			stop()
			if w := hp.recorded(); len(w) != 0 {
				t.Errorf("%s: the runner waited %v", c.name, w)
			}
		}
		if w := (&Runner{Projection: &probe{}, Build: 2}).batchWindow(); w != 0 {
			t.Errorf("a generation being built has a window of %v", w)
		}
		if w := (&Runner{Projection: &probe{}}).batchWindow(); w != DefaultBatchWindow {
			t.Errorf("default window = %v", w)
		}
	})
}

// TestBatchWindowWaitsForCommit: a live runner reads its next small batch only once the last one
// committed, so the appends made while a batch is being applied (waiting for the writer lane under
// a burst) all join the next batch instead of queueing as batches of their own.
func TestBatchWindowWaitsForCommit(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := newBundle(t, db)
		p := &probe{}
		sizes := batchSizes(p)
		record := p.hook
		entered, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		p.hook = func(b *Batch) {
			record(b)
			once.Do(func() { // hold the first batch's transaction open
				close(entered)
				<-release
			})
		}
		r := &Runner{Store: tb.store, DB: db, Projection: windowed{p, time.Millisecond},
			pause: func(context.Context, time.Duration) error { return nil }}
		if err := r.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		run(t, r)
		tb.append(t, "inquiry-a", "first")
		select {
		case <-entered:
		case <-time.After(20 * time.Second):
			t.Fatal("the first batch was never applied")
		}
		for i := range 10 {
			tb.append(t, fmt.Sprintf("inquiry-%d", i), fmt.Sprint("e", i))
		}
		close(release)
		waitHead(t, r, tb.store)
		if got := sizes(); !slices.Equal(got, []int{1, 10}) {
			t.Fatalf("batch sizes = %v, want [1 10]: the appends made while a batch was applied in one batch", got)
		}
	})
}

// TestNextWindow: a batch that waited laneContended or more for the writer lane doubles the
// window, up to maxWindowGrowth (two) times the projection's; one that found the lane free halves
// it, never below the projection's.
func TestNextWindow(t *testing.T) {
	t.Parallel()
	const base = DefaultBatchWindow
	const short = 5 * time.Millisecond
	for _, c := range []struct {
		cur, base, waited, want time.Duration
	}{
		{base, base, 0, base},
		{base, base, laneContended - 1, base},
		{base, base, laneContended, 2 * base},
		{2 * base, base, time.Second, 2 * base},
		{2 * base, base, 0, base},
		{2 * base, base, time.Microsecond, base},
		{short, short, laneContended, 2 * short},
		{2 * short, short, time.Second, 2 * short},
		{2 * short, short, 0, short},
	} {
		if got := nextWindow(c.cur, c.base, c.waited); got != c.want {
			t.Errorf("nextWindow(%v, %v, waited %v) = %v, want %v", c.cur, c.base, c.waited, got, c.want)
		}
	}
}

// TestBatchWindowGrowsWhileLaneContended: after a batch whose transaction waited for the SQLite
// writer lane (held by another writer), the runner waits out a doubled window before reading its
// next batch, and after a batch that found the lane free, its own window again. Postgres has no
// writer lane: the window stays the projection's.
func TestBatchWindowGrowsWhileLaneContended(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := newBundle(t, db)
		p := &probe{}
		const window = time.Hour // the waits are recorded, not slept: elapsed time is negligible beside it
		var mu sync.Mutex
		var waits []time.Duration
		r := &Runner{Store: tb.store, DB: db, Projection: windowed{p, window}, pause: func(_ context.Context, d time.Duration) error {
			mu.Lock()
			waits = append(waits, d)
			mu.Unlock()
			return nil
		}}
		if err := r.Setup(t.Context()); err != nil {
			t.Fatal(err)
		}
		run(t, r)
		tb.append(t, "inquiry-a", "first") // lane free
		waitHead(t, r, tb.store)

		// Hold the lane while the next batch begins its transaction.
		entered, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			held <- sqldb.InConnTx(t.Context(), db, func(*sqldb.Tx) error {
				close(entered)
				<-release
				return nil
			})
		}()
		<-entered
		g0 := db.GateStats()
		tb.append(t, "inquiry-b", "second")
		if db.Dialect == sqldb.SQLite {
			deadline := time.Now().Add(20 * time.Second)
			for db.GateStats().Entered == g0.Entered { // the batch queued for the gate
				if time.Now().After(deadline) {
					t.Fatal("the runner's batch never asked for the writer lane")
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(laneContended) // it waits at least this long
		}
		close(release)
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		waitHead(t, r, tb.store)
		tb.append(t, "inquiry-c", "third") // lane free again
		waitHead(t, r, tb.store)
		tb.append(t, "inquiry-d", "fourth")
		waitHead(t, r, tb.store)

		// A batch's window is waited out before its transaction: batch 3's is the one after the
		// contended batch 2, batch 4's the one after batch 3 found the lane free.
		mu.Lock()
		got := slices.Clone(waits)
		mu.Unlock()
		if len(got) != 4 {
			t.Fatalf("window waits %v, want one per batch (4)", got)
		}
		wantGrown := window
		if db.Dialect == sqldb.SQLite {
			wantGrown = 2 * window
		}
		if got[2] <= wantGrown-time.Minute || got[2] > wantGrown {
			t.Fatalf("after the batch that waited for the lane, the runner waited out %v; want %v", got[2], wantGrown)
		}
		if got[3] <= window-time.Minute || got[3] > window {
			t.Fatalf("after a batch on a free lane, the runner waited out %v; want %v", got[3], window)
		}
		if s := r.Status(); s.Batches != 4 || (db.Dialect == sqldb.SQLite) != (s.Pages > 0) {
			t.Fatalf("status counts %d batches and %d pages; want 4 batches, pages only on SQLite", s.Batches, s.Pages)
		}
	})
}
