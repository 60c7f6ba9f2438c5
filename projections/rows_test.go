package projections

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/sqldb"
)

func TestRowCounts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n, max int
		want   []int
	}{{1, 256, []int{1}}, {3, 256, []int{2, 1}}, {256, 256, []int{256}}, {600, 256, []int{256, 256, 64, 16, 8}}, {0, 8, nil}} {
		if got := RowCounts(c.n, c.max); !slices.Equal(got, c.want) {
			t.Errorf("RowCounts(%d, %d) = %v, want %v", c.n, c.max, got, c.want)
		}
	}
}

// TestExecRows: rows go in with multi-row statements (of power-of-two row counts on SQLite, one
// on Postgres); a row that breaks a constraint fails the statement, and rolling back to the
// savepoint before it (as the runtime does with a failed batch) leaves none of the statement's
// rows, on both backends.
func TestExecRows(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, `CREATE TABLE rows_t (k TEXT NOT NULL PRIMARY KEY, n BIGINT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		cols, types := Columns("k text, n bigint")
		n0 := db.Statements()
		err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
			b := &Batch{Tx: tx.Tx, DB: db, conn: tx}
			var args []any
			for i := range 7 {
				args = append(args, fmt.Sprint("k", i), i)
			}
			if err := b.ExecRows(ctx, `INSERT INTO rows_t (`+cols+`)`, ` ON CONFLICT (k) DO NOTHING`, types, args); err != nil {
				return err
			}
			if err := b.Exec(ctx, "SAVEPOINT batch"); err != nil {
				return err
			}
			bad := []any{"x1", 1, "x2", 2, "x3", nil, "x4", 4} // the third row breaks NOT NULL
			if err := b.ExecRows(ctx, `INSERT INTO rows_t (`+cols+`)`, ` ON CONFLICT (k) DO NOTHING`, types, bad); err == nil {
				t.Error("a row with a NULL in a NOT NULL column was written")
			}
			return b.Exec(ctx, "ROLLBACK TO SAVEPOINT batch")
		})
		if err != nil {
			t.Fatal(err)
		}
		// 7 rows: statements of 4, 2 and 1 rows on SQLite, one on Postgres; then the savepoint,
		// one failed statement, the rollback.
		want := uint64(6)
		if db.Dialect == sqldb.Postgres {
			want = 4
		}
		if got := db.Statements() - n0; got != want {
			t.Fatalf("%d statements, want %d", got, want)
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM rows_t`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 7 {
			t.Fatalf("%d rows, want the 7 of the first statements and none of the failed one", n)
		}
	})
}

// tenant is a named string type, as the domain's ids are.
type tenant string

// TestExecRowsValues: what ExecRows writes reads back the same on both backends, NULLs and all,
// with values of named string and integer types; a column of NULLs only; an upsert's tail; and on
// Postgres, one statement text whatever the row count, 600 rows included.
func TestExecRowsValues(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, `CREATE TABLE vals_t (t TEXT NOT NULL, k TEXT NOT NULL, n BIGINT, i INTEGER NOT NULL,
			s TEXT, z BIGINT, PRIMARY KEY (t, k))`); err != nil {
			t.Fatal(err)
		}
		cols, types := Columns("t text, k text, n bigint, i bigint, s text, z bigint")
		const tail = ` ON CONFLICT (t, k) DO UPDATE SET n = excluded.n`
		type row struct {
			T, K string
			N    *int64
			I    int64
			S    *string
			Z    *int64
		}
		var want []row
		var rowsOf [][]any
		for _, count := range []int{1, 3, 600} {
			var args []any
			for r := range count {
				k := fmt.Sprintf("%d-%03d", count, r)
				var n, s any
				w := row{T: "acme", K: k, I: int64(r % 7)}
				if r%2 == 0 {
					v := int64(r) << 40
					n, w.N = v, &v
				}
				if r%3 == 0 {
					v := "ünïcode " + k
					s, w.S = v, &v
				}
				args = append(args, tenant("acme"), k, n, uint32(r%7), s, nil)
				want = append(want, w)
			}
			rowsOf = append(rowsOf, args)
		}
		ctx, log := sqldb.WithStatementLog(ctx)
		err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
			b := &Batch{Tx: tx.Tx, DB: db, conn: tx}
			for _, args := range rowsOf {
				if err := b.ExecRowsAtCommit(ctx, `INSERT INTO vals_t (`+cols+`)`, tail, types, args); err != nil {
					return err
				}
			}
			// The upsert's tail runs: the first row's n changes.
			return b.ExecRowsAtCommit(ctx, `INSERT INTO vals_t (`+cols+`)`, tail, types, []any{"acme", "1-000", 5, 0, nil, nil})
		})
		if err != nil {
			t.Fatal(err)
		}
		five := int64(5)
		want[0].N = &five
		rows, err := db.QueryContext(ctx, `SELECT t, k, n, i, s, z FROM vals_t ORDER BY k`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.T, &r.K, &r.N, &r.I, &r.S, &r.Z); err != nil {
				t.Fatal(err)
			}
			got = append(got, r)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(want, func(a, b row) int { return strings.Compare(a.K, b.K) })
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("rows (-want +got):\n%s", diff)
		}
		if db.Dialect != sqldb.Postgres {
			return
		}
		texts := map[string]bool{}
		for _, q := range log.Statements() {
			if strings.HasPrefix(q, "INSERT INTO vals_t") {
				texts[q] = true
			}
		}
		if len(texts) != 1 {
			t.Fatalf("%d statement texts for rows of 1, 3, 600 and 1 (want one): %v", len(texts), slices.Collect(maps.Keys(texts)))
		}
	})
}

