package app

import (
	"context"
	"errors"
	"time"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/projections/privacy"
)

// The retention policy job is a periodic sweep under a fenced lease, not a due job per inquiry:
// eligibility depends on the tenant's *current* policy, so a policy change applies to every
// archived or closed inquiry at the next sweep without rescheduling anything. The privacy index
// (archived_at, closed_at per inquiry) narrows the search to what the policy's shortest rules can
// make due; each candidate is then decided on its canonical state (commands.RetentionErase), which
// also honours a legal hold placed since the index saw it.

// DefaultRetentionTick is how often Serve runs the retention sweep.
const DefaultRetentionTick = 5 * time.Minute

// RecoverErasuresFor is how far back the sweep looks for erasures whose tombstone is recorded but
// whose data key or attachment rows survived (a crash between the steps), to shred them.
const RecoverErasuresFor = 7 * 24 * time.Hour

const retentionPage = 500

// RetentionItem names one inquiry in a sweep's report.
type RetentionItem struct {
	Tenant  domain.TenantID  `json:"tenant_id"`
	Inquiry domain.InquiryID `json:"inquiry_id"`
	Error   string           `json:"error,omitempty"`
}

// RetentionReport is what one sweep did.
type RetentionReport struct {
	// Erased by the policy; Held were due but are under legal hold (skipped); Failed hit an error
	// and are retried by the next sweep.
	Erased []RetentionItem `json:"erased"`
	Held   []RetentionItem `json:"held"`
	Failed []RetentionItem `json:"failed"`
	// KeysDestroyed counts erasures completed: tombstone recorded earlier, data key destroyed now.
	KeysDestroyed int `json:"keys_destroyed"`
	// NotLeader is set when another replica holds the sweep's lease (this one did nothing).
	NotLeader bool `json:"not_leader,omitempty"`
	// DryRun: nothing was erased; Due lists what would have been, at At.
	DryRun bool            `json:"dry_run,omitempty"`
	At     time.Time       `json:"at"`
	Due    []RetentionItem `json:"due,omitempty"`
}

// RetentionOptions adjust one sweep.
type RetentionOptions struct {
	// DryRun erases nothing and reports what is due; At (only with DryRun; zero: now) asks what
	// would be due then, to preview a policy.
	DryRun bool
	At     time.Time
}

// wirePrivacy adds the privacy subscriber: the requester blind index and the retention index.
func (a *App) wirePrivacy(ctx context.Context) error {
	a.scrub = newErasureScrub()
	r := &projections.Runner{Store: a.Store, DB: a.projDB, Projection: &privacy.Projection{Index: a.Keys.BlindIndex, Erased: a.scrub.request},
		Logger: a.Config.Logger, Now: a.Config.Now, Owner: a.owner, LeaseTTL: a.Config.LeaseTTL}
	if err := r.Setup(ctx); err != nil {
		return err
	}
	a.Runners = append(a.Runners, r)
	a.privacyIndex = r
	ttl := a.Config.LeaseTTL
	if ttl <= 0 {
		ttl = projections.DefaultLeaseTTL
	}
	// A random owner per process, also in embedded mode: a command sweeping beside the server
	// (casebook retention sweep) must not share the server's lease.
	a.retentionLease = projections.NewLease(a.DB, "job:retention", "", ttl, a.Config.Now)
	return nil
}

// PrivacyIndex returns the privacy subscriber (blind index and retention index).
func (a *App) PrivacyIndex() *projections.Runner { return a.privacyIndex }

// RetentionSweep runs the retention policy once: for every tenant with a policy, it erases (as
// system:retention, the policy "retention:<class>" in the tombstone) each inquiry the policy makes
// due, skips and reports the held ones, and completes interrupted erasures. It reads the privacy
// index as far as it has caught up; what it has not seen yet waits for the next sweep. Running it
// twice, or on two replicas, is harmless: the lease keeps replicas apart and every step is
// idempotent.
func (a *App) RetentionSweep(ctx context.Context, opts RetentionOptions) (RetentionReport, error) {
	now := a.Config.Now().UTC()
	if !opts.At.IsZero() {
		if !opts.DryRun {
			return RetentionReport{}, domain.Invalid("at", "is for a dry run only: the policy erases at the present time")
		}
		now = opts.At.UTC()
	}
	rep := RetentionReport{DryRun: opts.DryRun, At: now}
	if !opts.DryRun {
		held, err := a.retentionLease.Acquire(ctx)
		if err != nil {
			return rep, err
		}
		if !held {
			rep.NotLeader = true
			return rep, nil
		}
		// The lease guards one sweep; the next may run on any replica.
		defer a.retentionLease.Release(context.WithoutCancel(ctx))
		if err := a.completeErasures(ctx, now, &rep); err != nil {
			return rep, err
		}
	}
	if err := a.sweepPolicies(ctx, now, opts.DryRun, &rep); err != nil {
		return rep, err
	}
	return rep, nil
}

