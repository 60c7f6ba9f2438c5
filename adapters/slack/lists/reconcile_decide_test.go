package lists

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/slack-go/slack"

	"github.com/casebook/casebook/domain"
)

// decideWorld builds decide's input by hand: a List whose columns are all text, inquiries read
// from the log, and rows as a scan would return them.
type decideWorld struct {
	t       *testing.T
	markers *Markers
	in      sweepInput
}

var decideNow = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

func newDecideWorld(t *testing.T, complete bool) *decideWorld {
	t.Helper()
	m, err := NewMarkers([]byte("decide-test-instance-secret"))
	if err != nil {
		t.Fatal(err)
	}
	cols := map[string]Column{}
	for _, k := range []string{ColMarker, ColReceipt, ColStatus, ColPriority, ColTeam} {
		cols[k] = Column{Key: k, ID: "C_" + k, Type: "text"}
	}
	c := Config{Tenant: "acme", List: "L1", Schema: Schema{Columns: cols}, RemoveAfter: time.Hour}
	return &decideWorld{t: t, markers: m, in: sweepInput{c: c, markers: m, complete: complete, now: decideNow,
		inqs: map[domain.InquiryID]*desired{}, receipts: map[string]domain.InquiryID{}}}
}

// inquiry adds a candidate at version 3 whose List stream records row mapped showing observed.
func (w *decideWorld) inquiry(id string, status domain.Status, mapped string, observed uint64) *desired {
	q := &domain.Inquiry{ID: domain.InquiryID(id), Receipt: "rcpt-" + id, Status: status, Priority: domain.Priorities[0],
		Version: 3, CreatedAt: decideNow.Add(-time.Duration(len(w.in.inqs)+1) * time.Hour)}
	if status.Terminal() {
		q.ClosedAt = decideNow.Add(-time.Minute)
	}
	st := streamState{Revision: -1, Lists: map[string]*rowState{}}
	if mapped != "" {
		st.Lists[w.in.c.List] = &rowState{RowID: mapped, Observed: observed}
	}
	d := &desired{q: q, st: st, mapped: mapped}
	w.in.inqs[q.ID], w.in.receipts[q.Receipt] = d, q.ID
	return d
}

// row adds a scanned row whose cells are the inquiry's canonical ones (marker made by markers).
func (w *decideWorld) row(id string, archived bool, d *desired, markers *Markers) *slack.ListItem {
	c := w.in.c
	var fields []slack.ListItemFieldValue
	vals := valuesFor(d.q, c.Clearance, markers.For(string(c.Tenant), c.List, string(d.q.ID), d.q.Receipt))
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		fields = append(fields, slack.ListItemFieldValue{ColumnID: c.Schema.Columns[k].ID, Text: vals[k]})
	}
	return w.raw(id, archived, fields...)
}

func (w *decideWorld) raw(id string, archived bool, fields ...slack.ListItemFieldValue) *slack.ListItem {
	w.in.rows = append(w.in.rows, remote{item: slack.ListItem{ID: id, Fields: fields}, archived: archived})
	return &w.in.rows[len(w.in.rows)-1].item
}

func (w *decideWorld) markerCell(text string) slack.ListItemFieldValue {
	return slack.ListItemFieldValue{ColumnID: w.in.c.Schema.Columns[ColMarker].ID, Text: text}
}

// stepText renders a step as "<kind> <inquiry> <target> [why] [after #n]".
func stepText(s step) string {
	kind := map[stepKind]string{doUpdate: "update", doAdopt: "adopt", doReplace: "create", doRemoveMapped: "remove",
		doDeleteOurs: "delete", doTombstone: "tombstone", doClearTombstone: "clear-tombstone"}[s.do]
	out := fmt.Sprintf("%s %s %s", kind, s.inq, s.target)
	if s.act != "" && s.act != kind {
		out += " as:" + s.act
	}
	if s.why != "" {
		out += " why:" + s.why
	}
	if s.needs > 0 {
		out += fmt.Sprintf(" after:#%d", s.needs)
	}
	return out
}

