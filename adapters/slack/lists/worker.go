package lists

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackproj"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// Failure classes recorded in sync health.
const (
	ClassRateLimited = "rate_limited"   // the List's cooldown, no attempt spent
	ClassCircuit     = "circuit_open"   // auth/permission/List gone, or over_row_maximum (manual)
	ClassDrift       = "schema_drift"   // the schema changed: the List fails closed
	ClassQuarantined = "quarantined"    // bad row data: this effect is cancelled alone
	ClassUnknown     = "unknown_result" // timeout, dropped connection, 5xx
	ClassTransient   = "transient"
)

var circuitCodes = map[string]bool{
	"not_authed": true, "invalid_auth": true, "token_revoked": true, "account_inactive": true,
	"missing_scope": true, "list_not_found": true, "access_denied": true, "no_permission": true,
}

var schemaCodes = map[string]bool{
	"invalid_column_id": true, "invalid_option_id": true, "invalid_input_type": true,
	"column_id_not_provided": true, "uneditable_column": true,
}

var quarantineCodes = map[string]bool{
	"invalid_blocks": true, "invalid_date": true, "over_cell_fields_limit": true, "invalid_arguments": true,
}

// Worker works SyncArgs and RemoveArgs. It decides on the log (the inquiry and its slackproj
// stream), never on a projection, and does no Slack I/O for a List that is not active or drifted.
type Worker struct {
	Store *Store
	Load  slackproj.Loader
	// PageLimit is the items.list page size of a marker lookup (default 100).
	PageLimit int
	slackproj.Timing

	beforeCreate func()       // test hook: a create about to be sent
	afterCreate  func() error // test hook: a crash between the create and its record
	once         sync.Once
}

func (w *Worker) defaults() {
	w.once.Do(func() {
		if w.PageLimit == 0 {
			w.PageLimit = 100
		}
		w.Timing = w.WithDefaults()
	})
}

type syncWorker struct {
	river.WorkerDefaults[SyncArgs]
	w *Worker
}

func (s syncWorker) Work(ctx context.Context, j *river.Job[SyncArgs]) error {
	return s.w.Sync(ctx, j.Args)
}

type removeWorker struct {
	river.WorkerDefaults[RemoveArgs]
	w *Worker
}

func (r removeWorker) Work(ctx context.Context, j *river.Job[RemoveArgs]) error {
	return r.w.Remove(ctx, j.Args)
}

// active returns the List's config when jobs may do I/O for it; ok=false means do nothing.
func (w *Worker) active(ctx context.Context, tenant domain.TenantID, list string) (Config, bool, error) {
	c, err := w.Store.Config(ctx, tenant, list)
	if errors.Is(err, domain.ErrNotFound) {
		return Config{}, false, nil
	}
	if err != nil {
		return Config{}, false, err
	}
	if c.State != StateActive {
		return c, false, nil // disabled: zero I/O
	}
	if c.SchemaState == SchemaDrifted {
		return c, false, river.JobSnooze(w.ProbeEvery) // fails closed until re-activation
	}
	return c, true, nil
}

func inScope(c Config, q *domain.Inquiry) bool { return c.Team == "" || c.Team == q.Team }

// admit lets a job past the List's cooldown and circuit (a snooze while they hold it back) and
// returns the installation's client.
func (w *Worker) admit(ctx context.Context, c Config, tenant domain.TenantID) (*slack.Client, error) {
	wait, err := w.Store.gate(ctx, c, w.ProbeEvery)
	if err != nil {
		return nil, err
	}
	if wait > 0 {
		return nil, river.JobSnooze(wait)
	}
	return w.Store.client(ctx, tenant, c.InstallationID)
}

