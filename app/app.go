// Package app wires Casebook together: storage, command handler, subscribers and the HTTP API. The
// casebook binary and the end-to-end scenarios start the same App.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/casebook/casebook/adapters/console"
	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/adapters/slack/callbacks"
	"github.com/casebook/casebook/adapters/slack/lists"
	"github.com/casebook/casebook/adapters/slack/reminders"
	"github.com/casebook/casebook/adapters/slack/slackeffects"
	"github.com/casebook/casebook/adapters/slack/slackinstall"
	"github.com/casebook/casebook/adapters/slack/threads"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/duejobs"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/kurrent"
	"github.com/casebook/casebook/eventstore/postgres"
	"github.com/casebook/casebook/eventstore/sealed"
	"github.com/casebook/casebook/eventstore/sqlite"
	"github.com/casebook/casebook/internal/coalesce"
	"github.com/casebook/casebook/internal/ratelimit"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/projections/querymodel"
	"github.com/casebook/casebook/queries"
	"github.com/casebook/casebook/tenancy"
)

// Config selects storage and the listen address. The zero value (plus a DataDir) is the embedded
// default: one SQLite file holds everything. DatabaseURL selects Postgres for everything; with
// EventStoreURL too, events live in KurrentDB and the rest in Postgres.
type Config struct {
	Addr string
	// MetricsAddr, when set, serves /metrics on its own listener (Serve opens it) and not on the
	// API's address: /metrics is for operators and their scrapers only.
	MetricsAddr string
	// MetricsListener, when set, is used instead of opening MetricsAddr (tests, embedding).
	MetricsListener net.Listener
	DataDir         string
	DatabaseURL     string
	EventStoreURL   string
	// LeaseTTL is how long a dead replica keeps its subscribers (Postgres modes).
	LeaseTTL time.Duration
	// RebuildStale makes Serve rebuild, in the background, every projection whose stored generation
	// was built by another version of its code. Without it such a projection is reported (log,
	// /readyz, metrics) and waits for casebook replay.
	RebuildStale bool
	Logger       *slog.Logger
	Now          func() time.Time
	// ShutdownTimeout bounds how long in-flight requests may finish on stop.
	ShutdownTimeout time.Duration
	// Public configures the public intake's limits; the zero value takes httpapi's defaults.
	Public httpapi.PublicConfig
	// ConsoleSignInRate bounds console sign-in attempts per client address (console's default if
	// zero).
	ConsoleSignInRate ratelimit.Rate
	// PublicURL is the operator UI's base URL, for the authenticated link in Slack messages.
	PublicURL string
	// SlackPollInterval is how often an idle Slack worker looks for jobs (River's default if zero).
	SlackPollInterval time.Duration
	// SlackMaxAttempts is a Slack effect's attempt budget before it is a dead letter (default 12).
	SlackMaxAttempts int
	// SlackTiming paces Slack effects: probes, create reconciliation, debounce (defaults in
	// slackeffects.Timing.WithDefaults).
	SlackTiming slackeffects.Timing
	// SlackOAuth configures the OAuth v2 install routes for a distributed app (off when empty).
	SlackOAuth slackinstall.OAuthConfig
	// SlackResponseURLPrefix is the prefix a Slack response_url must have (callbacks' default if "").
	SlackResponseURLPrefix string
	// DueTick is how often an idle ticker looks for due jobs (DefaultDueTick if zero; negative
	// disables the ticker, for tools and tests that drive ticks themselves).
	DueTick time.Duration
	// DataKeys are the master keys that wrap each tenant's inquiry data keys (eventstore/sealed):
	// the first wraps new keys, the others only unwrap keys from before a rotation. Empty: one
	// master derived from the instance secret stored in the database (fine for trying Casebook; a
	// copy of the database then holds what unwraps its keys, so production sets its own).
	DataKeys [][]byte
	// DueClaimTTL is how long a ticker's claim on a due job holds before another ticker may take
	// the job over (one minute if zero).
	DueClaimTTL time.Duration
	// ListSweepTick is how often Serve looks for Lists due a reconcile sweep
	// (DefaultListSweepTick if zero; negative disables the periodic sweep). ListSweepEvery is
	// each List's sweep interval (the reconciler's default, 15 min, if zero).
	ListSweepTick, ListSweepEvery time.Duration
	// RetentionTick is how often Serve runs the retention policy sweep (DefaultRetentionTick if
	// zero; negative disables it, for tools and tests that sweep themselves).
	RetentionTick time.Duration
	// Attachments bounds attachments per file, per inquiry and per tenant (zero: the defaults).
	Attachments commands.AttachmentLimits
	// Uploads bounds concurrent uploads and uploaded bytes per principal and tenant on every route
	// that takes files (zero: the defaults, httpapi.UploadLimits).
	Uploads httpapi.UploadLimits
	// TenantCacheTTL is how long the public routes may serve a tenant, its trusted origins and its
	// profile from memory (tenancy.DefaultPublicCacheTTL if zero; negative: read every time). A
	// change made by another process is seen within it; one made through this App at once.
	TenantCacheTTL time.Duration
	// DataDirLocked says the caller holds DataDir's serve lock (LockDataDir) for as long as Serve
	// runs, so that Serve does not take it again.
	DataDirLocked bool
}

