package projections

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
)`}, {Version: 2, Postgres: strings.ReplaceAll(batchBeginFuncV2, ";\n", "; \n")},
	{Version: 3, Postgres: strings.ReplaceAll(batchBeginFunc, ";\n", "; \n")}}

// batchBeginFuncV2 locked the checkpoint, lease and generation rows. Row locks give the
// transaction an id at once, and on Postgres every event appended after that id was taken is held
// from every reader until the transaction ends (see eventstore/postgres): under load some batch
// was always open, so the log's visible end lagged by a batch's whole duration. Version 3 fences
// with advisory locks, which take no transaction id.
const batchBeginFuncV2 = `
CREATE OR REPLACE FUNCTION projection_batch_begin(p_name text, p_owner text, p_projection text,
	p_renew_until bigint, p_async boolean, OUT o_owned boolean, OUT o_gen bigint, OUT o_parked text)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	IF p_async THEN
		PERFORM set_config('synchronous_commit', 'off', true);
	END IF;
	PERFORM 1 FROM projection_checkpoints WHERE name = p_name FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO projection_checkpoints (name, commit_pos, prepare_pos, updated_at)
			VALUES (p_name, 0, 0, 0) ON CONFLICT (name) DO NOTHING;
		PERFORM 1 FROM projection_checkpoints WHERE name = p_name FOR UPDATE;
	END IF;
	IF p_renew_until IS NULL THEN
		PERFORM 1 FROM projection_leases WHERE name = p_name AND owner = p_owner FOR SHARE;
	ELSE
		UPDATE projection_leases SET expires_at = p_renew_until WHERE name = p_name AND owner = p_owner;
	END IF;
	o_owned := FOUND;
	IF NOT o_owned THEN
		RETURN;
	END IF;
	IF p_projection <> '' THEN
		SELECT s.active_gen INTO o_gen FROM projection_state s WHERE s.name = p_projection FOR SHARE;
	END IF;
	SELECT json_agg(k.stream)::text INTO o_parked FROM projection_parked k WHERE k.checkpoint = p_name;
END
$$`

// Advisory locks on Postgres have two keys: a class, 734511 for a checkpoint and its lease
// (batches, lease acquires, Retry) or 734512 for a projection's active generation (batches
// shared, switches), and hashtext of the schema and name. Two-key advisory locks never collide
// with one-key ones (lockState, Migrate's).

// checkpointLock is the SQL that takes the transaction-level advisory lock of checkpoint $1.
const checkpointLock = `pg_advisory_xact_lock(734511, hashtext(current_schema() || '.' || $1::text))`

// batchBeginFunc is what a subscriber's batch transaction does on Postgres before applying, in one
// round trip and in this order, each statement with a fresh snapshot (the function is volatile) as
// if sent one by one: take the checkpoint's advisory lock, then check the lease (renewing it when
// p_renew_until is set), then take the projection's generation lock shared and read the active
// generation, then the parked streams (a JSON array, NULL when none). Migrate splits scripts at
// ";\n", hence the replacement above.
//
// The locks are advisory, held until the transaction ends, and assign no transaction id, so unless
// it renews the lease the batch gets an id only at its first output write, shortly before its
// commit: until then the events appended meanwhile stay readable. Fencing stays exact: a lease
// acquire takes the checkpoint lock too (lease.acquire), so a takeover waits for a running batch,
// and a batch that starts after it reads the new owner and commits nothing; a generation switch
// takes the generation lock (switchTo), so it waits for running batches, and later ones read the
// new generation. Each lock is taken before the statement that reads what it guards, whose
// snapshot therefore includes every commit that released the lock.
const batchBeginFunc = `
CREATE OR REPLACE FUNCTION projection_batch_begin(p_name text, p_owner text, p_projection text,
	p_renew_until bigint, p_async boolean, OUT o_owned boolean, OUT o_gen bigint, OUT o_parked text)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	IF p_async THEN
		PERFORM set_config('synchronous_commit', 'off', true);
	END IF;
	PERFORM pg_advisory_xact_lock(734511, hashtext(current_schema() || '.' || p_name));
	IF p_renew_until IS NULL THEN
		PERFORM 1 FROM projection_leases WHERE name = p_name AND owner = p_owner;
	ELSE
		UPDATE projection_leases SET expires_at = p_renew_until WHERE name = p_name AND owner = p_owner;
	END IF;
	o_owned := FOUND;
	IF NOT o_owned THEN
		RETURN;
	END IF;
	IF p_projection <> '' THEN
		PERFORM pg_advisory_xact_lock_shared(734512, hashtext(current_schema() || '.' || p_projection));
		SELECT s.active_gen INTO o_gen FROM projection_state s WHERE s.name = p_projection;
	END IF;
	SELECT json_agg(k.stream)::text INTO o_parked FROM projection_parked k WHERE k.checkpoint = p_name;
