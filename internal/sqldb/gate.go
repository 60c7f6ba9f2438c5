package sqldb

import (
	"context"
	"slices"
	"sync"
	"time"
)

// gate admits one write transaction at a time to a SQLite file, across this process's handles on
// it. SQLite has one writer; queueing here wakes the next writer at once instead of after a busy
// handler's sleep.
//
// Bounded pass-over: writers of durable handles (appends, audit rows, tenancy: what a request waits
// for) go before those of replayable ones (subscribers) while the oldest waiting replayable writer
// has waited less than passOverFor. Once it has waited that long it goes next, and after each
// replayable turn a waiting durable writer goes before the next replayable one. So under a burst
// of appends the writer lane serves appends, and each subscriber transaction carries every event
// that arrived meanwhile; a subscriber still gets the lane within passOverFor plus two turns for
// each replayable writer ahead of it, and a durable writer waits for at most one subscriber
// transaction once subscribers are overdue.
//
// Among replayable writers, an urgent one (WithLanePriority: a subscriber that reads wait for)
// goes before the others; the bound above still counts from the oldest replayable waiter. The same
// bounded pass-over holds among them: once the oldest replayable waiter is not urgent and has
// waited urgentPassOverFor, it goes after the next urgent turn, so urgent subscribers that always
// have a batch waiting cannot hold the others back for longer than that plus one urgent turn.
type gate struct {
	// checkpoints runs this process's checkpoints of the file one at a time, so that a RESTART
	// checkpoint, which holds the writer lane, never waits for another handle's PASSIVE one.
	checkpoints sync.Mutex

	mu         sync.Mutex
	held       bool
	high, low  []*gateWaiter
	lastLow    bool             // the current turn is a replayable writer's
	lastUrgent bool             // the last replayable turn was an urgent writer's
	now        func() time.Time // the clock waits are measured with (tests replace it)
	turns      uint64           // turns begun: moves whenever a writer takes the gate
	turnAt     time.Time        // when the current turn began
}

// passOverFor is how long durable writers may go ahead of the oldest waiting replayable one.
const passOverFor = 5 * time.Millisecond

// urgentPassOverFor is how long urgent replayable writers may go ahead of the oldest waiting
// replayable one that is not urgent: the other subscribers' own batch window (50 ms), which their
// output may wait anyway.
const urgentPassOverFor = 50 * time.Millisecond

type gateWaiter struct {
	ready  chan struct{}
	since  time.Time
	urgent bool
}

func (g *gate) clock() time.Time {
	if g.now != nil {
		return g.now()
	}
	return time.Now()
}

// enter takes the gate; contended reports whether it had to wait. urgent counts for low (replayable)
// writers only.
func (g *gate) enter(ctx context.Context, low, urgent bool) (contended bool, err error) {
	g.mu.Lock()
	if !g.held {
		g.held, g.lastLow = true, low
		g.turns, g.turnAt = g.turns+1, g.clock()
		g.mu.Unlock()
		return false, nil
	}
	w := &gateWaiter{ready: make(chan struct{}), since: g.clock(), urgent: urgent}
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

// leave hands the gate to the next waiter (see gate for the order), or frees it.
func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	var next *gateWaiter
	switch {
	case len(g.high) > 0 && (len(g.low) == 0 || g.lastLow || g.clock().Sub(g.low[0].since) < passOverFor):
		next, g.high, g.lastLow = g.high[0], g.high[1:], false
	case len(g.low) > 0:
		i := slices.IndexFunc(g.low, func(w *gateWaiter) bool { return w.urgent })
		if i < 0 || (g.lastUrgent && g.clock().Sub(g.low[0].since) >= urgentPassOverFor) {
			i = 0 // the oldest: no urgent waiter, or the oldest is overdue after an urgent turn
		}
		next, g.lastLow, g.lastUrgent = g.low[i], true, g.low[i].urgent
		g.low = slices.Delete(g.low, i, i+1)
	default:
		g.held = false
		return
	}
	g.turns, g.turnAt = g.turns+1, g.clock()
	close(next.ready)
}

// lane reports the gate's state now (see WriterLane).
func (g *gate) lane() WriterLane {
	g.mu.Lock()
	defer g.mu.Unlock()
	l := WriterLane{Held: g.held, Turn: g.turns, Waiting: len(g.high) + len(g.low)}
	if g.held {
		l.HeldFor = g.clock().Sub(g.turnAt)
	}
	return l
}

// WriterLane is the state of a SQLite file's writer gate, shared by this process's handles on the
// file: what a readiness check reads to tell a writer lane that moves from one that is stuck.
type WriterLane struct {
	// Held reports whether a write transaction (or a checkpoint that needs the lane) holds it.
	Held bool
	// Turn counts the turns begun since the process opened the file: it moves whenever another
	// writer takes the lane, so an unchanged Turn while Held is one holder all along.
	Turn uint64
	// HeldFor is how long the current turn has lasted (zero when not held).
	HeldFor time.Duration
	// Waiting is how many writers wait for the lane.
	Waiting int
}

// WriterLane reports db's writer gate now; the zero WriterLane on Postgres, which has no gate.
func (db *DB) WriterLane() WriterLane {
	if db.writers == nil {
		return WriterLane{}
	}
	return db.writers.lane()
}
