package tenancy_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/tenancy"
)

// cachedStore is a Store on db whose PublicTenant keeps answers for ttl by clk.
func cachedStore(t *testing.T, db *sqldb.DB, clk *clock, ttl time.Duration) *tenancy.Store {
	t.Helper()
	s, err := tenancy.New(t.Context(), db, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	s.PublicCacheTTL = ttl
	return s
}

// publicOf is what PublicTenant answers for slug, as one comparable string, and how many
// statements it ran.
func publicOf(t *testing.T, db *sqldb.DB, s *tenancy.Store, slug string) (string, uint64) {
	t.Helper()
	before := db.Statements()
	ten, origins, p, err := s.PublicTenant(t.Context(), slug)
	if err != nil {
		t.Fatalf("PublicTenant(%q): %v", slug, err)
	}
	return fmt.Sprintf("%s %v %s %v", ten.Slug, origins, p.Name, p.Categories), db.Statements() - before
}

// TestPublicTenantCachedWithinTTL: a second PublicTenant within the TTL runs no statement, one at
// the TTL reads again; a change made through another Store on the same database (another process)
// is served stale until the TTL has passed, and seen then.
func TestPublicTenantCachedWithinTTL(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		clk := &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
		s := cachedStore(t, db, clk, time.Second)
		other := cachedStore(t, db, clk, time.Second)
		if _, _, _, err := s.CreateTenant(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetOrigins(ctx, "acme", []string{"https://a.example"}); err != nil {
			t.Fatal(err)
		}
		first, n := publicOf(t, db, s, "acme")
		if n != 1 || first != "acme [https://a.example] acme []" {
			t.Fatalf("first read = %q with %d statements, want the tenant with 1", first, n)
		}
		if _, err := other.SetOrigins(ctx, "acme", []string{"https://b.example"}); err != nil {
			t.Fatal(err)
		}
		name := "Acme Ltd"
		if _, err := other.SetProfile(ctx, "acme", &name, []tenancy.Category{{Slug: "sales"}}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(999 * time.Millisecond)
		if got, n := publicOf(t, db, s, "acme"); n != 0 || got != first {
			t.Fatalf("within the TTL = %q with %d statements, want %q from memory", got, n, first)
		}
		clk.Advance(time.Millisecond)
		want := "acme [https://b.example] Acme Ltd [{sales sales}]"
		if got, n := publicOf(t, db, s, "acme"); n != 1 || got != want {
			t.Fatalf("at the TTL = %q with %d statements, want %q read again", got, n, want)
		}
		if got, n := publicOf(t, db, s, "acme"); n != 0 || got != want {
			t.Fatalf("after reading again = %q with %d statements, want %q from memory", got, n, want)
		}
	})
}

// TestPublicTenantSeesOwnWritesAtOnce: SetOrigins, SetProfile and CreateTenant through the Store
// that serves PublicTenant are seen by the next call, without the clock moving.
func TestPublicTenantSeesOwnWritesAtOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		clk := &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
		s := cachedStore(t, db, clk, time.Hour)
		if _, _, _, err := s.PublicTenant(ctx, "acme"); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("before it exists: %v", err)
		}
		if _, _, _, err := s.CreateTenant(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		if got, _ := publicOf(t, db, s, "acme"); got != "acme [] acme []" {
			t.Fatalf("after create = %q", got)
		}
		if _, err := s.SetOrigins(ctx, "acme", []string{"https://a.example", "https://b.example"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := publicOf(t, db, s, "acme"); got != "acme [https://a.example https://b.example] acme []" {
			t.Fatalf("after set origins = %q", got)
		}
		if _, err := s.SetOrigins(ctx, "acme", []string{"https://b.example"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := publicOf(t, db, s, "acme"); got != "acme [https://b.example] acme []" {
			t.Fatalf("after removing an origin = %q", got)
		}
		name := "Acme Ltd"
		if _, err := s.SetProfile(ctx, "acme", &name, []tenancy.Category{{Slug: "billing", Label: "Billing"}}); err != nil {
			t.Fatal(err)
		}
		if got, _ := publicOf(t, db, s, "acme"); got != "acme [https://b.example] Acme Ltd [{billing Billing}]" {
			t.Fatalf("after set profile = %q", got)
		}
	})
}

// TestPublicTenantUncachedWithTTLZero: with no TTL every call reads the database, and a change by
// another Store is seen at once.
func TestPublicTenantUncachedWithTTLZero(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		clk := &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
		s := cachedStore(t, db, clk, 0)
		other := cachedStore(t, db, clk, time.Second)
		if _, _, _, err := s.CreateTenant(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, n := publicOf(t, db, s, "acme"); n != 1 {
				t.Fatalf("a read ran %d statements, want 1", n)
			}
		}
		if _, err := other.SetOrigins(ctx, "acme", []string{"https://a.example"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := publicOf(t, db, s, "acme"); got != "acme [https://a.example] acme []" {
			t.Fatalf("after another store's change = %q", got)
		}
	})
}

// TestPublicTenantUnknownSlugFailsClosed: an unknown slug is ErrNotFound on every call (each one
// asks the database: nothing is kept for it) until the tenant is created, by this Store or
// another; a slug differing from a cached one in case or spacing is another, unknown slug, and
// one that no tenant can have (CreateTenant's rule) is not found without asking.
func TestPublicTenantUnknownSlugFailsClosed(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		clk := &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
		s := cachedStore(t, db, clk, time.Hour)
		other := cachedStore(t, db, clk, time.Hour)
		acme, _, _, err := s.CreateTenant(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if _, n := publicOf(t, db, s, "acme"); n != 1 {
			t.Fatalf("first read ran %d statements", n)
		}
		for _, c := range []struct {
			slug string
			want uint64 // statements
		}{{"globex", 1}, {"globex", 1}, {"acme-", 1}, {"acm", 1}, {"ACME", 0}, {"acme ", 0}, {" acme", 0}, {"acme%", 0}, {"acm_", 0}} {
			slug := c.slug
			before := db.Statements()
			ten, origins, _, err := s.PublicTenant(ctx, slug)
			if !errors.Is(err, domain.ErrNotFound) || ten != (tenancy.Tenant{}) || origins != nil {
				t.Errorf("PublicTenant(%q) = %+v %v, %v; want ErrNotFound", slug, ten, origins, err)
			}
			if n := db.Statements() - before; n != c.want {
				t.Errorf("PublicTenant(%q) ran %d statements, want %d (unknown slugs are not kept)", slug, n, c.want)
			}
		}
		globex, _, _, err := other.CreateTenant(ctx, "globex")
		if err != nil {
			t.Fatal(err)
		}
		for slug, want := range map[string]domain.TenantID{"globex": globex.ID, "acme": acme.ID} {
			ten, _, _, err := s.PublicTenant(ctx, slug)
			if err != nil || ten.ID != want || ten.Slug != slug {
				t.Errorf("PublicTenant(%q) = %+v, %v; want %s", slug, ten, err, want)
			}
		}
	})
}

// TestPublicTenantAnswersAreCopies: a caller that changes what it was given does not change what
// the next caller gets.
func TestPublicTenantAnswersAreCopies(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		clk := &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
		s := cachedStore(t, db, clk, time.Hour)
		if _, _, _, err := s.CreateTenant(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetOrigins(ctx, "acme", []string{"https://a.example"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetProfile(ctx, "acme", nil, []tenancy.Category{{Slug: "sales"}}); err != nil {
			t.Fatal(err)
		}
		want, _ := publicOf(t, db, s, "acme")
		for range 2 {
			_, origins, p, err := s.PublicTenant(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			origins[0] = "https://evil.example"
			p.Categories[0].Slug = "evil"
		}
		if got, n := publicOf(t, db, s, "acme"); got != want || n != 0 {
			t.Fatalf("after callers changed their answers = %q (%d statements), want %q", got, n, want)
		}
	})
}

// TestPublicTenantConcurrentReadersAndWriter: readers of two tenants race a writer that changes
// one tenant's origins through the same Store (and the clock moving on); every answer is its own
// slug's tenant with one of the origin sets written, and once the writer is done the last set is
// served.
func TestPublicTenantConcurrentReadersAndWriter(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		ctx := t.Context()
		clk := &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
		s := cachedStore(t, db, clk, time.Second)
		ids := map[string]domain.TenantID{}
		for _, slug := range []string{"acme", "globex"} {
			ten, _, _, err := s.CreateTenant(ctx, slug)
			if err != nil {
				t.Fatal(err)
			}
			ids[slug] = ten.ID
		}
		const writes = 20
		sets := map[string]bool{"[]": true}
		for i := range writes {
			sets[fmt.Sprint([]string{fmt.Sprintf("https://w%02d.example", i)})] = true
		}
		done := make(chan struct{})
		var wg sync.WaitGroup
		stop := sync.OnceFunc(func() { close(done); wg.Wait() })
		defer stop()
		for r := range 8 {
			wg.Go(func() {
				slug := []string{"acme", "globex"}[r%2]
				for {
					select {
					case <-done:
						return
					default:
					}
					ten, origins, _, err := s.PublicTenant(ctx, slug)
					if err != nil {
						t.Error(err)
						return
					}
					if ten.ID != ids[slug] || ten.Slug != slug {
						t.Errorf("PublicTenant(%q) = %+v", slug, ten)
						return
					}
					if slug == "globex" && origins != nil {
						t.Errorf("globex has acme's origins %v", origins)
						return
					}
					if slug == "acme" && !sets[fmt.Sprint(origins)] {
						t.Errorf("acme origins %v were never written", origins)
						return
					}
				}
			})
		}
		for i := range writes {
			if _, err := s.SetOrigins(ctx, "acme", []string{fmt.Sprintf("https://w%02d.example", i)}); err != nil {
				t.Fatal(err)
			}
			if i%5 == 0 {
				clk.Advance(time.Second)
			}
		}
		stop()
		if got, _ := publicOf(t, db, s, "acme"); got != fmt.Sprintf("acme [https://w%02d.example] acme []", writes-1) {
			t.Fatalf("after the writer = %q, want its last origins", got)
		}
	})
}