// App is an opened Casebook.
type App struct {
	Config Config
	DB     *sqldb.DB
	Store  eventstore.Store
	// Keys holds every inquiry's data key (crypto-shredding); Store seals and opens with it.
	Keys     *sealed.Keys
	Tenancy  *tenancy.Store
	Commands *commands.Handler
	Audit    *commands.AuditLog
	Reader   *queries.Reader
	Runners  []*projections.Runner
	// Slack is the installation registry; Effects the one Slack effect runtime (its River client
	// is started by Serve), which operators list, retry and cancel; Threads the thread kind.
	Slack      *slackinstall.Store
	SlackOAuth *slackinstall.OAuth
	Effects    *slackeffects.Runtime
	Threads    *threads.Worker
	// Reminders is the Slack side of due jobs: reminder replies and escalation posts.
	Reminders *reminders.Service
	// Callbacks serves Slack's interactions and events (wired in slackcallbacks.go).
	Callbacks *callbacks.Handler
	// Lists is the Slack List projection (disabled per List until activated).
	Lists *lists.Service
	// Console is the operator console under /console (wired in console.go).
	Console *console.Console
	// DueJobs holds follow-ups, SLA warnings and breaches, and escalations; Ticker runs them
	// (started by Serve).
	DueJobs    *duejobs.Store
	Ticker     *duejobs.Ticker
	dueMetrics dueMetrics
	// Attachments stores inquiries' files in the database.
	Attachments *commands.Attachments
	// portalIndex is the portal index subscriber (wired in portal.go).
	portalIndex *projections.Runner
	// privacyIndex is the blind index and retention index subscriber; retentionLease keeps the
	// retention sweep to one replica (retention.go).
	privacyIndex   *projections.Runner
	retentionLease *projections.Lease
	// scrub is the storage clean-up after erasures (scrub.go), run by Serve.
	scrub *erasureScrub
	// dueDecided, if set, runs between a due job's re-read of its inquiry and its append (tests).
	dueDecided func(duejobs.Job)

	// projDB is the handle subscribers write through: in embedded mode a second handle on the same
	// file without an fsync per commit (their output replays from the log); otherwise DB.
	projDB *sqldb.DB
	// appendGroups counts the grouped appends of an event store that groups them itself (Postgres).
	appendGroups interface{ GroupStats() sqldb.GroupStats }
	// owner is the subscriber lease identity: fixed in embedded mode, where the serve lock makes this
	// process the only server; random per process otherwise.
	owner   string
	closers []func() error
	// heads shares the log's head among concurrent consistent reads (committedHead).
	heads coalesce.Group[struct{}, eventstore.Position]
	// ready keeps what Ready saw before: how long the writer lane and the subscribers have not moved.
	ready readiness
}

// DBFile is the embedded database's file name inside the data directory.
const DBFile = "casebook.db"

// Open opens storage and migrates it. Every subcommand opens the same way, so it works while a
// server runs on the same data.
func Open(ctx context.Context, cfg Config) (*App, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	a := &App{Config: cfg}
	if err := a.openStorage(ctx); err != nil {
		_ = a.Close()
		return nil, err
	}
	return a, nil
}

// Mode names the storage mode.
func (a *App) Mode() string {
	switch {
	case a.Config.EventStoreURL != "":
		return "kurrentdb"
	case a.Config.DatabaseURL != "":
		return "postgres"
	}
	return "embedded"
}

