package lists

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/domain"
)

// remote is one row a scan read.
type remote struct {
	item     slack.ListItem
	archived bool
	counted  bool // already counted under another outcome (a replaced archived row)
}

// desired is one inquiry the sweep decides on, read from the log.
type desired struct {
	q      *domain.Inquiry
	st     streamState
	mapped string
	active []slack.ListItem // verified rows in the active inventory
	arch   []slack.ListItem // verified rows in the archive
	want   bool             // in the List's working set
	evict  bool             // in scope but over the bound
	tomb   string           // the row a complete scan last found missing ("": none)
}

// sweepInput is everything a sweep's decisions rest on, gathered by the executor: decide reads
// nothing else and does no I/O.
type sweepInput struct {
	c       Config
	markers *Markers
	// rows are both inventories' rows in scan order.
	rows []remote
	// inqs are the candidate inquiries read from the log (open, mapped, or named by a marker).
	inqs map[domain.InquiryID]*desired
	// receipts maps a marker's ref to the inquiry it names; a ref missing here names none.
	receipts map[string]domain.InquiryID
	// complete: both inventories were read to their last page.
	complete bool
	now      time.Time
	// bound is the working-set bound, applied on a complete scan only (0: none).
	bound int
}

// stepKind is what a step does.
type stepKind int

const (
	doUpdate         stepKind = iota // rewrite the mapped row's cells (update)
	doAdopt                          // map a verified row, ending the old mapping
	doReplace                        // end the old mapping and create the inquiry's row
	doRemoveMapped                   // delete the mapped row and end the mapping
	doDeleteOurs                     // delete a row whose marker still verifies
	doTombstone                      // record a first absence
	doClearTombstone                 // not an action: drop a tombstone, in a dry run too
)

// step is one thing the executor does for an inquiry.
type step struct {
	inq    domain.InquiryID
	do     stepKind
	act    string // the action it counts as (empty for doClearTombstone)
	row    string // the row the action is reported under
	target string // adopt: the row kept; replace: the row whose mapping ends
	why    string // the reason recorded when a mapping ends
	// needs is 1 + the index of the step that must have been carried out first (0: none), with
	// no adopt or create failure recorded against row: the delete of a replaced archived row.
	needs int
}

// sweepPlan is decide's answer: every row's and inquiry's outcome, and the steps, in order.
type sweepPlan struct {
	outcomes   map[Outcome]int
	quarantine []RowRef // forged, copied or invalid markers: reported, never deleted
	attention  []RowRef
	// evicted are the inquiries the bound takes out of the working set; set only on a complete scan.
	evicted []domain.InquiryID
	steps   []step
}

// decide classifies every remote row and every candidate inquiry and plans the actions, by the
// Reconciler's rules. It marks each candidate's rows, want and evict.
func decide(in sweepInput) sweepPlan {
	p := sweepPlan{outcomes: map[Outcome]int{}}
	p.sortRows(in)
	for _, d := range in.inqs {
		q := d.q
		switch {
		case !inScope(in.c, q):
		case !q.Status.Terminal():
			d.want = true
		default:
			d.want = in.now.Before(q.ClosedAt.Add(in.c.RemoveAfter))
		}
	}
	if in.complete {
		p.evicted = evict(in.inqs, in.bound)
	}
	ids := make([]domain.InquiryID, 0, len(in.inqs))
	for id := range in.inqs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	// Removals first: they make room under the bound before anything is created.
	for _, pass := range []bool{false, true} {
		for _, id := range ids {
			if d := in.inqs[id]; d.want == pass {
				p.inquiry(in, d)
			}
		}
	}
	return p
}

// sortRows sorts every remote row to its inquiry or to foreign.
func (p *sweepPlan) sortRows(in sweepInput) {
	markerCol := in.c.Schema.Columns[ColMarker].ID
	for _, rr := range in.rows {
		m := strings.TrimSpace(cellText(rr.item, markerCol))
		ref, _, ok := ParseMarker(m)
		id, known := in.receipts[ref]
		switch {
		case m == "":
			p.outcomes[Foreign]++ // a person's row: left alone
		case !ok:
			p.quarantined(rr, "invalid_marker")
		case !known || in.inqs[id] == nil:
			p.quarantined(rr, "unknown_inquiry")
		case !in.markers.Verify(m, string(in.c.Tenant), in.c.List, string(id), ref):
			p.quarantined(rr, "marker_not_ours")
		case rr.archived:
			in.inqs[id].arch = append(in.inqs[id].arch, rr.item)
		default:
			in.inqs[id].active = append(in.inqs[id].active, rr.item)
		}
	}
}

