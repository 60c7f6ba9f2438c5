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
// queued with ExecAtCommit together with its COMMIT.
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

// pipeConn is a pgx connection whose transactions' commits carry the statements handed to it.
type pipeConn struct {
	*stdlib.Conn
	atCommit []atCommit // handed over by Tx.commit just before database/sql commits
}

func (c *pipeConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	// Statements handed to a transaction that never reached its driver commit (database/sql ends a
	// transaction whose context ended without calling it) belong to no later one.
	c.atCommit = nil
	tx, err := c.Conn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &pipeTx{Tx: tx, c: c, ctx: ctx}, nil
}

// pgxConnOf is the pgx connection under a Postgres driver connection.
func pgxConnOf(dc any) (*pgx.Conn, bool) {
	switch c := dc.(type) {
	case *pipeConn:
		return c.Conn.Conn(), true
	case *stdlib.Conn:
		return c.Conn(), true
	}
	return nil, false
}

type pipeTx struct {
	driver.Tx
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
	queued := t.c.atCommit
	t.c.atCommit = nil
	if len(queued) == 0 {
		return t.Tx.Commit()
	}
	var b pgx.Batch
	for _, s := range queued {
		b.Queue(s.query, s.args...)
	}
	b.Queue("COMMIT")
	if l := statementLogOf(t.ctx); l != nil { // the tracer sees no statement of a batch
		sent := make([]string, 0, len(queued)+1)
		for _, s := range queued {
			sent = append(sent, s.query)
		}
		l.add(append(sent, "commit")...) // one round trip; "commit" as a commit on its own shows
	}
	conn := t.c.Conn.Conn()
	br := conn.SendBatch(t.ctx, &b)
	var err error
	for range queued {
		if _, err = br.Exec(); err != nil {
			if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) {
				err = fmt.Errorf("%w: %w", ErrAtCommit, err)
			}
			break
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
		_ = t.Rollback()
	}
	return err
}
