package main

import (
	"bytes"
	"errors"
	"slices"
	"time"

	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/projections"
	"github.com/google/pprof/profile"
)

// report is the bench's JSON output.
func (e *benchEnv) report(rs []round, cpu *cpuReport, vis *visibility, cmds result, lane laneReport) map[string]any {
	lowest := rs[0].Ratio
	for _, r := range rs {
		lowest = min(lowest, r.Ratio)
	}
	return map[string]any{
		"storage": e.a.Mode(), "concurrency": e.o.conc, "intakes_per_round": e.o.n,
		"rounds":         rs,
		"lowest_ratio":   lowest,
		"baseline":       baselineKind(e.a.Mode()),
		"cpu":            cpu,
		"visibility":     vis,
		"commands":       cmds,
		"storage_writes": e.a.StorageStats(),
		"lane":           lane,
	}
}

// cpuReport is the CPU spent per intake during the first Casebook round.
type cpuReport struct {
	ProcessMillis float64 `json:"process_ms_per_intake"`
	// Subscribers maps each subscriber to its CPU per intake and its share of the process's CPU.
	Subscribers map[string]cpuShare `json:"subscribers"`
}

type cpuShare struct {
	Millis float64 `json:"ms_per_intake"`
	Share  float64 `json:"share"`
}

func cpuPerIntake(prof *bytes.Buffer, intakes int) (*cpuReport, error) {
	p, err := profile.Parse(prof)
	if err != nil {
		return nil, err
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, errors.New("no cpu samples")
	}
	var total int64
	by := map[string]int64{}
	for _, s := range p.Sample {
		v := s.Value[idx]
		total += v
		if l := s.Label[projections.ProfileLabel]; len(l) > 0 {
			by[l[0]] += v
		}
	}
	per := func(ns int64) float64 { return float64(ns) / 1e6 / float64(intakes) }
	rep := &cpuReport{ProcessMillis: per(total), Subscribers: map[string]cpuShare{}}
	for name, ns := range by {
		rep.Subscribers[name] = cpuShare{Millis: per(ns), Share: float64(ns) / float64(max(total, 1))}
	}
	return rep, nil
}

// laneSnap is the writer lane's counters and each subscriber's transactions at one moment.
type laneSnap struct {
	storage app.StorageStats
	batches map[string]uint64
	pages   map[string]uint64
}

func snapLane(a *app.App) laneSnap {
	s := laneSnap{storage: a.StorageStats(), batches: map[string]uint64{}, pages: map[string]uint64{}}
	for _, st := range a.ProjectionStatuses() {
		s.batches[st.Name] += st.Batches
		s.pages[st.Name] += st.Pages
	}
	return s
}

// laneReport is the embedded writer lane's work per intake over the Casebook rounds: from before
// the first round until every subscriber had applied their intakes (the baseline rounds between
// them write another file). Unlike req/s these move little with the machine's load.
type laneReport struct {
	Intakes int                   `json:"intakes"`
	Handles map[string]laneHandle `json:"handles"`
	// SubscriberTransactions is each subscriber's transactions per 1,000 intakes.
	SubscriberTransactions map[string]float64 `json:"subscriber_transactions_per_1000"`
	// SubscriberPages is each subscriber's pages written per intake.
	SubscriberPages map[string]float64 `json:"subscriber_pages_per_intake"`
}

type laneHandle struct {
	Transactions float64 `json:"transactions_per_intake"`
	Pages        float64 `json:"pages_per_intake"`      // WAL frames written
	HeldMillis   float64 `json:"held_ms_per_1000"`      // writer lane held
	WaitedMillis float64 `json:"waited_ms_per_1000"`    // waited for the lane
	PagesPerTx   float64 `json:"pages_per_transaction"` // WAL frames per commit
}

func (s laneSnap) since(before laneSnap, intakes int) laneReport {
	per := float64(max(intakes, 1))
	rep := laneReport{Intakes: intakes, Handles: map[string]laneHandle{}, SubscriberTransactions: map[string]float64{}, SubscriberPages: map[string]float64{}}
	for h, g := range s.storage.Gate {
		b := before.storage.Gate[h]
		tx := float64(g.Entered - b.Entered)
		rep.Handles[h] = laneHandle{Transactions: tx / per, Pages: float64(g.Pages-b.Pages) / per,
			HeldMillis: float64(g.Held-b.Held) / 1e6 / per * 1000, WaitedMillis: float64(g.Waited-b.Waited) / 1e6 / per * 1000,
			PagesPerTx: float64(g.Pages-b.Pages) / max(tx, 1)}
	}
	for name, n := range s.batches {
		rep.SubscriberTransactions[name] = float64(n-before.batches[name]) / per * 1000
		rep.SubscriberPages[name] = float64(s.pages[name]-before.pages[name]) / per
	}
	return rep
}

type result struct {
	Requests   int     `json:"requests"`
	Errors     int64   `json:"errors"`
	Seconds    float64 `json:"seconds"`
	PerSecond  float64 `json:"per_second"`
	P50Millis  float64 `json:"p50_ms"`
	P99Millis  float64 `json:"p99_ms"`
	MaxMillis  float64 `json:"max_ms"`
	FirstError string  `json:"first_error,omitempty"`
}

func summarize(lat []time.Duration, total time.Duration, errs int64, first any) result {
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	r := result{Requests: len(lat), Errors: errs, Seconds: total.Seconds(), PerSecond: float64(len(lat)) / total.Seconds(),
		P50Millis: pct(0.50), P99Millis: pct(0.99), MaxMillis: pct(1)}
	if s, ok := first.(string); ok {
		r.FirstError = s
	}
	return r
}
