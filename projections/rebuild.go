package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
)

// Progress reports a rebuild's advance.
type Progress struct {
	Projection string              `json:"projection"`
	Generation Generation          `json:"generation"`
	Position   eventstore.Position `json:"position"`
	Head       eventstore.Position `json:"head"`
	Processed  uint64              `json:"processed"`
	// Remaining is the number of events left, -1 when the store cannot count.
	Remaining    int64   `json:"remaining"`
	EventsPerSec float64 `json:"events_per_second"`
	Done         bool    `json:"done"`
}

// RebuildOptions configure Rebuild.
type RebuildOptions struct {
	// KeepOld keeps the previous generation's tables after the switch.
	KeepOld bool
	// DryRun builds a throwaway generation, switches nothing, and reports the effects that would
	// be emitted (effects already emitted for the same key are not).
	DryRun bool
	// Progress is called about every ProgressEvery while the rebuild runs, and once at the end.
	Progress      func(Progress)
	ProgressEvery time.Duration
	Logger        *slog.Logger
	Now           func() time.Time
	LeaseTTL      time.Duration
}

// RebuildResult says what a rebuild did.
type RebuildResult struct {
	Projection string     `json:"projection"`
	Generation Generation `json:"generation"`
	Previous   Generation `json:"previous_generation"`
	Resumed    bool       `json:"resumed"`
	Switched   bool       `json:"switched"`
	DroppedOld bool       `json:"dropped_old"`
	Processed  uint64     `json:"processed"`
	Effects    []Effect   `json:"would_emit,omitempty"`
}

// ReplayGCPercent is the collector's target (GOGC) in a process that only rebuilds (casebook
// replay) unless GOGC is set. A rebuild allocates about 3 KB per event and keeps little of it:
// collecting once the heap has grown by four times what is live, instead of once, took 12-15 % less
// CPU per event on SQLite for 50-70 MB more memory (BenchmarkRebuild; 200 gained less, 800 no
// more). The target is process-wide, so a rebuild inside casebook serve keeps the server's.
const ReplayGCPercent = 400

// TuneGCForReplay applies ReplayGCPercent unless the GOGC environment variable is set (not empty,
// as for serve's target), and returns a function that restores the previous target.
func TuneGCForReplay() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(ReplayGCPercent)
	return func() { debug.SetGCPercent(old) }
}

// Rebuild replays the whole log into a new generation of p while the active one keeps serving,
// catches up with the head, then makes it active in one transaction (the views switch). An
// interrupted rebuild of the same version resumes from its checkpoint. Live runners on any replica
// notice the switch and continue on the new generation.
func Rebuild(ctx context.Context, store eventstore.Store, db *sqldb.DB, p Projection, opts RebuildOptions) (RebuildResult, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ProgressEvery == 0 {
		opts.ProgressEvery = time.Second
	}
	if err := Migrate(ctx, db); err != nil {
		return RebuildResult{}, err
	}
	st, err := ensureActive(ctx, db, p, opts.Now())
	if err != nil {
		return RebuildResult{}, err
	}
	res := RebuildResult{Projection: p.Name(), Previous: st.ActiveGen}
	gen, resumed, err := claimGeneration(ctx, db, p, st, opts)
	if err != nil {
		return res, err
	}
	res.Generation, res.Resumed = gen, resumed
	if err := p.Setup(ctx, db, gen); err != nil {
		return res, err
	}
	r := &Runner{Store: store, DB: db, Projection: p, Logger: opts.Logger, Now: opts.Now, Build: gen,
		DryRun: opts.DryRun, LeaseTTL: opts.LeaseTTL, RetryDelay: 200 * time.Millisecond}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(runCtx) }()
	// stop ends the build runner; it releases its lease so a live runner can take the generation.
	stop := func() { cancel(); <-done }
	defer stop()
	if err := catchUp(ctx, store, r, opts); err != nil {
		return res, err
	}
	res.Processed = r.Status().Processed
	if opts.DryRun {
		res.Effects = r.Effects()
		stop()
		return res, dropGeneration(context.WithoutCancel(ctx), db, p, gen)
	}
	// The build runner stops before the indexes are built: index builds and batch writes lock
	// the tables in opposite orders. Events appended meanwhile wait for the live runners, which
	// continue from this generation's checkpoint after the switch.
	stop()
	if err := finalize(ctx, db, p, gen); err != nil {
		return res, fmt.Errorf("finalize generation %d: %w", gen, err)
	}
	if err := analyzeGeneration(ctx, db, p, gen); err != nil {
		return res, fmt.Errorf("analyze generation %d: %w", gen, err)
	}
	if err := switchTo(ctx, db, p, gen, opts.Now()); err != nil {
		return res, err
	}
	res.Switched = true
	if !opts.KeepOld {
		if err := dropGeneration(ctx, db, p, st.ActiveGen); err != nil {
			return res, fmt.Errorf("switched to generation %d; dropping generation %d failed: %w", gen, st.ActiveGen, err)
		}
		res.DroppedOld = true
	}
	opts.Logger.Info("projection rebuilt", "projection", p.Name(), "generation", gen, "events", res.Processed)
	return res, nil
}

