package sqldb

import (
	"context"
	"regexp"
	"slices"

	"github.com/jackc/pgx/v5"
)

// TruncateLogWait bounds how long one TruncateLog attempt, holding the writer lane, waits for
// readers to leave the write-ahead log.
const TruncateLogWait = RestartLogWait

// TruncateLog copies every frame of a SQLite file's write-ahead log into the database file and
// truncates the log to zero bytes (PRAGMA wal_checkpoint(TRUNCATE)), so that no page image written
// before the call is left in the log: what erasures overwrote (zeroed by secure_delete) is then in
// no file. It holds the file's writer lane while it tries (no writer of this process adds frames
// meanwhile), for at most TruncateLogWait; done is false when readers stayed inside the log that
// long (retry later), and when another process writes the file meanwhile. Postgres handles have
// no such log: done is true at once.
func (db *DB) TruncateLog(ctx context.Context) (done bool, err error) {
	if db.Dialect != SQLite {
		return true, nil
	}
	// TRUNCATE answers 0 frames once the log file is cut back to nothing.
	return db.checkpointInLane(ctx, "TRUNCATE", TruncateLogWait, func(f WALFrames) bool { return f.Log == 0 })
}

// generationSuffix is how a projection names a table of one of its generations (base_g<N>).
var generationSuffix = regexp.MustCompile(`^_g[0-9]+$`)

// Vacuum runs VACUUM on every table of the current schema named in bases, or named as a
// generation of one (base_g<N>), one at a time outside any transaction, and returns the names it
// vacuumed. VACUUM makes the space of deleted and overwritten row versions reusable and keeps no
// index entry pointing at them. SQLite handles return nil at once: secure_delete already zeroes
// what a write frees.
func (db *DB) Vacuum(ctx context.Context, bases []string) ([]string, error) {
	if db.Dialect != Postgres {
		return nil, nil
	}
	names, err := db.generationTables(ctx, bases)
	if err != nil {
		return nil, err
	}
	var schema string
	if err := db.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return nil, err
	}
	var done []string
	for _, n := range names {
		if _, err := db.ExecContext(ctx, `VACUUM `+pgx.Identifier{schema, n}.Sanitize()); err != nil {
			return done, err
		}
		done = append(done, n)
	}
	return done, nil
}

// generationTables lists the tables of the current schema named by bases or their generations
// (base_gN).
func (db *DB) generationTables(ctx context.Context, bases []string) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		if slices.ContainsFunc(bases, func(b string) bool {
			return n == b || len(n) > len(b) && n[:len(b)] == b && generationSuffix.MatchString(n[len(b):])
		}) {
			names = append(names, n)
		}
	}
	return names, rows.Err()
}
