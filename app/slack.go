package app

import (
	"context"

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/domain"
)

// slackAPI adapts the Slack projection to the HTTP API.
type slackAPI struct{ a *App }

var _ httpapi.Slack = slackAPI{}

func (s slackAPI) ListEffects(ctx context.Context, tenant domain.TenantID, f httpapi.EffectFilter) (any, error) {
	return s.a.Effects.Effects(ctx, tenant, slackeffects.Filter{States: f.States, Kinds: f.Kinds, Inquiry: f.Inquiry})
}

func (s slackAPI) RetryEffect(ctx context.Context, tenant domain.TenantID, id int64) (any, error) {
	return s.a.Effects.Retry(ctx, tenant, id)
}

func (s slackAPI) CancelEffect(ctx context.Context, tenant domain.TenantID, id int64) (any, error) {
	return s.a.Effects.Cancel(ctx, tenant, id)
}

func (s slackAPI) SlackHealth(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (any, error) {
	return s.a.Threads.Health(ctx, tenant, id)
}

// slackOAuth adapts the OAuth install flow to the HTTP API.
type slackOAuth struct{ o *slackinstall.OAuth }

var _ httpapi.SlackOAuth = slackOAuth{}

func (s slackOAuth) Enabled() bool { return s.o.Config.Enabled() }

func (s slackOAuth) Start(ctx context.Context, tenant domain.TenantID) (string, error) {
	return s.o.Start(ctx, tenant)
}

func (s slackOAuth) Callback(ctx context.Context, code, state string) error {
	_, err := s.o.Callback(ctx, code, state)
	return err
}
