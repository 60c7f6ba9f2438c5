package lists

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/domain"
)

// run is one reconcile run's state.
type run struct {
	r      *Reconciler
	c      Config
	api    *slack.Client
	key    string // the installation key (cooldowns)
	lease  *lease
	rep    *Report
	budget Budget
	dry    bool
	halt   string // set when actions must stop (rate limit, write budget, lease)
}

// Run reconciles one List of tenant now. A disabled or drifted List is skipped with zero I/O.
// ErrReconcileBusy when another run holds the List; the report of a run that stopped early says
// on with the other Lists.
func (x *run) sweepContained(ctx context.Context) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return x.sweep(ctx)
}

func (x *run) stop(reason string) {
	if x.rep.Stopped == "" {
		x.rep.Stopped = reason
	}
}

// guard checks the destination's shared cooldown and circuit. A capacity circuit does not stop a
// sweep: its removals are what frees the List.
func (x *run) guard(ctx context.Context) (bool, error) {
	circ, err := x.r.store().Effects.Guard.Circuit(ctx, x.c.Tenant, x.c.List)
	if err != nil {
		return false, err
	}
	now := x.r.store().Now()
	switch {
	case circ.CooldownUntil.After(now):
		x.stop(StopCooldown)
		return false, nil
	case circ.Open && circ.Reason != "over_row_maximum":
		x.stop(StopCircuit)
		return false, nil
	}
	return true, nil
}

// failed reads a failed call: a 429 sets the List's shared cooldown and halts the run.
func (x *run) failed(ctx context.Context, err error) slackeffects.Failure {
	f := slackeffects.Classify(err)
	if f.Class == slackeffects.ClassRateLimited {
		_ = x.r.store().Effects.Guard.SetCooldown(context.WithoutCancel(ctx), x.c.Tenant, x.key, x.c.List, x.r.store().Now().Add(f.RetryAfter))
		x.stop(StopRateLimited)
		x.halt = StopRateLimited
	}
	return f
}

// scan pages one inventory to its end; false when it stopped early.
func (x *run) scan(ctx context.Context, archived bool, out *[]remote) (bool, int, error) {
	cursor, rowCap := "", 0
	for page := 0; ; page++ {
		if x.rep.Reads >= x.budget.MaxReads {
			x.stop(StopReadBudget)
			return false, rowCap, nil
		}
		if ok, err := x.guard(ctx); !ok || err != nil {
			return false, rowCap, err
		}
		if err := x.r.store().extend(ctx, x.lease, x.r.leaseTTL()); err != nil {
			if errors.Is(err, errLeaseLost) {
				x.stop(StopLeaseLost)
				x.halt = StopLeaseLost
				return false, rowCap, nil
			}
			return false, rowCap, err
		}
		if x.rep.Reads > 0 {
			if err := x.r.wait(ctx, x.budget.ReadEvery); err != nil {
				return false, rowCap, err
			}
		}
		opts := []slack.GetListItemsOption{slack.GetListItemsOptionLimit(x.r.pageLimit()), slack.GetListItemsOptionArchived(archived)}
		if cursor != "" {
			opts = append(opts, slack.GetListItemsOptionCursor(cursor))
		}
		if page == 0 && !archived {
			opts = append(opts, slack.GetListItemsOptionIncludeList(true))
		}
		x.rep.Reads++
		res, err := x.api.GetListItemsContext(ctx, x.c.List, opts...)
		if err != nil {
			if f := x.failed(ctx, err); f.Class == slackeffects.ClassRateLimited {
				return false, rowCap, nil
			}
			x.stop(StopError)
			return false, rowCap, fmt.Errorf("items.list (archived=%t) page %d: %w", archived, page+1, err)
		}
		if res.List != nil {
			rowCap = res.List.ListLimits.RowCountLimit
		}
		for _, it := range res.Items {
			*out = append(*out, remote{item: it, archived: archived})
		}
		if archived {
			x.rep.Coverage.ArchivedPages++
			x.rep.Coverage.ArchivedRows += len(res.Items)
		} else {
			x.rep.Coverage.ActivePages++
			x.rep.Coverage.ActiveRows += len(res.Items)
		}
		if x.r.afterPage != nil {
			x.r.afterPage(archived, page+1)
		}
		cursor = res.ResponseMetadata.Cursor
		if cursor == "" {
			return true, rowCap, nil
		}
	}
}

