package sqldb_test

import (
	"database/sql"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestExecAtCommitRunsWithTheCommit: queued statements run, in order, when the transaction
// commits; on Postgres the transaction has taken no transaction id before then (it holds back no
// reader of the event log while it runs), and a StatementLog shows them in the COMMIT's round trip.
func TestExecAtCommitRunsWithTheCommit(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx, log := sqldb.WithStatementLog(t.Context())
		if _, err := db.ExecContext(ctx, `CREATE TABLE queued (n BIGINT PRIMARY KEY, note TEXT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
			for _, q := range []string{`INSERT INTO queued (n, note) VALUES (?, ?)`, `UPDATE queued SET note = note || ? WHERE n = 1`} {
				args := []any{1, "first"}
				if q[0] == 'U' {
					args = []any{", then second"}
				}
				if err := tx.ExecAtCommit(ctx, db.Rebind(q), args...); err != nil {
					return err
				}
			}
			if db.Dialect != sqldb.Postgres {
				return nil
			}
			var none bool
			if err := tx.QueryRowContext(ctx, `SELECT pg_current_xact_id_if_assigned() IS NULL`).Scan(&none); err != nil {
				return err
			}
			if !none {
				t.Error("the transaction took an id before its commit: a queued statement ran early")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var note string
		if err := db.QueryRowContext(ctx, `SELECT note FROM queued WHERE n = 1`).Scan(&note); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff("first, then second", note); diff != "" {
			t.Fatalf("row after commit (-want +got):\n%s", diff)
		}
		insert, update := "INSERT INTO queued (n, note) VALUES (?, ?)", "UPDATE queued SET note = note || ? WHERE n = 1"
		want := [][]string{{"CREATE TABLE queued (n BIGINT PRIMARY KEY, note TEXT NOT NULL)"}, {insert}, {update}}
		if db.Dialect == sqldb.Postgres {
			want = [][]string{{"CREATE TABLE queued (n BIGINT PRIMARY KEY, note TEXT NOT NULL)"}, {"begin"},
				{"SELECT pg_current_xact_id_if_assigned() IS NULL"}, {db.Rebind(insert), db.Rebind(update), "commit"}}
		}
		want = append(want, []string{"SELECT note FROM queued WHERE n = 1"})
		if diff := cmp.Diff(want, log.RoundTrips()); diff != "" {
			t.Fatalf("round trips (-want +got):\n%s", diff)
		}
	})
}

// TestExecAtCommitFailureRollsBack: a queued statement the database refuses fails the commit and
// takes the transaction's other writes with it; the error says so on Postgres and wraps the
// database's; the connection serves the next transaction.
func TestExecAtCommitFailureRollsBack(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, `CREATE TABLE queued (n BIGINT PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO queued (n) VALUES (1)`); err != nil {
			t.Fatal(err)
		}
		err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO queued (n) VALUES (2)`); err != nil {
				return err
			}
			if err := tx.ExecAtCommit(ctx, `INSERT INTO queued (n) VALUES (1)`); err != nil {
				return err // SQLite runs it at once
			}
			return tx.ExecAtCommit(ctx, `INSERT INTO queued (n) VALUES (3)`)
		})
		if !sqldb.IsUniqueViolation(err) {
			t.Fatalf("InConnTx = %v, want the unique violation", err)
		}
		if got, want := errors.Is(err, sqldb.ErrAtCommit), db.Dialect == sqldb.Postgres; got != want {
			t.Errorf("errors.Is(%v, ErrAtCommit) = %v, want %v", err, got, want)
		}
		for range 2 { // the pool may hand out the same connection: it must be out of the failed transaction
			if err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
				return tx.ExecAtCommit(ctx, `UPDATE queued SET n = n + 10 WHERE n >= 10 OR n = 1`)
			}); err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff([]string{"21"}, dbtest.Strings(t, db, `SELECT CAST(n AS TEXT) FROM queued ORDER BY n`)); diff != "" {
			t.Fatalf("rows (-want +got):\n%s", diff)
		}
	})
}

