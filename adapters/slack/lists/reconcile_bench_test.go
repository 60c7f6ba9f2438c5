package lists_test

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/internal/slacktest"
)

// BenchmarkReconcileInSync: one sweep of an in-sync List of N rows (and N rows a person archived)
// on embedded SQLite against the fake. Each run must read exactly ⌈N/page⌉ pages of each
// inventory and write nothing; the benchmark fails otherwise.
func BenchmarkReconcileInSync(b *testing.B) {
	const page = 100
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			ctx := b.Context()
			e := slacktest.New(b, app.Config{DataDir: b.TempDir(), Logger: slog.New(slog.DiscardHandler)},
				slacktest.Options{Fake: fakeslack.Options{RowCap: 3 * n}})
			a, fake, ten := e.App, e.Fake, e.Tenant
			li, err := fake.CreateList("Inquiries", apptest.BoardColumns()...)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := a.Lists.Store.Activate(ctx, lists.ActivateRequest{Tenant: ten, List: li.ID, Clearance: "internal"}); err != nil {
				b.Fatal(err)
			}
			for i := range n {
				apptest.Intake(b, a, ten, fmt.Sprintf("k%05d", i))
			}
			apptest.CatchUp(b, a)
			r := a.Lists.Reconciler
			r.PageLimit, r.Budget = page, lists.Budget{ReadEvery: -1, MaxWrites: 2 * n}
			if rep, err := r.Run(ctx, ten, li.ID, false); err != nil || rep.Actions[lists.ActCreate] != n {
				b.Fatalf("backfill: %v %+v", err, rep.Actions)
			}
			for i := range n {
				row, err := fake.AddRow(li.ID, "U0PERSON001", fakeslack.TextCell(li.ColumnID(lists.ColReceipt), fmt.Sprint("note ", i)))
				if err != nil {
					b.Fatal(err)
				}
				if err := fake.ArchiveRow(li.ID, row); err != nil {
					b.Fatal(err)
				}
			}
			want := (n + page - 1) / page
			writes := func() int {
				return fake.CallCount("slackLists.items.create") + fake.CallCount("slackLists.items.update") + fake.CallCount("slackLists.items.delete")
			}
			before := writes()
			reads := fake.CallCount("slackLists.items.list")
			runs := 0
			for b.Loop() {
				rep, err := r.Run(ctx, ten, li.ID, false)
				if err != nil {
					b.Fatal(err)
				}
				if rep.Outcomes[lists.InSync] != n || rep.Coverage.ActivePages != want || rep.Coverage.ArchivedPages != want || !rep.FullyApplied {
					b.Fatalf("sweep %+v coverage %+v", rep.Outcomes, rep.Coverage)
				}
				runs++
			}
			if w := writes(); w != before {
				b.Fatalf("%d writes in in-sync sweeps", w-before)
			}
			if got := fake.CallCount("slackLists.items.list") - reads; got != 2*want*runs {
				b.Fatalf("%d reads in %d sweeps, want %d each", got, runs, 2*want)
			}
			b.ReportMetric(float64(want), "active-reads/op")
			b.ReportMetric(float64(want), "archived-reads/op")
			b.ReportMetric(0, "writes/op")
		})
	}
}
