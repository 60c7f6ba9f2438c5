// Package projections runs subscribers: each reads the global log from its own checkpoint and
// writes its output and the checkpoint in one SQL transaction, so a crash replays at most the
// uncommitted batch. Handlers must be idempotent.
package projections

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
)

// Projection is a subscriber's handler. Apply must be idempotent: the runtime may deliver an event
// again after a crash between the output write and the commit.
type Projection interface {
	// Name identifies the projection and its checkpoint.
	Name() string
	// Setup creates the projection's tables.
	Setup(ctx context.Context, db *sqldb.DB) error
	// Apply writes the effect of events inside tx.
	Apply(ctx context.Context, tx *sql.Tx, events []eventstore.RecordedEvent) error
}

var migrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS projection_checkpoints (
	name        TEXT   PRIMARY KEY,
	commit_pos  BIGINT NOT NULL,
	prepare_pos BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL
)`}}

// Checkpoint reads a projection's committed position (Start when it has none).
func Checkpoint(ctx context.Context, db *sqldb.DB, name string) (eventstore.Position, error) {
	var p eventstore.Position
	err := db.QueryRowContext(ctx, db.Rebind(`SELECT commit_pos, prepare_pos FROM projection_checkpoints WHERE name = ?`), name).
		Scan(&p.Commit, &p.Prepare)
	if errors.Is(err, sql.ErrNoRows) {
		return eventstore.Start, nil
	}
	return p, err
}

func saveCheckpoint(ctx context.Context, db *sqldb.DB, tx *sql.Tx, name string, p eventstore.Position, now time.Time) error {
	_, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO projection_checkpoints (name, commit_pos, prepare_pos, updated_at)
		VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET commit_pos = excluded.commit_pos,
		prepare_pos = excluded.prepare_pos, updated_at = excluded.updated_at`), name, p.Commit, p.Prepare, now.UnixNano())
	return err
}

// Status is a subscriber's health.
type Status struct {
	Name      string              `json:"name"`
	Position  eventstore.Position `json:"position"`
	CaughtUp  bool                `json:"caught_up"`
	LastError string              `json:"last_error,omitempty"`
	LastErrAt time.Time           `json:"last_error_at,omitzero"`
	Heartbeat time.Time           `json:"heartbeat,omitzero"`
	Processed uint64              `json:"processed"`
	Head      eventstore.Position `json:"head"`
	// Owner reports whether this replica holds the projection's lease.
	Owner bool `json:"owner"`
}

// Runner drives one projection. Several replicas may run a Runner for the same projection on one
// database: a lease makes exactly one of them the owner at a time.
type Runner struct {
	Store      eventstore.Store
	DB         *sqldb.DB
	Projection Projection
	Logger     *slog.Logger
	Now        func() time.Time
	// RetryDelay is the pause before resubscribing after a failure.
	RetryDelay time.Duration
	// Owner identifies this replica in the lease (a random id when empty).
	Owner string
	// LeaseTTL is how long a dead owner keeps the lease (DefaultLeaseTTL when zero).
	LeaseTTL time.Duration

	mu       sync.Mutex
	status   Status
	lease    *lease
	progress chan struct{} // closed and replaced whenever the checkpoint advances
}

// DefaultLeaseTTL is the takeover delay after an owner dies.
const DefaultLeaseTTL = 15 * time.Second

// Setup migrates the checkpoint table and the projection's tables.
func (r *Runner) Setup(ctx context.Context) error {
	if err := sqldb.Migrate(ctx, r.DB, "projections", migrations); err != nil {
		return err
	}
	if err := sqldb.Migrate(ctx, r.DB, "projection_leases", leaseMigrations); err != nil {
		return err
	}
	return r.Projection.Setup(ctx, r.DB)
}

func (r *Runner) init() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.progress == nil {
		r.progress = make(chan struct{})
		r.status.Name = r.Projection.Name()
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	if r.RetryDelay == 0 {
		r.RetryDelay = time.Second
	}
	if r.lease == nil {
		if r.Owner == "" {
			r.Owner = newOwnerID()
		}
		if r.LeaseTTL == 0 {
			r.LeaseTTL = DefaultLeaseTTL
		}
		r.lease = &lease{db: r.DB, name: r.Projection.Name(), owner: r.Owner, ttl: r.LeaseTTL, now: r.Now}
	}
}

