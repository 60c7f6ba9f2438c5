package app_test

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections/schedules"
)

// readyBundle is a served App on a settable clock, with no periodic work of its own (due ticks,
// List sweeps, retention) so that only what a test does moves.
type readyBundle struct {
	a     *app.App
	clock *apptest.Clock
}

func readySetup(t *testing.T, cfg app.Config, before func(a *app.App)) readyBundle {
	t.Helper()
	clock := apptest.NewClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	cfg.Now, cfg.Logger = clock.Now, slog.New(slog.DiscardHandler)
	cfg.DueTick, cfg.ListSweepTick, cfg.RetentionTick = -1, -1, -1
	a := apptest.Open(t, cfg)
	if before != nil {
		before(a)
	}
	_, stop := apptest.Serve(t, a)
	t.Cleanup(stop)
	apptest.WaitReady(t, a)
	return readyBundle{a: a, clock: clock}
}

// TestReadyNamesAStuckWriter: while one write transaction holds the write path (SQLite: the
// writer gate, held past WriterStuckAfter on the App's clock; Postgres: a lock that keeps appends
// from the events table, so the probe times out), Ready fails and names the writer; once it is
// released Ready recovers.
func TestReadyNamesAStuckWriter(t *testing.T) {
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		b := readySetup(t, cfg, nil)
		ctx := t.Context()
		entered, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			done <- sqldb.InTx(ctx, b.a.DB, func(tx *sql.Tx) error {
				if b.a.DB.Dialect == sqldb.Postgres {
					if _, err := tx.ExecContext(ctx, `LOCK TABLE events IN SHARE MODE`); err != nil {
						return err
					}
				}
				close(entered)
				<-release
				return nil
			})
		}()
		<-entered
		if b.a.DB.Dialect == sqldb.SQLite {
			if err := b.a.Ready(); err != nil && strings.Contains(err.Error(), "writer") {
				t.Fatalf("Ready names the writer before WriterStuckAfter: %v", err)
			}
			b.clock.Advance(app.WriterStuckAfter)
		}
		err := b.a.Ready()
		if err == nil || !strings.Contains(err.Error(), "writer stuck") {
			t.Fatalf("Ready with the writer held = %v, want it to name the stuck writer", err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := b.a.Ready(); err != nil {
			t.Fatalf("Ready after the writer was released = %v", err)
		}
	})
}

// TestReadyNamesAStalledSubscriber: a subscriber that is behind the log and has not advanced for
// SubscriberStallAfter on the App's clock makes Ready fail naming it, though its LagSeconds (set
// only when it commits) says nothing; once it goes on Ready recovers.
func TestReadyNamesAStalledSubscriber(t *testing.T) {
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		var armed atomic.Bool
		entered, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		b := readySetup(t, cfg, func(a *app.App) {
			a.Schedules().Hold = func(ctx context.Context) error {
				if !armed.Load() {
					return nil
				}
				once.Do(func() { close(entered) })
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		})
		ctx := t.Context()
		ten, _, _ := apptest.TenantWithOperator(t, b.a, "acme")
		apptest.WaitReady(t, b.a)
		armed.Store(true)
		apptest.Intake(t, b.a, ten, "k1")
		<-entered // the schedules subscriber holds the batch with the intake
		// The others apply it, so that the lane is quiet and only schedules stands still.
		head, err := b.a.Store.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range b.a.Runners {
			if r != b.a.Schedules() {
				if err := r.WaitFor(ctx, head); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := b.a.Ready(); err != nil && strings.Contains(err.Error(), schedules.Name) {
			t.Fatalf("Ready names the subscriber before SubscriberStallAfter: %v", err)
		}
		b.clock.Advance(app.SubscriberStallAfter)
		err = b.a.Ready()
		if err == nil || !strings.Contains(err.Error(), "projection "+schedules.Name+" has not advanced") || strings.Contains(err.Error(), "writer") {
			t.Fatalf("Ready with the schedules subscriber held = %v, want it to name that subscriber alone", err)
		}
		armed.Store(false)
		close(release)
		apptest.WaitReady(t, b.a)
	})
}
