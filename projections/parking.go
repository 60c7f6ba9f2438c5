package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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

func parkedSet(ctx context.Context, db *sqldb.DB, tx sqldb.Querier, name string) (map[string]bool, error) {
	rows, err := tx.QueryContext(ctx, db.Rebind(`SELECT stream FROM projection_parked WHERE checkpoint = ?`), name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out[s] = true
	}
	return out, rows.Err()
}

func savepoint(ctx context.Context, tx sqldb.Querier, verb, name string) error {
	_, err := tx.ExecContext(ctx, verb+" "+name)
	return err
}

// applyParking applies evs, skipping parked streams. If the batch fails, it applies the events one
// by one under savepoints and parks each stream whose event fails; later events of a parked stream
// wait behind it. If every event of a batch spanning several streams fails, the cause is taken to
// be the database, not the events, and the batch fails instead.
func applyParking(ctx context.Context, p Projection, b *Batch, name string, evs []eventstore.RecordedEvent, now time.Time) error {
	parked, err := parkedSet(ctx, b.DB, b.q(), name)
	if err != nil {
		return err
	}
	apply := evs
	if len(parked) > 0 {
		apply = make([]eventstore.RecordedEvent, 0, len(evs))
		for _, e := range evs {
			if !parked[e.StreamID] {
				apply = append(apply, e)
			}
		}
	}
	if len(apply) == 0 {
		return nil
	}
	if err := savepoint(ctx, b.q(), "SAVEPOINT", "batch"); err != nil {
		return err
	}
	batchErr := p.Apply(ctx, b.with(apply))
	if batchErr == nil {
		return savepoint(ctx, b.q(), "RELEASE SAVEPOINT", "batch")
	}
	if ctx.Err() != nil {
		return batchErr
	}
	if err := savepoint(ctx, b.q(), "ROLLBACK TO SAVEPOINT", "batch"); err != nil {
		return err
	}
	failed, streams := 0, map[string]bool{}
	for _, e := range apply {
		streams[e.StreamID] = true
		if parked[e.StreamID] {
			continue
		}
		if err := applyOne(ctx, p, b, e); err != nil {
			if ctx.Err() != nil {
				return err
			}
			failed++
			parked[e.StreamID] = true
			if err := park(ctx, b.DB, b.q(), name, e, err, now); err != nil {
				return err
			}
		}
	}
	if failed == len(apply) && len(streams) > 1 {
		return batchErr
	}
	return nil
}

// applyOne applies a single event under a savepoint, rolling it back on failure.
func applyOne(ctx context.Context, p Projection, b *Batch, e eventstore.RecordedEvent) error {
	if err := savepoint(ctx, b.q(), "SAVEPOINT", "one"); err != nil {
		return err
	}
	if err := p.Apply(ctx, b.with([]eventstore.RecordedEvent{e})); err != nil {
		if rerr := savepoint(ctx, b.q(), "ROLLBACK TO SAVEPOINT", "one"); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	return savepoint(ctx, b.q(), "RELEASE SAVEPOINT", "one")
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
		evs, err := store.ReadStream(ctx, stream, rev, 0)
		if err != nil {
			return err
		}
		if skip && len(evs) > 0 && evs[0].ID == eventID {
			evs = evs[1:]
		}
		b := &Batch{Tx: tx, DB: db, Gen: st.ActiveGen, Now: now, effects: &effectSink{}, conn: stx}
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
