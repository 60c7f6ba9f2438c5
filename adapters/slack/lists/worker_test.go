package lists_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/projections"
)

func (b *bundle) receipt(t *testing.T, id domain.InquiryID) string {
	t.Helper()
	q, err := b.app.Commands.Load(t.Context(), b.tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return q.Receipt
}

func (b *bundle) rowEvents(t *testing.T, id domain.InquiryID) []string {
	t.Helper()
	return events(t, b, lists.Stream(b.tenant, id))
}

// TestRowLifecycle: intake → one row with typed cells matching the schema (rich_text texts, select
// option values, marker) and no personal data; transitions update it; resolution schedules a removal
// at the transition's time + the delay, which deletes the row only once the delay has passed.
func TestRowLifecycle(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		b.activate(t)
		id := b.intake(t, "k1")
		b.project(t)
		noErrors(t, b.work(t))
		r := oneRow(t, b)
		rec := b.receipt(t, id)
		if r.Text(b.col(lists.ColReceipt)) != rec || r.Cells[b.col(lists.ColReceipt)].Kind != "rich_text" {
			t.Fatalf("receipt cell = %+v", r.Cells[b.col(lists.ColReceipt)])
		}
		if got := r.Strings(b.col(lists.ColStatus)); !reflect.DeepEqual(got, []string{"new"}) || r.Cells[b.col(lists.ColStatus)].Kind != "select" {
			t.Fatalf("status cell = %v", got)
		}
		if !b.app.Lists.Store.Markers.Verify(r.Text(b.col(lists.ColMarker)), string(b.tenant), b.list.ID, string(id), rec) {
			t.Fatalf("marker %q does not verify", r.Text(b.col(lists.ColMarker)))
		}
		for _, c := range r.Cells {
			if strings.Contains(string(c.Value), "Ada") || strings.Contains(string(c.Value), "Invoice") {
				t.Fatalf("personal data in a cell: %s", c.Value)
			}
		}
		b.transition(t, id, domain.StatusTriaged, domain.PriorityHigh)
		b.transition(t, id, domain.StatusInProgress, "")
		b.project(t)
		noErrors(t, b.work(t))
		r = oneRow(t, b)
		if r.Strings(b.col(lists.ColStatus))[0] != "in_progress" || r.Strings(b.col(lists.ColPriority))[0] != "high" {
			t.Fatalf("row not updated: %+v", r.Cells)
		}
		b.transition(t, id, domain.StatusResolved, "")
		b.project(t)
		noErrors(t, b.work(t))
		if r = oneRow(t, b); r.Strings(b.col(lists.ColStatus))[0] != "resolved" {
			t.Fatalf("resolved row shows %v", r.Strings(b.col(lists.ColStatus)))
		}
		rm := b.jobs(t, lists.RemoveArgs{}.Kind())
		if len(rm) != 1 || !rm[0].ScheduledAt.Equal(b.clock.Now().Add(time.Hour)) {
			t.Fatalf("removal jobs = %d (scheduled %v)", len(rm), rm[0].ScheduledAt)
		}
		if err := b.workRemove(t.Context(), t, rm[0]); err == nil || len(b.rows()) != 1 {
			t.Fatalf("removal before the delay = %v, rows %d", err, len(b.rows()))
		}
		b.clock.Advance(time.Hour)
		if err := b.workRemove(t.Context(), t, rm[0]); err != nil || len(b.rows()) != 0 {
			t.Fatalf("removal after the delay = %v, rows %d", err, len(b.rows()))
		}
		if ev := b.rowEvents(t, id); ev[len(ev)-1] != "ListRowRemoved" {
			t.Fatalf("events = %v", ev)
		}
	})
}

// TestOneRowWhenCreateTimesOutAfterApply: items.create is applied but the caller gives up; the
// worker looks the marker up and adopts the row instead of creating a second one.
func TestOneRowWhenCreateTimesOutAfterApply(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		b.activate(t)
		id := b.intake(t, "k1")
		b.project(t)
		b.fake.FailNext("slackLists.items.create", fakeslack.TimeoutAfterApply(0))
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			_ = b.fake.WaitHung(ctx, 1)
			cancel()
		}()
		if err := b.workSync(ctx, t, syncJobs(t, b)[0]); err != nil {
			t.Fatalf("work = %v", err)
		}
		cancel()
		r := oneRow(t, b)
		if ev := b.rowEvents(t, id); !reflect.DeepEqual(ev, []string{"ListRowAdopted", "ListRowUpdated"}) {
			t.Fatalf("events = %v", ev)
		}
		b.project(t)
		m, err := lists.Rows(t.Context(), b.app.DB, b.tenant)
		if err != nil || len(m) != 1 || m[0].RowID != r.ID || !m[0].Adopted || b.fake.CallCount("slackLists.items.create") != 2 {
			t.Fatalf("mapping = %+v %v (creates %d: probe + one)", m, err, b.fake.CallCount("slackLists.items.create"))
		}
	})
}

