package sqldb_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestBeginGoesWithTheFirstRow: a transaction's first statement run with QueryRowScan goes in one
// round trip with its BEGIN on Postgres, and runs inside the transaction: it sees the
// transaction's id, and a rollback undoes what the transaction wrote after it. A first statement
// that fails fails the transaction, and the connection serves the next one.
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
		err = sqldb.InConnTx(t.Context(), db, func(tx *sqldb.Tx) error {
			var n int
			return tx.QueryRowScan(t.Context(), `SELECT 1 / (SELECT count(*) FROM begun)`, nil, &n)
		})
		if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "22012" {
			t.Fatalf("a failing first statement: %v, want the server's division by zero", err)
		}
		for range 2 * db.Stats().MaxOpenConnections { // every connection, the one that failed included
			if got := dbtest.Strings(t, db, `SELECT CAST(count(*) AS TEXT) FROM begun`); !slices.Equal(got, []string{"0"}) {
				t.Fatalf("rows: %v, want 0", got)
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
