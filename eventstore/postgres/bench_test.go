package postgres_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/eventstoretest"
	"github.com/casebook/casebook/eventstore/postgres"
	"github.com/casebook/casebook/internal/pgtest"
)

// BenchmarkAppendVsInsert measures single-event appends to new streams (expected NoStream) with 1, 8
// and 32 concurrent writers and, in the same run and on the same pool, as many single-row INSERT
// transactions into a trivial table. ns/op times the appends only; ratio is events/s over inserts/s.
func BenchmarkAppendVsInsert(b *testing.B) {
	ctx := b.Context()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 40
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	s, err := postgres.New(ctx, pool, postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE plain_inserts (id bigserial PRIMARY KEY, payload bytea NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	warm(b, pool, 32)
	template := eventstoretest.Events("bench", 1)[0]

	var round atomic.Int64
	for _, writers := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			r := round.Add(1)
			appendOp := func(i int) error {
				stream := fmt.Sprintf("bench-%d-%d", r, i)
				ev := template
				ev.ID = eventstore.DeterministicID(stream, 0)
				_, err := s.Append(ctx, stream, eventstore.NoStream(), []eventstore.EventData{ev})
				return err
			}
			insertOp := func(int) error {
				_, err := pool.Exec(ctx, `INSERT INTO plain_inserts (payload) VALUES ($1)`, template.Data)
				return err
			}
			// The phases alternate in slices so that load from elsewhere on the machine weighs on
			// both alike.
			const slices = 4
			var appendTime, insertTime time.Duration
			b.ResetTimer()
			for k := range slices {
				lo, hi := k*b.N/slices, (k+1)*b.N/slices
				b.StartTimer()
				appendTime += run(b, writers, lo, hi, appendOp)
				b.StopTimer()
				insertTime += run(b, writers, lo, hi, insertOp)
			}
			events := float64(b.N) / appendTime.Seconds()
			inserts := float64(b.N) / insertTime.Seconds()
			b.ReportMetric(events, "events/s")
			b.ReportMetric(inserts, "inserts/s")
			b.ReportMetric(events/inserts, "ratio")
		})
	}
}

// warm opens n pool connections before timing.
func warm(b *testing.B, pool *pgxpool.Pool, n int) {
	conns := make([]*pgxpool.Conn, n)
	for i := range conns {
		c, err := pool.Acquire(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		conns[i] = c
	}
	for _, c := range conns {
		c.Release()
	}
}

// run calls op for i in [lo, hi) from writers goroutines and returns the elapsed time.
func run(b *testing.B, writers, lo, hi int, op func(i int) error) time.Duration {
	var next atomic.Int64
	next.Store(int64(lo))
	var wg sync.WaitGroup
	var failed atomic.Bool
	start := time.Now()
	for range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= hi || failed.Load() {
					return
				}
				if err := op(i); err != nil {
					failed.Store(true)
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		b.FailNow()
	}
	return time.Since(start)
}
