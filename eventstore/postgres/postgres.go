// Package postgres is the Postgres event store, for deployments where several Casebook replicas share
// one database.
//
// # Gap-safe global order
//
// A bigserial sequence alone cannot order the global log for readers that checkpoint a position:
// sequence numbers are taken when a row is inserted but become visible when its transaction commits,
// and transactions commit in any order. If transaction A takes seq 10 and B takes seq 11, and B
// commits first, a reader sees 11, checkpoints it, and never reads 10 once A commits.
//
// Each event therefore stores, besides seq, the id of the transaction that wrote it (xid8, from
// pg_current_xact_id()), and the log is ordered by (xid, seq); a Position is {Commit: xid, Prepare:
// seq}. A reader only returns events whose xid is below the xmin of its own snapshot
// (pg_snapshot_xmin(pg_current_snapshot())): every transaction with a smaller id has ended, and every
// transaction still running or not yet started has, or will get, an id at or above xmin. So once an
// event is returned, no event can later appear before it, and a reader can resume strictly after the
// last position it saw. Events of one transaction (an append, or the appends grouped in it) share an
// xid and are ordered by seq.
//
// Positions hold transaction ids of one cluster. Physical replicas and pg_upgrade keep the counter, but
// a logical copy (dump and restore, logical replication) starts a lower one: new events would sort
// before the copied ones, so such a copy must advance its counter past max(xid) before appending.
//
// This xmin, the horizon, is cluster-wide: any long write transaction on the server, even in another database,
// holds back the visible end of the log until it ends. Committed events behind the horizon are
// "held". ReadAll and Head wait (up to Options.SettleTimeout) for the transactions in front of events
// already committed when they are called, so an Append is visible to a ReadAll that starts after it
// returns; Subscribe never waits inside a read, it polls quickly while events are held.
//
// # Wake-ups
//
// After an append commits, the Store sends pg_notify on a channel named after the schema of its
// events table; requests made while a notification is in flight coalesce into the next one. The
// notification is deliberately not sent inside the append transaction: Postgres serializes the
// commits of all notifying transactions on one lock, which defeats group commit (in
// BenchmarkAppendVsInsert with 32 writers, about 0.15 of the plain-insert rate instead of about
// 0.6). Each Store keeps one connection, taken from the pool, that LISTENs on the channel and wakes
// its subscriptions; they also poll every Options.PollInterval, which covers a notification lost to
// a crash or a reconnect.
package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
)

var (
	_ eventstore.Store   = (*Store)(nil)
	_ eventstore.Counter = (*Store)(nil)
)

// The (stream, revision) constraint is declared before the id constraint so that, when two appends
// race with the same event ids, the loser sees the revision conflict (index order is creation order).
var migrations = []sqldb.Migration{{Version: 1, Postgres: `
CREATE TABLE events (
	seq         bigserial   NOT NULL,
	xid         xid8        NOT NULL DEFAULT pg_current_xact_id(),
	stream      text        NOT NULL,
	revision    bigint      NOT NULL CHECK (revision >= 0),
	id          text        NOT NULL,
	type        text        NOT NULL,
	data        bytea       NOT NULL,
	metadata    bytea       NOT NULL,
	recorded_at timestamptz NOT NULL,
	CONSTRAINT events_position_pkey PRIMARY KEY (xid, seq),
	CONSTRAINT events_stream_revision_key UNIQUE (stream, revision),
	CONSTRAINT events_id_key UNIQUE (id)
)`}, {Version: 2, Postgres: claimsMigration}}

// claimsMigration creates eventstore.ClaimsTable and claims the earlier inquiry streams (see there).
const claimsMigration = `
CREATE TABLE stream_claims (
	name   text NOT NULL PRIMARY KEY,
	stream text NOT NULL
);
INSERT INTO stream_claims (name, stream)
	SELECT stream, stream FROM events WHERE revision = 0 AND starts_with(stream, 'inquiry-')`

const (
	constraintStreamRevision = "events_stream_revision_key"
	constraintID             = "events_id_key"
)

// Defaults for Options.
const (
	DefaultPollInterval  = time.Second
	DefaultSettleTimeout = 5 * time.Second
	DefaultBatchTimeout  = 15 * time.Second
)

// SubscribeBatch is how many events one Subscribe delivery carries at most. Catching up, a
// subscriber commits once per delivery: 10,000 made a rebuild about a tenth faster than 5,000.
const SubscribeBatch = 10000

// heldPollMax caps the backoff of a subscription polling for held events.
const heldPollMax = 100 * time.Millisecond

