package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
)

// RetentionPolicyStream is the stream of a tenant's retention policy changes.
func RetentionPolicyStream(tenant domain.TenantID) string {
	return eventstore.KindRetentionPolicy.Tenant(tenant)
}

// SetRetentionPolicy replaces a tenant's retention policy (admins only). Like the SLA policy it is
// an event in the log; the policy job reads the current one at every sweep, so a change applies to
// every inquiry at the next sweep, whenever it was archived or closed.
type SetRetentionPolicy struct {
	Tenant        domain.TenantID
	Actor         domain.Principal
	Policy        []byte // the JSON document; ParseRetentionPolicy validates it
	CorrelationID string
}

// SetRetentionPolicy executes c and returns the stored (canonical) policy.
func (h *Handler) SetRetentionPolicy(ctx context.Context, c SetRetentionPolicy) (*domain.RetentionPolicy, eventstore.Position, error) {
	var p *domain.RetentionPolicy
	pos, err := h.setPolicy(ctx, c.Tenant, c.Actor, c.CorrelationID, "retention:", RetentionPolicyStream(c.Tenant), func() (domain.Event, error) {
		var err error
		if p, err = domain.ParseRetentionPolicy(c.Policy); err != nil {
			return nil, err
		}
		return domain.RetentionPolicySet{Policy: p.Encode()}, nil
	})
	if err != nil {
		return nil, eventstore.Position{}, err
	}
	return p, pos, nil
}

// RetentionPolicy returns a tenant's current retention policy, or domain.ErrNotFound when none was
// set (then nothing is erased by retention).
func (h *Handler) RetentionPolicy(ctx context.Context, tenant domain.TenantID) (*domain.RetentionPolicy, error) {
	e, err := h.lastPolicy(ctx, tenant, RetentionPolicyStream(tenant), "retention policy")
	if err != nil {
		return nil, err
	}
	set, ok := e.(domain.RetentionPolicySet)
	if !ok {
		return nil, fmt.Errorf("retention policy stream of %s holds %s", tenant, e.EventType())
	}
	return domain.ParseRetentionPolicy(set.Policy)
}

// ArchiveDeadline is the retention deadline an archive at now records under policy (nil: none):
// the earliest of its class's rules as if archived now, never before now.
func ArchiveDeadline(policy *domain.RetentionPolicy, q *domain.Inquiry, now time.Time) (time.Time, string) {
	if policy == nil {
		return time.Time{}, ""
	}
	f := domain.FactsOf(q)
	f.ArchivedAt = now
	due, class := policy.DueAt(f)
	if !due.IsZero() && due.Before(now) {
		due = now
	}
	return due, class
}

// RetentionOutcome is what the policy job did with one inquiry.
type RetentionOutcome string

// The outcomes of RetentionErase.
const (
	RetentionErased   RetentionOutcome = "erased"
	RetentionHeld     RetentionOutcome = "held"    // due, but under legal hold: skipped
	RetentionNotDue   RetentionOutcome = "not_due" // the current state and policy do not make it due
	RetentionAlready  RetentionOutcome = "already" // erased before; its key destroyed again
	retentionKeyOfCmd                  = "retention:"
)

// RetentionErase is the policy job's erasure of one inquiry, decided on the canonical state (not
// the index that proposed it) under the tenant's current policy at Now.
type RetentionErase struct {
	Tenant        domain.TenantID
	InquiryID     domain.InquiryID
	Policy        *domain.RetentionPolicy
	CorrelationID string
}

// RetentionErase executes c as domain.RetentionActor. A due inquiry is erased with the policy
// "retention:<class>" in its tombstone; a held one is left alone (RetentionHeld); erasing is
// idempotent (the idempotency key names the inquiry) and, like Erase, destroys the data key after
// the tombstone, again on every later call, so a crash between the two is completed next time.
func (h *Handler) RetentionErase(ctx context.Context, c RetentionErase) (RetentionOutcome, Result, error) {
	if h.Keys == nil {
		return "", Result{}, ErrNoKeyStore
	}
	if c.Policy == nil {
		return RetentionNotDue, Result{}, nil
	}
	now := h.Now().UTC()
	outcome := RetentionNotDue
	t := Target{Tenant: c.Tenant, InquiryID: c.InquiryID, Actor: domain.RetentionActor(c.Tenant),
		IdempotencyKey: retentionKeyOfCmd + string(c.InquiryID), CorrelationID: c.CorrelationID}
	res, err := h.execute(ctx, t, fingerprint("retention_erase"), func(q *domain.Inquiry) ([]domain.Event, error) {
		if !q.Exists() {
			return nil, fmt.Errorf("inquiry: %w", domain.ErrNotFound)
		}
		if q.Erased {
			outcome = RetentionAlready
			return nil, nil
		}
		due, class := c.Policy.DueAt(domain.FactsOf(q))
		if due.IsZero() || due.After(now) {
			outcome = RetentionNotDue
			return nil, nil
		}
		if q.Held {
			outcome = RetentionHeld
			return nil, nil
		}
		outcome = RetentionErased
		return q.Erase(t.Actor, "retention:"+class)
	})
	if err != nil {
		return "", Result{}, err
	}
	if res.Replayed {
		outcome = RetentionAlready
	}
	if outcome == RetentionErased || outcome == RetentionAlready {
		if err := h.Keys.Destroy(ctx, c.Tenant, c.InquiryID); err != nil {
			return "", Result{}, fmt.Errorf("retention erase %s: the tombstone is recorded but the key is not destroyed yet (the next sweep retries): %w", c.InquiryID, err)
		}
	}
	return outcome, res, nil
}

// SetRetentionPolicy executes and records c.
func (a *Audited) SetRetentionPolicy(ctx context.Context, c SetRetentionPolicy) (*domain.RetentionPolicy, eventstore.Position, error) {
	p, pos, err := a.Next.SetRetentionPolicy(ctx, c)
	a.record(ctx, AuditEntry{RequestID: c.CorrelationID, Tenant: c.Tenant, Actor: c.Actor.ID, Command: "retention_policy"}, false, err)
	return p, pos, err
}

// RetentionErase executes c and records an erasure (command "retention_erase"); a held, not-due
// or already-erased inquiry is no command and is not recorded.
func (a *Audited) RetentionErase(ctx context.Context, c RetentionErase) (RetentionOutcome, Result, error) {
	out, res, err := a.Next.RetentionErase(ctx, c)
	if err != nil || out == RetentionErased {
		a.record(ctx, AuditEntry{RequestID: c.CorrelationID, Tenant: c.Tenant, Actor: domain.RetentionActor(c.Tenant).ID,
			Command: "retention_erase", InquiryID: c.InquiryID}, false, err)
	}
	return out, res, err
}