func (a *App) openStorage(ctx context.Context) error {
	if a.Config.EventStoreURL != "" && a.Config.DatabaseURL == "" {
		return errors.New("--eventstore-url needs --database-url: the query model, checkpoints and keys live in Postgres")
	}
	if a.Config.DatabaseURL != "" {
		return a.openPostgres(ctx)
	}
	if a.Config.DataDir == "" {
		return errors.New("no data directory configured")
	}
	db, err := sqldb.OpenSQLite(filepath.Join(a.Config.DataDir, DBFile))
	if err != nil {
		return err
	}
	a.DB = db
	a.owner = "embedded"
	a.closers = append(a.closers, db.Close)
	if a.projDB, err = sqldb.OpenSQLiteReplayable(filepath.Join(a.Config.DataDir, DBFile)); err != nil {
		return err
	}
	a.closers = append(a.closers, a.projDB.Close)
	store, err := sqlite.New(ctx, db, sqlite.Options{Now: a.Config.Now})
	if err != nil {
		return err
	}
	a.Store = store
	a.closers = append(a.closers, store.Close)
	return a.wire(ctx)
}

// openPostgres opens the Postgres modes. Every replica gets its own lease identity.
func (a *App) openPostgres(ctx context.Context) error {
	db, err := sqldb.OpenPostgres(ctx, a.Config.DatabaseURL)
	if err != nil {
		return err
	}
	a.DB = db
	a.projDB = db
	a.owner = ""
	a.closers = append(a.closers, db.Close)
	if a.Config.EventStoreURL != "" {
		store, err := kurrent.Open(ctx, a.Config.EventStoreURL, kurrent.Options{Logger: a.Config.Logger})
		if err != nil {
			return err
		}
		a.Store = store
		a.closers = append(a.closers, store.Close)
	} else {
		// One pool for the events and everything else (see sqldb.OpenPostgres).
		store, err := postgres.New(ctx, db.PgxPool(), postgres.Options{Now: a.Config.Now})
		if err != nil {
			return err
		}
		a.Store = store
		a.appendGroups = store
		a.closers = append(a.closers, store.Close)
	}
	return a.wire(ctx)
}

// wire builds everything above storage.
func (a *App) wire(ctx context.Context) error {
	ten, err := tenancy.New(ctx, a.DB, a.Config.Now)
	if err != nil {
		return err
	}
	secret, err := ten.Secret(ctx)
	if err != nil {
		return err
	}
	switch ttl := a.Config.TenantCacheTTL; {
	case ttl == 0:
		ten.PublicCacheTTL = tenancy.DefaultPublicCacheTTL
	case ttl > 0:
		ten.PublicCacheTTL = ttl
	}
	a.Tenancy = ten
	if err := a.wireKeys(ctx, secret); err != nil {
		return err
	}
	if a.Attachments, err = commands.NewAttachments(ctx, a.DB, a.Keys, a.Config.Now); err != nil {
		return err
	}
	// The keys first: the attachments are unreadable from then on; then the inquiry's events
	// written before their members were sealed, and the attachment rows.
	a.Commands = &commands.Handler{Store: a.Store, Principals: ten, Secret: secret, Now: a.Config.Now, NewID: tenancy.NewID,
		Keys:  commands.Shredders{a.Keys, commands.ShredFunc(a.redactErasedEvents), a.Attachments},
		Folds: commands.NewFoldCache(0)}
	a.Reader = &queries.Reader{DB: a.DB}
	qm := &projections.Runner{Store: a.Store, DB: a.projDB, Projection: querymodel.New(), Logger: a.Config.Logger, Now: a.Config.Now,
		Owner: a.owner, LeaseTTL: a.Config.LeaseTTL}
	if err := qm.Setup(ctx); err != nil {
		return err
	}
	if err := a.wireSlack(ctx, secret, qm); err != nil {
		return err
	}
	if err := a.wirePortal(ctx); err != nil {
		return err
	}
	if err := a.wirePrivacy(ctx); err != nil {
		return err
	}
	if err := a.wireAudit(ctx); err != nil {
		return err
	}
	if err := a.wireConsole(ctx); err != nil {
		return err
	}
	if err := a.wireDue(ctx); err != nil {
		return err
	}
	return a.wireCallbacks(ctx)
}

