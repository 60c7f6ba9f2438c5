package tenancy_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/tenancy"
)

func TestTenancy(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		s, err := tenancy.New(ctx, db, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tenancy.New(ctx, db, nil); err != nil {
			t.Fatalf("migrating twice: %v", err)
		}
		acme, admin, token, err := s.CreateTenant(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := s.CreateTenant(ctx, "acme"); !errors.Is(err, domain.ErrConflict) {
			t.Errorf("duplicate slug: %v", err)
		}
		for _, bad := range []string{"", "A", "-x", "has space", strings.Repeat("a", 41)} {
			if _, _, _, err := s.CreateTenant(ctx, bad); !errors.Is(err, domain.ErrValidation) {
				t.Errorf("slug %q: %v", bad, err)
			}
		}
		got, err := s.Authenticate(ctx, token)
		if err != nil || got != admin || got.Role != domain.RoleAdmin || got.TenantID != acme.ID {
			t.Fatalf("authenticate admin = %+v, %v", got, err)
		}
		for _, bad := range []string{"", "cb_", "cb_wrong", token + "x", strings.TrimPrefix(token, "cb_")} {
			if _, err := s.Authenticate(ctx, bad); !errors.Is(err, domain.ErrUnauthenticated) {
				t.Errorf("token %q: %v", bad, err)
			}
		}
		op, opToken, err := s.CreatePrincipal(ctx, "acme", "Olga", domain.RoleOperator, "support")
		if err != nil {
			t.Fatal(err)
		}
		if p, err := s.Authenticate(ctx, opToken); err != nil || p != op {
			t.Fatalf("authenticate operator = %+v, %v", p, err)
		}
		if _, _, err := s.CreatePrincipal(ctx, "nope", "x", domain.RoleOperator, ""); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("principal in unknown tenant: %v", err)
		}
		if _, _, err := s.CreatePrincipal(ctx, "acme", "x", "root", ""); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("unknown role: %v", err)
		}
		globex, _, _, err := s.CreateTenant(ctx, "globex")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Principal(ctx, globex.ID, op.ID); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("principal across tenants: %v", err)
		}
		if p, err := s.Principal(ctx, acme.ID, op.ID); err != nil || p != op {
			t.Errorf("principal = %+v, %v", p, err)
		}
	})
}

// TestSecretIsSharedAndStable: concurrent first uses agree on one secret, and it persists.
func TestSecretIsSharedAndStable(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		s, err := tenancy.New(t.Context(), db, nil)
		if err != nil {
			t.Fatal(err)
		}
		secrets := make([]string, 8)
		var wg sync.WaitGroup
		for i := range secrets {
			wg.Go(func() {
				b, err := s.Secret(t.Context())
				if err != nil {
					t.Error(err)
				}
				secrets[i] = string(b)
			})
		}
		wg.Wait()
		for _, sec := range secrets {
			if sec != secrets[0] || len(sec) != 32 {
				t.Fatalf("secrets differ or are short: %d bytes", len(sec))
			}
		}
	})
}
