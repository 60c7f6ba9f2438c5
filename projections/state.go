package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/casebook/casebook/eventstore"
	"github.com/casebook/casebook/internal/sqldb"
)

var migrations = []sqldb.Migration{{Version: 1, SQL: `
CREATE TABLE IF NOT EXISTS projection_checkpoints (
	name        TEXT   PRIMARY KEY,
	commit_pos  BIGINT NOT NULL,
	prepare_pos BIGINT NOT NULL,
	updated_at  BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS projection_leases (
	name       TEXT   PRIMARY KEY,
	owner      TEXT   NOT NULL,
	expires_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS projection_state (
	name             TEXT   PRIMARY KEY,
	active_gen       BIGINT NOT NULL,
	active_version   BIGINT NOT NULL,
	building_gen     BIGINT,
	building_version BIGINT,
	updated_at       BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS projection_parked (
	checkpoint  TEXT   NOT NULL,
	stream      TEXT   NOT NULL,
	revision    BIGINT NOT NULL,
	event_id    TEXT   NOT NULL,
	error       TEXT   NOT NULL,
	attempts    BIGINT NOT NULL,
	parked_at   BIGINT NOT NULL,
	PRIMARY KEY (checkpoint, stream)
);
CREATE TABLE IF NOT EXISTS effect_intents (
	key        TEXT   PRIMARY KEY,
	projection TEXT   NOT NULL,
	kind       TEXT   NOT NULL,
	tenant_id  TEXT   NOT NULL,
	payload    TEXT   NOT NULL,
	created_at BIGINT NOT NULL
)`}}

// Migrate creates the runtime's tables: checkpoints, leases, generations, parked streams and the
// effect intents that side-effect subscribers emit.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	return sqldb.Migrate(ctx, db, "projections", migrations)
}

// Checkpoint reads a checkpoint (Start when it has none).
func Checkpoint(ctx context.Context, db *sqldb.DB, name string) (eventstore.Position, error) {
	var p eventstore.Position
	err := db.QueryRowContext(ctx, db.Rebind(`SELECT commit_pos, prepare_pos FROM projection_checkpoints WHERE name = ?`), name).
		Scan(&p.Commit, &p.Prepare)
	if errors.Is(err, sql.ErrNoRows) {
		return eventstore.Start, nil
	}
	return p, err
}

func saveCheckpoint(ctx context.Context, db *sqldb.DB, tx sqldb.Querier, name string, p eventstore.Position, now time.Time) error {
	_, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO projection_checkpoints (name, commit_pos, prepare_pos, updated_at)
		VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET commit_pos = excluded.commit_pos,
		prepare_pos = excluded.prepare_pos, updated_at = excluded.updated_at`), name, p.Commit, p.Prepare, now.UnixNano())
	return err
}

// lockCheckpoint serializes the transactions that move a checkpoint or touch its parked streams.
// SQLite transactions are already serialized (BEGIN IMMEDIATE); on Postgres the checkpoint row is
// created if needed and locked.
func lockCheckpoint(ctx context.Context, db *sqldb.DB, tx sqldb.Querier, name string) error {
	if db.Dialect != sqldb.Postgres {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO projection_checkpoints (name, commit_pos, prepare_pos, updated_at)
		VALUES ($1, 0, 0, 0) ON CONFLICT (name) DO NOTHING`, name); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `SELECT 1 FROM projection_checkpoints WHERE name = $1 FOR UPDATE`, name)
	return err
}

// GenState is a projection's row in projection_state.
type GenState struct {
	ActiveGen       Generation `json:"active_generation"`
	ActiveVersion   int        `json:"active_version"`
	BuildingGen     Generation `json:"building_generation,omitempty"`
	BuildingVersion int        `json:"building_version,omitempty"`
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readState reads a projection's generations; share locks the row on Postgres for the rest of tx.
func readState(ctx context.Context, db *sqldb.DB, q querier, name string, share bool) (GenState, error) {
	query := `SELECT active_gen, active_version, building_gen, building_version FROM projection_state WHERE name = ?`
	if share && db.Dialect == sqldb.Postgres {
		query += ` FOR SHARE`
	}
	var st GenState
	var bg, bv sql.NullInt64
	err := q.QueryRowContext(ctx, db.Rebind(query), name).Scan(&st.ActiveGen, &st.ActiveVersion, &bg, &bv)
	if err != nil {
		return GenState{}, err
	}
	st.BuildingGen, st.BuildingVersion = Generation(bg.Int64), int(bv.Int64)
	return st, nil
}

// ReadState returns a projection's generations (domain-free errors: sql.ErrNoRows if unknown).
func ReadState(ctx context.Context, db *sqldb.DB, name string) (GenState, error) {
	return readState(ctx, db, db, name, false)
}

// lockState serializes generation changes of all projections.
func lockState(ctx context.Context, db *sqldb.DB, tx *sql.Tx) error {
	if db.Dialect != sqldb.Postgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7345110022)`)
	return err
}

// ensureActive returns the projection's generations, creating generation 1 (tables and views) on
// first use.
func ensureActive(ctx context.Context, db *sqldb.DB, p Projection, now time.Time) (GenState, error) {
	st, err := readState(ctx, db, db.DB, p.Name(), false)
	if err == nil {
		return st, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return GenState{}, err
	}
	if err := p.Setup(ctx, db, 1); err != nil {
		return GenState{}, err
	}
	if err := finalize(ctx, db, p, 1); err != nil {
		return GenState{}, err
	}
	err = sqldb.InTx(ctx, db, func(tx *sql.Tx) error {
		if err := lockState(ctx, db, tx); err != nil {
			return err
		}
		if _, err := readState(ctx, db, tx, p.Name(), false); err == nil {
			return nil // another process got here first
		}
		if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO projection_state (name, active_gen, active_version, updated_at)
			VALUES (?, 1, ?, ?)`), p.Name(), p.Version(), now.UnixNano()); err != nil {
			return err
		}
		return pointViews(ctx, db, tx, p, 1)
	})
	if err != nil {
		return GenState{}, fmt.Errorf("projection %s: create generation 1: %w", p.Name(), err)
	}
	return readState(ctx, db, db.DB, p.Name(), false)
}

