package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/casebook/casebook/eventstore"
)

// SubscribeBatch is how many events one Subscribe delivery carries at most. Catching up, a
// subscriber commits once per delivery: 10,000 made a rebuild about a tenth faster than 5,000.
const SubscribeBatch = 10000

// heldPollMax caps the backoff of a subscription polling for held events.
const heldPollMax = 100 * time.Millisecond

const eventColumns = `xid, seq, id, stream, revision, type, data, metadata, recorded_at`

func scanEvent(row pgx.Row, held *bool) (eventstore.RecordedEvent, error) {
	var e eventstore.RecordedEvent
	var seq, rev int64
	dst := []any{&e.Position.Commit, &seq, &e.ID, &e.StreamID, &rev, &e.Type, &e.Data, &e.Metadata, &e.RecordedAt}
	if held != nil {
		dst = append([]any{held}, dst...)
	}
	if err := row.Scan(dst...); err != nil {
		return e, err
	}
	e.Position.Prepare, e.Revision, e.RecordedAt = uint64(seq), uint64(rev), e.RecordedAt.UTC()
	return e, nil
}

func limitOf(limit int) *int64 {
	if limit <= 0 {
		return nil // LIMIT NULL is no limit
	}
	l := int64(limit)
	return &l
}

// ReadStream implements eventstore.Store. Events within a stream cannot be skipped (revisions are
// dense), so it returns every committed event without waiting for the horizon.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, limit int) ([]eventstore.RecordedEvent, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM events
		WHERE stream = $1 AND revision >= $2 ORDER BY revision LIMIT $3`, stream, int64(from), limitOf(limit))
	if err != nil {
		return nil, fmt.Errorf("eventstore/postgres: read %s: %w", stream, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (eventstore.RecordedEvent, error) { return scanEvent(r, nil) })
	if err != nil {
		return nil, fmt.Errorf("eventstore/postgres: read %s: %w", stream, err)
	}
	return out, nil
}

// readAllSQL returns the events after a position in log order, each flagged held when its xid is not
// below the snapshot's xmin. Held rows sort after every safe row; their payload is not fetched.
const readAllSQL = `
WITH h AS MATERIALIZED (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS horizon)
SELECT e.xid >= h.horizon, e.xid, e.seq, e.id, e.stream, e.revision, e.type,
	CASE WHEN e.xid < h.horizon THEN e.data END,
	CASE WHEN e.xid < h.horizon THEN e.metadata END,
	e.recorded_at
FROM h, events e
WHERE (e.xid, e.seq) > ($1::xid8, $2::bigint)
ORDER BY e.xid, e.seq
LIMIT $3`

// read is one snapshot read: the safe events after from, and the largest xid of the held events in
// the window (0 when none). expect sizes the result up front.
func (s *Store) read(ctx context.Context, from eventstore.Position, limit, expect int) ([]eventstore.RecordedEvent, uint64, error) {
	rows, err := s.pool.Query(ctx, readAllSQL, from.Commit, int64(from.Prepare), limitOf(limit))
	if err != nil {
		return nil, 0, fmt.Errorf("eventstore/postgres: read all: %w", err)
	}
	defer rows.Close()
	out := make([]eventstore.RecordedEvent, 0, expect)
	var heldXid uint64
	var raw *rawReader
	if binaryRows(rows.FieldDescriptions()) {
		raw = &rawReader{}
	}
	for rows.Next() {
		var held bool
		var e eventstore.RecordedEvent
		if raw != nil {
			e, held, err = raw.decode(rows.RawValues())
		} else {
			e, err = scanEvent(rows, &held)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("eventstore/postgres: read all: %w", err)
		}
		if held {
			heldXid = e.Position.Commit
			continue
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("eventstore/postgres: read all: %w", err)
	}
	return out, heldXid, nil
}

// CountAfter implements eventstore.Store with an estimate that costs one index probe: the
// sequence distance from the position to the head. It is exact unless appends were rolled back
// (their sequence numbers are skipped), and then an overestimate.
func (s *Store) CountAfter(ctx context.Context, from eventstore.Position) (uint64, error) {
	h, _, err := s.head(ctx)
	if err != nil {
		return 0, err
	}
	if h.Prepare <= from.Prepare {
		return 0, nil
	}
	return h.Prepare - from.Prepare, nil
}

// ReadAll implements eventstore.Store. It returns only events below the snapshot horizon; when held
// events were committed before the call and the page is not full, it first waits for the horizon to
// pass them (see SettleTimeout).
func (s *Store) ReadAll(ctx context.Context, from eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	evs, held, err := s.read(ctx, from, limit, min(max(limit, 0), 256))
	if err != nil || held == 0 || (limit > 0 && len(evs) >= limit) {
		return evs, err
	}
	if ok, err := s.awaitHorizon(ctx, held); err != nil || !ok {
		return evs, err
	}
	evs, _, err = s.read(ctx, from, limit, min(max(limit, 0), 256))
	return evs, err
}

const headSQL = `
WITH h AS MATERIALIZED (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS horizon)
SELECT (SELECT max(xid) FROM events), h.horizon, s.xid, s.seq
FROM h LEFT JOIN LATERAL (
	SELECT xid, seq FROM events WHERE xid < h.horizon ORDER BY xid DESC, seq DESC LIMIT 1
) s ON true`

// VisibleHead implements eventstore.Store: the last event below the horizon now.
func (s *Store) VisibleHead(ctx context.Context) (eventstore.Position, error) {
	if err := s.checkOpen(); err != nil {
		return eventstore.Position{}, err
	}
	pos, _, err := s.head(ctx)
	return pos, err
}

// CommittedHead implements eventstore.Store: the last event in (xid, seq) order among
// those committed now, held or not, without waiting for the horizon. One probe of the primary key.
func (s *Store) CommittedHead(ctx context.Context) (eventstore.Position, error) {
	if err := s.checkOpen(); err != nil {
		return eventstore.Position{}, err
	}
	var xid uint64
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT xid, seq FROM events ORDER BY xid DESC, seq DESC LIMIT 1`).Scan(&xid, &seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return eventstore.Start, nil
	}
	if err != nil {
		return eventstore.Position{}, fmt.Errorf("eventstore/postgres: committed head: %w", err)
	}
	return eventstore.Position{Commit: xid, Prepare: uint64(seq)}, nil
}

