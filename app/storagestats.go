package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
)

// StorageStats is how the writers shared the store: on SQLite the writer gate as entered by the
// durable handle (appends, audit, tenancy) and by the replayable one (subscribers); the group
// commits of appends and audit rows (on Postgres those of the event store's appends and of the
// database handle's grouped writes, summed); and how the subscribers' reads of the log were shared.
type StorageStats struct {
	Gate  map[string]sqldb.GateStats `json:"writer_gate"`
	Group sqldb.GroupStats           `json:"group_commit"`
	WAL   sqldb.WALStats             `json:"wal"`
	// Subscribe counts the events the subscribers received, read from the event store or shared
	// from another subscriber's read (eventstore.Tail); zeros where the store shares none (KurrentDB).
	Subscribe eventstore.TailStats `json:"subscribe_events"`
}

// StorageStats reports the writer gate and group commit counters since Open.
func (a *App) StorageStats() StorageStats {
	s := StorageStats{Gate: map[string]sqldb.GateStats{"durable": a.DB.GateStats()}, Group: a.DB.GroupStats(), WAL: a.DB.WALStats()}
	if a.appendGroups != nil {
		s.Group = addGroups(s.Group, a.appendGroups.GroupStats())
	}
	s.Subscribe = a.Store.SubscribeStats()
	if a.projDB != a.DB {
		s.Gate["replayable"] = a.projDB.GateStats()
	}
	return s
}

// addGroups sums the counters of two sources of group commits.
func addGroups(a, b sqldb.GroupStats) sqldb.GroupStats {
	return sqldb.GroupStats{Commits: a.Commits + b.Commits, Calls: a.Calls + b.Calls, Largest: max(a.Largest, b.Largest),
		Abandoned: a.Abandoned + b.Abandoned, Retried: a.Retried + b.Retried, TimedOut: a.TimedOut + b.TimedOut,
		Waiting: a.Waiting + b.Waiting, Took: a.Took.Add(b.Took)}
}

// storageCollector exports StorageStats to Prometheus on each scrape.
type storageCollector struct{ a *App }

var (
	descGateEntered   = prometheus.NewDesc("casebook_sqlite_writer_gate_entered_total", "Write transactions begun on the embedded file, by handle.", []string{"handle"}, nil)
	descGateContended = prometheus.NewDesc("casebook_sqlite_writer_gate_contended_total", "Write transactions that found the writer gate taken and waited, by handle.", []string{"handle"}, nil)
	descGateWaited    = prometheus.NewDesc("casebook_sqlite_writer_gate_wait_seconds_total", "Time write transactions waited for the writer gate, by handle.", []string{"handle"}, nil)
	descGroupCommits  = prometheus.NewDesc("casebook_group_commits_total", "Transactions committed for grouped writes (appends, audit rows).", nil, nil)
	descGroupCalls    = prometheus.NewDesc("casebook_group_commit_calls_total", "Grouped writes committed; calls/commits is the mean batch.", nil, nil)
	descGroupTook     = prometheus.NewDesc("casebook_group_commit_seconds", "How long batches of grouped writes took, from their start (before waiting for a connection or the writer gate) to their commit.", nil, nil)
	descGroupTimeouts = prometheus.NewDesc("casebook_group_commit_timeouts_total", "Batches of appends that passed their time limit (Postgres), leaving their outcome unknown.", nil, nil)
	descWALPeak       = prometheus.NewDesc("casebook_sqlite_wal_peak_frames", "The longest the embedded file's write-ahead log has been, in pages.", nil, nil)
	descWALRestarts   = prometheus.NewDesc("casebook_sqlite_wal_restarts_total", "Checkpoints that waited for readers so that the write-ahead log could start over, by outcome.", []string{"outcome"}, nil)
	descSubscribe     = prometheus.NewDesc("casebook_subscribe_events_total", "Events the subscribers received, by source: read from the event store, or shared from another subscriber's read.", []string{"source"}, nil)
)

func (c storageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGateEntered, descGateContended, descGateWaited, descGroupCommits, descGroupCalls, descGroupTook, descGroupTimeouts, descWALPeak, descWALRestarts, descSubscribe} {
		ch <- d
	}
}

func (c storageCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.a.StorageStats()
	for h, g := range s.Gate {
		ch <- prometheus.MustNewConstMetric(descGateEntered, prometheus.CounterValue, float64(g.Entered), h)
		ch <- prometheus.MustNewConstMetric(descGateContended, prometheus.CounterValue, float64(g.Contended), h)
		ch <- prometheus.MustNewConstMetric(descGateWaited, prometheus.CounterValue, g.Waited.Seconds(), h)
	}
	ch <- prometheus.MustNewConstMetric(descGroupCommits, prometheus.CounterValue, float64(s.Group.Commits))
	ch <- prometheus.MustNewConstMetric(descGroupCalls, prometheus.CounterValue, float64(s.Group.Calls))
	ch <- groupHistogram(s.Group.Took)
	ch <- prometheus.MustNewConstMetric(descGroupTimeouts, prometheus.CounterValue, float64(s.Group.TimedOut))
	ch <- prometheus.MustNewConstMetric(descWALPeak, prometheus.GaugeValue, float64(s.WAL.PeakFrames))
	ch <- prometheus.MustNewConstMetric(descWALRestarts, prometheus.CounterValue, float64(s.WAL.Restarts), "restarted")
	ch <- prometheus.MustNewConstMetric(descWALRestarts, prometheus.CounterValue, float64(s.WAL.RestartsGaveUp), "gave_up")
	ch <- prometheus.MustNewConstMetric(descSubscribe, prometheus.CounterValue, float64(s.Subscribe.Backend), "backend")
	ch <- prometheus.MustNewConstMetric(descSubscribe, prometheus.CounterValue, float64(s.Subscribe.Shared), "shared")
}

// groupHistogram is t as a Prometheus histogram (cumulative buckets).
func groupHistogram(t sqldb.BatchTimes) prometheus.Metric {
	buckets := make(map[float64]uint64, len(sqldb.BatchBuckets))
	var n uint64
	for i, c := range t.Counts {
		n += c
		if i < len(sqldb.BatchBuckets) {
			buckets[sqldb.BatchBuckets[i]] = n
		}
	}
	return prometheus.MustNewConstHistogram(descGroupTook, n, t.Sum.Seconds(), buckets)
}
