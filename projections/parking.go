package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
)

// ErrNotParked is returned by Retry and Skip for a stream that is not parked.
var ErrNotParked = errors.New("stream is not parked")

// Parked is a stream held back after a handler error.
type Parked struct {
	Projection string    `json:"projection"`
	Stream     string    `json:"stream"`
	Revision   uint64    `json:"revision"`
	EventID    string    `json:"event_id"`
	Error      string    `json:"error"`
	Attempts   int       `json:"attempts"`
	ParkedAt   time.Time `json:"parked_at"`
}

// maxParkedError bounds the stored error text.
const maxParkedError = 1000

// unparked returns evs without the events of parked streams.
func unparked(evs []eventstore.RecordedEvent, parked map[string]bool) []eventstore.RecordedEvent {
	if len(parked) == 0 {
		return evs
	}
	out := make([]eventstore.RecordedEvent, 0, len(evs))
	for _, e := range evs {
		if !parked[e.StreamID] {
			out = append(out, e)
		}
	}
	return out
}

// batchFailure is a batch whose Apply failed: its transaction is rolled back and the batch runs
// again event by event (applyEach) to find the failing streams.
type batchFailure struct{ err error }

func (f *batchFailure) Error() string { return f.err.Error() }
func (f *batchFailure) Unwrap() error { return f.err }

// applyAll applies evs in one call, without a savepoint: a failure (other than ctx's end) is a
// *batchFailure and must roll the transaction back.
func applyAll(ctx context.Context, p Projection, b *Batch, evs []eventstore.RecordedEvent) error {
	if len(evs) == 0 {
		return nil
	}
	err := applySafely(ctx, p, b.with(evs))
	if err != nil && ctx.Err() == nil {
		return &batchFailure{err: err}
	}
	return err
}

// applyEach applies evs one by one under savepoints after the batch failed with batchErr, and parks
// each stream whose event fails; later events of a parked stream wait behind it. If every event of
// a batch spanning several streams fails, the cause is taken to be the database, not the events,
// and the batch fails instead, unless every one of them panicked: a panic is the handler's. It returns how many streams it parked.
func applyEach(ctx context.Context, p Projection, b *Batch, name string, evs []eventstore.RecordedEvent, batchErr error, now time.Time) (int, error) {
	eager := *b
	eager.eager = true // each event's statements run under its savepoint
	b = &eager
	failed, panicked, streams, parked := 0, 0, map[string]bool{}, map[string]bool{}
	for _, e := range evs {
		streams[e.StreamID] = true
		if parked[e.StreamID] {
			continue
		}
		if err := applyOne(ctx, p, b, e); err != nil {
			if ctx.Err() != nil || sqldb.IsStorageFull(err) {
				return 0, err // the database's fault, not the event's: the batch is retried
			}
			failed++
			if hp := (*handlerPanic)(nil); errors.As(err, &hp) {
				panicked++
			}
			parked[e.StreamID] = true
			if err := park(ctx, b.DB, b.q(), name, e, err, now); err != nil {
				return 0, err
			}
		}
	}
	if failed == len(evs) && len(streams) > 1 && panicked < failed {
		return 0, batchErr
	}
	return len(parked), nil
}

// applyOne applies a single event under a savepoint, rolling it back on failure.
func applyOne(ctx context.Context, p Projection, b *Batch, e eventstore.RecordedEvent) error {
	if err := b.Savepoint(ctx, "one"); err != nil {
		return err
	}
	if err := applySafely(ctx, p, b.with([]eventstore.RecordedEvent{e})); err != nil {
		if rerr := b.RollbackTo(ctx, "one"); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	return b.Exec(ctx, "RELEASE SAVEPOINT one")
}

// handlerPanic is a panic in a projection's Prepare or Apply, caught so that it fails the batch
// like an error: the batch rolls back and its events are applied one by one, parking the stream
// whose event panics, and the subscriber goes on. Its message is short and has no stack (it is
// stored with the parked stream); the stack is logged.
type handlerPanic struct {
	value any
	stack []byte
}

func (p *handlerPanic) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// applySafely is p.Apply with its panic returned as a *handlerPanic.
func applySafely(ctx context.Context, p Projection, b *Batch) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &handlerPanic{value: v, stack: debug.Stack()}
		}
	}()
	return p.Apply(ctx, b)
}

// prepareSafely is p.Prepare with its panic returned as a *handlerPanic.
func prepareSafely(p Preparer, evs []eventstore.RecordedEvent) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, &handlerPanic{value: r, stack: debug.Stack()}
		}
	}()
	return p.Prepare(evs)
}

