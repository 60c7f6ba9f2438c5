package commands

import (
	"context"
	"errors"
	"fmt"

	"github.com/casebook/casebook/domain"
)

// Shredder destroys an inquiry's data key (eventstore/sealed.Keys): what the log holds of the
// person becomes unreadable. Destroying twice is harmless.
type Shredder interface {
	Destroy(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) error
}

// ShredFunc is a Shredder written as a function.
type ShredFunc func(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) error

// Destroy implements Shredder.
func (f ShredFunc) Destroy(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) error {
	return f(ctx, tenant, id)
}

// Shredders destroys with each in turn (the data keys first, then what was sealed with them);
// the first error stops it, and an erasure retried completes the rest.
type Shredders []Shredder

// Destroy implements Shredder.
func (s Shredders) Destroy(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) error {
	for _, sh := range s {
		if err := sh.Destroy(ctx, tenant, id); err != nil {
			return err
		}
	}
	return nil
}

// Archive takes an inquiry out of the working set (operators and admins; If-Match required over
// HTTP). Its retention deadline comes from the tenant's retention policy (none without one).
type Archive struct {
	Target
	Reason string
}

// Archive executes c.
func (h *Handler) Archive(ctx context.Context, c Archive) (Result, error) {
	c.Reason = Normalize(c.Reason, false)
	now := h.Now().UTC()
	policy, err := h.RetentionPolicy(ctx, c.Tenant)
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		return Result{}, err
	}
	return h.execute(ctx, c.Target, fingerprint("archive", c.Reason), func(q *domain.Inquiry) ([]domain.Event, error) {
		until, class := ArchiveDeadline(policy, q, now)
		return q.Archive(c.Actor, c.Reason, until, now, class)
	})
}

// Unarchive brings an archived inquiry back.
type Unarchive struct {
	Target
	Reason string
}

// Unarchive executes c.
func (h *Handler) Unarchive(ctx context.Context, c Unarchive) (Result, error) {
	c.Reason = Normalize(c.Reason, false)
	return h.execute(ctx, c.Target, fingerprint("unarchive", c.Reason), func(q *domain.Inquiry) ([]domain.Event, error) {
		return q.Unarchive(c.Actor, c.Reason)
	})
}

// Hold places (Release false) or releases a legal hold (admin).
type Hold struct {
	Target
	Release bool
	Reason  string
}

// Hold executes c.
func (h *Handler) Hold(ctx context.Context, c Hold) (Result, error) {
	c.Reason = Normalize(c.Reason, false)
	return h.execute(ctx, c.Target, fingerprint("hold", c.Release, c.Reason), func(q *domain.Inquiry) ([]domain.Event, error) {
		if c.Release {
			return q.ReleaseHold(c.Actor, c.Reason)
		}
		return q.PlaceHold(c.Actor, c.Reason)
	})
}

// Erase erases an inquiry (admin, or the retention job): it appends the tombstone InquiryErased at
// the version decided on (so an erasure and a legal hold placed meanwhile cannot both win), then
// destroys the data key. Erasing an erased inquiry appends nothing and destroys the key again, which
// also completes an erasure interrupted between the two steps.
type Erase struct {
	Target
	// Policy names why: "request" (an admin) or "retention:<class>" (the policy job).
	Policy string
}

// ErrNoKeyStore: erasure needs the key table (Handler.Keys).
var ErrNoKeyStore = errors.New("commands: erasure needs a key store")

// Erase executes c.
func (h *Handler) Erase(ctx context.Context, c Erase) (Result, error) {
	if h.Keys == nil {
		return Result{}, ErrNoKeyStore
	}
	if c.Policy == "" {
		c.Policy = "request"
	}
	res, err := h.execute(ctx, c.Target, fingerprint("erase", c.Policy), func(q *domain.Inquiry) ([]domain.Event, error) {
		return q.Erase(c.Actor, c.Policy)
	})
	if err != nil {
		return res, err
	}
	if err := h.Keys.Destroy(ctx, c.Tenant, c.InquiryID); err != nil {
		return Result{}, fmt.Errorf("erase %s: the tombstone is recorded but the key is not destroyed yet (retry the erasure): %w", c.InquiryID, err)
	}
	return res, nil
}
