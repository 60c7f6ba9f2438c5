package tenancy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/sqldb"
)

// waitOrFail waits for ch; a missing signal fails the test instead of hanging it.
func waitOrFail(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Errorf("never happened: %s", what)
	}
}

func newCached(t *testing.T, db *sqldb.DB) *Store {
	t.Helper()
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	s, err := New(t.Context(), db, func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}
	s.PublicCacheTTL = time.Second
	if _, _, _, err := s.CreateTenant(t.Context(), "acme"); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPublicTenantConcurrentMissesShareOneLookup: misses of one slug that arrive while its lookup
// runs wait for it: one statement for all of them, and all get the tenant.
func TestPublicTenantConcurrentMissesShareOneLookup(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		s := newCached(t, db)
		const callers = 16
		var mu sync.Mutex
		joins := 0
		allJoined := make(chan struct{})
		s.public.joined = func() {
			mu.Lock()
			defer mu.Unlock()
			if joins++; joins == callers-1 {
				close(allJoined)
			}
		}
		s.public.looked = func() { waitOrFail(t, allJoined, "every other caller joined the lookup") }
		before := db.Statements()
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				ten, _, _, err := s.PublicTenant(t.Context(), "acme")
				if err != nil || ten.Slug != "acme" {
					t.Errorf("PublicTenant = %+v, %v", ten, err)
				}
			})
		}
		wg.Wait()
		if n := db.Statements() - before; n != 1 {
			t.Fatalf("%d concurrent misses ran %d statements, want 1", callers, n)
		}
	})
}

// TestPublicTenantLeaderFailureNotShared: when the lookup a caller waited for fails for its own
// reason (its context ended), the waiting caller reads for itself, and nothing is kept.
func TestPublicTenantLeaderFailureNotShared(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		s := newCached(t, db)
		leaderCtx, cancel := context.WithCancel(t.Context())
		leading, joined := make(chan struct{}), make(chan struct{})
		s.public.looking = func() {
			close(leading)
			waitOrFail(t, joined, "the second caller joined")
			cancel()
		}
		s.public.joined = func() { close(joined) }
		var leaderErr error
		var wg sync.WaitGroup
		wg.Go(func() { _, _, _, leaderErr = s.PublicTenant(leaderCtx, "acme") })
		waitOrFail(t, leading, "the first caller started its lookup")
		ten, _, _, err := s.PublicTenant(t.Context(), "acme")
		wg.Wait()
		if !errors.Is(leaderErr, context.Canceled) {
			t.Fatalf("leader: %v, want its context's error", leaderErr)
		}
		if err != nil || ten.Slug != "acme" {
			t.Fatalf("waiting caller = %+v, %v; want the tenant", ten, err)
		}
		s.public.looking, s.public.joined = nil, nil
		before := db.Statements()
		if _, _, _, err := s.PublicTenant(t.Context(), "acme"); err != nil {
			t.Fatal(err)
		}
		if n := db.Statements() - before; n != 1 {
			t.Fatalf("after a failed lookup a read ran %d statements, want 1 (nothing kept)", n)
		}
	})
}

// TestPublicTenantLookupBeforeChangeNotKept: a lookup that read the tenant before a change made
// through the same Store committed does not keep its (old) answer.
func TestPublicTenantLookupBeforeChangeNotKept(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		s := newCached(t, db)
		s.public.looked = func() {
			s.public.looked = nil // runs in the same goroutine as the next line's caller
			if _, err := s.SetOrigins(t.Context(), "acme", []string{"https://new.example"}); err != nil {
				t.Error(err)
			}
		}
		if _, origins, _, err := s.PublicTenant(t.Context(), "acme"); err != nil || origins != nil {
			t.Fatalf("lookup racing the change = %v, %v; want the origins it read (none)", origins, err)
		}
		if _, origins, _, err := s.PublicTenant(t.Context(), "acme"); err != nil || fmt.Sprint(origins) != "[https://new.example]" {
			t.Fatalf("after the change = %v, %v", origins, err)
		}
	})
}

// TestPublicCacheBounded: the cache never holds more than its bound; expired entries go first.
func TestPublicCacheBounded(t *testing.T) {
	t.Parallel()
	var c publicCache
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for i := range maxPublicCacheEntries {
		c.put(fmt.Sprintf("old-%d", i), publicEntry{expires: now.Add(-time.Second)}, now)
	}
	c.put("fresh", publicEntry{expires: now.Add(time.Second)}, now)
	if len(c.entries) != 1 {
		t.Fatalf("after a put into a cache full of expired entries: %d entries, want 1", len(c.entries))
	}
	for i := range 2 * maxPublicCacheEntries {
		c.put(fmt.Sprintf("t-%d", i), publicEntry{expires: now.Add(time.Second)}, now)
		if len(c.entries) > maxPublicCacheEntries {
			t.Fatalf("%d entries, bound %d", len(c.entries), maxPublicCacheEntries)
		}
	}
	if _, ok := c.entries[fmt.Sprintf("t-%d", 2*maxPublicCacheEntries-1)]; !ok {
		t.Fatal("the latest entry was not kept")
	}
}