// sweep scans both inventories, gathers what decide needs, and applies its plan.
func (x *run) sweep(ctx context.Context) error {
	var rows []remote
	activeDone, rowCap, err := x.scan(ctx, false, &rows)
	if err != nil {
		return err
	}
	archDone := false
	if activeDone {
		if archDone, _, err = x.scan(ctx, true, &rows); err != nil {
			return err
		}
	}
	x.rep.Coverage.ActiveDone, x.rep.Coverage.ArchivedDone = activeDone, archDone
	x.rep.Complete = activeDone && archDone
	x.rep.RowCap = rowCap

	in, err := x.gather(ctx, rows)
	if err != nil {
		return err
	}
	if x.rep.Complete {
		if in.bound, err = x.bound(ctx, rowCap); err != nil {
			return err
		}
	}
	return x.apply(ctx, in, decide(in))
}

// gather reads the candidates from the log (the open inquiries, the mapped ones and those the
// rows' markers name), their tombstones after a complete scan, and the working set's clock.
func (x *run) gather(ctx context.Context, rows []remote) (sweepInput, error) {
	st := x.r.store()
	tenant, list := x.c.Tenant, x.c.List
	in := sweepInput{c: x.c, markers: st.Markers, rows: rows, complete: x.rep.Complete,
		inqs: map[domain.InquiryID]*desired{}, receipts: map[string]domain.InquiryID{}}
	load := func(id domain.InquiryID) (*desired, error) {
		if d, ok := in.inqs[id]; ok {
			return d, nil
		}
		q, err := x.r.Worker.Load(ctx, tenant, id)
		if err != nil {
			return nil, err
		}
		if !q.Exists() {
			return nil, nil
		}
		rs, err := readRows(ctx, st.Events, tenant, id)
		if err != nil {
			return nil, err
		}
		d := &desired{q: q, st: rs, mapped: rs.list(list).RowID}
		in.inqs[id], in.receipts[q.Receipt] = d, id
		return d, nil
	}
	open, err := x.r.Inventory.Open(ctx, tenant)
	if err != nil {
		return in, err
	}
	mapped, err := Rows(ctx, st.DB, tenant)
	if err != nil {
		return in, err
	}
	for _, m := range mapped {
		if m.List == list {
			open = append(open, m.Inquiry)
		}
	}
	for _, id := range open {
		if _, err := load(id); err != nil {
			return in, err
		}
	}
	markerCol := x.c.Schema.Columns[ColMarker].ID
	for _, rr := range rows {
		ref, _, ok := ParseMarker(strings.TrimSpace(cellText(rr.item, markerCol)))
		if _, known := in.receipts[ref]; !ok || known {
			continue
		}
		found, err := x.r.Inventory.ByReceipt(ctx, tenant, ref)
		if errors.Is(err, domain.ErrNotFound) {
			continue
		}
		if err != nil {
			return in, err
		}
		d, err := load(found)
		if err != nil {
			return in, err
		}
		if d != nil {
			in.receipts[ref] = found
		}
	}
	if x.rep.Complete {
		tombs, err := st.tombstones(ctx, tenant, list)
		if err != nil {
			return in, err
		}
		for id, d := range in.inqs {
			d.tomb = tombs[id]
		}
	}
	in.now = st.Now()
	return in, nil
}

// bound is the working-set bound: at most min(working_set_max, 90% of the plan's row cap) of our
// rows (0: none).
func (x *run) bound(ctx context.Context, rowCap int) (int, error) {
	n, err := x.r.store().workingSetMax(ctx, x.c.Tenant, x.c.List)
	if err != nil {
		return 0, err
	}
	if rowCap > 0 {
		if limit := rowCap * 9 / 10; n == 0 || n > limit {
			n = limit
		}
	}
	x.rep.Bound = n
	return n, nil
}

