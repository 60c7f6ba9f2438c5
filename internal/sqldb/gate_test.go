package sqldb

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// queued polls (bounded) until the gate has high and low waiters.
func queued(t *testing.T, g *gate, high, low int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.mu.Lock()
		h, l := len(g.high), len(g.low)
		g.mu.Unlock()
		if h == high && l == low {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gate queues %d high, %d low; want %d, %d", h, l, high, low)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGateBoundedPassOver: durable writers go ahead of waiting replayable ones until the oldest
// has waited passOverFor; from then on the turns alternate, so neither kind starves. A writer whose
// context ends while queued leaves the queue and the gate passes on. The clock is the test's.
func TestGateBoundedPassOver(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		advance time.Duration // how long the replayable writers have waited when the gate is left
		want    []string
	}{
		{"within the bound", passOverFor - 1, []string{"high1", "high2", "high3", "low1", "low2"}},
		{"overdue", passOverFor, []string{"low1", "high1", "low2", "high2", "high3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			t0 := time.Unix(1_800_000_000, 0)
			now := t0
			g := &gate{now: func() time.Time { return now }} // read under g.mu
			if contended, err := g.enter(t.Context(), false, false); contended || err != nil {
				t.Fatalf("free gate: contended %v, %v", contended, err)
			}
			var mu sync.Mutex
			var order []string
			var wg sync.WaitGroup
			start := func(name string, low bool, ctx context.Context) {
				wg.Go(func() {
					contended, err := g.enter(ctx, low, false)
					if err != nil {
						mu.Lock()
						order = append(order, name+":"+err.Error())
						mu.Unlock()
						return
					}
					if !contended {
						t.Errorf("%s entered a held gate without waiting", name)
					}
					mu.Lock()
					order = append(order, name)
					mu.Unlock()
					g.leave()
				})
			}
			start("low1", true, t.Context())
			queued(t, g, 0, 1)
			start("low2", true, t.Context())
			queued(t, g, 0, 2)
			for i, name := range []string{"high1", "high2", "high3"} {
				start(name, false, t.Context())
				queued(t, g, i+1, 2)
			}
			ctx, cancel := context.WithCancel(t.Context())
			start("gone", false, ctx)
			queued(t, g, 4, 2)
			cancel()
			queued(t, g, 3, 2)
			g.mu.Lock()
			now = t0.Add(c.advance)
			g.mu.Unlock()
			g.leave()
			wg.Wait()
			want := append([]string{"gone:" + context.Canceled.Error()}, c.want...)
			if !slices.Equal(order, want) {
				t.Fatalf("order %v, want %v", order, want)
			}
			if g.held {
				t.Fatal("gate still held after everyone left")
			}
		})
	}
}

// TestGateDurableAfterReplayableTurn: after a replayable writer's turn a waiting durable writer
// goes next, even when other replayable writers are overdue (a durable writer waits for at most
// one subscriber transaction); with no durable writer waiting, replayable ones go back to back.
func TestGateDurableAfterReplayableTurn(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_800_000_000, 0)
	g := &gate{held: true, lastLow: true, now: func() time.Time { return t0.Add(time.Hour) }}
	w := func() *gateWaiter { return &gateWaiter{ready: make(chan struct{}), since: t0} }
	low1, low2, high := w(), w(), w()
	g.low = []*gateWaiter{low1, low2}
	g.high = []*gateWaiter{high}
	for i, want := range []*gateWaiter{high, low1, low2} {
		g.leave()
		select {
		case <-want.ready:
		default:
			t.Fatalf("turn %d did not go to the expected writer", i)
		}
	}
	g.leave()
	if g.held || len(g.low)+len(g.high) != 0 {
		t.Fatalf("gate held %v with %d waiters after everyone left", g.held, len(g.low)+len(g.high))
	}
}

// heldGate is a taken gate and a maker of waiters that began waiting at t0 plus since.
func heldGate() (*gate, time.Time, func(urgent bool, since time.Duration) *gateWaiter) {
	t0 := time.Unix(1_800_000_000, 0)
	return &gate{held: true}, t0, func(urgent bool, since time.Duration) *gateWaiter {
		return &gateWaiter{ready: make(chan struct{}), since: t0.Add(since), urgent: urgent}
	}
}

// TestGateUrgentReplayableFirst: an urgent replayable writer goes before replayable writers that
// queued earlier, but not before a durable writer within the pass-over bound, which still counts
// from the oldest replayable waiter.
func TestGateUrgentReplayableFirst(t *testing.T) {
	t.Parallel()
	g, t0, w := heldGate()
	now := t0
	g.now = func() time.Time { return now }
	low1, low2, urgent, high := w(false, 0), w(false, 1), w(true, 2), w(false, 3)
	g.low = []*gateWaiter{low1, low2, urgent}
	g.high = []*gateWaiter{high}
	for i, want := range []*gateWaiter{high, urgent, low1, low2} {
		g.leave()
		select {
		case <-want.ready:
		default:
			t.Fatalf("turn %d did not go to the expected writer", i)
		}
	}
	// Overdue: the oldest replayable waiter's age lets the urgent one go before a durable writer.
	low3, urgent2, high2 := w(false, 0), w(true, 1), w(false, 2)
	g.low, g.high, g.lastLow = []*gateWaiter{low3, urgent2}, []*gateWaiter{high2}, false
	now = t0.Add(passOverFor)
	for i, want := range []*gateWaiter{urgent2, high2, low3} {
		g.leave()
		select {
		case <-want.ready:
		default:
			t.Fatalf("overdue turn %d did not go to the expected writer", i)
		}
	}
}

// TestGateUrgentBoundedPassOver: urgent replayable writers go before the others until the oldest
// replayable waiter, not urgent, has waited urgentPassOverFor; from then on it goes after the next
// urgent turn, and urgent writers keep every other turn, however many of both keep arriving.
func TestGateUrgentBoundedPassOver(t *testing.T) {
	t.Parallel()
	g, t0, w := heldGate()
	now := t0
	g.now = func() time.Time { return now }
	turn := func(i int, want *gateWaiter) {
		t.Helper()
		g.leave()
		select {
		case <-want.ready:
		default:
			t.Fatalf("turn %d did not go to the expected writer", i)
		}
	}
	plain1, plain2 := w(false, 0), w(false, time.Millisecond)
	u1, u2, u3, u4 := w(true, 2*time.Millisecond), w(true, 3*time.Millisecond), w(true, 4*time.Millisecond), w(true, 5*time.Millisecond)
	g.low = []*gateWaiter{plain1, plain2, u1, u2}
	now = t0.Add(urgentPassOverFor - time.Millisecond) // not yet overdue: urgent first
	turn(0, u1)
	// Urgent writers keep arriving; both others are overdue: they get every other turn.
	g.low = append(g.low, u3)
	now = t0.Add(urgentPassOverFor + time.Millisecond)
	for i, want := range []*gateWaiter{plain1, u2, plain2, u3} {
		if i == 1 {
			g.low = append(g.low, u4)
		}
		turn(i+1, want)
	}
	turn(5, u4)
	if len(g.low) != 0 {
		t.Fatalf("%d waiters left", len(g.low))
	}
}
