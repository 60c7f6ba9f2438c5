package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// Statements sent with COMMIT. On Postgres a transaction holds a transaction id from its first
// write to its commit, and while it does, every event appended after that id was taken is held
// from every reader (see eventstore/postgres). A statement sent on its own costs the holder a
// round trip, and under load the wait for this process to send the next one: the transaction
// sits idle, holding the log's visible end. A statement queued with Tx.ExecAtCommit goes out in
// one pipeline with COMMIT instead, so a transaction whose writes are all queued holds its id
// only while the server runs them.

// atCommit is a statement queued to run just before COMMIT.
type atCommit struct {
	query string
	args  []any
}

// ExecAtCommit queues q to run at the end of the transaction, just before its commit: on Postgres
// in the same round trip as COMMIT, on SQLite at once (a commit there costs no round trip). Queued
// statements run in order; the first that fails fails the commit, which then rolls back and
// returns its error. Only statements whose result the caller does not need may be queued.
func (t *Tx) ExecAtCommit(ctx context.Context, q string, args ...any) error {
	if t.db.Dialect != Postgres {
		_, err := t.ExecContext(ctx, q, args...)
		return err
	}
	t.db.statements.Add(1)
	t.atCommit = append(t.atCommit, atCommit{query: q, args: args})
	return nil
}

// Savepoint sets savepoint name (an identifier) in the transaction. RollbackTo returns to it,
// dropping the statements queued with ExecAtCommit since, as the server drops the writes.
func (t *Tx) Savepoint(ctx context.Context, name string) error {
	if _, err := t.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return err
	}
	if t.savepoints == nil {
		t.savepoints = map[string]int{}
	}
	t.savepoints[name] = len(t.atCommit)
	return nil
}

// RollbackTo rolls the transaction back to savepoint name, set by Savepoint, and keeps it set.
func (t *Tx) RollbackTo(ctx context.Context, name string) error {
	n, ok := t.savepoints[name]
	if !ok {
		return fmt.Errorf("sqldb: rollback to savepoint %q that was not set", name)
	}
	if _, err := t.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+name); err != nil {
		return err
	}
	t.atCommit = t.atCommit[:n]
	return nil
}

// commit commits tx, with the statements queued by ExecAtCommit in the same round trip on Postgres.
func (t *Tx) commit(ctx context.Context) error {
	if len(t.atCommit) == 0 {
		return t.Commit()
	}
	queued := t.atCommit
	t.atCommit = nil
	handed := false
	if err := t.conn.Raw(func(dc any) error {
		if c, ok := dc.(*pipeConn); ok {
			c.atCommit, handed = queued, true
		}
		return nil
	}); err != nil {
		_ = t.Rollback()
		return err
	}
	if !handed { // a connection not opened by OpenPostgres: one statement at a time
		for _, s := range queued {
			RecordStatement(ctx, s.query) // such a connection has no tracer of ours
			if _, err := t.Tx.ExecContext(ctx, s.query, s.args...); err != nil {
				_ = t.Rollback()
				return err
			}
		}
	}
	return t.Commit()
}

// openPipelined is stdlib.OpenDBFromPool whose connections send the statements a transaction
// queued with ExecAtCommit together with its COMMIT, and its BEGIN together with its first
// statement where they can (see pipeConn).
func openPipelined(pool *pgxpool.Pool) *sql.DB {
	db := sql.OpenDB(pipeConnector{stdlib.GetPoolConnector(pool)})
	db.SetMaxIdleConns(0) // idle connections belong to the pool (see stdlib.OpenDBFromPool)
	return db
}

type pipeConnector struct{ driver.Connector }

func (c pipeConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := dc.(*stdlib.Conn)
	if !ok {
		_ = dc.Close()
		return nil, fmt.Errorf("sqldb: unexpected driver connection %T", dc)
	}
	return &pipeConn{Conn: sc}, nil
}

