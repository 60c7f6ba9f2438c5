package app

import (
	"context"

	"github.com/casebook/casebook/adapters/httpapi"
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

// slackEscalation serves the tenant's escalation destination to the admin API; the acting
// principal is recorded with every change.
type slackEscalation struct{ a *App }

var _ httpapi.SlackEscalation = slackEscalation{}

// escalationView is the escalation destination as the API shows it.
type escalationView struct {
	Channel        string `json:"channel"`
	Clearance      string `json:"clearance"`
	InstallationID string `json:"installation_id"`
	Checked        string `json:"checked,omitempty"` // set only by a change: what Slack said of the channel
}

func (s slackEscalation) EscalationDestination(ctx context.Context, tenant domain.TenantID) (any, error) {
	d, err := s.a.Slack.EscalationDestination(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return escalationView{Channel: d.Channel, Clearance: d.ClearanceStr, InstallationID: d.Installation.ID}, nil
}

func (s slackEscalation) SetEscalationDestination(ctx context.Context, actor domain.Principal, channel, clearance string) (any, error) {
	if err := domain.Authorize(actor, domain.ActAdminister); err != nil {
		return nil, err
	}
	d, err := s.a.Slack.SetEscalationDestination(ctx, slackinstall.EscalationRequest{Tenant: actor.TenantID, Channel: channel,
		Clearance: clearance, By: string(actor.ID)})
	if err != nil {
		return nil, err
	}
	return escalationView{d.Channel, d.ClearanceStr, d.Installation.ID, d.Checked}, nil
}

func (s slackEscalation) ClearEscalationDestination(ctx context.Context, actor domain.Principal) error {
	if err := domain.Authorize(actor, domain.ActAdminister); err != nil {
		return err
	}
	_, err := s.a.Slack.SetEscalationDestination(ctx, slackinstall.EscalationRequest{Tenant: actor.TenantID, By: string(actor.ID), Clear: true})
	return err
}
