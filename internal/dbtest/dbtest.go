// Package dbtest runs a test against every SQL backend Casebook supports for its query model,
// checkpoints and tenancy: a fresh SQLite file, and a fresh Postgres schema when TEST_DATABASE_URL is
// set (see pgtest). Backend differences are never skipped assertions.
package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// Backend opens a fresh, empty database for one test.
type Backend struct {
	Name string
	Open func(t *testing.T) *sqldb.DB
}

// Backends lists the SQL backends.
var Backends = []Backend{
	{Name: "sqlite", Open: func(t *testing.T) *sqldb.DB {
		t.Helper()
		db, err := sqldb.OpenSQLite(filepath.Join(t.TempDir(), "casebook.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}},
	{Name: "postgres", Open: func(t *testing.T) *sqldb.DB {
		t.Helper()
		url := pgtest.URL(t)
		db, err := sqldb.OpenPostgres(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}},
}

// Each runs fn as a parallel subtest on every backend.
func Each(t *testing.T, fn func(t *testing.T, db *sqldb.DB)) {
	t.Helper()
	for _, b := range Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, b.Open(t))
		})
	}
}

// Strings runs a query that selects one text column and returns its rows in order.
func Strings(t testing.TB, db *sqldb.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), db.Rebind(query), args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Querier is a *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Plan returns the plan db's database chose for query (EXPLAIN QUERY PLAN on SQLite, EXPLAIN on
// Postgres, with suffix appended to the query there, e.g. " FOR UPDATE SKIP LOCKED"), one line per
// row: each row's last column. It runs on q (a transaction with its own settings) or, if nil, db.
func Plan(t testing.TB, db *sqldb.DB, q Querier, query, suffix string, args ...any) []string {
	t.Helper()
	if q == nil {
		q = db
	}
	explain := `EXPLAIN QUERY PLAN ` + query
	if db.Dialect == sqldb.Postgres {
		explain = `EXPLAIN ` + query + suffix
	}
	rows, err := q.QueryContext(t.Context(), db.Rebind(explain), args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, fmt.Sprint(vals[len(vals)-1]))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// IndexPlan is Plan with sequential scans disabled on Postgres, in a transaction of its own: on a
// test's small tables it shows whether an index can serve query, not which plan is cheapest.
func IndexPlan(t testing.TB, db *sqldb.DB, query string, args ...any) []string {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if db.Dialect == sqldb.Postgres {
		if _, err := tx.ExecContext(t.Context(), `SET LOCAL enable_seqscan = off`); err != nil {
			t.Fatal(err)
		}
	}
	return Plan(t, db, tx, query, "", args...)
}
