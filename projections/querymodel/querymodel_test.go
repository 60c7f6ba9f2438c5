package querymodel_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/eventstoretest"
	"github.com/casebook/casebook/eventstore/sealed"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/projections/querymodel"
	"github.com/casebook/casebook/projections/querymodel/querymodeltest"
	"github.com/casebook/casebook/queries"
)

type testBundle struct {
	db     *sqldb.DB
	store  eventstore.Store
	h      *commands.Handler
	runner *projections.Runner
	reader *queries.Reader
}

type principals struct{}

func (principals) Principal(_ context.Context, t domain.TenantID, id domain.PrincipalID) (domain.Principal, error) {
	if id == "admin" {
		return domain.Principal{ID: id, TenantID: t, Role: domain.RoleAdmin}, nil
	}
	return domain.Principal{ID: id, TenantID: t, Role: domain.RoleOperator}, nil
}

// setup builds a query model on db, fed by an embedded event store (the query store is under test).
func setup(t *testing.T, db *sqldb.DB) *testBundle {
	t.Helper()
	_, store := eventstoretest.SQLite(t)
	n := 0
	var mu sync.Mutex
	h := &commands.Handler{Store: store, Principals: principals{}, Secret: []byte("s"),
		Now:   func() time.Time { return time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC) },
		NewID: func() string { mu.Lock(); defer mu.Unlock(); n++; return fmt.Sprint("c", n) }}
	r := &projections.Runner{Store: store, DB: db, Projection: querymodel.New(), Owner: "test"}
	if err := r.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &testBundle{db: db, store: store, h: h, runner: r, reader: &queries.Reader{DB: db}}
}

