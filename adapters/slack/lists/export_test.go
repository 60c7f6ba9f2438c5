package lists

import (
	"context"
	"time"

	"github.com/casebook/casebook/domain"
)

// SetHooks sets the worker's test hooks: before sends a create, after fails between it and its record.
func SetHooks(w *Worker, before func(), after func() error) {
	w.beforeCreate, w.afterCreate = before, after
}

// SetReconcileHooks replaces the reconciler's read pacing and sets its after-page hook.
func SetReconcileHooks(r *Reconciler, pace func(ctx context.Context, d time.Duration) error, afterPage func(archived bool, page int)) {
	r.pace, r.afterPage = pace, afterPage
}

// Evicted reports whether the last sweep evicted the inquiry from the List.
func Evicted(ctx context.Context, s *Store, tenant domain.TenantID, list string, id domain.InquiryID) (bool, error) {
	return s.evicted(ctx, tenant, list, id)
}
