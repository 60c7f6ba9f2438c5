package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/casebook/casebook/app"
)

func intakeBody(i int) string {
	return fmt.Sprintf(`{"name":"Bench %d","email":"bench%d@example.com","subject":"Bench","message":"Load test %d"}`, i, i, i)
}

// post sends intake i with idempotency key key to the public intake of the server at baseURL.
func (e *benchEnv) post(baseURL, key string, i int) error {
	_, err := call(e.client, http.MethodPost, baseURL+"/v1/public/"+e.tenant.Slug+"/inquiries", "",
		map[string]string{"Idempotency-Key": key}, intakeBody(i), http.StatusAccepted)
	return err
}

// intakeRounds runs the rounds of Casebook then baseline (and the held round with --intake-only),
// with a CPU profile of the first Casebook round.
func (e *benchEnv) intakeRounds(ctx context.Context) ([]round, *cpuReport, error) {
	var rs []round
	var cpu *cpuReport
	if err := waitAllCaughtUp(ctx, e.a); err != nil {
		return nil, nil, err
	}
	e.laneBefore = snapLane(e.a)
	for r := range e.o.rounds {
		if r > 0 {
			if err := analyze(ctx, e.a); err != nil {
				return nil, nil, err
			}
		}
		rd, err := e.intakeRound(ctx, r, &cpu)
		if err != nil {
			return nil, nil, err
		}
		rs = append(rs, rd)
	}
	return rs, cpu, nil
}

// intakeRound runs round r; the first also sets *cpu from its CPU profile.
func (e *benchEnv) intakeRound(ctx context.Context, r int, cpu **cpuReport) (round, error) {
	var prof bytes.Buffer
	profiling := false
	if r == 0 {
		if err := pprof.StartCPUProfile(&prof); err != nil {
			fmt.Fprintln(e.stderr, "bench: no CPU figures:", err)
		} else {
			profiling = true
		}
	}
	cb := measure(e.o.n, e.o.conc, func(i int) error { return e.post(e.base, fmt.Sprintf("bench-%d-%d", r, i), i) })
	if profiling {
		pprof.StopCPUProfile()
		if e.o.cpuProfile != "" {
			if err := os.WriteFile(e.o.cpuProfile, prof.Bytes(), 0o600); err != nil {
				return round{}, err
			}
		}
		var err error
		if *cpu, err = cpuPerIntake(&prof, cb.Requests); err != nil {
			fmt.Fprintln(e.stderr, "bench: cpu profile:", err)
		}
	}
	// The subscribers apply the round before anything else runs, so that their backlog does not
	// compete with the baseline (or the held round) for the CPU and the disk.
	caughtUp := time.Now()
	if err := waitAllCaughtUp(ctx, e.a); err != nil {
		return round{}, err
	}
	catchUp := time.Since(caughtUp)
	var held *result
	var heldBatches uint64
	if e.o.intakeOnly {
		var err error
		if held, heldBatches, err = e.heldRound(ctx, r); err != nil {
			return round{}, err
		}
	}
	if f, ok := ctx.Value(beforeBaselineKey{}).(func(*app.App)); ok {
		f(e.a)
	}
	bl := measure(e.o.n, e.o.conc, func(i int) error { return e.post(e.baselineURL, fmt.Sprintf("bench-%d-%d", r, i), i) })
	rd := round{Casebook: cb, CatchUpMillis: float64(catchUp.Microseconds()) / 1000, Baseline: bl, Ratio: cb.PerSecond / bl.PerSecond}
	if held != nil {
		rd.IntakeOnly, rd.IntakeOnlyRatio, rd.BatchesWhileHeld = held, held.PerSecond/bl.PerSecond, heldBatches
	}
	return rd, nil
}

// heldRound runs round r's intakes again with every subscriber held, then lets them catch up; it
// returns the figures and the subscriber batches applied while held (0 unless the hold failed).
func (e *benchEnv) heldRound(ctx context.Context, r int) (*result, uint64, error) {
	before := snapLane(e.a)
	e.hold.set(true)
	io := measure(e.o.n, e.o.conc, func(i int) error { return e.post(e.base, fmt.Sprintf("bench-held-%d-%d", r, i), i) })
	during := snapLane(e.a)
	e.hold.set(false)
	if err := waitAllCaughtUp(ctx, e.a); err != nil {
		return nil, 0, err
	}
	var heldBatches uint64
	for name, b := range during.batches {
		heldBatches += b - before.batches[name]
	}
	return &io, heldBatches, nil
}

type round struct {
	Casebook result `json:"casebook"`
	// CatchUpMillis is the time from the end of the round's intakes until every subscriber had
	// applied them; the baseline starts after it.
	CatchUpMillis float64 `json:"catch_up_ms"`
	Baseline      result  `json:"baseline"`
	Ratio         float64 `json:"ratio"`
	// With --intake-only: the same intakes with every subscriber held, against the same baseline.
	IntakeOnly      *result `json:"intake_only,omitempty"`
	IntakeOnlyRatio float64 `json:"intake_only_ratio,omitempty"`
	// Subscriber batches applied while held: 0 unless the hold failed.
	BatchesWhileHeld uint64 `json:"batches_while_held,omitempty"`
}

// beforeBaselineKey carries a test's func(*app.App), called as each round's baseline starts.
type beforeBaselineKey struct{}

func measure(n, conc int, fn func(i int) error) result {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				if err := fn(i); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	return summarize(lat, time.Since(start), errs.Load(), firstErr.Load())
}

func measureInquiries(ids []string, conc int, fn func(id string) error, perItem int) result {
	r := measure(len(ids), conc, func(i int) error { return fn(ids[i]) })
	// Report per command, not per inquiry.
	r.Requests *= perItem
	r.PerSecond *= float64(perItem)
	r.P50Millis /= float64(perItem)
	r.P99Millis /= float64(perItem)
	r.MaxMillis /= float64(perItem)
	return r
}

func call(c *http.Client, method, url, token string, headers map[string]string, body string, want int) ([]byte, error) {
	req, err := http.NewRequest(method, url, bytes.NewBufferString(body))
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return nil, &statusError{Method: method, URL: url, Status: resp.StatusCode, Code: e.Error.Code, Body: b}
	}
	return b, nil
}

// statusError is an answer other than the one expected, with the API's error code.
type statusError struct {
	Method, URL string
	Status      int
	Code        string
	Body        []byte
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: status %d: %s", e.Method, e.URL, e.Status, e.Body)
}

// lagging reports whether err is the API's 503 projection_lagging (retry later).
func lagging(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.Code == "projection_lagging"
}
