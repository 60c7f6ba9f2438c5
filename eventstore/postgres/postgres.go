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
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
)

var _ eventstore.Store = (*Store)(nil)

// Capabilities implements eventstore.Store: the store counts (at least the events there are),
// rewrites, keeps claims, shares its subscriptions' reads, and writes companions on its pool.
func (s *Store) Capabilities() eventstore.Capabilities {
	return eventstore.Capabilities{Count: true, Rewrite: true, Claims: true, SharedReads: true, CompanionHandle: any(s.pool)}
}

// Defaults for Options.
const (
	DefaultPollInterval  = time.Second
	DefaultSettleTimeout = 5 * time.Second
	DefaultBatchTimeout  = 15 * time.Second
)

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

func (s *Store) checkOpen() error {
	if s.isClosed.Load() {
		return eventstore.ErrClosed
	}
	return nil
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
