package sqldb

import (
	"context"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// StatementLog records the statements run on behalf of one context, for tests and benchmarks
// that count what one request costs in round trips. On Postgres it sees every statement sent on a
// handle's pool (the event store's included, BEGIN and COMMIT too) in the order they are sent, a
// statement queued with Tx.ExecAtCommit when it goes with its COMMIT; on SQLite the statements run
// through DB and Tx (not those run on the embedded *sql.DB directly).
type StatementLog struct {
	mu    sync.Mutex
	list  []string
	trips []int // list[i] went in round trip trips[i]
}

type statementLogKey struct{}

// WithStatementLog returns a context whose statements are recorded in the returned log.
func WithStatementLog(ctx context.Context) (context.Context, *StatementLog) {
	l := &StatementLog{}
	return context.WithValue(ctx, statementLogKey{}, l), l
}

// Statements returns the statements recorded so far, whitespace-normalised, in order.
func (l *StatementLog) Statements() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.list...)
}

// RoundTrips returns the statements recorded so far grouped by the round trip that sent them: one
// statement each, but for those queued with Tx.ExecAtCommit, which go with their COMMIT.
func (l *StatementLog) RoundTrips() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][]string
	for i, q := range l.list {
		if i == 0 || l.trips[i] != l.trips[i-1] {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], q)
	}
	return out
}

// add records qs as one round trip.
func (l *StatementLog) add(qs ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	trip := 1
	if n := len(l.trips); n > 0 {
		trip = l.trips[n-1] + 1
	}
	for _, q := range qs {
		l.list = append(l.list, strings.Join(strings.Fields(q), " "))
		l.trips = append(l.trips, trip)
	}
}

// logStatement records q in ctx's log on SQLite; Postgres statements are recorded by the pool's
// tracer, which also sees those sent without DB.
func (db *DB) logStatement(ctx context.Context, q string) {
	if db.Dialect != SQLite {
		return
	}
	RecordStatement(ctx, q)
}

// RecordStatement records q in ctx's StatementLog, if it has one: for a statement sent on behalf
// of ctx in another context's pipeline (pgx.Batch), which the pool's tracer does not see.
func RecordStatement(ctx context.Context, q string) {
	if l := statementLogOf(ctx); l != nil {
		l.add(q)
	}
}

// statementLogOf is ctx's StatementLog, or nil.
func statementLogOf(ctx context.Context) *StatementLog {
	l, _ := ctx.Value(statementLogKey{}).(*StatementLog)
	return l
}

// poolTracer records each statement a pool connection sends in its context's StatementLog.
type poolTracer struct{}

func (poolTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	RecordStatement(ctx, d.SQL)
	return ctx
}

func (poolTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
