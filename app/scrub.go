package app

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// The storage clean-up after erasures (the scrub). An erasure answers once its tombstone is
// recorded, its data key destroyed and its attachment rows deleted; the read models redact it a
// moment later, in their own transactions. The bytes those writes overwrote can outlive them in
// the database's files: on SQLite in page images the write-ahead log still holds (secure_delete
// zeroes them in the database file itself, and in free pages), on Postgres in dead row versions.
// So, in the background and never inside a request, once every subscriber that holds personal
// data has applied the erasure, Serve's scrub loop truncates SQLite's log to nothing
// (sqldb.DB.TruncateLog) or VACUUMs the Postgres tables that held the inquiry (sqldb.DB.Vacuum).
// Erasures that come while a scrub runs are covered by the next one (batched).
const (
	// ScrubAttempts bounds the attempts of one scrub: readers inside SQLite's log (a long export)
	// make an attempt give up, and a subscriber that does not apply the erasure within ScrubWait
	// makes it fail. The next erasure starts a new scrub.
	ScrubAttempts = 12
	// ScrubBackoff is the pause after a first failed attempt; it doubles up to MaxScrubBackoff.
	ScrubBackoff    = 50 * time.Millisecond
	MaxScrubBackoff = 10 * time.Second
	// ScrubWait bounds an attempt's wait for the subscribers that hold personal data.
	ScrubWait = time.Minute
	// VacuumSpacing is the least time between two scrubs on Postgres (VACUUM reads whole tables):
	// erasures within it are vacuumed together. SQLite's truncation is spaced by SQLiteScrubSpacing.
	VacuumSpacing      = time.Minute
	SQLiteScrubSpacing = time.Second
)

// scrubTables are the tables besides the personal subscribers' own that erasures overwrite or
// delete from: the data keys, the attachments and (legacy events redacted in place) the events.
var scrubTables = []string{"inquiry_keys", "inquiry_attachments", "events"}

// ErasureScrubStats reports the scrubs after erasures.
type ErasureScrubStats struct {
	Requested uint64 `json:"requested"` // subscriber batches with an erasure that asked for a scrub
	Completed uint64 `json:"completed"` // scrubs done
	Retried   uint64 `json:"retried"`   // attempts that failed and were tried again
	GaveUp    uint64 `json:"gave_up"`   // scrubs abandoned after ScrubAttempts
	// Through is the log position every erasure at or before which is scrubbed.
	Through eventstore.Position `json:"through"`
	// Vacuumed names the Postgres tables the last scrub vacuumed.
	Vacuumed []string `json:"vacuumed,omitempty"`
}

// erasureScrub is the scrub loop's state.
type erasureScrub struct {
	kick    chan struct{} // a scrub is asked for (coalesced)
	mu      sync.Mutex
	stats   ErasureScrubStats
	changed chan struct{} // closed and replaced whenever stats change
}

func newErasureScrub() *erasureScrub {
	return &erasureScrub{kick: make(chan struct{}, 1), changed: make(chan struct{})}
}

// request asks for a scrub; it never blocks.
func (s *erasureScrub) request() {
	s.update(func(st *ErasureScrubStats) { st.Requested++ })
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *erasureScrub) update(fn func(*ErasureScrubStats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(&s.stats)
	close(s.changed)
	s.changed = make(chan struct{})
}

// ErasureScrubs reports the scrubs after erasures.
func (a *App) ErasureScrubs() ErasureScrubStats {
	a.scrub.mu.Lock()
	defer a.scrub.mu.Unlock()
	return a.scrub.stats
}

// WaitErasuresScrubbed blocks until a scrub has covered every erasure at or before log position p
// (ErasureScrubStats.Through), or ctx ends.
func (a *App) WaitErasuresScrubbed(ctx context.Context, p eventstore.Position) error {
	for {
		a.scrub.mu.Lock()
		through, ch := a.scrub.stats.Through, a.scrub.changed
		a.scrub.mu.Unlock()
		if !through.Less(p) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// runScrubs runs a scrub after each request until ctx ends (Serve).
func (a *App) runScrubs(ctx context.Context) {
	spacing := SQLiteScrubSpacing
	if a.DB.Dialect == sqldb.Postgres {
		spacing = VacuumSpacing
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.scrub.kick:
		}
		a.scrubWithRetries(ctx)
		if !sleep(ctx, spacing) {
			return
		}
	}
}

// sleep waits d or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// errReadersInLog: readers stayed inside SQLite's write-ahead log; the truncation is retried.
var errReadersInLog = errors.New("readers stayed inside the write-ahead log")

func (a *App) scrubWithRetries(ctx context.Context) {
	backoff := ScrubBackoff
	for attempt := 1; ; attempt++ {
		through, vacuumed, err := a.scrubOnce(ctx)
		if err == nil {
			a.scrub.update(func(st *ErasureScrubStats) {
				st.Completed++
				st.Vacuumed = vacuumed
				if st.Through.Less(through) {
					st.Through = through
				}
			})
			return
		}
		if ctx.Err() != nil {
			return
		}
		if attempt == ScrubAttempts {
			a.scrub.update(func(st *ErasureScrubStats) { st.GaveUp++ })
			a.Config.Logger.Warn("storage clean-up after erasures gave up; the next erasure tries again", "attempts", attempt, "err", err)
			return
		}
		a.scrub.update(func(st *ErasureScrubStats) { st.Retried++ })
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, MaxScrubBackoff)
	}
}

// scrubOnce waits for the subscribers that hold personal data to apply the log as it stands, then
// truncates SQLite's log or vacuums the Postgres tables; through is the position it covered.
func (a *App) scrubOnce(ctx context.Context) (through eventstore.Position, vacuumed []string, err error) {
	head, err := a.Store.Head(ctx)
	if err != nil {
		return through, nil, err
	}
	tables := append([]string(nil), scrubTables...)
	wctx, cancel := context.WithTimeout(ctx, ScrubWait)
	defer cancel()
	for _, r := range a.Runners {
		if !projections.ReadsPersonalData(r.Projection) {
			continue
		}
		if err := r.WaitFor(wctx, head); err != nil {
			return through, nil, err
		}
		tables = append(tables, r.Projection.Tables()...)
	}
	if a.DB.Dialect == sqldb.Postgres {
		vacuumed, err = a.DB.Vacuum(ctx, tables)
		return head, vacuumed, err
	}
	done, err := a.DB.TruncateLog(ctx)
	if err == nil && !done {
		err = errReadersInLog
	}
	return head, nil, err
}

// scrubCollector exports ErasureScrubStats to Prometheus.
type scrubCollector struct{ a *App }

var descScrubs = prometheus.NewDesc("casebook_erasure_scrubs_total",
	"Storage clean-ups after erasures (SQLite log truncation, Postgres VACUUM), by outcome: requested, completed, retried (an attempt failed), gave_up.",
	[]string{"outcome"}, nil)

func (c scrubCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descScrubs }

func (c scrubCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.a.ErasureScrubs()
	for outcome, n := range map[string]uint64{"requested": s.Requested, "completed": s.Completed, "retried": s.Retried, "gave_up": s.GaveUp} {
		ch <- prometheus.MustNewConstMetric(descScrubs, prometheus.CounterValue, float64(n), outcome)
	}
}