// TestExecRowsRefuses: a value that is not of its column's declared type, a type ExecRows does not
// know, and values that are not whole rows are refused before anything is sent.
func TestExecRowsRefuses(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, `CREATE TABLE ref_t (k TEXT NOT NULL PRIMARY KEY, n BIGINT)`); err != nil {
			t.Fatal(err)
		}
		_, types := Columns("k text, n bigint")
		for _, c := range []struct {
			name  string
			types []string
			args  []any
		}{
			{"not whole rows", types, []any{"a", 1, "b"}},
			{"no columns", nil, []any{"a"}},
		} {
			err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
				b := &Batch{Tx: tx.Tx, DB: db, conn: tx}
				return b.ExecRows(ctx, `INSERT INTO ref_t (k, n)`, "", c.types, c.args)
			})
			if err == nil {
				t.Errorf("%s: accepted", c.name)
			}
		}
		if db.Dialect != sqldb.Postgres {
			return // SQLite stores what it is given, as its columns' affinity allows
		}
		for _, c := range []struct {
			name  string
			types []string
			args  []any
		}{
			{"an int for text", types, []any{1, 1}},
			{"a string for bigint", types, []any{"a", "1"}},
			{"a uint64 past bigint", types, []any{"a", uint64(1) << 63}},
			{"an unknown type", []string{"text", "numeric"}, []any{"a", 1}},
		} {
			n0 := db.Statements()
			err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
				b := &Batch{Tx: tx.Tx, DB: db, conn: tx}
				return b.ExecRows(ctx, `INSERT INTO ref_t (k, n)`, "", c.types, c.args)
			})
			if err == nil {
				t.Errorf("%s: accepted", c.name)
			}
			if sent := db.Statements() - n0; sent != 0 {
				t.Errorf("%s: %d statements sent, want none", c.name, sent)
			}
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM ref_t`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d rows (%v), want none", n, err)
		}
	})
}

// TestColumns: a declaration gives the column list and the types; a column without a type, or
// of a type ExecRows cannot send, stops the program where it is declared (at start-up), on either
// backend.
func TestColumns(t *testing.T) {
	t.Parallel()
	names, types := Columns("tenant_id text,\n\tversion  bigint")
	if names != "tenant_id, version" || !slices.Equal(types, []string{"text", "bigint"}) {
		t.Fatalf("Columns = %q, %q", names, types)
	}
	for _, decl := range []string{"tenant_id text, version", "tenant_id text, amount numeric"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Columns(%q) was accepted", decl)
				}
			}()
			Columns(decl)
		}()
	}
}

// BenchmarkExecRowsJournal writes one or two 64-row statements of random keys per transaction on
// SQLite, through ExecRows (INSERT OR FAIL) and as plain INSERT, and reports the process's write
// system calls per transaction (Linux): the plain statement also writes SQLite's statement journal.
func BenchmarkExecRowsJournal(b *testing.B) {
	for _, statements := range []int{1, 2} {
		b.Run(fmt.Sprint(statements), func(b *testing.B) { benchmarkExecRowsJournal(b, statements) })
	}
}

func benchmarkExecRowsJournal(b *testing.B, statements int) {
	for _, c := range []struct {
		name string
		exec func(ctx context.Context, bt *Batch, args []any) error
	}{
		{"ExecRows", func(ctx context.Context, bt *Batch, args []any) error {
			return bt.ExecRows(ctx, `INSERT INTO bench_rows (t, e, i, c)`, ` ON CONFLICT (t, e, i) DO NOTHING`, []string{"text", "text", "text", "bigint"}, args)
		}},
		{"plain", func(ctx context.Context, bt *Batch, args []any) error {
			return bt.Exec(ctx, `INSERT INTO bench_rows (t, e, i, c) VALUES `+strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?), ", len(args)/4), ", ")+
				` ON CONFLICT (t, e, i) DO NOTHING`, args...)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			db, err := sqldb.OpenSQLiteReplayable(filepath.Join(b.TempDir(), "rows.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			ctx := b.Context()
			for _, q := range []string{`CREATE TABLE bench_rows (t TEXT NOT NULL, e TEXT NOT NULL, i TEXT NOT NULL, c BIGINT NOT NULL, PRIMARY KEY (t, e, i))`,
				`CREATE INDEX bench_rows_i ON bench_rows (t, i)`} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
			key := func() string { var k [16]byte; _, _ = rand.Read(k[:]); return hex.EncodeToString(k[:]) }
			write := func() {
				err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
					bt := &Batch{Tx: tx.Tx, DB: db, conn: tx}
					for range statements {
						args := make([]any, 0, 4*64)
						for range 64 {
							args = append(args, "t", key(), key(), 1)
						}
						if err := c.exec(ctx, bt, args); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			for range 300 { // a table of some size, so rows land on many pages
				write()
			}
			w0 := writeCalls()
			b.ResetTimer()
			for range b.N {
				write()
			}
			b.ReportMetric(float64(writeCalls()-w0)/float64(b.N), "write-syscalls/op")
		})
	}
}

// writeCalls is the process's write system calls so far (syscw in /proc/self/io), or 0.
func writeCalls() int {
	bs, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(bs), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

func TestSizeClass(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{1: 1, 2: 2, 3: 4, 17: 32, 1024: 1024} {
		if got := SizeClass(n); got != want {
			t.Errorf("SizeClass(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestByKeysProbesEachPair: ByKeys finds exactly the stored pairs among the keys (never another
// tenant's row with the same id), on both backends; on SQLite it reads as many pages per key with
// 32 tenants as with one (a list of tenants and a list of ids probed every pair of the two).
func TestByKeysProbesEachPair(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		pagesPerKey := map[int]float64{}
		for _, tenants := range []int{1, 32} {
			table := fmt.Sprintf("bykeys_%d", tenants)
			if _, err := db.ExecContext(ctx, `CREATE TABLE `+table+` (tenant_id TEXT NOT NULL, inquiry_id TEXT NOT NULL, n BIGINT NOT NULL,
				PRIMARY KEY (tenant_id, inquiry_id))`); err != nil {
				t.Fatal(err)
			}
			const stored, looked = 512, 64
			var keyTenants, keyIDs []string
			want := map[string]bool{}
			err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
				for i := range stored {
					tenant, id := fmt.Sprintf("tenant-%02d", i%tenants), fmt.Sprintf("%08d", i)
					if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO `+table+` VALUES (?, ?, ?)`), tenant, id, i); err != nil {
						return err
					}
					if i%(stored/looked) == 0 {
						// The stored pair, an absent id, and the id under another tenant.
						other := fmt.Sprintf("tenant-%02d", (i+1)%32)
						keyTenants = append(keyTenants, tenant, tenant, other)
						keyIDs = append(keyIDs, id, id+"-absent", id)
						want[tenant+"/"+id] = true
						if tenants == 32 {
							want[other+"/"+id] = false
						}
					}
				}
				b := &Batch{Tx: tx.Tx, DB: db}
				from, args := b.ByKeys(table, "tenant_id", "inquiry_id", keyTenants, keyIDs)
				query := func() (map[string]bool, error) {
					rows, err := b.Query(ctx, `SELECT tenant_id, inquiry_id FROM `+from, args...)
					if err != nil {
						return nil, err
					}
					defer rows.Close()
					got := map[string]bool{}
					for rows.Next() {
						var tenant, id string
						if err := rows.Scan(&tenant, &id); err != nil {
							return nil, err
						}
						got[tenant+"/"+id] = true
					}
					return got, rows.Err()
				}
				if _, err := query(); err != nil { // prepares the statement
					return err
				}
				var p0, p1 int64
				if db.Dialect == sqldb.SQLite {
					var err error
					if p0, err = tx.PagesRead(); err != nil {
						return err
					}
				}
				got, err := query()
				if err != nil {
					return err
				}
				if db.Dialect == sqldb.SQLite {
					if p1, err = tx.PagesRead(); err != nil {
						return err
					}
					pagesPerKey[tenants] = float64(p1-p0) / float64(len(keyIDs))
				}
				for k, stored := range want {
					if got[k] != stored {
						t.Errorf("%d tenants: %s found %v, stored %v", tenants, k, got[k], stored)
					}
				}
				if len(got) != looked {
					t.Errorf("%d tenants: %d rows, want %d", tenants, len(got), looked)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if db.Dialect == sqldb.SQLite {
			// About one page a key here; the lists of 32 tenants and 192 ids read 5.3.
			if one, many := pagesPerKey[1], pagesPerKey[32]; many > 2 || many > 1.5*one {
				t.Errorf("pages read per key: %.1f with 1 tenant, %.1f with 32; want at most 2 and about the same", one, many)
			}
		}
	})
}

