package projections

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
)

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
