package tenancy_test

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/tenancy"
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestTokenExpiryAndRevocation: expired and revoked tokens fail exactly like unknown ones, and a
// principal's other tokens keep working until they are revoked too.
func TestTokenExpiryAndRevocation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		clk := &clock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
		s, err := tenancy.New(ctx, db, clk.Now)
		if err != nil {
			t.Fatal(err)
		}
		s.TokenTTL = 90 * 24 * time.Hour
		_, admin, adminTok, err := s.CreateTenant(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		first, err := s.TokenInfo(ctx, admin.TenantID, tenancy.TokenID(adminTok))
		if err != nil || first.ExpiresAt == nil || !first.ExpiresAt.Equal(clk.Now().Add(s.TokenTTL)) {
			t.Fatalf("first token = %+v, %v; want expiry after TokenTTL", first, err)
		}
		op, _, err := s.CreatePrincipal(ctx, "acme", "Olga", domain.RoleOperator, "support")
		if err != nil {
			t.Fatal(err)
		}
		short, shortTok, err := s.CreateToken(ctx, "acme", op.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		forever, foreverTok, err := s.CreateToken(ctx, "acme", op.ID, 0)
		if err != nil || forever.ExpiresAt != nil {
			t.Fatalf("ttl 0 = %+v, %v; want no expiry", forever, err)
		}
		if p, err := s.Authenticate(ctx, shortTok); err != nil || p != op {
			t.Fatalf("fresh token: %+v %v", p, err)
		}
		clk.Advance(time.Hour)
		if _, err := s.Authenticate(ctx, shortTok); !errors.Is(err, domain.ErrUnauthenticated) {
			t.Fatalf("expired token: %v", err)
		}
		if _, err := s.Authenticate(ctx, foreverTok); err != nil {
			t.Fatalf("other token of the principal: %v", err)
		}
		if err := s.RevokeToken(ctx, "acme", forever.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.RevokeToken(ctx, "acme", forever.ID); err != nil {
			t.Fatalf("revoking twice: %v", err)
		}
		if _, err := s.Authenticate(ctx, foreverTok); !errors.Is(err, domain.ErrUnauthenticated) {
			t.Fatalf("revoked token: %v", err)
		}
		list, err := s.Tokens(ctx, "acme", op.ID)
		if err != nil || len(list) != 3 {
			t.Fatalf("tokens of op = %+v, %v", list, err)
		}
		ids := []string{list[0].ID, list[1].ID, list[2].ID}
		if !slices.Contains(ids, short.ID) || !slices.Contains(ids, forever.ID) {
			t.Fatalf("listed ids %v lack %s or %s", ids, short.ID, forever.ID)
		}

		// Another tenant can neither mint for, nor see, nor revoke acme's tokens.
		if _, _, _, err := s.CreateTenant(ctx, "globex"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.CreateToken(ctx, "globex", op.ID, 0); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("token for another tenant's principal: %v", err)
		}
		if err := s.RevokeToken(ctx, "globex", tenancy.TokenID(adminTok)); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("revoke another tenant's token: %v", err)
		}
		if _, err := s.RevokePrincipalTokens(ctx, "globex", admin.ID); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("revoke another tenant's principal: %v", err)
		}
		if _, err := s.Authenticate(ctx, adminTok); err != nil {
			t.Fatalf("acme admin after globex's attempts: %v", err)
		}
		if n, err := s.RevokePrincipalTokens(ctx, "acme", admin.ID); err != nil || n != 1 {
			t.Fatalf("revoke admin's tokens = %d, %v", n, err)
		}
		if _, err := s.Authenticate(ctx, adminTok); !errors.Is(err, domain.ErrUnauthenticated) {
			t.Fatalf("admin token after revoking the principal's tokens: %v", err)
		}
		if _, _, err := s.CreateToken(ctx, "acme", op.ID, -time.Hour); !errors.Is(err, domain.ErrValidation) {
			t.Errorf("negative ttl: %v", err)
		}
	})
}

