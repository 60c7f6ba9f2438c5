package lists

import (
	"context"
	"errors"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// Worker is the List row effect kinds (sync and remove). It decides on the log (the inquiry and its
// List row events), never on a projection, and does no Slack I/O for a List that is not active or
// drifted.
type Worker struct {
	Store *Store
	Load  slackeffects.Loader
	// PageLimit is the items.list page size of a marker lookup (default 100).
	PageLimit int

	beforeCreate func()       // test hook: a create about to be sent
	afterCreate  func() error // test hook: a crash between the create and its record
}

type syncKind struct{ *Worker }

type removeKind struct{ *Worker }

var (
	_ slackeffects.Kind[SyncArgs]   = syncKind{}
	_ slackeffects.Kind[RemoveArgs] = removeKind{}
)

// Register adds the sync and remove kinds to the runtime.
func Register(rt *slackeffects.Runtime, w *Worker) error {
	if err := slackeffects.Register[SyncArgs](rt, syncKind{w}); err != nil {
		return err
	}
	return slackeffects.Register[RemoveArgs](rt, removeKind{w})
}

func (w *Worker) fx() *slackeffects.Runtime { return w.Store.Effects }

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
		return c, false, slackeffects.Snooze(w.fx().Timing.ProbeEvery) // fails closed until re-activation
	}
	return c, true, nil
}

// load returns the List's config and the inquiry when a job may do I/O for them; ok=false means
// do nothing. An inquiry that does not exist cancels the job.
func (w *Worker) load(ctx context.Context, tenant domain.TenantID, list string, id domain.InquiryID) (Config, *domain.Inquiry, bool, error) {
	c, ok, err := w.active(ctx, tenant, list)
	if !ok || err != nil {
		return c, nil, false, err
	}
	q, err := w.Load(ctx, tenant, id)
	if err != nil {
		return c, nil, false, err
	}
	if !q.Exists() {
		return c, nil, false, slackeffects.Cancel(fmt.Errorf("inquiry %s: %w", id, domain.ErrNotFound))
	}
	return c, q, true, nil
}

// inScope reports whether q belongs on the List: its team's, and neither archived nor erased (the
// data lifecycle removes an archived or erased inquiry's row at once and never creates one).
func inScope(c Config, q *domain.Inquiry) bool {
	return (c.Team == "" || c.Team == q.Team) && !q.Archived && !q.Erased
}

// plan names the List row target and its installation.
func (w *Worker) plan(ctx context.Context, c Config, id domain.InquiryID, do func(ctx context.Context, api *slack.Client) error) (*slackeffects.Plan, error) {
	_, in, err := w.Store.Install.ClientFor(ctx, c.Tenant, c.InstallationID)
	if err != nil {
		return nil, err
	}
	return &slackeffects.Plan{
		Target:       slackeffects.Target{Tenant: c.Tenant, Installation: in.Key, Destination: c.List, Inquiry: id},
		Installation: in,
		Do:           do,
		Refine: func(ctx context.Context, f slackeffects.Failure) slackeffects.Failure {
			if f.Class != slackeffects.ClassDrift {
				return f
			}
			// A schema error is drift only when the List's schema changed; else this row's data is bad.
			cur, err := w.Store.CheckSchema(ctx, c.Tenant, c.List)
			if err != nil || cur.SchemaState != SchemaDrifted {
				f.Class = slackeffects.ClassQuarantined
			}
			return f
		},
	}, nil
}

