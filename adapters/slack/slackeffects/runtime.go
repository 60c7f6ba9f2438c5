package slackeffects

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// MaxAttempts is the default bound on retries of failures with an unknown or transient cause;
// then the job is discarded (the dead letter, kept until an operator acts). Snoozes (debounce,
// cooldowns, open circuits) spend no attempt.
const MaxAttempts = 12

// legacyQueues are the queues of the two River clients that came before the runtime; they are
// still worked, so jobs queued before an upgrade run.
var legacyQueues = []string{"slack", "slack_lists"}

// Args is what every effect job's arguments implement: river.JobArgs (Kind names the effect kind
// and its queue) and EffectRef.
type Args interface {
	river.JobArgs
	EffectRef() Ref
}

// Kind is an effect kind's own part: planning one job.
type Kind[A Args] interface {
	// Plan re-reads canonical state for a and returns the job's work, or nil when there is nothing
	// to do (zero Slack I/O). Its errors are retried; Snooze and Cancel are honoured.
	Plan(ctx context.Context, a A) (*Plan, error)
}

// Plan is one job's work on one target.
type Plan struct {
	// Target is what the job writes to; its Kind is filled in by the runtime.
	Target Target
	// Installation is the installation whose client Do gets.
	Installation slackinstall.Installation
	// Changed and Pending debounce the write (Timing.Quiet, Timing.MaxDelay): when the inquiry last
	// changed and when its oldest change not yet shown was made. Zero: write at once.
	Changed, Pending time.Time
	// Do renders and calls Slack (see the package comment for creates).
	Do func(ctx context.Context, api *slack.Client) error
	// Refine, when set, may reclassify a failure (a List confirms schema drift, else quarantines).
	Refine func(ctx context.Context, f Failure) Failure
	// Frees marks a removal (a List row's delete): it frees room, so the destination's capacity
	// circuit does not hold it back; cooldowns and every other circuit still do.
	Frees bool
}

// Snooze makes a job run again after d without spending an attempt.
func Snooze(d time.Duration) error { return river.JobSnooze(d) }

// Cancel ends a job for good with err as its reason; it is kept until an operator acts.
func Cancel(err error) error { return river.JobCancel(err) }

// Config configures New.
type Config struct {
	Logger *slog.Logger
	// Workers is each effect kind's queue concurrency (default 2).
	Workers int
	// MaxAttempts is the attempt budget of a queued effect (default MaxAttempts).
	MaxAttempts int
	// FetchPollInterval is how often an idle client looks for jobs (River's default when zero).
	FetchPollInterval time.Duration
	Timing            Timing
}

// Runtime is the one effect runtime of a process: one River client working one queue per
// registered kind.
type Runtime struct {
	DB      *sqldb.DB
	Install *slackinstall.Store
	Events  eventstore.Store
	Now     func() time.Time
	Timing  Timing
	Ledger  *Ledger
	Guard   *Guard

	cfg     Config
	health  *healthLog
	workers *river.Workers
	kinds   map[string]registered
	mu      sync.Mutex
	client  *river.Client[*sql.Tx]
}

type registered struct {
	run func(ctx context.Context, encoded []byte) error
	ref func(encoded []byte) (Ref, error)
}

// New migrates the runtime's tables and River's, and returns a runtime to register kinds on.
func New(ctx context.Context, db *sqldb.DB, install *slackinstall.Store, events eventstore.Store, now func() time.Time, cfg Config) (*Runtime, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = MaxAttempts
	}
	if err := MigrateRiver(ctx, db, cfg.Logger); err != nil {
		return nil, err
	}
	if err := Migrate(ctx, db); err != nil {
		return nil, err
	}
	return &Runtime{
		DB: db, Install: install, Events: events, Now: now, Timing: cfg.Timing.WithDefaults(),
		Ledger: &Ledger{DB: db, Now: now}, Guard: &Guard{DB: db, Now: now},
		cfg: cfg, health: &healthLog{DB: db, Now: now}, workers: river.NewWorkers(), kinds: map[string]registered{},
	}, nil
}

type worker[A Args] struct {
	river.WorkerDefaults[A]
	r *Runtime
	k Kind[A]
}

func (w worker[A]) Work(ctx context.Context, j *river.Job[A]) error {
	return run(ctx, w.r, j.Args, w.k)
}

