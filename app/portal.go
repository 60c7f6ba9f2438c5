package app

import (
	"context"

	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/projections/portal"
)

// wirePortal adds the portal index subscriber (authenticated intake by submitter).
func (a *App) wirePortal(ctx context.Context) error {
	r := &projections.Runner{Store: a.Store, DB: a.projDB, Projection: &portal.Projection{}, Logger: a.Config.Logger, Now: a.Config.Now,
		Owner: a.owner, LeaseTTL: a.Config.LeaseTTL}
	if err := r.Setup(ctx); err != nil {
		return err
	}
	a.Runners = append(a.Runners, r)
	a.portalIndex = r
	return nil
}

// portalAPI serves the portal reads: the index, and views folded from each inquiry's stream.
type portalAPI struct{ a *App }

func (p portalAPI) Find(ctx context.Context, tenant domain.TenantID, submitter domain.PrincipalID, receipt, externalID string, limit int) ([]domain.InquiryID, error) {
	return portal.Find(ctx, p.a.DB, tenant, submitter, receipt, externalID, limit)
}

func (p portalAPI) View(ctx context.Context, submitter domain.Principal, id domain.InquiryID) (commands.RequesterView, error) {
	set, err := p.a.Tenancy.PortalView(ctx, submitter.TenantID)
	if err != nil {
		return commands.RequesterView{}, err
	}
	v, err := p.a.Commands.RequesterView(ctx, submitter, id, commands.RequesterFields{Priority: set.ShowPriority, Team: set.ShowTeam})
	if err != nil || p.a.Attachments == nil {
		return v, err
	}
	sent, err := p.a.Attachments.ListAddedBy(ctx, submitter.TenantID, id, submitter.ID)
	if err != nil {
		return commands.RequesterView{}, err
	}
	for _, at := range sent {
		v.Attachments = append(v.Attachments, commands.RequesterAttachment{Name: at.Name, ContentType: at.ContentType, Size: at.Size, CreatedAt: at.CreatedAt})
	}
	return v, nil
}

func (p portalAPI) WaitFor(ctx context.Context, pos eventstore.Position) error {
	return p.a.portalIndex.WaitFor(ctx, pos)
}
