package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/ratelimit"
)

// visibilityFigures measures the acknowledged-to-visible latency at --rate after its warm-up;
// nil when --rate is off.
func (e *benchEnv) visibilityFigures(ctx context.Context) (*visibility, error) {
	rate := e.o.rate
	if rate.Off {
		return nil, nil
	}
	if err := analyze(ctx, e.a); err != nil {
		return nil, err
	}
	t := e.tenant
	var warm *visibility
	if n := int(float64(rate.Events) * e.o.warmup.Seconds() / rate.Per.Seconds()); n > 0 {
		w := measureVisibility(ctx, e.a, e.client, e.base, e.token, t.ID, t.Slug, rate, n, "vis-warmup-", intakeBody)
		warm = &w
	}
	v := measureVisibility(ctx, e.a, e.client, e.base, e.token, t.ID, t.Slug, rate, e.o.visN, "vis-", intakeBody)
	v.Warmup = warm
	return &v, nil
}

// visibility is the latency from an intake's acknowledgement to the moment GET
// /v1/inquiries/{id} returns it, at a fixed offered rate.
type visibility struct {
	OfferedPerSecond float64 `json:"offered_per_second"`
	AchievedPerSec   float64 `json:"achieved_per_second"`
	Intakes          result  `json:"intake"`
	// Visible is measured on every other intake: the query model has applied the intake's own
	// event and a plain GET returned it. Applied is the same intakes' delay until the wait for the
	// query model ended, before that GET.
	Visible result `json:"ack_to_visible"`
	Applied result `json:"ack_to_applied"`
	// ConsistentRead is measured on the others: a GET with consistent=true, which also waits for
	// every event committed before it arrived (a client's read-your-writes).
	ConsistentRead result `json:"ack_to_consistent_read"`
	Skipped        int64  `json:"skipped"` // not sent: too many in flight (the server fell behind)
	// Warmup is the same measurement over the warm-up that precedes it, not counted above: a
	// process's first second of such reads runs slower than the next (on Postgres at 250/s, p99
	// 175–208 ms against 19–53 ms), and the figures are of the steady state.
	Warmup *visibility `json:"warmup,omitempty"`
}

// measureVisibility offers count intakes at rate (open loop: each is sent when due, whatever the
// server's pace, up to 256 in flight; the client keeps as many connections) and measures two
// delays from each acknowledgement, on alternate intakes:
//   - ack_to_visible: the bench finds the intake's event on the write side (two indexed reads,
//     counted in the delay), waits in process until the query model has applied it
//     (Runner.WaitFor), then GET /v1/inquiries/{id} must return the inquiry. The figure is an
//     upper bound of the true delay by those reads and one loopback request. ack_to_applied is
//     the same intakes' delay until that wait ended, before the GET (when the bench's reads take
//     longer than the query model, it is theirs).
//   - ack_to_consistent_read: GET /v1/inquiries/{id}?consistent=true, which answers once the query
//     model has applied the log's head as of the request's arrival, so it also waits for the
//     events appended between the acknowledgement and that arrival.
//
// A 503 (the query model has not caught up within the server's wait) says retry: the delay keeps
// counting until the inquiry is served, for at most a minute.
func measureVisibility(ctx context.Context, a *app.App, client *http.Client, base, token string, tenant domain.TenantID, slug string,
	rate ratelimit.Rate, count int, keys string, body func(int) string) visibility {
	const maxInflight = 256
	interval := rate.Per / time.Duration(rate.Events)
	ack := make([]time.Duration, 0, count)
	vis := make([]time.Duration, 0, count/2+1)
	applyLat := make([]time.Duration, 0, count/2+1)
	cons := make([]time.Duration, 0, count/2+1)
	var mu sync.Mutex
	var errs, skipped atomic.Int64
	var first atomic.Value
	var inflight atomic.Int64
	var wg sync.WaitGroup
	fail := func(err error) {
		errs.Add(1)
		first.CompareAndSwap(nil, err.Error())
	}
	// visible waits for id's first event in the query model, then reads the inquiry once; it
	// returns when the wait ended.
	visible := func(id domain.InquiryID) (time.Time, error) {
		evs, err := a.Store.ReadStream(ctx, eventstore.InquiryStream(tenant, id), 0, 1)
		if err != nil {
			return time.Time{}, err
		}
		if len(evs) == 0 {
			return time.Time{}, fmt.Errorf("inquiry %s acknowledged but its stream is empty", id)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := a.QueryModel().WaitFor(wctx, evs[0].Position); err != nil {
			return time.Time{}, fmt.Errorf("query model did not apply inquiry %s: %w", id, err)
		}
		applied := time.Now()
		_, err = call(client, http.MethodGet, base+"/v1/inquiries/"+string(id), token, nil, "", http.StatusOK)
		return applied, err
	}
	// consistent reads the inquiry with consistent=true until it is served.
	consistent := func(id domain.InquiryID, acked time.Time) error {
		for {
			_, err := call(client, http.MethodGet, base+"/v1/inquiries/"+string(id)+"?consistent=true", token, nil, "", http.StatusOK)
			if err == nil || !lagging(err) || time.Since(acked) > time.Minute {
				return err
			}
		}
	}
	start := time.Now()
	for i := range count {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d) // pacing the offered load, not synchronisation
		}
		if inflight.Load() >= maxInflight {
			skipped.Add(1)
			continue
		}
		inflight.Add(1)
		wg.Go(func() {
			defer inflight.Add(-1)
			key := fmt.Sprint(keys, i)
			t0 := time.Now()
			if _, err := call(client, http.MethodPost, base+"/v1/public/"+slug+"/inquiries", "",
				map[string]string{"Idempotency-Key": key}, body(i), http.StatusAccepted); err != nil {
				fail(err)
				return
			}
			acked := time.Now()
			// The public answer holds only the receipt; the bench finds the id on the write
			// side (one indexed read, counted in the delay).
			id, _, err := a.Commands.FindIntake(ctx, tenant, domain.SourcePublicForm, key)
			var applied time.Time
			if err == nil {
				if i%2 == 0 {
					applied, err = visible(id)
				} else {
					err = consistent(id, acked)
				}
			}
			if err != nil {
				fail(err)
				return
			}
			seen := time.Now()
			mu.Lock()
			ack = append(ack, acked.Sub(t0))
			if i%2 == 0 {
				vis, applyLat = append(vis, seen.Sub(acked)), append(applyLat, applied.Sub(acked))
			} else {
				cons = append(cons, seen.Sub(acked))
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	total := time.Since(start)
	firstErr := first.Load()
	return visibility{
		OfferedPerSecond: float64(rate.Events) / rate.Per.Seconds(),
		AchievedPerSec:   float64(len(ack)) / total.Seconds(),
		Intakes:          summarize(ack, total, errs.Load(), firstErr),
		Visible:          summarize(vis, total, errs.Load(), firstErr),
		Applied:          summarize(applyLat, total, errs.Load(), firstErr),
		ConsistentRead:   summarize(cons, total, errs.Load(), firstErr),
		Skipped:          skipped.Load(),
	}
}
