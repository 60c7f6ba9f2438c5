package app

import (
	"context"
	"fmt"
	"time"

	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/queries"
)

// DefaultListSweepTick is how often a serving process looks for Lists due a reconcile sweep (each
// List is swept every lists.Reconciler.Every).
const DefaultListSweepTick = time.Minute

// listInventory answers the reconciler's candidate questions from the query model; the
// reconciler re-reads every inquiry it acts on from the log.
type listInventory struct{ r *queries.Reader }

var _ lists.Inventory = listInventory{}

func (l listInventory) Open(ctx context.Context, tenant domain.TenantID) ([]domain.InquiryID, error) {
	var out []domain.InquiryID
	for _, st := range domain.Statuses {
		if st.Terminal() {
			continue
		}
		cursor := ""
		for {
			page, next, err := l.r.List(ctx, tenant, queries.Filter{Status: st, Limit: queries.MaxLimit, Cursor: cursor})
			if err != nil {
				return nil, err
			}
			for _, q := range page {
				out = append(out, q.ID)
			}
			if cursor = next; cursor == "" {
				break
			}
		}
	}
	return out, nil
}

func (l listInventory) ByReceipt(ctx context.Context, tenant domain.TenantID, receipt string) (domain.InquiryID, error) {
	page, _, err := l.r.List(ctx, tenant, queries.Filter{Receipt: receipt, Limit: 1})
	if err != nil {
		return "", err
	}
	if len(page) == 0 {
		return "", fmt.Errorf("receipt: %w", domain.ErrNotFound)
	}
	return page[0].ID, nil
}

// wireListReconciler gives the List reconciler its inventory and the configured pacing.
func (a *App) wireListReconciler() {
	r := a.Lists.Reconciler
	r.Inventory = listInventory{a.Reader}
	if a.Config.ListSweepEvery > 0 {
		r.Every = a.Config.ListSweepEvery
	}
}

// runListSweeps runs the periodic List reconcile until ctx ends (Config.ListSweepTick < 0: never).
func (a *App) runListSweeps(ctx context.Context) {
	tick := a.Config.ListSweepTick
	if tick < 0 {
		return
	}
	if tick == 0 {
		tick = DefaultListSweepTick
	}
	a.Lists.Reconciler.Loop(ctx, tick, a.Config.Logger)
}
