package commands_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/sqlite"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/tenancy"
)

type testBundle struct {
	db       *sqldb.DB
	h        *commands.Handler
	store    eventstore.Store
	tenancy  *tenancy.Store
	tenant   domain.TenantID
	admin    domain.Principal
	ops      []domain.Principal
	otherOrg domain.Principal
}

func setup(t *testing.T) *testBundle { return setupB(t) }

func setupB(t testing.TB) *testBundle {
	t.Helper()
	ctx := t.Context()
	db, err := sqldb.OpenSQLite(filepath.Join(t.TempDir(), "casebook.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store, err := sqlite.New(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ten, err := tenancy.New(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	tb := &testBundle{db: db, store: store, tenancy: ten}
	tn, admin, _, err := ten.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	tb.tenant, tb.admin = tn.ID, admin
	for i := range 8 {
		p, _, err := ten.CreatePrincipal(ctx, "acme", fmt.Sprint("op", i), domain.RoleOperator, "support")
		if err != nil {
			t.Fatal(err)
		}
		tb.ops = append(tb.ops, p)
	}
	if _, _, _, err := ten.CreateTenant(ctx, "globex"); err != nil {
		t.Fatal(err)
	}
	if tb.otherOrg, _, err = ten.CreatePrincipal(ctx, "globex", "mallory", domain.RoleAdmin, ""); err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	var seq atomic.Int64
	tb.h = &commands.Handler{
		Store: store, Principals: ten, Secret: []byte("test-secret"),
		Now:   func() time.Time { return clock },
		NewID: func() string { return fmt.Sprintf("id-%d", seq.Add(1)) },
		Folds: commands.NewFoldCache(0),
	}
	return tb
}

func intake(key string) commands.Intake {
	return commands.Intake{
		Source: domain.SourcePublicForm, IdempotencyKey: key,
		Requester: domain.Requester{Name: "Ada", Email: "ada@example.com"}, Subject: "Broken", Message: "It broke",
	}
}

func (tb *testBundle) receive(t *testing.T, key string) commands.IntakeResult {
	t.Helper()
	c := intake(key)
	c.Tenant = tb.tenant
	r, err := tb.h.Intake(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (tb *testBundle) streamLen(t *testing.T, id domain.InquiryID) int {
	t.Helper()
	evs, err := tb.store.ReadStream(t.Context(), eventstore.InquiryStream(tb.tenant, id), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

func ver(v uint64) *uint64 { return &v }

func TestIntakeIdempotency(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	first := tb.receive(t, "k1")
	again := tb.receive(t, "k1")
	if again.InquiryID != first.InquiryID || again.Receipt != first.Receipt || !again.Replayed {
		t.Fatalf("replay = %+v, want the first result %+v", again, first)
	}
	if n := tb.streamLen(t, first.InquiryID); n != 1 {
		t.Fatalf("stream has %d events after a replay, want 1", n)
	}
	other := intake("k1")
	other.Tenant, other.Message = tb.tenant, "Something else"
	if _, err := tb.h.Intake(t.Context(), other); !errors.Is(err, domain.ErrIdempotencyMismatch) {
		t.Fatalf("same key, other payload: err = %v", err)
	}
	portal := intake("k1")
	portal.Tenant, portal.Source = tb.tenant, domain.SourcePortal
	r, err := tb.h.Intake(t.Context(), portal)
	if err != nil || r.InquiryID == first.InquiryID {
		t.Fatalf("same key from another source must be another inquiry: %+v %v", r, err)
	}
	if a, b := tb.receive(t, ""), tb.receive(t, ""); a.InquiryID == b.InquiryID {
		t.Fatal("intakes without a key were merged")
	}
	if first.Receipt == string(first.InquiryID) || len(first.Receipt) < 10 {
		t.Fatalf("receipt %q must be opaque and not the inquiry id", first.Receipt)
	}
}

// TestIntakeConcurrentDuplicates delivers one submission many times at once: one inquiry results and
// every delivery gets its id and the same receipt.
func TestIntakeConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	id := deliverAtOnce(t.Context(), t, tb.h, tb.tenant, 16)
	if r := tb.receive(t, "dup"); r.InquiryID != id {
		t.Fatalf("a later delivery got %s, want %s", r.InquiryID, id)
	}
	all, err := tb.store.ReadAll(t.Context(), eventstore.Start, 0)
	if err != nil || len(all) != 1 {
		t.Fatalf("log has %d events (%v), want 1", len(all), err)
	}
}

func TestCommandIdempotency(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	in := tb.receive(t, "k")
	tr := commands.Transition{Target: commands.Target{Tenant: tb.tenant, InquiryID: in.InquiryID, Actor: tb.ops[0], IfVersion: ver(1), IdempotencyKey: "t1"},
		To: domain.StatusTriaged, Priority: domain.PriorityHigh}
	r1, err := tb.h.Transition(t.Context(), tr)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := tb.h.Transition(t.Context(), tr)
	if err != nil {
		t.Fatalf("replay with a now-stale If-Match must return the first result: %v", err)
	}
	if r2.Version != r1.Version || !r2.Replayed {
		t.Fatalf("replay = %+v, want %+v", r2, r1)
	}
	if n := tb.streamLen(t, in.InquiryID); n != 2 {
		t.Fatalf("stream has %d events, want 2", n)
	}
	tr.Priority = domain.PriorityLow
	if _, err := tb.h.Transition(t.Context(), tr); !errors.Is(err, domain.ErrIdempotencyMismatch) {
		t.Fatalf("same key, other payload: %v", err)
	}
	// The same key from another actor is another request.
	tr.Priority, tr.Actor = domain.PriorityHigh, tb.ops[1]
	if _, err := tb.h.Transition(t.Context(), tr); !errors.Is(err, domain.ErrIdempotencyMismatch) {
		t.Fatalf("same key, other actor: %v", err)
	}
}

func TestStaleVersion(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	in := tb.receive(t, "k")
	target := commands.Target{Tenant: tb.tenant, InquiryID: in.InquiryID, Actor: tb.ops[0], IfVersion: ver(1)}
	if _, err := tb.h.Transition(t.Context(), commands.Transition{Target: target, To: domain.StatusTriaged}); err != nil {
		t.Fatal(err)
	}
	_, err := tb.h.Transition(t.Context(), commands.Transition{Target: target, To: domain.StatusCancelled, Reason: "spam"})
	if !errors.Is(err, domain.ErrConcurrency) {
		t.Fatalf("stale If-Match: err = %v", err)
	}
	if n := tb.streamLen(t, in.InquiryID); n != 2 {
		t.Fatalf("stream has %d events, want 2", n)
	}
}

// TestParallelClaims: N operators claim the same inquiry at the same version; exactly one wins. With
// If-Match the others see ErrConcurrency; without it they reload and see who won.
func TestParallelClaims(t *testing.T) {
	t.Parallel()
	for _, withVersion := range []bool{true, false} {
		t.Run(fmt.Sprint("if_match=", withVersion), func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			in := tb.receive(t, "k")
			var wins atomic.Int32
			var winner atomic.Value
			var wg sync.WaitGroup
			for _, op := range tb.ops {
				wg.Go(func() {
					c := commands.Claim{Target: commands.Target{Tenant: tb.tenant, InquiryID: in.InquiryID, Actor: op}}
					if withVersion {
						c.IfVersion = ver(1)
					}
					_, err := tb.h.Claim(t.Context(), c)
					want := domain.ErrAlreadyClaimed
					if withVersion {
						want = domain.ErrConcurrency
					}
					switch {
					case err == nil:
						wins.Add(1)
						winner.Store(op.ID)
					case !errors.Is(err, want):
						t.Errorf("loser %s: err = %v, want %v", op.ID, err, want)
					}
				})
			}
			wg.Wait()
			if wins.Load() != 1 {
				t.Fatalf("%d winners", wins.Load())
			}
			q, err := tb.h.Load(t.Context(), tb.tenant, in.InquiryID)
			if err != nil {
				t.Fatal(err)
			}
			if q.Owner != winner.Load() || q.Status != domain.StatusInProgress || q.Version != 3 {
				t.Fatalf("state = owner %s status %s version %d", q.Owner, q.Status, q.Version)
			}
		})
	}
}

// TestAssignmentRace: two admins assign different owners at the same version; one wins.
func TestAssignmentRace(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	in := tb.receive(t, "k")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			_, errs[i] = tb.h.Assign(t.Context(), commands.Assign{
				Target: commands.Target{Tenant: tb.tenant, InquiryID: in.InquiryID, Actor: tb.admin, IfVersion: ver(1)},
				Owner:  tb.ops[i].ID,
			})
		})
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("want exactly one winner: %v", errs)
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, domain.ErrConcurrency) {
			t.Fatalf("loser: %v", err)
		}
	}
}

