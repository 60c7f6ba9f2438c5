package app

import (
	"context"

	"github.com/casebook/casebook/adapters/slack/reminders"
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/projections"
)

// wireSlackDue registers the Slack side of due jobs (reminder replies and escalation posts) on
// the effect runtime, before it opens, and returns its intents subscriber. The reminder kind finds
// an inquiry's thread through the thread kind's log reader: the two are peers and meet here.
func (a *App) wireSlackDue(rt *slackeffects.Runtime, st *slackinstall.Store) ([]projections.Projection, error) {
	a.Reminders = &reminders.Service{Load: a.Commands.Load, Principals: a.Tenancy, LinkBase: a.Config.PublicURL,
		Roots: func(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (reminders.Root, error) {
			r, err := a.Threads.Root(ctx, tenant, id)
			return reminders.Root{Installation: r.Installation, Channel: r.Channel, TS: r.TS}, err
		}}
	if err := reminders.Register(rt, a.Reminders); err != nil {
		return nil, err
	}
	return []projections.Projection{&reminders.Intents{Effects: rt, Install: st}}, nil
}
