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
	"crypto/rand"
	"database/sql"
	"encoding/hex"
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

// Generation numbers a projection's set of tables.
type Generation int

// Table returns the generation's name for a base table.
func (g Generation) Table(base string) string { return fmt.Sprintf("%s_g%d", base, int(g)) }

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

// Batch is one transaction's worth of events.
type Batch struct {
	Tx     *sql.Tx
	DB     *sqldb.DB
	Gen    Generation
	Events []eventstore.RecordedEvent
	// Replaying is set while a generation is rebuilt from the log and is not yet active.
	Replaying bool
	// Now is when the batch is applied.
	Now time.Time
	// Prepared is what Preparer.Prepare returned for exactly these Events, or nil.
	Prepared any
	effects  *effectSink
	conn     *sqldb.Tx
	eager    bool // ExecAtCommit runs at once: events are being applied one by one
}

// CopyFrom bulk-loads rows into table inside the batch's transaction (see sqldb.Tx.CopyFrom). It
// returns sqldb.ErrNoCopy on SQLite, where projections write with INSERT.
func (b *Batch) CopyFrom(ctx context.Context, table string, columns []string, rows *sqldb.CopyRows) error {
	if b.conn == nil {
		return sqldb.ErrNoCopy
	}
	return b.conn.CopyFrom(ctx, table, columns, rows)
}

// Finalizer is implemented by projections whose generations get some structures (secondary
// indexes) only once filled: bulk index builds are much faster than row-by-row maintenance. The
// runtime calls Finalize before a generation serves: at creation of generation 1, and before a
// rebuild switches. It must be idempotent. On Postgres it also gathers the planner's statistics
// of every table of the generation (ANALYZE), which Rebuild does itself for other projections.
type Finalizer interface {
	Finalize(ctx context.Context, db *sqldb.DB, gen Generation) error
}

// finalize runs p's Finalize if it has one.
func finalize(ctx context.Context, db *sqldb.DB, p Projection, gen Generation) error {
	if f, ok := p.(Finalizer); ok {
		return f.Finalize(ctx, db, gen)
	}
	return nil
}

// Preparer is implemented by projections with per-batch work that needs no transaction (decoding).
// The runtime prepares the next batch while the previous one's transaction runs; when Prepare
// fails or panics, Apply prepares again (PreparedOf), where the failure parks the stream.
type Preparer interface {
	Prepare(evs []eventstore.RecordedEvent) (any, error)
}

// PreparedOf returns what p's Prepare returned for b's events, preparing them now when the runtime
// did not (a batch applied again event by event, a test).
func PreparedOf[T any](b *Batch, p Preparer) (T, error) {
	if v, ok := b.Prepared.(T); ok {
		return v, nil
	}
	var zero T
	v, err := p.Prepare(b.Events)
	if err != nil {
		return zero, err
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("projections: Prepare returned %T, want %T", v, zero)
	}
	return t, nil
}

// Windowed is implemented by projections that choose how long a batch may gather events under a
// steady stream of appends (see Runner.subscribe); DefaultBatchWindow applies to the others.
type Windowed interface {
	BatchWindow() time.Duration
}

// ReadAwaited is implemented by projections that reads wait for (consistent=true, min_position, the
// portal's reads). On SQLite a live runner's batches of such a projection go before the other
// subscribers' in the writer lane (sqldb.WithLanePriority): a read waits for its batch, nobody
// waits for theirs.
type ReadAwaited interface {
	AwaitedByReads()
}

// DefaultBatchWindow is the batch window of a projection that does not choose one. After applying a
// small batch, a live runner reads the next one no sooner than this after it read the last, so under a
// steady stream of intakes each subscriber commits at most about 1/window transactions a second,
// whatever the intake rate, instead of one per append. An event arriving after a quiet spell is
// read at once; only the events behind it wait, for at most the window. Nor does it read the next
// before the last committed: under a burst, while a batch waits for the writer lane, everything
// arriving meanwhile gathers into the next one.
const DefaultBatchWindow = 50 * time.Millisecond

// windowedBelow is the batch size from which a runner reads on at once: a batch this large means it
// is behind (catching up or rebuilding), and waiting would only slow it down.
const windowedBelow = 256

// q is the batch's transaction, with statements kept prepared on SQLite (see sqldb.Querier).
func (b *Batch) q() sqldb.Querier {
	if b.conn != nil {
		return b.conn
	}
	return b.Tx
}

