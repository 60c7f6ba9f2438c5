package lists

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/domain"
)

// Outcome classifies one remote row or one desired inquiry in a sweep.
type Outcome string

// The outcomes. Every remote row gets exactly one; a desired inquiry with no row gets
// missing_once or confirmed_missing.
const (
	InSync           Outcome = "in_sync"           // the mapped row shows the canonical version
	Stale            Outcome = "stale"             // the mapped row shows an older version (or should be gone)
	ManualEdit       Outcome = "manual_edit"       // version current, normalized cells differ: a person edited it
	MissingOnce      Outcome = "missing_once"      // a complete scan did not find the mapped row: tombstoned
	ConfirmedMissing Outcome = "confirmed_missing" // a second complete scan confirmed the absence (or the row never existed)
	Duplicate        Outcome = "duplicate"         // a second row carrying the inquiry's verified marker
	Foreign          Outcome = "foreign"           // no valid marker, or one made for another tenant, List or inquiry
	OwnedUnmapped    Outcome = "owned_unmapped"    // our verified marker, no mapping (a create whose answer was lost)
	Archived         Outcome = "archived"          // the inquiry's row is in the List's archive
)

// Outcomes lists every outcome in report order.
var Outcomes = []Outcome{InSync, Stale, ManualEdit, MissingOnce, ConfirmedMissing, Duplicate, Foreign, OwnedUnmapped, Archived}

// Actions a sweep takes (Report.Actions counts the done, Report.Planned what a dry run would do).
const (
	ActUpdate     = "update"     // cells rewritten to the canonical version (stale, manual_edit)
	ActAdopt      = "adopt"      // a verified unmapped row mapped (ListRowAdopted)
	ActCreate     = "create"     // a row created after a confirmed absence, an archived row's replacement, or a backfill
	ActDelete     = "delete"     // a row positively proven ours deleted (duplicate, out of the working set, replaced)
	ActEvict      = "evict"      // a row deleted to keep the working set under its bound
	ActQuarantine = "quarantine" // a forged, copied or invalid marker reported (never deleted)
	ActTombstone  = "tombstone"  // a first absence recorded, nothing recreated
)

// Stop reasons of a run that ended before it observed both inventories.
const (
	StopRateLimited = "rate_limited"
	StopCooldown    = "cooldown"
	StopCircuit     = "circuit_open"
	StopReadBudget  = "read_budget"
	StopWriteBudget = "write_budget"
	StopLeaseLost   = "lease_lost"
	StopError       = "error"
)

// Budget bounds one run. A run that reaches it is incomplete and confirms nothing.
type Budget struct {
	// MaxReads is the items.list pages one run may read, both inventories (default 200: 20,000 rows
	// at 100 a page).
	MaxReads int `json:"max_reads"`
	// MaxWrites is the Slack writes one run may make (default 100); the rest waits for the next run.
	MaxWrites int `json:"max_writes"`
	// ReadEvery spaces the run's reads (default 3 s: items.list is Tier 2, 20+ a minute).
	ReadEvery time.Duration `json:"read_every_ns"`
}

func (b Budget) withDefaults() Budget {
	if b.MaxReads <= 0 {
		b.MaxReads = 200
	}
	if b.MaxWrites <= 0 {
		b.MaxWrites = 100
	}
	if b.ReadEvery == 0 {
		b.ReadEvery = 3 * time.Second
	}
	return b
}

// RowRef names a row in a report.
type RowRef struct {
	RowID   string           `json:"row_id"`
	Inquiry domain.InquiryID `json:"inquiry_id,omitempty"`
	Outcome Outcome          `json:"outcome,omitempty"`
	Reason  string           `json:"reason,omitempty"`
	Archive bool             `json:"archived,omitempty"`
}

// Coverage is what a run observed.
type Coverage struct {
	ActivePages   int  `json:"active_pages"`
	ArchivedPages int  `json:"archived_pages"`
	ActiveRows    int  `json:"active_rows"`
	ArchivedRows  int  `json:"archived_rows"`
	ActiveDone    bool `json:"active_done"`
	ArchivedDone  bool `json:"archived_done"`
}

