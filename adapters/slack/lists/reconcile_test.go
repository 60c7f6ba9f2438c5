package lists_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/casebook/casebook/adapters/slack/fakeslack"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/domain"
)

// pageMax is the fake's page size in the reconcile tests: with boardSize rows in each inventory a
// sweep reads five pages of each.
const (
	pageMax   = 2
	boardSize = 10
)

func noPace(context.Context, time.Duration) error { return nil }

// reconciler returns the app's reconciler with no pacing and the after-page hook.
func (b *bundle) reconciler(after func(archived bool, page int)) *lists.Reconciler {
	r := b.app.Lists.Reconciler
	lists.SetReconcileHooks(r, noPace, after)
	return r
}

func (b *bundle) reconcile(t *testing.T) lists.Report {
	t.Helper()
	rep, err := b.reconciler(nil).Run(t.Context(), b.tenant, b.list.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// board activates the List and fills it: n synced inquiries in the active inventory (n/pageMax
// pages) and boardSize rows a person added and archived (boardSize/pageMax pages).
func (b *bundle) board(t *testing.T, n int) []domain.InquiryID {
	t.Helper()
	b.activate(t)
	b.fake.SetItemsPageMax(pageMax)
	var ids []domain.InquiryID
	for i := range n {
		ids = append(ids, b.intake(t, fmt.Sprintf("k%02d", i)))
	}
	b.project(t)
	noErrors(t, b.work(t))
	for i := range boardSize {
		row, err := b.fake.AddRow(b.list.ID, "U0PERSON001", fakeslack.TextCell(b.col(lists.ColReceipt), fmt.Sprintf("note %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.fake.ArchiveRow(b.list.ID, row); err != nil {
			t.Fatal(err)
		}
	}
	if len(b.rows()) != n || len(b.fake.ArchivedRows(b.list.ID)) != boardSize {
		t.Fatalf("board: %d active, %d archived", len(b.rows()), len(b.fake.ArchivedRows(b.list.ID)))
	}
	return ids
}

func (b *bundle) resolve(t *testing.T, id domain.InquiryID) {
	t.Helper()
	b.transition(t, id, domain.StatusTriaged, domain.PriorityNormal)
	b.transition(t, id, domain.StatusInProgress, "")
	b.transition(t, id, domain.StatusResolved, "")
}

// writes counts the fake's List writes.
func (b *bundle) writes() int {
	return b.fake.CallCount("slackLists.items.create") + b.fake.CallCount("slackLists.items.update") + b.fake.CallCount("slackLists.items.delete")
}

func (b *bundle) rowOf(t *testing.T, id domain.InquiryID) []fakeslack.Row {
	t.Helper()
	var out []fakeslack.Row
	rec := b.receipt(t, id)
	for _, r := range append(b.rows(), b.fake.ArchivedRows(b.list.ID)...) {
		if b.app.Lists.Store.Markers.Verify(r.Text(b.col(lists.ColMarker)), string(b.tenant), b.list.ID, string(id), rec) {
			out = append(out, r)
		}
	}
	return out
}

func (b *bundle) mapped(t *testing.T, id domain.InquiryID) string {
	t.Helper()
	b.project(t)
	rs, err := lists.Rows(t.Context(), b.app.DB, b.tenant)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Inquiry == id && r.List == b.list.ID {
			return r.RowID
		}
	}
	return ""
}

// wantOutcomes checks the counts of the named outcomes and that every other outcome is zero
// except foreign, which counts the person's archived rows (plus extra).
func wantOutcomes(t *testing.T, rep lists.Report, want map[lists.Outcome]int) {
	t.Helper()
	if _, ok := want[lists.Foreign]; !ok {
		want[lists.Foreign] = boardSize
	}
	for _, o := range lists.Outcomes {
		if rep.Outcomes[o] != want[o] {
			t.Errorf("outcome %s = %d, want %d (report %+v)", o, rep.Outcomes[o], want[o], rep.Outcomes)
		}
	}
	if rep.Coverage.ActivePages < 5 || rep.Coverage.ArchivedPages < 5 {
		t.Errorf("coverage %+v: want at least five pages of each inventory", rep.Coverage)
	}
}

// TestReconcileInSync: a List whose rows all show the canonical version: every row in_sync, the
// person's archived rows foreign, both inventories read to the end, nothing written; watermarks
// move together.
func TestReconcileInSync(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		b.board(t, boardSize)
		before := b.writes()
		rep := b.reconcile(t)
		wantOutcomes(t, rep, map[lists.Outcome]int{lists.InSync: boardSize})
		if !rep.Complete || !rep.FullyApplied || b.writes() != before || len(rep.Actions) != 0 {
			t.Fatalf("report %+v, %d writes", rep, b.writes()-before)
		}
		if rep.Coverage.ActivePages != 5 || rep.Coverage.ArchivedPages != 5 || rep.Reads != 10 {
			t.Fatalf("coverage %+v reads %d, want 5+5", rep.Coverage, rep.Reads)
		}
		rc, err := b.app.Lists.Store.Reconciliation(t.Context(), b.tenant, b.list.ID)
		if err != nil {
			t.Fatal(err)
		}
		w := rc.Watermarks
		if w.LastAttempted == nil || w.LastSuccessfullyObserved == nil || w.LastFullyApplied == nil || w.BacklogSince != nil || w.Running {
			t.Fatalf("watermarks %+v", w)
		}
		if rc.LastRun == nil || rc.LastRun.Outcomes[lists.InSync] != boardSize {
			t.Fatalf("last run %+v", rc.LastRun)
		}
	})
}

// TestReconcileStale: the log says the row shows an older version than the inquiry's (its update
// job has not run): stale, brought up to date by a normal update and recorded.
func TestReconcileStale(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ids := b.board(t, boardSize)
		b.transition(t, ids[3], domain.StatusTriaged, domain.PriorityHigh)
		b.project(t) // the sync job is queued, not worked
		rep := b.reconcile(t)
		wantOutcomes(t, rep, map[lists.Outcome]int{lists.InSync: boardSize - 1, lists.Stale: 1})
		if rep.Actions[lists.ActUpdate] != 1 || !rep.FullyApplied {
			t.Fatalf("report %+v", rep)
		}
		r := b.rowOf(t, ids[3])
		if len(r) != 1 || r[0].Strings(b.col(lists.ColPriority))[0] != "high" {
			t.Fatalf("row %+v", r)
		}
		if ev := b.rowEvents(t, ids[3]); ev[len(ev)-1] != "ListRowUpdated" {
			t.Fatalf("events %v", ev)
		}
		wantOutcomes(t, b.reconcile(t), map[lists.Outcome]int{lists.InSync: boardSize})
	})
}