// Head implements eventstore.Store: the last event below the horizon, after waiting (see
// SettleTimeout) for the horizon to pass events committed before the call.
func (s *Store) Head(ctx context.Context) (eventstore.Position, error) {
	if err := s.checkOpen(); err != nil {
		return eventstore.Position{}, err
	}
	pos, held, err := s.head(ctx)
	if err != nil || held == 0 {
		return pos, err
	}
	if ok, err := s.awaitHorizon(ctx, held); err != nil || !ok {
		return pos, err
	}
	pos, _, err = s.head(ctx)
	return pos, err
}

// head is one snapshot read: the last safe position, and the largest held xid (0 when none).
func (s *Store) head(ctx context.Context) (eventstore.Position, uint64, error) {
	var maxXid, xid *uint64
	var horizon uint64
	var seq *int64
	if err := s.pool.QueryRow(ctx, headSQL).Scan(&maxXid, &horizon, &xid, &seq); err != nil {
		return eventstore.Position{}, 0, fmt.Errorf("eventstore/postgres: head: %w", err)
	}
	var pos eventstore.Position
	if xid != nil {
		pos = eventstore.Position{Commit: *xid, Prepare: uint64(*seq)}
	}
	if maxXid != nil && *maxXid >= horizon {
		return pos, *maxXid, nil
	}
	return pos, 0, nil
}

// awaitHorizon polls until every transaction with an id up to xid has ended. It reports false when
// SettleTimeout runs out first.
func (s *Store) awaitHorizon(ctx context.Context, xid uint64) (bool, error) {
	if s.settle < 0 {
		return false, nil
	}
	deadline := time.Now().Add(s.settle)
	delay := time.Millisecond
	for {
		var horizon uint64
		if err := s.pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())`).Scan(&horizon); err != nil {
			return false, fmt.Errorf("eventstore/postgres: horizon: %w", err)
		}
		if horizon > xid {
			return true, nil
		}
		if !time.Now().Before(deadline) {
			return false, nil
		}
		if err := pause(ctx, delay); err != nil {
			return false, err
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Subscribe implements eventstore.Store. It returns ctx.Err() when ctx ends, the handler's error when
// it fails, and ErrClosed when the store is closed.
func (s *Store) Subscribe(ctx context.Context, from eventstore.Position, fn func(context.Context, []eventstore.RecordedEvent) error) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.closing, cancel)()
	stopped := func() error {
		if parent.Err() != nil {
			return parent.Err()
		}
		return eventstore.ErrClosed
	}
	// Wait for the listener so that no notification sent after the first read is missed; if it cannot
	// connect within a poll interval (a saturated pool), start anyway and rely on polling.
	poll := time.NewTimer(s.poll)
	defer poll.Stop()
	select {
	case <-s.startListener():
	case <-poll.C:
	case <-ctx.Done():
		return stopped()
	}
	heldDelay := time.Duration(0)
	expect := 256 // catching up, reads fill their batches; following, they return few events
	for {
		wake, err := s.waitCh()
		if err != nil {
			return err
		}
		evs, held, err := s.tail.Fetch(from, SubscribeBatch, wake, func() ([]eventstore.RecordedEvent, uint64, error) {
			return s.read(ctx, from, SubscribeBatch, expect)
		})
		if err != nil {
			if ctx.Err() != nil {
				return stopped()
			}
			return err
		}
		expect = 256
		if len(evs) == SubscribeBatch {
			expect = SubscribeBatch
		}
		if len(evs) > 0 {
			if err := fn(ctx, evs); err != nil {
				return err
			}
			from = evs[len(evs)-1].Position
			heldDelay = 0
			continue
		}
		// Held events wait for transactions that may send no notification (the horizon is
		// cluster-wide), so poll quickly, backing off up to heldPollMax.
		wait := s.poll
		if held != 0 {
			heldDelay = min(max(2*heldDelay, time.Millisecond), heldPollMax, s.poll)
			wait = heldDelay
		} else {
			heldDelay = 0
		}
		poll.Reset(wait)
		select {
		case <-ctx.Done():
			return stopped()
		case <-wake:
		case <-poll.C:
		}
	}
}

// SubscribeStats implements eventstore.Store.
func (s *Store) SubscribeStats() eventstore.TailStats { return s.tail.Stats() }
