package app

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/projections"
)

// Projection returns the registered projection named name.
func (a *App) Projection(name string) (projections.Projection, error) {
	for _, r := range a.Runners {
		if r.Projection.Name() == name {
			return r.Projection, nil
		}
	}
	return nil, fmt.Errorf("projection %q: %w", name, domain.ErrNotFound)
}

// ProjectionStatuses reports every subscriber's health on this replica.
func (a *App) ProjectionStatuses() []projections.Status {
	out := make([]projections.Status, len(a.Runners))
	for i, r := range a.Runners {
		out[i] = r.Status()
	}
	return out
}

// Parked lists a projection's parked streams; with a tenant, only that tenant's streams.
func (a *App) Parked(ctx context.Context, projection string, tenant domain.TenantID) ([]projections.Parked, error) {
	p, err := a.Projection(projection)
	if err != nil {
		return nil, err
	}
	all, err := projections.ListParked(ctx, a.DB, p, "")
	if err != nil || tenant == "" {
		return all, err
	}
	out := []projections.Parked{}
	for _, pk := range all {
		if eventstore.OwnedBy(pk.Stream, tenant) {
			out = append(out, pk)
		}
	}
	return out, nil
}

// RetryParked retries (or, with skip, skips the failing event of) a parked stream. With a tenant,
// another tenant's stream is domain.ErrNotFound. It returns the stream if it is still parked.
func (a *App) RetryParked(ctx context.Context, projection string, tenant domain.TenantID, stream string, skip bool) (*projections.Parked, error) {
	p, err := a.Projection(projection)
	if err != nil {
		return nil, err
	}
	if tenant != "" && !eventstore.OwnedBy(stream, tenant) {
		return nil, fmt.Errorf("parked stream: %w", domain.ErrNotFound)
	}
	still, err := projections.Retry(ctx, a.DB, a.Store, p, stream, skip, a.Config.Now())
	if errors.Is(err, projections.ErrNotParked) {
		return nil, fmt.Errorf("parked stream: %w", domain.ErrNotFound)
	}
	if still == nil {
		a.Config.Logger.InfoContext(ctx, "parked stream released", "projection", projection, "skip", skip)
	}
	return still, err
}

// projectionCollector exports subscriber health to Prometheus on each scrape.
type projectionCollector struct{ a *App }

var (
	descLagEvents  = prometheus.NewDesc("casebook_projection_lag_events", "Events after the subscriber's checkpoint (-1: unknown).", []string{"projection"}, nil)
	descLagSeconds = prometheus.NewDesc("casebook_projection_lag_seconds", "Age of the oldest event the subscriber has not applied.", []string{"projection"}, nil)
	descParked     = prometheus.NewDesc("casebook_projection_parked_streams", "Streams parked after handler errors.", []string{"projection"}, nil)
	descProcessed  = prometheus.NewDesc("casebook_projection_processed_events_total", "Events applied by this replica.", []string{"projection"}, nil)
	descOwner      = prometheus.NewDesc("casebook_projection_owner", "1 if this replica holds the subscriber's lease.", []string{"projection"}, nil)
	descHeartbeat  = prometheus.NewDesc("casebook_projection_heartbeat_timestamp_seconds", "When the subscriber last made progress or checked in.", []string{"projection"}, nil)
	descRebuild    = prometheus.NewDesc("casebook_projection_rebuild_required", "1 if the stored generation was built by another code version.", []string{"projection"}, nil)
	descFailing    = prometheus.NewDesc("casebook_projection_failing", "1 if the subscriber's last attempt failed.", []string{"projection"}, nil)
)

func (c projectionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLagEvents, descLagSeconds, descParked, descProcessed, descOwner, descHeartbeat, descRebuild, descFailing} {
		ch <- d
	}
}

func (c projectionCollector) Collect(ch chan<- prometheus.Metric) {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	for _, s := range c.a.ProjectionStatuses() {
		ch <- prometheus.MustNewConstMetric(descLagEvents, prometheus.GaugeValue, float64(s.LagEvents), s.Name)
		ch <- prometheus.MustNewConstMetric(descLagSeconds, prometheus.GaugeValue, s.LagSeconds, s.Name)
		ch <- prometheus.MustNewConstMetric(descParked, prometheus.GaugeValue, float64(s.Parked), s.Name)
		ch <- prometheus.MustNewConstMetric(descProcessed, prometheus.CounterValue, float64(s.Processed), s.Name)
		ch <- prometheus.MustNewConstMetric(descOwner, prometheus.GaugeValue, b(s.Owner), s.Name)
		ch <- prometheus.MustNewConstMetric(descHeartbeat, prometheus.GaugeValue, float64(s.Heartbeat.UnixNano())/1e9, s.Name)
		ch <- prometheus.MustNewConstMetric(descRebuild, prometheus.GaugeValue, b(s.State == projections.StateRebuildRequired), s.Name)
		ch <- prometheus.MustNewConstMetric(descFailing, prometheus.GaugeValue, b(s.LastError != ""), s.Name)
	}
}

// CatchUp runs every subscriber until it has applied the log as of the call, then stops them: for
// one-shot tools and tests (a server runs them continuously).
func (a *App) CatchUp(ctx context.Context) error {
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for _, r := range a.Runners {
		wg.Go(func() { _ = r.Run(runCtx) })
	}
	return a.WaitCaughtUp(ctx)
}

// WaitCaughtUp waits until every subscriber, running (Serve, CatchUp), has applied the log as it
// stands at the call, or ctx ends. Runners retry their failures themselves, so the error of one
// that did not catch up says where it stands: its position against the head, state, ownership,
// parked streams and last error.
func (a *App) WaitCaughtUp(ctx context.Context) error {
	head, err := a.Store.Head(ctx)
	if err != nil {
		return err
	}
	for _, r := range a.Runners {
		if err := r.WaitFor(ctx, head); err != nil {
			st := r.Status()
			return fmt.Errorf("projection %s did not catch up (at %v of %v, state %s, owner %t, %d parked, last error %q): %w",
				r.Projection.Name(), st.Position, head, st.State, st.Owner, st.Parked, st.LastError, err)
		}
	}
	return nil
}
