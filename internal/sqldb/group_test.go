package sqldb_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// waitQueued polls (bounded) until n Group calls wait on db.
func waitQueued(t *testing.T, db *sqldb.DB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for db.GroupStats().Waiting != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d Group calls queued, want %d", db.GroupStats().Waiting, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// blockGroup starts a Group call whose fn holds the writer until release is closed, and returns
// once that fn runs: calls made meanwhile queue behind it.
func blockGroup(t *testing.T, db *sqldb.DB) (release func(), done <-chan error) {
	t.Helper()
	running, hold, res := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		res <- sqldb.Group(t.Context(), db, func(context.Context, *sqldb.Tx) error {
			close(running)
			<-hold
			return nil
		})
	}()
	<-running
	return func() { close(hold) }, res
}

// TestGroupCommitsQueuedCallsTogether: calls that queue while the writer is busy run in one
// transaction; a failing call's writes roll back alone and only its caller sees the error.
func TestGroupCommitsQueuedCallsTogether(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, `CREATE TABLE grouped (k TEXT PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		release, first := blockGroup(t, db)
		const n = 8
		const failing = 5
		errBoom := errors.New("boom")
		results := make([]chan error, n)
		for i := range n {
			results[i] = make(chan error, 1)
			go func() {
				results[i] <- sqldb.Group(ctx, db, func(ctx context.Context, tx *sqldb.Tx) error {
					if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO grouped (k) VALUES (?)`), fmt.Sprint("k", i)); err != nil {
						return err
					}
					if i == failing {
						return errBoom // after writing: the write must roll back with it
					}
					return nil
				})
			}()
			waitQueued(t, db, i+1) // arrival order is queue order
		}
		before := db.GroupStats()
		release()
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		for i, r := range results {
			err := <-r
			if i == failing && !errors.Is(err, errBoom) {
				t.Errorf("call %d = %v, want its own error", i, err)
			}
			if i != failing && err != nil {
				t.Errorf("call %d = %v, want nil", i, err)
			}
		}
		after := db.GroupStats()
		// Two commits: the blocking call's, then one for all the queued calls.
		if after.Commits-before.Commits != 2 || after.Largest != n {
			t.Fatalf("the blocking call and the %d queued calls took %d commits (largest batch %d), want 2 (and %d)",
				n, after.Commits-before.Commits, after.Largest, n)
		}
		if after.Retried-before.Retried != 1 {
			t.Fatalf("batches run again with savepoints: %d, want 1", after.Retried-before.Retried)
		}
		got := dbtest.Strings(t, db, `SELECT k FROM grouped ORDER BY k`)
		want := []string{"k0", "k1", "k2", "k3", "k4", "k6", "k7"}
		if !slices.Equal(got, want) {
			t.Fatalf("rows %v, want %v", got, want)
		}
	})
}

// TestGroupAbandonedCallNeverRuns: a call whose context ends while it is queued returns the
// context's error and its fn never runs.
func TestGroupAbandonedCallNeverRuns(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		release, first := blockGroup(t, db)
		ctx, cancel := context.WithCancel(t.Context())
		var ran atomic.Bool
		res := make(chan error, 1)
		go func() {
			res <- sqldb.Group(ctx, db, func(context.Context, *sqldb.Tx) error { ran.Store(true); return nil })
		}()
		waitQueued(t, db, 1)
		cancel()
		if err := <-res; !errors.Is(err, context.Canceled) {
			t.Fatalf("abandoned call = %v, want context.Canceled", err)
		}
		release()
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if ran.Load() {
			t.Fatal("the abandoned call's fn ran")
		}
		if s := db.GroupStats(); s.Abandoned != 1 || s.Waiting != 0 {
			t.Fatalf("stats %+v, want one abandoned and none waiting", s)
		}
	})
}

// The histogram of batch times puts each batch in the first bucket at or above its time, and Add
// sums two sources.
func TestGroupCountersTimeBatches(t *testing.T) {
	t.Parallel()
	var c sqldb.GroupCounters
	for _, d := range []time.Duration{500 * time.Microsecond, time.Millisecond, 20 * time.Millisecond, 20 * time.Second} {
		c.Committed(1, d)
	}
	c.TimedOut()
	st := c.Stats(0)
	want := make([]uint64, len(sqldb.BatchBuckets)+1)
	want[0] = 2                       // 0.5 ms and 1 ms: at most 1 ms
	want[4] = 1                       // 20 ms: above 10 ms, at most 25 ms
	want[len(sqldb.BatchBuckets)] = 1 // 20 s: above every bucket
	if diff := cmp.Diff(want, st.Took.Counts); diff != "" {
		t.Errorf("Took.Counts (-want +got):\n%s", diff)
	}
	if sum := 20*time.Second + 21500*time.Microsecond; st.Took.Sum != sum || st.TimedOut != 1 || st.Commits != 4 {
		t.Errorf("Stats = %+v, want sum %v, 1 timed out, 4 commits", st, sum)
	}
	both := st.Took.Add(sqldb.BatchTimes{Counts: []uint64{1}, Sum: time.Millisecond})
	if both.Counts[0] != 3 || both.Counts[len(sqldb.BatchBuckets)] != 1 || both.Sum != st.Took.Sum+time.Millisecond {
		t.Errorf("Add = %+v", both)
	}
}
