package duejobs_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/duejobs"
	"github.com/casebook/casebook/internal/dbtest"
	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/sqldb"
)

var t0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

// clock is a settable clock shared by a test's stores.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type bundle struct {
	store *duejobs.Store
	clock *clock
}

func setup(t *testing.T, db *sqldb.DB) bundle {
	t.Helper()
	c := &clock{now: t0}
	s, err := duejobs.NewStore(t.Context(), db, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	return bundle{store: s, clock: c}
}

// schedule inserts n follow-up jobs of tenant t1 due at due(i).
func (b bundle) schedule(t *testing.T, n int, due func(i int) time.Time, maxAttempts int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("job-%04d", i)
		j := duejobs.Job{ID: ids[i], Tenant: "t1", Inquiry: domain.InquiryID(fmt.Sprintf("i%d", i)), Kind: domain.KindFollowUp,
			DueAt: due(i), TimeZone: "UTC", PayloadClass: "internal", RecipientPolicy: "owner_watchers", MaxAttempts: maxAttempts}
		if err := duejobs.Schedule(t.Context(), b.store.DB, b.store.DB, j, b.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func ids(jobs []duejobs.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// TestBoundedClaim: a tick claims at most its batch, oldest due first, and never a job that is not
// due yet; scheduling a job twice keeps one.
func TestBoundedClaim(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		b := setup(t, db)
		// 10 due (job-0009 oldest), 5 due in the future.
		b.schedule(t, 15, func(i int) time.Time {
			if i >= 10 {
				return t0.Add(time.Hour)
			}
			return t0.Add(-time.Duration(i+1) * time.Minute)
		}, 0)
		b.schedule(t, 1, func(int) time.Time { return t0 }, 0) // job-0000 again: no change
		got, err := b.store.Claim(t.Context(), "w1", 3, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"job-0009", "job-0008", "job-0007"}; !slices.Equal(ids(got), want) {
			t.Fatalf("claimed %v, want the three oldest %v", ids(got), want)
		}
		for _, j := range got {
			if j.State != duejobs.StateClaimed || j.ClaimOwner != "w1" || j.ClaimToken != 1 || j.Attempts != 1 {
				t.Fatalf("claimed job %+v", j)
			}
		}
		rest, err := b.store.Claim(t.Context(), "w1", 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(rest) != 7 {
			t.Fatalf("second claim got %d jobs, want the 7 remaining due ones", len(rest))
		}
		if more, _ := b.store.Claim(t.Context(), "w1", 100, time.Minute); len(more) != 0 {
			t.Fatalf("claimed jobs not yet due or already claimed: %v", ids(more))
		}
	})
}

// TestOverlappingTicks: many tickers claiming the same due jobs at once each get a disjoint set,
// and together all of them. On Postgres two of them are separate connection pools (replicas).
func TestOverlappingTicks(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		b := setup(t, db)
		const n = 300
		b.schedule(t, n, func(i int) time.Time { return t0.Add(-time.Second) }, 0)
		stores := []*duejobs.Store{b.store, b.store, b.store}
		if db.Dialect == sqldb.Postgres {
			stores = append(stores, replica(t, b))
		}
		var mu sync.Mutex
		seen := map[string]string{}
		var wg sync.WaitGroup
		var dup atomic.Value
		for w, s := range stores {
			for g := range 2 {
				owner := fmt.Sprintf("w%d-%d", w, g)
				wg.Go(func() {
					for {
						got, err := s.Claim(context.Background(), owner, 7, time.Minute)
						if err != nil {
							dup.Store(err.Error())
							return
						}
						if len(got) == 0 {
							return
						}
						mu.Lock()
						for _, j := range got {
							if prev, ok := seen[j.ID]; ok {
								dup.Store(fmt.Sprintf("%s claimed by %s and %s", j.ID, prev, owner))
							}
							seen[j.ID] = owner
						}
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		if v := dup.Load(); v != nil {
			t.Fatal(v)
		}
		if len(seen) != n {
			t.Fatalf("claimed %d distinct jobs, want %d", len(seen), n)
		}
	})
}

// replica opens a second pool on the same Postgres schema: another Casebook replica.
func replica(t *testing.T, b bundle) *duejobs.Store {
	t.Helper()
	var schema string
	if err := b.store.DB.QueryRowContext(t.Context(), `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(os.Getenv(pgtest.EnvVar))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db, err := sqldb.OpenPostgres(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	s, err := duejobs.NewStore(t.Context(), db, b.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestClaimExpiry: a claim that is not completed in time returns to the queue; the next claim is
// fenced with a new token, so the first worker's late completion is refused.
func TestClaimExpiry(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		b := setup(t, db)
		b.schedule(t, 1, func(int) time.Time { return t0 }, 0)
		first, err := b.store.Claim(t.Context(), "crashed", 10, time.Minute)
		if err != nil || len(first) != 1 {
			t.Fatalf("claim: %v %v", first, err)
		}
		b.clock.Advance(59 * time.Second)
		if got, _ := b.store.Claim(t.Context(), "w2", 10, time.Minute); len(got) != 0 {
			t.Fatal("a live claim was taken over")
		}
		if h, _ := b.store.Health(t.Context(), time.Minute); h.ExpiredClaims != 0 {
			t.Fatalf("health before expiry: %+v", h)
		}
		b.clock.Advance(2 * time.Second)
		if h, _ := b.store.Health(t.Context(), time.Minute); h.ExpiredClaims != 1 {
			t.Fatalf("health after expiry: %+v", h)
		}
		second, err := b.store.Claim(t.Context(), "w2", 10, time.Minute)
		if err != nil || len(second) != 1 {
			t.Fatalf("expired claim not reclaimed: %v %v", second, err)
		}
		if j := second[0]; j.ClaimToken != 2 || j.ExpiredClaims != 1 || j.Attempts != 2 || j.ClaimOwner != "w2" {
			t.Fatalf("reclaimed job %+v", j)
		}
		if err := b.store.Complete(t.Context(), first[0], duejobs.OutcomeFired); !errors.Is(err, duejobs.ErrLostClaim) {
			t.Fatalf("stale completion: %v", err)
		}
		if err := b.store.Complete(t.Context(), second[0], duejobs.OutcomeFired); err != nil {
			t.Fatal(err)
		}
		j, _ := b.store.Get(t.Context(), "t1", second[0].ID)
		if j.State != duejobs.StateDone || j.Outcome != duejobs.OutcomeFired {
			t.Fatalf("job %+v", j)
		}
	})
}

// TestRetryBackoff: a failed attempt goes back to pending after its backoff, not before; the
// default backoff doubles with jitter inside [d/2, d].
func TestRetryBackoff(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		b := setup(t, db)
		b.schedule(t, 1, func(int) time.Time { return t0 }, 0)
		var fired atomic.Int32
		tk := &duejobs.Ticker{Store: b.store, Owner: "w", Backoff: func(a int) time.Duration { return time.Duration(a) * time.Minute },
			Fire: func(context.Context, duejobs.Job) (string, error) {
				fired.Add(1)
				return "", errors.New("event store unavailable")
			}}
		for attempt := 1; attempt <= 3; attempt++ {
			res, err := tk.Tick(t.Context())
			if err != nil || res.Retried != 1 {
				t.Fatalf("attempt %d: %+v %v", attempt, res, err)
			}
			j, _ := b.store.Get(t.Context(), "t1", "job-0000")
			if j.State != duejobs.StatePending || j.Attempts != attempt || j.LastError != "event store unavailable" ||
				!j.NextAttemptAt.Equal(b.clock.Now().Add(time.Duration(attempt)*time.Minute)) {
				t.Fatalf("after attempt %d: %+v next %v", attempt, j, j.NextAttemptAt)
			}
			b.clock.Advance(time.Duration(attempt)*time.Minute - time.Second)
			if res, _ := tk.Tick(t.Context()); res.Claimed != 0 {
				t.Fatalf("claimed before its backoff ended")
			}
			b.clock.Advance(time.Second)
		}
		if fired.Load() != 3 {
			t.Fatalf("fired %d times", fired.Load())
		}
	})
	for attempt := 1; attempt <= 12; attempt++ {
		d := min(10*time.Second<<(attempt-1), time.Hour)
		for range 50 {
			if got := duejobs.DefaultBackoff(attempt); got < d/2 || got > d {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", attempt, got, d/2, d)
			}
		}
	}
}

// TestExhaustedDeadLetter: a job that fails on every attempt is dead-lettered after its last one,
// with the reason; a permanent failure is dead-lettered at once. Dead jobs are never claimed.
func TestExhaustedDeadLetter(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		b := setup(t, db)
		b.schedule(t, 1, func(int) time.Time { return t0 }, 3)
		tk := &duejobs.Ticker{Store: b.store, Owner: "w", Backoff: func(int) time.Duration { return time.Second },
			Fire: func(_ context.Context, j duejobs.Job) (string, error) {
				if j.ID == "perm" {
					return "", duejobs.Permanent(errors.New("bad payload"))
				}
				return "", errors.New("timeout")
			}}
		for i := range 3 {
			res, err := tk.Tick(t.Context())
			if err != nil || res.Claimed != 1 {
				t.Fatalf("tick %d: %+v %v", i, res, err)
			}
			if want := i == 2; (res.Dead == 1) != want {
				t.Fatalf("tick %d: %+v", i, res)
			}
			b.clock.Advance(time.Second)
		}
		j, _ := b.store.Get(t.Context(), "t1", "job-0000")
		if j.State != duejobs.StateDead || j.DeadReason != "3 attempts exhausted; last error: timeout" {
			t.Fatalf("job %+v", j)
		}
		perm := duejobs.Job{ID: "perm", Tenant: "t1", Inquiry: "ix", Kind: domain.KindEscalation, DueAt: t0, TimeZone: "UTC",
			PayloadClass: "internal", RecipientPolicy: "escalation_destination"}
		if err := duejobs.Schedule(t.Context(), db, db, perm, b.clock.Now()); err != nil {
			t.Fatal(err)
		}
		if res, _ := tk.Tick(t.Context()); res.Dead != 1 {
			t.Fatalf("permanent failure: %+v", res)
		}
		b.clock.Advance(time.Hour)
		if res, _ := tk.Tick(t.Context()); res.Claimed != 0 {
			t.Fatal("a dead job was claimed")
		}
		h, err := b.store.Health(t.Context(), time.Minute)
		if err != nil || h.Dead != 2 {
			t.Fatalf("health %+v %v", h, err)
		}
	})
}

// TestReviewedManualRecovery: only admins of the job's tenant review; each review needs a reason
// and records actor and reason; retry revives a dead job with fresh attempts, cancel and resolve end
// it; a claimed job cannot be reviewed.
func TestReviewedManualRecovery(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		b := setup(t, db)
		b.schedule(t, 3, func(int) time.Time { return t0 }, 1)
		tk := &duejobs.Ticker{Store: b.store, Owner: "w", Fire: func(context.Context, duejobs.Job) (string, error) {
			return "", errors.New("slack down")
		}}
		if res, _ := tk.Tick(t.Context()); res.Dead != 3 {
			t.Fatalf("setup: %+v", res)
		}
		admin := domain.Principal{ID: "adm", TenantID: "t1", Role: domain.RoleAdmin}
		op := domain.Principal{ID: "op", TenantID: "t1", Role: domain.RoleOperator}
		other := domain.Principal{ID: "adm2", TenantID: "t2", Role: domain.RoleAdmin}
		review := func(p domain.Principal, tenant domain.TenantID, id, action, reason string) (duejobs.Job, error) {
			return b.store.Review(t.Context(), duejobs.Review{Tenant: tenant, JobID: id, Actor: p, Action: action, Reason: reason})
		}
		if _, err := review(op, "t1", "job-0000", duejobs.ReviewRetry, "x"); !errors.Is(err, domain.ErrForbidden) {
			t.Fatalf("operator review: %v", err)
		}
		if _, err := review(other, "t2", "job-0000", duejobs.ReviewRetry, "x"); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("other tenant: %v", err)
		}
		if _, err := review(admin, "t1", "job-0000", duejobs.ReviewRetry, "  "); !errors.Is(err, domain.ErrValidation) {
			t.Fatalf("no reason: %v", err)
		}
		j, err := review(admin, "t1", "job-0000", duejobs.ReviewRetry, "Slack is back")
		if err != nil || j.State != duejobs.StatePending || j.Attempts != 0 || j.DeadReason != "" {
			t.Fatalf("retry: %+v %v", j, err)
		}
		if j, err := review(admin, "t1", "job-0001", duejobs.ReviewCancel, "customer withdrew"); err != nil || j.State != duejobs.StateCancelled {
			t.Fatalf("cancel: %+v %v", j, err)
		}
		if j, err := review(admin, "t1", "job-0002", duejobs.ReviewResolve, "called them by phone"); err != nil || j.State != duejobs.StateResolved {
			t.Fatalf("resolve: %+v %v", j, err)
		}
		if _, err := review(admin, "t1", "job-0002", duejobs.ReviewCancel, "again"); !errors.Is(err, domain.ErrConflict) {
			t.Fatalf("cancel a resolved job: %v", err)
		}
		claimed, _ := b.store.Claim(t.Context(), "w", 10, time.Minute)
		if len(claimed) != 1 || claimed[0].ID != "job-0000" {
			t.Fatalf("retried job not claimable: %v", ids(claimed))
		}
		if _, err := review(admin, "t1", "job-0000", duejobs.ReviewCancel, "x"); !errors.Is(err, domain.ErrConflict) {
			t.Fatalf("review of a claimed job: %v", err)
		}
		h, err := b.store.History(t.Context(), "t1", "job-0000")
		if err != nil {
			t.Fatal(err)
		}
		var actions []string
		for _, e := range h {
			actions = append(actions, e.Action+"/"+e.Actor)
		}
		if want := []string{"claimed/w", "dead/w", "retry/adm", "claimed/w"}; !slices.Equal(actions, want) {
			t.Fatalf("history %v, want %v", actions, want)
		}
		if h[2].Detail != "Slack is back" {
			t.Fatalf("review reason not recorded: %+v", h[2])
		}
		list, err := b.store.List(t.Context(), "t1", duejobs.ListFilter{State: duejobs.StateResolved})
		if err != nil || len(list) != 1 || list[0].ID != "job-0002" {
			t.Fatalf("list resolved: %v %v", list, err)
		}
		if list, _ := b.store.List(t.Context(), "t2", duejobs.ListFilter{}); len(list) != 0 {
			t.Fatalf("another tenant sees %d jobs", len(list))
		}
	})
}

// TestPanickingJobFailsAlone: a job whose firing panics fails (pending again with backoff, its
// error "panic: …" in its state and history) while the other jobs of the same tick fire, and the
// ticker goes on ticking.
func TestPanickingJobFailsAlone(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *sqldb.DB) {
		b := setup(t, db)
		b.schedule(t, 4, func(int) time.Time { return t0 }, 0)
		tk := &duejobs.Ticker{Store: b.store, Owner: "w", Concurrency: 1, Backoff: func(int) time.Duration { return time.Minute },
			Logger: slog.New(slog.DiscardHandler),
			Fire: func(_ context.Context, j duejobs.Job) (string, error) {
				if j.ID == "job-0001" {
					panic("calendar cannot place " + j.ID)
				}
				return duejobs.OutcomeFired, nil
			}}
		res, err := tk.Tick(t.Context())
		if err != nil || res.Claimed != 4 || res.Fired != 3 || res.Retried != 1 {
			t.Fatalf("tick = %+v, %v; want 3 fired and 1 retried", res, err)
		}
		j, err := b.store.Get(t.Context(), "t1", "job-0001")
		if err != nil {
			t.Fatal(err)
		}
		if j.State != duejobs.StatePending || j.LastError != "panic: calendar cannot place job-0001" {
			t.Fatalf("panicking job = %+v", j)
		}
		h, err := b.store.History(t.Context(), "t1", "job-0001")
		if err != nil {
			t.Fatal(err)
		}
		if last := h[len(h)-1]; last.Action != "failed" || !strings.Contains(last.Detail, "panic: calendar cannot place") {
			t.Fatalf("history = %+v, want the failure with the panic", h)
		}
		b.clock.Advance(time.Minute)
		if res, err := tk.Tick(t.Context()); err != nil || res.Claimed != 1 || res.Retried != 1 {
			t.Fatalf("next tick = %+v, %v; want the panicking job retried", res, err)
		}
	})
}
