package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
)

// Group commit. Appends made at the same time are sent together: a writer takes every append
// queued (at most MaxGroup) and sends their statements in one pipeline (pgx.Batch), which the
// server runs as one implicit transaction with one commit. The batch pays one round trip and one
// commit where each append paid its own; each statement is the one an append sends alone, so its
// checks (the expected revision, its companions' unique keys) are unchanged. Every append is
// answered only after the commit.
//
// A statement the server refuses aborts the whole transaction, so nothing of the batch is written;
// each append of the batch then runs again alone, in its own transaction, and gets its own outcome.
// An error that is not the server's refusal (a lost connection) leaves the outcome unknown, as for
// an append sent alone: it is returned to every append of the batch, and none is sent again.
//
// A batch runs without its callers' cancellation (ending one caller must not abort the others'
// appends), under a time limit of its own (Options.BatchTimeout, from the moment a writer takes
// it, waiting for a pool connection included, to its commit, its reruns included): a server that
// stops answering, or a lock held by a transaction that never ends, would otherwise hold a writer
// until TCP gives up, and with both writers held every append would wait. When the limit passes
// pgx closes the connection, and the outcome of each append still unanswered is unknown, as for
// a lost connection.

// Appends that create their streams (NoStream) and carry the same companions, next to each other in
// a batch's order, go as one statement: their events in one array per column, each companion's
// rows in one VALUES list, in the batch's order. Postgres then plans and starts one statement for
// them all instead of one per append; they already shared a transaction, so the outcome is the
// same: the statement inserts every row or fails, and a refusal sends each append again alone.
// (With pgbench on the append's four tables, ten appends as ten pipelined statements cost Postgres
// 111–115 µs of CPU each, as one statement 85–92 µs.)

// MaxGroup bounds how many appends share one transaction.
const MaxGroup = 256

// GroupWriters is how many batches a Store sends at once: one fills while the other commits, and a
// batch held up (by a lock another transaction holds on the same stream) does not hold up every
// append. Through casebook serve with 32 clients on two cores, one writer and two served within
// noise of each other (1,059–1,328 and 1,048–1,230 req/s, 3 runs each), three no more (870–1,165).
const GroupWriters = 2

// appendGroup is the queue of appends waiting for a writer, and its counters.
type appendGroup struct {
	mu      sync.Mutex
	queue   []*insertCall
	writers int // writers running, at most max
	max     int
	timeout time.Duration // a batch's time limit

	sqldb.GroupCounters

	// queued and taken, when set (tests), are called after an append is queued and after a writer
	// takes a batch.
	queued func()
	taken  func(n int)
}

type insertCall struct {
	ctx context.Context
	// order is what a batch orders the statement by: the name it claims, else its stream.
	order string
	query string
	args  []any
	merge *newStream // set when the append may share its statement with others
	res   eventstore.AppendResult
	n     int
	err   error
	done  chan struct{}
}

// GroupStats implements the counters of sqldb.GroupStats for the store's appends.
func (s *Store) GroupStats() sqldb.GroupStats {
	g := &s.group
	g.mu.Lock()
	waiting := len(g.queue)
	g.mu.Unlock()
	return g.Stats(waiting)
}

// insertGrouped runs an append statement in a transaction shared with the appends queued with it
// and returns once that transaction has ended. When ctx ends while the append is still queued, it
// returns ctx.Err() and the statement is never sent; once taken, its outcome is awaited (the
// statement runs without ctx's cancellation: ending one caller must not abort the others' batch).
func (s *Store) insertGrouped(ctx context.Context, order, query string, args []any, merge *newStream) (eventstore.AppendResult, int, error) {
	g := &s.group
	me := &insertCall{ctx: context.WithoutCancel(ctx), order: order, query: query, args: args, merge: merge, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, me)
	if g.writers < g.max {
		g.writers++
		go s.writeGroups()
	}
	g.mu.Unlock()
	if g.queued != nil {
		g.queued()
	}
	select {
	case <-me.done:
		return me.res, me.n, me.err
	case <-ctx.Done():
	}
	if sqldb.Withdraw(&g.mu, &g.queue, me) {
		g.Abandoned()
		return eventstore.AppendResult{}, 0, ctx.Err()
	}
	<-me.done
	return me.res, me.n, me.err
}