// Sync brings an inquiry's row in the List to the newest canonical version: create (never
// blindly) or adopt while unmapped and active, update while mapped, delete at once when the
// inquiry left the List's team.
func (w *Worker) Sync(ctx context.Context, a SyncArgs) error {
	w.defaults()
	c, ok, err := w.active(ctx, a.Tenant, a.List)
	if !ok || err != nil {
		return err
	}
	q, err := w.Load(ctx, a.Tenant, a.Inquiry)
	if err != nil {
		return err
	}
	if !q.Exists() {
		return river.JobCancel(fmt.Errorf("inquiry %s: %w", a.Inquiry, domain.ErrNotFound))
	}
	st, err := readRows(ctx, w.Store.Events, a.Tenant, a.Inquiry)
	if err != nil {
		return err
	}
	r := st.list(a.List)
	scoped := inScope(c, q)
	switch {
	case r.RowID == "" && (!scoped || q.Status.Terminal()):
		return nil // not in the working set
	case r.RowID != "" && scoped && r.Observed >= q.Version:
		return nil // coalesced: this version or a newer one is shown
	}
	api, err := w.admit(ctx, c, a.Tenant)
	if err != nil {
		return err
	}
	switch {
	case r.RowID != "" && !scoped:
		err = w.deleteRow(ctx, api, c, q, st, r, "out_of_scope")
	case r.RowID != "":
		err = w.update(ctx, api, c, q, st, r)
	default:
		err = w.create(ctx, api, c, q, st, r)
	}
	if err != nil {
		return w.classify(ctx, c, a.Inquiry, err)
	}
	ctx = context.WithoutCancel(ctx) // the outcome is recorded even when the caller gave up
	if err := w.Store.closeCircuitAfterSuccess(ctx, c); err != nil {
		return err
	}
	return w.Store.recordSuccess(ctx, a.Tenant, a.List, a.Inquiry)
}

func (w *Worker) marker(c Config, q *domain.Inquiry) string {
	return w.Store.Markers.For(string(c.Tenant), c.List, string(q.ID), q.Receipt)
}

// create makes the inquiry's row, never blindly: an attempt is claimed first; an earlier attempt
// (or an unknown result) is reconciled by a marker lookup, then adopted. The row id is recorded
// before anything else.
func (w *Worker) create(ctx context.Context, api *slack.Client, c Config, q *domain.Inquiry, st streamState, r *rowState) error {
	key := fmt.Sprintf("listrow/%s/%s/%s/%s", c.Tenant, q.ID, c.List, r.Generation)
	fresh, reconcile, err := w.Store.claimAttempt(ctx, key, w.AttemptStale)
	if err != nil {
		return err
	}
	if !fresh && !reconcile {
		return river.JobSnooze(w.InFlightRecheck) // another job's create is in flight
	}
	marker := w.marker(c, q)
	markerCol := c.Schema.Columns[ColMarker].ID
	ours := func(m string) bool {
		return w.Store.Markers.Verify(m, string(c.Tenant), c.List, string(q.ID), q.Receipt)
	}
	row, adopted := "", false
	if reconcile {
		if row, err = findByMarker(ctx, api, c.List, markerCol, ours); err != nil {
			return err
		}
		adopted = row != ""
	}
	if row == "" {
		fs, err := c.Schema.fields(valuesFor(q, c.Clearance, marker), false)
		if err != nil {
			return river.JobCancel(err)
		}
		if w.beforeCreate != nil {
			w.beforeCreate()
		}
		res, err := api.CreateListItemContext(ctx, c.List, slack.CreateListItemOptionInitialFields(fs))
		if err != nil {
			if certainlyNotApplied(err) {
				_ = w.Store.releaseAttempt(context.WithoutCancel(ctx), key)
				return err
			}
			// Unknown result: look for our marker now; without it, retry later (reconciling).
			found, lerr := findByMarker(context.WithoutCancel(ctx), api, c.List, markerCol, ours)
			if lerr != nil || found == "" {
				return err
			}
			row, adopted = found, true
			ctx = context.WithoutCancel(ctx)
		} else {
			row = res.Item.ID
		}
	}
	if w.afterCreate != nil {
		if err := w.afterCreate(); err != nil {
			return err
		}
	}
	typ, payload := "ListRowCreated", any(ListRowCreated{List: c.List, RowID: row, Version: q.Version})
	if adopted {
		typ, payload = "ListRowAdopted", ListRowAdopted{List: c.List, RowID: row}
	}
	res, err := w.appendPast(ctx, c, q, st, "lists:"+key, typ, payload)
	if isConflict(err) {
		return river.JobSnooze(0)
	}
	if err != nil || !adopted {
		return err
	}
	// An adopted row's cells may show an older version: bring it up to date.
	st.Revision = int64(res.NextRevision)
	return w.update(ctx, api, c, q, st, &rowState{RowID: row})
}

