package console

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/duejobs"
	"github.com/casebook/casebook/queries"
)

// Due is what the console needs of the due jobs, always within one tenant.
type Due interface {
	DueJobs(ctx context.Context, tenant domain.TenantID, f duejobs.ListFilter) ([]duejobs.Job, error)
	ReviewDueJob(ctx context.Context, r duejobs.Review) (duejobs.Job, error)
}

// dueView is the inquiry page's clock: due date, follow-ups, SLA targets, watchers, pending jobs.
type dueView struct {
	Clock    queries.Clock
	Watchers []string
	Jobs     []duejobs.Job
}

// followUpIn are the follow-up delays the form offers.
var followUpIn = []struct{ Value, Label string }{
	{"1h", "in 1 hour"}, {"4h", "in 4 hours"}, {"24h", "tomorrow (24 h)"}, {"72h", "in 3 days"}, {"168h", "in a week"},
}

func (c *Console) dueData(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, names map[domain.PrincipalID]string) *dueView {
	if c.Due == nil {
		return nil
	}
	v := &dueView{}
	clock, err := c.Reader.Clock(ctx, tenant, id)
	if err != nil {
		c.Logger.WarnContext(ctx, "console clock", "err", err)
	}
	v.Clock = clock
	for _, w := range clock.Watchers {
		if n, ok := names[w]; ok {
			v.Watchers = append(v.Watchers, n)
		}
	}
	for _, st := range []duejobs.State{duejobs.StatePending, duejobs.StateClaimed, duejobs.StateDead} {
		jobs, err := c.Due.DueJobs(ctx, tenant, duejobs.ListFilter{Inquiry: id, State: st})
		if err != nil {
			c.Logger.WarnContext(ctx, "console due jobs", "err", err)
			break
		}
		v.Jobs = append(v.Jobs, jobs...)
	}
	return v
}

// dueAction runs the due-date, follow-up, watcher and routing forms; ok is false for another
// action.
func (c *Console) dueAction(r *http.Request, action string, t commands.Target) (commands.Result, bool, error) {
	ctx := r.Context()
	switch action {
	case "follow-up":
		cmd := commands.ScheduleFollowUp{Target: t, Note: r.PostForm.Get("note")}
		in, err := time.ParseDuration(formValue(r, "in"))
		if err != nil || in <= 0 {
			return commands.Result{}, true, domain.Invalid("in", "choose when to be reminded")
		}
		cmd.In = in
		res, err := c.Commands.ScheduleFollowUp(ctx, cmd)
		return res.Result, true, err
	case "cancel-follow-up":
		res, err := c.Commands.CancelFollowUp(ctx, commands.CancelFollowUp{Target: t, JobID: formValue(r, "job_id")})
		return res, true, err
	case "due":
		cmd := commands.SetDueDate{Target: t}
		if d := formValue(r, "due_date"); d != "" {
			hm := formValue(r, "due_time")
			if hm == "" {
				hm = "17:00"
			}
			at, err := time.Parse("2006-01-02 15:04", d+" "+hm)
			if err != nil {
				return commands.Result{}, true, domain.Invalid("due_date", "must be a date and a time (UTC)")
			}
			cmd.DueAt = at
		}
		res, err := c.Commands.SetDueDate(ctx, cmd)
		return res, true, err
	case "watchers":
		res, err := c.Commands.AddWatcher(ctx, commands.AddWatcher{Target: t, Principal: domain.PrincipalID(formValue(r, "principal"))})
		return res, true, err
	case "team":
		res, err := c.Commands.Route(ctx, commands.Route{Target: t, Team: strings.TrimSpace(formValue(r, "team"))})
		return res, true, err
	}
	return commands.Result{}, false, nil
}

// reviewDue is the admin's reviewed recovery of a due job (retry, cancel, resolve).
func (c *Console) reviewDue(ctx context.Context, s *session, op, id, reason string) error {
	if c.Due == nil {
		return domain.ErrNotFound
	}
	_, err := c.Due.ReviewDueJob(ctx, duejobs.Review{Tenant: s.P.TenantID, JobID: id, Actor: s.P, Action: op, Reason: reason})
	return err
}