// pointViews makes each base name a view of gen's table.
func pointViews(ctx context.Context, db *sqldb.DB, tx *sql.Tx, p Projection, gen Generation) error {
	for _, t := range p.Tables() {
		if _, err := tx.ExecContext(ctx, `DROP VIEW IF EXISTS `+t); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `CREATE VIEW `+t+` AS SELECT * FROM `+gen.Table(t)); err != nil {
			return err
		}
	}
	return nil
}

// dropGeneration removes a generation's tables and bookkeeping.
func dropGeneration(ctx context.Context, db *sqldb.DB, p Projection, gen Generation) error {
	name := checkpointName(p, gen)
	return sqldb.InTx(ctx, db, func(tx *sql.Tx) error {
		for _, t := range p.Tables() {
			if _, err := tx.ExecContext(ctx, `DROP TABLE IF EXISTS `+gen.Table(t)); err != nil {
				return err
			}
		}
		for _, q := range []string{
			`DELETE FROM projection_checkpoints WHERE name = ?`,
			`DELETE FROM projection_leases WHERE name = ?`,
			`DELETE FROM projection_parked WHERE checkpoint = ?`,
			`DELETE FROM schema_migrations WHERE component = ?`,
		} {
			if _, err := tx.ExecContext(ctx, db.Rebind(q), name); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, db.Rebind(`DELETE FROM schema_migrations WHERE component LIKE ?`), name+"/%"); err != nil {
			return err
		}
		return nil
	})
}

// Description is a projection's state as seen from the database, for operators.
type Description struct {
	Name        string              `json:"name"`
	CodeVersion int                 `json:"code_version"`
	State       GenState            `json:"generations"`
	Checkpoint  eventstore.Position `json:"checkpoint"`
	Head        eventstore.Position `json:"head"`
	LagEvents   int64               `json:"lag_events"`
	Parked      int                 `json:"parked"`
	LeaseOwner  string              `json:"lease_owner,omitempty"`
	// NeedsRebuild is set when the active generation was built by another version of the code.
	NeedsRebuild bool `json:"needs_rebuild"`
}

// Describe reads a projection's generations, checkpoint, lag and parked count.
func Describe(ctx context.Context, db *sqldb.DB, store eventstore.Store, p Projection) (Description, error) {
	d := Description{Name: p.Name(), CodeVersion: p.Version(), LagEvents: -1}
	st, err := ReadState(ctx, db, p.Name())
	if errors.Is(err, sql.ErrNoRows) {
		d.NeedsRebuild = true
		return d, nil
	}
	if err != nil {
		return d, err
	}
	d.State, d.NeedsRebuild = st, st.ActiveVersion != p.Version()
	name := checkpointName(p, st.ActiveGen)
	if d.Checkpoint, err = Checkpoint(ctx, db, name); err != nil {
		return d, err
	}
	if d.Head, err = store.Head(ctx); err != nil {
		return d, err
	}
	if c, ok := store.(eventstore.Counter); ok {
		if n, err := c.CountAfter(ctx, d.Checkpoint); err == nil {
			d.LagEvents = int64(n)
		}
	}
	if d.Parked, err = countParked(ctx, db, name); err != nil {
		return d, err
	}
	var exp int64
	err = db.QueryRowContext(ctx, db.Rebind(`SELECT owner, expires_at FROM projection_leases WHERE name = ?`), name).Scan(&d.LeaseOwner, &exp)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return d, err
	}
	return d, nil
}