// TestStatementsOfAnUncommittedTransactionRunInNoOther: statements handed to a connection for a
// commit that never happened (database/sql ends a transaction whose context ended without calling
// the driver's commit) are dropped when the connection's next transaction begins.
func TestStatementsOfAnUncommittedTransactionRunInNoOther(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, `CREATE TABLE stale (n BIGINT)`); err != nil {
			t.Fatal(err)
		}
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		handed := sqldb.HandAtCommit(conn, `INSERT INTO stale (n) VALUES (1)`)
		if want := db.Dialect == sqldb.Postgres; handed != want {
			t.Fatalf("the connection took statements for its commit: %v, want %v (SQLite runs them at once)", handed, want)
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := dbtest.Strings(t, db, `SELECT CAST(count(*) AS TEXT) FROM stale`); !slices.Equal(got, []string{"0"}) {
			t.Fatalf("rows after an unrelated commit: %v, want 0", got)
		}
	})
}

// TestRollbackToDropsQueuedStatements: a rollback to a savepoint drops the statements queued with
// ExecAtCommit after it, as it drops the writes made after it; those queued before it, and after
// the rollback, run with the commit.
func TestRollbackToDropsQueuedStatements(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, `CREATE TABLE queued (n BIGINT PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		insert := db.Rebind(`INSERT INTO queued (n) VALUES (?)`)
		err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
			if err := tx.ExecAtCommit(ctx, insert, 1); err != nil {
				return err
			}
			if err := tx.Savepoint(ctx, "s"); err != nil {
				return err
			}
			if err := tx.ExecAtCommit(ctx, insert, 2); err != nil {
				return err
			}
			if err := tx.RollbackTo(ctx, "s"); err != nil {
				return err
			}
			if err := tx.RollbackTo(ctx, "unset"); err == nil {
				t.Error("a rollback to a savepoint never set succeeded")
			}
			return tx.ExecAtCommit(ctx, insert, 3)
		})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"1", "3"}, dbtest.Strings(t, db, `SELECT CAST(n AS TEXT) FROM queued ORDER BY n`)); diff != "" {
			t.Fatalf("rows after commit (-want +got):\n%s", diff)
		}
	})
}

// TestBeginGoesWithTheFirstRow: a transaction's first statement run with QueryRowScan goes in one
// round trip with its BEGIN on Postgres, and runs inside the transaction: it sees the
// transaction's id, and a rollback undoes what the transaction wrote after it. A first statement
// that fails fails the transaction, which is rolled back, and every connection serves the next one;
// one without a row reports sql.ErrNoRows.
func TestBeginGoesWithTheFirstRow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx, log := sqldb.WithStatementLog(t.Context())
		if _, err := db.ExecContext(t.Context(), `CREATE TABLE begun (n BIGINT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		count, insert, xid := `SELECT count(*) FROM begun`, `INSERT INTO begun (n) VALUES (1)`, `SELECT pg_current_xact_id()::text`
		errBoom := errors.New("boom")
		err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
			var n int
			if err := tx.QueryRowScan(ctx, count, nil, &n); err != nil || n != 0 {
				t.Fatalf("first row: %d, %v", n, err)
			}
			if _, err := tx.ExecContext(ctx, insert); err != nil {
				return err
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("InConnTx = %v, want the callback's error", err)
		}
		if got := dbtest.Strings(t, db, `SELECT CAST(count(*) AS TEXT) FROM begun`); !slices.Equal(got, []string{"0"}) {
			t.Fatalf("rows after the rollback: %v, want 0", got)
		}
		// No row is sql.ErrNoRows, as from QueryRowContext.
		err = sqldb.InConnTx(t.Context(), db, func(tx *sqldb.Tx) error {
			var n int
			return tx.QueryRowScan(t.Context(), `SELECT n FROM begun`, nil, &n)
		})
		if !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("a first statement without a row: %v, want sql.ErrNoRows", err)
		}
		if db.Dialect != sqldb.Postgres {
			return
		}
		if diff := cmp.Diff([][]string{{"begin", count}, {insert}, {"rollback"}}, log.RoundTrips()); diff != "" {
			t.Fatalf("round trips (-want +got):\n%s", diff)
		}
		err = sqldb.InConnTx(t.Context(), db, func(tx *sqldb.Tx) error {
			var first, later string
			if err := tx.QueryRowScan(t.Context(), xid, nil, &first); err != nil {
				return err
			}
			if err := tx.QueryRowContext(t.Context(), xid).Scan(&later); err != nil {
				return err
			}
			if first != later {
				t.Errorf("the first statement ran in transaction %s, the next in %s: want one transaction", first, later)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		failing := `SELECT 1 / (SELECT count(*) FROM begun)`
		fctx, flog := sqldb.WithStatementLog(t.Context())
		err = sqldb.InConnTx(fctx, db, func(tx *sqldb.Tx) error {
			var n int
			return tx.QueryRowScan(fctx, failing, nil, &n)
		})
		if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "22012" {
			t.Fatalf("a failing first statement: %v, want the server's division by zero", err)
		}
		// The failed transaction is ended with a ROLLBACK, and every connection at once, that one
		// included, serves a read (stdlib also discards a connection returned in a transaction).
		if diff := cmp.Diff([][]string{{"begin", failing}, {"rollback"}}, flog.RoundTrips()); diff != "" {
			t.Fatalf("round trips of the failed transaction (-want +got):\n%s", diff)
		}
		conns := make([]*sql.Conn, db.PgxPool().Stat().MaxConns())
		for i := range conns {
			c, err := db.Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			conns[i] = c
		}
		for i, c := range conns {
			var n int
			if err := c.QueryRowContext(t.Context(), count).Scan(&n); err != nil || n != 0 {
				t.Fatalf("connection %d of %d: %d rows, %v; want 0", i+1, len(conns), n, err)
			}
		}
	})
}

// TestUnsentTransactionSendsNothing: on Postgres a transaction that ran no statement commits and
// rolls back without a round trip, one whose statements were all queued with ExecAtCommit takes
// one round trip, BEGIN to COMMIT, and a bulk copy sends the BEGIN before it, so a rollback undoes
// the copy.
func TestUnsentTransactionSendsNothing(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		if _, err := db.ExecContext(t.Context(), `CREATE TABLE copied (k TEXT NOT NULL, n BIGINT NOT NULL, note TEXT)`); err != nil {
			t.Fatal(err)
		}
		ctx, log := sqldb.WithStatementLog(t.Context())
		errBoom := errors.New("boom")
		if err := sqldb.InConnTx(ctx, db, func(*sqldb.Tx) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := sqldb.InConnTx(ctx, db, func(*sqldb.Tx) error { return errBoom }); !errors.Is(err, errBoom) {
			t.Fatalf("InConnTx = %v, want the callback's error", err)
		}
		insert := db.Rebind(`INSERT INTO copied (k, n) VALUES (?, ?)`)
		if err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error { return tx.ExecAtCommit(ctx, insert, "queued", 1) }); err != nil {
			t.Fatal(err)
		}
		want := [][]string{{insert}}
		if db.Dialect == sqldb.Postgres {
			want = [][]string{{"begin", insert, "commit"}}
		}
		if diff := cmp.Diff(want, log.RoundTrips()); diff != "" {
			t.Fatalf("round trips (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"queued/1"}, contents(t, db)); diff != "" {
			t.Fatalf("table after the queued commit (-want +got):\n%s", diff)
		}
		if db.Dialect != sqldb.Postgres {
			return
		}
		var rows sqldb.CopyRows
		rows.Row(3)
		rows.Text("copied")
		rows.Int64(2)
		rows.Null()
		err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
			if err := tx.CopyFrom(ctx, "copied", []string{"k", "n", "note"}, &rows); err != nil {
				return err
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("InConnTx = %v, want the callback's error", err)
		}
		if diff := cmp.Diff([]string{"queued/1"}, contents(t, db)); diff != "" {
			t.Fatalf("table after a rolled-back copy (-want +got):\n%s", diff)
		}
	})
}
