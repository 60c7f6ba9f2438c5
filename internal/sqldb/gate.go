package sqldb

import (
	"context"
	"slices"
	"sync"
)

// gate admits one write transaction at a time to a SQLite file, across this process's handles on
// it. SQLite has one writer; queueing here wakes the next writer at once instead of after a busy
// handler's sleep.
//
// Writers of durable handles (appends, audit rows, tenancy: what a request waits for) go before
// those of replayable ones (subscribers), but a waiting replayable writer is passed over at most
// maxPass times, so subscribers are never starved: under a steady stream of intakes the turns
// alternate, and each subscriber transaction carries every event that arrived meanwhile.
type gate struct {
	mu        sync.Mutex
	held      bool
	high, low []*gateWaiter
}

// maxPass is how many durable writers may go ahead of the oldest waiting replayable one.
const maxPass = 1

type gateWaiter struct {
	ready  chan struct{}
	passed int
}

// enter takes the gate; contended reports whether it had to wait.
func (g *gate) enter(ctx context.Context, low bool) (contended bool, err error) {
	g.mu.Lock()
	if !g.held {
		g.held = true
		g.mu.Unlock()
		return false, nil
	}
	w := &gateWaiter{ready: make(chan struct{})}
	if low {
		g.low = append(g.low, w)
	} else {
		g.high = append(g.high, w)
	}
	g.mu.Unlock()
	select {
	case <-w.ready:
		return true, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	q := &g.high
	if low {
		q = &g.low
	}
	if i := slices.Index(*q, w); i >= 0 {
		*q = slices.Delete(*q, i, i+1)
		g.mu.Unlock()
		return true, ctx.Err()
	}
	g.mu.Unlock()
	g.leave() // it was handed to us meanwhile: pass it on
	return true, ctx.Err()
}

// leave hands the gate to the next waiter, or frees it.
func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	var next *gateWaiter
	switch {
	case len(g.high) > 0 && (len(g.low) == 0 || g.low[0].passed < maxPass):
		next, g.high = g.high[0], g.high[1:]
		if len(g.low) > 0 {
			g.low[0].passed++
		}
	case len(g.low) > 0:
		next, g.low = g.low[0], g.low[1:]
	default:
		g.held = false
		return
	}
	close(next.ready)
}
