package app_test

import (
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
)

// BenchmarkBackupWriterHold backs up a database of 10,000 inquiries while one client appends
// intakes back to back, and reports how long the writer was held: the longest intake while the
// backup ran (hold-max-ms) against the longest of as many intakes just before it (base-max-ms),
// with the backup's duration (backup-ms).
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
	n := 0
	intake := func(key string) (time.Duration, error) {
		start := time.Now()
		_, err := a.Commands.Intake(ctx, commands.Intake{Tenant: ten.ID, Source: domain.SourceAPI, IdempotencyKey: key,
			Requester: domain.Requester{Name: "Ada Lovelace", Email: "ada@example.com"},
			Subject: "Invoice is wrong", Message: "Invoice 42 charges me twice, and the one before it too."})
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
	var holdMax, baseMax, backupTime time.Duration
	for i := 0; b.Loop(); i++ {
		file := filepath.Join(b.TempDir(), "b.db")
		done := make(chan struct{})
		var during []time.Duration
		var before []time.Duration
		writer := make(chan error, 1)
		started := make(chan struct{})
		go func() {
			for j := 0; ; j++ {
				select {
				case <-done:
					writer <- nil
					return
				default:
				}
				d, err := intake(fmt.Sprintf("run-%d-%d", i, j))
				if err != nil {
					writer <- err
					return
				}
				select {
				case <-started:
					during = append(during, d)
				default:
					before = append(before, d)
					if len(before) == 200 {
						close(started)
					}
				}
			}
		}()
		<-started
		t0 := time.Now()
		info, err := app.Backup(ctx, dir, file, false)
		backupTime = max(backupTime, time.Since(t0))
		close(done)
		if werr := <-writer; werr != nil {
			b.Fatal(werr)
		}
		if err != nil {
			b.Fatal(err)
		}
		if info.Streams < seed {
			b.Fatalf("backup holds %d streams, want at least %d", info.Streams, seed)
		}
		n = len(during)
		holdMax = max(holdMax, slices.Max(append(during, 0)))
		baseMax = max(baseMax, slices.Max(before))
	}
	b.ReportMetric(float64(holdMax.Microseconds())/1000, "hold-max-ms")
	b.ReportMetric(float64(baseMax.Microseconds())/1000, "base-max-ms")
	b.ReportMetric(float64(backupTime.Microseconds())/1000, "backup-ms")
	b.ReportMetric(float64(n), "intakes-during")
}
