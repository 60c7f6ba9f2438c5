package slackeffects

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/casebook/casebook/domain"
)

// Dispositions: what an effect job's state means to an operator.
const (
	DispositionQueued      = "queued"      // waiting to run (debounce, cooldown, circuit included)
	DispositionRunning     = "running"     // a worker has it
	DispositionRetrying    = "retrying"    // failed, will run again
	DispositionDone        = "done"        // completed
	DispositionDeadLetter  = "dead_letter" // out of attempts: kept until an operator retries or cancels it
	DispositionQuarantined = "quarantined" // refused data: kept until an operator retries or cancels it
	DispositionCancelled   = "cancelled"   // ended by an operator, or nothing left to do
)

// Effect is an effect job as an operator sees it.
type Effect struct {
	ID           int64              `json:"id"`
	Kind         string             `json:"kind"`
	State        rivertype.JobState `json:"state"`
	Disposition  string             `json:"disposition"`
	Tenant       domain.TenantID    `json:"tenant_id"`
	Inquiry      domain.InquiryID   `json:"inquiry_id"`
	Installation string             `json:"installation,omitempty"`
	Destination  string             `json:"destination,omitempty"`
	Version      uint64             `json:"version"`
	Attempt      int                `json:"attempt"`
	MaxAttempts  int                `json:"max_attempts"`
	LastError    string             `json:"last_error,omitempty"`
	ErrorClass   Class              `json:"error_class,omitempty"`
	ScheduledAt  time.Time          `json:"scheduled_at"`
	FinalizedAt  *time.Time         `json:"finalized_at,omitempty"`
}

// Filter selects effects. Zero fields select everything.
type Filter struct {
	States  []string // River states: available, scheduled, running, retryable, completed, discarded, cancelled
	Kinds   []string
	Inquiry domain.InquiryID
	Limit   int // default 100, at most 1000
}

