package lists_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/app/apptest"
	"github.com/casebook/casebook/domain"
)

// TestListIDIsTenantScoped: a List id is a key only together with its tenant. Tenant B, in a
// workspace of its own whose Lists carry the same ids as tenant A's (Slack's ids are per
// workspace), cannot read, deactivate, check, bound, reconcile, retry, cancel or close a circuit
// of A's List through any store path, nor activate or create a List through A's installation;
// once B registers its own List under the same id (by hand and by lists create), each tenant's
// projection row, row mappings, jobs and Slack rows stay its own, and B's deactivation leaves A's
// projection working.
func TestListIDIsTenantScoped(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		st, eff := b.app.Lists.Store, b.app.Effects
		f1 := b.list.ID
		b.activate(t)
		created, err := st.Create(ctx, lists.CreateRequest{Tenant: b.tenant, Name: "Acme board", Clearance: "internal"})
		if err != nil {
			t.Fatal(err)
		}
		f2 := created.List
		b.intake(t, "a1")
		b.project(t)
		noErrors(t, b.work(t))
		b.reconcile(t)
		if err := st.SetWorkingSetMax(ctx, b.tenant, f1, 7); err != nil {
			t.Fatal(err)
		}
		// A's capacity circuit on f1: the List is full, A's next row is refused.
		if err := b.fake.SetRowCap(f1, 1); err != nil {
			t.Fatal(err)
		}
		b.intake(t, "a2")
		b.project(t)
		b.work(t)
		stA := statusOf(t, b, b.tenant, f1)
		if !stA.CircuitOpen {
			t.Fatalf("A's circuit on %s is not open: %+v", f1, stA)
		}
		cfgA, err := st.Config(ctx, b.tenant, f1)
		if err != nil {
			t.Fatal(err)
		}
		recA, err := st.Reconciliation(ctx, b.tenant, f1)
		if err != nil || recA.LastRun == nil {
			t.Fatalf("A's reconciliation = %+v, %v", recA, err)
		}
		b.project(t)
		rowsA := mappings(t, b, b.tenant)
		if len(rowsA) != 3 {
			t.Fatalf("A's mappings = %+v, want its first inquiry in two Lists and its second in one", rowsA)
		}
		evA := events(t, b, lists.ProjectionStream(b.tenant, f1))
		jobsA := syncJobs(t, b)

		// Tenant B, its own workspace.
		tenB, _, _ := apptest.TenantWithOperator(t, b.app, "globex")
		fakeB := fakeslack.NewTestServer(t, fakeslack.Options{TeamID: "T0FAKETEAM2"})
		if _, err := b.app.Slack.Install(ctx, slackinstall.InstallRequest{Tenant: tenB, Token: fakeB.Token(), SigningSecret: "sig",
			AppID: "A0FAKEAPP01", APIURL: fakeB.URL()}); err != nil {
			t.Fatal(err)
		}

		// Before B registers anything: every path taking a List id finds nothing of A's.
		notFound := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, domain.ErrNotFound) {
				t.Errorf("%s of A's List by B: err = %v, want not found", what, err)
			}
		}
		_, err = st.Config(ctx, tenB, f1)
		notFound("config", err)
		_, err = st.Deactivate(ctx, tenB, f1)
		notFound("deactivate", err)
		_, err = st.CheckSchema(ctx, tenB, f1)
		notFound("schema check", err)
		notFound("working set", st.SetWorkingSetMax(ctx, tenB, f1, 1))
		_, err = b.app.Lists.Reconciler.Run(ctx, tenB, f1, false)
		notFound("reconcile", err)
		if rec, err := st.Reconciliation(ctx, tenB, f1); err != nil || rec.LastRun != nil || rec.Watermarks.LastAttempted != nil {
			t.Errorf("B reads A's reconciliation: %+v, %v", rec, err)
		}
		if sts, err := st.Statuses(ctx, tenB); err != nil || len(sts) != 0 {
			t.Errorf("B's List statuses = %+v, %v", sts, err)
		}
		if rs := mappings(t, b, tenB); len(rs) != 0 {
			t.Errorf("B finds row mappings %+v", rs)
		}
		for _, j := range jobsA {
			_, err = eff.Effect(ctx, tenB, j.ID)
			notFound("effect", err)
			_, err = eff.Retry(ctx, tenB, j.ID)
			notFound("effect retry", err)
			_, err = eff.Cancel(ctx, tenB, j.ID)
			notFound("effect cancel", err)
		}
		if es, err := eff.Effects(ctx, tenB, slackeffects.Filter{}); err != nil || len(es) != 0 {
			t.Errorf("B's effects = %d, %v", len(es), err)
		}
		_, err = eff.Guard.CloseCircuit(ctx, tenB, f1)
		notFound("circuit close", err)
		if c, err := eff.Guard.Circuit(ctx, tenB, f1); err != nil || c.Open {
			t.Errorf("B sees A's circuit: %+v, %v", c, err)
		}
		if h, err := eff.DestinationHealth(ctx, tenB, f1); err != nil || len(h) != 0 {
			t.Errorf("B sees A's row health: %v, %v", h, err)
		}
		// A's installation is not B's to use.
		callsA := b.fake.CallCount("slackLists.create") + b.listCalls()
		_, err = st.Activate(ctx, lists.ActivateRequest{Tenant: tenB, List: f1, Clearance: "internal", Installation: cfgA.InstallationID})
		notFound("activation through A's installation", err)
		_, err = st.Create(ctx, lists.CreateRequest{Tenant: tenB, Name: "Globex", Clearance: "internal", Installation: cfgA.InstallationID})
		notFound("create through A's installation", err)
		if got := b.fake.CallCount("slackLists.create") + b.listCalls(); got != callsA {
			t.Errorf("B's refused requests made %d calls in A's workspace", got-callsA)
		}
		if _, err := st.Config(ctx, tenB, f1); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("a refused activation registered (B, %s): %v", f1, err)
		}

		// B registers its own Lists under the same ids: by hand and activated, and by lists create.
		liB, err := fakeB.CreateList("Globex inquiries", boardColumns()...)
		if err != nil {
			t.Fatal(err)
		}
		if liB.ID != f1 {
			t.Fatalf("B's List is %s, want the same id as A's %s (the fixture's point)", liB.ID, f1)
		}
		if _, err := st.Activate(ctx, lists.ActivateRequest{Tenant: tenB, List: f1, Clearance: "internal", RemoveAfter: time.Hour}); err != nil {
			t.Fatal(err)
		}
		createdB, err := st.Create(ctx, lists.CreateRequest{Tenant: tenB, Name: "Globex board", Clearance: "internal"})
		if err != nil {
			t.Fatal(err)
		}
		if createdB.List != f2 {
			t.Fatalf("B's created List is %s, want the same id as A's %s", createdB.List, f2)
		}
		if err := st.SetWorkingSetMax(ctx, tenB, f1, 3); err != nil {
			t.Fatal(err)
		}
		inqB := apptest.Intake(t, b.app, tenB, "b1")
		b.project(t)
		noErrors(t, b.work(t))
		for _, f := range []string{f1, f2} {
			rs := fakeB.Rows(f)
			if len(rs) != 1 {
				t.Fatalf("%d rows in B's List %s, want B's one", len(rs), f)
			}
		}
		b.project(t)
		if got := mappings(t, b, tenB); len(got) != 2 || got[0].Inquiry != inqB || got[1].Inquiry != inqB {
			t.Fatalf("B's mappings = %+v, want B's inquiry in its two Lists", got)
		}
		if got := mappings(t, b, b.tenant); !reflect.DeepEqual(got, rowsA) {
			t.Fatalf("A's mappings changed: %+v, were %+v", got, rowsA)
		}
		for _, r := range rowsA {
			if r.Tenant != b.tenant || r.Inquiry == inqB {
				t.Fatalf("A's mapping %+v", r)
			}
		}
		if _, err := b.app.Lists.Reconciler.Run(ctx, tenB, f1, false); err != nil {
			t.Fatal(err)
		}
		_, err = st.Deactivate(ctx, tenB, f1)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := eff.Guard.CloseCircuit(ctx, tenB, f1); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("B closed %d circuits on %s: %v", n, f1, err)
		}

		// A's projection row, reconcile state, bound, circuit and audit stream are as they were.
		if got, err := st.Config(ctx, b.tenant, f1); err != nil || !reflect.DeepEqual(got, cfgA) {
			t.Fatalf("A's config changed: %+v, was %+v (%v)", got, cfgA, err)
		}
		if got, err := st.Reconciliation(ctx, b.tenant, f1); err != nil || !reflect.DeepEqual(got.LastRun, recA.LastRun) {
			t.Fatalf("A's last reconcile changed: %+v, was %+v (%v)", got.LastRun, recA.LastRun, err)
		}
		if got := statusOf(t, b, b.tenant, f1); !got.CircuitOpen || got.WorkingSetMax != 7 || got.Activation != lists.StateActive {
			t.Fatalf("A's status = %+v", got)
		}
		if got := events(t, b, lists.ProjectionStream(b.tenant, f1)); !reflect.DeepEqual(got, evA) {
			t.Fatalf("A's projection events = %v, were %v", got, evA)
		}
		// A's other List still takes A's next inquiry; B's workspace gets none of it.
		rowsB := len(fakeB.Rows(f1)) + len(fakeB.Rows(f2))
		before := len(b.fake.Rows(f2))
		b.intake(t, "a3")
		b.project(t)
		b.work(t)
		if n := len(b.fake.Rows(f2)); n != before+1 {
			t.Fatalf("A's List %s has %d rows, want %d", f2, n, before+1)
		}
		if n := len(fakeB.Rows(f1)) + len(fakeB.Rows(f2)); n != rowsB {
			t.Fatalf("A's inquiry reached B's workspace: %d rows, were %d", n, rowsB)
		}
	})
}

func statusOf(t *testing.T, b *bundle, tenant domain.TenantID, list string) lists.Status {
	t.Helper()
	sts, err := b.app.Lists.Store.Statuses(t.Context(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sts {
		if s.List == list {
			return s
		}
	}
	t.Fatalf("no status of %s for %s", list, tenant)
	return lists.Status{}
}

func mappings(t *testing.T, b *bundle, tenant domain.TenantID) []lists.Row {
	t.Helper()
	rs, err := lists.Rows(t.Context(), b.app.DB, tenant)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