func TestOrigins(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		s, err := tenancy.New(ctx, db, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := s.CreateTenant(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		tn, origins, _, err := s.PublicTenant(ctx, "acme")
		if err != nil || tn.Slug != "acme" || len(origins) != 0 {
			t.Fatalf("public tenant = %+v %v %v", tn, origins, err)
		}
		got, err := s.SetOrigins(ctx, "acme", []string{"https://Acme.Example:443/", "http://localhost:8081", "https://acme.example", "http://[::1]:80"})
		want := []string{"http://[::1]", "http://localhost:8081", "https://acme.example"}
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("set origins = %v, %v; want %v", got, err, want)
		}
		if _, origins, _, _ = s.PublicTenant(ctx, "acme"); !slices.Equal(origins, want) {
			t.Fatalf("stored origins = %v", origins)
		}
		for _, bad := range []string{"acme.example", "ftp://acme.example", "https://acme.example/form", "https://u:p@acme.example", "https://acme.example?x=1", "https://"} {
			if _, err := s.SetOrigins(ctx, "acme", []string{bad}); !errors.Is(err, domain.ErrValidation) {
				t.Errorf("origin %q: %v", bad, err)
			}
		}
		if _, origins, _, _ = s.PublicTenant(ctx, "acme"); !slices.Equal(origins, want) {
			t.Fatalf("a refused update changed the origins: %v", origins)
		}
		if _, err := s.SetOrigins(ctx, "acme", nil); err != nil {
			t.Fatal(err)
		}
		if _, origins, _, _ = s.PublicTenant(ctx, "acme"); len(origins) != 0 {
			t.Fatalf("cleared origins = %v", origins)
		}
		if _, _, _, err := s.PublicTenant(ctx, "nope"); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("unknown slug: %v", err)
		}
		if _, err := s.SetOrigins(ctx, "nope", nil); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("unknown slug: %v", err)
		}
	})
}

// TestMigrationGivesOldTokensIDs: a token minted before token ids existed gets its id on upgrade and
// can then be revoked by it.
func TestMigrationGivesOldTokensIDs(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		v1 := []string{
			`CREATE TABLE schema_migrations (component TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (component, version))`,
			`CREATE TABLE tenants (id TEXT PRIMARY KEY, slug TEXT NOT NULL UNIQUE, created_at BIGINT NOT NULL)`,
			`CREATE TABLE principals (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants (id), name TEXT NOT NULL,
				role TEXT NOT NULL, team TEXT NOT NULL DEFAULT '', created_at BIGINT NOT NULL)`,
			`CREATE TABLE api_tokens (hash TEXT PRIMARY KEY, principal_id TEXT NOT NULL REFERENCES principals (id),
				created_at BIGINT NOT NULL, expires_at BIGINT, revoked_at BIGINT)`,
			`CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)`,
			`INSERT INTO schema_migrations VALUES ('tenancy', 1)`,
			`INSERT INTO tenants VALUES ('t1', 'acme', 0)`,
			`INSERT INTO principals VALUES ('p1', 't1', 'admin', 'admin', '', 0)`,
			`INSERT INTO api_tokens (hash, principal_id, created_at) VALUES ('` + tenancy.HashToken("cb_old") + `', 'p1', 0)`,
		}
		for _, q := range v1 {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		s, err := tenancy.New(ctx, db, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Authenticate(ctx, "cb_old"); err != nil {
			t.Fatalf("old token after upgrade: %v", err)
		}
		if err := s.RevokeToken(ctx, "acme", tenancy.TokenID("cb_old")); err != nil {
			t.Fatalf("revoke old token by its id: %v", err)
		}
		if _, err := s.Authenticate(ctx, "cb_old"); !errors.Is(err, domain.ErrUnauthenticated) {
			t.Fatalf("revoked old token: %v", err)
		}
	})
}