// TestReconcileManualEdit: a person changed a cell; the version matches, the normalized cells do
// not: manual_edit, reverted through a normal update. Whitespace alone is not an edit.
func TestReconcileManualEdit(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ids := b.board(t, boardSize)
		row := b.rowOf(t, ids[1])[0]
		if err := b.fake.EditRow(b.list.ID, row.ID, "U0PERSON001", fakeslack.SelectCell(b.col(lists.ColStatus), "resolved")); err != nil {
			t.Fatal(err)
		}
		other := b.rowOf(t, ids[2])[0]
		rec := other.Text(b.col(lists.ColReceipt))
		if err := b.fake.EditRow(b.list.ID, other.ID, "U0PERSON001", fakeslack.TextCell(b.col(lists.ColReceipt), "  "+rec+" ")); err != nil {
			t.Fatal(err)
		}
		rep := b.reconcile(t)
		wantOutcomes(t, rep, map[lists.Outcome]int{lists.InSync: boardSize - 1, lists.ManualEdit: 1})
		if got := b.rowOf(t, ids[1])[0].Strings(b.col(lists.ColStatus)); rep.Actions[lists.ActUpdate] != 1 || got[0] != "new" {
			t.Fatalf("report %+v, status %v", rep, got)
		}
		wantOutcomes(t, b.reconcile(t), map[lists.Outcome]int{lists.InSync: boardSize})
	})
}