// update writes every cleared cell of the mapped row (idempotent), then records the version.
func (w *Worker) update(ctx context.Context, api *slack.Client, c Config, q *domain.Inquiry, st streamState, r *rowState) error {
	fs, err := c.Schema.fields(valuesFor(q, c.Clearance, w.marker(c, q)), true)
	if err != nil {
		return river.JobCancel(err)
	}
	err = api.UpdateListItemsContext(ctx, c.List, cells(r.RowID, fs))
	if isGone(err) {
		// Deleted by hand: end the mapping; the next job creates a new row (own attempt key).
		return w.recordRemoved(ctx, c, q, st, r, "gone")
	}
	if err != nil {
		return err
	}
	_, err = w.appendPast(ctx, c, q, st, fmt.Sprintf("lists:update/%s/%s/%s/%d", c.List, q.ID, r.RowID, q.Version),
		"ListRowUpdated", ListRowUpdated{List: c.List, RowID: r.RowID, Version: q.Version})
	if isConflict(err) {
		return river.JobSnooze(0)
	}
	return err
}

// appendPast records a List event on the inquiry's slackproj stream after st, past any thread events
// appended meanwhile (see slackproj.AppendPast).
func (w *Worker) appendPast(ctx context.Context, c Config, q *domain.Inquiry, st streamState, cmdID, typ string, payload any) (eventstore.AppendResult, error) {
	stream := slackproj.ThreadStream(c.Tenant, q.ID)
	return slackproj.AppendPast(ctx, w.Store.Events, stream, st.Revision, slackproj.IsListEvent, func(exp eventstore.ExpectedRevision) (eventstore.AppendResult, error) {
		return w.Store.appendEvent(ctx, stream, exp, c.Tenant, cmdID, typ, payload)
	})
}

func (w *Worker) recordRemoved(ctx context.Context, c Config, q *domain.Inquiry, st streamState, r *rowState, reason string) error {
	_, err := w.appendPast(ctx, c, q, st, fmt.Sprintf("lists:remove/%s/%s/%s", c.List, q.ID, r.RowID),
		"ListRowRemoved", ListRowRemoved{List: c.List, RowID: r.RowID, Reason: reason})
	if isConflict(err) {
		return river.JobSnooze(0)
	}
	if reason == "gone" && err == nil {
		return river.JobSnooze(0) // look again: a new row if still in the working set
	}
	return err
}

// deleteRow deletes the mapped row only when it is positively ours (its marker verifies).
func (w *Worker) deleteRow(ctx context.Context, api *slack.Client, c Config, q *domain.Inquiry, st streamState, r *rowState, reason string) error {
	info, err := api.GetListItemInfoContext(ctx, c.List, r.RowID)
	if isGone(err) {
		return w.recordRemoved(ctx, c, q, st, r, reason)
	}
	if err != nil {
		return err
	}
	if m := cellText(info.Record, c.Schema.Columns[ColMarker].ID); !w.Store.Markers.Verify(m, string(c.Tenant), c.List, string(q.ID), q.Receipt) {
		return river.JobCancel(fmt.Errorf("%s: row %s does not carry our marker: not deleted", ClassQuarantined, r.RowID))
	}
	if err := api.DeleteListItemContext(ctx, c.List, r.RowID); err != nil && !isGone(err) {
		return err
	}
	return w.recordRemoved(ctx, c, q, st, r, reason)
}

// Remove deletes a terminal inquiry's row once its delay has passed, re-checking canonical state:
// a reopened inquiry keeps its row.
func (w *Worker) Remove(ctx context.Context, a RemoveArgs) error {
	w.defaults()
	c, ok, err := w.active(ctx, a.Tenant, a.List)
	if !ok || err != nil {
		return err
	}
	q, err := w.Load(ctx, a.Tenant, a.Inquiry)
	if err != nil {
		return err
	}
	if !q.Exists() || !q.Status.Terminal() {
		return nil
	}
	if due := q.ClosedAt.Add(c.RemoveAfter); w.Store.Now().Before(due) {
		return river.JobSnooze(due.Sub(w.Store.Now()))
	}
	st, err := readRows(ctx, w.Store.Events, a.Tenant, a.Inquiry)
	if err != nil {
		return err
	}
	r := st.list(a.List)
	if r.RowID == "" {
		return nil
	}
	api, err := w.admit(ctx, c, a.Tenant)
	if err != nil {
		return err
	}
	if err := w.deleteRow(ctx, api, c, q, st, r, string(q.Status)); err != nil {
		return w.classify(ctx, c, a.Inquiry, err)
	}
	return w.Store.recordSuccess(ctx, a.Tenant, a.List, a.Inquiry)
}