// TestPublicTenantOneStatement: the public intake's tenant lookup (tenant, origins and profile) is
// one statement (counted on Postgres) and reads what is stored now: a profile change shows at once.
func TestPublicTenantOneStatement(t *testing.T) {
	t.Parallel()
	for _, b := range dbtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			var db *sqldb.DB
			var stmts *dbtest.Statements
			if b.Name == "postgres" {
				db, stmts = dbtest.CountingPostgres(t)
			} else {
				db = b.Open(t)
			}
			ctx := t.Context()
			s, err := tenancy.New(ctx, db, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, _, err := s.CreateTenant(ctx, "acme"); err != nil {
				t.Fatal(err)
			}
			if _, _, p, err := s.PublicTenant(ctx, "acme"); err != nil || p.Name != "acme" || len(p.Categories) != 0 {
				t.Fatalf("profile without a row = %+v, %v", p, err)
			}
			if _, err := s.SetOrigins(ctx, "acme", []string{"https://a.example", "https://b.example"}); err != nil {
				t.Fatal(err)
			}
			name := "Acme Support"
			if _, err := s.SetProfile(ctx, "acme", &name, []tenancy.Category{{Slug: "billing", Label: "Billing"}}); err != nil {
				t.Fatal(err)
			}
			if stmts != nil {
				stmts.Reset()
			}
			tn, origins, p, err := s.PublicTenant(ctx, "acme")
			if err != nil || tn.Slug != "acme" || len(origins) != 2 || p.Name != name || len(p.Categories) != 1 || p.Categories[0].Slug != "billing" {
				t.Fatalf("public tenant = %+v %v %+v %v", tn, origins, p, err)
			}
			if stmts != nil && stmts.Total("") != 1 {
				t.Fatalf("%d statements: %v", stmts.Total(""), stmts.Counts())
			}
			if _, err := s.SetProfile(ctx, "acme", nil, []tenancy.Category{}); err != nil {
				t.Fatal(err)
			}
			if _, _, p, err := s.PublicTenant(ctx, "acme"); err != nil || len(p.Categories) != 0 || p.Name != name {
				t.Fatalf("after clearing categories: %+v, %v", p, err)
			}
		})
	}
}

// TestRevocationSeenUnderConcurrentUse: while many requests authenticate with one token at once
// (their reads are shared), every request that starts after RevokeToken has returned is refused,
// and every one that ends before it began was accepted.
func TestRevocationSeenUnderConcurrentUse(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		s, err := tenancy.New(ctx, db, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _, tok, err := s.CreateTenant(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		var revoked, failed atomic.Bool
		var accepted, refused atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		defer func() { close(stop); wg.Wait() }()
		for range 16 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					after := revoked.Load()
					_, err := s.Authenticate(ctx, tok)
					switch {
					case after && !errors.Is(err, domain.ErrUnauthenticated):
						t.Errorf("a request that started after the revocation: %v, want refused", err)
						failed.Store(true)
						return
					case err == nil:
						accepted.Add(1)
					case errors.Is(err, domain.ErrUnauthenticated):
						refused.Add(1)
					default:
						t.Errorf("authenticate: %v", err)
						failed.Store(true)
						return
					}
				}
			})
		}
		// Until enough requests have passed, or a worker has failed.
		for accepted.Load() < 200 && !failed.Load() {
			runtime.Gosched()
		}
		if err := s.RevokeToken(ctx, "acme", tenancy.TokenID(tok)); err != nil {
			t.Fatal(err)
		}
		revoked.Store(true)
		for refused.Load() < 200 && !failed.Load() {
			runtime.Gosched()
		}
	})
}

// TestPublicTenantMalformedSlugNoStatement: a slug no tenant can have (CreateTenant's rule) is not
// found without a statement, cached or not, so a flood of made-up slugs costs the database
// nothing; a well-formed unknown slug is looked up and not found.
func TestPublicTenantMalformedSlugNoStatement(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		s, err := tenancy.New(t.Context(), db, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := s.CreateTenant(t.Context(), "acme"); err != nil {
			t.Fatal(err)
		}
		for _, ttl := range []time.Duration{0, time.Second} {
			s.PublicCacheTTL = ttl
			for _, slug := range []string{"", "a", "Acme", "acme/../x", "acme%", "acme\x00", "-acme", strings.Repeat("a", 41), strings.Repeat("x", 10000)} {
				ctx, log := sqldb.WithStatementLog(t.Context())
				if _, _, _, err := s.PublicTenant(ctx, slug); !errors.Is(err, domain.ErrNotFound) {
					t.Errorf("ttl %v, slug %.20q: %v, want not found", ttl, slug, err)
				}
				if n := len(log.Statements()); n != 0 {
					t.Errorf("ttl %v, slug %.20q: %d statements, want none", ttl, slug, n)
				}
			}
			ctx, log := sqldb.WithStatementLog(t.Context())
			if _, _, _, err := s.PublicTenant(ctx, "nobody"); !errors.Is(err, domain.ErrNotFound) || len(log.Statements()) != 1 {
				t.Errorf("ttl %v, unknown slug: %v after %d statements, want not found after one", ttl, err, len(log.Statements()))
			}
			if tn, _, _, err := s.PublicTenant(t.Context(), "acme"); err != nil || tn.Slug != "acme" {
				t.Errorf("ttl %v: acme = %+v, %v", ttl, tn, err)
			}
		}
	})
}
