package slackeffects_test

import (
	"database/sql"
	"fmt"
	"testing"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// TestRaiseDesiredOneStatementPerBatch: a batch's desired versions are written by one statement
// (counted on Postgres, where the rows travel as arrays), and on both backends a version never goes
// down.
func TestRaiseDesiredOneStatementPerBatch(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, db *sqldb.DB, stmts *dbtest.Statements) {
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, `CREATE TABLE desired (tenant_id TEXT NOT NULL, inquiry_id TEXT NOT NULL,
			desired_version BIGINT NOT NULL, PRIMARY KEY (tenant_id, inquiry_id))`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO desired VALUES ('t', 'a', 10)`); err != nil {
			t.Fatal(err)
		}
		raise := func(rows []slackeffects.Desired) {
			t.Helper()
			err := sqldb.InTx(ctx, db, func(tx *sql.Tx) error {
				return slackeffects.RaiseDesired(ctx, &projections.Batch{Tx: tx, DB: db}, "desired", rows)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if stmts != nil {
			stmts.Reset()
		}
		raise([]slackeffects.Desired{{"t", "a", 5}, {"t", "b", 3}, {"t", "c", 7}, {"u", "a", 1}, {"u", "b", 2}})
		if stmts != nil && stmts.Total("INSERT INTO desired") != 1 {
			t.Fatalf("5 rows took %d statements: %v", stmts.Total("INSERT INTO desired"), stmts.Counts())
		}
		raise([]slackeffects.Desired{{"t", "a", 11}, {"t", "b", 2}})
		var many []slackeffects.Desired
		for i := range 300 {
			many = append(many, slackeffects.Desired{Tenant: "v", Inquiry: domain.InquiryID(fmt.Sprint(i)), Version: uint64(i + 1)})
		}
		if stmts != nil {
			stmts.Reset()
		}
		raise(many)
		if stmts != nil && stmts.Total("INSERT INTO desired") != 1 {
			t.Fatalf("300 rows took %d statements", stmts.Total("INSERT INTO desired"))
		}
		got := map[string]int64{}
		rows, err := db.QueryContext(ctx, `SELECT tenant_id, inquiry_id, desired_version FROM desired`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var tn, id string
			var v int64
			if err := rows.Scan(&tn, &id, &v); err != nil {
				t.Fatal(err)
			}
			got[tn+"/"+id] = v
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{"t/a": 11, "t/b": 3, "t/c": 7, "u/a": 1, "u/b": 2}
		for i := range 300 {
			want[fmt.Sprint("v/", i)] = int64(i + 1)
		}
		if len(got) != len(want) {
			t.Fatalf("%d rows, want %d", len(got), len(want))
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %d, want %d", k, got[k], v)
			}
		}
	}
	for _, b := range dbtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			if b.Name == "postgres" {
				db, stmts := dbtest.CountingPostgres(t)
				check(t, db, stmts)
				return
			}
			check(t, b.Open(t), nil)
		})
	}
}