// TestDecide has one case per outcome, and the tricky ones: duplicate owned rows, an archived
// and an active row for one inquiry, forged and copied markers, an incomplete scan.
func TestDecide(t *testing.T) {
	forger, err := NewMarkers([]byte("another-instance-secret"))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		outcomes   map[Outcome]int
		quarantine []string // "row reason"
		attention  []string // "row outcome"
		steps      []string
		evicted    []domain.InquiryID
	}
	cases := []struct {
		name     string
		complete bool
		build    func(w *decideWorld)
		want     want
	}{{
		name: "in_sync", complete: true,
		build: func(w *decideWorld) {
			d := w.inquiry("q1", domain.StatusNew, "R1", 3)
			w.row("R1", false, d, w.markers)
		},
		want: want{outcomes: map[Outcome]int{InSync: 1}, steps: []string{"clear-tombstone q1 "}},
	}, {
		name: "stale: the row shows an older version", complete: true,
		build: func(w *decideWorld) {
			d := w.inquiry("q1", domain.StatusNew, "R1", 2)
			w.row("R1", false, d, w.markers)
		},
		want: want{outcomes: map[Outcome]int{Stale: 1}, attention: []string{"R1 stale"},
			steps: []string{"clear-tombstone q1 ", "update q1 R1"}},
	}, {
		name: "manual_edit: current version, a cell changed by a person", complete: true,
		build: func(w *decideWorld) {
			d := w.inquiry("q1", domain.StatusNew, "R1", 3)
			it := w.row("R1", false, d, w.markers)
			for i := range it.Fields {
				if it.Fields[i].ColumnID == "C_"+ColReceipt {
					it.Fields[i].Text = "edited by hand"
				}
			}
		},
		want: want{outcomes: map[Outcome]int{ManualEdit: 1}, attention: []string{"R1 manual_edit"},
			steps: []string{"clear-tombstone q1 ", "update q1 R1"}},
	}, {
		name: "manual_edit ignores whitespace", complete: true,
		build: func(w *decideWorld) {
			d := w.inquiry("q1", domain.StatusNew, "R1", 3)
			it := w.row("R1", false, d, w.markers)
			for i := range it.Fields {
				if it.Fields[i].ColumnID == "C_"+ColReceipt {
					it.Fields[i].Text = "  " + it.Fields[i].Text + " "
				}
			}
		},
		want: want{outcomes: map[Outcome]int{InSync: 1}, steps: []string{"clear-tombstone q1 "}},
	}, {
		name: "missing_once: a first complete scan without the mapped row tombstones it", complete: true,
		build: func(w *decideWorld) { w.inquiry("q1", domain.StatusNew, "R1", 3) },
		want: want{outcomes: map[Outcome]int{MissingOnce: 1}, attention: []string{"R1 missing_once"},
			steps: []string{"tombstone q1 R1"}},
	}, {
		name: "confirmed_missing: the second complete scan recreates", complete: true,
		build: func(w *decideWorld) { w.inquiry("q1", domain.StatusNew, "R1", 3).tomb = "R1" },
		want: want{outcomes: map[Outcome]int{ConfirmedMissing: 1}, attention: []string{"R1 confirmed_missing"},
			steps: []string{"create q1 R1 why:gone"}},
	}, {
		name: "confirmed_missing: never mapped, no row: the backfill creates", complete: true,
		build: func(w *decideWorld) { w.inquiry("q1", domain.StatusNew, "", 0) },
		want:  want{outcomes: map[Outcome]int{ConfirmedMissing: 1}, steps: []string{"create q1 "}},
	}, {
		name: "a tombstone for another row is a first absence", complete: true,
		build: func(w *decideWorld) { w.inquiry("q1", domain.StatusNew, "R1", 3).tomb = "R0" },
		want: want{outcomes: map[Outcome]int{MissingOnce: 1}, attention: []string{"R1 missing_once"},
			steps: []string{"tombstone q1 R1"}},
	}, {
		name: "incomplete scan: an absence proves nothing", complete: false,
		build: func(w *decideWorld) {
			w.inquiry("q1", domain.StatusNew, "R1", 3).tomb = "R1"
			w.inquiry("q2", domain.StatusNew, "", 0)
		},
		want: want{outcomes: map[Outcome]int{}},
	}, {
		name: "duplicate: a second row with the mapped inquiry's marker", complete: true,
		build: func(w *decideWorld) {
			d := w.inquiry("q1", domain.StatusNew, "R1", 3)
			w.row("R1", false, d, w.markers)
			w.row("R2", false, d, w.markers)
		},
		want: want{outcomes: map[Outcome]int{InSync: 1, Duplicate: 1}, attention: []string{"R2 duplicate"},
			steps: []string{"clear-tombstone q1 ", "delete q1 R2"}},
	}, {
		name: "duplicate owned rows, none mapped: adopt the first, delete the other", complete: true,
		build: func(w *decideWorld) {
			d := w.inquiry("q1", domain.StatusNew, "", 0)
			w.row("R1", false, d, w.markers)
			w.row("R2", false, d, w.markers)
		},
		want: want{outcomes: map[Outcome]int{OwnedUnmapped: 1, Duplicate: 1}, attention: []string{"R2 duplicate"},
			steps: []string{"adopt q1 R1", "delete q1 R2"}},
	}, {
		name: "duplicate on an incomplete scan is reported, not deleted", complete: false,
		build: func(w *decideWorld) {
			d := w.inquiry("q1", domain.StatusNew, "R1", 3)
			w.row("R1", false, d, w.markers)
			w.row("R2", false, d, w.markers)
		},
		want: want{outcomes: map[Outcome]int{InSync: 1, Duplicate: 1}, attention: []string{"R2 duplicate"},
			steps: []string{"clear-tombstone q1 "}},
	}, {
		name: "foreign: a person's row without a marker is left alone", complete: true,
		build: func(w *decideWorld) {
			w.raw("P1", false, slack.ListItemFieldValue{ColumnID: "C_" + ColReceipt, Text: "a note"})
		},
		want: want{outcomes: map[Outcome]int{Foreign: 1}},
	}, {
		name: "foreign: forged, copied, invalid and unknown markers are quarantined", complete: true,
		build: func(w *decideWorld) {
			d := w.inquiry("q1", domain.StatusNew, "", 0)
			w.row("F1", false, d, forger) // right format and ref, wrong key: forged
			other := w.markers.For("acme", "L2", "q1", d.q.Receipt)
			w.raw("F2", true, w.markerCell(other)) // copied from another List
			w.raw("F3", false, w.markerCell("cb1.nope"))
			w.raw("F4", false, w.markerCell(w.markers.For("acme", "L1", "q9", "rcpt-q9")))
		},
		want: want{outcomes: map[Outcome]int{Foreign: 4, ConfirmedMissing: 1},
			quarantine: []string{"F1 marker_not_ours", "F2 marker_not_ours", "F3 invalid_marker", "F4 unknown_inquiry"},
			steps:      []string{"create q1 "}},
	}, {
		name: "owned_unmapped: a verified row without a mapping is adopted", complete: false,
		build: func(w *decideWorld) {
			d := w.inquiry("q1", domain.StatusNew, "", 0)
			w.row("R1", false, d, w.markers)
		},
		want: want{outcomes: map[Outcome]int{OwnedUnmapped: 1}, steps: []string{"adopt q1 R1"}},
	}, {
		name: "owned_unmapped: the mapped row gone, another verified row live", complete: true,
		build: func(w *decideWorld) {
			d := w.inquiry("q1", domain.StatusNew, "R1", 3)
			w.row("R2", false, d, w.markers)
		},
		want: want{outcomes: map[Outcome]int{OwnedUnmapped: 1}, steps: []string{"adopt q1 R2 why:gone"}},
	}, {
		name: "archived: the mapped row archived is replaced, then deleted", complete: true,
		build: func(w *decideWorld) {
			d := w.inquiry("q1", domain.StatusNew, "R1", 3)
			w.row("R1", true, d, w.markers)
		},
		want: want{outcomes: map[Outcome]int{Archived: 1}, attention: []string{"R1 archived (archive)"},
			steps: []string{"create q1 R1 why:archived", "delete q1 R1 after:#1"}},
	}, {
		name: "archived and active rows for one inquiry: the active row is kept", complete: true,
		build: func(w *decideWorld) {
			d := w.inquiry("q1", domain.StatusNew, "R1", 3)
			w.row("R1", true, d, w.markers)
			w.row("R2", false, d, w.markers)
			w.row("R3", false, d, w.markers)
		},
		want: want{outcomes: map[Outcome]int{Archived: 1, OwnedUnmapped: 1, Duplicate: 1},
			attention: []string{"R1 archived (archive)", "R3 duplicate"},
			steps:     []string{"adopt q1 R2 why:archived", "delete q1 R3", "delete q1 R1 after:#1"}},
	}, {
		name: "archived on an incomplete scan: reported, nothing created", complete: false,
		build: func(w *decideWorld) {
			d := w.inquiry("q1", domain.StatusNew, "R1", 3)
			w.row("R1", true, d, w.markers)
		},
		want: want{outcomes: map[Outcome]int{Archived: 1}, attention: []string{"R1 archived (archive)"}},
	}, {
		// The archived row also counts as a duplicate of the new one, and goes after it.
		name: "archived, never mapped: replaced by a new row", complete: true,
		build: func(w *decideWorld) {
			d := w.inquiry("q1", domain.StatusNew, "", 0)
			w.row("A1", true, d, w.markers)
		},
		want: want{outcomes: map[Outcome]int{Archived: 1, Duplicate: 1},
			attention: []string{"A1 archived (archive)", "A1 duplicate (archive)"},
			steps:     []string{"create q1 ", "delete q1 A1"}},
	}, {
		name: "stale: a closed inquiry past its removal delay goes", complete: true,
		build: func(w *decideWorld) {
			d := w.inquiry("q1", domain.StatusResolved, "R1", 3)
			d.q.ClosedAt = decideNow.Add(-2 * time.Hour)
			w.row("R1", false, d, w.markers)
			w.row("R2", true, d, w.markers)
		},
		want: want{outcomes: map[Outcome]int{Stale: 1, Duplicate: 1}, attention: []string{"R1 stale", "R2 duplicate (archive)"},
			steps: []string{"remove q1 R1 as:delete why:delete", "delete q1 R2"}},
	}, {
		name: "working-set bound: the closed inquiry is evicted, removals first", complete: true,
		build: func(w *decideWorld) {
			w.in.bound = 1
			w.inquiry("q1", domain.StatusNew, "", 0)
			closed := w.inquiry("q2", domain.StatusResolved, "R2", 3)
			w.row("R2", false, closed, w.markers)
		},
		want: want{outcomes: map[Outcome]int{Stale: 1, ConfirmedMissing: 1}, attention: []string{"R2 stale"},
			steps:   []string{"remove q2 R2 as:evict why:evict", "create q1 "},
			evicted: []domain.InquiryID{"q2"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newDecideWorld(t, tc.complete)
			tc.build(w)
			p := decide(w.in)
			got := want{outcomes: map[Outcome]int{}, evicted: p.evicted}
			for o, n := range p.outcomes {
				if n != 0 {
					got.outcomes[o] = n
				}
			}
			for _, q := range p.quarantine {
				got.quarantine = append(got.quarantine, q.RowID+" "+q.Reason)
			}
			for _, a := range p.attention {
				s := a.RowID + " " + string(a.Outcome)
				if a.Archive {
					s += " (archive)"
				}
				got.attention = append(got.attention, s)
			}
			for _, s := range p.steps {
				got.steps = append(got.steps, stepText(s))
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("decide (-want +got):\n%s", diff)
			}
		})
	}
}
