package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/pprof/profile"

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/domain"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/ratelimit"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
)

// bench starts an in-process server on loopback and measures, over HTTP:
//   - intake requests/s with p50/p99 at --concurrency clients, alternating --rounds times with a
//     baseline served by the same process: decode the JSON and do one INSERT per request (embedded:
//     a SQLite file in WAL mode with synchronous=FULL beside the data directory's file, on the same
//     file system; Postgres: a plain single-row INSERT on the same database), which starts once every
//     subscriber has applied Casebook's round (catch_up_ms). The lowest Casebook/baseline ratio of
//     the rounds is reported;
//   - the CPU per intake of the whole process and of each subscriber (from a CPU profile of the
//     first Casebook round; subscribers' goroutines carry projections.ProfileLabel);
//   - the latency from an acknowledged intake to its visibility in GET /v1/inquiries/{id}, and to a
//     consistent=true read of it, at a fixed offered rate (--rate), after a warm-up at that rate
//     (--visibility-warmup) reported apart (see measureVisibility), and
//   - operator commands/s (triage, claim, resolve).
//
// Storage: a temporary data directory by default (removed afterwards). An explicit --data-dir
// must hold no events unless --keep, and keeps what the bench wrote. With --database-url the bench
// runs in a throw-away schema that it drops afterwards; with --keep it runs in the URL's own
// schema and leaves its data there.
func bench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newFlags("bench", stderr)
	n := fs.Int("intakes", 2000, "intake requests per round")
	conc := fs.Int("concurrency", 16, "concurrent clients")
	rounds := fs.Int("rounds", 2, "rounds of Casebook then baseline; the lowest ratio is reported")
	rateSpec := fs.String("rate", "1000/s", "offered intake rate for the acknowledged-to-visible latency (N/s; off skips it)")
	visN := fs.Int("visibility-intakes", 3000, "intakes offered at --rate")
	warmup := fs.Duration("visibility-warmup", time.Second, "offered load at --rate before the visibility figures, reported apart (0: none)")
	cpuProfile := fs.String("cpuprofile", "", "also write the first Casebook round's CPU profile to this file (go tool pprof)")
	keep := fs.Bool("keep", false, "allow a database that already holds events, and keep what the bench writes")
	intakeOnly := fs.Bool("intake-only", false, "also run each round with the subscribers held (they catch up afterwards): the intake path's own throughput")
	tenantCache := tenantCacheFlag(fs)
	fs.Lookup("data-dir").DefValue = "(a temporary directory)"
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	setServerGC(os.Getenv) // as serve's, for both Casebook and the baseline
	explicitDir := false
	fs.Visit(func(f *flag.Flag) { explicitDir = explicitDir || f.Name == "data-dir" })
	if *n < 1 || *conc < 1 || *rounds < 1 || *visN < 1 {
		return errors.New("--intakes, --concurrency, --rounds and --visibility-intakes must be positive")
	}
	if *warmup < 0 {
		return errors.New("--visibility-warmup must not be negative")
	}
	rate, err := ratelimit.ParseRate(*rateSpec)
	if err != nil {
		return fmt.Errorf("--rate: %w", err)
	}
	if sf.eventStoreURL != "" {
		return errors.New("bench measures the embedded and Postgres modes; --eventstore-url is not supported")
	}
	log := slog.New(slog.DiscardHandler)
	var baselineDB *sqldb.DB
	switch {
	case sf.databaseURL != "":
		if !*keep {
			u, drop, err := throwawaySchema(ctx, sf.databaseURL)
			if err != nil {
				return err
			}
			defer drop()
			sf.databaseURL = u
		}
		// The baseline gets a connection per client (Casebook: its default pool, or the URL's).
		if baselineDB, err = sqldb.OpenPostgres(ctx, withPoolSize(sf.databaseURL, *conc)); err != nil {
			return err
		}
	default:
		if !explicitDir {
			dir, err := os.MkdirTemp("", "casebook-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			sf.dataDir = dir
		}
		path := filepath.Join(sf.dataDir, "bench-baseline.db")
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(path + suffix)
		}
		if baselineDB, err = sqldb.OpenSQLite(path); err != nil {
			return err
		}
		baselineDB.SetMaxOpenConns(1) // one writer, as the least a durable insert needs
		defer func() {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(path + suffix)
			}
		}()
	}
	defer baselineDB.Close()
	if baselineDB.Dialect == sqldb.Postgres {
		defer func() {
			_, _ = baselineDB.ExecContext(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS bench_baseline`)
		}()
	}

	off := ratelimit.Rate{Off: true} // loopback clients: the public rate limits would measure themselves
	cfg := sf.config(log)
	cfg.Public = httpapi.PublicConfig{ClientRate: off, TenantRate: off}
	if err := tenantCache(&cfg); err != nil {
		return err
	}
	if cfg.DataKeys, err = sf.masterKeys(); err != nil {
		return err
	}
	a, err := app.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	if head, err := a.Store.Head(ctx); err != nil {
		return err
	} else if head != eventstore.Start && !*keep {
		return errors.New("bench: the database already holds events, and the bench's inquiries would stay in its log; " +
			"use an empty one (the default is a temporary directory), or pass --keep")
	}
	var hold subscriberHold
	for _, r := range a.Runners {
		r.Hold = hold.wait
	}
	base, stopServer, err := listen(ctx, func(ctx context.Context, ln net.Listener) error { return a.Serve(ctx, ln) }, stderr)
	if err != nil {
		return err
	}
	defer stopServer()
	baseline, err := newBaseline(ctx, baselineDB)
	if err != nil {
		return err
	}
	baseURL, stopBaseline, err := listen(ctx, func(ctx context.Context, ln net.Listener) error {
		srv := &http.Server{Handler: baseline, ReadHeaderTimeout: 10 * time.Second}
		go func() { <-ctx.Done(); _ = srv.Close() }()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}, stderr)
	if err != nil {
		return err
	}
	defer stopBaseline()

	run := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	t, _, token, err := a.Tenancy.CreateTenant(ctx, "bench-"+run)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: max(*conc, 256), MaxIdleConns: 512}}
	intakeBody := func(i int) string {
		return fmt.Sprintf(`{"name":"Bench %d","email":"bench%d@example.com","subject":"Bench","message":"Load test %d"}`, i, i, i)
	}
	post := func(baseURL, key string, i int) error {
		_, err := call(client, http.MethodPost, baseURL+"/v1/public/"+t.Slug+"/inquiries", "",
			map[string]string{"Idempotency-Key": key}, intakeBody(i), http.StatusAccepted)
		return err
	}

	var rs []round
	var cpu *cpuReport
	if err := waitAllCaughtUp(ctx, a); err != nil {
		return err
	}
	laneBefore := snapLane(a)
	for r := range *rounds {
		if r > 0 {
			if err := analyze(ctx, a); err != nil {
				return err
			}
		}
		var prof bytes.Buffer
		profiling := false
		if r == 0 {
			if err := pprof.StartCPUProfile(&prof); err != nil {
				fmt.Fprintln(stderr, "bench: no CPU figures:", err)
			} else {
				profiling = true
			}
		}
		cb := measure(*n, *conc, func(i int) error { return post(base, fmt.Sprintf("bench-%d-%d", r, i), i) })
		if profiling {
			pprof.StopCPUProfile()
			if *cpuProfile != "" {
				if err := os.WriteFile(*cpuProfile, prof.Bytes(), 0o600); err != nil {
					return err
				}
			}
			if cpu, err = cpuPerIntake(&prof, cb.Requests); err != nil {
				fmt.Fprintln(stderr, "bench: cpu profile:", err)
			}
		}
		// The subscribers apply the round before anything else runs, so that their backlog does not
		// compete with the baseline (or the held round) for the CPU and the disk.
		caughtUp := time.Now()
		if err := waitAllCaughtUp(ctx, a); err != nil {
			return err
		}
		catchUp := time.Since(caughtUp)
		var held *result
		var heldBatches uint64
		if *intakeOnly {
			before := snapLane(a)
			hold.set(true)
			io := measure(*n, *conc, func(i int) error { return post(base, fmt.Sprintf("bench-held-%d-%d", r, i), i) })
			during := snapLane(a)
			hold.set(false)
			if err := waitAllCaughtUp(ctx, a); err != nil {
				return err
			}
			held = &io
			for name, b := range during.batches {
				heldBatches += b - before.batches[name]
			}
		}
		if f, ok := ctx.Value(beforeBaselineKey{}).(func(*app.App)); ok {
			f(a)
		}
		bl := measure(*n, *conc, func(i int) error { return post(baseURL, fmt.Sprintf("bench-%d-%d", r, i), i) })
		rd := round{Casebook: cb, CatchUpMillis: float64(catchUp.Microseconds()) / 1000, Baseline: bl, Ratio: cb.PerSecond / bl.PerSecond}
		if held != nil {
			rd.IntakeOnly, rd.IntakeOnlyRatio, rd.BatchesWhileHeld = held, held.PerSecond/bl.PerSecond, heldBatches
		}
		rs = append(rs, rd)
	}
	lowest := rs[0].Ratio
	for _, r := range rs {
		lowest = min(lowest, r.Ratio)
	}

	if err := waitAllCaughtUp(ctx, a); err != nil {
		return err
	}
	lane := snapLane(a).since(laneBefore, *n**rounds)

	var vis *visibility
	if !rate.Off {
		if err := analyze(ctx, a); err != nil {
			return err
		}
		var warm *visibility
		if n := int(float64(rate.Events) * warmup.Seconds() / rate.Per.Seconds()); n > 0 {
			w := measureVisibility(ctx, a, client, base, token, t.ID, t.Slug, rate, n, "vis-warmup-", intakeBody)
			warm = &w
		}
		v := measureVisibility(ctx, a, client, base, token, t.ID, t.Slug, rate, *visN, "vis-", intakeBody)
		v.Warmup = warm
		vis = &v
	}

	cmds, err := measureCommands(ctx, a, client, base, token, *n, *conc)
	if err != nil {
		return err
	}
	out := map[string]any{
		"storage": a.Mode(), "concurrency": *conc, "intakes_per_round": *n,
		"rounds":         rs,
		"lowest_ratio":   lowest,
		"baseline":       baselineKind(a.Mode()),
		"cpu":            cpu,
		"visibility":     vis,
		"commands":       cmds,
		"storage_writes": a.StorageStats(),
		"lane":           lane,
	}
	return printJSON(stdout, out)
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

// subscriberHold holds the subscribers' batches while it is set (Runner.Hold).
type subscriberHold struct {
	mu      sync.Mutex
	release chan struct{} // nil when not held; closed when released
}

func (h *subscriberHold) set(held bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case held && h.release == nil:
		h.release = make(chan struct{})
	case !held && h.release != nil:
		close(h.release)
		h.release = nil
	}
}

func (h *subscriberHold) wait(ctx context.Context) error {
	h.mu.Lock()
	release := h.release
	h.mu.Unlock()
	if release == nil {
		return nil
	}
	select {
	case <-release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func baselineKind(mode string) string {
	if mode == "postgres" {
		return "decode + one single-row INSERT per request on the same Postgres database"
	}
	return "decode + one INSERT per request into a SQLite file (WAL, synchronous=FULL) on the data directory's file system"
}

// listen serves on a loopback port until the returned stop is called.
func listen(ctx context.Context, serve func(context.Context, net.Listener) error, stderr io.Writer) (string, func(), error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- serve(sctx, ln) }()
	return "http://" + ln.Addr().String(), func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(stderr, "bench server:", err)
		}
	}, nil
}

// throwawaySchema creates a fresh schema on the database at dbURL and returns a URL that uses it,
// and a function that drops it with everything the bench wrote.
func throwawaySchema(ctx context.Context, dbURL string) (string, func(), error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "casebook_bench_" + hex.EncodeToString(b[:])
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", nil, fmt.Errorf("--database-url: %w", err)
	}
	db, err := sqldb.OpenPostgres(ctx, dbURL)
	if err != nil {
		return "", nil, err
	}
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		_ = db.Close()
		return "", nil, fmt.Errorf("bench: create schema: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), func() {
		if _, err := db.ExecContext(context.WithoutCancel(ctx), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			fmt.Fprintln(os.Stderr, "bench: drop schema", schema+":", err)
		}
		_ = db.Close()
	}, nil
}

// withPoolSize sets pool_max_conns in a Postgres URL that does not set it.
func withPoolSize(dbURL string, n int) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return dbURL // OpenPostgres reports it
	}
	q := u.Query()
	if q.Get("pool_max_conns") == "" {
		q.Set("pool_max_conns", strconv.Itoa(n))
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// newBaseline is the least work a durable intake can do: decode the JSON, insert one row, 202.
func newBaseline(ctx context.Context, db *sqldb.DB) (http.Handler, error) {
	create := `CREATE TABLE IF NOT EXISTS bench_baseline (id INTEGER PRIMARY KEY, idem TEXT UNIQUE, body TEXT)`
	if db.Dialect == sqldb.Postgres {
		create = `CREATE TABLE IF NOT EXISTS bench_baseline (id bigserial PRIMARY KEY, idem text UNIQUE, body text)`
	}
	if _, err := db.ExecContext(ctx, create); err != nil {
		return nil, fmt.Errorf("bench baseline: %w", err)
	}
	insert := db.Rebind(`INSERT INTO bench_baseline (idem, body) VALUES (?, ?)`)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]string
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&m); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		b, _ := json.Marshal(m)
		if _, err := db.ExecContext(r.Context(), insert, r.Header.Get("Idempotency-Key"), string(b)); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"receipt":"x","status":"received"}`))
	}), nil
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