// TestReconcileMissingOnceThenConfirmed: a person deleted a mapped row. The first complete scan
// records a tombstone and recreates nothing; the second confirms the absence and creates one row,
// mapped in place of the old one.
func TestReconcileMissingOnceThenConfirmed(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ids := b.board(t, boardSize)
		gone := b.rowOf(t, ids[4])[0].ID
		if err := b.fake.DeleteRow(b.list.ID, gone); err != nil {
			t.Fatal(err)
		}
		creates := b.fake.CallCount("slackLists.items.create")
		rep := b.reconcile(t)
		wantOutcomes(t, rep, map[lists.Outcome]int{lists.InSync: boardSize - 1, lists.MissingOnce: 1})
		if b.fake.CallCount("slackLists.items.create") != creates || len(b.rows()) != boardSize-1 || rep.Actions[lists.ActTombstone] != 1 {
			t.Fatalf("first absence recreated: %+v", rep)
		}
		rep = b.reconcile(t)
		wantOutcomes(t, rep, map[lists.Outcome]int{lists.InSync: boardSize - 1, lists.ConfirmedMissing: 1})
		rs := b.rowOf(t, ids[4])
		if rep.Actions[lists.ActCreate] != 1 || len(rs) != 1 || b.mapped(t, ids[4]) != rs[0].ID || rs[0].ID == gone {
			t.Fatalf("report %+v rows %+v", rep, rs)
		}
		wantOutcomes(t, b.reconcile(t), map[lists.Outcome]int{lists.InSync: boardSize})
	})
}

// TestReconcileDuplicate: a person duplicated a row, marker and all. The copy is a duplicate,
// deleted after a re-read of its marker; the mapped row stays. After the inquiry is resolved and
// its row removed, a copy left behind is deleted too.
func TestReconcileDuplicate(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ids := b.board(t, boardSize)
		orig := b.rowOf(t, ids[0])[0]
		copyRow := func() string {
			var cells []fakeslack.CellInput
			for col, c := range orig.Cells {
				cells = append(cells, fakeslack.CellInput{ColumnID: col, Kind: c.Kind, Value: c.Value})
			}
			id, err := b.fake.AddRow(b.list.ID, "U0PERSON001", cells...)
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		dup := copyRow()
		rep := b.reconcile(t)
		wantOutcomes(t, rep, map[lists.Outcome]int{lists.InSync: boardSize, lists.Duplicate: 1})
		if _, ok := b.fake.Row(b.list.ID, dup); ok || rep.Actions[lists.ActDelete] != 1 {
			t.Fatalf("duplicate kept: %+v", rep)
		}
		if _, ok := b.fake.Row(b.list.ID, orig.ID); !ok || b.mapped(t, ids[0]) != orig.ID {
			t.Fatal("the mapped row went")
		}
		// Resolved: the removal job deletes the mapped row; a copy made before is the sweep's.
		dup = copyRow()
		b.resolve(t, ids[0])
		b.project(t)
		noErrors(t, b.work(t))
		b.clock.Advance(time.Hour)
		for _, j := range b.jobs(t, lists.RemoveArgs{}.Kind()) {
			if err := b.workRemove(t.Context(), t, j); err != nil {
				t.Fatal(err)
			}
		}
		if _, ok := b.fake.Row(b.list.ID, dup); !ok {
			t.Fatal("the copy went with the removal job")
		}
		rep = b.reconcile(t)
		wantOutcomes(t, rep, map[lists.Outcome]int{lists.InSync: boardSize - 1, lists.Duplicate: 1})
		if _, ok := b.fake.Row(b.list.ID, dup); ok || len(b.rows()) != boardSize-1 {
			t.Fatalf("copy of a resolved inquiry stays: %+v", rep)
		}
	})
}

