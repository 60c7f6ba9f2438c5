package tenancy_test

import (
	"errors"
	"testing"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/tenancy"
)

// TestDisablePrincipal: a disabled principal's token is refused with ErrPrincipalDisabled from the
// next call on, its console session is ended (and stays ended after enabling), enabling restores
// the token; the last enabled admin can be neither disabled nor demoted; changes are
// tenant-scoped.
func TestDisablePrincipal(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		s, err := tenancy.New(ctx, db, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, admin, adminToken, err := s.CreateTenant(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := s.CreateTenant(ctx, "globex"); err != nil {
			t.Fatal(err)
		}
		op, opToken, err := s.CreatePrincipal(ctx, "acme", "Olga", domain.RoleOperator, "support")
		if err != nil {
			t.Fatal(err)
		}
		_, _, secret, err := s.StartSession(ctx, opToken, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		yes, no := true, false
		if _, _, err := s.ChangePrincipal(ctx, tenancy.PrincipalChange{Slug: "globex", ID: op.ID, Disable: &yes}); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("disable through another tenant = %v, want not found", err)
		}
		if p, _ := s.Principal(ctx, op.TenantID, op.ID); p.Disabled {
			t.Fatal("another tenant's change disabled the principal")
		}
		before, after, err := s.ChangePrincipal(ctx, tenancy.PrincipalChange{Slug: "acme", ID: op.ID, Disable: &yes, Reason: "left the team"})
		if err != nil || before.Disabled || !after.Disabled {
			t.Fatalf("disable = %+v → %+v, %v", before, after, err)
		}
		if _, err := s.Authenticate(ctx, opToken); !errors.Is(err, domain.ErrPrincipalDisabled) {
			t.Fatalf("disabled principal's token = %v, want ErrPrincipalDisabled", err)
		}
		if _, _, err := s.SessionPrincipal(ctx, secret); !errors.Is(err, tenancy.ErrNoSession) {
			t.Fatalf("disabled principal's session = %v, want ended", err)
		}
		if p, err := s.Principal(ctx, op.TenantID, op.ID); err != nil || !p.Disabled || domain.Authorize(p, domain.ActRead) == nil {
			t.Fatalf("Principal = %+v, %v: want it disabled and refused by Authorize", p, err)
		}
		infos, err := s.PrincipalInfos(ctx, "acme")
		if err != nil || len(infos) != 2 {
			t.Fatalf("PrincipalInfos = %+v, %v", infos, err)
		}
		for _, pi := range infos {
			if pi.ID == op.ID && (!pi.Disabled || pi.DisabledReason != "left the team" || pi.DisabledAt == nil) {
				t.Errorf("listed %+v: want disabled with its reason", pi)
			}
		}
		if _, _, err := s.ChangePrincipal(ctx, tenancy.PrincipalChange{Slug: "acme", ID: op.ID, Disable: &no}); err != nil {
			t.Fatal(err)
		}
		if p, err := s.Authenticate(ctx, opToken); err != nil || p.Disabled {
			t.Fatalf("enabled principal's token = %+v, %v", p, err)
		}
		if _, _, err := s.SessionPrincipal(ctx, secret); !errors.Is(err, tenancy.ErrNoSession) {
			t.Fatalf("a session ended by disabling came back: %v", err)
		}

		// The last enabled admin: neither disabled nor demoted; once another admin exists, it can be.
		admin2Role := domain.RoleOperator
		for _, c := range []tenancy.PrincipalChange{
			{Slug: "acme", ID: admin.ID, Disable: &yes},
			{Slug: "acme", ID: admin.ID, Role: &admin2Role},
		} {
			if _, _, err := s.ChangePrincipal(ctx, c); !errors.Is(err, tenancy.ErrLastAdmin) || !errors.Is(err, domain.ErrConflict) {
				t.Fatalf("change of the last admin = %v, want ErrLastAdmin", err)
			}
		}
		if _, err := s.Authenticate(ctx, adminToken); err != nil {
			t.Fatalf("refused change still touched the admin: %v", err)
		}
		adminRole := domain.RoleAdmin
		if _, _, err := s.ChangePrincipal(ctx, tenancy.PrincipalChange{Slug: "acme", ID: op.ID, Role: &adminRole}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.ChangePrincipal(ctx, tenancy.PrincipalChange{Slug: "acme", ID: admin.ID, Disable: &yes}); err != nil {
			t.Fatalf("disable an admin while another is enabled: %v", err)
		}
		// op is now the only enabled admin.
		if _, _, err := s.ChangePrincipal(ctx, tenancy.PrincipalChange{Slug: "acme", ID: op.ID, Role: &admin2Role}); !errors.Is(err, tenancy.ErrLastAdmin) {
			t.Fatalf("demote the last enabled admin = %v", err)
		}

		team := "  billing "
		if _, after, err := s.ChangePrincipal(ctx, tenancy.PrincipalChange{Slug: "acme", ID: op.ID, Team: &team}); err != nil || after.Team != "billing" {
			t.Fatalf("set team = %+v, %v", after, err)
		}
		empty := ""
		if _, after, err := s.ChangePrincipal(ctx, tenancy.PrincipalChange{Slug: "acme", ID: op.ID, Team: &empty}); err != nil || after.Team != "" {
			t.Fatalf("clear team = %+v, %v", after, err)
		}
		bad := domain.Role("root")
		for _, c := range []tenancy.PrincipalChange{
			{Slug: "acme", ID: op.ID},
			{Slug: "acme", ID: op.ID, Role: &bad},
			{Slug: "acme", ID: op.ID, Role: &adminRole, Team: &empty},
		} {
			if _, _, err := s.ChangePrincipal(ctx, c); !errors.Is(err, domain.ErrValidation) {
				t.Errorf("change %+v = %v, want a validation error", c, err)
			}
		}
		ts, err := s.Tenants(ctx)
		if err != nil || len(ts) != 2 || ts[0].Slug != "acme" || ts[1].Slug != "globex" {
			t.Fatalf("Tenants = %+v, %v", ts, err)
		}
	})
}
