package sqldb

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/casebook/casebook/internal/pgtest"
)

// filesHolding names the files of dir that contain s.
func filesHolding(t *testing.T, dir, s string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(s)) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestTruncateLogLeavesNoOverwrittenBytes: a secret updated away (a small row rewritten in place)
// and one deleted (a long row whose overflow pages go to the free list) are still in the
// write-ahead log after a PASSIVE checkpoint, as the tester found; after TruncateLog the log is
// empty and no file of the directory (database, -wal, -shm) holds either, while the handle stays
// open: secure_delete zeroed the freed cells and free pages, on the durable and the replayable
// handle alike. A reader inside the log makes an attempt give up (done false), not wait.
func TestTruncateLogLeavesNoOverwrittenBytes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	db, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	proj, err := OpenSQLiteReplayable(path)
	if err != nil {
		t.Fatal(err)
	}
	defer proj.Close()
	for _, h := range []*DB{db, proj} {
		var on int
		if err := h.QueryRowContext(ctx, `PRAGMA secure_delete`).Scan(&on); err != nil || on != 1 {
			t.Fatalf("secure_delete = %d %v on a handle (replayable %t)", on, err, h.replayable)
		}
	}
	const small, long = "Secret-Heliotrope-4471", "Secret-Vermilion-8802"
	if _, err := db.ExecContext(ctx, `CREATE TABLE p (id INTEGER PRIMARY KEY, v TEXT)`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		h    *DB
		sql  string
		args []any
	}{
		{db, `INSERT INTO p (id, v) VALUES (1, ?)`, []any{small}},
		{proj, `INSERT INTO p (id, v) VALUES (2, ?)`, []any{strings.Repeat("x", 20000) + long}},
		{proj, `UPDATE p SET v = '[erased]' WHERE id = 1`, nil},
		{db, `DELETE FROM p WHERE id = 2`, nil},
	} {
		if err := InTx(ctx, q.h, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, q.sql, q.args...)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if got := filesHolding(t, dir, small); !slices.Contains(got, "s.db-wal") {
		t.Fatalf("after a PASSIVE checkpoint %q is in %v; the test no longer shows what TruncateLog removes", small, got)
	}

	reader, err := proj.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRowContext(ctx, `SELECT count(*) FROM p`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO p (id, v) VALUES (3, 'after the reader began')`); err != nil {
		t.Fatal(err)
	}
	if done, err := db.TruncateLog(ctx); err != nil || done {
		t.Fatalf("TruncateLog with a reader inside the log = %t %v, want false", done, err)
	}
	if err := reader.Rollback(); err != nil {
		t.Fatal(err)
	}
	if done, err := db.TruncateLog(ctx); err != nil || !done {
		t.Fatalf("TruncateLog = %t %v", done, err)
	}
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() != 0 {
		t.Fatalf("the log after TruncateLog: %v %v, want an empty file", fi, err)
	}
	for _, s := range []string{small, long} {
		if got := filesHolding(t, dir, s); len(got) > 0 {
			t.Errorf("%q is still in %v", s, got)
		}
	}
	var freed int
	if err := db.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&freed); err != nil || freed == 0 {
		t.Fatalf("free pages = %d %v: the long row's overflow pages should be on the free list", freed, err)
	}
}

// TestVacuumTablesAndGenerations: Vacuum runs VACUUM on the named tables and their generations
// (base_g<N>) in the current schema, and on no other table; pg_stat_user_tables counts each.
func TestVacuumTablesAndGenerations(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := t.Context()
	db, err := OpenPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tb := range []string{"keys", "qm_g1", "qm_g2", "qm_other", "unrelated"} {
		if _, err := db.ExecContext(ctx, `CREATE TABLE `+tb+` (v TEXT)`); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.Vacuum(ctx, []string{"keys", "qm"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"keys", "qm_g1", "qm_g2"}; !slices.Equal(got, want) {
		t.Fatalf("vacuumed %v, want %v", got, want)
	}
	counts := map[string]int{}
	rows, err := db.QueryContext(context.WithoutCancel(ctx), `SELECT relname, vacuum_count FROM pg_stat_user_tables WHERE schemaname = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		var c int
		if err := rows.Scan(&n, &c); err != nil {
			t.Fatal(err)
		}
		counts[n] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if counts["keys"] != 1 || counts["qm_g2"] != 1 || counts["qm_other"] != 0 || counts["unrelated"] != 0 {
		t.Fatalf("vacuum counts = %v", counts)
	}
}
