package lists

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/casebook/casebook/domain"
)

// The periodic sweep is a ticker in every serving process, not a River periodic job: a sweep is
// paced to items.list's rate tier and can outlast River's job timeout, and it must keep deleting
// while the List's capacity circuit holds every other write. One owner at a time comes from each
// List's fenced run lease (the due jobs' claim pattern): replicas ticking together run each List
// once.

func (r *Reconciler) every() time.Duration {
	if r.Every <= 0 {
		return 15 * time.Minute
	}
	return r.Every
}

type listRef struct {
	tenant domain.TenantID
	list   string
}

// due returns the active Lists, of every tenant, whose last attempt is older than Every.
func (r *Reconciler) due(ctx context.Context) ([]listRef, error) {
	st := r.store()
	before := st.Now().Add(-r.every()).UnixNano()
	rows, err := st.DB.QueryContext(ctx, st.DB.Rebind(`SELECT p.tenant_id, p.list_id FROM slack_list_projections p
		LEFT JOIN slack_list_reconcile r ON r.tenant_id = p.tenant_id AND r.list_id = p.list_id
		WHERE p.state = ? AND COALESCE(r.last_attempted, 0) <= ? ORDER BY COALESCE(r.last_attempted, 0), p.tenant_id, p.list_id`), StateActive, before)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []listRef
	for rows.Next() {
		var l listRef
		if err := rows.Scan(&l.tenant, &l.list); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// Sweep reconciles every active List that is due, one after the other; a List another process is
// reconciling is passed over. It returns the reports of the runs it made.
func (r *Reconciler) Sweep(ctx context.Context) ([]Report, error) {
	ls, err := r.due(ctx)
	if err != nil {
		return nil, err
	}
	var out []Report
	var errs []error
	for _, l := range ls {
		rep, err := r.Run(ctx, l.tenant, l.list, false)
		switch {
		case errors.Is(err, ErrReconcileBusy):
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		}
		out = append(out, rep)
	}
	return out, errors.Join(errs...)
}

// Loop runs Sweep every tick until ctx ends; the first sweep waits one tick.
func (r *Reconciler) Loop(ctx context.Context, tick time.Duration, log *slog.Logger) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		reps, err := r.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("list reconcile sweep", "error", err)
		}
		for _, rep := range reps {
			if !rep.Complete {
				log.Info("list reconcile incomplete", "tenant", rep.Tenant, "list", rep.List, "stopped", rep.Stopped, "error", rep.Error)
			}
		}
	}
}