// TestOneRowWhenWorkerCrashesAfterCreate: the row exists but its id was never recorded; once the
// attempt is stale, the next run finds the marker and adopts.
func TestOneRowWhenWorkerCrashesAfterCreate(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		b.activate(t)
		id := b.intake(t, "k1")
		b.project(t)
		j := syncJobs(t, b)[0]
		crash := errors.New("crash")
		lists.SetHooks(b.app.Lists.Worker, nil, func() error { return crash })
		if err := b.workSync(t.Context(), t, j); !errors.Is(err, crash) {
			t.Fatalf("work = %v", err)
		}
		lists.SetHooks(b.app.Lists.Worker, nil, nil)
		if err := b.workSync(t.Context(), t, j); err == nil || !strings.Contains(err.Error(), "Snooze") {
			t.Fatalf("a fresh attempt must not be raced: %v", err)
		}
		b.clock.Advance(2 * time.Minute)
		if err := b.workSync(t.Context(), t, j); err != nil {
			t.Fatal(err)
		}
		r := oneRow(t, b)
		st, _ := b.app.Commands.Load(t.Context(), b.tenant, id)
		if ev := b.rowEvents(t, id); ev[0] != "ListRowAdopted" || st.Version != 1 {
			t.Fatalf("events = %v", ev)
		}
		b.project(t)
		if m, _ := lists.Rows(t.Context(), b.app.DB, b.tenant); len(m) != 1 || m[0].RowID != r.ID {
			t.Fatalf("mapping = %+v", m)
		}
	})
}

// TestOneRowWhenTwoWorkersRace: two jobs of the same inquiry run at once; the second finds the
// first's create in flight and snoozes, then updates the one row.
func TestOneRowWhenTwoWorkersRace(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		b.activate(t)
		id := b.intake(t, "k1")
		b.project(t)
		b.transition(t, id, domain.StatusTriaged, domain.PriorityUrgent)
		b.project(t)
		js := syncJobs(t, b)
		if len(js) != 2 {
			t.Fatalf("%d jobs", len(js))
		}
		inFlight, release := make(chan struct{}), make(chan struct{})
		lists.SetHooks(b.app.Lists.Worker, func() { close(inFlight); <-release }, nil)
		first := make(chan error, 1)
		go func() { first <- b.workSync(t.Context(), t, js[0]) }()
		<-inFlight
		if err := b.workSync(t.Context(), t, js[1]); err == nil || !strings.Contains(err.Error(), "Snooze") {
			t.Fatalf("second worker = %v, want a snooze", err)
		}
		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		lists.SetHooks(b.app.Lists.Worker, nil, nil)
		if err := b.workSync(t.Context(), t, js[1]); err != nil {
			t.Fatal(err)
		}
		r := oneRow(t, b)
		if r.Strings(b.col(lists.ColPriority))[0] != "urgent" {
			t.Fatalf("row = %+v", r.Cells)
		}
	})
}

// TestForgedMarkerNotAdopted: rows carrying a forged marker, or our valid marker copied from
// another List, are never adopted: the worker creates its own row.
func TestForgedMarkerNotAdopted(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		b.activate(t)
		id := b.intake(t, "k1")
		b.project(t)
		rec := b.receipt(t, id)
		forged := lists.MarkerVersion + "." + rec + ".AAAAAAAAAAAAAAAAAAAAAAAA"
		copied := b.app.Lists.Store.Markers.For(string(b.tenant), "F0OTHERLIST", string(id), rec)
		var planted []string
		for _, m := range []string{forged, copied} {
			row, err := b.fake.AddRow(b.list.ID, "U0HUMAN0001", fakeslack.TextCell(b.col(lists.ColMarker), m), fakeslack.TextCell(b.col(lists.ColReceipt), rec))
			if err != nil {
				t.Fatal(err)
			}
			planted = append(planted, row)
		}
		// A 5xx after the create was applied: unknown result, the lookup must skip the planted rows.
		b.fake.FailNext("slackLists.items.create", fakeslack.DropAfterApply())
		if err := b.workSync(t.Context(), t, syncJobs(t, b)[0]); err != nil {
			t.Fatal(err)
		}
		b.project(t)
		m, err := lists.Rows(t.Context(), b.app.DB, b.tenant)
		if err != nil || len(m) != 1 || m[0].RowID == planted[0] || m[0].RowID == planted[1] {
			t.Fatalf("mapping = %+v %v, planted %v", m, err, planted)
		}
		if len(b.rows()) != 3 {
			t.Fatalf("%d rows, want the 2 planted + ours", len(b.rows()))
		}
	})
}