func (p *sweepPlan) quarantined(rr remote, reason string) {
	p.outcomes[Foreign]++
	p.quarantine = append(p.quarantine, RowRef{RowID: rr.item.ID, Outcome: Foreign, Reason: reason, Archive: rr.archived})
}

// evict applies the working-set bound n: over it, inquiries leave the working set in eviction
// order: resolved and cancelled first (earliest closed first), then the lowest priority, oldest
// first.
func evict(ds map[domain.InquiryID]*desired, n int) []domain.InquiryID {
	var want []*desired
	for _, d := range ds {
		if d.want {
			want = append(want, d)
		}
	}
	var evicted []domain.InquiryID
	if n > 0 && len(want) > n {
		rank := func(p domain.Priority) int { return slices.Index(domain.Priorities, p) }
		sort.Slice(want, func(i, j int) bool { // evict first
			a, b := want[i].q, want[j].q
			if at, bt := a.Status.Terminal(), b.Status.Terminal(); at != bt {
				return at
			} else if at && !a.ClosedAt.Equal(b.ClosedAt) {
				return a.ClosedAt.Before(b.ClosedAt)
			}
			if rank(a.Priority) != rank(b.Priority) {
				return rank(a.Priority) < rank(b.Priority)
			}
			if !a.CreatedAt.Equal(b.CreatedAt) {
				return a.CreatedAt.Before(b.CreatedAt)
			}
			return a.ID < b.ID
		})
		for _, d := range want[:len(want)-n] {
			d.want, d.evict = false, true
			evicted = append(evicted, d.q.ID)
		}
	}
	return evicted
}

func (p *sweepPlan) attend(d *desired, row string, o Outcome, archived bool) {
	p.outcomes[o]++
	p.attention = append(p.attention, RowRef{RowID: row, Inquiry: d.q.ID, Outcome: o, Archive: archived})
}

func (p *sweepPlan) add(s step) int {
	p.steps = append(p.steps, s)
	return len(p.steps)
}