// Plan implements slackeffects.Kind for SyncArgs: bring an inquiry's row in the List to the newest
// canonical version: create (never blindly) or adopt while unmapped and active, update while
// mapped, delete at once when the inquiry left the List's team.
func (k syncKind) Plan(ctx context.Context, a SyncArgs) (*slackeffects.Plan, error) {
	w := k.Worker
	c, q, ok, err := w.load(ctx, a.Tenant, a.List, a.Inquiry)
	if !ok || err != nil {
		return nil, err
	}
	st, err := readRows(ctx, w.Store.Events, a.Tenant, a.Inquiry)
	if err != nil {
		return nil, err
	}
	r := st.list(a.List)
	scoped := inScope(c, q)
	switch {
	case r.RowID == "" && (!scoped || q.Status.Terminal()):
		return nil, nil // not in the working set
	case r.RowID != "" && scoped && r.Observed >= q.Version:
		return nil, nil // coalesced: this version or a newer one is shown
	}
	if r.RowID == "" {
		out, err := w.Store.evicted(ctx, a.Tenant, a.List, a.Inquiry)
		if out || err != nil {
			return nil, err // over the working-set bound: the sweep lets it back in
		}
	}
	p, err := w.plan(ctx, c, a.Inquiry, func(ctx context.Context, api *slack.Client) error {
		switch {
		case r.RowID != "" && !scoped:
			return w.deleteRow(ctx, api, c, q, st, r, "out_of_scope")
		case r.RowID != "":
			return w.update(ctx, api, c, q, st, r)
		}
		return w.create(ctx, api, c, q, st, r)
	})
	if err == nil && r.RowID != "" && !scoped {
		p.Frees = true // the out-of-scope delete frees room
	}
	if err != nil || r.RowID == "" || !scoped {
		return p, err
	}
	// An update is debounced; a create or a removal is not.
	p.Changed = q.UpdatedAt
	p.Pending, err = w.fx().FirstUnshown(ctx, a.Tenant, a.Inquiry, r.Observed)
	return p, err
}

func (w *Worker) pageLimit() int {
	if w.PageLimit == 0 {
		return 100
	}
	return w.PageLimit
}

func (w *Worker) marker(c Config, q *domain.Inquiry) string {
	return w.Store.Markers.For(string(c.Tenant), c.List, string(q.ID), q.Receipt)
}