// TestReconcileForeign: rows without a marker are a person's and stay; a forged marker, one
// copied from another List and one of an unknown version are foreign too, quarantined and
// reported (one event each, however many sweeps see them), never deleted and never adopted.
func TestReconcileForeign(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ids := b.board(t, boardSize)
		rec := b.receipt(t, ids[0])
		m := b.app.Lists.Store.Markers
		markers := []string{
			"cb1." + rec + ".Zm9yZ2VkZm9yZ2VkZm9yZ2Vk",                     // forged MAC
			m.For(string(b.tenant), "F0OTHERLIST", string(ids[0]), rec),    // copied from another List
			"cb9." + rec + ".whatever",                                     // unknown version
			m.For(string(b.tenant), b.list.ID, string(ids[0]), "R-NOSUCH"), // a receipt no inquiry has
		}
		var bad []string
		for _, mk := range markers {
			id, err := b.fake.AddRow(b.list.ID, "U0PERSON001", fakeslack.TextCell(b.col(lists.ColMarker), mk))
			if err != nil {
				t.Fatal(err)
			}
			bad = append(bad, id)
		}
		plain, err := b.fake.AddRow(b.list.ID, "U0PERSON001", fakeslack.TextCell(b.col(lists.ColReceipt), "a person's row"))
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			rep := b.reconcile(t)
			wantOutcomes(t, rep, map[lists.Outcome]int{lists.InSync: boardSize, lists.Foreign: boardSize + len(bad) + 1})
			if len(rep.Quarantined) != len(bad) || rep.Actions[lists.ActDelete] != 0 || rep.Actions[lists.ActAdopt] != 0 {
				t.Fatalf("report %+v", rep)
			}
		}
		for _, id := range append(bad, plain) {
			if _, ok := b.fake.Row(b.list.ID, id); !ok {
				t.Fatalf("foreign row %s deleted", id)
			}
		}
		n := 0
		for _, e := range events(t, b, lists.ProjectionStream(b.tenant, b.list.ID)) {
			if e == "ListRowQuarantined" {
				n++
			}
		}
		if n != len(bad) {
			t.Fatalf("%d quarantine events, want %d", n, len(bad))
		}
	})
}

// TestReconcileAdoptsLostCreate: items.create applied but the worker died before recording the
// row. The next sweep finds the row by its verified marker (owned_unmapped) and adopts it: no
// second row, and the inquiry's own stream is not touched.
func TestReconcileAdoptsLostCreate(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ids := b.board(t, boardSize)
		lists.SetHooks(b.app.Lists.Worker, nil, func() error { return errors.New("crash after create") })
		id := b.intake(t, "lost")
		b.project(t)
		for _, err := range b.work(t) {
			if err == nil {
				t.Fatal("the crash hook did not fire")
			}
		}
		lists.SetHooks(b.app.Lists.Worker, nil, nil)
		if b.mapped(t, id) != "" || len(b.rowOf(t, id)) != 1 {
			t.Fatal("set-up: want one unmapped row")
		}
		inq, err := b.app.Store.ReadStream(t.Context(), "inquiry-"+string(b.tenant)+"-"+string(id), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		creates := b.fake.CallCount("slackLists.items.create")
		rep := b.reconcile(t)
		wantOutcomes(t, rep, map[lists.Outcome]int{lists.InSync: len(ids), lists.OwnedUnmapped: 1})
		rs := b.rowOf(t, id)
		if rep.Actions[lists.ActAdopt] != 1 || len(rs) != 1 || b.mapped(t, id) != rs[0].ID || b.fake.CallCount("slackLists.items.create") != creates {
			t.Fatalf("report %+v rows %d", rep, len(rs))
		}
		after, err := b.app.Store.ReadStream(t.Context(), "inquiry-"+string(b.tenant)+"-"+string(id), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(inq) {
			t.Fatalf("the inquiry changed: %d events, was %d", len(after), len(inq))
		}
		if ev := b.rowEvents(t, id); !slices.Contains(ev, "ListRowAdopted") {
			t.Fatalf("events %v", ev)
		}
		wantOutcomes(t, b.reconcile(t), map[lists.Outcome]int{lists.InSync: len(ids) + 1})
	})
}

