package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/duejobs"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/projections/schedules"
)

// panicForTenant is the schedules projection with a bug that meets one tenant's data: its Apply
// panics on any event of that tenant's inquiries, as a calendar computation that cannot place a
// deadline under the tenant's SLA policy did. The wrapper is injected into the App's runner; the
// production code has no switch for it.
type panicForTenant struct {
	*schedules.Projection
	tenant domain.TenantID
}

func (p panicForTenant) Apply(ctx context.Context, b *projections.Batch) error {
	for _, e := range b.Events {
		if strings.HasPrefix(e.StreamID, eventstore.InquiryStream(p.tenant, "")) {
			panic("calendar cannot place a deadline for " + e.StreamID)
		}
	}
	return p.Projection.Apply(ctx, b)
}

// TestOneTenantsPanicStopsNoOther: the schedules subscriber panics on every event of tenant
// globex. The other tenant's intakes and transitions still commit, every subscriber (schedules
// too) still reaches the log's head, acme's SLA clocks get their due jobs and those jobs fire;
// globex's inquiry streams are parked in schedules with the panic's message, and the App stays
// ready. On SQLite and Postgres. (Before the containment the panic ended the process, or, caught
// above a transaction, left SQLite's write lock held and every tenant's writes hanging.)
func TestOneTenantsPanicStopsNoOther(t *testing.T) {
	apptest.EachBackend(t, func(t *testing.T, cfg app.Config) {
		var good, bad domain.TenantID
		var goodAdmin, goodOp, badAdmin domain.Principal
		b := readySetup(t, cfg, func(a *app.App) {
			good, goodAdmin, goodOp = apptest.TenantWithOperator(t, a, "acme")
			bad, badAdmin, _ = apptest.TenantWithOperator(t, a, "globex")
			r := a.Schedules()
			r.Projection = panicForTenant{Projection: r.Projection.(*schedules.Projection), tenant: bad}
		})
		ctx := t.Context()
		for ten, admin := range map[domain.TenantID]domain.Principal{good: goodAdmin, bad: badAdmin} {
			if _, _, err := b.a.Commands.SetSLAPolicy(ctx, commands.SetSLAPolicy{Tenant: ten, Actor: admin, Policy: []byte(duePolicy)}); err != nil {
				t.Fatal(err)
			}
		}
		b1 := apptest.Intake(t, b.a, bad, "b1")
		g1 := apptest.Intake(t, b.a, good, "g1")
		apptest.Transition(t, b.a, goodOp, g1, domain.StatusTriaged, domain.PriorityNormal)
		b2 := apptest.Intake(t, b.a, bad, "b2")
		g2 := apptest.Intake(t, b.a, good, "g2")
		wait, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := b.a.WaitCaughtUp(wait); err != nil {
			t.Fatalf("subscribers stopped with one tenant's handler panicking: %v", err)
		}

		parked, err := projections.ListParked(ctx, b.a.DB, b.a.Schedules().Projection, "")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{eventstore.InquiryStream(bad, b1): true, eventstore.InquiryStream(bad, b2): true}
		if len(parked) != len(want) {
			t.Fatalf("parked = %+v, want globex's two inquiries", parked)
		}
		for _, pk := range parked {
			if !want[pk.Stream] || pk.Error != "panic: calendar cannot place a deadline for "+pk.Stream {
				t.Errorf("parked %s with %q, want globex's streams with the panic's message", pk.Stream, pk.Error)
			}
		}
		for _, id := range []domain.InquiryID{g1, g2} {
			jobs, err := b.a.DueJobs.List(ctx, good, duejobs.ListFilter{Inquiry: id, State: duejobs.StatePending})
			if err != nil || len(jobs) == 0 {
				t.Fatalf("acme's inquiry %s has no SLA jobs (%v): its schedules stopped", id, err)
			}
		}
		if q, err := b.a.Reader.Get(ctx, good, g1); err != nil || q.Status != domain.StatusTriaged {
			t.Fatalf("acme's transition in the query model: %+v, %v", q, err)
		}
		apptest.WaitReady(t, b.a)

		// Time passes: acme's due jobs fire, and what they append is applied too.
		b.clock.Advance(2 * time.Hour)
		res, err := b.a.Ticker.Tick(ctx)
		if err != nil || res.Fired == 0 || res.Dead != 0 {
			t.Fatalf("due tick = %+v, %v; want acme's jobs fired", res, err)
		}
		g3 := apptest.Intake(t, b.a, good, "g3")
		if err := b.a.WaitCaughtUp(wait); err != nil {
			t.Fatal(err)
		}
		if jobs, err := b.a.DueJobs.List(ctx, good, duejobs.ListFilter{Inquiry: g3, State: duejobs.StatePending}); err != nil || len(jobs) == 0 {
			t.Fatalf("acme's intake after the panics has no SLA jobs (%v)", err)
		}
		if st := b.a.Schedules().Status(); st.Parked != 2 {
			t.Fatalf("schedules status = %+v, want globex's 2 streams parked", st)
		}
	})
}