// findByMarker pages items.list (active rows) for a row whose marker cell satisfies ours.
func findByMarker(ctx context.Context, api *slack.Client, list, markerCol string, ours func(string) bool) (string, error) {
	cursor := ""
	for {
		opts := []slack.GetListItemsOption{slack.GetListItemsOptionLimit(100)}
		if cursor != "" {
			opts = append(opts, slack.GetListItemsOptionCursor(cursor))
		}
		res, err := api.GetListItemsContext(ctx, list, opts...)
		if err != nil {
			return "", err
		}
		for _, it := range res.Items {
			if ours(cellText(it, markerCol)) {
				return it.ID, nil
			}
		}
		cursor = res.ResponseMetadata.Cursor
		if cursor == "" || len(res.Items) == 0 {
			return "", nil
		}
	}
}

func isGone(err error) bool {
	var se slack.SlackErrorResponse
	return errors.As(err, &se) && (se.Err == "record_not_found" || se.Err == "invalid_row_id")
}

func isConflict(err error) bool { return errors.Is(err, domain.ErrConcurrency) }

// certainlyNotApplied reports an answer proving the write did not happen: a Slack error or a 429.
func certainlyNotApplied(err error) bool {
	var se slack.SlackErrorResponse
	var rl *slack.RateLimitedError
	return errors.As(err, &se) || errors.As(err, &rl)
}

// classify turns a failed call into River's outcome and records health.
func (w *Worker) classify(ctx context.Context, c Config, id domain.InquiryID, err error) error {
	ctx = context.WithoutCancel(ctx)
	var snooze *river.JobSnoozeError
	var cancel *river.JobCancelError
	if errors.As(err, &snooze) {
		return err
	}
	var rl *slack.RateLimitedError
	var se slack.SlackErrorResponse
	var sc slack.StatusCodeError
	class, out := ClassTransient, err
	switch {
	case errors.As(err, &cancel):
		class = ClassQuarantined
	case errors.As(err, &rl):
		wait := max(rl.RetryAfter, time.Second)
		if e := w.Store.SetCooldown(ctx, c.Tenant, c.List, w.Store.Now().Add(wait)); e != nil {
			return e
		}
		class, out = ClassRateLimited, river.JobSnooze(wait)
	case errors.As(err, &se) && se.Err == "over_row_maximum":
		if e := w.Store.openCircuit(ctx, c, se.Err, true, w.ProbeEvery); e != nil {
			return e
		}
		class, out = ClassCircuit, river.JobSnooze(w.ProbeEvery)
	case errors.As(err, &se) && circuitCodes[se.Err]:
		if e := w.Store.openCircuit(ctx, c, se.Err, false, w.ProbeEvery); e != nil {
			return e
		}
		class, out = ClassCircuit, river.JobSnooze(w.ProbeEvery)
	case errors.As(err, &se) && schemaCodes[se.Err]:
		cur, e := w.Store.CheckSchema(ctx, c.Tenant, c.List)
		if e == nil && cur.SchemaState == SchemaDrifted {
			class, out = ClassDrift, river.JobSnooze(w.ProbeEvery)
		} else {
			class, out = ClassQuarantined, river.JobCancel(fmt.Errorf("quarantined: slack answered %s", se.Err))
		}
	case errors.As(err, &se) && quarantineCodes[se.Err]:
		class, out = ClassQuarantined, river.JobCancel(fmt.Errorf("quarantined: slack answered %s", se.Err))
	case errors.As(err, &sc) && sc.Code >= 500, !errors.As(err, &se):
		class = ClassUnknown
	}
	if e := w.Store.recordError(ctx, c.Tenant, c.List, id, class, err.Error()); e != nil {
		return errors.Join(out, e)
	}
	return out
}
