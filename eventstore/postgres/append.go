package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/casebook/casebook/eventstore"
)

// Each append is one INSERT statement; appends made at the same time share a transaction, and those
// creating their streams share statements too (group.go); one sent alone has one of its own.
// Revisions in a stream are dense, so the unique (stream, revision) constraint enforces the
// condition: NoStream inserts revision 0, Exact(r) inserts r+1 only if r exists, and an append that
// loses a race fails on the constraint (23505), which Append reports as ErrConcurrency. Any reads
// the last revision in the same statement.
const (
	// insertInto is the head of every statement that appends events, one stream's or several's.
	insertInto   = `INSERT INTO events (stream, revision, id, type, data, metadata, recorded_at)`
	insertEvents = insertInto + `
	SELECT $1, `
	fromBatch = `, e.id, e.type, e.data, e.metadata, $2
	FROM unnest($3::text[], $4::text[], $5::bytea[], $6::bytea[]) WITH ORDINALITY AS e(id, type, data, metadata, ord)`
	returning = `
	ORDER BY e.ord
	RETURNING xid, seq, revision`

	appendNoStream = insertEvents + `e.ord - 1` + fromBatch + returning
	appendExact    = insertEvents + `$7::bigint + e.ord` + fromBatch + `
	WHERE EXISTS (SELECT FROM events WHERE stream = $1 AND revision = $7::bigint)` + returning
	appendAny = insertEvents + `coalesce((SELECT max(revision) FROM events WHERE stream = $1), -1) + e.ord` +
		fromBatch + returning
)

// Append implements eventstore.Store. The companions its options carry on the store's pool are
// inserted by its own statement.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventstore.EventData,
	opts ...eventstore.AppendOption) (eventstore.AppendResult, error) {
	if err := s.checkOpen(); err != nil {
		return eventstore.AppendResult{}, err
	}
	if stream == "" {
		return eventstore.AppendResult{}, errors.New("eventstore/postgres: empty stream name")
	}
	if len(events) == 0 {
		return eventstore.AppendResult{}, errors.New("eventstore/postgres: nothing to append")
	}
	ids := make([]string, len(events))
	types := make([]string, len(events))
	data := make([][]byte, len(events))
	meta := make([][]byte, len(events))
	for i, e := range events {
		ids[i], types[i], data[i], meta[i] = e.ID, e.Type, nonNil(e.Data), nonNil(e.Metadata)
	}
	now := s.now()
	args := []any{stream, now, ids, types, data, meta}
	query := appendAny
	if expected.IsNoStream() {
		query = appendNoStream
	} else if r, ok := expected.Revision(); ok {
		query, args = appendExact, append(args, int64(r))
	}
	var cs []*eventstore.Companion
	for _, c := range eventstore.NewAppendOptions(opts).Companions {
		if s.Capabilities().WritesCompanionsOn(c.Handle) {
			cs = append(cs, c)
		}
	}
	if len(cs) > 0 {
		var err error
		if query, args, err = withCompanions(query, args, cs, stream); err != nil {
			return eventstore.AppendResult{}, err
		}
	}
	order := lockOrder(stream, cs)
	var merge *newStream
	if expected.IsNoStream() {
		merge = &newStream{stream: stream, at: now, ids: ids, types: types, data: data, meta: meta,
			companions: cs, values: args[6:]} // the companions' values follow the six above
	}
	for {
		res, n, err := s.insertGrouped(ctx, order, query, args, merge)
		var pgErr *pgconn.PgError
		if taken := companionTaken(err, cs); taken != nil {
			return eventstore.AppendResult{}, taken
		}
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraintStreamRevision:
			if expected.IsAny() && ctx.Err() == nil {
				continue // another append committed that revision; the next try sees it
			}
			return eventstore.AppendResult{}, s.conflict(ctx, stream, expected)
		case errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraintID:
			return eventstore.AppendResult{}, fmt.Errorf("eventstore/postgres: append to %s: duplicate event id: %s", stream, pgErr.Detail)
		case err != nil:
			return eventstore.AppendResult{}, fmt.Errorf("eventstore/postgres: append to %s: %w", stream, err)
		case n == 0: // Exact(r) and r does not exist
			return eventstore.AppendResult{}, s.conflict(ctx, stream, expected)
		}
		s.requestNotify()
		for _, c := range cs {
			if c.Written != nil {
				c.Written()
			}
		}
		return res, nil
	}
}

// Claim implements eventstore.Store: the claim is a companion row of the append.
func (s *Store) Claim(name string) (eventstore.AppendOption, bool) {
	return eventstore.WithCompanions(eventstore.ClaimCompanion(s.pool, name)), true
}

// Claimed implements eventstore.Store.
func (s *Store) Claimed(ctx context.Context, name string) (string, error) {
	if err := s.checkOpen(); err != nil {
		return "", err
	}
	var stream string
	err := s.pool.QueryRow(ctx, `SELECT stream FROM stream_claims WHERE name = $1`, name).Scan(&stream)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("eventstore/postgres: claim %s: %w", name, err)
	}
	return stream, nil
}

// withCompanions wraps an append statement so that it also inserts each companion's row, in the
// same statement and only if the append inserted its events. A companion whose Values do not match
// its Columns is refused.
func withCompanions(query string, args []any, cs []*eventstore.Companion, stream string) (string, []any, error) {
	args = slices.Clip(args)
	first := len(args) + 1
	for _, c := range cs {
		vals := c.Values(stream)
		if len(vals) != len(c.Columns) {
			return "", nil, fmt.Errorf("eventstore/postgres: companion row of %s: %d values for %d columns", c.Table, len(vals), len(c.Columns))
		}
		args = append(args, vals...)
	}
	return companionTexts.text(query, first, cs), args, nil
}