func park(ctx context.Context, db *sqldb.DB, tx sqldb.Querier, name string, e eventstore.RecordedEvent, cause error, now time.Time) error {
	msg := cause.Error()
	if len(msg) > maxParkedError {
		msg = msg[:maxParkedError]
	}
	_, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO projection_parked (checkpoint, stream, revision, event_id, error, attempts, parked_at)
		VALUES (?, ?, ?, ?, ?, 1, ?) ON CONFLICT (checkpoint, stream) DO UPDATE SET revision = excluded.revision,
		event_id = excluded.event_id, error = excluded.error, attempts = projection_parked.attempts + 1`),
		name, e.StreamID, e.Revision, e.ID, msg, now.UnixNano())
	return err
}

func countParked(ctx context.Context, db *sqldb.DB, name string) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, db.Rebind(`SELECT count(*) FROM projection_parked WHERE checkpoint = ?`), name).Scan(&n)
	return n, err
}

// ListParked lists the parked streams of a projection's active generation whose names start with
// streamPrefix ("" for all).
func ListParked(ctx context.Context, db *sqldb.DB, p Projection, streamPrefix string) ([]Parked, error) {
	st, err := ReadState(ctx, db, p.Name())
	if errors.Is(err, sql.ErrNoRows) {
		return []Parked{}, nil
	}
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, db.Rebind(`SELECT stream, revision, event_id, error, attempts, parked_at
		FROM projection_parked WHERE checkpoint = ? ORDER BY parked_at, stream`), checkpointName(p, st.ActiveGen))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Parked{}
	for rows.Next() {
		pk := Parked{Projection: p.Name()}
		var at int64
		if err := rows.Scan(&pk.Stream, &pk.Revision, &pk.EventID, &pk.Error, &pk.Attempts, &at); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(pk.Stream, streamPrefix) {
			continue
		}
		pk.ParkedAt = time.Unix(0, at).UTC()
		out = append(out, pk)
	}
	return out, rows.Err()
}

// Retry applies a parked stream's held events again, in order, up to the checkpoint; events after
// it arrive through the subscription as usual. With skip, the event that parked the stream is
// passed over first. If an event fails again the stream stays parked at that event and the error is
// returned in the result. It is safe while a runner is live: both serialize on the checkpoint.
func Retry(ctx context.Context, db *sqldb.DB, store eventstore.Store, p Projection, stream string, skip bool, now time.Time) (*Parked, error) {
	st, err := ReadState(ctx, db, p.Name())
	if err != nil {
		return nil, fmt.Errorf("projection %s: %w", p.Name(), err)
	}
	name := checkpointName(p, st.ActiveGen)
	var still *Parked
	err = sqldb.InConnTx(ctx, db, func(stx *sqldb.Tx) error {
		tx := stx.Tx
		if err := lockCheckpoint(ctx, db, tx, name); err != nil {
			return err
		}
		var rev uint64
		var eventID string
		err := tx.QueryRowContext(ctx, db.Rebind(`SELECT revision, event_id FROM projection_parked WHERE checkpoint = ? AND stream = ?`),
			name, stream).Scan(&rev, &eventID)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotParked
		}
		if err != nil {
			return err
		}
		var cp eventstore.Position
		if err := tx.QueryRowContext(ctx, db.Rebind(`SELECT commit_pos, prepare_pos FROM projection_checkpoints WHERE name = ?`), name).
			Scan(&cp.Commit, &cp.Prepare); err != nil {
			return err
		}
		evs, err := source(store, p).ReadStream(ctx, stream, rev, 0)
		if err != nil {
			return err
		}
		if skip && len(evs) > 0 && evs[0].ID == eventID {
			evs = evs[1:]
		}
		b := &Batch{Tx: tx, DB: db, Gen: st.ActiveGen, Now: now, effects: &effectSink{}, conn: stx, eager: true}
		for _, e := range evs {
			if cp.Less(e.Position) {
				break
			}
			if err := applyOne(ctx, p, b, e); err != nil {
				if err := park(ctx, db, tx, name, e, err, now); err != nil {
					return err
				}
				still = &Parked{Projection: p.Name(), Stream: stream, Revision: e.Revision, EventID: e.ID, Error: err.Error()}
				return nil
			}
		}
		_, err = tx.ExecContext(ctx, db.Rebind(`DELETE FROM projection_parked WHERE checkpoint = ? AND stream = ?`), name, stream)
		return err
	})
	return still, err
}