// Report is one run's result: outcome counts, actions, coverage, budget use and the rows an
// operator should look at.
type Report struct {
	Tenant     domain.TenantID `json:"tenant_id"`
	List       string          `json:"list_id"`
	DryRun     bool            `json:"dry_run"`
	Skipped    string          `json:"skipped,omitempty"` // disabled, schema_drifted: no I/O
	StartedAt  time.Time       `json:"started_at"`
	FinishedAt time.Time       `json:"finished_at"`
	// Complete: both inventories were read to their last page. Only then may a run confirm an
	// absence, delete or create.
	Complete bool   `json:"complete"`
	Stopped  string `json:"stopped,omitempty"`
	Error    string `json:"error,omitempty"`
	// FullyApplied: complete, and every action it decided was done.
	FullyApplied bool              `json:"fully_applied"`
	Outcomes     map[Outcome]int   `json:"outcomes"`
	Actions      map[string]int    `json:"actions"`
	Planned      map[string]int    `json:"planned,omitempty"`
	Failed       int               `json:"failed_actions"`
	Coverage     Coverage          `json:"coverage"`
	Reads        int               `json:"reads"`
	Writes       int               `json:"writes"`
	Budget       Budget            `json:"budget"`
	Bound        int               `json:"working_set_bound,omitempty"`
	RowCap       int               `json:"row_cap,omitempty"`
	Quarantined  []RowRef          `json:"quarantined,omitempty"`
	Attention    []RowRef          `json:"attention,omitempty"` // stale, manual_edit, missing, archived rows
	Failures     map[string]string `json:"failures,omitempty"`  // action/row → error
}

func newReport(tenant domain.TenantID, list string, dry bool, at time.Time, b Budget) Report {
	r := Report{Tenant: tenant, List: list, DryRun: dry, StartedAt: at, Outcomes: map[Outcome]int{}, Actions: map[string]int{}, Budget: b}
	for _, o := range Outcomes {
		r.Outcomes[o] = 0
	}
	if dry {
		r.Planned = map[string]int{}
	}
	return r
}

// Inventory names the inquiries a sweep considers besides those it finds rows or mappings for.
// The app implements it from the query model: a lagging answer only delays a row, since every
// decision re-reads the inquiry from the log.
type Inventory interface {
	// Open returns the ids of the tenant's non-terminal inquiries.
	Open(ctx context.Context, tenant domain.TenantID) ([]domain.InquiryID, error)
	// ByReceipt returns the tenant's inquiry with receipt; domain.ErrNotFound when there is none.
	ByReceipt(ctx context.Context, tenant domain.TenantID, receipt string) (domain.InquiryID, error)
}

// Reconciler sweeps active Lists: it pages items.list for active rows and again for archived
// rows, classifies every row and every desired inquiry (Outcomes), and acts on the seeds' rules:
// prefer the active row; adopt owned-unmapped rows; recreate only after a second complete scan
// confirms an absence (the first leaves a tombstone); delete only rows whose marker verifies;
// quarantine and report forged, copied or invalid markers, never delete them; revert manual edits
// with a normal update; replace an archived row of an active inquiry with a new active row and
// delete the archived one. An incomplete run (429, cooldown, budget, error, lost lease) adopts
// and updates what it saw but confirms no absence, deletes nothing and creates nothing.
//
// One run per List at a time: a fenced lease in slack_list_reconcile; a second run exits with
// ErrReconcileBusy, and a run whose lease was taken over stops writing.
type Reconciler struct {
	Worker    *Worker
	Inventory Inventory
	Budget    Budget
	// PageLimit is the items.list page size asked for (default 100).
	PageLimit int
	// LeaseTTL bounds a run's lease between heartbeats (default 2 min); heartbeats come with every
	// read and action.
	LeaseTTL time.Duration
	// Every is the periodic sweep's interval per List (default 15 min).
	Every time.Duration

	pace      func(ctx context.Context, d time.Duration) error
	afterPage func(archived bool, page int) // test hook: a page was read
}

