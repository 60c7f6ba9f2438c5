package tenancy

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/casebook/casebook/domain"
)

// DefaultPublicCacheTTL is how long PublicTenant serves a tenant from memory unless the Store's
// PublicCacheTTL says otherwise.
const DefaultPublicCacheTTL = time.Second

// maxPublicCacheEntries bounds the cache. Only tenants that exist are kept, so URLs cannot grow it
// past the number of tenants; the bound holds anyway.
const maxPublicCacheEntries = 4096

// publicEntry is what PublicTenant returns for one slug, and until when it may be served.
type publicEntry struct {
	tenant  Tenant
	origins []string
	profile Profile
	expires time.Time
}

// clone copies the slices, so no caller can change what the cache serves to the next one.
func (e publicEntry) clone() (Tenant, []string, Profile, error) {
	p := e.profile
	p.Categories = slices.Clone(p.Categories)
	return e.tenant, slices.Clone(e.origins), p, nil
}

// publicFlight is one lookup of a slug that concurrent misses wait for.
type publicFlight struct {
	done  chan struct{}
	gen   uint64 // the cache's generation when the lookup started
	entry publicEntry
	err   error
}

// publicCache holds found tenants by slug. gen moves on every change made through the Store, and
// a lookup that started before a change is neither stored nor joined by later callers.
type publicCache struct {
	mu      sync.Mutex
	gen     uint64
	entries map[string]publicEntry
	flights map[string]*publicFlight
	// Test hooks, nil outside tests: joined runs when a miss joins another's lookup; looking and
	// looked run before and after a joinable lookup reads the database.
	joined, looking, looked func()
}

// PublicTenant finds a tenant by slug with its trusted origins and its public profile, for the
// public form and intake. An unknown slug is domain.ErrNotFound.
//
// With PublicCacheTTL > 0 an answer is served from memory for at most that long from the start of
// the lookup that read it: a change made by another process (another replica, a CLI run) is seen
// within the TTL, one made through this Store at once (its writes drop the slug's entry after they
// commit). Unknown slugs and errors are never kept; concurrent misses of one slug share one lookup.
func (s *Store) PublicTenant(ctx context.Context, slug string) (Tenant, []string, Profile, error) {
	ttl := s.PublicCacheTTL
	if ttl <= 0 {
		e, err := s.lookupPublic(ctx, slug)
		if err != nil {
			return Tenant{}, nil, Profile{}, err
		}
		return e.clone()
	}
	now := s.now()
	c := &s.public
	c.mu.Lock()
	if e, ok := c.entries[slug]; ok && now.Before(e.expires) {
		c.mu.Unlock()
		return e.clone()
	}
	f, joined := c.flights[slug]
	if !joined {
		f = &publicFlight{done: make(chan struct{}), gen: c.gen}
		if c.flights == nil {
			c.flights = make(map[string]*publicFlight)
		}
		c.flights[slug] = f
	}
	c.mu.Unlock()
	if joined {
		if c.joined != nil {
			c.joined()
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return Tenant{}, nil, Profile{}, ctx.Err()
		}
		if f.err == nil {
			return f.entry.clone()
		}
		if errors.Is(f.err, domain.ErrNotFound) {
			return Tenant{}, nil, Profile{}, f.err
		}
		// Another caller's failure (its context, the database) is not this caller's answer.
		e, err := s.lookupPublic(ctx, slug)
		if err != nil {
			return Tenant{}, nil, Profile{}, err
		}
		return e.clone()
	}
	defer close(f.done)
	if c.looking != nil {
		c.looking()
	}
	f.entry, f.err = s.lookupPublic(ctx, slug)
	if c.looked != nil {
		c.looked()
	}
	c.mu.Lock()
	if c.flights[slug] == f {
		delete(c.flights, slug)
	}
	if f.err == nil && c.gen == f.gen && f.entry.tenant.Slug == slug {
		f.entry.expires = now.Add(ttl)
		c.put(slug, f.entry, now)
	}
	c.mu.Unlock()
	if f.err != nil {
		return Tenant{}, nil, Profile{}, f.err
	}
	return f.entry.clone()
}

// put keeps e under slug, making room first when the cache is full: expired entries go, then an
// arbitrary one. The caller holds c.mu.
func (c *publicCache) put(slug string, e publicEntry, now time.Time) {
	if c.entries == nil {
		c.entries = make(map[string]publicEntry)
	}
	if _, ok := c.entries[slug]; !ok && len(c.entries) >= maxPublicCacheEntries {
		for k, old := range c.entries {
			if !now.Before(old.expires) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < maxPublicCacheEntries {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[slug] = e
}

// forgetPublic drops what the cache holds or is looking up for slug; every Store method that
// changes a tenant, its origins or its profile calls it once its write has ended (committed or
// not), so the next PublicTenant reads the database.
func (s *Store) forgetPublic(slug string) {
	c := &s.public
	c.mu.Lock()
	c.gen++
	delete(c.entries, slug)
	delete(c.flights, slug)
	c.mu.Unlock()
}