// completeErasures destroys the data keys, and deletes the attachment rows, that erasures recorded
// lately left behind.
func (a *App) completeErasures(ctx context.Context, now time.Time, rep *RetentionReport) error {
	erased, err := privacy.ErasedSince(ctx, a.DB, now.Add(-RecoverErasuresFor), 10000)
	if err != nil {
		return err
	}
	for _, c := range erased {
		dk, err := a.Keys.Get(ctx, c.Tenant, c.Inquiry)
		alive := err == nil && dk != nil // else destroyed (ErrErased), never had one, or unreadable
		left, err := a.Attachments.Stored(ctx, c.Tenant, c.Inquiry)
		if err != nil {
			rep.Failed = append(rep.Failed, RetentionItem{c.Tenant, c.Inquiry, err.Error()})
			continue
		}
		if !alive && left == 0 {
			continue
		}
		// Every shredder of the erasure (the key, then the attachment rows), as Erase runs them: a
		// crash may have come between any two of them.
		if err := a.Commands.Keys.Destroy(ctx, c.Tenant, c.Inquiry); err != nil {
			rep.Failed = append(rep.Failed, RetentionItem{c.Tenant, c.Inquiry, err.Error()})
			continue
		}
		if alive {
			rep.KeysDestroyed++
		}
	}
	return nil
}

// sweepPolicies applies every tenant's current policy at now.
func (a *App) sweepPolicies(ctx context.Context, now time.Time, dryRun bool, rep *RetentionReport) error {
	tenants, err := privacy.Tenants(ctx, a.DB)
	if err != nil {
		return err
	}
	exec := a.audited()
	for _, t := range tenants {
		policy, err := a.Commands.RetentionPolicy(ctx, t)
		if errors.Is(err, domain.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		var archivedBy, closedBy time.Time
		if d, c := policy.Shortest(); d > 0 || c > 0 {
			if d > 0 {
				archivedBy = now.Add(-d)
			}
			if c > 0 {
				closedBy = now.Add(-c)
			}
		}
		var after domain.InquiryID
		for {
			page, err := privacy.Candidates(ctx, a.DB, t, archivedBy, closedBy, after, retentionPage)
			if err != nil {
				return err
			}
			for _, c := range page {
				after = c.Inquiry
				if due, _ := policy.DueAt(c.RetentionFacts); due.IsZero() || due.After(now) {
					continue
				}
				if c.Held {
					rep.Held = append(rep.Held, RetentionItem{Tenant: t, Inquiry: c.Inquiry})
					continue
				}
				if dryRun {
					rep.Due = append(rep.Due, RetentionItem{Tenant: t, Inquiry: c.Inquiry})
					continue
				}
				if ok, err := a.retentionLease.Acquire(ctx); err != nil || !ok {
					return errors.Join(errors.New("retention sweep: lease lost, stopping"), err)
				}
				out, _, err := exec.RetentionErase(ctx, commands.RetentionErase{Tenant: t, InquiryID: c.Inquiry, Policy: policy, CorrelationID: "retention"})
				switch {
				case err != nil:
					rep.Failed = append(rep.Failed, RetentionItem{t, c.Inquiry, commands.ErrorCode(err)})
				case out == commands.RetentionErased:
					rep.Erased = append(rep.Erased, RetentionItem{Tenant: t, Inquiry: c.Inquiry})
				case out == commands.RetentionHeld:
					rep.Held = append(rep.Held, RetentionItem{Tenant: t, Inquiry: c.Inquiry})
				}
			}
			if len(page) < retentionPage {
				break
			}
		}
	}
	return nil
}

// runRetention runs the sweep every Config.RetentionTick until ctx ends (negative: never).
func (a *App) runRetention(ctx context.Context) {
	tick := a.Config.RetentionTick
	if tick < 0 {
		return
	}
	if tick == 0 {
		tick = DefaultRetentionTick
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rep, err := a.RetentionSweep(ctx, RetentionOptions{})
		if err != nil && ctx.Err() == nil {
			a.Config.Logger.Warn("retention sweep", "err", err)
		}
		if len(rep.Erased)+len(rep.Held)+len(rep.Failed)+rep.KeysDestroyed > 0 {
			// Ids only: the report holds no personal field.
			a.Config.Logger.Info("retention sweep", "erased", len(rep.Erased), "held", len(rep.Held), "failed", len(rep.Failed),
				"keys_destroyed", rep.KeysDestroyed, "held_inquiries", rep.Held, "failed_inquiries", rep.Failed)
		}
	}
}
