package tenancy

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// portalViewMigrations add each tenant's requester-view setting, a migration component of its own.
var portalViewMigrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS tenant_portal_view (
	tenant_id     TEXT    PRIMARY KEY REFERENCES tenants (id),
	show_priority BOOLEAN NOT NULL DEFAULT FALSE,
	show_team     BOOLEAN NOT NULL DEFAULT FALSE
)`}}

// PortalView is which internal fields a tenant lets its requesters see through the portal reads
// (GET /v1/portal/…). The zero value, every tenant's default, shows none of them.
type PortalView struct {
	ShowPriority bool `json:"show_priority"`
	ShowTeam     bool `json:"show_team"`
}

// PortalView returns the tenant's setting; a tenant that never set one shows nothing internal.
func (s *Store) PortalView(ctx context.Context, tenant domain.TenantID) (PortalView, error) {
	var v PortalView
	err := s.db.QueryRowContext(ctx, s.db.Rebind(`SELECT show_priority, show_team FROM tenant_portal_view WHERE tenant_id = ?`), tenant).
		Scan(&v.ShowPriority, &v.ShowTeam)
	if errors.Is(err, sql.ErrNoRows) {
		return PortalView{}, nil
	}
	if err != nil {
		return PortalView{}, fmt.Errorf("portal view: %w", err)
	}
	return v, nil
}

// SetPortalView replaces the setting of the tenant with slug (an unknown slug is domain.ErrNotFound).
func (s *Store) SetPortalView(ctx context.Context, slug string, v PortalView) (PortalView, error) {
	t, err := s.TenantBySlug(ctx, slug)
	if err != nil {
		return PortalView{}, err
	}
	if _, err := s.db.ExecContext(ctx, s.db.Rebind(`INSERT INTO tenant_portal_view (tenant_id, show_priority, show_team) VALUES (?, ?, ?)
		ON CONFLICT (tenant_id) DO UPDATE SET show_priority = excluded.show_priority, show_team = excluded.show_team`),
		t.ID, v.ShowPriority, v.ShowTeam); err != nil {
		return PortalView{}, fmt.Errorf("set portal view: %w", err)
	}
	return v, nil
}
