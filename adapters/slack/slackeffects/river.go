package slackeffects

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/casebook/casebook/internal/sqldb"
)

// Driver returns River's driver for db: riversqlite for the embedded file, riverdatabasesql for
// Postgres. Both work on the *sql.Tx of a projection batch.
func Driver(db *sqldb.DB) riverdriver.Driver[*sql.Tx] {
	if db.Dialect == sqldb.Postgres {
		return riverdatabasesql.New(db.DB)
	}
	return riversqlite.New(db.DB)
}

// MigrateRiver creates or upgrades River's tables.
func MigrateRiver(ctx context.Context, db *sqldb.DB, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := rivermigrate.New(Driver(db), &rivermigrate.Config{Logger: logger})
	if err != nil {
		return err
	}
	if db.Dialect == sqldb.Postgres {
		// Replicas starting together take turns: River's migrator is not safe to run concurrently.
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(7345110023)`); err != nil {
			return err
		}
		defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(7345110023)`) }()
	}
	// Each River migration commits on its own; a process that lost a race with another (SQLite has
	// no advisory lock) finds the version applied when it tries again.
	for attempt := 1; ; attempt++ {
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
		if err == nil || attempt == 5 || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	return nil
}
