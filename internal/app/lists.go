package app

import (
	"context"

	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/projections"
)

// wireLists adds the Slack List projection (package lists): its River client and the listintents
// and listrowmap subscribers. Every List starts disabled: no job, no Slack I/O.
func (a *App) wireLists(ctx context.Context, secret []byte) error {
	svc, err := lists.NewService(ctx, a.DB, a.Store, secret, a.Config.Now, a.Commands.Load, a.Config.Logger, a.Config.SlackPollInterval)
	if err != nil {
		return err
	}
	for _, p := range svc.Projections {
		r := &projections.Runner{Store: a.Store, DB: a.projDB, Projection: p, Logger: a.Config.Logger, Now: a.Config.Now, Owner: a.owner, LeaseTTL: a.Config.LeaseTTL}
		if err := r.Setup(ctx); err != nil {
			return err
		}
		a.Runners = append(a.Runners, r)
	}
	a.Lists = svc
	return nil
}