// inquiry classifies one inquiry's rows and plans its steps.
func (p *sweepPlan) inquiry(in sweepInput, d *desired) {
	complete, id := in.complete, d.q.ID
	var mappedItem *slack.ListItem
	mappedArchived := false
	var extra []remote // verified rows other than the one kept
	for i := range d.active {
		if d.active[i].ID == d.mapped {
			mappedItem = &d.active[i]
		} else {
			extra = append(extra, remote{item: d.active[i]})
		}
	}
	for i := range d.arch {
		if d.arch[i].ID == d.mapped {
			mappedArchived = true
		} else {
			extra = append(extra, remote{item: d.arch[i], archived: true})
		}
	}

	if !d.want {
		// Out of the working set: every verified row goes (the mapped one is stale: it should not be there).
		act := ActDelete
		if d.evict {
			act = ActEvict
		}
		if mappedItem != nil || mappedArchived {
			o := Stale
			if mappedArchived {
				o = Archived
			}
			p.attend(d, d.mapped, o, mappedArchived)
			if complete {
				p.add(step{inq: id, do: doRemoveMapped, act: act, row: d.mapped, target: d.mapped, why: act})
			}
		}
		p.duplicates(d, extra, complete)
		return
	}

	switch {
	case mappedItem != nil:
		p.add(step{inq: id, do: doClearTombstone})
		o := compare(in.c, in.markers, d, *mappedItem)
		if o == InSync {
			p.outcomes[o]++
		} else {
			p.attend(d, d.mapped, o, false)
			p.add(step{inq: id, do: doUpdate, act: ActUpdate, row: d.mapped, target: d.mapped})
		}
		p.duplicates(d, extra, complete)

	case mappedArchived:
		p.attend(d, d.mapped, Archived, true)
		archivedRow, replacing := d.mapped, 0
		if len(d.active) > 0 { // prefer the active row
			keep := d.active[0]
			p.outcomes[OwnedUnmapped]++
			replacing = p.add(step{inq: id, do: doAdopt, act: ActAdopt, row: keep.ID, target: keep.ID, why: "archived"})
			extra = dropRow(extra, keep.ID)
		} else {
			if !complete {
				return
			}
			replacing = p.add(step{inq: id, do: doReplace, act: ActCreate, row: archivedRow, target: archivedRow, why: "archived"})
		}
		// Replaced: the archived row, ours, goes too.
		extra = append(extra, remote{item: slack.ListItem{ID: archivedRow}, archived: true, counted: true})
		p.duplicatesAfter(d, extra, complete, replacing)

	case d.mapped != "":
		if !complete {
			return // unobserved: an incomplete scan proves no absence
		}
		if len(d.active) > 0 { // the mapped row is gone but another verified row is live: adopt it
			keep := d.active[0]
			p.outcomes[OwnedUnmapped]++
			p.add(step{inq: id, do: doAdopt, act: ActAdopt, row: keep.ID, target: keep.ID, why: "gone"})
			p.duplicates(d, dropRow(extra, keep.ID), complete)
			return
		}
		if d.tomb != d.mapped {
			p.attend(d, d.mapped, MissingOnce, false)
			p.add(step{inq: id, do: doTombstone, act: ActTombstone, row: d.mapped, target: d.mapped})
			p.duplicates(d, extra, complete)
			return
		}
		p.attend(d, d.mapped, ConfirmedMissing, false)
		p.add(step{inq: id, do: doReplace, act: ActCreate, row: d.mapped, target: d.mapped, why: "gone"})
		p.duplicates(d, extra, complete)

	case len(d.active) > 0:
		keep := d.active[0]
		p.outcomes[OwnedUnmapped]++
		p.add(step{inq: id, do: doAdopt, act: ActAdopt, row: keep.ID, target: keep.ID})
		p.duplicates(d, dropRow(extra, keep.ID), complete)

	case len(d.arch) > 0:
		// Ours, unmapped, archived: replaced by an active row like a mapped archived row.
		p.attend(d, d.arch[0].ID, Archived, true)
		if !complete {
			return
		}
		p.add(step{inq: id, do: doReplace, act: ActCreate, row: d.arch[0].ID})
		p.duplicates(d, extra, complete)

	default:
		// In the working set, never mapped, no row anywhere: a complete scan confirms it; create
		// (the activation backfill, or a create that never happened).
		if !complete {
			return
		}
		p.outcomes[ConfirmedMissing]++
		p.add(step{inq: id, do: doReplace, act: ActCreate})
	}
}

func dropRow(rs []remote, id string) []remote {
	return slices.DeleteFunc(slices.Clone(rs), func(r remote) bool { return r.item.ID == id })
}

// duplicates plans the deletion of the inquiry's other verified rows, after a complete scan only.
func (p *sweepPlan) duplicates(d *desired, rows []remote, complete bool) {
	p.duplicatesAfter(d, rows, complete, 0)
}

// duplicatesAfter is duplicates where the rows already counted (a replaced archived row) go only
// once step needs was carried out.
func (p *sweepPlan) duplicatesAfter(d *desired, rows []remote, complete bool, needs int) {
	for _, rr := range rows {
		if !rr.counted {
			p.attend(d, rr.item.ID, Duplicate, rr.archived)
		}
		if !complete {
			continue
		}
		s := step{inq: d.q.ID, do: doDeleteOurs, act: ActDelete, row: rr.item.ID, target: rr.item.ID}
		if rr.counted {
			s.needs = needs
		}
		p.add(s)
	}
}

// compare classifies the mapped active row: stale when the log records an older version shown,
// manual_edit when the version is current but the normalized cells differ from the canonical ones.
func compare(c Config, markers *Markers, d *desired, it slack.ListItem) Outcome {
	if d.st.list(c.List).Observed < d.q.Version {
		return Stale
	}
	want := valuesFor(d.q, c.Clearance, markers.For(string(c.Tenant), c.List, string(d.q.ID), d.q.Receipt))
	for k, v := range want {
		got, exp := c.Schema.cell(it, k, v)
		if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(exp), " ") {
			return ManualEdit
		}
	}
	return InSync
}
