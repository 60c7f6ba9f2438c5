package lists

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

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