// analyze updates the planner's statistics of the bench's tables on Postgres, as autovacuum does
// within a minute in a running deployment. The bench's tables start empty, and a plan made while
// a table was nearly empty, cached by each connection, can serve a key lookup through an index
// that leads with the tenant alone: a scan of the tenant's rows per lookup, which a deployment
// sees only in its first minute.
func analyze(ctx context.Context, a *app.App) error {
	if a.DB.Dialect != sqldb.Postgres {
		return nil
	}
	_, err := a.DB.ExecContext(ctx, `DO $$
DECLARE t text;
BEGIN
	FOR t IN SELECT format('%I.%I', schemaname, tablename) FROM pg_tables WHERE schemaname = current_schema() LOOP
		EXECUTE 'ANALYZE ' || t;
	END LOOP;
END $$`)
	if err != nil {
		return fmt.Errorf("bench: analyze: %w", err)
	}
	return nil
}

// beforeBaselineKey carries a test's func(*app.App), called as each round's baseline starts.
type beforeBaselineKey struct{}

// waitAllCaughtUp waits until every subscriber has applied the log's head, for a minute at most: a
// phase measured beside a backlog would not be the phase the figures name, so the bench stops.
func waitAllCaughtUp(ctx context.Context, a *app.App) error {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := a.WaitCaughtUp(wctx); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
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

// measureCommands runs triage, claim and resolve on a sample of the inquiries received.
func measureCommands(ctx context.Context, a *app.App, client *http.Client, base, token string, n, conc int) (result, error) {
	var ids []string
	cursor := ""
	for len(ids) < min(n, 300) {
		var page struct {
			Items []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"items"`
			NextCursor *string `json:"next_cursor"`
		}
		u := base + "/v1/inquiries?status=new&limit=100&consistent=true"
		if cursor != "" {
			u += "&cursor=" + cursor
		}
		b, err := call(client, http.MethodGet, u, token, nil, "", http.StatusOK)
		for start := time.Now(); lagging(err) && time.Since(start) < time.Minute; {
			b, err = call(client, http.MethodGet, u, token, nil, "", http.StatusOK) // 503: not caught up yet
		}
		if err != nil {
			return result{}, err
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return result{}, err
		}
		for _, it := range page.Items {
			ids = append(ids, it.ID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	ids = ids[:min(len(ids), 300)]
	steps := []struct{ path, body string }{
		{"/transitions", `{"to":"triaged","priority":"high"}`},
		{"/claim", ``},
		{"/transitions", `{"to":"resolved"}`},
	}
	return measureInquiries(ids, conc, func(id string) error {
		version := uint64(1)
		for _, st := range steps {
			h := map[string]string{"If-Match": fmt.Sprintf(`"%d"`, version)}
			b, err := call(client, http.MethodPost, base+"/v1/inquiries/"+id+st.path, token, h, st.body, http.StatusOK)
			if err != nil {
				return err
			}
			var res struct {
				Version uint64 `json:"version"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				return err
			}
			version = res.Version
		}
		return nil
	}, len(steps)), nil
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
