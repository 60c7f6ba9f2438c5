// Package projections runs subscribers. Each reads the global log from its own checkpoint and
// writes its output and the checkpoint in one SQL transaction, so a crash replays at most the
// uncommitted batch; handlers are idempotent.
//
// A projection's tables live in generations (qm_inquiries_g3) behind views with the base names
// (qm_inquiries), so a rebuild fills a new generation while the live one keeps serving, then swaps
// the views in one transaction. Events are ordered per stream: a handler error parks its stream
// (later events of that stream wait behind it) while other streams keep flowing. Several replicas
// may run the same projection: a fenced lease gives each generation one owner at a time.
package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/coalesce"
	"github.com/casebook/casebook/internal/sqldb"
)

// Projection is a subscriber's handler.
type Projection interface {
	// Name identifies the projection.
	Name() string
	// Version changes whenever the handler's output or its tables change; a stored generation of
	// another version must be rebuilt before it serves.
	Version() int
	// Tables lists the base names of the tables the runtime exposes as views.
	Tables() []string
	// Setup creates the generation's tables (gen.Table(base) for each base) and applies the
	// later migrations of a generation made by earlier code (changes of indexes, which need no
	// rebuild); it must be idempotent. A runner calls it for the active generation at every start.
	Setup(ctx context.Context, db *sqldb.DB, gen Generation) error
	// Apply writes the effect of b.Events inside b.Tx. It must be idempotent: an event may be
	// delivered again after a crash. An error fails the batch; the runtime then applies the
	// events one by one to find and park the failing stream. A panic counts as an error whose
	// message is "panic: <value>".
	Apply(ctx context.Context, b *Batch) error
}

// Runner drives one projection: the active generation (Build == 0) or a generation being built.
type Runner struct {
	Store      eventstore.Store
	DB         *sqldb.DB
	Projection Projection
	Logger     *slog.Logger
	Now        func() time.Time
	// RetryDelay is the pause before resubscribing after a failure.
	RetryDelay time.Duration
	// Owner identifies this replica in leases (a random id when empty).
	Owner string
	// LeaseTTL is how long a dead owner keeps the lease (DefaultLeaseTTL when zero).
	LeaseTTL time.Duration
	// Build, when set, runs that generation (a rebuild) instead of following the active one.
	Build Generation
	// DryRun records effects instead of emitting them (rebuild dry runs).
	DryRun bool
	// Hold, when set, is waited on before each batch is applied; its error ends the subscription.
	// casebook bench --intake-only holds the subscribers so as to measure the intake path alone.
	Hold func(ctx context.Context) error

	// pause waits out a batch window (sleep; tests replace it).
	pause func(ctx context.Context, d time.Duration) error

	mu       sync.Mutex
	status   Status
	statsAt  time.Time
	inited   bool
	gen      Generation
	lease    *lease
	effects  *effectSink
	progress chan struct{} // closed and replaced whenever the checkpoint advances
	waiting  func()        // tests: called each time WaitFor is about to block
	// tests: called at the end of each batch's transaction, before its commit
	committing func(context.Context, *sqldb.Tx) error
	// active and checkpoints share WaitFor's reads of the active generation and of a followed
	// generation's checkpoint among concurrent waiters.
	active      coalesce.Group[struct{}, Generation]
	checkpoints coalesce.Group[Generation, eventstore.Position]
}

// Setup migrates the runtime's tables and makes sure the projection has an active generation.
func (r *Runner) Setup(ctx context.Context) error {
	r.init()
	if err := Migrate(ctx, r.DB); err != nil {
		return err
	}
	st, err := ensureActive(ctx, r.DB, r.Projection, r.Now())
	if err != nil || st.ActiveVersion != r.Projection.Version() {
		return err // a generation of another version is rebuilt, not migrated
	}
	if err := r.Projection.Setup(ctx, r.DB, st.ActiveGen); err != nil {
		return fmt.Errorf("projection %s: migrate generation %d: %w", r.Projection.Name(), st.ActiveGen, err)
	}
	return nil
}

func (r *Runner) init() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inited {
		return
	}
	r.inited = true
	r.progress = make(chan struct{})
	r.status = Status{Name: r.Projection.Name(), CodeVersion: r.Projection.Version(), State: StateStarting, LagEvents: -1}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	if r.RetryDelay == 0 {
		r.RetryDelay = time.Second
	}
	if r.Owner == "" {
		r.Owner = newOwnerID()
	}
	if r.LeaseTTL == 0 {
		r.LeaseTTL = DefaultLeaseTTL
	}
	if r.pause == nil {
		r.pause = sleep
	}
	r.effects = &effectSink{dryRun: r.DryRun}
}

// Run processes events until ctx ends. A live runner first resolves the active generation (and
// waits while it needs a rebuild), then takes the generation's lease and subscribes from its
// checkpoint. Failures are recorded in Status and retried after RetryDelay. It returns ctx's error.
// Its goroutines carry the profiler label ProfileLabel=<projection name>, so a CPU profile tells
// each subscriber's share (casebook bench reports it).
func (r *Runner) Run(ctx context.Context) error {
	var err error
	pprof.Do(ctx, pprof.Labels(ProfileLabel, r.Projection.Name()), func(ctx context.Context) { err = r.run(ctx) })
	return err
}

// ProfileLabel is the CPU profile label naming the subscriber a goroutine works for.
const ProfileLabel = "casebook_subscriber"

func (r *Runner) run(ctx context.Context) error {
	r.init()
	defer r.setState(StateStopped)
	for {
		gen, err := r.resolveGeneration(ctx)
		if err == nil {
			err = r.runGeneration(ctx, gen)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.setOwner(false)
		switch {
		case errors.Is(err, errGenerationChanged):
			r.Logger.Info("projection switched generation", "projection", r.Projection.Name())
			continue
		case errors.Is(err, ErrLeaseLost):
			r.Logger.Warn("projection lease lost to another replica", "projection", r.Projection.Name())
			continue
		}
		r.mu.Lock()
		r.status.LastError, r.status.LastErrAt = err.Error(), r.Now()
		r.mu.Unlock()
		r.Logger.Error("projection failed; resubscribing from checkpoint", "projection", r.Projection.Name(), "err", err)
		if err := sleep(ctx, r.RetryDelay); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
