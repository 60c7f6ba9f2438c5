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

// TestGateDurableFirstButNeverStarvesReplayable: a durable writer goes ahead of a waiting
// replayable one at most maxPass times; a writer whose context ends while queued leaves the queue
// and the gate passes on.
func TestGateDurableFirstButNeverStarvesReplayable(t *testing.T) {
	t.Parallel()
	g := &gate{}
	if contended, err := g.enter(t.Context(), false); contended || err != nil {
		t.Fatalf("free gate: contended %v, %v", contended, err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	start := func(name string, low bool, ctx context.Context) {
		wg.Go(func() {
			contended, err := g.enter(ctx, low)
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
	g.leave()
	wg.Wait()
	want := []string{"gone:" + context.Canceled.Error(), "high1", "low1", "high2", "low2", "high3"}
	if !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	if g.held {
		t.Fatal("gate still held after everyone left")
	}
}
