package commands

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// ScheduleFollowUp sets a reminder at At, or In from now (exactly one of them).
type ScheduleFollowUp struct {
	Target
	At   time.Time
	In   time.Duration
	Note string
}

// FollowUpResult names the reminder's due job.
type FollowUpResult struct {
	Result
	JobID string    `json:"job_id"`
	DueAt time.Time `json:"due_at"`
}

// followUpJobID derives a reminder's job id: from the idempotency key when there is one, so a
// retried request names the same job.
func followUpJobID(t Target, salt string) string {
	sum := sha256.Sum256([]byte(string(t.Tenant) + "\x00" + string(t.InquiryID) + "\x00follow_up\x00" + salt))
	return "fu_" + hex.EncodeToString(sum[:12])
}

// ScheduleFollowUp executes c.
func (h *Handler) ScheduleFollowUp(ctx context.Context, c ScheduleFollowUp) (FollowUpResult, error) {
	c.Note = Normalize(c.Note, true)
	now := h.Now().UTC()
	at := c.At
	switch {
	case at.IsZero() == (c.In == 0):
		return FollowUpResult{}, domain.Invalid("at", "give exactly one of at (RFC 3339) and in (a duration such as 2h)")
	case c.In < 0:
		return FollowUpResult{}, domain.Invalid("in", "must be positive")
	case c.In > 0:
		at = now.Add(c.In)
	}
	salt := "key:" + c.IdempotencyKey
	if c.IdempotencyKey == "" {
		salt = "id:" + h.NewID()
	}
	id := followUpJobID(c.Target, salt)
	res, err := h.execute(ctx, c.Target, fingerprint("follow_up", c.At, c.In, c.Note), func(q *domain.Inquiry) ([]domain.Event, error) {
		return q.ScheduleFollowUp(c.Actor, id, at, now, c.Note)
	})
	if err != nil {
		return FollowUpResult{}, err
	}
	out := FollowUpResult{Result: res, JobID: id, DueAt: at.UTC()}
	if res.Replayed {
		// The first request's due time, if the reminder is still pending.
		if q, err := h.Load(ctx, c.Tenant, c.InquiryID); err == nil {
			out.DueAt = q.FollowUps[id].DueAt
		}
	}
	return out, nil
}

// CancelFollowUp withdraws a pending reminder.
type CancelFollowUp struct {
	Target
	JobID string
}

// CancelFollowUp executes c.
func (h *Handler) CancelFollowUp(ctx context.Context, c CancelFollowUp) (Result, error) {
	return h.execute(ctx, c.Target, fingerprint("cancel_follow_up", c.JobID), func(q *domain.Inquiry) ([]domain.Event, error) {
		return q.CancelFollowUp(c.Actor, c.JobID)
	})
}

// SetDueDate sets (or with a zero DueAt clears) the inquiry's due date.
type SetDueDate struct {
	Target
	DueAt time.Time
}

// SetDueDate executes c.
func (h *Handler) SetDueDate(ctx context.Context, c SetDueDate) (Result, error) {
	now := h.Now().UTC()
	return h.execute(ctx, c.Target, fingerprint("due", c.DueAt), func(q *domain.Inquiry) ([]domain.Event, error) {
		return q.SetDueDate(c.Actor, c.DueAt, now)
	})
}

// AddWatcher adds a principal of the tenant as a watcher.
type AddWatcher struct {
	Target
	Principal domain.PrincipalID
}

// AddWatcher executes c.
func (h *Handler) AddWatcher(ctx context.Context, c AddWatcher) (Result, error) {
	if c.Principal == "" {
		return Result{}, domain.Invalid("principal", "is required")
	}
	w, err := h.Principals.Principal(ctx, c.Tenant, c.Principal)
	if errors.Is(err, domain.ErrNotFound) {
		return Result{}, domain.Invalid("principal", "is not a principal of this tenant")
	}
	if err != nil {
		return Result{}, err
	}
	return h.execute(ctx, c.Target, fingerprint("watch", c.Principal), func(q *domain.Inquiry) ([]domain.Event, error) {
		return q.AddWatcher(c.Actor, w)
	})
}

// Route makes a team responsible for the inquiry.
type Route struct {
	Target
	Team string
}

// Route executes c.
func (h *Handler) Route(ctx context.Context, c Route) (Result, error) {
	return h.execute(ctx, c.Target, fingerprint("route", c.Team), func(q *domain.Inquiry) ([]domain.Event, error) {
		return q.Route(c.Actor, c.Team)
	})
}

// SLAPolicyStream is the stream of a tenant's SLA policy changes.
func SLAPolicyStream(tenant domain.TenantID) string { return eventstore.KindSLAPolicy.Tenant(tenant) }

// SetSLAPolicy replaces a tenant's SLA policy (admins only). The policy is an event in the log, so
// the SLA clock, a projection of the log, computes the same due times on every replay.
type SetSLAPolicy struct {
	Tenant        domain.TenantID
	Actor         domain.Principal
	Policy        []byte // the JSON document; ParseSLAPolicy validates it
	CorrelationID string
}