// TestReconcileArchivedRowReplaced: a person archived an open inquiry's row. The sweep sees it in
// the archived inventory (archived), creates an active row in its place, maps it and deletes the
// archived one (ours, replaced); updates no longer go to a row nobody sees.
func TestReconcileArchivedRowReplaced(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ids := b.board(t, boardSize)
		old := b.rowOf(t, ids[5])[0].ID
		if err := b.fake.ArchiveRow(b.list.ID, old); err != nil {
			t.Fatal(err)
		}
		rep := b.reconcile(t)
		wantOutcomes(t, rep, map[lists.Outcome]int{lists.InSync: boardSize - 1, lists.Archived: 1})
		rs := b.rowOf(t, ids[5])
		if rep.Actions[lists.ActCreate] != 1 || rep.Actions[lists.ActDelete] != 1 || len(rs) != 1 || rs[0].Archived || b.mapped(t, ids[5]) != rs[0].ID {
			t.Fatalf("report %+v rows %+v", rep, rs)
		}
		if _, ok := b.fake.Row(b.list.ID, old); ok {
			t.Fatal("the archived row stays")
		}
		wantOutcomes(t, b.reconcile(t), map[lists.Outcome]int{lists.InSync: boardSize})
	})
}

// TestReconcileArchivedPrefersActiveRow: when the mapped row is archived and an active row with
// the inquiry's verified marker exists, the active row is adopted instead of creating one.
func TestReconcileArchivedPrefersActiveRow(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ids := b.board(t, boardSize)
		orig := b.rowOf(t, ids[6])[0]
		var cells []fakeslack.CellInput
		for col, c := range orig.Cells {
			cells = append(cells, fakeslack.CellInput{ColumnID: col, Kind: c.Kind, Value: c.Value})
		}
		live, err := b.fake.AddRow(b.list.ID, "U0PERSON001", cells...)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.fake.ArchiveRow(b.list.ID, orig.ID); err != nil {
			t.Fatal(err)
		}
		creates := b.fake.CallCount("slackLists.items.create")
		rep := b.reconcile(t)
		wantOutcomes(t, rep, map[lists.Outcome]int{lists.InSync: boardSize - 1, lists.Archived: 1, lists.OwnedUnmapped: 1})
		if b.mapped(t, ids[6]) != live || b.fake.CallCount("slackLists.items.create") != creates || rep.Actions[lists.ActAdopt] != 1 {
			t.Fatalf("report %+v", rep)
		}
		if _, ok := b.fake.Row(b.list.ID, orig.ID); ok {
			t.Fatal("the archived row, replaced by the active one, stays")
		}
	})
}