// writeGroups sends batches until the queue is empty, then ends.
func (s *Store) writeGroups() {
	g := &s.group
	for {
		g.mu.Lock()
		n := min(len(g.queue), MaxGroup)
		if n == 0 {
			g.writers--
			g.mu.Unlock()
			return
		}
		batch := slices.Clone(g.queue[:n])
		g.queue = slices.Delete(g.queue, 0, n)
		g.mu.Unlock()
		if g.taken != nil {
			g.taken(n)
		}
		start := time.Now()
		s.sendGroup(batch)
		g.Committed(n, time.Since(start))
		for _, c := range batch {
			close(c.done)
		}
	}
}

// sendGroup runs batch's statements in one transaction, or each alone when the server refused
// one of them. The statements go in the order of what they contend for (appends to one stream in
// arrival order): the name an append claims, else its stream. Every transaction then takes the
// locks of those rows in one order, so two batches that insert the same claims or new streams
// (one intake retried at two replicas) wait for each other instead of deadlocking, and the second
// is refused at once rather than after deadlock_timeout. (A claiming append's own stream is new
// and named by a random id: no other append contends for it.)
func (s *Store) sendGroup(batch []*insertCall) {
	deadline := time.Now().Add(s.group.timeout)
	alone := func(c *insertCall) {
		ctx, cancel := context.WithDeadline(c.ctx, deadline)
		defer cancel()
		c.res, c.n, c.err = s.insert(ctx, c.query, c.args)
	}
	defer func() {
		timedOut := false
		for _, c := range batch {
			if errors.Is(c.err, context.DeadlineExceeded) {
				c.err = fmt.Errorf("eventstore/postgres: append batch of %d got no answer within %s, outcome unknown: %w", len(batch), s.group.timeout, c.err)
				timedOut = true
			}
		}
		if timedOut {
			s.group.TimedOut()
		}
	}()
	if len(batch) == 1 {
		alone(batch[0])
		return
	}
	slices.SortStableFunc(batch, func(a, b *insertCall) int { return strings.Compare(a.order, b.order) })
	units := statements(batch)
	b := &pgx.Batch{}
	for _, u := range units {
		query, args := u[0].query, u[0].args
		if len(u) > 1 {
			query, args = mergedStatement(u)
		}
		b.Queue(query, args...)
		for _, c := range u {
			sqldb.RecordStatement(c.ctx, query) // the pool's tracer sees no pipeline
		}
	}
	ctx, cancel := context.WithDeadline(batch[0].ctx, deadline)
	defer cancel()
	br := s.pool.SendBatch(ctx, b)
	var failed error
	for _, u := range units {
		rows, err := br.Query()
		if err == nil {
			if len(u) == 1 {
				u[0].res, u[0].n, err = scanInserted(rows)
			} else {
				err = scanMerged(rows, u)
			}
		}
		if err != nil && failed == nil {
			failed = err
		}
	}
	if err := br.Close(); err != nil && failed == nil {
		failed = err // the commit
	}
	if failed == nil {
		return
	}
	if !refused(failed) {
		for _, c := range batch {
			c.res, c.n, c.err = eventstore.AppendResult{}, 0, failed
		}
		return
	}
	s.group.Retried()
	for _, c := range batch {
		alone(c)
	}
}

// refused reports whether err is the server's refusal of a statement (severity ERROR), after which
// the transaction is rolled back and the session goes on; FATAL and PANIC end the session, and any
// other error (the network's) leaves it unknown whether the commit happened.
func refused(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	severity := pgErr.SeverityUnlocalized // the server's locale does not translate it
	if severity == "" {
		severity = pgErr.Severity
	}
	return severity == "ERROR"
}

// newStream is an append that creates its stream (NoStream): its events' columns, and its
// companions with their values, in order.
type newStream struct {
	stream     string
	at         time.Time
	ids, types []string
	data, meta [][]byte
	companions []*eventstore.Companion
	values     []any
}

