package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/app"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/ratelimit"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/tenancy"
)

// benchEnv is what the bench's steps share: the app under test and the baseline, each served on
// loopback, the bench's tenant and its HTTP client. close undoes setup in reverse order.
type benchEnv struct {
	o      benchOptions
	stderr io.Writer
	undo   []func()

	a           *app.App
	hold        subscriberHold
	base        string // Casebook's URL
	baselineURL string
	tenant      tenancy.Tenant
	token       string
	client      *http.Client
	laneBefore  laneSnap
}

func (e *benchEnv) onClose(f func()) { e.undo = append(e.undo, f) }

func (e *benchEnv) close() {
	for i := len(e.undo) - 1; i >= 0; i-- {
		e.undo[i]()
	}
}

// setup opens the storage, the app and the baseline, serves both and makes the bench's tenant.
func (e *benchEnv) setup(ctx context.Context, sf *storageFlags) error {
	baselineDB, err := e.openBaselineDB(ctx, sf)
	if err != nil {
		return err
	}
	if err := e.openApp(ctx, sf); err != nil {
		return err
	}
	if err := e.serve(ctx, baselineDB); err != nil {
		return err
	}
	run := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	if e.tenant, _, e.token, err = e.a.Tenancy.CreateTenant(ctx, "bench-"+run); err != nil {
		return err
	}
	e.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: max(e.o.conc, 256), MaxIdleConns: 512}}
	return nil
}

// openBaselineDB opens the baseline's database: a connection per client on Postgres (in a
// throw-away schema unless --keep, which Casebook then uses too), else a SQLite file beside the
// data directory's (a temporary directory unless --data-dir).
func (e *benchEnv) openBaselineDB(ctx context.Context, sf *storageFlags) (*sqldb.DB, error) {
	var baselineDB *sqldb.DB
	var err error
	switch {
	case sf.databaseURL != "":
		if !e.o.keep {
			u, drop, err := throwawaySchema(ctx, sf.databaseURL)
			if err != nil {
				return nil, err
			}
			e.onClose(drop)
			sf.databaseURL = u
		}
		// The baseline gets a connection per client (Casebook: its default pool, or the URL's).
		if baselineDB, err = sqldb.OpenPostgres(ctx, withPoolSize(sf.databaseURL, e.o.conc)); err != nil {
			return nil, err
		}
	default:
		if !e.o.explicitDir {
			dir, err := os.MkdirTemp("", "casebook-bench-")
			if err != nil {
				return nil, err
			}
			e.onClose(func() { _ = os.RemoveAll(dir) })
			sf.dataDir = dir
		}
		path := filepath.Join(sf.dataDir, "bench-baseline.db")
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(path + suffix) //nolint:gosec // the operator names the data directory
		}
		if baselineDB, err = sqldb.OpenSQLite(path); err != nil {
			return nil, err
		}
		baselineDB.SetMaxOpenConns(1) // one writer, as the least a durable insert needs
		e.onClose(func() {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(path + suffix) //nolint:gosec // the operator names the data directory
			}
		})
	}
	e.onClose(func() { _ = baselineDB.Close() })
	if baselineDB.Dialect == sqldb.Postgres {
		e.onClose(func() {
			_, _ = baselineDB.ExecContext(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS bench_baseline`)
		})
	}
	return baselineDB, nil
}

// openApp opens Casebook on an empty log (unless --keep), its subscribers held by e.hold.
func (e *benchEnv) openApp(ctx context.Context, sf *storageFlags) error {
	off := ratelimit.Rate{Off: true} // loopback clients: the public rate limits would measure themselves
	cfg := sf.config(slog.New(slog.DiscardHandler))
	cfg.Public = httpapi.PublicConfig{ClientRate: off, TenantRate: off}
	if err := e.o.tenantCache(&cfg); err != nil {
		return err
	}
	var err error
	if cfg.DataKeys, err = sf.masterKeys(); err != nil {
		return err
	}
	a, err := app.Open(ctx, cfg)
	if err != nil {
		return err
	}
	e.onClose(func() { _ = a.Close() })
	e.a = a
	if head, err := a.Store.Head(ctx); err != nil {
		return err
	} else if head != eventstore.Start && !e.o.keep {
		return errors.New("bench: the database already holds events, and the bench's inquiries would stay in its log; " +
			"use an empty one (the default is a temporary directory), or pass --keep")
	}
	for _, r := range a.Runners {
		r.Hold = e.hold.wait
	}
	return nil
}

// serve serves Casebook and the baseline on loopback ports.
func (e *benchEnv) serve(ctx context.Context, baselineDB *sqldb.DB) error {
	base, stopServer, err := listen(ctx, func(ctx context.Context, ln net.Listener) error { return e.a.Serve(ctx, ln) }, e.stderr)
	if err != nil {
		return err
	}
	e.onClose(stopServer)
	e.base = base
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
	}, e.stderr)
	if err != nil {
		return err
	}
	e.onClose(stopBaseline)
	e.baselineURL = baseURL
	return nil
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