func (r *Reconciler) store() *Store { return r.Worker.Store }

func (r *Reconciler) pageLimit() int {
	if r.PageLimit <= 0 {
		return 100
	}
	return r.PageLimit
}

func (r *Reconciler) leaseTTL() time.Duration {
	if r.LeaseTTL <= 0 {
		return 2 * time.Minute
	}
	return r.LeaseTTL
}

func (r *Reconciler) wait(ctx context.Context, d time.Duration) error {
	if r.pace != nil {
		return r.pace(ctx, d)
	}
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// remote is one row a scan read.
type remote struct {
	item     slack.ListItem
	archived bool
	counted  bool // already counted under another outcome (a replaced archived row)
}

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
// why (Stopped) and is still returned with a nil error: an incomplete run is an outcome.
func (r *Reconciler) Run(ctx context.Context, tenant domain.TenantID, list string, dryRun bool) (Report, error) {
	st := r.store()
	b := r.Budget.withDefaults()
	rep := newReport(tenant, list, dryRun, st.Now(), b)
	c, err := st.Config(ctx, tenant, list)
	if err != nil {
		return rep, err
	}
	switch {
	case c.State != StateActive:
		rep.Skipped, rep.FinishedAt = "disabled", st.Now()
		return rep, nil
	case c.SchemaState == SchemaDrifted:
		rep.Skipped, rep.FinishedAt = "schema_drifted", st.Now()
		return rep, nil
	}
	owner := make([]byte, 8)
	_, _ = rand.Read(owner)
	l, err := st.acquire(ctx, tenant, list, hex.EncodeToString(owner), r.leaseTTL())
	if err != nil {
		return rep, err
	}
	defer func() { _ = st.release(ctx, l) }()
	if !dryRun {
		if err := st.markAttempted(ctx, l, rep.StartedAt); err != nil {
			return rep, err
		}
	}
	api, in, err := st.Install.ClientFor(ctx, tenant, c.InstallationID)
	if err != nil {
		return rep, err
	}
	x := &run{r: r, c: c, api: api, key: in.Key, lease: l, rep: &rep, budget: b, dry: dryRun}
	if err := x.sweepContained(ctx); err != nil {
		rep.Error = err.Error()
		if rep.Stopped == "" {
			rep.Stopped = StopError
		}
	}
	rep.FinishedAt = st.Now()
	rep.FullyApplied = rep.Complete && rep.Failed == 0 && x.halt == "" && rep.Error == ""
	if !dryRun && x.halt != StopLeaseLost {
		if err := st.finish(ctx, l, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// sweepContained is sweep with a panic returned as its error, "panic: <value>": the run records
// it in the List's report like any sweep error (and releases its lease), and a periodic sweep goes
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

// desired is one inquiry the sweep decides on, read from the log.
type desired struct {
	q      *domain.Inquiry
	st     streamState
	mapped string
	active []slack.ListItem // verified rows in the active inventory
	arch   []slack.ListItem // verified rows in the archive
	want   bool             // in the List's working set
	evict  bool             // in scope but over the bound
}

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

	ds, err := x.classifyRows(ctx, rows)
	if err != nil {
		return err
	}
	if x.rep.Complete {
		if err := x.bound(ctx, ds, rowCap); err != nil {
			return err
		}
	}
	ids := make([]domain.InquiryID, 0, len(ds))
	for id := range ds {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	// Removals first: they make room under the bound before anything is created.
	for _, pass := range []bool{false, true} {
		for _, id := range ids {
			d := ds[id]
			if d.want != pass {
				continue
			}
			if err := x.decide(ctx, d); err != nil {
				return err
			}
		}
	}
	return nil
}

// classifyRows reads the candidates from the log and sorts every remote row to its inquiry or to
// foreign.
func (x *run) classifyRows(ctx context.Context, rows []remote) (map[domain.InquiryID]*desired, error) {
	st := x.r.store()
	tenant, list := x.c.Tenant, x.c.List
	ds := map[domain.InquiryID]*desired{}
	byReceipt := map[string]domain.InquiryID{}
	load := func(id domain.InquiryID) (*desired, error) {
		if d, ok := ds[id]; ok {
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
		ds[id], byReceipt[q.Receipt] = d, id
		return d, nil
	}
	open, err := x.r.Inventory.Open(ctx, tenant)
	if err != nil {
		return nil, err
	}
	mapped, err := Rows(ctx, st.DB, tenant)
	if err != nil {
		return nil, err
	}
	for _, m := range mapped {
		if m.List == list {
			open = append(open, m.Inquiry)
		}
	}
	for _, id := range open {
		if _, err := load(id); err != nil {
			return nil, err
		}
	}
	markerCol := x.c.Schema.Columns[ColMarker].ID
	for _, rr := range rows {
		m := strings.TrimSpace(cellText(rr.item, markerCol))
		ref, _, ok := ParseMarker(m)
		switch {
		case m == "":
			x.rep.Outcomes[Foreign]++ // a person's row: left alone
			continue
		case !ok:
			if err := x.quarantine(ctx, rr, "invalid_marker"); err != nil {
				return nil, err
			}
			continue
		}
		id, known := byReceipt[ref]
		if !known {
			found, err := x.r.Inventory.ByReceipt(ctx, tenant, ref)
			if errors.Is(err, domain.ErrNotFound) {
				if err := x.quarantine(ctx, rr, "unknown_inquiry"); err != nil {
					return nil, err
				}
				continue
			}
			if err != nil {
				return nil, err
			}
			d, err := load(found)
			if err != nil {
				return nil, err
			}
			if d == nil {
				if err := x.quarantine(ctx, rr, "unknown_inquiry"); err != nil {
					return nil, err
				}
				continue
			}
			id = found
		}
		if !st.Markers.Verify(m, string(tenant), list, string(id), ref) {
			if err := x.quarantine(ctx, rr, "marker_not_ours"); err != nil {
				return nil, err
			}
			continue
		}
		d := ds[id]
		if rr.archived {
			d.arch = append(d.arch, rr.item)
		} else {
			d.active = append(d.active, rr.item)
		}
	}
	now := st.Now()
	for _, d := range ds {
		q := d.q
		switch {
		case !inScope(x.c, q):
		case !q.Status.Terminal():
			d.want = true
		default:
			d.want = now.Before(q.ClosedAt.Add(x.c.RemoveAfter))
		}
	}
	return ds, nil
}

// quarantine reports a row whose marker is invalid, forged or copied: counted foreign, recorded
// once (ListRowQuarantined in the List's projection stream), never deleted.
func (x *run) quarantine(ctx context.Context, rr remote, reason string) error {
	x.rep.Outcomes[Foreign]++
	x.rep.Quarantined = append(x.rep.Quarantined, RowRef{RowID: rr.item.ID, Outcome: Foreign, Reason: reason, Archive: rr.archived})
	if x.dry {
		x.rep.Planned[ActQuarantine]++
		return nil
	}
	st := x.r.store()
	first, err := st.quarantineOnce(ctx, x.c.Tenant, x.c.List, rr.item.ID, reason)
	if err != nil || !first {
		return err
	}
	x.rep.Actions[ActQuarantine]++
	return st.auditOnce(ctx, x.c.Tenant, x.c.List, "lists:quarantine:"+x.c.List+":"+rr.item.ID, "ListRowQuarantined",
		ListRowQuarantined{List: x.c.List, RowID: rr.item.ID, Reason: reason})
}

// bound applies the working-set bound: at most min(working_set_max, 90% of the plan's row cap)
// of our rows. Over it, inquiries leave the working set in eviction order: resolved and cancelled
// first (earliest closed first), then the lowest priority, oldest first. Evicted inquiries are
// recorded so that the sync worker creates no row for them until a sweep lets them back.
func (x *run) bound(ctx context.Context, ds map[domain.InquiryID]*desired, rowCap int) error {
	st := x.r.store()
	n, err := st.workingSetMax(ctx, x.c.Tenant, x.c.List)
	if err != nil {
		return err
	}
	if rowCap > 0 {
		if limit := rowCap * 9 / 10; n == 0 || n > limit {
			n = limit
		}
	}
	x.rep.Bound = n
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
	if x.dry {
		return nil
	}
	return st.setEvicted(ctx, x.c.Tenant, x.c.List, evicted)
}

func (x *run) attention(d *desired, row string, o Outcome, archived bool) {
	x.rep.Attention = append(x.rep.Attention, RowRef{RowID: row, Inquiry: d.q.ID, Outcome: o, Archive: archived})
}

// decide classifies one inquiry's rows and acts on them.
func (x *run) decide(ctx context.Context, d *desired) error {
	complete := x.rep.Complete
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
			x.rep.Outcomes[o]++
			x.attention(d, d.mapped, o, mappedArchived)
			if complete {
				if err := x.act(ctx, act, d.mapped, func() error { return x.removeMapped(ctx, d, d.mapped, act) }); err != nil {
					return err
				}
			}
		}
		return x.duplicates(ctx, d, extra, complete)
	}

	switch {
	case mappedItem != nil:
		_ = x.r.store().clearTombstone(ctx, x.c.Tenant, x.c.List, d.q.ID)
		o := x.compare(d, *mappedItem)
		x.rep.Outcomes[o]++
		if o != InSync {
			x.attention(d, d.mapped, o, false)
			if err := x.act(ctx, ActUpdate, d.mapped, func() error { return x.update(ctx, d, d.mapped) }); err != nil {
				return err
			}
		}
		return x.duplicates(ctx, d, extra, complete)

	case mappedArchived:
		x.rep.Outcomes[Archived]++
		x.attention(d, d.mapped, Archived, true)
		archivedRow, done := d.mapped, false
		if len(d.active) > 0 { // prefer the active row
			keep := d.active[0]
			x.rep.Outcomes[OwnedUnmapped]++
			if err := x.act(ctx, ActAdopt, keep.ID, func() error { done = true; return x.adopt(ctx, d, keep.ID, "archived") }); err != nil {
				return err
			}
			extra = dropRow(extra, keep.ID)
		} else {
			if !complete {
				return nil
			}
			if err := x.act(ctx, ActCreate, archivedRow, func() error { done = true; return x.replace(ctx, d, archivedRow, "archived") }); err != nil {
				return err
			}
		}
		if done && x.rep.Failures[ActAdopt+" "+archivedRow] == "" && x.rep.Failures[ActCreate+" "+archivedRow] == "" {
			// Replaced: the archived row, ours, goes too.
			extra = append(extra, remote{item: slack.ListItem{ID: archivedRow}, archived: true, counted: true})
		}
		return x.duplicates(ctx, d, extra, complete)

	case d.mapped != "":
		if !complete {
			return nil // unobserved: an incomplete scan proves no absence
		}
		if len(d.active) > 0 { // the mapped row is gone but another verified row is live: adopt it
			keep := d.active[0]
			x.rep.Outcomes[OwnedUnmapped]++
			if err := x.act(ctx, ActAdopt, keep.ID, func() error { return x.adopt(ctx, d, keep.ID, "gone") }); err != nil {
				return err
			}
			return x.duplicates(ctx, d, dropRow(extra, keep.ID), complete)
		}
		tomb, err := x.r.store().tombstone(ctx, x.c.Tenant, x.c.List, d.q.ID)
		if err != nil {
			return err
		}
		if tomb != d.mapped {
			x.rep.Outcomes[MissingOnce]++
			x.attention(d, d.mapped, MissingOnce, false)
			if err := x.act(ctx, ActTombstone, d.mapped, func() error {
				return x.r.store().setTombstone(ctx, x.c.Tenant, x.c.List, d.q.ID, d.mapped)
			}); err != nil {
				return err
			}
			return x.duplicates(ctx, d, extra, complete)
		}
		x.rep.Outcomes[ConfirmedMissing]++
		x.attention(d, d.mapped, ConfirmedMissing, false)
		missing := d.mapped
		if err := x.act(ctx, ActCreate, missing, func() error { return x.replace(ctx, d, missing, "gone") }); err != nil {
			return err
		}
		return x.duplicates(ctx, d, extra, complete)

	case len(d.active) > 0:
		keep := d.active[0]
		x.rep.Outcomes[OwnedUnmapped]++
		if err := x.act(ctx, ActAdopt, keep.ID, func() error { return x.adopt(ctx, d, keep.ID, "") }); err != nil {
			return err
		}
		return x.duplicates(ctx, d, dropRow(extra, keep.ID), complete)

	case len(d.arch) > 0:
		// Ours, unmapped, archived: replaced by an active row like a mapped archived row.
		x.rep.Outcomes[Archived]++
		x.attention(d, d.arch[0].ID, Archived, true)
		if !complete {
			return nil
		}
		if err := x.act(ctx, ActCreate, d.arch[0].ID, func() error { return x.replace(ctx, d, "", "") }); err != nil {
			return err
		}
		return x.duplicates(ctx, d, extra, complete)

	default:
		// In the working set, never mapped, no row anywhere: a complete scan confirms it; create
		// (the activation backfill, or a create that never happened).
		if !complete {
			return nil
		}
		x.rep.Outcomes[ConfirmedMissing]++
		return x.act(ctx, ActCreate, "", func() error { return x.replace(ctx, d, "", "") })
	}
}

func dropRow(rs []remote, id string) []remote {
	return slices.DeleteFunc(slices.Clone(rs), func(r remote) bool { return r.item.ID == id })
}

// duplicates deletes the inquiry's other verified rows, after a complete scan only.
func (x *run) duplicates(ctx context.Context, d *desired, rows []remote, complete bool) error {
	for _, rr := range rows {
		if !rr.counted {
			x.rep.Outcomes[Duplicate]++
			x.attention(d, rr.item.ID, Duplicate, rr.archived)
		}
		if !complete {
			continue
		}
		row := rr.item.ID
		if err := x.act(ctx, ActDelete, row, func() error { return x.deleteOurs(ctx, d, row) }); err != nil {
			return err
		}
	}
	return nil
}

// compare classifies the mapped active row: stale when the log records an older version shown,
// manual_edit when the version is current but the normalized cells differ from the canonical ones.
func (x *run) compare(d *desired, it slack.ListItem) Outcome {
	if d.st.list(x.c.List).Observed < d.q.Version {
		return Stale
	}
	want := valuesFor(d.q, x.c.Clearance, x.r.Worker.marker(x.c, d.q))
	for k, v := range want {
		col := x.c.Schema.Columns[k]
		var got string
		if col.Options != nil {
			for _, f := range it.Fields {
				if f.ColumnID == col.ID && len(f.Select) == 1 {
					got = f.Select[0]
				}
			}
			if v != "" {
				v = col.Options[v]
			}
		} else {
			got = cellText(it, col.ID)
		}
		if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(v), " ") {
			return ManualEdit
		}
	}
	return InSync
}

// act runs one action under the run's limits: a dry run only counts it; a halted run, a spent
// write budget or a lost lease skip it. A failed action is counted and reported, and a 429 halts
// the run; neither stops the sweep's other decisions from being reported.
func (x *run) act(ctx context.Context, name, row string, do func() error) error {
	if x.dry {
		x.rep.Planned[name]++
		return nil
	}
	if x.halt != "" {
		x.rep.Failed++
		return nil
	}
	writes := name != ActTombstone
	if writes && x.rep.Writes >= x.budget.MaxWrites {
		x.halt = StopWriteBudget
		x.stop(StopWriteBudget)
		x.rep.Failed++
		return nil
	}
	if err := x.r.store().extend(ctx, x.lease, x.r.leaseTTL()); err != nil {
		if errors.Is(err, errLeaseLost) {
			x.halt = StopLeaseLost
			x.stop(StopLeaseLost)
			x.rep.Failed++
			return nil
		}
		return err
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
		return nil
	}
	x.rep.Actions[name]++
	return nil
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
