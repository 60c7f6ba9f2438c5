// Package sqlite is the embedded event store: the log lives in the same SQLite file as the query
// model, checkpoints and keys. SQLite serializes writers, so the sequence order is the commit order
// and a reader can never skip a late-committing event. Appends made at the same time share one
// transaction and one fsync (group commit); each is answered only after that commit.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
)

var _ eventstore.Store = (*Store)(nil)

// PollInterval bounds how long a subscriber sleeps before noticing an append made by another process
// on the same file; appends in this process wake subscribers at once.
const PollInterval = 250 * time.Millisecond

var migrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS events (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	id          TEXT    NOT NULL UNIQUE,
	stream      TEXT    NOT NULL,
	revision    INTEGER NOT NULL,
	type        TEXT    NOT NULL,
	data        BLOB    NOT NULL,
	metadata    BLOB    NOT NULL,
	recorded_at INTEGER NOT NULL,
	UNIQUE (stream, revision)
)`}, {Version: 2, SQL: claimsMigration}}

// claimsMigration creates eventstore.ClaimsTable and claims the earlier inquiry streams (see there).
const claimsMigration = `
CREATE TABLE IF NOT EXISTS stream_claims (
	name   TEXT NOT NULL PRIMARY KEY,
	stream TEXT NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO stream_claims (name, stream)
	SELECT stream, stream FROM events WHERE revision = 0 AND substr(stream, 1, 8) = 'inquiry-'`

// Store is the SQLite event store.
type Store struct {
	db  *sqldb.DB
	now func() time.Time

	mu     sync.Mutex
	wake   chan struct{} // closed and replaced on every append
	closed bool
	tail   *eventstore.Tail
}

// Options configure a Store.
type Options struct {
	// Now stamps recorded_at; time.Now when nil.
	Now func() time.Time
}

// New migrates the events table in db and returns a store on it. The caller owns db.
func New(ctx context.Context, db *sqldb.DB, opts Options) (*Store, error) {
	if db.Dialect != sqldb.SQLite {
		return nil, errors.New("eventstore/sqlite: need a SQLite handle")
	}
	if err := sqldb.Migrate(ctx, db, "eventstore", migrations); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{db: db, now: opts.Now, wake: make(chan struct{}), tail: eventstore.NewTail(eventstore.TailEvents)}, nil
}

// Append implements eventstore.Store. Concurrent appends are group-committed (sqldb.Group): each
// checks its expected revision inside the shared transaction, after the appends queued before it,
// and a failed condition fails only its own append. Append returns only after the transaction
// holding its events has committed. The companions its options carry on s's handle are inserted
// in the same transaction, after the events (the command's audit entry, a new inquiry's data key).
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventstore.EventData,
	opts ...eventstore.AppendOption) (eventstore.AppendResult, error) {
	if stream == "" {
		return eventstore.AppendResult{}, errors.New("eventstore/sqlite: empty stream name")
	}
	if len(events) == 0 {
		return eventstore.AppendResult{}, errors.New("eventstore/sqlite: nothing to append")
	}
	var cs []*eventstore.Companion
	for _, c := range eventstore.NewAppendOptions(opts).Companions {
		if s.Capabilities().WritesCompanionsOn(c.Handle) {
			cs = append(cs, c)
		}
	}
	var res eventstore.AppendResult
	err := sqldb.Group(ctx, s.db, func(ctx context.Context, tx *sqldb.Tx) error {
		last := func() (int64, error) {
			var last sql.NullInt64
			if err := tx.QueryRowContext(ctx, `SELECT max(revision) FROM events WHERE stream = ?`, stream).Scan(&last); err != nil {
				return 0, err
			}
			if !last.Valid {
				return -1, nil
			}
			return last.Int64, nil
		}
		// A new stream's append reads nothing first: the (stream, revision) key refuses its
		// revision 0 when the stream exists. (Streams are never shortened.)
		next := uint64(0)
		if !expected.IsNoStream() {
			actual, err := last()
			if err != nil {
				return err
			}
			next = uint64(actual + 1)
			if !expected.Check(next) {
				return &eventstore.AppendError{Stream: stream, Expected: expected, Actual: actual, Err: eventstore.ErrConcurrency}
			}
		}
		at := s.now().UnixNano()
		for i, e := range events {
			r, err := tx.ExecContext(ctx, `INSERT INTO events (id, stream, revision, type, data, metadata, recorded_at)
				VALUES (?, ?, ?, ?, ?, ?, ?)`, e.ID, stream, next+uint64(i), e.Type, e.Data, nonNil(e.Metadata), at)
			if err != nil {
				// A taken (stream, revision) is a failed condition. The id is derived from the
				// command and its position: a duplicate is this very write racing itself, a
				// conflict like (stream, revision).
				if sqldb.IsUniqueViolation(err) {
					actual := int64(-2)
					if n, lerr := last(); lerr == nil && n >= 0 && expected.IsNoStream() {
						actual = n
					}
					return &eventstore.AppendError{Stream: stream, Expected: expected, Actual: actual, Err: eventstore.ErrConcurrency}
				}
				return fmt.Errorf("eventstore/sqlite: insert event %s: %w", e.ID, err)
			}
			seq, err := r.LastInsertId()
			if err != nil {
				return err
			}
			res = eventstore.AppendResult{NextRevision: next + uint64(i), Position: pos(seq)}
		}
		for _, c := range cs {
			if err := insertCompanion(ctx, tx, c, stream); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	s.notify()
	for _, c := range cs {
		if c.Written != nil {
			c.Written()
		}
	}
	return res, nil
}

// insertCompanion writes c's row for an append to stream; a unique violation is c.Taken when set.
func insertCompanion(ctx context.Context, tx *sqldb.Tx, c *eventstore.Companion, stream string) error {
	vals := c.Values(stream)
	_, err := tx.ExecContext(ctx, `INSERT INTO `+c.Table+` (`+strings.Join(c.Columns, ", ")+`) VALUES (`+
		strings.TrimSuffix(strings.Repeat("?, ", len(vals)), ", ")+`)`, vals...)
	if c.Taken != nil && sqldb.IsUniqueViolation(err) {
		return c.Taken
	}
	if err != nil {
		return fmt.Errorf("eventstore/sqlite: insert into %s: %w", c.Table, err)
	}
	return nil
}

// Capabilities implements eventstore.Store: the store counts, rewrites, keeps claims, shares its
// subscriptions' reads, and writes companions on its handle.
func (s *Store) Capabilities() eventstore.Capabilities {
	return eventstore.Capabilities{Count: true, Rewrite: true, Claims: true, SharedReads: true, CompanionHandle: s.db.CompanionHandle()}
}

// Claim implements eventstore.Store: the claim is a companion row of the append.
func (s *Store) Claim(name string) (eventstore.AppendOption, bool) {
	return eventstore.WithCompanions(eventstore.ClaimCompanion(s.db.CompanionHandle(), name)), true
}

// Claimed implements eventstore.Store.
func (s *Store) Claimed(ctx context.Context, name string) (string, error) {
	var stream string
	err := s.db.QueryRowContext(ctx, `SELECT stream FROM stream_claims WHERE name = ?`, name).Scan(&stream)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("eventstore/sqlite: claim %s: %w", name, err)
	}
	return stream, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func pos(seq int64) eventstore.Position {
	return eventstore.Position{Commit: uint64(seq), Prepare: uint64(seq)}
}

func (s *Store) notify() {
	s.mu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

func (s *Store) waitCh() (<-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, eventstore.ErrClosed
	}
	return s.wake, nil
}

const selectEvents = `SELECT seq, id, stream, revision, type, data, metadata, recorded_at FROM events `

// scan reads rows' events; expect sizes the result up front.
func scan(rows *sql.Rows, expect int) ([]eventstore.RecordedEvent, error) {
	defer rows.Close()
	out := make([]eventstore.RecordedEvent, 0, expect)
	for rows.Next() {
		var e eventstore.RecordedEvent
		var seq, at int64
		// The driver hands each row's blobs over in slices of their own (modernc.org/sqlite copies
		// every value out of SQLite), so they are kept as read instead of copied again by Scan.
		// TestConformance/ReadStream compares every event of a read of several.
		var data, meta sql.RawBytes
		if err := rows.Scan(&seq, &e.ID, &e.StreamID, &e.Revision, &e.Type, &data, &meta, &at); err != nil {
			return nil, err
		}
		e.Data, e.Metadata = data, meta
		e.Position, e.RecordedAt = pos(seq), time.Unix(0, at).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}

func limitOf(limit int) int64 {
	if limit <= 0 {
		return -1
	}
	return int64(limit)
}

// ReadStream implements eventstore.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, limit int) ([]eventstore.RecordedEvent, error) {
	rows, err := s.db.QueryContext(ctx, selectEvents+`WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?`,
		stream, from, limitOf(limit))
	if err != nil {
		return nil, fmt.Errorf("eventstore/sqlite: read %s: %w", stream, err)
	}
	return scan(rows, 0)
}

// ReadAll implements eventstore.Store.
func (s *Store) ReadAll(ctx context.Context, from eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	return s.readAll(ctx, from, limit, 0)
}

// readAll is ReadAll with its result sized for expect events.
func (s *Store) readAll(ctx context.Context, from eventstore.Position, limit, expect int) ([]eventstore.RecordedEvent, error) {
	rows, err := s.db.QueryContext(ctx, selectEvents+`WHERE seq > ? ORDER BY seq LIMIT ?`, from.Commit, limitOf(limit))
	if err != nil {
		return nil, fmt.Errorf("eventstore/sqlite: read all: %w", err)
	}
	return scan(rows, expect)
}

// Head implements eventstore.Store.
func (s *Store) Head(ctx context.Context) (eventstore.Position, error) {
	var seq sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT max(seq) FROM events`).Scan(&seq); err != nil {
		return eventstore.Position{}, fmt.Errorf("eventstore/sqlite: head: %w", err)
	}
	if !seq.Valid {
		return eventstore.Start, nil
	}
	return pos(seq.Int64), nil
}

