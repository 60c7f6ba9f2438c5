package projections

import (
	"context"
	"fmt"
	"time"

	"github.com/casebook/casebook/eventstore"
)

// State is what a runner is doing.
type State string

// Runner states.
const (
	StateStarting        State = "starting"
	StateRunning         State = "running"   // owns the lease and applies events
	StateFollowing       State = "following" // another replica owns the lease
	StateRebuildRequired State = "rebuild_required"
	StateStopped         State = "stopped"
)

// Status is a subscriber's health.
type Status struct {
	Name        string              `json:"name"`
	Generation  Generation          `json:"generation"`
	Version     int                 `json:"version"`
	CodeVersion int                 `json:"code_version"`
	State       State               `json:"state"`
	Owner       bool                `json:"owner"`
	Position    eventstore.Position `json:"position"`
	Head        eventstore.Position `json:"head"`
	CaughtUp    bool                `json:"caught_up"`
	// EverCaughtUp turns true once the runner reached the head after starting.
	EverCaughtUp bool `json:"ever_caught_up"`
	// LagEvents is the number of events after the checkpoint; -1 when the store cannot count.
	LagEvents int64 `json:"lag_events"`
	// LagSeconds is the age of the oldest event not yet applied.
	LagSeconds float64 `json:"lag_seconds"`
	Parked     int     `json:"parked"`
	Processed  uint64  `json:"processed"`
	// Batches counts the transactions that committed events' output (each with its checkpoint),
	// and Pages the pages they wrote to SQLite's write-ahead log (zero on Postgres).
	Batches uint64 `json:"batches"`
	Pages   uint64 `json:"pages"`
	// Window is the batch window the runner uses now (see nextWindow); zero until its first
	// windowed batch.
	Window    time.Duration `json:"window_ns,omitempty"`
	LastError string        `json:"last_error,omitempty"`
	LastErrAt time.Time     `json:"last_error_at,omitzero"`
	Heartbeat time.Time     `json:"heartbeat,omitzero"`
}

func (r *Runner) setState(s State) {
	r.mu.Lock()
	r.status.State = s
	r.mu.Unlock()
}

// update records that the checkpoint is at position at after n more events, with fresh lag and
// parked counts (parked, when not negative, is the count a batch just committed; otherwise it is
// read). WaitFor callers wake as soon as the position is recorded, and applied (when not nil)
// closes then too, so the subscription reads its next batch meanwhile: the head read that dates
// the lag is a round trip on Postgres that neither needs. So the status moves in two steps, its
// position and parked count first and its head and lag after the read.
func (r *Runner) update(ctx context.Context, at eventstore.Position, n uint64, parked int, applied chan struct{}) error {
	gen := r.currentGen()
	now := r.Now()
	if parked < 0 {
		var err error
		if parked, err = countParked(ctx, r.DB, checkpointName(r.Projection, gen)); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.status.Position, r.status.Generation, r.status.Parked = at, gen, parked
	r.status.Processed += n
	if n > 0 {
		r.status.Batches++
	}
	r.status.Heartbeat = now
	lagEvents, lagSeconds := r.status.LagEvents, r.status.LagSeconds
	stale := now.Sub(r.statsAt) >= StatsInterval || n == 0
	close(r.progress)
	r.progress = make(chan struct{})
	r.mu.Unlock()
	if applied != nil {
		close(applied)
	}

	// Not Head: on Postgres it waits for every transaction in front of the last commit, which
	// includes the other subscribers' batches; the status needs only what is readable now.
	head, err := r.Store.VisibleHead(ctx)
	if err != nil {
		return fmt.Errorf("read head: %w", err)
	}
	caughtUp := !at.Less(head)
	switch {
	case caughtUp:
		lagEvents, lagSeconds = 0, 0
	case stale:
		// Counting and dating the backlog cost a scan: done at most every StatsInterval.
		lagEvents = -1 // unknown where the store does not count (Capabilities.Count)
		if n, err := r.Store.CountAfter(ctx, at); err == nil {
			lagEvents = int64(n)
		}
		// Only its time is read: through the log as this projection reads it (nothing opened).
		if next, err := source(r.Store, r.Projection).ReadAll(ctx, at, 1); err == nil && len(next) == 1 {
			lagSeconds = max(0, now.Sub(next[0].RecordedAt).Seconds())
		}
	case lagEvents >= int64(n):
		lagEvents -= int64(n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if stale {
		r.statsAt = now
	}
	r.status.Head, r.status.CaughtUp = head, caughtUp
	r.status.LagEvents, r.status.LagSeconds = lagEvents, lagSeconds
	if caughtUp {
		r.status.EverCaughtUp = true
		r.status.LastError = ""
	}
	return nil
}

// StatsInterval bounds how often a runner counts its backlog while behind.
const StatsInterval = time.Second

func (r *Runner) currentGen() Generation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

// Status reports the runner's health.
func (r *Runner) Status() Status {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Effects returns the effects a dry run would have emitted.
func (r *Runner) Effects() []Effect {
	r.init()
	return r.effects.recorded()
}

// FollowInterval is how often a replica that does not own a projection reads the owner's
// checkpoint while a request waits for it.
const FollowInterval = 50 * time.Millisecond

// WaitFor blocks until the generation that serves reads has applied p, or ctx ends. The in-memory
// position counts only while this runner owns the active generation; otherwise (another replica
// owns it, or a rebuild has switched generations) it follows that generation's checkpoint.
//
// Which generation is active is read from the store once the in-memory position has reached p
// (so a switch before that moment is seen), or at once when this runner does not own its
// generation, and again after each FollowInterval tick while that answer keeps the wait going. An
// owner that has not reached p waits for its batches without reading: with many waiters
// (read-your-writes under load) a read per waiter per tick cost more than the batches.
func (r *Runner) WaitFor(ctx context.Context, p eventstore.Position) error {
	r.init()
	tick := time.NewTicker(FollowInterval)
	defer tick.Stop()
	var active Generation // as last read; 0 before the first read
	fresh := false        // active was read since the last tick
	for {
		r.mu.Lock()
		gen, owner := r.gen, r.status.Owner
		reached := owner && !r.status.Position.Less(p)
		ch := r.progress
		r.mu.Unlock()
		if !fresh && (reached || !owner || (active != 0 && active != gen)) {
			a, err := r.activeGeneration(ctx)
			if err != nil {
				return err
			}
			active, fresh = a, true
		}
		if reached && gen == active {
			return nil
		}
		if fresh && (!owner || gen != active) {
			cp, err := r.followedCheckpoint(ctx, active)
			if err == nil && !cp.Less(p) {
				return nil
			}
		}
		if r.waiting != nil {
			r.waiting()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-tick.C:
			fresh = false
		}
	}
}

// followedCheckpoint is gen's stored checkpoint, read after the call began (concurrent waiters
// share reads; see coalesce).
func (r *Runner) followedCheckpoint(ctx context.Context, gen Generation) (eventstore.Position, error) {
	return r.checkpoints.Do(ctx, gen, func(ctx context.Context) (eventstore.Position, error) {
		return Checkpoint(ctx, r.DB, checkpointName(r.Projection, gen))
	})
}