// SetSLAPolicy executes c and returns the stored (canonical) policy.
func (h *Handler) SetSLAPolicy(ctx context.Context, c SetSLAPolicy) (*domain.SLAPolicy, eventstore.Position, error) {
	var p *domain.SLAPolicy
	pos, err := h.setPolicy(ctx, c.Tenant, c.Actor, c.CorrelationID, "sla:", SLAPolicyStream(c.Tenant), func() (domain.Event, error) {
		var err error
		if p, err = domain.ParseSLAPolicy(c.Policy); err != nil {
			return nil, err
		}
		return domain.SLAPolicySet{Policy: p.Encode()}, nil
	})
	if err != nil {
		return nil, eventstore.Position{}, err
	}
	return p, pos, nil
}

// SLAPolicy returns a tenant's current SLA policy, or domain.ErrNotFound when none was set.
func (h *Handler) SLAPolicy(ctx context.Context, tenant domain.TenantID) (*domain.SLAPolicy, error) {
	e, err := h.lastPolicy(ctx, tenant, SLAPolicyStream(tenant), "sla policy")
	if err != nil {
		return nil, err
	}
	set, ok := e.(domain.SLAPolicySet)
	if !ok {
		return nil, fmt.Errorf("sla policy stream of %s holds %s", tenant, e.EventType())
	}
	return domain.ParseSLAPolicy(set.Policy)
}

// setPolicy appends the policy event that build validates and returns to a tenant's policy stream,
// as that tenant's admin (command id prefix + a new id).
func (h *Handler) setPolicy(ctx context.Context, tenant domain.TenantID, actor domain.Principal, correlation, prefix, stream string,
	build func() (domain.Event, error)) (eventstore.Position, error) {
	if actor.TenantID != tenant {
		return eventstore.Position{}, fmt.Errorf("tenant: %w", domain.ErrNotFound)
	}
	if err := domain.Authorize(actor, domain.ActAdminister); err != nil {
		return eventstore.Position{}, err
	}
	e, err := build()
	if err != nil {
		return eventstore.Position{}, err
	}
	meta := h.meta(actor, prefix+h.NewID(), "", "", correlation)
	res, err := h.append(ctx, stream, eventstore.Any(), []domain.Event{e}, meta, eventIDs{base: meta.CommandID})
	if err != nil {
		return eventstore.Position{}, err
	}
	return res.Position, nil
}

// lastPolicy returns the newest event of a tenant's policy stream; domain.ErrNotFound when the
// stream is empty.
func (h *Handler) lastPolicy(ctx context.Context, tenant domain.TenantID, stream, what string) (domain.Event, error) {
	recs, err := h.Store.ReadStream(ctx, stream, 0, 0)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%s: %w", what, domain.ErrNotFound)
	}
	last := recs[len(recs)-1]
	m, err := eventstore.DecodeMetadata(last.Metadata)
	if err != nil {
		return nil, err
	}
	if m.TenantID != tenant {
		return nil, fmt.Errorf("%s stream of %s holds an event of %s", what, tenant, m.TenantID)
	}
	return eventstore.DecodeEvent(last.Type, m.SchemaVersion, last.Data)
}

// FireDue runs a due job against its inquiry: the domain decides from the current state whether
// the job's reason still holds; if so its event is appended with the idempotency key "due:<job>",
// so a job that runs twice appends once. Recipients of a reminder (who set it, the owner, the
// watchers) are re-read: a principal that no longer exists in the tenant is left out.
type FireDue struct {
	Target
	Job domain.DueJob
}

// FireResult says whether the job's event is in the log (now or from an earlier run).
type FireResult struct {
	Result
	Fired bool
}

// DueActor is the principal recorded on events appended by due jobs.
func DueActor(tenant domain.TenantID) domain.Principal { return domain.System(tenant, "due-jobs") }

// FireDue executes c. c.Actor and c.IdempotencyKey are set by FireDue.
func (h *Handler) FireDue(ctx context.Context, c FireDue) (FireResult, error) {
	c.Actor = DueActor(c.Tenant)
	c.IdempotencyKey = "due:" + c.Job.ID
	fired := false
	res, err := h.execute(ctx, c.Target, fingerprint("due", c.Job), func(q *domain.Inquiry) ([]domain.Event, error) {
		var recipients []domain.PrincipalID
		if c.Job.Kind == domain.KindFollowUp {
			f, ok := q.FollowUps[c.Job.ID]
			if !ok {
				return nil, nil
			}
			var err error
			if recipients, err = h.authorizedRecipients(ctx, q, append([]domain.PrincipalID{f.By, q.Owner}, q.Watchers...)); err != nil {
				return nil, err
			}
		}
		evs := q.FireDue(c.Job, recipients)
		fired = len(evs) > 0
		return evs, nil
	})
	if err != nil {
		return FireResult{}, err
	}
	return FireResult{Result: res, Fired: fired || res.Replayed}, nil
}

func (h *Handler) authorizedRecipients(ctx context.Context, q *domain.Inquiry, ids []domain.PrincipalID) ([]domain.PrincipalID, error) {
	var out []domain.PrincipalID
	seen := map[domain.PrincipalID]bool{}
	for _, id := range ids {
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		p, err := h.Principals.Principal(ctx, q.TenantID, id)
		if errors.Is(err, domain.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if domain.Authorize(p, domain.ActRead) == nil {
			out = append(out, id)
		}
	}
	return out, nil
}
