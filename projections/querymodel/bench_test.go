package querymodel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/postgres"
	"github.com/casebook/casebook/eventstore/sqlite"
	"github.com/casebook/casebook/internal/pgtest"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/projections/querymodel"
)

// benchEvents is the log size of BenchmarkRebuild (CASEBOOK_BENCH_EVENTS overrides it).
func benchEvents() int {
	if n, err := strconv.Atoi(os.Getenv("CASEBOOK_BENCH_EVENTS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// syntheticLog yields the events of inquiries that are received, triaged, claimed (two events)
// and noted: five events per inquiry, spread over 20 tenants.
func syntheticLog(n int, fn func(stream string, rev uint64, id, typ string, data, meta []byte) error) error {
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i*5 < n; i++ {
		tenant := domain.TenantID(fmt.Sprintf("tenant-%02d", i%20))
		id := domain.InquiryID(fmt.Sprintf("%08d-0000-8000-8000-000000000000", i))
		stream := eventstore.InquiryStream(tenant, id)
		evs := []domain.Event{
			domain.InquiryReceived{InquiryID: id, TenantID: tenant, Source: domain.SourceAPI, Receipt: fmt.Sprint("R", i),
				Requester: domain.Requester{Name: "Bench", Email: "bench@example.com"}, Subject: "Subject", Message: "Message body", Priority: domain.PriorityNormal},
			domain.InquiryTriaged{Priority: domain.PriorityHigh},
			domain.InquiryAssigned{Owner: "op", Team: "support"},
			domain.InquiryStatusChanged{From: domain.StatusTriaged, To: domain.StatusInProgress},
			domain.NoteAdded{Body: "note"},
		}
		for rev, e := range evs {
			if i*5+rev >= n {
				return nil
			}
			typ, data, _ := domain.Encode(e)
			meta, _ := json.Marshal(domain.Metadata{TenantID: tenant, Actor: "op", CommandID: "c", OccurredAt: at.Add(time.Duration(i) * time.Second), SchemaVersion: 1})
			if err := fn(stream, uint64(rev), eventstore.DeterministicID(stream, rev), typ, data, meta); err != nil {
				return err
			}
		}
	}
	return nil
}

// BenchmarkRebuild reports query-model rebuild speed (events/s) over a synthetic log, on the
// embedded store and on Postgres, with casebook replay's collector target. Loading the log is not
// timed. CASEBOOK_BENCH_CPUPROFILE=F writes a CPU profile of the rebuild alone to F.
func BenchmarkRebuild(b *testing.B) {
	n := benchEvents()
	b.Run("sqlite", func(b *testing.B) {
		db, err := sqldb.OpenSQLite(filepath.Join(b.TempDir(), "casebook.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		store, err := sqlite.New(b.Context(), db, sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		tx, err := db.BeginTx(b.Context(), nil)
		if err != nil {
			b.Fatal(err)
		}
		stmt, err := tx.PrepareContext(b.Context(), `INSERT INTO events (id, stream, revision, type, data, metadata, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			b.Fatal(err)
		}
		if err := syntheticLog(n, func(stream string, rev uint64, id, typ string, data, meta []byte) error {
			_, err := stmt.ExecContext(b.Context(), id, stream, rev, typ, data, meta, time.Now().UnixNano())
			return err
		}); err != nil {
			b.Fatal(err)
		}
		_ = stmt.Close()
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		rebuild(b, store, db, n)
	})
	b.Run("postgres", func(b *testing.B) {
		url := pgtest.URL(b)
		store, err := postgres.Open(b.Context(), url, postgres.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		conn, err := pgx.Connect(b.Context(), url)
		if err != nil {
			b.Fatal(err)
		}
		// Copied in parts, so that the rebuild does not start beside a heap the size of the log.
		var rows [][]any
		flush := func() error {
			_, err := conn.CopyFrom(b.Context(), pgx.Identifier{"events"}, []string{"stream", "revision", "id", "type", "data", "metadata", "recorded_at"},
				pgx.CopyFromRows(rows))
			rows = rows[:0]
			return err
		}
		if err := syntheticLog(n, func(stream string, rev uint64, id, typ string, data, meta []byte) error {
			if rows = append(rows, []any{stream, int64(rev), id, typ, data, meta, time.Now()}); len(rows) == 50_000 {
				return flush()
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if err := flush(); err != nil {
			b.Fatal(err)
		}
		// A log that a rebuild reads was written long before: vacuumed (hint bits set, statistics
		// current) and checkpointed, so the rebuild is not charged for the load's checkpoint.
		if _, err := conn.Exec(b.Context(), `VACUUM (ANALYZE) events`); err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Exec(b.Context(), `CHECKPOINT`); err != nil {
			b.Logf("no checkpoint before the rebuild (%v): the load's checkpoint may fall into it", err)
		}
		_ = conn.Close(b.Context())
		db, err := sqldb.OpenPostgres(b.Context(), url)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		rebuild(b, store, db, n)
	})
}

func rebuild(b *testing.B, store eventstore.Store, db *sqldb.DB, n int) {
	b.Helper()
	ctx := context.Background()
	p := querymodel.New()
	if err := projections.Migrate(ctx, db); err != nil {
		b.Fatal(err)
	}
	if f := os.Getenv("CASEBOOK_BENCH_CPUPROFILE"); f != "" {
		// Only the rebuild, not the load (go test's -cpuprofile covers both).
		out, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(out); err != nil {
			b.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); _ = out.Close() }()
	}
	defer projections.TuneGCForReplay()() // as in casebook replay
	w0, c0 := procIO(), cpuNow()
	var caughtUp time.Duration // the replay alone, before the indexes are built and the switch
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res, err := projections.Rebuild(ctx, store, db, p, projections.RebuildOptions{Logger: slog.New(slog.DiscardHandler),
			Progress: func(pr projections.Progress) {
				if pr.Done {
					caughtUp += time.Since(start)
				}
			}})
		if err != nil {
			b.Fatal(err)
		}
		if res.Processed != uint64(n) {
			b.Fatalf("rebuilt %d events, want %d", res.Processed, n)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(procIO()-w0)/float64(n*b.N), "written-B/event")
	b.ReportMetric((b.Elapsed()-caughtUp).Seconds()/float64(b.N), "finish-s")
	b.ReportMetric(float64(cpuNow()-c0)/float64(n*b.N)/1e3, "cpu-us/event")
}

func procIO() int64 {
	b, _ := os.ReadFile("/proc/self/io")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

func cpuNow() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
