package app

import (
	"context"

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/adapters/slack/threads"
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

// slackBlock is an inquiry detail's "slack" block: the thread's state, and its row in each List.
type slackBlock struct {
	threads.Health
	Lists []lists.RowHealth `json:"lists"`
}

func (s slackAPI) SlackHealth(ctx context.Context, tenant domain.TenantID, id domain.InquiryID) (any, error) {
	h, err := s.a.Threads.Health(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	rows, err := s.a.Lists.Store.RowHealth(ctx, s.a.Commands.Load, tenant, id)
	if err != nil {
		return nil, err
	}
	return slackBlock{Health: h, Lists: rows}, nil
}

// ListStatuses is GET /v1/admin/lists: every List projection of the tenant with its activation,
// schema health, cooldown, circuit, sync health, watermarks and last reconcile run.
func (s slackAPI) ListStatuses(ctx context.Context, tenant domain.TenantID) (any, error) {
	return s.a.Lists.Store.Statuses(ctx, tenant)
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
