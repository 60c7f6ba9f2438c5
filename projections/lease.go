package projections

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/casebook/casebook/internal/sqldb"
)

// ErrLeaseLost is returned when another replica owns the subscriber's lease.
var ErrLeaseLost = errors.New("projection lease lost")

// lease gives one replica at a time the right to run a generation of a subscriber. The owner renews
// it every TTL/3, and a batch renews it too when TTL/3 has passed since the last renewal. Every
// batch's transaction holds the checkpoint's lock (beginBatch: an advisory lock on Postgres, which
// acquire takes too; the write lock on SQLite) and commits nothing unless this replica owns it, so
// a takeover waits for a running batch and a paused former owner can never commit output (fencing). A dead owner's lease expires after
// TTL. Expiry compares the replicas' clocks, so they must be in sync well within TTL.
type lease struct {
	db    *sqldb.DB
	name  string
	owner string
	ttl   time.Duration
	now   func() time.Time

	mu      sync.Mutex
	renewed time.Time // when the last committed renewal started
}

// acquire takes or renews the lease; it reports whether this replica holds it. On Postgres it
// first takes the checkpoint's advisory lock, so it waits for a running batch (see batchBeginFunc).
func (l *lease) acquire(ctx context.Context) (bool, error) {
	now := l.now()
	query := l.db.Rebind(`INSERT INTO projection_leases (name, owner, expires_at) VALUES (?, ?, ?)` + leaseUpsert + `?`)
	if l.db.Dialect == sqldb.Postgres {
		query = `WITH fence AS (SELECT ` + checkpointLock + `)
		INSERT INTO projection_leases (name, owner, expires_at) SELECT $1, $2::text, $3::bigint FROM fence` + leaseUpsert + `$4`
	}
	res, err := l.db.ExecContext(ctx, query, l.name, l.owner, now.Add(l.ttl).UnixNano(), now.UnixNano())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if n == 1 && err == nil {
		l.renewedAt(now)
	}
	return n == 1, err
}

const leaseUpsert = `
	ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
	WHERE projection_leases.owner = excluded.owner OR projection_leases.expires_at < `

// renewal returns the expiry a batch starting at now should renew the lease to, or 0 when the last
// renewal is recent (less than TTL/3 ago) and the batch only checks the lease.
func (l *lease) renewal(now time.Time) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.renewed) < l.ttl/3 {
		return 0
	}
	return now.Add(l.ttl).UnixNano()
}

// renewedAt records a committed renewal that started at t.
func (l *lease) renewedAt(t time.Time) {
	l.mu.Lock()
	if t.After(l.renewed) {
		l.renewed = t
	}
	l.mu.Unlock()
}

// release gives the lease up so another replica can take over at once.
func (l *lease) release(ctx context.Context) {
	_, _ = l.db.ExecContext(ctx, l.db.Rebind(`DELETE FROM projection_leases WHERE name = ? AND owner = ?`), l.name, l.owner)
}

// Lease is a named lease for periodic work that is not a subscriber (the retention sweep): one
// replica at a time holds it; a dead holder's lease expires after its TTL. The holder renews it
// (Acquire again) before each step it must not share, and stops when that fails: a paused holder
// whose lease was taken over does at most the step it was in.
type Lease struct{ l lease }

// NewLease returns the lease name for owner. Names share the subscribers' lease table; use a
// prefix no projection has ("job:").
func NewLease(db *sqldb.DB, name, owner string, ttl time.Duration, now func() time.Time) *Lease {
	if owner == "" {
		owner = newOwnerID()
	}
	if now == nil {
		now = time.Now
	}
	return &Lease{lease{db: db, name: name, owner: owner, ttl: ttl, now: now}}
}

// Acquire takes or renews the lease and reports whether this owner holds it.
func (l *Lease) Acquire(ctx context.Context) (bool, error) { return l.l.acquire(ctx) }

// Release gives the lease up.
func (l *Lease) Release(ctx context.Context) { l.l.release(ctx) }
