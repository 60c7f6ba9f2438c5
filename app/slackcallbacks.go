package app

import (
	"context"

	"github.com/casebook/casebook/adapters/slack/callbacks"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/domain"
)

// wireCallbacks builds the Slack callback handler: signed requests become audited commands.
// Its worker pool is drained when the app closes.
func (a *App) wireCallbacks(ctx context.Context) error {
	seen, err := callbacks.NewSeen(ctx, a.DB, a.Config.Now)
	if err != nil {
		return err
	}
	a.Callbacks = &callbacks.Handler{
		Store: a.Slack, Threads: a.Threads, Guard: a.Effects.Guard, Principals: a.Tenancy, Commands: a.audited(), Audit: a.Audit, Load: a.Commands.Load, History: a.Reader, Seen: seen, Policy: a.Commands.SLAPolicy,
		Now: a.Config.Now, Logger: a.Config.Logger, ResponseURLPrefix: a.Config.SlackResponseURLPrefix,
	}
	a.Callbacks.Refresh = func(ctx context.Context, tenant domain.TenantID, id domain.InquiryID, version uint64) error {
		return a.Effects.Insert(ctx, threads.SyncArgs{Tenant: tenant, Inquiry: id, Version: version})
	}
	a.closers = append(a.closers, a.Callbacks.Close)
	return nil
}
