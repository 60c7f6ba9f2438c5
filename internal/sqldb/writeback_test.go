package sqldb

import (
	"database/sql"
	"errors"
	"path/filepath"
	"runtime"
	"testing"
)

// TestReplayableCommitsStartTheLogsWriteback: each commit of a replayable handle starts the
// write-ahead log's writeback once the writer gate is free again; durable commits (which sync) and
// rolled-back transactions start none.
func TestReplayableCommitsStartTheLogsWriteback(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sync_file_range is Linux's")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "casebook.db")
	durable, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer durable.Close()
	replay, err := OpenSQLiteReplayable(path)
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	if _, err := durable.ExecContext(t.Context(), `CREATE TABLE t (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	heldAtStart := []bool{}
	replay.writeback.started = func() {
		g := replay.writers
		g.mu.Lock()
		heldAtStart = append(heldAtStart, g.held)
		g.mu.Unlock()
	}
	insert := func(db *DB, fail bool) error {
		return InTx(t.Context(), db, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(t.Context(), `INSERT INTO t VALUES (1)`); err != nil {
				return err
			}
			if fail {
				return errors.New("refused")
			}
			return nil
		})
	}
	for _, db := range []*DB{replay, replay, durable} {
		if err := insert(db, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := insert(replay, true); err == nil {
		t.Fatal("a failing transaction committed")
	}
	if got := replay.GateStats().Writebacks; got != 2 {
		t.Errorf("replayable handle: %d writebacks started, want 2 (one per commit)", got)
	}
	if got := durable.GateStats().Writebacks; got != 0 {
		t.Errorf("durable handle: %d writebacks started, want 0", got)
	}
	if len(heldAtStart) != 2 || heldAtStart[0] || heldAtStart[1] {
		t.Errorf("writer gate held as the writebacks started: %v, want [false false]", heldAtStart)
	}
}