// workload writes inquiries in several states for two tenants.
func (tb *testBundle) workload(t *testing.T, from, n int) {
	t.Helper()
	ctx := t.Context()
	for i := from; i < from+n; i++ {
		tenant := domain.TenantID([]string{"t1", "t2"}[i%2])
		res, err := tb.h.Intake(ctx, commands.Intake{Tenant: tenant, Source: domain.SourceAPI, IdempotencyKey: fmt.Sprint("k", i),
			Requester: domain.Requester{Email: "a@b.co"}, Subject: "s", Message: "m"})
		if err != nil {
			t.Fatal(err)
		}
		op := domain.Principal{ID: domain.PrincipalID(fmt.Sprint("op", i%3)), TenantID: tenant, Role: domain.RoleOperator}
		target := commands.Target{Tenant: tenant, InquiryID: res.InquiryID, Actor: op}
		if i%3 > 0 {
			if _, err := tb.h.Claim(ctx, commands.Claim{Target: target}); err != nil {
				t.Fatal(err)
			}
		}
		if i%3 == 2 {
			if _, err := tb.h.Transition(ctx, commands.Transition{Target: target, To: domain.StatusResolved}); err != nil {
				t.Fatal(err)
			}
			if _, err := tb.h.AddNote(ctx, commands.AddNote{Target: target, Body: "done"}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// catchUp runs the projection until it reaches the log's head.
func (tb *testBundle) catchUp(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = tb.runner.Run(ctx) }()
	head, err := tb.store.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer wcancel()
	if err := tb.runner.WaitFor(wctx, head); err != nil {
		t.Fatalf("projection did not reach %v: %v (status %+v)", head, err, tb.runner.Status())
	}
	cancel()
	<-done
}

// snapshot dumps both query-model tables.
func (tb *testBundle) snapshot(t *testing.T) []string { return querymodeltest.Snapshot(t, tb.db) }

// TestReplayIsIdempotent: losing the checkpoint (as a crash between output and checkpoint would, if
// they were not one transaction) and replaying from zero changes no row.
func TestReplayIsIdempotent(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := setup(t, db)
		tb.workload(t, 0, 30)
		tb.catchUp(t)
		before := tb.snapshot(t)
		if len(before) < 60 {
			t.Fatalf("snapshot has %d rows; the workload did not project", len(before))
		}
		if _, err := tb.db.ExecContext(t.Context(), `DELETE FROM projection_checkpoints`); err != nil {
			t.Fatal(err)
		}
		tb.runner = &projections.Runner{Store: tb.store, DB: tb.db, Projection: querymodel.New(), Owner: "test"}
		tb.catchUp(t)
		if diff := cmp.Diff(before, tb.snapshot(t)); diff != "" {
			t.Fatalf("replay changed the query model: %s", diff)
		}
		if st := tb.runner.Status(); st.Parked != 0 || st.Processed == 0 {
			t.Fatalf("replay parked %d streams, processed %d events; want 0 parked", st.Parked, st.Processed)
		}
	})
}

// TestErasureRedactsTheTimeline: an erased inquiry's timeline keeps no personal member, whether
// the erasure is applied in the batch that received the inquiry (on Postgres that batch's rows go
// with its commit, so they must be redacted before they are written) or in a later batch (the
// stored entries are redacted in place). The events are not sealed here: the query model must
// redact what it is given.
func TestErasureRedactsTheTimeline(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		tb := setup(t, db)
		keys, err := sealed.NewKeys(ctx, db, nil, bytes.Repeat([]byte("m"), 32))
		if err != nil {
			t.Fatal(err)
		}
		tb.h.Keys = keys
		admin := domain.Principal{ID: "admin", TenantID: "t1", Role: domain.RoleAdmin}
		personal := []string{"Ada Lovelace", "ada@example.com", "order 1843", "her engine", "note naming Ada", "call Ada"}
		received := func(key string) commands.Target {
			t.Helper()
			res, err := tb.h.Intake(ctx, commands.Intake{Tenant: "t1", Source: domain.SourceAPI, IdempotencyKey: key,
				Requester: domain.Requester{Name: "Ada Lovelace", Email: "ada@example.com"}, Subject: "order 1843", Message: "her engine"})
			if err != nil {
				t.Fatal(err)
			}
			target := commands.Target{Tenant: "t1", InquiryID: res.InquiryID, Actor: admin}
			if _, err := tb.h.AddNote(ctx, commands.AddNote{Target: target, Body: "note naming Ada"}); err != nil {
				t.Fatal(err)
			}
			if _, err := tb.h.ScheduleFollowUp(ctx, commands.ScheduleFollowUp{Target: target, At: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Note: "call Ada"}); err != nil {
				t.Fatal(err)
			}
			return target
		}
		erase := func(target commands.Target) {
			t.Helper()
			if _, err := tb.h.Erase(ctx, commands.Erase{Target: target}); err != nil {
				t.Fatal(err)
			}
		}
		later := received("later")
		tb.catchUp(t)
		same := received("same")
		erase(same)
		erase(later)
		batches := tb.runner.Status().Batches
		tb.catchUp(t)
		if got := tb.runner.Status().Batches - batches; got != 1 {
			t.Fatalf("the second catch-up took %d batches; the test needs the intake and its erasure in one", got)
		}
		for _, target := range []commands.Target{same, later} {
			entries := dbtest.Strings(t, db, `SELECT type || ' ' || data FROM qm_timeline WHERE tenant_id = ? AND inquiry_id = ? ORDER BY version`,
				"t1", string(target.InquiryID))
			if len(entries) != 4 {
				t.Fatalf("%s: %d timeline entries, want 4: %q", target.InquiryID, len(entries), entries)
			}
			inquiry := dbtest.Strings(t, db, `SELECT requester_name || ' ' || requester_email || ' ' || subject || ' ' || message FROM qm_inquiries
				WHERE tenant_id = ? AND id = ?`, "t1", string(target.InquiryID))
			for _, s := range append(entries, inquiry...) {
				for _, p := range personal {
					if strings.Contains(s, p) {
						t.Errorf("%s: %q still reads %q", target.InquiryID, s, p)
					}
				}
			}
			for _, want := range []string{`NoteAdded {"body":"` + domain.Erased, `FollowUpScheduled {`} {
				if !strings.Contains(strings.Join(entries, "\n"), want) {
					t.Errorf("%s: no timeline entry reads %q: %q", target.InquiryID, want, entries)
				}
			}
		}
	})
}

// TestRebuildMatchesLive: a generation rebuilt from the whole log equals the one built
// incrementally while the log grew, and after the switch the views serve it.
func TestRebuildMatchesLive(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := setup(t, db)
		tb.workload(t, 0, 10)
		tb.catchUp(t)
		tb.workload(t, 10, 25)
		tb.catchUp(t)
		live := tb.snapshot(t)
		res, err := projections.Rebuild(t.Context(), tb.store, tb.db, querymodel.New(), projections.RebuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Switched || res.Generation != 2 || res.Previous != 1 || !res.DroppedOld {
			t.Fatalf("rebuild = %+v", res)
		}
		if diff := cmp.Diff(live, tb.snapshot(t)); diff != "" {
			t.Fatalf("rebuild differs from live: %s", diff)
		}
		if db.Dialect == sqldb.Postgres {
			// The new generation serves with the planner's statistics of each table (Finalize
			// gathers them; autovacuum would not analyze 40 inquiry rows at all).
			var want, got []string
			for _, table := range querymodel.New().Tables() {
				want = append(want, res.Generation.Table(table))
			}
			analyzed := map[string]bool{}
			for _, table := range dbtest.Strings(t, db, `SELECT DISTINCT tablename::text FROM pg_stats WHERE schemaname = current_schema()`) {
				analyzed[table] = true
			}
			for _, table := range want {
				if analyzed[table] {
					got = append(got, table)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("tables with statistics after the rebuild (-want +got):\n%s", diff)
			}
		}
		// The live runner follows the switch and keeps the new generation current.
		tb.workload(t, 35, 5)
		tb.catchUp(t)
		if got := tb.runner.Status().Generation; got != 2 {
			t.Fatalf("live runner on generation %d after the switch", got)
		}
		items, _, err := tb.reader.List(t.Context(), "t1", queries.Filter{Limit: 100})
		if err != nil || len(items) != 20 {
			t.Fatalf("t1 lists %d (%v), want 20", len(items), err)
		}
	})
}