// wireSlack adds the Slack effects: the installation registry, the one effect runtime with the
// thread and List kinds registered, and their intents subscribers, which queue jobs in their
// checkpoint's transaction. Every List starts disabled: no job, no Slack I/O.
func (a *App) wireSlack(ctx context.Context, secret []byte, qm *projections.Runner) error {
	st, err := slackinstall.NewStore(ctx, a.DB, a.Store, secret, a.Config.Now)
	if err != nil {
		return err
	}
	st.AppSigningSecret = a.Config.SlackOAuth.SigningSecret // the app's, not an installation's
	a.Slack = st
	if a.SlackOAuth, err = slackinstall.NewOAuth(ctx, st, secret, a.Config.SlackOAuth); err != nil {
		return err
	}
	rt, err := slackeffects.New(ctx, a.DB, st, a.Store, a.Config.Now, slackeffects.Config{
		Logger: a.Config.Logger, FetchPollInterval: a.Config.SlackPollInterval, Timing: a.Config.SlackTiming, MaxAttempts: a.Config.SlackMaxAttempts,
	})
	if err != nil {
		return err
	}
	a.Effects = rt
	a.Threads = &threads.Worker{Load: a.Commands.Load, LinkBase: a.Config.PublicURL, Principals: a.Tenancy}
	if err := threads.Register(rt, a.Threads); err != nil {
		return err
	}
	if a.Lists, err = lists.NewService(ctx, rt, secret, a.Commands.Load); err != nil {
		return err
	}
	a.wireListReconciler()
	due, err := a.wireSlackDue(rt, st)
	if err != nil {
		return err
	}
	if err := rt.Open(); err != nil {
		return err
	}
	ps := append(append([]projections.Projection{&threads.Intents{Effects: rt, Install: st}}, a.Lists.Projections...), due...)
	a.Runners = []*projections.Runner{qm}
	for _, p := range ps {
		r := &projections.Runner{Store: a.Store, DB: a.projDB, Projection: p, Logger: a.Config.Logger, Now: a.Config.Now, Owner: a.owner, LeaseTTL: a.Config.LeaseTTL}
		if err := r.Setup(ctx); err != nil {
			return err
		}
		a.Runners = append(a.Runners, r)
	}
	return nil
}

// committedHead is the log's head for consistent reads: the last event committed now, without
// waiting for transactions in front of it (eventstore.Store.CommittedHead). The query model reaches it
// only after everything before it, so waiting for that is the read's whole wait. Concurrent
// requests share a read that began after each arrived (coalesce): one read per moment, not one
// per request, and never a head older than the request.
func (a *App) committedHead(ctx context.Context) (eventstore.Position, error) {
	return a.heads.Do(ctx, struct{}{}, func(ctx context.Context) (eventstore.Position, error) {
		return a.Store.CommittedHead(ctx)
	})
}

// QueryModel returns the query-model runner.
func (a *App) QueryModel() *projections.Runner { return a.Runners[0] }

// Handler returns the HTTP API; it serves /metrics too unless Config.MetricsAddr is set.
func (a *App) Handler() http.Handler {
	api, _ := a.handlers()
	return api
}

// handlers returns the HTTP API and the /metrics handler, which the API also serves unless
// Config.MetricsAddr is set. Metrics carry no tenant id or slug: labels are route templates, known
// methods and status classes, and per-projection figures over the whole log.
func (a *App) handlers() (api, metrics http.Handler) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), projectionCollector{a}, storageCollector{a}, dueCollector{a}, effectsCollector{a}, scrubCollector{a})
	metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	s := &httpapi.Server{
		Commands: a.audited(), Audit: a.Audit, Reader: a.Reader, Tenancy: a.Tenancy, QueryModel: a.QueryModel(),
		Head: a.committedHead, Ready: a.Ready, Logger: a.Config.Logger, Public: a.Config.Public, Admin: a, Secret: a.Commands.Secret,
		RequestMetrics: httpapi.NewRequestMetrics(reg), Slack: slackAPI{a},
		SlackOAuth:     slackOAuth{a.SlackOAuth, a.Config.PublicURL},
		SlackCallbacks: a.Callbacks,
		Console:        a.Console, Now: a.Config.Now,
		Due: dueAPI{a}, Portal: portalAPI{a}, SlackEscalation: slackEscalation{a},
		Attachments: a.Attachments, AttachmentLimits: a.Config.Attachments, Uploads: a.Config.Uploads, Load: a.Commands.Load,
		Requesters: requesterAPI{a}, RetentionPolicy: a.Commands.RetentionPolicy,
	}
	if !a.separateMetrics() {
		s.Metrics = metrics
	}
	return s.Handler(), metrics
}

