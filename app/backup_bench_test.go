package app_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// BenchmarkBackupWriterHold backs up a database of 10,000 inquiries while one client appends
// intakes back to back, and reports how long the writer was held: the longest intake while the
// backup ran (hold-max-ms) against the longest in as long a time just before it (base-max-ms),
// with the backup's duration (backup-ms). Then, with no intakes, a probe that only takes SQLite's
// write lock (BEGIN IMMEDIATE, rolled back, not waiting for it) does the same (lock-max-ms against
// lock-base-max-ms) and counts the times it found the lock held (lock-busy).
//
//	go test -run '^$' -bench BackupWriterHold -benchtime 3x ./app/
func BenchmarkBackupWriterHold(b *testing.B) {
	ctx := b.Context()
	dir := b.TempDir()
	a, err := app.Open(ctx, app.Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler), DueTick: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	ten, _, _, err := a.Tenancy.CreateTenant(ctx, "acme")
	if err != nil {
		b.Fatal(err)
	}
	intake := func(key string) (time.Duration, error) {
		start := time.Now()
		_, err := a.Commands.Intake(ctx, commands.Intake{Tenant: ten.ID, Source: domain.SourceAPI, IdempotencyKey: key,
			Requester: domain.Requester{Name: "Ada Lovelace", Email: "ada@example.com"},
			Subject:   "Invoice is wrong", Message: "Invoice 42 charges me twice, and the one before it too."})
		return time.Since(start), err
	}
	const seed, workers = 10_000, 16
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < seed; i += workers {
				if _, err := intake(fmt.Sprint("seed-", i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	// The window before a backup that the latencies during it are compared with: as long as one.
	t0 := time.Now()
	if _, err := app.Backup(ctx, dir, filepath.Join(b.TempDir(), "warm.db"), false); err != nil {
		b.Fatal(err)
	}
	window := time.Since(t0)
	// during runs load back to back: for window, then while a backup runs; it returns both sets of
	// latencies and the backup's duration.
	during := func(i int, load func(key string) (time.Duration, error)) (before, while []time.Duration, took time.Duration) {
		file := filepath.Join(b.TempDir(), "b.db")
		done, started := make(chan struct{}), make(chan struct{})
		loaded := make(chan error, 1)
		t0 := time.Now()
		go func() {
			for j := 0; ; j++ {
				select {
				case <-done:
					loaded <- nil
					return
				default:
				}
				d, err := load(fmt.Sprintf("run-%d-%d", i, j))
				if err != nil {
					loaded <- err
					return
				}
				select {
				case <-started:
					while = append(while, d)
				default:
					before = append(before, d)
					if time.Since(t0) >= window {
						close(started)
					}
				}
			}
		}()
		<-started
		t1 := time.Now()
		info, err := app.Backup(ctx, dir, file, false)
		took = time.Since(t1)
		close(done)
		if lerr := <-loaded; lerr != nil {
			b.Fatal(lerr)
		}
		if err != nil {
			b.Fatal(err)
		}
		if info.Streams < seed {
			b.Fatalf("backup holds %d streams, want at least %d", info.Streams, seed)
		}
		return before, append(while, 0), took
	}
	// lock takes SQLite's write lock (BEGIN IMMEDIATE) on a connection of its own that does not
	// wait for it (busy_timeout 0), and rolls back: busy counts the times the lock was held.
	probeDB, err := sqldb.OpenSQLite(filepath.Join(dir, app.DBFile))
	if err != nil {
		b.Fatal(err)
	}
	defer probeDB.Close()
	conn, err := probeDB.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		b.Fatal(err)
	}
	busy := 0
	lock := func(string) (time.Duration, error) {
		start := time.Now()
		if tryLock(ctx, conn) { // refused: the lock was held, which is what is measured
			_, err := conn.ExecContext(ctx, "ROLLBACK")
			return time.Since(start), err
		}
		busy++
		return time.Since(start), nil
	}
	var m struct{ intakeBase, intakeDuring, lockBase, lockDuring, backup time.Duration }
	n := 0
	for i := 0; b.Loop(); i++ {
		before, while, took := during(i, intake)
		m.intakeBase, m.intakeDuring = max(m.intakeBase, slices.Max(before)), max(m.intakeDuring, slices.Max(while))
		n = len(while) - 1
		before, while, took2 := during(i, lock)
		m.lockBase, m.lockDuring = max(m.lockBase, slices.Max(before)), max(m.lockDuring, slices.Max(while))
		m.backup = max(m.backup, took, took2)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(m.intakeDuring), "hold-max-ms")
	b.ReportMetric(ms(m.intakeBase), "base-max-ms")
	b.ReportMetric(ms(m.lockDuring), "lock-max-ms")
	b.ReportMetric(ms(m.lockBase), "lock-base-max-ms")
	b.ReportMetric(ms(m.backup), "backup-ms")
	b.ReportMetric(float64(n), "intakes-during")
	b.ReportMetric(float64(busy), "lock-busy")
}

// tryLock takes SQLite's write lock on conn without waiting and reports whether it got it.
func tryLock(ctx context.Context, conn *sql.Conn) bool {
	_, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	return err == nil
}