// Options configure a Store.
type Options struct {
	// Now stamps recorded_at; time.Now when nil.
	Now func() time.Time
	// PollInterval is how often a subscription reads without a notification; DefaultPollInterval
	// when zero.
	PollInterval time.Duration
	// SettleTimeout bounds how long ReadAll and Head wait for the transactions in front of events
	// that are already committed; DefaultSettleTimeout when zero, no waiting when negative. When it
	// runs out they return what is safe, never an event past a gap.
	SettleTimeout time.Duration
	// BatchTimeout bounds how long an append batch (group.go) takes, from the moment a writer takes
	// it (waiting for a pool connection included) to its commit; DefaultBatchTimeout when zero or
	// negative.
	BatchTimeout time.Duration
}

// Store is the Postgres event store.
type Store struct {
	pool    *pgxpool.Pool
	ownPool bool
	channel string
	now     func() time.Time
	poll    time.Duration
	settle  time.Duration

	closing  context.Context // cancelled by Close
	shutdown context.CancelFunc
	isClosed atomic.Bool
	wg       sync.WaitGroup // the notifier and the listener
	notify   chan struct{}  // a notification is due
	tail     *eventstore.Tail
	group    appendGroup

	mu        sync.Mutex
	wake      chan struct{} // closed and replaced on every notification
	listening chan struct{} // closed after the listener's first attempt; nil until a Subscribe
}

// New migrates the events table in the pool's current schema and returns a store on it. The caller
// owns pool; Close does not close it.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	db := stdlib.OpenDBFromPool(pool)
	err := sqldb.Migrate(ctx, &sqldb.DB{DB: db, Dialect: sqldb.Postgres}, "eventstore", migrations)
	_ = db.Close() // does not close pool
	if err != nil {
		return nil, fmt.Errorf("eventstore/postgres: %w", err)
	}
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, fmt.Errorf("eventstore/postgres: current schema: %w", err)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.SettleTimeout == 0 {
		opts.SettleTimeout = DefaultSettleTimeout
	}
	if opts.BatchTimeout <= 0 {
		opts.BatchTimeout = DefaultBatchTimeout
	}
	closing, shutdown := context.WithCancel(context.Background())
	s := &Store{
		pool:     pool,
		channel:  channelFor(schema),
		now:      opts.Now,
		poll:     opts.PollInterval,
		settle:   opts.SettleTimeout,
		closing:  closing,
		shutdown: shutdown,
		notify:   make(chan struct{}, 1),
		tail:     eventstore.NewTail(eventstore.TailEvents),
		wake:     make(chan struct{}),
		group:    appendGroup{max: GroupWriters, timeout: opts.BatchTimeout},
	}
	s.wg.Add(1)
	go s.notifier() //nolint:gosec // lives as long as the store; Close ends it
	return s, nil
}

// DefaultMaxConns is the size of the pool Open makes when the URL does not set pool_max_conns.
// pgxpool's own default (4 on two cores, one of them held by the listener) left appends queueing
// for a connection while they could share the server's WAL flushes: concurrent commits are
// Postgres's own group commit, and each needs its connection.
const DefaultMaxConns = 16

// Open connects a pool to url and returns a store that owns it: Close closes the pool. The pool
// holds up to DefaultMaxConns connections unless url sets pool_max_conns.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("eventstore/postgres: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns=") {
		cfg.MaxConns = DefaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("eventstore/postgres: connect: %w", err)
	}
	s, err := New(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownPool = true
	return s, nil
}

// channelFor names the notification channel of the events table in schema. Channels are per
// database, so the schema keeps stores in one database apart; names are at most 63 bytes.
func channelFor(schema string) string {
	c := "casebook_events." + schema
	if len(c) > 63 {
		sum := sha256.Sum256([]byte(schema))
		c = "casebook_events." + hex.EncodeToString(sum[:16])
	}
	return c
}

func (s *Store) checkOpen() error {
	if s.isClosed.Load() {
		return eventstore.ErrClosed
	}
	return nil
}

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