// claimGeneration picks the generation to build: the one an interrupted rebuild of the same
// version left behind, or a new one. A dry run always uses a new, unrecorded generation.
func claimGeneration(ctx context.Context, db *sqldb.DB, p Projection, st GenState, opts RebuildOptions) (Generation, bool, error) {
	var gen Generation
	var resumed bool
	err := sqldb.InTx(ctx, db, func(tx *sql.Tx) error {
		if err := lockState(ctx, db, tx); err != nil {
			return err
		}
		cur, err := readState(ctx, db, tx, p.Name())
		if err != nil {
			return err
		}
		if !opts.DryRun && cur.BuildingGen != 0 && cur.BuildingVersion == p.Version() {
			gen, resumed = cur.BuildingGen, true
			return nil
		}
		gen = max(cur.ActiveGen, cur.BuildingGen) + 1
		if opts.DryRun {
			return nil
		}
		_, err = tx.ExecContext(ctx, db.Rebind(`UPDATE projection_state SET building_gen = ?, building_version = ?, updated_at = ? WHERE name = ?`),
			gen, p.Version(), opts.Now().UnixNano(), p.Name())
		return err
	})
	if err != nil {
		return 0, false, err
	}
	if !resumed && st.BuildingGen != 0 && !opts.DryRun {
		// A stale build of another version: its tables are of no use.
		if err := dropGeneration(ctx, db, p, st.BuildingGen); err != nil {
			return 0, false, err
		}
	}
	return gen, resumed, nil
}

// catchUp waits until the build runner reaches the log's head as read now, reporting progress.
// Events appended meanwhile are few; after the switch the live runners continue from there.
func catchUp(ctx context.Context, store eventstore.Store, r *Runner, opts RebuildOptions) error {
	start := opts.Now()
	report := func(done bool) {
		if opts.Progress == nil {
			return
		}
		s := r.Status()
		rate := 0.0
		if el := opts.Now().Sub(start).Seconds(); el > 0 {
			rate = float64(s.Processed) / el
		}
		remaining := s.LagEvents
		if done {
			remaining = 0
		}
		opts.Progress(Progress{Projection: s.Name, Generation: r.Build, Position: s.Position, Head: s.Head,
			Processed: s.Processed, Remaining: remaining, EventsPerSec: rate, Done: done})
	}
	head, err := store.Head(ctx)
	if err != nil {
		return err
	}
	reached := make(chan error, 1)
	go func() { reached <- r.WaitFor(ctx, head) }()
	tick := time.NewTicker(opts.ProgressEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-reached:
			if err == nil {
				report(true)
			}
			return err
		case <-tick.C:
			report(false)
		}
	}
}

// switchTo makes gen the active generation and points the views at it, in one transaction.
func switchTo(ctx context.Context, db *sqldb.DB, p Projection, gen Generation, now time.Time) error {
	return sqldb.InTx(ctx, db, func(tx *sql.Tx) error {
		if err := lockState(ctx, db, tx); err != nil {
			return err
		}
		if err := lockGeneration(ctx, db, tx, p.Name()); err != nil {
			return err
		}
		cur, err := readState(ctx, db, tx, p.Name())
		if err != nil {
			return err
		}
		if cur.BuildingGen != gen {
			return errors.New("another rebuild took over this projection")
		}
		if _, err := tx.ExecContext(ctx, db.Rebind(`UPDATE projection_state SET active_gen = ?, active_version = ?,
			building_gen = NULL, building_version = NULL, updated_at = ? WHERE name = ?`), gen, p.Version(), now.UnixNano(), p.Name()); err != nil {
			return err
		}
		return pointViews(ctx, db, tx, p, gen)
	})
}

// analyzeGeneration gathers the planner's statistics of a rebuilt generation's tables on Postgres
// before it serves. Without them the first plans its readers make, and keep in their
// connections' caches until autovacuum analyzes the tables (up to a minute later), take the new
// tables for nearly empty and can read a key through an index that leads with the tenant alone
// (a scan of the tenant's rows per read). A Finalizer has gathered them already, beside its index
// builds.
func analyzeGeneration(ctx context.Context, db *sqldb.DB, p Projection, gen Generation) error {
	if db.Dialect != sqldb.Postgres {
		return nil
	}
	if _, ok := p.(Finalizer); ok {
		return nil
	}
	for _, t := range p.Tables() {
		if _, err := db.ExecContext(ctx, `ANALYZE `+gen.Table(t)); err != nil {
			return err
		}
	}
	return nil
}