func (a *App) separateMetrics() bool {
	return a.Config.MetricsAddr != "" || a.Config.MetricsListener != nil
}

// serveMetrics serves /metrics alone on Config.MetricsListener or MetricsAddr; stop ends it.
func (a *App) serveMetrics(ctx context.Context, metrics http.Handler) (stop func(), err error) {
	ln := a.Config.MetricsListener
	if ln == nil {
		if ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", a.Config.MetricsAddr); err != nil {
			return nil, fmt.Errorf("metrics listener: %w", err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(a.Config.Logger.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	a.Config.Logger.Info("metrics serving", "addr", ln.Addr().String())
	return func() { _ = srv.Close(); <-done }, nil
}

// Serve runs the subscribers and the HTTP API on ln until ctx ends, then shuts down gracefully:
// in-flight requests finish (bounded by ShutdownTimeout), then subscribers stop. In embedded mode
// only one Serve may run on a data directory; a second one fails at once.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	if a.owner == "embedded" && !a.Config.DataDirLocked {
		unlock, err := LockDataDir(a.Config.DataDir)
		if err != nil {
			return err
		}
		defer unlock()
	}
	api, metrics := a.handlers()
	if a.separateMetrics() {
		stopMetrics, err := a.serveMetrics(ctx, metrics)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	subCtx, stopSubs := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for _, r := range a.Runners {
		wg.Go(func() { _ = r.Run(subCtx) })
	}
	wg.Go(func() { a.checkVersions(subCtx) })
	if tick := a.Config.DueTick; tick >= 0 {
		if tick == 0 {
			tick = DefaultDueTick
		}
		wg.Go(func() { a.Ticker.Run(subCtx, tick) })
	}
	wg.Go(func() { a.runListSweeps(subCtx) })
	wg.Go(func() { a.runRetention(subCtx) })
	wg.Go(func() { a.runScrubs(subCtx) })
	if err := a.Effects.Start(subCtx); err != nil {
		stopSubs()
		wg.Wait()
		return fmt.Errorf("start slack effects: %w", err)
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(a.Config.Logger.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(a.Console.Close) // ends the console's live-update streams
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	a.Config.Logger.Info("casebook serving", "addr", ln.Addr().String(), "storage", a.Mode())
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), a.Config.ShutdownTimeout)
		err = srv.Shutdown(sctx)
		cancel()
		if serr := <-errc; err == nil && !errors.Is(serr, http.ErrServerClosed) {
			err = serr
		}
	}
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.Config.ShutdownTimeout)
	if serr := a.Effects.Stop(jctx); serr != nil {
		a.Config.Logger.Warn("slack effects stop", "err", serr)
	}
	cancel()
	stopSubs()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	a.Config.Logger.Info("casebook stopped")
	return err
}

// checkVersions reports projections whose stored generation is of another code version, and with
// RebuildStale rebuilds them.
func (a *App) checkVersions(ctx context.Context) {
	for _, r := range a.Runners {
		d, err := projections.Describe(ctx, a.DB, a.Store, r.Projection)
		if err != nil || !d.NeedsRebuild {
			continue
		}
		if !a.Config.RebuildStale {
			a.Config.Logger.Warn("projection needs a rebuild; run casebook replay --projection "+d.Name+" or serve with --rebuild-stale",
				"projection", d.Name, "stored_version", d.State.ActiveVersion, "code_version", d.CodeVersion)
			continue
		}
		a.Config.Logger.Info("rebuilding stale projection", "projection", d.Name, "stored_version", d.State.ActiveVersion, "code_version", d.CodeVersion)
		if _, err := projections.Rebuild(ctx, a.Store, a.DB, r.Projection, projections.RebuildOptions{
			Logger: a.Config.Logger, Now: a.Config.Now, LeaseTTL: a.Config.LeaseTTL,
		}); err != nil && ctx.Err() == nil {
			a.Config.Logger.Error("rebuild of stale projection failed", "projection", d.Name, "err", err)
		}
	}
}

// Close releases storage.
func (a *App) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	a.closers = nil
	return errors.Join(errs...)
}