// Append implements eventstore.Store.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events []eventstore.EventData) (eventstore.AppendResult, error) {
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
	for _, c := range eventstore.CompanionsOf(ctx) {
		if s.WritesCompanionsOn(c.Handle) {
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

var (
	_ eventstore.CompanionWriter = (*Store)(nil)
	_ eventstore.Claimer         = (*Store)(nil)
)

// WithClaim implements eventstore.Claimer: the claim is a companion row of the append.
func (s *Store) WithClaim(ctx context.Context, name string) (context.Context, bool) {
	return eventstore.WithCompanion(ctx, eventstore.ClaimCompanion(s.pool, name)), true
}

// Claimed implements eventstore.Claimer.
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

// WritesCompanionsOn implements eventstore.CompanionWriter: companions on the store's pool.
func (s *Store) WritesCompanionsOn(handle any) bool { return handle == any(s.pool) }

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

// CountAfter implements eventstore.Counter with an estimate that costs one index probe: the
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

var _ eventstore.VisibleHeader = (*Store)(nil)

// VisibleHead implements eventstore.VisibleHeader: the last event below the horizon now.
func (s *Store) VisibleHead(ctx context.Context) (eventstore.Position, error) {
	if err := s.checkOpen(); err != nil {
		return eventstore.Position{}, err
	}
	pos, _, err := s.head(ctx)
	return pos, err
}

var _ eventstore.CommittedHeader = (*Store)(nil)

// CommittedHead implements eventstore.CommittedHeader: the last event in (xid, seq) order among
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

func (s *Store) waitCh() (<-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isClosed.Load() {
		return nil, eventstore.ErrClosed
	}
	return s.wake, nil
}

func (s *Store) broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.isClosed.Load() {
		close(s.wake)
		s.wake = make(chan struct{})
	}
}

// requestNotify asks the notifier for a notification after an append has committed.
func (s *Store) requestNotify() {
	select {
	case s.notify <- struct{}{}:
	default: // one is already due and will be sent after this commit
	}
}

// notifier sends one notification per request. Requests made while one is being sent coalesce into
// the next, so under load there is at most one notifying transaction per Store in flight. A pending
// request is still sent at Close.
func (s *Store) notifier() {
	defer s.wg.Done()
	for {
		select {
		case <-s.notify:
			s.sendNotify(s.closing)
		case <-s.closing.Done():
			select {
			case <-s.notify:
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				s.sendNotify(ctx)
				cancel()
			default:
			}
			return
		}
	}
}

// sendNotify notifies the channel. The notification carries no data, so its commit need not wait
// for the WAL flush. A lost notification only delays subscribers until their next poll.
func (s *Store) sendNotify(ctx context.Context) {
	_, _ = s.pool.Exec(ctx, `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, '')`, s.channel)
}

// startListener starts the listening connection once and returns a channel closed after its first
// attempt to LISTEN, successful or not.
func (s *Store) startListener() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listening == nil {
		s.listening = make(chan struct{})
		s.wg.Add(1)
		go s.listen(s.listening)
	}
	return s.listening
}

// listen holds a connection that LISTENs on the store's channel and broadcasts every notification,
// reconnecting with backoff until Close.
func (s *Store) listen(ready chan struct{}) {
	defer s.wg.Done()
	var once sync.Once
	signal := func() { once.Do(func() { close(ready) }) }
	defer signal()
	delay := 50 * time.Millisecond
	for {
		_ = s.listenOnce(signal)
		signal()
		if s.closing.Err() != nil || pause(s.closing, delay) != nil {
			return
		}
		delay = min(2*delay, s.poll)
	}
}

func (s *Store) listenOnce(ready func()) error {
	pc, err := s.pool.Acquire(s.closing)
	if err != nil {
		return err
	}
	conn := pc.Hijack()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	}()
	if _, err := conn.Exec(s.closing, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return err
	}
	ready()
	s.broadcast() // appends may have committed while nobody listened
	for {
		if _, err := conn.WaitForNotification(s.closing); err != nil {
			return err
		}
		s.broadcast()
	}
}

// PoolStat reports the store's connection pool.
func (s *Store) PoolStat() *pgxpool.Stat { return s.pool.Stat() }

// Close ends subscriptions and the listening connection, and closes the pool if Open created it.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.isClosed.Swap(true) {
		s.mu.Unlock()
		return nil
	}
	close(s.wake)
	s.mu.Unlock()
	s.shutdown()
	s.wg.Wait()
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

var _ eventstore.SharedReader = (*Store)(nil)

// SubscribeStats implements eventstore.SharedReader.
func (s *Store) SubscribeStats() eventstore.TailStats { return s.tail.Stats() }

var _ eventstore.Rewriter = (*Store)(nil)

// RewriteData implements eventstore.Rewriter. The old row version stays in the table's storage
// until vacuum reclaims it.
func (s *Store) RewriteData(ctx context.Context, stream string, revision uint64, old, data []byte) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE events SET data = $1 WHERE stream = $2 AND revision = $3 AND data = $4`, data, stream, int64(revision), old)
	s.tail.Reset() // after the commit: no read begun before it is kept
	if err != nil {
		return false, fmt.Errorf("postgres: rewrite %s revision %d: %w", stream, revision, err)
	}
	return tag.RowsAffected() == 1, nil
}