// TestMarkerBindsTenantListInquiry: a marker verifies only for its tenant, List and inquiry.
func TestMarkerBindsTenantListInquiry(t *testing.T) {
	t.Parallel()
	m, err := lists.NewMarkers([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	mk := m.For("t1", "F1", "i1", "CB-REF")
	if ref, _, ok := lists.ParseMarker(mk); !ok || ref != "CB-REF" || !m.Verify(mk, "t1", "F1", "i1", "CB-REF") {
		t.Fatalf("marker %q", mk)
	}
	for _, c := range [][4]string{{"t2", "F1", "i1", "CB-REF"}, {"t1", "F2", "i1", "CB-REF"}, {"t1", "F1", "i2", "CB-REF"}, {"t1", "F1", "i1", "CB-OTHER"}} {
		if m.Verify(mk, c[0], c[1], c[2], c[3]) {
			t.Fatalf("marker verified for %v", c)
		}
	}
	other, _ := lists.NewMarkers([]byte("another instance secret, 32 byte"))
	if other.Verify(mk, "t1", "F1", "i1", "CB-REF") {
		t.Fatal("a marker verified under another instance secret")
	}
	if _, _, ok := lists.ParseMarker("hello"); ok {
		t.Fatal("a foreign value parsed as a marker")
	}
}

// TestReplayRebuildsRowMap: rebuilding listrowmap from the log gives the live mapping.
func TestReplayRebuildsRowMap(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		b.activate(t)
		a := b.intake(t, "k1")
		b.intake(t, "k2")
		b.project(t)
		noErrors(t, b.work(t))
		b.transition(t, a, domain.StatusTriaged, domain.PriorityHigh)
		b.project(t)
		noErrors(t, b.work(t))
		b.project(t)
		live, err := lists.Rows(t.Context(), b.app.DB, b.tenant)
		if err != nil || len(live) != 2 {
			t.Fatalf("live = %+v %v", live, err)
		}
		p, err := b.app.Projection(lists.RowMapName)
		if err != nil {
			t.Fatal(err)
		}
		jobsBefore := len(syncJobs(t, b))
		if _, err := projections.Rebuild(t.Context(), b.app.Store, b.app.DB, p, projections.RebuildOptions{Now: b.clock.Now}); err != nil {
			t.Fatal(err)
		}
		rebuilt, err := lists.Rows(t.Context(), b.app.DB, b.tenant)
		if err != nil || !reflect.DeepEqual(live, rebuilt) {
			t.Fatalf("rebuilt %+v != live %+v (%v)", rebuilt, live, err)
		}
		ip, _ := b.app.Projection(lists.IntentsName)
		if _, err := projections.Rebuild(t.Context(), b.app.Store, b.app.DB, ip, projections.RebuildOptions{Now: b.clock.Now}); err != nil {
			t.Fatal(err)
		}
		if n := len(syncJobs(t, b)); n != jobsBefore {
			t.Fatalf("a rebuild emitted %d jobs", n-jobsBefore)
		}
	})
}

// TestRateLimitSharedCooldownAndRowCap: a 429 sets the List's cooldown that every job honours
// without a call; over_row_maximum opens the circuit for an operator instead of retrying.
func TestRateLimitSharedCooldownAndRowCap(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		b.activate(t)
		b.intake(t, "k1")
		b.intake(t, "k2")
		b.project(t)
		b.fake.FailNext("slackLists.items.create", fakeslack.RateLimited(30*time.Second))
		errs := b.work(t)
		for _, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "Snooze") {
				t.Fatalf("work = %v, want snoozes", errs)
			}
		}
		if n := b.fake.CallCount("slackLists.items.create"); n != 2 {
			t.Fatalf("%d creates: the second job ignored the cooldown", n)
		}
		st, _ := b.app.Lists.Store.Statuses(t.Context(), b.tenant)
		if st[0].CooldownUntil == nil || st[0].Sync.Classes[string(slackeffects.ClassRateLimited)] != 1 {
			t.Fatalf("status = %+v", st[0])
		}
		b.clock.Advance(31 * time.Second)
		if err := b.fake.SetRowCap(b.list.ID, 1); err != nil {
			t.Fatal(err)
		}
		js := syncJobs(t, b)
		if err := b.workSync(t.Context(), t, js[0]); err != nil {
			t.Fatal(err)
		}
		if err := b.workSync(t.Context(), t, js[1]); err == nil {
			t.Fatal("over_row_maximum did not fail")
		}
		st, _ = b.app.Lists.Store.Statuses(t.Context(), b.tenant)
		if !st[0].CircuitOpen || st[0].CircuitReason != "over_row_maximum" {
			t.Fatalf("status = %+v", st[0])
		}
		before := b.listCalls()
		b.clock.Advance(time.Hour)
		if err := b.workSync(t.Context(), t, js[1]); err == nil || b.listCalls() != before {
			t.Fatalf("a capacity circuit let a job through: %v", err)
		}
		raw, _ := json.Marshal(st)
		if !strings.Contains(string(raw), `"activation":"active"`) {
			t.Fatalf("status json = %s", raw)
		}
	})
}