// Register adds an effect kind: its worker and its queue (named after the kind). Call it before
// Open.
func Register[A Args](r *Runtime, k Kind[A]) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		return errors.New("slackeffects: Register after Open")
	}
	var zero A
	if _, dup := r.kinds[zero.Kind()]; dup {
		return fmt.Errorf("slackeffects: kind %s registered twice", zero.Kind())
	}
	if err := river.AddWorkerSafely[A](r.workers, worker[A]{r: r, k: k}); err != nil {
		return err
	}
	r.kinds[zero.Kind()] = registered{
		run: func(ctx context.Context, b []byte) error {
			var a A
			if err := json.Unmarshal(b, &a); err != nil {
				return err
			}
			return run(ctx, r, a, k)
		},
		ref: func(b []byte) (Ref, error) {
			var a A
			err := json.Unmarshal(b, &a)
			return a.EffectRef(), err
		},
	}
	return nil
}

// Open builds the River client of the registered kinds. Dead letters (discarded jobs) and
// quarantined or cancelled jobs are never deleted by River's cleaner: they stay until an operator
// retries them (and they complete) or cancels them. Completed jobs go after River's default 24 h.
func (r *Runtime) Open() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		return nil
	}
	rc := &river.Config{
		Logger: r.cfg.Logger, FetchPollInterval: r.cfg.FetchPollInterval, MaxAttempts: r.cfg.MaxAttempts,
		DiscardedJobRetentionPeriod: -1, CancelledJobRetentionPeriod: -1,
	}
	if r.cfg.FetchPollInterval > 0 {
		rc.FetchCooldown = min(r.cfg.FetchPollInterval, 100*time.Millisecond)
	}
	if len(r.kinds) > 0 {
		n := r.cfg.Workers
		if n <= 0 {
			n = 2
		}
		rc.Workers = r.workers
		rc.Queues = map[string]river.QueueConfig{}
		for k := range r.kinds {
			rc.Queues[k] = river.QueueConfig{MaxWorkers: n}
		}
		for _, q := range legacyQueues {
			rc.Queues[q] = river.QueueConfig{MaxWorkers: 1}
		}
	}
	c, err := river.NewClient(Driver(r.DB), rc)
	if err != nil {
		return err
	}
	r.client = c
	return nil
}

// Client is the River client (Open first); tests and the wiring list and work jobs with it.
func (r *Runtime) Client() *river.Client[*sql.Tx] { r.mu.Lock(); defer r.mu.Unlock(); return r.client }

// Start works the queues until ctx ends or Stop.
func (r *Runtime) Start(ctx context.Context) error { return r.Client().Start(ctx) }

// Stop waits for running jobs (bounded by ctx).
func (r *Runtime) Stop(ctx context.Context) error { return r.Client().Stop(ctx) }

// Kinds returns the registered kinds, sorted.
func (r *Runtime) Kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.kinds))
	for k := range r.kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TenantTag is the River tag that scopes a job to its tenant for the operator's views.
func TenantTag(t domain.TenantID) string { return "tenant_" + string(t) }

func tenantTag(t domain.TenantID) string { return TenantTag(t) }

// Intent is an effect a subscriber's batch emits: its deterministic key (see projections.Effect)
// and its job.
type Intent struct {
	Key string
	Queued
}

// EmitTx records intents in a projection's batch (projections.Batch.EmitAll) and queues the jobs
// of those that are new (InsertManyTx), in one statement each whatever their number: a redelivered
// batch queues nothing again, and the batch's transaction id, which holds the log's visible end
// from its first write, is taken in its last round trips (the keys, the jobs and River's
// notification, then the commit). A subscriber calls it once, at the end of Apply.
func (r *Runtime) EmitTx(ctx context.Context, b *projections.Batch, projection string, intents []Intent) error {
	if len(intents) == 0 {
		return nil
	}
	effects := make([]projections.Effect, len(intents))
	for i, in := range intents {
		effects[i] = projections.Effect{Key: in.Key, Kind: in.Args.Kind(), Tenant: string(in.Args.EffectRef().Tenant)}
	}
	fresh, err := b.EmitAll(ctx, projection, effects)
	if err != nil {
		return err
	}
	var jobs []Queued
	for i, in := range intents {
		if fresh[i] {
			jobs = append(jobs, in.Queued)
		}
	}
	return r.InsertManyTx(ctx, b.Tx, jobs)
}

// Queued is a job for InsertManyTx: its effect's arguments and when it runs (zero: now).
type Queued struct {
	Args Args
	At   time.Time
}