// statements splits a batch, in its order, into the appends each statement carries: a run of
// appends creating their streams with one statement text (the same companions) shares statements,
// every other append has its own. A run goes in parts of 2^k appends, the largest first: a merged
// statement's text depends on how many appends it carries, and each connection keeps every text
// it ran prepared (pgx's statement cache), so one shape has at most 8 texts (2 to MaxGroup).
func statements(batch []*insertCall) [][]*insertCall {
	var out [][]*insertCall
	for i := 0; i < len(batch); {
		j := i + 1
		if batch[i].merge != nil {
			for j < len(batch) && batch[j].merge != nil && batch[j].query == batch[i].query {
				j++
			}
		}
		for i < j {
			n := 1 << (bits.Len(uint(j-i)) - 1)
			out = append(out, batch[i:i+n])
			i += n
		}
	}
	return out
}

// mergedStatement is one statement that inserts the events and companion rows of every append of
// run (each creating its stream, with the same companions), in run's order, and returns each
// event's stream, position and revision.
func mergedStatement(run []*insertCall) (string, []any) {
	var streams, ids, types []string
	var revisions []int64
	var data, meta [][]byte
	var at []time.Time
	for _, c := range run {
		m := c.merge
		for i := range m.ids {
			streams = append(streams, m.stream)
			revisions = append(revisions, int64(i))
			at = append(at, m.at)
		}
		ids = append(ids, m.ids...)
		types = append(types, m.types...)
		data = append(data, m.data...)
		meta = append(meta, m.meta...)
	}
	args := []any{streams, revisions, ids, types, data, meta, at}
	first := run[0].merge
	// Each companion's values, append by append: the order mergedText numbers them in.
	off := 0 // where this companion's values start among each append's
	for _, comp := range first.companions {
		for _, c := range run {
			args = append(args, c.merge.values[off:off+len(comp.Columns)]...)
		}
		off += len(comp.Columns)
	}
	return mergedText(len(run), first.companions), args
}

// mergedText is the text of a merged statement of n appends with companions cs: the events as
// arrays ($1 to $7), then each companion's rows in one VALUES list, append by append.
func mergedText(n int, cs []*eventstore.Companion) string {
	var b strings.Builder
	b.WriteString(`WITH ins AS (` + insertInto + `
	SELECT e.stream, e.revision, e.id, e.type, e.data, e.metadata, e.at
	FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bytea[], $6::bytea[], $7::timestamptz[])
		WITH ORDINALITY AS e(stream, revision, id, type, data, metadata, at, ord)
	ORDER BY e.ord
	RETURNING stream, xid, seq, revision)`)
	p := 7
	for k, comp := range cs {
		writeCompanionInsert(&b, k, comp)
		b.WriteString(` VALUES `)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for j := range comp.Columns {
				if j > 0 {
					b.WriteString(", ")
				}
				p++
				b.WriteByte('$')
				b.WriteString(strconv.Itoa(p))
			}
			b.WriteByte(')')
		}
		b.WriteByte(')')
	}
	b.WriteString(`
	SELECT stream, xid, seq, revision FROM ins`)
	return b.String()
}

// scanMerged reads a merged statement's rows into each append of run: where its last event
// landed and how many it inserted.
func scanMerged(rows pgx.Rows, run []*insertCall) error {
	defer rows.Close()
	byStream := make(map[string]*insertCall, len(run))
	for _, c := range run {
		byStream[c.merge.stream] = c
	}
	for rows.Next() {
		var stream string
		var xid uint64
		var seq, rev int64
		if err := rows.Scan(&stream, &xid, &seq, &rev); err != nil {
			return err
		}
		c := byStream[stream]
		if c == nil {
			return fmt.Errorf("eventstore/postgres: a grouped statement returned stream %s, which none of its appends named", stream)
		}
		keepLast(&c.res, xid, seq, rev)
		c.n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range run {
		if want := len(c.merge.ids); c.n != want {
			return fmt.Errorf("eventstore/postgres: a grouped statement inserted %d of the %d events of %s", c.n, want, c.merge.stream)
		}
	}
	return nil
}
