package app

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/queries"
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

// SlackHealth reads only what has leaves open: without an effect outcome the thread's health
// follows from its row and the destination (threads.HealthWithoutOutcome), and a tenant without a
// List projection has no List rows.
func (s slackAPI) SlackHealth(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, has queries.SlackPresence) (any, error) {
	h := threads.HealthWithoutOutcome(has.Desired, has.Observed, has.Channel, has.Destination)
	if has.Outcome {
		var err error
		if h, err = s.a.Threads.Health(ctx, tenant, id); err != nil {
			return nil, err
		}
	}
	rows := []lists.RowHealth{}
	if has.Lists {
		var err error
		if rows, err = s.a.Lists.Store.RowHealth(ctx, s.a.Commands.Load, tenant, id); err != nil {
			return nil, err
		}
	}
	return slackBlock{Health: h, Lists: rows}, nil
}

// ListStatuses is GET /v1/admin/lists: every List projection of the tenant with its activation,
// schema health, cooldown, circuit, sync health, watermarks and last reconcile run.
func (s slackAPI) ListStatuses(ctx context.Context, tenant domain.TenantID) (any, error) {
	return s.a.Lists.Store.Statuses(ctx, tenant)
}

// slackOAuth adapts the OAuth install flow to the HTTP API; install links live under the public URL.
type slackOAuth struct {
	o         *slackinstall.OAuth
	publicURL string
}

var _ httpapi.SlackOAuth = slackOAuth{}

func (s slackOAuth) Enabled() bool { return s.o.Config.Enabled() }

func (s slackOAuth) InstallLink(ctx context.Context, tenant domain.TenantID, by string) (string, time.Time, error) {
	if s.publicURL == "" {
		return "", time.Time{}, domain.Invalid("public_url", "set CASEBOOK_PUBLIC_URL: install links are served under it")
	}
	l, err := s.o.NewInstallLink(ctx, tenant, s.publicURL, by)
	return l.URL, l.ExpiresAt, err
}

func (s slackOAuth) OpenLink(ctx context.Context, token, browserNonce string) (string, error) {
	return s.o.OpenInstallLink(ctx, token, browserNonce)
}

func (s slackOAuth) NewBrowserNonce() string { return slackinstall.NewBrowserNonce() }

func (s slackOAuth) Callback(ctx context.Context, code, state, browserNonce string) error {
	_, err := s.o.Callback(ctx, code, state, browserNonce)
	return err
}

func (s slackOAuth) SecureCookies() bool { return strings.HasPrefix(s.publicURL, "https://") }

// CallbackPath is the redirect URL's path (Casebook may be served under a prefix behind a proxy).
func (s slackOAuth) CallbackPath() string {
	if u, err := url.Parse(s.o.Config.RedirectURL); err == nil && strings.HasPrefix(u.Path, "/") {
		return u.Path
	}
	return "/slack/oauth/callback"
}