// apply reports the plan's outcomes and carries out its steps in order under the run's limits.
// Evicted inquiries are recorded so that the sync worker creates no row for them until a sweep
// lets them back.
func (x *run) apply(ctx context.Context, in sweepInput, p sweepPlan) error {
	for o, n := range p.outcomes {
		x.rep.Outcomes[o] += n
	}
	x.rep.Attention = append(x.rep.Attention, p.attention...)
	for _, q := range p.quarantine {
		if err := x.quarantine(ctx, q); err != nil {
			return err
		}
	}
	st := x.r.store()
	if x.rep.Complete && !x.dry {
		if err := st.setEvicted(ctx, x.c.Tenant, x.c.List, p.evicted); err != nil {
			return err
		}
	}
	ran := make([]bool, len(p.steps))
	for i, s := range p.steps {
		d := in.inqs[s.inq]
		if s.needs > 0 && (!ran[s.needs-1] || x.rep.Failures[ActAdopt+" "+s.row] != "" || x.rep.Failures[ActCreate+" "+s.row] != "") {
			continue // the replacement did not happen: the archived row stays
		}
		if s.do == doClearTombstone {
			_ = st.clearTombstone(ctx, x.c.Tenant, x.c.List, d.q.ID)
			continue
		}
		ok, err := x.act(ctx, s.act, s.row, func() error { return x.step(ctx, d, s) })
		if err != nil {
			return err
		}
		ran[i] = ok
	}
	return nil
}

// step does one planned action.
func (x *run) step(ctx context.Context, d *desired, s step) error {
	switch s.do {
	case doUpdate:
		return x.update(ctx, d, s.target)
	case doAdopt:
		return x.adopt(ctx, d, s.target, s.why)
	case doReplace:
		return x.replace(ctx, d, s.target, s.why)
	case doRemoveMapped:
		return x.removeMapped(ctx, d, s.target, s.why)
	case doDeleteOurs:
		return x.deleteOurs(ctx, d, s.target)
	case doTombstone:
		return x.r.store().setTombstone(ctx, x.c.Tenant, x.c.List, d.q.ID, s.target)
	}
	return fmt.Errorf("lists: unknown step %d", s.do)
}

// quarantine records a row whose marker is invalid, forged or copied once (ListRowQuarantined in
// the List's projection stream); it is never deleted.
func (x *run) quarantine(ctx context.Context, q RowRef) error {
	x.rep.Quarantined = append(x.rep.Quarantined, q)
	if x.dry {
		x.rep.Planned[ActQuarantine]++
		return nil
	}
	st := x.r.store()
	first, err := st.quarantineOnce(ctx, x.c.Tenant, x.c.List, q.RowID, q.Reason)
	if err != nil || !first {
		return err
	}
	x.rep.Actions[ActQuarantine]++
	return st.auditOnce(ctx, x.c.Tenant, x.c.List, "lists:quarantine:"+x.c.List+":"+q.RowID, "ListRowQuarantined",
		ListRowQuarantined{List: x.c.List, RowID: q.RowID, Reason: q.Reason})
}

// act runs one action under the run's limits (true when do ran): a dry run only counts it; a
// halted run, a spent write budget or a lost lease skip it. A failed action is counted and reported, and a 429 halts
// the run; neither stops the sweep's other decisions from being reported.
func (x *run) act(ctx context.Context, name, row string, do func() error) (bool, error) {
	if x.dry {
		x.rep.Planned[name]++
		return false, nil
	}
	if x.halt != "" {
		x.rep.Failed++
		return false, nil
	}
	writes := name != ActTombstone
	if writes && x.rep.Writes >= x.budget.MaxWrites {
		x.halt = StopWriteBudget
		x.stop(StopWriteBudget)
		x.rep.Failed++
		return false, nil
	}
	if err := x.r.store().extend(ctx, x.lease, x.r.leaseTTL()); err != nil {
		if errors.Is(err, errLeaseLost) {
			x.halt = StopLeaseLost
			x.stop(StopLeaseLost)
			x.rep.Failed++
			return false, nil
		}
		return false, err
	}
	if writes {
		x.rep.Writes++
	}
	if err := do(); err != nil {
		x.failed(ctx, err)
		x.rep.Failed++
		if x.rep.Failures == nil {
			x.rep.Failures = map[string]string{}
		}
		x.rep.Failures[name+" "+row] = err.Error()
		return true, nil
	}
	x.rep.Actions[name]++
	return true, nil
}

// appendRow records a List row event on the inquiry's List stream after d.st and advances it.
func (x *run) appendRow(ctx context.Context, d *desired, cmdID, typ string, payload any) error {
	res, err := x.r.Worker.record(ctx, x.c, d.q, d.st, cmdID, typ, payload)
	if err != nil {
		return err
	}
	d.st.Revision = int64(res.NextRevision)
	rs := d.st.list(x.c.List)
	switch p := payload.(type) {
	case ListRowAdopted:
		rs.RowID, rs.Observed = p.RowID, p.Version
	case ListRowUpdated:
		rs.Observed = p.Version
	case ListRowRemoved:
		rs.RowID, rs.Observed, rs.Generation = "", 0, p.RowID
	}
	if d.st.Lists == nil {
		d.st.Lists = map[string]*rowState{}
	}
	d.st.Lists[x.c.List] = rs
	d.mapped = rs.RowID
	return nil
}