// VisibleHead implements eventstore.Store: Head, which waits for nothing (SQLite serializes
// writers).
func (s *Store) VisibleHead(ctx context.Context) (eventstore.Position, error) { return s.Head(ctx) }

// CommittedHead implements eventstore.Store: Head.
func (s *Store) CommittedHead(ctx context.Context) (eventstore.Position, error) { return s.Head(ctx) }

// CountAfter implements eventstore.Store, exactly: the distance from from to the head. The
// sequence (seq, the rowid with AUTOINCREMENT) skips no number: an append that rolls back (a failed
// condition, a duplicate id, a failed commit) undoes its rows and its sqlite_sequence update
// alike, so the next append takes the same numbers, and no event is ever deleted.
func (s *Store) CountAfter(ctx context.Context, from eventstore.Position) (uint64, error) {
	h, err := s.Head(ctx)
	if err != nil || h.Commit <= from.Commit {
		return 0, err
	}
	return h.Commit - from.Commit, nil
}

// SubscribeBatch is how many events one Subscribe delivery carries at most.
const SubscribeBatch = 5000

// Subscribe implements eventstore.Store.
func (s *Store) Subscribe(ctx context.Context, from eventstore.Position, fn func(context.Context, []eventstore.RecordedEvent) error) error {
	ticker := time.NewTicker(PollInterval)
	defer ticker.Stop()
	expect := 0 // catching up, reads fill their batches; following, they return few events
	for {
		wake, err := s.waitCh()
		if err != nil {
			return err
		}
		evs, _, err := s.tail.Fetch(from, SubscribeBatch, wake, func() ([]eventstore.RecordedEvent, uint64, error) {
			evs, err := s.readAll(ctx, from, SubscribeBatch, expect)
			return evs, 0, err
		})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		expect = 0
		if len(evs) == SubscribeBatch {
			expect = SubscribeBatch
		}
		if len(evs) > 0 {
			if err := fn(ctx, evs); err != nil {
				return err
			}
			from = evs[len(evs)-1].Position
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-ticker.C:
		}
	}
}

// Close wakes and ends subscriptions. It does not close the shared database handle.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.wake)
	}
	return nil
}

// SubscribeStats implements eventstore.Store.
func (s *Store) SubscribeStats() eventstore.TailStats { return s.tail.Stats() }

// RewriteData implements eventstore.Store.
func (s *Store) RewriteData(ctx context.Context, stream string, revision uint64, old, data []byte) (bool, error) {
	var n int64
	err := sqldb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE events SET data = ? WHERE stream = ? AND revision = ? AND data = ?`, data, stream, revision, old)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	s.tail.Reset() // after the commit: no read begun before it is kept
	if err != nil {
		return false, fmt.Errorf("sqlite: rewrite %s revision %d: %w", stream, revision, err)
	}
	return n == 1, nil
}
