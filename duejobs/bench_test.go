package duejobs_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/duejobs"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// fill inserts total jobs of tenant t1, the first due of them due at t0 (oldest first), the rest
// due in a day, in multi-row statements.
func fill(tb testing.TB, db *sqldb.DB, total, due int) {
	tb.Helper()
	const chunk = 500
	err := sqldb.InTx(context.Background(), db, func(tx *sql.Tx) error {
		for i := 0; i < total; i += chunk {
			n := min(chunk, total-i)
			var sb strings.Builder
			args := make([]any, 0, n*5)
			for k := range n {
				if k > 0 {
					sb.WriteString(", ")
				}
				sb.WriteString("(?, 't1', ?, 'follow_up', ?, 'UTC', 'internal', 'owner_watchers', 0, 'pending', ?, ?, 8, 0, 0)")
				j := i + k
				at := t0.Add(24 * time.Hour)
				if j < due {
					at = t0.Add(-time.Duration(due-j) * time.Millisecond)
				}
				args = append(args, fmt.Sprintf("job-%07d", j), fmt.Sprintf("i%07d", j), at.UnixNano(), at.UnixNano(), at.UnixNano())
			}
			if _, err := tx.Exec(db.Rebind(`INSERT INTO due_jobs (id, tenant_id, inquiry_id, kind, due_at, time_zone, payload_class,
				recipient_policy, generation, state, ready_at, next_attempt_at, max_attempts, created_at, updated_at) VALUES `+sb.String()), args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	if db.Dialect == sqldb.Postgres {
		if _, err := db.Exec(`ANALYZE due_jobs`); err != nil {
			tb.Fatal(err)
		}
	}
}

// benchOpen opens a fresh database of the named backend for a benchmark (Postgres skips without
// TEST_DATABASE_URL).
func benchOpen(b *testing.B, name string) *sqldb.DB {
	b.Helper()
	var db *sqldb.DB
	var err error
	if name == "postgres" {
		db, err = sqldb.OpenPostgres(b.Context(), pgtest.URL(b))
	} else {
		db, err = sqldb.OpenSQLite(filepath.Join(b.TempDir(), "casebook.db"))
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

func newBenchStore(b *testing.B, db *sqldb.DB) *duejobs.Store {
	b.Helper()
	s, err := duejobs.NewStore(b.Context(), db, func() time.Time { return t0 })
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkIdleTick: with 100,000 scheduled jobs and none due, a tick's claim reads an empty range
// of the ready index; its cost does not grow with the table.
func BenchmarkIdleTick(b *testing.B) {
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			db := benchOpen(b, name)
			s := newBenchStore(b, db)
			fill(b, db, 100_000, 0)
			for b.Loop() {
				jobs, err := s.Claim(b.Context(), "w", 100, time.Minute)
				if err != nil || len(jobs) != 0 {
					b.Fatalf("claimed %d: %v", len(jobs), err)
				}
			}
		})
	}
}

// BenchmarkClaimToComplete: 100,000 scheduled, 10,000 due at once; tickers (batch 100, 4 at a
// time) claim and complete them all. The job's own work is left out (see app.BenchmarkDueJobsFire
// for claim to event); the figure is jobs/s through claim and completion.
func BenchmarkClaimToComplete(b *testing.B) {
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				db := benchOpen(b, name)
				s := newBenchStore(b, db)
				fill(b, db, 100_000, 10_000)
				tk := &duejobs.Ticker{Store: s, Owner: "w", Fire: func(context.Context, duejobs.Job) (string, error) { return duejobs.OutcomeFired, nil }}
				b.StartTimer()
				start := time.Now()
				done := 0
				for done < 10_000 {
					res, err := tk.Tick(b.Context())
					if err != nil || res.Claimed == 0 {
						b.Fatalf("tick after %d: %+v %v", done, res, err)
					}
					done += res.Fired
				}
				b.ReportMetric(float64(done)/time.Since(start).Seconds(), "jobs/s")
			}
		})
	}
}

// TestIdleClaimUsesIndex: the claim's candidate query reads the ready index in its order (no scan
// of the table, no sort), on both backends; the plan is logged.
func TestIdleClaimUsesIndex(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		setup(t, db)
		fill(t, db, 20_000, 0)
		plan := dbtest.Plan(t, db, nil, `SELECT id FROM due_jobs WHERE ready_at <= ? ORDER BY ready_at, id LIMIT ?`,
			` FOR UPDATE SKIP LOCKED`, t0.UnixNano(), 100)
		all := strings.Join(plan, "\n")
		t.Logf("plan:\n%s", all)
		if !strings.Contains(all, "due_jobs_ready_id") || strings.Contains(all, "Seq Scan") || strings.Contains(all, "SCAN due_jobs") ||
			strings.Contains(all, "TEMP B-TREE") || strings.Contains(all, "Sort") {
			t.Fatalf("the claim does not read the ready index:\n%s", all)
		}
	})
}
