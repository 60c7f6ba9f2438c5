package sqldb

import (
	"database/sql"
	"path/filepath"
	"testing"
)

// TestCommitsDoNotCheckpoint: no commit copies the write-ahead log back into the database file
// (wal_autocheckpoint is off: that copy and its fsync would run inside the committing writer's turn
// of the writer gate); a PASSIVE checkpoint, as the handle's background loop runs, copies all of it.
func TestCommitsDoNotCheckpoint(t *testing.T) {
	t.Parallel()
	db, err := OpenSQLite(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.checkpoints.close() // the test checkpoints by hand
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)`); err != nil {
		t.Fatal(err)
	}
	// 1,200 pages and more, each in its own commit: SQLite's default would checkpoint at 1,000.
	for i := range 1200 {
		if err := InTx(ctx, db, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO t (id, v) VALUES (?, zeroblob(4000))`, i)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	var log int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&log); err != nil || log != 1200 {
		t.Fatalf("rows = %d, %v", log, err)
	}
	f, err := db.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f.Log < 1200 {
		t.Fatalf("the log holds %d frames after 1,200 commits of a page each: a commit checkpointed", f.Log)
	}
	if f.Checkpointed != f.Log {
		t.Fatalf("checkpointed %d of %d frames", f.Checkpointed, f.Log)
	}
}
