package sqldb

import (
	"context"
	"database/sql"
	"strings"
	"sync"
)

// Prepared statements. The SQLite driver parses a statement's text on every call made with a
// query string (ExecContext, QueryContext): at intake rates that parsing was a fifth of the
// process's CPU. So on SQLite, DB and Tx route their ExecContext, QueryContext and QueryRowContext
// through a *sql.Stmt per query text, which database/sql prepares once on each connection and
// reuses (a Tx borrows its connection's copy with Tx.StmtContext). Postgres needs nothing here:
// pgx's database/sql driver already prepares each query text once per connection and reuses it
// (its default statement cache, see TestPostgresPreparesOncePerConnection).

// Querier is what *sql.DB, *sql.Tx, *DB and *Tx share: code that takes one runs prepared on
// SQLite when given a *DB or *Tx.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ Querier = (*DB)(nil)
	_ Querier = (*Tx)(nil)
	_ Querier = (*sql.Tx)(nil)
)

// maxCachedStmts bounds the statements a handle keeps; queries beyond it are parsed per call.
const maxCachedStmts = 512

type stmtCache struct {
	mu      sync.RWMutex
	m       map[string]*sql.Stmt
	pending map[string]bool // being prepared in the background
	closed  bool
	bg      sync.WaitGroup     // background prepares; Close cancels and waits for them
	closing context.Context    // ends when Close begins (made with the first background prepare)
	stop    context.CancelFunc // ends closing
}

// cacheable reports whether q is worth keeping prepared: one DML or query statement, not a script
// or schema change (those run once, and a prepared DDL statement only pins memory).
func cacheable(q string) bool {
	if strings.Contains(q, ";") {
		return false
	}
	head := strings.TrimSpace(q)
	if len(head) > 10 {
		head = head[:10]
	}
	head = strings.ToUpper(head)
	for _, p := range []string{"SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "REPLACE", "SAVEPOINT", "RELEASE", "ROLLBACK T"} {
		if strings.HasPrefix(head, p) {
			return true
		}
	}
	return false
}

// prepared returns q prepared on db, or nil when it is not kept prepared (Postgres, a script, a
// full cache, or a statement that does not prepare: the caller's plain call then reports why).
// Preparing takes a connection of its own: a caller inside a transaction (inTx) may hold the last
// free one, so its miss is prepared in the background and this call runs unprepared.
func (db *DB) prepared(ctx context.Context, q string, inTx bool) *sql.Stmt {
	if db.Dialect != SQLite || db.DB == nil {
		return nil
	}
	c := &db.stmts
	c.mu.RLock()
	st, ok := c.m[q]
	n := len(c.m)
	c.mu.RUnlock()
	if ok {
		return st
	}
	if n >= maxCachedStmts || !cacheable(q) {
		return nil
	}
	if inTx {
		c.mu.Lock()
		if !c.closed && !c.pending[q] {
			if c.pending == nil {
				c.pending = make(map[string]bool)
			}
			c.pending[q] = true
			if c.closing == nil {
				c.closing, c.stop = context.WithCancel(context.Background())
			}
			closing := c.closing
			c.bg.Go(func() {
				ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
				defer cancel()
				defer context.AfterFunc(closing, cancel)()
				db.prepare(ctx, q)
			})
		}
		c.mu.Unlock()
		return nil
	}
	return db.prepare(ctx, q)
}

// prepare prepares q and keeps it, unless another caller kept it first or db is closed.
func (db *DB) prepare(ctx context.Context, q string) *sql.Stmt {
	c := &db.stmts
	st, err := db.PrepareContext(ctx, q)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, q)
	if err != nil {
		return nil
	}
	if kept, ok := c.m[q]; ok || c.closed {
		_ = st.Close() //nolint:sqlclosecheck // a duplicate of the kept statement, dropped at once
		return kept
	}
	if c.m == nil {
		c.m = make(map[string]*sql.Stmt)
	}
	c.m[q] = st
	return st
}

// Statements counts the statements run through db and its transactions (Tx) since it was opened.
func (db *DB) Statements() uint64 { return db.statements.Load() }

// CachedStatements reports how many query texts db keeps prepared.
func (db *DB) CachedStatements() int {
	db.stmts.mu.RLock()
	defer db.stmts.mu.RUnlock()
	return len(db.stmts.m)
}

// Close closes the kept statements, then the handle.
func (db *DB) Close() error {
	db.stmts.mu.Lock()
	for _, st := range db.stmts.m {
		_ = st.Close()
	}
	db.stmts.m, db.stmts.closed = nil, true
	if db.stmts.stop != nil {
		db.stmts.stop()
	}
	db.stmts.mu.Unlock()
	// A background prepare may be opening a connection: closing the handle under it would leave
	// that connection to be closed later, after the caller has moved or removed the file.
	db.stmts.bg.Wait()
	if db.checkpoints != nil {
		db.checkpoints.close()
	}
	err := db.DB.Close()
	if db.pool != nil {
		db.pool.Close()
	}
	return err
}

// ExecContext runs q, prepared once per connection on SQLite.
func (db *DB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	db.statements.Add(1)
	db.logStatement(ctx, q)
	if st := db.prepared(ctx, q, false); st != nil { //nolint:sqlclosecheck // kept prepared; DB.Close closes it
		return st.ExecContext(ctx, args...)
	}
	return db.DB.ExecContext(ctx, q, args...)
}

// QueryContext runs q, prepared once per connection on SQLite.
func (db *DB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	db.statements.Add(1)
	db.logStatement(ctx, q)
	if st := db.prepared(ctx, q, false); st != nil { //nolint:sqlclosecheck // kept prepared; DB.Close closes it
		return st.QueryContext(ctx, args...)
	}
	return db.DB.QueryContext(ctx, q, args...)
}

// QueryRowContext runs q, prepared once per connection on SQLite.
func (db *DB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	db.statements.Add(1)
	db.logStatement(ctx, q)
	if st := db.prepared(ctx, q, false); st != nil { //nolint:sqlclosecheck // kept prepared; DB.Close closes it
		return st.QueryRowContext(ctx, args...)
	}
	return db.DB.QueryRowContext(ctx, q, args...)
}

// ExecContext runs q in the transaction, with the connection's prepared copy on SQLite.
func (t *Tx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	t.db.statements.Add(1)
	t.db.logStatement(ctx, q)
	if st := t.db.prepared(ctx, q, true); st != nil {
		return t.Tx.StmtContext(ctx, st).ExecContext(ctx, args...) //nolint:sqlclosecheck // a transaction closes its statements when it ends
	}
	return t.Tx.ExecContext(ctx, q, args...)
}

// QueryContext runs q in the transaction, with the connection's prepared copy on SQLite.
func (t *Tx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	t.db.statements.Add(1)
	t.db.logStatement(ctx, q)
	if st := t.db.prepared(ctx, q, true); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryContext(ctx, args...) //nolint:sqlclosecheck // a transaction closes its statements when it ends
	}
	return t.Tx.QueryContext(ctx, q, args...)
}

// QueryRowContext runs q in the transaction, with the connection's prepared copy on SQLite.
func (t *Tx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	t.db.statements.Add(1)
	t.db.logStatement(ctx, q)
	if st := t.db.prepared(ctx, q, true); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryRowContext(ctx, args...) //nolint:sqlclosecheck // a transaction closes its statements when it ends
	}
	return t.Tx.QueryRowContext(ctx, q, args...)
}