// TestReconcileIncompleteScanConfirmsNothing: a 429 on the third items.list page stops the run.
// It is recorded incomplete, sets the List's shared cooldown, confirms no absence, deletes and
// creates nothing; last_successfully_observed does not move.
func TestReconcileIncompleteScanConfirmsNothing(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ids := b.board(t, boardSize)
		if err := b.fake.DeleteRow(b.list.ID, b.rowOf(t, ids[9])[0].ID); err != nil { // on the last page
			t.Fatal(err)
		}
		orig := b.rowOf(t, ids[0])[0]
		var cells []fakeslack.CellInput
		for col, c := range orig.Cells {
			cells = append(cells, fakeslack.CellInput{ColumnID: col, Kind: c.Kind, Value: c.Value})
		}
		if _, err := b.fake.AddRow(b.list.ID, "U0PERSON001", cells...); err != nil {
			t.Fatal(err)
		}
		writes := b.writes()
		r := b.reconciler(func(archived bool, page int) {
			if !archived && page == 2 {
				b.fake.FailNext("slackLists.items.list", fakeslack.RateLimited(30*time.Second))
			}
		})
		rep, err := r.Run(t.Context(), b.tenant, b.list.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Complete || rep.Stopped != lists.StopRateLimited || rep.Coverage.ActivePages != 2 || rep.Coverage.ArchivedPages != 0 {
			t.Fatalf("report %+v", rep)
		}
		if rep.Outcomes[lists.MissingOnce]+rep.Outcomes[lists.ConfirmedMissing]+rep.Outcomes[lists.Duplicate] != 0 || b.writes() != writes {
			t.Fatalf("an incomplete scan acted: %+v, %d writes", rep, b.writes()-writes)
		}
		st, err := b.app.Lists.Store.Statuses(t.Context(), b.tenant)
		if err != nil {
			t.Fatal(err)
		}
		if st[0].CooldownUntil == nil {
			t.Fatal("the 429 set no cooldown")
		}
		rc, err := b.app.Lists.Store.Reconciliation(t.Context(), b.tenant, b.list.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rc.Watermarks.LastAttempted == nil || rc.Watermarks.LastSuccessfullyObserved != nil || rc.Watermarks.BacklogSince == nil || rc.LastRun.Complete {
			t.Fatalf("watermarks %+v", rc.Watermarks)
		}
		// During the cooldown a run reads nothing.
		reads := b.fake.CallCount("slackLists.items.list")
		lists.SetReconcileHooks(r, noPace, nil)
		if rep, err = r.Run(t.Context(), b.tenant, b.list.ID, false); err != nil || rep.Stopped != lists.StopCooldown || b.fake.CallCount("slackLists.items.list") != reads {
			t.Fatalf("run in cooldown: %v %+v", err, rep)
		}
		b.clock.Advance(31 * time.Second)
		rep = b.reconcile(t)
		wantOutcomes(t, rep, map[lists.Outcome]int{lists.InSync: boardSize - 1, lists.MissingOnce: 1, lists.Duplicate: 1})
	})
}

// TestTwoReconcilersAtOnce: a second run started while the first holds the List's lease exits
// with ErrReconcileBusy and does nothing; the first deletes the duplicate once.
func TestTwoReconcilersAtOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ids := b.board(t, boardSize)
		orig := b.rowOf(t, ids[0])[0]
		var cells []fakeslack.CellInput
		for col, c := range orig.Cells {
			cells = append(cells, fakeslack.CellInput{ColumnID: col, Kind: c.Kind, Value: c.Value})
		}
		if _, err := b.fake.AddRow(b.list.ID, "U0PERSON001", cells...); err != nil {
			t.Fatal(err)
		}
		deletes := b.fake.CallCount("slackLists.items.delete")
		second := &lists.Reconciler{Worker: b.app.Lists.Worker, Inventory: b.app.Lists.Reconciler.Inventory}
		lists.SetReconcileHooks(second, noPace, nil)
		var busy error
		reads := 0
		first := b.reconciler(func(archived bool, page int) {
			if page == 1 && !archived {
				reads = b.fake.CallCount("slackLists.items.list")
				_, busy = second.Run(t.Context(), b.tenant, b.list.ID, false)
				if b.fake.CallCount("slackLists.items.list") != reads {
					t.Error("the second run read the List")
				}
			}
		})
		rep, err := first.Run(t.Context(), b.tenant, b.list.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(busy, lists.ErrReconcileBusy) || !errors.Is(busy, domain.ErrConflict) {
			t.Fatalf("second run = %v", busy)
		}
		if rep.Actions[lists.ActDelete] != 1 || b.fake.CallCount("slackLists.items.delete") != deletes+1 {
			t.Fatalf("report %+v, %d deletes", rep, b.fake.CallCount("slackLists.items.delete")-deletes)
		}
		// Once the first is done, the lease is free.
		if _, err := second.Run(t.Context(), b.tenant, b.list.ID, false); err != nil {
			t.Fatal(err)
		}
	})
}