// companionTexts keeps the statements withCompanions has written: an intake's append carries the
// same companions every time, and writing its text anew cost a few microseconds per append.
var companionTexts = textCache{texts: map[companionShape]string{}}

// maxCompanionTexts bounds companionTexts; a shape beyond it is written each time.
const maxCompanionTexts = 64

// companionShape is what a statement's text depends on: the append statement, the number of its
// first companion parameter, and each companion's table and columns.
type companionShape struct {
	query string
	first int
	rows  string // "table(col, …)" of each companion, in order
}

type textCache struct {
	mu    sync.RWMutex
	texts map[companionShape]string
}

func (tc *textCache) text(query string, first int, cs []*eventstore.Companion) string {
	var rows strings.Builder
	for _, c := range cs {
		rows.WriteString(c.Table)
		rows.WriteByte('(')
		for i, col := range c.Columns {
			if i > 0 {
				rows.WriteByte(',')
			}
			rows.WriteString(col)
		}
		rows.WriteByte(')')
	}
	shape := companionShape{query: query, first: first, rows: rows.String()}
	tc.mu.RLock()
	text, ok := tc.texts[shape]
	tc.mu.RUnlock()
	if ok {
		return text
	}
	text = companionsText(query, first, cs)
	tc.mu.Lock()
	if len(tc.texts) < maxCompanionTexts {
		tc.texts[shape] = text
	}
	tc.mu.Unlock()
	return text
}

// companionsText is query wrapped to insert each companion's row, its parameters numbered from
// first on.
func companionsText(query string, first int, cs []*eventstore.Companion) string {
	var b strings.Builder
	b.WriteString(`WITH ins AS (` + query + `)`)
	n := first
	for i, c := range cs {
		ph := make([]string, len(c.Columns))
		for j := range ph {
			ph[j] = fmt.Sprintf("$%d", n)
			n++
		}
		writeCompanionInsert(&b, i, c)
		fmt.Fprintf(&b, `
	SELECT %s WHERE EXISTS (SELECT FROM ins))`, strings.Join(ph, ", "))
	}
	b.WriteString(`
	SELECT xid, seq, revision FROM ins`)
	return b.String()
}

// writeCompanionInsert writes the head of companion i's part of an append statement, up to its
// rows: ", companion<i> AS (INSERT INTO <table> (<columns>)".
func writeCompanionInsert(b *strings.Builder, i int, c *eventstore.Companion) {
	fmt.Fprintf(b, `, companion%d AS (INSERT INTO %s (%s)`, i, c.Table, strings.Join(c.Columns, ", "))
}

// lockOrder is what a batch orders an append's statement by (sendGroup): its first companion's
// Order (a claim's name), else its stream.
func lockOrder(stream string, cs []*eventstore.Companion) string {
	for _, c := range cs {
		if c.Order != "" {
			return c.Order
		}
	}
	return stream
}

// companionTaken returns the Taken error of the companion whose row violated a unique constraint of
// its table, if err is that.
func companionTaken(err error, cs []*eventstore.Companion) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		return nil
	}
	for _, c := range cs {
		if c.Taken != nil && pgErr.TableName == c.Table {
			return c.Taken
		}
	}
	return nil
}

// insert runs an append statement and reports where its last event landed and how many it inserted.
func (s *Store) insert(ctx context.Context, query string, args []any) (eventstore.AppendResult, int, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return eventstore.AppendResult{}, 0, err
	}
	return scanInserted(rows)
}

// scanInserted reads an append statement's rows: where its last event landed and how many it
// inserted.
func scanInserted(rows pgx.Rows) (eventstore.AppendResult, int, error) {
	defer rows.Close()
	var res eventstore.AppendResult
	n := 0
	for rows.Next() {
		var xid uint64
		var seq, rev int64
		if err := rows.Scan(&xid, &seq, &rev); err != nil {
			return eventstore.AppendResult{}, 0, err
		}
		keepLast(&res, xid, seq, rev)
		n++
	}
	return res, n, rows.Err()
}

// keepLast makes res the inserted event's position if it is the append's latest so far: one
// transaction writes all of an append's events, and their seq follows their revision.
func keepLast(res *eventstore.AppendResult, xid uint64, seq, rev int64) {
	if uint64(rev) >= res.NextRevision {
		*res = eventstore.AppendResult{NextRevision: uint64(rev), Position: eventstore.Position{Commit: xid, Prepare: uint64(seq)}}
	}
}

// conflict builds the ErrConcurrency error of a refused append, with the stream's last revision as
// read after the refusal.
func (s *Store) conflict(ctx context.Context, stream string, expected eventstore.ExpectedRevision) error {
	actual := int64(-2)
	var last *int64
	if err := s.pool.QueryRow(ctx, `SELECT max(revision) FROM events WHERE stream = $1`, stream).Scan(&last); err == nil {
		actual = -1
		if last != nil {
			actual = *last
		}
	}
	return &eventstore.AppendError{Stream: stream, Expected: expected, Actual: actual, Err: eventstore.ErrConcurrency}
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// RewriteData implements eventstore.Store. The old row version stays in the table's storage
// until vacuum reclaims it.
func (s *Store) RewriteData(ctx context.Context, stream string, revision uint64, old, data []byte) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE events SET data = $1 WHERE stream = $2 AND revision = $3 AND data = $4`, data, stream, int64(revision), old)
	s.tail.Reset() // after the commit: no read begun before it is kept
	if err != nil {
		return false, fmt.Errorf("postgres: rewrite %s revision %d: %w", stream, revision, err)
	}
	return tag.RowsAffected() == 1, nil
}
