package app

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/casebook/casebook/duejobs"
)

// OverdueGrace is how late a pending job may be before it counts as overdue and unclaimed: a few
// ticks, so a healthy ticker never shows any.
const OverdueGrace = time.Minute

// dueMetrics counts what this replica's ticker did; the job-table gauges are read on each scrape.
type dueMetrics struct {
	mu                                           sync.Mutex
	claimed, fired, movedOn, retried, dead, lost float64
}

func (m *dueMetrics) observe(r duejobs.TickResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claimed += float64(r.Claimed)
	m.fired += float64(r.Fired)
	m.movedOn += float64(r.MovedOn)
	m.retried += float64(r.Retried)
	m.dead += float64(r.Dead)
	m.lost += float64(r.LostClaims)
}

var (
	descDueOverdue  = prometheus.NewDesc("casebook_due_jobs_overdue_unclaimed", "Pending due jobs more than a minute past their due time or next attempt (all tenants).", nil, nil)
	descDueExpired  = prometheus.NewDesc("casebook_due_jobs_expired_claims", "Claimed due jobs whose claim expired and no ticker has taken over yet.", nil, nil)
	descDueFailing  = prometheus.NewDesc("casebook_due_jobs_repeated_failures", "Pending due jobs that failed at least 3 attempts.", nil, nil)
	descDueDead     = prometheus.NewDesc("casebook_due_jobs_dead", "Due jobs in the dead letter, waiting for an operator's review.", nil, nil)
	descDuePending  = prometheus.NewDesc("casebook_due_jobs_pending", "Pending due jobs, due or not.", nil, nil)
	descDueRuns     = prometheus.NewDesc("casebook_due_job_runs_total", "Due jobs this replica ran, by result.", []string{"result"}, nil)
	descDueScrapeOK = prometheus.NewDesc("casebook_due_jobs_health_up", "1 if the due-job counts could be read on this scrape.", nil, nil)
)

type dueCollector struct{ a *App }

func (c dueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDueOverdue, descDueExpired, descDueFailing, descDueDead, descDuePending, descDueRuns, descDueScrapeOK} {
		ch <- d
	}
}

func (c dueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := c.a.DueJobs.Health(ctx, OverdueGrace)
	up := 1.0
	if err != nil {
		up = 0
	} else {
		ch <- prometheus.MustNewConstMetric(descDueOverdue, prometheus.GaugeValue, float64(h.OverdueUnclaimed))
		ch <- prometheus.MustNewConstMetric(descDueExpired, prometheus.GaugeValue, float64(h.ExpiredClaims))
		ch <- prometheus.MustNewConstMetric(descDueFailing, prometheus.GaugeValue, float64(h.RepeatedFailures))
		ch <- prometheus.MustNewConstMetric(descDueDead, prometheus.GaugeValue, float64(h.Dead))
		ch <- prometheus.MustNewConstMetric(descDuePending, prometheus.GaugeValue, float64(h.Pending))
	}
	ch <- prometheus.MustNewConstMetric(descDueScrapeOK, prometheus.GaugeValue, up)
	m := &c.a.dueMetrics
	m.mu.Lock()
	defer m.mu.Unlock()
	for result, v := range map[string]float64{"claimed": m.claimed, "fired": m.fired, "moved_on": m.movedOn, "retried": m.retried,
		"dead": m.dead, "lost_claim": m.lost} {
		ch <- prometheus.MustNewConstMetric(descDueRuns, prometheus.CounterValue, v, result)
	}
}
