package sqldb_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestPanicInTransactionHelpers: a panic inside InConnTx, InTx or Group reaches the caller (the
// helpers swallow nothing), its writes are rolled back, and the next transaction on the same
// database takes the same row lock (SQLite: the write lock and the writer gate) and commits. Before
// the fix InConnTx's deferred conn.Close waited for the open transaction for ever, holding all three.
func TestPanicInTransactionHelpers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, `CREATE TABLE counter (k TEXT PRIMARY KEY, n BIGINT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO counter (k, n) VALUES ('x', 0)`); err != nil {
			t.Fatal(err)
		}
		bump := func(ctx context.Context, q interface {
			ExecContext(context.Context, string, ...any) (sql.Result, error)
		}) error {
			_, err := q.ExecContext(ctx, `UPDATE counter SET n = n + 1 WHERE k = 'x'`)
			return err
		}
		helpers := []struct {
			name string
			run  func(ctx context.Context, fn func(context.Context, *sql.Tx) error) error
		}{
			{"InConnTx", func(ctx context.Context, fn func(context.Context, *sql.Tx) error) error {
				return sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error { return fn(ctx, tx.Tx) })
			}},
			{"InTx", func(ctx context.Context, fn func(context.Context, *sql.Tx) error) error {
				return sqldb.InTx(ctx, db, func(tx *sql.Tx) error { return fn(ctx, tx) })
			}},
			{"Group", func(ctx context.Context, fn func(context.Context, *sql.Tx) error) error {
				return sqldb.Group(ctx, db, func(ctx context.Context, tx *sqldb.Tx) error { return fn(ctx, tx.Tx) })
			}},
		}
		want := 0
		for _, h := range helpers {
			// Bounds the wait for a deadlock only; a healthy run never comes near it.
			bound, cancel := context.WithTimeout(ctx, time.Minute)
			recovered := make(chan any, 1)
			go func() {
				defer func() { recovered <- recover() }()
				_ = h.run(ctx, func(ctx context.Context, tx *sql.Tx) error {
					if err := bump(ctx, tx); err != nil {
						return err
					}
					panic("boom in " + h.name)
				})
			}()
			select {
			case v := <-recovered:
				if v != "boom in "+h.name {
					t.Fatalf("%s: the caller recovered %v, want the callback's panic", h.name, v)
				}
			case <-bound.Done():
				t.Fatalf("%s: the panic never reached the caller: the helper is stuck unwinding", h.name)
			}
			if err := sqldb.InTx(bound, db, func(tx *sql.Tx) error { return bump(bound, tx) }); err != nil {
				t.Fatalf("%s: the next transaction after the panic: %v", h.name, err)
			}
			want++
			var n int
			if err := db.QueryRowContext(ctx, `SELECT n FROM counter WHERE k = 'x'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != want {
				t.Fatalf("%s: counter = %d, want %d: the panicking transaction's write must be rolled back", h.name, n, want)
			}
			cancel()
		}
		if l := db.WriterLane(); l.Held {
			t.Fatalf("writer lane still held after the transactions: %+v", l)
		}
	})
}

// TestWriterLaneShowsAStuckHolder: WriterLane tells a held lane and its holder's turn, which stays
// the same while that one holder keeps it, and moves on once it is released.
func TestWriterLaneShowsAStuckHolder(t *testing.T) {
	db, err := sqldb.OpenSQLite(fmt.Sprintf("%s/casebook.db", t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if l := db.WriterLane(); l.Held {
		t.Fatalf("a fresh file's lane is held: %+v", l)
	}
	entered, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- sqldb.InTx(t.Context(), db, func(*sql.Tx) error { close(entered); <-release; return nil })
	}()
	<-entered
	first := db.WriterLane()
	if !first.Held {
		t.Fatalf("lane not held inside a transaction: %+v", first)
	}
	if again := db.WriterLane(); again.Turn != first.Turn || again.HeldFor < first.HeldFor {
		t.Fatalf("the same holder's lane changed turn: %+v then %+v", first, again)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := sqldb.InTx(t.Context(), db, func(*sql.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if l := db.WriterLane(); l.Held || l.Turn <= first.Turn {
		t.Fatalf("after release: %+v, want free and a later turn than %d", l, first.Turn)
	}
}
