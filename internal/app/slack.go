package app

import (
	"context"

	"github.com/riverqueue/river/rivertype"

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/adapters/slack/slackproj"
	"github.com/casebook/casebook/domain"
)

// slackAPI adapts the Slack projection to the HTTP API.
type slackAPI struct{ a *App }

var _ httpapi.Slack = slackAPI{}

func (s slackAPI) ListEffects(ctx context.Context, tenant domain.TenantID, states []string) (any, error) {
	st := make([]rivertype.JobState, 0, len(states))
	for _, v := range states {
		st = append(st, rivertype.JobState(v))
	}
	return s.a.Effects.List(ctx, tenant, st, 100)
}

func (s slackAPI) RetryEffect(ctx context.Context, tenant domain.TenantID, id int64) (any, error) {
	return s.a.Effects.Retry(ctx, tenant, id)
}

func (s slackAPI) CancelEffect(ctx context.Context, tenant domain.TenantID, id int64) (any, error) {
	return s.a.Effects.Cancel(ctx, tenant, id)
}

func (s slackAPI) SlackHealth(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (any, error) {
	return s.a.Slack.Health(ctx, tenant, id)
}

// slackOAuth adapts the OAuth install flow to the HTTP API.
type slackOAuth struct{ o *slackproj.OAuth }

var _ httpapi.SlackOAuth = slackOAuth{}

func (s slackOAuth) Enabled() bool { return s.o.Config.Enabled() }

func (s slackOAuth) Start(ctx context.Context, tenant domain.TenantID) (string, error) {
	return s.o.Start(ctx, tenant)
}

func (s slackOAuth) Callback(ctx context.Context, code, state string) error {
	_, err := s.o.Callback(ctx, code, state)
	return err
}
