package lists

import (
	"context"
	"time"

	"github.com/casebook/casebook/domain"
)

// RowHealth is an inquiry's row in one List, for the inquiry detail's "slack" block, next to
// its thread's state.
type RowHealth struct {
	List string `json:"list_id"`
	// State: disabled (the List is not active), not_in_working_set (out of the List's team,
	// resolved past its delay, or evicted), pending, synced or failed.
	State           string     `json:"state"`
	RowID           string     `json:"row_id,omitempty"`
	DesiredVersion  uint64     `json:"desired_version"`
	ObservedVersion uint64     `json:"observed_version"`
	LastSuccess     *time.Time `json:"last_success,omitempty"`
	LastError       string     `json:"last_error,omitempty"`
	ErrorClass      string     `json:"error_class,omitempty"`
	// Reconcile is what the List's last sweep found for this inquiry when it needs attention
	// (stale, manual_edit, missing_once, confirmed_missing, archived, duplicate); "" otherwise.
	// LastObserved is that List's last complete scan: the row's state is known as of then.
	Reconcile    Outcome    `json:"reconcile,omitempty"`
	LastObserved *time.Time `json:"last_observed,omitempty"`
}

// RowHealth returns an inquiry's row state in each of the tenant's Lists. It decides on the log
// (the inquiry and its List row events), like the worker.
func (s *Store) RowHealth(ctx context.Context, load func(context.Context, domain.TenantID, domain.InquiryID) (*domain.Inquiry, error),
	tenant domain.TenantID, id domain.InquiryID) ([]RowHealth, error) {
	cfgs, err := s.Configs(ctx, tenant)
	if err != nil || len(cfgs) == 0 {
		return []RowHealth{}, err
	}
	q, err := load(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	rows, err := readRows(ctx, s.Events, tenant, id)
	if err != nil {
		return nil, err
	}
	hs, err := s.Effects.Health(ctx, tenant, id, SyncArgs{}.Kind(), RemoveArgs{}.Kind())
	if err != nil {
		return nil, err
	}
	out := make([]RowHealth, 0, len(cfgs))
	for _, c := range cfgs {
		r := rows.list(c.List)
		h := RowHealth{List: c.List, RowID: r.RowID, DesiredVersion: q.Version, ObservedVersion: r.Observed}
		for _, e := range hs {
			if e.Target.Destination != c.List {
				continue
			}
			if !e.LastSuccess.IsZero() && (h.LastSuccess == nil || e.LastSuccess.After(*h.LastSuccess)) {
				t := e.LastSuccess
				h.LastSuccess = &t
			}
			if e.LastError != "" && h.LastError == "" {
				h.LastError, h.ErrorClass = e.LastError, string(e.ErrorClass)
			}
		}
		ev, err := s.evicted(ctx, tenant, c.List, id)
		if err != nil {
			return nil, err
		}
		switch {
		case c.State != StateActive:
			h.State = "disabled"
		case r.RowID == "" && (!inScope(c, q) || q.Status.Terminal() || ev):
			h.State = "not_in_working_set"
		case r.RowID != "" && r.Observed >= q.Version:
			h.State = "synced"
		case h.LastError != "":
			h.State = "failed"
		default:
			h.State = "pending"
		}
		rc, err := s.Reconciliation(ctx, tenant, c.List)
		if err != nil {
			return nil, err
		}
		h.LastObserved = rc.Watermarks.LastSuccessfullyObserved
		if rc.LastRun != nil {
			for _, a := range rc.LastRun.Attention {
				if a.Inquiry == id {
					h.Reconcile = a.Outcome
				}
			}
		}
		out = append(out, h)
	}
	return out, nil
}