func newOwnerID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Run processes events until ctx ends: it waits for the lease, then subscribes from the checkpoint.
// Failures are recorded in Status and retried from the last checkpoint after RetryDelay; a lost lease
// sends the runner back to waiting. It returns ctx's error.
func (r *Runner) Run(ctx context.Context) error {
	r.init()
	defer r.lease.release(context.WithoutCancel(ctx))
	for {
		if err := r.awaitLease(ctx); err != nil {
			return err
		}
		err := r.runOwned(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.setOwner(false)
		if errors.Is(err, ErrLeaseLost) {
			r.Logger.Warn("projection lease lost to another replica", "projection", r.Projection.Name())
			continue
		}
		r.mu.Lock()
		r.status.LastError, r.status.LastErrAt = err.Error(), r.Now()
		r.mu.Unlock()
		r.Logger.Error("projection failed; resubscribing from checkpoint", "projection", r.Projection.Name(), "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.RetryDelay):
		}
	}
}

// awaitLease returns once this replica owns the lease. While another replica owns it, the status
// follows the owner's checkpoint.
func (r *Runner) awaitLease(ctx context.Context) error {
	tick := time.NewTicker(r.LeaseTTL / 3)
	defer tick.Stop()
	for {
		ok, err := r.lease.acquire(ctx)
		if err == nil && ok {
			r.setOwner(true)
			return nil
		}
		if err == nil {
			err = r.follow(ctx)
		}
		if err != nil && ctx.Err() == nil {
			r.Logger.Warn("projection lease check failed", "projection", r.Projection.Name(), "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// follow refreshes the status of a non-owner from the shared checkpoint.
func (r *Runner) follow(ctx context.Context) error {
	p, err := Checkpoint(ctx, r.DB, r.Projection.Name())
	if err != nil {
		return err
	}
	r.advance(p, 0)
	return r.markCaughtUp(ctx, p)
}

func (r *Runner) setOwner(v bool) {
	r.mu.Lock()
	r.status.Owner = v
	r.mu.Unlock()
}

// runOwned runs the subscription while renewing the lease; it ends when either fails.
func (r *Runner) runOwned(ctx context.Context) error {
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
				if ok, err := r.lease.acquire(ctx); err == nil && !ok {
					cancel(ErrLeaseLost)
					return
				}
			}
		}
	}()
	err := r.runOnce(ctx)
	cancel(nil)
	<-done
	if cause := context.Cause(ctx); errors.Is(cause, ErrLeaseLost) {
		return ErrLeaseLost
	}
	return err
}

func (r *Runner) runOnce(ctx context.Context) error {
	name := r.Projection.Name()
	from, err := Checkpoint(ctx, r.DB, name)
	if err != nil {
		return fmt.Errorf("read checkpoint: %w", err)
	}
	r.advance(from, 0)
	if err := r.markCaughtUp(ctx, from); err != nil {
		return err
	}
	return r.Store.Subscribe(ctx, from, func(ctx context.Context, evs []eventstore.RecordedEvent) error {
		last := evs[len(evs)-1].Position
		err := sqldb.InTx(ctx, r.DB, func(tx *sql.Tx) error {
			if err := r.lease.fence(ctx, tx); err != nil {
				return err
			}
			if err := r.Projection.Apply(ctx, tx, evs); err != nil {
				return err
			}
			return saveCheckpoint(ctx, r.DB, tx, name, last, r.Now())
		})
		if errors.Is(err, ErrLeaseLost) {
			return err
		}
		if err != nil {
			return fmt.Errorf("apply batch ending at %v: %w", last, err)
		}
		r.advance(last, uint64(len(evs)))
		return r.markCaughtUp(ctx, last)
	})
}

// markCaughtUp refreshes lag against the log's head.
func (r *Runner) markCaughtUp(ctx context.Context, at eventstore.Position) error {
	head, err := r.Store.Head(ctx)
	if err != nil {
		return fmt.Errorf("read head: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.CaughtUp = !at.Less(head)
	r.status.Head = head
	if r.status.CaughtUp {
		r.status.LastError = ""
	}
	return nil
}

func (r *Runner) advance(p eventstore.Position, n uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.Position = p
	r.status.Processed += n
	r.status.Heartbeat = r.Now()
	close(r.progress)
	r.progress = make(chan struct{})
}

// Status reports the runner's health.
func (r *Runner) Status() Status {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// FollowInterval is how often a replica that does not own a projection reads the owner's
// checkpoint while a request waits for it.
const FollowInterval = 50 * time.Millisecond

// WaitFor blocks until the projection's checkpoint is at or after p, or ctx ends. On a replica that
// does not own the projection it follows the shared checkpoint.
func (r *Runner) WaitFor(ctx context.Context, p eventstore.Position) error {
	r.init()
	tick := time.NewTicker(FollowInterval)
	defer tick.Stop()
	for {
		r.mu.Lock()
		reached := !r.status.Position.Less(p)
		ch, owner := r.progress, r.status.Owner
		r.mu.Unlock()
		if reached {
			return nil
		}
		if !owner {
			cp, err := Checkpoint(ctx, r.DB, r.Projection.Name())
			if err == nil && !cp.Less(p) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-tick.C:
		}
	}
}
