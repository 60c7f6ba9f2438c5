package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/pgtest"
)

// BenchmarkDueJobsFire: 10,000 follow-ups fall due at once among 100,000 scheduled through the
// command layer (90,000 due tomorrow, nine on each of 10,000 other inquiries); ticks claim them in
// batches of 100 and each appends its FollowUpDue (re-read, decide, conditional append, complete).
// Reports events/s, claim to event, and catchup-s: how long every subscriber took to apply the
// 120,000 setup events (untimed in events/s). CASEBOOK_BENCH_DUE scales the size down (due jobs;
// nine times as many later), e.g. 2000 on a busy machine.
func BenchmarkDueJobsFire(b *testing.B) {
	due := 10_000
	if v, err := strconv.Atoi(os.Getenv("CASEBOOK_BENCH_DUE")); err == nil && v > 0 {
		due = v
	}
	later := 9 * due
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				clock := apptest.NewClock(dueT0)
				cfg := app.Config{DataDir: b.TempDir()}
				if name == "postgres" {
					cfg = app.Config{DatabaseURL: pgtest.URL(b)}
				}
				cfg.Now, cfg.DueTick, cfg.Logger = clock.Now, -1, slog.New(slog.DiscardHandler)
				a := apptest.Open(b, cfg)
				ten, _, _, err := a.Tenancy.CreateTenant(b.Context(), "acme")
				if err != nil {
					b.Fatal(err)
				}
				op, _, err := a.Tenancy.CreatePrincipal(b.Context(), "acme", "Olga", domain.RoleOperator, "support")
				if err != nil {
					b.Fatal(err)
				}
				var wg sync.WaitGroup
				for w := range 8 {
					wg.Go(func() {
						for i := w; i < due+later/9; i += 8 {
							id := apptest.Intake(b, a, ten.ID, fmt.Sprint("k", i))
							target := commands.Target{Tenant: ten.ID, InquiryID: id, Actor: op}
							n := 1
							if i >= due {
								n = 9 // nine reminders tomorrow
							}
							for k := range n {
								in := time.Hour
								if i >= due {
									in = 24*time.Hour + time.Duration(k)*time.Minute
								}
								if _, err := a.Commands.ScheduleFollowUp(b.Context(), commands.ScheduleFollowUp{Target: target, In: in}); err != nil {
									b.Error(err)
									return
								}
							}
						}
					})
				}
				wg.Wait()
				ctx, cancel := context.WithTimeout(b.Context(), 60*time.Minute)
				caught := time.Now()
				if err := a.CatchUp(ctx); err != nil {
					b.Fatal(err)
				}
				cancel()
				b.ReportMetric(time.Since(caught).Seconds(), "catchup-s")
				clock.Advance(time.Hour)
				b.StartTimer()
				start := time.Now()
				fired := 0
				for fired < due {
					res, err := a.Ticker.Tick(b.Context())
					if err != nil || res.Claimed == 0 {
						b.Fatalf("tick after %d: %+v %v", fired, res, err)
					}
					fired += res.Fired
				}
				b.ReportMetric(float64(fired)/time.Since(start).Seconds(), "events/s")
			}
		})
	}
}
