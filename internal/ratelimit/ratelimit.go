// Package ratelimit limits requests per key (a client, a tenant) with token buckets
// (golang.org/x/time/rate). State is in memory, per process: with several replicas each enforces
// its own budget, so a client's effective limit is the configured one times the replica count. That
// is the chosen trade-off: no shared store on the hot path, and a limit that stays an upper bound on
// what one replica accepts.
package ratelimit

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rate is a sustained rate (Events per Per) with a Burst. Off disables limiting.
type Rate struct {
	Events int
	Per    time.Duration
	Burst  int
	Off    bool
}

// ParseRate reads "N/s", "N/m", "N/h" or "off". The burst is set separately.
func ParseRate(spec string) (Rate, error) {
	spec = strings.TrimSpace(spec)
	if spec == "off" {
		return Rate{Off: true}, nil
	}
	n, unit, ok := strings.Cut(spec, "/")
	per := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[unit]
	events, err := strconv.Atoi(n)
	if !ok || per == 0 || err != nil || events < 1 {
		return Rate{}, fmt.Errorf("rate %q: want N/s, N/m, N/h (N ≥ 1) or off", spec)
	}
	return Rate{Events: events, Per: per}, nil
}

func (r Rate) String() string {
	if r.Off {
		return "off"
	}
	unit := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[r.Per]
	if unit == "" {
		return fmt.Sprintf("%d/%s", r.Events, r.Per)
	}
	return fmt.Sprintf("%d/%s", r.Events, unit)
}

// interval is the time to earn one token.
func (r Rate) interval() time.Duration { return r.Per / time.Duration(r.Events) }

// DefaultMaxKeys bounds the keys a Keyed limiter tracks.
const DefaultMaxKeys = 100_000

// Keyed holds one token bucket per key. Buckets idle long enough to have refilled are dropped, since
// a fresh bucket behaves the same. When MaxKeys buckets are all in use a new key is refused (fail
// closed): memory stays bounded under a flood of distinct keys.
type Keyed struct {
	rate    Rate
	now     func() time.Time
	maxKeys int

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// New returns a limiter for r; now is its clock (nil: time.Now). A Rate that is Off allows all.
func New(r Rate, now func() time.Time) *Keyed {
	if now == nil {
		now = time.Now
	}
	if r.Burst < 1 {
		r.Burst = 1
	}
	return &Keyed{rate: r, now: now, maxKeys: DefaultMaxKeys, buckets: map[string]*bucket{}}
}

// SetMaxKeys changes the bound on tracked keys (for tests and small deployments).
func (k *Keyed) SetMaxKeys(n int) { k.mu.Lock(); k.maxKeys = n; k.mu.Unlock() }

// Allow takes one token from key's bucket. When it refuses, retry is how long until a token will be
// available.
func (k *Keyed) Allow(key string) (ok bool, retry time.Duration) { return k.AllowN(key, 1) }

// AllowN takes n tokens from key's bucket, all or none (a byte budget takes a read's bytes). n
// above the burst is never allowed; retry is then one interval.
func (k *Keyed) AllowN(key string, n int) (ok bool, retry time.Duration) {
	if k == nil || k.rate.Off {
		return true, 0
	}
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.buckets[key]
	if b == nil {
		refill := k.rate.interval() * time.Duration(k.rate.Burst)
		if len(k.buckets) >= k.maxKeys || now.Sub(k.lastSweep) >= refill {
			k.sweep(now, refill)
		}
		if len(k.buckets) >= k.maxKeys {
			return false, k.rate.interval()
		}
		b = &bucket{lim: rate.NewLimiter(rate.Every(k.rate.interval()), k.rate.Burst)}
		k.buckets[key] = b
	}
	b.seen = now
	res := b.lim.ReserveN(now, n)
	if !res.OK() {
		return false, k.rate.interval()
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sweep drops buckets idle for at least refill: they are full again.
func (k *Keyed) sweep(now time.Time, refill time.Duration) {
	k.lastSweep = now
	for key, b := range k.buckets {
		if now.Sub(b.seen) >= refill {
			delete(k.buckets, key)
		}
	}
}

// Len reports how many keys are tracked.
func (k *Keyed) Len() int { k.mu.Lock(); defer k.mu.Unlock(); return len(k.buckets) }
