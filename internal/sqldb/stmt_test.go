package sqldb_test

import (
	"context"
	"testing"

	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestStatementsPreparedOnce: on SQLite a query text is prepared once and kept, in and out of
// transactions, and a kept statement follows schema changes; on Postgres pgx's own cache prepares
// each text once per connection (pg_prepared_statements holds it once after several calls).
func TestStatementsPreparedOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		db.SetMaxOpenConns(1) // one connection: "once per connection" is "once"
		if _, err := db.ExecContext(ctx, `CREATE TABLE prep (k TEXT PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		insert := db.Rebind(`INSERT INTO prep (k) VALUES (?)`)
		count := `SELECT count(*) FROM prep`
		for _, k := range []string{"a", "b", "c"} {
			if _, err := db.ExecContext(ctx, insert, k); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			if err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
				var n int
				return tx.QueryRowContext(ctx, count).Scan(&n)
			}); err != nil {
				t.Fatal(err)
			}
		}
		var n int
		if err := db.QueryRowContext(ctx, count).Scan(&n); err != nil || n != 3 {
			t.Fatalf("count = %d, %v; want 3", n, err)
		}
		if db.Dialect == sqldb.Postgres {
			var prepared int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement = $1 OR statement = $2`,
				insert, count).Scan(&prepared); err != nil {
				t.Fatal(err)
			}
			if prepared != 2 {
				t.Fatalf("pg_prepared_statements holds the two query texts %d times, want 2 (once each)", prepared)
			}
			return
		}
		if got := db.CachedStatements(); got != 2 {
			t.Fatalf("%d statements kept prepared, want 2 (the insert and the count)", got)
		}
		// A kept statement follows the schema: the table is replaced under it.
		for _, q := range []string{`DROP TABLE prep`, `CREATE TABLE prep (k TEXT PRIMARY KEY, v TEXT)`} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.ExecContext(ctx, insert, "z"); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(context.Background(), count).Scan(&n); err != nil || n != 1 {
			t.Fatalf("count after the table was replaced = %d, %v; want 1", n, err)
		}
		if got := db.CachedStatements(); got != 2 {
			t.Fatalf("%d statements kept after schema changes, want 2 (DDL is not kept)", got)
		}
	})
}
