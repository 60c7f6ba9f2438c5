package sqldb_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// TestCopyFromIsPartOfTheTransaction: rows copied in a transaction that fails are gone with it; rows
// copied in one that commits are there, next to rows written by ordinary statements.
func TestCopyFromIsPartOfTheTransaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, `CREATE TABLE copied (k TEXT NOT NULL, n BIGINT NOT NULL, note TEXT)`); err != nil {
			t.Fatal(err)
		}
		var rows sqldb.CopyRows
		for i, k := range []string{"a", "b", "c"} {
			rows.Row(3)
			rows.Text(k)
			rows.Int64(int64(i))
			rows.Null()
		}
		errBoom := errors.New("boom")
		err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
			if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO copied (k, n) VALUES (?, ?)`), "before", -1); err != nil {
				return err
			}
			err := tx.CopyFrom(ctx, "copied", []string{"k", "n", "note"}, &rows)
			if db.Dialect != sqldb.Postgres {
				if !errors.Is(err, sqldb.ErrNoCopy) {
					t.Fatalf("CopyFrom on %v = %v, want ErrNoCopy", db.Dialect, err)
				}
				return errBoom
			}
			if err != nil {
				return err
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("InConnTx = %v, want the callback's error", err)
		}
		if got := contents(t, db); len(got) != 0 {
			t.Fatalf("after rollback the table holds %v", got)
		}
		if db.Dialect != sqldb.Postgres {
			return
		}
		if err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO copied (k, n) VALUES ('before', -1)`); err != nil {
				return err
			}
			if err := tx.CopyFrom(ctx, "copied", []string{"k", "n", "note"}, &rows); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO copied (k, n) VALUES ('after', 9)`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		want := []string{"a/0", "after/9", "b/1", "before/-1", "c/2"}
		if diff := cmp.Diff(want, contents(t, db)); diff != "" {
			t.Fatalf("table after commit (-want +got):\n%s", diff)
		}
	})
}

// TestCopyFromRejectsBadRows: a NULL in a NOT NULL column, or a value of the wrong width, fails the
// copy and the transaction.
func TestCopyFromRejectsBadRows(t *testing.T) {
	cases := map[string]func(r *sqldb.CopyRows){
		"null in not null": func(r *sqldb.CopyRows) { r.Null(); r.Int64(1) },
		"text in bigint":   func(r *sqldb.CopyRows) { r.Text("x"); r.Text("123") },
		"too few columns":  func(r *sqldb.CopyRows) { r.Text("x") },
	}
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		if db.Dialect != sqldb.Postgres {
			t.Skip("bulk copies are Postgres only; TestCopyFromIsPartOfTheTransaction covers ErrNoCopy")
		}
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, `CREATE TABLE copied (k TEXT NOT NULL, n BIGINT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		for name, bad := range cases {
			var rows sqldb.CopyRows
			rows.Row(2)
			rows.Text("ok")
			rows.Int64(0)
			rows.Row(2)
			bad(&rows)
			err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
				return tx.CopyFrom(ctx, "copied", []string{"k", "n"}, &rows)
			})
			if err == nil {
				t.Errorf("%s: copied", name)
			}
			if got := contents(t, db); len(got) != 0 {
				t.Fatalf("%s: after a failed copy the table holds %v", name, got)
			}
		}
	})
}

func contents(t *testing.T, db *sqldb.DB) []string {
	t.Helper()
	out := dbtest.Strings(t, db, `SELECT k || '/' || n FROM copied`)
	slices.Sort(out)
	return out
}

// TestStatementsAndGateHeld: a handle counts the statements run through it and its transactions;
// on SQLite its gate counters record each write transaction and how long it held the gate.
func TestStatementsAndGateHeld(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, `CREATE TABLE counted (k TEXT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		n0, g0 := db.Statements(), db.GateStats()
		err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
			for _, k := range []string{"a", "b"} {
				if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO counted (k) VALUES (?)`), k); err != nil {
					return err
				}
			}
			var n int
			return tx.QueryRowContext(ctx, `SELECT count(*) FROM counted`).Scan(&n)
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := db.Statements() - n0; got != 3 {
			t.Fatalf("%d statements counted, want 3", got)
		}
		g := db.GateStats()
		if db.Dialect == sqldb.Postgres {
			if g != (sqldb.GateStats{}) {
				t.Fatalf("gate stats on Postgres = %+v, want zero", g)
			}
			return
		}
		if g.Entered-g0.Entered != 1 || g.Held <= g0.Held {
			t.Fatalf("gate stats %+v after %+v: want one more write transaction and more time held", g, g0)
		}
	})
}

// TestPagesRead: a scan of a table fetches each of its pages, a probe of its primary key a path
// from the root; PagesRead counts both on SQLite and refuses Postgres.
func TestPagesRead(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, `CREATE TABLE paged (k BIGINT PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
			for k := range 2000 {
				if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO paged (k, v) VALUES (?, ?)`), k, strings.Repeat("x", 200)); err != nil {
					return err
				}
			}
			p0, err := tx.PagesRead()
			if db.Dialect == sqldb.Postgres {
				if err == nil {
					t.Error("PagesRead on Postgres: no error")
				}
				return nil
			}
			if err != nil {
				return err
			}
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(v) FROM paged`).Scan(&n); err != nil {
				return err
			}
			p1, _ := tx.PagesRead()
			var v string
			if err := tx.QueryRowContext(ctx, `SELECT v FROM paged WHERE k = 1000`).Scan(&v); err != nil {
				return err
			}
			p2, _ := tx.PagesRead()
			// 2,000 rows of 200 bytes fill about 100 pages of 4 KiB; a probe reads the 2 levels of the
			// tree and at most a page or two of bookkeeping.
			if scan, probe := p1-p0, p2-p1; scan < 100 || probe < 2 || probe > 4 {
				t.Errorf("pages read: %d by the scan, %d by the probe; want at least 100 and 2 to 4", scan, probe)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestMigrationSortThreads: a SQLite migration with SortThreads runs its script with that many
// sorter helper threads, and leaves its connection with none, whether the script succeeds or fails.
func TestMigrationSortThreads(t *testing.T) {
	t.Parallel()
	db, err := sqldb.OpenSQLite(filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // the migrations' connection is the one read afterwards
	ctx := t.Context()
	threadsNow := func() int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, `PRAGMA threads`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := sqldb.Migrate(ctx, db, "sorts", []sqldb.Migration{{Version: 1, SortThreads: 2,
		SQL: "CREATE TABLE seen AS SELECT threads FROM pragma_threads;\nCREATE INDEX seen_threads ON seen (threads)"}}); err != nil {
		t.Fatal(err)
	}
	var during int
	if err := db.QueryRowContext(ctx, `SELECT threads FROM seen`).Scan(&during); err != nil {
		t.Fatal(err)
	}
	if during != 2 {
		t.Errorf("the script ran with %d sorter threads, want 2", during)
	}
	if n := threadsNow(); n != 0 {
		t.Errorf("after the migration the connection has %d sorter threads, want 0", n)
	}
	if err := sqldb.Migrate(ctx, db, "sorts", []sqldb.Migration{{Version: 2, SortThreads: 2, SQL: "CREATE TABLE broken ("}}); err == nil {
		t.Fatal("a broken script migrated")
	}
	if n := threadsNow(); n != 0 {
		t.Errorf("after a failed migration the connection has %d sorter threads, want 0", n)
	}
}