// update rewrites every cleared cell of row (idempotent) and records the version when it is newer
// than the one the log says the row shows.
func (x *run) update(ctx context.Context, d *desired, row string) error {
	fs, err := x.c.Schema.fields(valuesFor(d.q, x.c.Clearance, x.r.Worker.marker(x.c, d.q)), true)
	if err != nil {
		return err
	}
	if err := x.api.UpdateListItemsContext(ctx, x.c.List, cells(row, fs)); err != nil {
		return err
	}
	if d.st.list(x.c.List).Observed >= d.q.Version {
		return nil
	}
	return x.appendRow(ctx, d, fmt.Sprintf("lists:update/%s/%s/%s/%d", x.c.List, d.q.ID, row, d.q.Version),
		"ListRowUpdated", ListRowUpdated{List: x.c.List, RowID: row, Version: d.q.Version})
}

// adopt maps a verified row (ending the old mapping, reason why, when there is one) and brings its
// cells to the canonical version. The inquiry's own stream is not touched.
func (x *run) adopt(ctx context.Context, d *desired, row, why string) error {
	if d.mapped != "" {
		if err := x.appendRow(ctx, d, fmt.Sprintf("lists:remove/%s/%s/%s", x.c.List, d.q.ID, d.mapped), "ListRowRemoved",
			ListRowRemoved{List: x.c.List, RowID: d.mapped, Reason: why}); err != nil {
			return err
		}
	}
	if err := x.appendRow(ctx, d, fmt.Sprintf("lists:adopt/%s/%s/%s", x.c.List, d.q.ID, row), "ListRowAdopted",
		ListRowAdopted{List: x.c.List, RowID: row}); err != nil {
		return err
	}
	_ = x.r.store().clearTombstone(ctx, x.c.Tenant, x.c.List, d.q.ID)
	return x.update(ctx, d, row)
}

// replace ends the mapping of old (if any, reason why) and creates the inquiry's row through the
// worker's create: an attempt claimed in the ledger first, a lookup before any repeat.
func (x *run) replace(ctx context.Context, d *desired, old, why string) error {
	if old != "" && d.mapped == old {
		if err := x.appendRow(ctx, d, fmt.Sprintf("lists:remove/%s/%s/%s", x.c.List, d.q.ID, old), "ListRowRemoved",
			ListRowRemoved{List: x.c.List, RowID: old, Reason: why}); err != nil {
			return err
		}
	}
	if err := x.r.store().clearTombstone(ctx, x.c.Tenant, x.c.List, d.q.ID); err != nil {
		return err
	}
	rs := d.st.list(x.c.List)
	return x.r.Worker.create(ctx, x.api, x.c, d.q, d.st, rs)
}

// removeMapped deletes the mapped row of an inquiry out of the working set (after a re-read of
// its marker) and ends the mapping.
func (x *run) removeMapped(ctx context.Context, d *desired, row, why string) error {
	if err := x.deleteOurs(ctx, d, row); err != nil {
		return err
	}
	reason := string(d.q.Status)
	if why == ActEvict {
		reason = "evicted"
	} else if !inScope(x.c, d.q) {
		reason = "out_of_scope"
	}
	return x.appendRow(ctx, d, fmt.Sprintf("lists:remove/%s/%s/%s", x.c.List, d.q.ID, row), "ListRowRemoved",
		ListRowRemoved{List: x.c.List, RowID: row, Reason: reason})
}

// deleteOurs deletes row only when its marker, read again now, verifies for the inquiry.
func (x *run) deleteOurs(ctx context.Context, d *desired, row string) error {
	info, err := x.api.GetListItemInfoContext(ctx, x.c.List, row)
	if gone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	m := cellText(info.Record, x.c.Schema.Columns[ColMarker].ID)
	if !x.r.store().Markers.Verify(m, string(x.c.Tenant), x.c.List, string(d.q.ID), d.q.Receipt) {
		return fmt.Errorf("row %s no longer carries the inquiry's marker: not deleted", row)
	}
	if err := x.api.DeleteListItemContext(ctx, x.c.List, row); err != nil && !gone(err) {
		return err
	}
	return nil
}