// InsertManyTx queues jobs in tx (a projection batch's transaction), each unique by its kind and
// arguments, in one statement. Of jobs alike in one call the first is kept: River refuses a
// statement that would insert one job twice.
func (r *Runtime) InsertManyTx(ctx context.Context, tx *sql.Tx, jobs []Queued) error {
	params := make([]river.InsertManyParams, 0, len(jobs))
	seen := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		args, err := json.Marshal(j.Args)
		if err != nil {
			return fmt.Errorf("insert %s job: %w", j.Args.Kind(), err)
		}
		if k := j.Args.Kind() + "\x00" + string(args); !seen[k] {
			seen[k] = true
			params = append(params, river.InsertManyParams{Args: j.Args, InsertOpts: r.insertOpts(j.Args, j.At)})
		}
	}
	if len(params) == 0 {
		return nil
	}
	if _, err := r.Client().InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("insert %d effect jobs: %w", len(params), err)
	}
	return nil
}

// insertOpts are an effect's job options: its own queue, unique by its arguments, tagged with its
// tenant, to run at at (zero: now).
func (r *Runtime) insertOpts(a Args, at time.Time) *river.InsertOpts {
	return &river.InsertOpts{Queue: a.Kind(), MaxAttempts: r.cfg.MaxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true},
		Tags: []string{tenantTag(a.EffectRef().Tenant)}, ScheduledAt: at}
}

// Insert queues an effect outside a projection batch (a refresh asked for by a callback), unique
// by its arguments exactly like InsertManyTx: the same effect queued by both is one job.
func (r *Runtime) Insert(ctx context.Context, a Args) error {
	if _, err := r.Client().Insert(ctx, a, r.insertOpts(a, time.Time{})); err != nil {
		return fmt.Errorf("insert %s job: %w", a.Kind(), err)
	}
	return nil
}

// WorkJob runs one job row as River would (tests work jobs one by one with it).
func (r *Runtime) WorkJob(ctx context.Context, j *rivertype.JobRow) error {
	r.mu.Lock()
	k, ok := r.kinds[j.Kind]
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("slackeffects: no kind %s", j.Kind)
	}
	return k.run(ctx, j.EncodedArgs)
}

func run[A Args](ctx context.Context, r *Runtime, a A, k Kind[A]) error {
	return r.execute(ctx, a.Kind(), func(ctx context.Context) (*Plan, error) { return k.Plan(ctx, a) })
}

// execute is every job's path: plan, debounce, guard, call, classify, record health. A panic in
// the kind's Plan fails the job like an error; one in its Do (render or call) is a failure of
// unknown outcome, recorded in the target's health; both are retried with backoff and end as dead
// letters. (River recovers a worker's panic too, but without the runtime's bookkeeping.)
func (r *Runtime) execute(ctx context.Context, kind string, plan func(context.Context) (*Plan, error)) error {
	p, err := r.contain(kind, func() (*Plan, error) { return plan(ctx) })
	if err != nil || p == nil {
		return err
	}
	p.Target.Kind = kind
	if wait := r.Timing.debounce(r.Now(), p.Changed, p.Pending); wait > 0 {
		return Snooze(wait)
	}
	wait, err := r.Guard.admit(ctx, p.Target, r.Timing.ProbeEvery, p.Frees)
	if err != nil {
		return err
	}
	if wait > 0 {
		return Snooze(wait)
	}
	if _, err := r.contain(kind, func() (*Plan, error) { return nil, p.Do(ctx, r.Install.Client(p.Installation)) }); err != nil {
		return r.fail(ctx, p, err)
	}
	ctx = context.WithoutCancel(ctx) // the outcome is recorded even when the caller gave up
	if err := r.Guard.succeeded(ctx, p.Target); err != nil {
		return err
	}
	return r.health.success(ctx, p.Target)
}

