package sqldb

import (
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
