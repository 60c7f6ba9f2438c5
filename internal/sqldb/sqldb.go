// Package sqldb holds what Casebook's SQL-backed stores share: opening the embedded SQLite file with
// the pragmas durability needs, one placeholder style for SQLite and Postgres, and versioned
// migrations that are safe to run twice and from several processes at once.
package sqldb

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"modernc.org/sqlite" // registers the pure-Go "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

// IsUniqueViolation reports whether err is a unique or primary-key violation on either backend,
// matched by the drivers' error types and codes, never by message text.
func IsUniqueViolation(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// IsStorageFull reports whether err says the database's disk is full: SQLite's SQLITE_FULL (any
// extended code), Postgres's disk_full (SQLSTATE 53100), or ENOSPC from a file this process writes.
// Matched by the drivers' error types and codes, never by message text.
func IsStorageFull(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "53100" {
		return true
	}
	return errors.Is(err, syscall.ENOSPC)
}

// Dialect is the SQL flavour of a database handle.
type Dialect int

// The supported dialects.
const (
	SQLite Dialect = iota
	Postgres
)

func (d Dialect) String() string {
	if d == Postgres {
		return "postgres"
	}
	return "sqlite"
}

// DB is a database handle with its dialect. Queries are written with ? placeholders; Rebind turns
// them into $n for Postgres.
type DB struct {
	*sql.DB
	Dialect Dialect
	// writers admits one InTx at a time per SQLite file, across the handles on it (see gate). Nil
	// for Postgres. replayable handles' writers yield to durable ones.
	writers    *gate
	replayable bool

	gateEntered, gateContended atomic.Uint64
	gateWaited, gateHeld       atomic.Int64  // nanoseconds
	pagesWritten               atomic.Uint64 // SQLite: pages the write transactions wrote to the WAL
	writebacks                 atomic.Uint64 // SQLite replayable handles: log writebacks started
	statements                 atomic.Uint64

	pool *pgxpool.Pool // Postgres: where the connections come from

	checkpoints *checkpointer // SQLite: the background WAL checkpoints
	bound       *logBound     // SQLite durable handles: keeps the WAL near RestartLogAfter
	writeback   *walWriteback // SQLite replayable handles: starts the WAL's writeback after commits

	groupOnce sync.Once
	group     *group
	stmts     stmtCache
}

// sqliteWriters holds the writer gate of each SQLite file opened by this process.
var sqliteWriters sync.Map // absolute path → *gate

// Rebind rewrites ? placeholders for the dialect. Queries must not contain literal question marks.
func (db *DB) Rebind(q string) string {
	if db.Dialect != Postgres || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// OpenSQLite opens (creating if needed) the SQLite file at path in WAL mode with synchronous=FULL, so
// a committed transaction survives a process kill and a power loss. Write transactions begin
// IMMEDIATE so writers queue on the busy timeout instead of failing on lock upgrades.
func OpenSQLite(path string) (*DB, error) { return openSQLite(path, "FULL", WALSizeLimit) }

// OpenSQLiteReplayable opens the same file for writes that may be lost on a power failure because
// the log replays them: projection output committed together with its checkpoint. It uses
// synchronous=NORMAL (no fsync per commit; a process kill still loses nothing), and any later FULL
// commit on the file makes these durable too, since the WAL is written in order. Its write
// transactions yield the file's writer gate to the durable handles' (see gate).
func OpenSQLiteReplayable(path string) (*DB, error) {
	return openSQLite(path, "NORMAL", WALSizeLimit)
}

// WALSizeLimit is the size, in bytes, that a SQLite file's write-ahead log is cut back to when
// SQLite starts it over (journal_size_limit); without a limit the file would keep its largest size
// for good. It is above RestartLogAfter, so that a log bounded during a burst is started over in
// place: cutting a file of hundreds of megabytes back happens in the next commit, inside the
// writer lane, and stalled every writer for about 100 ms.
const WALSizeLimit = 256 << 20

func openSQLite(path, syncMode string, walLimit int64) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: create data directory: %w", err)
	}
	// wal_autocheckpoint(0): checkpoints run in the background, not inside a commit (see
	// CheckpointEvery).
	dsn := "file:" + uriPath(path) + "?_pragma=busy_timeout(" + strconv.FormatInt(openBusyTimeout.Milliseconds(), 10) + ")&_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(" + syncMode + ")&_pragma=foreign_keys(1)&_pragma=secure_delete(1)" +
		"&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(" + strconv.FormatInt(walLimit, 10) + ")" +
		"&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8) // opening a connection re-runs the pragmas: keep them
	if err := firstConnection(db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	g, _ := sqliteWriters.LoadOrStore(abs, &gate{})
	h := &DB{DB: db, Dialect: SQLite, writers: g.(*gate), replayable: syncMode != "FULL"}
	var bound func(WALFrames)
	if !h.replayable {
		h.bound = &logBound{after: RestartLogAfter, wait: RestartLogWait}
		bound = h.boundLog
	} else {
		h.writeback = &walWriteback{path: abs + "-wal"}
	}
	var seen uint64
	ticks := 0
	h.checkpoints = startCheckpointer(db, &h.writers.checkpoints, func() bool {
		// Written through the gate since the last look, or a second passed (writes outside it).
		n := h.gateEntered.Load()
		ticks++
		if n == seen && ticks < 10 {
			return false
		}
		seen, ticks = n, 0
		return true
	}, bound)
	return h, nil
}

// uriPath escapes path for a SQLite URI filename (https://sqlite.org/uri.html): there "?" starts
// the parameters, "#" a fragment and "%" an escape, so a data directory whose name held one of
// them would open another file (the name cut short) or lose the connection's pragmas.
func uriPath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

// openBusyTimeout is the connections' busy_timeout, and how long an open waits for another to
// finish switching a new file to WAL.
const openBusyTimeout = 30 * time.Second

// firstConnection opens db's first connection, which runs the DSN's pragmas. Switching a new file
// to WAL needs its exclusive lock, and SQLite answers a connection that would deadlock for it
// (another is switching too) SQLITE_BUSY at once instead of waiting out the busy timeout: such an
// open is retried, with a growing pause, until the timeout.
func firstConnection(db *sql.DB) error {
	deadline := time.Now().Add(openBusyTimeout)
	pause := time.Millisecond
	for {
		err := db.PingContext(context.Background())
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause) // backing off a lock held by another open, not synchronising
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// Migration is one versioned schema step. SQL holds statements separated by ";\n"; Postgres is used
// instead when set and the dialect is Postgres.
type Migration struct {
	Version  int
	SQL      string
	Postgres string
	// SortThreads, on SQLite, lets the script's sorts (those of CREATE INDEX) use up to this many
	// helper threads (https://sqlite.org/pragma.html#pragma_threads); the connection is set back
	// to none before the transaction ends.
	SortThreads int
}

// Migrate applies the migrations of component that are not yet recorded, each in its own
// transaction together with its record. Concurrent callers serialize on a lock (SQLite's write
// lock; a Postgres advisory lock), so running it twice or from two processes is safe.
func Migrate(ctx context.Context, db *DB, component string, migrations []Migration) error {
	const create = `CREATE TABLE IF NOT EXISTS schema_migrations (
		component TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (component, version))`
	var err error
	if db.Dialect == Postgres {
		// Concurrent CREATE TABLE IF NOT EXISTS can still collide on the catalog: take the lock.
		err = InTx(ctx, db, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7345110021)`); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, create)
			return err
		})
	} else {
		_, err = db.ExecContext(ctx, create)
	}
	if err != nil {
		return fmt.Errorf("migrate %s: %w", component, err)
	}
	for _, m := range migrations {
		if err := migrateOne(ctx, db, component, m); err != nil {
			return fmt.Errorf("migrate %s to %d: %w", component, m.Version, err)
		}
	}
	return nil
}

func migrateOne(ctx context.Context, db *DB, component string, m Migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if db.Dialect == Postgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7345110021)`); err != nil {
			return err
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, db.Rebind(`SELECT count(*) FROM schema_migrations WHERE component = ? AND version = ?`),
		component, m.Version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	script := m.SQL
	if db.Dialect == Postgres && m.Postgres != "" {
		script = m.Postgres
	}
	threads := db.Dialect == SQLite && m.SortThreads > 0
	if threads {
		if _, err := tx.ExecContext(ctx, "PRAGMA threads = "+strconv.Itoa(m.SortThreads)); err != nil {
			return err
		}
		defer func() { // a failed script: the connection goes back to the pool without them too
			if threads {
				_, _ = tx.ExecContext(context.WithoutCancel(ctx), "PRAGMA threads = 0")
			}
		}()
	}
	for _, stmt := range strings.Split(script, ";\n") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%w\n%s", err, stmt)
		}
	}
	if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO schema_migrations (component, version) VALUES (?, ?)`),
		component, m.Version); err != nil {
		return err
	}
	if threads {
		if _, err := tx.ExecContext(ctx, "PRAGMA threads = 0"); err != nil {
			return err
		}
		threads = false
	}
	return tx.Commit()
}

// InTx runs fn in a transaction and commits it when fn returns nil. On SQLite, transactions of this
// process on the same file run one at a time; fn must not start another InTx on that file. A
// panic in fn rolls the transaction back and frees its connection and the writer gate before it
// propagates.
func InTx(ctx context.Context, db *DB, fn func(*sql.Tx) error) error {
	return InConnTx(ctx, db, func(tx *Tx) error { return fn(tx.Tx) })
}

// Tx is a transaction together with the connection it runs on, so that bulk copies (CopyFrom) take
// part in it.
type Tx struct {
	*sql.Tx
	conn     *sql.Conn
	db       *DB
	pages    uint64
	waited   time.Duration
	atCommit []atCommit // Postgres: sent with COMMIT (ExecAtCommit)
	// savepoints holds, per savepoint, how many statements were queued when it was set.
	savepoints map[string]int
}

// Pages is how many pages the transaction wrote to SQLite's write-ahead log, known once InConnTx
// has returned (zero on Postgres).
func (t *Tx) Pages() uint64 { return t.pages }

// Waited is how long the transaction waited for SQLite's writer gate before it began: zero when
// it found the writer lane free (and on Postgres, which has no gate).
func (t *Tx) Waited() time.Duration { return t.waited }

// InConnTx is InTx for callers that also bulk-load rows with Tx.CopyFrom.
func InConnTx(ctx context.Context, db *DB, fn func(*Tx) error) error {
	release, waited, err := db.enterGate(ctx)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		release()
		// After the lane is free: the writeback is this writer's time, not the next one's.
		if committed && db.writeback != nil && db.writeback.start() {
			db.writebacks.Add(1)
		}
	}()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	db.countPages(conn, false) // what the connection wrote outside InConnTx is not this transaction's
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	// A panic (or runtime.Goexit) in fn rolls the transaction back before conn.Close, which would
	// otherwise wait for the open transaction for ever, holding the connection, SQLite's write
	// lock and the writer gate; the panic then goes on to the caller.
	ended := false
	defer func() {
		if !ended {
			_ = tx.Rollback()
		}
	}()
	t := &Tx{Tx: tx, conn: conn, db: db, waited: waited}
	err = fn(t)
	ended = true
	if err != nil {
		_ = tx.Rollback()
		t.pages = db.countPages(conn, true)
		return err
	}
	// A COMMIT that fails (SQLITE_FULL, a deferred constraint) is rolled back by the SQLite driver,
	// so the connection goes back to the pool with no transaction open
	// (TestFailedCommitLeavesNoOpenTransaction).
	err = t.commit(ctx)
	committed = err == nil
	t.pages = db.countPages(conn, true)
	return err
}

// countPages returns the pages conn wrote since it was last asked (SQLite's per-connection
// SQLITE_DBSTATUS_CACHE_WRITE: in WAL mode, the frames a commit appends to the log, one per page
// the transaction changed, and pages spilled before it), added to db's count when add is set.
func (db *DB) countPages(conn *sql.Conn, add bool) (pages uint64) {
	if db.Dialect != SQLite {
		return 0
	}
	_ = conn.Raw(func(dc any) error {
		if s, ok := dc.(sqlite.DBStatus); ok {
			if n, _, err := s.Status(sqlite.DBStatusCacheWrite, true); err == nil && n > 0 {
				pages = uint64(n)
				if add {
					db.pagesWritten.Add(pages)
				}
			}
		}
		return nil
	})
	return pages
}

// PagesRead reports how many database pages the transaction's SQLite connection has fetched since
// it opened, from its page cache or from the file: the work its statements did, which depends on
// neither the machine's speed nor its load, for tests that compare statements. It fails on Postgres.
func (t *Tx) PagesRead() (int64, error) {
	var n int64
	err := t.conn.Raw(func(dc any) error {
		s, ok := dc.(sqlite.DBStatus)
		if !ok {
			return fmt.Errorf("sqldb: pages read: %T is not a SQLite connection", dc)
		}
		for _, op := range []sqlite.DBStatusOp{sqlite.DBStatusCacheHit, sqlite.DBStatusCacheMiss} {
			v, _, err := s.Status(op, false)
			if err != nil {
				return err
			}
			n += int64(v)
		}
		return nil
	})
	return n, err
}

// ErrNoCopy is returned by CopyFrom on a database without bulk copies (SQLite).
var ErrNoCopy = errors.New("sqldb: bulk copy needs Postgres")

// CopyFrom loads rows into table inside the transaction with Postgres' binary COPY, several times
// cheaper per row than INSERT for bulk writes. columns name the columns in the order rows encodes
// them. It returns ErrNoCopy on SQLite.
func (t *Tx) CopyFrom(ctx context.Context, table string, columns []string, rows *CopyRows) error {
	if t.db.Dialect != Postgres {
		return ErrNoCopy
	}
	if rows.n == 0 {
		return nil
	}
	cols := make([]string, len(columns))
	for i, c := range columns {
		cols[i] = pgx.Identifier{c}.Sanitize()
	}
	stmt := "COPY " + pgx.Identifier{table}.Sanitize() + " (" + strings.Join(cols, ", ") + ") FROM STDIN WITH (FORMAT binary)"
	return t.conn.Raw(func(dc any) error {
		c, err := pgxConnOf(ctx, dc)
		if err != nil {
			return fmt.Errorf("sqldb: copy: %w", err)
		}
		tag, err := c.PgConn().CopyFrom(ctx, rows.reader(), stmt)
		if err != nil {
			return fmt.Errorf("copy into %s: %w", table, err)
		}
		if tag.RowsAffected() != int64(rows.n) {
			return fmt.Errorf("copy into %s: %d of %d rows", table, tag.RowsAffected(), rows.n)
		}
		return nil
	})
}

// CopyRows encodes rows in Postgres' binary COPY format without reflection: each row is Row
// followed by one call per column, whose kind must match the column's type (Text for TEXT, Int64
// for BIGINT). The zero value is ready to use.
type CopyRows struct {
	buf []byte
	n   int
}

var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// Grow makes room for n more bytes of values: a Text takes 4 bytes plus its length, an Int64 12
// and a Null 4; a row 2 more.
func (c *CopyRows) Grow(n int) {
	if c.buf == nil {
		c.buf = append(make([]byte, 0, len(copyHeader)+n), copyHeader...)
		return
	}
	c.buf = slices.Grow(c.buf, n)
}

// Row starts a row of width columns.
func (c *CopyRows) Row(width int) {
	if c.buf == nil {
		c.Grow(64 << 10)
	}
	c.n++
	c.buf = binary.BigEndian.AppendUint16(c.buf, uint16(width))
}

// Text appends a TEXT value.
func (c *CopyRows) Text(s string) {
	c.buf = binary.BigEndian.AppendUint32(c.buf, uint32(len(s)))
	c.buf = append(c.buf, s...)
}

// Int64 appends a BIGINT value.
func (c *CopyRows) Int64(v int64) {
	c.buf = binary.BigEndian.AppendUint32(c.buf, 8)
	c.buf = binary.BigEndian.AppendUint64(c.buf, uint64(v))
}

// Null appends a NULL.
func (c *CopyRows) Null() { c.buf = binary.BigEndian.AppendUint32(c.buf, 0xffffffff) }

func (c *CopyRows) reader() io.Reader {
	return io.MultiReader(bytes.NewReader(c.buf), bytes.NewReader([]byte{0xff, 0xff}))
}

// DefaultPostgresConns is how many connections a Postgres handle holds at most when its URL does
// not set pool_max_conns: twice the process's usable cores, at least 4 and at most 16. Appends go
// through a group commit (two connections at most) and subscriber batches pipeline their writes,
// so more connections than the process can drive only add contention: on two cores, 4 served
// 10–29 % more intakes than 16 and cut the first second's read latency (docs/performance.md, "One Postgres
// pool per process"). Sixteen concurrent commits already share the server's WAL flushes, and the
// pool keeps its idle connections, so a larger default would mostly hold server slots that other
// replicas and programs need.
func DefaultPostgresConns() int32 { return postgresConns(runtime.GOMAXPROCS(0)) }

// postgresConns is DefaultPostgresConns for a process of procs usable cores.
func postgresConns(procs int) int32 { return int32(min(max(2*procs, 4), 16)) }

// OpenPostgres opens a pooled Postgres handle. The URL is a pgx connection string
// (postgres://user@host:5432/db?sslmode=…; search_path may be set as a parameter, and
// pool_max_conns the pool's size, DefaultPostgresConns() by default).
//
// The handle's connections come from one pgx pool (PgxPool), which the Postgres event store shares:
// a process holds at most pool_max_conns connections (plus the event store's listener), waiting for
// a free one beyond that, rather than opening as many as its two pools allowed and meeting the
// server's connection limit mid-request (an intake answered 500).
func OpenPostgres(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns=") {
		cfg.MaxConns = DefaultPostgresConns()
	}
	if cfg.ConnConfig.Tracer == nil {
		cfg.ConnConfig.Tracer = poolTracer{}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	db := openPipelined(pool) // idle connections stay in the pool, for every user of it
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		pool.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	return &DB{DB: db, Dialect: Postgres, pool: pool}, nil
}

// PgxPool is the pool a Postgres handle's connections come from (nil on SQLite).
func (db *DB) PgxPool() *pgxpool.Pool { return db.pool }