// TestQueriesAreTenantScoped: t2 cannot read t1's inquiry through any query.
func TestQueriesAreTenantScoped(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := setup(t, db)
		tb.workload(t, 0, 4)
		tb.catchUp(t)
		items, _, err := tb.reader.List(t.Context(), "t1", queries.Filter{})
		if err != nil || len(items) != 2 {
			t.Fatalf("t1 lists %d (%v), want 2", len(items), err)
		}
		id := items[0].ID
		if _, err := tb.reader.Get(t.Context(), "t2", id); err == nil {
			t.Fatal("t2 read t1's inquiry")
		}
		if _, err := tb.reader.Timeline(t.Context(), "t2", id); err == nil {
			t.Fatal("t2 read t1's timeline")
		}
		q, err := tb.reader.Get(t.Context(), "t1", id)
		if err != nil || q.Requester == nil || q.Requester.Email != "a@b.co" {
			t.Fatalf("detail = %+v, %v", q, err)
		}
	})
}

// TestVersionTracksSchema fails when the tables change without a Version bump: a stored generation
// of the old shape must be rebuilt, not served. On a deliberate change, bump Version and record the
// new schema's hash here.
func TestVersionTracksSchema(t *testing.T) {
	t.Parallel()
	hashes := map[int]string{
		1: "8d8fc9c8c59999b593de952fb9e6f61dd97bfd80bad7dd89672d7596af57d21a",
		2: "c51f54495fd8d59a82f67b0f6a5782d7e4f77c04546ae5f6503cd18e736ab0cc", // indexes built by Finalize
		3: "0d78defa5ba624111bf1cb19068c02934c70a8213f5b77291828f6c4221b4831", // keys COLLATE "C" on Postgres
		4: "266eed67487f37bece7321027c1a564546dd73feedd40f335a937d35d19a759a", // timeline command_id, receipt index
		5: "7fd6b1b2a1bfa5ba0d27b0c99cdf0aa4b302c7cebce20f26354c0eee462959d5", // archived, held, erased, retain_until (issue 17)
	}
	sum := sha256.Sum256([]byte(querymodel.Schema()))
	if got := hex.EncodeToString(sum[:]); hashes[querymodel.Version] != got {
		t.Fatalf("querymodel schema hash %s does not match Version %d: bump Version and record the hash", got, querymodel.Version)
	}
}

// TestFinalizeBuildsIndexes: Finalize builds every index of a generation, and two finalizers of
// the same generation at once (two replicas) both succeed.
func TestFinalizeBuildsIndexes(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		p := querymodel.New()
		const gen = projections.Generation(7)
		if err := p.Setup(ctx, db, gen); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() { errs[i] = p.Finalize(ctx, db, gen) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("concurrent Finalize: %v", err)
			}
		}
		q := `SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'qm\_%' ESCAPE '\' AND name NOT LIKE 'sqlite_autoindex%' ORDER BY name`
		if db.Dialect == sqldb.Postgres {
			q = `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname LIKE 'qm\_%' AND indexname NOT LIKE '%pkey' ORDER BY indexname`
		}
		got := dbtest.Strings(t, db, q)
		want := []string{"qm_inquiries_g7_list", "qm_inquiries_g7_receipt", "qm_inquiries_g7_status", "qm_timeline_g7_key"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("indexes (-want +got):\n%s", diff)
		}
	})
}

// TestReceiptLookupUsesIndex: finding an inquiry by the receipt a customer quotes reads the
// (tenant_id, receipt) index, not the tenant's rows (on Postgres with sequential scans priced out,
// since a small table is always cheaper to scan).
func TestReceiptLookupUsesIndex(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		tb := setup(t, db)
		tb.workload(t, 0, 20)
		tb.catchUp(t)
		plan := dbtest.IndexPlan(t, db, `SELECT id FROM qm_inquiries WHERE tenant_id = ? AND receipt = ?
			ORDER BY created_at DESC, id DESC LIMIT 2`, "t1", "R-NOPE")
		if !strings.Contains(strings.Join(plan, "\n"), "_receipt") {
			t.Fatalf("the receipt lookup does not use the receipt index:\n%s", strings.Join(plan, "\n"))
		}
	})
}
