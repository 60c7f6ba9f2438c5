package tenancy

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/sqldb"
)

// migrationDisabled lets an admin disable a principal (and enable it again): a disabled principal
// keeps its history, its name and its tokens, but every credential of it is refused.
var migrationDisabled = sqldb.Migration{Version: 3, SQL: `
ALTER TABLE principals ADD COLUMN disabled_at BIGINT;
ALTER TABLE principals ADD COLUMN disabled_reason TEXT NOT NULL DEFAULT ''`}

// principalCols are the columns every principal read scans with scanPrincipal, prefixed by alias.
func principalCols(alias string) string {
	return strings.NewReplacer("@", alias).Replace(`@.id, @.tenant_id, @.name, @.role, @.team, @.disabled_at IS NOT NULL`)
}

// ErrLastAdmin refuses a change that would leave a tenant without an enabled admin: nobody could
// then administer it but the CLI. It is a domain.ErrConflict.
var ErrLastAdmin = fmt.Errorf("the tenant's last enabled admin cannot be disabled or demoted (make another principal admin first): %w", domain.ErrConflict)

// PrincipalInfo describes a principal for listing: never a token or its hash.
type PrincipalInfo struct {
	domain.Principal
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
}

// Tenants lists every tenant by slug.
func (s *Store) Tenants(ctx context.Context) ([]Tenant, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, slug FROM tenants ORDER BY slug`)
	if err != nil {
		return nil, fmt.Errorf("tenants: %w", err)
	}
	defer rows.Close()
	out := []Tenant{}
	for rows.Next() {
		var t Tenant
		if err := rows.Scan(&t.ID, &t.Slug); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// PrincipalInfos lists the principals of the tenant with slug by name, disabled ones included.
func (s *Store) PrincipalInfos(ctx context.Context, slug string) ([]PrincipalInfo, error) {
	t, err := s.TenantBySlug(ctx, slug)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.db.Rebind(`SELECT `+principalCols("p")+`, p.disabled_at, p.disabled_reason, p.created_at
		FROM principals p WHERE p.tenant_id = ? ORDER BY p.name, p.id`), t.ID)
	if err != nil {
		return nil, fmt.Errorf("principals: %w", err)
	}
	defer rows.Close()
	out := []PrincipalInfo{}
	for rows.Next() {
		var pi PrincipalInfo
		var at sql.NullInt64
		var created int64
		p := &pi.Principal
		if err := rows.Scan(&p.ID, &p.TenantID, &p.Name, &p.Role, &p.Team, &p.Disabled, &at, &pi.DisabledReason, &created); err != nil {
			return nil, err
		}
		pi.DisabledAt, pi.CreatedAt = nanoTime(at), time.Unix(0, created).UTC()
		out = append(out, pi)
	}
	return out, rows.Err()
}

// PrincipalChange is one change to a principal of the tenant with Slug. Exactly one of Disable,
// Role and Team is set.
type PrincipalChange struct {
	Slug string
	ID   domain.PrincipalID
	// Disable disables (true) or enables (false) the principal; Reason is kept with a disable.
	Disable *bool
	Reason  string
	Role    *domain.Role
	Team    *string // "" clears the team
}

// ChangePrincipal applies c and returns the principal before and after. Disabling ends the
// principal's console sessions at once and makes its tokens and linked Slack users refused from
// the next request on; its tokens are kept (not revoked), so enabling restores them. Disabling or
// demoting the tenant's last enabled admin is ErrLastAdmin. Another tenant's principal is
// domain.ErrNotFound.
func (s *Store) ChangePrincipal(ctx context.Context, c PrincipalChange) (before, after domain.Principal, err error) {
	n := 0
	for _, set := range []bool{c.Disable != nil, c.Role != nil, c.Team != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return before, after, domain.Invalid("change", "give exactly one of disable, role and team")
	}
	if c.Role != nil {
		if _, err := domain.ParseRole(string(*c.Role)); err != nil {
			return before, after, err
		}
	}
	if c.Team != nil {
		t := strings.TrimSpace(*c.Team)
		if len(t) > 64 {
			return before, after, domain.Invalid("team", "must be at most 64 characters")
		}
		c.Team = &t
	}
	c.Reason = strings.TrimSpace(c.Reason)
	if err := domain.CheckText("reason", c.Reason, false, domain.MaxReasonLen, false); err != nil {
		return before, after, err
	}
	t, err := s.TenantBySlug(ctx, c.Slug)
	if err != nil {
		return before, after, err
	}
	err = sqldb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		if s.db.Dialect == sqldb.Postgres {
			// One admin change per tenant at a time, so two demotions cannot each count the other.
			if _, err := tx.ExecContext(ctx, `SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE`, t.ID); err != nil {
				return err
			}
		}
		err := tx.QueryRowContext(ctx, s.db.Rebind(`SELECT `+principalCols("p")+` FROM principals p WHERE p.id = ? AND p.tenant_id = ?`),
			c.ID, t.ID).Scan(&before.ID, &before.TenantID, &before.Name, &before.Role, &before.Team, &before.Disabled)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("principal %q of tenant %q: %w", c.ID, c.Slug, domain.ErrNotFound)
		}
		if err != nil {
			return err
		}
		after = before
		switch {
		case c.Disable != nil:
			after.Disabled = *c.Disable
		case c.Role != nil:
			after.Role = *c.Role
		default:
			after.Team = *c.Team
		}
		if before.Role == domain.RoleAdmin && !before.Disabled && (after.Role != domain.RoleAdmin || after.Disabled) {
			var others int
			if err := tx.QueryRowContext(ctx, s.db.Rebind(`SELECT count(*) FROM principals WHERE tenant_id = ? AND id <> ?
				AND role = ? AND disabled_at IS NULL`), t.ID, c.ID, domain.RoleAdmin).Scan(&others); err != nil {
				return err
			}
			if others == 0 {
				return ErrLastAdmin
			}
		}
		now := s.now().UnixNano()
		switch {
		case c.Disable != nil && *c.Disable && !before.Disabled:
			if _, err := tx.ExecContext(ctx, s.db.Rebind(`UPDATE principals SET disabled_at = ?, disabled_reason = ? WHERE id = ?`),
				now, c.Reason, c.ID); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, s.db.Rebind(`UPDATE console_sessions SET ended_at = ? WHERE ended_at IS NULL
				AND token_hash IN (SELECT hash FROM api_tokens WHERE principal_id = ?)`), now, c.ID)
			return err
		case c.Disable != nil && !*c.Disable:
			_, err := tx.ExecContext(ctx, s.db.Rebind(`UPDATE principals SET disabled_at = NULL, disabled_reason = '' WHERE id = ?`), c.ID)
			return err
		case c.Role != nil:
			_, err := tx.ExecContext(ctx, s.db.Rebind(`UPDATE principals SET role = ? WHERE id = ?`), after.Role, c.ID)
			return err
		case c.Team != nil:
			_, err := tx.ExecContext(ctx, s.db.Rebind(`UPDATE principals SET team = ? WHERE id = ?`), after.Team, c.ID)
			return err
		}
		return nil
	})
	return before, after, err
}