// TestReconcileBackfillsOnActivation: inquiries opened before the List was activated get rows
// from the sweep, paced by the write budget; resolved ones get none.
func TestReconcileBackfillsOnActivation(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		var open []domain.InquiryID
		for i := range 7 {
			open = append(open, b.intake(t, fmt.Sprintf("early%d", i)))
		}
		closed := b.intake(t, "closed")
		b.resolve(t, closed)
		b.project(t)
		b.activate(t)
		b.fake.SetItemsPageMax(pageMax)
		r := b.reconciler(nil)
		r.Budget.MaxWrites = 4
		defer func() { r.Budget.MaxWrites = 0 }()
		rep, err := r.Run(t.Context(), b.tenant, b.list.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Actions[lists.ActCreate] != 4 || rep.Stopped != lists.StopWriteBudget || rep.FullyApplied || len(b.rows()) != 4 {
			t.Fatalf("first run %+v, %d rows", rep, len(b.rows()))
		}
		rep, err = r.Run(t.Context(), b.tenant, b.list.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Actions[lists.ActCreate] != 3 || !rep.FullyApplied || len(b.rows()) != 7 || len(b.rowOf(t, closed)) != 0 {
			t.Fatalf("second run %+v, %d rows", rep, len(b.rows()))
		}
		for _, id := range open {
			if len(b.rowOf(t, id)) != 1 || b.mapped(t, id) == "" {
				t.Fatalf("inquiry %s has no mapped row", id)
			}
		}
	})
}

// TestReconcileWorkingSetBound: over the List's working-set bound, rows leave in eviction order
// (resolved first, then the lowest priority, oldest first), and the sync worker creates no row
// for an evicted inquiry.
func TestReconcileWorkingSetBound(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ids := b.board(t, 6)
		b.transition(t, ids[0], domain.StatusTriaged, domain.PriorityHigh)
		b.transition(t, ids[1], domain.StatusTriaged, domain.PriorityLow)
		b.transition(t, ids[2], domain.StatusTriaged, domain.PriorityLow)
		b.resolve(t, ids[5])
		b.project(t)
		noErrors(t, b.work(t))
		if err := b.app.Lists.Store.SetWorkingSetMax(t.Context(), b.tenant, b.list.ID, 3); err != nil {
			t.Fatal(err)
		}
		rep := b.reconcile(t)
		if rep.Bound != 3 || rep.Actions[lists.ActEvict] != 3 || len(b.rows()) != 3 {
			t.Fatalf("report %+v, %d rows", rep, len(b.rows()))
		}
		for i, keep := range []bool{true, false, false, true, true, false} {
			if got := len(b.rowOf(t, ids[i])) == 1; got != keep {
				t.Errorf("inquiry %d kept = %v, want %v", i, got, keep)
			}
		}
		ev, err := lists.Evicted(t.Context(), b.app.Lists.Store, b.tenant, b.list.ID, ids[1])
		if err != nil || !ev {
			t.Fatalf("evicted = %v %v", ev, err)
		}
		creates := b.fake.CallCount("slackLists.items.create")
		b.transition(t, ids[1], domain.StatusInProgress, "")
		b.project(t)
		noErrors(t, b.work(t))
		if b.fake.CallCount("slackLists.items.create") != creates {
			t.Fatal("the worker created a row for an evicted inquiry")
		}
	})
}

// TestReconcileDryRunWritesNothing: a dry run reports what it would do and writes nothing, in
// Slack or in the log.
func TestReconcileDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ids := b.board(t, boardSize)
		if err := b.fake.ArchiveRow(b.list.ID, b.rowOf(t, ids[5])[0].ID); err != nil {
			t.Fatal(err)
		}
		writes, evs := b.writes(), len(b.rowEvents(t, ids[5]))
		rep, err := b.reconciler(nil).Run(t.Context(), b.tenant, b.list.ID, true)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.DryRun || rep.Planned[lists.ActCreate] != 1 || len(rep.Actions) != 0 || b.writes() != writes || len(b.rowEvents(t, ids[5])) != evs {
			t.Fatalf("dry run %+v", rep)
		}
		rc, err := b.app.Lists.Store.Reconciliation(t.Context(), b.tenant, b.list.ID)
		if err != nil || rc.LastRun != nil {
			t.Fatalf("a dry run recorded a run: %+v %v", rc, err)
		}
	})
}

