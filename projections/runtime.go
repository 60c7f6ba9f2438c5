// Package projections runs subscribers: each reads the global log from its own checkpoint and
// writes its output and the checkpoint in one SQL transaction, so a crash replays at most the
// uncommitted batch. Handlers must be idempotent.
package projections

import (
	"context"
	"database/sql"
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
}

// Runner drives one projection.
type Runner struct {
	Store      eventstore.Store
	DB         *sqldb.DB
	Projection Projection
	Logger     *slog.Logger
	Now        func() time.Time
	// RetryDelay is the pause before resubscribing after a failure.
	RetryDelay time.Duration

	mu       sync.Mutex
	status   Status
	progress chan struct{} // closed and replaced whenever the checkpoint advances
}

// Setup migrates the checkpoint table and the projection's tables.
func (r *Runner) Setup(ctx context.Context) error {
	if err := sqldb.Migrate(ctx, r.DB, "projections", migrations); err != nil {
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
}

// Run processes events until ctx ends. Failures are recorded in Status and retried from the last
// checkpoint after RetryDelay. It returns ctx's error.
func (r *Runner) Run(ctx context.Context) error {
	r.init()
	for {
		err := r.runOnce(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
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
			if err := r.Projection.Apply(ctx, tx, evs); err != nil {
				return err
			}
			return saveCheckpoint(ctx, r.DB, tx, name, last, r.Now())
		})
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

// WaitFor blocks until the projection's checkpoint is at or after p, or ctx ends.
func (r *Runner) WaitFor(ctx context.Context, p eventstore.Position) error {
	r.init()
	for {
		r.mu.Lock()
		reached := !r.status.Position.Less(p)
		ch := r.progress
		r.mu.Unlock()
		if reached {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}