// BenchmarkExecRowsPostgres writes batches of 1 to 64 rows of an SLA clock's shape (20 columns,
// some NULL) in one transaction each (synchronous_commit off, as a subscriber's batch), with the
// rows sent at commit, and reports the time per row: through ExecRowsAtCommit (one array per
// column, one text), as the VALUES list it replaced (a text per row count), and with no rows (the
// transaction's own cost, for reference). Needs TEST_DATABASE_URL.
func BenchmarkExecRowsPostgres(b *testing.B) {
	types := []string{"text", "text", "bigint", "text", "text", "text", "text", "text", "bigint", "bigint",
		"bigint", "bigint", "bigint", "bigint", "bigint", "text", "bigint", "bigint", "bigint", "text"}
	cols := make([]string, len(types))
	defs := make([]string, len(types))
	for i, typ := range types {
		cols[i] = fmt.Sprintf("c%d", i)
		defs[i] = cols[i] + " " + typ
	}
	head := `INSERT INTO bench_rows (` + strings.Join(cols, ", ") + `)`
	const tail = ` ON CONFLICT (c0, c1) DO UPDATE SET c2 = excluded.c2, c3 = excluded.c3 WHERE bench_rows.c2 < excluded.c2`
	for _, c := range []struct {
		name string
		exec func(ctx context.Context, bt *Batch, args []any) error
	}{
		{"unnest", func(ctx context.Context, bt *Batch, args []any) error {
			return bt.ExecRowsAtCommit(ctx, head, tail, types, args)
		}},
		{"none", func(ctx context.Context, bt *Batch, args []any) error { return nil }},
		{"values", func(ctx context.Context, bt *Batch, args []any) error {
			group := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(types)), ", ") + ")"
			n := len(args) / len(types)
			return bt.ExecAtCommit(ctx, head+" VALUES "+strings.TrimSuffix(strings.Repeat(group+", ", n), ", ")+tail, args...)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			db, err := sqldb.OpenPostgres(b.Context(), pgtest.URL(b))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			ctx := b.Context()
			if _, err := db.ExecContext(ctx, `CREATE TABLE bench_rows (`+strings.Join(defs, ", ")+`, PRIMARY KEY (c0, c1))`); err != nil {
				b.Fatal(err)
			}
			rows, key := 0, 0
			for i := 0; b.Loop(); i++ {
				n := 1 + (i*37)%64 // every count from 1 to 64, in a scrambled order
				args := make([]any, 0, n*len(types))
				for range n {
					key++
					for j, typ := range types {
						switch {
						case j == 1:
							args = append(args, fmt.Sprint("inquiry-", key))
						case j >= 9 && j <= 13 && key%3 != 0:
							args = append(args, nil)
						case typ == "text":
							args = append(args, "value")
						default:
							args = append(args, int64(key))
						}
					}
				}
				err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
					// As the runner's batches: the commit does not wait for the disk.
					if _, err := tx.ExecContext(ctx, `SELECT set_config('synchronous_commit', 'off', true)`); err != nil {
						return err
					}
					return c.exec(ctx, &Batch{Tx: tx.Tx, DB: db, conn: tx}, args)
				})
				if err != nil {
					b.Fatal(err)
				}
				rows += n
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rows), "ns/row")
		})
	}
}
