package queries

import (
	"context"

	"github.com/casebook/casebook/domain"
)

// Principals finds a principal inside a tenant (*tenancy.Store).
type Principals interface {
	Principal(ctx context.Context, tenant domain.TenantID, id domain.PrincipalID) (domain.Principal, error)
}

// ChangedBy names who made an inquiry's latest change, for "changed by Bob — reload": the actor of
// the last timeline entry, only when that entry is at version (0: any) and the actor is a principal
// of the tenant — never the requester or an intake source. "" when it cannot say.
func (r *Reader) ChangedBy(ctx context.Context, ps Principals, tenant domain.TenantID, id domain.InquiryID, version uint64) string {
	tl, err := r.Timeline(ctx, tenant, id)
	if err != nil || len(tl) == 0 {
		return ""
	}
	last := tl[len(tl)-1]
	if (version != 0 && last.Version != version) || last.Actor == "" {
		return ""
	}
	p, err := ps.Principal(ctx, tenant, last.Actor)
	if err != nil || p.TenantID != tenant {
		return ""
	}
	return p.Name
}
