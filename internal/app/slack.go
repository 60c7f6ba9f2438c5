package app

import (
	"context"

	"github.com/riverqueue/river/rivertype"

	"github.com/casebook/casebook/adapters/httpapi"
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