// TestCrossTenant: a principal of another tenant cannot see or change an inquiry, and is told exactly
// what an unknown id would tell it.
func TestCrossTenant(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	in := tb.receive(t, "k")
	foreign := commands.Target{Tenant: tb.otherOrg.TenantID, InquiryID: in.InquiryID, Actor: tb.otherOrg}
	unknown := commands.Target{Tenant: tb.otherOrg.TenantID, InquiryID: "00000000-0000-8000-8000-000000000000", Actor: tb.otherOrg}
	mixed := commands.Target{Tenant: tb.tenant, InquiryID: in.InquiryID, Actor: tb.otherOrg}
	for _, target := range []commands.Target{foreign, unknown, mixed} {
		_, err := tb.h.Claim(t.Context(), commands.Claim{Target: target})
		if !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("claim %+v: err = %v, want ErrNotFound", target, err)
		}
		_, err = tb.h.AddNote(t.Context(), commands.AddNote{Target: target, Body: "x"})
		if !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("note: err = %v, want ErrNotFound", err)
		}
	}
	// Assigning an inquiry to another tenant's principal is refused.
	_, err := tb.h.Assign(t.Context(), commands.Assign{
		Target: commands.Target{Tenant: tb.tenant, InquiryID: in.InquiryID, Actor: tb.admin, IfVersion: ver(1)}, Owner: tb.otherOrg.ID})
	if !errors.Is(err, domain.ErrValidation) {
		t.Errorf("assign to foreign principal: %v", err)
	}
	if n := tb.streamLen(t, in.InquiryID); n != 1 {
		t.Fatalf("stream has %d events, want 1", n)
	}
}

// TestNotesCommute: notes without If-Match from many operators all land.
func TestNotesCommute(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	in := tb.receive(t, "k")
	var wg sync.WaitGroup
	for _, op := range tb.ops {
		wg.Go(func() {
			if _, err := tb.h.AddNote(context.WithoutCancel(t.Context()), commands.AddNote{
				Target: commands.Target{Tenant: tb.tenant, InquiryID: in.InquiryID, Actor: op}, Body: "seen"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := tb.streamLen(t, in.InquiryID); n != 1+len(tb.ops) {
		t.Fatalf("stream has %d events, want %d", n, 1+len(tb.ops))
	}
}