// pipeConn is a pgx connection whose transactions' commits carry the statements handed to it,
// and whose transactions send their BEGIN late. BeginTx sends nothing: the BEGIN goes out
// alone just before the transaction's first statement (every statement, prepare and copy
// sends it first), or in one round trip with it when that statement is Tx.QueryRowScan, or
// with the COMMIT when every statement was queued with ExecAtCommit. A transaction that sent
// nothing commits and rolls back without a round trip.
type pipeConn struct {
	*stdlib.Conn
	atCommit []atCommit // handed over by Tx.commit just before database/sql commits
	begin    string     // the BEGIN of the open transaction, until it is sent
}

func (c *pipeConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	// Statements handed to a transaction that never reached its driver commit (database/sql ends a
	// transaction whose context ended without calling it) belong to no later one.
	c.atCommit = nil
	if c.Conn.Conn().IsClosed() {
		return nil, driver.ErrBadConn
	}
	begin, err := beginSQL(opts)
	if err != nil {
		return nil, err
	}
	c.begin = begin
	return &pipeTx{c: c, ctx: ctx}, nil
}

// beginSQL is the BEGIN statement for opts, as stdlib.Conn.BeginTx would send it.
func beginSQL(opts driver.TxOptions) (string, error) {
	q := "begin"
	switch sql.IsolationLevel(opts.Isolation) {
	case sql.LevelDefault:
	case sql.LevelReadUncommitted:
		q += " isolation level read uncommitted"
	case sql.LevelReadCommitted:
		q += " isolation level read committed"
	case sql.LevelRepeatableRead, sql.LevelSnapshot:
		q += " isolation level repeatable read"
	case sql.LevelSerializable:
		q += " isolation level serializable"
	default:
		return "", fmt.Errorf("sqldb: unsupported isolation level %v", opts.Isolation)
	}
	if opts.ReadOnly {
		q += " read only"
	}
	return q, nil
}

// sendBegin sends the open transaction's BEGIN if it has not been sent.
func (c *pipeConn) sendBegin(ctx context.Context) error {
	if c.begin == "" {
		return nil
	}
	q := c.begin
	c.begin = ""
	_, err := c.Conn.Conn().Exec(ctx, q)
	return err
}

func (c *pipeConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.sendBegin(ctx); err != nil {
		return nil, err
	}
	return c.Conn.ExecContext(ctx, q, args)
}

func (c *pipeConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.sendBegin(ctx); err != nil {
		return nil, err
	}
	return c.Conn.QueryContext(ctx, q, args)
}

func (c *pipeConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	if err := c.sendBegin(ctx); err != nil {
		return nil, err
	}
	st, err := c.Conn.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return pipeStmt{Stmt: st, c: c}, nil
}

func (c *pipeConn) Prepare(q string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), q)
}

func (c *pipeConn) ResetSession(ctx context.Context) error {
	c.atCommit, c.begin = nil, ""
	return c.Conn.ResetSession(ctx)
}

// pipeStmt is a statement prepared on a pipeConn: run in a later transaction, it sends that
// transaction's BEGIN first.
type pipeStmt struct {
	driver.Stmt
	c *pipeConn
}

