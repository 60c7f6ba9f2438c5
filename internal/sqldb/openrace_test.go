package sqldb

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestOpenSQLiteConcurrentlyOnNewFile: handles opened at once on a file that does not exist yet
// all open. The first connection of each switches the file to WAL, which needs the file's
// exclusive lock; SQLite answers a connection that would deadlock for it SQLITE_BUSY at once,
// without waiting out the busy timeout, so the open retries that.
func TestOpenSQLiteConcurrentlyOnNewFile(t *testing.T) {
	t.Parallel()
	for round := range 30 {
		path := filepath.Join(t.TempDir(), "new.db")
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			wg.Go(func() {
				db, err := OpenSQLite(path)
				if err == nil {
					err = db.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, open %d: %v", round, i, err)
			}
		}
	}
}

// TestOpenSQLiteEscapesPath: a path holding "#", "?" or "%" opens exactly that file, in WAL mode
// with its busy timeout, and not the file its name would be cut short to.
func TestOpenSQLiteEscapesPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"a#1", "a?b=1", "a%23b", "a"} {
		path := filepath.Join(dir, name, "casebook.db")
		db, err := OpenSQLite(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var mode string
		var timeout int
		if err := db.QueryRowContext(t.Context(), `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(t.Context(), `PRAGMA busy_timeout`).Scan(&timeout); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(t.Context(), `CREATE TABLE marker (name TEXT)`); err != nil {
			t.Fatalf("%s: %v (another path's file?)", name, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || timeout != int(openBusyTimeout.Milliseconds()) {
			t.Errorf("%s: journal_mode %q, busy_timeout %d", name, mode, timeout)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: the file is not where it was asked for: %v", name, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			t.Errorf("a file opened outside the asked-for directories: %s", e.Name())
		}
	}
}
