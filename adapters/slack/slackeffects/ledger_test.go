package slackeffects_test

import (
	"testing"
	"time"
)

// TestLedgerLookupWindow: re-claiming an attempt opens the window in which the earlier attempt may
// have posted (its start to start+stale); a lookup's progress narrows it and survives another
// re-claim (a lookup cut short resumes); a finished lookup clears it, and the next re-claim looks
// only at the attempt made after it. On SQLite and Postgres.
func TestLedgerLookupWindow(t *testing.T) {
	t.Parallel()
	eachBackend(t, nil, func(t *testing.T, b *bundle) {
		ctx, l := t.Context(), b.app.Effects.Ledger
		const key, stale = "root/test/window", time.Minute
		window := func() (time.Time, time.Time) {
			t.Helper()
			from, to, err := l.Window(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			return from, to
		}
		t0 := b.clock.Now()
		if fresh, _, err := l.Claim(ctx, key, stale); err != nil || !fresh {
			t.Fatalf("first claim: fresh %v, %v", fresh, err)
		}
		if from, _ := window(); !from.IsZero() {
			t.Fatalf("a fresh attempt has a window from %v", from)
		}
		b.clock.Advance(30 * time.Second)
		if _, reconcile, _ := l.Claim(ctx, key, stale); reconcile {
			t.Fatal("re-claimed while the first attempt may be in flight")
		}
		b.clock.Advance(time.Minute)
		if _, reconcile, err := l.Claim(ctx, key, stale); err != nil || !reconcile {
			t.Fatalf("stale attempt not re-claimed: %v", err)
		}
		if from, to := window(); !from.Equal(t0) || !to.Equal(t0.Add(stale)) {
			t.Fatalf("window = %v..%v, want %v..%v", from, to, t0, t0.Add(stale))
		}
		mid := t0.Add(20 * time.Second)
		if err := l.Narrow(ctx, key, mid); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(2 * time.Minute) // the lookup was cut short; another job re-claims
		t2 := b.clock.Now()
		if _, reconcile, err := l.Claim(ctx, key, stale); err != nil || !reconcile {
			t.Fatalf("re-claim: %v", err)
		}
		if from, to := window(); !from.Equal(t0) || !to.Equal(mid) {
			t.Fatalf("window after an unfinished lookup = %v..%v, want %v..%v", from, to, t0, mid)
		}
		if err := l.Cleared(ctx, key); err != nil {
			t.Fatal(err)
		}
		if from, _ := window(); !from.IsZero() {
			t.Fatal("window kept after a finished lookup")
		}
		b.clock.Advance(2 * time.Minute)
		if _, reconcile, err := l.Claim(ctx, key, stale); err != nil || !reconcile {
			t.Fatalf("re-claim: %v", err)
		}
		if from, to := window(); !from.Equal(t2) || !to.Equal(t2.Add(stale)) {
			t.Fatalf("window of the attempt after the lookup = %v..%v, want %v..%v", from, to, t2, t2.Add(stale))
		}
	})
}