func (s pipeStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := s.c.sendBegin(ctx); err != nil {
		return nil, err
	}
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s pipeStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if err := s.c.sendBegin(ctx); err != nil {
		return nil, err
	}
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

// pgxConnOf is the pgx connection under a Postgres driver connection, with its open
// transaction's BEGIN sent.
func pgxConnOf(ctx context.Context, dc any) (*pgx.Conn, error) {
	switch c := dc.(type) {
	case *pipeConn:
		if err := c.sendBegin(ctx); err != nil {
			return nil, err
		}
		return c.Conn.Conn(), nil
	case *stdlib.Conn:
		return c.Conn(), nil
	}
	return nil, fmt.Errorf("sqldb: unexpected driver connection %T", dc)
}

// QueryRowScan runs q, which returns at most one row, and scans that row into dest, as
// QueryRowContext(ctx, q, args...).Scan(dest...) does. Sent as the transaction's first statement
// on Postgres, it goes in one round trip with the transaction's BEGIN.
func (t *Tx) QueryRowScan(ctx context.Context, q string, args []any, dest ...any) error {
	if t.db.Dialect == Postgres {
		sent := false
		err := t.conn.Raw(func(dc any) error {
			c, ok := dc.(*pipeConn)
			if !ok || c.begin == "" {
				return nil
			}
			sent = true
			return c.beginWith(ctx, q, args, dest)
		})
		if sent || err != nil {
			return err
		}
	}
	return t.QueryRowContext(ctx, q, args...).Scan(dest...)
}

// beginWith sends the open transaction's BEGIN and q in one pipeline and scans q's row into dest.
func (c *pipeConn) beginWith(ctx context.Context, q string, args, dest []any) error {
	var b pgx.Batch
	b.Queue(c.begin)
	b.Queue(q, args...)
	if l := statementLogOf(ctx); l != nil { // the tracer sees no statement of a batch
		l.add(c.begin, q)
	}
	c.begin = ""
	br := c.Conn.Conn().SendBatch(ctx, &b)
	_, err := br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(dest...)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

type pipeTx struct {
	c   *pipeConn
	ctx context.Context // the transaction's, as stdlib's own transactions use
}

// ErrAtCommit marks the server's refusal of a statement queued with Tx.ExecAtCommit: the
// transaction rolled back, and the error wraps the server's. (A lost connection is returned as
// it is: the commit's outcome is unknown.)
var ErrAtCommit = errors.New("sqldb: a statement sent with COMMIT failed")

// errCommitRolledBack is a commit the server answered with ROLLBACK: the transaction had failed.
var errCommitRolledBack = errors.New("sqldb: commit rolled back")

func (t *pipeTx) Commit() error {
	queued, begin := t.c.atCommit, t.c.begin
	t.c.atCommit, t.c.begin = nil, ""
	if len(queued) == 0 {
		if begin != "" {
			return nil // the transaction sent nothing: there is nothing to commit
		}
		return t.end("commit")
	}
	var b pgx.Batch
	var sent []string
	if begin != "" {
		b.Queue(begin)
		sent = append(sent, begin)
	}
	for _, s := range queued {
		b.Queue(s.query, s.args...)
		sent = append(sent, s.query)
	}
	b.Queue("COMMIT")
	if l := statementLogOf(t.ctx); l != nil { // the tracer sees no statement of a batch
		l.add(append(sent, "commit")...) // one round trip; "commit" as a commit on its own shows
	}
	conn := t.c.Conn.Conn()
	br := conn.SendBatch(t.ctx, &b)
	var err error
	if begin != "" {
		_, err = br.Exec()
	}
	for i := 0; i < len(queued) && err == nil; i++ {
		if _, err = br.Exec(); err != nil {
			if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) {
				err = fmt.Errorf("%w: %w", ErrAtCommit, err)
			}
		}
	}
	if err == nil {
		var tag pgconn.CommandTag
		if tag, err = br.Exec(); err == nil && tag.String() != "COMMIT" {
			err = errCommitRolledBack
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil && conn.PgConn().TxStatus() != 'I' {
		// A statement failed and the server skipped the rest, COMMIT included: end the
		// transaction (a connection still in one would be discarded by the pool anyway).
		_ = t.end("rollback")
	}
	return err
}

func (t *pipeTx) Rollback() error {
	t.c.atCommit = nil
	if t.c.begin != "" {
		t.c.begin = "" // the transaction sent nothing: there is nothing to roll back
		return nil
	}
	return t.end("rollback")
}

// end sends q, COMMIT or ROLLBACK, as pgx's own transactions do: a connection whose transaction
// it could not end is closed, so that the pool discards it.
func (t *pipeTx) end(q string) error {
	conn := t.c.Conn.Conn()
	tag, err := conn.Exec(t.ctx, q)
	if err != nil {
		if q != "commit" || conn.PgConn().TxStatus() != 'I' {
			_ = conn.Close(t.ctx)
		}
		return err
	}
	if q == "commit" && tag.String() == "ROLLBACK" {
		return errCommitRolledBack
	}
	return nil
}