// TestRowHealthShowsStaleRow: the inquiry detail's List row state (RowHealth): pending while a
// newer version waits, synced once shown; a row the last sweep found missing or stale says so,
// with the List's last complete observation.
func TestRowHealthShowsStaleRow(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ids := b.board(t, boardSize)
		health := func(id domain.InquiryID) lists.RowHealth {
			t.Helper()
			hs, err := b.app.Lists.Store.RowHealth(t.Context(), b.app.Commands.Load, b.tenant, id)
			if err != nil || len(hs) != 1 {
				t.Fatalf("row health = %+v %v", hs, err)
			}
			return hs[0]
		}
		if h := health(ids[0]); h.State != "synced" || h.RowID == "" || h.ObservedVersion != h.DesiredVersion || h.LastObserved != nil {
			t.Fatalf("synced row = %+v", h)
		}
		b.transition(t, ids[0], domain.StatusTriaged, domain.PriorityHigh)
		if h := health(ids[0]); h.State != "pending" || h.ObservedVersion >= h.DesiredVersion {
			t.Fatalf("row behind its inquiry = %+v", h)
		}
		if err := b.fake.DeleteRow(b.list.ID, b.rowOf(t, ids[1])[0].ID); err != nil {
			t.Fatal(err)
		}
		b.reconcile(t)
		if h := health(ids[1]); h.Reconcile != lists.MissingOnce || h.LastObserved == nil {
			t.Fatalf("missing row = %+v", h)
		}
		if h := health(ids[0]); h.State != "synced" || h.Reconcile != lists.Stale {
			t.Fatalf("row the sweep updated = %+v", h)
		}
	})
}

// TestRemovalsNotBlockedByCapacityCircuit: over_row_maximum opens the List's capacity circuit,
// which holds back creates and updates for an operator; a resolved inquiry's removal job and the
// sweep's deletes still run, since they are what frees the List.
func TestRemovalsNotBlockedByCapacityCircuit(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		b.activate(t)
		a := b.intake(t, "a")
		b.intake(t, "b")
		b.project(t)
		noErrors(t, b.work(t))
		if err := b.fake.SetRowCap(b.list.ID, 3); err != nil {
			t.Fatal(err)
		}
		orig := b.rowOf(t, a)[0]
		var cells []fakeslack.CellInput
		for col, c := range orig.Cells {
			cells = append(cells, fakeslack.CellInput{ColumnID: col, Kind: c.Kind, Value: c.Value})
		}
		dup, err := b.fake.AddRow(b.list.ID, "U0PERSON001", cells...)
		if err != nil {
			t.Fatal(err)
		}
		b.intake(t, "c")
		b.project(t)
		for _, err := range b.work(t) {
			if err == nil {
				t.Fatal("a create past the cap did not fail")
			}
		}
		if st, _ := b.app.Lists.Store.Statuses(t.Context(), b.tenant); !st[0].CircuitOpen || st[0].CircuitReason != "over_row_maximum" {
			t.Fatalf("status = %+v", st[0])
		}
		rep := b.reconcile(t)
		if rep.Stopped != "" || rep.Actions[lists.ActDelete] != 1 {
			t.Fatalf("sweep under the capacity circuit = %+v", rep)
		}
		if _, ok := b.fake.Row(b.list.ID, dup); ok {
			t.Fatal("the duplicate stays")
		}
		b.resolve(t, a)
		b.project(t)
		b.work(t) // the resolved status's update waits for the operator
		b.clock.Advance(time.Hour)
		rm := b.jobs(t, lists.RemoveArgs{}.Kind())
		if len(rm) != 1 {
			t.Fatalf("%d removal jobs", len(rm))
		}
		if err := b.workRemove(t.Context(), t, rm[0]); err != nil {
			t.Fatalf("removal under the capacity circuit = %v", err)
		}
		if len(b.rowOf(t, a)) != 0 {
			t.Fatal("the resolved row stays")
		}
	})
}