// ExecAtCommit runs a statement written with ? placeholders at the end of the batch's transaction,
// after Apply and in the same round trip as the checkpoint and COMMIT on Postgres (see
// sqldb.Tx.ExecAtCommit): a batch holds a transaction id, and with it the log's visible end for
// every reader, from its first write to its commit, so writes whose result Apply does not need
// should go this way. Apply does not see their effect, and their failure fails the batch, which
// is then applied event by event with each statement run at once, as with a failure in Apply.
func (b *Batch) ExecAtCommit(ctx context.Context, query string, args ...any) error {
	if !b.QueuesAtCommit() {
		return b.Exec(ctx, query, args...)
	}
	return b.conn.ExecAtCommit(ctx, b.DB.Rebind(query), args...)
}

// QueuesAtCommit reports whether ExecAtCommit defers its statements to the commit (on Postgres,
// for a batch applied at once) rather than running them at once.
func (b *Batch) QueuesAtCommit() bool {
	return !b.eager && b.conn != nil && b.DB.Dialect == sqldb.Postgres
}

// Savepoint sets savepoint name (an identifier) in the batch's transaction; RollbackTo returns to
// it, statements queued with ExecAtCommit since included (sqldb.Tx.Savepoint).
func (b *Batch) Savepoint(ctx context.Context, name string) error {
	if b.conn == nil {
		return b.Exec(ctx, "SAVEPOINT "+name)
	}
	return b.conn.Savepoint(ctx, name)
}

// RollbackTo rolls the batch's transaction back to savepoint name (see Savepoint).
func (b *Batch) RollbackTo(ctx context.Context, name string) error {
	if b.conn == nil {
		return b.Exec(ctx, "ROLLBACK TO SAVEPOINT "+name)
	}
	return b.conn.RollbackTo(ctx, name)
}

// Exec runs a statement written with ? placeholders in the batch's transaction.
func (b *Batch) Exec(ctx context.Context, query string, args ...any) error {
	_, err := b.q().ExecContext(ctx, b.DB.Rebind(query), args...)
	return err
}

// Query runs a query written with ? placeholders in the batch's transaction.
func (b *Batch) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return b.q().QueryContext(ctx, b.DB.Rebind(query), args...)
}

// QueryRow runs a one-row query written with ? placeholders in the batch's transaction.
func (b *Batch) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return b.q().QueryRowContext(ctx, b.DB.Rebind(query), args...)
}

func (b *Batch) with(evs []eventstore.RecordedEvent) *Batch {
	c := *b
	c.Events = evs
	if len(evs) != len(b.Events) {
		c.Prepared = nil
	}
	return &c
}

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

// DefaultLeaseTTL is the takeover delay after an owner dies.
const DefaultLeaseTTL = 15 * time.Second

// errGenerationChanged restarts a live runner on the newly active generation.
var errGenerationChanged = errors.New("active generation changed")

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

func newOwnerID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// GenerationName names a generation's checkpoint, lease, parked set and schema migrations.
func GenerationName(projection string, g Generation) string {
	return fmt.Sprintf("%s@g%d", projection, int(g))
}

func checkpointName(p Projection, g Generation) string { return GenerationName(p.Name(), g) }

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

// resolveGeneration returns the generation to run. A live runner waits while the active generation
// was built by another version of the projection.
func (r *Runner) resolveGeneration(ctx context.Context) (Generation, error) {
	if r.Build != 0 {
		return r.Build, nil
	}
	for {
		st, err := ensureActive(ctx, r.DB, r.Projection, r.Now())
		if err != nil {
			return 0, err
		}
		r.mu.Lock()
		r.status.Generation, r.status.Version = st.ActiveGen, st.ActiveVersion
		r.mu.Unlock()
		if st.ActiveVersion == r.Projection.Version() {
			r.setState(StateStarting)
			return st.ActiveGen, nil
		}
		r.setState(StateRebuildRequired)
		if err := sleep(ctx, min(r.LeaseTTL/3, time.Second)); err != nil {
			return 0, err
		}
	}
}

