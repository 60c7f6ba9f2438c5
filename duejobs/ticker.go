package duejobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/casebook/casebook/domain"
)

// FireFunc runs one claimed job: it re-reads the inquiry and appends the job's event, or finds that
// the job's reason has gone. It returns the outcome recorded on the job (OutcomeFired,
// OutcomeMovedOn). An error wrapped with Permanent dead-letters the job at once; any other error is
// retried with backoff.
type FireFunc func(ctx context.Context, j Job) (string, error)

// Outcomes of a job that ran.
const (
	OutcomeFired   = "fired"
	OutcomeMovedOn = "moved_on" // the inquiry moved on (cancelled, resolved, reassigned, new SLA generation)
)

type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// Permanent marks err as not worth retrying.
func Permanent(err error) error { return permanent{err} }

// IsPermanent reports whether err was marked Permanent, or is a domain error that a retry cannot
// change (validation, not found, forbidden).
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p) || errors.Is(err, domain.ErrValidation) || errors.Is(err, domain.ErrNotFound) ||
		errors.Is(err, domain.ErrForbidden)
}

// Ticker claims and runs due jobs. Several tickers (goroutines, processes, replicas) may run at once
// on one store: the claim is the only coordination.
type Ticker struct {
	Store *Store
	Fire  FireFunc
	// Owner names this ticker in claims and history (unique per process).
	Owner string
	// Batch bounds the jobs one tick claims (default 100); Concurrency how many run at once (4).
	Batch       int
	Concurrency int
	// ClaimTTL is how long a claim holds before another ticker may take the job over (default 1m).
	ClaimTTL time.Duration
	// Backoff returns the delay before retry number attempt (1 is the first retry); the default
	// doubles from 10s up to 1h with "equal jitter" (a uniform delay in [d/2, d]).
	Backoff func(attempt int) time.Duration
	Logger  *slog.Logger
	// OnTick is called after every tick with its result (metrics).
	OnTick func(TickResult)
}

// TickResult counts what one tick did.
type TickResult struct {
	Claimed, Fired, MovedOn, Retried, Dead, LostClaims int
}

// DefaultBackoff doubles from 10 s up to an hour, with equal jitter.
func DefaultBackoff(attempt int) time.Duration {
	d := 10 * time.Second << min(max(attempt-1, 0), 9)
	d = min(d, time.Hour)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1)) //nolint:gosec // jitter spreads retries; it guards nothing
}

func (t *Ticker) logger() *slog.Logger {
	if t.Logger != nil {
		return t.Logger
	}
	return slog.Default()
}

// Tick claims one batch and runs it. It returns after every claimed job has been completed,
// rescheduled or dead-lettered (or its claim was found lost).
func (t *Ticker) Tick(ctx context.Context) (TickResult, error) {
	batch, ttl, conc := t.Batch, t.ClaimTTL, t.Concurrency
	if batch <= 0 {
		batch = 100
	}
	if ttl <= 0 {
		ttl = time.Minute
	}
	if conc <= 0 {
		conc = 4
	}
	backoff := t.Backoff
	if backoff == nil {
		backoff = DefaultBackoff
	}
	jobs, err := t.Store.Claim(ctx, t.Owner, batch, ttl)
	res := TickResult{Claimed: len(jobs)}
	if err != nil || len(jobs) == 0 {
		return res, err
	}
	// One inquiry's jobs run on one worker, one after another: they append to the same stream, so
	// running them at once would only make them lose the expected-revision race to each other.
	groups := byInquiry(jobs)
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan []Job)
	for range min(conc, len(groups)) {
		wg.Go(func() {
			for g := range next {
				for _, j := range g {
					r := t.run(ctx, j, backoff)
					mu.Lock()
					res.Fired += r.Fired
					res.MovedOn += r.MovedOn
					res.Retried += r.Retried
					res.Dead += r.Dead
					res.LostClaims += r.LostClaims
					mu.Unlock()
				}
			}
		})
	}
	for _, g := range groups {
		next <- g
	}
	close(next)
	wg.Wait()
	if t.OnTick != nil {
		t.OnTick(res)
	}
	return res, ctx.Err()
}

// byInquiry groups jobs by tenant and inquiry, keeping the claim order within and across groups.
func byInquiry(jobs []Job) [][]Job {
	type key struct{ tenant, inquiry string }
	at := map[key]int{}
	var groups [][]Job
	for _, j := range jobs {
		k := key{string(j.Tenant), string(j.Inquiry)}
		i, ok := at[k]
		if !ok {
			i = len(groups)
			at[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], j)
	}
	return groups
}

func (t *Ticker) run(ctx context.Context, j Job, backoff func(int) time.Duration) TickResult {
	var r TickResult
	outcome, ferr := t.fire(ctx, j)
	var err error
	if ferr == nil {
		err = t.Store.Complete(ctx, j, outcome)
		if outcome == OutcomeFired {
			r.Fired++
		} else {
			r.MovedOn++
		}
	} else {
		if ctx.Err() != nil {
			return r // stopping: the claim expires and another tick retries
		}
		var st State
		st, err = t.Store.Fail(ctx, j, ferr, !IsPermanent(ferr), t.Store.Now().Add(backoff(j.Attempts)))
		if st == StateDead {
			r.Dead++
			t.logger().Warn("due job dead-lettered", "job_id", j.ID, "tenant", string(j.Tenant), "kind", j.Kind, "attempts", j.Attempts, "err", ferr)
		} else {
			r.Retried++
		}
	}
	if errors.Is(err, ErrLostClaim) {
		r = TickResult{LostClaims: 1}
		t.logger().Info("due job claim lost", "job_id", j.ID, "token", j.ClaimToken)
	} else if err != nil && ctx.Err() == nil {
		t.logger().Error("due job outcome not recorded; the claim expires and the job runs again", "job_id", j.ID, "err", err)
	}
	return r
}

// fire is t.Fire with a panic returned as a retryable error, "panic: <value>" (the stack goes to
// the log): one job's bug fails that job, visibly in its state and history, and backs off like
// any failure until it is dead-lettered; the tick goes on with the other jobs.
func (t *Ticker) fire(ctx context.Context, j Job) (outcome string, err error) {
	defer func() {
		if v := recover(); v != nil {
			t.logger().Error("due job panicked", "job_id", j.ID, "tenant", string(j.Tenant), "kind", j.Kind,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			outcome, err = "", fmt.Errorf("panic: %v", v)
		}
	}()
	return t.Fire(ctx, j)
}

// Run ticks every interval until ctx ends. A tick that claimed a full batch is followed at once by
// another, so a backlog drains without waiting for the interval.
func (t *Ticker) Run(ctx context.Context, every time.Duration) {
	batch := t.Batch
	if batch <= 0 {
		batch = 100
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		res, err := t.Tick(ctx)
		if err != nil && ctx.Err() == nil {
			t.logger().Error("due-job tick failed", "err", err)
		}
		if res.Claimed >= batch && err == nil {
			timer.Reset(0)
		} else {
			timer.Reset(every)
		}
	}
}