// create makes the inquiry's row, never blindly: an attempt is claimed first; an earlier attempt
// (or an unknown result) is reconciled by a marker lookup, then adopted. The row id is recorded
// before anything else.
func (w *Worker) create(ctx context.Context, api *slack.Client, c Config, q *domain.Inquiry, st streamState, r *rowState) error {
	key := fmt.Sprintf("listrow/%s/%s/%s/%s", c.Tenant, q.ID, c.List, r.Generation)
	fresh, reconcile, err := w.fx().Ledger.Claim(ctx, key, w.fx().Timing.AttemptStale)
	if err != nil {
		return err
	}
	if !fresh && !reconcile {
		return slackeffects.Snooze(w.fx().Timing.InFlightRecheck) // another job's create is in flight
	}
	marker := w.marker(c, q)
	markerCol := c.Schema.Columns[ColMarker].ID
	ours := func(m string) bool {
		return w.Store.Markers.Verify(m, string(c.Tenant), c.List, string(q.ID), q.Receipt)
	}
	row, adopted := "", false
	if reconcile {
		if row, err = findByMarker(ctx, api, c.List, markerCol, w.pageLimit(), ours); err != nil {
			return err
		}
		adopted = row != ""
	}
	if row == "" {
		fs, err := c.Schema.fields(valuesFor(q, c.Clearance, marker), false)
		if err != nil {
			return slackeffects.Cancel(err)
		}
		if w.beforeCreate != nil {
			w.beforeCreate()
		}
		res, err := api.CreateListItemContext(ctx, c.List, slack.CreateListItemOptionInitialFields(fs))
		if err != nil {
			if slackeffects.CertainlyNotApplied(err) {
				_ = w.fx().Ledger.Release(ctx, key)
				return err
			}
			// Unknown result: look for our marker now; without it, retry later (reconciling).
			found, lerr := findByMarker(context.WithoutCancel(ctx), api, c.List, markerCol, w.pageLimit(), ours)
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
	res, err := w.record(ctx, c, q, st, "lists:"+key, typ, payload)
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
		return slackeffects.Cancel(err)
	}
	err = w.fx().Exclusive(ctx, fmt.Sprintf("listupdate/%s/%s/%s/%s/%d", c.Tenant, q.ID, c.List, r.RowID, q.Version), func() error {
		return api.UpdateListItemsContext(ctx, c.List, cells(r.RowID, fs))
	})
	if gone(err) {
		// Deleted by hand. Not recreated after a first absence: a tombstone waits for the
		// reconciler's next complete scan to confirm it (then a new row, with its own attempt key).
		return w.Store.setTombstoneOnce(ctx, c.Tenant, c.List, q.ID, r.RowID)
	}
	if err != nil {
		return err
	}
	_, err = w.record(ctx, c, q, st, fmt.Sprintf("lists:update/%s/%s/%s/%d", c.List, q.ID, r.RowID, q.Version),
		"ListRowUpdated", ListRowUpdated{List: c.List, RowID: r.RowID, Version: q.Version})
	return err
}

// record appends a List row event to the inquiry's List stream after st.
func (w *Worker) record(ctx context.Context, c Config, q *domain.Inquiry, st streamState, cmdID, typ string, payload any) (eventstore.AppendResult, error) {
	return w.fx().Record(ctx, Stream(c.Tenant, q.ID), st.Revision, c.Tenant, cmdID, typ, payload)
}

func (w *Worker) recordRemoved(ctx context.Context, c Config, q *domain.Inquiry, st streamState, r *rowState, reason string) error {
	_, err := w.record(ctx, c, q, st, fmt.Sprintf("lists:remove/%s/%s/%s", c.List, q.ID, r.RowID),
		"ListRowRemoved", ListRowRemoved{List: c.List, RowID: r.RowID, Reason: reason})
	if reason == "gone" && err == nil {
		return slackeffects.Snooze(0) // look again: a new row if still in the working set
	}
	return err
}

// deleteRow deletes the mapped row only when it is positively ours (its marker verifies).
func (w *Worker) deleteRow(ctx context.Context, api *slack.Client, c Config, q *domain.Inquiry, st streamState, r *rowState, reason string) error {
	info, err := api.GetListItemInfoContext(ctx, c.List, r.RowID)
	if gone(err) {
		return w.recordRemoved(ctx, c, q, st, r, reason)
	}
	if err != nil {
		return err
	}
	if m := cellText(info.Record, c.Schema.Columns[ColMarker].ID); !w.Store.Markers.Verify(m, string(c.Tenant), c.List, string(q.ID), q.Receipt) {
		return slackeffects.Cancel(fmt.Errorf("%s: row %s does not carry our marker: not deleted", slackeffects.ClassQuarantined, r.RowID))
	}
	if err := api.DeleteListItemContext(ctx, c.List, r.RowID); err != nil && !gone(err) {
		return err
	}
	return w.recordRemoved(ctx, c, q, st, r, reason)
}

// Plan implements slackeffects.Kind for RemoveArgs: delete a terminal inquiry's row once its
// delay has passed, re-checking canonical state: a reopened inquiry keeps its row.
func (k removeKind) Plan(ctx context.Context, a RemoveArgs) (*slackeffects.Plan, error) {
	w := k.Worker
	c, q, ok, err := w.load(ctx, a.Tenant, a.List, a.Inquiry)
	if !ok || err != nil || !q.Status.Terminal() {
		return nil, err
	}
	if due := q.ClosedAt.Add(c.RemoveAfter); w.Store.Now().Before(due) {
		return nil, slackeffects.Snooze(due.Sub(w.Store.Now()))
	}
	st, err := readRows(ctx, w.Store.Events, a.Tenant, a.Inquiry)
	if err != nil {
		return nil, err
	}
	r := st.list(a.List)
	if r.RowID == "" {
		return nil, nil
	}
	p, err := w.plan(ctx, c, a.Inquiry, func(ctx context.Context, api *slack.Client) error {
		return w.deleteRow(ctx, api, c, q, st, r, string(q.Status))
	})
	if p != nil {
		p.Frees = true // never blocked by the List's capacity circuit
	}
	return p, err
}

// findByMarker pages items.list (active rows) for a row whose marker cell satisfies ours.
func findByMarker(ctx context.Context, api *slack.Client, list, markerCol string, pageLimit int, ours func(string) bool) (string, error) {
	cursor := ""
	for {
		opts := []slack.GetListItemsOption{slack.GetListItemsOptionLimit(pageLimit)}
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

// gone reports a row that was deleted (Classify: ClassGone).
func gone(err error) bool { return slackeffects.Classify(err).Class == slackeffects.ClassGone }