END
$$`

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

// saveCheckpointAtCommit moves checkpoint name to p as the last statement of tx, sent with its
// COMMIT on Postgres (sqldb.Tx.ExecAtCommit).
func saveCheckpointAtCommit(ctx context.Context, db *sqldb.DB, tx *sqldb.Tx, name string, p eventstore.Position, now time.Time) error {
	return tx.ExecAtCommit(ctx, db.Rebind(`INSERT INTO projection_checkpoints (name, commit_pos, prepare_pos, updated_at)
		VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET commit_pos = excluded.commit_pos,
		prepare_pos = excluded.prepare_pos, updated_at = excluded.updated_at`), name, p.Commit, p.Prepare, now.UnixNano())
}

// lockCheckpoint serializes the transactions that move a checkpoint or touch its parked streams.
// SQLite transactions are already serialized (BEGIN IMMEDIATE); on Postgres it takes the
// checkpoint's advisory lock, as a batch does, and creates the checkpoint row if needed.
func lockCheckpoint(ctx context.Context, db *sqldb.DB, tx sqldb.Querier, name string) error {
	if db.Dialect != sqldb.Postgres {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT `+checkpointLock, name); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO projection_checkpoints (name, commit_pos, prepare_pos, updated_at)
		VALUES ($1, 0, 0, 0) ON CONFLICT (name) DO NOTHING`, name)
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

// readState reads a projection's generations.
func readState(ctx context.Context, db *sqldb.DB, q querier, name string) (GenState, error) {
	query := `SELECT active_gen, active_version, building_gen, building_version FROM projection_state WHERE name = ?`
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
	return readState(ctx, db, db, name)
}

// lockState serializes generation changes of all projections.
func lockState(ctx context.Context, db *sqldb.DB, tx *sql.Tx) error {
	if db.Dialect != sqldb.Postgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7345110022)`)
	return err
}

// lockGeneration waits for the running batches of projection and keeps new ones from starting
// until tx ends (they take the lock shared in projection_batch_begin): taken before the active
// generation changes.
func lockGeneration(ctx context.Context, db *sqldb.DB, tx *sql.Tx, projection string) error {
	if db.Dialect != sqldb.Postgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(734512, hashtext(current_schema() || '.' || $1::text))`, projection)
	return err
}

// ensureActive returns the projection's generations, creating generation 1 (tables and views) on
// first use.
func ensureActive(ctx context.Context, db *sqldb.DB, p Projection, now time.Time) (GenState, error) {
	st, err := readState(ctx, db, db.DB, p.Name())
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
		if _, err := readState(ctx, db, tx, p.Name()); err == nil {
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
	return readState(ctx, db, db.DB, p.Name())
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
	if n, err := store.CountAfter(ctx, d.Checkpoint); err == nil { // fails where the store does not count
		d.LagEvents = int64(n)
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

// batchStart is what a batch's transaction learns before applying.
type batchStart struct {
	owned  bool       // this replica holds the lease, and keeps it until the transaction ends
	gen    Generation // the active generation (read for live runners only)
	parked map[string]bool
}

// beginBatch locks the checkpoint name against Retry, fences the lease (renewing it to renewUntil
// when that is not zero), reads the active generation of projection (unless "") and the parked
// streams: one statement on Postgres (projection_batch_begin, sent with the BEGIN); on SQLite,
// whose write transactions are already serialized, one query plus the renewal when due. async
// turns off synchronous commit for the transaction on Postgres.
func beginBatch(ctx context.Context, db *sqldb.DB, tx *sqldb.Tx, name, owner, projection string, renewUntil int64, async bool) (batchStart, error) {
	var st batchStart
	var gen sql.NullInt64
	var parked sql.NullString
	if db.Dialect == sqldb.Postgres {
		var renew sql.NullInt64
		if renewUntil != 0 {
			renew = sql.NullInt64{Int64: renewUntil, Valid: true}
		}
		err := tx.QueryRowScan(ctx, `SELECT o_owned, o_gen, o_parked FROM projection_batch_begin($1, $2, $3, $4, $5)`,
			[]any{name, owner, projection, renew, async}, &st.owned, &gen, &parked)
		if err != nil {
			return st, err
		}
	} else {
		if renewUntil != 0 {
			if _, err := tx.ExecContext(ctx, `UPDATE projection_leases SET expires_at = ? WHERE name = ? AND owner = ?`,
				renewUntil, name, owner); err != nil {
				return st, err
			}
		}
		var n int
		err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM projection_leases WHERE name = ? AND owner = ?),
			(SELECT active_gen FROM projection_state WHERE name = ?),
			(SELECT json_group_array(stream) FROM projection_parked WHERE checkpoint = ?)`,
			name, owner, projection, name).Scan(&n, &gen, &parked)
		if err != nil {
			return st, err
		}
		st.owned = n == 1
	}
	if !st.owned {
		return st, nil
	}
	if projection != "" && !gen.Valid {
		return st, fmt.Errorf("projection %s has no generations", projection)
	}
	st.gen = Generation(gen.Int64)
	if parked.Valid && parked.String != "[]" {
		var streams []string
		if err := json.Unmarshal([]byte(parked.String), &streams); err != nil {
			return st, fmt.Errorf("parked streams: %w", err)
		}
		st.parked = make(map[string]bool, len(streams))
		for _, s := range streams {
			st.parked[s] = true
		}
	}
	return st, nil
}