// Effects lists a tenant's effect jobs of every registered kind (or Filter.Kinds), newest first.
// It is the one listing behind `casebook effects list`, /v1/admin/effects and the console.
func (r *Runtime) Effects(ctx context.Context, tenant domain.TenantID, f Filter) ([]Effect, error) {
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 100
	}
	kinds := f.Kinds
	if len(kinds) == 0 {
		kinds = r.Kinds()
	}
	for _, k := range kinds {
		if _, ok := r.kind(k); !ok {
			return nil, domain.Invalid("kind", "must be one of %s", strings.Join(r.Kinds(), ", "))
		}
	}
	p := river.NewJobListParams().Kinds(kinds...).TagsAny(tenantTag(tenant)).
		OrderBy(river.JobListOrderByID, river.SortOrderDesc).First(f.Limit)
	if len(f.States) > 0 {
		st := make([]rivertype.JobState, 0, len(f.States))
		for _, s := range f.States {
			if !validState(s) {
				return nil, domain.Invalid("state", "must be one of available, scheduled, pending, running, retryable, completed, discarded, cancelled")
			}
			st = append(st, rivertype.JobState(s))
		}
		p = p.States(st...)
	}
	if f.Inquiry != "" {
		// River filters by metadata or args with JSON paths on Postgres only: filter here.
		p = p.First(1000)
	}
	res, err := r.Client().JobList(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]Effect, 0, len(res.Jobs))
	for _, j := range res.Jobs {
		e, err := r.toEffect(ctx, j)
		if err != nil {
			return nil, err
		}
		if f.Inquiry != "" && e.Inquiry != f.Inquiry {
			continue
		}
		if len(out) < f.Limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func validState(s string) bool {
	for _, v := range rivertype.JobStates() {
		if string(v) == s {
			return true
		}
	}
	return false
}

func (r *Runtime) kind(k string) (registered, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	reg, ok := r.kinds[k]
	return reg, ok
}

func (r *Runtime) toEffect(ctx context.Context, j *rivertype.JobRow) (Effect, error) {
	reg, ok := r.kind(j.Kind)
	if !ok {
		return Effect{}, fmt.Errorf("slackeffects: no kind %s", j.Kind)
	}
	ref, err := reg.ref(j.EncodedArgs)
	if err != nil {
		return Effect{}, err
	}
	e := Effect{ID: j.ID, Kind: j.Kind, State: j.State, Tenant: ref.Tenant, Inquiry: ref.Inquiry, Destination: ref.Destination,
		Version: ref.Version, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, ScheduledAt: j.ScheduledAt, FinalizedAt: j.FinalizedAt}
	if n := len(j.Errors); n > 0 {
		e.LastError = j.Errors[n-1].Error
	}
	hs, err := r.health.of(ctx, ref.Tenant, ref.Inquiry, []string{j.Kind})
	if err != nil {
		return Effect{}, err
	}
	for _, h := range hs {
		if e.Destination == "" || h.Target.Destination == e.Destination {
			e.Installation, e.Destination, e.ErrorClass = h.Target.Installation, h.Target.Destination, h.ErrorClass
			if e.LastError == "" {
				e.LastError = h.LastError
			}
			break
		}
	}
	e.Disposition = disposition(j, e)
	return e, nil
}

func disposition(j *rivertype.JobRow, e Effect) string {
	switch j.State {
	case rivertype.JobStateRunning:
		return DispositionRunning
	case rivertype.JobStateCompleted:
		return DispositionDone
	case rivertype.JobStateDiscarded:
		return DispositionDeadLetter
	case rivertype.JobStateCancelled:
		if e.ErrorClass == ClassQuarantined || strings.HasPrefix(e.LastError, quarantineMark) {
			return DispositionQuarantined
		}
		return DispositionCancelled
	case rivertype.JobStateRetryable:
		return DispositionRetrying
	}
	if len(j.Errors) > 0 {
		return DispositionRetrying
	}
	return DispositionQueued
}

// get returns a job of the tenant and of a registered kind; anything else is domain.ErrNotFound.
func (r *Runtime) get(ctx context.Context, tenant domain.TenantID, id int64) (*rivertype.JobRow, error) {
	j, err := r.Client().JobGet(ctx, id)
	if errors.Is(err, rivertype.ErrNotFound) {
		return nil, fmt.Errorf("effect: %w", domain.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if _, ok := r.kind(j.Kind); ok {
		for _, t := range j.Tags {
			if t == tenantTag(tenant) {
				return j, nil
			}
		}
	}
	return nil, fmt.Errorf("effect: %w", domain.ErrNotFound)
}

// Effect returns one of a tenant's effect jobs; another tenant's is domain.ErrNotFound.
func (r *Runtime) Effect(ctx context.Context, tenant domain.TenantID, id int64) (Effect, error) {
	j, err := r.get(ctx, tenant, id)
	if err != nil {
		return Effect{}, err
	}
	return r.toEffect(ctx, j)
}

// Retry makes a tenant's job available now (a dead letter or a quarantined job gets a fresh
// attempt).
func (r *Runtime) Retry(ctx context.Context, tenant domain.TenantID, id int64) (Effect, error) {
	if _, err := r.get(ctx, tenant, id); err != nil {
		return Effect{}, err
	}
	j, err := r.Client().JobRetry(ctx, id)
	if err != nil {
		return Effect{}, err
	}
	return r.toEffect(ctx, j)
}

// Cancel stops a tenant's job for good (an operator's decision; the job is kept, cancelled). A
// dead letter is finalized, which River's JobCancel leaves as it is: it is moved from discarded to
// cancelled here, so an operator's "give up" is recorded on the job itself.
func (r *Runtime) Cancel(ctx context.Context, tenant domain.TenantID, id int64) (Effect, error) {
	j, err := r.get(ctx, tenant, id)
	if err != nil {
		return Effect{}, err
	}
	if j.State == rivertype.JobStateDiscarded {
		if _, err := r.DB.ExecContext(ctx, r.DB.Rebind(`UPDATE river_job SET state = 'cancelled' WHERE id = ? AND state = 'discarded'`), id); err != nil {
			return Effect{}, err
		}
		j, err = r.Client().JobGet(ctx, id)
	} else {
		j, err = r.Client().JobCancel(ctx, id)
	}
	if err != nil {
		return Effect{}, err
	}
	return r.toEffect(ctx, j)
}
