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

	"github.com/casebook/casebook/adapters/httpapi"
	"github.com/casebook/casebook/commands"
	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/eventstore/sqlite"
	"github.com/casebook/casebook/internal/sqldb"
	"github.com/casebook/casebook/projections"
	"github.com/casebook/casebook/projections/querymodel"
	"github.com/casebook/casebook/queries"
	"github.com/casebook/casebook/tenancy"
)

// Config selects storage and the listen address. The zero value (plus a DataDir) is the embedded
// default: one SQLite file holds everything.
type Config struct {
	Addr    string
	DataDir string
	Logger  *slog.Logger
	Now     func() time.Time
	// ShutdownTimeout bounds how long in-flight requests may finish on stop.
	ShutdownTimeout time.Duration
	// Public configures the public intake's limits; the zero value takes httpapi's defaults.
	Public httpapi.PublicConfig
}

// App is an opened Casebook.
type App struct {
	Config   Config
	DB       *sqldb.DB
	Store    eventstore.Store
	Tenancy  *tenancy.Store
	Commands *commands.Handler
	Audit    *commands.AuditLog
	Reader   *queries.Reader
	Runners  []*projections.Runner

	// owner is the subscriber lease identity: fixed in embedded mode, where the serve lock makes this
	// process the only server; random per process otherwise.
	owner   string
	closers []func() error
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

func (a *App) openStorage(ctx context.Context) error {
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
	store, err := sqlite.New(ctx, db, sqlite.Options{Now: a.Config.Now})
	if err != nil {
		return err
	}
	a.Store = store
	a.closers = append(a.closers, store.Close)
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
	a.Tenancy = ten
	a.Commands = &commands.Handler{Store: a.Store, Principals: ten, Secret: secret, Now: a.Config.Now, NewID: tenancy.NewID}
	a.Reader = &queries.Reader{DB: a.DB}
	qm := &projections.Runner{Store: a.Store, DB: a.DB, Projection: querymodel.New(a.DB), Logger: a.Config.Logger, Now: a.Config.Now,
		Owner: a.owner}
	if err := qm.Setup(ctx); err != nil {
		return err
	}
	a.Runners = []*projections.Runner{qm}
	return a.wireAudit(ctx)
}

// QueryModel returns the query-model runner.
func (a *App) QueryModel() *projections.Runner { return a.Runners[0] }

// Ready reports whether every subscriber has caught up with the log and is not failing.
func (a *App) Ready() error {
	for _, r := range a.Runners {
		st := r.Status()
		if !st.CaughtUp {
			return fmt.Errorf("projection %s is catching up", st.Name)
		}
		if st.LastError != "" {
			return fmt.Errorf("projection %s is failing", st.Name)
		}
	}
	return nil
}

// Handler returns the HTTP API.
func (a *App) Handler() http.Handler {
	s := &httpapi.Server{
		Commands: a.audited(), Reader: a.Reader, Tenancy: a.Tenancy, QueryModel: a.QueryModel(),
		Head: a.Store.Head, Ready: a.Ready, Logger: a.Config.Logger, Public: a.Config.Public,
	}
	return s.Handler()
}

// Serve runs the subscribers and the HTTP API on ln until ctx ends, then shuts down gracefully:
// in-flight requests finish (bounded by ShutdownTimeout), then subscribers stop. In embedded mode
// only one Serve may run on a data directory; a second one fails at once.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	if a.owner == "embedded" {
		unlock, err := lockDataDir(a.Config.DataDir)
		if err != nil {
			return err
		}
		defer unlock()
	}
	subCtx, stopSubs := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for _, r := range a.Runners {
		wg.Go(func() { _ = r.Run(subCtx) })
	}
	srv := &http.Server{
		Handler:           a.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(a.Config.Logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	a.Config.Logger.Info("casebook serving", "addr", ln.Addr().String(), "data_dir", a.Config.DataDir)
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
	stopSubs()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	a.Config.Logger.Info("casebook stopped")
	return err
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
