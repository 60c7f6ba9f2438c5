package sqldb_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/casebook/casebook/internal/sqldb"
)

// TestFailedCommitLeavesNoOpenTransaction: a COMMIT that SQLite refuses (here a deferred foreign
// key; SQLITE_FULL is another case, which TestDiskFullRefusesAndRecovers in package app meets on a
// full disk) is rolled back: its connection goes back to the pool with no transaction open, and
// the writer lane is free, so every later transaction begins, commits and sees only committed
// rows. The timeout turns a wedged lane into a failure rather than a hang.
func TestFailedCommitLeavesNoOpenTransaction(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	db, err := sqldb.OpenSQLite(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.ExecContext(ctx, `CREATE TABLE parent (id INTEGER PRIMARY KEY);
		CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	err = sqldb.InTx(ctx, db, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO child (id, parent) VALUES (1, 42)`)
		return err
	})
	if err == nil {
		t.Fatal("a commit that breaks a deferred foreign key succeeded")
	}
	for i := range 10 {
		if err := sqldb.InTx(ctx, db, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO parent (id) VALUES (?)`, 100+i)
			return err
		}); err != nil {
			t.Fatalf("transaction %d after the failed commit: %v", i, err)
		}
	}
	var children, parents int
	if err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM child), (SELECT count(*) FROM parent)`).Scan(&children, &parents); err != nil {
		t.Fatal(err)
	}
	if children != 0 || parents != 10 {
		t.Fatalf("children %d, parents %d; want 0 and 10", children, parents)
	}
}
