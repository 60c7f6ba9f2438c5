package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/coalesce"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// MaxReadyLag is the age of the oldest unapplied event past which a subscriber counts as stalled.
const MaxReadyLag = 60 * time.Second

// WriterStuckAfter is how long one write transaction may hold the SQLite writer lane before Ready
// fails. A healthy transaction holds it for milliseconds (an append batch, a subscriber batch, a
// bounded checkpoint); five seconds is far past any of them on a loaded machine, yet short enough
// that a load balancer stops sending writes that would only queue behind a stuck one.
const WriterStuckAfter = 5 * time.Second

// SubscriberStallAfter is how long a subscriber that is behind the log may go without advancing
// its checkpoint before Ready fails. Its batches commit every 50 ms or so; ten seconds leaves room
// for a batch that waits on a busy writer lane or on Postgres' lock timeouts (a batch that takes
// longer than that is a fault in itself), and for the seconds a replica takes to take a lease over.
const SubscriberStallAfter = 10 * time.Second

// writerProbeTimeout bounds Ready's probe of the Postgres write path: the probe needs a pooled
// connection and the lock that appends take on the events table, each of which a healthy server
// grants in milliseconds. It also bounds Ready's read of the log's head.
const writerProbeTimeout = 2 * time.Second

// readiness is what Ready remembers between calls: when it first saw the writer lane's current turn
// and each subscriber's current position, on Config.Now's clock. A subscriber's LagSeconds is
// computed only when it commits a batch, so it says nothing about one that stopped committing.
type readiness struct {
	mu       sync.Mutex
	turn     uint64
	turnSeen time.Time
	subs     map[string]progressSeen
	probes   coalesce.Group[struct{}, struct{}] // the Postgres writer probes
}

type progressSeen struct {
	at   eventstore.Position
	seen time.Time
}

// Ready reports whether this process can serve: the write path is moving (a SQLite writer has not
// held the writer lane for WriterStuckAfter; on Postgres a probe transaction takes the appends'
// lock within writerProbeTimeout), and every subscriber has caught up with the log since it
// started (a projection rebuilding from scratch is not ready), runs the code's version, is not
// stalled MaxReadyLag behind, and has not stood still for SubscriberStallAfter while behind. The
// error names every check that failed. It is called by /readyz; /healthz stays a liveness check.
func (a *App) Ready() error {
	now := a.Config.Now()
	var reasons []string
	if r := a.writerReady(now); r != "" {
		reasons = append(reasons, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), writerProbeTimeout)
	defer cancel()
	head, headErr := a.committedHead(ctx)
	a.ready.mu.Lock()
	defer a.ready.mu.Unlock()
	if a.ready.subs == nil {
		a.ready.subs = map[string]progressSeen{}
	}
	for _, r := range a.Runners {
		st := r.Status()
		switch {
		case st.State == projections.StateRebuildRequired:
			reasons = append(reasons, fmt.Sprintf("projection %s needs a rebuild (stored version %d, code version %d)", st.Name, st.Version, st.CodeVersion))
			continue
		case !st.EverCaughtUp:
			reasons = append(reasons, fmt.Sprintf("projection %s is catching up", st.Name))
			continue
		case st.LagSeconds > MaxReadyLag.Seconds():
			reasons = append(reasons, fmt.Sprintf("projection %s is stalled %.0fs behind", st.Name, st.LagSeconds))
			continue
		}
		// Only the owner's position moves here; another replica's runner reports its own.
		if headErr != nil || !st.Owner || !st.Position.Less(head) {
			delete(a.ready.subs, st.Name)
			continue
		}
		seen, ok := a.ready.subs[st.Name]
		if !ok || seen.at != st.Position {
			seen = progressSeen{at: st.Position, seen: now}
			a.ready.subs[st.Name] = seen
		}
		if still := now.Sub(seen.seen); still >= SubscriberStallAfter {
			reasons = append(reasons, fmt.Sprintf("projection %s has not advanced for %s while behind the log (at %v, head %v)",
				st.Name, still.Round(time.Second), st.Position, head))
		}
	}
	if headErr != nil {
		reasons = append(reasons, fmt.Sprintf("cannot read the log's head: %v", headErr))
	}
	if len(reasons) == 0 {
		return nil
	}
	return errors.New(strings.Join(reasons, "; "))
}

// writerReady checks the write path; it returns why it is stuck, or "".
func (a *App) writerReady(now time.Time) string {
	if a.DB.Dialect == sqldb.Postgres {
		return a.probePostgresWriter()
	}
	lane := a.DB.WriterLane() // the file's gate, shared by the subscribers' handle
	a.ready.mu.Lock()
	defer a.ready.mu.Unlock()
	if !lane.Held {
		return ""
	}
	if lane.Turn != a.ready.turn {
		a.ready.turn, a.ready.turnSeen = lane.Turn, now
	}
	// Either clock may tell first: the lane's own (from the turn's start) or Config.Now's (from
	// the first time Ready saw this turn).
	held := max(lane.HeldFor, now.Sub(a.ready.turnSeen))
	if held < WriterStuckAfter {
		return ""
	}
	return fmt.Sprintf("writer stuck: one SQLite write transaction has held the writer lane for %s (%d writers waiting)",
		held.Round(time.Second), lane.Waiting)
}

// probePostgresWriter begins a transaction and takes the lock an append takes on the events table
// (ROW EXCLUSIVE; KurrentDB mode has no such table), each within writerProbeTimeout, then rolls
// back: it writes nothing. Concurrent callers (a burst of /readyz requests) share one probe that
// began after they asked, so a caller may wait for the probe in flight and then its own.
func (a *App) probePostgresWriter() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*writerProbeTimeout)
	defer cancel()
	_, err := a.ready.probes.Do(ctx, struct{}{}, a.probeWriter)
	if err == nil {
		return ""
	}
	return fmt.Sprintf("writer stuck: a probe transaction could not take the appends' lock within %s: %v", writerProbeTimeout, err)
}

func (a *App) probeWriter(ctx context.Context) (struct{}, error) {
	ctx, cancel := context.WithTimeout(ctx, writerProbeTimeout)
	defer cancel()
	errProbe := errors.New("probe done") // rolls the probe back
	err := sqldb.InTx(ctx, a.DB, func(tx *sql.Tx) error {
		q := `SELECT 1`
		if a.Config.EventStoreURL == "" {
			q = `LOCK TABLE events IN ROW EXCLUSIVE MODE`
		}
		if _, err := tx.ExecContext(ctx, `SET LOCAL lock_timeout = `+fmt.Sprint(writerProbeTimeout.Milliseconds())); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
		return errProbe
	})
	if errors.Is(err, errProbe) {
		return struct{}{}, nil
	}
	return struct{}{}, err
}
