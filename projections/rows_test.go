package projections

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/casebook/casebook/internal/dbtest"
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

// TestExecRows: rows go in with multi-row statements of power-of-two row counts; a row that
// breaks a constraint fails the statement, and rolling back to the savepoint before it (as the
// runtime does with a failed batch) leaves none of the statement's rows, on both backends.
func TestExecRows(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		if _, err := db.ExecContext(ctx, `CREATE TABLE rows_t (k TEXT NOT NULL PRIMARY KEY, n BIGINT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		n0 := db.Statements()
		err := sqldb.InConnTx(ctx, db, func(tx *sqldb.Tx) error {
			b := &Batch{Tx: tx.Tx, DB: db, conn: tx}
			var args []any
			for i := range 7 {
				args = append(args, fmt.Sprint("k", i), i)
			}
			if err := b.ExecRows(ctx, `INSERT INTO rows_t (k, n)`, ` ON CONFLICT (k) DO NOTHING`, 2, args); err != nil {
				return err
			}
			if err := b.Exec(ctx, "SAVEPOINT batch"); err != nil {
				return err
			}
			bad := []any{"x1", 1, "x2", 2, "x3", nil, "x4", 4} // the third row breaks NOT NULL
			if err := b.ExecRows(ctx, `INSERT INTO rows_t (k, n)`, ` ON CONFLICT (k) DO NOTHING`, 2, bad); err == nil {
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
			return bt.ExecRows(ctx, `INSERT INTO bench_rows (t, e, i, c)`, ` ON CONFLICT (t, e, i) DO NOTHING`, 4, args)
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
