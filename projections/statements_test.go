package projections_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/eventstoretest"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/projections/portal"
	"github.com/casebook/casebook/projections/privacy"
	"github.com/casebook/casebook/projections/querymodel"
	"github.com/casebook/casebook/projections/schedules"
)

type operators struct{}

func (operators) Principal(_ context.Context, t domain.TenantID, id domain.PrincipalID) (domain.Principal, error) {
	return domain.Principal{ID: id, TenantID: t, Role: domain.RoleOperator}, nil
}

// statementsBundle is a projection on db fed by an embedded event store of portal intakes.
type statementsBundle struct {
	db    *sqldb.DB
	store eventstore.Store
	h     *commands.Handler
	p     projections.Projection
	seq   int
	total uint64 // events applied so far
}

func newStatementsBundle(t *testing.T, db *sqldb.DB, p projections.Projection) *statementsBundle {
	t.Helper()
	_, store := eventstoretest.SQLite(t)
	tb := &statementsBundle{db: db, store: store, p: p}
	tb.h = &commands.Handler{Store: store, Principals: operators{}, Secret: []byte("s"),
		Now:   func() time.Time { return time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC) },
		NewID: func() string { tb.seq++; return fmt.Sprint("c", tb.seq) }}
	return tb
}

// counted counts the statements its projection's Apply runs and the events it is given.
type counted struct {
	projections.Projection
	db         *sqldb.DB
	statements uint64
	events     int
	reached    chan struct{} // closed once events reaches want
	want       int
}

func (c *counted) Prepare(evs []eventstore.RecordedEvent) (any, error) {
	if p, ok := c.Projection.(projections.Preparer); ok {
		return p.Prepare(evs)
	}
	return nil, nil
}

func (c *counted) Apply(ctx context.Context, b *projections.Batch) error {
	before := c.db.Statements()
	err := c.Projection.Apply(ctx, b)
	c.statements += c.db.Statements() - before
	if c.events += len(b.Events); c.events >= c.want && c.reached != nil {
		close(c.reached)
		c.reached = nil
	}
	return err
}

// batchStatements appends n portal intakes, then runs the projection from its checkpoint and
// returns how many statements its Apply took for them, in one batch.
func (tb *statementsBundle) batchStatements(t *testing.T, n int) uint64 {
	t.Helper()
	tenant := domain.TenantID("t-" + tb.p.Name())
	portalPrincipal := domain.Principal{ID: "portal", TenantID: tenant, Role: domain.RoleIntegration}
	for i := range n {
		if _, err := tb.h.Intake(t.Context(), commands.Intake{Tenant: tenant, Source: domain.SourceAPI, IdempotencyKey: fmt.Sprint("k", tb.total, "-", i),
			Requester: domain.Requester{Email: fmt.Sprintf("p%d@example.com", i)}, Subject: "s", Message: "m",
			Submitter: &portalPrincipal, ExternalID: fmt.Sprint("cust", i)}); err != nil {
			t.Fatal(err)
		}
	}
	c := &counted{Projection: tb.p, db: tb.db, reached: make(chan struct{}), want: n}
	reached := c.reached
	r := &projections.Runner{Store: tb.store, DB: tb.db, Projection: c, Owner: "test"}
	if err := r.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s applied %d of %d events", tb.p.Name(), c.events, n)
	}
	head, err := tb.store.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
	err = r.WaitFor(wctx, head) // committed: the next run starts after these events
	wcancel()
	cancel()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if c.events != n {
		t.Fatalf("%s applied %d events, want %d in one batch", tb.p.Name(), c.events, n)
	}
	tb.total += uint64(n)
	return c.statements
}

// TestBatchStatementsDoNotGrowWithEvents: the query model, privacy, schedules and portal
// subscribers write a batch of intakes with multi-row statements (row counts in powers of two),
// so a batch of 64 intakes takes as many statements as a batch of 8, on both backends (each
// batch's inquiries are new: none is looked up twice).
func TestBatchStatementsDoNotGrowWithEvents(t *testing.T) {
	t.Parallel()
	index := func(tenant domain.TenantID, email string) string { return string(tenant) + "/" + email }
	for _, mk := range []func() projections.Projection{
		func() projections.Projection { return querymodel.New() },
		func() projections.Projection { return &privacy.Projection{Index: index} },
		func() projections.Projection { return schedules.New() },
		func() projections.Projection { return &portal.Projection{} },
	} {
		t.Run(mk().Name(), func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
				tb := newStatementsBundle(t, db, mk())
				small := tb.batchStatements(t, 8)
				large := tb.batchStatements(t, 64)
				t.Logf("statements: %d for 8 intakes, %d for 64", small, large)
				if large != small {
					t.Fatalf("a batch of 64 intakes took %d statements, one of 8 took %d: want the same", large, small)
				}
			})
		})
	}
}