// contain runs fn, returning its panic as an error "panic: <value>" (the stack goes to the log).
func (r *Runtime) contain(kind string, fn func() (*Plan, error)) (p *Plan, err error) {
	defer func() {
		if v := recover(); v != nil {
			r.cfg.Logger.Error("slack effect panicked", "kind", kind, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			p, err = nil, fmt.Errorf("panic: %v", v)
		}
	}()
	return fn()
}

// quarantineMark starts the error River records for a job the runtime cancelled as quarantined,
// so the job itself says why it ended (its target's health may since record another outcome).
const quarantineMark = string(ClassQuarantined) + ": "

// fail turns a failed call into River's outcome (Classify's table) and records the target's health.
func (r *Runtime) fail(ctx context.Context, p *Plan, err error) error {
	ctx = context.WithoutCancel(ctx)
	var snooze *river.JobSnoozeError
	if errors.As(err, &snooze) {
		return err
	}
	var cancel *river.JobCancelError
	var f Failure
	if errors.As(err, &cancel) {
		f = Failure{Class: ClassQuarantined, Err: err}
	} else {
		f = Classify(err)
		if p.Refine != nil {
			f = p.Refine(ctx, f)
		}
	}
	out := err
	var gerr error
	switch f.Class {
	case ClassRateLimited:
		gerr = r.Guard.cooldown(ctx, p.Target, r.Now().Add(f.RetryAfter))
		out = Snooze(f.RetryAfter)
	case ClassCircuit, ClassCapacity:
		gerr = r.Guard.open(ctx, p.Target.Tenant, p.Target.scope(), f.Code, f.Class == ClassCapacity, r.Timing.ProbeEvery)
		out = Snooze(r.Timing.ProbeEvery)
	case ClassDrift:
		out = Snooze(r.Timing.ProbeEvery) // the destination fails closed until re-activated
	case ClassQuarantined:
		if cancel == nil {
			out = Cancel(fmt.Errorf("%sslack answered %s", quarantineMark, f.Code))
		} else if inner := errors.Unwrap(cancel); inner != nil {
			out = Cancel(fmt.Errorf("%s%w", quarantineMark, inner))
		}
	}
	if gerr != nil {
		return errors.Join(out, gerr)
	}
	if e := r.health.failure(ctx, p.Target, f.Class, err.Error()); e != nil {
		return errors.Join(out, e)
	}
	return out
}

// Health returns an inquiry's target health of the given kinds (every kind when none), newest
// first.
func (r *Runtime) Health(ctx context.Context, tenant domain.TenantID, inquiry domain.InquiryID, kinds ...string) ([]Health, error) {
	return r.health.of(ctx, tenant, inquiry, kinds)
}

// Record appends an effect event to stream after revision rev (-1: the stream must not exist
// yet), with an event id derived from commandID. A lost race means the decision may be stale: the
// job is snoozed to look again.
func (r *Runtime) Record(ctx context.Context, stream string, rev int64, tenant domain.TenantID, commandID, typ string, payload any) (eventstore.AppendResult, error) {
	exp := eventstore.NoStream()
	if rev >= 0 {
		exp = eventstore.Exact(uint64(rev))
	}
	res, err := slackinstall.AppendEvent(ctx, r.Events, stream, exp, tenant, slackinstall.Actor, commandID, r.Now(), typ, payload)
	if errors.Is(err, domain.ErrConcurrency) {
		return res, Snooze(0)
	}
	return res, err
}

// ReadStreams reads an effect family's events of one inquiry: those of the combined legacy stream
// (slackproj-{tenant}-{inquiry}, written before each family had its own) that keep accepts, then
// those of the family's own stream. rev is the own stream's last revision (-1: none), what Record
// expects.
func ReadStreams(ctx context.Context, store eventstore.Store, legacy, own string, keep func(typ string) bool) (evs []eventstore.RecordedEvent, rev int64, err error) {
	old, err := store.ReadStream(ctx, legacy, 0, 0)
	if err != nil {
		return nil, -1, err
	}
	for _, e := range old {
		if keep(e.Type) {
			evs = append(evs, e)
		}
	}
	cur, err := store.ReadStream(ctx, own, 0, 0)
	if err != nil {
		return nil, -1, err
	}
	rev = -1
	if n := len(cur); n > 0 {
		rev = int64(cur[n-1].Revision)
	}
	return append(evs, cur...), rev, nil
}

// FirstUnshown returns when the inquiry's first change after version shown was made (its
// occurred-at): the start of a debounce's maximum delay (Plan.Pending). Zero when there is none.
func (r *Runtime) FirstUnshown(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, shown uint64) (time.Time, error) {
	evs, err := r.Events.ReadStream(ctx, eventstore.InquiryStream(tenant, id), shown, 1)
	if err != nil || len(evs) == 0 {
		return time.Time{}, err
	}
	m, err := eventstore.DecodeMetadata(evs[0].Metadata)
	if err != nil {
		return time.Time{}, err
	}
	return m.OccurredAt, nil
}

// Exclusive runs an idempotent write claimed under key, so that jobs of one target due at the same
// moment (a debounced burst) write once: a job finding the key claimed by a write still in flight
// snoozes and then finds the result recorded. A failed write releases the claim.
func (r *Runtime) Exclusive(ctx context.Context, key string, write func() error) error {
	fresh, reconcile, err := r.Ledger.Claim(ctx, key, r.Timing.AttemptStale)
	if err != nil {
		return err
	}
	if !fresh && !reconcile {
		return Snooze(r.Timing.InFlightRecheck)
	}
	if err := write(); err != nil {
		return errors.Join(err, r.Ledger.Release(ctx, key))
	}
	return nil
}

// LegacyStream names an inquiry's combined thread and List stream of earlier versions.
func LegacyStream(tenant domain.TenantID, id domain.InquiryID) string {
	return eventstore.KindSlackProjection.Stream(tenant, string(id))
}