// runGeneration owns gen's lease and applies events until ctx ends or something fails.
func (r *Runner) runGeneration(ctx context.Context, gen Generation) error {
	name := checkpointName(r.Projection, gen)
	r.mu.Lock()
	if r.gen != gen {
		r.gen = gen
		r.status.EverCaughtUp = false
		r.lease = &lease{db: r.DB, name: name, owner: r.Owner, ttl: r.LeaseTTL, now: r.Now}
	}
	l := r.lease
	r.mu.Unlock()
	defer l.release(context.WithoutCancel(ctx))
	if err := r.awaitLease(ctx, l, gen); err != nil {
		return err
	}
	r.setState(StateRunning)
	return r.runOwned(ctx, l, gen)
}

// awaitLease returns once this replica owns l. Meanwhile the status follows the owner's checkpoint.
func (r *Runner) awaitLease(ctx context.Context, l *lease, gen Generation) error {
	for {
		ok, err := l.acquire(ctx)
		if err == nil && ok {
			r.setOwner(true)
			return nil
		}
		r.setState(StateFollowing)
		if err == nil {
			err = r.follow(ctx, gen)
		}
		if errors.Is(err, errGenerationChanged) {
			return err
		}
		if err != nil && ctx.Err() == nil {
			r.Logger.Warn("projection lease check failed", "projection", r.Projection.Name(), "err", err)
		}
		if err := sleep(ctx, r.LeaseTTL/3); err != nil {
			return err
		}
	}
}

// follow refreshes a non-owner's status from the shared checkpoint.
func (r *Runner) follow(ctx context.Context, gen Generation) error {
	if err := r.checkGeneration(ctx, gen); err != nil {
		return err
	}
	p, err := Checkpoint(ctx, r.DB, checkpointName(r.Projection, gen))
	if err != nil {
		return err
	}
	return r.update(ctx, p, 0, -1, nil)
}

// checkGeneration fails with errGenerationChanged when a live runner's generation is no longer
// the active one.
func (r *Runner) checkGeneration(ctx context.Context, gen Generation) error {
	if r.Build != 0 {
		return nil
	}
	st, err := readState(ctx, r.DB, r.DB.DB, r.Projection.Name())
	if err != nil {
		return err
	}
	if st.ActiveGen != gen {
		return errGenerationChanged
	}
	return nil
}

func (r *Runner) setOwner(v bool) {
	r.mu.Lock()
	r.status.Owner = v
	r.mu.Unlock()
}

func (r *Runner) setState(s State) {
	r.mu.Lock()
	r.status.State = s
	r.mu.Unlock()
}

// runOwned runs the subscription while renewing the lease and watching the active generation.
func (r *Runner) runOwned(ctx context.Context, l *lease, gen Generation) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(r.LeaseTTL / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if ok, err := l.acquire(ctx); err == nil && !ok {
					cancel(ErrLeaseLost)
					return
				}
				if err := r.checkGeneration(ctx, gen); errors.Is(err, errGenerationChanged) {
					cancel(err)
					return
				}
			}
		}
	}()
	err := r.subscribe(ctx, l, gen)
	cancel(nil)
	<-done
	if cause := context.Cause(ctx); errors.Is(cause, ErrLeaseLost) || errors.Is(cause, errGenerationChanged) {
		return cause
	}
	return err
}

// pending is a batch read (and prepared) ahead of its transaction.
type pending struct {
	evs      []eventstore.RecordedEvent
	prepared any
	applied  chan struct{}  // closed once committed (see update), when the subscription waits for it
	waited   *time.Duration // set before applied closes: how long the transaction waited for the writer lane
}

// subscribe applies the log from gen's checkpoint. While behind (large batches, rebuilds), reading
// and preparing the next batch overlaps with the previous batch's transaction: the subscription
// hands batches to an applier through a one-slot queue, and the applier's first error ends both.
// hold waits for r.Hold, when set.
func (r *Runner) hold(ctx context.Context) error {
	if r.Hold == nil {
		return nil
	}
	return r.Hold(ctx)
}

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

// activeGeneration is the generation reads are served from: the one this runner builds, when it
// builds one, else the projection's active generation as stored, read after the call began
// (concurrent waiters share reads; see coalesce).
func (r *Runner) activeGeneration(ctx context.Context) (Generation, error) {
	if r.Build != 0 {
		return r.Build, nil
	}
	return r.active.Do(ctx, struct{}{}, func(ctx context.Context) (Generation, error) {
		st, err := ReadState(ctx, r.DB, r.Projection.Name())
		return st.ActiveGen, err
	})
}
