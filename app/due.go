package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/duejobs"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/projections/schedules"
	"github.com/casebook/casebook/tenancy"
)

// DefaultDueTick is how often an idle ticker looks for due jobs.
const DefaultDueTick = time.Second

// wireDue adds the clock: the due-job store, the schedules subscriber and the ticker (started by
// Serve). Every replica runs a ticker; claims keep them from running one job twice.
func (a *App) wireDue(ctx context.Context) error {
	st, err := duejobs.NewStore(ctx, a.DB, a.Config.Now)
	if err != nil {
		return err
	}
	a.DueJobs = st
	r := &projections.Runner{Store: a.Store, DB: a.projDB, Projection: schedules.New(), Logger: a.Config.Logger, Now: a.Config.Now,
		Owner: a.owner, LeaseTTL: a.Config.LeaseTTL}
	if err := r.Setup(ctx); err != nil {
		return err
	}
	a.Runners = append(a.Runners, r)
	host, _ := os.Hostname()
	a.Ticker = &duejobs.Ticker{Store: st, Fire: a.fireDue, Owner: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), tenancy.NewID()[:8]),
		Logger: a.Config.Logger, OnTick: a.dueMetrics.observe, ClaimTTL: a.Config.DueClaimTTL}
	return nil
}

// fireDue runs one claimed job: it re-reads the inquiry, then appends the job's event conditionally
// on the version it read (commands.FireDue decides; the recipients' authorization is re-read
// there). A concurrent change (a resolution while the job runs) fails the condition and the job
// decides again on the new state, where its reason has usually gone. Each lost race means another
// writer's append landed, so the retries are bounded by the stream's writers, not by time; after
// fireDueRaces of them the job fails as retryable and backs off.
func (a *App) fireDue(ctx context.Context, j duejobs.Job) (string, error) {
	for range fireDueRaces {
		q, err := a.Commands.Load(ctx, j.Tenant, j.Inquiry)
		if errors.Is(err, domain.ErrNotFound) {
			return "", duejobs.Permanent(err)
		}
		if err != nil {
			return "", err
		}
		if a.dueDecided != nil {
			a.dueDecided(j)
		}
		v := q.Version
		res, err := a.Commands.FireDue(ctx, commands.FireDue{
			Target: commands.Target{Tenant: j.Tenant, InquiryID: j.Inquiry, IfVersion: &v, CorrelationID: "due:" + j.ID},
			Job:    j.DueJob(),
		})
		if errors.Is(err, domain.ErrConcurrency) {
			continue
		}
		if err != nil {
			return "", err
		}
		if res.Fired {
			return duejobs.OutcomeFired, nil
		}
		return duejobs.OutcomeMovedOn, nil
	}
	return "", fmt.Errorf("inquiry %s kept changing: %w", j.Inquiry, domain.ErrConcurrency)
}

// fireDueRaces bounds how often one firing re-decides after losing the expected-revision race.
const fireDueRaces = 16

// Schedules returns the schedules runner.
func (a *App) Schedules() *projections.Runner {
	for _, r := range a.Runners {
		if r.Projection.Name() == schedules.Name {
			return r
		}
	}
	return nil
}

// dueAPI serves the HTTP API's due-job and SLA-policy reads and reviews.
type dueAPI struct{ a *App }

func (d dueAPI) DueJobs(ctx context.Context, tenant domain.TenantID, f duejobs.ListFilter) ([]duejobs.Job, error) {
	return d.a.DueJobs.List(ctx, tenant, f)
}

func (d dueAPI) DueJob(ctx context.Context, tenant domain.TenantID, id string) (duejobs.Job, []duejobs.HistoryEntry, error) {
	j, err := d.a.DueJobs.Get(ctx, tenant, id)
	if err != nil {
		return duejobs.Job{}, nil, err
	}
	h, err := d.a.DueJobs.History(ctx, tenant, id)
	return j, h, err
}

func (d dueAPI) ReviewDueJob(ctx context.Context, r duejobs.Review) (duejobs.Job, error) {
	return d.a.DueJobs.Review(ctx, r)
}

func (d dueAPI) SLAPolicy(ctx context.Context, tenant domain.TenantID) (*domain.SLAPolicy, error) {
	return d.a.Commands.SLAPolicy(ctx, tenant)
}
