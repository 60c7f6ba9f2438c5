package lists_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/domain"
)

// panicFirst is an Inventory whose first Open panics, as a bug meeting one List's data would.
type panicFirst struct {
	lists.Inventory
	calls atomic.Int32
}

func (p *panicFirst) Open(ctx context.Context, tenant domain.TenantID) ([]domain.InquiryID, error) {
	if p.calls.Add(1) == 1 {
		panic("inventory cannot page " + string(tenant))
	}
	return p.Inventory.Open(ctx, tenant)
}

// TestPanickingSweepIsThatListsError: a panic in one List's sweep is recorded as that sweep's
// error (its report and its stored last run say "panic: …", its lease is released) and the
// periodic sweep goes on to reconcile the next List completely.
func TestPanickingSweepIsThatListsError(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		b.activate(t)
		if _, err := b.app.Lists.Store.Create(ctx, lists.CreateRequest{Tenant: b.tenant, Name: "Second board", Clearance: "internal"}); err != nil {
			t.Fatal(err)
		}
		b.intake(t, "a1")
		b.project(t)
		noErrors(t, b.work(t))
		r := b.reconciler(nil)
		inv := &panicFirst{Inventory: r.Inventory}
		r.Inventory = inv
		t.Cleanup(func() { r.Inventory = inv.Inventory })
		reps, err := r.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(reps) != 2 {
			t.Fatalf("%d reports, want one per List: %+v", len(reps), reps)
		}
		bad, good := reps[0], reps[1]
		if bad.Error != "panic: inventory cannot page "+string(b.tenant) || bad.Stopped != lists.StopError || bad.FullyApplied {
			t.Fatalf("the panicking sweep's report = %+v", bad)
		}
		if good.Error != "" || !good.Complete || !good.FullyApplied {
			t.Fatalf("the next List's sweep = %+v, want complete", good)
		}
		rec, err := b.app.Lists.Store.Reconciliation(ctx, b.tenant, bad.List)
		if err != nil || rec.LastRun == nil || !strings.HasPrefix(rec.LastRun.Error, "panic: ") {
			t.Fatalf("stored run of the panicking List = %+v, %v", rec, err)
		}
		// Its lease was released: the List can be reconciled again at once.
		if rep, err := r.Run(ctx, b.tenant, bad.List, false); err != nil || rep.Error != "" {
			t.Fatalf("rerun of the List = %+v, %v", rep, err)
		}
	})
}
